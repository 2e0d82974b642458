"""Deciding completion when the model answers: the one place a run is judged done.

spec/stop-receipts.md (causes ``answer``, ``checker_error``, ``recovery_exhausted``;
verdict rows 6-9) and seeds/loop-policy-bounded-recovery.txt "Completion". Without a
loop policy, ``--verify CMD`` (or the config's ``completion.command``) is run once:
exit 0 ends the run ``answer/completed``, anything else ``answer/check_failed``. With a
loop policy every configured completion kind runs; a false verdict becomes a labelled
recovery turn while the budget lasts, then ``recovery_exhausted``. A check that cannot
give a verdict is ``checker_error``, never the model's fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from amos.engine.policy_gate import PolicyGate
from amos.engine.settings import RunSettings
from amos.engine.state import RunState
from amos.engine.transcript import Transcript
from amos.events import Notice
from amos.policy.verifiers import CheckerError, run_command_check


class Completion:
    """Runs the completion checks when the model answers and records the verdict.

    Args:
        settings: ``verify`` and ``verify_timeout_s``.
        workspace: where checks run.
        env: the child environment of checks (no provider keys).
        transcript: the session (a check must not race a change to it).
    """

    def __init__(self, settings: RunSettings, workspace: Path, env: Mapping[str, str], transcript: Transcript):
        self.settings = settings
        self.workspace = workspace
        self.env = env
        self.transcript = transcript

    def configured(self, policy_gate: PolicyGate | None) -> bool:
        """True when some host check must confirm before a run is ``completed``."""
        if policy_gate is not None:
            return policy_gate.policy.completion_configured
        return bool(self.settings.verify)

    async def decide(self, run: RunState, policy_gate: PolicyGate | None) -> bool:
        """The model answered: run the checks.

        Returns:
            True when the run stopped; False after a recovery turn was appended (loop
            policy, the check said not done, budget left).
        """
        if policy_gate is not None:
            return await self._with_policy(run, policy_gate)
        command = self.settings.verify
        if not command:
            run.stop("answer", "answer_returned", "the model answered; no completion check is configured")
            return True
        run.emit(Notice(text=f"completion check: running `{command}`"))
        try:
            result = await run_command_check(command, workspace=self.workspace, env=self.env,
                                             timeout_s=self.settings.verify_timeout_s)
        except CheckerError as exc:
            run.stop("checker_error", "checker_error", str(exc))
            return True
        run.record.completion = result
        if result.complete:
            run.emit(Notice(text=f"completion check passed: `{command}` exited 0"))
            run.stop("answer", "completed", f"the model answered and the completion check `{command}` passed")
        else:
            run.emit(Notice(level="warning", text=f"completion check failed: `{command}` {result.reason}"))
            run.stop("answer", "check_failed",
                     f"the model answered but the completion check `{command}` failed ({result.reason})")
        return True

    async def _with_policy(self, run: RunState, gate: PolicyGate) -> bool:
        if not gate.policy.completion_configured:
            run.stop("answer", "answer_returned", "the model answered; the loop policy has no completion check")
            return True
        run.emit(Notice(text="completion check: running the host checks"))
        before = len(self.transcript.messages)
        try:
            result = await gate.guard.check_completion(list(run.record.observations), gate.packet(run))
        except CheckerError as exc:
            run.stop("checker_error", "checker_error", str(exc))
            return True
        if len(self.transcript.messages) != before:
            run.stop("policy_stop", "state_changed",
                     "the session changed while the completion check ran, so its verdict cannot confirm")
            return True
        run.record.completion = result
        if result.complete:
            run.emit(Notice(phase="complete", text="completion check passed: the host confirmed the work is done"))
            run.stop("answer", "completed", "the model answered and every host completion check confirmed")
            return True
        run.emit(Notice(level="warning", text=f"completion check: not done — {result.reason}"))
        return gate.apply(run, gate.guard.recover_completion(result))
