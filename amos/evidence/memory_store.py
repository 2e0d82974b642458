"""InMemoryEvidenceStore: the file store's contract, held by this process only.

The default when no durable store is configured (seed "Configure a managed agent"):
share one instance explicitly for in-process resumption; saved references do not
recreate its data after a restart. Acknowledgement is ``memory``.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from amos.evidence import codec
from amos.evidence.common import DEFAULT_PAGE_LIMIT, StoreCore
from amos.evidence.model import (
    EvidenceError,
    EvidenceMeta,
    EvidencePage,
    EvidenceRecord,
    EvidenceReference,
    EvidenceScope,
)


class InMemoryEvidenceStore(StoreCore):
    """Evidence records in a dict; same API, errors and limits as the file store.

    Stored bytes are still verified against the reference on every read, so both
    stores behave the same for callers and tests.

    Args:
        scope, max_records, max_record_bytes, ttl_days, clock, max_concurrent_reads:
            see :class:`amos.evidence.common.StoreCore`.
        lock_timeout_s: wait for the instance lock before ``busy``, seconds.
    """

    acknowledgement = "memory"

    def __init__(
        self,
        scope: EvidenceScope,
        *,
        max_records: int = 100_000,
        max_record_bytes: int = 8 * 1024 * 1024,
        ttl_days: float | None = None,
        clock: Callable[[], float] | None = None,
        max_concurrent_reads: int = 16,
        lock_timeout_s: float = 10.0,
    ):
        super().__init__(
            scope, max_records=max_records, max_record_bytes=max_record_bytes,
            ttl_days=ttl_days, clock=clock, max_concurrent_reads=max_concurrent_reads,
        )
        self._lock = threading.Lock()
        self._lock_timeout_s = lock_timeout_s
        self._ids: list[str] = []
        self._rows: dict[str, tuple[EvidenceMeta, bytes]] = {}
        self._last_id: str | None = None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        if not self._lock.acquire(timeout=self._lock_timeout_s):
            raise EvidenceError("busy", "the evidence store is busy; try again")
        try:
            yield
        finally:
            self._lock.release()

    def put(self, record: EvidenceRecord) -> EvidenceReference:
        """Store ``record``; see :meth:`amos.evidence.store.EvidenceStore.put`."""
        body = self._prepare(record)
        with self._locked():
            if len(self._ids) >= self.max_records:
                raise EvidenceError(
                    "capacity", f"the evidence scope holds max_records ({self.max_records})"
                )
            record_id = codec.next_record_id(self._last_id, self._now_ms())
            stored_at = codec.ms_to_iso(codec.id_time_ms(record_id))
            data = codec.finish_body(body, stored_at)
            ref = codec.reference_for(record_id, data, self.acknowledgement)
            meta = EvidenceMeta(
                id=record_id, sha256=ref.sha256, size=ref.size, acknowledgement="memory",
                stored_at=stored_at, tool=record.tool, call_id=record.call_id,
                execution_id=record.execution_id, session_id=record.session_id,
                status=record.status, effect=record.effect, completion=record.completion,
            )
            self._ids.append(record_id)
            self._rows[record_id] = (meta, data)
            self._last_id = record_id
            return ref

    def _row(self, record_id: str) -> tuple[EvidenceMeta, bytes]:
        row = self._rows.get(record_id)
        if row is None or self._expired(record_id, self._now_ms()):
            raise EvidenceError("missing", f"no evidence {record_id} in this scope")
        return row

    def get_meta(self, record_id: str) -> EvidenceMeta:
        """Metadata of one live record; see the protocol."""
        return self._row(codec.normalize_id(record_id))[0]

    def get_reference(self, record_id: str) -> EvidenceReference:
        """The reference of one live record; see the protocol."""
        return self.get_meta(record_id).reference()

    def read_bytes(self, ref: EvidenceReference) -> bytes:
        """The exact stored bytes, verified; see the protocol."""
        self._check_ref(ref)
        with self._read_slot():
            data = self._row(ref.id)[1]
            codec.verify(data, ref)
            return data

    def list(
        self, after: str | None = None, limit: int = DEFAULT_PAGE_LIMIT,
        *, session_id: str | None = None,
    ) -> EvidencePage:
        """One metadata page in id order; see the protocol."""
        after = self._check_page(after, limit)
        live_from = self._live_from(self._now_ms())
        with self._locked():
            ids = self._ids
            start = 0 if after is None else bisect.bisect_right(ids, after)
            if live_from is not None:
                start = max(start, bisect.bisect_left(ids, live_from))
            entries: list[EvidenceMeta] = []
            more = False
            for record_id in ids[start:]:
                meta = self._rows[record_id][0]
                if session_id is not None and meta.session_id != session_id:
                    continue
                if len(entries) == limit:
                    more = True
                    break
                entries.append(meta)
        return EvidencePage(tuple(entries), entries[-1].id if more else None)

    def delete(self, ref: EvidenceReference | str) -> None:
        """Delete one record; see the protocol."""
        record_id = self._ref_id(ref)
        with self._locked():
            if self._rows.pop(record_id, None) is None:
                raise EvidenceError("missing", f"no evidence {record_id} in this scope")
            self._ids.remove(record_id)

    def prune_expired(self, now: datetime | None = None) -> int:
        """Remove records past ``ttl_days``; see the protocol."""
        if self.ttl_days is None:
            return 0
        live_from = self._live_from(self._moment_ms(now))
        return self._remove(lambda meta: meta.id < live_from)  # type: ignore[operator]

    def prune(
        self, older_than_days: float | None = None, session_id: str | None = None,
        *, now: datetime | None = None,
    ) -> int:
        """Remove old and/or one session's records; see the protocol."""
        cutoff = self._prune_cutoff(older_than_days, session_id, now)
        return self._remove(
            lambda meta: (cutoff is None or meta.id < cutoff)
            and (session_id is None or meta.session_id == session_id)
        )

    def _remove(self, doomed: Callable[[EvidenceMeta], bool]) -> int:
        with self._locked():
            keep = [i for i in self._ids if not doomed(self._rows[i][0])]
            gone = len(self._ids) - len(keep)
            for record_id in set(self._ids) - set(keep):
                del self._rows[record_id]
            self._ids = keep
            return gone
