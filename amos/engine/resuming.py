"""Turning a person's decisions on a WAITING session into the execution that goes on
(``Host.resume``; spec/stop-receipts.md "Approvals that pause a run")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from amos.approvals import apply_decisions, decide_confirmation, rekey_denials
from amos.engine.masking import Masker
from amos.engine.state import RunState
from amos.errors import SessionError
from amos.sessions import PendingApproval, Session


def decided_run(session: Session, masker: Masker, *, approve: Iterable[str],
                deny: Mapping[str, str | None] | None, approve_all: bool, confirm: bool,
                reject: str | None, last_verdict: str | None
                ) -> tuple[PendingApproval, RunState, dict[str, tuple[bool, str | None]]]:
    """Apply the decisions to the session's pause and build the resumed execution.

    Returns:
        ``(pending, run, preset)``: the decided pause, the execution's state (its
        record copied from the pause) and the decisions by call id.

    Raises:
        SessionError: ``not_waiting`` (nothing to resume), ``bad_decision`` (a call id
            that is not pending in this pause, or a confirmation given for held calls
            and the other way round).
    """
    pending = session.pending
    if pending is None:
        ended = f" (its last run ended {last_verdict})" if last_verdict else ""
        raise SessionError("not_waiting", f"session {session.id} is not waiting for an approval or a "
                                          f"confirmation{ended}")
    if pending.confirmation is not None or confirm or reject is not None:
        from amos.engine.completion import local_person

        decide_confirmation(pending, session.id, approve, deny, confirm,
                            masker.clean(reject) if reject is not None else None, by=local_person())
    deny = {call_id: masker.clean(reason) if reason else reason for call_id, reason in (deny or {}).items()}
    apply_decisions(pending, session.id, approve, deny, approve_all)
    record = pending.execution.model_copy(deep=True)
    if record.denied:  # a pause saved before identities were unified
        calls: list[Any] = [c for m in session.messages for c in m.tool_calls] + [h.call for h in pending.held]
        record.denied = rekey_denials(record.denied, calls)
    run = RunState(record=record, resumed=True, usage_at_start=record.usage.model_copy())
    preset = {h.call.call_id: (h.decision == "approve", h.reason) for h in pending.held if h.decision}
    return pending, run, preset
