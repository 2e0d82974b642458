"""MCP prompts as slash commands: ``/mcp__SERVER__PROMPT args`` (issue 18, "Prompts and resources").

A prompt is data the slash layer can list (``/help``, completion, F1) and expand: the
arguments typed after the command are matched to the prompt's declared arguments by
position and as ``name=value`` (double quotes group a value with spaces, also after
``name=``), the server
renders the prompt, and its messages become the user prompt text
(amos.mcp.results.render_prompt).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amos.errors import SlashCommandError
from amos.mcp.naming import tool_names

MAX_PROMPT_TOKENS = 256
"""Most argument tokens read from one prompt command line."""


@dataclass(frozen=True)
class PromptArgument:
    """One declared argument: its name, description and whether it is required."""

    name: str
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class McpPrompt:
    """One prompt of a running server, as a slash command.

    Attributes:
        command: the command name without the slash (``mcp__SERVER__PROMPT``, shortened
            like tool names when needed).
        full_name: ``mcp__SERVER__PROMPT`` as the server spells it.
        server / prompt: the server and its own prompt name.
        description: one line for ``/help``.
        arguments: the declared arguments, in order.
    """

    command: str
    full_name: str
    server: str
    prompt: str
    description: str
    arguments: tuple[PromptArgument, ...] = ()

    @property
    def usage(self) -> str:
        """``/mcp__s__p NAME [OPTIONAL]`` (required names bare, optional ones in brackets)."""
        parts = [a.name.upper() if a.required else f"[{a.name.upper()}]" for a in self.arguments]
        return " ".join([f"/{self.command}", *parts])

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {"command": self.command, "full_name": self.full_name, "server": self.server,
                "prompt": self.prompt, "description": self.description,
                "arguments": [a.__dict__ for a in self.arguments]}


def prompt_from_listing(server: str, listed: Any) -> McpPrompt:
    """An :class:`McpPrompt` from the SDK's ``Prompt``."""
    name = str(getattr(listed, "name", ""))
    command, full = tool_names(server, name)
    arguments = tuple(
        PromptArgument(str(getattr(a, "name", "")), str(getattr(a, "description", None) or ""),
                       bool(getattr(a, "required", False)))
        for a in (getattr(listed, "arguments", None) or []) if getattr(a, "name", None))
    description = str(getattr(listed, "description", None) or getattr(listed, "title", None) or "")
    description = " ".join(description.split())[:200] or f"prompt {name} of MCP server {server}"
    return McpPrompt(command, full, server, name, description, arguments)


def parse_prompt_arguments(prompt: McpPrompt, rest: str) -> dict[str, str]:
    """Match what was typed after ``/COMMAND`` to the prompt's arguments.

    ``name=value`` sets a declared argument by name; other tokens fill the arguments not
    named, in order; when more tokens than free arguments are typed, the last free one
    takes the rest (joined by spaces), so ``/mcp__s__summarize some long text`` works.

    Args:
        prompt: the prompt.
        rest: the text after the command name.

    Returns:
        Argument name to value (only the ones given).

    Raises:
        SlashCommandError: an unterminated quote, a ``name=`` twice, text for a prompt
            without arguments, or a required argument missing (the usage is attached).
    """
    tokens = _tokens(rest)
    if tokens is None:
        raise SlashCommandError(f"/{prompt.command}: unterminated double quote", usage=prompt.usage)
    declared = [a.name for a in prompt.arguments]
    values: dict[str, str] = {}
    positional: list[str] = []
    for token in tokens:
        key, sep, value = token.partition("=")
        if sep and key in declared:
            if key in values:
                raise SlashCommandError(f"/{prompt.command}: {key}= given twice", usage=prompt.usage)
            values[key] = value
        else:
            positional.append(token)
    free = [name for name in declared if name not in values]
    if positional and not free:
        what = "takes no arguments" if not declared else "has no argument left for " + repr(positional[0])
        raise SlashCommandError(f"/{prompt.command} {what}", usage=prompt.usage)
    for index, token in enumerate(positional):
        if index >= len(free) - 1:
            values[free[-1]] = " ".join(positional[index:])
            break
        values[free[index]] = token
    missing = [a.name for a in prompt.arguments if a.required and a.name not in values]
    if missing:
        raise SlashCommandError(f"/{prompt.command} needs {', '.join(m.upper() for m in missing)}",
                                usage=prompt.usage)
    return values


def _tokens(text: str) -> list[str] | None:
    """Whitespace-separated tokens; double quotes anywhere in a token group spaces
    (``style="very warm"`` is ``style=very warm``); apostrophes are ordinary. None for an
    unterminated quote."""
    tokens: list[str] = []
    current: list[str] = []
    quoted = started = False
    for char in text:
        if char == '"':
            quoted, started = not quoted, True
        elif char.isspace() and not quoted:
            if started:
                tokens.append("".join(current))
            current, started = [], False
        else:
            current.append(char)
            started = True
        if len(tokens) >= MAX_PROMPT_TOKENS:
            break
    if quoted:
        return None
    if started and len(tokens) < MAX_PROMPT_TOKENS:
        tokens.append("".join(current))
    return tokens


__all__ = ["PromptArgument", "McpPrompt", "prompt_from_listing", "parse_prompt_arguments"]
