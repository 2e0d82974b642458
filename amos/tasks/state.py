"""``TaskState``: one host-scoped, revision-checked task notebook.

Seed: protected-task-state. The host (never the model) calls every mutation with the
revision it last saw. Each mutation builds a candidate on a copy
(:class:`~amos.tasks.ops.Draft`), runs it through the same preflight as a restored
snapshot (consistency, entries, snapshot bytes, view tokens) and only then swaps it in
with the revision increased by one. A failed call changes nothing; nothing is ever
evicted automatically. Nothing here parses model text.

Pure code: no I/O; the only clock is the injectable ``clock``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from amos.tasks.check import preflight
from amos.tasks.errors import TaskStateError
from amos.tasks.jsonio import admit
from amos.tasks.model import (
    SNAPSHOT_VERSION,
    ActionOutcome,
    ActionReceipt,
    ConfirmInput,
    HostDelta,
    LifecycleBinding,
    LifecycleView,
    Note,
    PruneInput,
    TaskBook,
    TaskLimits,
    TaskScope,
)
from amos.tasks.ops import Draft
from amos.tasks.view import estimate_tokens, render_view

__all__ = ["TaskState"]

Clock = Callable[[], str]
"""Returns an ISO-8601 timestamp; injected by the host (None: no timestamps)."""


class TaskState:
    """A host-controlled task notebook bound to one scope, task and association.

    Args:
        scope: the host scope (owner, namespace, optional tenant).
        task_id: the task this notebook belongs to.
        association: optional immutable host workflow/session id.
        limits: capacity (default :class:`TaskLimits`).
        lifecycle: optional immutable ``{kind: task|routine, id}`` binding.
        clock: optional timestamp source for ``recorded_at`` fields.

    Raises:
        TaskStateError: ``TASK_STATE_INVALID`` for a malformed scope, task id,
            association or binding.

    Every mutation takes ``expected_revision`` (the revision the host last saw) and
    returns a detached snapshot (see :meth:`to_snapshot`). Errors: see
    :class:`~amos.tasks.errors.TaskStateError`.
    """

    def __init__(
        self,
        *,
        scope: TaskScope | dict[str, Any],
        task_id: str,
        association: str | None = None,
        limits: TaskLimits | None = None,
        lifecycle: LifecycleBinding | dict[str, Any] | None = None,
        clock: Clock | None = None,
        _book: TaskBook | None = None,
    ):
        self._limits = limits or TaskLimits()
        empty = {
            "version": SNAPSHOT_VERSION,
            "task_id": task_id,
            "scope": scope.model_dump(mode="json") if isinstance(scope, TaskScope) else scope,
            "association": association,
            "lifecycle_binding": lifecycle.model_dump(mode="json")
            if isinstance(lifecycle, LifecycleBinding)
            else lifecycle,
        }
        binding = admit(TaskBook, empty, "task-state binding", self._limits.max_snapshot_bytes)
        self._book = _book if _book is not None else binding
        self._clock = clock
        self._destroyed = False
        self._input_filter: Any = None

    # Construction from saved data ----------------------------------------------------

    @classmethod
    def from_snapshot(
        cls,
        data: Any,
        *,
        scope: TaskScope | dict[str, Any],
        task_id: str,
        association: str | None = None,
        limits: TaskLimits | None = None,
        lifecycle: LifecycleBinding | dict[str, Any] | None = None,
        clock: Clock | None = None,
    ) -> TaskState:
        """Restore a notebook from a snapshot after preflight of the whole snapshot.

        Args:
            data: a dict from :meth:`to_snapshot` (strict JSON).
            scope / task_id / association / lifecycle: the binding configured now.
            limits / clock: as for the constructor.

        Raises:
            TaskStateError: ``TASK_STATE_SCOPE`` for a snapshot of another owner,
                namespace, tenant, task, association or lifecycle;
                ``TASK_STATE_INVALID`` for an unsupported version or malformed or
                inconsistent fields; ``TASK_STATE_CAPACITY`` when it exceeds
                ``limits``.
        """
        empty = cls(scope=scope, task_id=task_id, association=association, limits=limits,
                    lifecycle=lifecycle, clock=clock)
        binding = empty._book
        empty._book = preflight(
            data,
            scope=binding.scope,
            task_id=binding.task_id,
            association=binding.association,
            lifecycle_binding=binding.lifecycle_binding,
            limits=empty._limits,
        )
        return empty

    @classmethod
    def restore(cls, data: Any | None, **binding: Any) -> TaskState:
        """:meth:`from_snapshot`, or an empty notebook when ``data`` is None.

        A legacy session saved without task state starts an empty notebook rather
        than inheriting notes (seed "Persistence and failure handling"). Keyword
        arguments are those of :meth:`from_snapshot`.
        """
        if data is None:
            return cls(**binding)
        return cls.from_snapshot(data, **binding)

    # Inspection ------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        """The committed revision (0 for a new notebook; grows by one per change)."""
        return self._book.revision

    @property
    def limits(self) -> TaskLimits:
        """The limits in force."""
        return self._limits

    @property
    def book(self) -> TaskBook:
        """The committed book (frozen)."""
        self._alive()
        return self._book

    @property
    def notes(self) -> tuple[Note, ...]:
        """Retained notes in admission order."""
        return self.book.notes

    @property
    def actions(self) -> tuple[ActionReceipt, ...]:
        """Retained action receipts in admission order."""
        return self.book.actions

    @property
    def destroyed(self) -> bool:
        """True after :meth:`destroy`."""
        return self._destroyed

    def note(self, note_id: str) -> Note | None:
        """The retained note with ``note_id``, or None."""
        return next((n for n in self.book.notes if n.id == note_id), None)

    def action(self, execution_id: str) -> ActionReceipt | None:
        """The retained receipt with ``execution_id``, or None."""
        return next((a for a in self.book.actions if a.execution_id == execution_id), None)

    def to_snapshot(self) -> dict[str, Any]:
        """A detached version-1 strict-JSON snapshot (``dict``) of the committed state."""
        return self.book.model_dump(mode="json")

    get_state = to_snapshot

    def view(self) -> str:
        """The task view (system-instruction section); see :func:`render_view`."""
        return render_view(self.book)

    def view_tokens(self) -> int:
        """Estimated tokens of :meth:`view` (always ≤ ``max_prompt_tokens``)."""
        return estimate_tokens(self.view())

    def destroy(self) -> None:
        """Release the notebook; every later call fails ``TASK_STATE_DESTROYED``."""
        self._destroyed = True

    # Mutations ---------------------------------------------------------------------------

    def update_host(self, delta: dict[str, Any] | HostDelta, expected_revision: int) -> dict[str, Any]:
        """Apply one atomic host transaction.

        Args:
            delta: ``{"notes": [NoteInput…], "resolve": [id | {"id", "label"?}…],
                "confirm_actions": [{"execution_id", "status", "source"}…],
                "prune": {"note_ids": […], "execution_ids": […]}}`` (all optional; at
                least one item). Applied in that order; only the final state must fit.
            expected_revision: the revision the host last saw.

        Returns:
            The snapshot after the transaction.

        Raises:
            TaskStateError: see :class:`TaskStateError`; nothing changes on failure.
        """
        draft = self._begin(expected_revision)
        parsed = self._admit(HostDelta, delta, "host delta")
        prune = parsed.prune or PruneInput()
        if not (parsed.notes or parsed.resolve or parsed.confirm_actions or prune.note_ids or prune.execution_ids):
            raise TaskStateError("TASK_STATE_INVALID", "host delta is empty")
        for note in parsed.notes:
            draft.add_note(note, "host")
        for item in parsed.resolve:
            draft.resolve(item)
        for confirm in parsed.confirm_actions:
            draft.confirm_action(confirm)
        draft.prune(prune)
        return self._commit(draft)

    def propose(self, notes: list[Any], expected_revision: int) -> dict[str, Any]:
        """Add unconfirmed proposals (e.g. model interpretations); they supersede nothing.

        Args:
            notes: a non-empty list of NoteInput dicts without ``supersedes``.
            expected_revision: the revision the host last saw.
        """
        return self._add_unconfirmed(notes, expected_revision, "proposal")

    def assume(self, notes: list[Any], expected_revision: int) -> dict[str, Any]:
        """Add unconfirmed assumptions; like :meth:`propose`."""
        return self._add_unconfirmed(notes, expected_revision, "assumption")

    def record_action(self, outcome: dict[str, Any] | ActionOutcome, expected_revision: int) -> dict[str, Any]:
        """Record a receipt of an observed tool call (idempotent for identical receipts).

        An unknown completion can settle later; admitted identity never changes;
        settled execution fields never regress; the evidence reference can be repaired.
        An unchanged receipt returns the current snapshot without a new revision.
        """
        draft = self._begin(expected_revision)
        draft.record_action(self._admit(ActionOutcome, outcome, "action outcome"))
        return self._commit(draft)

    def confirm_action(
        self, execution_id: str, status: str, source: dict[str, Any], expected_revision: int
    ) -> dict[str, Any]:
        """Set an action's host workflow status (``waiting_external``, ``completed``,
        ``failed``, ``cancelled``) with a required ``source``; terminal ones are final."""
        draft = self._begin(expected_revision)
        confirm = self._admit(
            ConfirmInput, {"execution_id": execution_id, "status": status, "source": source}, "confirmation"
        )
        draft.confirm_action(confirm)
        return self._commit(draft)

    def prune_resolved(
        self, note_ids: Iterable[str], execution_ids: Iterable[str], expected_revision: int
    ) -> dict[str, Any]:
        """Remove resolved/superseded notes and host-confirmed terminal actions."""
        prune = {"note_ids": list(note_ids), "execution_ids": list(execution_ids)}
        return self.update_host({"prune": prune}, expected_revision)

    def sync_lifecycle(self, view: dict[str, Any] | LifecycleView, expected_revision: int) -> dict[str, Any]:
        """Cache the host-owned lifecycle status ``{"status", "detail"?}`` (needs a binding)."""
        draft = self._begin(expected_revision)
        draft.sync_lifecycle(self._admit(LifecycleView, view, "lifecycle view"))
        return self._commit(draft)

    # Internals -----------------------------------------------------------------------------

    def _alive(self) -> None:
        if self._destroyed:
            raise TaskStateError("TASK_STATE_DESTROYED", "this task state was destroyed")

    def _begin(self, expected_revision: int) -> Draft:
        self._alive()
        if type(expected_revision) is not int or expected_revision < 0:
            raise TaskStateError("TASK_STATE_INVALID", f"expected revision {expected_revision!r} is not a revision")
        if expected_revision != self._book.revision:
            raise TaskStateError(
                "TASK_STATE_CONFLICT",
                f"stale revision {expected_revision}; the current revision is {self._book.revision}",
            )
        return Draft(self._book, self._clock() if self._clock else None)

    def filter_inputs(self, fn: Any) -> None:
        """Pass every input of every mutation through ``fn(json_value) -> json_value`` first
        (the host masks secrets there: a key typed into a note never reaches the notebook,
        the session or a model request — issue 17, item 2)."""
        self._input_filter = fn

    def _admit(self, model: Any, value: Any, what: str) -> Any:
        if self._input_filter is not None:
            if hasattr(value, "model_dump"):
                value = value.model_dump(mode="json")
            value = self._input_filter(value)
        return admit(model, value, what, self._limits.max_snapshot_bytes)

    def _add_unconfirmed(self, notes: list[Any], expected_revision: int, authority: str) -> dict[str, Any]:
        draft = self._begin(expected_revision)
        parsed = self._admit(HostDelta, {"notes": notes}, f"{authority} notes")
        if not parsed.notes:
            raise TaskStateError("TASK_STATE_INVALID", f"no {authority} notes given")
        for note in parsed.notes:
            draft.add_note(note, authority)  # type: ignore[arg-type]
        return self._commit(draft)

    def _commit(self, draft: Draft) -> dict[str, Any]:
        candidate = draft.candidate()
        if candidate is None:
            return self.to_snapshot()
        book = self._book
        checked = preflight(
            candidate.model_dump(mode="json"),
            scope=book.scope,
            task_id=book.task_id,
            association=book.association,
            lifecycle_binding=book.lifecycle_binding,
            limits=self._limits,
        )
        self._book = checked
        return self.to_snapshot()
