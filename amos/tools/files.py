"""File tools: ``read_file``, ``list_dir``, ``write_file``, ``edit_file`` (spec/tools.md).

Every path goes through ``resolve_in_workspace``; folder walks skip entries that
resolve outside the workspace. Blocking file I/O runs in a worker thread so the event
loop (and the TUI) stays responsive. Writes are atomic: a temporary file in the same
folder, ``fsync``, then ``os.replace`` (DESIGN.md, "Persistence").
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import Field

from amos.atomic import atomic_write_bytes
from amos.tools.base import Tool, ToolArgs, ToolContext, ToolFailure
from amos.tools.summaries import summarize_list_dir, summarize_read_file
from amos.tools.workspace import (
    display_path,
    inside_workspace,
    is_hidden,
    normalize_rel,
    read_workspace_file,
    refuse_hidden,
    resolve_in_workspace,
    special_file_kind,
)

MAX_READ_BYTES = 32 * 1024 * 1024
"""Largest file ``read_file`` and ``edit_file`` load (bytes)."""

MAX_LIST_ENTRIES = 1000
"""Most entries ``list_dir`` returns before it stops with a note."""

MAX_LIST_DEPTH = 5
"""Deepest ``list_dir`` recursion accepted."""

BINARY_SNIFF_BYTES = 8192
"""A NUL byte in this many leading bytes marks a file as binary."""

SKIPPED_DIRS = frozenset({".git"})
"""Folder names the walking tools never enter or list."""


# ---------------------------------------------------------------- shared helpers


def read_text_file(path: Path, shown: str) -> str:
    """Read a workspace file as UTF-8 text.

    Args:
        path: resolved path inside the workspace.
        shown: the path as the model should see it in messages.

    Returns:
        The decoded text (newlines untouched).

    Raises:
        ToolFailure: the path is a folder, a FIFO, a device or a socket, larger than
            ``MAX_READ_BYTES``, binary, not UTF-8, or unreadable.
    """
    if path.is_dir():
        raise ToolFailure(f"'{shown}' is a folder; use list_dir to see what it contains")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ToolFailure(f"cannot read '{shown}': {exc.strerror or exc}") from None
    if size > MAX_READ_BYTES and special_file_kind(path) is None:
        raise ToolFailure(
            f"'{shown}' is {size} bytes, more than the {MAX_READ_BYTES} bytes read_file "
            "loads; use search_text or run_command to look into it"
        )
    data = read_workspace_file(path, shown, MAX_READ_BYTES)  # a FIFO or device is refused, never opened blocking
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise ToolFailure(f"'{shown}' looks like a binary file; only text files can be read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolFailure(
            f"'{shown}' is not valid UTF-8 text (byte {exc.start}); only text files can be read"
        ) from None


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, fsync, replace).

    An existing file keeps its permission bits; a new file gets ``0666 & ~umask``.

    Args:
        path: resolved target path; its folder must exist.
        data: the complete new content.

    Raises:
        OSError: the temporary file could not be written or moved into place.
    """
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    atomic_write_bytes(path, data, mode=mode)


def _umask() -> int:
    """The process umask, read without changing it (Linux ``/proc``; else 0o022)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def split_lines(text: str) -> list[str]:
    """Split on ``\\n`` only, keeping line ends (``\\r`` stays part of its line)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


# ---------------------------------------------------------------- read_file


class ReadFileArgs(ToolArgs):
    """Arguments of ``read_file``."""

    path: str = Field(description="File path relative to the workspace.")
    offset: int | None = Field(
        default=None, ge=1, description="First line to return, 1-based (default 1)."
    )
    limit: int | None = Field(
        default=None, ge=1, description="Number of lines to return (default: to the end)."
    )


async def _read_file(args: ReadFileArgs, ctx: ToolContext) -> str:
    return await asyncio.to_thread(_read_file_sync, args, ctx.workspace, ctx.hidden_paths)


def _read_file_sync(args: ReadFileArgs, root: Path, hidden: tuple[Path, ...] = ()) -> str:
    shown = normalize_rel(args.path)
    path = resolve_in_workspace(root, args.path, must_exist=True)
    refuse_hidden(path, hidden, shown)
    lines = split_lines(read_text_file(path, shown))
    total = len(lines)
    if total == 0:
        return f"{shown} (empty file)\n"
    first = args.offset or 1
    if first > total:
        raise ToolFailure(f"offset {first} is past the end of '{shown}', which has {total} lines")
    last = total if args.limit is None else min(total, first + args.limit - 1)
    body = "".join(lines[first - 1 : last])
    if not body.endswith("\n"):
        body += "\n"
    return f"{shown} (lines {first}-{last} of {total})\n{body}"


def _summarize_read(args: ReadFileArgs) -> str:
    span = ""
    if args.offset or args.limit:
        first = args.offset or 1
        span = (
            f" from line {first}"
            if args.limit is None
            else f" lines {first}-{first + args.limit - 1}"
        )
    return f"{args.path}{span}"


READ_FILE = Tool(
    name="read_file",
    description=(
        "Read a UTF-8 text file in the workspace. The reply starts with a header such as "
        "'calc.py (lines 1-20 of 20)'. Use offset (1-based first line) and limit (line "
        "count) to page through large files."
    ),
    args_model=ReadFileArgs,
    effect="read",
    run=_read_file,
    default_permission="allow",
    summarize=_summarize_read,
    summarize_result=summarize_read_file,
)


# ---------------------------------------------------------------- list_dir


class ListDirArgs(ToolArgs):
    """Arguments of ``list_dir``."""

    path: str = Field(default=".", description="Folder relative to the workspace.")
    depth: int = Field(
        default=1,
        ge=1,
        le=MAX_LIST_DEPTH,
        description=f"How many folder levels to list (1 to {MAX_LIST_DEPTH}).",
    )


async def _list_dir(args: ListDirArgs, ctx: ToolContext) -> str:
    return await asyncio.to_thread(_list_dir_sync, args, ctx.workspace, ctx.hidden_paths)


def _list_dir_sync(args: ListDirArgs, root: Path, hidden: tuple[Path, ...] = ()) -> str:
    root = root.resolve()
    shown = normalize_rel(args.path)
    start = resolve_in_workspace(root, args.path, must_exist=True)
    refuse_hidden(start, hidden, shown)
    if not start.is_dir():
        raise ToolFailure(f"'{shown}' is not a folder; use read_file to read a file")
    entries: list[tuple[tuple[str, ...], bool]] = []
    level: list[tuple[Path, tuple[str, ...]]] = [(start, ())]
    truncated = False
    for current_depth in range(1, args.depth + 1):
        next_level: list[tuple[Path, tuple[str, ...]]] = []
        for folder, prefix in level:
            try:
                with os.scandir(folder) as scan:
                    children = sorted(scan, key=lambda e: e.name)
            except OSError:
                continue
            for child in children:
                if child.name in SKIPPED_DIRS:
                    continue
                child_path = Path(child.path)
                if child.is_symlink() and not inside_workspace(root, child_path):
                    continue
                if hidden and is_hidden(child_path, hidden):
                    continue
                if len(entries) >= MAX_LIST_ENTRIES:
                    truncated = True
                    break
                try:
                    is_dir = child.is_dir()
                except OSError:
                    is_dir = False
                parts = (*prefix, child.name)
                entries.append((parts, is_dir))
                # Symlinked folders are listed but not entered (no loops, no double walks).
                if is_dir and not child.is_symlink() and current_depth < args.depth:
                    next_level.append((child_path, parts))
            if truncated:
                break
        if truncated:
            break
        level = next_level
    entries.sort(key=lambda item: item[0])
    lines = ["/".join(parts) + ("/" if is_dir else "") for parts, is_dir in entries]
    where = display_path(root, start)
    header = f"{where}/ (depth {args.depth}, {len(lines)} entries)"
    if not lines:
        return f"{where}/ (empty)\n"
    text = header + "\n" + "\n".join(lines) + "\n"
    if truncated:
        text += (
            f"[… listing stopped at {MAX_LIST_ENTRIES} entries; list a sub-folder or use a "
            "smaller depth …]\n"
        )
    return text


def _summarize_list(args: ListDirArgs) -> str:
    return args.path if args.depth == 1 else f"{args.path} (depth {args.depth})"


LIST_DIR = Tool(
    name="list_dir",
    description=(
        "List a folder of the workspace. Folders end with '/'. depth (1 to "
        f"{MAX_LIST_DEPTH}) lists sub-folders too; '.git' is skipped and at most "
        f"{MAX_LIST_ENTRIES} entries are returned."
    ),
    args_model=ListDirArgs,
    effect="read",
    run=_list_dir,
    default_permission="allow",
    summarize=_summarize_list,
    summarize_result=summarize_list_dir,
)


# ---------------------------------------------------------------- write_file


class WriteFileArgs(ToolArgs):
    """Arguments of ``write_file``."""

    path: str = Field(description="File path relative to the workspace.")
    content: str = Field(description="The complete new content of the file (UTF-8).")


async def _write_file(args: WriteFileArgs, ctx: ToolContext) -> dict[str, object]:
    return await asyncio.to_thread(_write_file_sync, args, ctx.workspace, ctx.hidden_paths)


def _write_file_sync(args: WriteFileArgs, root: Path, hidden: tuple[Path, ...] = ()) -> dict[str, object]:
    shown = normalize_rel(args.path)
    path = resolve_in_workspace(root, args.path, must_exist=False)
    refuse_hidden(path, hidden, args.path)
    if path.is_dir():
        raise ToolFailure(f"'{shown}' is a folder; give a file path to write")
    special = special_file_kind(path)
    if special is not None:
        raise ToolFailure(f"'{shown}' is not a regular file (it is {special}); write_file only "
                          "replaces regular files")
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ToolFailure(f"cannot create the folders of '{shown}': a file is in the way") from None
    except OSError as exc:
        raise ToolFailure(
            f"cannot create the folders of '{shown}': {exc.strerror or exc}"
        ) from None
    # Re-check after creating folders: a link created meanwhile must not lead out.
    path = resolve_in_workspace(root, args.path, must_exist=False)
    refuse_hidden(path, hidden, args.path)
    data = args.content.encode("utf-8", errors="replace")
    if existed and _holds(path, data):
        # Nothing to write: the call changed nothing, and says so — a no-op write is not
        # work a completion check may credit (``unchanged`` keeps a flipped check UNCERTAIN).
        return {"path": shown, "bytes_written": 0, "created": False, "unchanged": True}
    try:
        atomic_write(path, data)
    except OSError as exc:
        raise ToolFailure(f"cannot write '{shown}': {exc.strerror or exc}") from None
    return {"path": shown, "bytes_written": len(data), "created": not existed}


def _holds(path: Path, data: bytes) -> bool:
    """True when the regular file at ``path`` already holds exactly ``data`` (bytes)."""
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def _render_write(result: dict[str, object]) -> str:
    if result.get("unchanged"):
        return f"{result.get('path')} already held this content; nothing was written"
    what = "created" if result.get("created") else "overwrote"
    return f"{what} {result.get('path')} ({result.get('bytes_written')} bytes written)"


def _summarize_write(args: WriteFileArgs) -> str:
    return f"{args.path} ({len(args.content.encode('utf-8', errors='replace'))} bytes)"


WRITE_FILE = Tool(
    name="write_file",
    description=(
        "Create or overwrite a file in the workspace with the given content; missing "
        "parent folders are created. Prefer edit_file for small changes to existing files."
    ),
    args_model=WriteFileArgs,
    effect="write",
    run=_write_file,
    default_permission="ask",
    summarize=_summarize_write,
    render=_render_write,
)


# ---------------------------------------------------------------- edit_file


class EditFileArgs(ToolArgs):
    """Arguments of ``edit_file``."""

    path: str = Field(description="File path relative to the workspace.")
    old_text: str = Field(description="Exact text to replace, including whitespace.")
    new_text: str = Field(description="Replacement text.")
    replace_all: bool = Field(
        default=False,
        description="Replace every occurrence; otherwise old_text must occur exactly once.",
    )


async def _edit_file(args: EditFileArgs, ctx: ToolContext) -> dict[str, object]:
    return await asyncio.to_thread(_edit_file_sync, args, ctx.workspace, ctx.hidden_paths)


def _edit_file_sync(args: EditFileArgs, root: Path, hidden: tuple[Path, ...] = ()) -> dict[str, object]:
    shown = normalize_rel(args.path)
    path = resolve_in_workspace(root, args.path, must_exist=True)
    refuse_hidden(path, hidden, args.path)
    if not args.old_text:
        raise ToolFailure("old_text is empty; give the exact text to replace")
    if args.old_text == args.new_text:
        raise ToolFailure("old_text and new_text are identical; nothing would change")
    text = read_text_file(path, shown)
    count = text.count(args.old_text)
    if count == 0:
        hint = ""
        if "\r\n" in text and "\r\n" not in args.old_text and "\n" in args.old_text:
            hint = " (the file uses CRLF line endings)"
        raise ToolFailure(
            f"old_text was not found in '{shown}'{hint}; read the file and copy the exact "
            "text, including whitespace"
        )
    if count > 1 and not args.replace_all:
        raise ToolFailure(
            f"old_text matches {count} places in '{shown}'; pass replace_all=true to replace "
            "all of them, or include more surrounding context so it matches exactly once"
        )
    new = text.replace(args.old_text, args.new_text)
    try:
        atomic_write(path, new.encode("utf-8", errors="replace"))
    except OSError as exc:
        raise ToolFailure(f"cannot write '{shown}': {exc.strerror or exc}") from None
    return {"path": shown, "replacements": count}


def _render_edit(result: dict[str, object]) -> str:
    count = result.get("replacements")
    noun = "occurrence" if count == 1 else "occurrences"
    return f"replaced {count} {noun} in {result.get('path')}"


def _summarize_edit(args: EditFileArgs) -> str:
    return f"{args.path} (replace all)" if args.replace_all else args.path


EDIT_FILE = Tool(
    name="edit_file",
    description=(
        "Replace old_text with new_text in a workspace file. old_text must match exactly "
        "once unless replace_all is true; include enough surrounding lines to make it unique."
    ),
    args_model=EditFileArgs,
    effect="write",
    run=_edit_file,
    default_permission="ask",
    summarize=_summarize_edit,
    render=_render_edit,
)
