"""Sessions that never lose work (issue 7 "What it must show"): checkpoints, restore,
export of every run, crash leftovers, corruption and repair, write errors, locks,
versioning, the journal's edge cases and the ``/session`` commands.

The fork/SIGKILL crash-safety test lives in ``test_session_crash.py``.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from amos.errors import SessionError
from amos.events import Notice, ToolCallStarted
from amos.journal import Journal, read_journal
from amos.messages import Message
from amos.paths import sessions_dir
from amos.sessions import SESSION_VERSION, SessionStore

from .support import amos_process, cli, cli_json, collect, finished, make_runner, write_script

PROMPTS = ["p1 run the echo", "p2 go on", "p3 finish"]
ANSWERS = ["answer one", "answer two", "answer three", "answer four"]


def _store() -> SessionStore:
    """The store the CLI uses under this test's AMOS_HOME (its config may choose PostgreSQL)."""
    from amos.host import RunOptions, load_host_config, open_store

    return open_store(load_host_config(RunOptions())[0])


@pytest.fixture(params=["files", "postgres"])
def backend(request) -> str:
    """Run the test on the file store and again on PostgreSQL (issue 22)."""
    if request.param == "postgres":
        request.getfixturevalue("pg_home")
    return request.param


def _three_runs(tmp_path: Path) -> tuple[str, Path, list[dict]]:
    """Three runs in one session through the real CLI; returns (id, script, run docs)."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    script = write_script(tmp_path, [
        {"text": "running it", "tool_calls": [{"id": "c1", "name": "run_command",
                                               "arguments": {"command": "echo first-done"}}]},
        {"text": ANSWERS[0]},
        {"expect": {"last_message_role": "user"}, "text": ANSWERS[1]},
        {"text": ANSWERS[2]},
        {"text": ANSWERS[3]},
    ])
    docs = []
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), PROMPTS[0])
    assert code == 0, doc
    docs.append(doc)
    sid = doc["session_id"]
    for prompt in PROMPTS[1:]:
        code, doc = cli_json("run", "--session", sid, prompt)
        assert code == 0, doc
        docs.append(doc)
    return sid, script, docs


# ---------------------------------------------------------------------------------- checkpoints, export, restore


def test_three_runs_checkpoints_export_and_restore(tmp_path, backend):
    sid, _, docs = _three_runs(tmp_path)

    code, doc = cli_json("sessions", "checkpoints", sid)
    assert code == 0 and doc["session_id"] == sid
    rows = doc["checkpoints"]
    assert [(r["number"], r["reason"], r["messages"], r["last_verdict"]) for r in rows] == [
        (1, "run_end", 4, "ANSWERED"), (2, "run_end", 6, "ANSWERED"), (3, "run_end", 8, "ANSWERED")]
    text = cli("sessions", "checkpoints", sid)
    assert text.exit_code == 0 and "run_end" in text.stdout and text.stdout.count("ANSWERED") == 3

    # the whole conversation, the first tool's output, and every run's receipt in order
    result = cli("sessions", "export", sid, "--format", "md")
    assert result.exit_code == 0, result.stderr
    md = result.stdout
    order = [md.index(f"\n{PROMPTS[0]}\n"), md.index("first-done"), md.index(f"\n{ANSWERS[0]}\n"),
             md.index(f"\n{PROMPTS[1]}\n"), md.index(f"\n{ANSWERS[1]}\n"),
             md.index(f"\n{PROMPTS[2]}\n"), md.index(f"\n{ANSWERS[2]}\n")]
    assert order == sorted(order)
    assert md.count("## Stop receipt") == 3
    ids = [d["stop"]["execution_id"] for d in docs]
    assert md.index("Stop receipt — earlier run 1") < md.index(f"`{ids[0]}`") < md.index(f"`{ids[1]}`") \
        < md.index("Stop receipt — latest run") < md.index(f"`{ids[2]}`")
    assert "Receipts of earlier runs are not kept" not in md

    # restore checkpoint 1: the current state becomes checkpoint 4 first
    code, doc = cli_json("sessions", "restore", sid, "--checkpoint", "1")
    assert code == 0, doc
    assert {k: doc[k] for k in ("session_id", "restored", "undo_checkpoint", "messages", "what", "conversation")} \
        == {"session_id": sid, "restored": 1, "undo_checkpoint": 4, "messages": 4, "what": "both",
            "conversation": True}
    loaded = _store().load(sid)
    assert [m.text for m in loaded.messages if m.role == "user"] == [PROMPTS[0]]

    # the next run sees checkpoint 1's state, including the script position (turn 3)
    code, doc = cli_json("run", "--session", sid, "p4 after restore")
    assert code == 0, doc
    assert doc["output_text"] == ANSWERS[1]
    loaded = _store().load(sid)
    assert [m.text for m in loaded.messages] == [PROMPTS[0], "running it", loaded.messages[2].text, ANSWERS[0],
                                                 "p4 after restore", ANSWERS[1]]
    code, doc2 = cli_json("sessions", "checkpoints", sid)
    assert [(r["number"], r["reason"], r["messages"]) for r in doc2["checkpoints"]][3:] == [
        (4, "before_restore", 8), (5, "run_end", 6)]

    # the export now shows the receipts of the runs in this history only (1 and 4)
    md = cli("sessions", "export", sid).stdout
    assert md.count("## Stop receipt") == 2
    assert f"`{ids[0]}`" in md and f"`{doc['stop']['execution_id']}`" in md
    assert f"`{ids[1]}`" not in md and f"`{ids[2]}`" not in md
    assert PROMPTS[1] not in md and "p4 after restore" in md

    # restoring a checkpoint that does not exist lists the ones that do
    result = cli("sessions", "restore", sid, "--checkpoint", "99")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "no checkpoint 99 (checkpoints: 1, 2, 3, 4, 5)" in result.stderr


def test_restore_can_be_undone(tmp_path, backend):
    sid, _, _ = _three_runs(tmp_path)
    code, doc = cli_json("sessions", "restore", sid, "--checkpoint", "2")
    assert code == 0 and doc["undo_checkpoint"] == 4
    assert len(_store().load(sid).messages) == 6
    code, doc = cli_json("sessions", "restore", sid, "--checkpoint", "4")
    assert code == 0 and doc["undo_checkpoint"] == 5 and doc["messages"] == 8
    loaded = _store().load(sid)
    assert [m.text for m in loaded.messages if m.role == "user"] == PROMPTS
    assert not _store().warnings


# ---------------------------------------------------------------------------------- a run killed mid-tool


def _wait_for(predicate, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _journal_entries(session_dir: Path) -> list[dict]:
    return read_journal(session_dir / "journal.jsonl").entries


def _started(session_dir: Path, call_id: str) -> bool:
    return any(e["kind"] == "event" and e["event"].get("event_kind") == "tool_call_started"
               and e["event"].get("call_id") == call_id for e in _journal_entries(session_dir))


def _kill_group_of(pattern: str) -> None:
    """SIGKILL the process group of a leftover tool process (run_command starts each
    command in its own session) whose command line contains ``pattern``."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if pattern in cmdline:
            try:
                os.killpg(os.getpgid(int(pid)), signal.SIGKILL)
            except OSError:
                pass


def _start_sleeper(tmp_path: Path, marker: str) -> tuple[subprocess.Popen, Path]:
    """``amos run --yes`` whose second tool sleeps; returns the process and the session
    folder once the journal shows the second tool started."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    script = write_script(tmp_path, [
        {"text": "two commands", "tool_calls": [
            {"id": "c1", "name": "run_command", "arguments": {"command": "echo first-done"}},
            {"id": "c2", "name": "run_command", "arguments": {"command": f"sleep 30 # {marker}"}}]},
        {"text": "never reached"},
    ])
    proc = amos_process("run", "--yes", "--script", str(script), "--workspace", str(ws), "do both")
    root = sessions_dir()

    def session_dir():
        dirs = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
        return dirs[0] if dirs and _started(dirs[0], "c2") else None

    try:
        folder = _wait_for(session_dir, what="the second tool_call_started in the journal")
    except AssertionError:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(err) from None
    return proc, folder


def _reap(proc: subprocess.Popen, marker: str) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    _kill_group_of(marker)
    for stream in (proc.stdout, proc.stderr):
        stream.close()


def test_a_run_killed_during_its_second_tool_keeps_the_first(tmp_path):
    marker = f"amos-killed-{os.getpid()}"
    proc, folder = _start_sleeper(tmp_path, marker)
    sid = folder.name
    try:
        # while it runs, a second run on the session fails fast naming the holder
        started = time.monotonic()
        busy = subprocess.run([sys.executable, "-m", "amos.cli", "run", "--session", sid, "again"],
                              capture_output=True, text=True, timeout=30)
        assert time.monotonic() - started < 10
        assert busy.returncode == 2 and "Traceback" not in busy.stderr
        assert f"in use by another amos process (pid {proc.pid}," in busy.stderr
    finally:
        _reap(proc, marker)
    assert proc.returncode == -signal.SIGKILL

    code, doc = cli_json("sessions", "list")
    assert code == 0
    (row,) = [r for r in doc["sessions"] if r["id"] == sid]
    # the call that was running when amos died gets a result saying its outcome is unknown
    assert row["broken"] is None and row["messages"] == 4 and row["title"] == "do both"
    assert row["cost_usd"] is None  # the scripted model has no price

    result = cli("sessions", "export", sid)
    assert result.exit_code == 0, result.stderr
    md = result.stdout
    assert "do both" in md and "first-done" in md and "`c1`" in md and "`c2`" in md
    assert "*(no run has finished in this session)*" in md
    store = _store()
    loaded = store.load(sid)
    assert [len(m.tool_results) for m in loaded.messages] == [0, 0, 1, 1]
    assert loaded.messages[2].tool_results[0].call_id == "c1"
    interrupted = loaded.messages[3].tool_results[0]
    assert (interrupted.call_id, interrupted.status) == ("c2", "cancelled")
    assert "whether it took effect is unknown" in interrupted.content
    assert any("recovered" in w for w in store.warnings)
    assert any("interrupted" in w and "run_command (c2) was running" in w for w in store.warnings)
    assert loaded.usage.model_calls == 1  # the killed run's model call still counts

    # the lock died with the process: the next run takes it over and continues
    # (the scripted provider's position was journalled, so the script continues at turn 2)
    code, doc = cli_json("run", "--session", sid, "go on")
    assert code == 0 and doc["session_id"] == sid and doc["output_text"] == "never reached", doc
    owner = json.loads((sessions_dir() / f".{sid}.lock.owner").read_text())
    assert owner["pid"] == os.getpid()


# ---------------------------------------------------------------------------------- corruption and repair


def _truncate(path: Path) -> bytes:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path.read_bytes()


def test_a_truncated_session_is_a_clean_error_kept_aside_listed_and_repaired(tmp_path):
    sid, _, _ = _three_runs(tmp_path)
    store = _store()
    before = store.load(sid)
    path = store.path(sid)
    bad = _truncate(path)

    for args in (("sessions", "show", sid), ("sessions", "export", sid), ("run", "--session", sid, "more")):
        result = cli(*args)
        assert result.exit_code == 2, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
        assert str(path) in result.stderr and f"amos sessions repair {sid}" in result.stderr
        assert "checkpoint 3 plus the journal" in result.stderr
    # one copy of the bad bytes, however often it is met; the file itself untouched
    asides = sorted(path.parent.glob("session.json.corrupt-*"))
    assert len(asides) == 1 and asides[0].read_bytes() == bad and path.read_bytes() == bad
    assert f"a copy was kept as {asides[0].name}" in result.stderr

    code, doc = cli_json("sessions", "list")
    assert code == 0
    (row,) = doc["sessions"]
    assert row["id"] == sid and "cannot read session" in row["broken"]
    assert f"`amos sessions repair {sid}` rebuilds it from checkpoint 3 plus the journal" in row["broken"]
    listing = cli("sessions", "list")
    assert listing.exit_code == 0 and sid in listing.stdout

    code, doc = cli_json("sessions", "repair", sid)
    assert code == 0, doc
    assert doc["source"] == "checkpoint 3" and doc["messages"] == 8
    repaired = _store().load(sid)
    assert repaired.messages == before.messages and repaired.last_stop == before.last_stop
    assert repaired.provider_state == before.provider_state and repaired.title == before.title
    # the bad file is never overwritten or deleted
    kept = sorted(path.parent.glob("session.json.corrupt-*"))
    assert [p.read_bytes() for p in kept] == [bad]
    code, doc = cli_json("run", "--session", sid, "after repair")
    assert code == 0 and doc["output_text"] == ANSWERS[3], doc


def test_repair_replays_the_journal_after_the_newest_checkpoint(tmp_path):
    sid, _, _ = _three_runs(tmp_path)
    store = _store()
    session = store.load(sid)
    lock = store.lock(sid)
    try:  # entries written after the last snapshot and checkpoint, as a killed run leaves them
        journal = store.journal(session)
        journal.append("message", "2026-01-01T00:00:00Z", index=8,
                       message=Message.user("written after the checkpoint").model_dump(mode="json"))
        journal.append("fields", "2026-01-01T00:00:00Z", fields={"title": "renamed late"})
        store.close_journal(sid)
    finally:
        lock.release()
    _truncate(store.path(sid))
    code, doc = cli_json("sessions", "repair", sid)
    assert code == 0 and doc["source"] == "checkpoint 3" and doc["messages"] == 9, doc
    assert doc["replayed"] == 2
    repaired = _store().load(sid)
    assert repaired.messages[-1].text == "written after the checkpoint" and repaired.title == "renamed late"


def test_repair_from_the_journal_alone_and_when_nothing_can(tmp_path):
    sid, _, _ = _three_runs(tmp_path)
    store = _store()
    before = store.load(sid)
    folder = store.session_dir(sid)
    for cp in (folder / "checkpoints").iterdir():
        cp.unlink()
    path = store.path(sid)
    path.write_bytes(b"")
    result = cli("sessions", "show", sid)
    assert result.exit_code == 2 and "rebuilds it from the journal" in result.stderr
    text = cli("sessions", "repair", sid)
    assert text.exit_code == 0, text.stderr
    assert "repaired session" in text.stdout and "from journal" in text.stdout
    repaired = _store().load(sid)
    assert repaired.messages == before.messages and repaired.provider_state == before.provider_state
    assert repaired.last_stop == before.last_stop

    # with neither a checkpoint nor a journal there is nothing to rebuild from
    path.write_bytes(b"{")
    (folder / "journal.jsonl").unlink()
    result = cli("sessions", "repair", sid)
    assert result.exit_code == 2 and "Traceback" not in result.stderr and "cannot be repaired" in result.stderr
    assert path.read_bytes() == b"{"
    shown = cli("sessions", "show", sid)
    assert "no checkpoint or journal can rebuild it" in shown.stderr


def test_repair_of_a_readable_session_applies_the_journal(tmp_path):
    sid, _, _ = _three_runs(tmp_path)
    code, doc = cli_json("sessions", "repair", sid)
    assert code == 0 and doc["source"] == "snapshot" and doc["set_aside"] is None and doc["messages"] == 8
    assert not list(_store().session_dir(sid).glob("session.json.corrupt-*"))


# ---------------------------------------------------------------------------------- write errors


class FullDiskStore(SessionStore):
    """Every file write fails as on a full disk (CI runs as root: permissions stop nothing)."""

    def write_file(self, path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))


class FailingJournal(Journal):
    """Appends fail once ``fail_after`` lines were written; a failing append first writes
    half of its line, as a write cut short by a full disk does."""

    fail_after = 1

    def write_line(self, line: bytes) -> None:
        written = getattr(self, "_lines_written", 0)
        if written >= self.fail_after:
            super().write_line(line[: len(line) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        self._lines_written = written + 1
        super().write_line(line)


class FailingJournalStore(SessionStore):
    journal_class = FailingJournal


def _errors(events: list) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice) and e.level == "error"]


def _tool_script(tmp_path: Path, runs: int = 1) -> Path:
    turns = []
    for n in range(runs):
        turns += [{"tool_calls": [{"id": f"c{n}", "name": "run_command", "arguments": {"command": f"echo run{n}"}}]},
                  {"text": f"done {n}"}]
    return write_script(tmp_path, turns)


def test_a_full_disk_for_session_files_stops_before_the_command_and_says_what_was_not_saved(tmp_path):
    runner, _ = make_runner(_tool_script(tmp_path), tmp_path, yes=True)
    runner.store = FullDiskStore(runner.store.root)
    try:
        events = collect(runner, "go")
    finally:
        runner.close()
    done = finished(events)
    # The journal never started, so the command (an unknown effect) was not run: a crash
    # could not have shown whether it ran (issue 17, item 6).
    assert (done.receipt.verdict, done.receipt.cause) == ("FAILED", "storage_error") and done.session_path is None
    assert [(c["call_id"], c["status"]) for c in done.tool_calls] == [("c0", "not_started")]
    assert not any(isinstance(e, ToolCallStarted) for e in events)
    errors = _errors(events)
    path = str(runner.store.path(runner.session_id))
    assert len(errors) == 3, errors  # the journal could not start; the final save failed; what is lost
    assert errors[0].startswith("not durable: session journal unavailable") and path in errors[0]
    assert "No space left on device" in errors[1] and path in errors[1]
    assert errors[2].startswith("NOT SAVED:") and "run_command c0 not_started" in errors[2]


def test_journal_write_errors_give_one_notice_per_run_and_never_tear_the_journal(tmp_path):
    runner, _ = make_runner(_tool_script(tmp_path, runs=2), tmp_path, yes=True)
    runner.store = FailingJournalStore(runner.store.root)
    sid = runner.session_id
    journal_path = runner.store.journal_path(sid)
    try:
        first = collect(runner, "one")
        FailingJournal.fail_after = 10**6  # the disk has room again
        try:
            second = collect(runner, "two")
        finally:
            FailingJournal.fail_after = 1
    finally:
        runner.close()
    # the first run lost its journal before the command: the command did not run (issue 17, item 6)
    assert (finished(first).receipt.verdict, finished(first).receipt.cause) == ("FAILED", "storage_error")
    assert finished(second).receipt.verdict == "ANSWERED"  # the disk has room again: the next run is fine
    errors = _errors(first)
    assert len(errors) == 1 and str(journal_path) in errors[0] and "No space left on device" in errors[0]
    assert errors[0].startswith("not durable: cannot append to the session journal")
    assert not _errors(second)
    # the half-written lines were cut off: every later entry is readable
    found = read_journal(journal_path)
    assert not found.warnings and found.good_bytes == found.total_bytes
    assert [e["seq"] for e in found.entries] == list(range(1, found.last_seq + 1))
    store = SessionStore(runner.store.root)
    loaded = store.load(sid)
    assert [m.text for m in loaded.messages if m.role == "user"] == ["one", "two"]
    assert not store.warnings


def test_amos_run_prints_the_write_error_on_stderr(tmp_path, monkeypatch):
    import amos.engine.opening

    monkeypatch.setattr(amos.engine.opening, "open_store", lambda config: FullDiskStore(sessions_dir(config)))
    ws = tmp_path / "ws"
    ws.mkdir()
    result = cli("run", "--yes", "--script", str(_tool_script(tmp_path)), "--workspace", str(ws), "go")
    assert "Traceback" not in result.stderr
    assert result.exit_code == 1 and "FAILED (storage_error/storage_error)" in result.stderr
    lines = [line for line in result.stderr.splitlines() if "No space left on device" in line]
    assert len(lines) >= 2 and all("session.json" in line for line in lines), result.stderr
    assert "NOT SAVED:" in result.stderr

    monkeypatch.setattr(amos.engine.opening, "open_store", lambda config: FailingJournalStore(sessions_dir(config)))
    result = cli("run", "--yes", "--script", str(_tool_script(tmp_path)), "--workspace", str(ws), "go")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if "journal.jsonl" in line and line.startswith("amos:")]
    assert len(lines) == 1 and "not durable" in lines[0] and "No space left on device" in lines[0], result.stderr
    assert "FAILED (storage_error/storage_error)" in result.stderr


# ---------------------------------------------------------------------------------- concurrency


def test_a_held_lock_fails_fast_naming_the_holder_and_is_taken_over_after_sigkill(tmp_path):
    sid, _, _ = _three_runs(tmp_path)
    root = sessions_dir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom amos.sessions import SessionStore\n"
         "lock = SessionStore(sys.argv[1]).lock(sys.argv[2])\nprint('locked', flush=True)\ntime.sleep(60)\n",
         str(root), sid], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        result = cli("run", "--session", sid, "again")
        assert time.monotonic() - started < 5
        assert result.exit_code == 2 and "Traceback" not in result.stderr
        assert f"session {sid} is in use by another amos process (pid {holder.pid}, since" in result.stderr
        code, doc = cli_json("run", "--session", sid, "again")
        assert code == 2 and doc["error"]["code"] == "BUSY" and str(holder.pid) in doc["error"]["message"]
        for args in (("sessions", "restore", sid, "--checkpoint", "1"), ("sessions", "repair", sid),
                     ("sessions", "delete", sid)):
            result = cli(*args)
            assert result.exit_code == 2 and f"pid {holder.pid}" in result.stderr, args
        assert len(_store().load(sid).messages) == 8  # nothing changed
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        holder.stdout.close()
    code, doc = cli_json("run", "--session", sid, "again")
    assert code == 0 and doc["output_text"] == ANSWERS[3], doc
    assert json.loads((root / f".{sid}.lock.owner").read_text())["pid"] == os.getpid()


# ---------------------------------------------------------------------------------- versioning

V1_SCRIPT = {"version": 1, "turns": [
    {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"text": "read it", "tool_calls": [{"id": "w1", "name": "write_file",
                                        "arguments": {"path": "out.txt", "content": "x\n"}}]},
    {"text": "all written"},
]}
V1_CONFIG = {"doom_loop": True, "loop_policy": {},
             "task_state": {"enabled": True, "owner_id": "tester"},
             "evidence": {"enabled": True, "scope": {"owner_id": "tester"}}}
EXECUTION = "64436dbb-8fa9-43c5-936e-83f7d4c89a44"
SIG = "e5b6fe48319478b41ecce810e22cfe0ce67528c1f62628b5d73c17274466d400"


def _v1_session(sid: str, ws: Path, script: Path, cfg: Path) -> dict:
    """A session file as amos wrote it before the journal (version 1), with the sections
    the loop policy, doom-loop guard, task state, evidence and scripted provider added,
    paused on an approval."""
    usage = {"input_tokens": 3804, "output_tokens": 16, "cached_tokens": 0, "reasoning_tokens": 0, "model_calls": 2}
    scope = {"owner_id": "tester", "namespace": "default", "tenant_id": None}
    tracked = {"admissions": 1, "signatures": 1, "observations": 1, "max_tracked": 1000, "workspace_revision": 0}
    observation = {"tool": "read_file", "call_id": "r1", "effect": "read", "status": "succeeded"}
    pending_info = {"call_id": "w1", "tool": "write_file", "owner": None, "deadline": "2099-12-01T07:57:43+00:00",
                    "resume_token": f"{sid}:{EXECUTION}:w1"}
    key = f"r:{SIG}:0:None"
    return {
        "version": 1, "id": sid, "name": "old-one", "title": "read and write",
        "created_at": "2025-11-30T07:57:43.059+00:00", "updated_at": "2025-11-30T07:57:44.157+00:00",
        "host": {"model": f"scripted:{script}", "base_url": None, "workspace": str(ws), "config_path": str(cfg),
                 "verify": None, "max_steps": None, "checker_pins": {}},
        "messages": [
            {"role": "user", "parts": [{"part_kind": "text", "text": "read and write"}], "kind": "prompt",
             "provider_details": None},
            {"role": "assistant", "parts": [{"part_kind": "tool_call", "call_id": "r1", "tool_name": "read_file",
                                             "arguments": {"path": "notes.txt"}, "raw_arguments": None,
                                             "provider_details": None}], "kind": "turn", "provider_details": None},
            {"role": "tool", "parts": [{"part_kind": "tool_result", "call_id": "r1", "tool_name": "read_file",
                                        "content": "notes.txt (lines 1-1 of 1)\nhello", "is_error": False,
                                        "status": "succeeded"}], "kind": "result", "provider_details": None},
            {"role": "assistant", "parts": [
                {"part_kind": "text", "text": "read it"},
                {"part_kind": "tool_call", "call_id": "w1", "tool_name": "write_file",
                 "arguments": {"path": "out.txt", "content": "x\n"}, "raw_arguments": None,
                 "provider_details": None}], "kind": "turn", "provider_details": None},
        ],
        "provider_state": {"scripted_positions": {hashlib.sha256(script.read_bytes()).hexdigest(): 2}},
        "usage": usage,
        "loop": {"phase": "input-needed", "execution_id": EXECUTION, "iterations": 2, "reason": "approval_pending",
                 "status": None, "recovery_attempts": 0, "max_recovery_attempts": 2, "completion": None,
                 "doom_loop": {"streaks": {"read_file": 1}, "text_streak": 1, "last_verdict": None,
                               "stop_armed": False, "escalations_used": 0,
                               "ladder": {"observe": 2, "steer": False, "escalate": False, "block": 3, "stop": 6}},
                 "tracked": tracked, "observations": [observation], "observations_truncated": False,
                 "policy_enabled": True},
        "last_stop": {"verdict": "WAITING_UNROUTED", "cause": "approval_required", "reason": "approval_pending",
                      "detail": "write_file out.txt (2 bytes) (w1) needs approval", "execution_id": EXECUTION,
                      "steps": 2, "tool_call_count": 1, "recovery_attempts": 0, "usage": usage, "completion": None,
                      "approval": pending_info, "pending_approvals": [pending_info], "stop_condition": None,
                      "policy": "sha256:3cdc", "started_at": "2025-11-30T07:57:43.122+00:00",
                      "ended_at": "2025-11-30T07:57:43.175+00:00"},
        "pending": {
            "execution": {
                "execution_id": EXECUTION, "started_at": "2025-11-30T07:57:43.122+00:00", "steps": 2, "usage": usage,
                "tool_calls": [{"call_id": "r1", "tool": "read_file", "status": "succeeded", "evidence_id": None}],
                "observations": [observation], "denied": {}, "effect_succeeded": False, "completion": None,
                "recovery_attempts": 0, "progress_changed": False, "tracked": tracked,
                "policy_state": {"revision": 0, "effects": 0, "recovery_attempts": 0, "progress_key": None,
                                 "unchanged_progress": 0, "progress_changed": False, "observation_count": 1,
                                 "signatures": [SIG], "read_warned": [], "write_blocked": [],
                                 "admissions": {f"{key}#1": "r1"}, "read_counts": {key: 1},
                                 "read_results": {key: None}, "call_identity": {"r1": ["r", key]}},
                "output_text": "read it"},
            "held": [{"call": {"part_kind": "tool_call", "call_id": "w1", "tool_name": "write_file",
                               "arguments": {"path": "out.txt", "content": "x\n"}, "raw_arguments": None,
                               "provider_details": None},
                      "needs_approval": True, "decision": None, "reason": None}],
            "owner": None, "deadline": "2099-12-01T07:57:43+00:00", "created_at": "2025-11-30T07:57:43.175+00:00"},
        "doom_loop": {"detector": {"tools": {"read_file": {"fingerprint": SIG, "streak": 1}},
                                   "text": {"fingerprint": "419af52b06755cd5e0bf11c373947bd4"
                                                           "39c33dfeb4c3ac27a9e1283e7f7f143f", "streak": 1}},
                      "stop_verdict": None, "pending_steer": [], "escalate_next": False, "last_verdict": None},
        "evidence_scope": scope,
        "evidence_recent": [{"call_id": "r1", "tool": "read_file", "status": "succeeded", "id": None,
                             "stored": False}],
        "task_state": {"version": 1, "kind": "amos.task_state", "task_id": sid, "scope": scope,
                       "association": None, "lifecycle_binding": None, "revision": 1,
                       "notes": [{"id": "obj1", "category": "objective", "text": "Ship it",
                                  "source": {"label": "host command /context task add", "turn_id": None,
                                             "evidence": None},
                                  "authority": "host", "status": "active", "supersedes": None, "superseded_by": None,
                                  "conflicts_with": [], "uncertainty": None, "resolution": None, "revision": 1,
                                  "recorded_at": None}],
                       "actions": [], "lifecycle": None},
    }


def _write_v1(tmp_path: Path) -> tuple[str, Path, Path, Path, dict]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(V1_SCRIPT))
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(V1_CONFIG))
    sid = "20251130-075743-97515b"
    data = _v1_session(sid, ws, script, cfg)
    path = sessions_dir() / sid / "session.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data, indent=1))
    return sid, path, ws, cfg, data


def test_a_version_1_session_with_every_section_loads_and_is_saved_as_version_2(tmp_path):
    sid, path, _, _, data = _write_v1(tmp_path)
    store = _store()
    session = store.load(sid)
    assert session.version == SESSION_VERSION == 2 and not store.warnings
    assert session.journal_seq == 0 and session.last_checkpoint == 0
    dumped = session.model_dump(mode="json")
    for section in ("loop", "doom_loop", "task_state", "evidence_recent", "evidence_scope", "provider_state",
                    "name", "title", "created_at"):
        assert dumped[section] == data[section], section
    assert dumped["usage"] == data["usage"] | {"cost_usd": None}  # a field added since has its default
    assert dumped["host"] == data["host"] | {"machine": None}  # so has the machine it ran on (issue 22)
    assert session.pending.undecided()[0].call.call_id == "w1"
    assert session.pending.execution.policy_state == data["pending"]["execution"]["policy_state"]
    assert session.last_stop.verdict == "WAITING_UNROUTED"
    assert json.loads(path.read_text())["version"] == 1  # loading writes nothing

    store.save(session)
    saved = json.loads(path.read_text())
    assert saved["version"] == 2
    for section in ("loop", "doom_loop", "task_state", "evidence_recent", "evidence_scope", "provider_state",
                    "name", "title", "created_at", "id"):
        assert saved[section] == data[section], section
    assert saved["host"] == data["host"] | {"machine": None}
    assert saved["pending"]["execution"]["policy_state"] == data["pending"]["execution"]["policy_state"]
    assert saved["journal_seq"] == 0 and saved["last_checkpoint"] == 0
    assert _store().load(sid) == session
    assert [m["parts"][0].get("text") or m["parts"][0].get("call_id") for m in saved["messages"]] == \
        ["read and write", "r1", "r1", "read it"]


def test_a_version_1_session_resumes_with_its_sections_in_force(tmp_path):
    sid, path, ws, cfg, _ = _write_v1(tmp_path)
    code, doc = cli_json("sessions", "list")
    assert code == 0 and doc["sessions"][0]["broken"] is None and doc["sessions"][0]["last_verdict"] == \
        "WAITING_UNROUTED"
    # approve the held write: the policy state, the task notebook, the evidence binding
    # and the scripted position (turn 3) all come from the version-1 file
    code, doc = cli_json("resume", sid, "--approve", "w1", "--config", str(cfg))
    assert code == 0, doc
    assert doc["output_text"] == "all written" and (ws / "out.txt").read_text() == "x\n"
    saved = json.loads(path.read_text())
    assert saved["version"] == 2 and saved["pending"] is None
    assert _store().load(sid).last_checkpoint == 1  # the snapshot is saved just before the checkpoint
    assert saved["task_state"]["notes"][0]["text"] == "Ship it"
    assert saved["journal_seq"] > 0
    code, doc = cli_json("run", "--session", sid, "--config", str(cfg), "/context task")
    assert code == 0 and "Ship it" in doc["result"]["view"], doc


def test_a_newer_version_is_refused_untouched(tmp_path):
    sid, path, _, _, data = _write_v1(tmp_path)
    data["version"] = 99
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    with pytest.raises(SessionError) as info:
        _store().load(sid)
    assert info.value.code == "too_new" and "upgrade amos" in str(info.value) and str(path) in str(info.value)
    for args in (("sessions", "show", sid), ("run", "--session", sid, "hi"), ("sessions", "repair", sid),
                 ("sessions", "restore", sid, "--checkpoint", "1"), ("sessions", "export", sid)):
        result = cli(*args)
        assert result.exit_code == 2 and "Traceback" not in result.stderr, args
        assert "version 99 was written by a newer amos" in result.stderr and "upgrade amos" in result.stderr, args
    code, doc = cli_json("run", "--session", sid, "hi")
    assert code == 2 and doc["error"]["code"] == "TOO_NEW"
    code, doc = cli_json("sessions", "list")
    (row,) = doc["sessions"]
    assert "upgrade amos" in row["broken"] and "repair" not in row["broken"]
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["session.json"]


# ---------------------------------------------------------------------------------- journal and checkpoints


def _saved_session(root: Path, messages: int = 2):
    store = SessionStore(root)
    session = store.create()
    session.title = "journal test"
    for n in range(messages):
        session.messages.append(Message.user(f"m{n}"))
    store.save(session)
    return store, session


def test_a_torn_last_journal_line_is_ignored_with_a_warning_and_cut_before_the_next_append(tmp_path):
    store, session = _saved_session(tmp_path)
    journal = store.journal(session)
    journal.append("message", "t", index=2, message=Message.user("m2").model_dump(mode="json"))
    store.close_journal(session.id)
    path = store.journal_path(session.id)
    good = path.read_bytes()
    path.write_bytes(good + b'{"seq":3,"at":"t","kind":"message","index":3,"mess')

    fresh = SessionStore(tmp_path)
    loaded = fresh.load(session.id)
    assert [m.text for m in loaded.messages] == ["m0", "m1", "m2"]
    assert any("last line" in w and "cut short" in w and str(path) in w for w in fresh.warnings)
    assert any("recovered 2 journal entries" in w for w in fresh.warnings)  # its snapshot and m2
    assert fresh.list()[0].messages == 3

    journal = fresh.journal(loaded)
    assert journal.seq == 2
    journal.append("message", "t", index=3, message=Message.user("m3").model_dump(mode="json"))
    fresh.close_journal(session.id)
    found = read_journal(path)
    assert not found.warnings and [e["seq"] for e in found.entries] == [1, 2, 3]
    assert path.read_bytes().startswith(good)
    again = SessionStore(tmp_path)
    assert [m.text for m in again.load(session.id).messages] == ["m0", "m1", "m2", "m3"]


def test_a_bad_line_in_the_middle_is_skipped_and_replay_goes_on_after_it(tmp_path):
    # issue 17 item 5: the entries after a gap are still used (they may say a call ran)
    store, session = _saved_session(tmp_path)
    journal = store.journal(session)
    journal.append("message", "t", index=2, message=Message.user("m2").model_dump(mode="json"))
    store.close_journal(session.id)
    path = store.journal_path(session.id)
    with open(path, "ab") as fh:
        fh.write(b"not json\n")
        fh.write(json.dumps({"seq": 5, "at": "t", "kind": "message", "index": 4,
                             "message": Message.user("after the gap").model_dump(mode="json")}).encode() + b"\n")
    fresh = SessionStore(tmp_path)
    assert [m.text for m in fresh.load(session.id).messages] == ["m0", "m1", "m2", "after the gap"]
    assert any("line 3 is unreadable" in w and "still used" in w for w in fresh.warnings)
    assert any("journal line 3 was lost" in w for w in fresh.warnings)


def test_a_journal_ahead_of_the_snapshot_is_replayed_on_load(tmp_path):
    store, session = _saved_session(tmp_path)
    journal = store.journal(session)  # starts with a snapshot of the saved state
    journal.append("message", "t", index=2, message=Message.user("m2").model_dump(mode="json"))
    journal.append("message", "t", index=1, message=Message.user("m1 edited").model_dump(mode="json"))
    journal.append("fields", "t", fields={"title": "retitled", "provider_state": {"k": 1}})
    journal.append("event", "t", event={"event_kind": "step_started", "step": 1, "max_steps": 5})
    journal.append("messages", "t", messages=[m.model_dump(mode="json") for m in
                                              (Message.user("compacted"), Message.user("m2"))])
    journal.append("message", "t", index=2, message=Message.user("m3").model_dump(mode="json"))
    # entries the snapshot already reflects are not applied twice
    store.save(session)
    assert json.loads(store.path(session.id).read_text())["journal_seq"] == 7
    store.close_journal(session.id)
    assert [m.text for m in SessionStore(tmp_path).load(session.id).messages] == ["m0", "m1"]

    # a snapshot that lags behind: everything after its journal_seq is applied
    data = json.loads(store.path(session.id).read_text())
    data["journal_seq"] = 1
    store.path(session.id).write_text(json.dumps(data))
    fresh = SessionStore(tmp_path)
    loaded = fresh.load(session.id)
    assert [m.text for m in loaded.messages] == ["compacted", "m2", "m3"]
    assert loaded.title == "retitled" and loaded.provider_state == {"k": 1} and loaded.journal_seq == 7
    assert fresh.warnings == [f"session {session.id}: recovered 5 journal entries written after its last "
                              "snapshot (amos stopped before saving)"]
    (row,) = fresh.list()
    assert row.messages == 3 and row.title == "retitled"
    # an entry that does not fit the history stops the replay with a warning
    journal = fresh.journal(loaded)
    journal.append("message", "t", index=9, message=Message.user("gap").model_dump(mode="json"))
    journal.append("fields", "t", fields={"title": "never"})
    fresh.close_journal(session.id)
    other = SessionStore(tmp_path)
    assert other.load(session.id).title == "retitled"
    assert any("does not fit the history" in w for w in other.warnings)


def test_pruning_keeps_labelled_checkpoints_and_numbers_are_never_reused(tmp_path):
    store, session = _saved_session(tmp_path)
    taken = []
    for n in range(8):
        session.messages.append(Message.user(f"extra {n}"))
        label = "keep-me" if n in (1, 4) else None
        taken.append(store.take_checkpoint(session, "save", label=label, keep=3).number)
    assert taken == list(range(1, 9))
    rows = store.checkpoints_of(session.id).list()
    assert [(r.number, r.label) for r in rows] == [(2, "keep-me"), (5, "keep-me"), (8, None)]
    assert sorted(p.name for p in (store.session_dir(session.id) / "checkpoints").iterdir()) == [
        "000002.json", "000002.meta.json", "000005.json", "000005.meta.json", "000008.json", "000008.meta.json"]

    # a session that forgot its counter (an older snapshot) continues after the folder's highest
    store.save(session)
    forgetful = SessionStore(tmp_path).load(session.id)
    forgetful.last_checkpoint = 0
    assert store.take_checkpoint(forgetful, "save", label="keep-me", keep=3).number == 9

    # a restore continues the numbering: the undo checkpoint and the next ones are new
    lock = store.lock(session.id)
    try:
        restored = store.restore(store.load(session.id), 2, keep=3)
    finally:
        store.close_journal(session.id)
        lock.release()
    assert restored.last_checkpoint == 10 and len(restored.messages) == 4
    loaded = SessionStore(tmp_path).load(session.id)
    assert loaded.last_checkpoint == 10 and [m.text for m in loaded.messages][-1] == "extra 1"
    assert store.take_checkpoint(loaded, "save", keep=3).number == 11
    assert [(r.number, r.label, r.reason) for r in store.checkpoints_of(session.id).list()] == [
        (2, "keep-me", "save"), (5, "keep-me", "save"), (9, "keep-me", "save"), (11, None, "save")]


def test_a_checkpoint_cut_short_does_not_exist_and_its_number_is_skipped(tmp_path):
    store, session = _saved_session(tmp_path)
    assert store.take_checkpoint(session, "save").number == 1
    folder = store.session_dir(session.id) / "checkpoints"
    (folder / "000002.json").write_text("{\"half")  # the data file written, the meta file never
    assert [r.number for r in store.checkpoints_of(session.id).list()] == [1]
    with pytest.raises(SessionError) as info:
        store.checkpoints_of(session.id).read(2)
    assert info.value.code == "not_found" and "checkpoints: 1" in str(info.value)
    assert store.take_checkpoint(session, "save").number == 3


# ---------------------------------------------------------------------------------- /session save|checkpoints|restore


def test_session_slash_commands_through_amos_run(tmp_path):
    sid, _, _ = _three_runs(tmp_path)

    code, doc = cli_json("run", "--session", sid, "/session save milestone")
    assert code == 0, doc
    path = str(sessions_dir() / sid / "session.json")
    assert doc == {"type": "result", "session_id": sid, "command": "/session save milestone", "ok": True,
                   "exit_code": 0, "verdict": None, "model": doc["model"], "error": None,
                   "result": {"session_id": sid, "name": "milestone", "path": path, "checkpoint": 4}}
    assert doc["model"].startswith("scripted:")
    text = cli("run", "--session", "milestone", "/session save")
    assert text.exit_code == 0 and f"saved session {sid} to {path} (checkpoint 5)" in text.stdout

    code, doc = cli_json("run", "--session", sid, "/session checkpoints")
    assert code == 0 and doc["ok"] and doc["error"] is None
    rows = doc["result"]["checkpoints"]
    assert [(r["number"], r["reason"], r["label"], r["messages"]) for r in rows] == [
        (1, "run_end", None, 4), (2, "run_end", None, 6), (3, "run_end", None, 8),
        (4, "save", "milestone", 8), (5, "save", None, 8)]
    assert set(rows[0]) == {"number", "created_at", "label", "reason", "messages", "last_verdict", "journal_seq",
                            "size_bytes", "prompt", "file_seq", "snapshot"}
    text = cli("run", "--session", sid, "/session checkpoints")
    assert text.exit_code == 0 and "milestone" in text.stdout and "REASON" in text.stdout

    code, doc = cli_json("run", "--session", sid, "/session restore 1")
    assert code == 0, doc
    assert doc["result"] == {"session_id": sid, "restored": 1, "undo_checkpoint": 6, "messages": 4}
    loaded = _store().load(sid)
    assert len(loaded.messages) == 4 and loaded.name == "milestone" and loaded.last_checkpoint == 6
    code, doc = cli_json("run", "--session", sid, "after the restore")
    assert code == 0 and doc["output_text"] == ANSWERS[1], doc  # checkpoint 1's script position

    text = cli("run", "--session", sid, "/session restore 6")
    assert text.exit_code == 0 and "restored checkpoint 6 (8 messages)" in text.stdout
    assert [m.text for m in _store().load(sid).messages if m.role == "user"] == PROMPTS

    # bad input: one clean line, nothing changes
    before = _store().path(sid).read_bytes()
    for line, exit_code, code_name in (("/session restore x", 2, None), ("/session restore", 2, None),
                                       ("/session restore 1 2", 2, None), ("/session restore 0", 2, None),
                                       ("/session restore 99", 1, "NOT_FOUND"),
                                       ("/session checkpoints now", 2, None)):
        code, doc = cli_json("run", "--session", sid, line)
        assert code == exit_code and doc["ok"] is False and doc["result"] is None, (line, doc)
        if code_name:
            assert doc["error"]["code"] == code_name
        result = cli("run", "--session", sid, line)
        assert result.exit_code == exit_code and "Traceback" not in result.stderr, line
        assert result.stderr.startswith("amos: "), (line, result.stderr)
    code, doc = cli_json("run", "--session", sid, "/session restore 99")
    assert doc["error"]["message"] == "no checkpoint 99 (checkpoints: 1, 2, 3, 4, 5, 6, 7, 8)"
    usage = cli("run", "--session", sid, "/session restore x")
    assert "usage: /session restore N" in usage.stderr and "checkpoint number" in usage.stderr
    assert _store().path(sid).read_bytes() == before


def test_session_save_and_checkpoints_without_a_store(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    code, doc = cli_json("run", "--no-save", "--script", str(write_script(tmp_path, [{"text": "x"}])),
                         "--workspace", str(ws), "/session save x")
    assert code == 1 and doc["error"]["code"] == "NO_STORE"
    code, doc = cli_json("run", "--no-save", "--script", str(tmp_path / "script.json"), "--workspace", str(ws),
                         "/session checkpoints")
    assert code == 0 and doc["result"] == {"checkpoints": []}


def test_a_runner_that_only_restored_closes_the_journal_it_opened(tmp_path):
    sid, script, _ = _three_runs(tmp_path)
    journal = str(sessions_dir() / sid / "journal.jsonl")

    def open_fds() -> int:
        return sum(1 for fd in os.listdir("/proc/self/fd")
                   if os.path.realpath(f"/proc/self/fd/{fd}") == os.path.realpath(journal))

    runner, _ = make_runner(script, tmp_path / "ws", session=sid)
    try:
        runner.restore_checkpoint(1)
        assert open_fds() == 1
    finally:
        runner.close()
    assert open_fds() == 0


def test_reading_after_a_seq_skips_parsing_but_not_checking(tmp_path):
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    for n in range(6):
        journal.append("message", "t", index=n, message=Message.user(f"é{n} }}").model_dump(mode="json"))
    journal.close()
    whole = read_journal(path)
    for after in range(0, 8):
        part = read_journal(path, after_seq=after)
        assert (part.last_seq, part.good_bytes, part.warnings) == (6, whole.good_bytes, [])
        assert part.entries == [e for e in whole.entries if e["seq"] > after]
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]) + b"garbage}\n" + b"".join(lines[3:]))
    part = read_journal(path, after_seq=5)
    assert part.last_seq == 6 and [e["seq"] for e in part.entries] == [6]
    assert "line 3 is unreadable" in part.warnings[0] and "snapshot already holds" in part.warnings[0]
    assert [(g.first_line, g.next_seq) for g in part.gaps] == [(3, 4)]
    path.write_bytes(b"".join(lines[:2]) + lines[1] + b"".join(lines[3:]))  # a repeated seq
    repeated = read_journal(path, after_seq=5)
    assert repeated.last_seq == 6 and [(g.first_line, g.next_seq) for g in repeated.gaps] == [(3, 4)]


def test_show_and_export_say_what_loading_recovered(tmp_path):
    sid, _, _ = _three_runs(tmp_path)
    with open(_store().journal_path(sid), "ab") as fh:
        fh.write(b'{"seq":999,"at":"t","kind":"mess')
    for args in (("sessions", "show", sid), ("sessions", "export", sid), ("sessions", "show", sid, "--json")):
        result = cli(*args)
        assert result.exit_code == 0
        assert "amos: warning:" in result.stderr and "its last line is incomplete" in result.stderr, args


def test_reading_a_live_session_does_not_call_its_run_interrupted(tmp_path):
    marker = f"amos-live-{os.getpid()}"
    proc, folder = _start_sleeper(tmp_path, marker)
    try:
        code, doc = cli_json("sessions", "list")
        (row,) = [r for r in doc["sessions"] if r["id"] == folder.name]
        result = cli("sessions", "export", folder.name)
        assert "killed or crashed" not in result.stdout + result.stderr
        assert row["messages"] == 3
    finally:
        _reap(proc, marker)
