"""Issue 17 item 11: Ctrl+C in the first fraction of a second exits 130 without a traceback.

The real ``amos`` console script is started several times and sent SIGINT at staggered
early moments (while Python imports the CLI, parses options, loads the config, starts
the run). From the first statement of amos's entry point on, every one must exit 130
with no ``KeyboardInterrupt`` traceback. A signal that lands before the entry point
runs at all (the interpreter's own start-up, its ``site`` imports, the console script's
first lines) is outside amos's reach; such a traceback names no file of the amos package,
and it is told apart by exactly that.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import amos

from .support import write_script

PACKAGE = str(Path(amos.__file__).resolve().parent) + os.sep
AFTER_ENTRY = (0.0, 0.02, 0.05, 0.1, 0.15, 0.25)
"""Seconds after the moment the entry point starts (measured with ``amos --version``)."""
MIN_QUIET = 3
"""Interruptions that must land after the entry point started (and exit 130 quietly)."""


def _console_script() -> list[str]:
    script = Path(sys.executable).with_name("amos")
    return [str(script)] if script.exists() else [sys.executable, "-m", "amos"]


def _amos_frames(stderr: str) -> list[str]:
    """Traceback frames in a file of the amos package."""
    return [line for line in stderr.splitlines()
            if line.strip().startswith('File "') and line.split('"')[1].startswith(PACKAGE)]


def _time_to_entry(env: dict[str, str]) -> float:
    """Seconds from spawning the console script to its entry point running (``--version``
    returns right there), the fastest of three."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([*_console_script(), "--version"], capture_output=True, env=env, timeout=30, check=True)
        times.append(time.perf_counter() - started)
    return min(times)


def test_sigint_at_early_moments_exits_130_quietly(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 5"}}]},
                                     {"text": "done"}])
    commands = [["run", "--yes", "--script", str(script), "--workspace", str(ws), "hi"], ["sessions", "list"]]
    env = {**os.environ, "AMOS_HOME": str(tmp_path / "home")}
    entry = _time_to_entry(env)
    quiet = 0
    offsets = list(AFTER_ENTRY)
    while offsets:
        offset = offsets.pop(0)
        n = len(AFTER_ENTRY) - len(offsets)
        proc = subprocess.Popen([*_console_script(), *commands[n % 2]], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        time.sleep(entry + offset)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        delay, code = round(entry + offset, 3), proc.returncode
        assert not _amos_frames(err), f"SIGINT at {delay}s: traceback inside amos\n{err[-2000:]}"
        early = "Traceback" in err or "Fatal Python error" in err
        if not early:  # (a traceback naming no amos file: before amos's entry point ran)
            assert code in (130, -signal.SIGINT, 0), (delay, code, err[-500:])
            assert "Aborted!" not in err, (delay, err)
            quiet += code == 130
        if code != 130 and not offsets and quiet < MIN_QUIET and offset < 2.0:
            offsets.append(offset + 0.2)  # a slow start-up on a loaded machine: try later moments too
    assert quiet >= MIN_QUIET, f"only {quiet} runs were interrupted after amos's entry point started"


def test_the_entry_module_imports_nothing_the_interpreter_has_not_loaded():
    probe = ("import sys; before = set(sys.modules); import amos.__main__; "
             "print(sorted(set(sys.modules) - before - {'amos', 'amos.__main__'}))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
    started = time.perf_counter()
    subprocess.run([*_console_script(), "--version"], capture_output=True, timeout=30, check=True)
    assert time.perf_counter() - started < 10
