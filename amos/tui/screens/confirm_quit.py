"""Ctrl+C on an idle prompt: ask before quitting.

A second Ctrl+C or ``y`` confirms (the app handles Ctrl+C itself, as it is a
priority binding); any other key, or a click, dismisses and leaves amos as it was.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from amos.tui.screens.once import YesOrNo

QUESTION = "Quit amos?"
HINT = "y or Ctrl+C again quits · any other key stays"


class ConfirmQuitScreen(YesOrNo):
    """A one-question modal; dismisses with True to quit, False to stay."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def compose(self) -> ComposeResult:
        """The question and which keys answer it."""
        with Vertical(id="confirm-quit-dialog"):
            yield Static(Text(QUESTION, style="bold"), id="confirm-quit-question")
            yield Static(Text(HINT), id="confirm-quit-hint")
