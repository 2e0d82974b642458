"""Asking for approvals in the terminal during ``amos run`` (issue 19, "Asking in the shell").

When stdin and stderr are terminals (and ``--no-ask`` is not given), an ``ask`` call is
put to the person at the terminal instead of stopping the run WAITING:

- ``y`` run it once; ``s`` run it, and this exact call again without asking for the rest
  of this run; ``a`` always allow the pattern shown (e.g. ``run_command(git status:*)``)
  for the rest of this session, never saved; ``n`` deny it, then a reason the model sees.

The line is read without blocking the event loop (``loop.add_reader``), so Ctrl+C still
cancels the run while a question is open. Only the host API is used.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, TextIO

from amos.safe_text import printable

MAX_TRIES = 5
"""Unrecognised answers accepted before the call is denied."""


class TerminalAsker:
    """Puts ``ApprovalRequested`` events to the person at the terminal.

    Args:
        runner: the host (``answer_approval``, ``permissions.grant``).
        err: where questions are written (stderr).
        fd: the file descriptor answers are read from (stdin's).
    """

    def __init__(self, runner: Any, err: TextIO, fd: int | None = None):
        self.runner = runner
        self.err = err
        self.fd = sys.stdin.fileno() if fd is None else fd
        self._reading: asyncio.Future | None = None

    def cancel(self) -> None:
        """Give up the open question (Ctrl+C): the run is being cancelled."""
        if self._reading is not None and not self._reading.done():
            self._reading.set_result(None)

    async def ask(self, event: Any) -> None:
        """Ask about one ``ApprovalRequested`` event and answer it through the host."""
        self._write(f"\n  ? approval needed: {event.summary}\n")
        if event.escalation:
            why = event.justification or "(the model gave no reason)"
            self._write(f"    it asks to run OUTSIDE the sandbox (full access to your files and network): {why}\n")
        choices = "y yes once · s yes, and this exact call again this run"
        if event.rule:
            choices += f" · a always allow {event.rule} in this session"
        self._write(f"    {choices} · n no\n")
        keys = "y/s/a/n" if event.rule else "y/s/n"
        for _ in range(MAX_TRIES):
            line = await self._read_line(f"  approve? [{keys}] ")
            if line is None:  # stdin closed or Ctrl+C: nobody answers
                self.runner.answer_approval(event.call_id, False, "no answer was given at the terminal")
                return
            answer = line.strip().lower()
            if answer in ("y", "yes"):
                self.runner.answer_approval(event.call_id, True)
                return
            if answer == "s":
                self.runner.answer_approval(event.call_id, True, remember=True)
                return
            if answer == "a" and event.rule:
                rule = self.runner.permissions.grant(event.rule)
                self._write(f"    allowed for this session: {rule}\n")
                self.runner.answer_approval(event.call_id, True)
                return
            if answer in ("n", "no"):
                reason = await self._read_line("  reason for the model (Enter for none): ")
                self.runner.answer_approval(event.call_id, False, (reason or "").strip() or None)
                return
            self._write(f"    answer one of {keys}\n")
        self.runner.answer_approval(event.call_id, False, "no valid answer was given at the terminal")

    def _write(self, text: str) -> None:
        self.err.write(printable(text))
        self.err.flush()

    async def _read_line(self, prompt: str) -> str | None:
        """One line typed at the terminal, or None at end of input or when cancelled."""
        self._write(prompt)
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        buffer = bytearray()

        def ready() -> None:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                chunk = b""
            if future.done():
                return
            if not chunk:
                future.set_result(None)
                return
            buffer.extend(chunk)
            if b"\n" in buffer:
                future.set_result(bytes(buffer).split(b"\n", 1)[0].decode("utf-8", "replace"))

        self._reading = future
        loop.add_reader(self.fd, ready)
        try:
            return await future
        finally:
            loop.remove_reader(self.fd)
            self._reading = None


def can_ask(stdin: TextIO, stderr: TextIO) -> bool:
    """True when a person can answer at this terminal (stdin and stderr are terminals)."""
    try:
        return stdin.isatty() and stderr.isatty()
    except (ValueError, OSError):
        return False
