"""Approvals that pause a run (spec/stop-receipts.md "Approvals that pause a run").

Pure helpers over :class:`~amos.sessions.PendingApproval`: building a pause from the
held calls of a turn, applying a person's decisions, and listing what is pending.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta

from amos.errors import SessionError
from amos.messages import ToolCallPart
from amos.policy.stop import ApprovalInfo
from amos.sessions import ConfirmationRequest, ExecutionRecord, HeldCall, PendingApproval

CONFIRMATION = "confirmation"
"""The ``call_id`` a pending confirmation is listed under in ``pending_approvals``."""


def legacy_call_fingerprint(call: ToolCallPart) -> str:
    """The identity denials were recorded under before amos 0.2 (sessions saved earlier).

    Returns:
        SHA-256 hex of ``tool_name + "\\n" + sorted-key JSON of the arguments`` (the raw
        argument string when it was not valid JSON).
    """
    if call.raw_arguments is None:
        body = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False)
    else:
        body = call.raw_arguments
    return hashlib.sha256(f"{call.tool_name}\n{body}".encode()).hexdigest()


def rekey_denials(denied: Mapping[str, str], calls: Iterable[ToolCallPart]) -> dict[str, str]:
    """``denied`` with every entry recorded under a call's legacy fingerprint moved to its
    one identity (:func:`amos.policy.canonical.call_identity`), so a paused execution
    saved before the identities were unified still denies the same call again unasked.

    Args:
        denied: identity (or legacy fingerprint) → the denial text.
        calls: the session's tool calls (any of them may be the denied one).
    """
    from amos.policy.canonical import call_identity

    legacy = {legacy_call_fingerprint(c): c for c in calls}
    moved: dict[str, str] = {}
    for key, text in denied.items():
        call = legacy.get(key)
        if call is not None:
            args = call.raw_arguments if call.raw_arguments is not None else call.arguments
            key = call_identity(call.tool_name, args) or key
        moved[key] = text
    return moved


def new_pause(
    record: ExecutionRecord,
    held_calls: list[ToolCallPart],
    needs_approval: Callable[[ToolCallPart], bool],
    *,
    owner: str | None,
    deadline_s: float,
) -> PendingApproval:
    """A pause holding ``held_calls`` (the first one needing a decision and every later call).

    Args:
        record: the execution being paused (saved with the pause).
        held_calls: the calls of the turn not run yet, in order.
        needs_approval: whether a person must decide a call before it runs.
        owner: ``approvals.owner`` (None → the pause is unrouted).
        deadline_s: how long the approval may wait (seconds).
    """
    held = [HeldCall(call=c, needs_approval=needs_approval(c)) for c in held_calls]
    deadline = (datetime.now(UTC) + timedelta(seconds=deadline_s)).isoformat(timespec="seconds")
    return PendingApproval(execution=record, held=held, owner=owner, deadline=deadline)


def new_confirmation(record: ExecutionRecord, claim: str, *, owner: str | None, deadline_s: float) -> PendingApproval:
    """A pause waiting for a person to confirm a completion claim (``completion.human``).

    Args:
        record: the execution being paused (saved with the pause).
        claim: what the model said it did.
        owner: ``approvals.owner`` (None → the pause is unrouted).
        deadline_s: how long the confirmation may wait (seconds).
    """
    deadline = (datetime.now(UTC) + timedelta(seconds=deadline_s)).isoformat(timespec="seconds")
    return PendingApproval(execution=record, held=[], owner=owner, deadline=deadline,
                           confirmation=ConfirmationRequest(claim=claim))


def apply_decisions(
    pending: PendingApproval,
    session_id: str,
    approve: Iterable[str],
    deny: Mapping[str, str | None],
    approve_all: bool,
) -> None:
    """Record decisions on held calls (in place). ``approve_all`` (``--all``, ``--yes``)
    leaves a call that asks to run unsandboxed undecided: it is approved by its id only.

    Raises:
        SessionError: ``bad_decision`` naming a call id that is not pending in this
            pause (nothing is changed then).
    """
    by_id = {h.call.call_id: h for h in pending.held if h.needs_approval}
    approve = list(approve)
    unknown = [c for c in [*approve, *deny] if c not in by_id]
    if unknown:
        listed = ", ".join(by_id) or "none"
        raise SessionError("bad_decision",
                           f"call {unknown[0]!r} is not pending in session {session_id} (pending: {listed})")
    for call_id in approve:
        by_id[call_id].decision, by_id[call_id].reason = "approve", None
    for call_id, reason in deny.items():
        by_id[call_id].decision, by_id[call_id].reason = "deny", reason
    if approve_all:  # never a request to run a command outside the sandbox (issue 19): by id only
        from amos.tools.command_sandbox import wants_unsandboxed

        for held in pending.undecided():
            if not wants_unsandboxed(held.call.tool_name, held.call.arguments):
                held.decision = "approve"


def decide_confirmation(pending: PendingApproval, session_id: str, approve: Iterable[str],
                        deny: Mapping[str, str | None] | None, confirm: bool, reject: str | None, *, by: str) -> None:
    """Record a person's answer to a completion claim (``amos resume --confirm`` /
    ``--reject REASON``), in place.

    Raises:
        SessionError: ``bad_decision`` when the pause holds tool calls instead (or the
            other way round), or both answers are given.
    """
    if pending.confirmation is None:
        raise SessionError("bad_decision", f"session {session_id} waits for decisions on held tool calls, not for a "
                           "completion confirmation: use --approve / --deny / --all")
    if list(approve) or deny:
        raise SessionError("bad_decision", f"session {session_id} waits for a person to confirm the work is done, "
                           "not for tool calls: use --confirm or --reject REASON")
    if confirm and reject is not None:
        raise SessionError("bad_decision", "--confirm and --reject exclude each other")
    if confirm:
        pending.confirmation.decision, pending.confirmation.by = "confirm", by
    elif reject is not None:
        pending.confirmation.decision, pending.confirmation.by = "reject", by
        pending.confirmation.reason = reject or "rejected"


def pending_infos(pending: PendingApproval | None, session_id: str) -> list[ApprovalInfo]:
    """The undecided held calls (or the confirmation a person owes) as receipt
    ``pending_approvals`` entries, in order."""
    if pending is None:
        return []
    if pending.confirmation is not None:
        return [ApprovalInfo(call_id=CONFIRMATION, tool="(completion)", owner=pending.owner, deadline=pending.deadline,
                             resume_token=pending.token(session_id, CONFIRMATION))]
    return [
        ApprovalInfo(call_id=h.call.call_id, tool=h.call.tool_name, owner=pending.owner,
                     deadline=pending.deadline, resume_token=pending.token(session_id, h.call.call_id))
        for h in pending.undecided()
    ]
