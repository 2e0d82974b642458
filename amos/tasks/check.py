"""Preflight and consistency validation shared by restore and every commit.

Seed: protected-task-state ("Every committed candidate passes the same consistency
validation as a restored snapshot"; "Preflight rejects unsupported versions, foreign
scopes/tasks/associations/bindings, malformed fields and capacity overflow").

Pure code: no I/O and no import-time side effects.
"""

from __future__ import annotations

from typing import Any

from amos.tasks.errors import FREE_ROOM_HINT, TaskStateError
from amos.tasks.jsonio import admit, json_size
from amos.tasks.model import (
    SNAPSHOT_KIND,
    SNAPSHOT_VERSION,
    LifecycleBinding,
    Note,
    TaskBook,
    TaskLimits,
    TaskScope,
)
from amos.tasks.view import estimate_tokens, render_view

__all__ = ["check_capacity", "check_consistency", "preflight"]


def preflight(
    data: Any,
    *,
    scope: TaskScope,
    task_id: str,
    association: str | None,
    lifecycle_binding: LifecycleBinding | None,
    limits: TaskLimits,
) -> TaskBook:
    """Validate a whole snapshot before anything is replaced.

    Args:
        data: a snapshot dict as produced by ``TaskState.to_snapshot()``.
        scope / task_id / association / lifecycle_binding: the binding the host
            configured now; the snapshot must carry exactly the same.
        limits: the limits in force now.

    Returns:
        The validated book.

    Raises:
        TaskStateError: ``TASK_STATE_INVALID`` (not a dict, wrong kind, unsupported
            version, malformed fields, inconsistent links); ``TASK_STATE_SCOPE``
            (another owner/namespace/tenant, task, association or lifecycle binding);
            ``TASK_STATE_CAPACITY`` (over ``max_snapshot_bytes``, ``max_entries`` or
            ``max_prompt_tokens``).
    """
    if type(data) is not dict:
        raise TaskStateError("TASK_STATE_INVALID", "task-state snapshot is not a JSON object")
    if data.get("kind") != SNAPSHOT_KIND:
        raise TaskStateError("TASK_STATE_INVALID", f"not a task-state snapshot (kind must be {SNAPSHOT_KIND!r})")
    version = data.get("version")
    if type(version) is not int or version != SNAPSHOT_VERSION:
        raise TaskStateError(
            "TASK_STATE_INVALID", f"unsupported task-state snapshot version {version!r} (supported: {SNAPSHOT_VERSION})"
        )
    book = admit(TaskBook, data, "task-state snapshot", limits.max_snapshot_bytes)
    _check_binding(book, scope, task_id, association, lifecycle_binding)
    check_consistency(book)
    check_capacity(book, limits)
    return book


def _check_binding(
    book: TaskBook,
    scope: TaskScope,
    task_id: str,
    association: str | None,
    lifecycle_binding: LifecycleBinding | None,
) -> None:
    if book.scope != scope:
        raise TaskStateError("TASK_STATE_SCOPE", "task-state snapshot belongs to another owner, namespace or tenant")
    if book.task_id != task_id:
        raise TaskStateError(
            "TASK_STATE_SCOPE", f"task-state snapshot is for task {book.task_id!r}, not {task_id!r}"
        )
    if book.association != association:
        raise TaskStateError("TASK_STATE_SCOPE", "task-state snapshot is bound to another association")
    if book.lifecycle_binding != lifecycle_binding:
        raise TaskStateError("TASK_STATE_SCOPE", "task-state snapshot is bound to another lifecycle")


def _bad(message: str) -> TaskStateError:
    return TaskStateError("TASK_STATE_INVALID", f"inconsistent task state: {message}")


def check_consistency(book: TaskBook) -> None:
    """Check links, statuses and revisions of a book.

    Dangling links (to pruned ids) are allowed; a link to a retained id must be
    reciprocal and same-category. Raises ``TASK_STATE_INVALID`` on the first problem.
    """
    notes: dict[str, Note] = {}
    for note in book.notes:
        if note.id in notes:
            raise _bad(f"duplicate note id {note.id}")
        notes[note.id] = note
    executions: set[str] = set()
    for action in book.actions:
        if action.execution_id in executions:
            raise _bad(f"duplicate execution id {action.execution_id}")
        executions.add(action.execution_id)
        if action.revision > book.revision:
            raise _bad(f"action {action.execution_id} is newer than the notebook")
        if action.confirmation is not None and not (
            action.revision <= action.confirmation.revision <= book.revision
        ):
            raise _bad(f"action {action.execution_id} has a confirmation out of revision order")
    for note in book.notes:
        _check_note(note, notes, book.revision)
    for note in book.notes:
        _check_acyclic(note, notes)
    if book.lifecycle is not None and book.lifecycle_binding is None:
        raise _bad("a lifecycle view without a lifecycle binding")
    if book.lifecycle is not None and book.lifecycle.revision > book.revision:
        raise _bad("the lifecycle view is newer than the notebook")


def _check_note(note: Note, notes: dict[str, Note], revision: int) -> None:
    if note.revision > revision:
        raise _bad(f"note {note.id} is newer than the notebook")
    if note.status == "active" and (note.superseded_by is not None or note.resolution is not None):
        raise _bad(f"active note {note.id} has a supersession or resolution")
    if note.status == "superseded" and note.resolution is not None:
        raise _bad(f"superseded note {note.id} also has a resolution")
    if note.status == "resolved":
        if note.resolution is None or note.superseded_by is not None:
            raise _bad(f"resolved note {note.id} lacks a resolution or is also superseded")
        if not note.revision <= note.resolution.revision <= revision:
            raise _bad(f"note {note.id} has a resolution out of revision order")
    if note.supersedes is not None:
        if note.authority != "host":
            raise _bad(f"{note.authority} note {note.id} supersedes a note")
        if note.supersedes == note.id:
            raise _bad(f"note {note.id} supersedes itself")
        target = notes.get(note.supersedes)
        if target is not None and (
            target.status != "superseded" or target.superseded_by != note.id or target.category != note.category
        ):
            raise _bad(f"note {note.id} supersedes {target.id} without a matching back link")
    if note.superseded_by is not None:
        if note.superseded_by == note.id:
            raise _bad(f"note {note.id} is superseded by itself")
        if note.status != "superseded":
            raise _bad(f"note {note.id} links a successor but is {note.status}")
        successor = notes.get(note.superseded_by)
        if successor is not None and successor.supersedes != note.id:
            raise _bad(f"note {note.id} is superseded by {successor.id}, which does not supersede it")
    if note.id in note.conflicts_with or len(set(note.conflicts_with)) != len(note.conflicts_with):
        raise _bad(f"note {note.id} has a self or duplicate conflict link")


def _check_acyclic(note: Note, notes: dict[str, Note]) -> None:
    seen = {note.id}
    current = note
    while current.supersedes is not None and current.supersedes in notes:
        current = notes[current.supersedes]
        if current.id in seen:
            raise _bad(f"a supersession cycle through {note.id}")
        seen.add(current.id)


def check_capacity(book: TaskBook, limits: TaskLimits) -> None:
    """Check entries, snapshot bytes and view tokens against ``limits``.

    Raises:
        TaskStateError: ``TASK_STATE_CAPACITY`` naming the limit and the commands
            that free room.
    """
    entries = len(book.notes) + len(book.actions)
    if entries > limits.max_entries:
        raise TaskStateError(
            "TASK_STATE_CAPACITY",
            f"task state would hold {entries} entries, over max_entries {limits.max_entries}; {FREE_ROOM_HINT}",
        )
    size = json_size(book.model_dump(mode="json"))
    if size > limits.max_snapshot_bytes:
        raise TaskStateError(
            "TASK_STATE_CAPACITY",
            f"task-state snapshot would be {size} bytes, over max_snapshot_bytes "
            f"{limits.max_snapshot_bytes}; {FREE_ROOM_HINT}",
        )
    tokens = estimate_tokens(render_view(book))
    if tokens > limits.max_prompt_tokens:
        raise TaskStateError(
            "TASK_STATE_CAPACITY",
            f"task view would need about {tokens} tokens, over max_prompt_tokens "
            f"{limits.max_prompt_tokens}; {FREE_ROOM_HINT}",
        )
