"""Doom-loop configuration: resolved config types and the ladder (spec §1, §2).

Holds the ladder actions and rungs, the resolved configuration dataclasses
(:class:`DoomLoopLadder`, :class:`ResolvedEscalation`, :class:`ResolvedDoomLoop`), the
lenient resolution of the raw ``doom_loop`` option with its warnings
(:func:`resolve_doom_loop_option`), and the ladder rule that maps a streak to an action
(:func:`resolve_ladder_action`). Split out of :mod:`amos.policy.doom_loop`, which
re-exports every public name here; deterministic and free of I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from amos.policy.doom_loop_text import DEFAULT_TEXT_OPTIONS, DoomLoopTextOptions

__all__ = [
    "AMOS_DOOM_LOOP_LADDER",
    "AMOS_TEXT_OPTIONS",
    "DEFAULT_DOOM_LOOP_LADDER",
    "DEFAULT_MAX_ESCALATIONS",
    "RUNGS",
    "DoomLoopAction",
    "DoomLoopLadder",
    "ResolvedDoomLoop",
    "ResolvedEscalation",
    "Threshold",
    "resolve_doom_loop_option",
    "resolve_ladder_action",
    "text_rungs",
]

DoomLoopAction = Literal["observe", "steer", "escalate", "block", "stop"]
"""Ladder actions, weakest to strongest (seed ``DoomLoopAction``)."""

RUNGS: tuple[DoomLoopAction, ...] = ("observe", "steer", "escalate", "block", "stop")
"""The ladder rungs, weakest first."""

DEFAULT_MAX_ESCALATIONS = 2
"""Escalation budget when none (or an invalid one) is given (spec §1)."""

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

AMOS_DOOM_LOOP_LADDER = DoomLoopLadder(stop=5)
"""amos's config default ladder (``doom_loop.ladder`` in the config): the reference's,
but *stop* at 5 instead of 6 (issue 17 item 15).

A text loop's streak is the number of copies in one response, and a sentence-long loop
has few: a model that writes one 22-token sentence five times in a row is looping, yet
reached only *observe* at 6. For tool calls this means two refused repeats after
*block* at 3 instead of three. :func:`resolve_doom_loop_option` (the reference's lenient
resolution, for programmatic callers) keeps :data:`DEFAULT_DOOM_LOOP_LADDER`."""

AMOS_TEXT_OPTIONS = DoomLoopTextOptions(max_period_tokens=160, min_repeats=4, min_covered_tokens=12,
                                        max_window_tokens=800, stop_repeats=4)
"""amos's config default text options (``doom_loop.text``): blocks up to 160 tokens in
the last 800 (the reference: 16 in 400), so a repeated sentence, a cycle of a few
sentences and a repeated paragraph are found, with room for the copies the *stop*
rung needs. ``min_repeats`` 4 and ``min_covered_tokens`` 12 are the reference's.
Measured by ``benchmarks/doom_text_rung.py`` (issue 17 item 15): no false alarm at any
line end of the project's docs, the shared texts or amos's source, for either set; the
detector itself (:mod:`amos.policy.doom_loop_text`) is unchanged.

``stop_repeats`` 4 (issue 23; README "Doom-loop detection"): four back-to-back copies
of one block in one response stop the run, one copy before the ladder's ``stop`` 5. A
runaway stream recorded from a real llama-cpp-python server (a 39-token paragraph written
four times, the fifth cut by its 256-token cap) never reached 5; and in 29 M characters
of real prose and code scanned the way a stream is (``benchmarks/doom_text_rung.py
--stream``) no text reached 4 copies without also reaching 5. Tool streaks and the
cross-turn ``text-streak`` keep ``ladder.stop``: they count turns, not copies within one answer."""



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
        stop_repeats=pick("stop_repeats"),
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
      max_window_tokens 400, stop_repeats None) and values are not range-checked;
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


def text_rungs(
    rungs: tuple[tuple[str, Any], ...], stop_repeats: Any
) -> tuple[tuple[str, Any], ...]:
    """The rungs a ``text-repetition`` verdict climbs: ``rungs`` with *stop* lowered to
    ``stop_repeats`` copies (issue 23).

    Only ever earlier: the *stop* threshold becomes ``min(ladder.stop, stop_repeats)``;
    a ladder with *stop* off never stops on text either. A ``stop_repeats`` that is not
    a finite number ≥ 1 (None, the reference's behaviour) leaves ``rungs`` as they are;
    a fraction is floored.

    Args:
        rungs: ``(action, threshold)`` of the enabled rungs, strongest first (as
            :func:`_enabled_rungs` gives them).
        stop_repeats: the text options' ``stop_repeats``.

    Returns:
        The rungs, strongest first.
    """
    if not _is_number(stop_repeats) or stop_repeats < 1:
        return rungs
    limit = math.floor(stop_repeats)
    return tuple((rung, min(threshold, limit) if rung == "stop" else threshold) for rung, threshold in rungs)
