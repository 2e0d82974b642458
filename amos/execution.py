"""Execution state and tool rounds of the managed loop.

:class:`RunSettings` holds the limits in force, :class:`Execution` the mutable
state of one execution, and :class:`ToolRounds` (mixed into
:class:`~amos.runner.AgentRunner`) runs one round of tool calls: permissions,
approvals that ask or pause, concurrent reads and ordered writes
(spec/tools.md, spec/stop-receipts.md "Approvals that pause a run"), and recording
every outcome so the history stays valid for every provider.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from amos.approvals import call_fingerprint, new_pause
from amos.doom_guard import DoomLoopGuard, doom_notice
from amos.events import ApprovalRequested, Notice, RunEvent, ToolCallFinished, ToolCallStarted
from amos.evidence.capture import EvidenceCapture
from amos.loop_guard import LoopGuard
from amos.messages import Message, ToolCallPart, ToolResultPart, Usage
from amos.policy.loop_policy import LoopPolicy
from amos.policy.stop import LoopObservation
from amos.sessions import ExecutionRecord, PendingApproval, Session
from amos.tools.base import ToolOutcome
from amos.tools.manager import ToolManager


@dataclass
class RunSettings:
    """Limits and host choices in force for the runs of one runner (STYLE.md §4).

    Attributes:
        max_steps: model calls per execution; the step limit fires when the count
            equals it, after that step's tool calls ran.
        token_budget: cumulative tokens (input + output) per execution, or None.
        timeout_s: wall-clock limit of one run (seconds), or None.
        verify: completion-check command (``--verify``), or None.
        verify_timeout_s: limit of one completion check (seconds).
        approvals_owner: who decides paused approvals (None → WAITING_UNROUTED).
        approvals_deadline_s: how long a paused approval may wait (seconds).
        auto_approve: ``--yes``: approve every call that would ask (never ``deny``).
        interactive: a person can answer approvals now (the TUI); otherwise an
            ``ask`` call pauses the run WAITING.
        policy_hash: hash of the loop policy and doom-loop config in force.
        loop_policy: the loop policy from config (None: no policy); ``--verify``
            becomes its ``completion.command``. ``AgentRunner.set_loop_policy``
            overrides it in memory.
        autosave: save the session at the end of every run (always for ``amos run``;
            ``sessions.autosave`` in the TUI).
        secrets: values of every provider key variable set in the environment; masked
            in every tool result before it reaches the history, the model, the
            screen or the disk.
    """

    max_steps: int = 20
    token_budget: int | None = None
    timeout_s: float | None = None
    verify: str | None = None
    verify_timeout_s: float = 120.0
    approvals_owner: str | None = None
    approvals_deadline_s: float = 86400.0
    auto_approve: bool = False
    interactive: bool = False
    policy_hash: str | None = None
    loop_policy: LoopPolicy | None = None
    autosave: bool = True
    secrets: tuple[str, ...] = field(default=(), repr=False)


@dataclass
class Execution:
    """Mutable state of one execution while the loop runs."""

    record: ExecutionRecord
    resumed: bool = False
    cause: str | None = None
    reason: str = ""
    detail: str = ""
    stop_condition: dict[str, Any] | None = None
    open_calls: list[ToolCallPart] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)
    pending: PendingApproval | None = None
    queue: asyncio.Queue | None = None
    usage_at_start: Usage = field(default_factory=Usage)
    turn_model: str = ""
    """Model spec of the current model call (an escalation model may differ)."""
    finish_detail: str | None = None
    policy: LoopPolicy | None = None
    guard: LoopGuard | None = None
    started_monotonic: float = field(default_factory=time.monotonic)

    def stop(self, cause: str, reason: str, detail: str, condition: dict[str, Any] | None = None) -> None:
        if self.cause is None:
            self.cause, self.reason, self.detail, self.stop_condition = cause, reason, detail, condition


EVIDENCE_RECENT = 50
"""Evidence receipts kept in the session's recent index."""


def _mask_outcome(outcome: ToolOutcome, secrets: tuple[str, ...]) -> ToolOutcome:
    """``outcome`` with every secret value masked in its content, error and result."""
    from amos.evidence.redact import redact, redact_text

    return outcome.model_copy(update={
        "content": redact_text(outcome.content, secrets),
        "error": redact_text(outcome.error, secrets) if outcome.error else outcome.error,
        "result": redact(outcome.result, secrets),
    })


def mask_text(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret value masked (unchanged when there are none)."""
    if not secrets or not text:
        return text
    from amos.evidence.redact import redact_text

    return redact_text(text, secrets)


def _clean_value(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return mask_text(clean_text(value), secrets)
    if isinstance(value, dict):
        return {_clean_value(k, secrets) if isinstance(k, str) else k: _clean_value(v, secrets)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_value(v, secrets) for v in value]
    return value


MAX_ARGUMENT_DEPTH = 64
"""Deepest nesting of tool-call arguments accepted (JSON levels)."""


def _depth(value: Any, limit: int = MAX_ARGUMENT_DEPTH + 1) -> int:
    """Nesting depth of a JSON value, counted up to ``limit`` (iteratively: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if level >= limit:
                return level
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def clean_call(call: ToolCallPart, secrets: tuple[str, ...]) -> ToolCallPart:
    """``call`` with lone surrogates replaced and secret values masked in every string.

    Returns the same object when nothing changed.
    """
    update: dict[str, Any] = {}
    for name in ("call_id", "tool_name", "raw_arguments"):
        value = getattr(call, name)
        if isinstance(value, str):
            cleaned = mask_text(clean_text(value), secrets)
            if cleaned != value:
                update[name] = cleaned
    if _depth(call.arguments) > MAX_ARGUMENT_DEPTH:
        # Nested deeper than any tool takes: the session could not even be saved (JSON
        # serialisation depth); it fails as invalid arguments, kept as a short note.
        update["arguments"] = None
        update["raw_arguments"] = f"<arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels were dropped>"
        return call.model_copy(update=update)
    try:
        cleaned_args = _clean_value(call.arguments, ())
        arguments = _clean_value(cleaned_args, secrets)
    except RecursionError:
        cleaned_args = arguments = call.arguments
    if cleaned_args != call.arguments:
        # lone surrogates: running the call with "?" substituted would act on something the
        # model did not name (another path); it fails as invalid arguments instead
        update["arguments"] = None
        update["raw_arguments"] = json.dumps(arguments, ensure_ascii=False)
    elif arguments != call.arguments:
        update["arguments"] = arguments
    return call.model_copy(update=update) if update else call


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (undecodable input bytes) replaced by ``?``."""
    return text.encode("utf-8", "replace").decode("utf-8") if not text.isascii() else text


class ToolRounds:
    """Tool-round behaviour of the runner (a mixin: uses ``tools``, ``settings``,
    ``session``, ``_emit`` and ``_approvals`` of :class:`~amos.runner.AgentRunner`)."""

    tools: ToolManager
    settings: RunSettings
    doom: DoomLoopGuard | None
    evidence: EvidenceCapture | None
    session: Session
    _approvals: dict[str, asyncio.Future]
    _session_approved: set[str]
    """Fingerprints of calls a person approved for the rest of this session (in memory)."""
    _emit: Callable[[Execution, RunEvent], None]

    async def _run_batch(self, ex: Execution, calls: list[ToolCallPart],
                         preset: Mapping[str, tuple[bool, str | None]]) -> bool:
        """Run one round of tool calls; returns True when the run stopped (an approval
        pause, or the loop policy stopping before a dispatch).

        Reads with permission ``allow`` run concurrently in groups; writes and unknown
        effects run one at a time in the order given (spec/tools.md). With a loop
        policy every call is admitted just before dispatch (:meth:`_admit`).
        """
        reads: list[ToolCallPart] = []
        self._declare_round(ex, calls)
        if ex.guard is not None:
            ex.guard.begin_round()
        for index, call in enumerate(calls):
            try:
                self.tools.validate(call)
            except Exception:  # noqa: BLE001 - invalid calls fail at execute, unasked
                await self._flush_reads(ex, reads)
                refused = self._doom_check(ex, call)
                if refused is not None:
                    self._record_outcome(ex, call, refused)
                else:
                    await self._run_one(ex, call)
                continue
            permission = self.tools.permission(call.tool_name)
            if self.doom is not None and self.doom.stop_verdict is not None and permission != "deny":
                # the ladder already stopped the run: refuse instead of asking a person in vain
                await self._flush_reads(ex, reads)
                self._record_outcome(ex, call, self._doom_check(ex, call))
                continue
            if permission == "deny":
                await self._flush_reads(ex, reads)
                self._record_outcome(ex, call, self.tools.outcome_for(
                    call, ex.record.execution_id, "denied",
                    f"denied: tool {call.tool_name} is set to deny (tools.permissions.{call.tool_name})"))
                continue
            if permission == "ask":
                fp = call_fingerprint(call)
                if fp in ex.record.denied:
                    await self._flush_reads(ex, reads)
                    self._record_outcome(ex, call, self.tools.outcome_for(
                        call, ex.record.execution_id, "denied",
                        f"denied again without asking (identical to a call denied earlier): {ex.record.denied[fp]}"))
                    continue
                if call.call_id in preset:
                    approved, reason = preset[call.call_id]
                elif self.settings.auto_approve:
                    approved, reason = True, None
                elif fp in self._session_approved:
                    approved, reason = True, None
                    self._emit(ex, Notice(text=f"{self.tools.summarize(call)}: approved for this session "
                                               "earlier (same tool, same arguments); not asked again"))
                elif self.settings.interactive:
                    await self._flush_reads(ex, reads)
                    approved, reason = await self._ask(ex, call)
                else:
                    await self._flush_reads(ex, reads)
                    self._pause(ex, calls[index:])
                    return True
                if not approved:
                    await self._flush_reads(ex, reads)
                    text = f"denied by the user: {reason}" if reason else "denied by the user"
                    ex.record.denied[fp] = text
                    self._record_outcome(ex, call, self.tools.outcome_for(
                        call, ex.record.execution_id, "denied", text))
                    continue
            refused = self._doom_check(ex, call)
            if refused is not None:
                await self._flush_reads(ex, reads)
                self._record_outcome(ex, call, refused)
                continue
            admitted = self._admit(ex, call)
            if admitted is None:
                await self._flush_reads(ex, reads)
                return True
            if not admitted:
                continue
            if permission == "allow" and self.tools.effect(call.tool_name) == "read":
                reads.append(call)
                continue
            await self._flush_reads(ex, reads)
            await self._run_one(ex, call)
        await self._flush_reads(ex, reads)
        return False

    def _admit(self, ex: Execution, call: ToolCallPart) -> bool | None:
        """Loop-policy admission of a call about to be dispatched.

        Returns:
            True to dispatch it; False when it was answered with a ``blocked`` outcome
            (an identical action already admitted, a refused repeated read); None
            when the run stopped before dispatch (tracking bound, unfingerprintable
            arguments, a read asked for again after feedback).
        """
        guard = ex.guard
        if guard is None:
            return True
        admission = guard.admit(call.call_id, call.tool_name, self.tools.effect(call.tool_name), call.arguments)
        if admission.decision == "run":
            return True
        if admission.decision == "blocked":
            self._record_outcome(ex, call, self.tools.outcome_for(call, ex.record.execution_id, "blocked",
                                                                  admission.message))
            return False
        ex.stop(admission.cause or "policy_stop", admission.reason or "repeated_action", admission.message,
                {"max_tracked": ex.policy.max_tracked} if admission.reason == "tracking_bound" and ex.policy else None)
        return None

    def _declare_round(self, ex: Execution, calls: list[ToolCallPart]) -> None:
        """Declare the round's checked calls to the doom-loop detector (spec §8 "Rounds")."""
        doom = self.doom
        if doom is None:
            return
        checked = []
        for call in calls:
            if self.tools.permission(call.tool_name) == "deny":
                continue
            key = doom.key_for(self.tools.loop_key(call.tool_name), call.arguments, call.raw_arguments)
            if key is not None:
                checked.append((call.tool_name, key))
        doom.declare(ex.record.steps, checked)

    def _doom_check(self, ex: Execution, call: ToolCallPart) -> ToolOutcome | None:
        """Score a call that is about to run; an outcome when the ladder refuses it.

        ``observe``/``steer``/``escalate`` let it run (with a notice; steer queues its
        message for the next model request); ``block`` and ``stop`` refuse it, and once
        ``stop`` fired every later call is refused too (spec/doom-loop-behaviour.md §8).
        """
        doom = self.doom
        if doom is None:
            return None
        if doom.stop_verdict is not None:
            return self.tools.outcome_for(call, ex.record.execution_id, "blocked",
                                          f"blocked: the doom-loop ladder stopped the run: {doom.stop_verdict.message}")
        key = doom.key_for(self.tools.loop_key(call.tool_name), call.arguments, call.raw_arguments)
        if key is None:
            return None
        full = call.raw_arguments if call.raw_arguments is not None else call.arguments
        verdict, duplicate = doom.score_call(call.tool_name, key, full, ex.record.steps)
        if verdict is None:
            return None
        if not duplicate:
            self._emit(ex, Notice(level="warning", text=doom_notice(verdict)))
        if verdict.action in ("block", "stop"):
            return self.tools.outcome_for(call, ex.record.execution_id, "blocked",
                                          f"blocked by the doom-loop ladder: {verdict.message}")
        return None

    async def _flush_reads(self, ex: Execution, reads: list[ToolCallPart]) -> None:
        if not reads:
            return
        batch = list(reads)
        reads.clear()
        if len(batch) == 1:
            await self._run_one(ex, batch[0])
            return
        for call in batch:
            self._started(ex, call)
        outcomes = await asyncio.gather(*(self.tools.execute(c, ex.record.execution_id) for c in batch))
        for call, outcome in zip(batch, outcomes, strict=True):
            self._record_outcome(ex, call, outcome)

    async def _run_one(self, ex: Execution, call: ToolCallPart) -> None:
        self._started(ex, call)
        outcome = await self.tools.execute(call, ex.record.execution_id)
        self._record_outcome(ex, call, outcome)

    def _started(self, ex: Execution, call: ToolCallPart) -> None:
        ex.running.add(call.call_id)
        self._emit(ex, ToolCallStarted(call_id=call.call_id, tool=call.tool_name,
                                       summary=self.tools.summarize(call), effect=self.tools.effect(call.tool_name)))

    async def _ask(self, ex: Execution, call: ToolCallPart) -> tuple[bool, str | None]:
        """Ask the front end (``ApprovalRequested``) and wait for ``answer_approval``.

        An approval given with ``remember`` adds the call's fingerprint
        (:func:`~amos.approvals.call_fingerprint`: tool + arguments) to the runner's
        session approvals, so the same call later in this session runs unasked.

        Returns:
            ``(approved, reason)``.
        """
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._approvals[call.call_id] = future
        self._emit(ex, ApprovalRequested(
            call_id=call.call_id, tool=call.tool_name, effect=self.tools.effect(call.tool_name),
            summary=self.tools.summarize(call), arguments=call.arguments,
            resume_token=f"{self.session.id}:{ex.record.execution_id}:{call.call_id}"))
        try:
            approved, reason, remember = await future
        finally:
            self._approvals.pop(call.call_id, None)
        if approved and remember:
            self._session_approved.add(call_fingerprint(call))
        return approved, reason

    def _pause(self, ex: Execution, held_calls: list[ToolCallPart]) -> None:
        def needs(call: ToolCallPart) -> bool:
            return self.tools.permission(call.tool_name) == "ask" and call_fingerprint(call) not in ex.record.denied

        ex.pending = new_pause(ex.record, held_calls, needs, owner=self.settings.approvals_owner,
                               deadline_s=self.settings.approvals_deadline_s)
        first = ex.pending.undecided()[0]
        ex.stop("approval_required", "approval_pending",
                f"{self.tools.summarize(first.call)} ({first.call.call_id}) needs approval")

    def _record_outcome(self, ex: Execution, call: ToolCallPart, outcome: ToolOutcome) -> None:
        ex.running.discard(call.call_id)
        ex.answered.add(call.call_id)
        if self.settings.secrets:
            outcome = _mask_outcome(outcome, self.settings.secrets)
        content = clean_text(outcome.content)
        evidence: dict[str, Any] = {}
        if self.evidence is not None:
            evidence, projection = self._capture(ex, call, outcome)
            if projection is not None:
                content = clean_text(projection)
        result = ToolResultPart(call_id=call.call_id, tool_name=call.tool_name, content=content,
                                is_error=outcome.status != "succeeded", status=outcome.status, **evidence)
        self.session.messages.append(Message.tool_result(result))
        rec = ex.record
        row = {"call_id": call.call_id, "tool": call.tool_name, "status": outcome.status,
               "evidence_id": result.evidence_id}
        if result.evidence_error:
            row["evidence_error"] = result.evidence_error
        rec.tool_calls.append(row)
        rec.observations.append(LoopObservation(tool=call.tool_name, call_id=call.call_id,
                                                effect=outcome.effect, status=outcome.status))
        if outcome.status == "succeeded" and outcome.effect in ("write", "unknown"):
            rec.effect_succeeded = True
        if ex.guard is not None:
            ex.guard.observe(call.call_id, call.tool_name, outcome.effect, outcome.status, outcome.completion,
                             outcome.result, outcome.error)
        self._emit(ex, ToolCallFinished(
            call_id=call.call_id, tool=call.tool_name, summary=self.tools.summarize(call),
            status=outcome.status, duration_s=round(outcome.duration_s, 3),
            error=clean_text(outcome.error) if outcome.error else None, content=content,
            evidence_id=result.evidence_id))

    def _capture(self, ex: Execution, call: ToolCallPart, outcome: ToolOutcome) -> tuple[dict[str, Any], str | None]:
        """Store one outcome as evidence; the ToolResultPart fields and the projection, if any."""
        assert self.evidence is not None
        tool = self.tools.get(call.tool_name)
        arguments = call.arguments if call.arguments is not None else call.raw_arguments
        captured = self.evidence.capture(outcome, arguments, tool.summarize_result if tool else None)
        if captured.reference is None and captured.error is None:
            return {}, None  # a reserved retrieval tool
        receipt = {"call_id": call.call_id, "tool": call.tool_name, "status": outcome.status,
                   "id": captured.reference.id if captured.reference else None,
                   "stored": captured.reference is not None}
        self.session.evidence_recent = [*self.session.evidence_recent, receipt][-EVIDENCE_RECENT:]
        if captured.reference is None:
            self._emit(ex, Notice(level="error", text=f"evidence for {call.tool_name} ({call.call_id}) was not "
                                                      f"stored ({captured.error}); its raw result is kept and "
                                                      "protected. Nothing is retried."))
            return {"evidence_error": captured.error}, None
        ref = captured.reference
        fields = {"evidence_id": ref.id, "evidence": ref.model_dump(mode="json"),
                  "projected": captured.projection is not None}
        return fields, captured.projection

    def _close_open_calls(self, ex: Execution) -> None:
        """Give every call of the last turn without a result one, so history stays valid."""
        if ex.pending is not None:
            return
        interrupted = ex.cause in ("user_abort", "timeout")
        for call in ex.open_calls:
            if call.call_id in ex.answered:
                continue
            was_running = call.call_id in ex.running
            status = "cancelled" if interrupted else "not_started"
            why = {"user_abort": "the run was cancelled by the user",
                   "timeout": "the run's time limit expired"}.get(ex.cause or "", "the run stopped")
            text = (f"cancelled: {why} while this call was running" if was_running
                    else f"not run: {why} before this call started")
            outcome = self.tools.outcome_for(call, ex.record.execution_id, status, text)
            if was_running and outcome.effect != "read":
                outcome = outcome.model_copy(update={"completion": "unknown"})
            self._record_outcome(ex, call, outcome)

    def _close_stale_pending(self, ex: Execution) -> None:
        pending = self.session.pending
        if pending is None:
            return
        self.session.pending = None
        for held in pending.held:
            result = ToolResultPart(
                call_id=held.call.call_id, tool_name=held.call.tool_name, is_error=True, status="not_started",
                content="not run: the session continued with a new prompt before this call was decided")
            self.session.messages.append(Message.tool_result(result))
        names = ", ".join(f"{self.tools.summarize(h.call)} ({h.call.call_id})" for h in pending.held[:5])
        self._emit(ex, Notice(level="warning", text=f"{len(pending.held)} held call(s) were dropped unrun: "
                                                    f"{names}{' …' if len(pending.held) > 5 else ''} — a new "
                                                    "prompt replaced the pending approval"))

