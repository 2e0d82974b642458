"""Regressions an outside tester found in workspace snapshots, /undo, /rewind and /diff (issue 20).

Each test drives the real CLI (``amos run`` with the scripted provider on a real folder,
real git in the shadow repository) and fails on the code before its fix.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from .support import amos_process, cli, cli_json, user_git, workspace_files, write_script

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")




@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "keep.txt").write_text("original\n")
    (folder / "gone.txt").write_text("will be deleted\n")
    return folder


def _call(name: str, **arguments) -> dict:
    return {"id": f"c{abs(hash((name, json.dumps(arguments, sort_keys=True)))) % 10**6}", "name": name,
            "arguments": arguments}


def _run(tmp_path: Path, ws: Path, turns: list[dict], prompt: str = "go", *, session: str | None = None,
         name: str = "script.json", config: Path | None = None) -> dict:
    args = ["run", "--yes"]
    if turns:  # else a --session run goes on with the session's script
        args += ["--script", str(write_script(tmp_path, turns, name=name))]
    args += ["--session", session] if session else ["--workspace", str(ws)]
    if config is not None:
        args += ["--config", str(config)]
    code, doc = cli_json(*args, prompt)
    assert code == 0, doc
    return doc


# ---------------------------------------------------------------------------- 3: a step cut by kill -9


def test_a_step_cut_by_kill_9_is_in_the_history_and_undo_puts_its_files_back(tmp_path, ws, amos_home):
    before = workspace_files(ws)
    script = write_script(tmp_path, [
        {"tool_calls": [_call("run_command", command="printf agent > keep.txt && rm gone.txt && "
                                                      "printf new > made.txt && sleep 60")]},
        {"text": "never reached"}])
    proc = amos_process("run", "--script", str(script), "--workspace", str(ws), "--yes", "go", cwd=tmp_path,
                        start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (ws / "made.txt").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert (ws / "made.txt").exists(), proc.communicate()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # amos, its command and any git child: nothing finishes
        proc.communicate()
    sid = next((amos_home / "data" / "snapshots").iterdir()).name

    result = cli("run", "--session", sid, "/undo")
    assert result.exit_code == 0, result.output
    assert workspace_files(ws) == before  # keep.txt, gone.txt back; made.txt removed
    assert "cut short" in result.stdout  # says what it could know about that step
    again = cli("run", "--session", sid, "/undo")
    assert again.exit_code == 1 and "nothing to undo" in again.stderr


# ---------------------------------------------------------------------------- 4, 5: rewinds restore checkpoints exactly

CHANGE_TURN = {"tool_calls": [
    _call("write_file", path="made.txt", content="the agent's new file\n"),
    _call("edit_file", path="keep.txt", old_text="original", new_text="agent"),
    _call("run_command", command="rm gone.txt"),
]}


def _two_checkpoints(tmp_path: Path, ws: Path) -> str:
    """Checkpoint 1: before the agent; checkpoint 2: after its changes."""
    doc = _run(tmp_path, ws, [{"text": "looked"}, CHANGE_TURN, {"text": "done"}], "look")
    sid = doc["session_id"]
    _run(tmp_path, ws, [], "change", session=sid)
    return sid


def test_rewind_files_after_undo_force_restores_the_checkpoints_bytes_not_the_overwritten_edit(tmp_path, ws):
    sid = _two_checkpoints(tmp_path, ws)
    agent = workspace_files(ws)
    (ws / "keep.txt").write_text("the user's edit\n")
    forced = cli("run", "--session", sid, "/undo --force")
    assert forced.exit_code == 0, forced.output
    assert (ws / "keep.txt").read_text() == "original\n"

    result = cli("run", "--session", sid, "/rewind 2 --files")
    assert result.exit_code == 0, result.output
    assert workspace_files(ws) == agent  # checkpoint 2's files: the agent's, not the edit /undo --force overwrote
    assert "checkpoint 3: /rewind 3 --files puts them back" in result.stdout

    (ws / "keep.txt").write_text("the user again\n")
    code, refused = cli_json("run", "--session", sid, "/rewind 1 --files")
    assert code == 1 and [c["path"] for c in refused["result"]["files"]["conflicts"]] == ["keep.txt"], refused


def test_the_before_restore_checkpoint_undoes_a_restore_exactly(tmp_path, ws):
    sid = _two_checkpoints(tmp_path, ws)
    (ws / "made.txt").write_text("the user changed the agent's file\n")
    (ws / "mine.txt").write_text("the user's own\n")
    state = workspace_files(ws)
    code, doc = cli_json("sessions", "restore", sid, "--checkpoint", "1", "--force")
    assert code == 0, doc
    undo = doc["undo_checkpoint"]
    assert (ws / "keep.txt").read_text() == "original\n" and not (ws / "made.txt").exists()

    code, back = cli_json("sessions", "restore", sid, "--checkpoint", str(undo))
    assert code == 0, back
    assert workspace_files(ws) == state  # the user's change to made.txt too, byte for byte
    shown = json.loads(cli("sessions", "show", sid, "--json").stdout)
    assert shown["messages"][-1]["parts"][0]["text"] == "done"


def test_sessions_restore_files_takes_a_checkpoint_that_undoes_it(tmp_path, ws):
    sid = _two_checkpoints(tmp_path, ws)
    agent = workspace_files(ws)
    result = cli("sessions", "restore", sid, "--checkpoint", "1", "--files")
    assert result.exit_code == 0, result.output
    code, cps = cli_json("sessions", "checkpoints", sid)
    newest = cps["checkpoints"][-1]
    assert newest["reason"] == "before_restore" and f"--checkpoint {newest['number']} --files" in result.stdout
    assert (ws / "keep.txt").read_text() == "original\n"

    again = cli("sessions", "restore", sid, "--checkpoint", str(newest["number"]), "--files")
    assert again.exit_code == 0, again.output
    assert workspace_files(ws) == agent


# ---------------------------------------------------------------------------- 2: nested git repositories


def _tree_digest(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(folder.rglob("*"))}


def test_files_inside_a_nested_repository_are_snapshotted_and_undone_without_touching_itsuser_git(tmp_path, ws):
    vendored = ws / "vendor" / "lib"
    vendored.mkdir(parents=True)
    (vendored / "lib.py").write_text("print('vendored')\n")
    (vendored / ".gitignore").write_text("*.log\n")
    (vendored / "build.log").write_text("its own ignored log\n")
    user_git(vendored, "init", "-q")
    user_git(vendored, "add", "lib.py", ".gitignore")
    user_git(vendored, "commit", "-qm", "vendored")
    nested_git = _tree_digest(vendored / ".git")
    before = workspace_files(ws)

    doc = _run(tmp_path, ws, [
        {"tool_calls": [_call("run_command", command="printf changed > vendor/lib/lib.py"),
                        _call("write_file", path="vendor/lib/new.py", content="new\n")]},
        {"text": "done"}])
    assert {"path": "vendor/lib/lib.py", "change": "modified"} in doc["files_changed"]
    assert {"path": "vendor/lib/new.py", "change": "added"} in doc["files_changed"]

    result = cli("run", "--session", doc["session_id"], "/undo")
    assert result.exit_code == 0, result.output
    assert workspace_files(ws) == before
    assert _tree_digest(vendored / ".git") == nested_git  # its .git never touched


# ---------------------------------------------------------------------------- 1, 6: what cannot be put back is said


def test_ignored_files_a_command_changed_are_listed_and_undo_says_it_cannot_put_them_back(tmp_path, ws):
    (ws / ".gitignore").write_text("*.log\nbuild/\n")
    (ws / "app.log").write_text("the user's log\n")
    (ws / "build").mkdir()
    (ws / "build" / "out.o").write_text("object\n")
    script = write_script(tmp_path, [
        {"tool_calls": [_call("run_command", command="printf agent > keep.txt && printf new >> app.log && "
                                                      "rm build/out.o")]},
        {"text": "done"}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--yes", "go")
    assert result.exit_code == 0, result.output
    assert "app.log (modified; not restorable" in result.stderr and "build/ (modified; not restorable" in result.stderr
    sid = next((Path(os.environ["AMOS_HOME"]) / "data" / "snapshots").iterdir()).name

    code, undo = cli_json("run", "--session", sid, "/undo")
    assert code == 1 and undo["ok"] is False and undo["error"]["code"] == "NOT_RESTORABLE", undo
    assert undo["result"]["restored"] == ["keep.txt"] and (ws / "keep.txt").read_text() == "original\n"
    assert [u["path"] for u in undo["result"]["unavailable"]] == ["app.log", "build/"]
    assert "NOT put back, no copy was kept: app.log" in undo["error"]["message"]


def test_json_lists_ignored_files_a_command_changed_as_not_restorable(tmp_path, ws):
    (ws / ".gitignore").write_text(".env\n")
    (ws / ".env").write_text("TOKEN=1\n")
    doc = _run(tmp_path, ws, [{"tool_calls": [_call("run_command", command="rm .env")]}, {"text": "done"}])
    assert doc["files_changed"] == [{"path": ".env", "change": "deleted",
                                     "not_restorable": "ignored by the ignore rules, so no copy was kept"}]


# ---------------------------------------------------------------------------- 6: amos diff


def test_amos_diff_never_shows_a_file_too_large_to_keep_as_new(tmp_path, ws):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"checkpoints": {"max_file_bytes": 100}}))
    (ws / "big.txt").write_text("x" * 300)
    doc = _run(tmp_path, ws, [{"tool_calls": [_call("run_command", command="printf small > big.txt")]},
                              {"text": "done"}], config=cfg)
    result = cli("diff", doc["session_id"], "--config", str(cfg))
    assert result.exit_code == 0, result.output
    assert "new file" not in result.stdout and "+small" not in result.stdout
    assert "# modified: big.txt (was larger than checkpoints.max_file_bytes" in result.stdout


def test_amos_diff_stat_is_one_git_like_block(tmp_path, ws):
    doc = _run(tmp_path, ws, [{"tool_calls": [_call("write_file", path="keep.txt", content="one\ntwo\n")]},
                              {"tool_calls": [_call("run_command", command="rm gone.txt")]},
                              {"text": "done"}])
    result = cli("diff", doc["session_id"], "--stat")
    assert result.exit_code == 0, result.output
    assert result.stdout == (" gone.txt | 1 -\n"
                             " keep.txt | 3 ++-\n"
                             " 2 files changed, 2 insertions(+), 2 deletions(-)\n")


# ---------------------------------------------------------------------------- 7: a damaged shadow repository


def test_a_shadow_repository_without_head_is_repaired_in_place_and_undo_still_works(tmp_path, ws, amos_home):
    doc = _run(tmp_path, ws, [{"tool_calls": [_call("write_file", path="keep.txt", content="agent\n")]},
                              {"text": "done"}])
    git_dir = amos_home / "data" / "snapshots" / doc["session_id"] / "git"
    (git_dir / "HEAD").unlink()  # as a crash between git's writes can leave it
    result = cli("run", "--session", doc["session_id"], "/undo")
    assert result.exit_code == 0, result.output
    assert (ws / "keep.txt").read_text() == "original\n"
    assert "snapshot repository" in result.output and "repaired" in result.output


def test_a_recreated_shadow_repository_is_said_and_undo_names_why_it_cannot(tmp_path, ws, amos_home):
    doc = _run(tmp_path, ws, [{"tool_calls": [_call("write_file", path="keep.txt", content="agent\n")]},
                              {"text": "done"}])
    git_dir = amos_home / "data" / "snapshots" / doc["session_id"] / "git"
    shutil.rmtree(git_dir / "objects")
    (git_dir / "objects").write_text("not a folder")  # beyond repair
    result = cli("run", "--session", doc["session_id"], "/undo")
    assert result.exit_code == 1
    assert "recreated" in result.stderr and "earlier snapshots" in result.stderr, result.output
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------------- 8, 9: what the lists and receipts say


def test_rewind_lists_files_off_when_file_checkpoints_are_off(tmp_path, ws):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"checkpoints": {"files": False}}))
    doc = _run(tmp_path, ws, [{"text": "hi"}], config=cfg)
    result = cli("run", "--session", doc["session_id"], "--config", str(cfg), "/rewind")
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if line.strip().startswith("1 "))
    assert row.split()[3] == "off", result.stdout
    assert "checkpoints.files is false" in result.stdout


def test_a_no_save_receipt_does_not_offer_undo(tmp_path, ws):
    script = write_script(tmp_path, [{"tool_calls": [_call("write_file", path="keep.txt", content="agent\n")]},
                                     {"text": "done"}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--yes", "--no-save", "go")
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stderr.splitlines() if "files changed:" in line)
    assert "/undo puts" not in line and "not saved (--no-save)" in line


def test_a_rewind_lists_a_file_the_user_edited_after_the_checkpoint_before_the_agent_changed_it(tmp_path, ws):
    doc = _run(tmp_path, ws, [{"tool_calls": [_call("run_command", command="true")]}, {"text": "looked"},
                              {"tool_calls": [_call("edit_file", path="keep.txt", old_text="user",
                                                    new_text="agent")]}, {"text": "done"}], "look")
    sid = doc["session_id"]  # checkpoint 1 holds keep.txt "original"
    (ws / "keep.txt").write_text("the user's edit\n")
    _run(tmp_path, ws, [], "change", session=sid)
    assert (ws / "keep.txt").read_text() == "the agent's edit\n"

    code, refused = cli_json("sessions", "restore", sid, "--checkpoint", "1", "--files")
    assert code == 1 and [c["path"] for c in refused["files"]["conflicts"]] == ["keep.txt"], refused
    assert "since the checkpoint" in refused["files"]["conflicts"][0]["reason"]
    assert (ws / "keep.txt").read_text() == "the agent's edit\n"
    code, forced = cli_json("sessions", "restore", sid, "--checkpoint", "1", "--files", "--force")
    assert code == 0 and (ws / "keep.txt").read_text() == "original\n", forced
