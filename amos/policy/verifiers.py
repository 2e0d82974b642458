"""Host completion checks and progress keys (spec/config.md ``loop_policy``; ``--verify CMD``).

A completion verdict comes from the host — a command's exit status, files that
exist, a required successful tool observation, a Python verifier — never from
model text or a tool's claim (spec/stop-receipts.md). Every kind configured must
confirm. A check that raises, runs past its timeout or returns anything but the
documented shape is a :class:`CheckerError` (cause ``checker_error``), never a
false verdict and never a reason to replay an action
(seeds/loop-policy-bounded-recovery.txt "Host completion and progress callbacks").
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from amos.policy.loop_policy import CompletionSpec
from amos.policy.stop import CompletionResult, LoopObservation
from amos.safe_read import read_regular

FEEDBACK_TAIL_CHARS = 1500
MAX_CANDIDATE_CHARS = 32_768
"""Bound of the candidate output text in a checker's context packet (characters)."""
MAX_RESULT_BYTES = 16 * 1024
"""Bound of a Python checker's serialized verdict (bytes)."""
MAX_REASON_CHARS = 400
MAX_FEEDBACK_CHARS = 2000
MAX_PROGRESS_KEY_CHARS = 4000


MAX_CHECKER_BYTES = 8 * 1024 * 1024
"""Largest checker module hashed for its pin, bytes."""


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
    code, tail, _ = await run_bounded(command, workspace=workspace, env=env, timeout_s=timeout_s,
                                      what="completion check")
    text = tail.decode("utf-8", errors="replace")[-FEEDBACK_TAIL_CHARS:]
    broken = _broken_check(code, text, command)
    if broken is not None:
        raise CheckerError(f"completion check `{command}` {broken}")
    if code == 0:
        return CompletionResult(complete=True, reason="completed")
    return CompletionResult(
        complete=False,
        reason=f"check exited {code}",
        feedback=(f"The completion check `{command}` exited {code}. "
                  + (f"Output tail:\n{text}" if text.strip() else "It printed nothing."))[:2000],
        output=last_lines(text),
    )


OUTPUT_LINES = 15
"""Lines of a failing check's output a text receipt shows."""

_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
            9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


def last_lines(text: str, count: int = OUTPUT_LINES) -> str | None:
    """The last ``count`` non-empty-trailing lines of ``text`` (None when it is blank)."""
    lines = text.rstrip().splitlines()
    return "\n".join(lines[-count:]) if lines else None


_PY_NO_MODULE = re.compile(r"^\S*python[\d.]*(?:\.exe)?: No module named (\S+)", re.MULTILINE)
_PY_NO_FILE = re.compile(r"^\S*python[\d.]*(?:\.exe)?: can't open file (.+?): \[Errno 2\]", re.MULTILINE)
_SH_NO_FILE = re.compile(r"^\S*(?:sh|bash|dash|zsh)(?:: \d+)?: (?:cannot open|Can't open) (.+?)(?:: No such file.*)?$",
                         re.MULTILINE)
_SH_SYNTAX = re.compile(r"^\S*(?:sh|bash|dash|zsh)(?:: -c)?: (?:line )?\d+: (?:Syntax error|syntax error)",
                        re.MULTILINE)
_PYTEST_WORD = re.compile(r"(?:^|[\s/])(?:py\.test|pytest)(?:\s|$)")


def _broken_check(code: int, output: str, command: str = "") -> str | None:
    """Why an exit status means the check could not give a verdict, else None.

    126 (found but not executable), 127 (not found), death by a signal (a negative
    status, or the shell's 128+N for the usual kill signals), and the ways the programs
    people check with say they could not start the check: Python's "No module named X"
    for ``-m X`` and "can't open file", a shell's "cannot open FILE" and syntax errors, pytest's exit 4
    (usage error, e.g. a test path that does not exist) and 5 (no tests collected). The
    host's check broke, which is never the model's fault (issue 16; spec/stop-receipts.md
    row 9).
    """
    first = next((line.strip() for line in output.splitlines() if line.strip()), "")
    said = f": {first[:200]}" if first else ""
    if code > 0:
        found = _PY_NO_MODULE.search(output)
        if found and code == 1 and re.search(rf"-m\s+{re.escape(found.group(1))}(?:\s|$)", command):
            return f"could not run: Python has no module {found.group(1)} (a typo, or not installed)"
        found = _PY_NO_FILE.search(output)
        if found and code == 2:
            return f"could not run: Python cannot open the file {found.group(1)}"
        if code == 2 and _SH_SYNTAX.search(output):
            return f"could not run: the shell cannot parse it{said}"
        found = _SH_NO_FILE.search(output)
        if found and code in (2, 127):
            return f"could not run: the shell cannot open {found.group(1)}"
        if _PYTEST_WORD.search(command) and code in (4, 5):
            why = "pytest's usage error (exit 4)" if code == 4 else "pytest collected no tests (exit 5)"
            return f"could not give a verdict: {why}{said}"
    if code == 127:
        return f"could not run (exit 127, command not found){said}"
    if code == 126:
        return f"could not run (exit 126, not executable){said}"
    if code < 0:
        name = _SIGNALS.get(-code, f"signal {-code}")
        return f"was killed by {name}{said}"
    if code - 128 in _SIGNALS:
        return f"was killed by {_SIGNALS[code - 128]} (exit {code}){said}"
    return None


OUTPUT_TAIL_BYTES = 64 * 1024
"""Output of a check kept in memory (bytes): only the tail; the whole is hashed as it streams."""
PIPE_GRACE_S = 2.0
"""How long a check's output is still read after it exited (a background child may hold the pipe)."""


async def run_bounded(
    command: str, *, workspace: Path, env: Mapping[str, str], timeout_s: float, what: str
) -> tuple[int, bytes, str]:
    """Run a host check command with bounded memory.

    Returns:
        ``(exit code, last 64 KiB of stdout+stderr, SHA-256 hex of all of it)``.

    Raises:
        CheckerError: it could not start or ran past ``timeout_s`` (its process group
            is killed).
        asyncio.CancelledError: the run was cancelled (the process group is killed).
    """
    try:
        proc = await asyncio.create_subprocess_shell(
            command, cwd=str(workspace), env=dict(env), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    except (OSError, ValueError) as exc:
        raise CheckerError(f"{what} {command!r} could not start: {_one_line(exc)}") from None
    digest = hashlib.sha256()
    tail = bytearray()

    async def pump() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            digest.update(chunk)
            tail.extend(chunk)
            del tail[:-OUTPUT_TAIL_BYTES]

    reader = asyncio.ensure_future(pump())
    try:
        await asyncio.wait_for(_exited(proc), timeout_s)
    except (TimeoutError, asyncio.CancelledError) as exc:
        _kill_group(proc.pid)
        reader.cancel()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except (TimeoutError, asyncio.CancelledError):
            pass
        _close(proc)
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise CheckerError(f"{what} {command!r} timed out after {timeout_s:g} s") from None
    try:
        await asyncio.wait_for(asyncio.shield(reader), PIPE_GRACE_S)
    except TimeoutError:  # the command exited but a child it left behind holds the pipe
        reader.cancel()
        _kill_group(proc.pid)
        _close(proc)
    return proc.returncode if proc.returncode is not None else -1, bytes(tail), digest.hexdigest()


async def _exited(proc: Any) -> None:
    """Wait for the process itself to exit (``Process.wait`` also waits for its pipes,
    which a background child may hold open)."""
    while proc.returncode is None:
        await asyncio.sleep(0.02)


def _close(proc: Any) -> None:
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_progress_command(
    command: str, *, workspace: Path, env: Mapping[str, str], timeout_s: float
) -> str:
    """Sample a progress key: the SHA-256 of a command's output (it must exit 0).

    Raises:
        CheckerError: the command failed, timed out or could not start.
    """
    code, tail, digest = await run_bounded(command, workspace=workspace, env=env, timeout_s=timeout_s,
                                           what="progress command")
    if code != 0:
        text = " ".join(tail.decode("utf-8", "replace").split())[-200:]
        raise CheckerError(f"progress command {command!r} exited {code}" + (f": {text}" if text else ""))
    return digest


def check_required_tools(required: Sequence[str], observations: Sequence[LoopObservation]) -> CompletionResult:
    """Each listed tool needs a ``succeeded`` observation in this execution."""
    seen = {o.tool for o in observations if o.status == "succeeded"}
    missing = [t for t in required if t not in seen]
    if not missing:
        return CompletionResult(complete=True, reason="required tools succeeded")
    names = ", ".join(missing)
    return CompletionResult(
        complete=False, reason=f"required tool(s) not yet observed succeeding: {names}"[:MAX_REASON_CHARS],
        feedback=f"The host requires a successful call of each of these tools first: {names}"[:MAX_FEEDBACK_CHARS])


def load_checker(spec: str, workspace: Path, pins: dict[str, str] | None = None) -> Callable[[Any], Any]:
    """Import ``"pkg.mod:func"`` with the workspace on ``sys.path`` (captured once per execution).

    A module file inside the workspace is *pinned*: the SHA-256 of its file is recorded
    in ``pins`` the first time; a later load whose file differs is refused, since the
    model can write the workspace and must never install or confirm a verifier.

    Args:
        spec: ``module:function``.
        workspace: the workspace root (appended to ``sys.path`` while importing).
        pins: the session's pins (updated in place), or None to skip pinning.

    Raises:
        CheckerError: a malformed spec, an import error, a non-callable attribute, or a
            workspace file changed since it was pinned (the message is one line).
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CheckerError(f"python checker {spec!r} must be 'package.module:function'")
    added = str(workspace) not in sys.path
    if added:
        sys.path.append(str(workspace))
    try:
        module = importlib.import_module(module_name)
        target: Any = module
        for part in attr.split("."):
            target = getattr(target, part)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure is a checker error
        raise CheckerError(f"python checker {spec!r} cannot be loaded: {type(exc).__name__}: "
                           f"{_one_line(exc)}") from None
    finally:
        if added:
            try:
                sys.path.remove(str(workspace))
            except ValueError:
                pass
    if not callable(target):
        raise CheckerError(f"python checker {spec!r} is not callable")
    if pins is not None:
        _check_pin(spec, getattr(module, "__file__", None), workspace, pins)
    return target


def _check_pin(spec: str, module_file: str | None, workspace: Path, pins: dict[str, str]) -> None:
    if not module_file:
        return
    path = Path(module_file).resolve()
    try:
        path.relative_to(workspace.resolve())
    except ValueError:
        return  # outside the workspace: the model cannot write it through amos's tools
    try:
        digest = hashlib.sha256(read_regular(path, max_bytes=MAX_CHECKER_BYTES)).hexdigest()
    except OSError as exc:
        raise CheckerError(f"python checker {spec!r}: cannot read {path.name}: {exc.strerror or exc}") from None
    pinned = pins.get(spec)
    if pinned is None:
        pins[spec] = digest
    elif pinned != digest:
        raise CheckerError(f"python checker {spec!r} ({path.name}, inside the workspace) changed since this "
                           "session first loaded it; the model can write the workspace, so a changed checker "
                           "cannot confirm anything — start a new session to use the new version")


def freeze(value: Any) -> Any:
    """A detached, read-only copy of JSON data: dicts become mapping proxies, lists tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def context_packet(*, execution_id: str, iteration: int, output_text: str,
                   observations: Sequence[LoopObservation], task_state: Any = None,
                   workspace: Path | None = None) -> Any:
    """The frozen, detached packet a Python checker or progress key receives.

    Fields: ``execution_id``, ``iteration``, ``output_text`` (≤ 32,768 chars),
    ``output_truncated``, ``observations`` (last 100: tool, call_id, effect, status —
    no raw arguments or bodies), ``observed_tool_calls``, ``observations_truncated``,
    ``task_state`` (None until task state is enabled), ``workspace`` (absolute path
    of the workspace: the checker's current directory is NOT the workspace).
    """
    recent = [o.model_dump(mode="json") for o in observations[-100:]]
    data = {
        "execution_id": execution_id,
        "iteration": iteration,
        "output_text": output_text[:MAX_CANDIDATE_CHARS],
        "output_truncated": len(output_text) > MAX_CANDIDATE_CHARS,
        "observations": recent,
        "observed_tool_calls": len(observations),
        "observations_truncated": len(observations) > 100,
        "task_state": task_state,
        "workspace": str(workspace) if workspace is not None else None,
    }
    return freeze(json.loads(json.dumps(data)))


async def call_checker(fn: Callable[[Any], Any], packet: Any, timeout_s: float, *, what: str) -> Any:
    """Call a host Python function in a daemon thread, bounded by ``timeout_s`` seconds.

    A thread cannot be killed, but past the timeout the run moves on at once (the
    thread is a daemon, so it never keeps ``amos`` from exiting) and a late verdict can
    never confirm this execution.

    Raises:
        CheckerError: it raised or ran past the timeout.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def deliver(ok: bool, value: Any) -> None:
        if not future.done():
            (future.set_result if ok else future.set_exception)(value)

    def work() -> None:
        try:
            value = fn(packet)
            if asyncio.iscoroutine(value):
                value = asyncio.run(value)
            outcome: tuple[bool, Any] = (True, value)
        except BaseException as exc:  # noqa: BLE001 - reported as a checker error, even SystemExit
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # a closed loop: the run ended long ago, the verdict is late
            loop.call_soon_threadsafe(deliver, *outcome)

    threading.Thread(target=work, name=f"amos-checker {what}", daemon=True).start()
    try:
        return await asyncio.wait_for(future, timeout_s)
    except TimeoutError:
        raise CheckerError(f"{what} timed out after {timeout_s:g} s") from None
    except (asyncio.CancelledError, CheckerError):
        raise
    except BaseException as exc:  # noqa: BLE001 - a checker that raises is a checker error
        raise CheckerError(f"{what} raised {type(exc).__name__}: {_one_line(exc)}") from None


def validate_verdict(value: Any, *, what: str) -> CompletionResult:
    """Strictly validate a Python checker's return value.

    Accepted: a JSON object of at most 16 KiB with ``complete`` (bool), optional
    ``reason`` (string ≤ 400 chars) and optional ``feedback`` (string ≤ 2,000 chars),
    nothing else.

    Raises:
        CheckerError: anything else.
    """
    if type(value) is not dict:
        raise CheckerError(f"{what} must return a dict {{complete, reason, feedback}}, not {type(value).__name__}")
    try:
        size = len(json.dumps(value, allow_nan=False).encode())
    except (TypeError, ValueError):
        raise CheckerError(f"{what} returned data that is not strict JSON") from None
    if size > MAX_RESULT_BYTES:
        raise CheckerError(f"{what} returned {size} bytes; at most {MAX_RESULT_BYTES} are accepted")
    extra = set(value) - {"complete", "reason", "feedback"}
    if extra:
        raise CheckerError(f"{what} returned unknown key(s) {sorted(extra)}; accepted: complete, reason, feedback")
    if type(value.get("complete")) is not bool:
        raise CheckerError(f"{what} must return 'complete' as true or false")
    for key, limit in (("reason", MAX_REASON_CHARS), ("feedback", MAX_FEEDBACK_CHARS)):
        item = value.get(key)
        if item is not None and (not isinstance(item, str) or len(item) > limit):
            raise CheckerError(f"{what} returned '{key}' that is not a string of at most {limit} characters")
    return CompletionResult(complete=value["complete"], reason=value.get("reason"), feedback=value.get("feedback"))


def validate_progress_key(value: Any, *, what: str) -> str:
    """A Python progress key must be a string of at most 4,000 characters.

    Raises:
        CheckerError: anything else.
    """
    if not isinstance(value, str) or len(value) > MAX_PROGRESS_KEY_CHARS:
        raise CheckerError(f"{what} must return a string of at most {MAX_PROGRESS_KEY_CHARS} characters")
    return value


def combine(results: Sequence[CompletionResult]) -> CompletionResult:
    """All configured kinds must confirm; the feedback of every failing kind is kept."""
    failing = [r for r in results if not r.complete]
    if not failing:
        return CompletionResult(complete=True, reason="completed")
    reason = "; ".join(r.reason or "check failed" for r in failing)[:MAX_REASON_CHARS]
    feedback = "\n".join(r.feedback or r.reason or "check failed" for r in failing)[:MAX_FEEDBACK_CHARS]
    output = "\n".join(r.output for r in failing if r.output) or None
    return CompletionResult(complete=False, reason=reason, feedback=feedback,
                            output=last_lines(output) if output else None)


async def run_completion_checks(
    spec: CompletionSpec,
    *,
    workspace: Path,
    env: Mapping[str, str],
    observations: Sequence[LoopObservation],
    checker: Callable[[Any], Any] | None,
    packet: Callable[[], Any],
    checker_timeout_s: float,
) -> CompletionResult:
    """Run every configured completion kind (command, files, require_tools, python).

    Args:
        spec: the completion checks.
        workspace: where the command runs and files are looked up.
        env: child environment of the command.
        observations: this execution's observations (``require_tools``).
        checker: the captured Python checker (None when not configured).
        packet: builds the checker's context packet.
        checker_timeout_s: limit of the Python checker (seconds).

    Raises:
        CheckerError: any kind could not give a verdict.
    """
    results: list[CompletionResult] = []
    if spec.command:
        results.append(await run_command_check(spec.command, workspace=workspace, env=env, timeout_s=spec.timeout_s))
    if spec.files:
        from amos.policy.destinations import DestinationError, FileCheck, check_destinations

        try:
            results.append(check_destinations([FileCheck.of(f) for f in spec.files], workspace))
        except DestinationError as exc:
            raise CheckerError(f"file check: {exc}") from None
    if spec.require_tools:
        results.append(check_required_tools(spec.require_tools, observations))
    if spec.python and checker is not None:
        what = f"python checker {spec.python!r}"
        results.append(validate_verdict(await call_checker(checker, packet(), checker_timeout_s, what=what),
                                        what=what))
    return combine(results)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__
