"""FileEvidenceStore: one immutable JSON file per record, one folder per scope.

Layout (DESIGN.md "Storage")::

    <directory>/<scope key>/              0700; key = SHA-256 of the scope's canonical JSON
        scope.json                        0600; the exact scope fields (checked on open)
        index.jsonl                       0600; metadata lines sorted by id (file_index.py)
        .lock                             0600; filelock serializing writers of this scope
        records/<uuid>.json               0600; the record's exact bytes, written once

Writes (``put``, ``delete``, ``prune*``, ``rebuild_index``) hold the scope's
``filelock`` (a timeout is ``busy``), so several processes and instances may share one
directory. ``put`` checks capacity, issues the next id, writes the record file
atomically (temp + fsync + rename + folder fsync) and only then appends its index
line (fsync): a record is visible once, complete. Reads take no lock and verify the
whole file's size and SHA-256 before returning any content.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from amos.atomic import atomic_write_bytes
from amos.evidence import codec
from amos.evidence import file_index as fi
from amos.evidence import record_files as rf
from amos.evidence.common import DEFAULT_PAGE_LIMIT, StoreCore
from amos.evidence.model import (
    EvidenceError,
    EvidenceMeta,
    EvidencePage,
    EvidenceRecord,
    EvidenceReference,
    EvidenceScope,
)
from amos.safe_read import NotRegularFileError, read_head


@dataclass(frozen=True)
class _WriterState:
    generation: str
    size: int
    count: int
    last_id: str | None


class FileEvidenceStore(StoreCore):
    """Durable evidence for one scope under ``directory`` (seed "Defaults and durability").

    Args:
        directory: the evidence root (``amos.paths.evidence_dir(config)``); created
            0700 on the first write.
        scope: the scope this instance serves; its folder is named by ``scope.key``.
        max_records, max_record_bytes, ttl_days, clock, max_concurrent_reads: see
            :class:`amos.evidence.common.StoreCore`.
        fsync: fsync records and index (acknowledgement ``fsync``); False skips every
            fsync (acknowledgement ``written``).
        lock_timeout_s: wait for the scope lock before ``busy``, seconds.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        scope: EvidenceScope,
        *,
        max_records: int = 100_000,
        max_record_bytes: int = 8 * 1024 * 1024,
        ttl_days: float | None = None,
        fsync: bool = True,
        lock_timeout_s: float = 10.0,
        clock: Callable[[], float] | None = None,
        max_concurrent_reads: int = 16,
    ):
        super().__init__(
            scope, max_records=max_records, max_record_bytes=max_record_bytes,
            ttl_days=ttl_days, clock=clock, max_concurrent_reads=max_concurrent_reads,
        )
        self.directory = Path(directory).expanduser().absolute()
        self.root = self.directory / scope.key
        self.records_dir = self.root / "records"
        self.index_path = self.root / "index.jsonl"
        self._durable = fsync
        self.acknowledgement = "fsync" if fsync else "written"
        self._lock_timeout_s = lock_timeout_s
        self._state: _WriterState | None = None
        self._scope_checked = False

    # --- layout, scope and lock ------------------------------------------------------

    def _scope_bytes(self) -> bytes:
        return self.scope.canonical_json().encode("utf-8") + b"\n"

    def _check_scope_file(self) -> bool:
        """True when the scope folder exists (its scope.json, if any, must match)."""
        if self._scope_checked:
            return True
        try:
            found = read_head(self.root / "scope.json", 4096)
        except FileNotFoundError:
            return self.root.is_dir()
        except NotRegularFileError:
            raise EvidenceError("corrupt", f"{self.root / 'scope.json'} is not a regular file") from None
        except OSError as exc:
            raise EvidenceError("io", f"cannot read {self.root / 'scope.json'}: {exc}") from None
        if found != self._scope_bytes():
            raise EvidenceError("scope", f"{self.root} holds another evidence scope ({self.root / 'scope.json'} "
                                         "differs from evidence.scope in the config: another owner's records, or "
                                         "a damaged file; set evidence.directory to a folder of its own, or put "
                                         "the config's scope back)")
        self._scope_checked = True
        return True

    def _ensure_layout(self) -> None:
        if self._check_scope_file() and self._scope_checked:
            return
        try:
            for folder in (self.directory, self.root, self.records_dir):
                if not folder.is_dir():
                    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
                    os.chmod(folder, 0o700)
            scope_file = self.root / "scope.json"
            if not scope_file.exists():
                atomic_write_bytes(scope_file, self._scope_bytes())
        except OSError as exc:
            raise EvidenceError("io", f"cannot create evidence folder {self.root}: {exc}") from None
        self._check_scope_file()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        lock = FileLock(
            str(self.root / ".lock"), timeout=self._lock_timeout_s, mode=0o600,
            thread_local=False, poll_interval=0.002, preserve_lock_file=True,
        )
        try:
            lock.acquire()
        except Timeout:
            raise EvidenceError("busy", f"the evidence store {self.root} is busy; try again") from None
        except OSError as exc:
            raise EvidenceError("io", f"cannot lock {self.root}: {exc}") from None
        try:
            yield
        finally:
            lock.release()

    def _open_index(self) -> fi.IndexSnapshot | None:
        if not self._check_scope_file():
            return None
        return fi.IndexSnapshot.open(self.index_path)

    def _writer_snapshot(self) -> tuple[fi.IndexSnapshot, _WriterState]:
        """Open the index under the lock: created if missing, torn tail dropped."""
        snap = fi.IndexSnapshot.open(self.index_path)
        if snap is None or snap.torn:
            if snap is None:
                fi.rewrite(self.index_path, [], durable=self._durable)
            else:
                with snap:
                    fi.rewrite(self.index_path, (line + b"\n" for line in snap.lines()),
                               durable=self._durable)
            snap = fi.IndexSnapshot.open(self.index_path)
            assert snap is not None
        state = self._state
        try:
            if state is not None and state.generation == snap.generation and state.size <= snap.size:
                if state.size != snap.size:
                    state = _WriterState(snap.generation, snap.size,
                                         state.count + snap.count(state.size), snap.last_id())
            else:
                state = _WriterState(snap.generation, snap.size, snap.count(), snap.last_id())
        except BaseException:
            snap.close()
            raise
        return snap, state

    # --- writing ---------------------------------------------------------------------

    def put(self, record: EvidenceRecord) -> EvidenceReference:
        """Store ``record``; see :meth:`amos.evidence.store.EvidenceStore.put`."""
        body = self._prepare(record)
        self._ensure_layout()
        try:
            with self._locked():
                snap, state = self._writer_snapshot()
                with snap:
                    return self._put_locked(record, body, state)
        except OSError as exc:
            raise EvidenceError("io", f"cannot store evidence in {self.root}: {exc}") from None

    def _put_locked(self, record: EvidenceRecord, body: bytes, state: _WriterState) -> EvidenceReference:
        if state.count >= self.max_records:
            raise EvidenceError(
                "capacity", f"the evidence scope holds max_records ({self.max_records})"
            )
        record_id = codec.next_record_id(state.last_id, self._now_ms())
        stored_at = codec.ms_to_iso(codec.id_time_ms(record_id))
        data = codec.finish_body(body, stored_at)
        ref = codec.reference_for(record_id, data, self.acknowledgement)
        path = self.records_dir / f"{record_id}.json"
        rf.write_record_file(path, data, durable=self._durable)
        meta = EvidenceMeta(
            id=record_id, sha256=ref.sha256, size=ref.size, acknowledgement=ref.acknowledgement,
            stored_at=stored_at, tool=record.tool, call_id=record.call_id,
            execution_id=record.execution_id, session_id=record.session_id,
            status=record.status, effect=record.effect, completion=record.completion,
        )
        line = fi.entry_line(meta)
        try:
            fi.append(self.index_path, line, state.size, durable=self._durable)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path)
            self._state = None
            raise
        self._state = _WriterState(state.generation, state.size + len(line), state.count + 1,
                                   record_id)
        return ref

    def delete(self, ref: EvidenceReference | str) -> None:
        """Delete one record (expired or not); see the protocol."""
        record_id = self._ref_id(ref)
        removed = self._remove(None, stop_key=None, only=record_id)
        if not removed:
            raise EvidenceError("missing", f"no evidence {record_id} in this scope")

    def prune_expired(self, now: datetime | None = None) -> int:
        """Remove records past ``ttl_days``; see the protocol."""
        live_from = self._live_from(self._moment_ms(now))
        if live_from is None:
            return 0
        return self._remove(None, stop_key=live_from)

    def prune(
        self, older_than_days: float | None = None, session_id: str | None = None,
        *, now: datetime | None = None,
    ) -> int:
        """Remove old and/or one session's records; see the protocol."""
        cutoff = self._prune_cutoff(older_than_days, session_id, now)
        if session_id is None:
            return self._remove(None, stop_key=cutoff)
        return self._remove(
            lambda line: fi.parse_line(self.index_path, line).session_id == session_id,
            stop_key=cutoff,
        )

    def _remove(self, doomed: Callable[[bytes], bool] | None, *, stop_key: str | None,
                only: str | None = None) -> int:
        """Unlink matching records (ids below ``stop_key``), then rewrite the index."""
        if not self._check_scope_file():
            return 0
        try:
            with self._locked():
                snap = fi.IndexSnapshot.open(self.index_path)
                if snap is None:
                    return 0
                with snap:
                    if only is not None:
                        found = snap.find(only)
                        ids = [] if found is None else [only]
                    else:
                        stop = snap.data_end if stop_key is None else snap.search(stop_key, strict=False)
                        ids = [fi.line_id(line) for line in snap.lines(stop=stop)
                               if doomed is None or doomed(line)]
                    if not ids:
                        return 0
                    for record_id in ids:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(self.records_dir / f"{record_id}.json")
                    gone = set(ids)
                    fi.rewrite(
                        self.index_path,
                        (line + b"\n" for line in snap.lines() if fi.line_id(line) not in gone),
                        durable=self._durable,
                    )
                    self._state = None
                    return len(ids)
        except OSError as exc:
            raise EvidenceError("io", f"cannot remove evidence in {self.root}: {exc}") from None

    # --- reading ---------------------------------------------------------------------

    def get_meta(self, record_id: str) -> EvidenceMeta:
        """Metadata of one live record from the index; see the protocol."""
        record_id = codec.normalize_id(record_id)
        if not self._expired(record_id, self._now_ms()):
            snap = self._open_index()
            if snap is not None:
                with snap:
                    line = snap.find(record_id)
                if line is not None:
                    return fi.parse_line(self.index_path, line)
        raise EvidenceError("missing", f"no evidence {record_id} in this scope")

    def get_reference(self, record_id: str) -> EvidenceReference:
        """The reference of one live record; see the protocol."""
        return self.get_meta(record_id).reference()

    def read_bytes(self, ref: EvidenceReference) -> bytes:
        """The exact stored bytes, verified; see the protocol."""
        self._check_ref(ref)
        with self._read_slot():
            meta = self.get_meta(ref.id)
            if meta.sha256 != ref.sha256 or meta.size != ref.size:
                raise EvidenceError(
                    "corrupt", f"the reference of evidence {ref.id} does not match the stored record"
                )
            data = rf.read_record_file(self.records_dir / f"{ref.id}.json", ref.id,
                                       self.max_record_bytes)
            codec.verify(data, ref)
            return data

    def list(
        self, after: str | None = None, limit: int = DEFAULT_PAGE_LIMIT,
        *, session_id: str | None = None,
    ) -> EvidencePage:
        """One metadata page in id order; see the protocol."""
        after = self._check_page(after, limit)
        live_from = self._live_from(self._now_ms())
        snap = self._open_index()
        if snap is None:
            return EvidencePage((), None)
        entries: list[EvidenceMeta] = []
        more = False
        with snap:
            start = snap.data_start if after is None else snap.search(after, strict=True)
            if live_from is not None:
                start = max(start, snap.search(live_from, strict=False))
            for line in snap.lines(start):
                meta = fi.parse_line(self.index_path, line)
                if session_id is not None and meta.session_id != session_id:
                    continue
                if len(entries) == limit:
                    more = True
                    break
                entries.append(meta)
        return EvidencePage(tuple(entries), entries[-1].id if more else None)

    # --- repair ----------------------------------------------------------------------

    def rebuild_index(self, recorded: Mapping[str, tuple[str, int]] | None = None) -> dict[str, Any]:
        """Recreate the index from the record files (after a crash or a damaged index).

        Each ``records/<uuid>.json`` that parses as a record of this scope is indexed
        with its current size and SHA-256 — unless a hash was recorded for it (the old
        index's line, or ``recorded``) and the content no longer matches it: such a
        record is *corrupt* and keeps its recorded hash, so reads keep failing and the
        listing keeps showing what was stored (issue 17 item 4); nothing is deleted. An
        acknowledgement is kept from the old index when the hash matches there, else
        reported conservatively as ``written`` (seed "Defaults and durability boundaries").

        Args:
            recorded: ``{id: (sha256, size bytes)}`` known from elsewhere (the evidence
                references sessions hold), checked like the old index's hashes.

        Returns:
            ``{"indexed": n, "skipped": [ids of unreadable or foreign files],
            "corrupt": [ids whose content does not match its recorded SHA-256]}``.

        Raises:
            EvidenceError: ``busy``, ``scope``, ``io``.
        """
        self._ensure_layout()
        with self._locked():
            old: dict[str, EvidenceMeta] = {}
            with contextlib.suppress(EvidenceError):
                snap = fi.IndexSnapshot.open(self.index_path)
                if snap is not None:
                    with snap:
                        for line in snap.lines():
                            with contextlib.suppress(EvidenceError):
                                meta = fi.parse_line(self.index_path, line)
                                old[meta.id] = meta
            try:
                lines, skipped, corrupt = rf.scan_records(self.records_dir, self.scope,
                                                          self.max_record_bytes, old, recorded)
                fi.rewrite(self.index_path, lines, durable=self._durable)
            except OSError as exc:
                raise EvidenceError("io", f"cannot rewrite {self.index_path}: {exc}") from None
            self._state = None
        return {"indexed": len(lines), "skipped": skipped, "corrupt": corrupt}
