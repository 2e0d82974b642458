"""``/undo`` or ``/rewind`` found files changed after the agent's change: overwrite them? (issue 20)

Lists the files and why each is a conflict. ``y`` overwrites them (amos snapshots their
current state first, so nothing is lost); ``n``, Esc, any other key or a click keeps
them and restores nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from amos.safe_text import printable
from amos.tui.screens.once import YesOrNo

HINT = "y overwrites them (their current state is snapshotted first) · n or Esc keeps them and restores nothing"
MAX_LISTED = 12
"""Files listed in the dialog before ``… and N more``."""


class ConfirmOverwriteScreen(YesOrNo):
    """A modal naming the conflicting files; dismisses with True to overwrite them.

    Args:
        command: the command that found them (``/undo``).
        conflicts: ``{"path", "reason"}`` rows.
    """

    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, command: str, conflicts: Sequence[dict[str, str]]) -> None:
        super().__init__()
        self.command = command
        self.conflicts = list(conflicts)

    def compose(self) -> ComposeResult:
        """The question, the files and which keys answer."""
        rows = [f"  {printable(c.get('path', ''))} — {printable(c.get('reason', ''))}"
                for c in self.conflicts[:MAX_LISTED]]
        if len(self.conflicts) > MAX_LISTED:
            rows.append(f"  … and {len(self.conflicts) - MAX_LISTED} more")
        with Vertical(id="confirm-overwrite-dialog"):
            yield Static(Text(f"{self.command}: these files were changed after the agent's change. "
                              "Overwrite them?", style="bold"), id="confirm-overwrite-question")
            yield Static(Text("\n".join(rows)), id="confirm-overwrite-files")
            yield Static(Text(HINT), id="confirm-overwrite-hint")
