"""Where a host's session is kept: the store, the run lock and the checkpoints.

:class:`SessionBinding` is the one collaborator that talks to the session store for
a running host (DESIGN.md rule 4: persistence goes through one place per kind of
data). With ``--no-save`` there is no store: saving refuses with ``no_store`` and
nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amos.checkpoints import CheckpointInfo
from amos.errors import SessionError
from amos.journal import Journal
from amos.session_store import SessionStore
from amos.sessions import Session

DEFAULT_MAX_CHECKPOINTS = 20


class SessionBinding:
    """The store a session is saved to, and the run lock held while the host is open.

    Args:
        store: the session store, or None with ``--no-save``.
        lock: the session's held run lock (released by :meth:`close`), or None.
        max_checkpoints: ``sessions.max_checkpoints``.
    """

    def __init__(self, store: SessionStore | None, lock: Any = None, *,
                 max_checkpoints: int = DEFAULT_MAX_CHECKPOINTS):
        self.store = store
        self._lock = lock
        self.max_checkpoints = max_checkpoints
        self.writes = 0
        """Times this binding wrote a session (``save``, and the first snapshot of a journal)."""
        self._stored: set[str] = set()
        self._asked: set[str] = set()

    @property
    def saved(self) -> bool:
        """True when sessions are written (not ``--no-save``)."""
        return self.store is not None

    def path(self, session_id: str) -> Path | None:
        """Path of ``session.json`` (None with ``--no-save``)."""
        return self.store.path(session_id) if self.store is not None else None

    def _store(self) -> SessionStore:
        if self.store is None:
            raise SessionError("no_store", "this session is not saved (--no-save)")
        return self.store

    def save(self, session: Session) -> Path:
        """Write the session now.

        Raises:
            SessionError: ``no_store`` with ``--no-save``, ``write_failed``.
        """
        path = self._store().save(session)
        self._wrote(session.id)
        return path

    def _wrote(self, session_id: str) -> None:
        self.writes += 1
        self._stored.add(session_id)

    def save_state(self, session_id: str) -> tuple[bool, int] | None:
        """``(stored, writes)`` for the TUI's saved marker, or None with ``--no-save``.

        ``stored``: the session is in the store — asked of the store once per session (one
        query on PostgreSQL), then known from this binding's own writes.
        """
        if self.store is None:
            return None
        if session_id not in self._asked:  # only this host writes it while it holds the run lock
            self._asked.add(session_id)
            if self.store.exists(session_id):
                self._stored.add(session_id)
        return session_id in self._stored, self.writes

    def open_journal(self, session: Session) -> tuple[Journal, list[str]]:
        """The session's journal (the snapshot is written first when the session has none
        yet) and the warnings the store gave while opening it (a damaged journal set aside).

        Raises:
            SessionError: ``no_store``, ``write_failed``.
        """
        store = self._store()
        if not store.exists(session.id):
            store.save(session)
            self._wrote(session.id)
        return store.open_journal(session)

    def close_journal(self, session_id: str) -> None:
        """fsync and close the session's journal (also one a restore opened)."""
        if self.store is not None:
            self.store.close_journal(session_id)

    def checkpoint(self, session: Session, reason: str, label: str | None = None, *,
                   files: Any = None) -> CheckpointInfo:
        """Take a checkpoint of ``session`` (``run_end``, ``waiting``, ``save``, ``before_compaction``…);
        ``files``: the file history to record instead of the session's (a files rewind's state before).

        Raises:
            SessionError: ``no_store``, ``write_failed``.
        """
        return self._store().take_checkpoint(session, reason, label=label, keep=self.max_checkpoints, files=files)

    def checkpoints(self, session_id: str) -> list[CheckpointInfo]:
        """Checkpoints of the session, oldest first ([] with ``--no-save``)."""
        if self.store is None:
            return []
        return self.store.checkpoints_of(session_id).list()

    def read_checkpoint(self, session_id: str, number: int) -> dict[str, Any]:
        """The session data checkpoint ``number`` holds.

        Raises:
            SessionError: ``no_store``, ``not_found``, ``corrupt``.
        """
        return self._store().checkpoints_of(session_id).read(number)

    def restore(self, session: Session, number: int, *, files: Any = None) -> Session:
        """Restore checkpoint ``number`` of ``session`` (the current state is checkpointed first,
        with ``files`` as its file history when given: the state before a files rewind).

        Raises:
            SessionError: ``no_store``, ``not_found``, ``corrupt``, ``write_failed``.
        """
        return self._store().restore(session, number, keep=self.max_checkpoints, files=files)

    def relock(self, session_id: str) -> None:
        """Take the run lock again after :meth:`close` (a reopen that failed).

        Raises:
            SessionError: ``busy`` when another process took the session meanwhile.
        """
        if self._lock is None and self.store is not None:
            self._lock = self.store.lock(session_id)

    def release(self) -> None:
        """Release the run lock (idempotent)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None
