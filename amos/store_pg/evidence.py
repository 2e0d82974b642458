"""PgEvidenceStore: the evidence store protocol over PostgreSQL (issue 22).

Records are rows of ``amos_evidence`` keyed by ``(scope key, UUIDv7 id)`` holding the
exact stored bytes, their SHA-256 and size and the listing metadata; a trigger refuses
every UPDATE (records are immutable; only ``delete``/``prune`` remove them). Every
query names the scope key, so another scope's ids read as ``missing``. ``put`` runs in
one transaction holding the scope row (``FOR UPDATE``): capacity, the next id and the
insert are serialized across every machine sharing the database. Every read checks
the bytes' size and SHA-256 against the reference (and the row) before returning
anything, with the same ``corrupt`` error as the file store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from amos.evidence import codec
from amos.evidence import file_index as fi
from amos.evidence.common import DEFAULT_PAGE_LIMIT, StoreCore
from amos.evidence.model import (
    EvidenceError,
    EvidenceMeta,
    EvidencePage,
    EvidenceRecord,
    EvidenceReference,
    EvidenceScope,
)
from amos.store_pg.connect import Database, problem

_WHERE = "amos_evidence"


class PgEvidenceStore(StoreCore):
    """Durable evidence of one scope in PostgreSQL (acknowledgement ``fsync``: a
    synchronous commit).

    Args:
        db: the database.
        scope, max_records, max_record_bytes, ttl_days, clock, max_concurrent_reads: see
            :class:`amos.evidence.common.StoreCore`.
    """

    acknowledgement = "fsync"

    def __init__(self, db: Database, scope: EvidenceScope, *, max_records: int = 100_000,
                 max_record_bytes: int = 8 * 1024 * 1024, ttl_days: float | None = None,
                 clock: Callable[[], float] | None = None, max_concurrent_reads: int = 16):
        super().__init__(scope, max_records=max_records, max_record_bytes=max_record_bytes, ttl_days=ttl_days,
                         clock=clock, max_concurrent_reads=max_concurrent_reads)
        self.db = db
        self.key = scope.key
        self.root = f"{db.shown} (evidence scope {self.key[:12]})"
        self._scope_checked = False

    # --- plumbing --------------------------------------------------------------------

    def _run(self, what: str, work: Callable[[Any], Any]) -> Any:
        from amos.errors import SessionError

        try:
            with self.db.connection() as conn:
                self._check_scope(conn)
                return work(conn)
        except EvidenceError:
            raise
        except SessionError as exc:
            raise EvidenceError("io", f"cannot {what} in {self.root}: {exc}") from None
        except Exception as exc:
            raise EvidenceError("io", f"cannot {what} in {self.root}: {problem(exc, self.db.url)}") from None

    def _check_scope(self, conn: Any) -> None:
        if self._scope_checked:
            return
        scope_json = self.scope.canonical_json()
        conn.execute("INSERT INTO amos_evidence_scopes (key, scope) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                     (self.key, scope_json))
        found = conn.execute("SELECT scope FROM amos_evidence_scopes WHERE key = %s", (self.key,)).fetchone()
        if found is None or found[0] != scope_json:
            raise EvidenceError("scope", f"{self.root} holds another evidence scope under this key")
        self._scope_checked = True

    @staticmethod
    def _meta(text: str) -> EvidenceMeta:
        return fi.parse_line(_WHERE, text.encode())  # type: ignore[arg-type]

    # --- writing ---------------------------------------------------------------------

    def put(self, record: EvidenceRecord) -> EvidenceReference:
        """Store ``record``; see :meth:`amos.evidence.store.EvidenceStore.put`."""
        body = self._prepare(record)

        def work(conn: Any) -> EvidenceReference:
            with conn.transaction():
                last_id, count = conn.execute("SELECT last_id, count FROM amos_evidence_scopes WHERE key = %s "
                                              "FOR UPDATE", (self.key,)).fetchone()
                if count >= self.max_records:
                    raise EvidenceError("capacity", f"the evidence scope holds max_records ({self.max_records})")
                record_id = codec.next_record_id(last_id, self._now_ms())
                stored_at = codec.ms_to_iso(codec.id_time_ms(record_id))
                data = codec.finish_body(body, stored_at)
                ref = codec.reference_for(record_id, data, self.acknowledgement)
                meta = EvidenceMeta(
                    id=record_id, sha256=ref.sha256, size=ref.size, acknowledgement=ref.acknowledgement,
                    stored_at=stored_at, tool=record.tool, call_id=record.call_id,
                    execution_id=record.execution_id, session_id=record.session_id, status=record.status,
                    effect=record.effect, completion=record.completion)
                self._insert(conn, meta, data)
                conn.execute("UPDATE amos_evidence_scopes SET last_id = %s, count = count + 1 WHERE key = %s",
                             (record_id, self.key))
            return ref

        return self._run("store evidence", work)

    def _insert(self, conn: Any, meta: EvidenceMeta, data: bytes) -> bool:
        done = conn.execute(
            "INSERT INTO amos_evidence (scope_key, id, session_id, sha256, size, meta, body) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (self.key, meta.id, meta.session_id, meta.sha256, meta.size, fi.entry_line(meta).decode().strip(),
             data))
        return done.rowcount == 1

    def import_record(self, meta: EvidenceMeta, data: bytes) -> bool:
        """Copy one verified record in with its id (``amos store migrate``).

        Returns:
            True when it was added, False when the same record was already there.

        Raises:
            EvidenceError: ``corrupt`` when ``data`` does not match ``meta`` or a
                different record holds the id.
        """
        codec.verify(data, meta.reference())

        def work(conn: Any) -> bool:
            with conn.transaction():
                conn.execute("SELECT 1 FROM amos_evidence_scopes WHERE key = %s FOR UPDATE", (self.key,))
                if self._insert(conn, meta, data):
                    conn.execute("UPDATE amos_evidence_scopes SET count = count + 1, last_id = "
                                 "greatest(last_id, %s::text COLLATE \"C\") WHERE key = %s", (meta.id, self.key))
                    return True
                row = conn.execute("SELECT sha256 FROM amos_evidence WHERE scope_key = %s AND id = %s",
                                   (self.key, meta.id)).fetchone()
                if row is None or row[0] != meta.sha256:
                    raise EvidenceError("corrupt", f"evidence {meta.id} is already stored with another SHA-256")
                return False

        return self._run("import evidence", work)

    def delete(self, ref: EvidenceReference | str) -> None:
        """Delete one record (expired or not); see the protocol."""
        record_id = self._ref_id(ref)
        if not self._remove("id = %s", (record_id,)):
            raise EvidenceError("missing", f"no evidence {record_id} in this scope")

    def prune_expired(self, now: datetime | None = None) -> int:
        """Remove records past ``ttl_days``; see the protocol."""
        live_from = self._live_from(self._moment_ms(now))
        return 0 if live_from is None else self._remove("id < %s", (live_from,))

    def prune(self, older_than_days: float | None = None, session_id: str | None = None,
              *, now: datetime | None = None) -> int:
        """Remove old and/or one session's records; see the protocol."""
        cutoff = self._prune_cutoff(older_than_days, session_id, now)
        terms, args = [], []
        if cutoff is not None:
            terms.append("id < %s")
            args.append(cutoff)
        if session_id is not None:
            terms.append("session_id = %s")
            args.append(session_id)
        return self._remove(" AND ".join(terms), tuple(args))

    def _remove(self, condition: str, args: tuple) -> int:
        def work(conn: Any) -> int:
            with conn.transaction():
                conn.execute("SELECT 1 FROM amos_evidence_scopes WHERE key = %s FOR UPDATE", (self.key,))
                gone = conn.execute(f"DELETE FROM amos_evidence WHERE scope_key = %s AND {condition}",
                                    (self.key, *args)).rowcount
                if gone:
                    conn.execute("UPDATE amos_evidence_scopes SET count = count - %s WHERE key = %s",
                                 (gone, self.key))
                return gone

        return self._run("remove evidence", work)

    # --- reading ---------------------------------------------------------------------

    def get_meta(self, record_id: str) -> EvidenceMeta:
        """Metadata of one live record; see the protocol."""
        record_id = codec.normalize_id(record_id)
        if not self._expired(record_id, self._now_ms()):
            row = self._run("read evidence", lambda conn: conn.execute(
                "SELECT meta FROM amos_evidence WHERE scope_key = %s AND id = %s", (self.key, record_id)).fetchone())
            if row is not None:
                return self._meta(row[0])
        raise EvidenceError("missing", f"no evidence {record_id} in this scope")

    def get_reference(self, record_id: str) -> EvidenceReference:
        """The reference of one live record; see the protocol."""
        return self.get_meta(record_id).reference()

    def read_bytes(self, ref: EvidenceReference) -> bytes:
        """The exact stored bytes, verified; see the protocol."""
        self._check_ref(ref)
        with self._read_slot():
            if self._expired(ref.id, self._now_ms()):
                raise EvidenceError("missing", f"no evidence {ref.id} in this scope")
            row = self._run("read evidence", lambda conn: conn.execute(
                "SELECT sha256, size, body FROM amos_evidence WHERE scope_key = %s AND id = %s",
                (self.key, ref.id)).fetchone())
            if row is None:
                raise EvidenceError("missing", f"no evidence {ref.id} in this scope")
            if row[0] != ref.sha256 or row[1] != ref.size:
                raise EvidenceError("corrupt", f"the reference of evidence {ref.id} does not match the stored record")
            data = bytes(row[2])
            if len(data) > self.max_record_bytes:
                raise EvidenceError("too_large", f"evidence {ref.id} is over max_record_bytes")
            codec.verify(data, ref)
            return data

    def list(self, after: str | None = None, limit: int = DEFAULT_PAGE_LIMIT,
             *, session_id: str | None = None) -> EvidencePage:
        """One metadata page in id order; see the protocol."""
        after = self._check_page(after, limit)
        live_from = self._live_from(self._now_ms())
        terms, args = ["scope_key = %s"], [self.key]
        for term, value in (("id > %s", after), ("id >= %s", live_from), ("session_id = %s", session_id)):
            if value is not None:
                terms.append(term)
                args.append(value)
        rows = self._run("list evidence", lambda conn: conn.execute(
            f"SELECT meta FROM amos_evidence WHERE {' AND '.join(terms)} ORDER BY id LIMIT %s",
            (*args, limit + 1)).fetchall())
        entries = [self._meta(row[0]) for row in rows[:limit]]
        return EvidencePage(tuple(entries), entries[-1].id if len(rows) > limit else None)

    def all_records(self, batch: int = 200) -> Any:
        """Every record as ``(meta, bytes)``, in id order, verified (``amos store migrate``)."""
        after = ""
        while True:
            rows = self._run("read evidence", lambda conn, a=after: conn.execute(
                "SELECT id, meta, body FROM amos_evidence WHERE scope_key = %s AND id > %s ORDER BY id LIMIT %s",
                (self.key, a, batch)).fetchall())
            if not rows:
                return
            for record_id, meta, body in rows:
                found = self._meta(meta)
                codec.verify(bytes(body), found.reference())
                yield found, bytes(body)
                after = record_id

    # --- repair ----------------------------------------------------------------------

    def rebuild_index(self, recorded: Mapping[str, tuple[str, int]] | None = None) -> dict[str, Any]:
        """Check every record against its row's and the sessions' SHA-256 (there is no
        separate index to rebuild in a database; nothing is changed).

        Returns:
            ``{"indexed": n, "skipped": [], "corrupt": [ids that fail]}``.
        """
        recorded = recorded or {}
        corrupt: list[str] = []
        indexed = 0
        after = ""
        while True:
            rows = self._run("check evidence", lambda conn, a=after: conn.execute(
                "SELECT id, sha256, size, body FROM amos_evidence WHERE scope_key = %s AND id > %s ORDER BY id "
                "LIMIT 200", (self.key, a)).fetchall())
            if not rows:
                break
            for record_id, sha256, size, body in rows:
                indexed += 1
                ref = codec.reference_for(record_id, bytes(body), "written")
                expected = {(sha256, size)} | ({recorded[record_id]} if record_id in recorded else set())
                if any(pair != (ref.sha256, ref.size) for pair in expected):
                    corrupt.append(record_id)
                after = record_id
        return {"indexed": indexed, "skipped": [], "corrupt": corrupt}
