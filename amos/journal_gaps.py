"""What replay does about lines of a journal that could not be read (issue 17 item 5).

A bad line in the middle of ``journal.jsonl`` used to end the read there, so a command
that really ran was forgotten and ``continue`` or ``resume`` ran it again. Now
:func:`amos.journal.read_journal` keeps reading past it and records a
:class:`JournalGap`; :func:`amos.journal.replay` then

- goes on with the valid entries after the gap: ``fields`` entries are whole values
  (the scripted provider's position, ``pending``), and ``message`` entries are applied in
  order, appended where the lost lines leave their index past the end (:class:`Aligner`);
- rebuilds the whole state from the next ``snapshot`` entry where there is one;
- gives every tool call left without a result a result saying its outcome was lost with
  the journal lines (:func:`close_lost_calls`): one that finished says so (and with which
  status), so it is never presented as "not run";
- drops held calls that already have a result from ``pending``
  (:func:`drop_answered_held`), so ``amos resume`` never runs a call a second time (also
  without a gap: a run killed after a held call ran and before its end leaves ``pending``
  as it was);
- and says what was lost, naming the line numbers (:func:`lost_warning`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JournalGap:
    """A run of unreadable lines in a journal.

    Attributes:
        first_line: its first line, 1-based.
        last_line: its last line, 1-based.
        next_seq: ``seq`` of the first readable entry after it; None when nothing
            readable follows (the gap runs to the end of the file).
    """

    first_line: int
    last_line: int
    next_seq: int | None

    @property
    def lines(self) -> str:
        """``"line 5"`` or ``"lines 5-7"``."""
        if self.first_line == self.last_line:
            return f"line {self.first_line}"
        return f"lines {self.first_line}-{self.last_line}"


def spans(gaps: list[JournalGap]) -> str:
    """``"line 5"`` / ``"lines 5-7 and 12"`` for messages."""
    parts = [g.lines.removeprefix("lines ").removeprefix("line ") for g in gaps]
    plural = len(gaps) > 1 or gaps[0].first_line != gaps[0].last_line
    joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"line{'s' if plural else ''} {joined}"


def describe(gaps: list[JournalGap]) -> str:
    """``"journal line 5 was"`` / ``"journal lines 5-7 and 12 were"`` for messages."""
    plural = len(gaps) > 1 or gaps[0].first_line != gaps[0].last_line
    return f"journal {spans(gaps)} {'were' if plural else 'was'}"


class Aligner:
    """Maps the ``index`` of ``message`` entries after a gap onto the history replayed.

    A lost ``message`` line leaves the next entries' indexes one past the end; they are
    appended in order instead (the history then misses only what was lost). A
    ``messages`` or ``snapshot`` entry realigns (``reset``).
    """

    def __init__(self) -> None:
        self.active = False
        self.shift = 0

    def reset(self) -> None:
        """The history is whole again (a ``messages`` or ``snapshot`` entry)."""
        self.active, self.shift = False, 0

    def target(self, index: int, length: int) -> int | None:
        """Where an entry with ``index`` goes in a history of ``length`` messages, or None
        when it replaces a message that was lost (nothing to apply)."""
        if not self.active:
            return index
        place = index - self.shift
        if place > length:
            self.shift += place - length
            place = length
        return place if place >= 0 else None


def _answered(messages: list[Any]) -> set[Any]:
    return {p.get("call_id") for m in messages if isinstance(m, dict) for p in m.get("parts") or []
            if isinstance(p, dict) and p.get("part_kind") == "tool_result"}


def _held(data: dict[str, Any]) -> set[Any]:
    pending = data.get("pending")
    if not isinstance(pending, dict):
        return set()
    return {(h.get("call") or {}).get("call_id") for h in pending.get("held") or [] if isinstance(h, dict)}


def close_lost_calls(data: dict[str, Any], gaps: list[JournalGap],
                     finished: dict[str, str]) -> list[str]:
    """Give each tool call without a result (and not held) one saying it was lost.

    Called after a replay that went past ``gaps`` with no later snapshot: the lost
    lines may have held these calls' results, so "not run" would be a lie and running
    them again a duplicated side effect. The result goes right after the call's turn.

    Args:
        data: the session JSON, replayed (modified in place).
        gaps: the gaps the replay went past.
        finished: ``{call_id: status}`` of ``tool_call_finished`` events seen after them.

    Returns:
        ``"tool (call_id)"`` names of the calls given a result, in history order.
    """
    messages = data.get("messages") if isinstance(data.get("messages"), list) else []
    skip = _answered(messages) | _held(data)
    where = spans(gaps)  # "lines 5-7"
    closed: list[str] = []
    position = 0
    while position < len(messages):
        message = messages[position]
        position += 1
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        calls = [p for p in message.get("parts") or [] if isinstance(p, dict) and p.get("part_kind") == "tool_call"
                 and p.get("call_id") not in skip]
        if not calls:
            continue
        while position < len(messages) and isinstance(messages[position], dict) \
                and messages[position].get("role") == "tool":
            position += 1
        for part in calls:
            call_id = part.get("call_id")
            status = finished.get(str(call_id))
            if status is not None:
                content = (f"this call finished ({status}) but its result was lost with {where} of the session "
                           "journal; check its effect before repeating it")
            else:
                content = (f"outcome unknown: {where} of the session journal could not be read and may have "
                           "held this call's result; whether it ran is unknown — check before repeating it")
                status = "cancelled"
            messages.insert(position, {"role": "tool", "kind": "result", "parts": [{
                "part_kind": "tool_result", "call_id": call_id, "tool_name": part.get("tool_name"),
                "content": content, "is_error": status != "succeeded", "status": status}]})
            position += 1
            skip.add(call_id)
            closed.append(f"{part.get('tool_name')} ({call_id})")
    return closed


def drop_answered_held(data: dict[str, Any]) -> list[str]:
    """Remove from ``pending`` every held call whose result is already in the history.

    Such a call ran (a resume approved it, then amos stopped before the run's end
    saved ``pending``); holding it again would let ``amos resume`` run it twice.

    Returns:
        Warnings naming the calls (empty when nothing changed).
    """
    pending = data.get("pending")
    if not isinstance(pending, dict) or not isinstance(pending.get("held"), list):
        return []
    answered = _answered(data.get("messages") if isinstance(data.get("messages"), list) else [])
    keep, ran = [], []
    for held in pending["held"]:
        call = held.get("call") if isinstance(held, dict) else None
        if isinstance(call, dict) and call.get("call_id") in answered:
            ran.append(f"{call.get('tool_name')} ({call.get('call_id')})")
        else:
            keep.append(held)
    if not ran:
        return []
    if keep:
        pending["held"] = keep
    else:
        data["pending"] = None
    return [f"session {data.get('id')}: held call {', '.join(ran)} already has a result in the history (it ran "
            "before amos stopped); it is no longer pending and will not run again"]


def lost_warning(data: dict[str, Any], gaps: list[JournalGap], *, healed_by: int | None,
                 replayed: int, closed: list[str]) -> str:
    """The one warning saying what a replay past ``gaps`` lost.

    Args:
        data: the replayed session JSON (for its id).
        gaps: every gap the replay went past, in file order.
        healed_by: ``seq`` of the snapshot entry the state was rebuilt from after the
            last gap, or None.
        replayed: readable entries applied after the first gap.
        closed: calls given a "result lost" result (:func:`close_lost_calls`).
    """
    head = f"session {data.get('id')}: {describe(gaps)} lost"
    if healed_by is not None:
        return f"{head}; the state was rebuilt from the snapshot entry {healed_by} written after it"
    what = "it" if describe(gaps).endswith(" was") else "them"
    text = (f"{head} (whatever message, field or event {what} held is missing); the {replayed} readable "
            f"entries after {what} were still replayed")
    if closed:
        text += (f"; calls whose result may have been in {what} were given a result saying so, never to be "
                 f"presented as not run: {', '.join(closed)}")
    return text
