"""evidence_recovery: storage fails, the raw result is kept and protected, then acknowledged.

Run from the repository root (offline, no key):

    python examples/evidence_recovery/run.py

1. A scripted model tags a release with one command (a write-like action). The evidence
   store is down (simulated through the store interface: every ``put`` fails).
   Storage failure is not tool failure: the run ends normally, the raw result stays in
   the history, marked protected, and the command is NOT run again.
2. The host repairs storage, stores the retained result itself, and acknowledges it
   with ``Host.acknowledge_tool_evidence`` — no tool runs.
3. The tags file shows the command ran exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from amos.evidence import EvidenceError, EvidenceRecord
from amos.host import RunOptions, open_runner

HERE = Path(__file__).resolve().parent


class DownStore:
    """Wraps the real store; ``put`` fails until ``repaired`` is set."""

    def __init__(self, real):
        self.real = real
        self.repaired = False

    def put(self, record):
        if not self.repaired:
            raise EvidenceError("io", "evidence disk unavailable (simulated)")
        return self.real.put(record)

    def __getattr__(self, name):
        return getattr(self.real, name)


async def drain(events) -> object:
    last = None
    async for event in events:
        last = event
    return last


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="amos-recovery-"))
    try:
        os.environ["AMOS_HOME"] = str(root / "home")
        workspace = root / "ws"
        workspace.mkdir()
        config = root / "config.json"
        config.write_text(json.dumps({"evidence": {"enabled": True},
                                      "tools": {"permissions": {"run_command": "allow"}}}))
        runner, _ = open_runner(RunOptions(model=f"scripted:{HERE / 'script.json'}", workspace=workspace,
                                           cwd=workspace, config_path=config))
        try:
            store = DownStore(runner.evidence.store)
            runner.evidence.store = store
            final = asyncio.run(drain(runner.run("Tag release v1.4.0.")))
            result = next(p for m in runner.session.messages for p in m.tool_results)
            kept = "tagged v1.4.0" in result.content
            print(f"1. {final.receipt.verdict}; raw result kept: {kept}; protected={result.protected} "
                  f"({result.evidence_error})")
            store.repaired = True
            record = EvidenceRecord(execution_id=final.receipt.execution_id, call_id=result.call_id,
                                    tool=result.tool_name, effect="unknown", status=result.status,
                                    result=result.content)
            reference = runner.acknowledge_tool_evidence(result.call_id, store.put(record))
            after = next(p for m in runner.session.messages for p in m.tool_results)
            print(f"2. acknowledged evidence {reference.id}: protected={after.protected}")
        finally:
            runner.close()
        runs = (workspace / "tags.txt").read_text().count("v1.4.0")
        print(f"3. the command ran {runs} time(s)")
        return 0 if runs == 1 and not after.protected and result.protected else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
