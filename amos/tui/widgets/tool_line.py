"""A compact block for one tool call that expands to show its arguments and result.

Collapsed, the block is one line: a chevron, the status glyph (a spinner while the
call runs), the tool, a one-line summary of its arguments, the status, the exit code
of a command, the duration and the evidence id when the result was stored as
evidence. Click it, or focus it (Tab from the composer, Up/Down between blocks) and
press Enter or Space, to expand it: the full arguments as pretty JSON and the result
the model saw (the projection, when evidence projected it). Both are capped at
:data:`BODY_MAX_CHARS` characters and :data:`BODY_MAX_LINES` lines with a note saying
how much is not shown, so a 1 MB result never has to be laid out.

The block is mounted when the call starts (or when it is first asked about or
decided) and updated in place when it finishes, so a run's tool activity reads as a
short list rather than a wall of output. The expanded body is built only when it is
shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.highlighter import JSONHighlighter
from rich.padding import Padding
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Static

from amos.messages import ToolCallPart
from amos.render import STATUS_GLYPHS
from amos.safe_text import printable

CSS_PATH = Path(__file__).with_suffix(".tcss")

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
"""Frames of the glyph of a running call."""
SPIN_S = 0.1
"""Seconds between two spinner frames."""
BODY_MAX_CHARS = 16_000
"""Most characters of the arguments, and of the result, an expanded block shows."""
BODY_MAX_LINES = 200
"""Most lines of the arguments, and of the result, an expanded block shows."""

_NOT_RUN = {"denied", "blocked", "not_started"}
_STATUS_WORDS = {"running": "running…", "approval": "awaiting approval"}
_MAX_SUMMARY = 72
_MAX_ERROR = 90
_EXIT_CODE = re.compile(r"^exit code: (-?\d+)", re.MULTILINE)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_UNKNOWN = object()


def exit_code_of(content: str | None) -> int | None:
    """The exit code a command tool reported (its result starts ``exit code: N``), if any.

    Args:
        content: the tool result text the model sees (``ToolCallFinished.content``).

    Returns:
        The exit code, or None when the result has none (other tools, a timeout).
    """
    match = _EXIT_CODE.search((content or "")[:600])  # an evidence projection puts its envelope first
    return int(match.group(1)) if match else None


def format_duration(seconds: float) -> str:
    """A short duration such as ``0.02s``, ``3.4s`` or ``2m05s``.

    Args:
        seconds: the duration in seconds.
    """
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def call_detail(tool: str, summary: str) -> str:
    """A call's summary without the leading tool name (summaries read ``write_file a.py``).

    Args:
        tool: the tool name.
        summary: the tool's one-line summary of the call.
    """
    summary = " ".join(summary.split())
    if summary == tool or summary.startswith(tool + " "):
        return summary[len(tool):].lstrip()
    return summary


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def capped(text: str, max_chars: int = BODY_MAX_CHARS, max_lines: int = BODY_MAX_LINES) -> tuple[str, str | None]:
    """The head of ``text`` an expanded block shows, and a note on what it leaves out.

    Only the head is scanned, so a 1 MB text costs no more than a small one. Control
    characters (an escape sequence in a command's output) are shown as ``\\x1b``.

    Args:
        text: the whole text.
        max_chars: most characters kept.
        max_lines: most lines kept.

    Returns:
        ``(head, note)``: ``note`` is None when nothing was left out, else a line such
        as ``… 1,048,576 more characters not shown (17,000 lines in all)``.
    """
    head = text[:max_chars]
    cut = -1
    for _ in range(max_lines):
        cut = head.find("\n", cut + 1)
        if cut < 0:
            break
    if cut >= 0:
        head = head[:cut]
    head = head.rstrip("\n")
    note = None
    if len(head) < len(text.rstrip("\n")):
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        note = f"… {len(text) - len(head):,} more characters not shown ({lines:,} lines in all)"
    head = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", head.expandtabs(4))
    return head, note


def arguments_text(arguments: Any, raw: str | None = None) -> str:
    """A call's arguments as pretty JSON (two-space indents, non-ASCII kept).

    Args:
        arguments: the decoded arguments.
        raw: the literal argument string when the model's JSON could not be decoded.
    """
    if raw is not None:
        return raw
    try:
        return json.dumps(arguments, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # pragma: no cover - arguments come from JSON
        return repr(arguments)


@lru_cache(maxsize=64)
def _part_style(part: str, foreground: str | None) -> Style:
    """``body`` in the theme's foreground; ``label``, ``note`` and ``chevron`` dimmed."""
    extra = {"body": "", "label": "bold dim", "note": "italic dim", "chevron": "dim"}.get(part, "")
    try:
        return Style.parse(f"{extra} {foreground}".strip()) if foreground else Style.parse(extra or "none")
    except Exception:  # noqa: BLE001 - a theme colour Rich cannot read falls back to the widget's colour
        return Style.parse(extra or "none")


class ToolCallLine(Static, can_focus=True):
    """One tool call, updated in place as it progresses; expands to its arguments and result.

    Args:
        call_id: the model's call id (also the key the conversation finds it by).
        tool: tool name.
        summary: the tool's one-line summary of its arguments.
        status: ``running``, ``approval`` or a finished status of spec/tools.md.
        call: the call itself, when known (a replayed transcript has it); its
            arguments are shown when the block is expanded.
        find_call: looks a call up by id when ``call`` was not given (a live run's
            calls are in the session the runner is building); called on expand only.

    Attributes:
        content: the header line as a ``Text`` (what a collapsed block shows, less its
            chevron).
        expanded: True while the arguments and result are shown.
        evidence_id: the evidence record of the result, when evidence is enabled.
        result: the result text the model saw, once the call finished.
    """

    BINDINGS = [
        Binding("enter,space", "toggle", "Expand or collapse", show=False),
        Binding("up", "focus_block(-1)", "Previous block", show=False),
        Binding("down", "focus_block(1)", "Next block", show=False),
    ]

    class Toggled(Message):
        """The block was expanded or collapsed (the conversation keeps its top in view).

        Attributes:
            line: the block.
        """

        def __init__(self, line: ToolCallLine) -> None:
            super().__init__()
            self.line = line

    def __init__(self, call_id: str, tool: str, summary: str, status: str = "running", *,
                 call: ToolCallPart | None = None,
                 find_call: Callable[[str], ToolCallPart | None] | None = None,
                 error: str | None = None, exit_code: int | None = None, evidence_id: str | None = None,
                 result: str | None = None) -> None:
        self.call_id = call_id
        self.tool = tool
        self.summary = summary
        self.status = status
        self.duration_s: float | None = None
        self.error = error
        self.exit_code = exit_code
        self.evidence_id = evidence_id
        self.result = result
        self.approved = False
        self.expanded = False
        self.call = call
        self._find_call = find_call
        self._frame = 0
        self._spinner: Timer | None = None
        self._running_ticks = 0
        super().__init__(self._header(), classes=f"-{status} -exit-nonzero" if exit_code else f"-{status}")

    def on_mount(self) -> None:
        """Start the spinner of a call that is already running."""
        self._sync_spinner(mounted=True)

    # ------------------------------------------------------------------ state

    def set_status(self, status: str, duration_s: float | None = None, error: str | None = None,
                   exit_code: int | None = None, *, evidence_id: str | None = None,
                   result: str | None = None) -> None:
        """Show a new status (and, once finished, the duration, exit code and any error).

        Args:
            status: the new status.
            duration_s: how long the call ran (seconds), when finished.
            error: the outcome's one-line error, if any.
            exit_code: the command's exit code (``run_command``), if the result has one;
                a non-zero one is shown (``exit 1``) even when the call succeeded.
            evidence_id: the evidence record of the result, if one was stored.
            result: the result text the model saw (shown when expanded).
        """
        self.remove_class(f"-{self.status}")
        self.status, self.duration_s, self.error, self.exit_code = status, duration_s, error, exit_code
        if evidence_id is not None:
            self.evidence_id = evidence_id
        if result is not None:
            self.result = result
        self.add_class(f"-{status}")
        self.set_class(bool(exit_code), "-exit-nonzero")
        self._sync_spinner()
        self.update(self._header())

    def set_approved(self) -> None:
        """Mark the call approved by the person (shown on this line, before it runs)."""
        self.approved = True
        self.update(self._header())

    def _sync_spinner(self, mounted: bool = False) -> None:
        if self.status == "running" and (mounted or self.is_mounted):
            if self._spinner is None:
                self._running_ticks = 0
                self._spinner = self.set_interval(SPIN_S, self._spin)
        elif self._spinner is not None:
            self._spinner.stop()
            self._spinner = None

    def _spin(self) -> None:
        self._frame = (self._frame + 1) % len(SPINNER)
        self._running_ticks += 1
        self.update(self._header())

    # ------------------------------------------------------------------ expanding

    def action_toggle(self) -> None:
        """Expand the block to its arguments and result, or collapse it again."""
        self.expanded = not self.expanded
        self.set_class(self.expanded, "-expanded")
        if self.evidence_id:
            self.update(self._header())  # the header shows the whole evidence id only while expanded
        self.refresh(layout=True)
        self.post_message(self.Toggled(self))

    def action_focus_block(self, step: int) -> None:
        """Up/Down: focus the previous or next block."""
        if step < 0:
            self.screen.focus_previous()
        else:
            self.screen.focus_next()

    def focus_on_click(self) -> bool:
        """A click expands or collapses without taking the focus from the composer."""
        return False

    def on_click(self, event: events.Click) -> None:
        """A click expands a collapsed block; a click on its first line collapses it.

        Clicks in an expanded body do nothing, so its text can be selected.
        """
        if not self.expanded or event.y <= 0:
            event.stop()
            self.action_toggle()

    # ------------------------------------------------------------------ rendering

    def _tail(self) -> list[str]:
        words = ["approved"] if self.approved and self.status != "denied" else []
        if self.status == "approval" and self.approved:
            words.append("starting…")
        elif self.status != "succeeded" and not (
            self.status == "denied" and (self.error or "").startswith("denied")  # the error says it
        ):
            words.append(_STATUS_WORDS.get(self.status, self.status.replace("_", " ")))
        return words

    def _glyph(self) -> str:
        if self.status == "running" and self._spinner is not None:
            return SPINNER[self._frame]
        if self.status == "succeeded" and self.exit_code:
            return "!"  # the tool ran, but the command failed: never a tick
        return STATUS_GLYPHS.get(self.status, "?")

    def _header(self) -> Text:
        text = Text()
        text.append(self._glyph() + " ", style="bold")
        text.append(printable(self.tool), style="bold")
        summary = _one_line(call_detail(self.tool, self.summary), _MAX_SUMMARY)
        if summary:
            text.append(" " + printable(summary))
        words = self._tail()
        if words:
            text.append("  " + " ".join(words), style="dim")
        if self.status == "running" and self._running_ticks * SPIN_S >= 1:
            text.append(f" {int(self._running_ticks * SPIN_S)}s", style="dim")
        if self.exit_code:
            text.append(f"  exit {self.exit_code}", style="bold")
        if self.duration_s is not None and self.status not in _NOT_RUN:
            text.append("  " + format_duration(self.duration_s), style="dim")
        if self.error and self.status != "succeeded":
            text.append("  " + printable(_one_line(self.error, _MAX_ERROR)), style="italic")
        if self.evidence_id:  # expanded, the whole id (to copy); folded, its short form
            text.append(f"  evidence {self.evidence_id}" if self.expanded else f"  ev {self._short_evidence_id()}",
                        style="dim")
        return text

    def _short_evidence_id(self) -> str:
        """The evidence id as the header shows it: its shortest unique prefix (issue 21:
        36 characters crowded every line at 80 columns); the whole id outside an app."""
        assert self.evidence_id is not None
        try:
            ids = getattr(self.app, "evidence_ids", None)
        except Exception:  # noqa: BLE001 - rendered outside an app
            ids = None
        return ids.short(self.evidence_id) if ids is not None else self.evidence_id

    def _arguments(self) -> Text:
        call = self.call
        if call is None and self._find_call is not None:
            call = self.call = self._find_call(self.call_id)
        body = self._style("body")
        if call is None:
            return Text("(not known)", style=self._style("note"))
        head, note = capped(arguments_text(call.arguments, call.raw_arguments))
        text = Text(head, style=body)
        if call.raw_arguments is None:
            text = JSONHighlighter()(text)
        if call.raw_arguments is not None:
            self._add_note(text, "(not valid JSON: shown as the model sent it)")
        if note:
            self._add_note(text, note)
        return text

    def _result(self) -> Text:
        if self.result is None:
            waiting = "(running)" if self.status in ("running", "approval") else "(none)"
            return Text(waiting, style=self._style("note"))
        head, note = capped(self.result)
        text = Text(head, style=self._style("body"))
        if note:
            self._add_note(text, note + (f" · /context evidence read {self.evidence_id}"
                                         if self.evidence_id else ""))
        return text

    def _style(self, part: str) -> Style:
        """The style of a part of the body (``body``, ``label``, ``note``, ``chevron``), from the theme."""
        try:
            variables = self.app.theme_variables
        except Exception:  # noqa: BLE001 - rendered outside an app
            variables = {}
        return _part_style(part, variables.get("foreground"))

    def _add_note(self, text: Text, note: str) -> None:
        text.append("\n" if text.plain else "")
        text.append(note, style=self._style("note"))

    def render(self) -> RenderableType:
        """The header with its chevron; when expanded, the arguments and result under it."""
        chevron = Text("▾ " if self.expanded else "▸ ",
                       style=self._style("chevron"))
        line = self._header_text()
        glyph, rest = line.divide([2]) if len(line) > 2 else (line, Text())
        prefix = Text.assemble(chevron, glyph)
        # A header too long for the width wraps under the tool name, not under the chevron.
        header = Table.grid(padding=0, expand=True)
        header.add_column(width=prefix.cell_len, no_wrap=True)
        header.add_column(ratio=1)
        header.add_row(prefix, rest)
        if not self.expanded:
            return header
        label = self._style("label")
        result_label = "result"
        if self.evidence_id and (self.result or "").startswith("[projected"):
            result_label = "result (the projection the model saw; the full result is evidence)"
        return Group(
            header,
            Padding(Group(Text("arguments", style=label), Padding(self._arguments(), (0, 0, 0, 2)),
                          Text(result_label, style=label), Padding(self._result(), (0, 0, 0, 2))),
                    (0, 0, 1, 2)),
        )

    def _header_text(self) -> Text:
        content = self.content
        return content if isinstance(content, Text) else self._header()
