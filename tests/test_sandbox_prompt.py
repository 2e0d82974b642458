"""``amos run`` asks for approvals in the terminal (issue 19, "Asking in the shell").

The real ``amos`` process on a pseudo-terminal: y runs once, s runs and skips the
question for the identical call later in the run, a grants the pattern shown for the
session (a similar later call runs unasked), n denies with a reason the model sees.
Without a terminal (or with ``--no-ask``) the run stops WAITING as before.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import cli_json, write_script

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs pseudo-terminals")


def command(text: str) -> dict:
    return {"tool_calls": [{"name": "run_command", "arguments": {"command": text}}]}


class Terminal:
    """A child process whose stdin, stdout and stderr are one pseudo-terminal."""

    def __init__(self, *args: str, cwd: Path):
        master, slave = os.openpty()
        self.master = master
        self.proc = subprocess.Popen([sys.executable, "-m", "amos.cli", *args], stdin=slave, stdout=slave,
                                     stderr=slave, cwd=cwd, env=dict(os.environ), close_fds=True)
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and not self._ready(0):
                raise AssertionError(f"{text!r} never appeared; the terminal shows:\n{self.seen}")
            if self._ready(min(left, 0.2)):
                try:
                    self.seen += os.read(self.master, 65536).decode("utf-8", "replace")
                except OSError:
                    pass
        start = self.seen.index(text) + len(text)
        seen, self.seen = self.seen[:start], self.seen[start:]
        return seen

    def _ready(self, timeout: float) -> bool:
        return bool(select.select([self.master], [], [], timeout)[0])

    def send(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def finish(self, timeout: float = 30) -> str:
        self.proc.wait(timeout)
        rest = self.seen
        while self._ready(0.1):
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                break
            if not chunk:
                break
            rest += chunk.decode("utf-8", "replace")
        os.close(self.master)
        return rest


def results(session_path: Path) -> dict[str, str]:
    session = json.loads(session_path.read_text())
    return {p["call_id"]: p["content"] for m in session["messages"] for p in m["parts"]
            if p["part_kind"] == "tool_result"}


def test_y_s_a_and_n_with_a_reason_at_the_terminal(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    turns = [command("echo one"), command("echo two"), command("echo two"), command("git status"),
             command("git status --short"), command("rm -rf important"), {"text": "done"}]
    script = write_script(tmp_path, turns)
    term = Terminal("run", "--script", str(script), "--workspace", str(ws), "--sandbox", "danger-full-access",
                    "go", cwd=tmp_path)
    try:
        term.expect("approve? [y/s/a/n]")
        term.send("y")
        term.expect("approve? [y/s/a/n]")  # echo two
        term.send("s")
        shown = term.expect("approve? [y/s/a/n]")  # the identical echo two ran unasked; now git status
        assert "always allow run_command(git status:*)" in shown
        rule = re.search(r"always allow (.+?) in this session", shown).group(1)
        term.send("a")
        shown = term.expect("approve? [y/s/a/n]")  # git status --short ran unasked; now rm
        assert f"allowed for this session: {rule}" in shown
        term.send("n")
        term.expect("reason for the model")
        term.send("keep the important folder")
        tail = term.finish()
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    assert term.proc.returncode == 0, tail
    session_path = next((Path(os.environ["AMOS_HOME"]) / "data" / "sessions").glob("*/session.json"))
    by_call = results(session_path)
    assert by_call["call_0_0"].startswith("exit code: 0") and "one" in by_call["call_0_0"]
    assert "two" in by_call["call_1_0"] and "two" in by_call["call_2_0"]
    assert by_call["call_3_0"].startswith("exit code:") and by_call["call_4_0"].startswith("exit code:")
    assert by_call["call_5_0"] == "denied by the user: keep the important folder"
    assert (ws / "important").exists() is False  # never existed; the denial is what counts


def test_no_ask_keeps_the_waiting_stop_on_a_terminal(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [command("echo hi"), {"text": "done"}])
    term = Terminal("run", "--script", str(script), "--workspace", str(ws), "--sandbox", "danger-full-access",
                    "--no-ask", "go", cwd=tmp_path)
    tail = term.finish()
    assert term.proc.returncode == 5, tail
    assert "approve?" not in tail and "amos resume" in tail


def test_without_a_terminal_the_run_stops_waiting(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [command("echo hi"), {"text": "done"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--sandbox", "danger-full-access",
                         "go")
    assert code == 5 and doc["stop"]["pending_approvals"][0]["tool"] == "run_command"
