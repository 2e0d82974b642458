"""Doom-loop detection: a pure, synchronous port of the reference detector.

A doom loop is a run that keeps spending without making progress: the model re-issues
the same tool call (or the same fan-out of calls, or the same malformed call) round after
round, or emits the same text over and over. This module turns the recorded sequence of
calls and texts into verdicts on a configurable ladder (observe → steer → escalate →
block → stop). It follows spec/doom-loop-behaviour.md section by section (§1 config,
§2 ladder, §4 tool streaks, §5 text, §6 state, §7 ``loop_key``); fingerprints (§3) come
from :mod:`amos.policy.canonical`, and the text rules live in
:mod:`amos.policy.doom_loop_text`. Background: seeds/doom-loop-detection.d.ts.txt.

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
    "detect_text_repetition",
    "resolve_doom_loop_option",
    "resolve_ladder_action",
    "resolve_loop_key_material",
]

DoomLoopAction = Literal["observe", "steer", "escalate", "block", "stop"]
"""Ladder actions, weakest to strongest (seed ``DoomLoopAction``)."""

DoomLoopDetector = Literal[
    "tool-fingerprint", "server-tool-fingerprint", "text-repetition", "text-streak"
]
"""Which detector produced a verdict."""

RUNGS: tuple[DoomLoopAction, ...] = ("observe", "steer", "escalate", "block", "stop")
"""The ladder rungs, weakest first."""

DEFAULT_MAX_ESCALATIONS = 2
"""Escalation budget when none (or an invalid one) is given (spec §1)."""

MAX_TRACKED_TOOLS = 256
"""Most tool entries a monitor keeps; the least recently recorded tool is forgotten first."""

MAX_ROUND_WIDTH = 128
"""Most distinct calls of one tool whose per-call streaks are kept per round, and the
widest round set persisted (a wider set is saved as a single call with streak 1)."""

MAX_RESTORED_STREAK = 1_000_000
"""Upper clamp of a restored tool streak (spec §6)."""

MAX_WARNINGS = 100
"""Most warnings :attr:`DoomLoopMonitor.warnings` holds; the oldest are dropped first."""

Threshold = int | Literal[False]


# --------------------------------------------------------------------------- config (§1)


@dataclass(frozen=True)
class DoomLoopLadder:
    """Streak thresholds of each rung; ``False`` disables a rung (spec §1, §2).

    Defaults: observe 2, steer off, escalate off, block 3, stop 6.
    """

    observe: Threshold = 2
    steer: Threshold = False
    escalate: Threshold = False
    block: Threshold = 3
    stop: Threshold = 6

    def to_dict(self) -> dict[str, Threshold]:
        """The ladder as plain JSON data."""
        return {rung: getattr(self, rung) for rung in RUNGS}


DEFAULT_DOOM_LOOP_LADDER = DoomLoopLadder()
"""The default ladder (spec §1)."""


@dataclass(frozen=True)
class ResolvedEscalation:
    """What the ``escalate`` rung switches to (spec §1 "Escalation").

    Attributes:
        model: Model string for the next turn; None when only ``advisor`` was given.
        max_escalations: Escalations allowed per conversation (≥ 1).
        advisor: The reference's advisor mechanism, kept for fidelity of resolution
            only: amos applies ``model`` escalation alone (spec header), so
            :meth:`DoomLoopMonitor.can_escalate` is False without ``model``.
    """

    model: str | None = None
    max_escalations: int = DEFAULT_MAX_ESCALATIONS
    advisor: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The escalation config as plain data (``advisor`` only when set)."""
        data: dict[str, Any] = {"model": self.model, "max_escalations": self.max_escalations}
        if self.advisor is not None:
            data["advisor"] = self.advisor
        return data


@dataclass(frozen=True)
class ResolvedDoomLoop:
    """A fully resolved ``doom_loop`` configuration (spec §1).

    Attributes:
        ladder: The rung thresholds.
        text: Text-detection options (``text.enabled`` False disables both text
            detectors).
        escalation: The escalation mechanism, or None when none is configured.
        warnings: Informational warnings about the configuration (spec §1 "Warnings").
    """

    ladder: DoomLoopLadder = DEFAULT_DOOM_LOOP_LADDER
    text: DoomLoopTextOptions = DEFAULT_TEXT_OPTIONS
    escalation: ResolvedEscalation | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The configuration as plain data, without the warnings."""
        return {
            "ladder": self.ladder.to_dict(),
            "text": self.text.to_dict(),
            "escalation": self.escalation.to_dict() if self.escalation else None,
        }


def _is_number(value: Any) -> bool:
    """A finite int or float; bools are JSON booleans, never numbers (spec header)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) or math.isfinite(value)


def _sanitize_threshold(value: Any, default: Threshold) -> Threshold:
    if value is False:
        return False
    if _is_number(value) and value >= 1:
        return math.floor(value)
    return default


def _ladder_warnings(ladder: DoomLoopLadder) -> list[str]:
    warnings = []
    if ladder.block is not False and ladder.stop is False:
        warnings.append(
            f"doom_loop: the ladder blocks (block {ladder.block}) but never stops (stop "
            "false): a model that keeps re-issuing a blocked call loops until another "
            "limit ends the run"
        )
    for index, weak in enumerate(RUNGS):
        weak_at = getattr(ladder, weak)
        if weak_at is False:
            continue
        for strong in RUNGS[index + 1 :]:
            strong_at = getattr(ladder, strong)
            if strong_at is not False and weak_at >= strong_at:
                warnings.append(
                    f'doom_loop: ladder rung "{weak}" ({weak_at}) can never fire: the '
                    f'stronger rung "{strong}" ({strong_at}) already applies at that streak'
                )
                break
    return warnings


def _resolve_escalation(
    raw: Any, ladder: DoomLoopLadder
) -> tuple[ResolvedEscalation | None, list[str]]:
    raw = raw if isinstance(raw, Mapping) else {}
    model = raw.get("model")
    model = model if isinstance(model, str) else None
    advisor = raw.get("advisor")
    has_advisor = advisor is not None and advisor is not False
    if model is None and not has_advisor:
        if ladder.escalate is not False:
            return None, [
                f"doom_loop: ladder.escalate ({ladder.escalate}) is set but no escalation "
                "model is configured; the rung is skipped and verdicts fall through to "
                "weaker rungs"
            ]
        return None, []
    cap = raw.get("max_escalations")
    escalation = ResolvedEscalation(
        model=model,
        max_escalations=math.floor(cap)
        if _is_number(cap) and cap >= 1
        else DEFAULT_MAX_ESCALATIONS,
        advisor=advisor if has_advisor else None,
    )
    if ladder.escalate is False:
        return escalation, [
            "doom_loop: an escalation mechanism is configured but ladder.escalate is off; "
            "set ladder.escalate to a streak for it to be used"
        ]
    return escalation, []


def _resolve_text(raw: Any) -> DoomLoopTextOptions:
    if raw is False:
        return DoomLoopTextOptions(enabled=False)
    if not isinstance(raw, Mapping):  # None (absent), True, or a shape with no fields
        return DEFAULT_TEXT_OPTIONS

    def pick(name: str) -> Any:
        value = raw.get(name)
        return getattr(DEFAULT_TEXT_OPTIONS, name) if value is None else value

    return DoomLoopTextOptions(
        enabled=pick("enabled"),
        max_period_tokens=pick("max_period_tokens"),
        min_repeats=pick("min_repeats"),
        min_covered_tokens=pick("min_covered_tokens"),
        max_window_tokens=pick("max_window_tokens"),
    )


def resolve_doom_loop_option(option: Any) -> ResolvedDoomLoop | None:
    """Resolve the ``doom_loop`` option leniently, as the reference does (spec §1).

    The config file is validated strictly by :class:`amos.config_models.DoomLoopConfig`;
    this function serves programmatic callers and never raises:

    - ``None`` (absent) or ``False`` → None (detection off); ``True`` or ``{}`` → defaults;
    - a pydantic model (``AmosConfig.doom_loop``) is read through ``model_dump()``; a
      :class:`ResolvedDoomLoop` is returned as is; any other non-mapping → defaults;
    - ladder: each rung separately — ``False`` is kept, a finite number ≥ 1 is floored,
      anything else reverts to its default (observe 2, steer off, escalate off,
      block 3, stop 6);
    - text: ``False`` disables it; in a mapping, missing or None fields take the defaults
      (enabled, max_period_tokens 16, min_repeats 4, min_covered_tokens 12,
      max_window_tokens 400) and values are not range-checked;
    - escalation: None unless a string ``model`` or a non-``False`` ``advisor`` is set
      (``advisor: False`` is dropped); ``max_escalations`` is floored when finite and ≥ 1,
      else 2.

    Args:
        option: The raw option: None, a bool, a mapping with ``ladder``/``text``/
            ``escalation``, or a pydantic ``DoomLoopConfig``.

    Returns:
        The resolved config, whose ``warnings`` name (in this order) block without stop,
        each dead rung (a weaker rung whose threshold is ≥ an enabled stronger rung's),
        and an escalate rung without a mechanism or a mechanism without the rung; or None
        when detection is off.
    """
    if option is None or option is False:
        return None
    if isinstance(option, ResolvedDoomLoop):
        return option
    if not isinstance(option, Mapping) and callable(getattr(option, "model_dump", None)):
        option = option.model_dump()
    config = option if isinstance(option, Mapping) else {}
    raw_ladder = config.get("ladder")
    raw_ladder = raw_ladder if isinstance(raw_ladder, Mapping) else {}
    ladder = DoomLoopLadder(
        **{
            rung: _sanitize_threshold(raw_ladder.get(rung), getattr(DEFAULT_DOOM_LOOP_LADDER, rung))
            for rung in RUNGS
        }
    )
    warnings = _ladder_warnings(ladder)
    escalation, escalation_warnings = _resolve_escalation(config.get("escalation"), ladder)
    return ResolvedDoomLoop(
        ladder=ladder,
        text=_resolve_text(config.get("text")),
        escalation=escalation,
        warnings=tuple(warnings + escalation_warnings),
    )


# --------------------------------------------------------------------------- ladder (§2)


def resolve_ladder_action(
    ladder: DoomLoopLadder | Mapping[str, Any],
    streak: float,
    *,
    allow_block: bool,
    allow_escalate: bool = True,
) -> DoomLoopAction | None:
    """The strongest enabled rung whose threshold ``streak`` reaches (spec §2).

    Rungs are checked stop, block (only with ``allow_block``), escalate (only with
    ``allow_escalate``), steer, observe; the first with ``streak >= threshold`` wins.
    Text and server-tool verdicts pass ``allow_block=False`` (nothing is left to block:
    a block-level streak falls through, while stop still stops). The monitor passes
    :meth:`DoomLoopMonitor.can_escalate` as ``allow_escalate``.

    Args:
        ladder: A :class:`DoomLoopLadder`, or a mapping of rung → threshold (a missing
            rung, ``False`` or a non-number is disabled).
        streak: The repetition count.
        allow_block: Whether the block rung may apply.
        allow_escalate: Whether the escalate rung may apply.

    Returns:
        The action, or None when no enabled rung is reached.
    """
    return _first_reached(_enabled_rungs(ladder), streak, allow_block, allow_escalate)


def _enabled_rungs(ladder: DoomLoopLadder | Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """``(action, threshold)`` of the enabled rungs, strongest first (spec §2 order)."""
    rungs = []
    for rung in reversed(RUNGS):
        if isinstance(ladder, Mapping):
            threshold = ladder.get(rung)
        else:
            threshold = getattr(ladder, rung, False)
        if _is_number(threshold):
            rungs.append((rung, threshold))
    return tuple(rungs)


def _first_reached(
    rungs: tuple[tuple[str, Any], ...], streak: float, allow_block: bool, allow_escalate: bool
) -> DoomLoopAction | None:
    for rung, threshold in rungs:
        if streak >= threshold:
            if rung == "block" and not allow_block:
                continue
            if rung == "escalate" and not allow_escalate:
                continue
            return rung
    return None


# --------------------------------------------------------------------------- loop_key (§7)


@dataclass(frozen=True)
class LoopKeyResolution:
    """A tool's ``loop_key`` resolved against one call's arguments (spec §7).

    Attributes:
        kind: ``"key"`` (use ``key_material``), ``"fallback"`` (use ``key_material``,
            the full arguments, and surface ``warning``) or ``"exempt"`` (do not score
            the call).
        key_material: The identity to fingerprint; None when exempt.
        warning: Why the declaration fell back; None unless ``kind == "fallback"``.
    """

    kind: Literal["key", "fallback", "exempt"]
    key_material: Any = None
    warning: str | None = None


def resolve_loop_key_material(loop_key: Any, args: Any) -> LoopKeyResolution:
    """Resolve a tool's ``loop_key`` declaration against one call's arguments (spec §7).

    ====================================================  ==========================
    ``loop_key``                                          result
    ====================================================  ==========================
    ``None`` (absent)                                     key: the full ``args``
    ``False``                                             exempt
    list/tuple of names                                   key: ``{name: args[name]}``
                                                          for each string name present
                                                          in ``args`` (a None value
                                                          counts as present)
    empty list, or no listed name present                 fallback (full args)
    callable raising an ``Exception``                     fallback (full args)
    callable returning None                               exempt (this call only)
    callable returning anything else (even ``False``)     key: that value
    any other shape (``True``, a str, a dict, …)          fallback (full args)
    ====================================================  ==========================

    Python has no ``undefined``, so the reference's "function returned undefined" row
    has no counterpart. Malformed (unparseable) arguments arrive as their raw string;
    a field list then falls back to that string.

    Args:
        loop_key: The declaration (``Tool.loop_key``).
        args: The call's arguments: a dict, or the raw string of malformed arguments.

    Returns:
        The resolution; this function never raises for an ``Exception`` from a callable.
    """
    if loop_key is None:
        return LoopKeyResolution("key", args)
    if loop_key is False:
        return LoopKeyResolution("exempt")
    if isinstance(loop_key, list | tuple):
        subset = {}
        if isinstance(args, Mapping):
            subset = {
                name: args[name] for name in loop_key if isinstance(name, str) and name in args
            }
        if subset:
            return LoopKeyResolution("key", subset)
        why = "is empty" if not loop_key else "names no field present in the arguments"
        return LoopKeyResolution(
            "fallback", args, f"loop_key field list {why}; using the full arguments"
        )
    if callable(loop_key):
        try:
            result = loop_key(args)
        except Exception as exc:
            return LoopKeyResolution(
                "fallback", args, f"loop_key raised {exc!r}; using the full arguments"
            )
        if result is None:
            return LoopKeyResolution("exempt")
        return LoopKeyResolution("key", result)
    return LoopKeyResolution(
        "fallback",
        args,
        f"loop_key has an unsupported shape ({type(loop_key).__name__}); using the full arguments",
    )


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


# --------------------------------------------------------------------------- monitor (§4–§6)


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
        grouped: dict[str, set[str]] = {}
        try:
            items = list(calls)
        except Exception as exc:
            self._warn(f"doom_loop: declare_round got a non-list of calls ({exc!r}); ignored")
            items = []
        for item in items:
            try:
                tool_name, key_material = item
                fingerprint = self._fingerprint(tool_name, key_material)
            except (CanonicalizationError, TypeError, ValueError) as exc:
                self._warn(f"doom_loop: left an undeclarable call out of round {round}: {exc}")
                continue
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

    def _score_text(self, text: str) -> DoomLoopVerdict | None:
        normalized = normalize_text(text)
        if not normalized:
            return None
        allow_escalate = self.can_escalate()
        within = None
        repetition = detect_text_repetition(normalized, self.config.text)
        if repetition is not None:
            action = _first_reached(self._rungs, repetition.repeats, False, allow_escalate)
            if action is not None:
                sample = repetition.sample
                shown = sample if len(sample) <= 200 else sample[:200] + "…"
                within = DoomLoopVerdict(
                    "text-repetition",
                    action,
                    repetition.repeats,
                    fingerprint_key_material(sample),
                    None,
                    f'Doom loop suspected: the response repeats "{shown}" {repetition.repeats} '
                    "times in a row. Stop repeating and take a different approach.",
                )
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
