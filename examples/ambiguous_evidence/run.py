"""ambiguous_evidence: a write whose response is lost stays an unresolved receipt; nothing is retried.

Run from the repository root (offline, no key):

    python examples/ambiguous_evidence/run.py

1. A scripted model starts a "deploy" command that times out: it may or may not have
   done its work (completion ``unknown``). The evidence record keeps exactly that —
   status ``timed_out``, completion ``unknown`` — an unresolved receipt.
2. With a loop policy (``{}``) the run stops ``UNCERTAIN`` (``uncertain_effect``)
   instead of guessing: the model's second, identical deploy is never dispatched.
3. The deploy log shows one start and no retry.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
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
    root = Path(tempfile.mkdtemp(prefix="amos-ambiguous-"))
    try:
        os.environ["AMOS_HOME"] = str(root / "home")
        workspace = root / "ws"
        workspace.mkdir()
        config = root / "config.json"
        config.write_text(json.dumps({"evidence": {"enabled": True}, "loop_policy": {},
                                      "tools": {"permissions": {"run_command": "allow"}}}))
        runner, _ = open_runner(RunOptions(model=f"scripted:{HERE / 'script.json'}", workspace=workspace,
                                           cwd=workspace, config_path=config))
        try:
            final = asyncio.run(drain(runner.run("Deploy the service.")))
            result = next(p for m in runner.session.messages for p in m.tool_results)
            meta = runner.evidence_page().entries[0]
            record = runner.evidence.store.read_record(meta.reference())
            print(f"1. evidence {meta.id}: status={record.status} completion={record.completion}")
            receipt = final.receipt
            print(f"2. {receipt.verdict} ({receipt.cause}/{receipt.reason}) after {receipt.steps} model call(s); "
                  f"tool result status {result.status}")
        finally:
            runner.close()
        starts = (workspace / "deploy.log").read_text().count("started")
        print(f"3. deploy started {starts} time(s)")
        ok = (starts == 1 and record.completion == "unknown" and receipt.verdict == "UNCERTAIN")
        return 0 if ok else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
