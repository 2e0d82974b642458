"""The loop policy's part of :class:`~amos.runner.AgentRunner` (a mixin).

Capturing the policy for each execution, labelled recovery feedback, the checks
after each tool round and when the model answers, and live loop diagnostics
(seeds/loop-policy-bounded-recovery.txt; spec/stop-receipts.md). Uses the runner's
``settings``, ``session``, ``tools``, ``workspace``, ``env``, ``doom`` and ``_emit``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amos.errors import ConfigError
from amos.events import Notice
from amos.execution import Execution
from amos.loop_guard import LoopGuard, RoundVerdict, make_packet
from amos.messages import Message
from amos.policy.loop_policy import LoopPolicy, coerce_policy
from amos.policy.stop import MAX_OBSERVATIONS, LoopDiagnostics
from amos.policy.verifiers import CheckerError

_UNSET = object()


class PolicyDuties:
    """Loop-policy behaviour of the runner (host API ``set_loop_policy``/``loop_policy``)."""

    settings: Any
    session: Any
    tools: Any
    workspace: Any
    env: dict[str, str]
    doom: Any
    _emit: Callable[..., None]
    _live: Execution | None
    _policy_override: Any = _UNSET

    _ensure_idle: Callable[[], None]  # provided by AgentRunner

    def set_loop_policy(self, policy: Any) -> None:
        """Override the loop policy for later executions of this runner (host only).

        The override stays in memory: it is never saved with the session, and model
        output can never install or change it (seeds/loop-policy-bounded-recovery.txt
        "Examples, AMOS and validation").

        Args:
            policy: None (explicitly no policy), a ``LoopPolicy``, a ``LoopPolicyConfig``
                or a JSON object as in spec/config.md ``loop_policy``.

        Raises:
            SessionError: ``busy`` while a run is active.
            ConfigError: the policy does not validate, or ``read_only_tools`` names a
                tool that does not declare effect ``read``.
        """
        self._ensure_idle()
        coerced = coerce_policy(policy)
        if coerced is not None:
            try:
                coerced.check_tools({spec.name: self.tools.effect(spec.name) for spec in self.tools.specs()})
            except ValueError as exc:
                raise ConfigError(str(exc), json_path="loop_policy") from None
        self._policy_override = coerced

    def loop_policy(self) -> LoopPolicy | None:
        """The loop policy the next execution uses (``--verify`` folded into ``completion``)."""
        policy = self.settings.loop_policy if self._policy_override is _UNSET else self._policy_override
        return policy.with_verify(self.settings.verify) if policy is not None else None


    async def _start_policy(self, ex: Execution) -> bool:
        """Capture the policy (and its Python callbacks) for this execution.

        Returns:
            False when a callback cannot be loaded: the run stops ``checker_error``
            before any model or tool dispatch.
        """
        ex.policy = self.loop_policy()
        if ex.policy is None:
            return True
        try:
            ex.guard = await LoopGuard.start(ex.policy, workspace=self.workspace, env=self.env,
                                             record=ex.record, pins=self.session.host.checker_pins)
        except CheckerError as exc:
            ex.stop("checker_error", "checker_error", str(exc))
            return False
        return True

    def _packet(self, ex: Execution) -> Callable[[], Any]:
        return make_packet(execution_id=ex.record.execution_id, iteration=ex.record.steps,
                           output_text=ex.record.output_text, observations=list(ex.record.observations),
                           workspace=self.workspace)

    def _feedback(self, ex: Execution, verdict: RoundVerdict) -> bool:
        """Apply a policy verdict: stop, or append labelled host feedback.

        Returns:
            True when the run stopped.
        """
        if verdict.stop is not None:
            cause, reason, detail = verdict.stop
            ex.stop(cause, reason, detail)
            return True
        if verdict.feedback is not None:
            assert ex.guard is not None
            ex.record.recovery_attempts = ex.guard.tracker.recovery_attempts
            self.session.messages.append(Message.user(verdict.feedback, kind="feedback"))
            limit = ex.policy.max_recovery_attempts if ex.policy else 0
            first = verdict.feedback.splitlines()[0].rsplit(": ", 1)[-1].rstrip("]")
            self._emit(ex, Notice(level="warning", phase="recovering",
                                  text=f"loop: recovering ({ex.record.recovery_attempts}/{limit}) — {first}"))
        return False

    async def _after_round(self, ex: Execution) -> bool:
        """Loop-policy duties after a tool round; True when the run stopped."""
        if ex.guard is None:
            return False
        verdict = await ex.guard.after_round(self._packet(ex))
        ex.record.progress_changed = ex.guard.tracker.progress_changed
        return self._feedback(ex, verdict)

    def _live_diagnostics(self, ex: Execution) -> LoopDiagnostics:
        rec = ex.record
        guard = ex.guard
        recovering = bool(self.session.messages and self.session.messages[-1].kind == "feedback" and guard)
        return LoopDiagnostics(
            phase="recovering" if recovering else "running", execution_id=rec.execution_id,
            iterations=rec.steps, recovery_attempts=guard.tracker.recovery_attempts if guard else 0,
            max_recovery_attempts=ex.policy.max_recovery_attempts if ex.policy else None,
            completion=rec.completion, doom_loop=self.doom.diagnostics() if self.doom else None,
            tracked=guard.tracker.counts() if guard else {"observations": len(rec.observations),
                                                           "max_tracked": None},
            observations=[o.model_copy() for o in rec.observations[-MAX_OBSERVATIONS:]],
            observations_truncated=len(rec.observations) > MAX_OBSERVATIONS,
            policy_enabled=ex.policy is not None)

    async def _complete_with_policy(self, ex: Execution) -> bool:
        policy, guard = ex.policy, ex.guard
        assert policy is not None and guard is not None
        if not policy.completion_configured:
            ex.stop("answer", "answer_returned", "the model answered; the loop policy has no completion check")
            return True
        self._emit(ex, Notice(text="completion check: running the host checks"))
        before = len(self.session.messages)
        try:
            result = await guard.check_completion(list(ex.record.observations), self._packet(ex))
        except CheckerError as exc:
            ex.stop("checker_error", "checker_error", str(exc))
            return True
        if len(self.session.messages) != before:
            ex.stop("policy_stop", "state_changed",
                    "the session changed while the completion check ran, so its verdict cannot confirm")
            return True
        ex.record.completion = result
        if result.complete:
            self._emit(ex, Notice(phase="complete", text="completion check passed: the host confirmed the work is done"))
            ex.stop("answer", "completed", "the model answered and every host completion check confirmed")
            return True
        self._emit(ex, Notice(level="warning", text=f"completion check: not done — {result.reason}"))
        return self._feedback(ex, guard.recover_completion(result))
