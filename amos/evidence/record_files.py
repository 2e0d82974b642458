"""Record files of a file store: atomic immutable writes, bounded reads, rebuild scan.

``records/<uuid>.json`` holds one record's exact bytes, mode 0600, written once via a
temp file + fsync + rename + folder fsync (DESIGN.md rule 4; ``amos/atomic.py`` does
the same for sessions, but always fsyncs and creates folders on every call).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from amos.atomic import atomic_write_bytes
from amos.evidence import codec
from amos.evidence import file_index as fi
from amos.evidence.model import EvidenceError, EvidenceMeta, EvidenceScope
from amos.safe_read import FileTooLargeError, NotRegularFileError, read_regular


def write_record_file(path: Path, data: bytes, *, durable: bool) -> None:
    """Write ``data`` to ``path`` atomically, mode 0600 (:func:`amos.atomic.atomic_write_bytes`).

    Args:
        path: ``records/<uuid>.json``.
        data: the record's complete bytes.
        durable: fsync the file and then its folder.

    Raises:
        OSError: the write failed; no file (and no temp file) is left.
    """
    atomic_write_bytes(path, data, durable=durable)


def read_record_file(path: Path, record_id: str, max_bytes: int) -> bytes:
    """The bytes of one record file, reading at most ``max_bytes + 1`` bytes.

    Goes through the one safe reader (:mod:`amos.safe_read`, symlinks refused): a FIFO
    must not block the read.

    Raises:
        EvidenceError: ``missing`` (no file), ``too_large`` (over ``max_bytes``),
            ``corrupt`` (not a regular file, a symlink), ``io``.
    """
    try:
        return read_regular(path, max_bytes=max_bytes, follow_symlinks=False)
    except FileNotFoundError:
        raise EvidenceError("missing", f"the file of evidence {record_id} is missing") from None
    except NotRegularFileError:
        raise EvidenceError("corrupt", f"evidence {record_id} is not a regular file") from None
    except FileTooLargeError:
        raise EvidenceError("too_large", f"evidence {record_id} is over max_record_bytes") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EvidenceError("corrupt", f"cannot open evidence {record_id}: {exc}") from None
        raise EvidenceError("io", f"cannot read evidence {record_id}: {exc}") from None


def scan_records(
    records_dir: Path, scope: EvidenceScope, max_bytes: int, old: dict[str, EvidenceMeta],
    recorded: Mapping[str, tuple[str, int]] | None = None,
) -> tuple[list[bytes], list[str], list[str]]:
    """Index lines (sorted by id) of every record file of ``scope``, never blessing tampering.

    A record's content must still match every SHA-256 recorded for it — in the old
    index (``old``) and elsewhere (``recorded``: the references sessions hold). One that
    does not is *corrupt* (issue 17 item 4): it keeps the index line it was stored with
    (or, when only ``recorded`` knows it, a line carrying the recorded hash and size), so
    it is still listed and every read of it fails its integrity check; its file is kept.

    Args:
        records_dir: the scope's ``records`` folder.
        scope: the store's scope; files naming another scope are skipped.
        max_bytes: ``max_record_bytes``; larger files are skipped.
        old: metadata from the previous index (its hashes, and a known acknowledgement).
        recorded: ``{id: (sha256, size)}`` recorded outside the index, or None.

    Returns:
        ``(lines, skipped_ids, corrupt_ids)``. Skipped: unreadable or foreign files with
        no recorded hash (not indexed). Corrupt: content that no longer matches what was
        recorded (indexed with the recorded hash when there is metadata for it). An
        acknowledgement not confirmed by ``old`` (same SHA-256) is reported as ``written``.
    """
    found: list[bytes] = []
    skipped: list[str] = []
    corrupt: list[str] = []
    recorded = recorded or {}
    names = sorted(n for n in os.listdir(records_dir) if n.endswith(".json") and n[0] != ".")
    for name in names:
        record_id = name[: -len(".json")]
        prior = old.get(record_id)
        known = recorded.get(record_id)
        try:
            if codec.normalize_id(record_id) != record_id:
                raise EvidenceError("invalid", "not a canonical id")
            data = read_record_file(records_dir / name, record_id, max_bytes)
        except EvidenceError:
            if prior is not None:  # it was stored: what is there now is not what was stored
                corrupt.append(record_id)
                found.append(fi.entry_line(prior))
            else:
                skipped.append(record_id)
            continue
        ref = codec.reference_for(record_id, data, "written")
        expected = {(prior.sha256, prior.size)} if prior is not None else set()
        if known is not None:
            expected.add((known[0], int(known[1])))
        if expected and any(pair != (ref.sha256, ref.size) for pair in expected):
            corrupt.append(record_id)
            line = fi.entry_line(prior) if prior is not None else _recorded_line(data, record_id, scope, known)
            if line is not None:
                found.append(line)
            continue
        try:
            record = codec.decode_record(data, record_id, scope)
        except EvidenceError:
            skipped.append(record_id)
            continue
        ack = prior.acknowledgement if prior and prior.sha256 == ref.sha256 else "written"
        found.append(fi.entry_line(_meta(record_id, record, ref.sha256, ref.size, ack)))
    return found, skipped, corrupt


def _meta(record_id: str, record: Any, sha256: str, size: int, ack: str) -> EvidenceMeta:
    return EvidenceMeta(
        id=record_id, sha256=sha256, size=size, acknowledgement=ack,
        stored_at=record.stored_at or codec.ms_to_iso(codec.id_time_ms(record_id)),
        tool=record.tool, call_id=record.call_id, execution_id=record.execution_id,
        session_id=record.session_id, status=record.status, effect=record.effect,
        completion=record.completion,
    )


def _recorded_line(data: bytes, record_id: str, scope: EvidenceScope,
                   known: tuple[str, int] | None) -> bytes | None:
    """The index line of a changed record known only from a session's reference: its
    metadata from the (changed) file, its hash and size as recorded. None when the file
    no longer parses (it cannot be listed; it is still reported corrupt)."""
    if known is None:
        return None
    try:
        record = codec.decode_record(data, record_id, scope)
    except EvidenceError:
        return None
    return fi.entry_line(_meta(record_id, record, known[0], int(known[1]), "written"))
