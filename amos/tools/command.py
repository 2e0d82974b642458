"""``run_command`` and the child environment (spec/tools.md).

The command runs through the shell in its own session (``start_new_session=True``), so
its process group id is the shell's pid and everything it starts can be stopped
together: SIGTERM to the group, then SIGKILL after ``KILL_GRACE_S``. That happens on
timeout, on asyncio cancellation, and when the shell exits while background processes
it started are still running. Nothing the command starts inside its process group
outlives the call. ``run_command`` is not a sandbox: the guard is the ``ask``
permission.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any

from pydantic import Field

from amos.tools.base import Tool, ToolArgs, ToolContext, ToolTimeout

ALWAYS_DROPPED_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
"""Provider key variables removed from every child environment, configured or not."""

MAX_TAIL_BYTES = 32 * 1024
"""Most bytes kept of the end of stdout and of stderr (each)."""

KILL_GRACE_S = 1.0
"""Seconds between SIGTERM and SIGKILL when stopping a process group."""

PIPE_DRAIN_S = 2.0
"""Seconds to wait for output pipes to close after the process group is gone."""


def child_env(base: Mapping[str, str], key_vars: Iterable[str | None]) -> dict[str, str]:
    """The environment for child processes: ``base`` minus every provider key variable.

    Args:
        base: the user's environment (usually ``os.environ``).
        key_vars: names of provider key variables (each provider's ``api_key_env``);
            ``None`` entries are ignored. ``ALWAYS_DROPPED_VARS`` are dropped as well.

    Returns:
        A new dict; ``base`` is not modified.
    """
    dropped = set(ALWAYS_DROPPED_VARS)
    dropped.update(name for name in key_vars if name)
    return {name: value for name, value in base.items() if name not in dropped}


class RunCommandArgs(ToolArgs):
    """Arguments of ``run_command``."""

    command: str = Field(
        min_length=1, description="Shell command, run with the workspace as working directory."
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Time limit in seconds (capped by the configured command timeout).",
    )


class _Tail:
    """The last ``limit`` bytes of a stream, and how many bytes came before them."""

    def __init__(self, limit: int):
        self.limit = limit
        self.buffer = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.buffer += chunk
        if len(self.buffer) > self.limit:
            del self.buffer[: len(self.buffer) - self.limit]

    def text(self) -> str:
        data = bytes(self.buffer)
        cut = self.total - len(data)
        if cut:
            # Drop UTF-8 continuation bytes left over from a character cut in half.
            start = 0
            while start < min(len(data), 4) and (data[start] & 0xC0) == 0x80:
                start += 1
            data = data[start:]
            cut += start
        text = data.decode("utf-8", errors="replace")
        if cut:
            return f"[… {cut} bytes cut; showing the last {len(data)} bytes …]\n{text}"
        return text


async def _pump(stream: asyncio.StreamReader | None, tail: _Tail) -> None:
    if stream is None:
        return
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return
        tail.add(chunk)


def _group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running (zombies do not count).

    ``killpg(pgid, 0)`` settles "no such group". Otherwise, where ``/proc`` lists the
    group's members, zombies are discounted (an orphan whose new parent never reaps it
    would look alive forever); when ``/proc`` shows no member at all (another PID
    namespace), the probe's answer stands.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    members = _proc_group_states(pgid)
    if not members:
        return True
    return any(state not in (b"Z", b"X") for state in members)


def _proc_group_states(pgid: int) -> list[bytes]:
    """The ``/proc`` states (``R``, ``S``, ``Z``…) of the members of group ``pgid``."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    states: list[bytes] = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read()
            fields = stat[stat.rindex(b")") + 2 :].split()
            if int(fields[2]) == pgid:
                states.append(fields[0])
        except (OSError, ValueError, IndexError):
            continue
    return states


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _stop_group(pgid: int) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after ``KILL_GRACE_S``.

    Both signals are sent whatever the liveness probe says (they are harmless to a
    group that is gone), so a wrong probe can only cost time, never leave a process.
    """
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline and _group_alive(pgid):
        await asyncio.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline and _group_alive(pgid):
        await asyncio.sleep(0.02)


async def _finish_pumps(pumps: list[asyncio.Task[None]]) -> None:
    """Let the output readers reach end of file; give up after ``PIPE_DRAIN_S``."""
    _, pending = await asyncio.wait(pumps, timeout=PIPE_DRAIN_S)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pumps, return_exceptions=True)


async def _wait_exit(proc: asyncio.subprocess.Process, limit: float) -> bool:
    """Wait up to ``limit`` seconds for the shell to exit; True when it did.

    Polls ``returncode`` rather than awaiting ``proc.wait()``: on Python 3.11 that
    only returns once every output pipe is closed, which a background process holding
    the pipe open would delay until the time limit.
    """
    deadline = time.monotonic() + limit
    delay = 0.005
    while proc.returncode is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)
    return True


async def _cleanup(proc: asyncio.subprocess.Process, pumps: list[asyncio.Task[None]]) -> None:
    await _stop_group(proc.pid)
    await _wait_exit(proc, KILL_GRACE_S)
    await _finish_pumps(pumps)


async def _shielded(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` to the end even if the caller is cancelled again meanwhile."""
    task = asyncio.ensure_future(coro)
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            continue
        except Exception:  # cleanup is best effort; the caller re-raises
            return


def _effective_limit(args: RunCommandArgs, ctx: ToolContext) -> float:
    if args.timeout_s is None:
        return ctx.command_timeout_s
    return min(args.timeout_s, ctx.command_timeout_s)


async def _run_command(args: RunCommandArgs, ctx: ToolContext) -> dict[str, Any]:
    limit = _effective_limit(args, ctx)
    tail_bytes = max(1024, min(MAX_TAIL_BYTES, (ctx.max_output_bytes - 1024) // 2))
    env = dict(ctx.env) if ctx.env else child_env(os.environ, ())
    stdout, stderr = _Tail(tail_bytes), _Tail(tail_bytes)
    proc = await asyncio.create_subprocess_shell(
        args.command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ctx.workspace,
        env=env,
        start_new_session=True,
    )
    pumps = [
        asyncio.ensure_future(_pump(proc.stdout, stdout)),
        asyncio.ensure_future(_pump(proc.stderr, stderr)),
    ]
    try:
        if not await _wait_exit(proc, limit):
            await _cleanup(proc, pumps)
            partial = {
                "exit_code": proc.returncode,
                "stdout": stdout.text(),
                "stderr": stderr.text(),
                "timed_out": True,
            }
            raise ToolTimeout(
                f"command timed out after {limit:g} s; its process group was killed",
                partial=render_command_result(partial),
            ) from None
        background = _group_alive(proc.pid)
        if background:
            await _stop_group(proc.pid)
        await _finish_pumps(pumps)
    except BaseException:
        # Cancellation (or anything unexpected): leave no process behind, then re-raise.
        await _shielded(_cleanup(proc, pumps))
        raise
    err_text = stderr.text()
    if background:
        note = "[amos: background processes the command left running were stopped]"
        separator = "\n" if err_text and not err_text.endswith("\n") else ""
        err_text = f"{err_text}{separator}{note}"
    return {
        "exit_code": proc.returncode,
        "stdout": stdout.text(),
        "stderr": err_text,
        "timed_out": False,
    }


def render_command_result(result: Mapping[str, Any]) -> str:
    """The text the model sees of a ``run_command`` result.

    Args:
        result: ``{"exit_code": int | None, "stdout": str, "stderr": str, "timed_out": bool}``.

    Returns:
        ``exit code: N`` then ``--- stdout ---`` and ``--- stderr ---`` sections
        (``(empty)`` when a stream printed nothing).
    """
    code = result.get("exit_code")
    if result.get("timed_out"):
        head = "exit code: none (timed out)"
    elif isinstance(code, int) and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        head = f"exit code: {code} (killed by {name})"
    else:
        head = f"exit code: {code}"
    parts = [head]
    for stream in ("stdout", "stderr"):
        text = str(result.get(stream) or "")
        parts.append(f"--- {stream} ---")
        parts.append(text.rstrip("\n") if text else "(empty)")
    return "\n".join(parts) + "\n"


def _summarize_command(args: RunCommandArgs) -> str:
    return " ".join(args.command.split())


RUN_COMMAND = Tool(
    name="run_command",
    description=(
        "Run a shell command with the workspace as working directory. Returns the exit "
        "code and the ends of stdout and stderr. A non-zero exit code is reported, not "
        "an error. On timeout the command and everything it started are killed; "
        "background processes still running when it exits are stopped."
    ),
    args_model=RunCommandArgs,
    effect="unknown",
    run=_run_command,
    default_permission="ask",
    summarize=_summarize_command,
    render=render_command_result,
    manages_timeout=True,
)
