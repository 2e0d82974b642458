"""Stop receipts, verdicts and loop diagnostics (spec/stop-receipts.md).

Pure code: the runner records a *cause* where control flow stopped and hands the
facts it observed to :func:`decide_verdict`, which applies the precedence table of
spec/stop-receipts.md "Verdicts" (background: seeds/stop-receipts-fr.txt).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from amos.messages import Usage
from amos.verdicts import EXIT_CODES, Phase, Verdict, phase_for, verdict_glyph  # noqa: F401 - re-exported

Cause = Literal[
    "answer",
    "output_limit",
    "refusal",
    "approval_required",
    "step_limit",
    "token_budget",
    "user_abort",
    "timeout",
    "tool_error",
    "provider_error",
    "doom_loop",
    "policy_stop",
    "checker_error",
    "no_progress",
    "recovery_exhausted",
    "storage_error",
]



class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


Baseline = Literal["passed", "failed", "error", "skipped"]
"""How the completion checks stood before the run's first model call (issue 16)."""


class CompletionResult(_Model):
    """Verdict of one host completion check.

    Attributes:
        complete: True only when the host check confirmed completion (None in a receipt
            whose run stopped before the checks ran at its end).
        reason: short reason word or sentence (at most 400 characters).
        feedback: what is missing, for the model (at most 2000 characters).
        output: the last lines (at most ~15) of a failing check's output, secrets
            masked — what people read in a text receipt.
        baseline: how the checks stood before the run's first model call.
    """

    complete: bool | None
    reason: str | None = None
    feedback: str | None = None
    output: str | None = None
    baseline: Baseline | None = None


class CheckInForce(_Model):
    """Which completion check decided a run, and where it came from (issue 16).

    Attributes:
        summary: the checks in one line (``command `pytest -q``, ``files report.json``,
            ``a person``…), or ``none``.
        source: ``flag`` (this run's ``--verify``), ``session`` (a check the session
            remembers), ``config`` (``loop_policy.completion``), ``demo`` (the demo
            project's own check), or ``none``.
        route: how completion was claimed: ``answer`` (a turn without tool calls),
            ``done_tool`` (the configured done tool), or None when nothing was claimed.
        baseline: how the checks stood before the first model call.
        workspace_changed: the workspace's files differ from the baseline (None: not
            compared).
        confirmed_by: the person who confirmed completion (``completion.human``).
    """

    summary: str = "none"
    source: Literal["flag", "session", "config", "demo", "none"] = "none"
    route: Literal["answer", "done_tool"] | None = None
    baseline: Baseline | None = None
    workspace_changed: bool | None = None
    confirmed_by: str | None = None


class SandboxInForce(_Model):
    """How commands ran and whether it was a plan run (issue 19, "Receipts").

    Attributes:
        mode: ``read-only``, ``workspace-write`` or ``danger-full-access`` (the mode
            commands ran in; plan mode runs them ``read-only``).
        available: the sandbox works here (False: commands ran unsandboxed after asking).
        network: commands could reach the network.
        plan: a plan run (``--plan`` / ``/plan``): write tools denied, a plan asked for.
    """

    mode: str
    available: bool
    network: bool
    plan: bool = False


class ApprovalInfo(_Model):
    """One held tool call waiting for a person's decision.

    Attributes:
        call_id: the model's call id.
        tool: tool name.
        owner: who decides (``approvals.owner``), None when unrouted.
        deadline: ISO-8601 UTC time after which the approval is overdue.
        resume_token: ``<session>:<execution>:<call>`` naming this exact pause.
    """

    call_id: str
    tool: str
    owner: str | None = None
    deadline: str | None = None
    resume_token: str | None = None


class StopReceipt(_Model):
    """Why a run stopped and what to conclude (spec/stop-receipts.md "StopReceipt fields")."""

    verdict: Verdict
    cause: Cause | None
    reason: str
    detail: str
    execution_id: str
    steps: int = 0
    tool_call_count: int = 0
    recovery_attempts: int = 0
    usage: Usage = Field(default_factory=Usage)
    completion: CompletionResult | None = None
    check: CheckInForce | None = None
    approval: ApprovalInfo | None = None
    pending_approvals: list[ApprovalInfo] = Field(default_factory=list)
    stop_condition: dict[str, Any] | None = None
    policy: str | None = None
    sandbox: SandboxInForce | None = None
    started_at: str
    ended_at: str

    @property
    def exit_code(self) -> int:
        """Process exit code for this verdict (spec/cli.md)."""
        return EXIT_CODES[self.verdict]


class LoopObservation(_Model):
    """One tool execution as diagnostics show it: no raw arguments or bodies."""

    tool: str
    call_id: str
    effect: str
    status: str


class LoopDiagnostics(_Model):
    """Loop diagnostics of the latest execution (spec/stop-receipts.md "Loop diagnostics").

    Attributes:
        phase: ``running``, ``recovering``, ``complete``, ``input-needed``, ``stopped``.
        execution_id: the execution described.
        iterations: model calls made by the execution.
        reason: the stopping reason word (None while running).
        status: ``completed`` only when a host completion check confirmed.
        recovery_attempts / max_recovery_attempts: feedback turns used / allowed
            (limit None without a loop policy).
        completion: last completion verdict (an earlier false one is kept when a later
            bound stops the run).
        doom_loop: doom-loop streaks and last verdict (None until that capability lands).
        tracked: tracked counts with their bounds.
        observations: the last 100 tool executions.
        observations_truncated: True when older observations were dropped.
        policy_enabled: whether a loop policy was in force.
    """

    phase: Phase = "running"
    execution_id: str
    iterations: int = 0
    reason: str | None = None
    status: Literal["completed"] | None = None
    recovery_attempts: int = 0
    max_recovery_attempts: int | None = None
    completion: CompletionResult | None = None
    doom_loop: dict[str, Any] | None = None
    tracked: dict[str, int | None] = Field(default_factory=dict)
    observations: list[LoopObservation] = Field(default_factory=list)
    observations_truncated: bool = False
    policy_enabled: bool = False


MAX_OBSERVATIONS = 100


@dataclass(frozen=True)
class StopFacts:
    """Facts the runner observed that the verdict table needs.

    Attributes:
        completion_configured: a host completion check was configured for the run.
        completion_confirmed: the last check's verdict (None when none ran).
        approval_routed: the pending approval has an owner, a deadline and a token.
        effect_succeeded: some write/unknown-effect tool call succeeded in the run.
        progress_changed: a host progress key changed during the run.
        reason: the reason word recorded with the cause.
        baseline_passed: every check already passed before the first model call.
        workspace_changed: the workspace's files changed since that baseline (None:
            not compared).
        confirmed_by_person: a person confirmed completion (``completion.human``).
    """

    completion_configured: bool = False
    completion_confirmed: bool | None = None
    approval_routed: bool = False
    effect_succeeded: bool = False
    progress_changed: bool = False
    reason: str = ""
    baseline_passed: bool = False
    workspace_changed: bool | None = None
    confirmed_by_person: bool = False


_BOUNDED = {"step_limit", "token_budget", "user_abort", "doom_loop", "output_limit"}


def decide_verdict(cause: str | None, facts: StopFacts) -> Verdict:
    """Apply the verdict precedence table, first matching row wins.

    Args:
        cause: the recorded stop cause, or None when none was recorded.
        facts: what the runner observed.

    Returns:
        The verdict (spec/stop-receipts.md "Verdicts, in precedence order").
    """
    if cause in ("tool_error", "provider_error", "refusal", "storage_error"):
        return "FAILED"
    if cause == "approval_required":
        return "WAITING" if facts.approval_routed else "WAITING_UNROUTED"
    if cause == "no_progress":
        return "STUCK"
    if cause == "timeout" and not (facts.effect_succeeded or facts.progress_changed):
        return "STUCK"
    if cause in _BOUNDED or cause == "timeout":
        return "BOUNDED_STOP"
    if cause == "policy_stop" and facts.reason != "uncertain_effect":
        return "BOUNDED_STOP"
    if cause == "answer":
        if facts.reason == "empty_answer":
            return "UNCERTAIN"  # no text, no tool calls, and no check that passed
        if facts.confirmed_by_person:
            if facts.reason == "check_already_passing" and facts.completion_confirmed is True:
                return "ANSWERED"  # a "yes" for work nothing shows this run did
            # a check that no longer passes after a person said yes: the signals disagree
            return "VERIFIED_COMPLETE" if facts.reason == "confirmed" else "UNCERTAIN"
        confirmed = facts.completion_confirmed is True
        if (facts.reason in ("completed", "check_already_passing")) != confirmed and \
                facts.reason in ("completed", "check_failed", "check_already_passing"):
            return "UNCERTAIN"  # the recorded reason and the check's verdict disagree
        if facts.completion_configured:
            if not confirmed:
                return "FALSE_COMPLETE"
            already = facts.baseline_passed and facts.workspace_changed is False
            if already != (facts.reason == "check_already_passing"):
                return "UNCERTAIN"
            return "ANSWERED" if already else "VERIFIED_COMPLETE"
        return "ANSWERED"
    if cause == "recovery_exhausted":
        return "FALSE_COMPLETE"
    return "UNCERTAIN"
