"""One interpreter of a typed line for every front end (issue 15: ``run_line``).

A line is a prompt, a built-in slash command, or a custom command (whose expanded
prompt runs like a typed one). :func:`run_line` does what the line asks of the host —
starts the run, awaits a compaction, saves a session the command changed — and hands
the front end a :class:`LineOutcome` holding only what it must show or do itself
(render the run's events, print the result, quit, clear, open a session).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from amos.errors import AmosError, SlashCommandError
from amos.slash.commands import SlashResult, compact_result, execute_line
from amos.slash.files import finish_files
from amos.slash.mcp import mcp_view
from amos.slash.parser import parse_line


@dataclass
class LineOutcome:
    """What a typed line became.

    Attributes:
        line: the line as typed.
        kind: ``run`` (consume ``events``), ``command`` (show ``result``; when
            ``finish`` is set, await it first — a compaction — for the final result),
            ``error`` (a bad command: show ``error`` and its usage; nothing changed).
        result: the command's result (a custom command's carries its expanded prompt).
        events: the run's events (``kind == "run"``).
        prompt: the prompt the run sends (the line itself, or a custom command's expansion).
        error: the refused command's error.
        save_error: the session changed but could not be saved (the front end says so).
        finish: a coroutine function giving the final result of a long command.
        expand: for an MCP prompt (``kind == "run"``, ``prompt`` and ``events`` None): a
            coroutine function giving the prompt text the server rendered; it raises
            ``SlashCommandError`` (show it like an ``error`` outcome). The front end
            then starts ``host.run(text)`` itself.
    """

    line: str
    kind: Literal["run", "command", "error"]
    result: SlashResult | None = None
    events: AsyncIterator[Any] | None = None
    prompt: str | None = None
    error: SlashCommandError | None = None
    save_error: AmosError | None = None
    finish: Callable[[], Awaitable[LineOutcome]] | None = None
    expand: Callable[[], Awaitable[str]] | None = None


def _saved(host: Any, outcome: LineOutcome) -> LineOutcome:
    """Save the session after a command that changed it (only then: /help or /context
    never creates a session or makes an old one ``latest``; a failed command changes nothing)."""
    result = outcome.result
    if result is not None and result.ok and result.save and host.autosave:
        try:
            host.save()
        except AmosError as exc:
            outcome.save_error = exc
    return outcome


def run_line(host: Any, line: str, *, start: bool = True) -> LineOutcome:
    """Interpret one typed line against the host.

    Args:
        host: the :class:`~amos.engine.Host`.
        line: a prompt, ``/command …`` or ``//text`` (the literal prompt ``/text``).
        start: start the run for a prompt (False: only say it is one, e.g. to refuse
            it while another run is active).

    Returns:
        The :class:`LineOutcome`.

    Raises:
        SessionError: ``busy`` starting a run while one is active.
    """
    parsed = parse_line(line)
    if parsed.kind != "command":
        return LineOutcome(line=line, kind="run", prompt=parsed.text,
                           events=host.run(parsed.text) if start else None)
    try:
        result = execute_line(host, line)
    except SlashCommandError as exc:
        return LineOutcome(line=line, kind="error", error=exc)
    if result.action == "prompt" and result.action_arg is not None:
        return LineOutcome(line=line, kind="run", result=result, prompt=result.action_arg,
                           events=host.run(result.action_arg, title=line.strip()) if start else None)
    if result.action == "mcp_prompt" and result.action_arg is not None:
        name, rest = result.action_arg, parse_line(line).rest

        async def expand() -> str:
            return await host.mcp.expand_prompt(name, rest)

        return LineOutcome(line=line, kind="run", result=result, expand=expand)
    if result.action == "mcp_start":
        async def started() -> LineOutcome:
            await host.mcp.start()
            return LineOutcome(line=line, kind="command", result=mcp_view(host, line))

        return LineOutcome(line=line, kind="command", result=result, finish=started)
    if result.action == "files":  # /undo, /rewind N, /diff: git works off the event loop
        async def files_done() -> LineOutcome:
            return _saved(host, LineOutcome(line=line, kind="command", result=await finish_files(host, line)))

        return LineOutcome(line=line, kind="command", result=result, finish=files_done)
    if result.action == "compact":
        instructions = result.action_arg or None

        async def finish() -> LineOutcome:
            done = compact_result(line, await host.compact(instructions))
            return _saved(host, LineOutcome(line=line, kind="command", result=done))

        return LineOutcome(line=line, kind="command", result=result, finish=finish)
    return _saved(host, LineOutcome(line=line, kind="command", result=result))
