"""The composer: a multi-line input for prompts and slash commands.

Enter sends the draft; Shift+Enter or Ctrl+J inserts a new line (many terminals
send the same bytes for Enter and Shift+Enter, so Ctrl+J is the one that always
works). Up on the first line recalls earlier lines and Down on the last line comes
back (in a multi-line draft Up and Down move the cursor first). Tab completes
slash-command names (the built-ins of :data:`amos.slash.COMMANDS`), the subcommands
their usage lines list (``/session li`` → ``/session list``) and the command names
``/help`` takes; while a command name is typed, :class:`CommandMenu` above the
composer lists the matching commands (built-in and custom) with their usage. The
hint for a partly typed command is computed here and shown by the app on its
notice line.

A paste larger than :data:`PASTE_COLLAPSE_CHARS` characters or
:data:`PASTE_COLLAPSE_LINES` lines is kept aside and shown in the draft as one
placeholder (``[pasted 17,000 lines · 1.0 MB #1]``), so a 1 MB paste never has to be
laid out and wrapped by the editor; the placeholder is replaced by the pasted text
when the draft is sent.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from rich.text import Text
from textual import events
from textual.actions import SkipAction
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static, TextArea

from amos.slash import COMMANDS

CSS_PATH = Path(__file__).with_suffix(".tcss")

PLACEHOLDER = "prompt or /help · Enter sends · Ctrl+J newline · F1 help · F2 panel"

PASTE_COLLAPSE_CHARS = 10_000
"""A paste longer than this (characters) is shown as a placeholder in the draft."""
PASTE_COLLAPSE_LINES = 200
"""A paste with more lines than this is shown as a placeholder in the draft."""
MENU_ROWS = 8
"""Most commands :class:`CommandMenu` lists at once (the rest are counted)."""
MENU_USAGE_WIDTH = 40
"""Widest usage column of :class:`CommandMenu` (longer usages end with ``…``)."""

_WORD = re.compile(r"[a-z][a-z_-]*")
_EVIDENCE_READ = re.compile(r"^/context\s+evidence\s+read\s+([0-9A-Fa-f-]*)$")
_PASTE_TOKEN = re.compile(r"\[pasted [^\]\n]{1,60} #\d+\]")


def subcommands(name: str) -> list[str]:
    """The subcommand words a command's usage line offers (``/session save … | list`` → save, list…).

    Only usages that list two or more alternatives separated by ``|`` count, and
    only lowercase words (``NAME``, ``[INSTRUCTIONS]`` are arguments, not choices).

    Args:
        name: a command name without the slash.
    """
    command = COMMANDS.get(name)
    if command is None:
        return []
    rest = command.usage.partition(" ")[2].strip()
    if rest.startswith("[") and rest.endswith("]"):
        rest = rest[1:-1]
    alternatives = [part.split()[0] for part in rest.split("|") if part.split()]
    words = [word for word in alternatives if _WORD.fullmatch(word)]
    return words if len(alternatives) >= 2 else []


def distinct_prefixes(ids: list[str], least: int = 13) -> list[str]:
    """Each id cut to the shortest prefix (at least ``least`` characters) no other id of
    ``ids`` starts with — what a completion hint lists instead of whole 36-character ids."""
    shown = []
    for record_id in ids:
        others = [other for other in ids if other != record_id]
        length = least
        while length < len(record_id) and any(other.startswith(record_id[:length]) for other in others):
            length += 1
        shown.append(record_id[:length])
    return shown


def _common_prefix(words: list[str]) -> str:
    return os.path.commonprefix(words) if words else ""


def complete(value: str, customs: Iterable[str] = ()) -> tuple[str, list[str]]:
    """Tab completion of a slash-command line.

    Args:
        value: the input's text (completion happens at its end).
        customs: names of custom commands and MCP prompts, completed like built-ins
            (after ``/`` and after ``/help ``).

    Returns:
        ``(new_value, matches)``: ``new_value`` is ``value`` extended as far as the
        matches agree (with a trailing space when exactly one matched); ``matches``
        are the full candidates, as they would be typed.
    """
    if not value.startswith("/") or value.startswith("//"):
        return value, []
    known = sorted({*COMMANDS, *customs})
    name, space, rest = value[1:].partition(" ")
    if not space:
        names = [n for n in known if n.startswith(name)]
        if len(names) == 1:
            return f"/{names[0]} ", [f"/{names[0]}"]
        return "/" + max(name, _common_prefix(names), key=len), [f"/{n}" for n in names]
    if " " in rest.strip() or rest != rest.lstrip():
        return value, []
    choices = known if name == "help" else subcommands(name)
    words = sorted(w for w in choices if w.startswith(rest))
    base = f"/{name} "
    if len(words) == 1:
        return f"{base}{words[0]} ", [base + words[0]]
    return base + max(rest, _common_prefix(words), key=len), [base + w for w in words]


def command_hint(value: str) -> str | None:
    """What to say on the notice line while ``value`` is being typed, if anything.

    Args:
        value: the input's text.

    Returns:
        The command's usage and summary once its name is complete (``/session `` →
        its usage), the matching names while it is partial, or None for prompts.
    """
    if not value.startswith("/") or value.startswith("//"):
        return None
    name, space, _ = value[1:].partition(" ")
    command = COMMANDS.get(name)
    if command is not None:
        return f"{command.usage} — {command.summary}"
    if space:
        return f"unknown command /{name} · /help lists commands"
    names = sorted(n for n in COMMANDS if n.startswith(name))
    if not names:
        return f"no command starts with /{name} · /help lists commands"
    return "Tab completes: " + " ".join(f"/{n}" for n in names)


def menu_entries(value: str, customs: Mapping[str, tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """The commands :class:`CommandMenu` lists while ``value`` is a partly typed command name.

    Args:
        value: the draft (one line that starts with ``/``, no space yet).
        customs: custom commands by name: ``(usage, description)``; a custom command
            never shadows a built-in of the same name.

    Returns:
        ``(usage, summary)`` of every command whose name starts with what was typed,
        sorted by name; empty for prompts, ``//`` escapes, multi-line drafts and once
        the name is followed by a space (the notice line shows that command's usage).
    """
    if not value.startswith("/") or value.startswith("//") or " " in value or "\n" in value:
        return []
    word = value[1:]
    entries: dict[str, tuple[str, str]] = {}
    for name, (usage, description) in (customs or {}).items():
        if name.startswith(word):
            entries[name] = (usage, description if name.startswith("mcp__")  # says "(MCP server)" itself
                             else (description or "custom prompt") + " (custom)")
    for name, command in COMMANDS.items():
        if name.startswith(word):
            entries[name] = (command.usage, command.summary)
    return [entries[name] for name in sorted(entries)]


def _size_label(text: str) -> str:
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    size = len(text.encode("utf-8", "surrogatepass"))
    amount = f"{size / 1_048_576:.1f} MB" if size >= 1_048_576 else f"{size / 1024:.0f} KB"
    return f"{lines:,} lines · {amount}" if lines > 1 else amount


class CommandMenu(Static):
    """The matching slash commands, each with its usage, shown above the composer.

    Hidden (``display: none``) unless a command name is being typed.
    """

    def show_entries(self, entries: list[tuple[str, str]]) -> None:
        """List ``entries`` (``(usage, summary)``), or hide the menu when there are none.

        Args:
            entries: from :func:`menu_entries`.
        """
        self.display = bool(entries)
        if not entries:
            return
        shown = entries[:MENU_ROWS]
        width = min(max(len(usage) for usage, _ in shown), MENU_USAGE_WIDTH)
        text = Text(no_wrap=True, overflow="ellipsis")
        for index, (usage, summary) in enumerate(shown):
            if index:
                text.append("\n")
            if len(usage) > width:
                usage = usage[: width - 1] + "…"
            name, _, args = usage.partition(" ")
            text.append(name, style="bold")
            if args:
                text.append(" " + args)
            text.append(" " * (width - len(usage) + 2) + summary, style="dim")
        if len(entries) > MENU_ROWS:
            text.append(f"\n… {len(entries) - MENU_ROWS} more · keep typing", style="dim italic")
        self.update(text)


class PromptInput(TextArea):
    """The multi-line composer; remembers the lines sent in this app (Up/Down recall them).

    The public surface the app uses: :attr:`value` (the draft, pasted blocks
    included), :attr:`cursor_position`, :meth:`remember`, :attr:`sent_lines`, and the
    messages :class:`Submitted`, :class:`Changed` and :class:`Hint`.
    """

    BINDINGS = [
        Binding("tab", "complete", "Complete a slash command", show=False),
        # readline habits (issue 21): Ctrl+A is column 0 (TextArea's "smart home" stops at
        # the first non-blank), Ctrl+U deletes back to it; Ctrl+E, Ctrl+K, Ctrl+W are TextArea's
        Binding("ctrl+a", "line_home", "Start of line", show=False),
        Binding("ctrl+u", "kill_line_start", "Delete to the start of the line", show=False),
    ]

    def action_line_home(self) -> None:
        """Ctrl+A: the cursor to column 0 of its line."""
        row, _ = self.cursor_location
        self.move_cursor((row, 0))

    def action_kill_line_start(self) -> None:
        """Ctrl+U: delete from column 0 of the line to the cursor (a selection: delete it)."""
        if not self.selection.is_empty:
            self.delete(*self.selection, maintain_selection_offset=False)
            return
        row, column = self.cursor_location
        if column:
            self.delete((row, 0), (row, column), maintain_selection_offset=False)

    class Submitted(Message):
        """Enter was pressed: send the draft.

        Attributes:
            prompt_input: the composer.
            value: the draft with every pasted block in full (what is sent).
        """

        def __init__(self, prompt_input: PromptInput, value: str) -> None:
            super().__init__()
            self.prompt_input = prompt_input
            self.value = value

        @property
        def control(self) -> PromptInput:
            """The composer that sent this message."""
            return self.prompt_input

    class Changed(TextArea.Changed):
        """The draft changed (posted by ``TextArea`` for every edit).

        ``value`` is the draft as shown: a collapsed paste appears as its placeholder,
        which is all a hint needs and never costs a copy of a large paste.
        """

        @property
        def prompt_input(self) -> PromptInput:
            """The composer that sent this message."""
            assert isinstance(self.text_area, PromptInput)
            return self.text_area

        @property
        def value(self) -> str:
            """The draft as shown (placeholders for collapsed pastes)."""
            return self.text_area.text

    class Hint(Message):
        """A hint for the notice line (completion candidates).

        Attributes:
            text: the hint, one line.
        """

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id, soft_wrap=True, tab_behavior="focus", show_line_numbers=False,
                         placeholder=PLACEHOLDER, highlight_cursor_line=False)
        self.sent_lines: list[str] = []
        """The lines sent from this composer, oldest first (``history`` is TextArea's undo history)."""
        self._position = 0
        self._draft = ""
        self._pastes: dict[str, str] = {}
        self._sent: tuple[str, str] | None = None
        self._customs: dict[str, tuple[str, str]] = {}
        self.evidence_completer: Callable[[str], list[str]] | None = None
        """Whole evidence ids for a typed prefix (the app's ``ShortIds.complete``)."""
        self.menu = CommandMenu("", classes="command-menu")
        self.menu.display = False

    def on_mount(self) -> None:
        """Put the command menu just above the composer."""
        if self.parent is not None and self.menu.parent is None:
            self.parent.mount(self.menu, before=self)

    # ------------------------------------------------------------------ the draft

    @property
    def value(self) -> str:
        """The draft as it would be sent (collapsed pastes in full)."""
        return self.expand(self.text)

    @value.setter
    def value(self, value: str) -> None:
        self.load_text(value)
        self.move_cursor(self.document.end)

    @property
    def cursor_position(self) -> int:
        """The cursor as an offset into :attr:`text` (characters)."""
        return self.document.get_index_from_location(self.cursor_location)

    @cursor_position.setter
    def cursor_position(self, offset: int) -> None:
        self.move_cursor(self.document.get_location_from_index(max(0, min(offset, len(self.text)))))

    def expand(self, text: str) -> str:
        """``text`` with every paste placeholder this composer made replaced by its paste.

        Args:
            text: a draft (or a history entry) of this composer.
        """
        if not self._pastes or "[pasted " not in text:
            return text
        return _PASTE_TOKEN.sub(lambda m: self._pastes.get(m.group(0), m.group(0)), text)

    def set_custom_commands(self, customs: Mapping[str, tuple[str, str]]) -> None:
        """The custom commands the menu offers besides the built-ins.

        Args:
            customs: ``{name: (usage, description)}``.
        """
        self._customs = dict(customs)
        self._refresh_menu()

    def _refresh_menu(self) -> None:
        self.menu.show_entries(menu_entries(self.text, self._customs) if self.text.startswith("/") else [])

    def _on_prompt_input_changed(self, event: Changed) -> None:
        # The private handler runs first, whatever the app does with ``Changed``.
        self._refresh_menu()

    # ------------------------------------------------------------------ keys

    async def _on_key(self, event: events.Key) -> None:
        """Enter sends; Shift+Enter, Alt+Enter or Ctrl+J insert a new line."""
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self._submit()
        elif event.key in ("shift+enter", "ctrl+j", "alt+enter"):
            event.stop()
            event.prevent_default()
            self._insert_text("\n")
        elif event.key == "backspace" and self._delete_paste_before_cursor():
            event.stop()
            event.prevent_default()

    def _submit(self) -> None:
        raw = self.text
        value = self.expand(raw)
        self._sent = (value, raw)
        self.post_message(self.Submitted(self, value))

    def _insert_text(self, text: str) -> None:
        start, end = self.selection
        result = self.replace(text, start, end, maintain_selection_offset=False)
        self.move_cursor(result.end_location)
        self.scroll_cursor_visible()

    def _delete_paste_before_cursor(self) -> bool:
        """Backspace right after a paste placeholder removes the whole placeholder."""
        if not self._pastes or not self.selection.is_empty:
            return False
        row, column = self.cursor_location
        match = next((m for m in _PASTE_TOKEN.finditer(self.document[row][:column])
                      if m.end() == column and m.group(0) in self._pastes), None)
        if match is None:
            return False
        self.delete((row, match.start()), (row, column), maintain_selection_offset=False)
        return True

    async def _on_paste(self, event: events.Paste) -> None:
        """A large paste becomes one placeholder; a small one is inserted as text.

        Terminals paste line breaks as carriage returns; they become ``\\n``.
        """
        event.prevent_default()
        event.stop()
        if self.read_only:
            return
        text = event.text.replace("\r\n", "\n").replace("\r", "\n")
        if len(text) <= PASTE_COLLAPSE_CHARS and text.count("\n") < PASTE_COLLAPSE_LINES:
            self._insert_text(text)
            return
        token = f"[pasted {_size_label(text)} #{len(self._pastes) + 1}]"
        self._pastes[token] = text
        self._insert_text(token)
        self.focus()

    # ------------------------------------------------------------------ history

    def remember(self, line: str) -> None:
        """Add a sent line to the history (consecutive duplicates are kept once).

        A line sent from this composer is remembered as it was shown, so recalling a
        1 MB paste brings back its placeholder, not a megabyte of text to lay out.

        Args:
            line: the line that was sent.
        """
        if self._sent is not None and line == self._sent[0]:
            line = self._sent[1]
        self._sent = None
        if line and (not self.sent_lines or self.sent_lines[-1] != line):
            self.sent_lines.append(line)
        self._position = len(self.sent_lines)
        self._draft = ""

    def action_cursor_up(self, select: bool = False) -> None:
        """Up: the line above, or on the first line the previous history entry."""
        if not select and self.navigator.is_first_wrapped_line(self.cursor_location) and self.sent_lines:
            self.action_history(-1)
        else:
            super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        """Down: the line below, or on the last line the next history entry (then the draft)."""
        if (not select and self.navigator.is_last_wrapped_line(self.cursor_location)
                and self._position < len(self.sent_lines)):
            self.action_history(1)
        else:
            super().action_cursor_down(select)

    def action_history(self, step: int) -> None:
        """Move through the history; past the newest line the unsent draft returns.

        Going back leaves the cursor at the end of the entry's first line (Up again
        goes further back); going forward leaves it at the very end (Down again goes
        further forward).

        Args:
            step: -1 for an older entry, 1 for a newer one.
        """
        if not self.sent_lines:
            return
        if self._position == len(self.sent_lines):
            self._draft = self.text
        position = max(0, min(len(self.sent_lines), self._position + step))
        if position == self._position:
            return
        self._position = position
        self.load_text(self.sent_lines[position] if position < len(self.sent_lines) else self._draft)
        if step < 0:
            self.move_cursor((0, len(self.document[0])))
        else:
            self.move_cursor(self.document.end)

    # ------------------------------------------------------------------ Tab

    def action_complete(self) -> None:
        """Tab: complete a slash command; anywhere else Tab moves the focus as usual.

        From an empty composer, Tab goes to the block nearest it in the conversation (the
        newest) rather than wrapping round to the oldest one; with a draft prompt it
        stays (a hint says so).
        """
        value = self.text
        if value.strip() and (not value.startswith("/") or value.startswith("//")):
            # A draft prompt keeps the focus: Tab never carries typing off to the blocks.
            self.post_message(self.Hint("Tab completes slash commands; with an empty input it goes to the "
                                        "tool blocks"))
            return
        if not value.startswith("/") or self.cursor_position != len(value):
            self._focus_onward()
            return
        if _EVIDENCE_READ.match(value):
            self._complete_evidence(value)
            return
        completed, matches = complete(value, self._customs)
        if completed != value:
            self.value = completed
        if len(matches) > 1:
            self.post_message(self.Hint("matches: " + "  ".join(m.rsplit(" ", 1)[-1] for m in matches)))
        elif not matches:
            self.post_message(self.Hint(command_hint(completed) or "nothing to complete"))

    def _complete_evidence(self, value: str) -> None:
        """Tab after ``/context evidence read PREFIX``: the whole id, or the candidates."""
        match = _EVIDENCE_READ.match(value)
        assert match is not None
        typed = match.group(1)
        ids = self.evidence_completer(typed) if self.evidence_completer is not None else []
        if not ids:
            self.post_message(self.Hint("no evidence id starts with that" if len(typed) >= 4 else
                                        "type at least 4 characters of an evidence id, then Tab"
                                        if typed else "no evidence in this session yet"))
            return
        if len(ids) == 1:
            self.value = value[: match.start(1)] + ids[0] + " "
            return
        common = _common_prefix(ids)
        if len(common) > len(typed) and common.startswith(typed.lower()):
            self.value = value[: match.start(1)] + common
        self.post_message(self.Hint(f"{len(ids)} matches: " + "  ".join(distinct_prefixes(ids)[:8])
                                    + ("  …" if len(ids) > 8 else "")))

    def _focus_onward(self) -> None:
        chain = self.screen.focus_chain
        if self in chain and chain.index(self) == len(chain) - 1 and len(chain) > 1:
            self.screen.focus_previous()
            return
        raise SkipAction()
