"""Building the stop receipt and loop diagnostics of a finished execution.

The verdict itself is :func:`amos.policy.stop.decide_verdict`; this module gathers
the facts the runner recorded into the receipt fields of spec/stop-receipts.md.
"""

from __future__ import annotations

from typing import Any

from amos.policy.stop import (
    MAX_OBSERVATIONS,
    ApprovalInfo,
    CheckInForce,
    CompletionResult,
    LoopDiagnostics,
    SandboxInForce,
    StopFacts,
    StopReceipt,
    decide_verdict,
    phase_for,
)
from amos.sessions import ExecutionRecord, utc_now


def build_receipt(
    record: ExecutionRecord,
    *,
    cause: str | None,
    reason: str,
    detail: str,
    stop_condition: dict[str, Any] | None,
    pending: list[ApprovalInfo],
    completion_configured: bool,
    policy_hash: str | None,
    policy_enabled: bool,
    max_recovery_attempts: int | None,
    phase: str | None = None,
    check: CheckInForce | None = None,
    sandbox: SandboxInForce | None = None,
    workspace_changed: bool | None = None,
) -> tuple[StopReceipt, LoopDiagnostics]:
    """The receipt and diagnostics of an execution that just stopped.

    Args:
        record: the execution's record (steps, usage, calls, completion).
        cause / reason / detail: recorded where the run stopped (None cause → UNCERTAIN).
        stop_condition: which configured limit fired and its inputs.
        pending: undecided held calls when the run paused.
        completion_configured: a host completion check was configured.
        policy_hash: hash of the loop policy and doom-loop config in force.
        policy_enabled: a loop policy was configured.
        max_recovery_attempts: the policy's recovery limit, if any.
        phase: override of the diagnostics phase (None: from the verdict).
        check: which completion check was in force and how it stood (issue 16).
        sandbox: how commands ran and whether it was a plan run (issue 19).
        workspace_changed: the workspace differs from the completion baseline (None:
            not compared).
    """
    approval = pending[0] if pending else None
    completion = record.completion
    facts = StopFacts(
        completion_configured=completion_configured,
        completion_confirmed=completion.complete if completion else None,
        approval_routed=bool(approval and approval.owner and approval.deadline and approval.resume_token),
        effect_succeeded=record.effect_succeeded,
        progress_changed=record.progress_changed,
        reason=reason,
        baseline_passed=record.baseline == "passed",
        workspace_changed=workspace_changed,
        confirmed_by_person=record.confirmed_by is not None,
    )
    if record.baseline is not None:  # the receipt says how the checks stood before the run
        completion = (completion.model_copy(update={"baseline": record.baseline}) if completion is not None
                      else CompletionResult(complete=None, reason="not checked at the end of the run",
                                            baseline=record.baseline))
    verdict = decide_verdict(cause, facts)
    receipt = StopReceipt(
        verdict=verdict, cause=cause, reason=reason or "unrecorded",
        detail=detail or "no stop cause was recorded", execution_id=record.execution_id, steps=record.steps,
        tool_call_count=len(record.tool_calls), recovery_attempts=record.recovery_attempts,
        usage=record.usage.model_copy(), completion=completion, check=check, sandbox=sandbox,
        approval=approval, pending_approvals=pending, stop_condition=stop_condition, policy=policy_hash,
        started_at=record.started_at, ended_at=utc_now())
    confirmed = bool(completion and completion.complete and verdict == "VERIFIED_COMPLETE")
    loop = LoopDiagnostics(
        phase=phase or phase_for(verdict), execution_id=record.execution_id, iterations=record.steps,
        reason=receipt.reason, status="completed" if confirmed else None,
        recovery_attempts=record.recovery_attempts,
        max_recovery_attempts=max_recovery_attempts, completion=completion,
        tracked=record.tracked or {"observations": len(record.observations), "max_tracked": None},
        observations=record.observations[-MAX_OBSERVATIONS:],
        observations_truncated=len(record.observations) > MAX_OBSERVATIONS,
        policy_enabled=policy_enabled)
    return receipt, loop
