"""Opening a long saved session in the TUI, headless (Textual ``run_test``).

Builds a 2,000-message session with :class:`amos.sessions.SessionStore` (the mixed
history of ``context_budget.py``: prompts, assistant turns with text and tool calls,
tool results from a few hundred bytes to 8 KB, some projected), then opens it the way
``amos --session ID`` does and prints the median, in milliseconds, of:

- opening the runner on the session (``open_runner``: config, session load);
- the app's first paint that shows the transcript (from starting the app to the first
  screen update drawn with the history mounted, the view at its end);
- both together. Target: under 1 s to first paint.

It also prints how many widgets the view mounted (the newest page of messages; older
ones wait behind the "earlier messages" line).

Usage: python benchmarks/tui_open.py [--messages N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from context_budget import history  # the sibling benchmark's realistic history

SIZE = (120, 40)


def build(folder: Path, count: int) -> tuple[str, Path, Path]:
    """Save a ``count``-message session; returns (session id, script, workspace)."""
    from amos import paths
    from amos.sessions import SessionStore

    store = SessionStore(paths.sessions_dir())
    session = store.create()
    session.title = "benchmark"
    session.messages = history(count)
    store.save(session)
    store.close_journal(session.id)
    workspace = folder / "ws"
    workspace.mkdir()
    script = folder / "script.json"
    script.write_text(json.dumps({"version": 1, "turns": [{"text": "unused"}]}), encoding="utf-8")
    return session.id, script, workspace


async def open_once(session_id: str, script: Path, workspace: Path) -> tuple[float, float, int]:
    """Open the session in the app; returns (runner ms, first paint ms, widgets in the view)."""
    from textual.screen import Screen

    from amos.host import RunOptions, open_runner
    from amos.tui.app import AmosApp

    painted: list[float] = []
    original = Screen._compositor_refresh

    def refresh(screen: Screen) -> None:
        original(screen)
        app = screen.app
        if not painted and isinstance(app, AmosApp) and screen is app.screen_stack[0]:
            conv = app.conversation
            if len(conv.children) > 1 and (conv.max_scroll_y == 0 or conv.is_vertical_scroll_end):
                painted.append(time.perf_counter())

    Screen._compositor_refresh = refresh  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        options = RunOptions(model=f"scripted:{script}", session=session_id, workspace=workspace,
                             cwd=workspace.parent, interactive=True, no_save=True)
        runner, opened = open_runner(options)
        opened_at = time.perf_counter()
        try:
            app = AmosApp(runner, opened, options=options)
            async with app.run_test(size=SIZE) as pilot:
                deadline = time.perf_counter() + 30
                while not painted and time.perf_counter() < deadline:
                    await pilot.pause(0.001)
                widgets = len(list(app.conversation.query("*")))
        finally:
            runner.close()
    finally:
        Screen._compositor_refresh = original  # type: ignore[method-assign]
    if not painted:
        raise SystemExit("the transcript was never painted")
    return (opened_at - start) * 1000, (painted[0] - opened_at) * 1000, widgets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000, help="messages in the session (default 2,000)")
    parser.add_argument("--runs", type=int, default=5, help="timed opens (default 5)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="amos-bench-open-"))
    os.environ["AMOS_HOME"] = str(folder / "home")
    try:
        session_id, script, workspace = build(folder, args.messages)
        asyncio.run(open_once(session_id, script, workspace))  # warm imports and the file cache
        runs = [asyncio.run(open_once(session_id, script, workspace)) for _ in range(args.runs)]
        runner_ms = statistics.median(r[0] for r in runs)
        paint_ms = statistics.median(r[1] for r in runs)
        total_ms = statistics.median(r[0] + r[1] for r in runs)
        print(f"session of {args.messages:,} messages, {SIZE[0]}×{SIZE[1]}, median of {args.runs} opens "
              f"({runs[0][2]} widgets mounted in the view)")
        print(f"open the runner (load the session)  {runner_ms:8.1f} ms")
        print(f"app start to first paint           {paint_ms:8.1f} ms")
        print(f"total                               {total_ms:8.1f} ms   (target under 1,000 ms)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
