"""Host completion checks (spec/config.md ``loop_policy.completion``; ``--verify CMD``).

A completion verdict comes from the host — a command's exit status — never from
model text or a tool's claim (spec/stop-receipts.md).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Mapping
from pathlib import Path

from amos.policy.stop import CompletionResult

FEEDBACK_TAIL_CHARS = 1500


class CheckerError(Exception):
    """A completion check could not give a verdict (timed out, could not start)."""


async def run_command_check(
    command: str, *, workspace: Path, env: Mapping[str, str], timeout_s: float
) -> CompletionResult:
    """Run ``command`` in the workspace; exit 0 means complete.

    Args:
        command: shell command.
        workspace: working directory.
        env: child environment (provider key variables already removed).
        timeout_s: limit (seconds).

    Returns:
        ``CompletionResult``; on failure ``feedback`` names the command, its exit code
        and the tail of its output.

    Raises:
        CheckerError: the command timed out or could not start (a checker error,
            never a false verdict).
        asyncio.CancelledError: the run was cancelled (the process group is killed).
    """
    try:
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=str(workspace),
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise CheckerError(f"completion check {command!r} could not start: {exc}") from None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except (TimeoutError, asyncio.CancelledError) as exc:
        _kill_group(proc.pid)
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except (TimeoutError, asyncio.CancelledError):
            pass
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise CheckerError(f"completion check {command!r} timed out after {timeout_s:g} s") from None
    text = out.decode("utf-8", errors="replace")
    if proc.returncode == 0:
        return CompletionResult(complete=True, reason="completed")
    tail = text[-FEEDBACK_TAIL_CHARS:]
    return CompletionResult(
        complete=False,
        reason=f"check exited {proc.returncode}",
        feedback=f"The completion check `{command}` exited {proc.returncode}. Output tail:\n{tail}"[:2000],
    )


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
