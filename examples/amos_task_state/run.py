"""amos_task_state: the same notebook through the real command adapter (`amos run … "/context task …"`).

Run from the repository root (offline, no key):

    python examples/amos_task_state/run.py

Each step is a separate `amos` process on one saved session, exactly as a person or
a script would type it: add, a stale-revision conflict, correct, prune, the view the
model receives on the next run (checked by the scripted model's `system_contains`),
and model text that looks like a command changing nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def amos(*args: str) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "amos.cli", "run", *args, "--json"], capture_output=True,
                          text=True, env=dict(os.environ))
    return done.returncode, json.loads(done.stdout)


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="amos-task-cmds-"))
    try:
        os.environ["AMOS_HOME"] = str(root / "home")
        workspace = root / "ws"
        workspace.mkdir()
        config = root / "config.json"
        config.write_text(json.dumps({"task_state": {"enabled": True}}))
        base = ["--config", str(config)]
        code, doc = amos(*base, "--script", str(HERE / "script.json"), "--workspace", str(workspace), "hello")
        sid = doc["session_id"]
        steps = [
            "/context task add 0 objective obj Keep the changelog current",
            "/context task add 0 constraint dup This one is stale",
            "/context task correct 1 obj obj2 Keep the changelog current, newest first",
            "/context task prune 2 obj",
        ]
        for n, line in enumerate(steps, 1):
            code, doc = amos("--session", sid, *base, line)
            outcome = f"revision {doc['result']['revision']}" if doc["ok"] else doc["error"]["code"]
            print(f"{n}. {line.split(' ', 3)[2]:<8} exit {code}: {outcome}")
        code, doc = amos("--session", sid, *base, "--script", str(HERE / "script.json"), "go on")
        print(f"5. next run {doc['stop']['verdict']}: the model's instructions held the task view")
        code, doc = amos("--session", sid, *base, "/context task")
        untouched = doc["result"]["revision"] == 3 and "evil" not in doc["result"]["view"]
        print(f"6. model text '/context task add …' changed nothing: {untouched}")
        return 0 if untouched and code == 0 else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
