"""The line parser shared by the TUI and ``amos run``.

A line that starts with ``/`` is a slash command; ``//text`` sends the literal prompt
``/text``; anything else is a prompt (DESIGN.md). Fixed arguments are
whitespace-separated tokens (double quotes group a token with spaces); a trailing
``TEXT…`` is the rest of the line exactly as typed (spec/slash-commands.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from amos.errors import SlashCommandError

_COMMAND = re.compile(r"(\S*)\s*(.*)", re.S)


@dataclass(frozen=True)
class ParsedLine:
    """One input line.

    Attributes:
        kind: ``prompt`` or ``command``.
        text: the prompt text (``prompt``), or the whole command line (``command``).
        name: command name without the slash (``context``), or None for prompts.
        rest: everything after the command name, leading whitespace removed.
    """

    kind: str
    text: str
    name: str | None = None
    rest: str = ""


def parse_line(line: str) -> ParsedLine:
    """Classify a line as a prompt or a slash command.

    ``//text`` is the prompt ``/text``; ``/`` alone or ``/ x`` is a command with an
    empty name (reported as unknown by the dispatcher).
    """
    if line.startswith("//"):
        return ParsedLine("prompt", line[1:])
    if line.startswith("/"):
        match = _COMMAND.match(line[1:])
        assert match is not None
        return ParsedLine("command", line, match.group(1), match.group(2))
    return ParsedLine("prompt", line)


def split_tokens(text: str, count: int, *, rest: bool = False) -> tuple[list[str], str]:
    """Take ``count`` whitespace-separated tokens (``"..."`` groups spaces) from ``text``.

    Args:
        text: the argument text.
        count: number of fixed tokens to take (fewer are returned if the text ends).
        rest: when True the remainder (exactly as typed, leading whitespace removed) is
            returned as the trailing ``TEXT…`` argument.

    Returns:
        ``(tokens, remainder)``.

    Raises:
        SlashCommandError: an unterminated quote.
    """
    tokens: list[str] = []
    i, n = 0, len(text)
    while len(tokens) < count:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        if text[i] == '"':
            end = text.find('"', i + 1)
            if end < 0:
                raise SlashCommandError("unterminated double quote")
            tokens.append(text[i + 1 : end])
            i = end + 1
        else:
            start = i
            while i < n and not text[i].isspace():
                i += 1
            tokens.append(text[start:i])
    remainder = text[i:].lstrip() if rest else text[i:].strip()
    return tokens, remainder
