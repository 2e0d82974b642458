"""A session journal in PostgreSQL: one row per entry (issue 22).

The same contract as :class:`amos.journal.Journal`: :meth:`PgJournal.append` makes an
entry visible at once (one INSERT, its own transaction: the row is whole or absent,
never torn), :meth:`PgJournal.sync` makes everything appended durable. Appends commit
with ``synchronous_commit`` off (like a ``write`` that reaches the OS but not the
disk); ``sync`` commits a small write synchronously, which flushes the WAL up to it and
so every earlier append too. A failed statement raises ``write_failed``, the path the
transcript turns into ``storage_error``.
"""

from __future__ import annotations

import json
from typing import Any

from amos.errors import SessionError
from amos.store_pg.connect import problem


def entry_text(entry: dict[str, Any]) -> str:
    """One entry as compact JSON text (a lone surrogate escaped, NUL escaped by JSON)."""
    text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(entry, separators=(",", ":"), default=str)
    return text


class PgJournal:
    """Appends entries to one session's rows of ``amos_journal``.

    Args:
        conn: the connection to write through (the run lock's when the store holds it).
        session_id: the session.
        last_seq: ``seq`` of the last entry already stored.
        url: the store URL (only to mask its secrets in messages).
        where: how messages name the journal.
    """

    def __init__(self, conn_of: Any, session_id: str, *, last_seq: int, url: str, where: str):
        self._conn_of = conn_of
        self.session_id = session_id
        self.seq = last_seq
        self.unsynced = False
        self._url = url
        self.path = where

    def _fail(self, exc: BaseException, what: str) -> SessionError:
        return SessionError("write_failed", f"cannot {what} the session journal {self.path}: "
                                            f"{problem(exc, self._url)}", exit_code=1)

    def append(self, kind: str, at: str, **data: Any) -> int:
        """Append one entry and return its ``seq``.

        Raises:
            SessionError: ``write_failed`` (the entry is not counted).
        """
        seq = self.seq + 1
        text = entry_text({"seq": seq, "at": at, "kind": kind, **data})
        try:
            with self._conn_of() as conn:
                conn.execute("INSERT INTO amos_journal (session_id, seq, kind, entry) VALUES (%s, %s, %s, %s)",
                             (self.session_id, seq, kind, text))
        except SessionError:
            raise
        except Exception as exc:
            raise self._fail(exc, "append to") from None
        self.seq = seq
        self.unsynced = True
        return seq

    def sync(self) -> None:
        """Make every append durable (a no-op when nothing is pending).

        Raises:
            SessionError: ``write_failed``.
        """
        if not self.unsynced:
            return
        try:
            with self._conn_of() as conn, conn.transaction():
                conn.execute("SET LOCAL synchronous_commit TO on")
                conn.execute("UPDATE amos_sessions SET synced_seq = %s WHERE id = %s", (self.seq, self.session_id))
        except SessionError:
            raise
        except Exception as exc:
            raise self._fail(exc, "flush") from None
        self.unsynced = False

    def close(self) -> None:
        """Best-effort sync (the rows are already stored)."""
        try:
            self.sync()
        except SessionError:
            pass
