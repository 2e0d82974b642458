"""Cost of the one secret masker (``amos.evidence.redact``) on what it runs on.

The masker runs on every tool result and every streamed delta (issue 17 item 3), so
what matters is text that holds no secret: one ``str.translate`` plus a substring test
per encoded form. Prints, for 1 and 4 provider keys (each ~40 characters, 20-odd forms):

- the one-off cost of building a masker for a secret set (cached afterwards) and of
  compiling the pattern of all its forms (in use only the forms found are compiled);
- microseconds per call on a 30-character streamed delta and on a 64 KiB tool result
  without secrets (the fast path), median of several rounds;
- the same 64 KiB result holding the key base64-encoded (the slow path: one regex pass);
- the old plain-only masker on the 64 KiB result, for comparison.

Targets: under 5 µs per delta and under 2 ms per 64 KiB result without secrets.

Usage: python benchmarks/masking.py [--rounds N]
"""

from __future__ import annotations

import argparse
import base64
import re
import statistics
import time
from pathlib import Path

from amos.evidence.redact import SecretMasker, masker_for, redact_text

KEYS = ["sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2, "sk-ant-api03-" + "Zz9Yy8Xx7Ww6" * 3,
        "AIzaSy" + "Q" * 33, "ghp_" + "0123456789abcdefABCDEF0123456789abcd"]


def _median_us(fn, text: str, rounds: int, repeat: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(repeat):
            fn(text)
        samples.append((time.perf_counter_ns() - start) / repeat / 1000)
    return statistics.median(samples)


def _old_plain(secrets: list[str]):
    pattern = re.compile("|".join(re.escape(v) for v in sorted(secrets, key=len, reverse=True)))
    return lambda text: pattern.sub("[REDACTED]", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    result = (readme * (65536 // len(readme) + 1))[:65536]
    delta = " the model writes a few words "
    for count in (1, 4):
        secrets = KEYS[:count]
        start = time.perf_counter_ns()
        masker = SecretMasker(secrets)
        build_ms = (time.perf_counter_ns() - start) / 1e6
        start = time.perf_counter_ns()
        masker.pattern()
        compile_ms = (time.perf_counter_ns() - start) / 1e6
        masker_for(secrets)  # warm the cache: redact_text looks the set up on every call
        call = lambda text, s=secrets: redact_text(text, s)  # noqa: E731
        leaked = result[:30000] + base64.b64encode(b"x" + secrets[0].encode()).decode() + result[30000:]
        print(f"{count} key(s), {len(masker.forms)} forms: build {build_ms:.2f} ms, pattern of every form "
              f"{compile_ms:.1f} ms (compiled only for the forms found, once)")
        print(f"  delta ({len(delta)} chars), no secret:    {_median_us(call, delta, args.rounds, 20000):8.2f} µs")
        print(f"  64 KiB result, no secret:         {_median_us(call, result, args.rounds, 50):8.1f} µs")
        print(f"  64 KiB result, key base64-encoded: {_median_us(call, leaked, args.rounds, 10):8.1f} µs")
        print(f"  old plain-only masker, 64 KiB:     {_median_us(_old_plain(secrets), result, args.rounds, 50):8.1f} µs")
        assert redact_text(leaked, secrets) != leaked


if __name__ == "__main__":
    main()
