"""``/model`` without an argument: pick the model for the next run from a list (issue 21).

Rows come from :meth:`amos.engine.ModelCatalog.report` as a dict — the same listing as
``amos models``: per provider a header (whether its key is set; for
``openai-compatible`` the server and what it answered), then its models with context
window and price. Enter on a model dismisses with its ``PROVIDER:MODEL``, which the app
sends as ``/model PROVIDER:MODEL`` (exactly as if it were typed); Esc cancels.
"""

from __future__ import annotations

from collections.abc import Mapping
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

HINT = "↑/↓ choose · type to jump · Enter switches · Esc cancels"


def _money(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.1 or value == 0 else f"${value:,.3f}"


def _price(row: Mapping[str, Any]) -> str:
    if row.get("input_usd_per_mtok") is None:
        return ""
    return f"{_money(row['input_usd_per_mtok'])} / {_money(row['output_usd_per_mtok'])} per 1M"


def model_row(row: Mapping[str, Any], width: int, *, current: str | None = None) -> Text:
    """One model as a line: ``PROVIDER:MODEL  WINDOW  PRICE`` (the current one marked)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(printable(str(row["model"])).ljust(width), style="bold" if row["model"] == current else "")
    window = row.get("window_tokens")
    text.append(f"  {window:>9,}" if window else "          —", style="dim")
    if row.get("source") == "server":
        text.append("  (server; window assumed)" if row.get("window_source") == "assumed" else "  (server)",
                    style="dim")
    elif _price(row):
        text.append(f"  {_price(row)}", style="dim")
    if row["model"] == current:
        text.append("  (in use)", style="dim italic")
    return text


def provider_header(entry: Mapping[str, Any]) -> Text:
    """A provider's header line: its key (set / not set, never the value) and server."""
    key = ("no key needed" if entry["key"] == "not needed"
           else f"{' or '.join(entry['key_variables'])}: {entry['key']}")
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(entry["provider"], style="bold underline")
    text.append(f"  {key}", style="dim" if entry["key"] != "not set" else "yellow")
    if entry.get("server_error"):
        text.append(printable(f"  server {entry['base_url']}: {entry['server_error']}"), style="yellow")
    return text


class ModelPickerScreen(DismissOnce[str | None]):
    """A modal list of models; dismisses with the chosen ``PROVIDER:MODEL``, or None.

    Args:
        report: :meth:`ModelsReport.to_dict` of the host's catalog.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, report: Mapping[str, Any]) -> None:
        super().__init__()
        self.report = report
        self.current = (report.get("current") or {}).get("model")

    def compose(self) -> ComposeResult:
        """Headers (not selectable) and models, provider by provider."""
        options: list[Option] = []
        for entry in self.report["providers"]:
            rows = list(entry.get("server_models") or []) + list(entry["models"])
            width = min(max((len(r["model"]) for r in rows), default=10), 40)
            options.append(Option(provider_header(entry), disabled=True))
            options += [Option(model_row(r, width, current=self.current), id=str(r["model"])) for r in rows]
        with Vertical(id="model-picker-dialog") as dialog:
            dialog.border_title = "model for the next run"
            if self.current:
                dialog.border_subtitle = printable(f"now {self.current}")
            yield OptionList(*options, id="model-picker-list")
            yield Static(Text(HINT), id="model-picker-hint")

    def on_mount(self) -> None:
        """Focus the list on the model in use (else the first model)."""
        found = self.query(OptionList)
        if not found:  # seen under load: mounted before its children; try again after a refresh
            self.call_after_refresh(self.on_mount)
            return
        listing = found.first()
        listing.focus()
        ids = [option.id for option in listing.options]
        start = ids.index(self.current) if self.current in ids else next(
            (i for i, option in enumerate(listing.options) if not option.disabled), 0)
        listing.highlighted = start

    def on_key(self, event: Any) -> None:
        """A printable key jumps to the next model whose name (after the provider) starts with it."""
        if not (event.is_printable and event.character and event.character.strip()):
            return
        listing = self.query_one(OptionList)
        options = listing.options
        begin = (listing.highlighted or 0) + 1
        for offset in range(len(options)):
            option = options[(begin + offset) % len(options)]
            if option.id and option.id.partition(":")[2].startswith(event.character.lower()):
                listing.highlighted = (begin + offset) % len(options)
                event.stop()
                return

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter (or a click) on a model: switch to it."""
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        """Esc: keep the model."""
        self.dismiss(None)
