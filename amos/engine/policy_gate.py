"""The loop-policy gate: admission before dispatch, observations, recovery after a round.

seeds/loop-policy-bounded-recovery.txt; spec/stop-receipts.md. One gate per execution
holds the :class:`~amos.loop_guard.LoopGuard` (the pure tracker joined to the host's
checks). It admits each call last in the gate order, just before dispatch: an
identical action already admitted is answered ``blocked``; a bound reached stops the
run before dispatch. After each round it turns failures, refused repeated reads and an
unchanged progress key into one labelled recovery turn, or a stop once the budget is
spent. Completion checks with a policy are decided by :mod:`amos.engine.completion`
through :meth:`PolicyGate.guard`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from amos.engine.calls import PlannedCall
from amos.engine.gates import Decision, Gate, RoundControl
from amos.engine.state import RunState
from amos.engine.transcript import Transcript
from amos.events import Notice
from amos.loop_guard import LoopGuard, RoundVerdict, make_packet
from amos.messages import Message
from amos.policy.loop_policy import LoopPolicy
from amos.policy.stop import MAX_OBSERVATIONS, LoopDiagnostics
from amos.policy.verifiers import CheckerError
from amos.tools.base import ToolOutcome


class PolicyGate(Gate):
    """The loop policy of one execution (last in the gate order).

    Build with :meth:`start`.

    Args:
        policy: the policy in force.
        guard: its run-time guard.
        transcript: where recovery feedback goes.
        workspace: the workspace root (for the checker packet).
    """

    name = "loop_policy"

    def __init__(self, policy: LoopPolicy, guard: LoopGuard, transcript: Transcript, workspace: Path):
        self.policy = policy
        self.guard = guard
        self.transcript = transcript
        self.workspace = workspace

    @classmethod
    async def start(cls, run: RunState, policy: LoopPolicy, *, transcript: Transcript, workspace: Path,
                    env: dict[str, str]) -> PolicyGate | None:
        """The gate for this execution, its Python callbacks captured now.

        Returns:
            None when a callback cannot be loaded: the run stopped ``checker_error``
            before any model or tool dispatch.
        """
        try:
            guard = await LoopGuard.start(policy, workspace=workspace, env=env, record=run.record,
                                          pins=transcript.session.host.checker_pins)
        except CheckerError as exc:
            run.stop("checker_error", "checker_error", str(exc))
            return None
        return cls(policy, guard, transcript, workspace)

    def packet(self, run: RunState) -> Callable[[], Any]:
        """A builder of the checker context packet for this moment of the run."""
        rec = run.record
        return make_packet(execution_id=rec.execution_id, iteration=rec.steps, output_text=rec.output_text,
                           observations=list(rec.observations), workspace=self.workspace)

    # ------------------------------------------------------------------ the gate

    def round_declared(self, run: RunState, calls: Sequence[PlannedCall]) -> None:
        self.guard.begin_round()

    async def admit(self, run: RunState, call: PlannedCall, round: RoundControl) -> Decision | None:
        if not call.valid:
            return None
        progress_now = None
        progress = self.policy.progress
        if progress is not None and progress.configured and call.identity is not None and \
                self.guard.tracker.repeats(call.tool_name, call.effect, call.identity):
            try:  # a repeated command: has the world moved since? (polling a build, issue 17 item 13)
                progress_now = await self.guard.sample_progress(self.packet(run))
            except CheckerError as exc:
                run.stop("checker_error", "checker_error", str(exc))
                return Decision.stopped()
        admission = self.guard.admit(call.call_id, call.tool_name, call.effect, call.call.arguments,
                                     fingerprint=call.identity, progress_now=progress_now)
        if admission.decision == "run":
            return None
        if admission.decision == "blocked":
            return Decision.refuse("blocked", admission.message)
        run.stop(admission.cause or "policy_stop", admission.reason or "repeated_action", admission.message,
                 {"max_tracked": self.policy.max_tracked} if admission.reason == "tracking_bound" else None)
        return Decision.stopped()

    def observed(self, run: RunState, call: PlannedCall, outcome: ToolOutcome) -> None:
        self.guard.observe(call.call_id, call.tool_name, outcome.effect, outcome.status, outcome.completion,
                           outcome.result, outcome.error)

    async def round_finished(self, run: RunState) -> None:
        verdict = await self.guard.after_round(self.packet(run))
        run.record.progress_changed = self.guard.tracker.progress_changed
        self.apply(run, verdict)

    def run_finishing(self, run: RunState) -> None:
        rec, tracker = run.record, self.guard.tracker
        rec.recovery_attempts = tracker.recovery_attempts
        rec.progress_changed = tracker.progress_changed
        rec.tracked = tracker.counts()
        rec.policy_state = tracker.to_state() if run.pending is not None else None

    # ------------------------------------------------------------------ recovery

    def apply(self, run: RunState, verdict: RoundVerdict) -> bool:
        """Apply a policy verdict: stop, or append labelled host feedback.

        Returns:
            True when the run stopped.
        """
        if verdict.stop is not None:
            run.stop(*verdict.stop)
            return True
        if verdict.feedback is not None:
            run.record.recovery_attempts = self.guard.tracker.recovery_attempts
            self.transcript.append(Message.user(verdict.feedback, kind="feedback"))
            first = verdict.feedback.splitlines()[0].rsplit(": ", 1)[-1].rstrip("]")
            run.emit(Notice(level="warning", phase="recovering",
                            text=f"loop: recovering ({run.record.recovery_attempts}/"
                                 f"{self.policy.max_recovery_attempts}) — {first}"))
        return False

    def live_diagnostics(self, run: RunState, doom: dict | None) -> LoopDiagnostics:
        """Diagnostics of the execution while it runs (phase ``running`` or ``recovering``)."""
        return live_diagnostics(run, self, doom, self.transcript)


def live_diagnostics(run: RunState, gate: PolicyGate | None, doom: dict | None,
                     transcript: Transcript) -> LoopDiagnostics:
    """Loop diagnostics of a running execution, with or without a loop policy."""
    rec = run.record
    messages = transcript.messages
    recovering = bool(messages and messages[-1].kind == "feedback" and gate is not None)
    tracker = gate.guard.tracker if gate is not None else None
    return LoopDiagnostics(
        phase="recovering" if recovering else "running", execution_id=rec.execution_id,
        iterations=rec.steps, recovery_attempts=tracker.recovery_attempts if tracker else 0,
        max_recovery_attempts=gate.policy.max_recovery_attempts if gate else None,
        completion=rec.completion, doom_loop=doom,
        tracked=tracker.counts() if tracker else {"observations": len(rec.observations), "max_tracked": None},
        observations=[o.model_copy() for o in rec.observations[-MAX_OBSERVATIONS:]],
        observations_truncated=len(rec.observations) > MAX_OBSERVATIONS,
        policy_enabled=gate is not None)
