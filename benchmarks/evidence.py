"""Evidence store figures, as medians on real files in a temporary folder.

Prints the median time of:

- ``FileEvidenceStore.put`` of a 100 KB record with fsync (target under 10 ms);
- ``list`` of one 100-entry page out of 10,000 records, from a warm and from a new
  store instance (target under 20 ms);
- ``get_reference`` by id in the same 10,000-record scope (no target);
- ``read_text_chunk`` of a 64 KiB chunk from a 1 MB record, including verification of
  the whole record's size and SHA-256 (target under 5 ms), and from an 8 MB record
  (the default ``max_record_bytes``; no target).

Usage: python benchmarks/evidence.py [--runs N] [--dir PATH]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from amos.evidence import EvidenceRecord, EvidenceScope, FileEvidenceStore

SCOPE = EvidenceScope(owner_id="bench", namespace="default")


def median_ms(run: Callable[[], object], runs: int) -> float:
    """Median over ``runs`` timed calls of ``run``, in milliseconds."""
    run()  # warm up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def record(n: int, result_bytes: int) -> EvidenceRecord:
    """A record whose result text is about ``result_bytes`` bytes."""
    rng = random.Random(n)
    words = "alpha beta gamma delta file test value result error line".split()
    text = " ".join(rng.choice(words) for _ in range(result_bytes // 5 + 1))[:result_bytes]
    return EvidenceRecord(
        session_id="bench-session", execution_id=f"exec-{n // 10}", call_id=f"call-{n}",
        tool="read_file", effect="read", status="succeeded",
        started_at="2026-01-01T00:00:00.000+00:00", ended_at="2026-01-01T00:00:00.100+00:00",
        identity={"owner_id": "bench", "tenant_id": None, "namespace": "default"},
        arguments={"path": f"src/module_{n}.py"}, result={"text": text},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25, help="timed runs per figure (default 25)")
    parser.add_argument("--dir", type=Path, default=None, help="folder to benchmark in")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        print(f"{'figure':<52} {'median':>10}   target")

        put_store = FileEvidenceStore(root / "put", SCOPE)
        big = record(0, 100_000)
        put_ms = median_ms(lambda: put_store.put(big), args.runs)
        print(f"{'put 100 KB record (fsync)':<52} {put_ms:>7.2f} ms   < 10 ms")

        many = FileEvidenceStore(root / "many", SCOPE, fsync=False)
        small = record(1, 200)
        refs = [many.put(small) for _ in range(10_000)]
        middle = refs[5000].id
        warm_ms = median_ms(lambda: many.list(after=middle, limit=100), args.runs)
        print(f"{'list 100 of 10,000 (warm instance)':<52} {warm_ms:>7.2f} ms   < 20 ms")
        cold_ms = median_ms(
            lambda: FileEvidenceStore(root / "many", SCOPE).list(after=middle, limit=100),
            args.runs,
        )
        print(f"{'list 100 of 10,000 (new instance)':<52} {cold_ms:>7.2f} ms   < 20 ms")
        ids = [r.id for r in random.Random(3).sample(refs, 50)]
        pick = iter(ids * (args.runs + 1))
        get_ms = median_ms(lambda: many.get_reference(next(pick)), args.runs)
        print(f"{'get_reference by id (10,000 records)':<52} {get_ms:>7.2f} ms   -")

        for size, target in ((1_000_000, "< 5 ms"), (8_000_000, "-")):
            chunk_store = FileEvidenceStore(root / f"chunk{size}", SCOPE, max_record_bytes=9_000_000)
            ref = chunk_store.put(record(2, size))
            chunk_ms = median_ms(lambda r=ref, s=chunk_store: s.read_text_chunk(r, 300_000, 65_536),
                                 args.runs)
            label = f"read_text_chunk 64 KiB of a {size // 1_000_000} MB record (verified)"
            print(f"{label:<52} {chunk_ms:>7.2f} ms   {target}")


if __name__ == "__main__":
    main()
