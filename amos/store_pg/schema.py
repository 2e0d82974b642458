"""The PostgreSQL store's schema: versioned migrations applied on first use (issue 22).

``amos_schema`` holds one row, the schema version. On the first connection of a
process :func:`ensure_schema` takes a transaction-scoped advisory lock (so two amos
processes starting at once migrate once), applies every migration above the recorded
version in one transaction, and refuses a database whose version is newer than
:data:`SCHEMA_VERSION` (an older amos must never write a newer layout).

Layout (version 1):

- ``amos_sessions``: one row per session, its snapshot JSON (``data``, what
  ``session.json`` holds), the journal entry it reflects, and the host it last ran on.
- ``amos_journal``: ``(session_id, seq)`` → one journal entry's JSON; rows are whole or
  absent (one INSERT each), never torn.
- ``amos_checkpoints``: ``(session_id, number)`` → the checkpoint's row and snapshot.
- ``amos_run_locks``: who holds a session's advisory run lock (host, pid, since).
- ``amos_evidence_scopes`` / ``amos_evidence``: evidence records by scope key and
  UUIDv7 id (``COLLATE "C"``: byte order is time order), their exact bytes and SHA-256;
  a trigger refuses every UPDATE, so a stored record never changes.
"""

from __future__ import annotations

from typing import Any

from amos.errors import SessionError

SCHEMA_VERSION = 1
"""The schema version this amos writes."""

_MIGRATE_LOCK = 0x616D6F73_0000_0001
"""Advisory lock key serializing migrations (``amos`` in ASCII, then 1)."""

MIGRATIONS: dict[int, str] = {
    1: """
CREATE TABLE amos_sessions (
    id text PRIMARY KEY,
    name text,
    updated_at text NOT NULL,
    journal_seq bigint NOT NULL DEFAULT 0,
    synced_seq bigint NOT NULL DEFAULT 0,
    machine text,
    workspace text,
    data text NOT NULL
);
CREATE INDEX amos_sessions_name ON amos_sessions (name) WHERE name IS NOT NULL;
CREATE TABLE amos_journal (
    session_id text NOT NULL,
    seq bigint NOT NULL CHECK (seq > 0),
    kind text NOT NULL,
    entry text NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE amos_checkpoints (
    session_id text NOT NULL,
    number integer NOT NULL CHECK (number > 0),
    info text NOT NULL,
    data text NOT NULL,
    PRIMARY KEY (session_id, number)
);
CREATE TABLE amos_run_locks (
    session_id text PRIMARY KEY,
    machine text NOT NULL,
    pid integer NOT NULL,
    since text NOT NULL,
    backend_pid integer NOT NULL
);
CREATE TABLE amos_evidence_scopes (
    key text PRIMARY KEY,
    scope text NOT NULL,
    last_id text COLLATE "C",
    count bigint NOT NULL DEFAULT 0
);
CREATE TABLE amos_evidence (
    scope_key text NOT NULL REFERENCES amos_evidence_scopes (key),
    id text COLLATE "C" NOT NULL,
    session_id text,
    sha256 text NOT NULL,
    size integer NOT NULL,
    meta text NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (scope_key, id)
);
CREATE INDEX amos_evidence_session ON amos_evidence (scope_key, session_id, id);
CREATE FUNCTION amos_evidence_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'amos evidence records are immutable (record %)', OLD.id;
END $$;
CREATE TRIGGER amos_evidence_no_update BEFORE UPDATE ON amos_evidence
    FOR EACH ROW EXECUTE FUNCTION amos_evidence_immutable();
""",
}
"""``version → SQL`` bringing the schema from ``version - 1`` to ``version``."""


def _version(conn: Any) -> int:
    row = conn.execute("SELECT to_regclass('amos_schema') IS NOT NULL").fetchone()
    if not row[0]:
        return 0
    found = conn.execute("SELECT version FROM amos_schema").fetchone()
    return int(found[0]) if found else 0


def too_new(version: int, shown: str) -> SessionError:
    """The ``too_new`` error for a database migrated by a newer amos."""
    return SessionError("too_new", f"the session store {shown} has schema version {version}, newer than this "
                                   f"amos understands ({SCHEMA_VERSION}); upgrade amos")


def ensure_schema(conn: Any, shown: str) -> int:
    """Migrate the database to :data:`SCHEMA_VERSION` (a no-op when it is there).

    Args:
        conn: an autocommit psycopg connection.
        shown: the database as messages name it (password masked).

    Returns:
        The version found before migrating (0 for an empty database).

    Raises:
        SessionError: ``too_new`` for a newer schema; ``unavailable`` when the
            migration fails (nothing of it is applied).
    """
    found = _version(conn)
    if found == SCHEMA_VERSION:
        return found
    if found > SCHEMA_VERSION:
        raise too_new(found, shown)
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS amos_schema (one boolean PRIMARY KEY DEFAULT true "
                         "CHECK (one), version integer NOT NULL, migrated_at timestamptz NOT NULL DEFAULT now())")
            current = _version(conn)
            if current > SCHEMA_VERSION:
                raise too_new(current, shown)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                conn.execute(MIGRATIONS[version])
            conn.execute("INSERT INTO amos_schema (one, version) VALUES (true, %s) ON CONFLICT (one) DO UPDATE "
                         "SET version = EXCLUDED.version, migrated_at = now()", (SCHEMA_VERSION,))
    except SessionError:
        raise
    except Exception as exc:
        from amos.store_pg.connect import problem

        raise SessionError("unavailable", f"cannot set up the session store {shown}: {problem(exc, '')}") from None
    return found
