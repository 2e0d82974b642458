"""amos's own cost per streamed delta in the OpenAI Chat adapter, SDK parsing excluded.

Pre-built ``ChatCompletionChunk`` objects (what the SDK yields after parsing SSE) are
fed straight into ``ChatStreamAssembler``, doing what ``OpenAIChatProvider.stream``
does per chunk (``feed`` + a ``TextDeltaEvent`` for text). Prints the median
microseconds per text delta and per tool-argument delta, and the one-off cost of
assembling a turn's calls at the end (join + JSON decode + ``ToolCallPart``) spread
over its deltas. Target: under 20 µs median per delta.

Usage: python benchmarks/provider_deltas.py [--rounds N] [--deltas N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from openai.types.chat import ChatCompletionChunk

from amos.providers.base import TextDeltaEvent
from amos.providers.openai import ChatStreamAssembler

_BASE = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1762333440,
         "model": "gpt-4.1-mini-2025-04-14", "service_tier": "default", "system_fingerprint": "fp_bench"}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate(
        {**_BASE, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
         "usage": None, "obfuscation": "Zk"})


def text_chunks(n: int) -> list[ChatCompletionChunk]:
    """``n`` content deltas of a few words each."""
    return [_chunk({"content": f" token{i} and more"}) for i in range(n)]


def tool_chunks(n: int, calls: int = 2) -> list[ChatCompletionChunk]:
    """``calls`` parallel calls whose arguments arrive in ``n`` fragments in all."""
    out: list[ChatCompletionChunk] = []
    per_call = max(1, n // calls)
    for index in range(calls):
        out.append(_chunk({"tool_calls": [{"index": index, "id": f"call_bench{index}", "type": "function",
                                           "function": {"name": "write_file", "arguments": ""}}]}))
        out.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": '{"content":"'}}]}))
        for i in range(per_call - 2):
            out.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": f"line {i} \\n"}}]}))
        out.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": '","path":"a.txt"}'}}]}))
    return out


def per_text_delta_us(chunks: list[ChatCompletionChunk]) -> float:
    """Mean microseconds of one streamed text delta's handling over ``chunks``."""
    assembler = ChatStreamAssembler("openai")
    feed = assembler.feed
    start = time.perf_counter_ns()
    for chunk in chunks:
        text = feed(chunk)
        if text:
            TextDeltaEvent(text)
    return (time.perf_counter_ns() - start) / len(chunks) / 1000


def per_tool_delta_us(chunks: list[ChatCompletionChunk]) -> tuple[float, float]:
    """(feed µs per delta, end-of-turn assembly µs spread per delta) over ``chunks``."""
    assembler = ChatStreamAssembler("openai")
    feed = assembler.feed
    start = time.perf_counter_ns()
    for chunk in chunks:
        feed(chunk)
    fed = time.perf_counter_ns()
    events = assembler.finish()
    done = time.perf_counter_ns()
    assert len(events) == 3 and events[0].call.arguments is not None  # type: ignore[union-attr]
    return (fed - start) / len(chunks) / 1000, (done - fed) / len(chunks) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=51, help="measured rounds (default 51)")
    parser.add_argument("--deltas", type=int, default=2000, help="deltas per round (default 2000)")
    args = parser.parse_args()
    texts, tools = text_chunks(args.deltas), tool_chunks(args.deltas)
    per_text_delta_us(texts)  # warm up
    per_tool_delta_us(tools)
    text_us = [per_text_delta_us(texts) for _ in range(args.rounds)]
    tool_runs = [per_tool_delta_us(tools) for _ in range(args.rounds)]
    print(f"{'OpenAI Chat adapter, per delta':<40} {'median':>10}   ({args.rounds} rounds x {args.deltas} deltas,"
          " SDK parsing excluded)")
    print(f"{'text delta (feed + TextDeltaEvent)':<40} {statistics.median(text_us):>7.2f} µs")
    print(f"{'tool-args delta (feed)':<40} {statistics.median(r[0] for r in tool_runs):>7.2f} µs")
    print(f"{'tool-args end of turn, per delta':<40} {statistics.median(r[1] for r in tool_runs):>7.2f} µs")
    print("target: under 20 µs per delta")


if __name__ == "__main__":
    main()
