"""Loop-policy overhead per tool call, as in-process medians.

Prints the median time per call of admission (fingerprint + identity lookup) plus
observation bookkeeping in :class:`amos.policy.loop_policy.PolicyTracker`, for
arguments of about 100 bytes, 1 KiB and 4 KiB (target: under 0.2 ms median for
arguments under 4 KiB, issue 4).

Usage: python benchmarks/loop_policy.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from amos.policy.loop_policy import LoopPolicy, PolicyTracker


def arguments(size: int, i: int) -> dict:
    """Write-like arguments of about ``size`` bytes of JSON, distinct per ``i``."""
    return {"path": f"src/module_{i}.py", "content": "x = 1\n" * max(1, (size - 40) // 6)}


def per_call_us(size: int, calls: int, runs: int) -> float:
    """Median over ``runs`` of the per-call time (µs) of ``calls`` admit + observe pairs."""
    samples = []
    prebuilt = [arguments(size, i) for i in range(calls)]
    for _ in range(runs + 1):
        tracker = PolicyTracker(LoopPolicy(max_tracked=1000))
        start = time.perf_counter()
        for i, args in enumerate(prebuilt):
            tracker.begin_round()
            tracker.admit(f"c{i}", "write_file", "write", args)
            tracker.observe(f"c{i}", "write_file", "write", "succeeded", "complete")
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    runs = parser.parse_args().runs
    for size in (100, 1024, 4000):
        actual = len(json.dumps(arguments(size, 0)))
        us = per_call_us(size, 300, runs)
        verdict = "ok" if us < 200 else "OVER TARGET"
        print(f"admit + observe, {actual:>5} B arguments: {us:8.1f} µs median per call "
              f"(target < 200 µs) {verdict}")


if __name__ == "__main__":
    main()
