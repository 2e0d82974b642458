"""A session's run lock in PostgreSQL: an advisory lock held by a dedicated connection.

The lock lives as long as its connection: a process killed (even by SIGKILL) or a
machine that vanished loses its connection, and with it the lock (TCP keepalives make
the server notice a dead peer within seconds). ``amos_run_locks`` names the holder
(machine, pid, since) for the ``busy`` message. The lock's connection is also the one
the session's journal and snapshots are written through, so a run that lost its lock
can write nothing more: its next write fails and takes the ``storage_error`` path.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import time
from typing import Any

from amos.errors import SessionError
from amos.sessions import utc_now


def lock_key(session_id: str) -> int:
    """The signed 64-bit advisory lock key of a session."""
    return int.from_bytes(hashlib.sha256(b"amos-session:" + session_id.encode()).digest()[:8], "big", signed=True)


def machine_name() -> str:
    """This machine's host name (what ``amos sessions list`` shows as HOST)."""
    return socket.gethostname() or "?"


def holder(conn: Any, session_id: str) -> str:
    """`` (host H, pid N, since T)`` of the recorded holder, or ``""``."""
    row = conn.execute("SELECT machine, pid, since FROM amos_run_locks WHERE session_id = %s AND backend_pid IN "
                       "(SELECT pid FROM pg_stat_activity)", (session_id,)).fetchone()  # not a dead holder's row
    return f" (host {row[0]}, pid {row[1]}, since {row[2]})" if row else ""


class PgRunLock:
    """A held run lock; :meth:`release` lets it go and closes its connection.

    Build with :meth:`acquire`.

    Attributes:
        conn: the dedicated connection holding the lock (journal writes use it).
    """

    def __init__(self, conn: Any, session_id: str, on_release: Any = None):
        self.conn = conn
        self.session_id = session_id
        self._on_release = on_release

    @classmethod
    def acquire(cls, db: Any, session_id: str, on_release: Any = None) -> PgRunLock:
        """Take the lock now (never waits).

        Raises:
            SessionError: ``busy`` naming the holder's host and pid; ``unavailable``
                when the database cannot be reached.
        """
        conn = db.dedicated()
        try:
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(session_id),)).fetchone()[0]
            if not got:
                who = holder(conn, session_id)
                for _ in range(10):  # the winner writes its holder row just after taking the lock
                    if who:
                        break
                    time.sleep(0.1)
                    who = holder(conn, session_id)
                raise SessionError("busy", f"session {session_id} is in use by another amos process{who}; "
                                           "try again when it ends")
            conn.execute("SET synchronous_commit TO off")  # journal appends; sync() commits synchronously
            conn.execute(
                "INSERT INTO amos_run_locks (session_id, machine, pid, since, backend_pid) "
                "VALUES (%s, %s, %s, %s, pg_backend_pid()) ON CONFLICT (session_id) DO UPDATE SET "
                "machine = EXCLUDED.machine, pid = EXCLUDED.pid, since = EXCLUDED.since, "
                "backend_pid = EXCLUDED.backend_pid",
                (session_id, machine_name(), os.getpid(), utc_now()))
        except SessionError:
            conn.close()
            raise
        except Exception as exc:
            conn.close()
            raise db.unavailable(exc) from None
        return cls(conn, session_id, on_release)

    def release(self) -> None:
        """Release the lock and close its connection (idempotent; errors ignored: a lost
        connection has released it already)."""
        if self.conn is None:
            return
        conn, self.conn = self.conn, None
        with contextlib.suppress(Exception):
            conn.execute("DELETE FROM amos_run_locks WHERE session_id = %s AND backend_pid = pg_backend_pid()",
                         (self.session_id,))
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(self.session_id),))
        with contextlib.suppress(Exception):
            conn.close()
        if self._on_release is not None:
            self._on_release(self.session_id, self)


def held_elsewhere(conn: Any, session_id: str, own_backend: int | None) -> bool:
    """True when a connection other than ``own_backend`` holds the session's lock."""
    key = lock_key(session_id)
    classid, objid = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %s::bigint::oid "
        "AND objid = %s::bigint::oid AND objsubid = 1 AND pid IS DISTINCT FROM %s",
        (classid, objid, own_backend)).fetchone()
    return bool(row[0])
