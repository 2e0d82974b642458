"""Evidence data types: scope, reference, record, metadata rows, chunks and the error.

Pure code: no I/O. The shapes follow seeds/durable-tool-evidence ("What is recorded
and projected", "Read, persist, and inspect"). A record is the complete observation
of one settled tool call; a reference names one stored record inside one store and is
never a filesystem path or a permission to read another owner's data.
"""

from __future__ import annotations

import getpass
import hashlib
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from amos.errors import AmosError
from amos.policy.canonical import canonicalize

EVIDENCE_VERSION = 1
"""Version of the record and reference formats written by this module."""

Acknowledgement = Literal["fsync", "written", "memory"]
"""How durable a stored record was when ``put`` returned.

``fsync``: the record file, its folder entry and its index line were fsynced;
``written``: written to the OS without fsync (survives a process crash, not a power
loss; also what a rebuilt index reports, since the original strength is unknown);
``memory``: held by this process only.
"""

# Mirrors amos.tools.base (not imported: tools will import evidence, not the reverse).
Effect = Literal["read", "write", "unknown"]
Status = Literal["succeeded", "failed", "denied", "blocked", "cancelled", "timed_out", "not_started"]
Completion = Literal["complete", "unknown"]

ErrorCode = Literal[
    "missing", "corrupt", "too_large", "not_json", "capacity", "busy", "scope", "invalid", "io", "ambiguous"
]

_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_UUID_RE = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"


class EvidenceError(AmosError):
    """An evidence store operation failed; nothing partial was returned or written.

    Storage failure is distinct from the tool's own outcome: callers keep the raw
    result and never repeat the tool to recreate evidence (seed "Failure and recovery").

    Attributes:
        code: what failed —
            ``missing``: no such record in this store's scope (unknown, deleted, pruned
            or expired id; a reference from another scope);
            ``corrupt``: the stored bytes do not match the reference's size or SHA-256,
            are not a valid record, or the index is damaged (no content is returned);
            ``too_large``: the serialized record exceeds ``max_record_bytes`` (nothing
            was written), or a stored file is larger than that limit;
            ``not_json``: the record holds a value that is not strict JSON (NaN or
            infinity, a non-string key, a cycle, an object, a lone surrogate…);
            ``capacity``: the scope already holds ``max_records`` records (bundled
            stores never evict to make room);
            ``busy``: the store lock or a read slot was not available in time;
            ``scope``: the record or the store folder belongs to another scope;
            ``invalid``: a malformed id, cursor, offset, limit or argument;
            ``io``: the operating system refused a read or write (disk full, permissions);
            ``ambiguous``: an id prefix several records share, or one too short to look up
            (issue 21, :mod:`amos.evidence.prefix`).
        exit_code: 2 for ``invalid``, ``scope`` and ``ambiguous`` (a usage problem), else 1.
    """

    def __init__(self, code: ErrorCode, message: str):
        self.code = code
        self.exit_code = 2 if code in ("invalid", "scope", "ambiguous") else 1
        super().__init__(message)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EvidenceScope(_Frozen):
    """Who owns a set of records. Resolved by the host, never from model arguments.

    Attributes:
        owner_id: owning user (config default: the local user name).
        namespace: a partition of the owner's records (config default: ``default``).
        tenant_id: optional tenant/account; None means none.
    """

    owner_id: str = Field(min_length=1, max_length=256)
    namespace: str = Field(min_length=1, max_length=256)
    tenant_id: str | None = Field(default=None, min_length=1, max_length=256)

    def canonical_json(self) -> str:
        """RFC 8785 JSON of the exact scope fields (``tenant_id`` null when absent)."""
        return canonicalize(
            {"owner_id": self.owner_id, "namespace": self.namespace, "tenant_id": self.tenant_id}
        )

    @property
    def key(self) -> str:
        """SHA-256 hex of :meth:`canonical_json`: the scope's folder name in a file store.

        Hashing the exact fields avoids collisions that sanitizing case or punctuation
        would create (seed "Read, persist, and inspect").
        """
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()


def local_user_name() -> str:
    """The local user name (``getpass.getuser()``), or ``local`` when it is unknown."""
    try:
        return getpass.getuser() or "local"
    except (KeyError, OSError, ImportError):
        return "local"


def resolve_scope(config: Any = None, *, owner_id: str | None = None) -> EvidenceScope:
    """The evidence scope from config with spec/config.md defaults.

    Args:
        config: an ``EvidenceScopeConfig`` (fields ``owner_id``, ``tenant_id``,
            ``namespace``, each possibly None), or None for all defaults.
        owner_id: the owner to use when the config names none (default: the local
            user name).

    Returns:
        The scope: owner from config, else ``owner_id``, else the local user name;
        namespace from config, else ``default``; tenant from config, else None.
    """
    owner = getattr(config, "owner_id", None) or owner_id or local_user_name()
    namespace = getattr(config, "namespace", None) or "default"
    tenant = getattr(config, "tenant_id", None)
    return EvidenceScope(owner_id=owner, namespace=namespace, tenant_id=tenant)


class EvidenceReference(_Frozen):
    """A stored record's identity and integrity metadata (seed "Read, persist, and inspect").

    Attributes:
        version: reference format version (1).
        id: the record's UUID (lowercase, time-ordered UUIDv7 in bundled stores).
        sha256: SHA-256 hex of the exact stored bytes.
        size: length of the stored bytes, bytes.
        acknowledgement: durability when the record was stored (never upgraded by a
            later reader).
    """

    version: Literal[1] = EVIDENCE_VERSION
    id: str = Field(pattern=_UUID_RE)
    sha256: str = Field(pattern=_SHA256_RE.pattern)
    size: int = Field(ge=0)
    acknowledgement: Acknowledgement


def coerce_reference(value: object) -> EvidenceReference:
    """A reference from a model-supplied or saved value (the ``evidence_read`` tool).

    Args:
        value: an :class:`EvidenceReference`, a dict of its fields, or that dict as
            a JSON string.

    Raises:
        EvidenceError: ``invalid`` when it is not a well-formed version-1 reference.
    """
    if isinstance(value, EvidenceReference):
        return value
    try:
        if isinstance(value, str | bytes):
            return EvidenceReference.model_validate_json(value)
        return EvidenceReference.model_validate(value)
    except ValidationError as exc:
        fields = ", ".join(str(e["loc"][0]) for e in exc.errors() if e["loc"]) or "value"
        raise EvidenceError("invalid", f"not an evidence reference (bad {fields})") from None


class EvidenceRecord(_Frozen):
    """One settled tool call as stored (record format version 1).

    The store fills ``scope`` and ``stored_at`` on ``put``; callers leave them None
    (a ``scope`` set to another scope is refused with ``scope``). Redact arguments
    and result before storing (:func:`amos.evidence.redact.redact`).

    Attributes:
        version: record format version (1).
        stored_at: ISO-8601 UTC with milliseconds, set by the store.
        scope: the owning scope, set by the store.
        session_id: the amos session the call ran in, if any.
        execution_id: the run execution the call belongs to.
        call_id: the model's call id.
        tool: tool name as dispatched.
        effect: host-declared effect (never inferred from the tool name).
        status: framework outcome status.
        completion: ``unknown`` when a timed-out or cancelled write may or may not
            have happened.
        started_at / ended_at: ISO-8601 UTC timestamps of the call.
        identity: trusted identity from the host (e.g. ``owner_id``, ``tenant_id``,
            ``namespace``, ``user``) — never taken from model arguments.
        arguments: the dispatched arguments (JSON).
        error: one line naming what went wrong, or None.
        result: the tool's JSON result (None when there is none).
    """

    version: Literal[1] = EVIDENCE_VERSION
    stored_at: str | None = None
    scope: EvidenceScope | None = None
    session_id: str | None = None
    execution_id: str
    call_id: str
    tool: str
    effect: Effect = "unknown"
    status: Status
    completion: Completion = "complete"
    started_at: str | None = None
    ended_at: str | None = None
    identity: dict[str, str | None] = Field(default_factory=dict)
    arguments: Any = Field(default_factory=dict)
    error: str | None = None
    result: Any = None


def record_from_outcome(
    outcome: Any,
    *,
    arguments: Any,
    identity: dict[str, str | None],
    session_id: str | None = None,
) -> EvidenceRecord:
    """An unstored record of a ``ToolOutcome`` (amos.tools.base).

    Args:
        outcome: the normalized outcome (``call_id``, ``execution_id``, ``tool``,
            ``effect``, ``status``, ``completion``, ``started_at``, ``ended_at``,
            ``result``, ``error``).
        arguments: the dispatched arguments, already redacted.
        identity: trusted host identity (never from model arguments).
        session_id: the session the call ran in.

    Returns:
        The record, ``scope`` and ``stored_at`` left for the store. The caller redacts
        ``result`` first, e.g. ``record.model_copy(update={"result": redact(...)})``.
    """
    return EvidenceRecord(
        session_id=session_id,
        execution_id=outcome.execution_id,
        call_id=outcome.call_id,
        tool=outcome.tool,
        effect=outcome.effect,
        status=outcome.status,
        completion=outcome.completion,
        started_at=outcome.started_at,
        ended_at=outcome.ended_at,
        identity=dict(identity),
        arguments=arguments,
        error=outcome.error,
        result=outcome.result,
    )


@dataclass(frozen=True, slots=True)
class EvidenceMeta:
    """One metadata row of a listing: no arguments and no result.

    Attributes:
        id: record UUID.
        sha256 / size / acknowledgement: as in :class:`EvidenceReference` (size in bytes).
        stored_at: ISO-8601 UTC with milliseconds.
        tool, call_id, execution_id, session_id, status, effect, completion: copied
            from the record.
    """

    id: str
    sha256: str
    size: int
    acknowledgement: Acknowledgement
    stored_at: str
    tool: str
    call_id: str
    execution_id: str
    session_id: str | None
    status: str
    effect: str
    completion: str

    def reference(self) -> EvidenceReference:
        """The full reference of this record."""
        return EvidenceReference(
            id=self.id, sha256=self.sha256, size=self.size, acknowledgement=self.acknowledgement
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class EvidencePage:
    """One page of :meth:`EvidenceStore.list`.

    Attributes:
        entries: metadata rows in ascending id (= storage) order.
        next_cursor: pass as ``after`` for the next page; None when this is the last.
    """

    entries: tuple[EvidenceMeta, ...]
    next_cursor: str | None

    def to_dict(self) -> dict[str, Any]:
        """``{"entries": [...], "next": cursor}`` (the evidence_list tool's shape)."""
        return {"entries": [e.to_dict() for e in self.entries], "next": self.next_cursor}


@dataclass(frozen=True, slots=True)
class EvidenceChunk:
    """A slice of a record's exact serialized JSON text.

    Attributes:
        id: record UUID.
        offset: start of ``text`` in the record's text, Unicode code points.
        text: the slice; concatenating all chunks rebuilds the stored JSON exactly.
        next_offset: where the next chunk starts, or None when ``text`` reaches the end.
        total_chars: length of the whole record text, Unicode code points.
    """

    id: str
    offset: int
    text: str
    next_offset: int | None
    total_chars: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field."""
        return {name: getattr(self, name) for name in self.__slots__}
