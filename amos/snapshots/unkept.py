"""Ignored files a command may change: found by a stat scan, listed, never copied (issue 20).

A snapshot leaves out what the ignore rules exclude (``.env``, ``build.log``,
``node_modules/``), unless a write tool touches the path. ``run_command`` can change
such files too. Copying every ignored file before every command would put secrets
(``.env``) and build trees into the shadow repository, so amos does not; instead, around
a step that may run anything, it compares what ``lstat`` says of the ignored files
before and after (size, modification time, permission bits, kind), and lists what
changed as *changed but not restorable*: in the receipt, ``--json`` and ``/undo``, so
an undo never claims to have put back everything when it has not.

The scan is bounded: ignored files git names one by one, and the files inside ignored
folders up to :data:`MAX_SCANNED` entries in all; a change inside an ignored folder is
reported once for the folder (``node_modules/``: 12 files changed), not per file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from dataclasses import dataclass, field

from amos.snapshots.git import Git, split_z

MAX_SCANNED = 20000
"""Directory entries looked at inside ignored folders, per scan."""
REASON = "ignored by the ignore rules, so no copy was kept"
"""Why such a file is not restorable, for people."""

Stat = tuple[int, int, int, int]
"""``(kind and permission bits, size, mtime_ns, inode)``."""


@dataclass
class UnkeptScan:
    """What the ignored files looked like at one moment.

    Attributes:
        files: path -> :data:`Stat` of ignored files git listed one by one.
        folders: ignored folder (ending ``/``) -> {path inside -> :data:`Stat`}.
        truncated: the folders held more than :data:`MAX_SCANNED` entries; the rest
            was not looked at.
        cut: the folder the scan stopped in (its listing is incomplete), or None.
    """

    files: dict[str, Stat] = field(default_factory=dict)
    folders: dict[str, dict[str, Stat]] = field(default_factory=dict)
    truncated: bool = False
    cut: str | None = None


def _stat(full: str) -> Stat | None:
    try:
        st = os.lstat(full)
    except OSError:
        return None
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)


def scan(git: Git, root: str, skip: Collection[str] = ()) -> UnkeptScan:
    """Stat every ignored file of the workspace (bounded; see the module docstring).

    Args:
        git: the shadow repository's git (its ``info/exclude`` holds the user's rules).
        root: the workspace folder.
        skip: workspace-relative folders (ending ``/``) never looked at (amos's own).

    Raises:
        SnapshotError: git failed.
    """
    out = UnkeptScan()
    listing = git.run(["ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory"])
    budget = MAX_SCANNED
    for raw in split_z(listing):
        path = os.fsdecode(raw)
        if any(path == s or path.startswith(s) for s in skip):
            continue
        if not path.endswith("/"):
            found = _stat(os.path.join(root, path))
            if found is not None:
                out.files[path] = found
            continue
        inside: dict[str, Stat] = {}
        for current, dirnames, filenames in os.walk(os.path.join(root, path)):
            dirnames[:] = [d for d in dirnames if d != ".git"]
            rel = os.path.relpath(current, root).replace(os.sep, "/")
            for name in filenames:
                found = _stat(os.path.join(current, name))
                if found is not None:
                    inside[f"{rel}/{name}"] = found
            budget -= len(dirnames) + len(filenames)
            if budget <= 0:
                out.truncated, out.cut = True, path
                break
        out.folders[path] = inside
        if budget <= 0:
            break
    return out


def _change(old: Stat | None, new: Stat | None) -> str | None:
    if old == new:
        return None
    if old is None:
        return "added"
    if new is None:
        return "deleted"
    if stat.S_IFMT(old[0]) != stat.S_IFMT(new[0]):
        return "type"
    if old[1:3] != new[1:3]:
        return "modified"
    return "mode" if old[0] != new[0] else None


def changes(before: UnkeptScan, after: UnkeptScan) -> list[dict[str, str]]:
    """What changed among the ignored files from ``before`` to ``after``.

    Returns:
        ``{"path", "change", "not_restorable"}`` rows sorted by path: one per ignored
        file, one per ignored folder with changes inside (``change`` ``modified``, the
        reason naming how many files changed).
    """
    rows: list[dict[str, str]] = []
    for path in sorted(set(before.files) | set(after.files)):
        change = _change(before.files.get(path), after.files.get(path))
        if change is not None:
            rows.append({"path": path, "change": change, "not_restorable": REASON})
    for folder in sorted(set(before.folders) | set(after.folders)):
        if folder in (before.cut, after.cut):
            continue  # listed only in part: no honest comparison
        old, new = before.folders.get(folder, {}), after.folders.get(folder, {})
        if folder not in before.folders and not before.truncated:
            rows.append({"path": folder, "change": "added", "not_restorable": f"{REASON} ({len(new)} file(s) inside)"})
            continue
        if folder not in after.folders and not after.truncated:
            rows.append({"path": folder, "change": "deleted",
                         "not_restorable": f"{REASON} ({len(old)} file(s) were inside)"})
            continue
        changed = sum(1 for p in set(old) | set(new) if _change(old.get(p), new.get(p)) is not None)
        if changed:
            rows.append({"path": folder, "change": "modified",
                         "not_restorable": f"{REASON} ({changed} file(s) inside changed)"})
    return rows
