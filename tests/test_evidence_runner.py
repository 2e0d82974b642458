"""Durable evidence through the real runner and CLI (issue 6 "What it must show")."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from amos.errors import ConfigError
from amos.evidence import EvidenceError, EvidenceRecord, FileEvidenceStore, resolve_scope
from amos.evidence.tools import evidence_tools
from amos.messages import ToolCallPart
from amos.slash.commands import execute_line
from amos.tools.base import ToolContext
from amos.tools.manager import ToolManager

from .support import cli, cli_json, collect, finished, make_runner, write_script

SECRET = "sk-proj-EVIDENCE-SECRET-77aa99bbcc"


def config(tmp_path: Path, **evidence: object) -> Path:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"evidence": {"enabled": True, **evidence}}))
    return path


def big_file(folder: Path, name: str = "big.txt", lines: int = 8000) -> Path:
    path = folder / name
    path.write_text("".join(f"line {i:05d} of the large file, unique-token-{i}\n" for i in range(lines)))
    return path


def read_turns(path: str = "big.txt") -> list[dict]:
    return [{"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": path}}]},
            {"expect": {"last_tool_result_contains": "projected result"}, "text": "read it"}]


def test_large_read_is_projected_and_readable_from_another_process(tmp_path, amos_home):
    ws = tmp_path / "ws"
    ws.mkdir()
    assert big_file(ws).stat().st_size > 160_000
    script = write_script(tmp_path, read_turns())
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(config(tmp_path)),
                         "read the big file")
    assert code == 0, doc
    evidence_id = doc["tool_calls"][0]["evidence_id"]
    assert evidence_id
    session = json.loads(next(amos_home.rglob("session.json")).read_text())
    result = [p for m in session["messages"] for p in m["parts"] if p["part_kind"] == "tool_result"][0]
    assert result["projected"] and evidence_id in result["content"]
    assert "unique-token-7000" not in json.dumps(session["messages"])  # the raw text never reached the model
    # a separate process reads the exact stored result back
    done = subprocess.run([sys.executable, "-m", "amos.cli", "evidence", "read", evidence_id, "--config",
                           str(tmp_path / "cfg.json")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["call_id"] == "r1" and record["tool"] == "read_file"
    assert "unique-token-7999" in record["result"] and "unique-token-0" in record["result"]
    assert record["scope"]["namespace"] == "default"


def test_tampered_record_fails_with_no_content(tmp_path, amos_home):
    ws = tmp_path / "ws"
    ws.mkdir()
    big_file(ws)
    script = write_script(tmp_path, read_turns())
    cfg = config(tmp_path)
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    evidence_id = doc["tool_calls"][0]["evidence_id"]
    record_file = next(amos_home.rglob(f"{evidence_id}.json"))
    data = bytearray(record_file.read_bytes())
    data[data.index(b"unique-token-42")] ^= 0x01  # change one character
    record_file.chmod(0o600)
    record_file.write_bytes(bytes(data))
    result = cli("evidence", "read", evidence_id, "--config", str(cfg))
    assert result.exit_code != 0 and result.stdout.strip() == ""
    assert "SHA-256" in result.stderr


def test_provider_key_value_appears_nowhere(tmp_path, amos_home, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)  # not the active provider: still masked
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "leak.txt").write_text(f"config: api={SECRET}\n" * 3000)
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "leak.txt"}},
                        {"id": "c1", "name": "run_command", "arguments": {"command": "head -3 leak.txt"}}]},
        {"text": "done"}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--config", str(config(tmp_path)),
                 "--yes", "--json", "--verbose", "read")
    assert result.exit_code == 0, result.stdout
    assert SECRET not in result.stdout and SECRET not in (result.stderr or "")
    for path in amos_home.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_storage_failure_keeps_raw_result_protected_and_host_acknowledges(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    (ws / "b.txt").write_text("beta\n")
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "ra", "name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"tool_calls": [{"id": "rb", "name": "read_file", "arguments": {"path": "b.txt"}}]},
        {"text": "done"}])
    runner, _ = make_runner(script, ws, config_path=config(tmp_path, max_records=1))
    try:
        events = collect(runner, "read both")
        assert finished(events).receipt.verdict == "ANSWERED"  # storage failure is not tool failure
        results = {p.call_id: p for m in runner.session.messages for p in m.tool_results}
        assert results["ra"].evidence_id and not results["ra"].protected
        assert results["rb"].protected and "capacity" in results["rb"].evidence_error
        assert "beta" in results["rb"].content  # the raw result is kept
        assert any("not stored" in getattr(e, "text", "") for e in events)
        # the host repairs storage and stores the retained result, without running the tool again
        store = runner.evidence.store
        repaired = FileEvidenceStore(store.directory, store.scope, max_records=10)
        ref = repaired.put(EvidenceRecord(execution_id="recovered", call_id="rb", tool="read_file",
                                          effect="read", status="succeeded", result=results["rb"].content))
        runner.evidence.store = repaired
        runner.acknowledge_tool_evidence("rb", ref)
        after = {p.call_id: p for m in runner.session.messages for p in m.tool_results}["rb"]
        assert not after.protected and after.evidence_id == ref.id and after.content == results["rb"].content
        with pytest.raises(EvidenceError):
            runner.acknowledge_tool_evidence("ra", ref)  # a record of another call is refused
    finally:
        runner.close()


def test_session_refuses_another_scope(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"text": "hi"}], on_exhausted="repeat_last")
    runner, _ = make_runner(script, ws, config_path=config(tmp_path))
    try:
        collect(runner, "hello")
        session_id = runner.session_id
        before = runner.session_path.read_bytes()
    finally:
        runner.close()
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"evidence": {"enabled": True, "scope": {"namespace": "elsewhere"}}}))
    with pytest.raises(ConfigError, match="keeps its evidence in scope"):
        make_runner(script, ws, config_path=other, session=session_id)
    from amos.host import RunOptions, load_host_config, open_store

    cfg, _ = load_host_config(RunOptions(config_path=other))
    assert open_store(cfg).path(session_id).read_bytes() == before


def test_context_evidence_slash_commands(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    big_file(ws, lines=500)
    script = write_script(tmp_path, read_turns(), )
    runner, _ = make_runner(script, ws, config_path=config(tmp_path, project_threshold_bytes=100))
    try:
        collect(runner, "go")
        listing = execute_line(runner, "/context evidence list")
        assert listing.ok and "read_file" in listing.text
        evidence_id = listing.result["entries"][0]["id"]
        chunk = execute_line(runner, f"/context evidence read {evidence_id}")
        assert chunk.ok and chunk.text.startswith('{"version":1') and "more:" in chunk.text
        missing = execute_line(runner, "/context evidence read 01a00000-0000-7000-8000-000000000000")
        assert not missing.ok
    finally:
        runner.close()
    plain, _ = make_runner(script, ws)
    try:
        assert not execute_line(plain, "/context evidence").ok
    finally:
        plain.close()


def test_model_evidence_tools_rebuild_the_exact_record(tmp_path):
    store = FileEvidenceStore(tmp_path / "ev", resolve_scope(None, owner_id="tester"))
    text = "naïve 😀 " * 5000
    ref = store.put(EvidenceRecord(execution_id="e", call_id="c", tool="read_file", effect="read",
                                   status="succeeded", result=text))
    manager = ToolManager(evidence_tools(store), permissions={},
                          context=ToolContext(workspace=tmp_path, command_timeout_s=10, max_output_bytes=10**7))

    async def read_all() -> str:
        out, offset, n = [], 0, 0
        while offset is not None:
            call = ToolCallPart(call_id=f"k{n}", tool_name="evidence_read",
                                arguments={"id": ref.id, "offset": offset, "limit": 7000})
            outcome = await manager.execute(call, "x")
            assert outcome.status == "succeeded", outcome.error
            out.append(outcome.result["text"])
            offset, n = outcome.result["next_offset"], n + 1
        listing = await manager.execute(ToolCallPart(call_id="l", tool_name="evidence_list", arguments={}), "x")
        assert listing.result["entries"][0]["id"] == ref.id and "result" not in listing.result["entries"][0]
        return "".join(out)

    assert asyncio.run(read_all()).encode("utf-8") == store.read_bytes(ref)
    both = asyncio.run(manager.execute(ToolCallPart(call_id="b", tool_name="evidence_read",
                                                    arguments={"id": ref.id, "reference": {}}), "x"))
    assert both.status == "failed" and "exactly one" in both.error


def _one_record(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    big_file(ws, lines=400)
    script = write_script(tmp_path, read_turns())
    runner, _ = make_runner(script, ws, config_path=config(tmp_path, project_threshold_bytes=100))
    collect(runner, "go")
    part = next(p for m in runner.session.messages for p in m.tool_results)
    return runner, part


def test_rewriting_record_and_index_is_still_detected_in_the_session(tmp_path):
    import hashlib

    runner, part = _one_record(tmp_path)
    try:
        store = runner.evidence.store
        record_file = next(store.root.rglob(f"{part.evidence_id}.json"))
        data = record_file.read_bytes().replace(b"unique-token-7", b"TAMPERED-tok-7")
        record_file.chmod(0o600)
        record_file.write_bytes(data)
        index = store.root / "index.jsonl"
        text = index.read_text().replace(part.evidence["sha256"], hashlib.sha256(data).hexdigest())
        index.write_text(text)
        with pytest.raises(EvidenceError) as info:
            runner.evidence_chunk(part.evidence_id)
        assert info.value.code == "corrupt"
        reply = execute_line(runner, f"/context evidence read {part.evidence_id}")
        assert not reply.ok and "TAMPERED" not in (reply.text or "")
    finally:
        runner.close()


def test_fifo_in_place_of_a_record_fails_fast(tmp_path):
    import os

    runner, part = _one_record(tmp_path)
    try:
        store = runner.evidence.store
        record_file = next(store.root.rglob(f"{part.evidence_id}.json"))
        record_file.unlink()
        os.mkfifo(record_file)
        with pytest.raises(EvidenceError) as info:
            store.read_bytes(store.get_reference(part.evidence_id))
        assert info.value.code == "corrupt"
    finally:
        runner.close()


def test_damaged_index_field_is_corrupt_not_a_traceback(tmp_path, amos_home):
    runner, part = _one_record(tmp_path)
    runner.close()
    index = next(amos_home.rglob("index.jsonl"))
    lines = index.read_text().splitlines()
    lines[-1] = lines[-1].replace(f'"size":{part.evidence["size"]}', '"size":"abc"')
    index.write_text("\n".join(lines) + "\n")
    result = cli("evidence", "read", part.evidence_id, "--config", str(tmp_path / "cfg.json"))
    assert result.exit_code != 0 and result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in (result.stderr or "") and "unreadable entry" in result.stderr
    rebuilt = cli("evidence", "rebuild", "--config", str(tmp_path / "cfg.json"))
    assert rebuilt.exit_code == 0 and "indexed 1" in rebuilt.stdout


def test_lone_surrogates_and_keys_in_call_arguments_never_break_or_reach_the_session(tmp_path, amos_home,
                                                                                    monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "bad\udcffname.txt"}},
                        {"name": "write_file", "arguments": {"path": "out.txt", "content": f"copy {SECRET}"}}]},
        {"text": "done"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(config(tmp_path)),
                         "--yes", f"remember {SECRET}")
    assert code == 0 and doc["session_path"], doc
    for path in amos_home.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_prune_rejects_infinite_days(tmp_path):
    result = cli("evidence", "prune", "--older-than", "inf", "--config", str(config(tmp_path)))
    assert result.exit_code == 2 and "finite" in result.stderr


def test_protected_result_that_cannot_fit_stops_the_run_explicitly(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    big_file(ws, lines=3000)
    (ws / "small.txt").write_text("x\n")
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "s", "name": "read_file", "arguments": {"path": "small.txt"}}]},
        {"tool_calls": [{"id": "b", "name": "read_file", "arguments": {"path": "big.txt"}}]},
        {"text": "done"}])
    cfg = tmp_path / "win.json"
    cfg.write_text(json.dumps({"evidence": {"enabled": True, "max_records": 1}, "context": {"window_tokens": 8000}}))
    runner, _ = make_runner(script, ws, config_path=cfg)
    try:
        done = finished(collect(runner, "go"))
        assert (done.receipt.cause, done.receipt.reason) == ("provider_error", "context_length")
        assert "will not drop" in done.receipt.detail and "b" in done.receipt.detail
        kept = {p.call_id: p for m in runner.session.messages for p in m.tool_results}["b"]
        assert kept.protected and "unique-token-0" in kept.content
        assert done.receipt.steps == done.receipt.usage.model_calls == 2
    finally:
        runner.close()


def test_call_with_lone_surrogates_fails_instead_of_acting_on_another_path(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "bad\udcffname", "content": "x"}}]},
        {"text": "done"}])
    runner, _ = make_runner(script, ws, yes=True)
    try:
        done = finished(collect(runner, "go"))
    finally:
        runner.close()
    assert done.tool_calls[0]["status"] == "failed"
    assert not any(ws.iterdir())  # nothing was written under a substituted name


def test_context_evidence_follows_the_spec_forms(tmp_path):
    runner, part = _one_record(tmp_path)
    try:
        first = execute_line(runner, "/context evidence list --after 00000000-0000-7000-8000-000000000000")
        assert first.ok and part.evidence_id in first.text
        assert execute_line(runner, "/context evidence --after 00000000-0000-7000-8000-000000000000").ok
        chunk = execute_line(runner, f"/context evidence read {part.evidence_id} 10 25")
        assert chunk.ok and len(chunk.result["text"]) == 25 and chunk.result["offset"] == 10
        from amos.errors import SlashCommandError

        with pytest.raises(SlashCommandError):
            execute_line(runner, f"/context evidence read {part.evidence_id} -3")
    finally:
        runner.close()


def test_evidence_cli_json_errors_are_one_object(tmp_path):
    cfg = config(tmp_path)
    result = cli("evidence", "list", "--after", "bogus", "--json", "--config", str(cfg))
    doc = json.loads(result.stdout)
    assert result.exit_code == 2 and doc["ok"] is False and doc["error"]["code"] == "EVIDENCE_INVALID"
