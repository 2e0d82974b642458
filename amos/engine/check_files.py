"""The files a completion check command runs, pinned at the baseline (issue 16).

A check such as ``sh check.sh`` or ``python3 tests/check.py`` is only as good as the
file it runs, and that file is in the workspace the model edits. The words of the
check command that name regular files inside the workspace are hashed (SHA-256) when
the baseline is taken; when the run claims completion, a pinned file that changed,
appeared or disappeared means the check may have been rewritten to pass, so the run
cannot be VERIFIED_COMPLETE (it stops UNCERTAIN ``check_tampered``, naming the files).
Python checkers (``module:function``) are pinned separately by the loop policy.
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

MAX_FILES = 20
"""Files pinned per check command."""
MAX_FILE_BYTES = 8 * 1024 * 1024
"""A larger file is pinned by its size and modification time only (bytes)."""


def check_files(command: str | None, workspace: Path) -> list[str]:
    """The workspace-relative paths of the regular files ``command`` names (at most
    :data:`MAX_FILES`; words that are options, globs or outside the workspace are skipped)."""
    if not command:
        return []
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return []
    root = workspace.resolve()
    found: list[str] = []
    for word in words:
        if word.startswith("-") or any(c in word for c in "*?[$`") or not word.strip():
            continue
        if "=" in word:
            word = word.split("=", 1)[1]
            if not word:
                continue
        path = (root / word).resolve() if not word.startswith("/") else Path(word).resolve()
        try:
            relative = path.relative_to(root)
        except ValueError:
            continue
        if path.is_file() and str(relative) not in found:
            found.append(str(relative))
        if len(found) >= MAX_FILES:
            break
    return found


def pin_files(paths: list[str], workspace: Path) -> dict[str, str]:
    """``{path: "sha256:…"}`` of each file now (``"missing"`` when it is gone)."""
    pins: dict[str, str] = {}
    for rel in paths:
        path = workspace / rel
        try:
            if path.is_symlink() or not path.is_file():
                pins[rel] = "missing"
                continue
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                stat = path.stat()
                pins[rel] = f"stat:{stat.st_size}:{stat.st_mtime_ns}"
                continue
            pins[rel] = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            pins[rel] = "missing"
    return pins


def changed_files(pins: dict[str, str], workspace: Path) -> list[str]:
    """The pinned paths whose content differs from the pin now."""
    now = pin_files(list(pins), workspace)
    return [rel for rel, pin in pins.items() if now.get(rel) != pin]
