"""Workspace snapshots through the real CLI (issue 20, "What it must show").

A scripted run (real tools on a real folder, real git in the shadow repository) writes
one file, edits another and deletes a third with ``run_command``; ``/undo`` (through
``amos run --session ID "/undo"``) and ``amos sessions restore --files`` bring back the
exact bytes and modes, a file the user added meanwhile is untouched, the user's own
``.git`` with staged changes is byte-identical, and a file the user edited after the
agent is reported and kept without ``--force``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import time
from pathlib import Path

import pytest

from .support import amos_process, cli, cli_json, user_git, workspace_files, write_script

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")

ORIGINAL = {"edit.py": (b"print('v1')\r\n", 0o640), "gone.bin": (b"\x00\xffbinary\r\n", 0o600),
            "cfg.secret": (b"token=original\n", 0o600)}



def _digest(folder: Path) -> dict[str, tuple[int, str]]:
    """relative path -> (mode, sha256) of every entry under ``folder``."""
    out = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(st.st_mode) else b""
        out[path.relative_to(folder).as_posix()] = (st.st_mode, hashlib.sha256(data).hexdigest())
    return out



@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    for name, (data, mode) in ORIGINAL.items():
        (folder / name).write_bytes(data)
        os.chmod(folder / name, mode)
    (folder / ".gitignore").write_text("*.secret\n")
    user_git(folder, "init", "-q")
    user_git(folder, "add", ".gitignore", "edit.py")
    user_git(folder, "commit", "-qm", "base")
    (folder / "edit.py").write_bytes(b"print('staged')\r\n")
    user_git(folder, "add", "edit.py")  # the user has a staged change
    (folder / "edit.py").write_bytes(ORIGINAL["edit.py"][0])
    os.chmod(folder / "edit.py", 0o640)
    return folder


AGENT_TURN = {"tool_calls": [
    {"id": "w", "name": "write_file", "arguments": {"path": "new.txt", "content": "written by the agent\n"}},
    {"id": "e", "name": "edit_file", "arguments": {"path": "edit.py", "old_text": "v1", "new_text": "agent"}},
    {"id": "s", "name": "edit_file", "arguments": {"path": "cfg.secret", "old_text": "original",
                                                   "new_text": "agent"}},
    {"id": "r", "name": "run_command", "arguments": {"command": "rm gone.bin && chmod 755 edit.py"}},
]}


def _agent_run(tmp_path: Path, ws: Path, *more_turns: dict, first: str | None = None) -> tuple[str, dict]:
    """One run that answers (checkpoint 1), then one that changes the files (checkpoint 2)."""
    turns = [{"text": "looked around"}, AGENT_TURN, {"text": "done"}, *more_turns]
    script = write_script(tmp_path, turns)
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), first or "look")
    assert code == 0, doc
    assert doc["files_changed"] == []
    code, doc = cli_json("run", "--session", doc["session_id"], "--yes", "change things")
    assert code == 0, doc
    return doc["session_id"], doc


def test_json_lists_every_file_the_run_changed_including_what_run_command_did(tmp_path, ws):
    sid, doc = _agent_run(tmp_path, ws)
    assert doc["files_changed"] == [
        {"path": "cfg.secret", "change": "modified"}, {"path": "edit.py", "change": "modified"},
        {"path": "gone.bin", "change": "deleted"}, {"path": "new.txt", "change": "added"}]
    rows = json.loads(Path(doc["session_path"]).read_text())["file_history"]["steps"]
    assert [(r["kind"], r["step"]) for r in rows] == [("step", 1)]
    code, cps = cli_json("sessions", "checkpoints", sid)
    assert [(c["number"], c["file_seq"], c["prompt"]) for c in cps["checkpoints"]] == [
        (1, 0, "look"), (2, 1, "change things")]


def test_the_cli_summary_names_the_files_changed(tmp_path, ws):
    script = write_script(tmp_path, [AGENT_TURN, {"text": "done"}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--yes", "go")
    assert result.exit_code == 0, result.stderr
    assert "files changed: cfg.secret (modified), edit.py (modified), gone.bin (deleted), new.txt (created)" \
        in result.stderr


def test_undo_brings_back_exact_bytes_and_modes_and_touches_nothing_else(tmp_path, ws):
    user_git = _digest(ws / ".git")
    before = workspace_files(ws)
    sid, _ = _agent_run(tmp_path, ws, {"expect": {"any_message_contains": "new.txt (removed again"},
                                       "text": "I see the files were put back"})
    assert not (ws / "gone.bin").exists() and (ws / "new.txt").exists()
    (ws / "mine.txt").write_text("the user's own file\n")  # meanwhile

    result = cli("run", "--session", sid, "/undo")
    assert result.exit_code == 0, result.stderr
    assert "put back 4 file(s)" in result.stdout
    now = workspace_files(ws)
    assert now.pop("mine.txt")[0] == b"the user's own file\n"
    assert now == before  # bytes and permission bits of all four, the ignored cfg.secret too
    assert _digest(ws / ".git") == user_git  # the user's .git, index and staged change untouched

    code, doc = cli_json("run", "--session", sid, "what happened?")
    assert code == 0 and doc["output_text"] == "I see the files were put back", doc
    again = cli("run", "--session", sid, "/undo")
    assert again.exit_code == 1 and "nothing to undo" in again.stderr


def test_a_file_the_user_edited_after_the_agent_is_reported_and_kept_without_force(tmp_path, ws):
    sid, _ = _agent_run(tmp_path, ws)
    (ws / "edit.py").write_text("the user's edit after the agent\n")
    agent_state = workspace_files(ws)

    code, doc = cli_json("run", "--session", sid, "/undo")
    assert code == 1 and doc["ok"] is False and doc["error"]["code"] == "FILES_CHANGED"
    assert [c["path"] for c in doc["result"]["conflicts"]] == ["edit.py"]
    assert workspace_files(ws) == agent_state  # nothing at all was put back

    result = cli("run", "--session", sid, "/undo --force")
    assert result.exit_code == 0, result.stderr
    assert workspace_files(ws)["edit.py"] == ORIGINAL["edit.py"] and (ws / "gone.bin").exists()
    assert "overwritten although changed after the agent: edit.py" in result.stdout


def test_sessions_restore_files_refuses_on_a_conflict_then_restores_and_keeps_the_conversation(tmp_path, ws):
    before = workspace_files(ws)
    sid, _ = _agent_run(tmp_path, ws)
    (ws / "mine.txt").write_text("mine\n")
    (ws / "new.txt").write_text("the user changed the agent's file\n")
    agent_state = workspace_files(ws)

    result = cli("sessions", "restore", sid, "--checkpoint", "1", "--files")
    assert result.exit_code == 1
    assert "new.txt (changed after the agent's change)" in result.stderr and "--force" in result.stderr
    assert workspace_files(ws) == agent_state

    code, doc = cli_json("sessions", "restore", sid, "--checkpoint", "1", "--files", "--force")
    assert code == 0, doc
    assert doc["conversation"] is False and sorted(doc["files"]["restored"]) == [
        "cfg.secret", "edit.py", "gone.bin", "new.txt"]
    now = workspace_files(ws)
    assert now.pop("mine.txt")[0] == b"mine\n" and now == before
    shown = cli("sessions", "show", sid, "--json")
    assert "change things" in shown.stdout  # the conversation was not rewound


def test_sessions_restore_defaults_to_both_so_files_and_conversation_agree(tmp_path, ws):
    before = workspace_files(ws)
    sid, _ = _agent_run(tmp_path, ws)
    code, doc = cli_json("sessions", "restore", sid, "--checkpoint", "1")
    assert code == 0, doc
    assert doc["what"] == "both" and doc["conversation"] is True and doc["messages"] == 2
    assert workspace_files(ws) == before
    # and back again: checkpoint 2 holds the agent's files and the conversation after them
    code, doc = cli_json("sessions", "restore", sid, "--checkpoint", "2")
    assert code == 0, doc
    assert (ws / "new.txt").read_text() == "written by the agent\n" and not (ws / "gone.bin").exists()
    assert json.loads(cli("sessions", "show", sid, "--json").stdout)["messages"][-1]["parts"][0]["text"] == "done"


def test_amos_diff_is_plain_when_piped_with_stat_and_clear_errors(tmp_path, ws):
    sid, _ = _agent_run(tmp_path, ws)
    result = cli("diff", sid)
    assert result.exit_code == 0, result.stderr
    assert "-print('v1')" in result.stdout and "+print('agent')" in result.stdout and "\x1b[" not in result.stdout
    assert "deleted file mode 100644" in result.stdout and "-token=original" in result.stdout  # ignored, kept
    stat_result = cli("diff", sid, "--checkpoint", "1", "--stat")
    assert stat_result.exit_code == 0 and "4 files changed" in stat_result.stdout
    code, doc = cli_json("diff", sid)
    assert code == 0 and {f["path"] for f in doc["files"]} == {"cfg.secret", "edit.py", "gone.bin", "new.txt"}
    bad = cli("diff", sid, "--checkpoint", "9")
    assert bad.exit_code == 2 and "no checkpoint 9 (checkpoints: 1, 2)" in bad.stderr
    assert "Traceback" not in bad.stderr + bad.stdout


@pytest.mark.parametrize("line, words", [
    ("/undo now", "unexpected argument 'now'"),
    ("/rewind 1 --files --conversation", "choose one of --files, --conversation and --both"),
    ("/rewind x", "'x' is not a checkpoint number"),
    ("/diff --color", "unknown option '--color'"),
])
def test_bad_slash_input_is_one_line_and_exit_2(tmp_path, ws, line, words):
    sid, _ = _agent_run(tmp_path, ws)
    result = cli("run", "--session", sid, line)
    assert result.exit_code == 2 and words in result.stderr and "usage:" in result.stderr
    assert "Traceback" not in result.stderr


def test_restore_flags_that_exclude_each_other_are_exit_2(tmp_path, ws):
    sid, _ = _agent_run(tmp_path, ws)
    result = cli("sessions", "restore", sid, "-c", "1", "--files", "--both")
    assert result.exit_code == 2 and "choose one of --files, --conversation and --both" in result.stderr


def test_file_checkpoints_off_is_said_and_nothing_breaks(tmp_path, ws):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"checkpoints": {"files": False}}))
    script = write_script(tmp_path, [AGENT_TURN, {"text": "done"}])
    code, doc = cli_json("run", "--config", str(cfg), "--script", str(script), "--workspace", str(ws), "--yes", "go")
    assert code == 0 and doc["files_changed"] == []
    result = cli("run", "--session", doc["session_id"], "/undo")
    assert result.exit_code == 1 and "file checkpoints are off (checkpoints.files is false)" in result.stderr


def test_a_snapshot_failure_never_fails_the_run(tmp_path, ws, amos_home):
    (amos_home / "data").mkdir(parents=True, exist_ok=True)
    (amos_home / "data" / "snapshots").write_text("a file where the snapshots folder goes")
    script = write_script(tmp_path, [AGENT_TURN, {"text": "done"}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--yes", "go")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("amos: warning: snapshots:") == 1 and "without a file checkpoint" in result.stderr
    assert (ws / "new.txt").exists() and not (ws / "gone.bin").exists()  # every tool ran


def test_no_save_still_snapshots_and_undo_works_in_the_same_host(tmp_path, ws, amos_home):
    from .support import collect, finished, make_runner

    script = write_script(tmp_path, [AGENT_TURN, {"text": "done"}])
    before = workspace_files(ws)
    runner, _ = make_runner(script, ws, no_save=True, yes=True)
    try:
        done = finished(collect(runner, "go"))
        assert len(done.files_changed) == 4
        assert list((amos_home / "data" / "snapshots").iterdir())  # under the data folder, not the session store
        import asyncio

        undone = asyncio.run(runner.snapshots.undo())
        assert undone.ok and len(undone.restored) == 4
        assert workspace_files(ws) == before
    finally:
        runner.close()


def _wait_for_git_children(git_dir: Path, timeout_s: float = 30.0) -> None:
    """Until no process holds the repository's lock (git children inherit it)."""
    import fcntl

    deadline = time.monotonic() + timeout_s
    fd = os.open(git_dir.with_name("git.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError("a git child of the killed amos never finished") from None
                time.sleep(0.02)
    finally:
        os.close(fd)


def test_sigkill_during_a_snapshot_leaves_a_usable_repository(tmp_path, amos_home):
    big = tmp_path / "big"
    big.mkdir()
    for i in range(4000):  # enough that the first snapshot takes a while (the library's own crash test
        # kills at random moments; this one kills a real `amos run`)
        folder = big / f"d{i % 40}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i}.txt").write_text(f"file {i}\n" * 20)
    (big / "keep.txt").write_text("original\n")
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "c", "name": "run_command", "arguments": {"command": "true"}}]},
        {"text": "ok"}])
    killed = False
    for _attempt in range(5):
        proc = amos_process("run", "--script", str(script), "--workspace", str(big), "--yes", "go", cwd=tmp_path,
                            start_new_session=True)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if list((amos_home / "data" / "snapshots").glob("*/git/amos-busy")):
                time.sleep(0.05)
                os.killpg(proc.pid, signal.SIGKILL)  # amos and its git children: nothing finishes
                killed = True
                break
            time.sleep(0.005)
        proc.communicate()
        if killed:
            break
    if not killed:
        pytest.skip("the snapshot finished before it could be interrupted")
    git_dir = next((amos_home / "data" / "snapshots").glob("*/git"))
    _wait_for_git_children(git_dir)  # a git child of the killed amos may still finish its command
    stale = (git_dir / "index.lock").exists() or bool(list(git_dir.glob("objects/*/tmp_*")))
    sid = git_dir.parent.name

    script2 = write_script(tmp_path, [
        {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "keep.txt", "content": "agent\n"}}]},
        {"text": "ok"}], name="second.json")
    result = cli("run", "--session", sid, "--script", str(script2), "--yes", "again")
    assert result.exit_code == 0, result.stderr
    if stale:  # what was left is removed, and said
        assert "snapshots: removed" in result.stderr and "interrupted snapshot" in result.stderr, result.stderr
    assert (big / "keep.txt").read_text() == "agent\n"
    undo = cli("run", "--session", sid, "/undo")
    assert undo.exit_code == 0, undo.stderr
    assert (big / "keep.txt").read_text() == "original\n"


def test_deleting_a_session_deletes_its_snapshots(tmp_path, ws, amos_home):
    sid, _ = _agent_run(tmp_path, ws)
    folder = amos_home / "data" / "snapshots" / sid
    assert (folder / "git").is_dir()
    result = cli("sessions", "delete", sid)
    assert result.exit_code == 0, result.stderr
    assert not folder.exists()


def test_an_unknown_checkpoint_is_bad_input_for_rewind_and_diff(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"text": "hi"}], name="hi.json")
    first = cli("run", "--script", str(script), "--workspace", str(ws), "--json", "hi")
    assert first.exit_code == 0, first.output
    sid = json.loads(first.stdout)["session_id"]
    for line in ("/rewind 99", "/diff 99"):
        result = cli("run", "--session", sid, line)
        assert result.exit_code == 2 and "no checkpoint 99" in result.stderr, (line, result.output)
        assert "Traceback" not in result.output
