"""MCP servers inside the engine: their tools under every gate, their notices, their prompts (issue 18).

The MCP client itself is :mod:`amos.mcp` (config, connections, tools, prompts). This
module is what the engine adds around it:

- :class:`McpBridge` runs the session's :class:`~amos.mcp.McpHub` on a thread and event
  loop of its own. A hub belongs to the loop that started its servers, and a stdio
  server's death signal fires when the thread that started it ends
  (:mod:`amos.mcp.launch`), while front ends run each command on a loop of their own
  (``amos run`` uses one per step, the TUI its app loop). On its own thread the hub
  outlives every front-end loop and dies with amos; a call hops there and back
  (``asyncio.run_coroutine_threadsafe``), a cancelled call is cancelled there too.
- :class:`McpTools` is the engine's collaborator: before a run's first request (and
  before held calls are resumed) it starts the servers once, in parallel, and puts their
  tools into the run's :class:`~amos.tools.ToolManager` — from there a tool of a server
  gets exactly what a built-in gets: permissions and approvals, loop-policy admission,
  doom-loop identity, evidence, masking, receipts. As a gate it shows the hub's
  one-line notices (a failed start, a crash, a restart) once, when they arise.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from amos.engine.gates import Gate
from amos.events import Notice

if TYPE_CHECKING:
    from amos.engine.state import RunState
    from amos.mcp import McpHub, McpPrompt, ServerStatus, ToolEntry
    from amos.policy.loop_policy import LoopPolicy
    from amos.tools.base import Tool
    from amos.tools.manager import ToolManager

T = TypeVar("T")

CLOSE_TIMEOUT_S = 15.0
"""How long :meth:`McpBridge.close` waits for the servers to stop (seconds; the hub gives
each ~10 s, in parallel)."""

QUICK_TIMEOUT_S = 5.0
"""Time limit of a status or listing read from the hub's thread (seconds)."""


def is_mcp_tool_name(name: str) -> bool:
    """True for a name an MCP server's tool (or ``mcp_read_resource``) may have."""
    return name.startswith("mcp__") or name == "mcp_read_resource"


class McpBridge:
    """One :class:`~amos.mcp.McpHub` on a daemon thread with its own event loop.

    The thread starts on first use and ends in :meth:`close`. Everything that touches
    the hub runs on that loop.

    Args:
        make_hub: builds the (unstarted) hub; called once, on the hub's thread.
    """

    def __init__(self, make_hub: Callable[[], McpHub]):
        self._make_hub = make_hub
        self._hub: McpHub | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def started(self) -> bool:
        """True once the hub's thread runs (servers may still be unstarted)."""
        return self._loop is not None

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise RuntimeError("the MCP servers of this session were closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=main, name="amos-mcp", daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
                future = asyncio.run_coroutine_threadsafe(self._build(), loop)
                future.result()
            return self._loop

    async def _build(self) -> None:
        self._hub = self._make_hub()

    def _submit(self, fn: Callable[[McpHub], Awaitable[T]]) -> concurrent.futures.Future[T]:
        loop = self._ensure()

        async def body() -> T:
            assert self._hub is not None
            return await fn(self._hub)

        return asyncio.run_coroutine_threadsafe(body(), loop)

    async def call(self, fn: Callable[[McpHub], Awaitable[T]]) -> T:
        """Await ``fn(hub)`` on the hub's loop from any other loop.

        Cancelling the awaiting task cancels ``fn`` on the hub's loop.

        Raises:
            RuntimeError: the bridge was closed.
            Exception: whatever ``fn`` raises.
        """
        return await asyncio.wrap_future(self._submit(fn))

    def call_sync(self, fn: Callable[[McpHub], T], timeout: float = QUICK_TIMEOUT_S) -> T:
        """``fn(hub)`` (a quick, synchronous read) run on the hub's loop; blocks the caller.

        Raises:
            TimeoutError: the hub's loop did not answer within ``timeout`` seconds.
        """
        async def run(hub: McpHub) -> T:
            return fn(hub)

        return self._submit(run).result(timeout)

    def wrap(self, tool: Tool) -> Tool:
        """``tool`` with its ``run`` executed on the hub's loop (the call hops threads)."""
        inner = tool.run

        async def run(args: Any, ctx: Any) -> Any:
            return await self.call(lambda _hub: inner(args, ctx))

        return dataclasses.replace(tool, run=run)

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Stop every server, then the hub's thread (idempotent; safe from any thread
        but the hub's own)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        hub = self._hub
        if hub is not None:
            try:
                asyncio.run_coroutine_threadsafe(hub.close(), loop).result(timeout)
            except Exception:  # noqa: BLE001 - closing must never fail the caller; servers die with amos anyway
                pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=2.0)
        if not thread.is_alive():
            loop.close()


class McpTools(Gate):
    """The engine's MCP collaborator: tools into the tool set, notices into the run.

    Args:
        bridge: the hub on its thread.
        tools: the session's tool manager (its external tools are replaced).
        server_names: the configured servers, for the progress line.
    """

    name = "mcp"

    def __init__(self, bridge: McpBridge, tools: ToolManager, server_names: Sequence[str]):
        self.bridge = bridge
        self._tools = tools
        self._names = list(server_names)
        self._listed = False

    async def prepare(self, run: RunState, policy: LoopPolicy | None) -> None:
        """Start the servers (the first time: in parallel, each bounded by its start
        timeout), install their tools, and emit what the hub has to say.

        A server that fails is one notice; the run goes on without its tools. When the
        loop policy names an MCP tool that no server offers, that is a warning too (the
        check at open could not see MCP tools yet).
        """
        if not self._listed:
            run.emit(Notice(text=f"MCP: starting {len(self._names)} server(s): {', '.join(self._names)}"))
        offered = await self.bridge.call(lambda hub: hub.tools())
        self._tools.set_external([self.bridge.wrap(tool) for tool in offered])
        if not self._listed:
            self._listed = True
            names = [t.display_name or t.name for t in offered]
            run.emit(Notice(text=f"MCP: {len(names)} tool(s) ready" + (f": {', '.join(names[:8])}"
                                                                      + (" …" if len(names) > 8 else "")
                                                                      if names else "")))
        for name in self._tools.shadowed:
            run.emit(Notice(level="warning", text=f"MCP: tool {name} left out: a built-in tool has that name"))
        self.emit_notices(run)
        if policy is not None:
            tools = self._tools
            try:
                policy.check_tools({spec.name: tools.effect(spec.name) for spec in tools.specs()})
            except ValueError as exc:
                run.emit(Notice(level="warning", text=f"loop_policy: {exc}"))

    def emit_notices(self, run: RunState) -> None:
        """Emit each notice of the hub not shown yet (secrets already masked)."""
        if not self.bridge.started:
            return
        try:
            notices = self.bridge.call_sync(lambda hub: hub.take_notices())
        except Exception:  # noqa: BLE001 - a notice must never stop a run
            return
        for text in notices:
            run.emit(Notice(level="warning", text=text))

    async def round_finished(self, run: RunState) -> None:
        """A crash, restart or timeout of a server during the round: say so once."""
        self.emit_notices(run)

    # ------------------------------------------------------------ seeing it

    def status(self) -> list[ServerStatus]:
        """Each configured server's status (never starts a server)."""
        return self.bridge.call_sync(lambda hub: hub.status())

    def tool_entries(self) -> list[ToolEntry]:
        """Every listed tool of the servers started so far (left-out ones too)."""
        return self.bridge.call_sync(lambda hub: hub.tool_entries())

    def prompts(self) -> list[McpPrompt]:
        """The prompts of the running servers (never starts a server)."""
        if not self.bridge.started:
            return []
        return self.bridge.call_sync(lambda hub: hub.prompts_now())

    async def start(self) -> None:
        """Start every server not started yet and install their tools (``/mcp``, the TUI
        at start-up), without a run."""
        offered = await self.bridge.call(lambda hub: hub.tools())
        self._tools.set_external([self.bridge.wrap(tool) for tool in offered])
        self._listed = True

    def take_notices(self) -> list[str]:
        """The hub's notices not shown yet (for front ends outside a run)."""
        if not self.bridge.started:
            return []
        return self.bridge.call_sync(lambda hub: hub.take_notices())

    async def expand_prompt(self, command: str, rest: str) -> str:
        """The prompt text of ``/mcp__SERVER__PROMPT rest`` (starting servers first).

        Raises:
            SlashCommandError: no such prompt, bad arguments, or the server failed.
        """
        return await self.bridge.call(lambda hub: hub.expand_prompt(command, rest))

    def close(self) -> None:
        """Stop the servers and the hub's thread."""
        self.bridge.close()


__all__ = ["McpBridge", "McpTools", "is_mcp_tool_name", "CLOSE_TIMEOUT_S"]
