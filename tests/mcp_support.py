"""Helpers of the MCP tests: hub construction, process checks through /proc, tool calls."""

from __future__ import annotations

import os
import sys
import time
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


def processes_with(marker: str) -> list[int]:
    """Running processes whose command line contains ``marker`` (never this process)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
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
