"""MCP client figures (issue 18): time to the first tool list, and amos's overhead per call.

1. Time from ``McpHub.tools()`` to the tool list with three stdio servers started in
   parallel (mcp-server-time, mcp-server-git, and a small raw JSON-RPC server), next to
   each server's own start time alone (what a sequential start would add up to).
2. amos's own overhead per MCP tool call beyond the server's time (target: under 2 ms
   median): ``ToolManager.execute`` of an MCP tool (argument validation against the
   JSON Schema, the call, result mapping, outcome) against the bare SDK
   ``client.call_tool`` on the same connection, interleaved; and the same path with the
   server's answer replaced by a ready result, which is amos's part alone.

(Named mcp_client.py: a benchmarks/mcp.py run as a script would shadow the mcp package.)

Usage: python benchmarks/mcp_client.py [--calls N] [--starts N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from amos.config_models import AmosConfig
from amos.mcp import McpHub
from amos.messages import ToolCallPart
from amos.tools import ToolContext, ToolManager

HOSTILE = Path(__file__).resolve().parent.parent / "tests" / "mcp_servers" / "hostile.py"
BIN = Path(sys.executable).parent


def servers(folder: Path) -> dict[str, dict]:
    return {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
        "git": {"command": str(BIN / "mcp-server-git"), "args": ["--repository", str(folder)]},
        "raw": {"command": sys.executable, "args": [str(HOSTILE), "ok", str(folder)]},
    }


def hub_for(config: dict, folder: Path) -> McpHub:
    return McpHub.from_config(AmosConfig.model_validate({"mcpServers": config}), project_dir=None,
                              log_dir=folder / "logs", cwd=folder)


async def first_tool_list(config: dict, folder: Path) -> tuple[float, int]:
    hub = hub_for(config, folder)
    start = time.perf_counter()
    tools = await hub.tools()
    elapsed = time.perf_counter() - start
    notices = hub.take_notices()
    await hub.close()
    if notices:
        raise SystemExit(f"a server failed: {notices[0]}")
    return elapsed, len(tools)


async def call_overhead(folder: Path, calls: int) -> tuple[float, float, float]:
    """Medians (ms): amos execute, bare SDK call, amos execute with a ready server answer."""
    hub = hub_for({"raw": servers(folder)["raw"]}, folder)
    tools = await hub.tools()
    manager = ToolManager(tools, context=ToolContext(workspace=folder))
    conn = hub._conns["raw"]
    client = await conn.client()
    call = ToolCallPart(call_id="c1", tool_name="mcp__raw__poke", arguments={"text": "hello"})
    amos_ms, sdk_ms = [], []
    for _ in range(20):  # warm up both paths
        await manager.execute(call, "e1")
        await client.call_tool("poke", {"text": "hello"})
    for _ in range(calls):
        start = time.perf_counter()
        outcome = await manager.execute(call, "e1")
        amos_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        await client.call_tool("poke", {"text": "hello"})
        sdk_ms.append((time.perf_counter() - start) * 1000)
        assert outcome.status == "succeeded", outcome.error
    ready = await client.call_tool("poke", {"text": "hello"})

    class Ready:
        async def call_tool(self, name, arguments):
            return ready

    conn._client = Ready()
    own_ms = []
    for _ in range(calls):
        start = time.perf_counter()
        await manager.execute(call, "e1")
        own_ms.append((time.perf_counter() - start) * 1000)
    conn._client = client
    await hub.close()
    return statistics.median(amos_ms), statistics.median(sdk_ms), statistics.median(own_ms)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--starts", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        import subprocess

        subprocess.run(["git", "init", "-q", str(folder)], check=True)
        config = servers(folder)
        await first_tool_list({"raw": config["raw"]}, folder)  # imports the SDK once, as amos would
        alone = {name: statistics.median([(await first_tool_list({name: entry}, folder))[0]
                                          for _ in range(options.starts)])
                 for name, entry in config.items()}
        parallel = [await first_tool_list(config, folder) for _ in range(options.starts)]
        total = statistics.median(p[0] for p in parallel)
        print(f"first tool list, 3 stdio servers in parallel: {total:.2f} s median of {options.starts} "
              f"({parallel[0][1]} tools)")
        print("  each alone: " + ", ".join(f"{n} {s:.2f} s" for n, s in alone.items())
              + f" (sequential would be ~{sum(alone.values()):.2f} s)")
        amos, sdk, own = await call_overhead(folder, options.calls)
        verdict = "ok" if own < 2 and amos - sdk < 2 else "OVER TARGET"
        print(f"per call, {options.calls} calls: ToolManager.execute {amos:.3f} ms, bare SDK call_tool "
              f"{sdk:.3f} ms median; difference {amos - sdk:.3f} ms")
        print(f"amos's own part (server answer ready): {own:.3f} ms median per call (target < 2 ms) {verdict}")


if __name__ == "__main__":
    asyncio.run(main())
