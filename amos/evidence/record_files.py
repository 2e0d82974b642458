"""Record files of a file store: atomic immutable writes, bounded reads, rebuild scan.

``records/<uuid>.json`` holds one record's exact bytes, mode 0600, written once via a
temp file + fsync + rename + folder fsync (DESIGN.md rule 4; ``amos/atomic.py`` does
the same for sessions, but always fsyncs and creates folders on every call).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

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
    records_dir: Path, scope: EvidenceScope, max_bytes: int, old: dict[str, EvidenceMeta]
) -> tuple[list[bytes], list[str]]:
    """Index lines (sorted by id) of every readable record file of ``scope``.

    Args:
        records_dir: the scope's ``records`` folder.
        scope: the store's scope; files naming another scope are skipped.
        max_bytes: ``max_record_bytes``; larger files are skipped.
        old: metadata from the previous index, to keep a known acknowledgement.

    Returns:
        ``(lines, skipped_ids)``; an acknowledgement not confirmed by ``old`` (same
        SHA-256) is reported as ``written``.
    """
    found: list[bytes] = []
    skipped: list[str] = []
    names = sorted(n for n in os.listdir(records_dir) if n.endswith(".json") and n[0] != ".")
    for name in names:
        record_id = name[: -len(".json")]
        try:
            if codec.normalize_id(record_id) != record_id:
                raise EvidenceError("invalid", "not a canonical id")
            data = read_record_file(records_dir / name, record_id, max_bytes)
            record = codec.decode_record(data, record_id, scope)
        except EvidenceError:
            skipped.append(record_id)
            continue
        ref = codec.reference_for(record_id, data, "written")
        prior = old.get(record_id)
        ack = prior.acknowledgement if prior and prior.sha256 == ref.sha256 else "written"
        found.append(fi.entry_line(EvidenceMeta(
            id=record_id, sha256=ref.sha256, size=ref.size, acknowledgement=ack,
            stored_at=record.stored_at or codec.ms_to_iso(codec.id_time_ms(record_id)),
            tool=record.tool, call_id=record.call_id, execution_id=record.execution_id,
            session_id=record.session_id, status=record.status, effect=record.effect,
            completion=record.completion,
        )))
    return found, skipped
