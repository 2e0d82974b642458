"""The session journal: an append-only ``journal.jsonl`` written as things happen.

``session.json`` is the fast snapshot; the journal is what makes a session lose nothing
between two snapshots (issue "Sessions that never lose work", DESIGN.md "Storage").
Every line is one JSON object ``{"seq", "at", "kind", ...}``; ``seq`` counts from 1 and
never repeats. The snapshot records the ``journal_seq`` it reflects, so on load the
entries after it are replayed (:func:`replay`).

Kinds that change state when replayed:

- ``message``: ``{"index", "message"}`` — sets ``messages[index]`` (or appends when
  ``index == len(messages)``).
- ``messages``: ``{"messages"}`` — the whole history replaced (compaction).
- ``fields``: ``{"fields": {...}}`` — top-level session fields set (title, name,
  task_state, last_stop, loop, usage, pending, doom_loop, evidence_recent…).
- ``snapshot``: ``{"session"}`` — the whole session (the first entry of a journal, and
  a restored checkpoint), so the journal alone can rebuild the session.

Every other kind (``event``, ``approval``, ``checkpoint``, ``restore``, ``note``) is a
record for people and exports; replaying it changes nothing, except that a ``checkpoint``
entry (``{"number", "reason", "label"}``) advances ``last_checkpoint`` (a checkpoint is
taken just after a save, so the snapshot names the one before it).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amos import safe_read
from amos.errors import SessionError
from amos.journal_gaps import (
    Aligner,
    JournalGap,
    close_lost_calls,
    drop_answered_held,
    lost_warning,
)

REPLAYED_FIELDS = frozenset({
    "title", "name", "host", "provider_state", "usage", "loop", "last_stop", "pending", "doom_loop",
    "evidence_scope", "evidence_recent", "task_state", "model_calls", "estimator", "file_history",
})
"""Session fields a ``fields`` entry may set (anything else is ignored with a warning)."""


@dataclass
class JournalRead:
    """What :func:`read_journal` found.

    Attributes:
        entries: parsed entries in file order (every readable one after ``after_seq``).
        last_seq: ``seq`` of the last readable entry (0 when none).
        warnings: one line per problem (torn last line, unreadable lines).
        good_bytes: end of the last readable line, bytes (a writer truncates a torn
            tail to this before appending; a journal with gaps is set aside instead).
        total_bytes: file size, bytes.
    """

    entries: list[dict[str, Any]] = field(default_factory=list)
    last_seq: int = 0
    warnings: list[str] = field(default_factory=list)
    good_bytes: int = 0
    total_bytes: int = 0
    torn_tail: bool = False
    """True when the read stopped only at an incomplete last line (safe to cut)."""
    max_seq: int = 0
    """Highest ``seq`` found anywhere in the file, readable or not (a new journal must
    continue above it)."""
    gaps: list[JournalGap] = field(default_factory=list)
    """Runs of unreadable lines between (or after) readable entries, in file order; the
    entries after a gap are still in :attr:`entries`."""


def _lines(data: bytes) -> Iterator[tuple[int, bytes, bool]]:
    """``(end offset, line, complete)`` for each line of ``data``."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        if end < 0:
            yield len(data), data[start:], False
            return
        yield end + 1, data[start:end], True
        start = end + 1


_SEQ_PREFIX = re.compile(rb'\{"seq":(\d+),')
"""How :class:`Journal` starts every line (compact JSON, ``seq`` first)."""


MAX_SESSION_FILE_BYTES = 1024 * 1024 * 1024
"""Largest ``session.json``, journal or checkpoint read, bytes (a bound, not a budget:
histories with large tool results are big, but never this big)."""


def read_regular(path: Path) -> bytes:
    """The bytes of a session file through the one safe reader (:mod:`amos.safe_read`):
    a FIFO or device is refused at once, never waited on; over
    :data:`MAX_SESSION_FILE_BYTES` is refused.

    Raises:
        FileNotFoundError: missing. OSError: unreadable or not a regular file
            (``strerror`` says which).
    """
    return safe_read.read_regular(path, max_bytes=MAX_SESSION_FILE_BYTES)


def read_journal(path: Path, *, after_seq: int = 0) -> JournalRead:
    """Read a journal: every readable entry, with the unreadable lines between them as gaps.

    A last line without its newline (a crash mid-append) is ignored with a warning. An
    unreadable line elsewhere (not JSON, not an entry, a ``seq`` that does not increase)
    is recorded as a :class:`~amos.journal_gaps.JournalGap` with a warning naming its
    line number, and the read goes on: the valid entries after it still say which calls
    ran and what they returned (issue 17 item 5), and :func:`replay` decides what they
    can rebuild. Lines up to ``after_seq`` (already in the snapshot) are only checked for
    a complete line with an increasing ``seq``, not parsed, so loading a session costs
    the entries after its snapshot, not its whole history.

    Args:
        path: ``journal.jsonl``; a missing file reads as empty.
        after_seq: keep only entries with ``seq`` greater than this.

    Raises:
        SessionError: ``corrupt`` when the file exists but cannot be read at all.
    """
    result = JournalRead()
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return result
    except OSError as exc:
        raise SessionError("corrupt", f"{path}: cannot read the journal: {exc.strerror or exc}") from None
    result.total_bytes = len(data)
    line_no = 0
    bad: tuple[int, str] | None = None  # (first line, why) of the gap being read
    for end, line, complete in _lines(data):
        line_no += 1
        if complete and after_seq and line.endswith(b"}"):
            match = _SEQ_PREFIX.match(line)
            if match and result.last_seq < int(match.group(1)) <= after_seq:
                if bad is not None:
                    _close_gap(result, path, bad, line_no - 1, int(match.group(1)), after_seq)
                    bad = None
                result.last_seq, result.good_bytes = int(match.group(1)), end
                continue
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict) or not isinstance(entry.get("seq"), int) or entry["seq"] <= result.last_seq:
                raise ValueError("not a journal entry with an increasing seq")
        except (ValueError, RecursionError) as exc:
            if not complete:
                result.warnings.append(f"{path}: its last line is incomplete (a write was cut short); ignored it")
                result.torn_tail = True
                break
            if bad is None:
                bad = (line_no, str(exc)[:80])
            continue
        if not complete:
            result.warnings.append(f"{path}: its last line has no newline (a write was cut short); ignored it")
            result.torn_tail = True
            break
        if bad is not None:
            _close_gap(result, path, bad, line_no - 1, entry["seq"], after_seq)
            bad = None
        result.last_seq = entry["seq"]
        result.good_bytes = end
        if entry["seq"] > after_seq:
            result.entries.append(entry)
    if bad is not None:
        _close_gap(result, path, bad, line_no - 1 if result.torn_tail else line_no, None, after_seq)
    result.max_seq = result.last_seq
    if result.gaps:  # an unreadable line may still name a seq: never reuse it (a torn tail's is free)
        complete_end = data.rfind(b"\n") + 1 if result.torn_tail else len(data)
        result.max_seq = max(result.last_seq, _highest_seq(data[:complete_end]))
    return result


def _close_gap(result: JournalRead, path: Path, bad: tuple[int, str], last_line: int,
               next_seq: int | None, after_seq: int) -> None:
    gap = JournalGap(bad[0], last_line, next_seq)
    result.gaps.append(gap)
    verb = "is" if gap.first_line == gap.last_line else "are"
    if next_seq is None:
        after = "nothing readable follows"
    elif next_seq <= after_seq:
        after = "the session's snapshot already holds what followed"
    else:
        after = "the readable entries after it are still used"
    result.warnings.append(f"{path}: {gap.lines} {verb} unreadable ({bad[1]}); {after}")


def _highest_seq(rest: bytes) -> int:
    """The highest ``seq`` written at the start of any line of ``rest`` (lenient)."""
    return max((int(m.group(1)) for m in re.finditer(rb'(?m)^\{"seq":(\d{1,18}),', rest)), default=0)


def replay(data: dict[str, Any], entries: list[dict[str, Any]], *,
           live: bool = False, gaps: list[JournalGap] | tuple[JournalGap, ...] = ()) -> tuple[int, list[str]]:
    """Apply journal entries to a session's JSON data in place.

    After a gap (unreadable lines, :attr:`JournalRead.gaps`) the entries that follow are
    still applied (issue 17 item 5, :mod:`amos.journal_gaps`): ``message`` entries whose
    index the lost lines left past the end are appended in order, the next ``snapshot``
    entry rebuilds the whole state, every call left without a result is given one saying
    its outcome was lost with those lines (never "not run"), and one warning names the
    lost lines. Held calls that already have a result are dropped from ``pending``
    whether or not there was a gap, so a resume never runs them twice.

    Args:
        data: the session as a JSON object (``session.json`` parsed); ``journal_seq``
            is advanced to the last entry applied.
        entries: entries after the snapshot's ``journal_seq``, in order.
        live: another process is running the session now: a journal that ends inside
            a run is that run, not an interrupted one (and its open calls are its own).
        gaps: the journal's gaps; those whose ``next_seq`` is not among ``entries``
            (already in the snapshot) are ignored, except a gap that runs to the end.

    Returns:
        ``(state-changing entries applied, warnings)``; records for people advance
        ``journal_seq`` without counting. Without a gap, replay stops at the first entry
        that does not fit (a message index past the end), with a warning.
    """
    applied = 0
    warnings: list[str] = []
    messages = data.setdefault("messages", [])
    starts = {g.next_seq: g for g in gaps if g.next_seq is not None}
    passed: list[JournalGap] = []  # gaps this replay went past, in order
    healed_by: int | None = None
    after_gap = 0
    finished: dict[str, str] = {}
    align = Aligner()
    for entry in entries:
        kind = entry.get("kind")
        if entry["seq"] in starts:
            passed.append(starts[entry["seq"]])
            align.active, healed_by = True, None
        if passed:
            after_gap += 1
        if kind == "message":
            index, message = entry.get("index"), entry.get("message")
            if isinstance(index, int) and isinstance(message, dict) and align.active:
                index = align.target(index, len(messages))
                if index is None:  # it replaced a message the gap lost
                    data["journal_seq"] = entry["seq"]
                    continue
            if not isinstance(index, int) or not isinstance(message, dict) or not 0 <= index <= len(messages):
                warnings.append(f"journal entry {entry['seq']} does not fit the history "
                                f"({len(messages)} messages); replay stopped there")
                break
            if index == len(messages):
                messages.append(message)
            else:
                messages[index] = message
        elif kind == "messages":
            if not isinstance(entry.get("messages"), list):
                warnings.append(f"journal entry {entry['seq']} has no message list; replay stopped there")
                break
            messages[:] = entry["messages"]
            align.reset()
        elif kind == "snapshot":
            whole = entry.get("session")
            if not isinstance(whole, dict) or whole.get("id", data.get("id")) != data.get("id", whole.get("id")):
                warnings.append(f"journal entry {entry['seq']} is not a snapshot of this session; replay stopped there")
                break
            data.clear()
            data.update(whole)
            messages = data.setdefault("messages", [])
            align.reset()
            finished.clear()
            if passed:
                healed_by = entry["seq"]
        elif kind == "fields":
            for name, value in (entry.get("fields") or {}).items():
                if name in REPLAYED_FIELDS:
                    data[name] = value
                else:
                    warnings.append(f"journal entry {entry['seq']}: field {name!r} is not replayed")
        elif kind == "checkpoint" and isinstance(entry.get("number"), int):
            data["last_checkpoint"] = max(int(data.get("last_checkpoint") or 0), entry["number"])
        elif kind == "model_call" and isinstance(entry.get("row"), dict):
            _add_call(data, entry["row"])
        elif kind == "event" and isinstance(entry.get("event"), dict):
            _track_run(data, entry["event"])
            if entry["event"].get("event_kind") == "tool_call_finished" and passed:
                finished[str(entry["event"].get("call_id"))] = str(entry["event"].get("status"))
        data["journal_seq"] = entry["seq"]
        applied += kind in ("message", "messages", "snapshot", "fields", "model_call")
    passed.extend(g for g in gaps if g.next_seq is None)  # lines lost at the very end
    if passed and (healed_by is None or passed[-1].next_seq is None):
        healed_by = None
    closed = close_lost_calls(data, passed, finished) if passed and healed_by is None and not live else []
    if passed:
        warnings.append(lost_warning(data, passed, healed_by=healed_by, replayed=after_gap, closed=closed))
    warnings.extend(drop_answered_held(data))
    interrupted = data.pop("_running", None)
    if interrupted is not None and not live:
        warnings.extend(close_interrupted(data, interrupted))
    return applied, warnings


MAX_MODEL_CALL_ROWS = 1000
"""Per-call usage rows a session keeps (oldest dropped first)."""

_USAGE_KEYS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")


def _add_call(data: dict[str, Any], row: dict[str, Any]) -> None:
    """A ``model_call`` entry: keep its usage row and add it to the session's usage (the
    run's closing ``fields`` entry sets the exact totals; this covers a killed run)."""
    rows = data.get("model_calls") if isinstance(data.get("model_calls"), list) else []
    data["model_calls"] = [*rows, row][-MAX_MODEL_CALL_ROWS:]
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    usage = dict(usage)
    for key in _USAGE_KEYS:
        value = row.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            usage[key] = int(usage.get(key) or 0) + value
    usage["model_calls"] = int(usage.get("model_calls") or 0) + 1
    cost = row.get("cost_usd")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        usage["cost_usd"] = float(usage.get("cost_usd") or 0.0) + float(cost)
    data["usage"] = usage


def _track_run(data: dict[str, Any], event: dict[str, Any]) -> None:
    """Follow run events to know whether the journal ends inside a run (amos killed)."""
    kind = event.get("event_kind")
    if kind == "run_started":
        data["_running"] = {"execution_id": event.get("execution_id"), "open": {}}
    elif kind == "run_finished":
        data.pop("_running", None)
    elif "_running" in data and kind == "tool_call_started":
        data["_running"]["open"][str(event.get("call_id"))] = str(event.get("tool"))
    elif "_running" in data and kind == "tool_call_finished":
        data["_running"]["open"].pop(str(event.get("call_id")), None)


INTERRUPTED_RESULT = ("interrupted: amos stopped (killed or crashed) while this call was running; whether it "
                      "took effect is unknown — check before repeating it")
"""Tool-result text recorded for a call that was running when amos was killed."""


def close_interrupted(data: dict[str, Any], running: dict[str, Any]) -> list[str]:
    """Record that the journal ends inside a run: every tool call of the history left
    without a result gets one saying its outcome is unknown (so a next request never
    presents it as 'not run').

    Returns:
        Warnings for people naming the interrupted run and its calls.
    """
    messages = data.get("messages") if isinstance(data.get("messages"), list) else []
    answered = {p.get("call_id") for m in messages if isinstance(m, dict) for p in m.get("parts") or []
                if isinstance(p, dict) and p.get("part_kind") == "tool_result"}
    held = set()
    if isinstance(data.get("pending"), dict):
        held = {h.get("call", {}).get("call_id") for h in data["pending"].get("held") or [] if isinstance(h, dict)}
    closed = []
    for message in list(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for part in message.get("parts") or []:
            if not isinstance(part, dict) or part.get("part_kind") != "tool_call":
                continue
            call_id = part.get("call_id")
            if call_id in answered or call_id in held:
                continue
            running_now = call_id in (running.get("open") or {})
            messages.append({"role": "tool", "kind": "result", "parts": [{
                "part_kind": "tool_result", "call_id": call_id, "tool_name": part.get("tool_name"),
                "content": INTERRUPTED_RESULT if running_now else
                "not run: amos stopped (killed or crashed) before this call started",
                "is_error": True, "status": "cancelled" if running_now else "not_started"}]})
            answered.add(call_id)
            closed.append(f"{part.get('tool_name')} ({call_id})" + (" was running" if running_now else " had not started"))
    where = f"; {', '.join(closed)} — its outcome is recorded as unknown" if closed else ""
    return [f"session {data.get('id')}: its last run was interrupted (amos was killed or crashed){where}"]


def run_receipts(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stop receipts of the runs in the history the journal ends with, oldest first.

    Each ``run_finished`` event adds its receipt. A ``snapshot`` entry after the first
    (a restored checkpoint) rewinds the list to the runs that history holds: up to and
    including the run of its ``last_stop`` (none when it has no ``last_stop``), so the
    receipts of runs a restore undid are left out.

    Args:
        entries: journal entries in order (:func:`read_journal`).

    Returns:
        Receipts as JSON objects (the caller validates them).
    """
    receipts: list[dict[str, Any]] = []
    for entry in entries:
        kind = entry.get("kind")
        if kind == "event":
            event = entry.get("event")
            if isinstance(event, dict) and event.get("event_kind") == "run_finished" \
                    and isinstance(event.get("receipt"), dict):
                receipts.append(event["receipt"])
        elif kind == "snapshot" and receipts:
            last = (entry.get("session") or {}).get("last_stop") if isinstance(entry.get("session"), dict) else None
            last_id = last.get("execution_id") if isinstance(last, dict) else None
            ids = [r.get("execution_id") for r in receipts]
            receipts = receipts[:len(ids) - ids[::-1].index(last_id)] if last_id in ids else []
    return receipts


def tail_seq(path: Path, window: int = 65536) -> int:
    """``seq`` of the last complete entry, reading only the file's tail (0 when none).

    Cheap enough for ``amos sessions list`` to tell whether a journal is ahead of its
    snapshot without reading it all.
    """
    try:
        fd, info = safe_read.open_regular(path)  # a FIFO in its place must not hang the listing
    except OSError:
        return 0
    try:
        size = info.st_size
        tail = os.pread(fd, min(size, window), max(0, size - window))
    except OSError:
        return 0
    finally:
        os.close(fd)
    # The piece after the last newline is empty or a torn line; a piece before the
    # first newline may be cut when the window starts mid-file.
    for line in reversed(tail.split(b"\n")[1 if size > window else 0:-1]):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("seq"), int):
            return entry["seq"]
    return 0


class Journal:
    """Appends entries to one session's ``journal.jsonl``.

    Each entry is written with one ``write`` call on a file opened ``O_APPEND`` (so it
    reaches the OS at once); :meth:`sync` fsyncs. An append that fails (a full disk) is
    cut back to the last complete entry before anything else is appended, so a partial
    line never hides the entries after it. Not thread-safe: the runner appends from the
    event loop only.

    Args:
        path: the journal file (created 0600).
        last_seq: ``seq`` of the last entry already in the file.
        good_bytes: length of its readable prefix; a longer file (a torn tail) is
            truncated to it before the first append.
    """

    def __init__(self, path: Path, *, last_seq: int = 0, good_bytes: int | None = None):
        self.path = Path(path)
        self.seq = last_seq
        self._good_bytes = good_bytes
        self._fd: int | None = None
        self._end = 0  # bytes of complete entries in the file
        self._torn = False  # a failed append left part of a line that could not be cut off yet
        self.unsynced = False

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # O_NONBLOCK: a FIFO put in its place fails at once (ENXIO) instead of waiting for a reader
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK, 0o600)
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise OSError(errno.EINVAL, "not a regular file")
                size = info.st_size
                if self._good_bytes is not None and size > self._good_bytes:
                    os.ftruncate(fd, self._good_bytes)
                    size = self._good_bytes
            except OSError:
                os.close(fd)
                raise
            self._fd, self._end = fd, size
        return self._fd

    def _cut_back(self) -> None:
        """Remove whatever a failed append left after the last complete entry, so a later
        append never follows a partial line (a reader stops at the first bad line)."""
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, self._end)
            self._torn = False
        except OSError:
            self._torn = True

    def write_line(self, line: bytes) -> None:
        """Write one complete line (the store's seam for simulated write errors).

        Raises:
            OSError: the write failed.
        """
        fd = self._open()
        view = memoryview(line)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def append(self, kind: str, at: str, **data: Any) -> int:
        """Append one entry and return its ``seq``.

        Raises:
            SessionError: ``write_failed`` naming the file (the entry is not counted).
        """
        seq = self.seq + 1
        entry = {"seq": seq, "at": at, "kind": kind, **data}
        try:
            line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str).encode() + b"\n"
        except UnicodeEncodeError:  # a lone surrogate: escaped JSON still round-trips
            line = json.dumps(entry, separators=(",", ":"), default=str).encode() + b"\n"
        try:
            if self._torn:
                os.ftruncate(self._open(), self._end)
                self._torn = False
            self.write_line(line)
        except OSError as exc:
            self._cut_back()
            raise SessionError("write_failed", f"cannot append to the session journal {self.path}: "
                               f"{exc.strerror or exc}", exit_code=1) from None
        self._end += len(line)
        self.seq = seq
        self.unsynced = True
        return seq

    def sync(self) -> None:
        """fsync what was appended (a no-op when nothing is pending).

        Raises:
            SessionError: ``write_failed``.
        """
        if self._fd is None or not self.unsynced:
            return
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise SessionError("write_failed", f"cannot flush the session journal {self.path}: "
                               f"{exc.strerror or exc}", exit_code=1) from None
        self.unsynced = False

    def close(self) -> None:
        """Close the file (after a best-effort fsync)."""
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError:
                pass
            os.close(self._fd)
            self._fd = None
