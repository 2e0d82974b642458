"""The task-state error and its codes (seeds/protected-task-state, "Persistence and failure handling").

Pure code: no I/O and no import-time side effects.
"""

from __future__ import annotations

from typing import Literal

from amos.errors import AmosError

__all__ = ["FREE_ROOM_HINT", "TaskStateCode", "TaskStateError"]

TaskStateCode = Literal[
    "TASK_STATE_CONFLICT",
    "TASK_STATE_INVALID",
    "TASK_STATE_SCOPE",
    "TASK_STATE_CAPACITY",
    "TASK_STATE_DESTROYED",
]
"""Machine-readable failure kinds; see :class:`TaskStateError`."""

FREE_ROOM_HINT = (
    "free room with /context task prune REV ID…, /context task resolve-prune REV ID…, "
    "/context task prune-action REV EXECUTION_ID… or "
    "/context task confirm-prune REV EXECUTION_ID STATUS PROOF…"
)
"""The host commands that free room, quoted by every capacity error (spec/slash-commands.md)."""


class TaskStateError(AmosError):
    """A task-state operation was refused; the notebook is unchanged.

    Attributes:
        code: ``TASK_STATE_CONFLICT`` (stale expected revision; the message names the
            current one), ``TASK_STATE_INVALID`` (malformed input or snapshot, unknown or
            inactive target, illegal transition), ``TASK_STATE_SCOPE`` (a snapshot of
            another owner/namespace/tenant, task or association),
            ``TASK_STATE_CAPACITY`` (the result would exceed ``max_entries``,
            ``max_prompt_tokens`` or ``max_snapshot_bytes``, or an input exceeds
            ``max_snapshot_bytes``; the message names the commands that free room),
            ``TASK_STATE_DESTROYED`` (the notebook was destroyed).
        exit_code: 1.
    """

    exit_code = 1

    def __init__(self, code: TaskStateCode, message: str):
        self.code = code
        super().__init__(message)
