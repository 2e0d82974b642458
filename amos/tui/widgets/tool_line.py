"""A compact line for one tool call: glyph, tool, one-line summary, status, duration.

The line is mounted when the call starts (or when it is first asked about or
decided) and updated in place when it finishes, so a run's tool activity reads as
a short list rather than a wall of output.
"""

from __future__ import annotations

import re
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
_EXIT_CODE = re.compile(r"^exit code: (-?\d+)", re.MULTILINE)


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
        self.exit_code: int | None = None
        self.approved = False
        super().__init__(self._render_line(), classes=f"-{status}")

    def set_status(self, status: str, duration_s: float | None = None, error: str | None = None,
                   exit_code: int | None = None) -> None:
        """Show a new status (and, once finished, the duration, exit code and any error).

        Args:
            status: the new status.
            duration_s: how long the call ran (seconds), when finished.
            error: the outcome's one-line error, if any.
            exit_code: the command's exit code (``run_command``), if the result has one;
                a non-zero one is shown (``exit 1``) even when the call succeeded.
        """
        self.remove_class(f"-{self.status}")
        self.status, self.duration_s, self.error, self.exit_code = status, duration_s, error, exit_code
        self.add_class(f"-{status}")
        self.set_class(bool(exit_code), "-exit-nonzero")
        self.update(self._render_line())

    def set_approved(self) -> None:
        """Mark the call approved by the person (shown on this line, before it runs)."""
        self.approved = True
        self.update(self._render_line())

    def _tail(self) -> list[str]:
        words = ["approved"] if self.approved and self.status != "denied" else []
        if self.status == "approval" and self.approved:
            words.append("starting…")
        elif self.status != "succeeded" and not (
            self.status == "denied" and (self.error or "").startswith("denied")  # the error says it
        ):
            words.append(_STATUS_WORDS.get(self.status, self.status.replace("_", " ")))
        return words

    def _render_line(self) -> Text:
        text = Text()
        text.append(STATUS_GLYPHS.get(self.status, "?") + " ", style="bold")
        text.append(self.tool, style="bold")
        summary = _one_line(call_detail(self.tool, self.summary), _MAX_SUMMARY)
        if summary:
            text.append(" " + summary)
        words = self._tail()
        if words:
            text.append("  " + " ".join(words), style="dim")
        if self.exit_code:
            text.append(f"  exit {self.exit_code}", style="bold")
        if self.duration_s is not None and self.status not in _NOT_RUN:
            text.append("  " + format_duration(self.duration_s), style="dim")
        if self.error and self.status != "succeeded":
            text.append("  " + _one_line(self.error, _MAX_ERROR), style="italic")
        return text
