"""Polling something that makes progress is not a loop (issue 17, item 13), while true
loops still end: through the real CLI, with the loop policy and with the doom loop."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .support import cli_json, write_script


def _run(tmp_path: Path, turns: list, config: dict) -> tuple[int, dict, Path]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"tools": {"permissions": {"run_command": "allow"}}, **config}))
    code, doc = cli_json("run", "--script", str(write_script(tmp_path, turns)), "--workspace", str(ws),
                         "--config", str(cfg), "--max-steps", "20", "watch the build")
    return code, doc, ws


POLL = {"name": "run_command", "arguments": {"command": "sleep 0.3; tail -1 build.log"}}


def _build(ws: Path) -> subprocess.Popen:
    """A 'build' that appends a line to build.log every 0.1 s, outside amos."""
    return subprocess.Popen([sys.executable, "-c",
                             "import time, itertools\n"
                             "for n in itertools.count():\n"
                             "    open('build.log', 'a').write(f'compiled unit {n}\\n'); time.sleep(0.1)\n"],
                            cwd=ws)


def test_polling_a_build_with_a_progress_key_is_not_blocked(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    build = _build(ws)
    try:
        # delay_ms: a model takes a moment before its next call, while the build goes on
        code, doc, _ = _run(tmp_path, [{"delay_ms": 300, "tool_calls": [POLL]}] * 4 + [{"text": "finished"}],
                            {"loop_policy": {"progress": {"command": "cat build.log"}}})
    finally:
        build.kill()
        build.wait()
    assert (code, doc["stop"]["verdict"]) == (0, "ANSWERED"), doc["stop"]
    assert [c["status"] for c in doc["tool_calls"]] == ["succeeded"] * 4


def test_without_a_progress_key_a_repeated_command_is_held_once_then_polling_goes_on(tmp_path):
    """The second identical command is held back (it may be a write) and the model is told
    exactly what the host checked; once its results differ it is polling, not repeating."""
    ws = tmp_path / "ws"
    ws.mkdir()
    build = _build(ws)
    poll_a = {"name": "run_command", "arguments": {"command": "sleep 0.3; tail -1 build.log"}}
    try:
        code, doc, _ = _run(tmp_path, [{"tool_calls": [poll_a]}, {"tool_calls": [poll_a]},
                                       {"text": "still building"}], {"loop_policy": {}})
    finally:
        build.kill()
        build.wait()
    assert [c["status"] for c in doc["tool_calls"]] == ["succeeded", "blocked"]
    assert doc["stop"]["verdict"] == "ANSWERED"


def test_reading_a_growing_file_is_not_blocked_by_the_doom_loop(tmp_path):
    turns = []
    for n in range(6):
        turns.append({"tool_calls": [{"name": "run_command", "arguments": {"command": f"echo line{n} >> build.log"}}]})
        turns.append({"tool_calls": [{"name": "read_file", "arguments": {"path": "build.log"}}]})
    turns.append({"text": "done"})
    code, doc, _ = _run(tmp_path, turns, {"doom_loop": True})
    assert (code, doc["stop"]["verdict"]) == (0, "ANSWERED"), doc["stop"]
    assert all(c["status"] == "succeeded" for c in doc["tool_calls"])


def test_a_true_loop_still_ends(tmp_path):
    read = {"tool_calls": [{"name": "read_file", "arguments": {"path": "same.txt"}}]}
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "same.txt").write_text("unchanging\n")
    code, doc, _ = _run(tmp_path, [read] * 9 + [{"text": "never"}], {"doom_loop": True})
    assert doc["stop"]["verdict"] == "BOUNDED_STOP" and doc["stop"]["cause"] == "doom_loop", doc["stop"]
