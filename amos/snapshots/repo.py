"""``ShadowRepo``: workspace snapshots in a git repository kept outside the workspace (issue 20).

``GIT_DIR`` is the shadow repository (``amos.paths.snapshots_dir(session) / "git"``),
``GIT_WORK_TREE`` the workspace. The user's ``.git``, index, config and hooks are never
opened: the workspace's ``.git`` is not part of any snapshot (git never adds a path named
``.git``), and the only thing read from the user's git setup is their ignore rules
(:mod:`amos.snapshots.ignore`). Snapshots form one linear history on
``refs/heads/snapshots``; each is a commit whose tree is the workspace's files and whose
message ends with the manifest (:mod:`amos.snapshots.manifest`).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from amos.errors import SnapshotError
from amos.snapshots import ignore, repair, unkept
from amos.snapshots.capture import Scanner, _size_text
from amos.snapshots.git import Git, commit_packed
from amos.snapshots.models import AgentChange, Conflict, FileChange, RestoreResult, Snapshot
from amos.snapshots.state import State, StateReader, compare
from amos.snapshots.unkept import UnkeptScan

DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_WORKSPACE_BYTES = 500 * 1024 * 1024

SnapshotRef = Snapshot | str
"""A :class:`Snapshot` or its id (a unique prefix of it works too)."""


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


class ShadowRepo:
    """Snapshots of one workspace in one shadow git repository.

    Every method takes the repository's lock (``<git_dir>.lock``) for its duration, and
    before its first use in a process, or after an interrupted one, checks and repairs
    the repository (:mod:`amos.snapshots.repair`); what a repair did is in the next
    snapshot's ``warnings`` and in :attr:`warnings`.

    Args:
        git_dir: the shadow repository (created on first use), outside the workspace.
        work_tree: the workspace folder.
        max_file_bytes: larger files are left out of snapshots, bytes
            (``checkpoints.max_file_bytes``).
        max_workspace_bytes: past this total, files not yet in a snapshot are left out,
            bytes (``checkpoints.max_workspace_bytes``).
        lock_timeout_s: how long to wait for another amos using the repository, seconds.
        exclude: more folders never snapshotted when they lie inside the workspace
            (amos's data folder); the repository's own folder always is.

    Attributes:
        warnings: every warning so far (repairs, the size cap), one line each.

    Raises:
        SnapshotError: ``git_missing`` (no git on PATH), ``bad_path`` (the workspace is
            not a folder, or the repository would be inside it or be its ``.git``).
    """

    def __init__(self, git_dir: Path, work_tree: Path, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 max_workspace_bytes: int = DEFAULT_MAX_WORKSPACE_BYTES, lock_timeout_s: float = 30.0,
                 exclude: Sequence[Path] = ()):
        work = Path(work_tree).expanduser()
        if not work.is_dir():
            raise SnapshotError("bad_path", f"the workspace {work} is not a folder")
        self.work_tree = work.resolve()
        self.git_dir = Path(git_dir).expanduser().absolute()
        if _inside(self.work_tree, self.git_dir) or self.git_dir.resolve() == self.work_tree / ".git":
            raise SnapshotError("bad_path", f"the snapshot repository {self.git_dir} must not hold the "
                                            "workspace or be its .git")
        if max_file_bytes < 1 or max_workspace_bytes < 1:
            raise SnapshotError("bad_path", "max_file_bytes and max_workspace_bytes must be at least 1")
        self.max_file_bytes = max_file_bytes
        self.max_workspace_bytes = max_workspace_bytes
        self.warnings: list[str] = []
        self._git = Git(self.git_dir, self.work_tree)
        self._lock = repair.RepoLock(self.git_dir.with_name(self.git_dir.name + ".lock"), lock_timeout_s)
        self._reader = StateReader(self._git)
        self._checked = False
        self._stat_cache: dict[str, int] | None = None
        self._index_tree: str | None = None
        self._excludes: Path | None = None
        self._big_nested: set[str] = set()
        self._exclude = [Path(p).expanduser().absolute() for p in exclude]

    # ------------------------------------------------------------------ opening and locking

    @contextlib.contextmanager
    def _op(self, *, write: bool) -> Iterator[list[str]]:
        self._lock.acquire()
        outer = self._lock.depth == 1
        busy = self.git_dir / repair.BUSY
        try:
            self._git.pass_fds = (self._lock.fd,) if self._lock.fd is not None else ()
            pending = self._open() if outer else []
            if write and outer:
                busy.touch()
            yield pending
        finally:
            if write and outer:
                with contextlib.suppress(OSError):
                    busy.unlink()
            self._lock.release()

    def _open(self) -> list[str]:
        warnings: list[str] = []
        if not self._checked:
            self._git.check_version()
            self._excludes = ignore.user_excludes_file(self.work_tree, self._git.exe)
        head_lost = repair.restore_head(self.git_dir)  # the rest is there: keep every snapshot
        if head_lost:
            warnings.append(f"snapshots: the snapshot repository {self.git_dir} had lost its HEAD file; it was "
                            "repaired and its snapshots kept")
        if not repair.looks_like_repo(self.git_dir):
            if self.git_dir.exists() and any(self.git_dir.iterdir()):
                broken = self.git_dir.with_name(self.git_dir.name + ".broken")
                shutil.rmtree(broken, ignore_errors=True)
                self.git_dir.rename(broken)
                repair.init_repo(self.git_dir, self.work_tree)
                repair.mark_recreated(self.git_dir, f"the one before was not a usable repository; it was moved "
                                                    f"to {broken}")
                warnings.append(f"snapshots: the snapshot repository {self.git_dir} was not usable; it was "
                                f"moved to {broken} and recreated, so earlier snapshots are lost (/undo and "
                                "rewinds of the files changed before cannot put them back)")
            else:
                if self.git_dir.exists():
                    self.git_dir.rmdir()
                repair.init_repo(self.git_dir, self.work_tree)
        recorded = repair.recorded_workspace(self.git_dir)
        if recorded is not None and recorded != str(self.work_tree):
            raise SnapshotError("other_workspace", f"the snapshot repository {self.git_dir} belongs to "
                                                   f"the workspace {recorded}, not {self.work_tree}")
        if head_lost or (self.git_dir / repair.BUSY).exists() or (self.git_dir / "index.lock").exists():
            warnings += repair.repair(self._git, self.git_dir, self.work_tree, why="an interrupted snapshot")
            self._reader = StateReader(self._git)
            self._stat_cache = None
            with contextlib.suppress(OSError):
                (self.git_dir / repair.BUSY).unlink()
        self._checked = True
        self.warnings += warnings
        return warnings

    def _sync_excludes(self) -> None:
        lines = ["# written by amos: the user's ignore rules and amos's own folders"]
        lines += ignore.user_rules(self.work_tree, self._excludes)
        for folder in (*self._exclude, self.git_dir.parent, self.git_dir):
            if _inside(folder, self.work_tree) and folder != self.work_tree:
                lines.append(ignore.escape_path(folder.relative_to(self.work_tree).as_posix()) + "/")
        text = "\n".join(lines) + "\n"
        target = self.git_dir / "info" / "exclude"
        try:
            current = target.read_text(errors="replace")
        except OSError:
            current = None
        if current != text:
            target.parent.mkdir(exist_ok=True)
            target.write_text(text)

    def _rel(self, path: str | Path) -> str:
        """A workspace-relative POSIX path from what a caller passed."""
        raw = Path(path)
        if raw.is_absolute():
            try:
                raw = raw.relative_to(self.work_tree)
            except ValueError:
                # the workspace may have been given through a symbolic link
                try:
                    raw = raw.parent.resolve().relative_to(self.work_tree) / raw.name
                except ValueError:
                    raise SnapshotError("bad_path", f"{path} is outside the workspace {self.work_tree}") from None
        text = raw.as_posix()
        is_dir = str(path).endswith("/")
        parts = [p for p in text.split("/") if p not in ("", ".")]
        if not parts or ".." in parts or ".git" in parts:
            raise SnapshotError("bad_path", f"{str(path)!r} is not a path inside the workspace (relative, "
                                            "no '..', not in .git)")
        return "/".join(parts) + ("/" if is_dir else "")

    def _scanner(self) -> Scanner:
        return _CachingScanner(self)

    def _head(self) -> str | None:
        ref = self.git_dir / repair.BRANCH
        try:
            text = ref.read_text().strip()  # a loose ref: refs are never packed here (no gc)
            if len(text) == 40 and all(c in "0123456789abcdef" for c in text):
                return text
        except OSError:
            pass
        out = self._git.run(["rev-parse", "-q", "--verify", "HEAD"], ok=(0, 1)).strip()
        return out.decode() if out else None

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, message: str, *, include: Sequence[str | Path] = ()) -> Snapshot:
        """Record the workspace's current state.

        Args:
            message: one line saying why (``before step 3``).
            include: files to snapshot even when ignored: the paths the write tools are
                about to touch (relative to the workspace, or absolute inside it).

        Returns:
            The new snapshot, or the previous one when nothing changed (same id).

        Raises:
            SnapshotError: ``bad_path`` for an ``include`` path outside the workspace,
                ``busy``, ``git_failed`` (after one repair and retry).
        """
        paths = [rel for rel in (self._rel(p) for p in include) if not rel.endswith("/")]
        with self._op(write=True) as pending:
            return self._snapshot_locked(message, paths, pending)

    def _snapshot_locked(self, message: str, include: list[str], pending: list[str], *,
                         restore: bool = False) -> Snapshot:
        try:
            return self._take(message, include, pending, restore)
        except SnapshotError as exc:
            if exc.code != "git_failed":
                raise
            pending += repair.repair(self._git, self.git_dir, self.work_tree, why=f"an error ({exc})")
            self._reader = StateReader(self._git)
            self._stat_cache = None
            self.warnings += pending
            return self._take(message, include, pending, restore)

    def _watched(self, include: Sequence[str]) -> list[str]:
        """``include`` plus the paths the last snapshot was asked to include but did not find.

        A write tool's path is included before the write; if the file did not exist yet,
        it stays watched until it does (and is then kept by the index like any file), so
        an ignored file the agent creates is in the snapshot after the step.
        """
        head = self._head()
        carried = self._reader.commit(head)[3].absent if head else []
        return list(dict.fromkeys((*include, *carried)))

    def _take(self, message: str, include: list[str], pending: list[str], restore: bool) -> Snapshot:
        self._sync_excludes()
        cap = self._scanner().run(self._watched(include), restore=restore, defer_tree=True)
        notes = list(pending)
        if cap.exceeded:
            note = (f"snapshots: the workspace holds over {_size_text(self.max_workspace_bytes)} of files "
                    f"(checkpoints.max_workspace_bytes); {cap.left_out} new file(s) were left out of the "
                    "snapshot and cannot be restored")
            notes.append(note)
            self.warnings.append(note)
        head = self._head()
        line = cap.manifest.to_line()
        if head is not None and cap.tree:
            tree, _, _, manifest = self._reader.commit(head)
            if tree == cap.tree and manifest.to_line() == line:
                return self._reader.snapshot(head, tuple(notes))
        stamp = int(time.time())
        self._git.env["GIT_COMMITTER_DATE"] = self._git.env["GIT_AUTHOR_DATE"] = f"@{stamp} +0000"
        first = " ".join(message.split()) or "snapshot"
        body = f"{first}\n\n{line}\n".encode()
        if cap.tree:
            parents = ["-p", head] if head else []
            commit = self._git.run(["commit-tree", cap.tree, *parents, "-F", "-"], input=body).decode().strip()
            self._git.run(["update-ref", "HEAD", commit, head or "0" * 40])
        else:
            commit = commit_packed(self._git, body, head, stamp)
            cap.tree = self._index_tree = self._git.run(["write-tree"]).decode().strip()  # fills the tree cache
        created = datetime.fromtimestamp(stamp, UTC).isoformat().replace("+00:00", "Z")
        self._reader.remember(commit, cap.tree, created, first, cap.manifest)
        return Snapshot(commit, created, first, cap.manifest.files, cap.manifest.bytes,
                        tuple(cap.skipped), cap.exceeded, tuple(notes))

    def unkept(self) -> UnkeptScan:
        """A stat scan of the ignored files no snapshot keeps (:mod:`amos.snapshots.unkept`).

        Take one before and one after a step that may run anything; ``unkept.changes``
        of the two lists what changed there and cannot be restored.

        Raises:
            SnapshotError: git failed.
        """
        with self._op(write=False):
            self._sync_excludes()
            skip = [folder.relative_to(self.work_tree).as_posix() + "/"
                    for folder in (*self._exclude, self.git_dir.parent, self.git_dir)
                    if _inside(folder, self.work_tree) and folder != self.work_tree]
            return unkept.scan(self._git, str(self.work_tree), skip)

    def get(self, snapshot: SnapshotRef) -> Snapshot:
        """The record of a snapshot by id (or unique prefix). Raises ``SnapshotError('not_found')``."""
        with self._op(write=False) as pending:
            return self._reader.snapshot(self._reader.resolve(snapshot), tuple(pending))

    def head(self) -> Snapshot | None:
        """The newest snapshot, or None before the first."""
        with self._op(write=False):
            head = self._head()
            return self._reader.snapshot(head) if head else None

    def log(self, limit: int = 100) -> list[Snapshot]:
        """Up to ``limit`` snapshots, newest first."""
        with self._op(write=False):
            if self._head() is None:
                return []
            ids = self._git.run(["rev-list", f"--max-count={limit}", "HEAD"]).decode().split()
            return [self._reader.snapshot(c) for c in ids]

    # ------------------------------------------------------------------ comparing

    def _states(self, a: SnapshotRef, b: SnapshotRef | None) -> tuple[State, State, str | None]:
        sa = self._reader.load(self._reader.resolve(a))
        if b is not None:
            sb = self._reader.load(self._reader.resolve(b))
            return sa, sb, sb.id
        self._sync_excludes()
        cap = self._scanner().run(self._watched(()))
        return sa, State(None, cap.tree, cap.manifest, self._reader.listing(cap.tree)), self._head()

    def changed(self, a: SnapshotRef, b: SnapshotRef | None = None) -> list[FileChange]:
        """Paths that differ from snapshot ``a`` to snapshot ``b`` (None: the workspace now).

        ``a`` should be the older one. Includes deletions, permission-bit changes
        (``mode``), file <-> symbolic link (``type``) and empty folders (``logs/``).

        Returns:
            ``(path, change)`` tuples sorted by path.

        Raises:
            SnapshotError: ``not_found`` for an unknown id.
        """
        with self._op(write=b is None):
            sa, sb, until = self._states(a, b)
            return compare(self._reader, sa, sb, until=until)

    def diff(self, a: SnapshotRef, b: SnapshotRef | None = None, *, stat: bool = False,
             color: bool = False, paths: Sequence[str] | None = None) -> str:
        """A unified diff from ``a`` to ``b`` (None: the workspace now), as ``git diff`` prints it.

        What git cannot show (exact permission bits, empty folders, files too large to
        keep) follows as ``# ...`` lines; a file too large to keep on either side is
        never shown by git as created or deleted (one of its trees lacks it), only in
        such a line.

        Args:
            stat: a ``--stat`` summary instead of the full diff.
            color: ANSI colors (for a terminal); plain otherwise.
            paths: only these paths (e.g. the files the agent changed); None: all.
        """
        args = ["diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--color=always" if color else "--no-color"]
        text, notes = self._diff_parts(a, b, paths, [*args, "--stat"] if stat else args)
        if notes:
            text += ("\n" if text and not text.endswith("\n") else "") + "\n".join(notes) + "\n"
        return text

    def numstat(self, a: SnapshotRef, b: SnapshotRef | None = None, *, paths: Sequence[str] | None = None
                ) -> tuple[list[tuple[str, str, str]], list[str]]:
        """``git diff --numstat`` rows ``(added, deleted, path)`` (``-`` for binary) and the
        ``# ...`` notes of :meth:`diff`, for one ``--stat`` block over many diffs."""
        text, notes = self._diff_parts(a, b, paths, ["diff", "--no-ext-diff", "--no-textconv", "--no-renames",
                                                    "--numstat", "-z"])
        rows = []
        for item in text.split("\0"):
            if item.count("\t") >= 2:
                added, deleted, path = item.split("\t", 2)
                rows.append((added, deleted, path))
        return rows, notes

    def _diff_parts(self, a: SnapshotRef, b: SnapshotRef | None, paths: Sequence[str] | None,
                    args: list[str]) -> tuple[str, list[str]]:
        only = None if paths is None else [self._rel(p) for p in paths]
        with self._op(write=b is None):
            if only is not None and not only:
                return "", []
            sa, sb, until = self._states(a, b)
            changed = [c for c in compare(self._reader, sa, sb, until=until) if only is None or c.path in only]
            big = {p: (sa.manifest.skipped.get(p) or sb.manifest.skipped.get(p)) for p, _ in changed
                   if p in sa.manifest.skipped or p in sb.manifest.skipped}
            shown = [p for p in (only if only is not None else [c.path for c in changed])
                     if p not in big and not p.endswith("/")]
            text = ""
            if shown:
                text = self._git.run([*args, sa.tree, sb.tree, "--", *shown]).decode("utf-8", errors="replace")
            notes = []
            for path, change in changed:
                if path in big:
                    was = "was" if path in sa.manifest.skipped else "is now"
                    notes.append(f"# {change}: {path} ({was} {big[path][0]}; no copy kept, so no line diff)")
                elif path.endswith("/"):
                    notes.append(f"# folder {change}: {path}" if change != "mode" else
                                 f"# mode {sa.manifest.folder_perms(path):04o} -> "
                                 f"{sb.manifest.folder_perms(path):04o}: {path}")
                elif sa.files.get(path) == sb.files.get(path) and change == "mode":
                    exe = sa.files[path][0] == "100755"
                    notes.append(f"# mode {sa.manifest.file_perms(path, exe):04o} -> "
                                 f"{sb.manifest.file_perms(path, exe):04o}: {path}")
                elif sa.files.get(path) == sb.files.get(path):
                    notes.append(f"# {change} (not kept in snapshots, see skipped files): {path}")
            return text, notes

    def agent_changes(self, steps: Sequence[tuple[SnapshotRef, SnapshotRef]]) -> list[AgentChange]:
        """What the agent changed over ``steps``, with the snapshots to undo each path.

        Args:
            steps: ``(before, after)`` snapshot pairs of the steps, oldest first: ``before``
                taken before the step's first change, ``after`` when its tools finished.

        Returns:
            One :class:`AgentChange` per path whose state after the last step that changed
            it differs from before the first, sorted by path.
        """
        with self._op(write=False):
            pairs = [(self._reader.resolve(b), self._reader.resolve(a)) for b, a in steps]
            first: dict[str, str] = {}
            last: dict[str, str] = {}
            touched: dict[str, list[int]] = {}
            for i, (before, after) in enumerate(pairs):
                for path, _ in compare(self._reader, self._reader.load(before), self._reader.load(after),
                                       until=after):
                    first.setdefault(path, before)
                    last[path] = after
                    touched.setdefault(path, []).append(i)
            outside: set[str] = set()
            for i in range(len(pairs) - 1):
                gap = [p for p, _ in compare(self._reader, self._reader.load(pairs[i][1]),
                                             self._reader.load(pairs[i + 1][0]), until=pairs[i + 1][0])]
                outside |= {p for p in gap if p in touched and touched[p][0] <= i < touched[p][-1]}
            out = []
            groups: dict[tuple[str, str], list[str]] = {}
            for path in first:
                groups.setdefault((first[path], last[path]), []).append(path)
            for (before, after), paths in groups.items():
                net = {p: c for p, c in compare(self._reader, self._reader.load(before),
                                                self._reader.load(after), until=after)}
                for path in paths:
                    if path in net:
                        out.append(AgentChange(path, net[path], before, after, path in outside))
            return sorted(out, key=lambda c: c.path)

    def rewind_changes(self, target: SnapshotRef | None, steps: Sequence[tuple[SnapshotRef, SnapshotRef]],
                       restores: Sequence[bool] = ()) -> list[AgentChange]:
        """What going back to ``target`` puts back: each path the entries ``steps`` changed, as ``target`` holds it.

        The paths are those :meth:`agent_changes` finds over ``steps`` (the agent's steps
        and amos's own restores since a checkpoint, oldest first). Each goes back to its
        state in ``target`` (the checkpoint's snapshot), not to its state before the
        first entry: after an ``/undo --force`` the undo's "before" holds what it
        overwrote, which is not what the checkpoint held. A path ``target`` does not know
        (ignored then) goes back to its state before the first entry, as before. A path
        that ``target`` already holds as the entries left it is not touched. When the
        first entry touching a path is an agent step (``restores[i]`` False) whose state
        before differs from ``target``, something else changed the path after the
        checkpoint and before the agent: it is marked ``outside`` (a conflict unless forced).

        Args:
            target: the checkpoint's snapshot, or None (then this is :meth:`agent_changes`).
            steps: ``(before, after)`` pairs, oldest first.
            restores: per pair, True when it is a restore amos made (``/undo``, a rewind).

        Raises:
            SnapshotError: ``not_found`` for an unknown id.
        """
        from amos.snapshots.state import change_between, entries

        changes = self.agent_changes(steps)
        if target is None or not changes:
            return changes
        with self._op(write=False):
            goal = self._reader.resolve(target)
            firsts = [self._reader.resolve(b) for b, _ in steps]
            until = self._head()
            paths = [c.path for c in changes]
            want = entries(self._reader, self._reader.load(goal), paths, until=until)
            had: dict[str, object] = {}
            left: dict[str, object] = {}
            for attr, found in (("before", had), ("after", left)):
                groups: dict[str, list[str]] = {}
                for c in changes:
                    groups.setdefault(getattr(c, attr), []).append(c.path)
                for commit, group in groups.items():
                    found.update(entries(self._reader, self._reader.load(commit), group, until=until))
            out = []
            for c in changes:
                goal_entry = want[c.path]
                if goal_entry is None:  # the checkpoint's snapshot does not know it: back to before the agent
                    out.append(c)
                    continue
                if goal_entry == left[c.path]:
                    continue  # already as the checkpoint had it once the entries were done
                index = firsts.index(c.before) if c.before in firsts else -1
                by_agent = index >= 0 and not (restores[index] if index < len(restores) else False)
                outside = c.outside or (by_agent and had[c.path] != goal_entry)
                change = change_between(goal_entry, left[c.path]) or c.change
                out.append(AgentChange(c.path, change, goal, c.after, outside))
            return out

    # ------------------------------------------------------------------ restoring

    def conflicts(self, paths: Sequence[str], expected: SnapshotRef | Mapping[str, SnapshotRef]) -> list[Conflict]:
        """Which ``paths`` are no longer as in ``expected`` (changed by the user or another program).

        Args:
            paths: workspace-relative paths.
            expected: the snapshot holding the agent's version, or one per path.
        """
        from amos.snapshots.restore import find_conflicts

        rels = [self._rel(p) for p in paths]
        with self._op(write=True):
            return find_conflicts(self, rels, self._expected_map(rels, expected))

    def _expected_map(self, paths: list[str], expected: SnapshotRef | Mapping[str, SnapshotRef] | None
                      ) -> dict[str, str] | None:
        if expected is None:
            return None
        if isinstance(expected, Mapping):
            given = {self._rel(k): v for k, v in expected.items()}
            missing = [p for p in paths if p not in given]
            if missing:
                raise SnapshotError("bad_path", f"no expected snapshot for {missing[0]!r}")
            return {p: self._reader.resolve(given[p]) for p in paths}
        resolved = self._reader.resolve(expected)
        return {p: resolved for p in paths}

    def restore(self, snapshot: SnapshotRef, paths: Sequence[str], *,
                expected: SnapshotRef | Mapping[str, SnapshotRef] | None = None,
                force: bool = False) -> RestoreResult:
        """Put ``paths`` back exactly as in ``snapshot``; touch nothing else.

        First snapshots the current state (``RestoreResult.before``, so the restore can
        itself be undone). A path that did not exist in ``snapshot`` is deleted (and the
        folders that only it needed); a path the snapshot has no record of is left alone
        and listed as unavailable.

        Args:
            snapshot: the state to go back to.
            paths: workspace-relative files (and ``/``-terminated empty folders).
            expected: the snapshot with the agent's version of the paths (or one per path);
                paths that differ from it now are conflicts, left alone unless ``force``.
            force: restore conflicting paths too.

        Raises:
            SnapshotError: ``not_found``, ``bad_path``, ``busy``.
        """
        from amos.snapshots.restore import restore_paths

        rels = list(dict.fromkeys(self._rel(p) for p in paths))
        with self._op(write=True) as pending:
            target = self._reader.resolve(snapshot)
            return restore_paths(self, {p: target for p in rels}, self._expected_map(rels, expected),
                                 force, pending)

    def revert(self, changes: Sequence[AgentChange], *, force: bool = False) -> RestoreResult:
        """Undo :meth:`agent_changes`: each path back to its ``before``, expected as its ``after``.

        This is /undo (the changes of the last step that changed files) and the files
        half of /rewind (the changes of every step since a checkpoint).
        """
        from amos.snapshots.restore import restore_paths

        with self._op(write=True) as pending:
            targets = {self._rel(c.path): self._reader.resolve(c.before) for c in changes}
            expected = {self._rel(c.path): self._reader.resolve(c.after) for c in changes}
            return restore_paths(self, targets, expected, force, pending)

    def delete(self) -> None:
        """Remove the shadow repository, its lock file and any set-aside broken copy."""
        self._lock.acquire()
        try:
            for path in (self.git_dir, self.git_dir.with_name(self.git_dir.name + ".broken")):
                shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(OSError):
                self._lock.path.unlink()
        finally:
            self._lock.release()
        self._checked = False


class _CachingScanner(Scanner):
    """A Scanner that takes the repository's stat cache and hands the new one back."""

    def __init__(self, repo: ShadowRepo):
        super().__init__(repo._git, repo.work_tree, repo.max_file_bytes, repo.max_workspace_bytes,
                         refresh=repo._stat_cache is None, cache=repo._stat_cache, tree=repo._index_tree)
        self.big_nested = repo._big_nested
        self._repo = repo

    def run(self, include, *, restore: bool = False, defer_tree: bool = False):
        self._repo._stat_cache = None  # a failure part-way leaves it unknown
        capture = super().run(include, restore=restore, defer_tree=defer_tree)
        self._repo._stat_cache = self.cache
        self._repo._index_tree = self.tree
        return capture
