"""``amos store migrate --to postgres|files``: copy sessions and evidence between backends.

What is copied: every readable session (its snapshot, every journal entry and every
checkpoint) and every evidence record of every scope, with its id and exact bytes.
How it is safe:

- Each session is written as one unit: one transaction in PostgreSQL, a folder renamed
  into place in the file store. A copy cut short leaves nothing half-written.
- Every hash is verified: a session's digest (SHA-256 of its canonical JSON: snapshot,
  journal, checkpoints) is read back from the destination and compared; an evidence
  record is verified against its SHA-256 when read from the source and again when read
  back from the destination.
- It is safe to rerun: what the destination already holds with the same digest is
  skipped; a session that differs there is left alone and reported as a conflict
  (never overwritten). Run it while no amos uses either store (each session's run lock
  is held while it is copied).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amos.errors import SessionError

Progress = Callable[[str], None]


@dataclass
class Bundle:
    """One session as data: ``snapshot`` (session.json), ``journal`` entries, and
    ``checkpoints`` as ``(info dict, session dict)`` pairs, oldest first."""

    session_id: str
    snapshot: dict[str, Any]
    journal: list[dict[str, Any]]
    checkpoints: list[tuple[dict[str, Any], dict[str, Any]]]

    def digest(self) -> str:
        """SHA-256 of the bundle's canonical JSON (sizes in checkpoint rows left out)."""
        rows = [({k: v for k, v in info.items() if k != "size_bytes"}, data) for info, data in self.checkpoints]
        text = json.dumps([self.snapshot, self.journal, rows], sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class MigrateReport:
    """What a migration did (``amos store migrate --json``)."""

    to: str
    sessions_copied: int = 0
    sessions_present: int = 0
    conflicts: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    evidence_copied: int = 0
    evidence_present: int = 0
    scopes: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return dict(vars(self))


# ---------------------------------------------------------------------------- the two sides


class FileSide:
    """Sessions and evidence in the config's folders."""

    def __init__(self, config: Any):
        from amos import paths
        from amos.session_store import SessionStore

        self.config = config
        self.store = SessionStore(paths.sessions_dir(config))
        self.evidence_dir = paths.evidence_dir(config)

    def session_ids(self) -> list[str]:
        return [row.id for row in self.store.list() if not row.broken]

    def read(self, session_id: str) -> Bundle | None:
        from amos.journal import read_journal, read_regular

        if not self.store.exists(session_id):
            return None
        snapshot = json.loads(read_regular(self.store.path(session_id)))
        journal = read_journal(self.store.journal_path(session_id)).entries
        folder = self.store.checkpoints_of(session_id)
        rows = [(info.model_dump(mode="json"), folder.read(info.number)) for info in folder.list()]
        return Bundle(session_id, snapshot, journal, rows)

    def lock(self, session_id: str) -> Any:
        return self.store.lock(session_id)

    def write(self, bundle: Bundle) -> None:
        """Write the session into a hidden folder, then rename it into place."""
        from amos.atomic import atomic_write_bytes
        from amos.checkpoints import CheckpointInfo, Checkpoints
        from amos.store_pg.journal import entry_text

        root = self.store.root
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = root / f".{bundle.session_id}.migrating"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(mode=0o700)
        lines = "".join(entry_text(e) + "\n" for e in bundle.journal).encode()
        atomic_write_bytes(staging / "journal.jsonl", lines)
        folder = Checkpoints(staging / "checkpoints")
        for info, data in bundle.checkpoints:
            folder.take(json.dumps(data, ensure_ascii=False).encode(), CheckpointInfo.model_validate(info),
                        keep=10**9)
        atomic_write_bytes(staging / "session.json", json.dumps(bundle.snapshot, ensure_ascii=False).encode())
        os.rename(staging, self.store.session_dir(bundle.session_id))

    def scopes(self) -> list[Any]:
        from amos.evidence import FileEvidenceStore
        from amos.evidence.model import EvidenceScope

        found = []
        if self.evidence_dir.is_dir():
            for child in sorted(self.evidence_dir.iterdir()):
                try:
                    scope = EvidenceScope.model_validate_json((child / "scope.json").read_bytes())
                except (OSError, ValueError):
                    continue
                found.append(FileEvidenceStore(self.evidence_dir, scope, max_records=10**9,
                                               max_record_bytes=self.config.evidence.max_record_bytes))
        return found

    def evidence(self, scope: Any) -> Any:
        from amos.evidence import FileEvidenceStore

        return FileEvidenceStore(self.evidence_dir, scope, max_records=10**9,
                                 max_record_bytes=self.config.evidence.max_record_bytes)

    @staticmethod
    def records(store: Any) -> Any:
        after = None
        while True:
            page = store.list(after, 1000)
            for meta in page.entries:
                yield meta, store.read_bytes(meta.reference())
            if page.next_cursor is None:
                return
            after = page.next_cursor

    @staticmethod
    def import_record(store: Any, meta: Any, data: bytes) -> bool:
        from amos.evidence import codec
        from amos.evidence import record_files as rf

        codec.verify(data, meta.reference())
        store._ensure_layout()
        path = store.records_dir / f"{meta.id}.json"
        if path.exists():
            codec.verify(rf.read_record_file(path, meta.id, store.max_record_bytes), meta.reference())
            return False
        rf.write_record_file(path, data, durable=True)
        return True

    @staticmethod
    def finish_scope(store: Any) -> None:
        store.rebuild_index()


class PgSide:
    """Sessions and evidence in the config's PostgreSQL database."""

    def __init__(self, config: Any):
        from amos.store_pg import open_session_store

        self.config = config
        self.store = open_session_store(config)
        self.db = self.store.db

    def session_ids(self) -> list[str]:
        return [row.id for row in self.store.list() if not row.broken]

    def read(self, session_id: str) -> Bundle | None:
        rows = self.store._read("the session", "SELECT data FROM amos_sessions WHERE id = %s", (session_id,))
        if not rows:
            return None
        folder = self.store.checkpoints_of(session_id)
        checkpoints = [(info.model_dump(mode="json"), folder.read(info.number)) for info in folder.list()]
        return Bundle(session_id, json.loads(rows[0][0]), self.store.journal_entries(session_id), checkpoints)

    def lock(self, session_id: str) -> Any:
        return self.store.lock(session_id)

    def write(self, bundle: Bundle) -> None:
        """Write the whole session in one transaction."""
        from amos.checkpoints import CheckpointInfo
        from amos.store_pg.journal import entry_text

        snap = bundle.snapshot
        host = snap.get("host") if isinstance(snap.get("host"), dict) else {}
        with self.store.conn_of(bundle.session_id) as conn, conn.transaction():
            conn.execute("INSERT INTO amos_sessions (id, name, updated_at, journal_seq, machine, workspace, data) "
                         "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                         (bundle.session_id, snap.get("name"), str(snap.get("updated_at") or ""),
                          int(snap.get("journal_seq") or 0), host.get("machine"), host.get("workspace"),
                          json.dumps(snap, ensure_ascii=False)))
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO amos_journal (session_id, seq, kind, entry) VALUES (%s, %s, %s, %s)",
                                [(bundle.session_id, e["seq"], str(e.get("kind")), entry_text(e))
                                 for e in bundle.journal])
                rows = []
                for info, data in bundle.checkpoints:
                    text = json.dumps(data, ensure_ascii=False)
                    row = CheckpointInfo.model_validate(info).model_copy(update={"size_bytes": len(text.encode())})
                    rows.append((bundle.session_id, row.number, row.model_dump_json(), text))
                cur.executemany("INSERT INTO amos_checkpoints (session_id, number, info, data) VALUES "
                                "(%s, %s, %s, %s)", rows)

    def scopes(self) -> list[Any]:
        from amos.evidence.model import EvidenceScope
        from amos.store_pg.evidence import PgEvidenceStore

        rows = self.store._read("evidence scopes", "SELECT scope FROM amos_evidence_scopes ORDER BY key")
        return [PgEvidenceStore(self.db, EvidenceScope.model_validate_json(r[0]), max_records=10**9,
                                max_record_bytes=self.config.evidence.max_record_bytes) for r in rows]

    def evidence(self, scope: Any) -> Any:
        from amos.store_pg.evidence import PgEvidenceStore

        return PgEvidenceStore(self.db, scope, max_records=10**9,
                               max_record_bytes=self.config.evidence.max_record_bytes)

    @staticmethod
    def records(store: Any) -> Any:
        return store.all_records()

    @staticmethod
    def import_record(store: Any, meta: Any, data: bytes) -> bool:
        return store.import_record(meta, data)

    @staticmethod
    def finish_scope(store: Any) -> None:
        return None


# ---------------------------------------------------------------------------- the copy


def migrate(config: Any, to: str, progress: Progress) -> MigrateReport:
    """Copy every session and evidence record to the ``to`` backend, verifying each.

    Args:
        config: the loaded config (its folders and its ``store.url``/``AMOS_STORE_URL``).
        to: ``postgres`` or ``files``.
        progress: called with one line per step, for people.

    Raises:
        SessionError: ``unavailable`` (a store cannot be reached), ``busy`` (a session
            in use), ``corrupt`` (a hash that does not verify after copying).
        ConfigError: no URL, psycopg missing.
    """
    if to not in ("postgres", "files"):
        raise SessionError("bad_target", f"--to must be postgres or files (got {to!r})")
    source, dest = (FileSide(config), PgSide(config)) if to == "postgres" else (PgSide(config), FileSide(config))
    report = MigrateReport(to=to)
    ids = source.session_ids()
    progress(f"sessions: {len(ids)} to copy")
    for n, session_id in enumerate(ids, 1):
        _copy_session(source, dest, session_id, report, progress, f"[{n}/{len(ids)}]")
    for store in source.scopes():
        report.scopes += 1
        _copy_scope(source, dest, store, report, progress)
    progress(f"done: {report.sessions_copied} sessions copied ({report.sessions_present} already there, "
             f"{len(report.conflicts)} conflicts), {report.evidence_copied} evidence records copied "
             f"({report.evidence_present} already there) in {report.scopes} scopes; every hash verified")
    return report


def _copy_session(source: Any, dest: Any, session_id: str, report: MigrateReport, progress: Progress,
                  where: str) -> None:
    lock = source.lock(session_id)
    try:
        _copy_locked(source, dest, session_id, report, progress, where)
    except SessionError:
        raise
    except Exception as exc:  # a folder that cannot be written, a failed statement
        from amos.store_pg.connect import problem

        raise SessionError("write_failed", f"cannot copy session {session_id}: {problem(exc, '')}; nothing of it "
                                           "was written, rerun to go on", exit_code=1) from None
    finally:
        lock.release()


def _copy_locked(source: Any, dest: Any, session_id: str, report: MigrateReport, progress: Progress,
                 where: str) -> None:
    """Copy one session (its source lock held) unless the destination has it already."""
    bundle = source.read(session_id)
    if bundle is None:
        report.skipped.append(session_id)
        return
    digest = bundle.digest()
    there = dest.read(session_id)
    if there is not None:
        if there.digest() == digest:
            report.sessions_present += 1
            progress(f"{where} session {session_id}: already there (same SHA-256)")
        else:
            report.conflicts.append(session_id)
            progress(f"{where} session {session_id}: CONFLICT — the destination holds a different version; "
                     "left alone")
        return
    dest.write(bundle)
    copied = dest.read(session_id)
    if copied is None or copied.digest() != digest:
        raise SessionError("corrupt", f"session {session_id} reads back differently from the destination; "
                                      "stopped")
    report.sessions_copied += 1
    progress(f"{where} session {session_id}: copied, {len(bundle.journal)} journal entries, "
             f"{len(bundle.checkpoints)} checkpoints, sha256 {digest[:12]} verified")


def _copy_scope(source: Any, dest: Any, store: Any, report: MigrateReport, progress: Progress) -> None:
    target = dest.evidence(store.scope)
    copied = present = 0
    label = f"evidence scope {store.scope.owner_id}/{store.scope.namespace}"
    for meta, data in source.records(store):
        if dest.import_record(target, meta, data):
            copied += 1
        else:
            present += 1
        if (copied + present) % 1000 == 0:
            progress(f"{label}: {copied + present} records")
    dest.finish_scope(target)
    checked = 0
    for _meta, _ in dest.records(target):  # read back: each verified against its SHA-256
        checked += 1
    report.evidence_copied += copied
    report.evidence_present += present
    progress(f"{label}: {copied} copied, {present} already there, {checked} verified in the destination")
