"""Issue 17 items 8 and 9: a FIFO or a device where amos reads a file never hangs it.

Every case uses a real FIFO (``os.mkfifo``). Before the fix the read blocked for good;
so that a regression fails instead of hanging the suite, :class:`Unblocker` plays the
missing writer: once something has opened the FIFO for reading it opens and closes the
write end, the blocked read returns empty, and the assertions on what amos says fail.
``/dev/zero`` (read until memory ran out) is tried in a child process with a memory limit.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from amos.safe_read import FileTooLargeError, NotRegularFileError, read_regular

from .support import cli, cli_json, write_script


class Unblocker:
    """Open and close the write end of FIFOs whenever a reader waits on one (and record it)."""

    def __init__(self, *fifos: Path):
        self.fifos = fifos
        self.unblocked: list[Path] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for fifo in self.fifos:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError as exc:  # ENXIO: nobody is reading: nothing waits on it
                    if exc.errno not in (errno.ENXIO, errno.ENOENT):
                        raise
                    continue
                # A reader that only opened to look (O_NONBLOCK, fstat, close) never sleeps on
                # the FIFO; one that hangs is asleep in open() or read() on it (the CLI runs in
                # this process's main thread, whose system call /proc shows).
                if _main_thread_waits_on(fifo):
                    self.unblocked.append(fifo)
                os.close(fd)
            self._stop.wait(0.05)

    def __enter__(self) -> Unblocker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


_READ, _OPENAT, _OPEN = 0, 257, 2  # x86_64 system call numbers


def _main_thread_waits_on(fifo: Path, samples: int = 5) -> bool:
    """Whether the main thread sleeps in read() on ``fifo`` or in an open() that lasts
    (``samples`` looks 20 ms apart); where /proc cannot tell, any reader counts."""
    syscall = Path(f"/proc/self/task/{threading.main_thread().native_id}/syscall")
    seen = 0
    for _ in range(samples):
        try:
            fields = syscall.read_text().split()
        except OSError:
            return True
        number = int(fields[0]) if fields and fields[0].lstrip("-").isdigit() else -1
        if number == _READ:
            try:
                if os.readlink(f"/proc/self/fd/{int(fields[1], 16)}") == str(fifo):
                    return True
            except (OSError, ValueError, IndexError):
                pass
        seen += number in (_OPENAT, _OPEN)
        time.sleep(0.02)
    return seen == samples


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


# ---------------------------------------------------------------------------------- item 9: the helper


def test_the_safe_read_helper_refuses_fifos_devices_and_folders_and_caps_size(tmp_path):
    fifo = _fifo(tmp_path / "pipe")
    with Unblocker(fifo) as unblocker:
        with pytest.raises(NotRegularFileError, match="FIFO"):
            read_regular(fifo)
        with pytest.raises(NotRegularFileError, match="character device"):
            read_regular("/dev/zero")
        with pytest.raises(NotRegularFileError, match="folder"):
            read_regular(tmp_path)
    assert unblocker.unblocked == []  # the open itself never waited for a writer
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(FileTooLargeError, match="101|100 bytes"):
        read_regular(big, max_bytes=100)
    assert read_regular(big, max_bytes=101) == b"x" * 101
    os.symlink(big, tmp_path / "link")
    assert read_regular(tmp_path / "link", max_bytes=200) == b"x" * 101
    with pytest.raises(OSError) as info:
        read_regular(tmp_path / "link", follow_symlinks=False)
    assert info.value.errno == errno.ELOOP


# ---------------------------------------------------------------------------------- item 9: config files


@pytest.mark.parametrize("where", ["--config", "project", "user"])
def test_a_config_file_that_is_a_fifo_is_a_one_line_error_exit_2(tmp_path, amos_home, monkeypatch, where):
    project = tmp_path / "proj"
    project.mkdir()
    script = write_script(tmp_path, [{"text": "hi"}])
    args = ["run", "--script", str(script), "--workspace", str(project)]
    if where == "--config":
        fifo = _fifo(tmp_path / "cfg.json")
        args += ["--config", str(fifo)]
    elif where == "project":
        fifo = _fifo(project / "amos.json")
    else:
        fifo = _fifo(amos_home / "config" / "config.json")
    monkeypatch.chdir(project)
    with Unblocker(fifo) as unblocker:
        result = cli(*args, "hello")
    assert unblocker.unblocked == [], "amos waited for a writer on the FIFO"
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert str(fifo.name) in lines[0] and "FIFO" in lines[0], lines


def test_dev_zero_as_the_config_is_refused_not_read_until_memory_runs_out(tmp_path):
    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    env = {**os.environ, "AMOS_HOME": str(tmp_path / "home")}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "amos.cli", "config", "check", "/dev/zero"],
                          capture_output=True, text=True, timeout=60, env=env, preexec_fn=limit_memory)
    assert proc.returncode == 2, proc.stderr[-500:]
    assert proc.stderr.count("\n") == 1 and "/dev/zero" in proc.stderr and "character device" in proc.stderr
    assert time.monotonic() - started < 30


def test_a_config_over_the_size_cap_is_refused(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b'{"model": "x"' + b" " * (5 << 20) + b"}")
    result = cli("config", "check", str(big))
    assert result.exit_code == 2 and "larger than" in result.stderr and "big.json" in result.stderr


# ---------------------------------------------------------------------------------- item 9: other files


def test_a_script_that_is_a_fifo_is_refused(tmp_path):
    fifo = _fifo(tmp_path / "script.json")
    with Unblocker(fifo) as unblocker:
        result = cli("run", "--script", str(fifo), "--workspace", str(tmp_path), "hi")
    assert unblocker.unblocked == []
    assert result.exit_code == 2 and "script.json" in result.stderr and "FIFO" in result.stderr


def test_a_custom_command_file_that_is_a_fifo_is_skipped_never_waited_on(tmp_path, amos_home):
    fifo = _fifo(amos_home / "config" / "commands" / "hang.md")
    script = write_script(tmp_path, [{"text": "hi"}])
    with Unblocker(fifo) as unblocker:
        result = cli("run", "--script", str(script), "--workspace", str(tmp_path), "/hang")
    assert unblocker.unblocked == []
    assert "Traceback" not in result.stderr and "hang" in result.stderr


def test_agents_md_that_is_a_fifo_is_not_read(tmp_path):
    ws = tmp_path / "ws"
    fifo = _fifo(ws / "AGENTS.md")
    script = write_script(tmp_path, [{"text": "hi"}])
    with Unblocker(fifo) as unblocker:
        code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "hi")
    assert unblocker.unblocked == []
    assert code == 0, doc


def test_a_journal_or_lock_owner_that_is_a_fifo_never_hangs_sessions_list(tmp_path):
    script = write_script(tmp_path, [{"text": "one"}, {"text": "two"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "hi")
    assert code == 0
    folder = Path(doc["session_path"]).parent
    (folder / "journal.jsonl").unlink()
    journal = _fifo(folder / "journal.jsonl")
    owner = folder.parent / f".{folder.name}.lock.owner"
    owner.unlink(missing_ok=True)
    _fifo(owner)
    with Unblocker(journal, owner) as unblocker:
        listed = cli("sessions", "list")
        again = cli("run", "--session", folder.name, "more")
    assert unblocker.unblocked == []
    assert listed.exit_code == 0 and folder.name in listed.stdout
    assert "Traceback" not in again.stderr and again.exit_code == 2 and "FIFO" in again.stderr


# ---------------------------------------------------------------------------------- item 8: file tools


def _run_tools(tmp_path: Path, ws: Path, calls: list[dict], *fifos: Path) -> tuple[int, dict, Unblocker]:
    script = write_script(tmp_path, [{"tool_calls": calls}, {"text": "done"}])
    with Unblocker(*fifos) as unblocker:
        code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), "look")
    return code, doc, unblocker


def _results(doc: dict) -> dict[str, dict]:
    return {c["call_id"]: c for c in doc["tool_calls"]}


def test_read_edit_and_write_refuse_a_fifo_before_opening_it(tmp_path):
    ws = tmp_path / "ws"
    fifo = _fifo(ws / "pipe.txt")
    code, doc, unblocker = _run_tools(tmp_path, ws, [
        {"id": "r", "name": "read_file", "arguments": {"path": "pipe.txt"}},
        {"id": "e", "name": "edit_file", "arguments": {"path": "pipe.txt", "old_text": "a", "new_text": "b"}},
        {"id": "w", "name": "write_file", "arguments": {"path": "pipe.txt", "content": "x"}},
    ], fifo)
    assert unblocker.unblocked == [], "a file tool opened the FIFO and waited"
    assert code == 0, doc
    calls = _results(doc)
    for call_id in "rew":
        assert calls[call_id]["status"] == "failed", calls[call_id]
    session = json.loads(Path(doc["session_path"]).read_text())
    texts = [p["content"] for m in session["messages"] for p in m["parts"] if p.get("part_kind") == "tool_result"]
    assert all("pipe.txt" in t and "FIFO" in t for t in texts), texts
    assert fifo.is_fifo()  # write_file did not replace it


def test_search_text_skips_a_fifo_and_says_so(tmp_path):
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "a.txt").write_text("needle here\n")
    fifo = _fifo(ws / "sub" / "pipe.txt")
    gitignore = _fifo(ws / "sub" / ".gitignore")
    code, doc, unblocker = _run_tools(tmp_path, ws, [
        {"id": "s", "name": "search_text", "arguments": {"pattern": "needle"}},
        {"id": "t", "name": "search_text", "arguments": {"pattern": "needle", "path": "sub/pipe.txt"}},
    ], fifo, gitignore)
    assert unblocker.unblocked == []
    assert code == 0, doc
    session = json.loads(Path(doc["session_path"]).read_text())
    texts = {p["call_id"]: p["content"] for m in session["messages"] for p in m["parts"]
             if p.get("part_kind") == "tool_result"}
    assert "sub/a.txt:1: needle here" in texts["s"] and "not a regular file" in texts["s"]
    assert "FIFO" in texts["t"] and _results(doc)["t"]["status"] == "failed"
