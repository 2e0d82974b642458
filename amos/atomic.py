"""Atomic file writes: temp file in the same folder, fsync, ``os.replace``, fsync the folder.

The one place amos writes a file that must never be seen half-written (sessions,
config) — DESIGN.md rule 4.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes | Iterable[bytes], *, mode: int = 0o600,
                       durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically: temp file in the same folder, fsync, replace.

    Args:
        path: the target; missing parent folders are created 0700.
        data: the complete new content, or chunks of it written in order (streamed).
        mode: permission bits of the new file (default 0600).
        durable: fsync the file and then its folder (False: the rename is still
            atomic, but a crash may lose it — evidence's ``written`` acknowledgement).

    Raises:
        OSError: the write failed; the previous file is left as it was and no temp
            file remains.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as fh:
            for chunk in (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data:
                fh.write(chunk)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """fsync a folder so a new or renamed entry in it is durable (best effort)."""
    with contextlib.suppress(OSError):
        dfd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def atomic_write_text(path: Path, text: str) -> None:
    """Write UTF-8 ``text`` atomically, mode 0600 (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))
