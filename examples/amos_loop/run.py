"""amos_loop: the real runner, /context loop, a blocked checkpoint and a fresh verifier.

Run from the repository root (offline, no key):

    python examples/amos_loop/run.py

1. The run reads PLAN.md, then asks to write CHECKLIST.md. Nobody can approve now,
   so it stops WAITING (owner, deadline, resume token) and the session is saved:
   the blocked checkpoint.
2. ``/context loop`` shows the diagnostics of that execution.
3. A new runner opens the saved session. The host supplies a verifier fresh, in
   memory (``set_loop_policy``): CHECKLIST.md must exist. Nothing in the session or
   the transcript could have installed it.
4. The held write is approved, runs, the model answers, and the host check confirms:
   VERIFIED_COMPLETE.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

from amos.host import RunOptions, open_runner
from amos.slash.commands import execute_line

HERE = Path(__file__).resolve().parent


async def drain(events) -> object:
    last = None
    async for event in events:
        last = event
    return last


def main() -> int:
    workspace = Path(tempfile.mkdtemp(prefix="amos-loop-"))
    os.environ["AMOS_HOME"] = str(workspace / ".amos-home")  # keep the example's session out of yours
    shutil.copytree(HERE / "workspace", workspace, dirs_exist_ok=True)
    options = dict(model=f"scripted:{HERE / 'script.json'}", workspace=workspace, cwd=workspace,
                   config_path=HERE / "config.json")
    try:
        runner, _ = open_runner(RunOptions(**options))
        try:
            first = asyncio.run(drain(runner.run("Follow PLAN.md.")))
            receipt = first.receipt
            print(f"1. {receipt.verdict} ({receipt.cause}) owner={receipt.approval.owner} "
                  f"token={receipt.approval.resume_token}")
            print("2. /context loop:")
            print("   " + execute_line(runner, "/context loop").text.splitlines()[0])
            session_id = runner.session_id
        finally:
            runner.close()

        runner, _ = open_runner(RunOptions(**options, session=session_id))
        try:
            runner.set_loop_policy({"max_recovery_attempts": 1, "completion": {"files": ["CHECKLIST.md"]}})
            print("3. fresh verifier on resume: completion.files = ['CHECKLIST.md']")
            final = asyncio.run(drain(runner.resume(approve=["write_checklist"])))
            receipt = final.receipt
            print(f"4. {receipt.verdict} ({receipt.cause}/{receipt.reason}) loop.status={final.loop.status}")
            return receipt.exit_code
        finally:
            runner.close()
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
