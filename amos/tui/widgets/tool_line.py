"""A compact line for one tool call: glyph, tool, one-line summary, status, duration.

The line is mounted when the call starts (or when it is first asked about or
decided) and updated in place when it finishes, so a run's tool activity reads as
a short list rather than a wall of output.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import Static

CSS_PATH = Path(__file__).with_suffix(".tcss")

STATUS_GLYPHS = {
    "running": "◌",
    "approval": "⏸",
    "succeeded": "✓",
    "failed": "✗",
    "denied": "⊘",
    "blocked": "⊘",
    "cancelled": "■",
    "timed_out": "⏱",
    "not_started": "·",
}
"""Glyph of each tool status (the statuses of spec/tools.md plus ``running`` and ``approval``)."""

_NOT_RUN = {"denied", "blocked", "not_started"}
_STATUS_WORDS = {"running": "running…", "approval": "awaiting approval"}
_MAX_SUMMARY = 72
_MAX_ERROR = 90


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


class ToolCallLine(Static):
    """One tool call, updated in place as it progresses.

    Args:
        call_id: the model's call id (also the key the conversation finds it by).
        tool: tool name.
        summary: the tool's one-line summary of its arguments.
        status: ``running``, ``approval`` or a finished status of spec/tools.md.
    """

    def __init__(self, call_id: str, tool: str, summary: str, status: str = "running") -> None:
        self.call_id = call_id
        self.tool = tool
        self.summary = summary
        self.status = status
        self.duration_s: float | None = None
        self.error: str | None = None
        super().__init__(self._render_line(), classes=f"-{status}")

    def set_status(self, status: str, duration_s: float | None = None, error: str | None = None) -> None:
        """Show a new status (and, once finished, the duration and any error).

        Args:
            status: the new status.
            duration_s: how long the call ran (seconds), when finished.
            error: the outcome's one-line error, if any.
        """
        self.remove_class(f"-{self.status}")
        self.status, self.duration_s, self.error = status, duration_s, error
        self.add_class(f"-{status}")
        self.update(self._render_line())

    def _render_line(self) -> Text:
        text = Text()
        text.append(STATUS_GLYPHS.get(self.status, "?") + " ", style="bold")
        text.append(self.tool, style="bold")
        summary = _one_line(call_detail(self.tool, self.summary), _MAX_SUMMARY)
        if summary:
            text.append(" " + summary)
        tail = [] if self.status == "succeeded" else [_STATUS_WORDS.get(self.status, self.status.replace("_", " "))]
        if self.duration_s is not None and self.status not in _NOT_RUN:
            tail.append(format_duration(self.duration_s))
        if tail:
            text.append("  " + " ".join(tail), style="dim")
        if self.error and self.status != "succeeded":
            text.append("  " + _one_line(self.error, _MAX_ERROR), style="italic")
        return text
