"""Pure transitions of a task-state draft (one transaction's working copy).

Seed: protected-task-state ("updateHost…", "Keep observations and proposals below
host authority", "Record execution without inventing remote completion",
"pruneResolved…"). A :class:`Draft` is built from a book, changed step by step, and
turned back into a candidate book; the caller validates the candidate and only then
swaps it in, so a failed step leaves the committed book untouched.

Pure code: no I/O and no import-time side effects.
"""

from __future__ import annotations

from amos.tasks.errors import TaskStateError
from amos.tasks.model import (
    TERMINAL_CONFIRMATIONS,
    ActionOutcome,
    ActionReceipt,
    Authority,
    Confirmation,
    ConfirmInput,
    Lifecycle,
    LifecycleView,
    Note,
    NoteInput,
    PruneInput,
    Resolution,
    ResolveInput,
    TaskBook,
)

__all__ = ["Draft"]

_IDENTITY_FIELDS = ("call_id", "run_id", "tool", "effect", "started_at")
"""Receipt fields fixed at admission."""
_EXECUTION_FIELDS = ("status", "completion", "ended_at")
"""Receipt fields that may settle once (from ``completion: unknown``) and never regress."""


def _invalid(message: str) -> TaskStateError:
    return TaskStateError("TASK_STATE_INVALID", message)


class Draft:
    """A mutable working copy of a book for one transaction.

    Args:
        book: the committed book (never modified).
        recorded_at: the transaction's timestamp from the injected clock, or None.
    """

    def __init__(self, book: TaskBook, recorded_at: str | None = None):
        self.book = book
        self.revision = book.revision + 1
        self.recorded_at = recorded_at
        self.notes: dict[str, Note] = {n.id: n for n in book.notes}
        self.actions: dict[str, ActionReceipt] = {a.execution_id: a for a in book.actions}
        self.lifecycle = book.lifecycle

    def candidate(self) -> TaskBook | None:
        """The candidate book at the next revision, or None when nothing changed."""
        notes, actions = tuple(self.notes.values()), tuple(self.actions.values())
        if notes == self.book.notes and actions == self.book.actions and self.lifecycle == self.book.lifecycle:
            return None
        return self.book.model_copy(
            update={"revision": self.revision, "notes": notes, "actions": actions, "lifecycle": self.lifecycle}
        )

    # Notes -------------------------------------------------------------------------

    def add_note(self, note: NoteInput, authority: Authority) -> None:
        """Admit a new note; a host note may correct (supersede) an active one.

        Raises:
            TaskStateError: ``TASK_STATE_INVALID`` for a retained id, a proposal or
                assumption that supersedes, an unknown/inactive/other-category
                supersession target or an unknown conflict target.
        """
        if note.id in self.notes:
            raise _invalid(f"note id {note.id} already exists (choose a new id, or prune the old note first)")
        if note.supersedes is not None and authority != "host":
            raise _invalid(f"{authority} {note.id} cannot supersede a note; only host notes correct others")
        self._detach(note.id)
        for other in note.conflicts_with:
            if other not in self.notes:
                raise _invalid(f"note {note.id} conflicts with unknown note {other}")
        if len(set(note.conflicts_with)) != len(note.conflicts_with):
            raise _invalid(f"note {note.id} lists a conflict twice")
        if note.supersedes is not None:
            target = self.notes.get(note.supersedes)
            if target is None:
                raise _invalid(f"note {note.id} corrects unknown note {note.supersedes}")
            if target.status != "active":
                raise _invalid(f"note {note.id} corrects {target.id}, which is already {target.status}")
            if target.category != note.category:
                raise _invalid(
                    f"note {note.id} is a {note.category} but corrects {target.id}, a {target.category}"
                )
            self.notes[target.id] = target.model_copy(update={"status": "superseded", "superseded_by": note.id})
        self.notes[note.id] = Note(
            **note.model_dump(),
            authority=authority,
            revision=self.revision,
            recorded_at=self.recorded_at,
        )

    def _detach(self, reused: str) -> None:
        """Drop links to a pruned incarnation of ``reused`` before it is reused.

        Historical notes stay superseded/resolved; live notes keep their status.
        """
        for key, other in list(self.notes.items()):
            update: dict[str, object] = {}
            if other.supersedes == reused:
                update["supersedes"] = None
            if other.superseded_by == reused:
                update["superseded_by"] = None
            if reused in other.conflicts_with:
                update["conflicts_with"] = tuple(c for c in other.conflicts_with if c != reused)
            if update:
                self.notes[key] = other.model_copy(update=update)

    def resolve(self, item: str | ResolveInput) -> None:
        """Record a host resolution of an active note (e.g. an answered question).

        Raises:
            TaskStateError: ``TASK_STATE_INVALID`` for an unknown or inactive note.
        """
        note_id, label = (item, None) if isinstance(item, str) else (item.id, item.label)
        note = self.notes.get(note_id)
        if note is None:
            raise _invalid(f"cannot resolve unknown note {note_id}")
        if note.status != "active":
            raise _invalid(f"cannot resolve note {note_id}: it is already {note.status}")
        resolution = Resolution(revision=self.revision, label=label, recorded_at=self.recorded_at)
        self.notes[note_id] = note.model_copy(update={"status": "resolved", "resolution": resolution})

    # Actions -----------------------------------------------------------------------

    def record_action(self, outcome: ActionOutcome) -> None:
        """Admit a receipt, settle an unknown completion, or repair its evidence.

        Identical receipts change nothing. Identity fields never change; execution
        fields may change only while ``completion`` is ``unknown`` and never go back
        from ``complete`` to ``unknown``; ``evidence`` may be set or replaced.

        Raises:
            TaskStateError: ``TASK_STATE_INVALID`` for a changed identity field or a
                change to a settled execution field.
        """
        old = self.actions.get(outcome.execution_id)
        fields = outcome.model_dump()
        if old is None:
            self.actions[outcome.execution_id] = ActionReceipt(**fields, revision=self.revision)
            return
        for name in _IDENTITY_FIELDS:
            if getattr(old, name) != fields[name]:
                raise _invalid(f"action {old.execution_id}: admitted {name} cannot change")
        changed = [n for n in _EXECUTION_FIELDS if getattr(old, n) != fields[n]]
        if changed and old.completion == "complete":
            raise _invalid(
                f"action {old.execution_id} is settled; {', '.join(changed)} cannot change"
            )
        update = {n: fields[n] for n in changed}
        if outcome.evidence is not None and outcome.evidence != old.evidence:
            update["evidence"] = outcome.evidence
        if update:
            self.actions[old.execution_id] = old.model_copy(update=update)

    def confirm_action(self, confirm: ConfirmInput) -> None:
        """Set the host workflow status of an action (its diagnostics stay as they are).

        Raises:
            TaskStateError: ``TASK_STATE_INVALID`` for an unknown action or a change
                after a terminal confirmation (repeating the same one is a no-op).
        """
        action = self.actions.get(confirm.execution_id)
        if action is None:
            raise _invalid(f"cannot confirm unknown action {confirm.execution_id}")
        old = action.confirmation
        if old is not None and old.status == confirm.status and old.source == confirm.source:
            return
        if old is not None and old.status in TERMINAL_CONFIRMATIONS:
            raise _invalid(f"action {action.execution_id} is already confirmed {old.status}")
        confirmation = Confirmation(
            status=confirm.status, source=confirm.source, revision=self.revision, recorded_at=self.recorded_at
        )
        self.actions[action.execution_id] = action.model_copy(update={"confirmation": confirmation})

    # Pruning and lifecycle -----------------------------------------------------------

    def prune(self, prune: PruneInput) -> None:
        """Remove resolved/superseded notes and host-confirmed terminal actions.

        Raises:
            TaskStateError: ``TASK_STATE_INVALID`` for a repeated or unknown id, an
                active note, or an action without a terminal host confirmation.
        """
        if len(set(prune.note_ids)) != len(prune.note_ids) or len(set(prune.execution_ids)) != len(
            prune.execution_ids
        ):
            raise _invalid("prune lists an id twice")
        for note_id in prune.note_ids:
            note = self.notes.get(note_id)
            if note is None:
                raise _invalid(f"cannot prune unknown note {note_id}")
            if note.status == "active":
                raise _invalid(f"cannot prune note {note_id}: it is active (resolve or correct it first)")
        for execution_id in prune.execution_ids:
            action = self.actions.get(execution_id)
            if action is None:
                raise _invalid(f"cannot prune unknown action {execution_id}")
            conf = action.confirmation
            if conf is None or conf.status not in TERMINAL_CONFIRMATIONS:
                raise _invalid(
                    f"cannot prune action {execution_id}: it has no terminal host confirmation "
                    "(completed, failed or cancelled)"
                )
        for note_id in prune.note_ids:
            del self.notes[note_id]
        for execution_id in prune.execution_ids:
            del self.actions[execution_id]

    def sync_lifecycle(self, view: LifecycleView) -> None:
        """Cache the host-reported lifecycle status (an unchanged view is a no-op).

        Raises:
            TaskStateError: ``TASK_STATE_INVALID`` when no lifecycle is bound.
        """
        if self.book.lifecycle_binding is None:
            raise _invalid("no lifecycle is bound to this task state")
        if self.lifecycle is not None and LifecycleView(**self.lifecycle.model_dump(include={"status", "detail"})) == view:
            return
        self.lifecycle = Lifecycle(**view.model_dump(), revision=self.revision, recorded_at=self.recorded_at)
