"""What a slash command returned, shown under the command line.

Commands return plain text (and JSON-ready data) for every front end. The text is
shown literally; where the data has a known shape (``/help``'s commands, ``/tools``'
tools, ``/session list``'s sessions) it is laid out for the width at hand: a table
when the columns fit, one entry per two lines when they do not. A text that ends
with its data as a JSON block (``/context loop``, ``/policy``) shows the summary,
with the JSON in a collapsed block under it, so the summary stays on screen.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Static

from amos.render import verdict_glyph
from amos.render_diff import diff_renderable
from amos.slash import parse_line

CSS_PATH = Path(__file__).with_suffix(".tcss")

_HELP_FOOTER = "A line without a leading / is a prompt; //text sends /text as a prompt."
HELP_TABLE_MIN_WIDTH = 60
"""Narrower than this, ``/help`` shows each command as usage, then its summary indented."""
SESSION_TABLE_MIN_WIDTH = 96
"""Narrower than this, ``/session list`` shows each session on two lines."""
_INDENT = 4


class ByWidth:
    """A renderable that lays itself out for the width it is given.

    Args:
        wide: builds the layout for a width of at least ``min_width``.
        narrow: builds the layout for narrower widths.
        min_width: the width from which ``wide`` is used.
    """

    def __init__(self, wide: Callable[[int], RenderableType], narrow: Callable[[int], RenderableType],
                 min_width: int) -> None:
        self.wide, self.narrow, self.min_width = wide, narrow, min_width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        yield self.wide(width) if width >= self.min_width else self.narrow(width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(20, options.max_width), options.max_width)


def _stacked(entries: Iterable[tuple[Text, Text | None]], footer: str | None = None) -> Group:
    """One entry per two lines: a head line, then the rest indented (wrapping under itself)."""
    parts: list[RenderableType] = []
    for head, body in entries:
        parts.append(head)
        if body is not None and body.plain:
            parts.append(Padding(body, (0, 0, 0, _INDENT)))
    if footer:
        parts.append(Text(footer, style="italic"))
    return Group(*parts)


def _table(*columns: str) -> Table:
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=False,
                  padding=(0, 2, 0, 0))
    for name in columns:
        table.add_column(name, overflow="fold")
    return table


def help_renderable(rows: list[dict[str, Any]]) -> ByWidth:
    """``/help``: a two-column table when wide, usage then indented summary when narrow.

    The usage column is capped at two fifths of the width (long usages wrap inside
    it), so summaries always keep most of the line.

    Args:
        rows: ``{"usage", "summary"}`` rows of the ``/help`` result.
    """
    usages = [str(r.get("usage", "")) for r in rows]
    summaries = [str(r.get("summary", "")) for r in rows]

    def wide(width: int) -> RenderableType:
        table = _table("command", "what it does")
        table.columns[0].max_width = min(max(map(len, usages), default=10), width * 2 // 5)
        table.columns[0].style = "bold"
        for usage, summary in zip(usages, summaries, strict=True):
            table.add_row(Text(usage), Text(summary))
        table.caption = _HELP_FOOTER
        table.caption_justify = "left"
        table.caption_style = "italic"
        return table

    def narrow(width: int) -> RenderableType:
        return _stacked(((Text(u, style="bold"), Text(s)) for u, s in zip(usages, summaries, strict=True)),
                        _HELP_FOOTER)

    return ByWidth(wide, narrow, HELP_TABLE_MIN_WIDTH)


def tools_renderable(rows: list[dict[str, Any]]) -> Table:
    """``/tools``: name, effect and permission (short columns; fits 80 columns)."""
    table = _table("tool", "effect", "permission")
    for row in rows:
        permission = str(row.get("permission", ""))
        table.add_row(Text(str(row.get("name", "")), style="bold"), Text(str(row.get("effect", ""))),
                      Text(permission, style="bold" if permission == "ask" else ""))
    return table


def _updated(row: dict[str, Any]) -> str:
    return str(row.get("updated_at") or "")[:16].replace("T", " ")


def _verdict(row: dict[str, Any]) -> Text:
    verdict = row.get("last_verdict")
    return Text(f"{verdict_glyph(verdict)} {verdict}" if verdict else "-")


def _label(row: dict[str, Any]) -> Text:
    """``name · title`` (the name bold), or whichever of the two the session has."""
    text = Text()
    name, title = row.get("name"), row.get("title")
    if name:
        text.append(str(name), style="bold")
    if title:
        text.append((" · " if name else "") + " ".join(str(title).split()))
    return text


def sessions_renderable(rows: list[dict[str, Any]], heading: str | None = None) -> ByWidth:
    """``/session list`` (and ``/session load`` without an id): one row per session.

    Args:
        rows: the ``sessions`` rows of the result (``SessionSummary`` fields).
        heading: a line shown above the rows (``choose one with /session load ID``).
    """

    def with_heading(body: RenderableType) -> RenderableType:
        return Group(Text(heading), body) if heading else body

    def wide(width: int) -> RenderableType:
        table = _table("id", "updated (UTC)", "verdict", "name · title")
        for row in rows:
            table.add_row(Text(str(row.get("id", "")), no_wrap=True), Text(_updated(row), no_wrap=True),
                          _verdict(row), _label(row))
        return with_heading(table)

    def narrow(width: int) -> RenderableType:
        entries = []
        for row in rows:
            head = Text(str(row.get("id", "")), style="bold")
            head.append(f"  {_updated(row)}  ")
            head.append_text(_verdict(row))
            entries.append((head, _label(row)))
        return with_heading(_stacked(entries))

    return ByWidth(wide, narrow, SESSION_TABLE_MIN_WIDTH)


def command_renderable(text: str, data: Any, command: str = "") -> RenderableType:
    """A renderable for a command's output.

    Args:
        text: the command's plain-text rendering.
        data: the command's JSON-ready result (``SlashResult.result``).
        command: the command line as typed (picks the ``/session load`` heading).

    Returns:
        A colored diff for ``/diff`` (``{"since", "diff", …}``), a layout for ``/help`` (``{"commands": [...]}``), ``/tools``
        (``{"tools": [...]}``) and session lists (``{"sessions": [...]}``, non-empty);
        otherwise ``text`` as literal text.
    """
    if isinstance(data, dict) and isinstance(data.get("diff"), str) and "since" in data:  # /diff
        return diff_renderable(text)
    if isinstance(data, dict) and isinstance(data.get("commands"), list):
        return help_renderable(data["commands"])
    if isinstance(data, dict) and set(data) == {"tools"} and isinstance(data["tools"], list):  # /tools only
        return tools_renderable(data["tools"])
    if isinstance(data, dict) and isinstance(data.get("sessions"), list) and data["sessions"]:
        parsed = parse_line(command) if command else None
        heading = None
        if parsed is not None and parsed.rest.split()[:1] == ["load"]:
            heading = "choose one with /session load ID_OR_NAME:"
        return sessions_renderable(data["sessions"], heading)
    return Text(text)


def split_json_block(text: str, data: Any) -> tuple[str, str | None]:
    """Split a text that ends with its own data as a JSON block into (summary, JSON).

    Args:
        text: the command's text.
        data: the command's result data.

    Returns:
        ``(summary, json_block)``; ``json_block`` is None when the text does not end
        with the data's JSON (the text is then returned whole).
    """
    if not isinstance(data, (dict, list)) or not data:
        return text, None
    block = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    head = text[: -len(block)] if text.endswith(block) else None
    if not head or not head.strip():
        return text, None
    return head.rstrip("\n"), block


class CommandOutput(Vertical):
    """The output of one slash command.

    Args:
        text: the command's plain-text rendering (kept whole as :attr:`text`).
        data: the command's JSON-ready result, used to pick a layout.
        ok: False when the command ran and failed (``-failed`` CSS class).
        command: the command line as typed.

    Attributes:
        text: the command's whole text.
        json_block: the JSON shown collapsed under the summary, or None.
    """

    def __init__(self, text: str, data: Any = None, ok: bool = True, command: str = "") -> None:
        super().__init__(classes="" if ok else "-failed")
        self.text = text
        self.summary, self.json_block = split_json_block(text, data)
        self._renderable = command_renderable(self.summary, data if self.json_block is None else None, command)

    def compose(self) -> ComposeResult:
        """The text (or table), then the collapsed JSON block when there is one."""
        yield Static(self._renderable, classes="command-text")
        if self.json_block is not None:
            lines = self.json_block.count("\n") + 1
            with Collapsible(title=f"full data as JSON ({lines} lines) · click or Tab+Enter to expand",
                             collapsed=True):
                yield Static(Text(self.json_block), classes="command-json")
