"""``/session load`` without an argument: pick a saved session from a list.

Rows come from the ``/session load`` slash command's result (the runner's session
store, newest first): id, when it was last updated, the verdict of its last run,
its name and title. A session that cannot be opened (``broken``: why, and what repairs
it) is listed but cannot be chosen, and neither can the session already open. Enter
loads the highlighted session, Esc cancels (spec/slash-commands.md ``/session load``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from amos.safe_text import printable
from amos.tui.screens.once import DismissOnce

HINT = "↑/↓ choose · Enter loads · Esc cancels"


def session_row(row: Mapping[str, Any], *, current: str | None = None) -> Text:
    """One session as a line of the picker.

    Args:
        row: a ``SessionSummary`` as a dict (``id``, ``updated_at``, ``last_verdict``,
            ``name``, ``title``, ``broken``).
        current: the id of the session open now (marked, not selectable).

    Returns:
        ``ID  YYYY-MM-DD HH:MM  VERDICT  NAME — TITLE`` (plain text, no markup);
        a broken session says why instead of its verdict.
    """
    text = Text()
    text.append(str(row.get("id", "?")), style="bold")
    updated = str(row.get("updated_at") or "")[:16].replace("T", " ")
    text.append(f"  {updated:<16}  ")
    broken = row.get("broken")
    if broken:
        text.append(printable(f"cannot be opened: {' '.join(str(broken).split())}"), style="red")
        return text
    text.append(f"{row.get('last_verdict') or '-':<17}", style="bold" if row.get("last_verdict") else "dim")
    label = " — ".join(str(v) for v in (row.get("name"), row.get("title")) if v)
    if label:
        text.append(" " + printable(" ".join(label.split())))
    if current is not None and row.get("id") == current:
        text.append("  (open now)", style="dim")
    return text


class SessionPickerScreen(DismissOnce[str | None]):
    """A modal list of saved sessions; dismisses with the chosen id, or None.

    Args:
        rows: ``SessionSummary`` dicts, newest first.
        current: the id of the session open now (listed, not selectable).
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, rows: Sequence[Mapping[str, Any]], current: str | None = None) -> None:
        super().__init__()
        self.rows = list(rows)
        self.current = current

    def compose(self) -> ComposeResult:
        """The list and the keys."""
        options = [
            Option(session_row(row, current=self.current), id=str(row.get("id")),
                   disabled=bool(row.get("broken")) or row.get("id") == self.current)
            for row in self.rows
        ]
        with Vertical(id="session-picker-dialog") as dialog:
            dialog.border_title = "load a session"
            yield OptionList(*options, id="session-picker-list")
            yield Static(Text(HINT), id="session-picker-hint")

    def on_mount(self) -> None:
        """Focus the list on the first session that can be opened."""
        listing = self.query_one(OptionList)
        listing.focus()
        for index, option in enumerate(listing.options):
            if not option.disabled:
                listing.highlighted = index
                break

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter (or a click) on a session: load it."""
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        """Esc: keep the current session."""
        self.dismiss(None)
