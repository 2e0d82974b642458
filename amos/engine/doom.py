"""The doom-loop gate: the ladder's view of every request, turn and call.

spec/doom-loop-behaviour.md §8. Before a request, an armed ``stop`` verdict stops the
run (cause ``doom_loop``) and queued steer messages are delivered as host feedback.
A round's checked calls are declared before any is scored; a call is scored when it
passed the permission gate (``observe``/``steer``/``escalate`` let it run with a
notice; ``block`` and ``stop`` refuse it), and once ``stop`` fired every later call of
the round is refused (the run is *halted*). A call whose last two results differed (a
log that grows, a build that moves) is not a repeat and is not scored (issue 17, item
13): only true loops climb the ladder. A turn's text is scored while it streams (a
repetition the ladder would stop closes the stream at once, issue 23) and again when the
turn ends. The escalation model, when latched, is taken for the next request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from amos.doom_guard import DoomLoopGuard, doom_notice
from amos.engine.calls import PlannedCall
from amos.engine.gates import Decision, Gate, RoundControl
from amos.engine.state import RunState
from amos.engine.transcript import Transcript
from amos.events import Notice
from amos.messages import Message
from amos.tools.base import ToolOutcome

if TYPE_CHECKING:
    from amos.policy.doom_loop import DoomLoopVerdict
    from amos.policy.doom_loop_stream import TextStreamWatch

STEER_PREFIX = "[amos host: doom-loop steer] "

MAX_TRACKED_RESULTS = 1000
"""Calls whose last results are remembered per execution (to tell polling from looping)."""


class DoomGate(Gate):
    """The doom-loop ladder as a gate (second in the gate order).

    Args:
        guard: the session's doom-loop state (:class:`~amos.doom_guard.DoomLoopGuard`).
        transcript: where steer messages are delivered.
    """

    name = "doom_loop"

    def __init__(self, guard: DoomLoopGuard, transcript: Transcript):
        self.guard = guard
        self.transcript = transcript
        self._results: dict[str, list[str | None]] = {}  # loop fingerprint → its last two results

    def halt_message(self) -> str | None:
        """Why every call is refused now (an armed stop), else None."""
        verdict = self.guard.stop_verdict
        return f"blocked: the doom-loop ladder stopped the run: {verdict.message}" if verdict else None

    def stop_if_armed(self, run: RunState) -> bool:
        """Stop the run when the ladder's ``stop`` is armed; True when it stopped."""
        verdict = self.guard.stop_verdict
        if verdict is None:
            return False
        run.stop("doom_loop", "doom_loop", f"the doom-loop ladder stopped the run: {verdict.message}",
                 {"doom_loop": verdict.to_dict()})
        return True

    async def before_request(self, run: RunState) -> None:
        if self.stop_if_armed(run):
            return
        for message in self.guard.take_steer():
            self.transcript.append(Message.user(f"{STEER_PREFIX}{message}", kind="feedback"))

    def new_user_turn(self) -> None:
        """A fresh prompt clears an armed stop (spec §8 "stop")."""
        self.guard.new_user_turn()

    def take_escalation(self) -> str | None:
        """The model the next request must run on (an escalation), else None."""
        return self.guard.take_escalation()

    def score_text(self, run: RunState, text: str) -> None:
        """Score a finished turn's text (a notice when the ladder reacts)."""
        verdict = self.guard.score_text(text)
        if verdict is not None:
            run.emit(Notice(level="warning", text=doom_notice(verdict)))

    def stream_watch(self) -> TextStreamWatch | None:
        """The watch scoring the next response while it streams (issue 23), or None."""
        return self.guard.stream_watch()

    def stream_stopped(self, run: RunState, verdict: DoomLoopVerdict) -> None:
        """A response the stream watch stopped: the notice, the armed ``stop``, the run stopped."""
        self.guard.stream_stopped(verdict)
        run.emit(Notice(level="warning", text=f"the response was stopped mid-stream: {doom_notice(verdict)}"))
        self.stop_if_armed(run)

    def round_declared(self, run: RunState, calls: Sequence[PlannedCall]) -> None:
        pairs = []
        for call in calls:
            if call.permission == "deny":
                continue
            key = call.loop_key
            if key.exempt:
                continue
            if key.declared is None:
                self.guard.monitor.warn_undeclarable(run.record.steps, key.declare_error or ValueError("?"))
                continue
            pairs.append((call.tool_name, key.declared))
        self.guard.declare_fingerprints(run.record.steps, pairs)
        halt = self.halt_message()
        if halt is not None:
            run.halted = halt

    async def admit(self, run: RunState, call: PlannedCall, round: RoundControl) -> Decision | None:
        halt = self.halt_message()
        if halt is not None:
            return Decision.refuse("blocked", halt)
        key = call.loop_key
        if key.exempt or key.scored is None:
            return None
        seen = self._results.get(key.scored, [])
        if len(seen) >= 2 and (seen[-1] != seen[-2] or seen[-1] is None):
            return None  # its result changed last time (a growing log, a build's progress): not a repeat
        verdict, duplicate = self.guard.score_fingerprint(call.tool_name, key.scored, run.record.steps)
        if verdict is None:
            return None
        if not duplicate:
            run.emit(Notice(level="warning", text=doom_notice(verdict)))
        if self.guard.stop_verdict is not None:
            run.halted = self.halt_message()
        if verdict.action in ("block", "stop"):
            return Decision.refuse("blocked", f"blocked by the doom-loop ladder: {verdict.message}")
        return None

    def observed(self, run: RunState, call: PlannedCall, outcome: ToolOutcome) -> None:
        key = call.loop_key
        if key.exempt or key.scored is None or outcome.status != "succeeded":
            return
        if len(self._results) >= MAX_TRACKED_RESULTS and key.scored not in self._results:
            return
        from amos.policy.loop_policy import result_fingerprint

        seen = self._results.setdefault(key.scored, [])
        seen.append(result_fingerprint(outcome.result))
        del seen[:-2]

    def run_finishing(self, run: RunState) -> None:
        self.transcript.session.doom_loop = self.guard.state()

    def diagnostics(self) -> dict:
        """The doom-loop part of the loop diagnostics."""
        return self.guard.diagnostics()
