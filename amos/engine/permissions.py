"""The permission gate: allow, ask or deny each call, and who answers an ``ask``.

spec/tools.md (permissions) and spec/stop-receipts.md "Approvals that pause a run".
A ``deny`` call is refused with the setting named. An ``ask`` call is decided, in this
order, by: a denial of the identical call earlier in the execution (denied again,
never asked twice), a decision given with ``Host.resume`` (``preset``), ``--yes`` (never
for a request to run a command outside the sandbox, issue 19), an
approval a person gave "for this session" in this process, a person asked now (the
TUI: an ``ApprovalRequested`` event, answered with ``Host.answer_approval``), or, when
nobody can be asked, an approval pause: the run stops WAITING holding this call and
the rest of its turn. "Identical" is the planned call's one identity
(:attr:`~amos.engine.calls.PlannedCall.identity`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from amos.approvals import new_pause
from amos.engine.calls import PlannedCall
from amos.engine.gates import Decision, Gate, RoundControl
from amos.engine.settings import RunSettings
from amos.engine.state import RunState
from amos.engine.transcript import Transcript
from amos.events import ApprovalRequested, Notice


class Approvals:
    """Answers to ``ApprovalRequested`` and the approvals "for this session" (in memory).

    Kept by the host for the life of the process: a session approval is never saved
    with the session, so a later ``amos resume`` or a reopened session asks again.
    """

    def __init__(self) -> None:
        self.waiting: dict[str, asyncio.Future] = {}
        self.for_session: set[str] = set()

    def answer(self, call_id: str, approved: bool, reason: str | None, remember: bool) -> bool:
        """Give the answer a run is waiting for; False when no run waits on ``call_id``."""
        future = self.waiting.get(call_id)
        if future is None or future.done():
            return False
        future.set_result((approved, reason, bool(approved and remember)))
        return True


def _denied_by_person(run: RunState, call: PlannedCall, reason: str | None) -> Decision:
    """Refuse ``call`` as a person did; the identical call is denied again unasked."""
    text = f"denied by the user: {reason}" if reason else "denied by the user"
    if call.identity:
        run.record.denied[call.identity] = text
    return Decision.refuse("denied", text)


class PermissionGate(Gate):
    """Allow / ask / deny, approvals that ask or pause (first in the gate order).

    Args:
        settings: ``auto_approve`` (``--yes``), ``interactive``, approval routing.
        approvals: the host's approval answers and session approvals.
        transcript: the session (its id names resume tokens).
        preset: decisions given with ``Host.resume``: call id → (approved, reason).
    """

    name = "permissions"

    def __init__(self, settings: RunSettings, approvals: Approvals, transcript: Transcript,
                 preset: Mapping[str, tuple[bool, str | None]] | None = None):
        self.settings = settings
        self.approvals = approvals
        self.transcript = transcript
        self.preset = dict(preset or {})

    async def admit(self, run: RunState, call: PlannedCall, round: RoundControl) -> Decision | None:
        if not call.valid:  # invalid calls fail at execution, unasked
            return None
        access = call.access
        preset = self.preset.get(call.call_id)
        if preset is not None and not preset[0] and call.permission != "deny":
            # a person's denial (amos resume --deny) stands even when the call would now run
            # unasked (resumed with another sandbox mode or rules)
            return _denied_by_person(run, call, preset[1])
        if call.permission == "deny":
            if access is not None and access.reason:
                return Decision.refuse("denied", access.reason)
            return Decision.refuse("denied", f"denied: tool {call.tool_name} is set to deny "
                                             f"({call.permission_source or 'tools.permissions.' + call.tool_name})")
        if call.permission != "ask":
            if access is not None and access.allowed_by:
                run.allowed[call.call_id] = access.allowed_by
            return None
        identity = call.identity or ""
        denied = run.record.denied
        if identity in denied:
            return Decision.refuse("denied", "denied again without asking (identical to a call denied earlier): "
                                             f"{denied[identity]}")
        by = "approved by a person"
        if call.call_id in self.preset:
            approved, reason = self.preset[call.call_id]
            by = "approved with amos resume"
        elif self.settings.auto_approve and not call.escalation:  # --yes never runs a command unsandboxed
            approved, reason = True, None
            by = "--yes"
        elif identity in self.approvals.for_session:
            approved, reason = True, None
            by = "approved for this session earlier"
            run.emit(Notice(text=f"{call.summary}: approved for this session earlier (same tool, same "
                                 "arguments); not asked again"))
        elif self.settings.interactive:
            await round.flush()
            approved, reason = await self._ask(run, call)
        else:
            return Decision.hold()
        if approved:
            run.allowed[call.call_id] = by
            return None
        return _denied_by_person(run, call, reason)

    async def _ask(self, run: RunState, call: PlannedCall) -> tuple[bool, str | None]:
        """Ask the front end and wait for ``Host.answer_approval``; ``(approved, reason)``."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.approvals.waiting[call.call_id] = future
        from amos.permissions import suggest_rule
        from amos.tools.command_sandbox import escalation_justification

        escalation = call.escalation
        run.emit(ApprovalRequested(
            call_id=call.call_id, tool=call.tool_name, effect=call.effect, summary=call.summary,
            arguments=call.call.arguments, escalation=escalation,
            justification=escalation_justification(call.call.arguments) if escalation else None,
            rule=None if escalation else suggest_rule(call.tool_name, call.call.arguments),
            resume_token=f"{self.transcript.session.id}:{run.execution_id}:{call.call_id}"))
        try:
            approved, reason, remember = await future
        finally:
            self.approvals.waiting.pop(call.call_id, None)
        if approved and remember and call.identity:
            self.approvals.for_session.add(call.identity)
        return approved, reason

    def pause(self, run: RunState, held: Sequence[PlannedCall]) -> None:
        """Stop the run WAITING, holding ``held`` (the first one needs a decision)."""
        def needs(planned: PlannedCall) -> bool:
            return planned.permission == "ask" and (planned.identity or "") not in run.record.denied

        by_id = {p.call_id: p for p in held}
        run.pending = new_pause(run.record, [p.call for p in held], lambda c: needs(by_id[c.call_id]),
                                owner=self.settings.approvals_owner, deadline_s=self.settings.approvals_deadline_s)
        first = by_id[run.pending.undecided()[0].call.call_id]
        run.stop("approval_required", "approval_pending", f"{first.summary} ({first.call_id}) needs approval")
