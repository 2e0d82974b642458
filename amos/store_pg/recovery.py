"""Checkpoints, restore and repair for the PostgreSQL session store (issue 22).

Taking and restoring checkpoints follow :class:`amos.session_recovery.SessionRecovery`
(inherited); what differs is where checkpoints live and what a repair reads: rows are
never torn, so a repair only meets a snapshot that no longer validates (written by a
newer amos, or edited in the database) and rebuilds it from the newest good checkpoint
or the journal's first snapshot, plus the journal after it.
"""

from __future__ import annotations

from typing import Any

from amos.errors import SessionError
from amos.session_recovery import RepairResult, SessionRecovery
from amos.store_pg.checkpoints import PgCheckpoints


class PgRecovery(SessionRecovery):
    """Recovery rules over a :class:`~amos.store_pg.sessions.PgSessionStore`."""

    def checkpoints_of(self, session_id: str) -> PgCheckpoints:  # type: ignore[override]
        """The checkpoints of a session."""
        return PgCheckpoints(self.store, session_id)

    def set_aside(self, session_id: str, *, move: bool) -> None:
        """Nothing is set aside: a reader never overwrites a row."""
        return None

    def recovery_source(self, session_id: str) -> str:
        """What ``amos sessions repair`` would rebuild the session from."""
        rows = self.checkpoints_of(session_id).list()
        if rows:
            return f"checkpoint {rows[-1].number} plus the journal"
        first = self.store.journal_entries(session_id)[:1]
        return "the journal" if first and first[0].get("kind") == "snapshot" else ""

    def corrupt_error(self, session_id: str, problem: str) -> SessionError:
        """The ``corrupt`` error naming the problem and how to recover."""
        source = self.recovery_source(session_id)
        hint = (f"; `amos sessions repair {session_id}` rebuilds it from {source}" if source
                else "; no checkpoint or journal can rebuild it")
        return SessionError("corrupt", f"{problem}{hint}")

    def repair(self, session_id: str) -> RepairResult:
        """Rebuild the session (snapshot if valid, else newest good checkpoint, else the
        journal's first snapshot) with the journal applied, and save it.

        Raises:
            SessionError: ``corrupt`` when nothing can rebuild it.
        """
        from amos.sessions import migrate, validate_session

        warnings: list[str] = []
        base: Any = None
        try:
            data = self.store.read_data(session_id)
            validate_session(dict(data), self.store.path(session_id))
            source, base = "snapshot", (lambda: self.store.read_data(session_id))
        except SessionError as exc:
            if exc.code != "corrupt":
                raise
            warnings.append(str(exc))
            folder = self.checkpoints_of(session_id)
            for row in reversed(folder.list()):
                def load(number: int = row.number) -> dict[str, Any]:
                    return migrate(folder.read(number), folder.where(number))
                try:
                    validate_session(load(), folder.where(row.number))
                    source, base = f"checkpoint {row.number}", load
                    break
                except SessionError as bad:
                    warnings.append(f"checkpoint {row.number} is unusable: {bad}")
            if base is None:
                first = self.store.journal_entries(session_id)[:1]
                if not (first and first[0].get("kind") == "snapshot"):
                    raise SessionError("corrupt", f"session {session_id} cannot be repaired: no readable checkpoint, "
                                                  "and its journal does not start with a snapshot") from None
                source, base = "journal", (lambda: {"id": session_id, "journal_seq": 0, "version": 2})
        data = base()
        entries = self.store.journal_entries(session_id, int(data.get("journal_seq") or 0))
        before = len(self.store.warnings)
        session = self.store._replayed(session_id, data, entries, loader=base)
        warnings.extend(self.store.warnings[before:])
        applied = sum(1 for e in entries if e.get("kind") in ("message", "messages", "snapshot", "fields",
                                                              "model_call"))
        session.id = session_id
        self.store.save(session)
        return RepairResult(session=session, source=source, replayed=applied, set_aside=None, warnings=warnings)
