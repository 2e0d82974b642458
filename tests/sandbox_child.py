"""A small amos stand-in for the sandbox tests: runs one run_command and prints its result.

Usage: ``python tests/sandbox_child.py '{"workspace": ..., "command": ..., "mode": ...}'``
(``mode`` null runs without a sandbox). The child environment drops ``AMOS_FAKE_KEY``
and the provider keys, as amos does; this process's own environment keeps them, so a
command that could read it through ``/proc`` would find them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from amos.messages import ToolCallPart
from amos.sandbox import SandboxLauncher, SandboxPolicy
from amos.tools import ToolContext, ToolManager, builtin_tools, child_env


async def main(spec: dict) -> None:
    launcher = None
    if spec.get("mode"):
        policy = SandboxPolicy(spec["mode"], network=bool(spec.get("network")))
        launcher = SandboxLauncher(policy, temp_parent=Path(spec["temp_parent"]))
    context = ToolContext(
        workspace=Path(spec["workspace"]),
        command_timeout_s=float(spec.get("timeout_s", 20)),
        env=child_env(os.environ, ["AMOS_FAKE_KEY"]),
        sandbox=launcher,
    )
    manager = ToolManager(builtin_tools(), context=context)
    call = ToolCallPart(call_id="c1", tool_name="run_command", arguments={"command": spec["command"]})
    outcome = await manager.execute(call, "exec-1")
    print(json.dumps({"status": outcome.status, "result": outcome.result}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
