"""What the sandbox adds to one command, in milliseconds (issue 19, "What it must show").

Runs ``true`` through ``run_command`` (the real ToolManager path: process group,
pipes, cleanup) without a sandbox and inside bubblewrap in each mode, and prints the
median and 90th percentile of each and the median added time. The target is under
30 ms added per command (median) on the project's 2-core machine.

Usage: python benchmarks/sandbox_overhead.py [--runs N] [--command CMD]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from amos.messages import ToolCallPart
from amos.sandbox import SandboxLauncher, SandboxPolicy, probe_sandbox
from amos.tools import ToolContext, ToolManager, builtin_tools, child_env

TARGET_MS = 30.0


async def timings(policy: SandboxPolicy | None, workspace: Path, command: str, runs: int) -> list[float]:
    """Wall time of ``runs`` calls of ``command``, milliseconds each (after 3 warm-ups)."""
    launcher = SandboxLauncher(policy) if policy is not None else None
    context = ToolContext(workspace=workspace, env=child_env(os.environ, []), sandbox=launcher)
    manager = ToolManager(builtin_tools(), context=context)
    samples = []
    try:
        for index in range(runs + 3):
            call = ToolCallPart(call_id=f"b{index}", tool_name="run_command",
                                arguments={"command": command})
            started = time.perf_counter()
            outcome = await manager.execute(call, "bench")
            elapsed = (time.perf_counter() - started) * 1000
            if outcome.status != "succeeded" or outcome.result["exit_code"] != 0:
                raise SystemExit(f"{command!r} failed: {outcome.error or outcome.result}")
            if index >= 3:
                samples.append(elapsed)
    finally:
        if launcher is not None:
            launcher.close()
    return samples


def p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10)[-1]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--command", default="true")
    options = parser.parse_args()
    probe = probe_sandbox()
    if not probe.available:
        print(probe.message, file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        workspace = Path(scratch)
        base = await timings(None, workspace, options.command, options.runs)
        print(f"{options.command!r} x {options.runs} through run_command (bwrap at {probe.bwrap})")
        print(f"  {'no sandbox':<34} median {statistics.median(base):6.1f} ms  p90 {p90(base):6.1f} ms")
        worst = 0.0
        for label, policy in [
            ("workspace-write, network off", SandboxPolicy("workspace-write")),
            ("workspace-write, network on", SandboxPolicy("workspace-write", network=True)),
            ("read-only, network off", SandboxPolicy("read-only")),
        ]:
            samples = await timings(policy, workspace, options.command, options.runs)
            added = statistics.median(samples) - statistics.median(base)
            worst = max(worst, added)
            print(f"  {label:<34} median {statistics.median(samples):6.1f} ms  p90 {p90(samples):6.1f} ms"
                  f"  added {added:+6.1f} ms")
    verdict = "within" if worst < TARGET_MS else "OVER"
    print(f"largest median added time {worst:.1f} ms: {verdict} the {TARGET_MS:.0f} ms target")
    return 0 if worst < TARGET_MS else 2


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
