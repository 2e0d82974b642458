"""The index file of one file-store scope: metadata lines sorted by record id.

Format (UTF-8, ASCII in practice)::

    {"amos_evidence_index":1,"generation":"<32 hex>"}
    {"id":"<uuid>","sha256":"…","size":N,"ack":"fsync","stored_at":"…","tool":"…",…}
    …

One line per stored record, strictly ascending by id (ids are issued in increasing
order under the scope lock, and appended in that order). Because every line starts
with ``{"id":"<36 chars>"``, lookups and page starts are binary searches over byte
offsets: a page or a ``get_reference`` reads O(log n) small blocks plus the page's
own lines, never every line and never a record file.

Writers hold the scope lock: they append one line per ``put`` (one ``write`` call)
and rewrite the whole file atomically (temp + fsync + rename, new ``generation``)
for ``delete``/``prune`` or to drop a torn last line left by a crash. Readers take no
lock: they open the file, and only consider complete (newline-terminated) lines of
the file they opened.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path

from amos.atomic import atomic_write_bytes
from amos.evidence.model import EvidenceError, EvidenceMeta
from amos.safe_read import NotRegularFileError, open_regular

_HEADER_KEY = "amos_evidence_index"
_LINE_PREFIX = b'{"id":"'
_ID_END = len(_LINE_PREFIX) + 36
_BLOCK = 4096
_READ_BLOCK = 1 << 16


def _corrupt(path: Path, why: str) -> EvidenceError:
    return EvidenceError("corrupt", f"evidence index {path} is damaged ({why}); "
                                    "`amos evidence rebuild` recreates it from the records")


class IndexSnapshot:
    """A read-only view of the index file as it was when opened.

    Attributes:
        generation: the header's generation (changes on every rewrite).
        size: file size when opened, bytes.
        data_start / data_end: byte range of the complete entry lines.
    """

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd = fd
        self.size = os.fstat(fd).st_size
        head = os.pread(fd, 1024, 0)
        newline = head.find(b"\n")
        try:
            header = json.loads(head[:newline]) if newline > 0 else None
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get(_HEADER_KEY) != 1:
            raise _corrupt(path, "bad header")
        self.generation = str(header.get("generation"))
        self.data_start = newline + 1
        self.data_end = self._find_data_end()

    @classmethod
    def open(cls, path: Path) -> IndexSnapshot | None:
        """Open the index, or None when it does not exist.

        Raises:
            EvidenceError: ``corrupt`` (bad header), ``io``.
        """
        try:
            fd, _ = open_regular(path, follow_symlinks=False)  # the one safe reader's open: never blocks
        except FileNotFoundError:
            return None
        except NotRegularFileError:
            raise EvidenceError("corrupt", f"the evidence index {path} is not a regular file") from None
        except OSError as exc:
            raise EvidenceError("io", f"cannot open evidence index {path}: {exc}") from None
        try:
            return cls(path, fd)
        except BaseException:
            os.close(fd)
            raise

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)

    def __enter__(self) -> IndexSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def torn(self) -> bool:
        """True when the file ends in an incomplete line."""
        return self.data_end != self.size

    def _find_data_end(self) -> int:
        end = self.size
        while end > self.data_start:
            start = max(self.data_start, end - _BLOCK)
            at = os.pread(self._fd, end - start, start).rfind(b"\n")
            if at >= 0:
                return start + at + 1
            end = start
        return self.data_start

    def _line_start(self, pos: int) -> int:
        """Offset of the first line starting at or after ``pos``."""
        if pos <= self.data_start:
            return self.data_start
        pos -= 1
        while pos < self.data_end:
            block = os.pread(self._fd, min(_BLOCK, self.data_end - pos), pos)
            at = block.find(b"\n")
            if at >= 0:
                return pos + at + 1
            pos += len(block)
        return self.data_end

    def id_at(self, start: int) -> str:
        """The id of the line starting at ``start``."""
        head = os.pread(self._fd, _ID_END, start)
        if not head.startswith(_LINE_PREFIX) or len(head) < _ID_END:
            raise _corrupt(self.path, f"bad entry at byte {start}")
        return head[len(_LINE_PREFIX) :].decode("ascii", "replace")

    def search(self, key: str, *, strict: bool) -> int:
        """Offset of the first line whose id is ``> key`` (strict) or ``>= key``."""
        lo, hi = self.data_start, self.data_end
        while lo < hi:
            mid = (lo + hi) // 2
            start = self._line_start(mid)
            if start >= self.data_end:
                hi = mid
                continue
            found = self.id_at(start)
            if found > key or (not strict and found == key):
                hi = mid
            else:
                lo = mid + 1
        return self._line_start(lo)

    def lines(self, start: int | None = None, stop: int | None = None) -> Iterator[bytes]:
        """Complete lines (without newline) from offset ``start`` to ``stop`` (a line start)."""
        pos = self.data_start if start is None else start
        end = self.data_end if stop is None else stop
        rest = b""
        while pos < end:
            block = os.pread(self._fd, min(_READ_BLOCK, end - pos), pos)
            if not block:
                break
            pos += len(block)
            parts = (rest + block).split(b"\n")
            rest = parts.pop()
            yield from parts

    def find(self, record_id: str) -> bytes | None:
        """The line of ``record_id``, or None."""
        start = self.search(record_id, strict=False)
        if start >= self.data_end or self.id_at(start) != record_id:
            return None
        return next(self.lines(start))

    def count(self, start: int | None = None) -> int:
        """Entry lines from offset ``start`` (default: all)."""
        pos = self.data_start if start is None else start
        total = 0
        while pos < self.data_end:
            block = os.pread(self._fd, min(1 << 20, self.data_end - pos), pos)
            total += block.count(b"\n")
            pos += len(block)
        return total

    def last_id(self) -> str | None:
        """The greatest (last) id, or None when empty."""
        if self.data_end == self.data_start:
            return None
        end = self.data_end - 1  # the last line's newline
        while end > self.data_start:
            start = max(self.data_start, end - _BLOCK)
            at = os.pread(self._fd, end - start, start).rfind(b"\n")
            if at >= 0:
                return self.id_at(start + at + 1)
            end = start
        return self.id_at(self.data_start)


def line_id(line: bytes) -> str:
    """The id of an index line (without parsing the rest)."""
    return line[len(_LINE_PREFIX) : _ID_END].decode("ascii", "replace")


def entry_line(meta: EvidenceMeta) -> bytes:
    """The index line of ``meta``, with its newline."""
    row = {
        "id": meta.id, "sha256": meta.sha256, "size": meta.size, "ack": meta.acknowledgement,
        "stored_at": meta.stored_at, "tool": meta.tool, "call_id": meta.call_id,
        "execution_id": meta.execution_id, "session_id": meta.session_id,
        "status": meta.status, "effect": meta.effect, "completion": meta.completion,
    }
    return json.dumps(row, separators=(",", ":")).encode("ascii") + b"\n"


def parse_line(path: Path, line: bytes) -> EvidenceMeta:
    """The metadata of one index line.

    Raises:
        EvidenceError: ``corrupt`` when the line is not a valid entry.
    """
    try:
        row = json.loads(line)
        meta = EvidenceMeta(
            id=row["id"], sha256=row["sha256"], size=row["size"], acknowledgement=row["ack"],
            stored_at=row["stored_at"], tool=row["tool"], call_id=row["call_id"],
            execution_id=row["execution_id"], session_id=row["session_id"],
            status=row["status"], effect=row["effect"], completion=row["completion"],
        )
        meta.reference()  # every field a reference needs must be well formed
        ok = (type(meta.size) is int and meta.size >= 0 and isinstance(meta.sha256, str)
              and len(meta.sha256) == 64 and all(c in "0123456789abcdef" for c in meta.sha256))
    except (ValueError, KeyError, TypeError):  # pydantic's ValidationError is a ValueError
        raise _corrupt(path, "unreadable entry") from None
    if not ok:
        raise _corrupt(path, "unreadable entry")
    return meta


def rewrite(path: Path, lines: Iterable[bytes], *, durable: bool) -> None:
    """Replace the index atomically with a new header and ``lines`` (each with newline).

    Raises:
        OSError: the write failed; the previous index is unchanged.
    """
    header = json.dumps({_HEADER_KEY: 1, "generation": secrets.token_hex(16)},
                        separators=(",", ":")).encode("ascii") + b"\n"
    atomic_write_bytes(path, itertools.chain((header,), lines), durable=durable)


def append(path: Path, line: bytes, expected_size: int, *, durable: bool) -> None:
    """Append one entry line (caller holds the scope lock).

    Args:
        path: the index file.
        line: the entry line with its newline.
        expected_size: the file size the caller last saw under the lock, bytes.
        durable: fsync after writing.

    Raises:
        OSError: the write failed; the file is truncated back to ``expected_size``.
        EvidenceError: ``corrupt`` when the file changed size without the lock.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0))
    try:
        if os.fstat(fd).st_size != expected_size:
            raise _corrupt(path, "it changed while locked")
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(f"short write to {path}")
            if durable:
                os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, expected_size)
            raise
    finally:
        os.close(fd)
