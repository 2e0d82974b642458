"""The runner's side of doom-loop detection (spec/doom-loop-behaviour.md §8).

:class:`DoomLoopGuard` wraps the pure :class:`~amos.policy.doom_loop.DoomLoopMonitor`
with what the engine owns: the armed ``stop_verdict`` (kept across decision-only
resumes, cleared by a new user turn), the queue of steer messages (exact-text
dedupe, delivered before the next model request, persisted across pauses), the last
verdict for ``/context loop``, and the session blob. No internal error of the
detector ever fails a run: failures become warnings and the call goes unscored.
"""

from __future__ import annotations

import logging
from typing import Any

from amos.policy.canonical import CanonicalizationError
from amos.policy.doom_loop import (
    DoomLoopMonitor,
    DoomLoopVerdict,
    resolve_doom_loop_option,
    resolve_loop_key_material,
)
from amos.policy.doom_loop_stream import TextStreamWatch

log = logging.getLogger("amos.doom_loop")

MAX_PENDING_STEER = 20
"""Most queued steer messages kept (oldest dropped first)."""

MAX_STEER_CHARS = 2000
"""Longest restored steer message (characters)."""


def doom_notice(verdict: DoomLoopVerdict) -> str:
    """One notice line for a verdict, e.g. ``doom loop: block (tool-fingerprint, streak 3) — …``."""
    extra = " (the next turn runs on the escalation model)" if verdict.action == "escalate" else ""
    return f"doom loop: {verdict.action} ({verdict.detector}, streak {verdict.streak}){extra} — {verdict.message}"


HINT_CHUNK_CHARS = 64
"""Characters per piece when :func:`repeats_like_a_runaway` replays a finished text."""


def repeats_like_a_runaway(text: str) -> bool:
    """Whether the default doom-loop text rung would have stopped ``text`` mid-stream.

    For a run with detection off whose turn hit its output limit (issue 23: a looping
    small model ran to its cap): the caller can then say that ``"doom_loop": true`` stops
    such loops while they stream. The text is replayed through a fresh
    :class:`TextStreamWatch` with amos's defaults (``text.stop_repeats`` 4, ladder stop 5)
    in :data:`HINT_CHUNK_CHARS`-character pieces, so it judges as the live stream would.
    Bounded work: the watch keeps only its tail window. Never raises.

    Args:
        text: the turn's text as shown (masked).

    Returns:
        True when the watch says ``stop`` at some point of the text.
    """
    from amos.config_models import DoomLoopConfig

    try:
        guard = DoomLoopGuard.from_config(DoomLoopConfig(), None)
        watch = guard.stream_watch() if guard is not None else None
        if watch is None:
            return False
        return any(watch.feed(text[i:i + HINT_CHUNK_CHARS]) is not None
                   for i in range(0, len(text), HINT_CHUNK_CHARS))
    except Exception:  # noqa: BLE001 - a hint never fails a run
        log.exception("repeats_like_a_runaway failed")
        return False


class DoomLoopGuard:
    """Doom-loop detection for one session.

    Args:
        monitor: the detector.
        saved: the session's ``doom_loop`` section (``{"detector", "stop_verdict",
            "pending_steer", "last_verdict"}``), or None.
    """

    def __init__(self, monitor: DoomLoopMonitor, saved: Any = None):
        self.monitor = monitor
        if saved is not None and not isinstance(saved, dict):
            monitor.warnings.append("the session's doom_loop section is not an object; it was ignored")
        saved = saved if isinstance(saved, dict) else {}
        self.stop_verdict = DoomLoopVerdict.from_dict(saved.get("stop_verdict"))
        self.last_verdict = DoomLoopVerdict.from_dict(saved.get("last_verdict"))
        steer = saved.get("pending_steer")
        self.pending_steer: list[str] = (
            [s[:MAX_STEER_CHARS] for s in steer if isinstance(s, str)][-MAX_PENDING_STEER:]
            if isinstance(steer, list) else [])
        self.escalate_next = saved.get("escalate_next") is True

    @classmethod
    def from_config(cls, option: Any, saved: Any) -> DoomLoopGuard | None:
        """A guard for the ``doom_loop`` config (None when detection is off)."""
        resolved = resolve_doom_loop_option(option)
        if resolved is None:
            return None
        detector_state = saved.get("detector") if isinstance(saved, dict) else None
        monitor = DoomLoopMonitor(resolved, initial_state=detector_state)
        monitor.warnings[:0] = list(resolved.warnings)  # config warnings first, then restore ones
        return cls(monitor, saved)

    # ------------------------------------------------------------------ scoring

    def key_for(self, loop_key: Any, arguments: Any, raw_arguments: str | None) -> Any | None:
        """The key material of a call, or None when the call is exempt.

        Malformed arguments count as their raw string (spec §8 "Rounds").
        """
        args = raw_arguments if raw_arguments is not None else arguments
        resolution = resolve_loop_key_material(loop_key, args)
        if resolution.warning:
            log.debug("loop_key fallback: %s", resolution.warning)
        if resolution.kind == "exempt":
            return None
        return resolution.key_material

    def declare(self, round_number: int, calls: list[tuple[str, Any]]) -> None:
        """Declare the checked calls of a round before any of them is scored."""
        try:
            self.monitor.declare_round(round_number, calls)
        except Exception:  # noqa: BLE001 - detection never fails a run
            log.exception("declare_round failed")

    def declare_fingerprints(self, round_number: int, calls: list[tuple[str, str]]) -> None:
        """:meth:`declare` for calls already fingerprinted (``(tool, fingerprint)`` pairs)."""
        try:
            self.monitor.declare_round_fingerprints(round_number, calls)
        except Exception:  # noqa: BLE001 - detection never fails a run
            log.exception("declare_round failed")

    def score_fingerprint(self, tool: str, fingerprint: str, round_number: int) -> tuple[DoomLoopVerdict | None, bool]:
        """:meth:`score_call` for a call already fingerprinted: ``(verdict, duplicate_in_round)``."""
        record = self.monitor.record_tool_call_fingerprint(tool, fingerprint, round_number)
        if record.verdict is not None and not record.duplicate_in_round:
            self._note(record.verdict)
        return record.verdict, record.duplicate_in_round

    def score_call(self, tool: str, key: Any, full_args: Any, round_number: int) -> tuple[DoomLoopVerdict | None, bool]:
        """Score a call that is about to run.

        Returns:
            ``(verdict, duplicate_in_round)``; an unhashable key is retried with the full
            arguments, then the call goes unscored (``(None, False)``).
        """
        for material in (key, full_args):
            try:
                record = self.monitor.record_tool_call(tool, material, round_number)
            except CanonicalizationError:
                continue
            except Exception:  # noqa: BLE001 - detection never fails a run
                log.exception("record_tool_call failed")
                return None, False
            if record.verdict is not None and not record.duplicate_in_round:
                self._note(record.verdict)
            return record.verdict, record.duplicate_in_round
        return None, False

    def score_text(self, text: str) -> DoomLoopVerdict | None:
        """Score an assistant turn's text (block is never applied to text)."""
        try:
            verdict = self.monitor.record_assistant_text(text)
        except Exception:  # noqa: BLE001 - detection never fails a run
            log.exception("record_assistant_text failed")
            return None
        if verdict is not None:
            self._note(verdict)
        return verdict

    def stream_watch(self) -> TextStreamWatch | None:
        """A watch for the next streamed response (None when text detection is off):
        its ``feed`` returns the ``text-repetition`` verdict once the ladder says stop."""
        text = self.monitor.config.text
        if not text.enabled:
            return None
        return TextStreamWatch(self.monitor.preview_text_repetition, text.max_window_tokens)

    def stream_stopped(self, verdict: DoomLoopVerdict) -> None:
        """The ``stop`` verdict a stream watch stopped a response on: noted and armed like
        a verdict of a finished turn (the text streak is not counted: the turn is partial)."""
        self._note(verdict)

    def _note(self, verdict: DoomLoopVerdict) -> None:
        self.last_verdict = verdict
        if verdict.action == "steer" and verdict.message not in self.pending_steer:
            self.pending_steer.append(verdict.message)
            del self.pending_steer[:-MAX_PENDING_STEER]
        if verdict.action == "stop" and self.stop_verdict is None:
            self.stop_verdict = verdict
        if verdict.action == "escalate":
            self.escalate_next = True

    # ------------------------------------------------------------------ lifecycle

    def take_warnings(self) -> list[str]:
        """Config and restore warnings collected so far (dead rungs, dropped state…), emptied."""
        return self.monitor.take_warnings()

    def new_user_turn(self) -> None:
        """A fresh user turn clears an armed stop verdict (spec §8 "stop")."""
        self.stop_verdict = None

    def take_escalation(self) -> str | None:
        """The model the next request must run on, when an escalation is latched and budget
        remains; the budget is spent here, only when the escalation is applied (spec §8)."""
        if not self.escalate_next:
            return None
        self.escalate_next = False
        escalation = self.monitor.config.escalation
        if escalation is None or not escalation.model or not self.monitor.can_escalate():
            return None
        self.monitor.consume_escalation()
        return escalation.model

    def take_steer(self) -> list[str]:
        """The queued steer messages, emptied."""
        messages, self.pending_steer = self.pending_steer, []
        return messages

    def state(self) -> dict[str, Any]:
        """The session's ``doom_loop`` section (plain JSON)."""
        return {
            "detector": self.monitor.get_state(),
            "stop_verdict": self.stop_verdict.to_dict() if self.stop_verdict else None,
            "pending_steer": list(self.pending_steer),
            "escalate_next": self.escalate_next,
            "last_verdict": self.last_verdict.to_dict() if self.last_verdict else None,
        }

    def diagnostics(self) -> dict[str, Any]:
        """What ``/context loop`` shows: streaks per tool and text, and the last verdict."""
        detector = self.monitor.get_state()
        return {
            "streaks": {name: entry.get("streak") for name, entry in detector.get("tools", {}).items()},
            "text_streak": (detector.get("text") or {}).get("streak"),
            "last_verdict": self.last_verdict.to_dict() if self.last_verdict else None,
            "stop_armed": self.stop_verdict is not None,
            "escalations_used": self.monitor.escalations_used,
            "ladder": self.monitor.config.ladder.to_dict(),
        }
