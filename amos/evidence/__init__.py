"""Durable tool evidence: scoped, immutable, integrity-checked records of tool calls.

Seed: durable-tool-evidence. This package is the storage half — the data types
(:mod:`~amos.evidence.model`), strict serialization and chunking
(:mod:`~amos.evidence.codec`), credential redaction (:mod:`~amos.evidence.redact`) and
the stores (:mod:`~amos.evidence.store`). Importing it has no side effects.
"""

from __future__ import annotations

from amos.evidence.model import (
    EVIDENCE_VERSION,
    Acknowledgement,
    EvidenceChunk,
    EvidenceError,
    EvidenceMeta,
    EvidencePage,
    EvidenceRecord,
    EvidenceReference,
    EvidenceScope,
    coerce_reference,
    local_user_name,
    record_from_outcome,
    resolve_scope,
)
from amos.evidence.redact import REDACTED, is_credential_key, redact, redact_text
from amos.evidence.store import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_PAGE_LIMIT,
    MAX_PAGE_LIMIT,
    EvidenceStore,
    FileEvidenceStore,
    InMemoryEvidenceStore,
    open_evidence_store,
)

__all__ = [
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_PAGE_LIMIT",
    "EVIDENCE_VERSION",
    "MAX_PAGE_LIMIT",
    "REDACTED",
    "Acknowledgement",
    "EvidenceChunk",
    "EvidenceError",
    "EvidenceMeta",
    "EvidencePage",
    "EvidenceRecord",
    "EvidenceReference",
    "EvidenceScope",
    "EvidenceStore",
    "FileEvidenceStore",
    "InMemoryEvidenceStore",
    "coerce_reference",
    "is_credential_key",
    "local_user_name",
    "open_evidence_store",
    "record_from_outcome",
    "redact",
    "redact_text",
    "resolve_scope",
]
