"""Regressions an outside tester found in workspace snapshots, /undo, /rewind and /diff (issue 20).

Each test drives the real CLI (``amos run`` with the scripted provider on a real folder,
real git in the shadow repository) and fails on the code before its fix.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from .support import amos_process, cli, cli_json, write_script

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")


def _git(cwd: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="u", GIT_AUTHOR_EMAIL="u@x", GIT_COMMITTER_NAME="u", GIT_COMMITTER_EMAIL="u@x")
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _files(ws: Path) -> dict[str, tuple[bytes, int]]:
    """The workspace's files but any .git: name -> (bytes, permission bits)."""
    return {p.relative_to(ws).as_posix(): (p.read_bytes(), stat.S_IMODE(p.lstat().st_mode))
            for p in sorted(ws.rglob("*")) if p.is_file() and ".git" not in p.relative_to(ws).parts}


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
    script = write_script(tmp_path, turns, name=name)
    args = ["run", "--script", str(script), "--yes"]
    args += ["--session", session] if session else ["--workspace", str(ws)]
    if config is not None:
        args += ["--config", str(config)]
    code, doc = cli_json(*args, prompt)
    assert code == 0, doc
    return doc


# ---------------------------------------------------------------------------- 3: a step cut by kill -9


def test_a_step_cut_by_kill_9_is_in_the_history_and_undo_puts_its_files_back(tmp_path, ws, amos_home):
    before = _files(ws)
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
    assert _files(ws) == before  # keep.txt, gone.txt back; made.txt removed
    assert "cut short" in result.stdout  # says what it could know about that step
    again = cli("run", "--session", sid, "/undo")
    assert again.exit_code == 1 and "nothing to undo" in again.stderr
