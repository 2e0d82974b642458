"""One way to read a file amos did not write itself: regular files only, bounded, never blocking.

Issue 17 items 8 and 9: a FIFO in place of a config file, a script, a journal or a
workspace file hung amos for good (``open`` waits for a writer), and ``/dev/zero`` was
read until memory ran out. Every file amos reads goes through :func:`read_regular`:

1. ``open`` with ``O_NONBLOCK`` (a FIFO without a writer opens at once instead of
   waiting; a regular file ignores the flag) and ``O_NOCTTY``; ``O_NOFOLLOW`` on request;
2. ``fstat`` on that descriptor (no check-then-open race: what is checked is what is
   read) and refusal of anything but a regular file — FIFO, device, socket, folder;
3. refusal of a file over the caller's size cap before reading, and a read of at most
   ``cap + 1`` bytes (a file that grows while read is refused, never read without end).

The errors are :class:`OSError` subclasses with ``strerror`` set, so every caller that
already turned ``OSError`` into its own one-line error keeps working.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MiB = 1024 * 1024

DEFAULT_MAX_BYTES = 64 * MiB
"""Cap of :func:`read_regular` when the caller gives none, bytes."""

_KINDS = (
    (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
)


class NotRegularFileError(OSError):
    """The path is a FIFO, a device, a socket or a folder, not a regular file.

    Attributes:
        kind: what it is instead (``"a FIFO (named pipe)"``, ``"a character device"``…).
    """

    def __init__(self, path: str | os.PathLike[str], kind: str):
        self.kind = kind
        super().__init__(errno.EISDIR if kind == "a folder" else errno.EINVAL,
                         f"not a regular file (it is {kind})", str(path))


class FileTooLargeError(OSError):
    """The file is larger than the reader's cap.

    Attributes:
        limit: the cap, bytes.
    """

    def __init__(self, path: str | os.PathLike[str], limit: int):
        self.limit = limit
        super().__init__(errno.EFBIG, f"larger than {describe_size(limit)}", str(path))


def describe_size(n: int) -> str:
    """``n`` bytes for a message: ``"4 MiB"``, ``"512 KiB"``, ``"100 bytes"``."""
    if n >= MiB and n % MiB == 0:
        return f"{n // MiB} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def file_kind(mode: int) -> str | None:
    """What a ``st_mode`` is when it is not a regular file (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> tuple[int, os.stat_result]:
    """Open a regular file for reading without ever blocking; returns ``(fd, fstat)``.

    The caller closes ``fd``. Use this when the file is read in pieces (a tail, a
    stream); :func:`read_regular` reads it whole.

    Args:
        path: the file.
        follow_symlinks: False adds ``O_NOFOLLOW`` (a symlink is refused with ELOOP).

    Raises:
        FileNotFoundError: missing.
        NotRegularFileError: a FIFO, device, socket or folder.
        OSError: any other reason it cannot be opened (permissions, ELOOP…).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        kind = file_kind(info.st_mode)
        if kind is not None:
            raise NotRegularFileError(path, kind)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_regular(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
                 follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file, at most ``max_bytes`` of them.

    Args:
        path: the file.
        max_bytes: the largest file accepted, bytes.
        follow_symlinks: False refuses a symlink (``O_NOFOLLOW``).

    Returns:
        The whole file.

    Raises:
        FileNotFoundError: missing.
        NotRegularFileError: a FIFO, device, socket or folder (never waited on).
        FileTooLargeError: over ``max_bytes`` (checked before reading, and again while
            reading, so a file that grows is never read without end).
        OSError: unreadable (permissions, I/O error).
    """
    fd, info = open_regular(path, follow_symlinks=follow_symlinks)
    try:
        if info.st_size > max_bytes:
            raise FileTooLargeError(path, max_bytes)
        chunks: list[bytes] = []
        got = 0
        while got <= max_bytes:
            block = os.read(fd, min(max_bytes + 1 - got, MiB))
            if not block:
                break
            chunks.append(block)
            got += len(block)
        if got > max_bytes:
            raise FileTooLargeError(path, max_bytes)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_head(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """At most the first ``max_bytes`` bytes of a regular file (a longer file is cut, not refused).

    Raises:
        FileNotFoundError, NotRegularFileError, OSError: as :func:`read_regular`.
    """
    fd, _ = open_regular(path)
    try:
        chunks: list[bytes] = []
        got = 0
        while got < max_bytes:
            block = os.read(fd, min(max_bytes - got, MiB))
            if not block:
                break
            chunks.append(block)
            got += len(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_regular_text(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
                      errors: str = "strict") -> str:
    """:func:`read_regular` decoded as UTF-8.

    Raises:
        UnicodeDecodeError: not UTF-8 (with ``errors="strict"``); and what
            :func:`read_regular` raises.
    """
    return read_regular(path, max_bytes=max_bytes).decode("utf-8", errors)


def describe_error(exc: OSError) -> str:
    """A short reason for a message: ``strerror`` when set, else the exception text."""
    return exc.strerror or str(exc)


def is_regular(path: Path) -> bool:
    """True when ``path`` (symlinks followed) is a regular file; never opens it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


__all__ = [
    "DEFAULT_MAX_BYTES", "FileTooLargeError", "NotRegularFileError", "describe_error", "describe_size",
    "file_kind", "is_regular", "open_regular", "read_head", "read_regular", "read_regular_text",
]
