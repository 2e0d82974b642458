"""A full or read-only disk under the sessions folder, for real (issue 17, item 6): once
the journal cannot be written, no write or unknown-effect tool runs, the run ends FAILED
``storage_error``, and what was not saved is said on stderr."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .support import cli, cli_json, write_script


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs (root and mount needed; CI runs as root)."""
    target = tmp_path / "disk"
    target.mkdir()
    try:
        _mount("-t", "tmpfs", "-o", "size=4m", "tmpfs", str(target))
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc}); the store-interface tests in test_session_durability "
                    "cover the same path")
    yield target
    subprocess.run(["umount", "-l", str(target)], capture_output=True)


def _config(tmp_path: Path, sessions: Path) -> Path:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"sessions": {"directory": str(sessions)},
                               "tools": {"permissions": {"write_file": "allow", "run_command": "allow"}}}))
    return cfg


def test_a_full_disk_stops_the_next_write_and_says_what_was_not_saved(tmp_path, small_disk):
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = _config(tmp_path, small_disk / "sessions")
    script = write_script(tmp_path, [
        {"text": "ready"},
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "out.txt", "content": "x"}}]},
        {"text": "written"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "hello")
    assert code == 0
    sid = doc["session_id"]
    filler = small_disk / "filler"
    with open(filler, "wb") as handle:  # take every byte the disk has left
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    try:  # the prompt's own journal entry (64 KiB) cannot fit: durability is lost before any tool
        result = cli("run", "--session", sid, "--config", str(cfg), "now write it " + "x" * 65536)
    finally:
        filler.unlink()
    assert result.exit_code == 1 and "Traceback" not in result.stderr, result.stderr
    assert "FAILED (storage_error/storage_error)" in result.stderr and "No space left on device" in result.stderr
    assert "NOT SAVED:" in result.stderr and "write_file w1" in result.stderr
    assert not (ws / "out.txt").exists()  # the write never ran
    code, doc = cli_json("sessions", "show", sid, "--config", str(cfg))
    assert code == 0  # the saved session is intact (old state)


def test_a_read_only_sessions_folder_stops_the_next_command(tmp_path, small_disk):
    ws = tmp_path / "ws"
    ws.mkdir()
    sessions = small_disk / "sessions"
    cfg = _config(tmp_path, sessions)
    script = write_script(tmp_path, [
        {"text": "ready"},
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "touch ran.txt"}}]},
        {"text": "done"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "hello")
    assert code == 0
    _mount("-o", "remount,ro", str(small_disk))
    try:
        result = cli("run", "--session", doc["session_id"], "--config", str(cfg), "run it")
    finally:
        _mount("-o", "remount,rw", str(small_disk))
    assert "Traceback" not in result.stderr
    if result.exit_code == 2:  # the session's run lock could not even be taken: refused before any run
        assert "read-only" in result.stderr.lower() or "cannot" in result.stderr.lower()
    else:
        assert result.exit_code == 1 and "storage_error" in result.stderr, result.stderr
    assert not (ws / "ran.txt").exists()
    assert os.access(sessions, os.W_OK)
