"""Workspace confinement for the file tools (spec/tools.md).

Every path a file tool touches goes through ``resolve_in_workspace``: relative paths
only, no ``..`` component, symlinks resolved, and the resolved path must stay inside
the resolved workspace root. Tools that walk folders (``list_dir``, ``search_text``)
use ``inside_workspace`` on every entry so a symlink inside the workspace that points
out is skipped, never followed.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

from amos.safe_read import FileTooLargeError, NotRegularFileError, file_kind, read_regular
from amos.tools.base import ToolFailure

ACCEPTED = "paths must be relative to the workspace; '..' and absolute paths are refused"


def resolve_in_workspace(root: Path, rel: str, *, must_exist: bool) -> Path:
    """Resolve ``rel`` against the workspace ``root`` and refuse anything outside it.

    Symlinks are resolved (``Path.resolve``), including symlinked parent folders, so
    a link that points out of the workspace is refused. For a path that does not exist
    yet (``must_exist=False``), the deepest existing ancestor is resolved and the
    missing components are appended; they are plain names, so the result stays inside.

    Args:
        root: the workspace root (resolved here; need not be resolved already).
        rel: the path the model gave, relative to the workspace (``"."`` is the root).
        must_exist: refuse a path that does not exist.

    Returns:
        The resolved absolute path, inside the resolved root.

    Raises:
        ToolFailure: ``rel`` is empty, contains a NUL byte, is absolute, has a ``..``
            component, resolves outside the workspace (or cannot be resolved, e.g. a
            symlink loop), or does not exist while ``must_exist`` is set.
    """
    if not isinstance(rel, str) or not rel.strip():
        raise ToolFailure(f"path {rel!r} is empty; {ACCEPTED}")
    if "\x00" in rel:
        raise ToolFailure(f"path {rel!r} contains a NUL byte; {ACCEPTED}")
    if rel.startswith("~"):
        raise ToolFailure(f"path {rel!r} starts with '~' (a home folder); {ACCEPTED}")
    if rel.startswith(("/", "\\")) or Path(rel).is_absolute():
        raise ToolFailure(f"path {rel!r} is absolute; {ACCEPTED}")
    parts = PurePosixPath(rel.replace("\\", "/")).parts
    if ".." in parts:
        raise ToolFailure(f"path {rel!r} contains '..'; {ACCEPTED}")
    base = root.resolve()
    candidate = base.joinpath(*parts) if parts else base
    try:
        resolved = _resolve_deepest(candidate)
    except (OSError, RuntimeError) as exc:
        raise ToolFailure(
            f"path {rel!r} cannot be resolved ({exc.__class__.__name__}); {ACCEPTED}"
        ) from None
    if not _is_relative_to(resolved, base):
        raise ToolFailure(f"path {rel!r} resolves outside the workspace; {ACCEPTED}")
    if must_exist and not resolved.exists():
        raise ToolFailure(f"path {rel!r} does not exist in the workspace")
    return resolved


def is_hidden(path: Path, hidden: tuple[Path, ...]) -> bool:
    """Whether ``path`` (resolved) is, or is inside, one of the ``hidden`` paths
    (``sandbox.hidden_paths``: ``~/.ssh``, amos's own folders…; issue 19)."""
    return any(path == h or _is_relative_to(path, h) for h in hidden)


def refuse_hidden(path: Path, hidden: tuple[Path, ...], shown: str) -> None:
    """Refuse a path the sandbox hides from reads, for the file tools too.

    Raises:
        ToolFailure: ``path`` is hidden (``sandbox.hidden_paths``).
    """
    if hidden and is_hidden(path, hidden):
        raise ToolFailure(f"path {shown!r} is hidden (sandbox.hidden_paths: credentials and amos's own folders "
                          "are not readable by the agent)")


def read_workspace_file(path: Path, shown: str, max_bytes: int) -> bytes:
    """The bytes of a resolved workspace file, refusing anything but a regular file.

    Issue 17 item 8: a FIFO in the workspace hung ``read_file``/``edit_file`` for good.
    The file is opened non-blocking without following a final symlink (``path`` is
    already resolved: a link swapped in since is refused, not followed) and checked with
    ``fstat`` on that descriptor before a byte is read (:func:`amos.safe_read.read_regular`).

    Args:
        path: the resolved path (:func:`resolve_in_workspace`).
        shown: the path as the model gave it, for messages.
        max_bytes: the tool's size cap, bytes.

    Raises:
        ToolFailure: a folder, FIFO, device or socket; over ``max_bytes``; unreadable.
    """
    try:
        return read_regular(path, max_bytes=max_bytes, follow_symlinks=False)
    except NotRegularFileError as exc:
        if exc.kind == "a folder":
            raise ToolFailure(f"'{shown}' is a folder; use list_dir to see what it contains") from None
        raise ToolFailure(f"'{shown}' is not a regular file (it is {exc.kind}); only regular files "
                          "can be read or edited") from None
    except FileTooLargeError:
        raise ToolFailure(f"'{shown}' is more than the {max_bytes} bytes this tool loads; use search_text "
                          "or run_command to look into it") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolFailure(f"'{shown}' changed into a symlink while it was opened; read it again") from None
        raise ToolFailure(f"cannot read '{shown}': {exc.strerror or exc}") from None


def special_file_kind(path: Path) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a folder
    (``"a FIFO (named pipe)"``, ``"a character device"``…), else None. Never opens it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISDIR(mode) else file_kind(mode)


def inside_workspace(root: Path, path: Path) -> bool:
    """Whether ``path`` (after resolving symlinks) lies inside the resolved ``root``.

    Args:
        root: the resolved workspace root.
        path: any absolute path, typically a folder entry found while walking.

    Returns:
        False for anything that resolves outside ``root`` or cannot be resolved.
    """
    try:
        return _is_relative_to(path.resolve(), root)
    except (OSError, RuntimeError):
        return False


def display_path(root: Path, path: Path) -> str:
    """The workspace-relative POSIX form of ``path`` for messages (``"."`` for the root).

    Args:
        root: the resolved workspace root.
        path: an absolute path inside ``root``.
    """
    try:
        rel = path.relative_to(root)
    except ValueError:
        return path.name
    text = rel.as_posix()
    return text or "."


def normalize_rel(rel: str) -> str:
    """The model's path in normalized POSIX form (``./src//a.py`` → ``src/a.py``)."""
    text = PurePosixPath(rel.replace("\\", "/")).as_posix()
    return text or "."


def _resolve_deepest(candidate: Path) -> Path:
    """Resolve the deepest existing ancestor of ``candidate``, then append the rest."""
    missing: list[str] = []
    current = candidate
    while not os.path.lexists(current):
        if current.parent == current:
            break
        missing.append(current.name)
        current = current.parent
    resolved = current.resolve()
    for name in reversed(missing):
        resolved = resolved / name
    return resolved


def _is_relative_to(path: Path, base: Path) -> bool:
    return path == base or path.is_relative_to(base)
