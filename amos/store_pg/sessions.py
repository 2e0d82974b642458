"""PgSessionStore: the session store's interface over PostgreSQL (issue 22).

Same methods, errors and rules as :class:`amos.session_store.SessionStore` — snapshot,
journal, checkpoints, names, listing, the run lock — with the database's own means:
a snapshot is one UPSERT (old or new row, never torn), a journal entry one INSERT
(:mod:`amos.store_pg.journal`), the run lock an advisory lock on a dedicated connection
(:mod:`amos.store_pg.lock`) through which the locked session's writes go. Nothing of a
session is written to local files.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from amos.checkpoints import CheckpointInfo
from amos.errors import SessionError
from amos.session_replay import replay_validated
from amos.sessions import (
    _ID_RE,
    SESSION_VERSION,
    HostSettings,
    Session,
    SessionSummary,
    migrate,
    new_session_id,
    utc_now,
    validate_session,
)
from amos.store_pg.checkpoints import PgCheckpoints
from amos.store_pg.connect import Database, problem
from amos.store_pg.journal import PgJournal
from amos.store_pg.lock import PgRunLock, held_elsewhere, machine_name
from amos.store_pg.recovery import PgRecovery


class PgSessionStore:
    """Sessions in one PostgreSQL database (the interface of ``SessionStore``).

    Args:
        db: the database (:func:`amos.store_pg.connect.database`).

    Attributes:
        warnings: problems met while loading, oldest first (as the file store's).
        recovery: checkpoints, restore and repair (:class:`~amos.store_pg.recovery.PgRecovery`).
    """

    def __init__(self, db: Database):
        self.db = db
        self.root = db.shown
        self.warnings: list[str] = []
        self._journals: dict[str, PgJournal] = {}
        self._locks: dict[str, PgRunLock] = {}
        self.recovery = PgRecovery(self)

    # ------------------------------------------------------------------ connections

    @contextmanager
    def conn_of(self, session_id: str | None = None) -> Iterator[Any]:
        """The connection for a session's statements: its run lock's when this store
        holds it (a lost lock then fails every write), else a pooled one."""
        lock = self._locks.get(session_id) if session_id else None
        if lock is not None and lock.conn is not None:
            yield lock.conn
            return
        with self.db.connection() as conn:
            yield conn

    def _read(self, what: str, sql: str, args: tuple = ()) -> list[tuple]:
        try:
            with self.conn_of() as conn:
                return conn.execute(sql, args).fetchall()
        except SessionError:
            raise
        except Exception as exc:
            raise SessionError("unavailable", f"cannot read {what} from {self.root}: "
                                              f"{problem(exc, self.db.url)}") from None

    # ------------------------------------------------------------------ recovery (delegated)

    def checkpoints_of(self, session_id: str) -> PgCheckpoints:
        """The checkpoints of a session."""
        return self.recovery.checkpoints_of(session_id)

    def take_checkpoint(self, session: Session, reason: str, *, label: str | None = None,
                        keep: int = 20, files: Any = None) -> CheckpointInfo:
        """Write an immutable checkpoint of ``session`` (see :class:`SessionRecovery`)."""
        return self.recovery.take_checkpoint(session, reason, label=label, keep=keep, files=files)

    def restore(self, session: Session, number: int, *, keep: int = 20, files: Any = None) -> Session:
        """Replace ``session`` with checkpoint ``number`` (the current state checkpointed first)."""
        return self.recovery.restore(session, number, keep=keep, files=files)

    def recovery_source(self, session_id: str) -> str:
        """What ``amos sessions repair`` would rebuild the session from."""
        return self.recovery.recovery_source(session_id)

    def corrupt_error(self, session_id: str, problem_text: str) -> SessionError:
        """The ``corrupt`` error for an unreadable session."""
        return self.recovery.corrupt_error(session_id, problem_text)

    def set_aside(self, session_id: str, *, move: bool) -> Path | None:
        """Nothing to keep aside: a snapshot row is never overwritten by a reader."""
        return None

    def repair(self, session_id: str) -> Any:
        """Rebuild an unreadable session from its newest good checkpoint plus its journal."""
        return self.recovery.repair(session_id)

    # ------------------------------------------------------------------ names and places

    def open(self, id_or_name: str) -> tuple[Session, list[str]]:
        """:meth:`load`, and the warnings this load met."""
        before = len(self.warnings)
        session = self.load(id_or_name)
        return session, list(self.warnings[before:])

    def open_journal(self, session: Session) -> tuple[PgJournal, list[str]]:
        """:meth:`journal`, and the warnings opening it met (none: rows are never torn)."""
        return self.journal(session), []

    def path(self, session_id: str) -> str:
        """Where the session is, for messages: ``postgresql://user@host/db#ID``."""
        return f"{self.root}#{session_id}"

    def journal_path(self, session_id: str) -> str:
        """The session's journal, for messages."""
        return f"{self.root}#{session_id}/journal"

    def session_dir(self, session_id: str) -> Path:
        """A local folder for this session's logs only (MCP servers' stderr), never its data."""
        from amos import paths

        return paths.log_dir() / "sessions" / session_id

    def create(self, host: HostSettings | None = None) -> Session:
        """A new, unsaved session with a fresh id."""
        return Session(id=new_session_id(), host=host or HostSettings())

    def exists(self, session_id: str) -> bool:
        """Whether a saved session with this id exists."""
        return bool(self._read("the session", "SELECT 1 FROM amos_sessions WHERE id = %s", (session_id,)))

    def resolve(self, id_or_name: str) -> str:
        """The session id for an id, a name, a unique id prefix, or ``latest``.

        Raises:
            SessionError: ``not_found`` or ``ambiguous`` (exit 2); ``unavailable``.
        """
        if _ID_RE.match(id_or_name) and self.exists(id_or_name):
            return id_or_name
        if id_or_name == "latest":
            rows = self._read("sessions", "SELECT id FROM amos_sessions ORDER BY updated_at DESC, id DESC LIMIT 1")
            if rows:
                return rows[0][0]
        named = [r[0] for r in self._read("sessions", "SELECT id FROM amos_sessions WHERE name = %s",
                                          (id_or_name,))]
        if len(named) == 1:
            return named[0]
        if len(named) > 1:
            raise SessionError("ambiguous", f"session name {id_or_name!r} matches {len(named)} sessions: "
                                            f"{', '.join(sorted(named))}")
        if id_or_name:
            pattern = id_or_name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            prefix = [r[0] for r in self._read("sessions", "SELECT id FROM amos_sessions WHERE id LIKE %s LIMIT 2",
                                               (pattern,))]
            if len(prefix) == 1:
                return prefix[0]
        raise SessionError("not_found", f"no session {id_or_name!r} in {self.root}; `amos sessions list` shows "
                                        "saved sessions")

    # ------------------------------------------------------------------ reading

    def _parse(self, session_id: str, text: str) -> dict[str, Any]:
        where = self.path(session_id)
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise SessionError("corrupt", f"{where}: cannot read session: {exc}") from None
        if not isinstance(data, dict):
            raise SessionError("corrupt", f"{where}: session data is not a JSON object")
        if data.get("id") != session_id:
            raise SessionError("corrupt", f"{where}: the session id {data.get('id')!r} does not match its row")
        return migrate(data, where)

    def read_data(self, session_id: str) -> dict[str, Any]:
        """The snapshot parsed and migrated, without the journal.

        Raises:
            SessionError: ``not_found``-like ``corrupt`` (no row), ``too_new``, ``corrupt``.
        """
        rows = self._read("the session", "SELECT data FROM amos_sessions WHERE id = %s", (session_id,))
        if not rows:
            raise SessionError("corrupt", f"{self.path(session_id)}: the snapshot is missing")
        return self._parse(session_id, rows[0][0])

    def journal_entries(self, session_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        """The session's journal entries after ``after_seq``, in order (an unreadable row
        is skipped with a warning)."""
        rows = self._read("the journal", "SELECT seq, entry FROM amos_journal WHERE session_id = %s AND seq > %s "
                                         "ORDER BY seq", (session_id, after_seq))
        entries = []
        for seq, text in rows:
            try:
                entry = json.loads(text)
            except (ValueError, RecursionError):
                self.warnings.append(f"{self.journal_path(session_id)}: entry {seq} is unreadable; skipped it")
                continue
            if isinstance(entry, dict) and entry.get("seq") == seq:
                entries.append(entry)
        return entries

    def load(self, id_or_name: str) -> Session:
        """Load a session: its snapshot row, then the journal rows after it.

        Raises:
            SessionError: ``not_found``, ``too_new``, ``corrupt``, ``unavailable``.
        """
        session_id = self.resolve(id_or_name)
        try:
            data = self.read_data(session_id)
            entries = self.journal_entries(session_id, int(data.get("journal_seq") or 0))
            if not entries:
                return validate_session(data, self.path(session_id))
            return self._replayed(session_id, data, entries)
        except SessionError as exc:
            if exc.code != "corrupt":
                raise
            raise self.corrupt_error(session_id, str(exc)) from None

    def _replayed(self, session_id: str, data: dict[str, Any], entries: list[dict[str, Any]],
                  loader: Any = None, gaps: Any = None) -> Session:
        return replay_validated(
            session_id, data, entries, where=self.journal_path(session_id), snapshot_where=self.path(session_id),
            load_base=loader or (lambda: self.read_data(session_id)), live=self.live_elsewhere(session_id),
            gaps=gaps or [], warnings=self.warnings)

    # ------------------------------------------------------------------ writing

    def save(self, session: Session) -> str:
        """Write the snapshot row in one statement (old or new row, never torn).

        Returns:
            Where it was written (for messages).

        Raises:
            SessionError: ``write_failed``.
        """
        session.updated_at = utc_now()
        session.version = SESSION_VERSION
        journal = self._journals.get(session.id)
        if journal is not None:
            session.journal_seq = journal.seq
        where = self.path(session.id)
        try:
            text = session.model_dump_json()
            text.encode("utf-8")
        except (ValueError, UnicodeEncodeError) as exc:
            raise SessionError("write_failed", f"cannot save session to {where}: {exc}", exit_code=1) from None
        host = session.host
        try:
            with self.conn_of(session.id) as conn:
                conn.execute(
                    "INSERT INTO amos_sessions (id, name, updated_at, journal_seq, machine, workspace, data) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, "
                    "updated_at = EXCLUDED.updated_at, journal_seq = EXCLUDED.journal_seq, "
                    "machine = EXCLUDED.machine, workspace = EXCLUDED.workspace, data = EXCLUDED.data",
                    (session.id, session.name, session.updated_at, session.journal_seq, host.machine,
                     host.workspace, text))
        except SessionError as exc:
            raise SessionError("write_failed", f"cannot save session to {where}: {exc}", exit_code=1) from None
        except Exception as exc:
            raise SessionError("write_failed", f"cannot save session to {where}: {problem(exc, self.db.url)}",
                               exit_code=1) from None
        return where

    def journal(self, session: Session) -> PgJournal:
        """The open journal of a session (a new one starts with a ``snapshot`` entry).

        Raises:
            SessionError: ``write_failed``.
        """
        journal = self._journals.get(session.id)
        if journal is None:
            try:
                rows = self._read("the journal", "SELECT coalesce(max(seq), 0) FROM amos_journal "
                                                 "WHERE session_id = %s", (session.id,))
            except SessionError as exc:
                raise SessionError("write_failed", str(exc), exit_code=1) from None
            last = max(int(rows[0][0]), session.journal_seq)
            journal = PgJournal(lambda sid=session.id: self.conn_of(sid), session.id, last_seq=last,
                                url=self.db.url, where=self.journal_path(session.id))
            if journal.seq == 0:
                journal.append("snapshot", utc_now(), session=session.model_dump(mode="json"))
            self._journals[session.id] = journal
        return journal

    def close_journal(self, session_id: str) -> None:
        """Flush and forget a session's journal."""
        journal = self._journals.pop(session_id, None)
        if journal is not None:
            journal.close()

    # ------------------------------------------------------------------ listing

    def list(self) -> list[SessionSummary]:
        """Saved sessions, newest first; one that cannot be read is listed with ``broken``."""
        rows = self._read("sessions", "SELECT s.id, s.data, s.updated_at, s.machine, s.journal_seq, "
                                      "(SELECT max(seq) FROM amos_journal j WHERE j.session_id = s.id) "
                                      "FROM amos_sessions s")
        found = [self._summary(*row) for row in rows]
        found.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return found

    def _summary(self, session_id: str, text: str, updated_at: str, machine: str | None, seq: int,
                 last: int | None) -> SessionSummary:
        where = self.path(session_id)
        try:
            data = self._parse(session_id, text)
            if last is not None and last > int(data.get("journal_seq") or 0):
                from amos.journal import replay

                replay(data, self.journal_entries(session_id, int(data.get("journal_seq") or 0)),
                       live=self.live_elsewhere(session_id))
            messages = data.get("messages") or []
            if not isinstance(messages, list):
                raise SessionError("corrupt", f"{where}: messages is not a list")
            last_stop = data.get("last_stop") or {}
            host = data.get("host") if isinstance(data.get("host"), dict) else {}
            usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
            return SessionSummary(
                id=session_id, name=data.get("name"), title=data.get("title"),
                updated_at=str(data.get("updated_at", updated_at)), messages=len(messages),
                last_verdict=last_stop.get("verdict") if isinstance(last_stop, dict) else None,
                model=host.get("model"), path=where, workspace=host.get("workspace"),
                machine=host.get("machine") or machine,
                cost_usd=usage.get("cost_usd") if isinstance(usage.get("cost_usd"), (int, float)) else None)
        except (SessionError, ValueError, AttributeError, TypeError, RecursionError) as exc:
            return SessionSummary(id=session_id, name=None, title=None, updated_at=updated_at, messages=0,
                                  last_verdict=None, model=None, path=where, machine=machine,
                                  broken=str(exc).removeprefix(f"{where}: "))

    def delete(self, id_or_name: str) -> str:
        """Delete a session's rows (snapshot, journal, checkpoints); returns the id.

        Raises:
            SessionError: ``not_found``, ``busy``, ``write_failed``.
        """
        session_id = self.resolve(id_or_name)
        lock = self.lock(session_id)
        try:
            self.close_journal(session_id)
            with self.conn_of(session_id) as conn, conn.transaction():
                for table in ("amos_journal", "amos_checkpoints"):
                    conn.execute(f"DELETE FROM {table} WHERE session_id = %s", (session_id,))
                conn.execute("DELETE FROM amos_sessions WHERE id = %s", (session_id,))
        except SessionError:
            raise
        except Exception as exc:
            raise SessionError("write_failed", f"cannot delete session {session_id}: "
                                               f"{problem(exc, self.db.url)}", exit_code=1) from None
        finally:
            lock.release()
        return session_id

    # ------------------------------------------------------------------ the run lock

    def live_elsewhere(self, session_id: str) -> bool:
        """True when another connection (another amos process) holds the session's run lock."""
        if session_id in self._locks:
            return False
        with contextlib.suppress(Exception):
            with self.db.connection() as conn:
                return held_elsewhere(conn, session_id, None)
        return False

    def lock(self, session_id: str) -> PgRunLock:
        """Acquire the session's run lock now (never waits) and return it.

        Raises:
            SessionError: ``busy`` naming the holder's host and pid; ``unavailable``.
        """
        if session_id in self._locks:
            raise SessionError("busy", f"session {session_id} is in use by this amos process; try again when it "
                                       "ends")
        lock = PgRunLock.acquire(self.db, session_id, on_release=self._released)
        self._locks[session_id] = lock
        return lock

    def _released(self, session_id: str, lock: PgRunLock) -> None:
        if self._locks.get(session_id) is lock:
            del self._locks[session_id]

    def holder_machine(self) -> str:
        """This machine's name as sessions record it."""
        return machine_name()
