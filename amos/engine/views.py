"""Plain values the host hands front ends to render (issue 15: front ends on the host API).

Front ends never read the session, the stores or the policy objects; they render
these frozen views (and :mod:`amos.events`, :class:`~amos.policy.stop.StopReceipt`
and the other types :mod:`amos.engine` re-exports).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HeldCallView:
    """A tool call held by an approval pause.

    Attributes:
        call_id: the model's call id.
        tool: the tool name.
        summary: one line for people.
        arguments: the call's arguments (masked), or its raw argument text.
        needs_approval: a person must decide it before it runs.
        decision: ``approve`` / ``deny`` once decided, else None.
        escalation: it asks to run a command outside the sandbox (issue 19): only its
            id approves it.
    """

    call_id: str
    tool: str
    summary: str
    arguments: Any
    needs_approval: bool
    decision: str | None = None
    escalation: bool = False


@dataclass(frozen=True)
class NoteView:
    """One task note as the side panel shows it."""

    id: str
    category: str
    text: str
    status: str
    confirmed: bool


@dataclass(frozen=True)
class TaskNotesView:
    """The task notebook at a glance: revision, notes, action receipts."""

    revision: int
    notes: tuple[NoteView, ...] = ()
    actions: int = 0
    view: str = ""
