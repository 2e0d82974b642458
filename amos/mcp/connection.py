"""One MCP server: start it, list what it offers, call it, restart it once, stop it.

Issue 18, "Lifecycle". A :class:`ServerConnection` owns one server through the official
SDK's ``mcp.Client`` (imported here, on first start, never at ``import amos``). The
client lives in a background task of the hub's event loop (the SDK's context managers
must be entered and left in one task); calls are made from any task of that loop.

- A start is bounded by ``start_timeout_s`` and covers spawning or connecting, the MCP
  handshake and listing tools, prompts and resources. A failure is reported once, as
  one line (:attr:`ServerConnection.notices`): name, command or URL, why, the last lines
  of its stderr and the log file.
- A call is bounded by its timeout. A server that closes its connection or exits
  mid-call gives that call :class:`~amos.tools.ToolEffectUncertain` (completion
  ``unknown`` for non-read tools); one that does not answer in time gives
  :class:`~amos.tools.ToolTimeout`. Either way the server is stopped, and the next
  call restarts it — once; after a second failure it stays failed.
- An error the server answers with (a JSON-RPC error) is a plain ``ToolFailure``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import shutil
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amos.mcp.config import McpServerSpec
from amos.mcp.launch import MaskedStderr, log_path, open_log, server_env, stderr_tail, supervised
from amos.tools.base import ToolEffectUncertain, ToolFailure, ToolTimeout

log = logging.getLogger("amos.mcp")

MAX_PAGES = 100
"""Most pages of tools, prompts or resources read from one server."""

STOP_GRACE_S = 10.0
"""Longest wait for one server's shutdown at close (the SDK's own shutdown takes ≤ ~5 s)."""

_current: contextvars.ContextVar[ServerConnection | None] = contextvars.ContextVar("amos_mcp_server", default=None)
_sdk_logging_ready = False


@dataclass
class Listing:
    """What a running server offers (raw SDK objects).

    Attributes:
        tools / prompts / resources: ``mcp.types.Tool`` / ``Prompt`` / ``Resource`` lists.
        resources_supported: the server declared the resources capability.
        server_name / server_version: what the server calls itself, or "".
    """

    tools: list[Any] = field(default_factory=list)
    prompts: list[Any] = field(default_factory=list)
    resources: list[Any] = field(default_factory=list)
    resources_supported: bool = False
    server_name: str = ""
    server_version: str = ""


class ServerConnection:
    """The lifecycle of one configured MCP server (see the module docstring).

    Args:
        spec: the server's resolved config.
        log_dir: folder of the server's stderr log.
        cwd: working directory of a stdio server.
        environ: amos's environment (for the minimal environment of a stdio server).
        secrets: values masked in notices and logs (this server's and the engine's).

    Attributes:
        state: ``not_started``, ``starting``, ``running``, ``failed`` or ``disabled``.
        reason: why it failed (one line), or None.
        listing: what it offered at its last start, or None.
        notices: one-line notices not yet taken by the hub.
        log_file: the server's stderr log.
    """

    def __init__(self, spec: McpServerSpec, *, log_dir: Path, cwd: Path, environ: Any,
                 secrets: tuple[str, ...] = ()):
        self.spec = spec
        self.cwd = cwd
        self.environ = environ
        self.secrets = tuple(sorted(set(secrets) | set(spec.secret_values()), key=len, reverse=True))
        self.log_file = log_path(log_dir, spec.name)
        self.state = "disabled" if not spec.enabled else "not_started"
        self.reason: str | None = None
        self.listing: Listing | None = None
        self.notices: list[str] = []
        self.restarts_left = 1
        self.restartable = False
        self.closed = False
        self.generation = 0
        self.garbage_lines = 0
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None
        self._retired: set[asyncio.Task[None]] = set()
        self._lock: asyncio.Lock | None = None
        self._log_handle: Any = None
        self._stderr: MaskedStderr | None = None
        self._log_offset = 0
        self._reported = False
        self.http_error: str | None = None
        if spec.enabled and spec.problem:
            self.state, self.reason = "failed", spec.problem

    # ------------------------------------------------------------ starting

    async def start(self) -> bool:
        """Start the server unless it runs, failed for good or is disabled; True when running."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.closed:
                return False
            if self.state == "running":
                return True
            if self.state == "disabled":
                return False
            if self.state == "failed" and not self.restartable:
                if not self._reported:  # a config problem, reported on the first start
                    self._reported = True
                    self._notice(f"MCP server {self.spec.name} not started: {self.reason}")
                return False
            return await self._start_locked()

    async def _start_locked(self) -> bool:
        _install_sdk_logging()
        self.generation += 1
        self.state, self.reason, self.restartable = "starting", None, False
        self.http_error = None
        spec = self.spec
        timeout = float(spec.settings.start_timeout_s)
        self._close_log()
        try:
            self._log_handle, self._log_offset = open_log(
                self.log_file, self._mask(f"starting {spec.name}: {spec.display_target()}"))
        except OSError as exc:
            return self._start_failed(f"cannot write its log {self.log_file}: {exc.strerror or exc}")
        if spec.transport == "stdio":
            command = spec.command or ""
            if os.sep in command or (os.altsep and os.altsep in command):
                found = shutil.which(str(self.cwd / Path(command).expanduser()))
            else:
                found = shutil.which(command, path=server_env(spec.env, self.environ).get("PATH"))
            if found is None:
                where = "on PATH" if os.sep not in command else f"(relative to {self.cwd})"
                return self._start_failed(f"command {command!r} not found or not executable {where}")
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Listing] = loop.create_future()
        ready.add_done_callback(_consume)  # a start that timed out may still fail later, unobserved
        stop = asyncio.Event()
        self._stop = stop
        runner = asyncio.create_task(self._run(ready, stop), name=f"mcp server {spec.name}")
        self._runner = runner
        try:
            listing = await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            self._retire(runner, stop, cancel=True)
            return self._start_failed(f"did not start within {timeout:g} s (start_timeout_s)")
        except asyncio.CancelledError:
            self._retire(runner, stop, cancel=True)
            self.state, self.reason = "failed", "start cancelled"
            raise
        except Exception as exc:
            self._retire(runner, stop, cancel=False)
            why = _start_error(exc, spec)
            if self.http_error:
                why += f" (the server answered {self.http_error}; are url and headers right?)"
            return self._start_failed(why)
        self.listing = listing
        self.state = "running"
        self.restartable = True
        return True

    def _start_failed(self, why: str) -> bool:
        self.state, self.reason, self.restartable = "failed", self._mask(why), False
        if self._stderr is not None:
            self._stderr.settle()
        tail = stderr_tail(self.log_file, self._log_offset, self.secrets) if self.spec.transport == "stdio" else []
        line = f"MCP server {self.spec.name} failed to start: {self.reason}"
        target = self.spec.display_target()
        if target:
            line += f" ({self.spec.transport}: {target})"
        if tail:
            line += "; stderr: " + " | ".join(tail)
        line += f"; log: {self.log_file}"
        self._reported = True
        self._notice(line)
        self._close_log()
        return False

    async def _run(self, ready: asyncio.Future[Listing], stop: asyncio.Event) -> None:
        """The task that owns the SDK client from connecting to shutdown."""
        _current.set(self)
        try:
            async with AsyncExitStack() as stack:
                client = await self._connect(stack)
                listing = await _fetch_listing(client)
                if ready.done():  # the start timed out meanwhile
                    return
                self._client = client
                ready.set_result(listing)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError("start cancelled"))
            elif self._stop is stop and self.state == "running":
                self._drop(f"closed its connection ({_describe(exc)})")
            if not isinstance(exc, Exception):
                raise
        finally:
            if self._stop is stop:
                self._client = None

    async def _connect(self, stack: AsyncExitStack) -> Any:
        from mcp import Client, StdioServerParameters
        from mcp.types import Implementation

        from amos import __version__

        spec = self.spec
        if spec.transport == "stdio":
            from mcp.client.stdio import stdio_client

            command, args = supervised(spec.command or "", spec.args)
            params = StdioServerParameters(command=command, args=args, env=server_env(spec.env, self.environ),
                                           cwd=str(self.cwd), encoding_error_handler="replace")
            self._stderr = MaskedStderr(self._log_handle, self.secrets)  # the log now belongs to it
            transport = stdio_client(params, errlog=self._stderr.errlog)
        elif spec.transport == "http":
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            # the SDK's defaults (30 s, 300 s to read a held-open stream), plus a hook that
            # remembers an HTTP error status the SDK reports only as "an error response"
            http = httpx2.AsyncClient(headers=dict(spec.headers), timeout=httpx2.Timeout(30.0, read=300.0),
                                      event_hooks={"response": [self._http_response]})
            await stack.enter_async_context(http)
            transport = streamable_http_client(spec.url or "", http_client=http)
        else:
            from mcp.client.sse import sse_client

            transport = sse_client(spec.url or "", headers=dict(spec.headers))
        client = Client(transport, client_info=Implementation(name="amos", version=__version__), cache=None,
                        logging_callback=self._server_log)
        return await stack.enter_async_context(client)

    async def _http_response(self, response: Any) -> None:
        if response.status_code >= 400:
            self.http_error = f"HTTP {response.status_code} {response.reason_phrase}".strip()
            self.write_log(f"amos: {response.request.method} answered {self.http_error}")

    async def _server_log(self, params: Any) -> None:
        self.write_log(f"server log ({getattr(params, 'level', '?')}): {getattr(params, 'data', '')}")

    # ------------------------------------------------------------ calling

    async def client(self) -> Any:
        """The running client, restarting a crashed server once.

        Raises:
            ToolFailure: the server is not running and cannot be (re)started; the
                message names it and why.
        """
        if self.state == "running" and self._client is not None:
            if not _closed(self._client):
                return self._client
            self._drop("stopped or closed its connection while idle")  # nothing was sent: no uncertainty
        if self.state == "failed" and self.restartable and self.restarts_left > 0:
            self.restarts_left -= 1
            self._notice(f"MCP server {self.spec.name} restarting after: {self.reason}")
            await self.start()
        elif self.state in ("not_started", "starting"):
            await self.start()  # a start (or restart) another call began is awaited
        if self.state == "running" and self._client is not None:
            return self._client
        why = "amos closed it" if self.closed else self.reason or self.state.replace("_", " ")
        if self.state == "failed" and self.restartable and self.restarts_left <= 0:
            why += "; it was already restarted once and is not restarted again"
        raise ToolFailure(f"MCP server {self.spec.name} is not running ({why})")

    async def call_tool(self, tool: str, arguments: dict[str, Any], timeout: float, *, label: str) -> Any:
        """Call ``tool`` and return the SDK's ``CallToolResult``.

        Args:
            tool: the server's tool name.
            arguments: validated arguments.
            timeout: time limit of this call (seconds).
            label: the amos tool name for messages.

        Raises:
            ToolTimeout: no answer within ``timeout``; the server is stopped.
            ToolEffectUncertain: the server exited or dropped the connection mid-call.
            ToolFailure: not running, or it answered with an error or an invalid result.
        """
        client = await self.client()
        return await self._request(client, lambda: client.call_tool(tool, arguments), timeout, label)

    async def get_prompt(self, name: str, arguments: dict[str, str], timeout: float) -> Any:
        """Fetch a prompt (``GetPromptResult``); errors as for :meth:`call_tool`."""
        client = await self.client()
        return await self._request(client, lambda: client.get_prompt(name, arguments), timeout,
                                   f"prompt {name}")

    async def read_resource(self, uri: str, timeout: float) -> Any:
        """Read a resource (``ReadResourceResult``); errors as for :meth:`call_tool`."""
        client = await self.client()
        return await self._request(client, lambda: client.read_resource(uri), timeout, f"resource {uri}")

    async def _request(self, client: Any, send: Any, timeout: float, label: str) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED
        from pydantic import ValidationError

        name = self.spec.name
        generation = self.generation
        token = _current.set(self)  # the SDK's log records of this request go to this server's log
        try:
            async with asyncio.timeout(timeout):
                return await send()
        except TimeoutError:
            if self._client is client and generation == self.generation:
                self._drop(f"did not answer {label} within {timeout:g} s")
            after = "restarts on the next call" if self.restarts_left > 0 else "is not restarted again"
            raise ToolTimeout(f"MCP server {name} did not answer {label} within {timeout:g} s; "
                              f"it was stopped and {after}") from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise ToolFailure(f"MCP server {name} answered {label} with error {exc.code}: "
                                  f"{_one_line(exc.error.message)}") from None
            crash: BaseException = exc
        except ValidationError as exc:
            raise ToolFailure(f"MCP server {name} sent an invalid answer to {label}: "
                              f"{_validation_summary(exc)}") from None
        except RuntimeError as exc:  # the SDK's output-schema check of a result
            raise ToolFailure(f"MCP server {name}: {_one_line(str(exc))}") from None
        except (OSError, EOFError, ExceptionGroup) as exc:
            crash = exc
        except Exception as exc:  # anyio stream errors, httpx transport errors
            if not _is_transport_error(exc):
                raise
            crash = exc
        finally:
            _current.reset(token)
        if self._stderr is not None:  # the crash's last words reach the log first
            await asyncio.to_thread(self._stderr.settle)
        tail = stderr_tail(self.log_file, self._log_offset, self.secrets, lines=1) \
            if self.spec.transport == "stdio" else []
        why = f"stopped or dropped the connection during {label} ({_describe(crash)})"
        if tail:
            why += f"; stderr: {tail[0]}"
        if self._client is client and generation == self.generation:
            self._drop(why)
        after = "it restarts on the next call" if self.restarts_left > 0 else "it is not restarted again"
        raise ToolEffectUncertain(f"MCP server {name} {why}; whether the call had an effect is unknown; {after}")

    def _drop(self, why: str) -> None:
        """Mark the running server failed (restartable) and stop it in the background."""
        self.state, self.reason, self.restartable = "failed", self._mask(why), True
        self.write_log(f"amos: stopping the server: {self.reason}")
        self._client = None
        if self._runner is not None and self._stop is not None:
            self._retire(self._runner, self._stop, cancel=False)

    def _retire(self, runner: asyncio.Task[None], stop: asyncio.Event, *, cancel: bool) -> None:
        stop.set()
        if cancel:
            runner.cancel()
        self._retired.add(runner)
        if self._runner is runner:
            self._runner, self._stop = None, None

    # ------------------------------------------------------------ closing

    async def close(self) -> None:
        """Stop the server (if running) and wait for every server process it had to end;
        it is never started again."""
        self.closed = True
        if self._runner is not None and self._stop is not None:
            self._retire(self._runner, self._stop, cancel=False)
        self._client = None
        if self.state in ("running", "starting"):
            self.state, self.reason, self.restartable = "not_started", None, False
        tasks = [task for task in self._retired if not task.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE_S)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=STOP_GRACE_S)
        for task in self._retired:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: never "exception was never retrieved"
        self._retired.clear()
        self._close_log()

    def _close_log(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
            self._log_handle = None
            return
        if self._log_handle is not None:
            try:
                self._log_handle.close()
            except OSError:
                pass
            self._log_handle = None

    # ------------------------------------------------------------ helpers

    def write_log(self, line: str) -> None:
        """Append one masked line (``## …``, so it is never quoted as stderr) to the log; never raises."""
        text = "## " + self._mask(" ".join(str(line).split())) + "\n"
        if self._stderr is not None:
            self._stderr.write(text)
            return
        handle = self._log_handle
        if handle is None:
            return
        try:
            handle.write(text)
            handle.flush()
        except (OSError, ValueError):
            pass

    def _mask(self, text: str) -> str:
        for secret in self.secrets:
            if len(secret) >= 4:
                text = text.replace(secret, "****")
        return text

    def _notice(self, line: str) -> None:
        self.notices.append(self._mask(line))
        log.info("%s", self._mask(line))


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _closed(client: Any) -> bool:
    """True when the SDK already saw the connection end (its JSON-RPC dispatcher closed).

    Reads a private attribute of the pinned SDK major; any other shape counts as open,
    and the next request then finds out.
    """
    dispatcher = getattr(getattr(client, "_session", None), "_dispatcher", None)
    return getattr(dispatcher, "_closed", False) is True


async def _fetch_listing(client: Any) -> Listing:
    caps = client.server_capabilities
    info = client.server_info
    listing = Listing(server_name=getattr(info, "name", "") or "", server_version=getattr(info, "version", "") or "")
    listing.tools = await _all_pages(client.list_tools, "tools")
    if caps.prompts is not None:
        listing.prompts = await _optional_pages(client.list_prompts, "prompts")
    if caps.resources is not None:
        listing.resources_supported = True
        listing.resources = await _optional_pages(client.list_resources, "resources")
    return listing


async def _all_pages(fetch: Any, attribute: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await fetch(cursor=cursor)
        items += list(getattr(page, attribute, None) or [])
        cursor = getattr(page, "next_cursor", None)
        if not cursor or cursor in seen:
            break
        seen.add(cursor)
    return items


async def _optional_pages(fetch: Any, attribute: str) -> list[Any]:
    from mcp.shared.exceptions import MCPError

    try:
        return await _all_pages(fetch, attribute)
    except MCPError as exc:
        current = _current.get()
        if current is not None:
            current.write_log(f"amos: listing {attribute} failed: {exc}")
        return []


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _describe(exc: BaseException) -> str:
    leaves = [leaf for leaf in _leaves(exc) if not isinstance(leaf, asyncio.CancelledError)] or [exc]
    leaf = leaves[0]
    message = _one_line(str(getattr(getattr(leaf, "error", None), "message", "") or leaf))
    return f"{type(leaf).__name__}: {message}" if message else type(leaf).__name__


def _start_error(exc: BaseException, spec: McpServerSpec) -> str:
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    leaves = [leaf for leaf in _leaves(exc) if not isinstance(leaf, asyncio.CancelledError)] or [exc]
    for leaf in leaves:
        if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
            return "it exited or closed its connection during start-up" if spec.transport == "stdio" \
                else "the server closed the connection during start-up"
        if isinstance(leaf, MCPError):
            return f"the MCP handshake failed: error {leaf.code}: {_one_line(leaf.error.message)}"
        if isinstance(leaf, FileNotFoundError | PermissionError):
            return f"cannot run {spec.command!r}: {leaf.strerror or leaf}"
        if _is_transport_error(leaf):
            return f"cannot connect: {_describe(leaf)}"
        if type(leaf).__name__ == "ValidationError" and hasattr(leaf, "errors"):
            return f"it sent an answer that is not valid MCP: {_validation_summary(leaf)}"
    return _describe(exc)


def _validation_summary(exc: Any) -> str:
    """The first error of a pydantic ``ValidationError``: ``where: what`` (+ how many more)."""
    try:
        errors = exc.errors(include_url=False)
    except Exception:  # not a pydantic error after all
        return _one_line(str(exc))
    if not errors:
        return _one_line(str(exc))
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "the answer"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return _one_line(f"{where}: {first.get('msg', 'invalid')}{more}")


def _is_transport_error(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("httpx", "anyio", "httpcore", "h11")) or isinstance(exc, OSError | EOFError)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _SdkLogHandler(logging.Handler):
    """Routes the SDK's own log records (e.g. a stdout line that is not JSON-RPC) to the
    log of the server they concern, one line each, never to the screen."""

    def emit(self, record: logging.LogRecord) -> None:
        current = _current.get()
        if current is None:
            return
        try:
            message = record.getMessage()
        except Exception:  # a bad format string in a third-party log call
            message = str(record.msg)
        if record.exc_info and record.exc_info[1] is not None:
            message += f" ({_describe(record.exc_info[1])})"
        if "Failed to parse JSONRPC message" in message:
            current.garbage_lines += 1
            if current.garbage_lines == 1:
                current._notice(f"MCP server {current.spec.name} printed text that is not MCP on stdout "
                                f"(ignored; see {current.log_file})")
        current.write_log(f"sdk {record.levelname.lower()}: {message}")


def _install_sdk_logging() -> None:
    """Keep the SDK's log records off the terminal (once per process, on the first start)."""
    global _sdk_logging_ready
    if _sdk_logging_ready:
        return
    sdk = logging.getLogger("mcp")
    sdk.addHandler(_SdkLogHandler())
    sdk.propagate = False
    sdk.setLevel(logging.WARNING)
    _sdk_logging_ready = True


__all__ = ["Listing", "ServerConnection", "MAX_PAGES"]
