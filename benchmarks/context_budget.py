"""Context budget figures: median time of ``measure_request`` on a 2,000-message history.

Prints the median time, in milliseconds, of:

- a cold measure (a new per-message size cache: every message is sized once);
- a warm measure (the same history again: one cache lookup per message; target under
  20 ms on the 2-core reference machine);
- a warm measure after one message was appended (what the runner does each step);
- for comparison, the previous estimate (``model_dump_json`` of every message).

The history is realistic and mixed: prompts, assistant turns with text and tool calls,
tool results from a few hundred bytes to 8 KB (some projected, a few protected), with
some non-ASCII text.

Usage: python benchmarks/context_budget.py [--runs N] [--messages N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from amos.context import MessageSizeCache, TokenEstimator, measure_request
from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart
from amos.tools.base import ToolSpec

WORDS = ("def return value import file test error line result self path config "
         "alpha beta gamma delta — café naïve 数据").split()


def words(rng: random.Random, n: int) -> str:
    """About ``n`` words of code-like text."""
    return " ".join(rng.choice(WORDS) for _ in range(n))


def history(count: int, seed: int = 7) -> list[Message]:
    """``count`` messages: user prompt, then assistant calls and tool results, repeated."""
    rng = random.Random(seed)
    out: list[Message] = []
    n = 0
    while len(out) < count:
        if n % 12 == 0:
            out.append(Message.user(words(rng, rng.randint(10, 80))))
        calls = tuple(
            ToolCallPart(call_id=f"call_{n}_{i}", tool_name=rng.choice(("read_file", "run_command", "edit_file")),
                         arguments={"path": f"src/module_{rng.randint(0, 99)}.py", "offset": 1, "limit": 200,
                                    "note": words(rng, rng.randint(0, 20))})
            for i in range(rng.choice((1, 1, 2)))
        )
        out.append(Message(role="assistant", kind="turn",
                           parts=(TextPart(text=words(rng, rng.randint(5, 60))), *calls)))
        for call in calls:
            size = rng.choice((300, 1200, 4000, 8000))
            roll = rng.random()
            projected = roll < 0.15
            content = (f"[projected result — stored as evidence ev-{n}] {words(rng, 60)}" if projected
                       else words(rng, size // 6))
            out.append(Message.tool_result(ToolResultPart(
                call_id=call.call_id, tool_name=call.tool_name, content=content,
                evidence_id=f"ev-{n}" if roll < 0.9 else None,
                evidence={"version": 1, "id": f"ev-{n}", "sha256": "0" * 64, "size": size} if roll < 0.9 else None,
                evidence_error="disk full" if roll >= 0.97 else None, projected=projected)))
        n += 1
    return out[:count]


TOOLS = [
    ToolSpec(name=name, description=f"{name}: " + "does one thing carefully. " * 8,
             parameters={"type": "object", "properties": {"path": {"type": "string", "description": "a path"},
                                                          "offset": {"type": "integer"},
                                                          "limit": {"type": "integer"}},
                         "required": ["path"]})
    for name in ("read_file", "list_dir", "search_text", "write_file", "edit_file", "run_command",
                 "evidence_list", "evidence_read")
]
SYSTEM = "You are amos, a careful software agent. " * 40
TASK_VIEW = "# Task notes\n" + "- note: keep the public API stable\n" * 30


def median_ms(run: Callable[[], object], runs: int, setup: Callable[[], object] | None = None) -> float:
    """Median over ``runs`` timed calls of ``run`` (``setup`` runs untimed before each)."""
    samples = []
    for _ in range(runs):
        if setup is not None:
            setup()
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per figure (default 15)")
    parser.add_argument("--messages", type=int, default=2000, help="history length (default 2000)")
    args = parser.parse_args()
    messages = history(args.messages)
    estimator = TokenEstimator()
    sizes = MessageSizeCache()

    def measure() -> object:
        return measure_request(SYSTEM, TASK_VIEW, TOOLS, messages, estimator, sizes=sizes)

    budget = measure()
    chars = sum(len(m.model_dump_json()) for m in messages)
    print(f"history: {len(messages)} messages, {chars / 1e6:.1f} MB as JSON, "
          f"~{budget.total:,} tokens estimated ({budget.protected:,} protected)")  # type: ignore[attr-defined]
    cold = median_ms(measure, args.runs, setup=sizes.clear)
    warm = median_ms(measure, args.runs)
    grown = list(messages)

    def append_one() -> None:
        grown.append(Message.user("one more prompt"))

    appended = median_ms(lambda: measure_request(SYSTEM, TASK_VIEW, TOOLS, grown, estimator, sizes=sizes),
                         args.runs, setup=append_one)
    old = median_ms(lambda: sum(len(m.model_dump_json()) for m in messages), args.runs)
    print(f"measure_request cold (new cache):    {cold:8.2f} ms median")
    print(f"measure_request warm (same history): {warm:8.2f} ms median (target under 20 ms)")
    print(f"measure_request warm (+1 message):   {appended:8.2f} ms median")
    print(f"previous estimate (model_dump_json): {old:8.2f} ms median")


if __name__ == "__main__":
    main()
