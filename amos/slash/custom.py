"""Custom slash commands: prompt templates in ``commands/*.md`` (spec/slash-commands.md).

A Markdown file ``NAME.md`` becomes ``/NAME``. It may start with a front-matter block::

    ---
    description: Say hello to someone
    arguments: NAME…
    ---
    Say hello to $ARGUMENTS …

The body is a prompt template. :func:`expand` replaces ``$ARGUMENTS`` with the rest
of the line exactly as typed and ``$1``…``$9`` with its whitespace-separated tokens
(double quotes group a token, as for built-in commands). Nothing else is special:
``$$``, ``$0`` and ``$10`` (``$1`` then ``0``) stay as written. A custom command only
ever produces a prompt for the model; it never runs host code.

This module only reads files and returns values; nothing happens at import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from amos.errors import SlashCommandError
from amos.safe_read import FileTooLargeError, NotRegularFileError, read_regular
from amos.slash.parser import split_tokens

MAX_FILE_BYTES = 64 * 1024
"""Files larger than this (bytes) are skipped with a warning."""

MAX_FILES_PER_DIR = 200
"""At most this many ``*.md`` files are read from one folder (sorted by name)."""

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
"""What a file stem must look like to become a command name."""

_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9])")
_KEY = re.compile(r"([A-Za-z0-9_-]+)\s*:(.*)")
_FOLDED = {"|", ">", "|-", ">-", "|+", ">+"}

ORIGINS = ("workspace", "claude", "user", "bundled")
"""Where a command came from, in lookup order: ``./commands``, ``./.claude/commands``,
``<config>/commands``, the commands shipped with amos."""


@dataclass(frozen=True)
class CustomCommand:
    """One usable custom command.

    Attributes:
        name: the command name without the slash (the file stem).
        description: one line from the front matter, or "" when absent.
        arguments: the arguments hint (``NAME…``, ``FILE [SYMBOL]``), or "".
            Words outside ``[...]`` are required (see :func:`expand`).
        template: the prompt template (the body after the front matter, stripped).
        source: the file it was read from.
        origin: one of :data:`ORIGINS`.
    """

    name: str
    description: str
    arguments: str
    template: str
    source: Path
    origin: str

    @property
    def usage(self) -> str:
        """The usage line: ``/greet NAME…``."""
        return f"/{self.name} {self.arguments}".rstrip()


@dataclass(frozen=True)
class Skipped:
    """A ``*.md`` file that did not become a command.

    Attributes:
        source: the file.
        name: the command name it would have had, or None when the stem is not a
            valid name. A skipped file still takes its name: an earlier broken file
            hides a later good one of the same name, so ``/NAME`` reports the problem.
        reason: why, one short line (``not UTF-8 text``).
        builtin: True when the file was ignored because ``/NAME`` is a built-in.
    """

    source: Path
    name: str | None
    reason: str
    builtin: bool = False

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}; skipped"


class TemplateError(ValueError):
    """A custom command file that cannot be used (the message is one line)."""


def search_dirs(workspace: Path, config_dir: Path | None) -> list[tuple[Path, str]]:
    """The folders searched for ``*.md`` files, first wins.

    Args:
        workspace: the runner's workspace.
        config_dir: the user config folder (``paths.config_dir()``), or None to skip it.

    Returns:
        ``[(folder, origin), …]`` in lookup order; folders may not exist.
    """
    dirs = [(workspace / "commands", "workspace"), (workspace / ".claude" / "commands", "claude")]
    if config_dir is not None:
        dirs.append((config_dir / "commands", "user"))
    bundled = bundled_dir()
    if bundled is not None:
        dirs.append((bundled, "bundled"))
    return dirs


def bundled_dir() -> Path | None:
    """The commands shipped with amos: the repository's top-level ``commands/``.

    Installed packages carry them as package data in ``amos/slash/bundled_commands``
    (a symlink to ``../../commands`` in the repository, copied into wheels). A source
    checkout where that symlink is missing falls back to ``<repo>/commands``.

    Returns:
        The folder, or None when neither exists.
    """
    here = Path(__file__).resolve().parent
    packaged = here / "bundled_commands"
    if packaged.is_dir():
        return packaged
    repo = here.parent.parent
    if (repo / "pyproject.toml").is_file() and (repo / "commands").is_dir():
        return repo / "commands"
    return None


def load_custom_commands(workspace: Path, config_dir: Path | None,
                         builtins: frozenset[str] | set[str] = frozenset()
                         ) -> tuple[dict[str, CustomCommand], list[Skipped]]:
    """Read every custom command, first found wins.

    Never raises for a bad file: unreadable files, non-UTF-8 text, files over
    :data:`MAX_FILE_BYTES`, malformed front matter, empty templates, invalid names and
    files named like a built-in are returned as :class:`Skipped` entries. Hidden files
    (``.name.md``) and anything not ending in ``.md`` are ignored silently.

    Args:
        workspace: the runner's workspace (``./commands``, ``./.claude/commands``).
        config_dir: the user config folder, or None.
        builtins: built-in command names; files with these names are skipped.

    Returns:
        ``(commands, skipped)``: commands by name in lookup order, and the skipped
        files (``str(entry)`` is a one-line warning).
    """
    commands: dict[str, CustomCommand] = {}
    skipped: list[Skipped] = []
    taken: set[str] = set()
    for folder, origin in search_dirs(workspace, config_dir):
        for path in _md_files(folder, skipped):
            stem = path.name[:-3]
            if not NAME_PATTERN.fullmatch(stem):
                skipped.append(Skipped(path, None, "the name must be letters, digits, '-' or '_' "
                                                   "(starting with a letter or digit)"))
                continue
            if stem in builtins:
                skipped.append(Skipped(path, stem, f"/{stem} is a built-in command and cannot be replaced",
                                       builtin=True))
                continue
            if stem in taken:
                continue
            taken.add(stem)
            try:
                commands[stem] = read_command(path, stem, origin)
            except TemplateError as exc:
                skipped.append(Skipped(path, stem, str(exc)))
    return commands, skipped


def _md_files(folder: Path, skipped: list[Skipped]) -> list[Path]:
    try:
        if not folder.is_dir():
            return []
        names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".md") and not p.name.startswith("."))
    except OSError as exc:
        skipped.append(Skipped(folder, None, f"cannot list the folder ({exc.strerror or exc})"))
        return []
    if len(names) > MAX_FILES_PER_DIR:
        skipped.append(Skipped(folder, None, f"more than {MAX_FILES_PER_DIR} .md files; only the first "
                                             f"{MAX_FILES_PER_DIR} by name are read"))
        names = names[:MAX_FILES_PER_DIR]
    return [folder / n for n in names if (folder / n).is_file() or (folder / n).is_symlink()]


def read_command(path: Path, name: str, origin: str) -> CustomCommand:
    """Read one command file.

    Args:
        path: the ``NAME.md`` file.
        name: the command name.
        origin: one of :data:`ORIGINS`.

    Returns:
        The command.

    Raises:
        TemplateError: unreadable, larger than :data:`MAX_FILE_BYTES`, not UTF-8,
            malformed front matter, or an empty template.
    """
    try:
        target = path.resolve()
        if path.is_symlink() and not target.is_relative_to(path.parent.resolve()):
            raise TemplateError(f"is a link to {target}, outside its commands folder — refused, so a project "
                                "cannot send other files of yours to the model")
        # The one safe reader: a FIFO or a device never hangs amos, a huge file is refused.
        raw = read_regular(path, max_bytes=MAX_FILE_BYTES)
    except NotRegularFileError:
        raise TemplateError("is not a regular file") from None
    except FileTooLargeError:
        raise TemplateError(f"larger than {MAX_FILE_BYTES // 1024} KiB") from None
    except OSError as exc:
        raise TemplateError(f"cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TemplateError(f"not UTF-8 text (bad byte at offset {exc.start})") from None
    if "\x00" in text:
        raise TemplateError("contains NUL bytes")
    meta, body = parse_front_matter(text.removeprefix("\ufeff").replace("\r\n", "\n"))
    template = body.strip()
    if not template:
        raise TemplateError("the prompt template (the text after the front matter) is empty")
    arguments = meta.get("arguments") or meta.get("argument-hint") or ""
    return CustomCommand(name=name, description=meta.get("description", ""), arguments=arguments,
                         template=template, source=path, origin=origin)


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """Split an optional ``---`` … ``---`` block of ``key: value`` lines from the body.

    YAML-ish, not YAML: each value is one line of text (matching surrounding quotes
    are removed; indented lines continue the previous value, joined by a space;
    ``#`` lines are comments). Keys other than ``description``, ``arguments`` and
    ``argument-hint`` are accepted and ignored (``.claude/commands`` files carry
    ``allowed-tools`` and ``model``). Control characters in values become ``?``.

    Args:
        text: the whole file, ``\\n`` line endings.

    Returns:
        ``(meta, body)``; ``meta`` is empty when there is no front matter.

    Raises:
        TemplateError: an unclosed block, a line that is not ``key: value``, or a
            repeated key.
    """
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return {}, text
    meta: dict[str, str] = {}
    key: str | None = None
    for number, line in enumerate(lines[1:], start=2):
        if line.rstrip() == "---":
            return {k: _clean(v) for k, v in meta.items()}, "\n".join(lines[number:])
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0].isspace():
            if key is None:
                raise TemplateError(f"malformed front matter: line {number} is indented but follows no key")
            meta[key] = f"{meta[key]} {line.strip()}".strip()
            continue
        match = _KEY.fullmatch(line.rstrip())
        if match is None:
            raise TemplateError(f"malformed front matter: line {number} is not 'key: value' "
                                "(is the closing '---' missing?)")
        key = match.group(1).lower()
        if key in meta:
            raise TemplateError(f"malformed front matter: {key!r} appears twice")
        value = match.group(2).strip()
        meta[key] = "" if value in _FOLDED else value
    raise TemplateError("malformed front matter: no closing '---' line")


def _clean(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return "".join(c if c.isprintable() else "?" for c in value)


def required_count(arguments: str) -> int:
    """How many words of an arguments hint are outside ``[...]`` (required arguments)."""
    depth, count = 0, 0
    for word in re.findall(r"\[|\]|[^\s\[\]]+", arguments):
        if word == "[":
            depth += 1
        elif word == "]":
            depth = max(0, depth - 1)
        elif depth == 0:
            count += 1
    return count


def expand(command: CustomCommand, rest: str) -> str:
    """The prompt ``/NAME rest`` sends: the template with its placeholders replaced.

    ``$ARGUMENTS`` becomes ``rest`` exactly as typed; ``$1``…``$9`` become its tokens
    (double quotes group a token; apostrophes are ordinary characters), missing ones
    the empty string. Replacement is one pass, so a ``$1`` typed by the user stays
    literal. A template with no placeholder gets ``rest`` appended after a blank line,
    so typed text is never dropped.

    Args:
        command: the command.
        rest: what was typed after ``/NAME`` (leading whitespace removed).

    Returns:
        The prompt text.

    Raises:
        SlashCommandError: fewer tokens than the required words of ``arguments``, an
            unterminated double quote when ``$1``…``$9`` are used, or an empty prompt
            (the command's usage is attached). Only a template using ``$1``…``$9``
            reads quotes; for a ``$ARGUMENTS`` template the count is plain words.
    """
    rest = rest.rstrip("\r\n")
    uses_tokens = any(m.group(1) != "ARGUMENTS" for m in _PLACEHOLDER.finditer(command.template))
    needed = required_count(command.arguments)
    tokens: list[str] = []
    if uses_tokens:
        try:
            tokens, _ = split_tokens(rest, max(9, needed))
        except SlashCommandError as exc:
            raise SlashCommandError(f"/{command.name}: {exc}", usage=command.usage) from None
    elif needed:
        tokens = rest.split()
    if len(tokens) < needed:
        raise SlashCommandError(f"/{command.name} needs {command.arguments}", usage=command.usage)

    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key == "ARGUMENTS":
            return rest
        index = int(key) - 1
        return tokens[index] if index < len(tokens) else ""

    if _PLACEHOLDER.search(command.template):
        prompt = _PLACEHOLDER.sub(value, command.template)
    else:
        prompt = command.template + (f"\n\n{rest}" if rest.strip() else "")
    if not prompt.strip():
        raise SlashCommandError(f"/{command.name} expands to an empty prompt", usage=command.usage)
    return prompt


__all__ = ["CustomCommand", "Skipped", "TemplateError", "load_custom_commands", "read_command",
           "parse_front_matter", "expand", "search_dirs", "bundled_dir", "required_count",
           "MAX_FILE_BYTES", "NAME_PATTERN"]
