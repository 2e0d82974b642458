"""``McpHub``: every configured MCP server of one amos process, started lazily and in parallel.

Issue 18. The engine creates one hub per session (or process), asks it for
:meth:`McpHub.tools` when a run first needs the tool list (that starts every enabled
server at once, each bounded by its ``start_timeout_s``), adds those tools to its
``ToolManager``, shows :meth:`McpHub.take_notices` once, and calls :meth:`McpHub.close`
at the end. A server that fails is reported once and left out; the others go on.

The hub belongs to the event loop it first starts servers on; use it from that loop
only, and close it there (see amos.mcp.launch for why that loop's thread must live as
long as the servers).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amos.errors import SlashCommandError
from amos.mcp.config import McpServers, McpServerSpec, load_mcp_servers
from amos.mcp.connection import ServerConnection
from amos.mcp.prompts import McpPrompt, parse_prompt_arguments, prompt_from_listing
from amos.mcp.results import render_prompt
from amos.mcp.tools import ToolEntry, build_read_resource, build_tools
from amos.tools.base import Tool, ToolFailure

PROMPT_TIMEOUT_S = 60.0
"""Time limit of fetching one prompt (seconds) when the server sets no ``timeout_s``."""


@dataclass(frozen=True)
class ServerStatus:
    """One server for display: ``amos mcp list``, ``/mcp``, the TUI side panel.

    Attributes:
        name: the server name.
        transport: ``stdio``, ``http``, ``sse`` (or the unsupported type given).
        target: its command line or URL, secrets masked.
        source: ``config``, the ``.mcp.json`` path, or both.
        state: ``not_started``, ``starting``, ``running``, ``failed`` or ``disabled``.
        reason: why it failed, or None.
        tools / prompts / resources: counts offered at its last start (tools: usable ones).
        log_file: its stderr log.
        will_restart: a crashed server that restarts on its next call.
    """

    name: str
    transport: str
    target: str
    source: str
    state: str
    reason: str | None
    tools: int
    prompts: int
    resources: int
    log_file: str
    will_restart: bool = False

    @property
    def text(self) -> str:
        """``running``, ``not started``, ``disabled`` or ``failed: why``."""
        if self.state == "failed":
            return f"failed: {self.reason or 'unknown reason'}" + (
                " (restarts on the next call)" if self.will_restart else "")
        return self.state.replace("_", " ")

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (``--json`` output)."""
        return {**self.__dict__, "status": self.text}


class McpHub:
    """The MCP servers of one session (see the module docstring).

    Args:
        servers: what :func:`~amos.mcp.config.load_mcp_servers` returned (its warnings
            become the first notices), or a list of specs.
        log_dir: folder of the servers' stderr logs (e.g. under the session folder).
        cwd: working directory of stdio servers (the workspace).
        environ: amos's environment, default ``os.environ`` (stdio servers get only a
            minimal part of it; ``${VAR}`` was expanded when loading).
        secrets: more values to mask in notices and logs (e.g. provider keys).
    """

    def __init__(self, servers: McpServers | Sequence[McpServerSpec], *, log_dir: Path, cwd: Path,
                 environ: Mapping[str, str] | None = None, secrets: Sequence[str] = ()):
        loaded = servers if isinstance(servers, McpServers) else McpServers(list(servers))
        self.log_dir = Path(log_dir)
        self._secrets = tuple(secrets)
        self._notices: list[str] = list(loaded.warnings)
        self._given: set[str] = set()
        self._specs = loaded
        environ = os.environ if environ is None else environ
        self._conns: dict[str, ServerConnection] = {
            spec.name: ServerConnection(spec, log_dir=self.log_dir, cwd=Path(cwd), environ=environ,
                                        secrets=self._secrets)
            for spec in loaded.servers}
        self._built: dict[str, tuple[int, list[Tool], list[ToolEntry]]] = {}
        self._start_task: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    def from_config(cls, config: Any, *, project_dir: Path | None, log_dir: Path, cwd: Path | None = None,
                    environ: Mapping[str, str] | None = None, secrets: Sequence[str] = ()) -> McpHub:
        """A hub for every server of ``config`` and ``<project_dir>/.mcp.json`` (when trusted).

        Args:
            config: the loaded ``AmosConfig``.
            project_dir: where ``.mcp.json`` is looked for (the current directory).
            log_dir: folder of the server logs.
            cwd: working directory of stdio servers; default ``config.workspace``.
            environ: default ``os.environ``.
            secrets: more values to mask.

        Raises:
            ConfigError: an invalid ``.mcp.json`` or server entry (exit 2).
        """
        servers = load_mcp_servers(config, project_dir=project_dir, environ=environ)
        return cls(servers, log_dir=log_dir, cwd=Path(cwd or getattr(config, "workspace", ".")),
                   environ=environ, secrets=secrets)

    # ------------------------------------------------------------ starting

    @property
    def configured(self) -> bool:
        """True when at least one server is configured (enabled or not)."""
        return bool(self._conns)

    async def start(self) -> None:
        """Start every enabled server not started yet, in parallel; return when each is
        running or has failed (bounded by its ``start_timeout_s``). Never raises for a
        server's failure (see :meth:`take_notices`); concurrent callers share one start."""
        if self._closed:
            return
        if self._start_task is None or (self._start_task.done() and any(
                c.state == "not_started" for c in self._conns.values())):
            self._start_task = asyncio.ensure_future(self._start_all())
        await asyncio.shield(self._start_task)

    async def _start_all(self) -> None:
        pending = [conn.start() for conn in self._conns.values()  # a crashed one restarts on its next call
                   if conn.state == "not_started" or (conn.state == "failed" and not conn.restartable)]
        await asyncio.gather(*pending, return_exceptions=True)

    async def tools(self) -> list[Tool]:
        """The tools of every running server (starting them first), plus
        ``mcp_read_resource`` when one offers resources; in config order."""
        await self.start()
        tools: list[Tool] = []
        owner: dict[str, str] = {}
        for conn in self._conns.values():
            for tool in self._server_tools(conn)[0]:
                if tool.name in owner:  # server "a__b" tool "c" and server "a" tool "b__c"
                    self._notices.append(f"MCP server {conn.spec.name}: tool {tool.display_name or tool.name} "
                                         f"left out: MCP server {owner[tool.name]} has a tool of the same name")
                    continue
                owner[tool.name] = conn.spec.name
                tools.append(tool)
        reader = build_read_resource(list(self._conns.values()))
        if reader is not None:
            tools.append(reader)
        return tools

    def _server_tools(self, conn: ServerConnection) -> tuple[list[Tool], list[ToolEntry]]:
        if conn.listing is None:
            return [], []
        built = self._built.get(conn.spec.name)
        if built is None or built[0] != conn.generation:
            tools, entries, notices = build_tools(conn)
            conn.notices += notices
            built = (conn.generation, tools, entries)
            self._built[conn.spec.name] = built
        return built[1], built[2]

    def tool_entries(self) -> list[ToolEntry]:
        """Every listed tool of the servers started so far, left-out ones included."""
        return [entry for conn in self._conns.values() for entry in self._server_tools(conn)[1]]

    def display_names(self) -> dict[str, str]:
        """Shortened tool name → full ``mcp__SERVER__TOOL`` for tools whose name was shortened."""
        return {e.name: e.full_name for e in self.tool_entries() if e.name != e.full_name}

    # ------------------------------------------------------------ seeing it

    def status(self) -> list[ServerStatus]:
        """Every configured server's status, in config order (cheap; never starts anything)."""
        out = []
        for conn in self._conns.values():
            listing = conn.listing if conn.state == "running" or conn.restartable else None
            tools = len(self._server_tools(conn)[0]) if listing is not None else 0
            out.append(ServerStatus(
                name=conn.spec.name, transport=conn.spec.transport, target=conn.spec.display_target(),
                source=conn.spec.source, state=conn.state, reason=conn.reason, tools=tools,
                prompts=len(listing.prompts) if listing else 0,
                resources=len(listing.resources) if listing else 0, log_file=str(conn.log_file),
                will_restart=conn.state == "failed" and conn.restartable and conn.restarts_left > 0))
        return out

    def take_notices(self) -> list[str]:
        """One-line notices (config warnings, failed starts, left-out tools, restarts) not
        taken before — so each is shown once (an identical line is never repeated).
        Secrets are already masked."""
        for conn in self._conns.values():
            self._server_tools(conn)  # a left-out tool is noticed as soon as it is listed
            self._notices += conn.notices
            conn.notices.clear()
        taken = [n for n in dict.fromkeys(self._notices) if n not in self._given]
        self._notices = []
        self._given.update(taken)
        return taken

    def secret_values(self) -> tuple[str, ...]:
        """Header values, env values and secret ``${VAR}`` substitutions of every server,
        for the engine to add to its masked values (issue 18, "Secrets")."""
        return self._specs.secret_values()

    # ------------------------------------------------------------ prompts

    async def prompts(self) -> list[McpPrompt]:
        """The prompts of every running server as slash commands (starting them first)."""
        await self.start()
        return self.prompts_now()

    def prompts_now(self) -> list[McpPrompt]:
        """The prompts of the servers already running (never starts anything)."""
        out: list[McpPrompt] = []
        for conn in self._conns.values():
            if conn.listing is not None and conn.state == "running":
                out += [prompt_from_listing(conn.spec.name, p) for p in conn.listing.prompts]
        return out

    async def expand_prompt(self, command: str, rest: str) -> str:
        """The user prompt text of ``/COMMAND rest`` for an MCP prompt.

        Args:
            command: the command name without the slash (``mcp__SERVER__PROMPT``).
            rest: what was typed after it.

        Returns:
            The prompt's messages as text.

        Raises:
            SlashCommandError: no such prompt (code ``UNKNOWN_COMMAND``), bad or missing
                arguments (with the usage), or the server failed to render it.
        """
        prompts = {p.command: p for p in await self.prompts()}
        prompt = prompts.get(command)
        if prompt is None:
            raise SlashCommandError(f"unknown MCP prompt /{command}", code="UNKNOWN_COMMAND")
        arguments = parse_prompt_arguments(prompt, rest)
        conn = self._conns[prompt.server]
        timeout = float(conn.spec.settings.timeout_s or PROMPT_TIMEOUT_S)
        try:
            result = await conn.get_prompt(prompt.prompt, arguments, timeout)
        except ToolFailure as exc:
            raise SlashCommandError(f"/{command}: {exc}", usage=prompt.usage) from None
        text = render_prompt(result)
        if not text.strip():
            raise SlashCommandError(f"/{command} expands to an empty prompt", usage=prompt.usage)
        return text

    # ------------------------------------------------------------ closing

    async def close(self) -> None:
        """Stop every server and wait for their processes to end (at most ~10 s each, in
        parallel). Safe to call twice; the hub starts nothing afterwards."""
        self._closed = True
        if self._start_task is not None and not self._start_task.done():
            self._start_task.cancel()
            await asyncio.gather(self._start_task, return_exceptions=True)
        await asyncio.gather(*(conn.close() for conn in self._conns.values()), return_exceptions=True)

    async def __aenter__(self) -> McpHub:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["McpHub", "ServerStatus", "PROMPT_TIMEOUT_S"]
