"""Whether a workspace may be snapshotted, and the session's shadow repository (issue 20).

amos snapshots a project folder. It does not snapshot the root of the file system, the
home folder itself or a folder above it (people start a terminal in ``~`` and run amos
there to ask a question: copying their whole home folder — caches, downloads, other
projects — into a hidden repository is not what they expect, and it would hit the size cap
at once), nor a folder inside amos's own data folder. In those cases, and when
``checkpoints.files`` is false, the run goes on without file checkpoints and says why once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from amos.errors import SnapshotError
from amos.paths import data_dir, snapshots_dir

if TYPE_CHECKING:
    from amos.config import AmosConfig
    from amos.snapshots.repo import ShadowRepo

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def snapshot_refusal(workspace: Path, *, home: Path | None = None) -> str | None:
    """Why amos will not snapshot ``workspace``, or None when it may.

    Args:
        workspace: the workspace folder.
        home: the home folder (default: ``Path.home()``).

    Returns:
        One line for people (``/home/ann is your home folder; ...``), or None.
    """
    try:
        folder = Path(workspace).expanduser().resolve(strict=True)
    except (OSError, RuntimeError):
        return f"{workspace} does not exist"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if folder == Path(folder.anchor):
        return f"{folder} is the root of the file system"
    try:
        home_dir = (home or Path.home()).resolve()
    except (OSError, RuntimeError):
        home_dir = None
    if home_dir is not None:
        if folder == home_dir:
            return f"{folder} is your home folder; run amos in a project folder to get file checkpoints"
        if folder in home_dir.parents:
            return f"{folder} holds your home folder"
    data = data_dir().expanduser().absolute()
    demos = (data / "demo").absolute()
    if (folder == data or data in folder.parents) and demos not in folder.parents:  # the demo copy is snapshotted
        return f"{folder} is inside amos's data folder"
    return None


def open_session_repo(config: AmosConfig, session_id: str, workspace: Path
                      ) -> tuple[ShadowRepo | None, str | None]:
    """The session's shadow repository (``snapshots_dir(session_id) / "git"``), or why there is none.

    Args:
        config: the loaded config (``checkpoints`` section).
        session_id: the session's id (also under ``--no-save``).
        workspace: the workspace folder.

    Returns:
        ``(repo, None)``, or ``(None, reason)`` when file checkpoints are off: turned off,
        a folder amos does not snapshot (:func:`snapshot_refusal`), or no git program.

    Raises:
        SnapshotError: ``bad_path`` for a session id that is not a valid id.
    """
    from amos.snapshots.repo import ShadowRepo

    settings = config.checkpoints
    if not settings.files:
        return None, "file checkpoints are off (checkpoints.files is false)"
    if not _SESSION_ID.match(session_id):
        raise SnapshotError("bad_path", f"{session_id!r} is not a session id")
    reason = snapshot_refusal(workspace)
    if reason is not None:
        return None, f"file checkpoints are off: {reason}"
    try:
        repo = ShadowRepo(snapshots_dir(session_id) / "git", workspace,
                          max_file_bytes=settings.max_file_bytes,
                          max_workspace_bytes=settings.max_workspace_bytes, exclude=[data_dir()])
    except SnapshotError as exc:
        if exc.code != "git_missing":
            raise
        return None, f"file checkpoints are off: {exc}"
    return repo, None
