"""The durability part of :class:`~amos.runner.AgentRunner` (a mixin): journal and checkpoints.

Every conversation event reaches the session's ``journal.jsonl`` as it happens
(:mod:`amos.journal`): new messages, the run's events (streamed text arrives as the
completed assistant turn), approvals and host edits. The journal is fsynced at the
end of every turn (the next step starting, the run finishing, an approval asked) and
before every tool with a ``write`` or ``unknown`` effect runs. A write error is shown
once per run as an error notice (stderr in ``amos run``), never swallowed. Journalling
is on whenever the session is autosaved. Uses the runner's ``session``, ``store``,
``settings``, ``config`` and ``autosave``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from amos.errors import SessionError
from amos.events import (
    ApprovalRequested,
    Notice,
    RunEvent,
    RunFinished,
    StepStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)

JOURNALLED_FIELDS = ("title", "name", "host", "provider_state", "usage", "loop", "last_stop", "pending",
                     "doom_loop", "evidence_recent", "task_state", "estimator")
"""Session fields written to the journal at the end of every run (``model_calls`` rows
are journalled one ``model_call`` entry per call instead, so the journal grows with the
calls, not with their square)."""

WATCHED_FIELDS = ("title", "provider_state")
"""Session fields journalled as soon as they change during a run (with the next event), so
a run killed before its end keeps its title and the provider's position (the scripted
provider's turn counter is part of the session)."""


class JournalDuties:
    """Journal and checkpoint host API of the runner."""

    session: Any
    store: Any
    config: Any
    autosave: bool
    _ensure_idle: Callable[[], None]  # provided by AgentRunner

    _journal: Any = None
    _journaled: int = 0
    _journal_error: str | None = None
    _journal_warned: bool = False
    _store_warnings: list[str] = []
    _journal_watched: dict[str, Any] | None = None

    @property
    def max_checkpoints(self) -> int:
        """``sessions.max_checkpoints`` (20 without a config)."""
        sessions = getattr(self.config, "sessions", None)
        return int(getattr(sessions, "max_checkpoints", 20) or 20)

    def _journal_open(self) -> None:
        """Start journalling (first run of this runner): the snapshot is written first
        when the session has none yet. A failure is reported by :meth:`_journal_problem`."""
        self._journal_warned = False
        self._journal_error = None  # a failure of an earlier run was reported with that run
        if not self.autosave or self._journal is not None:
            return
        try:
            if not self.store.exists(self.session.id):
                self.store.save(self.session)
            self._journal = self.store.journal(self.session)
        except SessionError as exc:
            self._journal_error = f"session journal unavailable, so a crash during this run may lose it: {exc}"
            return
        self._journaled = len(self.session.messages)
        self._store_warnings = list(self.store.warnings)  # a damaged journal set aside…
        self.store.warnings.clear()
        self._journal_watched = {name: _copy(getattr(self.session, name)) for name in WATCHED_FIELDS}

    def _journal_write(self, kind: str, **data: Any) -> bool:
        """Append one entry; False (and the error kept for a notice) when it failed."""
        if self._journal is None:
            return True
        from amos.sessions import utc_now

        try:
            self._journal.append(kind, utc_now(), **data)
        except SessionError as exc:
            self._journal_error = str(exc)
            return False
        return True

    def _journal_messages(self, skip: tuple[str, ...] = ()) -> None:
        """Append any watched field that changed (except ``skip``), then the messages
        added since the last call (kept for a retry on failure)."""
        watched = self._journal_watched
        if watched is not None:
            changed = {name: _copy(getattr(self.session, name)) for name in WATCHED_FIELDS
                       if name not in skip and _dump(getattr(self.session, name)) != watched.get(name)}
            if changed and self._journal_write("fields", fields=changed):
                watched.update(changed)
        messages = self.session.messages
        if self._journaled > len(messages):  # the history was replaced (restore, compaction)
            if self._journal_write("messages", messages=[m.model_dump(mode="json") for m in messages]):
                self._journaled = len(messages)
            return
        while self._journaled < len(messages):
            if not self._journal_write("message", index=self._journaled,
                                       message=messages[self._journaled].model_dump(mode="json")):
                return
            self._journaled += 1

    def _journal_event(self, event: RunEvent) -> None:
        """Journal an event about to be emitted (and the messages before it); fsync at
        turn ends and before write/unknown tools."""
        if self._journal is None or isinstance(event, TextDelta):
            return
        self._journal_messages()
        exclude = {"content"} if isinstance(event, ToolCallFinished) else None
        self._journal_write("event", event=event.model_dump(mode="json", exclude=exclude))
        if isinstance(event, (StepStarted, RunFinished, ApprovalRequested)) or (
                isinstance(event, ToolCallStarted) and event.effect in ("write", "unknown")):
            try:
                self._journal.sync()
            except SessionError as exc:
                self._journal_error = str(exc)

    def _journal_fields(self, *names: str) -> None:
        """Journal the current value of some session fields (a host edit or a run's end)."""
        if self._journal is None:
            return
        self._journal_messages(skip=names)
        if self._journal_write("fields", fields={name: _dump(getattr(self.session, name)) for name in names}) \
                and self._journal_watched is not None:
            self._journal_watched.update({name: _copy(getattr(self.session, name))
                                          for name in names if name in WATCHED_FIELDS})

    def _take_store_warnings(self) -> list[str]:
        """Warnings the store gave while journalling started (shown once as notices)."""
        warnings, self._store_warnings = self._store_warnings, []
        return warnings

    def _journal_problem(self) -> Notice | None:
        """An error notice for the first journal failure of this run, else None."""
        if self._journal_error is None or self._journal_warned:
            return None
        self._journal_warned = True
        return Notice(level="error", text=f"not durable: {self._journal_error}")

    def _journal_close(self) -> None:
        # Also when this runner never ran: a restore opens the store's journal of the session.
        if self.store is not None:
            self.store.close_journal(self.session.id)
        self._journal = None

    # ------------------------------------------------------------------ checkpoints (host API)

    def _checkpoint(self, reason: str, label: str | None = None) -> Any:
        self._journal_messages()
        return self.store.take_checkpoint(self.session, reason, label=label, keep=self.max_checkpoints)

    def save_checkpoint(self, name: str | None = None) -> Any:
        """Save the session now and take a checkpoint (``/session save [NAME]``).

        Args:
            name: becomes the session's name and labels the checkpoint (labelled
                checkpoints are never pruned).

        Returns:
            The checkpoint's :class:`~amos.checkpoints.CheckpointInfo`.

        Raises:
            SessionError: ``no_store`` with ``--no-save``, ``busy`` during a run,
                ``write_failed``.
        """
        self._ensure_idle()
        if self.store is None:
            raise SessionError("no_store", "this session is not saved (--no-save)")
        if name is not None:
            self.session.name = name
            self._journal_fields("name")
        self.store.save(self.session)
        return self._checkpoint("save", label=name)

    def list_checkpoints(self) -> list[Any]:
        """Checkpoints of this session, oldest first (``/session checkpoints``)."""
        if self.store is None:
            return []
        return self.store.checkpoints_of(self.session.id).list()

    def restore_checkpoint(self, number: int) -> Any:
        """Restore checkpoint ``number`` into this session (``/session restore N``).

        The current state becomes a new checkpoint first. The front end must reopen the
        session afterwards (the task notebook, doom-loop state and evidence binding are
        rebuilt from the restored file); this runner must not be used to run again.

        Returns:
            The restored :class:`~amos.sessions.Session`.

        Raises:
            SessionError: ``no_store``, ``busy``, ``not_found`` (listing the numbers
                that exist), ``corrupt`` or ``write_failed``.
        """
        self._ensure_idle()
        if self.store is None:
            raise SessionError("no_store", "this session is not saved (--no-save)")
        restored = self.store.restore(self.session, number, keep=self.max_checkpoints)
        self.session = restored
        self._journaled = len(restored.messages)
        return restored


def _copy(value: Any) -> Any:
    """A detached JSON copy of a session field (a provider mutates its state in place)."""
    return json.loads(json.dumps(_dump(value), default=str))


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value
