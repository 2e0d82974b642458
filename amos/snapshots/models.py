"""What the snapshot API returns: small frozen records (issue 20).

Paths are always relative to the workspace, with ``/`` separators; a folder's path ends
with ``/`` (``logs/``). Names that are not valid UTF-8 are decoded with
``os.fsdecode`` (surrogate escapes), so they round-trip to the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

Change = Literal["added", "deleted", "modified", "mode", "type"]
"""How a path differs: created, removed, new content, only its permission bits, or
another kind of entry (file <-> symbolic link)."""


@dataclass(frozen=True)
class SkippedFile:
    """A path a snapshot left out.

    Attributes:
        path: workspace-relative path (a nested repository's ends with ``/``).
        reason: why, for people (``larger than checkpoints.max_file_bytes (10 MB)``).
        size_bytes: its size when that is the reason, else None.
    """

    path: str
    reason: str
    size_bytes: int | None = None


@dataclass(frozen=True)
class Snapshot:
    """One recorded state of the workspace: a commit of the shadow repository.

    Attributes:
        id: the commit's full hex id (what a conversation checkpoint stores).
        created_at: ISO-8601 UTC time it was taken.
        message: the caller's one-line message.
        files: files and symbolic links it holds.
        workspace_bytes: total size of their content, bytes.
        skipped: paths left out (too large, nested repositories, special files).
        exceeded: the workspace was over ``max_workspace_bytes``, so files not yet in
            an earlier snapshot were left out (only ``include`` paths were added).
        warnings: repairs made before it was taken, and the over-size note, one line each.
    """

    id: str
    created_at: str
    message: str
    files: int = 0
    workspace_bytes: int = 0
    skipped: tuple[SkippedFile, ...] = ()
    exceeded: bool = False
    warnings: tuple[str, ...] = ()


class FileChange(NamedTuple):
    """One path that differs between two states (``changed()``); a ``(path, change)`` tuple.

    Attributes:
        path: workspace-relative path; folders end with ``/``.
        change: see :data:`Change`.
    """

    path: str
    change: Change


@dataclass(frozen=True)
class Conflict:
    """A path restore left alone (unless forced) because it is not as the agent left it.

    Attributes:
        path: workspace-relative path.
        reason: for people (``changed after the agent's version``).
    """

    path: str
    reason: str


@dataclass(frozen=True)
class AgentChange:
    """A path the agent changed over some steps, with the snapshots to undo it.

    Attributes:
        path: workspace-relative path.
        change: from its state before the first of those steps to after the last.
        before: snapshot id holding the path as it was before the agent first changed it.
        after: snapshot id holding the agent's last version.
        outside: it was also changed between those steps, by something other than the
            agent (the user, another program); undoing goes back past that change too.
    """

    path: str
    change: Change
    before: str
    after: str
    outside: bool = False


@dataclass(frozen=True)
class RestoreResult:
    """What ``restore()`` did.

    Attributes:
        before: snapshot of the workspace taken just before restoring (restore it to
            undo this restore).
        after: snapshot taken just after.
        restored: paths written, deleted or created back.
        unchanged: paths that already were as in the snapshot.
        conflicts: paths not restored because they changed after the agent's version
            (or cannot be copied first); restored anyway with ``force`` and then also
            listed in ``restored``.
        unavailable: paths the snapshot has no record of (ignored or too large then),
            left alone, with the reason.
        failed: paths that could not be written (a file in the way, permissions), with
            the error.
    """

    before: Snapshot
    after: Snapshot
    restored: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    unavailable: tuple[Conflict, ...] = ()
    failed: tuple[Conflict, ...] = ()
    forced: bool = field(default=False)
