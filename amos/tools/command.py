"""``run_command`` and the child environment (spec/tools.md).

The command runs through the shell in its own session (``start_new_session=True``), so
its process group id is the shell's pid and everything it starts can be stopped
together: SIGTERM to the group, then SIGKILL after ``KILL_GRACE_S``. That happens on
timeout, on asyncio cancellation, and when the shell exits while background processes
it started are still running. Nothing the command starts inside its process group
outlives the call.

Its stdout and stderr are pipes, read through an ``asyncio.SubprocessProtocol`` that
keeps only the last bytes of each (and counts the rest), so endless output costs
neither memory nor disk, and a command that reopens its output by name
(``echo x > /dev/stderr``) loses nothing it wrote before. Once the shell has exited and
its group is gone, the call waits up to ``PIPE_DRAIN_S`` for both pipes to close. A pipe
still open then is held by a process the command started outside its process group
(``setsid cmd &``, a job-control group): on Linux those processes are found through
``/proc/*/fd`` (links to the pipe's inode) and stopped with their process groups,
SIGTERM then SIGKILL, and the stderr note says so. Whatever happens (exit, timeout,
cancellation, an error), the subprocess transport is closed before the call returns or
re-raises, so none outlives it (and none is left to complain after the event loop has
closed).

Sandbox (issue 19): when the context carries a launcher (``ToolContext.sandbox``), the
process started is bwrap (amos/sandbox/bwrap.py), in its own session as above; the
shell runs inside it in a new PID namespace. When the shell exits, bwrap exits and
everything left inside is killed with the namespace (``--die-with-parent``), so
background and ``setsid`` processes end with the command; stopping bwrap's group on a
timeout or a cancellation does the same. The result then carries ``sandbox``: the mode
and network setting the command ran with, and a note when stderr shows the sandbox
refused something. A call with ``"sandbox": "none"`` runs unsandboxed only when the
context says a person approved it (``sandbox_escalation_approved``).

Limits: without a launcher ``run_command`` is not a sandbox; the guard is the ``ask``
permission. A process that leaves both the process group and the pipes
(``setsid cmd >/dev/null 2>&1 &``, a daemon) is then not found and may keep running
after the call. Without ``/proc`` (macOS) processes holding a pipe are not looked for:
after ``PIPE_DRAIN_S`` the pipes are closed on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, field_validator

from amos.errors import SandboxError
from amos.tools.base import Tool, ToolArgs, ToolContext, ToolFailure, ToolTimeout
from amos.tools.command_sandbox import RUN_COMMAND_NAME, add_sandbox_result, sandbox_use
from amos.tools.summaries import summarize_run_command

ALWAYS_DROPPED_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
"""Provider key variables removed from every child environment, configured or not."""

MAX_TAIL_BYTES = 32 * 1024
"""Most bytes kept of the end of stdout and of stderr (each)."""

KILL_GRACE_S = 1.0
"""Seconds between SIGTERM and SIGKILL when stopping a process group."""

PIPE_DRAIN_S = 2.0
"""Seconds to wait for the output pipes to close once the command's group is gone."""

POLL_S = 0.05
"""Longest pause between two looks at a process group or at the pipes' holders."""


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

    @field_validator("command")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("the command contains a NUL byte, which no shell command can hold")
        return value


class SandboxedRunCommandArgs(RunCommandArgs):
    """Arguments of ``run_command`` when commands run in the sandbox: the model may ask to
    run one unsandboxed (issue 19), which a person must approve."""

    sandbox: Literal["none"] | None = Field(
        default=None,
        description='"none" asks to run unsandboxed (a person must approve).',
    )
    justification: str | None = Field(
        default=None, max_length=500, description='Why, with "sandbox": "none".'
    )


class _Tail:
    """The last ``limit`` bytes of a stream, and how many bytes came before them."""

    def __init__(self, limit: int):
        self.limit = limit
        self.buffer = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if len(chunk) >= self.limit:
            self.buffer = bytearray(chunk[len(chunk) - self.limit :])
            return
        self.buffer += chunk
        excess = len(self.buffer) - self.limit
        if excess > 0:
            del self.buffer[:excess]

    def text(self) -> str:
        """The kept end, after a note saying how many bytes came before it."""
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


class _CommandProtocol(asyncio.SubprocessProtocol):
    """Keeps the tails of fd 1 and fd 2; says when the shell exited and the pipes closed."""

    def __init__(self, limit: int):
        loop = asyncio.get_running_loop()
        self.tails = {1: _Tail(limit), 2: _Tail(limit)}
        self.open_fds = {1, 2}
        self.exited: asyncio.Future[None] = loop.create_future()
        self.pipes_closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        tail = self.tails.get(fd)
        if tail is not None:
            tail.add(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.open_fds.discard(fd)
        if not self.open_fds and not self.pipes_closed.done():
            self.pipes_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def _wait_for(future: asyncio.Future[None], limit: float) -> bool:
    """Wait up to ``limit`` seconds for ``future`` (never cancelling it); True when done."""
    if not future.done() and limit > 0:
        await asyncio.wait({future}, timeout=limit)
    return future.done()


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
        await asyncio.sleep(POLL_S)
    _signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline and _group_alive(pgid):
        await asyncio.sleep(0.02)


def _pipe_links(transport: asyncio.SubprocessTransport, protocol: _CommandProtocol) -> set[str]:
    """``/proc`` link names (``pipe:[INODE]``) of the output pipes still open.

    Taken from our own read ends, which are open as long as the pipe transport is: a
    pipe already closed is left out (nothing holds it any more, and its inode could be
    reused).
    """
    links: set[str] = set()
    for fd in sorted(protocol.open_fds):
        pipe_transport = transport.get_pipe_transport(fd)
        if pipe_transport is None or pipe_transport.is_closing():
            continue
        pipe = pipe_transport.get_extra_info("pipe")
        try:
            links.add(f"pipe:[{os.fstat(pipe.fileno()).st_ino}]")
        except (AttributeError, ValueError, OSError):
            continue
    return links


def _holders(links: set[str]) -> set[int]:
    """Processes, not ours nor of our session, with a descriptor linked to ``links`` (Linux).

    Only the command's descendants can hold the write ends; our own process holds
    the read ends, and the session test keeps a process of ours that got a descriptor
    some other way (a fork) out of reach. Empty where ``/proc`` is missing.
    """
    if not links or not sys.platform.startswith("linux"):
        return set()
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
        own_session = os.getsid(0)
    except OSError:
        return set()
    me = os.getpid()
    found: set[int] = set()
    for pid in pids:
        if pid == me:
            continue
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") in links:
                    if os.getsid(pid) != own_session:
                        found.add(pid)
                    break
            except OSError:
                continue
    return found


def _holder_group(pid: int) -> int | None:
    """The process group of holder ``pid`` when it may be signalled whole, else None."""
    try:
        pgid, sid = os.getpgid(pid), os.getsid(pid)
    except OSError:
        return None
    if pgid <= 1 or pgid == os.getpgrp() or sid == os.getsid(0):
        return None
    return pgid


async def _find_holders(
    transport: asyncio.SubprocessTransport, protocol: _CommandProtocol
) -> set[int]:
    """The holders of the output pipes still open, found in a worker thread (Linux)."""
    links = _pipe_links(transport, protocol)
    if not links:
        return set()
    pids = await asyncio.to_thread(_holders, links)
    if not _pipe_links(transport, protocol):  # the pipes closed meanwhile
        return set()
    return pids


async def _stop_holders(transport: asyncio.SubprocessTransport, protocol: _CommandProtocol) -> bool:
    """Stop processes outside the command's group still holding its output pipes (Linux).

    A holder and its process group get SIGTERM, then SIGKILL after ``KILL_GRACE_S``
    (the group too: what a holder started in its own new session or group is the
    command's doing as well). True when there was any holder.
    """
    if not sys.platform.startswith("linux"):
        return False
    pids = await _find_holders(transport, protocol)
    if not pids:
        return False
    groups: set[int] = set()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            group = _holder_group(pid)
            if group is not None:
                groups.add(group)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        for group in groups:
            _signal_group(group, sig)
        deadline = time.monotonic() + KILL_GRACE_S
        while time.monotonic() < deadline:
            await _wait_for(protocol.pipes_closed, POLL_S)
            pids = await _find_holders(transport, protocol)
            if not pids and not any(_group_alive(group) for group in groups):
                break
            if protocol.pipes_closed.done():
                await asyncio.sleep(POLL_S)
    return True


async def _settle(
    transport: asyncio.SubprocessTransport, protocol: _CommandProtocol, *, stop_group: bool
) -> bool:
    """Leave no process behind; True when holders outside the group were stopped.

    Stops the command's group (when asked), waits for the shell to exit and for the
    pipes to close (at most ``PIPE_DRAIN_S``), then stops whatever still holds them.
    """
    if stop_group:
        await _stop_group(transport.get_pid())
    await _wait_for(protocol.exited, KILL_GRACE_S)
    if await _wait_for(protocol.pipes_closed, PIPE_DRAIN_S):
        return False
    escaped = await _stop_holders(transport, protocol)
    if escaped:
        await _wait_for(protocol.pipes_closed, KILL_GRACE_S)  # their last output
    return escaped


async def _shielded(coro: Coroutine[Any, Any, Any]) -> None:
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


def _with_notes(text: str, notes: list[str]) -> str:
    for note in notes:
        separator = "\n" if text and not text.endswith("\n") else ""
        text = f"{text}{separator}{note}"
    return text


async def _run_command(args: RunCommandArgs, ctx: ToolContext) -> dict[str, Any]:
    limit = _effective_limit(args, ctx)
    tail_bytes = max(1024, min(MAX_TAIL_BYTES, (ctx.max_output_bytes - 1024) // 2))
    env = dict(ctx.env) if ctx.env else child_env(os.environ, ())
    use = sandbox_use(args, ctx)
    launch = None
    if ctx.sandbox is not None and use is not None and not use["escalated"]:
        try:
            launch = ctx.sandbox.launch(args.command, workspace=ctx.workspace, env=env)
        except (SandboxError, OSError) as exc:
            raise ToolFailure(f"the sandbox cannot run this command: {exc}") from None
    loop = asyncio.get_running_loop()
    streams: dict[str, Any] = {
        "stdin": asyncio.subprocess.DEVNULL,
        "stdout": asyncio.subprocess.PIPE,
        "stderr": asyncio.subprocess.PIPE,
        "start_new_session": True,
    }
    if launch is None:
        transport, protocol = await loop.subprocess_shell(
            lambda: _CommandProtocol(tail_bytes), args.command, cwd=ctx.workspace, env=env, **streams
        )
    else:
        # bwrap is executed with the child environment itself: its /proc/1/environ
        # inside the sandbox holds nothing the command could not read anyway.
        transport, protocol = await loop.subprocess_exec(
            lambda: _CommandProtocol(tail_bytes), *launch.argv, cwd=launch.cwd, env=launch.env,
            **streams,
        )
    try:
        result = await _supervise(transport, protocol, limit)
    finally:
        # Also kills the shell if it is somehow still running, and closes our read ends.
        transport.close()
    if use is not None:
        add_sandbox_result(result, use, args, ctx, _with_notes)
    return result


async def _supervise(
    transport: asyncio.SubprocessTransport, protocol: _CommandProtocol, limit: float
) -> dict[str, Any]:
    stdout, stderr = protocol.tails[1], protocol.tails[2]
    try:
        exited = await _wait_for(protocol.exited, limit)
        background = exited and _group_alive(transport.get_pid())
        escaped = await _settle(transport, protocol, stop_group=not exited or background)
    except BaseException:
        # Cancellation (or anything unexpected): leave no process behind, then re-raise.
        await _shielded(_settle(transport, protocol, stop_group=True))
        raise
    if not exited:
        partial = {
            "exit_code": transport.get_returncode(),
            "stdout": stdout.text(),
            "stderr": stderr.text(),
            "timed_out": True,
        }
        raise ToolTimeout(
            f"command timed out after {limit:g} s; its process group was killed",
            partial=render_command_result(partial),
        )
    notes = []
    if background:
        notes.append("[amos: background processes the command left running were stopped]")
    if escaped:
        notes.append(
            "[amos: processes the command started outside its process group"
            " (e.g. with setsid) were stopped]"
        )
    return {
        "exit_code": transport.get_returncode(),
        "stdout": stdout.text(),
        "stderr": _with_notes(stderr.text(), notes),
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
    name=RUN_COMMAND_NAME,
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
    loop_key=["command"],
    summarize_result=summarize_run_command,
)

SANDBOXED_RUN_COMMAND = replace(
    RUN_COMMAND,
    description=RUN_COMMAND.description + (
        " It runs sandboxed (no writes outside the workspace, no network unless enabled); the "
        "result says so, and says when the sandbox blocked something."),
    args_model=SandboxedRunCommandArgs,
)
"""``run_command`` as offered when commands run in the sandbox (issue 19): the model may
ask for ``"sandbox": "none"`` with a justification."""
