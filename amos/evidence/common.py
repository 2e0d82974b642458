"""Settings and checks shared by the bundled evidence stores (no I/O)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from amos.evidence import codec
from amos.evidence.model import (
    EvidenceChunk,
    EvidenceError,
    EvidenceRecord,
    EvidenceReference,
    EvidenceScope,
)

DEFAULT_MAX_RECORDS = 100_000
DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024
DEFAULT_PAGE_LIMIT = 100
MAX_PAGE_LIMIT = 1000
"""Largest ``limit`` of one listing page, entries."""
DEFAULT_CHUNK_CHARS = 16_384
"""Default ``limit`` of :meth:`read_text_chunk`, Unicode code points."""


class StoreCore:
    """Scope, limits, retention, clock and read slots of a bundled store.

    Args:
        scope: the one scope this store instance serves.
        max_records: records the scope may hold (expired but unpruned ones count);
            a ``put`` beyond it fails with ``capacity``.
        max_record_bytes: largest stored record, bytes.
        ttl_days: records older than this (counted from admission) read as
            ``missing``, are left out of listings and are removed by
            ``prune_expired``; None keeps them.
        clock: current Unix time in seconds (default ``time.time``; tests pass a fake).
        max_concurrent_reads: record reads allowed at once in this instance; one
            more fails with ``busy`` instead of queueing.

    Raises:
        ValueError: a limit is not positive.
    """

    read_bytes: Callable[[EvidenceReference], bytes]  # each store verifies and returns a record's bytes

    def __init__(
        self,
        scope: EvidenceScope,
        *,
        max_records: int = DEFAULT_MAX_RECORDS,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        ttl_days: float | None = None,
        clock: Callable[[], float] | None = None,
        max_concurrent_reads: int = 16,
    ):
        if max_records < 1 or max_record_bytes < 1 or max_concurrent_reads < 1:
            raise ValueError("max_records, max_record_bytes and max_concurrent_reads must be >= 1")
        if ttl_days is not None and ttl_days <= 0:
            raise ValueError("ttl_days must be positive or None")
        self.scope = scope
        self.max_records = max_records
        self.max_record_bytes = max_record_bytes
        self.ttl_days = ttl_days
        self._clock = clock or time.time
        self._read_slots = threading.BoundedSemaphore(max_concurrent_reads)

    @property
    def serialization_limit_bytes(self) -> int:
        """Capacity hint for callers that bound capture: ``max_record_bytes``."""
        return self.max_record_bytes

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _moment_ms(self, now: datetime | None) -> int:
        return self._now_ms() if now is None else codec.datetime_to_ms(now)

    def _live_from(self, now_ms: int) -> str | None:
        """Ids below this key are expired (None: nothing expires)."""
        if self.ttl_days is None:
            return None
        return codec.time_key(now_ms - codec.days_to_ms(self.ttl_days))

    def _expired(self, record_id: str, now_ms: int) -> bool:
        live_from = self._live_from(now_ms)
        return live_from is not None and record_id < live_from

    def _prepare(self, record: EvidenceRecord) -> bytes:
        if not isinstance(record, EvidenceRecord):
            raise EvidenceError("invalid", "put() takes an EvidenceRecord")
        return codec.encode_body(record, self.scope, self.max_record_bytes)

    @staticmethod
    def _ref_id(ref: EvidenceReference | str) -> str:
        if isinstance(ref, EvidenceReference):
            return ref.id
        return codec.normalize_id(ref)

    def _check_page(self, after: str | None, limit: int) -> str | None:
        if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_LIMIT:
            raise EvidenceError("invalid", f"limit must be 1..{MAX_PAGE_LIMIT} entries")
        if after is None:
            return None
        try:
            return codec.normalize_id(after)
        except EvidenceError:
            raise EvidenceError("invalid", f"not a listing cursor: {str(after)[:64]!r}") from None

    def _check_ref(self, ref: EvidenceReference) -> None:
        if not isinstance(ref, EvidenceReference):
            raise EvidenceError("invalid", "expected an EvidenceReference")
        if ref.size > self.max_record_bytes:
            raise EvidenceError(
                "too_large",
                f"evidence {ref.id} is {ref.size} bytes, over max_record_bytes "
                f"({self.max_record_bytes})",
            )

    @contextmanager
    def _read_slot(self) -> Iterator[None]:
        if not self._read_slots.acquire(blocking=False):
            raise EvidenceError("busy", "too many evidence reads at once; try again")
        try:
            yield
        finally:
            self._read_slots.release()

    def _prune_cutoff(self, older_than_days: float | None, session_id: str | None,
                      now: datetime | None) -> str | None:
        if older_than_days is None and session_id is None:
            raise EvidenceError(
                "invalid", "prune needs older_than_days or session_id (prune_expired uses ttl_days)"
            )
        if older_than_days is None:
            return None
        if older_than_days < 0:
            raise EvidenceError("invalid", "older_than_days must be >= 0")
        return codec.time_key(self._moment_ms(now) - codec.days_to_ms(older_than_days) + 1)


    def read_record(self, ref: EvidenceReference) -> EvidenceRecord:
        """The verified record; see the protocol."""
        return codec.decode_record(self.read_bytes(ref), ref.id, self.scope)

    def read_text_chunk(
        self, ref: EvidenceReference, offset: int = 0, limit: int = DEFAULT_CHUNK_CHARS
    ) -> EvidenceChunk:
        """A verified chunk of the record's JSON text; see the protocol."""
        return codec.text_chunk(ref.id, self.read_bytes(ref), offset, limit)
