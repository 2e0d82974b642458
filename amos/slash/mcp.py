"""``/mcp`` and the MCP prompts as slash commands ``/mcp__SERVER__PROMPT ARGS`` (issue 18).

``/mcp`` starts the servers not started yet (in parallel; ``run_line`` awaits that) and
shows each one's status and its tools with effect and permission — the same text as
``amos mcp tools``. A name beginning ``mcp__`` that is neither a built-in nor a custom
command is an MCP prompt: ``run_line`` has the server render it and runs the result as
a typed prompt.
"""

from __future__ import annotations

from typing import Any

from amos.errors import SlashCommandError
from amos.mcp import render_tools

MCP_USAGE = "/mcp"
MCP_PREFIX = "mcp__"


def mcp_view(runner: Any, line: str) -> Any:
    """The ``/mcp`` result of the servers as they are now (status, tools, prompts)."""
    from amos.slash.commands import SlashResult

    mcp = runner.mcp
    statuses = mcp.status()
    entries = mcp.tool_entries()
    prompts = mcp.prompts()
    permissions = {row["name"]: row["permission"] for row in runner.tools_report()}
    text = render_tools(statuses, entries, permissions)
    if prompts:
        width = max(len(p.usage) for p in prompts)
        text += "\n\nMCP prompts (slash commands that send the server's prompt):\n"
        text += "\n".join(f"  {p.usage:<{width}}  {p.description}" for p in prompts)
    notices = mcp.take_notices()
    if notices:
        text += "\n\n" + "\n".join(f"warning: {n}" for n in notices)
    return SlashResult(command=line, text=text, result={
        "servers": [s.to_json() for s in statuses], "tools": [e.to_json() for e in entries],
        "prompts": [p.to_json() for p in prompts], "notices": notices})


def mcp_command(runner: Any, rest: str, line: str) -> Any:
    """``/mcp``: start the servers (``run_line`` awaits it), then show them."""
    from amos.slash.commands import SlashResult

    if rest.strip():
        raise SlashCommandError("/mcp takes no arguments", usage=MCP_USAGE)
    if not runner.mcp.configured or all(s.state != "not_started" for s in runner.mcp.status()):
        return mcp_view(runner, line)  # nothing left to start: show them now
    return SlashResult(command=line, text="starting MCP servers…", action="mcp_start")


def prompt_rows(runner: Any) -> list[dict[str, Any]]:
    """``/help`` rows of the MCP prompts of running servers."""
    return [{"usage": p.usage, "summary": p.description, "mcp": True, "server": p.server}
            for p in runner.mcp.prompts()]


def mcp_prompt_result(runner: Any, name: str, rest: str, line: str) -> Any:
    """A line naming an MCP prompt: ``action="mcp_prompt"`` for ``run_line`` to expand.

    Raises:
        SlashCommandError: no MCP server is configured (``UNKNOWN_COMMAND``).
    """
    from amos.slash.commands import SlashResult

    if not runner.mcp.configured:
        raise SlashCommandError(f"unknown command /{name}; /help lists commands (no MCP server is configured)",
                                usage="/help [command]", code="UNKNOWN_COMMAND")
    return SlashResult(command=line, result={"mcp_prompt": name, "arguments": rest}, text=f"/{name}",
                       action="mcp_prompt", action_arg=name)


__all__ = ["mcp_command", "mcp_view", "mcp_prompt_result", "prompt_rows", "MCP_PREFIX", "MCP_USAGE"]
