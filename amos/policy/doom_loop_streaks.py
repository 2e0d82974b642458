"""Doom-loop per-tool streak bookkeeping (spec §4, §6).

Holds the bounds on a monitor's tool streaks and their persisted state
(:data:`MAX_TRACKED_TOOLS`, :data:`MAX_ROUND_WIDTH`, :data:`MAX_RESTORED_STREAK`), the
wording of tool-call verdict messages, the per-tool streak entry the monitor keeps, and
the sanitising of one saved entry on restore. Split out of :mod:`amos.policy.doom_loop`,
which re-exports the public names; deterministic and free of I/O.
"""

from __future__ import annotations

import math
from typing import Any

from amos.policy.doom_loop_config import _is_number

__all__ = ["MAX_RESTORED_STREAK", "MAX_ROUND_WIDTH", "MAX_TRACKED_TOOLS"]

MAX_TRACKED_TOOLS = 256
"""Most tool entries a monitor keeps; the least recently recorded tool is forgotten first."""

MAX_ROUND_WIDTH = 128
"""Most distinct calls of one tool whose per-call streaks are kept per round, and the
widest round set persisted (a wider set is saved as a single call with streak 1)."""

MAX_RESTORED_STREAK = 1_000_000
"""Upper clamp of a restored tool streak (spec §6)."""


def _round_summary(fingerprints: tuple[str, ...]) -> str:
    shown = "+".join(fp[:8] for fp in fingerprints[:3])
    more = len(fingerprints) - 3
    return f"{shown}+{more} more…" if more > 0 else f"{shown}…"


def _call_message(kind: str, tool: str, streak: int, fp: str, round_set: tuple[str, ...]) -> str:
    """The verdict message of a tool call, of one of three kinds (spec §4 "message").

    ``per_call`` when the call's own streak beats its round's or it is not a member of a
    declared round (undeclared calls included); ``round_set`` for a declared set of more
    than one call — the same text for every call of the round, so steer's exact-text
    dedupe queues it once; ``single_call`` otherwise.
    """
    tail = "Take a different approach, or explain why the repetition is needed."
    if kind == "round_set":
        return (
            f'Doom loop suspected: tool "{tool}" was called with the same set of '
            f"{len(round_set)} parallel calls in {streak} consecutive rounds (round "
            f"{_round_summary(round_set)}). Reissuing the same fan-out will not change the "
            f"results. {tail}"
        )
    if kind == "per_call":
        return (
            f'Doom loop suspected: this exact "{tool}" call (fingerprint {fp[:16]}…) has been '
            f"issued in {streak} consecutive rounds. Repeating it will not change its "
            f"result. {tail}"
        )
    return (
        f'Doom loop suspected: tool "{tool}" was called with identical arguments in {streak} '
        f"consecutive rounds (fingerprint {fp[:16]}…). Repeating the call will not change "
        f"the result. {tail}"
    )


class _ToolEntry:
    """One tool's streak bookkeeping (spec §4): persisted and run-local fields."""

    __slots__ = (
        "fingerprint",
        "streak",
        "set",
        "calls",
        "has_round",
        "round",
        "seen",
        "prior_set",
        "prior_streak",
        "prior_calls",
    )

    def __init__(
        self, fingerprint: str, streak: int, round_set: tuple[str, ...], calls: dict[str, int]
    ):
        self.fingerprint = fingerprint  # persisted
        self.streak = streak  # persisted: the round-set streak, score(set)
        self.set = round_set  # persisted when wider than one call
        self.calls = calls  # persisted: fp -> per-call streak for the last round
        self.has_round = False  # run-local from here on
        self.round: Any = None
        self.seen: set[str] = set()
        self.prior_set: tuple[str, ...] | None = None
        self.prior_streak = 0
        self.prior_calls: dict[str, int] = {}


def _valid_streak(raw: Any) -> bool:
    return (
        isinstance(raw, dict)
        and isinstance(raw.get("fingerprint"), str)
        and _is_number(raw.get("streak"))
    )


def _restore_entry(raw: Any) -> _ToolEntry | None:
    """One saved tool entry, sanitised per spec §6; None when it must be dropped."""
    if not _valid_streak(raw):
        return None
    fingerprint = raw["fingerprint"]
    streak = min(max(math.floor(raw["streak"]), 1), MAX_RESTORED_STREAK)
    fps = raw.get("round_fingerprints")
    if (
        isinstance(fps, list)
        and 1 < len(fps) <= MAX_ROUND_WIDTH
        and all(isinstance(fp, str) for fp in fps)
    ):
        round_set = tuple(sorted(fps))
    else:
        round_set = (fingerprint,)
    calls: dict[str, int] = {}
    raw_calls = raw.get("call_streaks")
    if isinstance(raw_calls, dict):
        for fp, count in raw_calls.items():
            if len(calls) >= MAX_ROUND_WIDTH:
                break
            if isinstance(fp, str) and _is_number(count) and count >= 1:
                calls[fp] = math.floor(count)
    if not calls:
        calls = dict.fromkeys(round_set, streak)
    return _ToolEntry(fingerprint, streak, round_set, calls)
