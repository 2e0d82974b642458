"""Session durability figures: journal appends, and save and load of a long session.

Prints the median time, in milliseconds, of:

- one journal append per event, without fsync (what the runner does for every event:
  the event or message dumped to JSON and written with one ``write``; target under
  1 ms), for a mix of events and messages (tool results up to 8 KB), and the fsync the
  runner adds at each turn end, for comparison;
- a save of a 2,000-message session (``SessionStore.save``: JSON, temp file, fsync,
  rename, fsync of the folder; target under 150 ms);
- a load of it (``SessionStore.load``: parse, migrate, validate) with a journal of the
  same size beside it, as the runs that built it left it (every entry already in the
  snapshot, so the journal is read but nothing is replayed; target under 150 ms), and
  with 200 journal entries to replay.

The history is the realistic mixed one of ``context_budget.py`` (prompts, assistant
turns with text and tool calls, tool results from a few hundred bytes to 8 KB, some
projected, some non-ASCII text).

Usage: python benchmarks/sessions.py [--runs N] [--messages N] [--appends N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from context_budget import history  # the sibling benchmark's realistic history

from amos.events import StepStarted, ToolCallFinished, ToolCallStarted
from amos.journal import Journal
from amos.messages import Message
from amos.sessions import SessionStore, utc_now


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


def journal_entries(messages: list[Message]) -> list[tuple[str, dict]]:
    """What the runner journals while it builds ``messages``: each message, plus the
    step and tool events around them (kind, data before dumping)."""
    out: list[tuple[str, dict]] = []
    for index, message in enumerate(messages):
        if message.role == "assistant":
            out.append(("event", {"event": StepStarted(step=index % 20 + 1, max_steps=20)}))
        out.append(("message", {"index": index, "message": message}))
        for call in message.tool_calls:
            out.append(("event", {"event": ToolCallStarted(call_id=call.call_id, tool=call.tool_name,
                                                           summary=f"{call.tool_name} {call.arguments.get('path')}",
                                                           effect="read")}))
        for result in message.tool_results:
            out.append(("event", {"event": ToolCallFinished(call_id=result.call_id, tool=result.tool_name,
                                                            summary=result.tool_name, status="succeeded",
                                                            content=result.content)}))
    return out


def dumped(data: dict) -> dict:
    """The entry data as the runner passes it (models dumped to JSON-ready values; a
    finished call's content is left out, the message carries it)."""
    out = {}
    for key, value in data.items():
        exclude = {"content"} if isinstance(value, ToolCallFinished) else None
        out[key] = value.model_dump(mode="json", exclude=exclude) if hasattr(value, "model_dump") else value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per save/load figure (default 15)")
    parser.add_argument("--messages", type=int, default=2000, help="session length (default 2000)")
    parser.add_argument("--appends", type=int, default=3000, help="timed journal appends (default 3000)")
    args = parser.parse_args()
    messages = history(args.messages)
    entries = journal_entries(messages)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "sessions"
        store = SessionStore(root)

        # journal appends, one per event (dump + one write), no fsync
        path = Path(tmp) / "journal.jsonl"
        journal = Journal(path)
        samples, syncs = [], []
        for n in range(args.appends):
            kind, data = entries[n % len(entries)]
            start = time.perf_counter()
            journal.append(kind, utc_now(), **dumped(data))
            samples.append((time.perf_counter() - start) * 1000)
            if n % 10 == 9:  # a turn end
                start = time.perf_counter()
                journal.sync()
                syncs.append((time.perf_counter() - start) * 1000)
        journal.close()
        size = path.stat().st_size
        print(f"journal: {args.appends} appends, {size / 1e6:.1f} MB, {size / args.appends:,.0f} bytes per entry")
        print(f"journal append per event (no fsync): {statistics.median(samples):8.3f} ms median, "
              f"{sorted(samples)[int(len(samples) * 0.99)]:.3f} ms p99 (target under 1 ms)")
        print(f"journal fsync at a turn end:         {statistics.median(syncs):8.3f} ms median")

        # a 2,000-message session, saved with the journal its runs left beside it
        session = store.create()
        session.title = "benchmark"
        session.messages = list(messages)
        journal = store.journal(session)
        for kind, data in entries:
            journal.append(kind, utc_now(), **dumped(data))
        journal.sync()
        saved = store.save(session)
        print(f"session: {len(messages)} messages, session.json {saved.stat().st_size / 1e6:.1f} MB, "
              f"journal {store.journal_path(session.id).stat().st_size / 1e6:.1f} MB ({journal.seq} entries)")
        save = median_ms(lambda: store.save(session), args.runs)
        load = median_ms(lambda: SessionStore(root).load(session.id), args.runs)
        print(f"save of the session:                 {save:8.2f} ms median (target under 150 ms)")
        print(f"load, journal read, nothing to replay: {load:6.2f} ms median (target under 150 ms)")

        # 200 entries written after the snapshot (a run killed before its save): the last
        # messages written again, with the events around them
        for kind, data in entries[-200:]:
            journal.append(kind, utc_now(), **dumped(data))
        store.close_journal(session.id)
        replayed = median_ms(lambda: SessionStore(root).load(session.id), args.runs)
        print(f"load with 200 entries to replay:     {replayed:8.2f} ms median")


if __name__ == "__main__":
    main()
