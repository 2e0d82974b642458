"""What front ends see of a session's MCP servers: ``host.mcp`` (issue 18, "Seeing it").

A small facade over :class:`~amos.engine.mcp.McpTools` that is also usable when no
server is configured (every list is empty), so ``/mcp``, the side panel, ``/help`` and
completion need no special case.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amos.errors import SlashCommandError

if TYPE_CHECKING:
    from amos.engine.mcp import McpTools
    from amos.mcp import McpPrompt, ServerStatus, ToolEntry


class McpControl:
    """The MCP servers of one host, for screens and slash commands.

    Args:
        tools: the engine's MCP collaborator, or None without servers.
    """

    def __init__(self, tools: McpTools | None):
        self._tools = tools

    @property
    def configured(self) -> bool:
        """True when the session has at least one MCP server."""
        return self._tools is not None

    def status(self) -> list[ServerStatus]:
        """Each server: name, transport, target, state (``not_started``, ``running``,
        ``failed`` …) and why it failed; never starts one."""
        return self._tools.status() if self._tools is not None else []

    def tool_entries(self) -> list[ToolEntry]:
        """Every tool listed by the servers started so far, with effect and permission
        (left-out ones carry a ``note``)."""
        return self._tools.tool_entries() if self._tools is not None else []

    def prompts(self) -> list[McpPrompt]:
        """The prompts of running servers, as slash commands ``/mcp__SERVER__PROMPT``."""
        return self._tools.prompts() if self._tools is not None else []

    def take_notices(self) -> list[str]:
        """One-line notices (failed starts, left-out tools) not shown yet."""
        return self._tools.take_notices() if self._tools is not None else []

    async def start(self) -> None:
        """Start every server not started yet (in parallel; a failure is a notice)."""
        if self._tools is not None:
            await self._tools.start()

    async def expand_prompt(self, command: str, rest: str) -> str:
        """The prompt text of ``/COMMAND rest`` for an MCP prompt.

        Raises:
            SlashCommandError: no MCP server is configured, no such prompt, bad
                arguments (with the usage), or the server failed to render it.
        """
        if self._tools is None:
            raise SlashCommandError(f"unknown command /{command} (no MCP server is configured)",
                                    code="UNKNOWN_COMMAND")
        return await self._tools.expand_prompt(command, rest)


__all__ = ["McpControl"]
