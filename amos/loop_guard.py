"""The loop policy at run time: one :class:`LoopGuard` per execution.

It joins the pure :class:`~amos.policy.loop_policy.PolicyTracker` to the host's I/O
(the Python checker captured once per execution, progress-key sampling, completion
checks) and collects what one tool round produced — failures, refused repeated
reads, uncertain effects — so the runner can decide, after the round, between a
labelled recovery turn and a stop (seeds/loop-policy-bounded-recovery.txt "Bounds
and recovery"; spec/stop-receipts.md "Causes").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amos.policy.loop_policy import (
    STOP_FOR_KIND,
    Admission,
    LoopPolicy,
    PolicyTracker,
    RecoveryKind,
    feedback_text,
)
from amos.policy.stop import CompletionResult, LoopObservation
from amos.policy.verifiers import (
    CheckerError,
    call_checker,
    context_packet,
    load_checker,
    run_completion_checks,
    run_progress_command,
    validate_progress_key,
)


@dataclass(frozen=True)
class RoundVerdict:
    """What the policy concluded after one tool round.

    Attributes:
        stop: ``(cause, reason, detail)`` when the run must stop now, else None.
        feedback: the labelled host-feedback text to append, else None.
        kind: the recovery kind that produced the feedback or the stop.
    """

    stop: tuple[str, str, str] | None = None
    feedback: str | None = None
    kind: RecoveryKind | None = None


@dataclass
class LoopGuard:
    """The loop policy of one execution.

    Build with :meth:`start`; the runner calls :meth:`admit` before dispatching a
    call, :meth:`observe` for every outcome, :meth:`after_round` after each tool
    round and :meth:`check_completion` when the model answers.
    """

    policy: LoopPolicy
    workspace: Path
    env: Mapping[str, str]
    tracker: PolicyTracker
    checker: Callable[[Any], Any] | None = None
    progress_fn: Callable[[Any], Any] | None = None
    _failures: list[str] = field(default_factory=list)
    _repeated: list[str] = field(default_factory=list)
    _uncertain: list[str] = field(default_factory=list)

    @classmethod
    async def start(cls, policy: LoopPolicy, *, workspace: Path, env: Mapping[str, str],
                    record: Any = None, pins: dict[str, str] | None = None) -> LoopGuard:
        """A guard for a new (or resumed) execution; Python callbacks are captured now.

        Imports run in a daemon thread bounded by ``checker_timeout_s``, so a module
        that hangs or exits at import cannot take amos with it.

        Args:
            policy: the policy in force.
            workspace: the workspace root.
            env: the child environment for commands.
            record: the ``ExecutionRecord`` being resumed (its ``policy_state`` and
                ``recovery_attempts`` carry over an approval pause), or None.
            pins: the session's checker pins (see :func:`~amos.policy.verifiers.load_checker`).

        Raises:
            CheckerError: a configured Python checker or progress function cannot be loaded.
        """
        tracker = PolicyTracker.from_state(policy, getattr(record, "policy_state", None),
                                           recovery_attempts=getattr(record, "recovery_attempts", 0))
        checker = None
        progress_fn = None
        timeout = policy.checker_timeout_s
        if policy.completion and policy.completion.python:
            spec = policy.completion.python
            checker = await call_checker(lambda _: load_checker(spec, workspace, pins), None, timeout,
                                         what=f"loading python checker {spec!r}")
        if policy.progress and policy.progress.python:
            spec = policy.progress.python
            progress_fn = await call_checker(lambda _: load_checker(spec, workspace, pins), None, timeout,
                                             what=f"loading progress function {spec!r}")
        return cls(policy=policy, workspace=workspace, env=env, tracker=tracker, checker=checker,
                   progress_fn=progress_fn)

    # ------------------------------------------------------------------ a round

    def begin_round(self) -> None:
        """A new model response's calls are about to be admitted."""
        self.tracker.begin_round()
        self._failures.clear()
        self._repeated.clear()
        self._uncertain.clear()

    def admit(self, call_id: str, tool_name: str, effect: str, arguments: Any, *,
              fingerprint: str | None = None, progress_now: str | None = None) -> Admission:
        """The policy's admission decision for a call about to be dispatched
        (``fingerprint``: the call's identity, when the host computed it; ``progress_now``:
        the progress key sampled for a repeated action)."""
        admission = self.tracker.admit(call_id, tool_name, effect, arguments, fingerprint=fingerprint,
                                       progress_now=progress_now)
        if admission.feedback:
            self._repeated.append(f"{tool_name} ({call_id}) was refused: {admission.message}")
        return admission

    def observe(self, call_id: str, tool_name: str, effect: str, status: str, completion: str,
                result: Any, error: str | None) -> None:
        """Record one outcome of the round."""
        verdict = self.tracker.observe(call_id, tool_name, effect, status, completion, result)
        if verdict == "uncertain":
            self._uncertain.append(f"{tool_name} ({call_id}, {status})")
        elif verdict == "failure":
            self._failures.append(f"{tool_name} ({call_id}) {status}: {(error or '').strip()[:300]}")

    async def after_round(self, packet: Callable[[], Any]) -> RoundVerdict:
        """Decide what follows a finished round: stop, a recovery turn, or nothing.

        Order: an uncertain write/unknown stops at once (``uncertain_effect``); then
        the progress key is sampled; then failures, refused repeated reads and an
        unchanged progress key each ask for recovery — one feedback turn covers them
        all, and when the budget is spent the first kind's cause stops the run.
        """
        if self._uncertain:
            return RoundVerdict(stop=(
                "policy_stop", "uncertain_effect",
                "a write/unknown action may or may not have happened (" + ", ".join(self._uncertain)
                + "); the run stops instead of guessing or repeating it"))
        kinds: list[tuple[RecoveryKind, str]] = []
        if self._failures:
            kinds.append(("failure", "These tool calls failed:\n- " + "\n- ".join(self._failures)))
        if self._repeated:
            kinds.append(("repeated_read", "\n".join(self._repeated)))
        if self.policy.progress and self.policy.progress.configured:
            try:
                key = await self.sample_progress(packet)
            except CheckerError as exc:
                return RoundVerdict(stop=("checker_error", "checker_error", str(exc)))
            if self.tracker.sample_progress(key):
                kinds.append(("progress", f"The host's progress key has not changed for "
                              f"{self.policy.max_unchanged_progress} tool round"
                              f"{'s' if self.policy.max_unchanged_progress != 1 else ''} in a row; what you are "
                              "doing is not moving the task forward."))
        if not kinds:
            return RoundVerdict()
        return self._recover(kinds)

    def _recover(self, kinds: Sequence[tuple[RecoveryKind, str]]) -> RoundVerdict:
        first = kinds[0][0]
        if not self.tracker.try_recover():
            cause, reason = STOP_FOR_KIND[first]
            limit = self.policy.max_recovery_attempts
            detail = (f"the host progress key stayed unchanged for {self.policy.max_unchanged_progress} tool "
                      f"rounds in a row and the recovery budget of {limit} feedback turn(s) is spent")
            if first == "failure":
                detail = f"a tool failed ({self._failures[0]}) and the recovery budget of {limit} is spent"
            elif first == "repeated_read":
                detail = f"{self._repeated[0]}; the recovery budget of {limit} is spent"
            return RoundVerdict(stop=(cause, reason, detail), kind=first)
        body = "\n\n".join(text for _, text in kinds)
        text = feedback_text(first, body, self.tracker.recovery_attempts, self.policy.max_recovery_attempts)
        return RoundVerdict(feedback=text, kind=first)

    async def sample_progress(self, packet: Callable[[], Any]) -> str:
        """One progress-key sample (command output hash, or the Python function's string).

        Raises:
            CheckerError: it raised, timed out or returned something invalid.
        """
        progress = self.policy.progress
        assert progress is not None
        timeout = self.policy.checker_timeout_s
        if progress.command:
            return await run_progress_command(progress.command, workspace=self.workspace, env=self.env,
                                              timeout_s=timeout)
        what = f"progress key {progress.python!r}"
        assert self.progress_fn is not None
        return validate_progress_key(await call_checker(self.progress_fn, packet(), timeout, what=what), what=what)

    # ------------------------------------------------------------------ completion

    async def check_completion(self, observations: Sequence[LoopObservation],
                               packet: Callable[[], Any]) -> CompletionResult:
        """Run every configured completion kind.

        Raises:
            CheckerError: some kind could not give a verdict.
        """
        spec = self.policy.completion
        assert spec is not None
        return await run_completion_checks(
            spec, workspace=self.workspace, env=self.env, observations=observations, checker=self.checker,
            packet=packet, checker_timeout_s=self.policy.checker_timeout_s)

    def recover_completion(self, result: CompletionResult) -> RoundVerdict:
        """A false completion verdict: a recovery turn, or ``recovery_exhausted``."""
        feedback = result.feedback or result.reason or "the completion check did not confirm"
        if not self.tracker.try_recover():
            limit = self.policy.max_recovery_attempts
            return RoundVerdict(stop=(
                "recovery_exhausted", "recovery_exhausted",
                f"the completion check still says not done ({result.reason or 'no reason'}) after "
                f"{limit} recovery turn(s)"), kind="completion")
        text = feedback_text("completion", feedback, self.tracker.recovery_attempts,
                             self.policy.max_recovery_attempts)
        return RoundVerdict(feedback=text, kind="completion")


def make_packet(*, execution_id: str, iteration: int, output_text: str,
                observations: Sequence[LoopObservation], workspace: Path | None = None,
                task_state: Any = None) -> Callable[[], Any]:
    """A builder of the checker context packet (built only when a Python callback needs it);
    ``task_state`` is the task notebook's snapshot, or None when task state is off."""
    return lambda: context_packet(execution_id=execution_id, iteration=iteration, output_text=output_text,
                                  observations=observations, workspace=workspace, task_state=task_state)
