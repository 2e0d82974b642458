"""Time to snapshot a 10,000-file workspace, first and after one file changed (issue 20).

Targets: first snapshot under 3 s, incremental (one file changed) under 150 ms median.
Also prints the size the shadow repository adds on disk (``du``-style, allocated blocks)
and the time of ``changed()`` and of restoring one file.

Usage: python benchmarks/snapshots.py [--files N] [--runs N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from amos.snapshots import ShadowRepo


def make_workspace(root: Path, files: int) -> int:
    """``files`` source-like files (about 2 KB) in 100 folders of 10 subfolders; returns their bytes."""
    rng = random.Random(10)
    words = ["def", "return", "self", "value", "items", "for", "in", "if", "else", "import", "class",
             "None", "True", "len", "range", "print", "data", "path", "result", "count", "=", "+", "(", ")"]
    total = 0
    for i in range(files):
        folder = root / f"pkg{i % 100}" / f"mod{(i // 100) % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        data = "".join("    " + " ".join(rng.choices(words, k=rng.randint(3, 9))) + f"  # {rng.random():.6f}\n"
                       for _ in range(rng.randint(5, 60)))
        (folder / f"file{i}.py").write_text(data)
        total += len(data)
    (root / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    return total


def disk_bytes(folder: Path) -> int:
    """Allocated size of everything under ``folder``, bytes (st_blocks * 512)."""
    total = 0
    for dirpath, _, filenames in os.walk(folder):
        total += os.lstat(dirpath).st_blocks * 512
        for name in filenames:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def cpu_s() -> float:
    """CPU time of this process and its finished children (git), user + system, seconds."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--keep", type=Path, default=None, help="build in DIR and keep it")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="amos-bench-")) if args.keep is None else args.keep
    base.mkdir(parents=True, exist_ok=True)
    try:
        ws = base / "ws"
        ws.mkdir()
        content = make_workspace(ws, args.files)
        repo = ShadowRepo(base / "snapshots" / "git", ws)
        start, cpu = time.perf_counter(), cpu_s()
        first = repo.snapshot("first")
        first_s, first_cpu = time.perf_counter() - start, cpu_s() - cpu
        assert first.files == args.files + 1, first
        size_after_first = disk_bytes(base / "snapshots")

        incremental = []
        incremental_cpu = []
        unchanged = []
        target = ws / "pkg7" / "mod0" / "file7.py"
        for run in range(args.runs):
            target.write_text(f"changed {run}\n")
            start, cpu = time.perf_counter(), cpu_s()
            repo.snapshot(f"run {run}")
            incremental.append(time.perf_counter() - start)
            incremental_cpu.append(cpu_s() - cpu)
            start = time.perf_counter()
            repo.snapshot(f"nothing changed {run}")
            unchanged.append(time.perf_counter() - start)
        last = repo.head()
        start = time.perf_counter()
        changes = repo.changed(first, last)
        changed_s = time.perf_counter() - start
        start = time.perf_counter()
        repo.restore(first, [c.path for c in changes])
        restore_s = time.perf_counter() - start
        size_end = disk_bytes(base / "snapshots")

        print(f"workspace: {args.files} files, {content / 1e6:.1f} MB of content; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"first snapshot:                  {first_s:.2f} s   (target < 3 s; CPU {first_cpu:.2f} s)")
        print(f"incremental, one file changed:   {statistics.median(incremental) * 1000:.0f} ms median, "
              f"{min(incremental) * 1000:.0f}-{max(incremental) * 1000:.0f} ms over {args.runs} runs"
              f"   (target < 150 ms; CPU {statistics.median(incremental_cpu) * 1000:.0f} ms median)")
        print(f"no change (same snapshot back):  {statistics.median(unchanged) * 1000:.0f} ms median")
        print(f"changed(first, last):            {changed_s * 1000:.0f} ms")
        print(f"restore one file (2 snapshots):  {restore_s * 1000:.0f} ms")
        print(f"shadow repository on disk:       {size_after_first / 1e6:.1f} MB after the first snapshot, "
              f"{size_end / 1e6:.1f} MB after {2 * args.runs + 3} more")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
