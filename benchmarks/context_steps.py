"""Per-step input tokens of a 60-step session with large tool results: projection on vs off.

The same scripted session runs twice on the real runner (real tools, real stores, the
scripted provider): 59 turns that each read a different ~11 KB file, one of them a
~52 KB file whose evidence cannot be stored (it stays raw and protected), then a final
answer. The window is small (30,000 tokens, ``keep_recent_turns`` 2), so compaction
happens in both runs.

- projection on: ``evidence.enabled``; each large result reaches the model as a short
  projection (summary + evidence envelope), so a step adds a few hundred tokens.
- projection off: evidence disabled; each raw result (~2,700 tokens) stays in the
  history until compaction replaces it.

Prints the input tokens of every model turn (``session.model_calls`` rows with purpose
``turn``; the scripted provider reports ceil(characters of the JSON request / 4)), then
first / median / max over all steps, the median and max over steps 10 to 60, the median
rise from one step to the next (between compactions), and how many compactions each run
made.

Usage: python benchmarks/context_steps.py [--steps N] [--window TOKENS]

Runs in a temporary ``AMOS_HOME``; nothing is kept.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from amos.events import Notice, RunEvent
from amos.host import RunOptions, open_runner

STEPS = 60
WINDOW = 30_000
BIG_STEP = 5
"""The step (1-based) that reads the big file whose evidence is not stored."""
FILE_LINES = 170
"""Lines of each ordinary file: ~11 KB, above ``evidence.project_threshold_bytes``."""
BIG_BYTES = 52 * 1024
MAX_RECORD_BYTES = 45_000
"""Below the big file's record, above every other record (a replaced-history record of a
compaction included)."""
HOST_NOTE = "Keep every public function signature unchanged (host note)"


def file_text(step: int) -> str:
    """The ~11 KB file read at ``step``: numbered lines, unique per step."""
    return "".join(f"file {step:02d} line {j:04d} {'x' * 40}\n" for j in range(FILE_LINES))


def big_text() -> str:
    """The big file (``BIG_BYTES``), lines unique to it."""
    return "".join(f"BIG line {j:05d} {'y' * 50}\n" for j in range(BIG_BYTES // 66))


def prepare(folder: Path, *, projection: bool, steps: int = STEPS, window: int = WINDOW,
            max_record_bytes: int = MAX_RECORD_BYTES) -> tuple[Path, Path, Path]:
    """Write the workspace, the script and the config of the session under ``folder``.

    Returns:
        ``(workspace, script, config)`` paths.
    """
    folder.mkdir(parents=True, exist_ok=True)
    workspace = folder / "ws"
    workspace.mkdir(exist_ok=True)
    turns: list[dict[str, Any]] = []
    for step in range(1, steps):
        name = "big.txt" if step == BIG_STEP else f"f{step:02d}.txt"
        (workspace / name).write_text(big_text() if step == BIG_STEP else file_text(step), encoding="utf-8")
        turns.append({"text": f"step {step}: reading {name}",
                      "tool_calls": [{"id": f"r{step:02d}", "name": "read_file", "arguments": {"path": name}}]})
    turns.append({"text": "All files read."})
    script = folder / "script.json"
    script.write_text(json.dumps({"version": 1, "turns": turns}), encoding="utf-8")
    evidence: dict[str, Any] = {"enabled": projection}
    if projection:
        evidence.update(max_record_bytes=max_record_bytes, project_threshold_bytes=8192)
    config = folder / "config.json"
    config.write_text(json.dumps({
        "context": {"window_tokens": window, "keep_recent_turns": 2},
        "run": {"max_steps": steps + 10},
        "task_state": {"enabled": True},
        "evidence": evidence,
    }), encoding="utf-8")
    return workspace, script, config


def open_session(folder: Path, *, projection: bool, steps: int = STEPS, window: int = WINDOW,
                 max_record_bytes: int = MAX_RECORD_BYTES) -> Any:
    """A real runner on the prepared session, with a host note in its task view."""
    workspace, script, config = prepare(folder, projection=projection, steps=steps, window=window,
                                        max_record_bytes=max_record_bytes)
    runner, _ = open_runner(RunOptions(model=f"scripted:{script}", workspace=workspace, cwd=workspace,
                                       config_path=config))
    runner.update_tasks(lambda tasks: tasks.update_host(
        {"notes": [{"id": "api", "category": "constraint", "text": HOST_NOTE,
                    "source": {"label": "benchmarks/context_steps.py"}}]}, 0))
    return runner


def run(runner: Any, prompt: str = "Read every file, one per step.") -> list[RunEvent]:
    """Run to the end; every event."""

    async def go() -> list[RunEvent]:
        return [event async for event in runner.run(prompt)]

    return asyncio.run(go())


def turn_input_tokens(session: Any) -> list[int]:
    """Input tokens of each model turn, in order (summary calls left out)."""
    return [row["input_tokens"] for row in session.model_calls if row["purpose"] == "turn"]


def compactions(events: list[RunEvent]) -> int:
    """How many compactions a run made (its ``context: compacted …`` notices)."""
    return sum(1 for e in events if isinstance(e, Notice) and e.text.startswith("context: compacted"))


def figures(values: list[int]) -> dict[str, int]:
    """first / median / max over all steps, median / max over steps 10 to the end, and
    ``growth``: the median rise from one step to the next (drops at compaction left out)."""
    late = values[9:] or values
    rises = [b - a for a, b in zip(values, values[1:], strict=False) if b > a] or [0]
    return {"first": values[0], "median": int(statistics.median(values)), "max": max(values),
            "median_10_on": int(statistics.median(late)), "max_10_on": max(late),
            "growth": int(statistics.median(rises))}


def measure(folder: Path, *, projection: bool, steps: int, window: int) -> tuple[list[int], int, str]:
    """One run: per-step input tokens, compactions, and the stop reason."""
    runner = open_session(folder, projection=projection, steps=steps, window=window)
    try:
        events = run(runner)
        receipt = events[-1].receipt  # type: ignore[attr-defined]
        return turn_input_tokens(runner.session), compactions(events), f"{receipt.cause}/{receipt.reason}"
    finally:
        runner.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS, help=f"model turns (default {STEPS})")
    parser.add_argument("--window", type=int, default=WINDOW, help=f"context window, tokens (default {WINDOW})")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="amos-context-steps-") as tmp:
        os.environ["AMOS_HOME"] = str(Path(tmp) / "home")
        on, on_compactions, on_stop = measure(Path(tmp) / "on", projection=True, steps=args.steps, window=args.window)
        off, off_compactions, off_stop = measure(Path(tmp) / "off", projection=False, steps=args.steps,
                                                 window=args.window)
    print(f"window {args.window} tokens, keep_recent_turns 2, {args.steps} steps; input tokens per model turn")
    print(f"{'step':>4}  {'projection on':>13}  {'projection off':>14}")
    for step in range(max(len(on), len(off))):
        left = str(on[step]) if step < len(on) else "-"
        right = str(off[step]) if step < len(off) else "-"
        print(f"{step + 1:>4}  {left:>13}  {right:>14}")
    for label, values, count, stop in (("projection on ", on, on_compactions, on_stop),
                                       ("projection off", off, off_compactions, off_stop)):
        f = figures(values)
        print(f"{label}: first {f['first']}, median {f['median']}, max {f['max']}; steps 10-{len(values)}: "
              f"median {f['median_10_on']}, max {f['max_10_on']} ({f['max_10_on'] / f['median_10_on']:.2f}x); "
              f"+{f['growth']} per step between compactions; {count} compactions; stop {stop}")


if __name__ == "__main__":
    main()
