"""``amos run`` and ``amos resume``: run one line, render events, exit with the verdict.

Without ``--json``: stdout carries the final assistant text; stderr the streaming
progress (only when stderr is a TTY) and a one-line stop summary. With ``--json``:
exactly one JSON object on stdout (spec/cli.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from amos import aio
from amos.cli_ask import TerminalAsker, can_ask
from amos.cli_flags import RunFlags
from amos.cli_output import (
    command_document,
    error_document,
    event_line,
    output_format,
    pending_lines,
    run_document,
    write_line,
)
from amos.errors import AmosError, SlashCommandError, UsageError
from amos.events import (
    ApprovalRequested,
    Notice,
    RunFinished,
    StepStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from amos.render import (
    NO_SAVE_HINT,
    UNDO_HINT,
    check_line,
    confirmation_lines,
    failing_output,
    files_changed_line,
    held_call_lines,
    summary_line,
    tool_line,
)
from amos.safe_text import printable

log = logging.getLogger("amos")


def setup_logging(verbose: bool) -> Path | None:
    """With ``--verbose`` or ``AMOS_LOG=debug``, write a debug log to the data folder.

    Returns:
        The log file path, or None when logging is off.
    """
    if not verbose and os.environ.get("AMOS_LOG", "").lower() != "debug":
        return None
    from amos import paths

    folder = paths.ensure_dir(paths.log_dir())
    path = folder / "amos.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    print(f"amos: debug log: {path}", file=sys.stderr)
    return path


def read_prompt(prompt: str | None, stdin: TextIO) -> str:
    """The prompt: the argument, or the whole of stdin for ``-`` or piped input.

    Raises:
        UsageError: no prompt and stdin is a terminal, or an empty prompt.
    """
    if prompt == "-" or (prompt is None and not stdin.isatty()):
        raw = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read().encode("utf-8", "surrogateescape")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"stdin is not UTF-8 text (bad byte at offset {exc.start}); "
                             "pass the prompt as UTF-8") from None
    elif prompt is None:
        raise UsageError("no prompt: pass PROMPT, '-' to read stdin, or pipe it in (`amos run --demo` for the demo)")
    else:
        text = prompt
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError("the prompt is not valid UTF-8 text") from None
    if not text.strip():
        raise UsageError("the prompt is empty")
    return text


class Renderer:
    """Renders run events: progress on stderr, the answer (or JSON) on stdout.

    ``fmt`` is the output format (:data:`amos.cli_output.OUTPUT_FORMATS`). On a terminal
    (text format) the run streams live on stderr; when stderr is not a terminal (CI logs)
    one line per step and per tool call shows the run is alive; ``quiet`` silences both.
    ``stream-json`` writes every event to stdout as one JSON line instead.
    """

    def __init__(self, *, fmt: str = "text", quiet: bool, err: TextIO, out: TextIO):
        self.fmt = fmt
        self.json_out = fmt != "text"
        self.stream = fmt == "stream-json"
        self.quiet = quiet
        self.err = err
        self.out = out
        self.progress = fmt == "text" and not quiet and err.isatty()
        self.plain = not quiet and not self.stream and not self.progress
        self.asking = False  # approvals are asked at the terminal (the asker prints them)
        self.typed: dict[str, str] | None = None  # a custom command: the line as typed and its expansion
        self.resumed = False  # amos resume: the answer is printed only if this run wrote it
        self._wrote_text = False
        self._mid_line = False
        self._step_text: list[str] = []  # the text streamed since the last step began

    def _line(self, text: str) -> None:
        if self._mid_line:
            self.err.write("\n")
            self._mid_line = False
        self.err.write(printable(text) + "\n")
        self.err.flush()

    def event(self, event: Any) -> None:
        """Render one event (progress only; the final output comes from :meth:`finish`)."""
        if self.stream:
            line = event_line(event)
            if line is not None:
                write_line(self.out, line)
        if isinstance(event, TextDelta) and event.text:
            self._wrote_text = True
        if isinstance(event, Notice) and event.level == "error":  # stderr, also with --json
            self._line(f"amos: {event.text}")
            return
        if isinstance(event, Notice) and event.level == "warning" and not self.progress:
            self._line(f"amos: warning: {event.text}")  # e.g. held calls dropped by a new prompt
            return
        if self.plain:
            self._plain(event)
        if not self.progress:
            return
        if isinstance(event, StepStarted):
            self._step_text = []
        elif isinstance(event, TextDelta):
            self._step_text.append(event.text)
            self.err.write(printable(event.text))
            self.err.flush()
            self._mid_line = not event.text.endswith("\n")
        elif isinstance(event, ToolCallStarted):
            self._line(f"  ⋯ {event.summary}")
        elif isinstance(event, ToolCallFinished):
            self._line(tool_line(event))
        elif isinstance(event, Notice):
            self._line(f"  ! {event.text}")
        elif isinstance(event, ApprovalRequested) and not self.asking:
            self._line(f"  ? approval needed: {event.summary}")

    def _plain(self, event: Any) -> None:
        """One line per step and per finished tool call, for a log that is not a terminal."""
        if isinstance(event, StepStarted):
            self._line(f"amos: step {event.step}/{event.max_steps}")
        elif isinstance(event, ToolCallFinished):
            self._line("amos: " + tool_line(event).lstrip())
        elif isinstance(event, ApprovalRequested) and not self.asking:
            self._line(f"amos: ? approval needed: {event.summary}")

    def finish(self, finished: RunFinished, session_id: str, signal_name: str | None,
               held: list | None = None, claim: str | None = None, *, exit_code: int | None = None,
               model: str | None = None) -> None:
        """Print the final answer or JSON document, and the stop summary (``held``: the
        host's held calls, for the resume hint; ``claim``: a completion claim waiting
        for a person; ``exit_code`` and ``model`` go into the JSON document)."""
        if self.stream:
            for line in pending_lines(finished, held, session_id):
                write_line(self.out, line)
        if self.json_out:
            code = finished.receipt.exit_code if exit_code is None else exit_code
            write_line(self.out, run_document(finished, session_id=session_id, model=model, exit_code=code,
                                              held=held, typed=self.typed))
            return
        if self._mid_line:
            self.err.write("\n")
            self._mid_line = False
        streamed = "".join(self._step_text).strip()
        shown = self.progress and self.out.isatty() and streamed == finished.output_text.strip()
        old = self.resumed and not self._wrote_text  # `amos resume --confirm`: the run that wrote it printed it
        if finished.output_text and not shown and not old:  # each answer is printed once
            # stdout may be a file or pipe a terminal shows later: escaped the same way
            self.out.write(printable(finished.output_text.rstrip("\n")) + "\n")
            self.out.flush()
        if not self.quiet:
            self.err.write(printable(summary_line(finished.receipt)) + "\n")
            check = check_line(finished.receipt)
            if check:
                self.err.write(f"  {printable(check)}\n")
            files = files_changed_line(finished.files_changed, hint=UNDO_HINT if finished.session_path else NO_SAVE_HINT)
            if files:
                self.err.write(f"  {printable(files)}\n")
            output = failing_output(finished.receipt)
            if output:
                self.err.write("  the check's output ended with:\n")
                for line in output.splitlines():
                    self.err.write(f"    | {printable(line)}\n")
            waiting = finished.receipt.reason == "confirmation_pending" or finished.receipt.pending_approvals
            if waiting and not finished.session_path:
                self.err.write("  this session was not saved (--no-save), so it cannot be resumed: run it again "
                               "without --no-save to decide it\n")
            elif finished.receipt.reason == "confirmation_pending":
                for line in confirmation_lines(session_id, claim):
                    self.err.write(printable(line) + "\n")
            elif finished.receipt.pending_approvals:
                for line in held_call_lines(session_id, held or []):
                    self.err.write(printable(line) + "\n")
            self.err.write(f"  session {session_id}" + (f" ({finished.session_path})" if finished.session_path
                                                          else " (not saved)") + "\n")
            self.err.flush()


async def _consume(runner: Any, events: Any, renderer: Renderer,
                   asker: TerminalAsker | None = None) -> tuple[RunFinished | None, str | None]:
    """Iterate a run's events with SIGINT/SIGTERM wired to cancellation (``asker``: the
    approvals asked at the terminal)."""
    loop = asyncio.get_running_loop()
    received: list[str] = []

    def on_signal(name: str) -> None:
        if not received:
            received.append(name)
        if asker is not None:
            asker.cancel()
        runner.cancel(None if name == "SIGINT" else name)

    installed = []
    for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
        try:
            loop.add_signal_handler(sig, on_signal, name)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):
            pass
    finished = None
    closed = False
    try:
        async for event in events:
            if not closed:
                try:
                    renderer.event(event)
                except BrokenPipeError:  # the reader went away (`| head -1`): stop, save, exit 141
                    closed = True
                    runner.cancel(CLOSED_STDOUT)
            if isinstance(event, ApprovalRequested) and asker is not None and not closed:
                await asker.ask(event)
            if isinstance(event, RunFinished):
                finished = event
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
    return finished, CLOSED_STDOUT if closed else (received[0] if received else None)


CLOSED_STDOUT = "a closed stdout"
"""Why a run stops when its stdout's reader went away (the receipt: "stopped by a closed stdout")."""


def _exit_for(finished: RunFinished, signal_name: str | None) -> int:
    receipt = finished.receipt
    if signal_name == CLOSED_STDOUT:
        return 141  # 128 + SIGPIPE, as a shell pipeline reports a writer whose reader left
    if receipt.cause == "user_abort" and signal_name == "SIGINT":
        return 130
    if receipt.cause == "user_abort" and signal_name == "SIGTERM":
        return 143
    return receipt.exit_code


def _render_run(runner: Any, events: Any, fmt: str, quiet: bool, ask: bool = False,
                typed: dict[str, str] | None = None, resumed: bool = False) -> int:
    """Consume a run's events with the terminal renderer; returns the exit code (``fmt``:
    the output format; ``ask``: approvals are asked at the terminal; ``typed``: a custom
    command's line and expanded prompt, shown once and put in the JSON result)."""
    renderer = Renderer(fmt=fmt, quiet=quiet, err=sys.stderr, out=_out())
    renderer.typed = typed
    renderer.resumed = resumed
    if typed is not None and typed["command"] is not None and fmt == "text" and not quiet:
        first = typed["prompt"].strip().splitlines()[0] if typed["prompt"].strip() else ""
        more = "…" if len(first) > 100 or typed["prompt"].strip().count("\n") else ""
        print(printable(f"amos: {typed['command']} → prompt: {first[:100]}{more}"), file=sys.stderr)
    asker = TerminalAsker(runner, sys.stderr) if ask else None
    renderer.asking = ask
    finished, sig = aio.run(_consume(runner, events, renderer, asker))
    _hold_signals()  # the verdict is in: a late Ctrl+C must not turn its exit code into 130
    if finished is None:
        print("amos: the run ended without a stop receipt", file=sys.stderr)
        return 8
    code = _exit_for(finished, sig)
    if sig == CLOSED_STDOUT:
        _quiet_stdout()
        print(f"amos: stdout was closed, so the run stopped ({finished.receipt.verdict}); session "
              f"{runner.session_id}", file=sys.stderr)
        return code
    renderer.finish(finished, runner.session_id, sig, runner.held_calls(), runner.pending_claim(),
                    exit_code=code, model=runner.model_spec)
    return code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's exit flush does not fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, _out().fileno())  # the real stdout (under --json sys.stdout is stderr)
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _run_line(runner: Any, line: str, fmt: str, quiet: bool, ask: bool = False) -> int:
    """Run one typed line (a prompt, a slash command, a custom command) and render it."""
    from amos.slash import LineOutcome, run_line

    outcome = run_line(runner, line)
    if outcome.kind == "run" and outcome.expand is not None:  # an MCP prompt: the server renders it
        try:
            outcome.prompt = aio.run(outcome.expand())
            outcome.events = runner.run(outcome.prompt, title=line.strip())
        except SlashCommandError as exc:
            outcome = LineOutcome(line=line, kind="error", error=exc)
    if outcome.kind == "run":
        from amos.engine import masked_text

        slash = outcome.result is not None  # a custom command or an MCP prompt
        typed = {"command": masked_text(runner, line) if slash else None,
                 "prompt": masked_text(runner, outcome.prompt or "")}
        return _render_run(runner, outcome.events, fmt, quiet, ask, typed)
    if outcome.kind == "error":
        exc = outcome.error
        assert exc is not None
        if fmt != "text":
            write_line(_out(), error_document(exc, exit_code=2, session_id=runner.session_id,
                                              model=runner.model_spec, command=line))
        else:
            print(printable(f"amos: {exc}" + (f"\nusage: {exc.usage}" if exc.usage else "")), file=sys.stderr)
        return 2
    if outcome.finish is not None:
        outcome = aio.run(outcome.finish())
    if outcome.save_error is not None:
        raise outcome.save_error
    result = outcome.result
    assert result is not None
    if fmt != "text":
        write_line(_out(), command_document(result.to_json(runner.session_id), exit_code=result.exit_code,
                                            model=runner.model_spec))
    elif result.ok:
        if result.text and not quiet:
            print(printable(without_json_block(result.text)))
    else:
        print(printable(f"amos: {result.text}"), file=sys.stderr)
    return result.exit_code


_REAL_STDOUT: list[TextIO] = []


def without_json_block(text: str) -> str:
    """A command's text for a shell: the summary without the JSON block the TUI folds
    away (``/context loop``, ``/policy``); the data itself is ``--json``'s."""
    start = text.find("\n{")
    if start < 0 or not text.rstrip().endswith("}"):
        return text
    try:
        json.loads(text[start + 1:])
    except ValueError:
        return text
    return text[:start] + "\n(the data: --json)"


def _out() -> TextIO:
    """Where output meant for stdout goes: with --json, the real stdout kept aside."""
    return _REAL_STDOUT[-1] if _REAL_STDOUT else sys.stdout


def _named_session(kwargs: dict) -> str | None:
    """The session a resume was given, when it is a session id (else None: a name or
    ``latest`` is not an id, and the result's ``session_id`` is always one)."""
    from amos.engine import is_session_id

    given = kwargs.get("session_id")
    return given if isinstance(given, str) and is_session_id(given) else None


def _guarded(fn, *args, **kwargs) -> int:
    """Run a command body; a domain error becomes one line (and, with --json, one JSON object).

    With --json, anything else printed to stdout while the run is in progress (a host
    checker's print, a library's chatter) is sent to stderr, so stdout carries exactly
    one JSON object.
    """
    json_out = kwargs.get("fmt", "text") != "text"
    if json_out:
        _REAL_STDOUT.append(sys.stdout)
        sys.stdout = sys.stderr
    try:
        return fn(*args, **kwargs)
    except AmosError as exc:
        print(printable(f"amos: {exc}"), file=sys.stderr)
        if json_out:  # a resume names its session even when it cannot go on
            write_line(_out(), error_document(exc, exit_code=exc.exit_code,
                                              session_id=getattr(exc, "session_id", None) or _named_session(kwargs)))
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    finally:
        if json_out:
            sys.stdout = _REAL_STDOUT.pop()
        _release_signals()


_HELD: list[tuple[int, object]] = []
"""Handlers :func:`_hold_signals` replaced, restored by :func:`_release_signals`."""


def _hold_signals() -> None:
    """Ignore SIGINT and SIGTERM while a finished run writes its result and closes (the
    session saved, its lock released): the exit code then always matches the result."""
    if threading.current_thread() is not threading.main_thread() or _HELD:
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            _HELD.append((sig, signal.signal(sig, signal.SIG_IGN)))
        except (OSError, ValueError):
            pass


HOLD_UNTIL_EXIT: list[bool] = []
"""Set by the console entry point (``amos.cli.main``): held signals stay held until the
process exits, so a Ctrl+C between the result and the exit cannot change the exit code.
In-process callers (tests, embedders) get their handlers back."""


def _release_signals() -> None:
    """Put back what :func:`_hold_signals` replaced (not in the real ``amos`` process:
    :data:`HOLD_UNTIL_EXIT`)."""
    if HOLD_UNTIL_EXIT:
        return
    while _HELD:
        sig, handler = _HELD.pop()
        try:
            signal.signal(sig, handler)  # type: ignore[arg-type]
        except (OSError, ValueError, TypeError):
            pass


def _format(value: str | None, json_out: bool) -> str | None:
    """The output format, or None after printing why the flags are wrong."""
    try:
        return output_format(value, json_out)
    except UsageError as exc:
        print(f"amos: {exc}", file=sys.stderr)
        if json_out or value in ("json", "stream-json"):  # JSON was asked for: one error object on stdout
            write_line(sys.stdout, error_document(exc, exit_code=2))
        return None


def cli_run(*, prompt: str | None, demo: bool, flags: RunFlags, json_out: bool, quiet: bool,
            output: str | None = None) -> int:
    """``amos run``: returns the exit code (spec/cli.md "Exit codes"; ``output``: ``--output-format``)."""
    fmt = _format(output, json_out)
    if fmt is None:
        return 2
    return _guarded(_cli_run, prompt=prompt, demo=demo, flags=flags, fmt=fmt, quiet=quiet)


def _cli_run(*, prompt: str | None, demo: bool, flags: RunFlags, fmt: str, quiet: bool) -> int:
    setup_logging(flags.verbose)
    if demo:
        if prompt is None:
            prompt = "Make the project's tests pass."
        elif not flags.model and flags.script is None:
            print("amos: note: the demo's scripted model plays a fixed script whatever the prompt says",
                  file=sys.stderr)
    else:
        prompt = read_prompt(prompt, sys.stdin)
    ask = can_ask(sys.stdin, sys.stderr) and not flags.no_ask
    options = flags.options(demo=demo, ask=ask)
    from amos.engine import open_host

    runner, opened = open_host(options)
    try:
        for warning in opened.warnings:
            print(printable(f"amos: warning: {warning}"), file=sys.stderr)
        if opened.demo_workspace is not None and not quiet:  # stderr: stdout stays one JSON document
            print(f"amos: demo workspace: {opened.demo_workspace}", file=sys.stderr)
        return _run_line(runner, prompt, fmt, quiet, ask)
    finally:
        runner.close()


def cli_resume(*, session_id: str, approve: list[str], deny: list[str], reason: str | None, approve_all: bool,
               flags: RunFlags, json_out: bool, quiet: bool, confirm: bool = False, reject: str | None = None,
               output: str | None = None) -> int:
    """``amos resume``: decide held calls (or a completion claim) and continue; returns the exit code."""
    fmt = _format(output, json_out)
    if fmt is None:
        return 2
    return _guarded(_cli_resume, session_id=session_id, approve=approve, deny=deny, reason=reason,
                    approve_all=approve_all, confirm=confirm, reject=reject, flags=flags, fmt=fmt,
                    quiet=quiet)


def _cli_resume(*, session_id: str, approve: list[str], deny: list[str], reason: str | None, approve_all: bool,
                confirm: bool, reject: str | None, flags: RunFlags, fmt: str, quiet: bool) -> int:
    setup_logging(flags.verbose)
    if not session_id.strip():  # "" would open a new session and report on that one
        raise UsageError("amos resume needs a session id, name or 'latest' (`amos sessions list` shows them)")
    both = set(approve) & set(deny)
    if both:
        raise UsageError(f"call {sorted(both)[0]!r} is both approved and denied")
    from amos.engine import open_host

    ask = can_ask(sys.stdin, sys.stderr) and not flags.no_ask
    runner, opened = open_host(flags.options(session=session_id, ask=ask))
    try:
        for warning in opened.warnings:
            print(printable(f"amos: warning: {warning}"), file=sys.stderr)
        try:
            events = runner.resume(approve=approve, deny={c: reason for c in deny},
                                   approve_all=approve_all or flags.yes, confirm=confirm, reject=reject)
        except AmosError as exc:
            exc.session_id = runner.session_id  # type: ignore[attr-defined]  # the JSON names the resolved session
            raise
        return _render_run(runner, events, fmt, quiet, ask, resumed=True)
    finally:
        runner.close()
