"""The input line: prompts and slash commands, with Up/Down history and Tab completion.

Tab completes slash-command names (the built-ins of :data:`amos.slash.COMMANDS`), the
subcommands their usage lines list (``/session li`` → ``/session list``) and the
command names ``/help`` takes. The
hint for a partly typed command (its usage, or the names that match) is computed
here and shown by the app on its notice line.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from textual.actions import SkipAction
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

from amos.slash import COMMANDS

CSS_PATH = Path(__file__).with_suffix(".tcss")

PLACEHOLDER = "prompt or /help · Enter sends · Ctrl+C cancels · Ctrl+Q quits"

_WORD = re.compile(r"[a-z][a-z_-]*")


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


def _common_prefix(words: list[str]) -> str:
    return os.path.commonprefix(words) if words else ""


def complete(value: str) -> tuple[str, list[str]]:
    """Tab completion of a slash-command line.

    Args:
        value: the input's text (completion happens at its end).

    Returns:
        ``(new_value, matches)``: ``new_value`` is ``value`` extended as far as the
        matches agree (with a trailing space when exactly one matched); ``matches``
        are the full candidates, as they would be typed.
    """
    if not value.startswith("/") or value.startswith("//"):
        return value, []
    name, space, rest = value[1:].partition(" ")
    if not space:
        names = sorted(n for n in COMMANDS if n.startswith(name))
        if len(names) == 1:
            return f"/{names[0]} ", [f"/{names[0]}"]
        return "/" + max(name, _common_prefix(names), key=len), [f"/{n}" for n in names]
    if " " in rest.strip() or rest != rest.lstrip():
        return value, []
    choices = list(COMMANDS) if name == "help" else subcommands(name)
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


class PromptInput(Input):
    """An ``Input`` that remembers the lines sent in this app (Up/Down recall them)."""

    BINDINGS = [
        Binding("up", "history(-1)", "Previous line", show=False),
        Binding("down", "history(1)", "Next line", show=False),
        Binding("tab", "complete", "Complete a slash command", show=False),
    ]

    class Hint(Message):
        """A hint for the notice line (completion candidates).

        Attributes:
            text: the hint, one line.
        """

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

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

    def action_complete(self) -> None:
        """Tab: complete a slash command; anywhere else Tab moves the focus as usual."""
        if not self.value.startswith("/") or self.value.startswith("//") or self.cursor_position != len(self.value):
            raise SkipAction()
        value, matches = complete(self.value)
        if value != self.value:
            self.value = value
            self.cursor_position = len(value)
        if len(matches) > 1:
            self.post_message(self.Hint("matches: " + "  ".join(m.rsplit(" ", 1)[-1] for m in matches)))
        elif not matches:
            self.post_message(self.Hint(command_hint(self.value) or "nothing to complete"))
