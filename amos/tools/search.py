"""``search_text``: regex search over the workspace's text files (spec/tools.md).

Walks the workspace (or a sub-folder) without following symlinked folders, skips
``.git``, binary files, files larger than ``MAX_SEARCH_FILE_BYTES``, symlinks that
resolve outside the workspace, and whatever the ``.gitignore`` files (the root one and
nested ones, gitignore semantics via ``pathspec``) exclude. Results are
``path:line: text`` lines, at most ``MAX_MATCHES`` of them.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pathspec
import regex as re
from pydantic import Field

from amos.safe_read import FileTooLargeError, NotRegularFileError, read_regular
from amos.tools.base import Tool, ToolArgs, ToolContext, ToolFailure
from amos.tools.files import BINARY_SNIFF_BYTES, SKIPPED_DIRS
from amos.tools.summaries import summarize_search_text
from amos.tools.workspace import (
    display_path,
    inside_workspace,
    is_hidden,
    normalize_rel,
    refuse_hidden,
    resolve_in_workspace,
    special_file_kind,
)

MAX_MATCHES = 200
"""Most matching lines returned before the search stops with a note."""

MAX_LINE_CHARS = 300
"""Longest text shown for one matching line (characters)."""

MAX_SEARCH_FILE_BYTES = 8 * 1024 * 1024
"""Files larger than this are skipped (bytes)."""

MAX_GITIGNORE_BYTES = 1024 * 1024
"""Largest ``.gitignore`` read, bytes (a larger one is ignored)."""

MAX_SEARCH_SECONDS = 60.0
"""Time budget of one search (seconds, further capped by ``tools.command_timeout_s``).

Matching uses the ``regex`` package because it can time out a single match: the
standard ``re`` cannot be interrupted, so one catastrophically backtracking pattern
would pin a worker thread (and keep the process from exiting) forever.
"""


class SearchTextArgs(ToolArgs):
    """Arguments of ``search_text``."""

    pattern: str = Field(description="Python regular expression searched line by line.")
    path: str = Field(default=".", description="Folder or file relative to the workspace.")
    glob: str | None = Field(
        default=None,
        description="Only search files matching this gitignore-style glob, e.g. '*.py' or 'src/**/*.ts'.",
    )


class _GitIgnores:
    """The ``.gitignore`` rules of the workspace, loaded lazily per folder."""

    def __init__(self, root: Path):
        self.root = root
        self._cache: dict[str, list[Any]] = {}

    def _patterns(self, folder: str) -> list[Any]:
        if folder not in self._cache:
            patterns: list[Any] = []
            candidate = self.root / folder / ".gitignore" if folder else self.root / ".gitignore"
            if candidate.is_file() and inside_workspace(self.root, candidate):
                try:
                    raw = read_regular(candidate, max_bytes=MAX_GITIGNORE_BYTES)  # a FIFO never blocks
                    lines = raw.decode("utf-8", errors="replace").splitlines()
                    patterns = list(pathspec.GitIgnoreSpec.from_lines(lines).patterns)
                except (OSError, ValueError):
                    patterns = []
            self._cache[folder] = patterns
        return self._cache[folder]

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether the workspace-relative POSIX path ``rel`` is ignored.

        Every ``.gitignore`` from the root down to the entry's folder is consulted;
        the last matching pattern wins, so deeper files and later lines take precedence.
        """
        parts = rel.split("/")
        decision: bool | None = None
        for i in range(len(parts)):
            patterns = self._patterns("/".join(parts[:i]))
            if not patterns:
                continue
            sub = "/".join(parts[i:]) + ("/" if is_dir else "")
            for pattern in patterns:
                if pattern.include is not None and pattern.match_file(sub):
                    decision = bool(pattern.include)
        return bool(decision)


async def _search_text(args: SearchTextArgs, ctx: ToolContext) -> str:
    try:
        regex = re.compile(args.pattern)
    except re.error as exc:
        raise ToolFailure(f"invalid regex {args.pattern!r}: {exc}") from None
    glob_spec = None
    if args.glob:
        try:
            glob_spec = pathspec.GitIgnoreSpec.from_lines([args.glob])
        except (ValueError, TypeError) as exc:
            raise ToolFailure(f"invalid glob {args.glob!r}: {exc}") from None
    stop = threading.Event()
    budget = min(MAX_SEARCH_SECONDS, float(ctx.command_timeout_s))
    try:
        return await asyncio.to_thread(
            _search_sync, args, regex, glob_spec, ctx.workspace, stop, time.monotonic() + budget,
            ctx.hidden_paths,
        )
    finally:
        # On cancellation or timeout the worker thread notices this and stops early.
        stop.set()


def _search_sync(
    args: SearchTextArgs,
    regex: re.Pattern[str],
    glob_spec: pathspec.PathSpec | None,
    root: Path,
    stop: threading.Event,
    deadline: float,
    hidden: tuple[Path, ...] = (),
) -> str:
    root = root.resolve()
    start = resolve_in_workspace(root, args.path, must_exist=True)
    refuse_hidden(start, hidden, normalize_rel(args.path))
    ignores = _GitIgnores(root)
    results: list[str] = []
    files_searched = 0
    files_with_matches = 0
    skipped_large = 0
    skipped_special = 0
    truncated = False

    def search_file(path: Path) -> None:
        nonlocal files_searched, files_with_matches, skipped_large, skipped_special, truncated
        try:
            # One non-blocking open, checked with fstat: a FIFO or a device is skipped
            # before a byte is read (issue 17 item 8), never waited on.
            data = read_regular(path, max_bytes=MAX_SEARCH_FILE_BYTES)
        except FileTooLargeError:
            skipped_large += 1
            return
        except NotRegularFileError:
            skipped_special += 1
            return
        except OSError:
            return
        if b"\x00" in data[:BINARY_SNIFF_BYTES]:
            return
        files_searched += 1
        shown = display_path(root, path)
        found = False
        text = data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # a final newline ends the last line; it does not start another
        for number, line in enumerate(lines, start=1):
            if stop.is_set():
                break
            try:
                hit = regex.search(line, timeout=max(0.001, deadline - time.monotonic()))
            except TimeoutError:
                raise ToolFailure(
                    f"search for /{args.pattern}/ ran out of time ({shown}:{number}); the pattern "
                    "may backtrack catastrophically: simplify it, or narrow path or glob"
                ) from None
            if hit:
                found = True
                if len(results) >= MAX_MATCHES:
                    truncated = True
                    break
                line = line.rstrip("\r")
                if len(line) > MAX_LINE_CHARS:
                    line = line[:MAX_LINE_CHARS] + "…"
                results.append(f"{shown}:{number}: {line}")
        if found:
            files_with_matches += 1

    if not start.is_dir():
        kind = special_file_kind(start)
        if kind is not None:
            raise ToolFailure(f"'{normalize_rel(args.path)}' is not a regular file (it is {kind}); "
                              "search_text searches regular files and folders")
        search_file(start)
    else:
        for folder, dirnames, filenames in os.walk(start, topdown=True, followlinks=False):
            if stop.is_set() or truncated:
                break
            folder_path = Path(folder)
            folder_rel = display_path(root, folder_path)
            prefix = "" if folder_rel == "." else folder_rel + "/"
            dirnames[:] = sorted(
                d
                for d in dirnames
                if d not in SKIPPED_DIRS
                and not (folder_path / d).is_symlink()
                and not (hidden and is_hidden(folder_path / d, hidden))
                and not ignores.ignored(prefix + d, is_dir=True)
            )
            for name in sorted(filenames):
                if stop.is_set() or truncated:
                    break
                rel = prefix + name
                path = folder_path / name
                if path.is_symlink() and not (inside_workspace(root, path) and path.is_file()):
                    continue
                if hidden and is_hidden(path, hidden):
                    continue
                if ignores.ignored(rel, is_dir=False):
                    continue
                if glob_spec is not None and not glob_spec.match_file(rel):
                    continue
                search_file(path)

    where = normalize_rel(args.path)
    notes: list[str] = []
    if truncated:
        notes.append(f"[… stopped after {MAX_MATCHES} matches; narrow the pattern, path or glob …]")
    if skipped_large:
        notes.append(f"[{skipped_large} files larger than {MAX_SEARCH_FILE_BYTES} bytes skipped]")
    if skipped_special:
        notes.append(f"[{skipped_special} entries that are not a regular file (FIFOs, devices, sockets) skipped]")
    if not results:
        head = f"no matches for /{args.pattern}/ in {where} ({files_searched} files searched)"
        return "\n".join([head, *notes]) + "\n"
    summary = (
        f"[{len(results)} matches in {files_with_matches} files; {files_searched} files searched]"
    )
    return "\n".join([*results, summary, *notes]) + "\n"


def _summarize_search(args: SearchTextArgs) -> str:
    text = f"/{args.pattern}/"
    if args.path not in (".", ""):
        text += f" in {args.path}"
    if args.glob:
        text += f" ({args.glob})"
    return text


SEARCH_TEXT = Tool(
    name="search_text",
    description=(
        "Search the workspace's text files for a Python regular expression, line by "
        "line. Returns 'path:line: text' lines. Honours .gitignore and skips .git and "
        f"binary files; at most {MAX_MATCHES} matches. glob narrows the files "
        "(gitignore-style, e.g. '*.py')."
    ),
    args_model=SearchTextArgs,
    effect="read",
    run=_search_text,
    default_permission="allow",
    summarize=_summarize_search,
    summarize_result=summarize_search_text,
)
