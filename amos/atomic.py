"""Atomic file writes: temp file in the same folder, fsync, ``os.replace``, fsync the folder.

The one place amos writes a file that must never be seen half-written (sessions,
config) — DESIGN.md rule 4.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` atomically: temp file in the same folder, fsync, replace.

    Args:
        path: the target; missing parent folders are created 0700.
        data: the complete new content.
        mode: permission bits of the new file (default 0600).

    Raises:
        OSError: the write failed; the previous file is left as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def atomic_write_text(path: Path, text: str) -> None:
    """Write UTF-8 ``text`` atomically, mode 0600 (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))
