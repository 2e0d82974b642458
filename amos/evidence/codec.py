"""Record ids, strict JSON serialization, integrity checks and text chunks.

Pure code shared by the bundled stores: no I/O.

Record ids are UUIDv7 (RFC 9562): 48 bits of Unix time in milliseconds, then random
bits. A store issues them strictly increasing (:func:`next_record_id`), so the
lowercase id string is also the listing order, the cursor, and the admission time
that ``ttl_days`` and ``prune`` count from.

The stored bytes are UTF-8 of compact strict JSON (no NaN/Infinity, string keys only)
with the fields in a fixed order: ``version``, ``stored_at``, ``scope``, the call
correlation, ``identity``, ``arguments``, ``error`` and last ``result``.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from amos.evidence.model import (
    EvidenceChunk,
    EvidenceError,
    EvidenceRecord,
    EvidenceReference,
    EvidenceScope,
)

MAX_JSON_DEPTH = 256
"""Deepest nesting accepted in a record (the root object is depth 0)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RAND_BITS = 74
_RAND_LIMIT = 1 << _RAND_BITS
_MS_LIMIT = 1 << 48

_BODY_PREFIX = b'{"version":1,'
_STORED_AT_FIELD = b'"stored_at":"%s",'
STORED_AT_LENGTH = len("2000-01-01T00:00:00.000+00:00")
"""Characters of a ``stored_at`` timestamp (fixed for years 1000-9999)."""
_STORED_AT_OVERHEAD = len(_STORED_AT_FIELD % (b"x" * STORED_AT_LENGTH))

# --- ids and time -------------------------------------------------------------------


def _make_id(ms: int, rand: int) -> str:
    value = (ms << 80) | (0x7 << 76) | ((rand >> 62) << 64) | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def _split_id(record_id: str) -> tuple[int, int]:
    value = uuid.UUID(record_id).int
    rand = (((value >> 64) & 0xFFF) << 62) | (value & ((1 << 62) - 1))
    return value >> 80, rand


def next_record_id(last_id: str | None, now_ms: int) -> str:
    """A new UUIDv7 id sorting strictly after ``last_id``.

    Args:
        last_id: the greatest id issued so far in the scope, or None.
        now_ms: current Unix time, milliseconds.

    Returns:
        An id whose time is ``now_ms``, or ``last_id``'s time (stepped forward by a
        random amount) when the clock has not advanced past it.
    """
    rand = secrets.randbits(_RAND_BITS)
    if last_id is None:
        return _make_id(now_ms % _MS_LIMIT, rand)
    last_ms, last_rand = _split_id(last_id)
    if now_ms > last_ms:
        return _make_id(now_ms % _MS_LIMIT, rand)
    stepped = last_rand + 1 + secrets.randbits(32)
    if stepped < _RAND_LIMIT:
        return _make_id(last_ms, stepped)
    return _make_id(last_ms + 1, rand)


def id_time_ms(record_id: str) -> int:
    """The admission time encoded in a UUIDv7 id, Unix milliseconds."""
    return int(record_id[0:8] + record_id[9:13], 16)


def time_key(ms: int) -> str:
    """The smallest UUIDv7 id of millisecond ``ms``: ids below it are older."""
    return _make_id(max(0, min(ms, _MS_LIMIT - 1)), 0)


def normalize_id(value: object) -> str:
    """``value`` as a lowercase hyphenated UUID string.

    Raises:
        EvidenceError: ``invalid`` when it is not a UUID.
    """
    if not isinstance(value, str) or len(value) > 64:
        raise EvidenceError("invalid", "an evidence id is a UUID string")
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise EvidenceError("invalid", f"not an evidence id: {value[:64]!r}") from None


def now_ms() -> int:
    """Current Unix time, milliseconds."""
    return int(datetime.now(UTC).timestamp() * 1000)


def ms_to_iso(ms: int) -> str:
    """Unix milliseconds as ISO-8601 UTC with milliseconds (``…T12:00:00.000+00:00``)."""
    return (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")


def datetime_to_ms(moment: datetime) -> int:
    """A datetime as Unix milliseconds (a naive datetime is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def days_to_ms(days: float) -> int:
    """Days as milliseconds."""
    return int(days * 86_400_000)


# --- strict JSON -------------------------------------------------------------------


class _NotJson(Exception):
    def __init__(self, why: str):
        super().__init__(why)
        self.why = why
        self.path: list[str] = []


def _walk(value: Any, depth: int, active: set[int]) -> None:
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJson(f"non-finite number {value!r}")
        return
    if depth >= MAX_JSON_DEPTH:
        raise _NotJson(f"nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        raise _NotJson(f"{type(value).__name__} is not a JSON value")
    if id(value) in active:
        raise _NotJson("cycle")
    active.add(id(value))
    for key, item in items:
        if isinstance(value, dict) and not isinstance(key, str):
            raise _NotJson(f"non-string key {key!r}")
        try:
            _walk(item, depth + 1, active)
        except _NotJson as exc:
            exc.path.append(f"[{key}]" if isinstance(key, int) else f".{key}")
            raise
    active.discard(id(value))


def check_json(value: Any, *, where: str = "$") -> None:
    """Check that ``value`` is strict JSON data.

    Accepts dicts with string keys, lists and tuples (written as arrays), strings,
    booleans, integers, finite floats and None.

    Raises:
        EvidenceError: ``not_json`` naming the first offending path, e.g.
            ``$.result.rows[3]: non-finite number nan``.
    """
    try:
        _walk(value, 0, set())
    except _NotJson as exc:
        path = where + "".join(reversed(exc.path))
        raise EvidenceError("not_json", f"{path}: {exc.why}") from None


def _document(record: EvidenceRecord, scope: EvidenceScope) -> dict[str, Any]:
    return {
        "version": 1,
        "scope": {
            "owner_id": scope.owner_id,
            "namespace": scope.namespace,
            "tenant_id": scope.tenant_id,
        },
        "session_id": record.session_id,
        "execution_id": record.execution_id,
        "call_id": record.call_id,
        "tool": record.tool,
        "effect": record.effect,
        "status": record.status,
        "completion": record.completion,
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "identity": record.identity,
        "arguments": record.arguments,
        "error": record.error,
        "result": record.result,
    }


def encode_body(record: EvidenceRecord, scope: EvidenceScope, max_bytes: int) -> bytes:
    """The record's stored bytes without ``stored_at`` (added by :func:`finish_body`).

    Args:
        record: the record; its ``scope`` must be None or ``scope``.
        scope: the store's scope, written into the record.
        max_bytes: the store's ``max_record_bytes``; the finished record must fit.

    Returns:
        UTF-8 compact JSON starting with ``{"version":1,``.

    Raises:
        EvidenceError: ``scope`` (record of another scope), ``not_json``, ``too_large``.
    """
    if record.scope is not None and record.scope != scope:
        raise EvidenceError("scope", "the record names another evidence scope than the store's")
    check_json(record.arguments, where="$.arguments")
    check_json(record.result, where="$.result")
    try:
        text = json.dumps(
            _document(record, scope), ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )
        body = text.encode("utf-8")
    except UnicodeEncodeError:
        raise EvidenceError("not_json", "the record holds a lone surrogate character") from None
    except (ValueError, TypeError) as exc:
        raise EvidenceError("not_json", f"the record is not strict JSON: {exc}") from None
    size = len(body) + _STORED_AT_OVERHEAD
    if size > max_bytes:
        raise EvidenceError(
            "too_large", f"the record is {size} bytes, over max_record_bytes ({max_bytes})"
        )
    return body


def finish_body(body: bytes, stored_at: str) -> bytes:
    """The complete stored bytes: ``body`` with ``stored_at`` after ``version``."""
    stamp = stored_at.encode("ascii")
    if len(stamp) != STORED_AT_LENGTH or not body.startswith(_BODY_PREFIX):
        raise ValueError("not an encoded record body or timestamp")
    return _BODY_PREFIX + _STORED_AT_FIELD % stamp + body[len(_BODY_PREFIX) :]


def reference_for(record_id: str, data: bytes, acknowledgement: str) -> EvidenceReference:
    """The reference of stored bytes ``data``."""
    return EvidenceReference(
        id=record_id,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        acknowledgement=acknowledgement,  # type: ignore[arg-type]
    )


# --- reading -----------------------------------------------------------------------


def verify(data: bytes, ref: EvidenceReference) -> None:
    """Check ``data`` against the reference's size and SHA-256 before any use.

    Raises:
        EvidenceError: ``corrupt`` on a size or hash mismatch.
    """
    if len(data) != ref.size:
        raise EvidenceError(
            "corrupt", f"evidence {ref.id} is {len(data)} bytes, its reference says {ref.size}"
        )
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise EvidenceError("corrupt", f"evidence {ref.id} does not match its SHA-256")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_record(data: bytes, record_id: str, scope: EvidenceScope) -> EvidenceRecord:
    """Parse verified stored bytes into a record of ``scope``.

    Raises:
        EvidenceError: ``corrupt`` (not a valid version-1 record), ``scope`` (the
            record names another scope).
    """
    try:
        raw = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
        record = EvidenceRecord.model_validate(raw)
    except (ValueError, ValidationError):
        raise EvidenceError("corrupt", f"evidence {record_id} is not a valid record") from None
    if record.scope != scope:
        raise EvidenceError("scope", f"evidence {record_id} belongs to another scope")
    return record


def text_chunk(record_id: str, data: bytes, offset: int, limit: int) -> EvidenceChunk:
    """A slice of verified stored bytes as text, offsets in Unicode code points.

    Raises:
        EvidenceError: ``invalid`` (negative offset, offset past the end, limit < 1),
            ``corrupt`` (not UTF-8).
    """
    if not isinstance(offset, int) or not isinstance(limit, int) or offset < 0 or limit < 1:
        raise EvidenceError("invalid", "offset must be >= 0 and limit >= 1 (code points)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise EvidenceError("corrupt", f"evidence {record_id} is not UTF-8") from None
    if offset > len(text):
        raise EvidenceError(
            "invalid", f"offset {offset} is past the end of evidence {record_id} ({len(text)})"
        )
    end = min(len(text), offset + limit)
    return EvidenceChunk(
        id=record_id,
        offset=offset,
        text=text[offset:end],
        next_offset=end if end < len(text) else None,
        total_chars=len(text),
    )
