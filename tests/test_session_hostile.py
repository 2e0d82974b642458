"""Hostile session folders from a break-it session: each is reported or recovered, never
silently merged, truncated or stuck."""

from __future__ import annotations

import json
import shutil

from amos.paths import sessions_dir
from amos.sessions import SessionStore

from .support import cli, cli_json, write_script


def _session(tmp_path, runs: int = 2) -> str:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    script = write_script(tmp_path, [{"text": f"answer {n}"} for n in range(runs + 3)])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "first")
    assert code == 0, doc
    for n in range(1, runs):
        code, doc = cli_json("run", "--session", doc["session_id"], f"prompt {n}")
        assert code == 0, doc
    return doc["session_id"]


def test_a_copied_session_folder_never_writes_into_the_original(tmp_path):
    sid = _session(tmp_path)
    root = sessions_dir()
    shutil.copytree(root / sid, root / "mycopy")
    before = (root / sid / "session.json").read_bytes()
    result = cli("run", "--session", "mycopy", "work on the copy")
    assert result.exit_code == 2 and "does not match its folder" in result.stderr
    assert "Traceback" not in result.stderr
    assert (root / sid / "session.json").read_bytes() == before
    # repair makes the copy a session of its own
    assert cli("sessions", "repair", "mycopy").exit_code == 0
    code, doc = cli_json("run", "--session", "mycopy", "work on the copy")
    assert code == 0 and doc["session_id"] == "mycopy"
    assert "work on the copy" not in (root / sid / "journal.jsonl").read_text()


def test_a_bad_line_in_the_middle_of_the_journal_never_truncates_what_follows(tmp_path):
    sid = _session(tmp_path)
    journal = sessions_dir() / sid / "journal.jsonl"
    lines = journal.read_bytes().split(b"\n")
    lines.insert(5, b"GARBAGE")
    journal.write_bytes(b"\n".join(lines))
    damaged = journal.read_bytes()
    result = cli("run", "--session", sid, "third")
    assert result.exit_code == 0, result.stderr
    assert "unreadable" in result.stderr and "kept as journal.jsonl.corrupt-" in result.stderr
    kept = list(journal.parent.glob("journal.jsonl.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == damaged  # every byte kept
    store = SessionStore(sessions_dir())
    session = store.load(sid)
    assert [m.text for m in session.messages if m.role == "user"] == ["first", "prompt 1", "third"]
    # the new journal starts with the whole session and continues the numbering
    first = json.loads(journal.read_text().splitlines()[0])
    assert first["kind"] == "snapshot" and first["seq"] > max(
        json.loads(x)["seq"] for x in damaged.decode().splitlines() if x.startswith("{"))


def test_an_invalid_journal_entry_is_ignored_with_a_warning_not_a_stuck_session(tmp_path):
    sid = _session(tmp_path)
    journal = sessions_dir() / sid / "journal.jsonl"
    with journal.open("a") as fh:
        fh.write(json.dumps({"seq": 999, "at": "x", "kind": "fields", "fields": {"usage": "garbage"}}) + "\n")
    result = cli("sessions", "show", sid)
    assert result.exit_code == 0, result.stderr
    assert "entry 999 would make the session invalid" in result.stderr
    assert not list(journal.parent.glob("session.json.corrupt-*"))  # the snapshot was never blamed


def test_a_snapshot_that_parses_but_is_invalid_is_repaired_from_a_checkpoint(tmp_path):
    sid = _session(tmp_path)
    path = sessions_dir() / sid / "session.json"
    data = json.loads(path.read_text())
    data["estimator"] = [1]
    path.write_text(json.dumps(data))
    result = cli("sessions", "show", sid)
    assert result.exit_code == 2 and "estimator" in result.stderr and "sessions repair" in result.stderr
    result = cli("sessions", "repair", sid)
    assert result.exit_code == 0 and "checkpoint" in result.stdout, result.stdout + result.stderr
    assert cli("sessions", "show", sid).exit_code == 0


def test_versions_must_be_whole_numbers(tmp_path):
    sid = _session(tmp_path, runs=1)
    path = sessions_dir() / sid / "session.json"
    for bad in (True, 2.0, "2"):
        data = json.loads(path.read_text())
        data["version"] = bad
        path.write_text(json.dumps(data))
        result = cli("sessions", "show", sid)
        assert result.exit_code == 2 and "version" in result.stderr and "Traceback" not in result.stderr, bad


def test_a_symlinked_session_folder_is_not_a_session(tmp_path):
    sid = _session(tmp_path, runs=1)
    (sessions_dir() / "linked").symlink_to(sessions_dir() / sid)
    result = cli("sessions", "delete", "linked")
    assert result.exit_code == 2 and "no session 'linked'" in result.stderr
    assert (sessions_dir() / sid / "session.json").exists()


def test_read_only_slash_commands_neither_create_nor_bump_sessions(tmp_path):
    sid = _session(tmp_path, runs=1)
    older = _session(tmp_path, runs=1)
    script = write_script(tmp_path, [{"text": "x"}], name="other.json")
    assert cli("run", "--script", str(script), "/help").exit_code == 0
    code, doc = cli_json("sessions", "list")
    assert [r["id"] for r in doc["sessions"]] == [older, sid]  # no new empty session
    assert cli("run", "--session", sid, "/context").exit_code == 0
    code, doc = cli_json("sessions", "list")
    assert doc["sessions"][0]["id"] == older  # /context did not make the old session `latest`


def test_session_names_are_unique_and_restore_numbers_ascii(tmp_path):
    first = _session(tmp_path, runs=1)
    second = _session(tmp_path, runs=1)
    assert cli("run", "--session", first, "/session save shared").exit_code == 0
    result = cli("run", "--session", second, "/session save shared")
    assert result.exit_code == 2 and f"already used by session {first}" in result.stderr
    assert cli("run", "--session", second, '/session save "trailing "').exit_code == 2
    for bad in ("²", "١", "9" * 5000):
        result = cli("run", "--session", second, f"/session restore {bad}")
        assert result.exit_code == 2 and "Traceback" not in result.stderr, bad


def test_show_and_list_never_send_terminal_control_sequences(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"text": "clear \x1b[2J and title \x1b]0;PWNED\x07 done"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "hi \x1b[31mred")
    assert code == 0
    for args in (("sessions", "show", doc["session_id"]), ("sessions", "list")):
        out = cli(*args).stdout
        assert "\x1b" not in out and "\x07" not in out, args
    assert "\\x1b[2J" in cli("sessions", "show", doc["session_id"]).stdout


def test_export_refuses_devices_links_and_missing_folders(tmp_path):
    sid = _session(tmp_path, runs=1)
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "target.md")
    (tmp_path / "target.md").write_text("keep me")
    for target in (str(link), "/dev/null", str(tmp_path / "missing" / "x.md")):
        result = cli("sessions", "export", sid, "-o", target, "--force")
        assert result.exit_code == 2 and "Traceback" not in result.stderr, (target, result.stderr)
    assert (tmp_path / "target.md").read_text() == "keep me"
    assert not (tmp_path / "missing").exists()


def test_tool_arguments_nested_too_deep_fail_the_call_and_the_session_still_saves(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    junk: object = "x"
    for _ in range(130):
        junk = {"k": [junk]}
    script = write_script(tmp_path, [
        {"text": "reading", "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a", "junk": junk}}]},
        {"text": "done"}, {"text": "again"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "go")
    assert code == 0 and doc["stop"]["verdict"] == "ANSWERED", doc
    assert [c["status"] for c in doc["tool_calls"]] == ["failed"]
    code, doc = cli_json("run", "--session", doc["session_id"], "again")
    assert code == 0 and doc["output_text"] == "again"
    session = SessionStore(sessions_dir()).load(doc["session_id"])
    assert [m.text for m in session.messages if m.role == "user"] == ["go", "again"]


def test_a_fifo_in_place_of_session_json_is_reported_never_waited_on(tmp_path):
    import os

    sid = _session(tmp_path, runs=1)
    path = sessions_dir() / sid / "session.json"
    path.unlink()
    os.mkfifo(path)
    code, doc = cli_json("sessions", "list")  # used to hang for ever
    (row,) = [r for r in doc["sessions"] if r["id"] == sid]
    assert "not a regular file" in row["broken"]
    result = cli("sessions", "show", sid)
    assert result.exit_code == 2 and "not a regular file" in result.stderr
