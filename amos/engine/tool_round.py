"""One round of tool calls: plan, pass the gates, dispatch, record (spec/tools.md).

The round reads top to bottom:

1. every call of the model's turn is planned (:class:`~amos.engine.calls.PlannedCall`);
2. every gate sees the round declared;
3. each call, in the model's order, passes the gates (permission → doom loop →
   loop-policy admission, then any extra gate). A gate may refuse it (it gets a
   ``denied``/``blocked`` outcome and does not run), hold it and the rest of the turn
   for a person (the run stops WAITING), or stop the run. Once a gate *halted* the run
   (the doom-loop ladder's stop), every later call is refused unasked;
4. a call that passed runs: reads with permission ``allow`` run concurrently in
   groups, everything else one at a time in the order given. Before a refusal, a
   question to a person or a stop, the reads waiting in the group run first, so
   results keep the model's order of cause and effect;
5. every outcome is recorded (:class:`OutcomeRecorder`): masked, stored as evidence,
   appended to the transcript, shown to every gate, announced.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

from amos.engine.calls import CallPlanner, PlannedCall
from amos.engine.evidence import EvidenceRecorder
from amos.engine.gates import Gate, RoundControl
from amos.engine.masking import Masker, clean_text
from amos.engine.permissions import PermissionGate
from amos.engine.state import RunState
from amos.engine.transcript import Transcript
from amos.events import Notice, ToolCallFinished, ToolCallStarted
from amos.messages import Message, ToolCallPart, ToolResultPart
from amos.policy.stop import LoopObservation
from amos.tools.base import OutcomeStatus, ToolOutcome
from amos.tools.manager import ToolManager


class OutcomeRecorder:
    """Records every tool outcome the same way, whatever ended the call.

    Args:
        tools: the tool manager (outcomes for calls that never ran).
        transcript: where the tool result is appended.
        evidence: evidence capture (the projection replaces a large result).
        masker: secrets masked in every outcome.
        gates: every gate of the run (each sees each outcome).
    """

    def __init__(self, tools: ToolManager, transcript: Transcript, evidence: EvidenceRecorder, masker: Masker,
                 gates: Sequence[Gate]):
        self.tools = tools
        self.transcript = transcript
        self.evidence = evidence
        self.masker = masker
        self.gates = gates

    def refuse(self, run: RunState, call: PlannedCall, status: OutcomeStatus, text: str,
               completion: str | None = None) -> None:
        """Record an outcome for a call that did not run (or whose run was cut short)."""
        outcome = self.tools.outcome_for(call.call, run.execution_id, status, text)
        if completion is not None:
            outcome = outcome.model_copy(update={"completion": completion})
        self.record(run, call, outcome)

    def record(self, run: RunState, call: PlannedCall, outcome: ToolOutcome, *, host_written: bool = False) -> None:
        """Mask, keep as evidence, append to the transcript, show the gates, announce.

        A result the host wrote (the done tool's) and a call of a tool that does not
        exist get no evidence record: no receipt is invented for what no tool returned
        (seeds/durable-tool-evidence.txt).
        """
        run.running.discard(call.call_id)
        run.answered.add(call.call_id)
        outcome = self.masker.outcome(outcome)
        content = clean_text(outcome.content)
        fields: dict[str, Any] = {}
        projection = problem = None
        if not host_written and call.tool is not None:
            fields, projection, problem = self.evidence.record(call, outcome)
        if problem is not None:
            run.emit(Notice(level="error", text=problem))
        if projection is not None:
            content = clean_text(projection)
        result = ToolResultPart(call_id=call.call_id, tool_name=call.tool_name, content=content,
                                is_error=outcome.status != "succeeded", status=outcome.status, **fields)
        self.transcript.append(Message.tool_result(result))
        rec = run.record
        row: dict[str, Any] = {"call_id": call.call_id, "tool": call.tool_name, "status": outcome.status,
                               "evidence_id": result.evidence_id}
        if result.evidence_error:
            row["evidence_error"] = result.evidence_error
        if outcome.completion == "unknown":  # a write/command that may or may not have happened
            row["completion"] = "unknown"
        row.update(_access_fields(run, call, outcome))
        rec.tool_calls.append(row)
        rec.observations.append(LoopObservation(tool=call.tool_name, call_id=call.call_id,
                                                effect=outcome.effect, status=outcome.status))
        if outcome.status == "succeeded" and outcome.effect in ("write", "unknown"):
            rec.effect_succeeded = True
            rec.work_done = rec.work_done or _did_work(outcome.result)
        for gate in self.gates:
            gate.observed(run, call, outcome)
        run.emit(ToolCallFinished(
            call_id=call.call_id, tool=call.tool_name, summary=call.summary, status=outcome.status,
            duration_s=round(outcome.duration_s, 3), error=clean_text(outcome.error) if outcome.error else None,
            content=content, evidence_id=result.evidence_id))


def _access_fields(run: RunState, call: PlannedCall, outcome: ToolOutcome) -> dict[str, Any]:
    """What let a call run (``allowed_by``) and, for a command that ran, the sandbox it ran
    in (``sandbox``: ``{"mode", "network"}``) — the receipt's rows (issue 19, "Receipts")."""
    fields: dict[str, Any] = {}
    if call.call_id in run.allowed:
        fields["allowed_by"] = run.allowed[call.call_id]
    if call.tool_name != "run_command" or not call.valid or outcome.status in ("denied", "not_started", "blocked"):
        return fields  # it never ran
    used = outcome.result.get("sandbox") if isinstance(outcome.result, dict) else None
    if isinstance(used, dict):
        fields["sandbox"] = {"mode": used.get("mode"), "network": bool(used.get("network"))}
    elif run.sandbox is not None:  # no result to say (a timeout, a call that failed): what it would run in
        if run.sandbox.available:
            fields["sandbox"] = ({"mode": "none", "network": True} if call.escalation
                                 else {"mode": run.sandbox.mode, "network": run.sandbox.network})
        else:
            mode = "danger-full-access" if run.sandbox.mode == "danger-full-access" else "none (sandbox unavailable)"
            fields["sandbox"] = {"mode": mode, "network": True}
    return fields


class ToolRound:
    """Runs the rounds of one execution.

    Args:
        tools: the tool manager (execution).
        planner: plans each call once.
        gates: the gates in order (the permission gate first).
        permissions: the permission gate (it builds an approval pause).
        recorder: records outcomes.
        done_tool: the done tool's name (its calls are answered by the host, last), or None.
    """

    def __init__(self, tools: ToolManager, planner: CallPlanner, gates: Sequence[Gate],
                 permissions: PermissionGate, recorder: OutcomeRecorder, done_tool: str | None = None):
        self.tools = tools
        self.planner = planner
        self.gates = gates
        self.permissions = permissions
        self.recorder = recorder
        self.done_tool = done_tool

    async def run(self, run: RunState, calls: Sequence[ToolCallPart]) -> bool:
        """Run one round of tool calls.

        Returns:
            True when the run stopped (an approval pause, or a gate stopping it).
        """
        planned = [self.planner.plan(call) for call in calls]
        done = [p for p in planned if p.valid and p.tool_name == self.done_tool]
        planned = [p for p in planned if p not in done]
        for gate in self.gates:
            gate.round_declared(run, planned)
        reads: list[PlannedCall] = []

        async def flush() -> None:
            await self._flush(run, reads)

        control = RoundControl(flush=flush, calls=planned)
        for index, call in enumerate(planned):
            if run.halted is not None and not (call.valid and call.permission == "deny"):
                await flush()
                self.recorder.refuse(run, call, "blocked", run.halted)
                continue
            decision = None
            for gate in self.gates:
                decision = await gate.admit(run, call, control)
                if decision is not None:
                    break
            if decision is None:
                if call.valid and call.permission == "allow" and call.effect == "read":
                    reads.append(call)
                else:
                    await flush()
                    await self._run_one(run, call)
                continue
            await flush()
            if decision.kind == "refuse":
                self.recorder.refuse(run, call, decision.status, decision.text)
            elif decision.kind == "hold":
                self.permissions.pause(run, planned[index:])
                return True
            else:
                return True
        await flush()
        self._answer_done(run, done)
        return False

    def _answer_done(self, run: RunState, done: list[PlannedCall]) -> None:
        """Done-tool calls, after every other call of the turn: the first is the claim."""
        from amos.engine.done_tool import claim_text

        for index, call in enumerate(done):
            if index == 0:
                run.done_claim = claim_text(call.call.arguments)
                text = "completion claim received; the host is checking the work"
                status: OutcomeStatus = "succeeded"
            else:
                text = f"not run: completion was already claimed by {done[0].call_id} in this turn"
                status = "not_started"
            outcome = self.tools.outcome_for(call.call, run.execution_id, status, text)
            if status == "succeeded":
                outcome = outcome.model_copy(update={"content": text, "error": None, "result": {"claimed": True}})
            self.recorder.record(run, call, outcome, host_written=True)

    async def _flush(self, run: RunState, reads: list[PlannedCall]) -> None:
        if not reads:
            return
        batch = list(reads)
        reads.clear()
        if len(batch) == 1:
            await self._run_one(run, batch[0])
            return
        for call in batch:
            self._started(run, call)
        outcomes = await asyncio.gather(*(self.tools.execute(c.call, run.execution_id) for c in batch))
        for call, outcome in zip(batch, outcomes, strict=True):
            self.recorder.record(run, call, outcome)

    async def _run_one(self, run: RunState, call: PlannedCall) -> None:
        self._started(run, call)  # the journal is fsynced here for a write/unknown call
        lost = self.recorder.transcript.lost
        if lost is not None and call.effect != "read":  # that fsync failed: do not run it
            from amos.engine.durability import storage_stop

            storage_stop(run, call, lost)
            self.recorder.refuse(run, call, "not_started", f"not run: the session journal cannot be written ({lost})")
            return
        context = None
        if call.escalation:  # it was asked and a person approved: it may run unsandboxed
            context = dataclasses.replace(self.tools.context, sandbox_escalation_approved=True)
        outcome = await self.tools.execute(call.call, run.execution_id, context=context)
        self.recorder.record(run, call, outcome)

    def _started(self, run: RunState, call: PlannedCall) -> None:
        run.running.add(call.call_id)
        run.emit(ToolCallStarted(call_id=call.call_id, tool=call.tool_name, summary=call.summary,
                                 effect=call.effect))

    # ------------------------------------------------------------------ calls left open

    def close_open_calls(self, run: RunState) -> None:
        """Give every call of the last turn without a result one, so history stays valid
        for every provider (a cancelled running write's completion is ``unknown``)."""
        if run.pending is not None:
            return
        interrupted = run.cause in ("user_abort", "timeout")
        why = {"user_abort": f"the run was stopped by {run.cancelled_by}" if run.cancelled_by
               else "the run was cancelled by the user",
               "timeout": "the run's time limit expired"}.get(run.cause or "", "the run stopped")
        for call in run.open_calls:
            if call.call_id in run.answered:
                continue
            was_running = call.call_id in run.running
            planned = self.planner.plan(call)
            text = (f"cancelled: {why} while this call was running" if was_running
                    else f"not run: {why} before this call started")
            status: OutcomeStatus = "cancelled" if interrupted else "not_started"
            completion = "unknown" if was_running and planned.effect != "read" else None
            self.recorder.refuse(run, planned, status, text, completion)


def _did_work(result: object) -> bool:
    """Whether a succeeded write/unknown-effect call counts as work for the completion check:
    not a write that changed nothing (``write_file``'s ``unchanged``), not a command that
    exited non-zero (``nosuchcmd``: 127) — README "What verified has to earn"."""
    if not isinstance(result, dict):
        return True
    if result.get("unchanged") is True:
        return False
    code = result.get("exit_code", 0)
    return code == 0 or not isinstance(code, int)

