"""Doom-loop detector figures, as in-process medians.

Prints the median time of:

- ``DoomLoopMonitor.record_tool_call`` on typical arguments (target under 50 µs);
- ``declare_round`` plus three ``record_tool_call`` for a typical fan-out round (no target);
- ``detect_text_repetition`` on a 5 MB response, with and without a loop at its tail
  (target under 5 ms: the tail window bounds the work);
- ``DoomLoopMonitor.record_assistant_text`` on the same 5 MB response (no target: it
  normalises and hashes the whole text for the cross-turn streak).

Usage: python benchmarks/doom_loop.py [--runs N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from amos.policy.doom_loop import DoomLoopMonitor, detect_text_repetition, resolve_doom_loop_option

TYPICAL_CALLS = [
    ("run_command", {"command": "pytest -q tests/test_calc.py -k 'add or divide'"}),
    ("read_file", {"path": "src/project/module/service.py", "offset": 120, "limit": 200}),
    ("search", {"pattern": "def handle_request", "path": "src", "glob": "*.py", "max_results": 50}),
    ("write_file", {"path": "notes/plan.md", "content": "- fix the failing test\n" * 20}),
]


def median_per_call(run: Callable[[], None], calls_per_run: int, runs: int) -> float:
    """Median over ``runs`` timed runs of the per-call time, in microseconds."""
    run()  # warm up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) / calls_per_run * 1e6)
    return statistics.median(samples)


def five_mb_response(loop_tail: bool) -> str:
    rng = random.Random(7)
    words = "the a model tool call file test run error fix check value result plan".split()
    chunk = " ".join(rng.choice(words) for _ in range(20_000)) + "\n"
    text = (chunk * (5 * 1024 * 1024 // len(chunk) + 1))[: 5 * 1024 * 1024]
    if loop_tail:
        text += " I am stuck. Let me try again." * 50
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25, help="timed runs per figure (default 25)")
    args = parser.parse_args()
    config = resolve_doom_loop_option(True)

    monitor = DoomLoopMonitor(config)
    rounds = iter(range(10**9))
    batch = 250

    def record_batch() -> None:
        for _ in range(batch // len(TYPICAL_CALLS)):
            round_no = next(rounds)
            for name, key in TYPICAL_CALLS:
                monitor.record_tool_call(name, key, round_no)

    calls = batch // len(TYPICAL_CALLS) * len(TYPICAL_CALLS)
    record_us = median_per_call(record_batch, calls, args.runs)

    fan_out = [
        ("read_file", {"path": f"src/pkg/mod{n}.py", "offset": 0, "limit": 400}) for n in range(3)
    ]
    fan_monitor = DoomLoopMonitor(config)

    def fan_out_rounds() -> None:
        for _ in range(50):
            round_no = next(rounds)
            fan_monitor.declare_round(round_no, fan_out)
            for name, key in fan_out:
                fan_monitor.record_tool_call(name, key, round_no)

    round_us = median_per_call(fan_out_rounds, 50, args.runs)

    print(f"{'figure':<46} {'median':>12}   target")
    print(f"{'record_tool_call (typical arguments)':<46} {record_us:>9.1f} µs   < 50 µs")
    print(f"{'declare_round + 3 record_tool_call':<46} {round_us:>9.1f} µs   -")
    for loop_tail in (False, True):
        text = five_mb_response(loop_tail)
        detect_ms = median_per_call(lambda t=text: detect_text_repetition(t), 1, args.runs) / 1000
        label = f"detect_text_repetition (5 MB, {'loop at tail' if loop_tail else 'no loop'})"
        print(f"{label:<46} {detect_ms:>9.3f} ms   < 5 ms")
    text_monitor = DoomLoopMonitor(config)
    whole_ms = median_per_call(lambda: text_monitor.record_assistant_text(text), 1, 5) / 1000
    print(f"{'record_assistant_text (5 MB, loop at tail)':<46} {whole_ms:>9.1f} ms   -")


if __name__ == "__main__":
    main()
