"""Doom-loop detection: a pure, synchronous port of the reference detector.

A doom loop is a run that keeps spending without making progress: the model re-issues
the same tool call (or the same fan-out of calls, or the same malformed call) round after
round, or emits the same text over and over. This module holds the verdict and call-record
types and :class:`DoomLoopMonitor`, which turns the recorded calls and texts into verdicts
on a configurable ladder (observe → steer → escalate → block → stop), following
spec/doom-loop-behaviour.md. Config and ladder (§1, §2) live in
:mod:`amos.policy.doom_loop_config`, per-tool streak bookkeeping (§4, §6) in
:mod:`amos.policy.doom_loop_streaks`, ``loop_key`` resolution (§7) in
:mod:`amos.policy.doom_loop_keys`, text rules (§5) in :mod:`amos.policy.doom_loop_text`,
and fingerprints (§3) in :mod:`amos.policy.canonical`; this module re-exports their public
API (see ``__all__``). Background: seeds/doom-loop-detection.d.ts.txt.

Everything here is deterministic (no clocks, no randomness) and free of I/O: the runner
owns hooks, notices, steering, blocking, stopping, and the ``stop_verdict`` and
``pending_steer`` it persists next to :meth:`DoomLoopMonitor.get_state` (spec §8). No
internal error fails a run: the only exception a monitor method lets out is the
documented :class:`~amos.policy.canonical.CanonicalizationError` from
:meth:`DoomLoopMonitor.record_tool_call` for unhashable key material, which the runner
answers by retrying with the full arguments and then skipping detection (spec §8).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from amos.policy.canonical import (
    CanonicalizationError,
    fingerprint_key_material,
    fingerprint_tool_call,
)
from amos.policy.doom_loop_config import (
    DEFAULT_DOOM_LOOP_LADDER,
    DEFAULT_MAX_ESCALATIONS,
    RUNGS,
    DoomLoopAction,
    DoomLoopLadder,
    ResolvedDoomLoop,
    ResolvedEscalation,
    Threshold,
    _enabled_rungs,
    _first_reached,
    _is_number,
    resolve_doom_loop_option,
    resolve_ladder_action,
    text_rungs,
)
from amos.policy.doom_loop_keys import LoopKeyResolution, resolve_loop_key_material
from amos.policy.doom_loop_streaks import (
    MAX_RESTORED_STREAK,
    MAX_ROUND_WIDTH,
    MAX_TRACKED_TOOLS,
    _call_message,
    _restore_entry,
    _ToolEntry,
    _valid_streak,
)
from amos.policy.doom_loop_text import (
    DEFAULT_TEXT_OPTIONS,
    DoomLoopTextOptions,
    TextRepetition,
    detect_text_repetition,
    normalize_text,
)

__all__ = [
    "DEFAULT_DOOM_LOOP_LADDER",
    "DEFAULT_MAX_ESCALATIONS",
    "DEFAULT_TEXT_OPTIONS",
    "MAX_RESTORED_STREAK",
    "MAX_ROUND_WIDTH",
    "MAX_TRACKED_TOOLS",
    "MAX_WARNINGS",
    "RUNGS",
    "CanonicalizationError",
    "DoomLoopAction",
    "DoomLoopCallRecord",
    "DoomLoopDetector",
    "DoomLoopLadder",
    "DoomLoopMonitor",
    "DoomLoopTextOptions",
    "DoomLoopVerdict",
    "LoopKeyResolution",
    "ResolvedDoomLoop",
    "ResolvedEscalation",
    "TextRepetition",
    "Threshold",
    "detect_text_repetition",
    "resolve_doom_loop_option",
    "resolve_ladder_action",
    "resolve_loop_key_material",
    "text_rungs",
]

DoomLoopDetector = Literal[
    "tool-fingerprint", "server-tool-fingerprint", "text-repetition", "text-streak"
]
"""Which detector produced a verdict."""

MAX_WARNINGS = 100
"""Most warnings :attr:`DoomLoopMonitor.warnings` holds; the oldest are dropped first."""


# --------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class DoomLoopVerdict:
    """One doom-loop detection (seed ``DoomLoopVerdict``).

    Attributes:
        detector: ``tool-fingerprint``, ``server-tool-fingerprint``, ``text-repetition``
            or ``text-streak``.
        action: The ladder action (``observe``/``steer``/``escalate``/``block``/``stop``).
        streak: The count that reached the rung: consecutive rounds for tool verdicts
            (the larger of the round-set and per-call streaks, spec §4.6), repeats within
            one response for text-repetition, consecutive identical turns for
            text-streak.
        fingerprint: 64 hex digits: the call's fingerprint, the bare hash of the repeated
            block, or of the normalised text.
        tool_name: The tool, for tool verdicts; None for text verdicts.
        message: Explanation for the model and the operator; the runner uses it verbatim
            as the block error and the steer message. Every call of one repeating
            fan-out gets the same message, so steer's exact-text dedupe queues it once.
    """

    detector: str
    action: str
    streak: int
    fingerprint: str
    tool_name: str | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data with snake_case keys (``tool_name`` only for tool verdicts)."""
        data: dict[str, Any] = {
            "detector": self.detector,
            "action": self.action,
            "streak": self.streak,
            "fingerprint": self.fingerprint,
        }
        if self.tool_name is not None:
            data["tool_name"] = self.tool_name
        data["message"] = self.message
        return data

    @classmethod
    def from_dict(cls, data: Any) -> DoomLoopVerdict | None:
        """Read :meth:`to_dict` output back (e.g. a saved ``stop_verdict``).

        Returns:
            The verdict, or None when ``data`` is not a valid verdict.
        """
        if not isinstance(data, Mapping):
            return None
        detector, action, streak = data.get("detector"), data.get("action"), data.get("streak")
        fingerprint, message, tool_name = (
            data.get("fingerprint"),
            data.get("message"),
            data.get("tool_name"),
        )
        if (
            detector not in DoomLoopDetector.__args__
            or action not in RUNGS
            or not _is_number(streak)
            or not isinstance(fingerprint, str)
            or not isinstance(message, str)
            or not (tool_name is None or isinstance(tool_name, str))
        ):
            return None
        return cls(detector, action, streak, fingerprint, tool_name, message)


@dataclass(frozen=True)
class DoomLoopCallRecord:
    """The outcome of :meth:`DoomLoopMonitor.record_tool_call` (seed ``DoomLoopCallRecord``).

    Attributes:
        fingerprint: The call's fingerprint (64 hex digits).
        streak: The call's streak (max of round-set and per-call streaks, spec §4.6).
        duplicate_in_round: The same ``(tool, fingerprint)`` was already recorded in this
            round: nothing was incremented, and the caller should reuse the decision it
            applied to the first occurrence rather than act (or notify) again.
        verdict: The verdict, or None below every enabled rung.
    """

    fingerprint: str
    streak: int
    duplicate_in_round: bool
    verdict: DoomLoopVerdict | None = None


_STRENGTH = {action: index for index, action in enumerate(RUNGS)}


# --------------------------------------------------------------------------- monitor (§4–§6)


class DoomLoopMonitor:
    """Pure state machine over the recorded transcript (seed ``DoomLoopMonitor``).

    Feed it tool calls and assistant texts; get streaks and verdicts back. It holds no
    engine concerns and does no I/O. Its state is bounded plain JSON (see
    :meth:`get_state`): at most :data:`MAX_TRACKED_TOOLS` tools, each with at most
    :data:`MAX_ROUND_WIDTH` per-call streaks, plus one text streak.

    Attributes:
        config: The resolved configuration.
        warnings: Informational warnings collected so far (config warnings when the
            monitor resolved a raw option itself, skipped unhashable declarations,
            ignored saved state); at most :data:`MAX_WARNINGS`, oldest dropped first.
            :meth:`take_warnings` drains them.
    """

    def __init__(self, config: ResolvedDoomLoop | Any, initial_state: Any = None) -> None:
        """Create a monitor.

        Args:
            config: A :class:`ResolvedDoomLoop`, or a raw option that
                :func:`resolve_doom_loop_option` accepts (its warnings are collected).
            initial_state: A saved :meth:`get_state` blob to :meth:`restore`; None for a
                fresh monitor.

        Raises:
            ValueError: ``config`` resolves to "detection off" (None or False).
        """
        self.warnings: list[str] = []
        if not isinstance(config, ResolvedDoomLoop):
            resolved = resolve_doom_loop_option(config)
            if resolved is None:
                raise ValueError("doom-loop detection is off for this option; no monitor needed")
            for warning in resolved.warnings:
                self._warn(warning)
            config = resolved
        self.config: ResolvedDoomLoop = config
        self._rungs = _enabled_rungs(config.ladder)
        self._text_rungs = text_rungs(self._rungs, getattr(config.text, "stop_repeats", None))
        self._tools: dict[str, _ToolEntry] = {}
        self._text: dict[str, Any] | None = None
        self._escalations_used = 0
        self._declared: tuple[Any, dict[str, tuple[str, ...]]] | None = None
        if initial_state is not None:
            self.restore(initial_state)

    # -- warnings and escalation ------------------------------------------------------

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        del self.warnings[:-MAX_WARNINGS]

    def take_warnings(self) -> list[str]:
        """Return the collected warnings and clear them."""
        taken, self.warnings = self.warnings, []
        return taken

    @property
    def escalations_used(self) -> int:
        """Escalations consumed by this conversation (persisted by :meth:`get_state`)."""
        return self._escalations_used

    def can_escalate(self) -> bool:
        """True when an escalation model is configured and its budget is not spent (spec §2).

        Only ``model`` escalation applies in amos (spec header), so an advisor-only
        escalation counts as unconfigured here and the escalate rung falls through.
        """
        escalation = self.config.escalation
        return (
            escalation is not None
            and escalation.model is not None
            and self._escalations_used < escalation.max_escalations
        )

    def consume_escalation(self) -> None:
        """Spend one escalation; the runner calls this when it actually applies one (spec §8)."""
        self._escalations_used += 1

    # -- tool calls (§4) --------------------------------------------------------------

    @staticmethod
    def _fingerprint(tool_name: Any, key_material: Any) -> str:
        try:
            return fingerprint_tool_call(tool_name, key_material)
        except CanonicalizationError:
            raise
        except Exception as exc:  # e.g. a non-str tool name: one documented error type
            raise CanonicalizationError(f"cannot fingerprint this call: {exc}") from exc

    def declare_round(self, round: int, calls: Any) -> None:
        """Declare the complete set of calls a round will make, before scoring any (spec §4).

        A round's identity for a tool is the *set* of fingerprints it is called with, so
        the set must be known before the first call is scored: scoring a set as it grows
        would let a superset round transiently match the previous one and depend on
        emission order. Calls are grouped per tool, deduplicated and sorted. The
        declaration replaces any previous one and is never persisted. Skipping it is
        safe: undeclared calls are scored one by one (their per-call streaks still
        accumulate), only the fan-out is not scored as a unit.

        Args:
            round: The round number the calls will be recorded with.
            calls: A list of ``(tool_name, key_material)`` pairs. A pair whose key
                material is unhashable (or that is not a pair) is skipped with a warning.
        """
        try:
            items = list(calls)
        except Exception as exc:
            self._warn(f"doom_loop: declare_round got a non-list of calls ({exc!r}); ignored")
            items = []
        pairs: list[tuple[str, str]] = []
        for item in items:
            try:
                tool_name, key_material = item
                pairs.append((tool_name, self._fingerprint(tool_name, key_material)))
            except (CanonicalizationError, TypeError, ValueError) as exc:
                self.warn_undeclarable(round, exc)
        self.declare_round_fingerprints(round, pairs)

    def warn_undeclarable(self, round: int, error: Exception) -> None:
        """Warn that a call whose key material cannot be fingerprinted was left out of ``round``."""
        self._warn(f"doom_loop: left an undeclarable call out of round {round}: {error}")

    def declare_round_fingerprints(self, round: int, calls: list[tuple[str, str]]) -> None:
        """:meth:`declare_round` for calls already fingerprinted (``(tool_name, fingerprint)``
        pairs), so a host that computed each call's fingerprint once need not repeat it."""
        grouped: dict[str, set[str]] = {}
        for tool_name, fingerprint in calls:
            grouped.setdefault(tool_name, set()).add(fingerprint)
        self._declared = (round, {name: tuple(sorted(fps)) for name, fps in grouped.items()})

    def record_tool_call(
        self,
        tool_name: str,
        key_material: Any,
        round: int,
        *,
        allow_block: bool = True,
        detector: str = "tool-fingerprint",
    ) -> DoomLoopCallRecord:
        """Score one call that is about to run and return its streak and verdict (spec §4).

        - Streaks are per tool: calls to other tools in between change nothing.
        - A round is one model turn's batch: the same ``(tool, fingerprint)`` recorded
          again with the same ``round`` is a duplicate (``duplicate_in_round``) that
          increments nothing and returns the first occurrence's streak and verdict.
          Only equality matters; gaps or decreasing numbers start new rounds.
        - Round-set streak: a tool's round is identified by its declared set (see
          :meth:`declare_round`); a round whose set equals the previous round's scores
          the previous streak + 1, any other set (a superset included) scores 1.
        - Per-call streak: each exact call also counts the consecutive rounds it has
          appeared in, so ``[a,b]``, ``[a,c]``, ``[a,d]`` makes ``a`` a 3-peat.
        - The record's streak is the larger of the two and drives the ladder (with
          ``allow_escalate=`` :meth:`can_escalate`). So after ``[a,b]``, ``[a,b]``, a
          superset round ``[a,b,c]`` resets the tool's round streak to 1 and ``c``
          scores 1, while ``a`` and ``b`` carry per-call streak 3.
        - Blocked calls count like any other: re-issuing a blocked call is evidence.

        Args:
            tool_name: The tool's name (``server:<type>`` for server tools).
            key_material: The call's identity, from :func:`resolve_loop_key_material`.
            round: The round (model turn) number.
            allow_block: False for post-execution records (server tools).
            detector: ``tool-fingerprint`` or ``server-tool-fingerprint``.

        Returns:
            The :class:`DoomLoopCallRecord`. Should an internal error occur after
            fingerprinting, it is turned into a warning and a record with streak 0 and
            no verdict (never an exception).

        Raises:
            CanonicalizationError: ``key_material`` (or ``tool_name``) cannot be
                fingerprinted (non-finite number, int too large for a double, cycle,
                nesting deeper than 64, non-JSON type, non-str name); the monitor's state
                is unchanged. The runner retries with the full arguments, then skips
                detection for the call (spec §8).
        """
        fingerprint = self._fingerprint(tool_name, key_material)
        return self.record_tool_call_fingerprint(tool_name, fingerprint, round, allow_block=allow_block,
                                                 detector=detector)

    def record_tool_call_fingerprint(
        self,
        tool_name: str,
        fingerprint: str,
        round: int,
        *,
        allow_block: bool = True,
        detector: str = "tool-fingerprint",
    ) -> DoomLoopCallRecord:
        """:meth:`record_tool_call` for a call already fingerprinted (64 hex digits of
        :func:`fingerprint_tool_call` over its key material); never raises."""
        try:
            return self._score_call(tool_name, fingerprint, round, bool(allow_block), detector)
        except Exception as exc:  # no internal error fails a run
            self._warn(f"doom_loop: internal error scoring a {tool_name!r} call: {exc!r}")
            return DoomLoopCallRecord(fingerprint, 0, False, None)

    def _score_call(
        self, tool: str, fp: str, round: Any, allow_block: bool, detector: str
    ) -> DoomLoopCallRecord:
        prev = self._tools.get(tool)
        same = prev is not None and prev.has_round and prev.round == round
        declared = None
        if self._declared is not None and self._declared[0] == round:
            declared = self._declared[1].get(tool)
        member = declared is not None and fp in declared
        duplicate = same and fp in prev.seen

        if same:
            base_set, base_streak, base_calls = prev.prior_set, prev.prior_streak, prev.prior_calls
        elif prev is not None:
            base_set, base_streak, base_calls = (
                prev.set or (prev.fingerprint,),
                prev.streak,
                prev.calls,
            )
        else:
            base_set, base_streak, base_calls = None, 0, {}

        def score(round_set: tuple[str, ...]) -> int:
            return base_streak + 1 if round_set == base_set else 1

        call_streak = base_calls.get(fp, 0) + 1
        round_streak = score(declared if member else (fp,))
        round_set = declared if declared is not None else (fp,)
        non_member = declared is not None and not member

        if prev is None:
            if len(self._tools) >= MAX_TRACKED_TOOLS:
                del self._tools[next(iter(self._tools))]  # least recently recorded
            entry = _ToolEntry(fp, 1, round_set, {})
        else:
            entry = self._tools.pop(tool)  # re-inserted last: most recently recorded
        entry.streak = score(round_set)
        entry.fingerprint = prev.fingerprint if non_member and prev is not None else fp
        entry.set = round_set
        calls = entry.calls if same else {}  # this round's own dict: safe to update
        if fp in calls or len(calls) < MAX_ROUND_WIDTH:
            calls[fp] = call_streak
        entry.calls = calls
        if not same:
            entry.seen = set()
        entry.seen.add(fp)
        entry.has_round, entry.round = True, round
        entry.prior_set, entry.prior_streak, entry.prior_calls = base_set, base_streak, base_calls
        self._tools[tool] = entry

        streak = max(round_streak, call_streak)
        action = _first_reached(self._rungs, streak, allow_block, self.can_escalate())
        if action is None:
            return DoomLoopCallRecord(fp, streak, duplicate, None)
        if call_streak > round_streak or not member:
            kind = "per_call"
        elif len(declared) > 1:
            kind = "round_set"
        else:
            kind = "single_call"
        message = _call_message(kind, tool, streak, fp, declared or ())
        verdict = DoomLoopVerdict(detector, action, streak, fp, tool, message)
        return DoomLoopCallRecord(fp, streak, duplicate, verdict)

    # -- text (§5) --------------------------------------------------------------------

    def reset_text_streak(self) -> None:
        """Forget the cross-turn text streak (tool streaks are kept; spec §5).

        The runner calls this when it injects an async tool result: the run made
        observable progress, so "still waiting…" between deliveries is no loop.
        """
        self._text = None

    def record_assistant_text(self, text: str) -> DoomLoopVerdict | None:
        """Score one turn's assistant text and return the stronger text verdict (spec §5).

        The text is normalised (ES whitespace runs → one space, trimmed). Empty or
        whitespace-only text (tool-only turns) is a no-op that neither counts nor resets
        the streak. Two detectors run:

        - ``text-repetition``: :func:`detect_text_repetition` on the normalised text; its
          ``repeats`` is the streak, so one response repeating a sentence four or more
          times can reach the ladder on its own; fingerprint: bare hash of the sample.
        - ``text-streak``: identical normalised text in consecutive turns; the streak is
          the previous + 1 when the bare hash matches, else 1, and always replaces the
          stored one.

        Both resolve with ``allow_block=False``. The stronger action wins; on a tie,
        text-repetition.

        Args:
            text: The turn's assistant text (a non-``str`` is treated as no text).

        Returns:
            The verdict, or None when text detection is disabled, the text is empty, or
            no rung is reached. Never raises: an internal error becomes a warning.
        """
        if not self.config.text.enabled or not isinstance(text, str):
            return None
        try:
            return self._score_text(text)
        except Exception as exc:  # no internal error fails a run
            self._warn(f"doom_loop: internal error scoring assistant text: {exc!r}")
            return None

    def preview_text_repetition(self, text: str) -> DoomLoopVerdict | None:
        """The ``text-repetition`` verdict ``text`` would get, changing no state.

        For text still streaming (issue 23): the caller scores the tail so far and stops
        the stream when this says ``stop``; the cross-turn ``text-streak`` is not
        consulted (it needs the whole turn). Never raises.

        Args:
            text: Assistant text so far (a bounded tail is enough: only the last
                ``64 × max_window_tokens`` UTF-16 units are ever scanned).

        Returns:
            The verdict, or None when text detection is disabled, nothing repeats, or
            no rung is reached.
        """
        if not self.config.text.enabled or not isinstance(text, str):
            return None
        try:
            return self._repetition_verdict(normalize_text(text), self.can_escalate())
        except Exception as exc:  # no internal error fails a run
            self._warn(f"doom_loop: internal error scoring streamed text: {exc!r}")
            return None

    def _repetition_verdict(self, normalized: str, allow_escalate: bool) -> DoomLoopVerdict | None:
        repetition = detect_text_repetition(normalized, self.config.text) if normalized else None
        if repetition is None:
            return None
        action = _first_reached(self._text_rungs, repetition.repeats, False, allow_escalate)
        if action is None:
            return None
        sample = repetition.sample
        shown = sample if len(sample) <= 200 else sample[:200] + "…"
        return DoomLoopVerdict(
            "text-repetition",
            action,
            repetition.repeats,
            fingerprint_key_material(sample),
            None,
            f'Doom loop suspected: the response repeats "{shown}" {repetition.repeats} '
            "times in a row. Stop repeating and take a different approach.",
        )

    def _score_text(self, text: str) -> DoomLoopVerdict | None:
        normalized = normalize_text(text)
        if not normalized:
            return None
        allow_escalate = self.can_escalate()
        within = self._repetition_verdict(normalized, allow_escalate)
        fingerprint = fingerprint_key_material(normalized)
        prev = self._text
        streak = (
            prev["streak"] + 1 if prev is not None and prev["fingerprint"] == fingerprint else 1
        )
        self._text = {"fingerprint": fingerprint, "streak": streak}
        cross = None
        action = _first_reached(self._rungs, streak, False, allow_escalate)
        if action is not None:
            cross = DoomLoopVerdict(
                "text-streak",
                action,
                streak,
                fingerprint,
                None,
                f"Doom loop suspected: the assistant gave identical text in {streak} consecutive "
                "turns. Stop repeating and take a different approach.",
            )
        if within is None or (
            cross is not None and _STRENGTH[cross.action] > _STRENGTH[within.action]
        ):
            return cross
        return within

    # -- state (§6) -------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """Snapshot the persistable detector state as plain JSON (spec §6).

        Shape (a fresh deep copy)::

            {"tools": {name: {"fingerprint": str, "streak": int,
                              "round_fingerprints"?: [str, ...],  # sorted, > 1 entry
                              "call_streaks"?: {fingerprint: int}}},
             "text"?: {"fingerprint": str, "streak": int},
             "escalations_used"?: int}                           # only when > 0

        ``call_streaks`` is left out when its keys are the round set and every count
        equals ``streak`` (the restore default). A round set wider than
        :data:`MAX_ROUND_WIDTH` is saved as its fingerprint with streak 1 (under-counting
        is the safe direction). Rounds, priors and the declaration are never saved; the
        runner adds ``stop_verdict`` and ``pending_steer`` itself.
        """
        tools: dict[str, Any] = {}
        for name, entry in self._tools.items():
            round_set = entry.set or (entry.fingerprint,)
            if len(round_set) > MAX_ROUND_WIDTH:
                tools[name] = {"fingerprint": entry.fingerprint, "streak": 1}
                continue
            saved: dict[str, Any] = {"fingerprint": entry.fingerprint, "streak": entry.streak}
            if len(round_set) > 1:
                saved["round_fingerprints"] = list(round_set)
            if set(entry.calls) != set(round_set) or any(
                count != entry.streak for count in entry.calls.values()
            ):
                saved["call_streaks"] = dict(entry.calls)
            tools[name] = saved
        state: dict[str, Any] = {"tools": tools}
        if self._text is not None:
            state["text"] = dict(self._text)
        if self._escalations_used > 0:
            state["escalations_used"] = self._escalations_used
        return state

    def restore(self, state: Any) -> None:
        """Replace the detector state with a saved :meth:`get_state` blob (spec §6).

        Lenient, never raising: a blob that is not a dict is ignored with a warning; a
        tool entry without a string ``fingerprint`` and a finite numeric ``streak`` is
        dropped (one warning counts them). ``streak`` is floored and clamped to
        [1, :data:`MAX_RESTORED_STREAK`]; the round set is ``round_fingerprints`` sorted
        when it is a list of more than one (and at most :data:`MAX_ROUND_WIDTH`) strings,
        else ``[fingerprint]``; ``call_streaks`` keeps finite counts ≥ 1, floored (at
        most :data:`MAX_ROUND_WIDTH`), defaulting to ``streak`` for each set member. No
        round is restored, so the next record always starts a new round. A valid
        ``text`` keeps its streak exactly; ``escalations_used`` is floored when finite
        and ≥ 0, else 0. Other keys (``stop_verdict``, ``pending_steer``) are the
        runner's and are ignored. At most :data:`MAX_TRACKED_TOOLS` tools are kept.

        Args:
            state: The saved blob.
        """
        if not isinstance(state, dict):
            self._warn(
                f"doom_loop: ignoring invalid saved detector state ({type(state).__name__}, "
                "expected an object)"
            )
            return
        tools: dict[str, _ToolEntry] = {}
        dropped = 0
        raw_tools = state.get("tools")
        if raw_tools is not None and not isinstance(raw_tools, dict):
            self._warn("doom_loop: ignoring saved tool streaks that are not an object")
            raw_tools = None
        for name, raw in (raw_tools or {}).items():
            entry = _restore_entry(raw) if isinstance(name, str) else None
            if entry is None or len(tools) >= MAX_TRACKED_TOOLS:
                dropped += 1
                continue
            tools[name] = entry
        if dropped:
            self._warn(
                f"doom_loop: dropped {dropped} saved tool streak(s), invalid or over the limit"
            )
        text = state.get("text")
        if _valid_streak(text):
            self._text = {"fingerprint": text["fingerprint"], "streak": text["streak"]}
        else:
            if text is not None:
                self._warn("doom_loop: dropped an invalid saved text streak")
            self._text = None
        used = state.get("escalations_used")
        self._escalations_used = math.floor(used) if _is_number(used) and used >= 0 else 0
        self._tools = tools
