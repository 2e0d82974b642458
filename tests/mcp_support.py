"""Helpers of the MCP tests: hub construction, process checks through /proc, tool calls."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from amos.config_models import AmosConfig
from amos.mcp import McpHub
from amos.messages import ToolCallPart
from amos.tools import ToolContext, ToolManager

SERVERS = Path(__file__).parent / "mcp_servers"
HOSTILE = SERVERS / "hostile.py"


def hostile(mode: str, state: Path, **settings: Any) -> dict[str, Any]:
    """The config entry of a hostile server (state doubles as a marker in its command line)."""
    return {"command": sys.executable, "args": [str(HOSTILE), mode, str(state)], **settings}


def make_hub(servers: dict[str, Any], tmp_path: Path, *, environ: dict[str, str] | None = None,
             secrets: tuple[str, ...] = ()) -> McpHub:
    config = AmosConfig.model_validate({"mcpServers": servers})
    return McpHub.from_config(config, project_dir=None, log_dir=tmp_path / "logs", cwd=tmp_path,
                              environ=environ, secrets=secrets)


def manager(tools: list[Any], tmp_path: Path, **context: Any) -> ToolManager:
    return ToolManager(tools, context=ToolContext(workspace=tmp_path, **context))


async def call(m: ToolManager, name: str, arguments: dict[str, Any] | None = None, call_id: str = "call_1"):
    return await m.execute(ToolCallPart(call_id=call_id, tool_name=name, arguments=arguments or {}), "exec_1")


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def processes_with(marker: str, cwd: Path | None = None) -> list[int]:
    """Running processes whose command line contains ``marker`` (never this process);
    with ``cwd``, only those working there (a server amos started for this test's
    workspace, not one of another test suite running on the same machine)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            if cwd is not None and marker in cmdline and os.readlink(f"/proc/{entry}/cwd") != str(cwd):
                continue
        except OSError:
            continue
        if marker in cmdline and alive(int(entry)):
            found.append(int(entry))
    return found


def wait_gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    """Wait until none of ``pids`` runs; the ones still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        if not left:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def http_server(token: str) -> Iterator[int]:
    """Run tests/mcp_servers/http_server.py (the mcp SDK's own server API) on 127.0.0.1;
    yields its port. Fails the test when it does not start within 30 s."""
    import pytest

    port = free_port()
    server = subprocess.Popen([sys.executable, str(SERVERS / "http_server.py"), str(port), token],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the test HTTP MCP server did not start")
                time.sleep(0.05)
        yield port
    finally:
        server.kill()
        server.wait()
