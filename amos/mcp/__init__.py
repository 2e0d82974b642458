"""MCP client support: tools, prompts and resources of Model Context Protocol servers (issue 18).

The public face, importable without the MCP SDK (it is imported when a server starts):

- :func:`load_mcp_servers` / :class:`McpServers` / :class:`McpServerSpec` — config
  (``mcpServers`` in amos's config and a trusted project ``.mcp.json``);
- :class:`McpHub` — starts servers lazily and in parallel, gives their tools as amos
  ``Tool``s, their prompts as slash-command data, status and notices, and closes them;
- :class:`ServerStatus`, :class:`ToolEntry`, :class:`McpPrompt` — plain data for screens;
- :func:`render_servers` / :func:`render_tools` — the text of ``amos mcp list|tools|check``;
- :func:`trust_mcp_file` — ``amos config trust`` for ``.mcp.json``.
"""

from __future__ import annotations

from amos.mcp.config import (
           McpServers,
           McpServerSpec,
           load_mcp_servers,
           mcp_json_path,
           trust_mcp_file,
)
from amos.mcp.hub import McpHub, ServerStatus
from amos.mcp.prompts import McpPrompt, PromptArgument, parse_prompt_arguments
from amos.mcp.render import render_servers, render_tools
from amos.mcp.tools import READ_RESOURCE, ToolEntry

__all__ = ["McpHub", "McpServers", "McpServerSpec", "ServerStatus", "ToolEntry", "McpPrompt",
           "PromptArgument", "READ_RESOURCE", "load_mcp_servers", "mcp_json_path", "trust_mcp_file",
           "parse_prompt_arguments", "render_servers", "render_tools"]
