"""Undo, rewind and diff over a session's file history (issue 20: /undo, /rewind, /diff).

The session's :class:`~amos.sessions.FileHistory` lists, oldest first, every step that
changed files (the snapshot taken before its first change and the one taken when its
tools finished) and every restore amos made. A conversation checkpoint records where
that list stood (``CheckpointInfo.file_seq``). From those two facts:

- ``/undo`` puts back the files of the newest step not undone yet;
- a rewind to checkpoint N puts back every file any entry from ``file_seq`` on changed
  exactly as checkpoint N's snapshot holds it (entries of both kinds: a rewind after an
  ``/undo`` brings the undone change back when the checkpoint was taken before the undo,
  and after an ``/undo --force`` it brings back the checkpoint's bytes, not what the
  undo overwrote);
- a diff shows, for the files those entries changed, the state then against the
  workspace now.

Nothing else is touched: a file no entry names is never restored. Before anything is
written, every file that is no longer as the agent (or the last restore) left it — the
user or another program changed it since — is a conflict, and the whole restore is
refused unless ``force``; the library snapshots the current state first, so every
restore can itself be undone. These functions run git (through
:class:`~amos.snapshots.ShadowRepo`): call them off the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from amos.errors import SnapshotError
from amos.sessions import FileHistory, FileStep

if TYPE_CHECKING:
    from amos.checkpoints import CheckpointInfo
    from amos.snapshots import AgentChange, ShadowRepo

_PUT_BACK = {
    "added": "removed again (the agent had created it)",
    "deleted": "brought back (the agent had deleted it)",
    "modified": "content put back",
    "mode": "permissions put back",
    "type": "put back (the agent had replaced it by another kind of file)",
}
_INVERSE = {"added": "deleted", "deleted": "added"}
FILE_WORDS = {"added": "created", "deleted": "deleted", "modified": "modified", "mode": "permissions changed",
              "type": "replaced by another kind of file"}


def failure(code: str, message: str, exit_code: int = 1) -> SnapshotError:
    """A :class:`SnapshotError` for a refusal that is not bad input (exit 1 by default)."""
    error = SnapshotError(code, message)
    error.exit_code = exit_code
    return error


@dataclass(frozen=True)
class FilesRestored:
    """What ``/undo`` or a rewind of the files did, or why it did nothing.

    Attributes:
        action: ``undo`` or ``rewind``.
        restored: paths written, deleted or created back (workspace-relative).
        changes: ``{"path", "change"}`` of what the put-back undid (the agent's change).
        conflicts: ``(path, reason)`` of files changed after the agent's change; with
            ``refused`` nothing at all was restored, with ``forced`` they were overwritten.
        unavailable: ``(path, reason)`` the snapshots hold no copy of (left alone).
        failed: ``(path, error)`` that could not be written.
        refused: True when conflicts stopped the restore (nothing changed).
        forced: conflicting files were overwritten (``--force``).
        step: the step undone (``undo``).
        execution_id: the execution of that step (``undo``).
        checkpoint: the checkpoint gone back to (``rewind``).
        undo_snapshot: the snapshot taken just before restoring (it holds what the
            restore overwrote), or None when nothing was written.
        after_snapshot: the snapshot taken just after restoring, or None.
        interrupted: the step undone was cut short (amos was killed during it), so what
            it changed was taken as everything that differed when amos next opened the
            session.
        notes: what the snapshot repository said while doing it (a repair), one line each.
    """

    action: str
    restored: tuple[str, ...] = ()
    changes: tuple[dict[str, str], ...] = ()
    conflicts: tuple[tuple[str, str], ...] = ()
    unavailable: tuple[tuple[str, str], ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    refused: bool = False
    forced: bool = False
    step: int | None = None
    execution_id: str | None = None
    checkpoint: int | None = None
    undo_snapshot: str | None = None
    after_snapshot: str | None = None
    interrupted: bool = False
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Nothing was refused and nothing failed."""
        return not self.refused and not self.failed

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` shape: lists of paths and ``{"path", "reason"}`` rows."""
        def rows(pairs: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
            return [{"path": p, "reason": r} for p, r in pairs]

        return {"action": self.action, "restored": list(self.restored), "changes": list(self.changes),
                "conflicts": rows(self.conflicts), "unavailable": rows(self.unavailable),
                "failed": rows(self.failed), "refused": self.refused, "forced": self.forced, "step": self.step,
                "execution_id": self.execution_id, "checkpoint": self.checkpoint,
                "undo_snapshot": self.undo_snapshot, "after_snapshot": self.after_snapshot,
                "interrupted": self.interrupted, "notes": list(self.notes)}


@dataclass(frozen=True)
class FileDiffReport:
    """What ``/diff`` and ``amos diff`` show.

    Attributes:
        text: a unified diff (or ``--stat`` summary) as git prints it; "" when nothing differs.
        files: ``{"path", "change"}`` of the files the agent changed in that span.
        since: what the diff starts from, for people (``before the latest run that
            changed files``, ``checkpoint 3``).
        stat: True for a ``--stat`` summary.
    """

    text: str
    files: list[dict[str, str]] = field(default_factory=list)
    since: str = ""
    stat: bool = False

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` shape."""
        return {"since": self.since, "files": self.files, "stat": self.stat, "diff": self.text}

    def masked(self, mask: Callable[[str], str]) -> FileDiffReport:
        """This report with ``mask`` applied to the diff and the file names: a key the agent
        wrote into a file or a file name is never shown (the snapshot keeps the bytes)."""
        return replace(self, text=mask(self.text), files=masked_rows(self.files, mask))


def masked_rows(rows: Sequence[dict[str, str]], mask: Callable[[str], str]) -> list[dict[str, str]]:
    """``{"path", …}`` rows (``files_changed``, a diff's files) with ``mask`` applied to each path."""
    return [{**row, "path": mask(row["path"])} if isinstance(row.get("path"), str) else row for row in rows]


# ---------------------------------------------------------------------------- reading the history


def last_undoable(history: FileHistory) -> FileStep | None:
    """The newest ``step`` entry that changed files and was not undone, or None."""
    return next((e for e in reversed(history.steps)
                 if e.kind == "step" and not e.undone and (e.files or e.unrestorable) and e.after is not None), None)


def entries_since(history: FileHistory, checkpoint: CheckpointInfo) -> list[FileStep]:
    """The entries recorded after ``checkpoint`` was taken, oldest first.

    Raises:
        SnapshotError: ``no_file_record`` (exit 1) for a checkpoint taken before file
            snapshots existed, ``pruned`` (exit 1) when entries after it were dropped.
    """
    if checkpoint.file_seq is None:
        raise failure("no_file_record", f"checkpoint {checkpoint.number} was taken before amos recorded file "
                                        "snapshots, so its files cannot be restored or compared")
    found = [e for e in history.steps if e.seq >= checkpoint.file_seq and e.after is not None]
    oldest = history.steps[0].seq if history.steps else history.next_seq
    if checkpoint.file_seq < oldest and history.next_seq > checkpoint.file_seq:
        raise failure("pruned", f"the file history after checkpoint {checkpoint.number} is older than the "
                                f"{len(history.steps)} entries a session keeps; its files cannot be restored")
    return found


def latest_run_steps(history: FileHistory) -> list[FileStep]:
    """The ``step`` entries of the newest execution that changed files, oldest first."""
    last = next((e for e in reversed(history.steps) if e.kind == "step" and e.files and e.after is not None), None)
    if last is None:
        return []
    return [e for e in history.steps
            if e.kind == "step" and e.execution_id == last.execution_id and e.after is not None]


def change_rows(changes: Sequence[AgentChange]) -> list[dict[str, str]]:
    """``{"path", "change"}`` rows of agent changes (receipts, ``--json``)."""
    return [{"path": c.path, "change": c.change} for c in changes]


def run_changes(repo: ShadowRepo, history: FileHistory, execution_id: str) -> list[dict[str, str]]:
    """What the steps of one execution changed, net, as ``{"path", "change"}`` rows.

    Raises:
        SnapshotError: the repository cannot be read.
    """
    steps = [e for e in history.steps if e.kind == "step" and e.execution_id == execution_id and e.after is not None]
    pairs = [(e.before, e.after) for e in steps]
    rows = change_rows(repo.agent_changes(pairs)) if pairs else []
    return rows + unrestorable_rows(steps, {r["path"] for r in rows})


def unrestorable_rows(entries: Sequence[FileStep], known: set[str] | None = None) -> list[dict[str, str]]:
    """The ``unrestorable`` rows of ``entries`` (ignored files a command changed), each path
    once, newest row winning, paths in ``known`` left out."""
    found: dict[str, dict[str, str]] = {}
    for entry in entries:
        for row in entry.unrestorable:
            if row["path"] not in (known or set()):
                found[row["path"]] = dict(row)
    return [found[p] for p in sorted(found)]


def _noted(repo: ShadowRepo, seen: int, done: FilesRestored) -> FilesRestored:
    """``done`` with what the repository warned of since ``seen`` (a repair) as its notes."""
    from dataclasses import replace

    notes = tuple(dict.fromkeys(repo.warnings[seen:]))
    return replace(done, notes=done.notes + notes) if notes else done


def _unavailable(entries: Sequence[FileStep], done: FilesRestored) -> FilesRestored:
    """``done`` with the ignored files ``entries`` changed (no copy kept) among ``unavailable``."""
    from dataclasses import replace

    have = {p for p, _ in done.unavailable} | set(done.restored)
    more = tuple((r["path"], f"{FILE_WORDS.get(r['change'], r['change'])} by a command; "
                             f"{r.get('not_restorable') or 'no copy was kept'}")
                 for r in unrestorable_rows(entries) if r["path"] not in have)
    return replace(done, unavailable=done.unavailable + more) if more else done


def settle_open_steps(repo: ShadowRepo, history: FileHistory) -> list[FileStep]:
    """Close the steps amos was killed during (``after`` None): their ``after`` is a snapshot taken now.

    Call it only when no step of this session is running (between runs, or before a
    run's first snapshot). What such a step changed is everything that differs from the
    snapshot before it, so a change made between the crash and now counts as the
    step's; the entry is marked ``interrupted`` and ``/undo`` says so.

    Returns:
        The entries closed (changed in place in ``history``).

    Raises:
        SnapshotError: the repository failed.
    """
    settled = []
    for entry in history.open_steps():
        snap = repo.snapshot(f"step {entry.step}: after (amos was stopped during the step)")
        try:
            entry.files = change_rows(repo.agent_changes([(entry.before, snap.id)]))
        except SnapshotError as exc:
            if exc.code != "not_found":
                raise
            entry.files = []  # its snapshot before is gone with a recreated repository
        entry.after, entry.interrupted = snap.id, True
        history.head = snap.id
        settled.append(entry)
    return settled


# ---------------------------------------------------------------------------- restoring


def _one_per_path(*groups: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """``(path, reason)`` rows, one per path (the first group's reason wins), sorted by path."""
    found: dict[str, str] = {}
    for group in groups:
        for path, reason in group:
            found.setdefault(path, reason)
    return tuple(sorted(found.items()))


def _put_back(repo: ShadowRepo, changes: Sequence[AgentChange], force: bool, action: str,
              **facts: Any) -> FilesRestored:
    """Restore ``changes`` (each path to its ``before``) unless a path changed since its ``after``."""
    rows = tuple({"path": c.path, "change": c.change} for c in changes)
    if not changes:
        return FilesRestored(action, **facts)
    outside = tuple((c.path, "changed by something other than the agent since the checkpoint, before or "
                             "between the agent's changes") for c in changes if c.outside)
    if not force:
        found = repo.conflicts([c.path for c in changes], {c.path: c.after for c in changes})
        conflicts = _one_per_path([(c.path, c.reason) for c in found], outside)
        if conflicts:
            return FilesRestored(action, changes=rows, conflicts=conflicts, refused=True, **facts)
    result = repo.revert(changes, force=force)
    conflicts = _one_per_path([(c.path, c.reason) for c in result.conflicts], outside if force else ())
    return FilesRestored(
        action, restored=result.restored, changes=rows, conflicts=conflicts,
        unavailable=tuple((c.path, c.reason) for c in result.unavailable),
        failed=tuple((c.path, c.reason) for c in result.failed), forced=force and bool(conflicts),
        undo_snapshot=result.before.id, after_snapshot=result.after.id, **facts)


def _record(history: FileHistory, done: FilesRestored, kind: str, undoes: int | None) -> None:
    """Add the restore to the history (its before/after snapshots) when it wrote anything."""
    if done.undo_snapshot is None or done.after_snapshot is None or not done.restored:
        return
    by_path = {row["path"]: row["change"] for row in done.changes}
    files = [{"path": p, "change": _INVERSE.get(by_path.get(p, "modified"), by_path.get(p, "modified"))}
             for p in done.restored]
    history.add(FileStep(seq=0, kind=kind, before=done.undo_snapshot, after=done.after_snapshot, files=files,
                         undoes=undoes))


def undo_files(repo: ShadowRepo, history: FileHistory, *, force: bool = False) -> FilesRestored:
    """``/undo``: put back the files the newest step not yet undone changed.

    On success the step is marked undone, the restore is added to ``history`` and
    ``history.note`` tells the next model request which files were put back.

    Raises:
        SnapshotError: ``nothing_to_undo`` (exit 1); the repository failed.
    """
    seen = len(repo.warnings)
    settle_open_steps(repo, history)
    step = last_undoable(history)
    if step is None:
        raise failure("nothing_to_undo", "nothing to undo: no step of this session changed files that is not "
                                         "undone already")
    changes = repo.agent_changes([(step.before, step.after)])
    done = _put_back(repo, changes, force, "undo", step=step.step, execution_id=step.execution_id,
                     interrupted=step.interrupted)
    done = _noted(repo, seen, done)
    if done.refused:
        return done
    done = _unavailable([step], done)
    step.undone = True
    _record(history, done, "undo", step.seq)
    if done.restored:
        history.note = restore_note(done, f"/undo (step {step.step} of an earlier run)")
    return done


def rewind_files(repo: ShadowRepo, history: FileHistory, checkpoint: CheckpointInfo,
                 then: FileHistory | None, *, force: bool = False) -> FilesRestored:
    """Put back every file changed after ``checkpoint`` exactly as the checkpoint's snapshot
    holds it (``/rewind N --files``; :meth:`ShadowRepo.rewind_changes`).

    Args:
        repo: the session's shadow repository.
        history: the session's file history now (updated here).
        checkpoint: the checkpoint to go back to.
        then: the file history the checkpoint holds (which steps were undone then), or None.
        force: overwrite files changed after the agent's change.

    Raises:
        SnapshotError: ``no_file_record`` / ``pruned`` (exit 1); the repository failed.
    """
    seen = len(repo.warnings)
    entries = entries_since(history, checkpoint)
    pairs = [(e.before, e.after) for e in entries]
    target = checkpoint.snapshot
    if target is not None:
        try:
            repo.get(target)
        except SnapshotError as exc:
            if exc.code != "not_found":
                raise
            target = None  # gone with a recreated repository: back to before the agent's changes
    changes = repo.rewind_changes(target, pairs, [e.kind != "step" for e in entries]) if pairs else []
    done = _noted(repo, seen, _put_back(repo, changes, force, "rewind", checkpoint=checkpoint.number))
    if done.refused:
        return done
    done = _unavailable([e for e in entries if e.kind == "step" and not e.undone], done)
    undone_then = {e.seq: e.undone for e in then.steps} if then is not None else {}
    for entry in history.steps:
        if entry.kind != "step":
            continue
        if entry.seq >= (checkpoint.file_seq or 0):
            entry.undone = True
        elif entry.seq in undone_then:
            entry.undone = undone_then[entry.seq]
    _record(history, done, "rewind", checkpoint.number)
    if done.restored:
        history.note = restore_note(done, f"a rewind to checkpoint {checkpoint.number}")
    return done


def restore_note(done: FilesRestored, what: str) -> str:
    """The host note the next model request carries after files were put back."""
    by_path = {row["path"]: row["change"] for row in done.changes}
    shown = [f"{p} ({_PUT_BACK.get(by_path.get(p, ''), 'put back')})" for p in done.restored[:40]]
    more = f" and {len(done.restored) - 40} more" if len(done.restored) > 40 else ""
    return (f"[amos host note] Before this request the user ran {what}: these files were put back as they "
            f"were before the agent changed them: {', '.join(shown)}{more}. What earlier tool results showed "
            "of them is out of date; read them again before relying on it.")


# ---------------------------------------------------------------------------- comparing


def diff_files(repo: ShadowRepo, entries: Sequence[FileStep], *, since: str, stat: bool = False,
               color: bool = False) -> FileDiffReport:
    """The diff, for every file ``entries`` changed, from its state before them to the workspace now.

    Files whose state before comes from different snapshots are diffed group by group;
    ``stat`` joins the groups into one ``git diff --stat``-like block.

    Raises:
        SnapshotError: the repository cannot be read.
    """
    pairs = [(e.before, e.after) for e in entries if e.after is not None]
    changes = repo.agent_changes(pairs) if pairs else []
    groups: dict[str, list[str]] = {}
    for change in changes:
        groups.setdefault(change.before, []).append(change.path)
    if stat:
        rows: list[tuple[str, str, str]] = []
        notes: list[str] = []
        for before, paths in groups.items():
            found, more = repo.numstat(before, None, paths=paths)
            rows += found
            notes += more
        text = stat_block(sorted(rows, key=lambda r: r[2]), notes)
    else:
        text = "".join(t for t in (repo.diff(before, None, color=color, paths=paths) for before, paths in groups.items())
                       if t)
    return FileDiffReport(text=text, files=change_rows(changes), since=since, stat=stat)


def stat_block(rows: Sequence[tuple[str, str, str]], notes: Sequence[str] = (), width: int = 80) -> str:
    """One ``git diff --stat``-like block from ``--numstat`` rows ``(added, deleted, path)``.

    Binary files (``-``) show ``Bin``; the bars are scaled to fit ``width`` columns; the
    ``# ...`` notes (permissions, files too large to keep) follow the summary line.
    """
    if not rows and not notes:
        return ""
    lines = []
    if rows:
        name_w = max(len(path) for _, _, path in rows)
        counts = [(int(a) + int(d)) if a != "-" else None for a, d, _ in rows]
        num_w = max(len(str(c)) if c is not None else 3 for c in counts)
        room = max(10, width - name_w - num_w - 5)
        most = max((c for c in counts if c is not None), default=0)
        for (a, d, path), total in zip(rows, counts, strict=True):
            if total is None:
                lines.append(f" {path:<{name_w}} | {'Bin':>{num_w}}")
                continue
            plus, minus = int(a), int(d)
            if most > room:
                plus, minus = (-(-plus * room // most) if plus else 0), (-(-minus * room // most) if minus else 0)
            lines.append(f" {path:<{name_w}} | {total:>{num_w}} {'+' * plus}{'-' * minus}".rstrip())
        added = sum(int(a) for a, _, _ in rows if a != "-")
        deleted = sum(int(d) for _, d, _ in rows if d != "-")
        summary = f" {len(rows)} file{'s' if len(rows) != 1 else ''} changed"
        if added or not deleted:
            summary += f", {added} insertion{'s' if added != 1 else ''}(+)"
        if deleted or not added:
            summary += f", {deleted} deletion{'s' if deleted != 1 else ''}(-)"
        lines.append(summary)
    return "\n".join([*lines, *notes]) + "\n"


__all__ = ["FileDiffReport", "FilesRestored", "diff_files", "entries_since", "latest_run_steps", "last_undoable",
           "restore_note", "rewind_files", "run_changes", "settle_open_steps", "stat_block", "undo_files",
           "unrestorable_rows"]
