"""The text of ``amos mcp list|tools|check`` (and of ``/mcp`` in the TUI), from plain data.

Issue 18, "Seeing it": each server, its status (not started / running / failed: why),
its tools with effect and permission. Pure functions of :class:`~amos.mcp.ServerStatus`
and :class:`~amos.mcp.ToolEntry` values (or anything with the same attributes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _counts(status: Any) -> str:
    if status.state != "running":
        return ""
    parts = [f"{status.tools} tool{'s' if status.tools != 1 else ''}"]
    if status.prompts:
        parts.append(f"{status.prompts} prompt{'s' if status.prompts != 1 else ''}")
    if status.resources:
        parts.append(f"{status.resources} resource{'s' if status.resources != 1 else ''}")
    return " — " + ", ".join(parts)


def render_servers(statuses: Sequence[Any], *, show_logs: bool = False) -> str:
    """One block per server: ``NAME (TRANSPORT, SOURCE): STATUS — N tools`` and its target.

    Args:
        statuses: ``ServerStatus`` values.
        show_logs: add each server's log file (for ``check``).

    Returns:
        The text (no trailing newline); ``no MCP servers configured`` when empty.
    """
    if not statuses:
        return "no MCP servers configured (mcpServers in the config, or a trusted ./.mcp.json)"
    lines = []
    for status in statuses:
        lines.append(f"{status.name} ({status.transport}, {status.source}): {status.text}{_counts(status)}")
        if status.target:
            lines.append(f"  {status.target}")
        if show_logs and status.state not in ("disabled", "not_started"):
            lines.append(f"  log: {status.log_file}")
    return "\n".join(lines)


def render_tools(statuses: Sequence[Any], entries: Sequence[Any],
                 permissions: Mapping[str, str] | None = None) -> str:
    """Each server's status, then its tools: name, effect, permission, first description line.

    Args:
        statuses: ``ServerStatus`` values.
        entries: ``ToolEntry`` values (left-out tools are shown with why).
        permissions: config ``tools.permissions``, which wins over a tool's own permission.

    Returns:
        The text (no trailing newline).
    """
    if not statuses:
        return render_servers(statuses)
    permissions = permissions or {}
    lines = []
    for status in statuses:
        lines.append(f"{status.name}: {status.text}")
        mine = [e for e in entries if e.server == status.name]
        width = max((len(e.full_name) for e in mine), default=0)
        for entry in mine:
            if not entry.included:
                lines.append(f"  {entry.full_name:<{width}}  left out: {entry.note}")
                continue
            permission = permissions.get(entry.name, entry.permission)
            line = f"  {entry.full_name:<{width}}  effect {entry.effect:<7}  {permission:<5}  {entry.description}"
            lines.append(line.rstrip())
            if entry.name != entry.full_name:
                lines.append(f"  {'':<{width}}  (providers see it as {entry.name})")
        if status.state == "running" and not mine:
            lines.append("  (no tools)")
    return "\n".join(lines)


__all__ = ["render_servers", "render_tools"]
