"""durable_evidence: a large result projected, the session saved, the exact data read in another process.

Run from the repository root (offline, no key):

    python examples/durable_evidence/run.py

1. A scripted model reads a 215 KB log file with evidence enabled. The full result is
   stored (integrity-checked, 0600) and the model sees only a projection: a summary
   plus the evidence id — the raw text is not in its history.
2. The session is saved and the runner closed.
3. A separate process (`amos evidence read ID`) prints the complete stored record;
   its result is the exact text the tool returned.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from amos.host import RunOptions, open_runner

HERE = Path(__file__).resolve().parent


async def drain(events) -> object:
    last = None
    async for event in events:
        last = event
    return last


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="amos-evidence-"))
    try:
        os.environ["AMOS_HOME"] = str(root / "home")  # keep the example's session out of yours
        workspace = root / "ws"
        workspace.mkdir()
        (workspace / "service.log").write_text(
            "".join(f"2026-11-30T06:{i // 60 % 60:02d}:{i % 60:02d} request {i} ok\n" for i in range(6000)))
        config = root / "config.json"
        config.write_text(json.dumps({"evidence": {"enabled": True, "directory": str(root / "evidence")}}))
        runner, _ = open_runner(RunOptions(model=f"scripted:{HERE / 'script.json'}", workspace=workspace,
                                           cwd=workspace, config_path=config))
        try:
            final = asyncio.run(drain(runner.run("How many requests are in service.log?")))
            result = next(p for m in runner.session.messages for p in m.tool_results)
            print(f"1. {final.receipt.verdict}: the model saw {len(result.content)} characters "
                  f"(projected={result.projected}) of a {(workspace / 'service.log').stat().st_size}-byte file")
            print(f"   evidence {result.evidence_id}")
            path = runner.save()
            print(f"2. session saved: {path.name} in {path.parent.name}")
        finally:
            runner.close()
        done = subprocess.run([sys.executable, "-m", "amos.cli", "evidence", "read", result.evidence_id,
                               "--config", str(config)], capture_output=True, text=True, env=dict(os.environ))
        record = json.loads(done.stdout)
        exact = record["result"].endswith("request 5999 ok\n") and "request 0 ok" in record["result"]
        print(f"3. another process read {len(done.stdout)} characters; exact result: {exact}")
        return 0 if done.returncode == 0 and exact and result.projected else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
