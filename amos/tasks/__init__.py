"""Protected task state: a bounded, host-controlled task notebook (seeds/protected-task-state).

The host keeps objectives, constraints and corrections, decisions, questions,
artifacts, unconfirmed proposals/assumptions, action receipts and an optional
lifecycle view in a :class:`TaskState`; :func:`render_view` turns it into the task
section of the system instructions. Importing this package has no side effects.
"""

from __future__ import annotations

from amos.tasks.adapters import binding_from_config, receipt_from_tool_outcome
from amos.tasks.errors import FREE_ROOM_HINT, TaskStateError
from amos.tasks.model import (
    CATEGORIES,
    CONFIRM_STATUSES,
    SNAPSHOT_VERSION,
    TERMINAL_CONFIRMATIONS,
    ActionOutcome,
    ActionReceipt,
    HostDelta,
    LifecycleBinding,
    Note,
    NoteInput,
    Source,
    TaskBook,
    TaskLimits,
    TaskScope,
)
from amos.tasks.state import TaskState
from amos.tasks.view import estimate_tokens, render_view

__all__ = [
    "CATEGORIES",
    "CONFIRM_STATUSES",
    "FREE_ROOM_HINT",
    "SNAPSHOT_VERSION",
    "TERMINAL_CONFIRMATIONS",
    "ActionOutcome",
    "ActionReceipt",
    "HostDelta",
    "LifecycleBinding",
    "Note",
    "NoteInput",
    "Source",
    "TaskBook",
    "TaskLimits",
    "TaskScope",
    "TaskState",
    "TaskStateError",
    "binding_from_config",
    "estimate_tokens",
    "receipt_from_tool_outcome",
    "render_view",
]
