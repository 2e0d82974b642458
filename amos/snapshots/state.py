"""What one snapshot (or the current workspace) says about each path, and how two compare.

A snapshot *knows* a path when the path is in its tree, or is listed as absent (an
``include`` path that did not exist), or is one it would have taken had it existed (not
ignored, not skipped, the snapshot not partial). For a path it does not know — typically a
file git ignores that the agent's write tools touched later — the first later snapshot that
knows it answers (the one taken just before the tool touched it: :meth:`StateReader.chain`).
A path no snapshot knows is *unknown*: never deleted on its say-so.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime

from amos.errors import SnapshotError
from amos.snapshots.capture import _parents, ignored
from amos.snapshots.git import Git
from amos.snapshots.manifest import Manifest
from amos.snapshots.models import Change, FileChange, SkippedFile, Snapshot

Entry = tuple
"""``("file", oid, bits)``, ``("link", oid, None)``, ``("dir", bits)``, ``("absent",)``,
or ``("big", size)`` (exists but was too large to keep); None means unknown."""
ABSENT: Entry = ("absent",)


@dataclass
class State:
    """A snapshot's tree listing with its manifest.

    Attributes:
        id: the commit id, or None for the current workspace (a tree not committed).
        tree: the tree id.
        manifest: the manifest (an empty one for a commit without).
        files: path -> ``(git mode, blob id)``.
    """

    id: str | None
    tree: str
    manifest: Manifest
    files: dict[str, tuple[str, str]]
    _folders: set[str] | None = field(default=None, repr=False)

    @property
    def folders(self) -> set[str]:
        """Every folder (ending ``/``) holding a file, plus the manifest's empty folders."""
        if self._folders is None:
            found: set[str] = set(self.manifest.dirs)
            for path in self.files:
                found.update(_parents(path))
            self._folders = found
        return self._folders

    def skipped_covers(self, path: str) -> bool:
        """``path`` is a skipped path or lies inside a skipped folder."""
        skipped = self.manifest.skipped
        return path in skipped or any(p in skipped for p in _parents(path))

    def entry(self, path: str, ignored_now: set[str]) -> Entry | None:
        """What this state holds at ``path``; None when it does not know.

        Args:
            path: a file path, or a folder path ending ``/``.
            ignored_now: paths the ignore rules ignore (from :func:`ignored`).
        """
        m = self.manifest
        if path.endswith("/"):
            if path in self.folders:
                return ("dir", m.folder_perms(path))
            if m.partial or self.skipped_covers(path) or path[:-1] in ignored_now:
                return None
            return ABSENT
        found = self.files.get(path)
        if found is not None:
            mode, oid = found
            if mode == "120000":
                return ("link", oid, None)
            return ("file", oid, m.file_perms(path, mode == "100755"))
        if path in m.absent:
            return ABSENT
        if path in m.skipped:
            size = m.skipped[path][1]
            return ("big", size) if size is not None else None
        if m.partial or self.skipped_covers(path) or path in ignored_now:
            return None
        return ABSENT


def change_between(old: Entry | None, new: Entry | None) -> Change | None:
    """How ``new`` differs from ``old`` (None: the same, or nothing known about ``new``).

    An unknown ``old`` with a known ``new`` counts as ``added`` (what a person reading a
    diff expects); restoring such a path is refused as unavailable, never a deletion.
    """
    if old == new or new is None:
        return None
    if old is None or old == ABSENT:
        return "added"
    if new == ABSENT:
        return "deleted"
    if old[0] == "big" or new[0] == "big":
        return "modified"
    if old[0] != new[0]:
        return "type"
    if old[0] == "dir":
        return "mode"
    return "modified" if old[1] != new[1] else "mode"


class StateReader:
    """Loads snapshots from the shadow repository (tree listings cached by tree id)."""

    def __init__(self, git: Git):
        self.git = git
        self._listings: dict[str, dict[str, tuple[str, str]]] = {}
        self._commits: dict[str, tuple[str, str, str, Manifest]] = {}

    def resolve(self, snapshot: Snapshot | str) -> str:
        """The full commit id of a snapshot, its id or a unique prefix of it.

        Raises:
            SnapshotError: ``not_found``.
        """
        ref = snapshot.id if isinstance(snapshot, Snapshot) else str(snapshot)
        if ref in self._commits:
            return ref
        if not ref or not all(c in "0123456789abcdef" for c in ref.lower()) or len(ref) < 4:
            raise SnapshotError("not_found", f"{ref!r} is not a snapshot id (hex commit id)")
        out = self.git.run(["rev-parse", "-q", "--verify", f"{ref}^{{commit}}"], ok=(0, 1)).strip()
        if not out:
            from amos.snapshots.repair import recreated_note

            why = recreated_note(self.git.git_dir)
            lost = (f": the snapshot repository was {why}, so the snapshots taken before that (earlier snapshots) "
                    "are lost" if why else "")
            raise SnapshotError("not_found", f"no snapshot {ref} in this session's snapshot repository{lost}")
        return out.decode()

    def commit(self, commit_id: str) -> tuple[str, str, str, Manifest]:
        """``(tree, created_at, message, manifest)`` of a snapshot commit (cached: commits never change)."""
        if commit_id in self._commits:
            return self._commits[commit_id]
        raw = self.git.run(["cat-file", "commit", commit_id]).decode("utf-8", errors="replace")
        head, _, message = raw.partition("\n\n")
        tree, created = "", ""
        for line in head.splitlines():
            if line.startswith("tree "):
                tree = line[5:].strip()
            elif line.startswith("committer "):
                stamp = line.rsplit(" ", 2)[-2]
                created = datetime.fromtimestamp(int(stamp), UTC).isoformat().replace("+00:00", "Z")
        manifest = Manifest.from_message(message) or Manifest()
        found = (tree, created, message.splitlines()[0] if message else "", manifest)
        if len(self._commits) > 256:
            self._commits.pop(next(iter(self._commits)))
        self._commits[commit_id] = found
        return found

    def remember(self, commit_id: str, tree: str, created: str, message: str, manifest: Manifest) -> None:
        """Cache a commit just written (so the next snapshot need not read it back)."""
        self._commits[commit_id] = (tree, created, message, Manifest.from_message(manifest.to_line()) or manifest)

    def snapshot(self, commit_id: str, warnings: tuple[str, ...] = ()) -> Snapshot:
        """The :class:`Snapshot` record of a commit."""
        _, created, message, m = self.commit(commit_id)
        skipped = tuple(SkippedFile(p, str(v[0]), v[1]) for p, v in sorted(m.skipped.items()))
        return Snapshot(commit_id, created, message, m.files, m.bytes, skipped, m.partial, warnings)

    def listing(self, tree: str) -> dict[str, tuple[str, str]]:
        """path -> ``(git mode, blob id)`` of every file in ``tree``."""
        if tree not in self._listings:
            files: dict[str, tuple[str, str]] = {}
            out = self.git.run(["ls-tree", "-r", "-z", "--full-tree", tree])
            for entry in out.decode("utf-8", "surrogateescape").split("\0"):
                if entry:  # "<mode> blob <oid>\t<path>"
                    files[entry[entry.index("\t") + 1:]] = (entry[:6], entry[entry.index(" ", 7) + 1:entry.index("\t")])
            if len(self._listings) > 16:
                self._listings.pop(next(iter(self._listings)))
            self._listings[tree] = files
        return self._listings[tree]

    def load(self, commit_id: str) -> State:
        """The :class:`State` of a snapshot commit."""
        tree, _, _, manifest = self.commit(commit_id)
        return State(commit_id, tree, manifest, self.listing(tree))

    def chain(self, after: str, until: str, paths: list[str]) -> dict[str, tuple[str, Entry]]:
        """For paths ``after`` does not know: the first later snapshot (up to ``until``) that does.

        Only a snapshot that named the path in ``include`` counts (one taken just before a
        write tool touched it), and never one taken by a restore.

        Returns:
            path -> ``(commit id, entry there)`` for the paths some snapshot knows.
        """
        if not paths or after == until:
            return {}
        order = self.git.run(["rev-list", "--reverse", until, f"^{after}"]).decode().split()
        found: dict[str, tuple[str, Entry]] = {}
        remaining = set(paths)
        for commit_id in order:
            if not remaining:
                break
            state = self.load(commit_id)
            if state.manifest.restore:
                continue
            for path in list(remaining):
                if path in state.manifest.include or path in state.manifest.absent:
                    entry = state.entry(path, set())
                    if entry is not None:
                        found[path] = (commit_id, entry)
                        remaining.discard(path)
        return found


def entries(reader: StateReader, state: State, paths: list[str], *, until: str | None,
            tracked_before: Collection[str] = frozenset()) -> dict[str, Entry | None]:
    """What ``state`` holds at each of ``paths``, unknowns answered by later snapshots.

    Args:
        reader: the repository's reader.
        state: a snapshot's state (or the current workspace's).
        paths: file paths and folder paths (``/``-terminated).
        until: the newest snapshot to look in for paths ``state`` does not know (None:
            no look-ahead).
        tracked_before: files an earlier snapshot holds. The shadow index keeps a file
            until it is deleted (or skipped), so a later state without it knows it is gone.
    """
    known_gone = {p for p in paths if p in tracked_before and p not in state.files
                  and p not in state.manifest.skipped}
    maybe = [p for p in paths if p.rstrip("/") and p not in state.files and p not in state.manifest.absent
             and p not in state.folders and p not in known_gone]
    ignored_now = ignored(reader.git, [p.rstrip("/") for p in maybe])
    ignored_now |= {p + "/" for p in ignored_now}
    out = {p: ABSENT if p in known_gone else state.entry(p, ignored_now) for p in paths}
    unknown = [p for p, e in out.items() if e is None and not p.endswith("/")]
    if unknown and state.id is not None and until is not None:
        for path, (_, entry) in reader.chain(state.id, until, unknown).items():
            out[path] = entry
    return out


def compare(reader: StateReader, a: State, b: State, *, until: str | None) -> list[FileChange]:
    """Every path that differs from ``a`` to ``b`` (files, empty folders, exact modes)."""
    paths = set(a.files) | set(b.files)
    paths |= set(a.manifest.dirs) | set(b.manifest.dirs)
    paths |= set(a.manifest.skipped) | set(b.manifest.skipped)
    paths |= set(a.manifest.absent) | set(b.manifest.absent)
    shared = a.folders & b.folders
    paths |= {f for f in shared if a.manifest.folder_perms(f) != b.manifest.folder_perms(f)}
    # fast path: same blob, same git mode, same exact bits
    todo = []
    for path in paths:
        fa, fb = a.files.get(path), b.files.get(path)
        if fa is not None and fa == fb:
            exe = fa[0] == "100755"
            if fa[0] == "120000" or a.manifest.file_perms(path, exe) == b.manifest.file_perms(path, exe):
                continue
        todo.append(path)
    todo = [p for p in todo if not (p.endswith("/") and p in a.folders and p in b.folders
                                    and a.manifest.folder_perms(p) == b.manifest.folder_perms(p))]
    old = entries(reader, a, todo, until=until)
    new = entries(reader, b, todo, until=None, tracked_before=a.files.keys())
    out = []
    for path in sorted(todo):
        if path.endswith("/") and (path not in a.manifest.dirs and path not in b.manifest.dirs) and not (
                path in a.folders and path in b.folders):
            continue  # a folder that only came or went with its files
        change = change_between(old[path], new[path])
        if change is not None:
            out.append(FileChange(path, change))
    return out
