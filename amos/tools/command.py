"""``run_command`` and the child environment (spec/tools.md).

The command runs through the shell in its own session (``start_new_session=True``), so
its process group id is the shell's pid and everything it starts can be stopped
together: SIGTERM to the group, then SIGKILL after ``KILL_GRACE_S``. That happens on
timeout, on asyncio cancellation, and when the shell exits while background processes
it started are still running. Nothing the command starts inside its process group
outlives the call.

Its stdout and stderr go to two temporary files, not pipes: created 0600 in a private
directory of the system temp dir and unlinked at once, so only open descriptors reach
them and nothing is left on disk. No process can hold a pipe open past the call (one
the command moved to a new session, say with ``setsid``, used to keep the asyncio
transport alive after the event loop closed), there is only the shell's exit to wait
for, and only the last bytes of each file are read. While the command runs, the part of
each file before the kept tail is released (hole punching, where the file system
supports it), so endless output does not fill the disk. On Linux, once the shell has
exited, processes still holding either file open (started by the command, but outside
its process group) are stopped as well; they are found through ``/proc/*/fd``.

A command that reopens its output by name with truncation (``echo x > /dev/stdout``)
empties what it had written to that stream so far; that is how files behave.
``run_command`` is not a sandbox: the guard is the ``ask`` permission.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import tempfile
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

POLL_S = 0.05
"""Longest pause between two looks at the shell, the process group or the output files."""

RELEASE_STEP_BYTES = 1024 * 1024
"""Bytes an output file may grow before the tail before its disk space is released."""


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


def _tail_text(data: bytes, cut: int) -> str:
    """The kept end ``data`` of a stream, after a note when ``cut`` bytes came before it."""
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


_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02


@functools.cache
def _fallocate() -> Any:
    """libc's 64-bit ``fallocate`` on Linux, or None where it cannot be had."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    for name in ("fallocate64", "fallocate"):
        if name == "fallocate" and ctypes.sizeof(ctypes.c_long) < 8:
            continue  # a 32-bit off_t
        func = getattr(libc, name, None)
        if func is not None:
            func.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
            func.restype = ctypes.c_int
            return func
    return None


def _punch_hole(fd: int, length: int) -> bool:
    """Free the disk space of the first ``length`` bytes of ``fd`` (they read as zeros).

    The file keeps its size and every offset, so a writer appending meanwhile loses
    nothing. False where hole punching is not available.
    """
    func = _fallocate()
    if func is None or length <= 0:
        return False
    return func(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, 0, length) == 0


class _Output:
    """One output stream of the command: an unlinked temporary file and its kept tail."""

    def __init__(self, fd: int, limit: int):
        self.fd = fd
        self.limit = limit
        self.released = 0
        self.can_release = True

    def release(self) -> None:
        """Free the disk space before the tail once it has grown by ``RELEASE_STEP_BYTES``."""
        if not self.can_release:
            return
        try:
            size = os.fstat(self.fd).st_size
        except OSError:
            return
        if size < self.released:  # the command truncated its output
            self.released = 0
        end = size - self.limit
        if end - self.released < RELEASE_STEP_BYTES:
            return
        if _punch_hole(self.fd, end):
            self.released = end
        else:
            self.can_release = False

    def text(self) -> str:
        """The last ``limit`` bytes, with a note saying how many bytes came before."""
        size = os.fstat(self.fd).st_size
        start = max(0, size - self.limit)
        chunks: list[bytes] = []
        offset = start
        while offset < size:
            chunk = os.pread(self.fd, size - offset, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        return _tail_text(b"".join(chunks), start)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _open_outputs(limit: int) -> tuple[_Output, _Output]:
    """Two empty files (stdout, stderr), 0600 in a private temp dir, already unlinked."""
    directory = tempfile.mkdtemp(prefix="amos-run-")
    outputs: list[_Output] = []
    try:
        for name in ("stdout", "stderr"):
            path = os.path.join(directory, name)
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND
            outputs.append(_Output(os.open(path, flags, 0o600), limit))
            os.unlink(path)
    except BaseException:
        for output in outputs:
            output.close()
        raise
    finally:
        for name in ("stdout", "stderr"):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))
        with contextlib.suppress(OSError):
            os.rmdir(directory)
    return outputs[0], outputs[1]


def _release(outputs: Iterable[_Output]) -> None:
    for output in outputs:
        output.release()


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


async def _stop_group(pgid: int, outputs: tuple[_Output, ...] = ()) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after ``KILL_GRACE_S``.

    Both signals are sent whatever the liveness probe says (they are harmless to a
    group that is gone), so a wrong probe can only cost time, never leave a process.
    """
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline and _group_alive(pgid):
        await asyncio.sleep(0.05)
        _release(outputs)
    _signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline and _group_alive(pgid):
        await asyncio.sleep(0.02)


def _file_key(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _holders(outputs: tuple[_Output, ...]) -> set[int]:
    """Other processes of another session than ours holding an output file open (Linux).

    Only descendants of the command can have the unlinked files open, and none of them
    is in our session (the command started a new one); the session test keeps a
    process of ours that got the descriptor some other way (a fork) out of reach.
    A link is compared by name first (``readlink`` never touches the file's file
    system), then confirmed by device and inode. Empty where ``/proc`` is missing.
    """
    if not sys.platform.startswith("linux"):
        return set()
    try:
        names = {os.readlink(f"/proc/self/fd/{output.fd}") for output in outputs}
        keys = {_file_key(os.fstat(output.fd)) for output in outputs}
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
            link = f"{fd_dir}/{fd}"
            try:
                if os.readlink(link) in names and _file_key(os.stat(link)) in keys:
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


async def _stop_holders(outputs: tuple[_Output, ...]) -> bool:
    """Stop processes outside the command's group still holding its output (Linux).

    A holder and its process group get SIGTERM, then SIGKILL after ``KILL_GRACE_S``
    (the group too: what a holder started in its own new session or group is the
    command's doing as well). True when there was any holder.
    """
    if not sys.platform.startswith("linux"):
        return False
    pids = await asyncio.to_thread(_holders, outputs)
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
            await asyncio.sleep(POLL_S)
            _release(outputs)
            pids = await asyncio.to_thread(_holders, outputs)
            if not pids and not any(_group_alive(group) for group in groups):
                break
    return True


async def _wait_exit(
    proc: asyncio.subprocess.Process, limit: float, outputs: tuple[_Output, ...] = ()
) -> bool:
    """Wait up to ``limit`` seconds for the shell to exit; True when it did.

    Polls ``returncode`` so that the output files can be trimmed meanwhile.
    """
    deadline = time.monotonic() + limit
    delay = 0.005
    while proc.returncode is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, POLL_S)
        _release(outputs)
    return True


async def _cleanup(
    proc: asyncio.subprocess.Process, outputs: tuple[_Output, ...], *, stop_group: bool = True
) -> bool:
    """Leave no process behind; True when holders outside the group were stopped.

    Once the shell has exited, ``proc.wait()`` returns at once (there are no pipes to
    wait for) and lets asyncio close the process transport.
    """
    if stop_group:
        await _stop_group(proc.pid, outputs)
    exited = await _wait_exit(proc, KILL_GRACE_S, outputs)
    escaped = await _stop_holders(outputs)
    if exited:
        await proc.wait()
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
    outputs = _open_outputs(tail_bytes)
    try:
        return await _run_with_outputs(args.command, ctx, env, limit, outputs)
    finally:
        for output in outputs:
            output.close()


async def _run_with_outputs(
    command: str,
    ctx: ToolContext,
    env: dict[str, str],
    limit: float,
    outputs: tuple[_Output, _Output],
) -> dict[str, Any]:
    stdout, stderr = outputs
    proc = await asyncio.create_subprocess_shell(
        command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=stdout.fd,
        stderr=stderr.fd,
        cwd=ctx.workspace,
        env=env,
        start_new_session=True,
    )
    try:
        exited = await _wait_exit(proc, limit, outputs)
        background = exited and _group_alive(proc.pid)
        escaped = await _cleanup(proc, outputs, stop_group=not exited or background)
    except BaseException:
        # Cancellation (or anything unexpected): leave no process behind, then re-raise.
        await _shielded(_cleanup(proc, outputs))
        raise
    if not exited:
        partial = {
            "exit_code": proc.returncode,
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
        "exit_code": proc.returncode,
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
