"""Putting paths back as a snapshot holds them, without losing the user's own work (issue 20).

Order of work, under the repository lock:

1. snapshot the current state, with the paths to restore included even when ignored
   (``RestoreResult.before``: restoring it undoes this restore);
2. with an ``expected`` snapshot per path (the agent's version), every path whose current
   state differs from it is a conflict and is left alone unless ``force``; so is a path
   whose current content is too large to keep a copy of first;
3. delete what did not exist then (deepest first, then the folders only it needed), create
   empty folders, and write files and symbolic links with their exact bytes and permission
   bits (each write atomic: a temporary file in the same folder, then a rename). A parent
   that is a symbolic link or a file is never written through: that path fails instead;
4. snapshot again (``RestoreResult.after``).

Paths not named are never touched.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from amos.atomic import atomic_write_bytes
from amos.snapshots.capture import _parents
from amos.snapshots.git import read_blobs
from amos.snapshots.models import Conflict, RestoreResult
from amos.snapshots.state import ABSENT, Entry, State, change_between, entries

if TYPE_CHECKING:
    from amos.snapshots.repo import ShadowRepo

_CONFLICT_WORDS = {
    "added": "created after the agent deleted it",
    "deleted": "deleted after the agent's change",
    "mode": "permissions changed after the agent's change",
    "type": "replaced by another kind of file after the agent's change",
}


def _current(repo: ShadowRepo, paths: list[str], pending: list[str], message: str):
    files = [p for p in paths if not p.endswith("/")]
    snap = repo._snapshot_locked(message, files, pending, restore=True)
    state = repo._reader.load(snap.id)
    return snap, state, entries(repo._reader, state, paths, until=None)


def _states_for(repo: ShadowRepo, per_path: dict[str, str], until: str
                ) -> tuple[dict[str, Entry | None], dict[str, State]]:
    groups: dict[str, list[str]] = {}
    for path, commit in per_path.items():
        groups.setdefault(commit, []).append(path)
    found: dict[str, Entry | None] = {}
    states: dict[str, State] = {}
    for commit, paths in groups.items():
        state = repo._reader.load(commit)
        found.update(entries(repo._reader, state, paths, until=until))
        for path in paths:
            states[path] = state
    return found, states


def _conflicts(repo: ShadowRepo, have: dict[str, Entry | None], expected: dict[str, str],
               until: str) -> dict[str, Conflict]:
    agent, _ = _states_for(repo, expected, until)
    out: dict[str, Conflict] = {}
    for path, now in have.items():
        version = agent.get(path)
        if version is None:
            out[path] = Conflict(path, "no record of the agent's version of it")
        elif now is None:
            out[path] = Conflict(path, "it cannot be read now")
        elif now != version:
            if now[0] == "big":
                out[path] = Conflict(path, "changed after the agent's change (now too large to keep a copy)")
            else:
                word = change_between(version, now) or "modified"
                out[path] = Conflict(path, _CONFLICT_WORDS.get(word, "changed after the agent's change"))
    return out


def find_conflicts(repo: ShadowRepo, paths: list[str], expected: dict[str, str]) -> list[Conflict]:
    """The conflicts :func:`restore_paths` would find (the caller holds the lock)."""
    snap, _, have = _current(repo, paths, [], "before checking for conflicts")
    return sorted(_conflicts(repo, have, expected, snap.id).values(), key=lambda c: c.path)


def restore_paths(repo: ShadowRepo, targets: dict[str, str], expected: dict[str, str] | None,
                  force: bool, pending: list[str]) -> RestoreResult:
    """Restore each path of ``targets`` to its snapshot (the caller holds the lock).

    Args:
        repo: the repository.
        targets: path -> snapshot commit id to take it from.
        expected: path -> snapshot commit id of the agent's version, or None for no check.
        force: restore conflicting paths too.
        pending: warnings to attach to the ``before`` snapshot.
    """
    paths = list(targets)
    before, _, have = _current(repo, paths, pending, "before restore")
    want, states = _states_for(repo, targets, before.id)
    conflicts = _conflicts(repo, have, expected, before.id) if expected is not None else {}
    unavailable: list[Conflict] = []
    unchanged: list[str] = []
    todo: list[str] = []
    for path in paths:
        wanted, now = want[path], have[path]
        if wanted is None or wanted[0] == "big":
            skipped = states[path].manifest.skipped.get(path)
            reason = str(skipped[0]) if skipped else "the snapshot has no record of it (ignored then)"
            unavailable.append(Conflict(path, f"not in the snapshot: {reason}"))
        elif wanted == now:
            unchanged.append(path)
        elif (now is None or now[0] == "big") and path not in conflicts:
            conflicts[path] = Conflict(path, "too large (or unreadable) to keep a copy before restoring")
            if force:
                todo.append(path)
        elif path not in conflicts or force:
            todo.append(path)
    writer = _Writer(repo, states)
    writer.apply(todo, want)
    files = [p for p in paths if not p.endswith("/")]
    after = repo._snapshot_locked("after restore", files, [], restore=True)
    return RestoreResult(
        before=before, after=after, restored=tuple(sorted(writer.done)), unchanged=tuple(sorted(unchanged)),
        conflicts=tuple(sorted(conflicts.values(), key=lambda c: c.path)),
        unavailable=tuple(unavailable), failed=tuple(sorted(writer.failed, key=lambda c: c.path)),
        forced=force and bool(conflicts),
    )


class _Writer:
    """Applies a restore plan to the workspace."""

    def __init__(self, repo: ShadowRepo, states: dict[str, State]):
        self.repo = repo
        self.root = str(repo.work_tree)
        self.states = states
        self.done: list[str] = []
        self.failed: list[Conflict] = []

    def _full(self, rel: str) -> str:
        return os.path.join(self.root, rel.rstrip("/"))

    def apply(self, todo: list[str], want: dict[str, Entry | None]) -> None:
        gone = [p for p in todo if want[p] == ABSENT]
        gone.sort(key=lambda p: (-p.rstrip("/").count("/"), p.endswith("/"), p))
        for path in gone:
            self._delete(path)
        rest = sorted(p for p in todo if want[p] != ABSENT)
        blobs = read_blobs(self.repo._git, [want[p][1] for p in rest if want[p][0] in ("file", "link")])
        for path in rest:
            entry = want[path]
            try:
                if not self._parents_ready(path):
                    continue
                if entry[0] == "dir":
                    self._folder(path, entry[1])
                else:
                    self._write(path, entry, blobs[entry[1]])
            except OSError as exc:
                self.failed.append(Conflict(path, exc.strerror or str(exc)))
                continue
            self.done.append(path)

    def _delete(self, path: str) -> None:
        full = self._full(path)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            self.done.append(path)
            return
        except OSError as exc:
            self.failed.append(Conflict(path, exc.strerror or str(exc)))
            return
        try:
            if path.endswith("/") or stat.S_ISDIR(st.st_mode):
                if not path.endswith("/"):
                    self.failed.append(Conflict(path, "a folder is in its place"))
                    return
                os.rmdir(full)
            else:
                os.unlink(full)
        except OSError as exc:
            self.failed.append(Conflict(path, exc.strerror or str(exc)))
            return
        self.done.append(path)
        folders = self.states[path].folders
        for parent in reversed(list(_parents(path.rstrip("/")))):
            if parent in folders:
                break
            try:
                os.rmdir(self._full(parent))  # only an empty folder the snapshot did not have
            except OSError:
                break

    def _parents_ready(self, path: str) -> bool:
        manifest = self.states[path].manifest
        for parent in _parents(path.rstrip("/")):
            full = self._full(parent)
            try:
                st = os.lstat(full)
            except FileNotFoundError:
                os.mkdir(full, 0o700)
                os.chmod(full, manifest.folder_perms(parent))
                continue
            if not stat.S_ISDIR(st.st_mode):
                what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "a file"
                self.failed.append(Conflict(path, f"{what} is in the way at {parent[:-1]}"))
                return False
        return True

    def _folder(self, path: str, bits: int) -> None:
        full = self._full(path)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            os.mkdir(full, 0o700)
            os.chmod(full, bits)
            return
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(0, "a file is in its place")
        os.chmod(full, bits)

    def _write(self, path: str, entry: Entry, data: bytes) -> None:
        full = self._full(path)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            os.rmdir(full)  # fails (folder not empty) rather than delete what it holds
        if entry[0] == "link":
            tmp = os.path.join(os.path.dirname(full), f".{os.path.basename(full)}.amos-restore")
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(data, os.fsencode(tmp))
            os.replace(tmp, full)
            return
        atomic_write_bytes(Path(full), data, mode=entry[2])
