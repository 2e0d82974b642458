"""A digest of the workspace's files: did a run change anything? (issue 16 "Check baselines").

The digest covers every file's path, size and content, except what a check run
itself leaves behind (caches, bytecode) and what the workspace's ``.gitignore`` files
ignore — so running the tests and saying "done" changes nothing, while editing,
adding or deleting a tracked file does. Tool outcomes never count. Files over
:data:`CONTENT_LIMIT_BYTES` are represented by size and modification time instead of
their content, and the walk stops after :data:`MAX_FILES` files (the digest then says
so, and two truncated digests are never taken to mean "unchanged").
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

ALWAYS_SKIPPED = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox",
                            ".nox", ".hypothesis", ".venv", "venv", "node_modules", ".coverage"})
"""Folder (and file) names never digested: version control, caches, environments."""

SKIPPED_SUFFIXES = (".pyc", ".pyo")

CONTENT_LIMIT_BYTES = 8 * 1024 * 1024
"""Files larger than this are digested by size and mtime, not content (bytes)."""

MAX_FILES = 20_000
"""Most files digested; beyond, the digest is marked truncated."""


@dataclass(frozen=True)
class WorkspaceDigest:
    """The digest of a workspace at one moment.

    Attributes:
        sha256: digest of the sorted (path, size, content digest) entries.
        files: files digested.
        truncated: the walk stopped at :data:`MAX_FILES`.
    """

    sha256: str
    files: int
    truncated: bool = False

    def same_as(self, other: WorkspaceDigest | None) -> bool:
        """True only when both digests are complete and equal."""
        return other is not None and not self.truncated and not other.truncated and self.sha256 == other.sha256


def _ignore_spec(root: Path):
    """The workspace's top-level ``.gitignore`` rules (pathspec, gitignore syntax), or None."""
    try:
        text = (root / ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    import pathspec

    return pathspec.PathSpec.from_lines("gitwildmatch", text.splitlines())


def digest_workspace(root: Path) -> WorkspaceDigest:
    """Digest the workspace's files now (see the module docstring). Never raises for a
    file it cannot read: that file counts by its path and the error."""
    spec = _ignore_spec(root)
    entries: list[str] = []
    truncated = False
    for folder, dirs, names in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        rel_folder = "" if rel_folder == "." else rel_folder + "/"
        dirs[:] = sorted(d for d in dirs if d not in ALWAYS_SKIPPED
                         and not (spec is not None and spec.match_file(rel_folder + d + "/")))
        for name in sorted(names):
            if name in ALWAYS_SKIPPED or name.endswith(SKIPPED_SUFFIXES):
                continue
            rel = rel_folder + name
            if spec is not None and spec.match_file(rel):
                continue
            if len(entries) >= MAX_FILES:
                truncated = True
                break
            entries.append(_entry(Path(folder) / name, rel))
        if truncated:
            break
    digest = hashlib.sha256("\n".join(entries).encode("utf-8", "surrogateescape")).hexdigest()
    return WorkspaceDigest(digest, len(entries), truncated)


def _entry(path: Path, rel: str) -> str:
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"{rel}\0error {exc.errno}"
    if stat.S_ISLNK(info.st_mode):
        try:
            return f"{rel}\0link {os.readlink(path)}"
        except OSError as exc:
            return f"{rel}\0error {exc.errno}"
    if not stat.S_ISREG(info.st_mode):
        return f"{rel}\0special {stat.S_IFMT(info.st_mode)}"
    if info.st_size > CONTENT_LIMIT_BYTES:
        return f"{rel}\0{info.st_size}\0mtime {info.st_mtime_ns}"
    hasher = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a FIFO meanwhile
                return f"{rel}\0special"
            while chunk := os.read(fd, 1 << 20):
                hasher.update(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        return f"{rel}\0error {exc.errno}"
    return f"{rel}\0{info.st_size}\0{hasher.hexdigest()}\0{info.st_mode & 0o111:o}"
