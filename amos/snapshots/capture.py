"""Bring the shadow index up to date with the workspace and write its tree (one snapshot's work).

How it stays fast (issue 20, "Incremental snapshots must be fast"): the shadow index is the
cache. ``git ls-files -t -c -o --directory --exclude-standard`` lists the tracked files and
walks the workspace once for new ones (applying every ignore rule), while one Python
``lstat`` pass over every tracked file runs beside it. That pass gives the exact permission
bits and sizes git does not keep and, compared with the ctimes the previous capture in this
process saw, the changed and deleted files (the first capture of a process asks git, with
``-m -d``, instead). Only those are checked for size and handed to ``git update-index
--stdin``; ``git write-tree`` then rewrites only the trees that changed. A snapshot of many
new files streams their content into one pack (``core.bigFileThreshold=1``,
``core.compression=1`` for that command) and writes its trees and commit into another
(``git fast-import``), instead of one loose object file per file and folder.
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
MAX_NESTED_FILES = 20000
"""Files listed inside one nested git repository the first time it is seen; past this
it is left out of snapshots (and said so)."""


@dataclass
class Capture:
    """The workspace's state as the shadow index now holds it.

    Attributes:
        tree: the tree id ``git write-tree`` gave ("" when deferred).
        manifest: what the tree does not say (modes, empty folders, what was skipped).
        skipped: the paths left out, for people.
        exceeded: over ``max_workspace_bytes``; new files were left out.
        left_out: new files not added because the workspace was over its cap.
    """

    tree: str
    manifest: mf.Manifest
    skipped: list[SkippedFile] = field(default_factory=list)
    exceeded: bool = False
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


def beyond_link(root: str, path: str) -> bool:
    """``path`` lies under a symbolic link or a non-folder in ``root`` (git cannot add it)."""
    current = root
    for part in path.split("/")[:-1]:
        current = os.path.join(current, part)
        try:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return True
        except OSError:
            return False
    return False


def ignored(git: Git, paths: list[str]) -> set[str]:
    """Which of ``paths`` the ignore rules (workspace's and user's) ignore, as if untracked.

    Paths under a symbolic link count as not ignored (git refuses to look at them).
    """
    root = str(git.work_tree)
    paths = [p for p in paths if not beyond_link(root, p)]
    if not paths:
        return set()
    data = b"".join(os.fsencode("./" + p) + b"\0" for p in paths)  # "./": a leading ":" is no magic
    out = split_z(git.run(["check-ignore", "--no-index", "-z", "--stdin", "-v", "-n"], input=data,
                          ok=(0, 1), literal=False))  # check-ignore refuses GIT_LITERAL_PATHSPECS
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
        refresh: also refresh the stat data of every index entry (``update-index
            --refresh``), so files only touched, or written in the same second as the
            index, are not re-read by git later. The repository asks for it with the
            first capture of each process.
        cache: path -> ``st_ctime_ns`` of every file the previous capture in this
            process kept (None: no previous capture). ctime changes with every write,
            chmod and rename, so comparing it finds the changed files without a second
            pass over them in git; :attr:`cache` holds the new one afterwards.
        tree: the tree the index held after that capture (reused when nothing changed).
    """

    def __init__(self, git: Git, work_tree: Path, max_file_bytes: int, max_workspace_bytes: int, *,
                 refresh: bool = False, cache: dict[str, int] | None = None, tree: str | None = None):
        self.git = git
        self.refresh = refresh
        self.cache = cache
        self.tree = tree if cache is not None else None
        self.root = str(work_tree)
        self.max_file_bytes = max_file_bytes
        self.max_workspace_bytes = max_workspace_bytes
        self.skipped: dict[str, SkippedFile] = {}
        self.big_nested: set[str] = set()  # nested repositories found too large (the repository keeps it)

    def _lstat(self, path: str) -> os.stat_result | None:
        try:
            return os.lstat(os.path.join(self.root, path))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            self.skipped[path] = SkippedFile(path, f"cannot be read ({exc.strerror})")
            return None

    def _lstat_all(self, paths: Iterable[str], known: dict[str, os.stat_result | None] | None = None
                   ) -> dict[str, os.stat_result | None]:
        prefix = self.root + os.sep
        lstat = os.lstat
        out: dict[str, os.stat_result | None] = known if known is not None else {}
        for path in paths:
            if path in out:
                continue
            try:
                out[path] = lstat(prefix + path)
            except (FileNotFoundError, NotADirectoryError):
                out[path] = None
            except OSError as exc:
                self.skipped[path] = SkippedFile(path, f"cannot be read ({exc.strerror})")
                out[path] = None
        return out

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
        return beyond_link(self.root, path)

    def run(self, include: Iterable[str], *, restore: bool = False, defer_tree: bool = False) -> Capture:
        """Update the shadow index from the workspace and write the tree.

        Args:
            include: workspace-relative paths to snapshot even when ignored.
            restore: the capture is a restore's (see ``Manifest.restore``).
            defer_tree: when many files are new, leave ``tree`` empty for the caller to
                write with ``git fast-import``.

        Raises:
            SnapshotError: a git command failed.
        """
        git = self.git
        index: list[str] = []
        new: list[str] = []
        changed: set[str] = set()
        folders: list[str] = []
        cache = self.cache
        ask_git = ["-m", "-d"] if cache is None else []  # else our own stat cache finds the changes
        args = ["ls-files", "-z", "-t", "-c", "-o", *ask_git, "--directory", "--exclude-standard"]
        walk = git.start(args)
        try:  # while git walks the workspace, lstat the files the last capture saw
            early = self._lstat_all(cache) if cache else {}
        finally:
            listing = git.finish(walk, args)
        for entry in listing.decode("utf-8", "surrogateescape").split("\0"):
            tag, path = entry[:1], entry[2:]
            if tag == "H" or tag == "S":
                index.append(path)
            elif tag == "?":
                (folders if path.endswith("/") else new).append(path)
            elif tag:
                changed.add(path)
        fileless = self._expand(folders, new)
        tracked = set(index)
        wanted = list(dict.fromkeys(include))
        include = [p for p in wanted if p not in tracked or p in changed]
        stats = self._lstat_all((*index, *new, *include), early)
        force_remove: list[str] = []
        update: list[str] = []
        absent: list[str] = []
        signatures: dict[str, int] = {}  # the files kept, with their st_ctime_ns
        file_bits: dict[str, int] = {}
        parents: set[str] = set()
        skipped = self.skipped
        max_file = self.max_file_bytes
        regular, link = stat.S_IFREG, stat.S_IFLNK
        previous = cache.get if cache is not None else None
        kept_bytes = 0
        for path in index:
            st = stats[path]
            if st is None:
                if path in skipped or self._beyond_link(path):
                    force_remove.append(path)  # unreadable, or its folder became a symbolic link
                else:
                    update.append(path)  # deleted: --remove drops it
                continue
            signature = st.st_ctime_ns  # every write, chmod and rename sets it
            mode = st.st_mode
            kind = mode & 0o170000
            if kind == regular and st.st_size <= max_file:
                file_bits[path] = mode & 0o7777
            elif kind != link:
                force_remove.append(path)
                if kind != stat.S_IFDIR:  # a folder in the file's place is just a deletion
                    skipped[path] = self._skip_reason(path, st)
                continue
            if (path in changed if previous is None else previous(path) != signature):
                if self._beyond_link(path):
                    force_remove.append(path)
                    file_bits.pop(path, None)
                    continue
                update.append(path)
            signatures[path] = signature
            kept_bytes += st.st_size
            cut = path.rfind("/")
            if cut > 0:
                parents.add(path[:cut])
        fresh: dict[str, os.stat_result] = {}
        for path in dict.fromkeys((*new, *include)):
            if path in signatures:
                continue
            st = stats.get(path)
            if st is None:
                if path in include and path not in self.skipped:
                    absent.append(path)
                continue
            if stat.S_ISDIR(st.st_mode):
                continue  # an include path that is a folder: its files are snapshotted as usual
            reason = self._skip_reason(path, st)
            if reason is None and path in include and self._beyond_link(path):
                reason = SkippedFile(path, "inside a symbolic link or a nested repository")
            if reason is not None:
                self.skipped[path] = reason
                continue
            fresh[path] = st
        include_set = set(include)
        total = kept_bytes + sum(st.st_size for st in fresh.values())
        exceeded = total > self.max_workspace_bytes
        left_out = 0
        if exceeded:
            left_out = len(fresh)
            fresh = {p: st for p, st in fresh.items() if p in include_set}
            left_out -= len(fresh)
            total = kept_bytes + sum(st.st_size for st in fresh.values())
        included = [p for p in wanted if p in fresh or p in signatures]
        update += list(fresh)
        if force_remove:
            git.run(["update-index", "--force-remove", "-z", "--stdin"],
                    input=b"".join(os.fsencode(p) + b"\0" for p in force_remove))
        if update or self.refresh:
            bulk = [("core.bigFileThreshold", "1"), ("core.compression", "1")] if len(fresh) > BULK_FILES else []
            refresh = ["-q", "--refresh"] if self.refresh else []
            git.run(["update-index", *refresh, "--add", "--remove", "--replace", "-z", "--stdin"],
                    input=b"".join(os.fsencode(p) + b"\0" for p in update), extra_config=bulk)
        # Many new files: their trees would be as many loose object files again; the
        # caller writes them into one pack with the commit instead (repo._commit_packed).
        writing = None
        tree = ""
        if not (defer_tree and len(fresh) > BULK_FILES):
            if update or force_remove or self.tree is None:
                writing = git.start(["write-tree"])  # collected after the manifest is built
            else:
                tree = self.tree  # nothing changed in the index since the last capture
        for path, st in fresh.items():
            signatures[path] = st.st_ctime_ns
            if st.st_mode & 0o170000 == regular:
                file_bits[path] = st.st_mode & 0o7777
            cut = path.rfind("/")
            if cut > 0:
                parents.add(path[:cut])
        self.cache = signatures
        try:
            capture = self._finish(tree, len(signatures), file_bits, parents, fileless, included, absent,
                                   exceeded, total)
        finally:
            if writing is not None:
                capture_tree = git.finish(writing, ["write-tree"]).decode().strip()
        if writing is not None:
            capture.tree = capture_tree
        self.tree = capture.tree or None
        capture.manifest.restore = restore
        capture.left_out = left_out
        return capture

    def _expand(self, folders: list[str], new: list[str]) -> dict[str, int]:
        """List the files inside untracked folders; return the folders left with no file."""
        plain = []
        nested = []
        for folder in folders:
            if os.path.lexists(os.path.join(self.root, folder, ".git")):
                nested.append(folder)
            else:
                plain.append(folder)
        has_files: set[str] = set()
        if plain:
            for entry in split_z(self.git.run(["ls-files", "-z", "-o", "--exclude-standard", "--", *plain])):
                path = os.fsdecode(entry)
                if path.endswith("/"):
                    nested.append(path)
                    has_files.update(_parents(path[:-1] + "/x"))
                    continue
                new.append(path)
                has_files.update(_parents(path))
        for folder in nested:
            new.extend(self._nested_files(folder))
        if not plain:
            return {}
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

    def _nested_files(self, folder: str) -> list[str]:
        """The files of a nested git repository (``folder`` ends ``/``), as plain files.

        git stops at a folder holding a ``.git``; amos snapshots its files like any
        others, never looking inside (or touching) any ``.git``, and applying the ignore
        rules (the nested repository's own ``.gitignore`` files included). Folders are
        walked one depth at a time so an ignored folder (``node_modules/``) is never
        entered. Once its files are in the shadow index git walks the folder itself.
        Past :data:`MAX_NESTED_FILES` files the repository is left out (and said so).
        """
        too_big = SkippedFile(folder, f"nested git repository with more than {MAX_NESTED_FILES} files")
        if folder in self.big_nested:
            self.skipped[folder] = too_big
            return []
        found: list[str] = []
        level = [folder[:-1]]
        while level:
            subdirs: list[str] = []
            files: list[str] = []
            for rel in level:
                try:
                    with os.scandir(os.path.join(self.root, rel)) as it:
                        for item in it:
                            if item.name == ".git":
                                continue
                            path = f"{rel}/{item.name}"
                            if item.is_dir(follow_symlinks=False):
                                subdirs.append(path)
                            else:
                                files.append(path)
                except OSError as exc:
                    self.skipped[rel + "/"] = SkippedFile(rel + "/", f"cannot be read ({exc.strerror})")
            drop = ignored(self.git, files + subdirs) if files or subdirs else set()
            found += [p for p in files if p not in drop]
            if len(found) > MAX_NESTED_FILES:
                self.skipped[folder] = too_big
                self.big_nested.add(folder)
                return []
            level = [d for d in subdirs if d not in drop]
        return found

    def _finish(self, tree: str, files: int, file_bits: dict[str, int], parents: set[str],
                fileless: dict[str, int], included: list[str], absent: list[str], exceeded: bool,
                total: int) -> Capture:
        folders: set[str] = set()
        for parent in parents:  # with their own parents
            while parent and parent not in folders:
                folders.add(parent)
                cut = parent.rfind("/")
                parent = parent[:cut] if cut > 0 else ""
        folder_bits = {f + "/": st.st_mode & 0o7777 for f, st in self._lstat_all(folders).items()
                       if st is not None}
        skipped = sorted(self.skipped.values(), key=lambda s: s.path)
        manifest = mf.build(
            file_bits, folder_bits, fileless,
            skipped={s.path: [s.reason, s.size_bytes] for s in skipped[:MAX_SKIPPED]},
            include=sorted(included), absent=sorted(absent),
            partial=exceeded or len(skipped) > MAX_SKIPPED, files=files, bytes=total,
        )
        return Capture(tree, manifest, skipped, exceeded)
