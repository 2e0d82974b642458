"""Median time of one doom-loop fingerprint on typical tool arguments, in microseconds.

Times ``fingerprint_tool_call`` (canonicalize + SHA-256, spec/doom-loop-behaviour.md §3),
the per-call cost under ``record_tool_call``, whose budget is 50 µs median.

Usage: python benchmarks/canonical.py [--runs N] [--calls N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from amos.policy.canonical import fingerprint_tool_call

CASES: list[tuple[str, str, object]] = [
    ("read_file", "read_file", {"path": "src/app.py", "offset": 1, "limit": 200}),
    ("run_command", "run_command", {"command": "pytest -q tests/test_app.py"}),
    (
        "edit_file",
        "edit_file",
        {
            "path": "src/app.py",
            "old": "def main():\n    return 0\n",
            "new": "def main() -> int:\n    return run()\n",
        },
    ),
    (
        "search (nested, non-ASCII)",
        "search",
        {"query": "café 🎉", "filter": {"tags": ["b", "a"], "depth": 2}, "sort": None},
    ),
]


def median_us(tool_name: str, args: object, runs: int, calls: int) -> float:
    """Median over ``runs`` batches of the mean time of one call, in microseconds."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        for _ in range(calls):
            fingerprint_tool_call(tool_name, args)
        samples.append((time.perf_counter_ns() - start) / calls / 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="timed batches (default 21)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per batch (default 2000)")
    args = parser.parse_args()
    for label, tool_name, tool_args in CASES:
        fingerprint_tool_call(tool_name, tool_args)  # warm up
        print(
            f"fingerprint_tool_call {label}: {median_us(tool_name, tool_args, args.runs, args.calls):.2f} µs median"
        )


if __name__ == "__main__":
    main()
