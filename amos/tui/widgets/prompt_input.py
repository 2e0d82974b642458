"""The input line: prompts and slash commands, with Up/Down history."""

from __future__ import annotations

from pathlib import Path

from textual.binding import Binding
from textual.widgets import Input

CSS_PATH = Path(__file__).with_suffix(".tcss")

PLACEHOLDER = "prompt, or /help for commands · Enter sends · Ctrl+C cancels a run · Ctrl+Q quits"


class PromptInput(Input):
    """An ``Input`` that remembers the lines sent in this app (Up/Down recall them)."""

    BINDINGS = [
        Binding("up", "history(-1)", "Previous line", show=False),
        Binding("down", "history(1)", "Next line", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(placeholder=PLACEHOLDER, id=id)
        self.history: list[str] = []
        self._position = 0
        self._draft = ""

    def remember(self, line: str) -> None:
        """Add a sent line to the history (consecutive duplicates are kept once)."""
        if line and (not self.history or self.history[-1] != line):
            self.history.append(line)
        self._position = len(self.history)
        self._draft = ""

    def action_history(self, step: int) -> None:
        """Move through the history; past the newest line the unsent draft returns."""
        if not self.history:
            return
        if self._position == len(self.history):
            self._draft = self.value
        self._position = max(0, min(len(self.history), self._position + step))
        self.value = self.history[self._position] if self._position < len(self.history) else self._draft
        self.cursor_position = len(self.value)
