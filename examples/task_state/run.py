"""task_state: host-owned task notes through the host API, across a file checkpoint.

Run from the repository root (offline, no key):

    python examples/task_state/run.py

1. The host pins an objective and a constraint, then corrects the constraint (the old
   one stays visible as history, marked superseded).
2. An embedder records a model interpretation as an UNCONFIRMED proposal.
3. The scripted model submits a release (one command); the host records the action
   receipt and marks it ``waiting_external``: accepted, not yet done. The session is
   saved — the file checkpoint.
4. A separate process reads the saved session's task view: the pending confirmation
   is there.
5. The host confirms the submission completed (with a proof label) and prunes it.
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

from amos.events import ToolCallFinished
from amos.host import RunOptions, open_runner

HERE = Path(__file__).resolve().parent


async def collect(events) -> list:
    return [event async for event in events]


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="amos-tasks-"))
    try:
        os.environ["AMOS_HOME"] = str(root / "home")
        workspace = root / "ws"
        workspace.mkdir()
        config = root / "config.json"
        config.write_text(json.dumps({"task_state": {"enabled": True},
                                      "tools": {"permissions": {"run_command": "allow"}}}))
        options = dict(model=f"scripted:{HERE / 'script.json'}", workspace=workspace, cwd=workspace,
                       config_path=config)
        runner, _ = open_runner(RunOptions(**options))
        try:
            source = {"label": "release manager"}
            runner.update_tasks(lambda t: t.update_host({"notes": [
                {"id": "goal", "category": "objective", "text": "Release 2.0 to the staging queue",
                 "source": source},
                {"id": "window", "category": "constraint", "text": "Only submit before 18:00", "source": source},
            ]}, 0))
            runner.update_tasks(lambda t: t.update_host({"notes": [
                {"id": "window2", "category": "constraint", "text": "Only submit before 20:00 (window extended)",
                 "supersedes": "window", "source": source}]}, 1))
            print(f"1. revision {runner.tasks.revision}: constraint corrected (window -> window2)")
            runner.update_tasks(lambda t: t.propose([
                {"id": "guess", "category": "decision", "text": "Staging means the EU queue",
                 "source": {"label": "model interpretation"}}], 2))
            print("2. proposal recorded: " + ("UNCONFIRMED" if "UNCONFIRMED" in runner.tasks.view() else "?"))
            events = asyncio.run(collect(runner.run("Submit release 2.0.")))
            done = next(e for e in events if isinstance(e, ToolCallFinished))
            receipt_id = f"{events[-1].receipt.execution_id}:{done.call_id}"
            receipt = {"execution_id": receipt_id, "call_id": done.call_id, "tool": done.tool,
                       "effect": "unknown", "status": done.status}
            runner.update_tasks(lambda t: t.record_action(receipt, t.revision))
            runner.update_tasks(lambda t: t.confirm_action(receipt_id, "waiting_external",
                                                           {"label": "queue said: accepted"}, t.revision))
            session_id = runner.session_id
            print(f"3. {events[-1].receipt.verdict}; receipt {done.call_id} waiting_external; session saved")
        finally:
            runner.close()
        shown = subprocess.run([sys.executable, "-m", "amos.cli", "run", "--session", session_id, "--config",
                                str(config), "--json", "/context task"], capture_output=True, text=True)
        view = json.loads(shown.stdout)["result"]["view"]
        print("4. another process sees: " + ("waiting_external" if "waiting_external" in view else view))
        runner, _ = open_runner(RunOptions(**options, session=session_id))
        try:
            runner.update_tasks(lambda t: t.update_host({
                "confirm_actions": [{"execution_id": receipt_id, "status": "completed",
                                     "source": {"label": "queue ticket Q-42 closed"}}],
                "prune": {"execution_ids": [receipt_id]}}, t.revision))
            gone = receipt_id not in runner.tasks.view()
            print(f"5. confirmed completed and pruned at revision {runner.tasks.revision}: {gone}")
        finally:
            runner.close()
        return 0 if gone and "waiting_external" in view else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
