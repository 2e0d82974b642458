"""What a ``write_file`` or ``edit_file`` call would change, as a unified diff.

The approval screen shows it so a person approves the effect, not just the
arguments (spec/stop-receipts.md "Approvals that pause a run", the interactive
form). :func:`call_diff` is pure apart from reading the one file the call names:

- the path is resolved with the same confinement rule as the file tools
  (:func:`amos.tools.workspace.resolve_in_workspace`: relative, no ``..``, symlinks
  resolved inside the workspace), so nothing outside the workspace is ever read;
- only regular files are opened (a FIFO or device would block or never end), and at
  most :data:`MAX_DIFF_BYTES` of them;
- a binary or non-UTF-8 file is never decoded; the diff says what would happen
  instead;
- a missing, unreadable or oversized file is explained in :attr:`FileDiff.note`.

Nothing here raises for anything a model sent: every problem becomes a note.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from amos.tools.base import ToolFailure
from amos.tools.workspace import normalize_rel, resolve_in_workspace

MAX_DIFF_BYTES = 128 * 1024
"""Largest current file (and largest new text) a diff is computed for (bytes).

The approval screen computes the diff in a worker thread: at this size the worst case
(every line changed, few distinct lines) takes well under a second, and the screen
stays usable meanwhile."""

MAX_DIFF_LINES = 2000
"""Most diff lines kept; the rest is counted in :attr:`FileDiff.truncated`."""

CONTEXT_LINES = 3
"""Unchanged lines shown around each change (as ``diff -u``)."""

BINARY_SNIFF_BYTES = 8192
"""A NUL byte in this many leading bytes marks a file as binary (as ``read_file``)."""

NO_NEWLINE = "\\ No newline at end of file"

DIFF_TOOLS = frozenset({"write_file", "edit_file"})
"""Tools whose approval shows a diff."""

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class FileDiff:
    """The change one file-writing call would make.

    Attributes:
        path: the workspace-relative path the call names (normalized).
        lines: unified-diff lines without line ends (``---``/``+++`` headers, ``@@``
            hunks, `` ``/``+``/``-`` lines, ``\\ No newline at end of file``); empty
            when no diff could be computed (see ``note``) or nothing changes.
        added: ``+`` lines in the whole diff.
        removed: ``-`` lines in the whole diff.
        new_file: the file does not exist yet (every line is added).
        note: why there is no diff, or what a person should know about it (the call
            will fail, the file is binary…); None when the diff says it all.
        truncated: diff lines left out after :data:`MAX_DIFF_LINES`.
    """

    path: str
    lines: tuple[str, ...] = ()
    added: int = 0
    removed: int = 0
    new_file: bool = False
    note: str | None = None
    truncated: int = 0

    @property
    def shown(self) -> bool:
        """True when there are diff lines to show."""
        return bool(self.lines)


def call_diff(tool: str, arguments: Any, workspace: Path) -> FileDiff | None:
    """The diff a ``write_file``/``edit_file`` call would apply to the workspace now.

    Args:
        tool: the tool name; other tools return None.
        arguments: the call's decoded arguments (anything a model sent).
        workspace: the workspace root the tools are confined to.

    Returns:
        A :class:`FileDiff`, or None when ``tool`` is not a file-writing tool or its
        arguments are not an object with a string ``path`` (the arguments are shown
        as they are then).
    """
    if tool not in DIFF_TOOLS or not isinstance(arguments, dict) or not isinstance(arguments.get("path"), str):
        return None
    rel = arguments["path"]
    shown = _printable(normalize_rel(rel)) if rel.strip() else repr(rel)
    if tool == "write_file":
        content = arguments.get("content")
        if not isinstance(content, str):
            return FileDiff(shown, note="the call has no text content; it will fail as invalid arguments")
        return _write_diff(workspace, rel, shown, content)
    old, new = arguments.get("old_text"), arguments.get("new_text")
    if not isinstance(old, str) or not isinstance(new, str):
        return FileDiff(shown, note="the call lacks old_text or new_text; it will fail as invalid arguments")
    return _edit_diff(workspace, rel, shown, old, new, arguments.get("replace_all") is True)


# ---------------------------------------------------------------- reading the current file


class UnreadableFile(Exception):
    """The current file cannot be diffed; the message says why (for people).

    Attributes:
        missing: the file does not exist (yet).
        fails: the path itself is refused (outside the workspace, a folder): the call
            will fail whatever its other arguments.
    """

    def __init__(self, message: str, *, missing: bool = False, fails: bool = False) -> None:
        super().__init__(message)
        self.missing = missing
        self.fails = fails


def read_current(workspace: Path, rel: str) -> str:
    """Read the workspace file ``rel`` as text for a diff, safely.

    Args:
        workspace: the workspace root.
        rel: the path the call names (relative to the workspace).

    Returns:
        The file's text (UTF-8, newlines untouched).

    Raises:
        UnreadableFile: outside the workspace, missing (``missing`` set), not a regular
            file, larger than :data:`MAX_DIFF_BYTES`, binary, not UTF-8, or unreadable.
    """
    try:
        path = resolve_in_workspace(workspace, rel, must_exist=False)
    except ToolFailure as exc:
        raise UnreadableFile(f"{exc}; the call will fail", fails=True) from None
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UnreadableFile("the file does not exist yet", missing=True) from None
    except OSError as exc:
        raise UnreadableFile(f"the current file cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise UnreadableFile("the path is a folder; the call will fail", fails=True)
    if not stat.S_ISREG(info.st_mode):
        raise UnreadableFile("the path is not a regular file (a device, socket or pipe); it is not read")
    if info.st_size > MAX_DIFF_BYTES:
        raise UnreadableFile(f"the current file is {info.st_size} bytes, more than the {MAX_DIFF_BYTES} bytes "
                          "a diff is computed for")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
        try:
            data = os.read(fd, MAX_DIFF_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise UnreadableFile(f"the current file cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_DIFF_BYTES:
        raise UnreadableFile(f"the current file is more than the {MAX_DIFF_BYTES} bytes a diff is computed for")
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise UnreadableFile(f"the current file is binary ({len(data)} bytes); it is not shown")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"the current file is not UTF-8 text (byte {exc.start}); it is not shown") from None


# ---------------------------------------------------------------- the two tools


def _write_diff(workspace: Path, rel: str, shown: str, content: str) -> FileDiff:
    size = len(content.encode("utf-8", errors="replace"))
    try:
        current = read_current(workspace, rel)
    except UnreadableFile as exc:
        if exc.fails:
            return FileDiff(shown, note=str(exc))
        if not exc.missing:
            return FileDiff(shown, note=f"{exc}; the call would replace it with {size} bytes of text "
                                        "(shown in the arguments)")
        if size > MAX_DIFF_BYTES:
            return FileDiff(shown, new_file=True, note=f"a new file of {size} bytes, more than the "
                                                       f"{MAX_DIFF_BYTES} bytes a diff is shown for (see the arguments)")
        return _diff(shown, "", content, new_file=True)
    if size > MAX_DIFF_BYTES:
        return FileDiff(shown, note=f"the new content is {size} bytes, more than the {MAX_DIFF_BYTES} bytes a "
                                    "diff is computed for (see the arguments)")
    if current == content:
        return FileDiff(shown, note="the file already has exactly this content; nothing would change")
    return _diff(shown, current, content)


def _edit_diff(workspace: Path, rel: str, shown: str, old: str, new: str, replace_all: bool) -> FileDiff:
    try:
        current = read_current(workspace, rel)
    except UnreadableFile as exc:
        why = "the file does not exist, so the edit will fail" if exc.missing else str(exc)
        return _fallback(shown, old, new, why)
    if not old:
        return _fallback(shown, old, new, "old_text is empty, so the edit will fail")
    count = current.count(old)
    if count == 0:
        return _fallback(shown, old, new, "old_text is not in the current file, so the edit will fail")
    if count > 1 and not replace_all:
        return _fallback(shown, old, new, f"old_text matches {count} places and replace_all is not set, "
                                          "so the edit will fail")
    updated = current.replace(old, new)
    if len(updated.encode("utf-8", errors="replace")) > MAX_DIFF_BYTES:
        return _fallback(shown, old, new, f"the edited file would be more than the {MAX_DIFF_BYTES} bytes a "
                                          "diff is computed for")
    diff = _diff(shown, current, updated)
    if count > 1:
        return replace(diff, note=f"replaces all {count} occurrences")
    return diff


def _fallback(shown: str, old: str, new: str, why: str) -> FileDiff:
    """old_text → new_text as a diff of their own (no file context), with why."""
    if max(len(old), len(new)) > MAX_DIFF_BYTES:
        return FileDiff(shown, note=f"{why} (old_text and new_text are in the arguments)")
    diff = _diff(shown, old, new, headers=("old_text", "new_text"))
    return replace(diff, note=f"{why}; showing old_text → new_text without the file")


def _diff(shown: str, before: str, after: str, *, new_file: bool = False,
          headers: tuple[str, str] | None = None) -> FileDiff:
    a, b = _split(before), _split(after)
    if headers is None:
        headers = ("/dev/null" if new_file else f"a/{shown}", f"b/{shown}")
    raw = list(difflib.unified_diff(a, b, fromfile=headers[0], tofile=headers[1], n=CONTEXT_LINES, lineterm=""))
    lines: list[str] = []
    added = removed = 0
    for line in raw:
        is_body = line[:1] in ("+", "-", " ") and not line.startswith(("+++ ", "--- "))
        if is_body and line[:1] == "+":
            added += 1
        elif is_body and line[:1] == "-":
            removed += 1
        if is_body and not line.endswith("\n"):
            lines.append(_printable(line))
            lines.append(NO_NEWLINE)
        else:
            lines.append(_printable(line.removesuffix("\n")))
    kept = lines[:MAX_DIFF_LINES]
    return FileDiff(shown, tuple(kept), added, removed, new_file, truncated=len(lines) - len(kept))


def _split(text: str) -> list[str]:
    """Lines split on ``\\n`` only, keeping their ends (a ``\\r`` stays in its line)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _printable(text: str) -> str:
    """``text`` with control characters shown as visible symbols (``\\r`` → ``␍``).

    Tabs stay; nothing a file holds can move the cursor or restyle the terminal.
    """
    return _CONTROL.sub(lambda m: chr(0x2400 + ord(m.group())) if m.group() != "\x7f" else "␡", text)


__all__ = ["CONTEXT_LINES", "DIFF_TOOLS", "MAX_DIFF_BYTES", "MAX_DIFF_LINES", "FileDiff", "UnreadableFile",
           "call_diff", "read_current"]
