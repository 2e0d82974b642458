"""The engine's seams (issue 15): the gate order, a gate added through the public API,
one call identity computed once, denials saved before the identities were unified,
and the evidence lookup after a checkpoint restore."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from amos.engine import Decision, Gate, RunOptions, open_host

from .support import collect, finished, write_script


def _options(script: Path, workspace: Path, **kwargs) -> RunOptions:
    return RunOptions(model=f"scripted:{script}", workspace=workspace, cwd=workspace, **kwargs)


class CallCounter(Gate):
    """The trivial gate of docs/architecture.md "Add a gate": count what it sees."""

    name = "counter"

    def __init__(self) -> None:
        self.admitted: list[str] = []
        self.rounds = 0

    async def admit(self, run, call, round):
        self.admitted.append(call.call_id)
        return None

    async def round_finished(self, run) -> None:
        self.rounds += 1


class Outcomes(Gate):
    """Records each outcome a gate is shown."""

    name = "outcomes"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def observed(self, run, call, outcome) -> None:
        self.seen.append((call.call_id, outcome.status))


class Refuser(Gate):
    """Refuses every call whose tool is ``run_command`` (a capability's own rule)."""

    name = "refuser"

    async def admit(self, run, call, round):
        if call.tool_name == "run_command":
            return Decision.refuse("denied", "denied: this gate refuses commands")
        return None


def test_a_gate_added_through_the_public_api_sees_every_call_and_outcome(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}},
                        {"id": "c1", "name": "run_command", "arguments": {"command": "echo hi"}}]},
        {"tool_calls": [{"id": "r2", "name": "list_dir", "arguments": {}}]},
        {"text": "done"}])
    counter, outcomes = CallCounter(), Outcomes()
    host, _ = open_host(_options(script, tmp_path, yes=True, no_save=True),
                        extra_gates=[counter, outcomes, Refuser()])
    try:
        done = finished(collect(host, "go"))
    finally:
        host.close()
    assert done.receipt.verdict == "ANSWERED"
    assert counter.admitted == ["r1", "c1", "r2"] and counter.rounds == 2
    assert outcomes.seen == [("r1", "succeeded"), ("c1", "denied"), ("r2", "succeeded")]
    assert [(r["call_id"], r["status"]) for r in done.tool_calls] == [("r1", "succeeded"), ("c1", "denied"),
                                                                       ("r2", "succeeded")]
    assert not (tmp_path / "hi").exists()


def test_gates_see_a_call_in_the_documented_order(tmp_path, monkeypatch):
    """permission → doom loop → loop-policy admission → extra gates; a denied call stops at
    the permission gate (the doom loop never scores it), a refused one goes no further."""
    from amos.engine.doom import DoomGate
    from amos.engine.permissions import PermissionGate
    from amos.engine.policy_gate import PolicyGate

    seen: list[tuple[str, str]] = []
    for cls in (PermissionGate, DoomGate, PolicyGate):
        original = cls.admit

        async def spy(self, run, call, round, _original=original):
            seen.append((self.name, call.call_id))
            return await _original(self, run, call, round)

        monkeypatch.setattr(cls, "admit", spy)

    class Last(Gate):
        name = "extra"

        async def admit(self, run, call, round):
            seen.append((self.name, call.call_id))
            return None

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"loop_policy": {}, "doom_loop": True,
                               "tools": {"permissions": {"run_command": "deny"}}}))
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "r1", "name": "list_dir", "arguments": {}},
                        {"id": "c1", "name": "run_command", "arguments": {"command": "true"}},
                        {"id": "r2", "name": "list_dir", "arguments": {}}]},
        {"text": "done"}])
    host, _ = open_host(_options(script, tmp_path, config_path=cfg, no_save=True), extra_gates=[Last()])
    try:
        done = finished(collect(host, "go"))
    finally:
        host.close()
    assert seen == [("permissions", "r1"), ("doom_loop", "r1"), ("loop_policy", "r1"), ("extra", "r1"),
                    ("permissions", "c1"),
                    ("permissions", "r2"), ("doom_loop", "r2"), ("loop_policy", "r2")]
    # r2 is identical to r1 in the same response: the loop policy answers it and the extra gate never sees it
    assert [(r["call_id"], r["status"]) for r in done.tool_calls] == [
        ("r1", "succeeded"), ("c1", "denied"), ("r2", "blocked")]


def test_each_call_gets_its_identity_computed_once(tmp_path, monkeypatch):
    """Approvals (a denial remembered), admission and the doom loop share one planned call."""
    import amos.engine.calls as calls_module
    import amos.policy.canonical as canonical

    counted: list[str] = []
    real = canonical.call_identity

    def counting(tool_name, arguments):
        counted.append(tool_name)
        return real(tool_name, arguments)

    monkeypatch.setattr(calls_module, "call_identity", counting)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"loop_policy": {}, "doom_loop": True}))
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}},
                        {"id": "l1", "name": "list_dir", "arguments": {}}]},
        {"text": "done"}])
    host, _ = open_host(_options(script, tmp_path, config_path=cfg, yes=True, no_save=True))
    try:
        done = finished(collect(host, "go"))
    finally:
        host.close()
    assert done.receipt.verdict == "ANSWERED"
    assert sorted(counted) == ["list_dir", "write_file"]


def test_a_large_write_is_admitted_by_the_loop_policy(tmp_path):
    """Issue 17, item 14: 70 KB of arguments have an identity (streamed SHA-256), not a stop."""
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"loop_policy": {}}))
    body = "x" * 70_000
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "big.txt", "content": body}}]},
        {"text": "written"}])
    host, _ = open_host(_options(script, tmp_path, config_path=cfg, yes=True, no_save=True))
    try:
        done = finished(collect(host, "write it"))
    finally:
        host.close()
    assert done.receipt.verdict == "ANSWERED" and done.receipt.reason == "answer_returned"
    assert (tmp_path / "big.txt").read_text() == body


def _legacy_fingerprint(tool: str, arguments: dict) -> str:
    body = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{tool}\n{body}".encode()).hexdigest()


def test_a_pause_saved_with_legacy_denial_fingerprints_still_denies_the_same_call(tmp_path, amos_home):
    """Sessions saved before the identities were unified keep their recorded denials."""
    ws = tmp_path / "ws"
    ws.mkdir()
    args = {"path": "notes.txt", "content": "x"}
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": args}]},
        {"tool_calls": [{"id": "w2", "name": "write_file", "arguments": args}]},
        {"text": "ok"}])
    host, _ = open_host(_options(script, ws))
    try:
        first = finished(collect(host, "write notes"))
        assert first.receipt.verdict in ("WAITING", "WAITING_UNROUTED")
        session_id, path = host.session_id, host.session_path
    finally:
        host.close()
    # Deny w1 the way an older amos recorded it: the pause's record, keyed by the legacy fingerprint.
    data = json.loads(path.read_text())
    data["pending"]["execution"]["denied"] = {_legacy_fingerprint("write_file", args): "denied by the user: no"}
    data["pending"]["held"][0]["decision"] = "deny"
    data["pending"]["held"][0]["reason"] = "no"
    path.write_text(json.dumps(data))
    (path.parent / "journal.jsonl").unlink()  # the edited snapshot is the whole truth
    host, _ = open_host(_options(script, ws, session=session_id))
    try:
        done = finished(collect(host))
        results = {p.call_id: p for m in host.session.messages for p in m.tool_results}
    finally:
        host.close()
    assert results["w2"].status == "denied" and "denied again without asking" in results["w2"].content
    assert done.receipt.verdict == "ANSWERED" and not (ws / "notes.txt").exists()


def test_after_a_restore_evidence_is_checked_against_the_restored_session(tmp_path, amos_home):
    """The evidence lookup follows the session a restore brought back (it kept the old one)."""
    from amos.evidence import EvidenceError, EvidenceRecord, FileEvidenceStore

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.txt").write_text("".join(f"line {i:05d} unique-token-{i}\n" for i in range(400)))
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"evidence": {"enabled": True, "project_threshold_bytes": 100}}))
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "big.txt"}}]},
        {"text": "read it"}])
    host, _ = open_host(_options(script, ws, config_path=cfg))
    try:
        collect(host, "go")
        part = next(p for m in host.session.messages for p in m.tool_results)
        checkpoint = host.list_checkpoints()[-1].number
        # The host re-attaches another record of the same call; the session now references that one.
        store: FileEvidenceStore = host.evidence.store
        other = store.put(EvidenceRecord(execution_id="again", call_id="r1", tool="read_file", effect="read",
                                         status="succeeded", result="another copy"))
        host.acknowledge_tool_evidence("r1", other)
        # The first record is rewritten consistently in file and index, so only the session can tell.
        record_file = next(store.root.rglob(f"{part.evidence_id}.json"))
        data = record_file.read_bytes().replace(b"unique-token-7", b"TAMPERED-tok-7")
        record_file.chmod(0o600)
        record_file.write_bytes(data)
        index = store.root / "index.jsonl"
        index.write_text(index.read_text().replace(part.evidence["sha256"], hashlib.sha256(data).hexdigest()))
        host.restore_checkpoint(checkpoint)  # back to the session that references the first record
        with pytest.raises(EvidenceError) as info:
            host.evidence_chunk(part.evidence_id)
        assert info.value.code == "corrupt"
    finally:
        host.close()


def test_cancel_keeps_a_gate_added_through_the_api_consistent(tmp_path):
    """A cancelled run still shows every gate an outcome for each call it admitted."""
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "s1", "name": "run_command", "arguments": {"command": "sleep 5"}}]},
        {"text": "never"}])
    outcomes = Outcomes()
    host, _ = open_host(_options(script, tmp_path, yes=True, no_save=True), extra_gates=[outcomes])

    async def go():
        out = []
        async for event in host.run("x"):
            out.append(event)
            if getattr(event, "event_kind", "") == "tool_call_started":
                asyncio.get_running_loop().call_later(0.2, host.cancel)
        return out

    try:
        done = finished(asyncio.run(asyncio.wait_for(go(), 20)))
    finally:
        host.close()
    assert done.receipt.cause == "user_abort" and outcomes.seen == [("s1", "cancelled")]
