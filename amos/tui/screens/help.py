"""The help screen (F1): every key, every slash command, the custom commands, themes.

The commands come from what ``/help`` returns (``amos.slash.execute_line(runner,
"/help")``: the built-ins of ``amos.slash.COMMANDS`` with their usage and summary,
then the custom commands of ``commands/*.md`` with their source), so the screen and
``/help`` never disagree. The app gathers them and hands them over; the screen only
lays them out. ``Esc``, ``F1`` or ``q`` closes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from amos.tui.screens.once import DismissOnce

KEYS: tuple[tuple[str, str], ...] = (
    ("Enter", "send the prompt, or run the slash command"),
    ("Up / Down", "recall the lines sent earlier / come back to the draft"),
    ("Tab", "complete a slash command, its subcommand or /help's argument; from an empty input, go to "
            "the newest tool block (Up/Down between blocks, Enter or Space expands, typing returns)"),
    ("PgUp / PgDn", "scroll the conversation (up stops following the stream; the end resumes it)"),
    ("Esc Esc  or  Ctrl+C", "cancel the running run (it ends BOUNDED_STOP, user_abort)"),
    ("Ctrl+C (idle)", "clear the input; on an empty input, ask whether to quit"),
    ("Ctrl+Q", "quit (a running run is cancelled first); /quit also saves"),
    ("F1", "this help"),
    ("F2", "show or hide the side panel: task notes, loop, evidence, context, usage"),
    ("Ctrl+P", "command palette: change the theme (\"theme\"), keys, screenshot…"),
    ("Ctrl+A / E / U / K / W", "in the prompt: start / end of line, delete to its start / to its end, "
                              "delete the word before the cursor"),
    ("y / s / n / Esc", "in an approval: approve once / approve this call for the session / deny with a "
                        "reason / deny"),
)
"""Keys of the main screen, as ``(key, what it does)``, in the order people need them."""

NEWLINE_KEYS = ("Shift+Enter  or  Ctrl+J", "a new line in the prompt (Enter sends it)")
"""The composer's new-line keys; listed only when the input supports several lines."""


@dataclass(frozen=True)
class HelpContent:
    """What the help screen lists.

    Attributes:
        commands: built-in commands as ``{"usage", "summary"}`` rows (``/help``'s result).
        customs: custom commands as ``{"usage", "summary"}`` rows (summary names the file).
        mcp_prompts: MCP prompts of running servers as ``{"usage", "summary"}`` rows.
        warnings: command files that were skipped, and why.
        theme: the theme in use.
        config_theme: ``ui.theme`` from the config.
        multiline: the input takes several lines (Shift+Enter / Ctrl+J).
    """

    commands: tuple[Mapping[str, Any], ...] = ()
    customs: tuple[Mapping[str, Any], ...] = ()
    mcp_prompts: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    theme: str = ""
    config_theme: str = ""
    multiline: bool = False

    @classmethod
    def from_help_result(cls, result: Any, **extra: Any) -> HelpContent:
        """Build from the ``result`` of a ``/help`` ``SlashResult``.

        Args:
            result: ``{"commands": [{"usage", "summary", "custom"?}…], "custom_warnings": […]}``.
            extra: the other fields (``theme``, ``config_theme``, ``multiline``).
        """
        rows = list((result or {}).get("commands") or [])
        return cls(commands=tuple(r for r in rows if not r.get("custom") and not r.get("mcp")),
                   customs=tuple(r for r in rows if r.get("custom")),
                   mcp_prompts=tuple(r for r in rows if r.get("mcp")),
                   warnings=tuple((result or {}).get("custom_warnings") or []), **extra)


def _table(rows: Iterable[tuple[str, str]], left: str, right: str, *, left_ratio: int | None = None) -> Table:
    """Two columns; the left one keeps its width unless ``left_ratio`` shares the room."""
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=True,
                  padding=(0, 2, 0, 0))
    table.add_column(left, no_wrap=left_ratio is None, style="bold", ratio=left_ratio, overflow="fold")
    table.add_column(right, ratio=1, overflow="fold")
    for key, what in rows:
        table.add_row(Text(key), Text(what))
    return table


def keys_table(multiline: bool) -> Table:
    """The keys, with the composer's new-line keys when the input supports them.

    Args:
        multiline: the input takes several lines.
    """
    rows = list(KEYS)
    if multiline:
        rows.insert(1, NEWLINE_KEYS)
    return _table(rows, "key", "what it does")


def commands_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    """Usage and summary of each command (``/help``'s rows)."""
    return _table(((str(r.get("usage", "")), str(r.get("summary", ""))) for r in rows), "command", "what it does",
                  left_ratio=1)


def theme_text(theme: str, config_theme: str, known: Iterable[str] = ()) -> Text:
    """Where the theme comes from and how to change it.

    Args:
        theme: the theme in use.
        config_theme: ``ui.theme`` from the config.
        known: the names of the themes the app has.
    """
    known = set(known)
    text = Text()
    text.append("in use: ", style="dim")
    text.append(theme or "?", style="bold")
    if config_theme and config_theme != theme and config_theme not in known:
        text.append(f" (ui.theme is {config_theme!r}, not a known theme)", style="dim")
    elif config_theme and config_theme != theme:
        text.append(f" (chosen with Ctrl+P; ui.theme {config_theme!r} applies at start)", style="dim")
    text.append("\nCtrl+P, then \"theme\", previews and picks another for this session; "
                "\"ui\": {\"theme\": NAME} in the config (`amos config path`) sets it at start.")
    return text


class HelpScreen(DismissOnce[None]):
    """Keys, slash commands, custom commands and themes; ``Esc``, ``F1`` or ``q`` closes.

    Args:
        content: what to list (:class:`HelpContent`).
    """

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("f1", "close", "Close"),
        Binding("q", "close", "Close"),
    ]
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, content: HelpContent) -> None:
        super().__init__()
        self.content = content

    def compose(self) -> ComposeResult:
        """Keys, built-in commands, custom commands (if any), themes, then the way out."""
        content = self.content
        with Vertical(id="help-dialog") as dialog:
            dialog.border_title = "amos help"
            dialog.border_subtitle = "↑↓ PgUp PgDn scroll · Esc, F1 or q closes"
            with VerticalScroll(id="help-body"):
                yield Static(Text("Keys", style="bold"), classes="help-heading")
                yield Static(keys_table(content.multiline), id="help-keys")
                yield Static(Text("Slash commands", style="bold"), classes="help-heading")
                yield Static(commands_table(content.commands), id="help-commands")
                yield Static(Text("A line that does not start with / is a prompt; //text sends the prompt /text. "
                                  "/help NAME shows one command in full.", style="dim"), classes="help-note")
                if content.customs or content.warnings:
                    yield Static(Text("Custom commands (commands/*.md; each sends its prompt to the model)",
                                      style="bold"), classes="help-heading")
                if content.customs:
                    yield Static(commands_table(content.customs), id="help-customs")
                if content.warnings:
                    yield Static(Text("skipped: " + "\nskipped: ".join(content.warnings)), id="help-warnings")
                if content.mcp_prompts:
                    yield Static(Text("MCP prompts (each sends the server's prompt to the model; arguments by "
                                      "position or NAME=value)", style="bold"), classes="help-heading")
                    yield Static(commands_table(content.mcp_prompts), id="help-mcp")
                yield Static(Text("Theme", style="bold"), classes="help-heading")
                yield Static(theme_text(content.theme, content.config_theme, self.app.available_themes), id="help-theme")

    def on_mount(self) -> None:
        """Focus the body so the arrow keys and Page Up/Down scroll it."""
        self.query_one("#help-body").focus()

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)
