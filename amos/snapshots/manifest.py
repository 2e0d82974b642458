"""The small manifest committed with each snapshot: what git itself does not keep.

git records a file as 100644, 100755 or a symbolic link and forgets folders with no files.
The manifest adds (issue 20, "record those in a small manifest committed with each
snapshot"):

- exact permission bits: the most common ones of plain files, executable files and
  folders, plus every path that differs from those (so a workspace where every file is
  0664 costs three numbers, not one entry per file);
- folders with no file in the snapshot (empty, or holding only ignored files);
- what the snapshot knows it does not hold: paths skipped (too large, nested
  repositories, special files), ``include`` paths that did not exist, and whether new
  files were left out because the workspace was over its size cap (``partial``).

It is stored as the last line of the commit message (``amos-snapshot {json}``), so the
commit's tree is exactly the workspace's files and plain ``git diff`` works on it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

PREFIX = "amos-snapshot "
VERSION = 1


@dataclass
class Manifest:
    """One snapshot's manifest (see the module docstring).

    Attributes:
        file_mode: permission bits of most plain files (0o644 on a 022 umask).
        exec_mode: permission bits of most executable files.
        dir_mode: permission bits of most folders.
        modes: file path -> permission bits, for files that differ from the above.
        dir_modes: folder path (ending ``/``) -> permission bits, for folders holding
            files whose bits differ from ``dir_mode``.
        dirs: folder path (ending ``/``) -> permission bits, for folders with no file.
        skipped: path -> ``[reason, size or None]``.
        include: ``include`` paths the snapshot holds.
        absent: ``include`` paths that did not exist.
        partial: files not yet in an earlier snapshot were left out (size cap).
        restore: taken by a restore (its ``include`` paths were captured as they are
            now, not before a write, so it answers nothing about earlier snapshots).
        files: files and symbolic links held.
        bytes: their total size, bytes.
    """

    file_mode: int = 0o644
    exec_mode: int = 0o755
    dir_mode: int = 0o755
    modes: dict[str, int] = field(default_factory=dict)
    dir_modes: dict[str, int] = field(default_factory=dict)
    dirs: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, list[Any]] = field(default_factory=dict)
    include: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    partial: bool = False
    restore: bool = False
    files: int = 0
    bytes: int = 0

    def file_perms(self, path: str, executable: bool) -> int:
        """Exact permission bits of file ``path`` (``executable``: git mode 100755)."""
        if path in self.modes:
            return self.modes[path]
        return self.exec_mode if executable else self.file_mode

    def folder_perms(self, folder: str) -> int:
        """Exact permission bits of ``folder`` (ending ``/``)."""
        for table in (self.dirs, self.dir_modes):
            if folder in table:
                return table[folder]
        return self.dir_mode

    def to_line(self) -> str:
        """The manifest as the ``amos-snapshot {json}`` line."""
        data = {
            "v": VERSION, "file_mode": _oct(self.file_mode), "exec_mode": _oct(self.exec_mode),
            "dir_mode": _oct(self.dir_mode),
            "modes": {k: _oct(v) for k, v in sorted(self.modes.items())},
            "dir_modes": {k: _oct(v) for k, v in sorted(self.dir_modes.items())},
            "dirs": {k: _oct(v) for k, v in sorted(self.dirs.items())},
            "skipped": dict(sorted(self.skipped.items())),
            "include": sorted(self.include), "absent": sorted(self.absent),
            "partial": self.partial, "restore": self.restore, "files": self.files, "bytes": self.bytes,
        }
        return PREFIX + json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_message(cls, message: str) -> Manifest | None:
        """The manifest in a commit message, or None when it has none (or it is unreadable)."""
        for line in reversed(message.splitlines()):
            if line.startswith(PREFIX):
                try:
                    data = json.loads(line[len(PREFIX):])
                    return cls(
                        file_mode=int(data["file_mode"], 8), exec_mode=int(data["exec_mode"], 8),
                        dir_mode=int(data["dir_mode"], 8),
                        modes={k: int(v, 8) for k, v in data["modes"].items()},
                        dir_modes={k: int(v, 8) for k, v in data["dir_modes"].items()},
                        dirs={k: int(v, 8) for k, v in data["dirs"].items()},
                        skipped={k: list(v) for k, v in data["skipped"].items()},
                        include=list(data["include"]), absent=list(data["absent"]),
                        partial=bool(data["partial"]), restore=bool(data.get("restore", False)),
                        files=int(data["files"]),
                        bytes=int(data["bytes"]),
                    )
                except (ValueError, KeyError, TypeError, AttributeError):
                    return None
        return None


def _oct(value: int) -> str:
    return format(value, "04o")


def most_common(values: list[int], fallback: int) -> int:
    """The most frequent value (ties: the smallest), or ``fallback`` for none."""
    if not values:
        return fallback
    counts = Counter(values)
    best = max(counts.values())
    return min(v for v, n in counts.items() if n == best)


def build(file_bits: dict[str, int], folder_bits: dict[str, int], empty_dirs: dict[str, int],
          **rest: Any) -> Manifest:
    """A manifest from the exact bits of the snapshot's files and folders.

    Args:
        file_bits: file path -> permission bits (symbolic links left out); a file is
            executable (git mode 100755) when its owner may execute it.
        folder_bits: folder path (``/``-terminated) -> bits, for folders holding files.
        empty_dirs: folder path -> bits, for folders with no file.
        **rest: the other :class:`Manifest` fields.
    """
    plain = [bits for bits in file_bits.values() if not bits & 0o100]
    exe = [bits for bits in file_bits.values() if bits & 0o100]
    manifest = Manifest(
        file_mode=most_common(plain, 0o644), exec_mode=most_common(exe, 0o755),
        dir_mode=most_common([*folder_bits.values(), *empty_dirs.values()], 0o755), **rest,
    )
    usual_file, usual_exe = manifest.file_mode, manifest.exec_mode
    manifest.modes = {path: bits for path, bits in file_bits.items()
                      if bits != (usual_exe if bits & 0o100 else usual_file)}
    manifest.dir_modes = {path: bits for path, bits in folder_bits.items() if bits != manifest.dir_mode}
    manifest.dirs = dict(empty_dirs)
    return manifest
