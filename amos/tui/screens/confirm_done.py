"""A person as the receipt (``completion.human``): confirm or reject a completion claim.

The model said the work is done and the host's checks (if any) passed; the person
decides. ``y`` confirms (the run ends VERIFIED_COMPLETE naming who confirmed), ``n``
asks for a reason and rejects (the reason goes to the model as host feedback), Esc
rejects without one. Keys wait :data:`ANSWER_DELAY_S` after the dialog opens, so typing
ahead never answers it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Static

from amos.safe_text import capped, printable
from amos.tui.screens.once import DismissOnce

ANSWER_DELAY_S = 0.6
"""Keys that arrive sooner after the dialog opens are ignored (type-ahead)."""

HINT = "y confirm the work is done · n reject with a reason · Esc reject"


class ConfirmationAnswer(NamedTuple):
    """What the dialog dismisses with."""

    confirmed: bool
    reason: str | None = None


class ConfirmDoneScreen(DismissOnce[ConfirmationAnswer]):
    """Ask a person to confirm a completion claim.

    Args:
        claim: what the model said it did (masked by the host).
    """

    BINDINGS = [
        Binding("y", "confirm", "Confirm"),
        Binding("n", "reject_with_reason", "Reject with a reason"),
        Binding("escape", "reject", "Reject"),
    ]
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, claim: str) -> None:
        super().__init__()
        self.claim = claim
        self._opened_at = 0.0

    def compose(self) -> ComposeResult:
        """The question, the claim, the keys, and the reason input (hidden until ``n``)."""
        with Vertical(id="confirm-done-dialog") as dialog:
            dialog.border_title = "is the work done?"
            yield Static(Text("The model says the work is done and the host checks passed. A person must "
                              "confirm it.", style="bold"), id="confirm-done-question")
            with VerticalScroll(id="confirm-done-claim") as box:
                box.border_title = "the claim"
                yield Static(Text(printable(capped(self.claim or "(no summary)", 4000))))
            yield Static(Text(HINT), id="confirm-done-hint")
            yield Input(placeholder="why not? (Enter rejects with this reason; Esc rejects without)",
                        id="confirm-done-reason")

    def on_mount(self) -> None:
        """Remember when the dialog opened; the reason input stays hidden until ``n``."""
        self._opened_at = time.monotonic()
        self.query_one("#confirm-done-reason", Input).display = False

    def _early(self) -> bool:
        return time.monotonic() - self._opened_at < ANSWER_DELAY_S

    def action_confirm(self) -> None:
        """``y``: the person confirms."""
        if not self._early():
            self.dismiss(ConfirmationAnswer(True))

    def action_reject_with_reason(self) -> None:
        """``n``: show the reason input."""
        if self._early():
            return
        field = self.query_one("#confirm-done-reason", Input)
        field.display = True
        field.focus()

    def action_reject(self) -> None:
        """Esc: reject without a reason (or with what was typed)."""
        field = self.query_one("#confirm-done-reason", Input)
        self.dismiss(ConfirmationAnswer(False, field.value.strip() or None))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the reason input rejects with that reason."""
        event.stop()
        self.dismiss(ConfirmationAnswer(False, event.value.strip() or None))
