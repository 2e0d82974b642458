"""Streaming a long unclosed code fence into an assistant block (headless).

A 47 KB fence used to take minutes (every redraw re-rendered the whole fence with
syntax highlighting); target: well under 10 s for ~50 KB in 25-character deltas.
Run: python benchmarks/tui_fence.py
"""

from __future__ import annotations

import asyncio
import time

from textual.app import App, ComposeResult

from amos.tui.widgets.assistant import AssistantText


class _Bench(App):
    def compose(self) -> ComposeResult:
        yield AssistantText()


async def main() -> None:
    code = "```python\n" + "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(1500))
    app = _Bench()
    async with app.run_test(size=(120, 40)) as pilot:
        block = app.query_one(AssistantText)
        started = time.monotonic()
        for i in range(0, len(code), 25):
            await block.write(code[i:i + 25])
        await block.finish()
        await pilot.pause()
        elapsed = time.monotonic() - started
    print(f"unclosed fence, {len(code):,} characters in {len(code) // 25 + 1:,} deltas: {elapsed:.1f} s "
          "(target well under 10 s)")


if __name__ == "__main__":
    asyncio.run(main())
