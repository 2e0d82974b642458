"""``amos mcp list|tools|check``: the configured MCP servers, their tools, whether they start.

A thin client of :mod:`amos.mcp` (STYLE.md §1; issue 18, "Seeing it"): each command
loads the config, builds an :class:`~amos.mcp.McpHub` and renders plain data with
:func:`~amos.mcp.render_servers` / :func:`~amos.mcp.render_tools`. Notices (an untrusted
``.mcp.json``, a server that failed to start) go to stderr as ``warning:`` lines; an
invalid config is one ``amos:`` line and exit 2. The MCP SDK is imported only when a
server is started (``tools`` and ``check``), never for ``amos --help``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from amos import aio
from amos.errors import AmosError

mcp_app = typer.Typer(
    help="List MCP servers, their tools, and check that they start.",
    no_args_is_help=True,
)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="Config file applied over the user config and a trusted ./amos.json.",
                 show_default=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


@contextmanager
def _command_edge() -> Iterator[None]:
    try:
        yield
    except (AmosError, OSError) as exc:
        typer.echo(f"amos: {' '.join(str(exc).split())}", err=True)
        raise typer.Exit(2) from None


def _hub(config: Path | None) -> tuple[Any, Any]:
    """``(library, hub)`` for the current directory; config warnings go to stderr."""
    from amos.engine import Library

    library, warnings = Library.open(config)
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)
    return library, library.mcp_hub(Path.cwd())


def _notices(hub: Any) -> None:
    for notice in hub.take_notices():
        typer.echo(f"warning: {notice}", err=True)


async def _started(hub: Any) -> tuple[list[Any], list[Any]]:
    """Start every server; ``(statuses, tool entries)`` as they were before closing them."""
    try:
        await hub.tools()
        return hub.status(), hub.tool_entries()
    finally:
        await hub.close()


@mcp_app.command("list")
def list_command(config: ConfigOption = None, json_out: JsonOption = False) -> None:
    """List the configured MCP servers without starting them.

    Servers come from mcpServers in the config and from ./.mcp.json once
    it is trusted (amos config trust).

    Examples:

        amos mcp list

        amos mcp list --json
    """
    from amos.mcp.render import render_servers

    with _command_edge():
        _, hub = _hub(config)
        _notices(hub)
        statuses = hub.status()
        if json_out:
            typer.echo(json.dumps({"servers": [s.to_json() for s in statuses]}, indent=2))
        else:
            typer.echo(render_servers(statuses))


@mcp_app.command("tools")
def tools_command(config: ConfigOption = None, json_out: JsonOption = False) -> None:
    """Start the MCP servers and list their tools with effect and permission.

    A tool's permission is its server's tools.NAME.permission, else allow
    for a read-only tool of a server with trust_annotations, else ask;
    tools.permissions in the config wins over both.

    Examples:

        amos mcp tools

        amos mcp tools --json
    """
    from amos.mcp.render import render_tools

    with _command_edge():
        library, hub = _hub(config)
        statuses, entries = aio.run(_started(hub))
        _notices(hub)
        permissions = library.tool_permissions()
        if json_out:
            tools = [{**e.to_json(), "permission": permissions.get(e.name, e.permission)} for e in entries]
            typer.echo(json.dumps({"servers": [s.to_json() for s in statuses], "tools": tools}, indent=2))
        else:
            typer.echo(render_tools(statuses, entries, permissions))


@mcp_app.command("check")
def check_command(config: ConfigOption = None, json_out: JsonOption = False) -> None:
    """Start every enabled MCP server and report whether each runs.

    Exit 0 when every enabled server started, 1 when one failed (its
    stderr is in the log file shown), 2 for an invalid config.

    Examples:

        amos mcp check

        amos mcp check --json
    """
    from amos.mcp.render import render_servers

    with _command_edge():
        _, hub = _hub(config)
        statuses, _ = aio.run(_started(hub))
        _notices(hub)
        failed = [s for s in statuses if s.state == "failed"]
        if json_out:
            typer.echo(json.dumps({"ok": not failed, "servers": [s.to_json() for s in statuses]}, indent=2))
        else:
            typer.echo(render_servers(statuses, show_logs=True))
    raise typer.Exit(1 if failed else 0)
