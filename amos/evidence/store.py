"""The ``EvidenceStore`` protocol and the factory the runner and CLI use.

Bundled implementations: :class:`FileEvidenceStore` (durable, ``fsync``/``written``)
and :class:`InMemoryEvidenceStore` (``memory``). Both fail at capacity instead of
evicting, verify size and SHA-256 before returning any content, and raise only
:class:`EvidenceError` (codes in its docstring). Seed: durable-tool-evidence.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from amos.evidence.common import DEFAULT_CHUNK_CHARS, DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT
from amos.evidence.file_store import FileEvidenceStore
from amos.evidence.memory_store import InMemoryEvidenceStore
from amos.evidence.model import (
    EvidenceChunk,
    EvidenceMeta,
    EvidencePage,
    EvidenceRecord,
    EvidenceReference,
    EvidenceScope,
    resolve_scope,
)

__all__ = [
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_PAGE_LIMIT",
    "MAX_PAGE_LIMIT",
    "EvidenceStore",
    "FileEvidenceStore",
    "InMemoryEvidenceStore",
    "open_evidence_store",
]


@runtime_checkable
class EvidenceStore(Protocol):
    """Scoped, immutable, integrity-checked storage of tool evidence records.

    Attributes:
        scope: the one scope the store serves; ids of other scopes read as ``missing``.
        acknowledgement: strength of the references ``put`` returns.
        max_record_bytes: largest stored record, bytes (a capacity hint for capture).
    """

    scope: EvidenceScope
    acknowledgement: str
    max_record_bytes: int

    def put(self, record: EvidenceRecord) -> EvidenceReference:
        """Store one record; the store sets its ``scope`` and ``stored_at``.

        Returns:
            The reference, only after the store's acknowledgement.

        Raises:
            EvidenceError: ``not_json``, ``too_large`` (nothing written), ``scope``,
                ``capacity`` (nothing evicted), ``busy``, ``io``.
        """
        ...

    def get_meta(self, record_id: str) -> EvidenceMeta:
        """Metadata of one record by id, from the index (no record file is read).

        Raises:
            EvidenceError: ``invalid`` (not a UUID), ``missing`` (unknown, deleted,
                expired or another scope's id), ``corrupt`` (damaged index).
        """
        ...

    def get_reference(self, record_id: str) -> EvidenceReference:
        """The full reference of a record by id, as ``put`` reported it.

        Raises:
            EvidenceError: as :meth:`get_meta`.
        """
        ...

    def read_bytes(self, ref: EvidenceReference) -> bytes:
        """The exact stored bytes, after checking their size and SHA-256 against ``ref``.

        Raises:
            EvidenceError: ``missing``; ``corrupt`` (tampered, truncated or a
                reference that does not match the record); ``too_large``; ``busy``
                (all read slots in use).
        """
        ...

    def read_record(self, ref: EvidenceReference) -> EvidenceRecord:
        """The verified, parsed record (a detached copy).

        Raises:
            EvidenceError: as :meth:`read_bytes`, plus ``corrupt`` for an invalid record
                and ``scope`` for a record naming another scope.
        """
        ...

    def read_text_chunk(
        self, ref: EvidenceReference, offset: int = 0, limit: int = DEFAULT_CHUNK_CHARS
    ) -> EvidenceChunk:
        """A slice of the record's exact JSON text, offsets in Unicode code points.

        Args:
            ref: the record's reference.
            offset: first code point, 0..``total_chars``.
            limit: most code points returned, >= 1.

        Returns:
            The chunk; ``next_offset`` is None at the end, and concatenating chunks
            from 0 rebuilds the stored JSON exactly.

        Raises:
            EvidenceError: as :meth:`read_bytes`, plus ``invalid`` (bad offset/limit).
        """
        ...

    def list(
        self, after: str | None = None, limit: int = DEFAULT_PAGE_LIMIT,
        *, session_id: str | None = None,
    ) -> EvidencePage:
        """One page of live records' metadata in ascending id (storage) order.

        Args:
            after: the previous page's ``next_cursor`` (or any record id), None to start.
            limit: entries per page, 1..1000.
            session_id: only records of this session.

        Raises:
            EvidenceError: ``invalid`` (bad cursor or limit), ``corrupt`` (damaged index).
        """
        ...

    def delete(self, ref: EvidenceReference | str) -> None:
        """Delete one record (by reference or id), expired or not.

        Raises:
            EvidenceError: ``missing``, ``busy``, ``invalid``, ``io``.
        """
        ...

    def prune_expired(self, now: datetime | None = None) -> int:
        """Delete records older than ``ttl_days`` (at ``now``, default: the clock).

        Returns:
            How many were deleted (0 when ``ttl_days`` is None).
        """
        ...

    def prune(
        self, older_than_days: float | None = None, session_id: str | None = None,
        *, now: datetime | None = None,
    ) -> int:
        """Delete records admitted at least ``older_than_days`` ago and/or of one session.

        ``older_than_days=0`` matches every record up to ``now``; None matches any
        age, but one of the two filters is required.

        Returns:
            How many were deleted.

        Raises:
            EvidenceError: ``invalid`` (no filter, negative days), ``busy``, ``io``.
        """
        ...


def open_evidence_store(
    config: Any,
    *,
    scope: EvidenceScope | None = None,
    directory: str | Path | None = None,
    owner_id: str | None = None,
) -> FileEvidenceStore:
    """The file store an amos config describes (nothing is created until a write).

    Args:
        config: an ``AmosConfig`` (its ``evidence`` section is used).
        scope: the scope to serve; default :func:`resolve_scope` of
            ``config.evidence.scope`` with ``owner_id``.
        directory: the evidence root; default ``amos.paths.evidence_dir(config)``.
        owner_id: the owner when neither ``scope`` nor the config names one
            (default: the local user name).

    Returns:
        A :class:`FileEvidenceStore` with the config's limits and ``ttl_days`` — or, with
        ``store.backend: "postgres"`` (and no ``directory``), a
        :class:`~amos.store_pg.evidence.PgEvidenceStore` with the same.
    """
    from amos.paths import evidence_dir

    evidence = config.evidence
    store = getattr(config, "store", None)
    if directory is None and getattr(store, "backend", "files") == "postgres":
        from amos.store_pg import open_evidence_store as open_pg

        return open_pg(config, scope if scope is not None else resolve_scope(evidence.scope, owner_id=owner_id))
    return FileEvidenceStore(
        directory if directory is not None else evidence_dir(config),
        scope if scope is not None else resolve_scope(evidence.scope, owner_id=owner_id),
        max_records=evidence.max_records,
        max_record_bytes=evidence.max_record_bytes,
        ttl_days=evidence.ttl_days,
    )
