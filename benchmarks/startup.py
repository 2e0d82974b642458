"""Start-up and demo figures, as whole-process medians.

Prints wall time (seconds) and peak resident memory (MiB) of:
``amos --version``, ``amos run --help`` and ``amos run --demo``.
Targets on the 2-core reference machine: ``--version`` under 0.2 s, the demo under 1.5 s.

Usage: python benchmarks/startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run argv once; return (wall seconds, peak RSS MiB) of that child alone."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0,):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per command (default 7)")
    args = parser.parse_args()
    amos = shutil.which("amos") or os.path.join(os.path.dirname(sys.executable), "amos")
    home = tempfile.mkdtemp(prefix="amos-bench-")
    env = {**os.environ, "AMOS_HOME": home}
    cases = {
        "amos --version": [amos, "--version"],
        "amos run --help": [amos, "run", "--help"],
        "amos run --demo": [amos, "run", "--demo", "--quiet"],
    }
    print(f"{'command':<18} {'median wall':>12} {'median peak RSS':>16}   ({args.runs} runs each)")
    try:
        for name, argv in cases.items():
            measure(argv, env)  # warm the file cache
            runs = [measure(argv, env) for _ in range(args.runs)]
            wall = statistics.median(r[0] for r in runs)
            rss = statistics.median(r[1] for r in runs)
            print(f"{name:<18} {wall:>10.3f} s {rss:>12.1f} MiB")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
