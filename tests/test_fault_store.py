"""Issue 17 item 7: a sessions folder that cannot be written is a one-line error, exit 2.

The read-only folder is a real read-only bind mount (root ignores permission bits, so
``chmod`` proves nothing); where the machine does not allow mounting, the new-run case
falls back to a sessions path under a regular *file* (``mkdir`` fails with ENOTDIR) and
the existing-session case is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import cli, cli_json, write_script


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[bool]:
    """Bind-mount ``folder`` read-only onto itself; yields False when mounting is not allowed."""
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        yield False
        return
    done = subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True)
    if done.returncode != 0:
        yield False
        return
    try:
        probe = folder / ".probe"
        try:
            probe.write_text("x")
        except OSError:
            yield True
        else:  # a kernel that ignored "ro" on the first bind
            probe.unlink()
            yield False
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def _config(tmp_path: Path, sessions: Path) -> Path:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"sessions": {"directory": str(sessions)}}))
    return path


def _one_line_exit_2(result, folder: Path) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert str(folder) in lines[0] and "session folder" in lines[0], lines


def test_a_new_run_in_a_read_only_sessions_folder(tmp_path):
    sessions = tmp_path / "sessions"
    script = write_script(tmp_path, [{"text": "hi"}])
    with read_only(sessions) as mounted:
        if not mounted:  # fall back: a path under a regular file
            (tmp_path / "afile").write_text("")
            sessions = tmp_path / "afile" / "sessions"
        result = cli("run", "--config", str(_config(tmp_path, sessions)), "--script", str(script),
                     "--workspace", str(tmp_path), "hello")
    _one_line_exit_2(result, sessions)
    assert "Read-only file system" in result.stderr or "Not a directory" in result.stderr


def test_an_existing_session_in_a_read_only_sessions_folder(tmp_path):
    sessions = tmp_path / "sessions"
    cfg = _config(tmp_path, sessions)
    script = write_script(tmp_path, [{"text": "one"}, {"text": "two"}])
    code, doc = cli_json("run", "--config", str(cfg), "--script", str(script), "--workspace", str(tmp_path), "hi")
    assert code == 0, doc
    before = {p: p.read_bytes() for p in sessions.rglob("*") if p.is_file()}
    with read_only(sessions) as mounted:
        if not mounted:
            pytest.skip("cannot bind-mount a folder read-only here (needs root and mount)")
        result = cli("run", "--config", str(cfg), "--session", doc["session_id"], "more")
    _one_line_exit_2(result, sessions)
    assert "Read-only file system" in result.stderr
    assert {p: p.read_bytes() for p in sessions.rglob("*") if p.is_file()} == before
    assert os.access(sessions, os.W_OK)
