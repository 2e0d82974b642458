"""Bring the shadow index up to date with the workspace and write its tree (one snapshot's work).

How it stays fast (issue 20, "Incremental snapshots must be fast"): git's own index is the
cache. ``git ls-files -t -o -m -d --directory --exclude-standard`` walks the workspace once
and, from the stat data in the shadow index, names only new, changed and deleted files
(applying every ignore rule); only those are checked for size and handed to ``git
update-index --stdin``; ``git write-tree`` then rewrites only the trees that changed. The
one Python pass over every file is an ``lstat`` for exact permission bits and sizes, which
git does not keep. A first snapshot of many files streams their content into one pack
(``core.bigFileThreshold=1`` for that command) instead of one loose object file each.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from amos.snapshots import manifest as mf
from amos.snapshots.git import Git, split_z
from amos.snapshots.models import SkippedFile

BULK_FILES = 64
"""Hash more new files than this in one pack rather than as loose objects."""
MAX_SKIPPED = 1000
"""Skipped paths recorded one by one; past this the snapshot is marked partial."""
MAX_EMPTY_DIR_SCAN = 20000
"""Directory entries looked at when listing the folders inside a folder with no files."""


@dataclass
class Capture:
    """The workspace's state as the shadow index now holds it.

    Attributes:
        tree: the tree id ``git write-tree`` gave.
        manifest: what the tree does not say (modes, empty folders, what was skipped).
        skipped: the paths left out, for people.
        exceeded: over ``max_workspace_bytes``; new files were left out.
        files: path -> exact permission bits of every file in the tree (None for a
            symbolic link).
        left_out: new files not added because the workspace was over its cap.
    """

    tree: str
    manifest: mf.Manifest
    skipped: list[SkippedFile] = field(default_factory=list)
    exceeded: bool = False
    files: dict[str, int | None] = field(default_factory=dict)
    left_out: int = 0


def _size_text(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def _parents(path: str) -> Iterable[str]:
    parts = path.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        yield "/".join(parts[:i]) + "/"


def ignored(git: Git, paths: list[str]) -> set[str]:
    """Which of ``paths`` the ignore rules (workspace's and user's) ignore, as if untracked."""
    if not paths:
        return set()
    env_literal = git.env.pop("GIT_LITERAL_PATHSPECS", None)  # check-ignore refuses the magic
    try:
        data = b"".join(os.fsencode("./" + p) + b"\0" for p in paths)
        out = split_z(git.run(["check-ignore", "--no-index", "-z", "--stdin", "-v", "-n"],
                              input=data, ok=(0, 1)))
    finally:
        if env_literal is not None:
            git.env["GIT_LITERAL_PATHSPECS"] = env_literal
    found = set()
    for i in range(0, len(out) - 3, 4):
        pattern = out[i + 2]
        if pattern and not pattern.startswith(b"!"):
            found.add(os.fsdecode(out[i + 3])[2:])
    return found


class Scanner:
    """One capture of the workspace into the shadow index.

    Args:
        git: the shadow repository's git.
        work_tree: the workspace (absolute, resolved).
        max_file_bytes: larger files are skipped.
        max_workspace_bytes: past this total, files not yet in the index are left out.
    """

    def __init__(self, git: Git, work_tree: Path, max_file_bytes: int, max_workspace_bytes: int):
        self.git = git
        self.root = str(work_tree)
        self.max_file_bytes = max_file_bytes
        self.max_workspace_bytes = max_workspace_bytes
        self.skipped: dict[str, SkippedFile] = {}

    def _lstat(self, path: str) -> os.stat_result | None:
        try:
            return os.lstat(os.path.join(self.root, path))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            self.skipped[path] = SkippedFile(path, f"cannot be read ({exc.strerror})")
            return None

    def _skip_reason(self, path: str, st: os.stat_result) -> SkippedFile | None:
        if stat.S_ISLNK(st.st_mode):
            return None
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            return SkippedFile(path, kind)
        if st.st_size > self.max_file_bytes:
            return SkippedFile(
                path, f"larger than checkpoints.max_file_bytes ({_size_text(self.max_file_bytes)})",
                st.st_size,
            )
        return None

    def _beyond_link(self, path: str) -> bool:
        """``path`` lies under a symbolic link or a non-folder (git cannot add it)."""
        current = self.root
        for part in path.split("/")[:-1]:
            current = os.path.join(current, part)
            try:
                if not stat.S_ISDIR(os.lstat(current).st_mode):
                    return True
            except OSError:
                return False
        return False

    def run(self, include: Iterable[str], *, restore: bool = False) -> Capture:
        """Update the shadow index from the workspace and write the tree.

        Args:
            include: workspace-relative paths to snapshot even when ignored.
            restore: the capture is a restore's (see ``Manifest.restore``).

        Raises:
            SnapshotError: a git command failed.
        """
        git = self.git
        index: dict[str, str] = {}
        gitlinks: list[str] = []
        for entry in split_z(git.run(["ls-files", "-z", "-s"])):
            meta, _, raw = entry.partition(b"\t")
            path = os.fsdecode(raw)
            index[path] = meta[:6].decode()
            if meta.startswith(b"160000"):
                gitlinks.append(path)
        new: list[str] = []
        changed: set[str] = set()
        folders: list[str] = []
        for entry in split_z(git.run(["ls-files", "-z", "-t", "-o", "-m", "-d", "--directory",
                                      "--exclude-standard"])):
            tag, path = entry[:1], os.fsdecode(entry[2:])
            if tag == b"?":
                (folders if path.endswith("/") else new).append(path)
            else:
                changed.add(path)
        fileless = self._expand(folders, new)
        wanted = list(dict.fromkeys(include))
        include = [p for p in wanted if p not in index or p in changed]
        stats: dict[str, os.stat_result | None] = {}
        for path in (*index, *new, *include):
            if path not in stats:
                stats[path] = self._lstat(path)
        force_remove = list(gitlinks)
        for path in gitlinks:
            self.skipped[path + "/"] = SkippedFile(path + "/", "nested git repository")
        update: list[str] = []
        absent: list[str] = []
        kept: dict[str, os.stat_result] = {}
        for path in index:
            st = stats[path]
            if path in gitlinks:
                continue
            if path in changed and self._beyond_link(path):
                force_remove.append(path)  # its folder became a symbolic link: gone from here
                continue
            if st is None:
                # deleted (--remove drops it), or unreadable (skipped: dropped by force)
                (force_remove if path in self.skipped else update).append(path)
                continue
            if stat.S_ISDIR(st.st_mode):
                force_remove.append(path)  # a folder took the file's place
                continue
            reason = self._skip_reason(path, st)
            if reason is not None:
                self.skipped[path] = reason
                force_remove.append(path)
                continue
            kept[path] = st
            if path in changed:
                update.append(path)
        fresh: dict[str, os.stat_result] = {}
        for path in dict.fromkeys((*new, *include)):
            if path in kept:
                continue
            st = stats.get(path)
            if st is None:
                if path in include and path not in self.skipped:
                    absent.append(path)
                continue
            reason = self._skip_reason(path, st)
            if reason is None and path in include and self._beyond_link(path):
                reason = SkippedFile(path, "inside a symbolic link or a nested repository")
            if reason is not None:
                self.skipped[path] = reason
                continue
            fresh[path] = st
        include_set = set(include)
        total = sum(st.st_size for st in kept.values()) + sum(st.st_size for st in fresh.values())
        exceeded = total > self.max_workspace_bytes
        left_out = 0
        if exceeded:
            left_out = len(fresh)
            fresh = {p: st for p, st in fresh.items() if p in include_set}
            left_out -= len(fresh)
            total = sum(st.st_size for st in kept.values()) + sum(st.st_size for st in fresh.values())
        included = [p for p in wanted if p in fresh or p in kept]
        update += list(fresh)
        if force_remove:
            git.run(["update-index", "--force-remove", "-z", "--stdin"],
                    input=b"".join(os.fsencode(p) + b"\0" for p in force_remove))
        if update:
            bulk = [("core.bigFileThreshold", "1")] if len(fresh) > BULK_FILES else []
            git.run(["update-index", "-q", "--refresh", "--add", "--remove", "--replace", "-z", "--stdin"],
                    input=b"".join(os.fsencode(p) + b"\0" for p in update), extra_config=bulk)
        tree = git.run(["write-tree"]).decode().strip()
        kept.update(fresh)
        capture = self._finish(tree, kept, fileless, included, absent, exceeded, total)
        capture.manifest.restore = restore
        capture.left_out = left_out
        return capture

    def _expand(self, folders: list[str], new: list[str]) -> dict[str, int]:
        """List the files inside untracked folders; return the folders left with no file."""
        plain = []
        for folder in folders:
            if os.path.lexists(os.path.join(self.root, folder, ".git")):
                self.skipped[folder] = SkippedFile(folder, "nested git repository")
            else:
                plain.append(folder)
        if not plain:
            return {}
        has_files: set[str] = set()
        for entry in split_z(self.git.run(["ls-files", "-z", "-o", "--exclude-standard", "--", *plain])):
            path = os.fsdecode(entry)
            if path.endswith("/"):
                self.skipped[path] = SkippedFile(path, "nested git repository")
                has_files.update(_parents(path[:-1] + "/x"))
                continue
            new.append(path)
            has_files.update(_parents(path))
        candidates: list[str] = []
        scanned = 0
        for folder in plain:
            if folder in has_files:
                continue
            candidates.append(folder)
            for current, dirnames, filenames in os.walk(os.path.join(self.root, folder)):
                scanned += len(dirnames) + len(filenames)
                rel = os.path.relpath(current, self.root).replace(os.sep, "/")
                dirnames[:] = [d for d in dirnames if d != ".git"]
                candidates += [f"{rel}/{d}/" for d in dirnames]
                if scanned > MAX_EMPTY_DIR_SCAN:
                    break
        drop = ignored(self.git, [c[:-1] for c in candidates])
        result: dict[str, int] = {}
        for folder in candidates:
            if folder in has_files or any(p[:-1] in drop for p in (*_parents(folder[:-1] + "/x"),)):
                continue
            st = self._lstat(folder[:-1])
            if st is not None and stat.S_ISDIR(st.st_mode):
                result[folder] = stat.S_IMODE(st.st_mode)
        return result

    def _finish(self, tree: str, kept: dict[str, os.stat_result], fileless: dict[str, int],
                included: list[str], absent: list[str], exceeded: bool, total: int) -> Capture:
        file_perms: dict[str, tuple[int, bool]] = {}
        files: dict[str, int | None] = {}
        folders: set[str] = set()
        for path, st in kept.items():
            folders.update(_parents(path))
            if stat.S_ISLNK(st.st_mode):
                files[path] = None
                continue
            bits = stat.S_IMODE(st.st_mode)
            file_perms[path] = (bits, bool(bits & stat.S_IXUSR))
            files[path] = bits
        folder_perms: dict[str, int] = {}
        for folder in folders:
            st = self._lstat(folder[:-1])
            if st is not None:
                folder_perms[folder] = stat.S_IMODE(st.st_mode)
        skipped = sorted(self.skipped.values(), key=lambda s: s.path)
        manifest = mf.build(
            file_perms, folder_perms, fileless,
            skipped={s.path: [s.reason, s.size_bytes] for s in skipped[:MAX_SKIPPED]},
            include=sorted(included), absent=sorted(absent),
            partial=exceeded or len(skipped) > MAX_SKIPPED, files=len(kept), bytes=total,
        )
        return Capture(tree, manifest, skipped, exceeded, files)
