"""Creating the shadow repository, locking it, and repairing it after a crash (issue 20).

A SIGKILL during a snapshot can leave git's ``index.lock`` (or a ref's ``.lock``) behind,
half-written ``tmp_obj_*``/``tmp_pack_*`` files, and, after a power loss, a damaged index
or objects. Every writing operation first creates ``amos-busy`` in the repository and
removes it when done, so the next use knows the last one was cut short. Then, under the
lock (which no live amos or git child of one holds, so every git lock file found is stale),
the next use:

1. removes stale lock files and temporary object files;
2. runs ``git fsck``; if it fails, rebuilds the index from the last snapshot
   (``git read-tree HEAD``) and checks again;
3. if the repository is still damaged, moves it aside to ``<git_dir>.broken`` and starts a
   new one (earlier snapshots are then gone).

Each step that changed something adds one line to the warnings it returns.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path

from amos.errors import SnapshotError
from amos.paths import ensure_dir
from amos.snapshots.git import Git

BUSY = "amos-busy"
WORKSPACE_FILE = "amos-workspace.json"
RECREATED_FILE = "amos-recreated.json"
"""Written into a repository started anew in place of a damaged one: when and why."""
ATTRIBUTES = "* -text -filter -ident -working-tree-encoding\n"
"""The shadow repository's ``info/attributes``: no line-ending conversion, filter or ident."""
BRANCH = "refs/heads/snapshots"

try:  # POSIX; elsewhere the repository is not locked between processes
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class RepoLock:
    """An exclusive ``flock`` on ``<git_dir>.lock``, re-entrant within one object.

    The descriptor is handed to every git child (``Git(pass_fds=...)``), so the lock stays
    held while a git started by a killed amos is still running.

    Args:
        path: the lock file (created 0600).
        timeout_s: how long to wait for another holder, seconds.
    """

    def __init__(self, path: Path, timeout_s: float):
        self.path = path
        self.timeout_s = timeout_s
        self.fd: int | None = None
        self.depth = 0

    def acquire(self) -> None:
        """Take the lock (or count one more level). Raises ``SnapshotError('busy')``."""
        if self.depth:
            self.depth += 1
            return
        ensure_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        deadline = time.monotonic() + self.timeout_s
        while fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise SnapshotError(
                        "busy", f"another amos is using the snapshot repository {self.path.parent} "
                        f"(waited {self.timeout_s:g} s)") from None
                time.sleep(0.05)
        self.fd = fd
        self.depth = 1

    def release(self) -> None:
        """Drop one level; the last one releases the lock."""
        self.depth -= 1
        if self.depth == 0 and self.fd is not None:
            os.close(self.fd)
            self.fd = None


def init_repo(git_dir: Path, work_tree: Path) -> None:
    """Create a new shadow repository at ``git_dir`` (built beside it, then renamed in place).

    Raises:
        SnapshotError: git failed; OSError: the folder cannot be written.
    """
    ensure_dir(git_dir.parent)
    tmp = git_dir.with_name(f"{git_dir.name}.new-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    git = Git(tmp, work_tree)
    git.run(["init", "-q", "--template="])
    git.run(["symbolic-ref", "HEAD", BRANCH])
    with open(tmp / "config", "a", encoding="utf-8") as fh:  # the -c flags repeat these on every call
        fh.write("[core]\n\tlogAllRefUpdates = false\n\thooksPath = /dev/null\n\tfsmonitor = false\n"
                 "\tautocrlf = false\n[index]\n\tversion = 4\n[commit]\n\tgpgSign = false\n"
                 "[gc]\n\tauto = 0\n")
    (tmp / "info").mkdir(exist_ok=True)
    (tmp / "info" / "attributes").write_text(ATTRIBUTES)
    (tmp / "info" / "exclude").write_text("")
    (tmp / WORKSPACE_FILE).write_text(json.dumps({"workspace": str(work_tree), "version": 1}) + "\n")
    os.chmod(tmp, 0o700)
    os.rename(tmp, git_dir)


def mark_recreated(git_dir: Path, why: str) -> None:
    """Record in a repository just started anew that it replaced a damaged one (and why)."""
    from datetime import UTC, datetime

    with contextlib.suppress(OSError):
        (git_dir / RECREATED_FILE).write_text(json.dumps(
            {"at": datetime.now(UTC).isoformat(timespec="seconds"), "why": why}) + "\n")


def recreated_note(git_dir: Path) -> str | None:
    """``recreated at <time> (<why>)`` when the repository replaced a damaged one, else None."""
    try:
        data = json.loads((git_dir / RECREATED_FILE).read_text())
        return f"recreated at {data['at']} ({data['why']})"
    except (OSError, ValueError, KeyError, TypeError):
        return None


def restore_head(git_dir: Path) -> bool:
    """Write a lost ``HEAD`` back (pointing at the snapshots branch) when the rest of the
    repository is there; True when it did."""
    if (git_dir / "HEAD").exists() or not (git_dir / "objects").is_dir() or not (git_dir / "refs").is_dir():
        return False
    try:
        (git_dir / "HEAD").write_text(f"ref: {BRANCH}\n")
    except OSError:
        return False
    return True


def recorded_workspace(git_dir: Path) -> str | None:
    """The workspace a shadow repository was created for, or None when unreadable."""
    try:
        return str(json.loads((git_dir / WORKSPACE_FILE).read_text())["workspace"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def looks_like_repo(git_dir: Path) -> bool:
    """``git_dir`` has the files of a git repository (HEAD, objects/, refs/)."""
    return (git_dir / "HEAD").is_file() and (git_dir / "objects").is_dir() and (git_dir / "refs").is_dir()


def stale_files(git_dir: Path) -> list[Path]:
    """Lock files and temporary object files in ``git_dir`` (stale when the lock is ours)."""
    found = [p for p in (git_dir / name for name in ("index.lock", "HEAD.lock", "config.lock",
                                                     "packed-refs.lock", "shallow.lock")) if p.exists()]
    refs = git_dir / "refs"
    if refs.is_dir():
        found += [p for p in refs.rglob("*.lock")]
    objects = git_dir / "objects"
    if objects.is_dir():
        for sub in objects.iterdir():
            if sub.name == "pack" or (len(sub.name) == 2 and sub.is_dir()):
                found += [p for p in sub.iterdir() if p.name.startswith("tmp_")]
    return found


def _fsck(git: Git) -> str | None:
    """None when ``git fsck`` finds the repository sound, else its first error line."""
    try:
        git.run(["fsck", "--no-progress", "--no-dangling", "--no-reflogs", "--cache"])
    except SnapshotError as exc:
        return str(exc)
    return None


def repair(git: Git, git_dir: Path, work_tree: Path, *, why: str) -> list[str]:
    """Make ``git_dir`` usable again after an interrupted operation; return what was done.

    Args:
        git: a Git bound to ``git_dir`` (the caller holds the repository lock).
        git_dir: the shadow repository.
        work_tree: the workspace.
        why: what prompted the check (``an interrupted snapshot``), for the warnings.
    """
    warnings: list[str] = []
    stale = stale_files(git_dir)
    for path in stale:
        with contextlib.suppress(OSError):
            path.unlink()
    if stale:
        names = ", ".join(sorted({p.name if not p.name.startswith("tmp_") else "tmp_*" for p in stale}))
        warnings.append(f"snapshots: removed {len(stale)} stale file(s) left by {why} ({names})")
    problem = _fsck(git)
    if problem is None:
        return warnings
    with contextlib.suppress(OSError):
        (git_dir / "index").unlink()
    try:
        git.run(["read-tree", "HEAD"])
    except SnapshotError:
        pass
    if _fsck(git) is None:
        warnings.append(f"snapshots: rebuilt the snapshot index after {why} ({problem})")
        return warnings
    broken = git_dir.with_name(git_dir.name + ".broken")
    shutil.rmtree(broken, ignore_errors=True)
    os.rename(git_dir, broken)
    init_repo(git_dir, work_tree)
    mark_recreated(git_dir, f"the one before was damaged: {problem}; it was moved to {broken}")
    warnings.append(
        f"snapshots: the snapshot repository was damaged ({problem}); it was moved to {broken} "
        "and a new one started, so earlier file checkpoints cannot be restored"
    )
    return warnings
