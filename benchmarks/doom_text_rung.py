"""The doom-loop text rung: detection of generated loops, false alarms on real prose.

Issue 17 item 15: a model repeating one 22-token sentence five times, a sentence 20
times or a 3-sentence cycle 10 times ended ANSWERED under ``{"doom_loop": true}``. This
scores the text rung the way a run uses it — ``detect_text_repetition`` (the port,
unchanged) on the response, its ``repeats`` as the streak on the ladder — for amos's
old and new config defaults:

- **detection rate**: generated loops whose streak reaches the ``stop`` rung (the run
  ends ``BOUNDED_STOP`` instead of ``ANSWERED``), per kind and overall. Loops are built
  from real sentences of the corpus, after a prefix of real prose, some with the last
  copy cut short (an output limit);
- **false alarms** on normal text: the project's own README, examples, bundled
  commands, and the shared design, style, spec and seed texts (prose), and amos's own
  source (code, which models also write). Every line end is a possible end of a
  response; a *stop* there ends a run wrongly, a *notice* (the observe rung) is noise;
- the time of one detection on the worst case (a response of one repeated token).

``--stream`` (issue 23) also scores the corpus the way a streamed response is scored: each
file fed as 7-character deltas to :class:`~amos.policy.doom_loop_stream.TextStreamWatch`
(a scan at most every 48 characters, at token boundaries, so every point of the text is
a possible end), and prints the most back-to-back copies any scan saw per file: a file
whose maximum reaches the text stop (``text.stop_repeats`` 4, or the ladder's 5) would
have been stopped mid-stream. ``--extra GLOB…`` adds more files to that scan (e.g.
``'/usr/share/doc/**/*.md'``).

Usage: python benchmarks/doom_text_rung.py [--seed N] [--loops N] [--stream [--extra GLOB…]]
"""

from __future__ import annotations

import argparse
import glob
import random
import re
import statistics
import time
from collections import Counter
from pathlib import Path

from amos.policy.doom_loop import detect_text_repetition, normalize_text
from amos.policy.doom_loop_config import (
    AMOS_DOOM_LOOP_LADDER,
    AMOS_TEXT_OPTIONS,
    DEFAULT_DOOM_LOOP_LADDER,
    DEFAULT_TEXT_OPTIONS,
)
from amos.policy.doom_loop_stream import TextStreamWatch

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

CONFIGS = {
    "old (16/4/12/400, stop 6)": (DEFAULT_TEXT_OPTIONS.to_dict(), DEFAULT_DOOM_LOOP_LADDER.stop),
    "issue 17 (160/4/12/800, stop 5)": ({**AMOS_TEXT_OPTIONS.to_dict(), "stop_repeats": None}, AMOS_DOOM_LOOP_LADDER.stop),
    "amos defaults (issue 23: text stop at 4 copies)": (
        AMOS_TEXT_OPTIONS.to_dict(), min(AMOS_DOOM_LOOP_LADDER.stop, AMOS_TEXT_OPTIONS.stop_repeats)),
}


def prose_files() -> list[Path]:
    """The prose corpus: the project's own docs and the shared texts, when present."""
    files = [REPO / "README.md", *sorted((REPO / "examples").rglob("*.md")), *sorted((REPO / "commands").glob("*.md")),
             *sorted((REPO / "amos" / "slash" / "bundled_commands").glob("*.md"))]
    for folder, pattern in ((SHARED, "*.md"), (SHARED / "spec", "*.md"), (SHARED / "seeds", "*.txt")):
        if folder.is_dir():
            files += sorted(folder.glob(pattern))
    return [f for f in files if f.is_file()]


def code_files() -> list[Path]:
    """The code corpus: amos's own source."""
    return sorted((REPO / "amos").rglob("*.py"))


def cut_points(text: str) -> list[str]:
    """Every prefix of ``text`` that ends at a line end (a response may end anywhere)."""
    return [text[:m.end()] for m in re.finditer(r"\n", text)] + [text]


_SENTENCE = re.compile(r"[A-Z][^.!?\n`|#*]{20,400}[.!?]")


def sentences(texts: list[str]) -> list[list[str]]:
    """Real sentences of the prose corpus, as token lists (4 to 60 tokens)."""
    found = []
    for text in texts:
        for match in _SENTENCE.finditer(" ".join(text.split())):
            tokens = match.group(0).split()
            if 4 <= len(tokens) <= 60:
                found.append(tokens)
    return found


def _pick(rng: random.Random, pool: list[list[str]], lo: int, hi: int) -> list[str]:
    fitting = [s for s in pool if lo <= len(s) <= hi]
    return list(rng.choice(fitting))


def generated_loops(texts: list[str], rng: random.Random, count: int) -> list[tuple[str, str]]:
    """``(kind, response)`` pairs: a real prose prefix, then a loop at the tail."""
    pool = sentences(texts)
    words = " ".join(texts).split()
    kinds = {
        "22-token sentence x5": lambda: [_pick(rng, pool, 22, 22)] * 5,
        "22-token sentence x20": lambda: [_pick(rng, pool, 22, 22)] * 20,
        "3-sentence cycle x10": lambda: [_pick(rng, pool, 10, 25) for _ in range(3)] * 10,
        "sentence (8-40 tokens) x5-12": lambda: [_pick(rng, pool, 8, 40)] * rng.randint(5, 12),
        "2-4 sentence cycle x5-8": lambda: [_pick(rng, pool, 8, 22) for _ in range(rng.randint(2, 4))]
        * rng.randint(5, 8),
        "paragraph (~100 tokens) x5": lambda: [_pick(rng, pool, 15, 25) for _ in range(5)] * 5,
        "short phrase x20": lambda: [["I", "am", "stuck", "on", "this."]] * 20,
    }
    loops = []
    for n in range(count):
        kind = list(kinds)[n % len(kinds)]
        blocks = kinds[kind]()
        tokens = [t for block in blocks for t in block]
        if rng.random() < 0.3:  # the last copy cut short (an output limit, or the model stopping mid-copy)
            tokens = tokens[: len(tokens) - rng.randint(1, max(1, len(blocks[-1]) - 1))]
            kind += ", last copy cut"
        start = rng.randrange(0, max(1, len(words) - 300))
        prefix = words[start : start + rng.randint(20, 300)]
        loops.append((kind, " ".join(prefix + tokens)))
    return loops


def verdict(text: str, options: dict, stop: int, observe: int = 2) -> str | None:
    """``"stop"``, ``"notice"`` (observe) or None for one response, as the monitor ranks it."""
    window = int(options["max_window_tokens"])
    found = detect_text_repetition(normalize_text(text[-(64 * window + 256):]), options)
    if found is None:
        return None
    if found.repeats >= stop:
        return "stop"
    return "notice" if found.repeats >= observe else None


def streamed_max_repeats(text: str, options: dict) -> tuple[int, str]:
    """The most back-to-back copies any stream scan of ``text`` saw, and that block (≤ 80 chars)."""
    best: list = [0, ""]

    def preview(tail: str) -> None:
        found = detect_text_repetition(normalize_text(tail), options)
        if found is not None and found.repeats > best[0]:
            best[:] = [found.repeats, found.sample[:80]]

    watch = TextStreamWatch(preview, options["max_window_tokens"])
    for i in range(0, len(text), 7):
        watch.feed(text[i:i + 7])
    return best[0], best[1]


def stream_false_alarms(paths: list[Path]) -> None:
    """Print, for amos's text options, how many files a streamed scan would stop at 4 and at 5 copies."""
    options = AMOS_TEXT_OPTIONS.to_dict()
    chars = 0
    worst: list[tuple[int, str, str]] = []
    started = time.perf_counter()
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        chars += len(text)
        repeats, sample = streamed_max_repeats(text, options)
        if repeats >= options["min_repeats"]:
            worst.append((repeats, str(path), sample))
    elapsed = time.perf_counter() - started
    print(f"\nstreamed scan (amos text options, 7-character deltas): {len(paths)} files, {chars / 1e6:.1f} M "
          f"characters, {elapsed:.0f} s")
    for stop in (4, 5):
        print(f"  files stopped mid-stream at {stop} copies: {sum(1 for r, _, _ in worst if r >= stop)}")
    for repeats, path, sample in sorted(worst, reverse=True)[:20]:
        print(f"    {repeats} copies of {sample!r} in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--loops", type=int, default=700)
    parser.add_argument("--stream", action="store_true", help="also score the corpus as streamed responses")
    parser.add_argument("--extra", nargs="*", default=[], help="more files (globs, ** allowed) for --stream")
    args = parser.parse_args()
    prose = [f.read_text(encoding="utf-8", errors="replace") for f in prose_files()]
    code = [f.read_text(encoding="utf-8", errors="replace") for f in code_files()]
    loops = generated_loops(prose, random.Random(args.seed), args.loops)
    prose_cuts = [c for t in prose for c in cut_points(t)]
    code_cuts = [c for t in code for c in cut_points(t)]
    print(f"corpus: {len(prose)} prose files ({len(prose_cuts)} response ends), {len(code)} source files "
          f"({len(code_cuts)} response ends); {len(loops)} generated loops")
    for name, (options, stop) in CONFIGS.items():
        print(f"\n{name}: text {options}, ladder stop {stop}")
        caught = Counter(kind for kind, text in loops if verdict(text, options, stop) == "stop")
        total = Counter(kind for kind, _ in loops)
        for kind in sorted(total):
            print(f"  stopped {kind:<45} {caught[kind]:>4}/{total[kind]:<4} {100 * caught[kind] / total[kind]:5.1f}%")
        whole = [k for k in total if not k.endswith("cut")]
        print(f"  detection rate, all loops: {100 * sum(caught.values()) / len(loops):5.1f}%; loops whose last copy "
              f"is whole: {100 * sum(caught[k] for k in whole) / sum(total[k] for k in whole):5.1f}%")
        for label, cuts in (("prose", prose_cuts), ("code", code_cuts)):
            seen = Counter(verdict(c, options, stop) for c in cuts)
            print(f"  false alarms on {label:<5}: stop {seen['stop']:>3} ({100 * seen['stop'] / len(cuts):.2f}%), "
                  f"notice {seen['notice']:>3} ({100 * seen['notice'] / len(cuts):.2f}%) of {len(cuts)}")
            for c in cuts:
                if verdict(c, options, stop) == "stop":
                    print(f"    stop at: …{' '.join(c.split()[-12:])[:100]!r}")
        worst = "no " * (int(options["max_window_tokens"]) * 3)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            detect_text_repetition(worst, options)
            times.append(time.perf_counter() - started)
        print(f"  worst-case detection (one token repeated): {1000 * statistics.median(times):.2f} ms")
    if args.stream:
        extra = sorted({Path(p) for pattern in args.extra for p in glob.glob(pattern, recursive=True)})
        stream_false_alarms([*prose_files(), *code_files(), *(p for p in extra if p.is_file())])


if __name__ == "__main__":
    main()
