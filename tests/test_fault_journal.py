"""Issue 17 item 5: a bad line in the middle of a journal never makes a call run twice.

Real runs through the CLI write real journals; the crash is what ``kill -9`` leaves: a
``session.json`` older than the journal (the snapshot written when the run started, or
the one written when it paused WAITING) and, for the resume case, a journal cut right
after the held call finished. One line in the middle is then made unreadable. Every
tool call appends to ``log.txt``, so a call that runs twice is a second line there.
"""

from __future__ import annotations

import json
from pathlib import Path

from amos.journal import read_journal
from amos.sessions import SessionStore

from .support import cli, cli_json, write_script

LOG_CALL = {"id": "c1", "name": "run_command", "arguments": {"command": "echo ran >> log.txt"}}


def _journal(doc: dict) -> Path:
    return Path(doc["session_path"]).with_name("journal.jsonl")


def _as_killed_before_the_final_save(doc: dict) -> None:
    """``session.json`` as the run left it when it started (its journal's first snapshot)."""
    first = json.loads(_journal(doc).read_text().splitlines()[0])
    assert first["kind"] == "snapshot"
    Path(doc["session_path"]).write_text(json.dumps({**first["session"], "journal_seq": first["seq"]}))


def _spoil(path: Path, marker: str) -> int:
    """Make the first line containing ``marker`` unreadable; returns its line number."""
    lines = path.read_bytes().split(b"\n")
    number = next(i for i, line in enumerate(lines) if marker.encode() in line)
    lines[number] = b"{garbage" + lines[number][40:]
    path.write_bytes(b"\n".join(lines))
    return number + 1


def _first_run(tmp_path: Path) -> tuple[Path, dict]:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"tool_calls": [LOG_CALL]}, {"text": "first done"}, {"text": "continued"}])
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), "do it")
    assert code == 0 and doc["output_text"] == "first done", doc
    assert (ws / "log.txt").read_text() == "ran\n"
    _as_killed_before_the_final_save(doc)
    return ws, doc


def test_a_bad_line_before_the_call_does_not_make_continue_run_it_again(tmp_path):
    ws, doc = _first_run(tmp_path)
    line = _spoil(_journal(doc), '"event_kind":"step_started"')  # before the call, its result and the
    result = cli("run", "--yes", "--session", doc["session_id"], "--json", "continue")  # script position
    assert (ws / "log.txt").read_text() == "ran\n", result.stderr  # the command did not run a second time
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["output_text"] == "continued"
    assert f"line {line} is unreadable" in result.stderr and str(_journal(doc)) in result.stderr
    assert f"journal line {line} was lost" in result.stderr
    session = SessionStore(Path(doc["session_path"]).parent.parent).load(doc["session_id"])
    results = [p for m in session.messages for p in m.tool_results]
    assert [(r.call_id, r.status) for r in results] == [("c1", "succeeded")] and "exit code: 0" in results[0].content
    # the damaged journal was kept aside whole; the new one starts from the recovered state
    assert list(_journal(doc).parent.glob("journal.jsonl.corrupt-*"))
    assert not read_journal(_journal(doc)).gaps


def test_a_lost_result_line_is_recovered_as_ran_with_its_output_lost(tmp_path):
    ws, doc = _first_run(tmp_path)
    line = _spoil(_journal(doc), '"part_kind":"tool_result"')
    shown = cli("sessions", "show", doc["session_id"], "--json")
    assert shown.exit_code == 0, shown.stderr
    assert f"line {line} is unreadable" in shown.stderr
    assert "run_command (c1)" in shown.stderr
    store = SessionStore(Path(doc["session_path"]).parent.parent)
    session = store.load(doc["session_id"])
    (result,) = [p for m in session.messages for p in m.tool_results]
    assert result.call_id == "c1" and result.status == "succeeded"
    assert f"line {line} of the session journal" in result.content and "check" in result.content
    assert [m.text for m in session.messages if m.role == "assistant" and m.text] == ["first done"]
    out = cli("run", "--yes", "--session", doc["session_id"], "--json", "continue")
    assert out.exit_code == 0 and json.loads(out.stdout)["output_text"] == "continued", out.stderr
    assert (ws / "log.txt").read_text() == "ran\n"


def test_a_lost_call_line_keeps_its_result_and_the_state_after_it(tmp_path):
    ws, doc = _first_run(tmp_path)
    line = _spoil(_journal(doc), '"part_kind":"tool_call"')
    result = cli("run", "--yes", "--session", doc["session_id"], "--json", "continue")
    assert result.exit_code == 0 and json.loads(result.stdout)["output_text"] == "continued", result.stderr
    assert (ws / "log.txt").read_text() == "ran\n"
    assert f"journal line {line} was lost" in result.stderr


def test_resume_after_a_kill_never_runs_a_held_call_that_already_ran(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"tool_calls": [LOG_CALL]}, {"text": "done"}, {"text": "continued"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--sandbox", "danger-full-access",
                         "do it")
    assert code == 5 and doc["stop"]["verdict"] == "WAITING_UNROUTED", doc
    waiting = Path(doc["session_path"]).read_bytes()
    sid = doc["session_id"]
    code, resumed = cli_json("resume", sid, "--approve", "c1")
    assert code == 0 and (ws / "log.txt").read_text() == "ran\n", resumed
    # killed right after the held call finished: the WAITING snapshot, the journal up to there
    journal = _journal(doc)
    lines = journal.read_text().splitlines(keepends=True)
    cut = max(i for i, x in enumerate(lines) if '"event_kind":"tool_call_finished"' in x)
    journal.write_text("".join(lines[:cut + 1]))
    Path(doc["session_path"]).write_bytes(waiting)
    for folder in journal.parent.glob("checkpoints"):
        for f in folder.iterdir():
            f.unlink()
    line = _spoil(journal, '"resumed":true')  # the resume's run_started, before the call's result

    again = cli("resume", sid, "--approve", "c1")
    assert (ws / "log.txt").read_text() == "ran\n", again.stderr  # not run a second time
    assert again.exit_code == 2 and "Traceback" not in again.stderr
    assert "already has a result" in again.stderr and f"line {line} is unreadable" in again.stderr
    code, after = cli_json("run", "--session", sid, "go on")
    assert code == 0 and after["output_text"] in ("done", "continued"), after
    assert (ws / "log.txt").read_text() == "ran\n"


def test_a_snapshot_after_the_gap_rebuilds_the_whole_state(tmp_path):
    from amos.journal import Journal, replay
    from amos.messages import Message

    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    session = {"id": "s1", "messages": []}
    journal.append("snapshot", "t", session=session)
    journal.append("message", "t", index=0, message=Message.user("a").model_dump(mode="json"))
    journal.append("message", "t", index=1, message=Message.user("lost").model_dump(mode="json"))
    restored = {"id": "s1", "title": "restored", "messages": [Message.user("x").model_dump(mode="json")]}
    journal.append("snapshot", "t", session=restored)
    journal.append("message", "t", index=1, message=Message.user("y").model_dump(mode="json"))
    journal.close()
    lines = path.read_bytes().split(b"\n")
    lines[2] = b"not json"
    path.write_bytes(b"\n".join(lines))
    found = read_journal(path)
    assert [e["seq"] for e in found.entries] == [1, 2, 4, 5]
    assert [(g.first_line, g.last_line, g.next_seq) for g in found.gaps] == [(3, 3, 4)]
    data: dict = {"id": "s1"}
    _, warnings = replay(data, found.entries, gaps=found.gaps)
    assert data["title"] == "restored" and [m["parts"][0]["text"] for m in data["messages"]] == ["x", "y"]
    assert any("line 3 was lost" in w and "rebuilt from the snapshot" in w for w in warnings), warnings
