"""Streaming figures of the TUI's conversation view, headless (Textual ``run_test``).

Streams 10,000 assistant-text deltas (a few characters each, like a model's tokens:
words, paragraphs, a list, a code fence) into the real :class:`amos.tui.app.AmosApp`
at 120×40 and prints deltas per second, counted from the first delta until the whole
text is laid out on screen, for:

- the view: ``ConversationView.append_assistant`` for every delta;
- the app: every delta as a ``TextDelta`` event through the app's run worker (what a
  run does: status, side panel and view updates per event).

Also prints the longest the event loop went without taking the next delta (ms): how
long typing or a key press could wait while text streams. Target: at least 2,000
deltas/s for both.

Usage: python benchmarks/tui_stream.py [--deltas N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

SIZE = (120, 40)


def deltas(n: int) -> list[str]:
    """``n`` token-sized pieces of a Markdown answer (paragraphs, a list, code fences)."""
    words = ("the", "runner", "keeps", "durable", "evidence", "of", "what", "tools", "returned", "and")
    out: list[str] = []
    i = 0
    while len(out) < n:
        block = i // 60 % 5
        if i % 60 == 0 and i:
            out.append("\n\n")
            if block == 3:
                out.append("```python\n")
            elif block == 4:
                out.append("```\n\n")
        elif block == 3 and i % 6 == 0:
            out.append(f"\nvalue_{i} = compute({i})")
        elif block == 2 and i % 12 == 0:
            out.append(f"\n- item {i}:")
        else:
            out.append(" " + words[i % len(words)])
        i += 1
    return out[:n]


def open_app():
    """An AmosApp over a scripted runner in a temporary home (no session store)."""
    from amos.host import RunOptions, open_runner
    from amos.tui.app import AmosApp

    folder = Path(tempfile.mkdtemp(prefix="amos-bench-tui-"))
    os.environ["AMOS_HOME"] = str(folder / "home")
    (folder / "ws").mkdir()
    script = folder / "script.json"
    script.write_text(json.dumps({"version": 1, "turns": [{"text": "unused"}]}), encoding="utf-8")
    runner, opened = open_runner(RunOptions(model=f"scripted:{script}", workspace=folder / "ws", cwd=folder,
                                            interactive=True, no_save=True))
    return AmosApp(runner, opened), runner


async def settle(pilot, app) -> None:
    """Wait until nothing is left to lay out or paint."""
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    await pilot.pause()


async def stream_view(pieces: list[str]) -> tuple[float, float]:
    """Append every piece to the view; returns (deltas/s, longest stall in ms)."""
    app, runner = open_app()
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            conv = app.conversation
            stall = 0.0
            start = last = time.perf_counter()
            for piece in pieces:
                await conv.append_assistant(piece)
                now = time.perf_counter()
                stall, last = max(stall, now - last), now
            await conv.end_assistant()
            await settle(pilot, app)
            elapsed = time.perf_counter() - start
            assert conv.is_vertical_scroll_end, "the view followed the stream"
            return len(pieces) / elapsed, stall * 1000
    finally:
        runner.close()


async def stream_app(pieces: list[str]) -> tuple[float, float]:
    """Send every piece as a TextDelta through the app's run worker; (deltas/s, stall ms)."""
    from amos.events import TextDelta

    app, runner = open_app()
    stall = 0.0

    async def events() -> AsyncIterator[TextDelta]:
        nonlocal stall
        last = time.perf_counter()
        for piece in pieces:
            yield TextDelta(text=piece)
            now = time.perf_counter()
            stall, last = max(stall, now - last), now

    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            start = time.perf_counter()
            app._start(events())
            while app.busy:
                await asyncio.sleep(0.005)
            await settle(pilot, app)
            elapsed = time.perf_counter() - start
            return len(pieces) / elapsed, stall * 1000
    finally:
        runner.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=10_000, help="deltas per stream (default 10,000)")
    parser.add_argument("--runs", type=int, default=3, help="streams per figure (default 3)")
    args = parser.parse_args()
    pieces = deltas(args.deltas)
    print(f"{args.deltas:,} deltas ({sum(map(len, pieces)):,} characters), {SIZE[0]}×{SIZE[1]}, "
          f"median of {args.runs} runs")
    for name, case in (("view", stream_view), ("app worker", stream_app)):
        runs = [asyncio.run(case(pieces)) for _ in range(args.runs)]
        rate = statistics.median(r[0] for r in runs)
        stall = statistics.median(r[1] for r in runs)
        print(f"{name:<11} {rate:>9,.0f} deltas/s   longest wait for the next delta {stall:>6.1f} ms   "
              f"(target ≥ 2,000 deltas/s)")


if __name__ == "__main__":
    main()
