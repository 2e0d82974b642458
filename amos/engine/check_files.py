"""The files a completion check command runs, pinned at the baseline (issue 16).

A check such as ``sh check.sh`` or ``python3 tests/check.py`` is only as good as the
file it runs, and that file is in the workspace the model edits. The files the check
command runs (:func:`check_files`) are pinned when the baseline is taken — their SHA-256,
a symlink's target, the set of files a glob matches, ``missing`` for a script or makefile
that is not there yet — and when the run claims completion, a pin that changed means the
check may have been rewritten to pass, so the run cannot be VERIFIED_COMPLETE (it stops
UNCERTAIN ``check_tampered``, naming the files). Python checkers (``module:function``)
are pinned separately by the loop policy.

This reads a shell command line the way the shell would closely enough for checks people
write; it is a heuristic, not a shell. What it does not follow (a variable holding the
script's name, ``eval`` of a computed string, a script found through ``$PATH``, the code
a test runner imports, such as ``conftest.py``) is named in the README as a known limit.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MAX_FILES = 20
"""Files pinned per check command."""
MAX_FILE_BYTES = 8 * 1024 * 1024
"""A larger file is pinned by its size and modification time only (bytes)."""
GLOB_PREFIX = "glob:"
"""Key prefix of a pinned glob: ``glob:DIR/PATTERN`` → the set of files it matches."""

SHELLS = re.compile(r"(?:ba|da|z|k|a)?sh|busybox")
"""Shells: ``-c STRING`` is a command line (parsed in turn), ``-o NAME`` an option."""
INTERPRETERS = re.compile(r"(?:python|pypy)[\d.]*|node(?:js)?|ruby|perl|php|lua[\d.]*|Rscript|tclsh|bun")
"""Other programs whose first non-option argument is the script they run."""
WRAPPERS = frozenset({"env", "exec", "command", "time", "nohup", "nice", "timeout", "xargs", "stdbuf",
                      "builtin", "eval", "sudo"})
"""Programs that run the rest of their arguments as a command."""
RESERVED = frozenset({"{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"})
"""Shell words that may stand before a command."""
SOURCE = frozenset({".", "source"})
MAKE = frozenset({"make", "gmake"})
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
MODULE_RUNNERS = frozenset({"pytest", "unittest"})
"""``python -m`` runners whose ``.py`` arguments are the files they run."""
MAX_DEPTH = 4
"""Nested ``sh -c`` levels followed."""
_OPTION_VALUES = {"python": {"-W", "-X", "-Q"}, "timeout": {"-s", "-k", "--signal", "--kill-after"},
                  "nice": {"-n"}, "env": {"-u", "-C", "-S"}, "shell": {"-o", "+o", "-O", "+O"}}
"""Options of a program that take the next word as their value."""
_PWD = re.compile(r"\$\{PWD\}|\$PWD\b|\$\(pwd\)|`pwd`")


@dataclass
class _Scan:
    """One command line's walk: the workspace, the folder ``cd`` moved to, what was found."""

    root: Path
    cwd: PurePosixPath = PurePosixPath(".")
    found: list[str] = field(default_factory=list)


def check_files(command: str | None, workspace: Path) -> list[str]:
    """The pins' keys for the files ``command`` runs (at most :data:`MAX_FILES`).

    Found: a program given by a path (``./check.sh``); the script an interpreter runs
    (``sh -e check.sh``, ``python3 -u tests/check.py``, ``sh < check.sh``, ``cat x.sh |
    sh``); ``python -m tests.check`` and the ``.py`` files given to ``-m pytest|unittest``;
    what ``. FILE`` sources; every makefile name ``make`` would read (``-C DIR`` too); the
    same inside ``sh -c '…'`` (and its positional arguments), ``{ …; }``, ``if``,
    after ``cd DIR``, behind ``env``/``timeout``/``eval``…, with ``$PWD`` and ``$(pwd)``
    read as the folder. A glob is pinned as the set of files it matches
    (:data:`GLOB_PREFIX`). A script or makefile not there yet is pinned as ``missing``,
    so one the run creates is seen. Files a check only reads (``grep -q ok a.txt``) are
    not pinned: the model may be asked to change them. Never raises.

    Args:
        command: the check's shell command line, or None.
        workspace: the workspace root.

    Returns:
        Workspace-relative paths (and ``glob:`` keys), for :func:`pin_files`.
    """
    if not command:
        return []
    scan = _Scan(workspace.resolve())
    _walk(command, scan, 0)
    return scan.found[:MAX_FILES]


def _walk(command: str, scan: _Scan, depth: int) -> None:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return
    simple: list[str] = []
    stdin: list[str] = []
    piped_from: list[str] = []
    redirect: bool | None = False
    for word in [*words, ";"]:
        if word and all(c in "();<>|&" for c in word):
            if word == "<":
                redirect = True
                continue
            if ">" in word or word in ("<<", "<<<", "<>"):
                redirect = None  # the next word is an output target or a here-doc: skip it
                continue
            _simple(simple, stdin, piped_from, scan, depth)
            piped_from = list(simple) if word == "|" else []
            simple, stdin, redirect = [], [], False
            continue
        if redirect is True:
            stdin, redirect = [word], False
            continue
        if redirect is None:
            redirect = False
            continue
        simple.append(word)


def _simple(words: list[str], stdin: list[str], piped: list[str], scan: _Scan, depth: int) -> None:
    """One simple command: follow ``cd``, find the file it runs (``stdin``: its ``<``
    file; ``piped``: the words of the command piped into it)."""
    i = 0
    while i < len(words) and (words[i] in RESERVED or ("=" in words[i] and not words[i].startswith("="))):
        i += 1  # `if`, `{`, `!`, VAR=value before the program
    while i < len(words) and _base(words[i]) in WRAPPERS:
        program = _base(words[i])
        i += 1
        while i < len(words) and (words[i].startswith("-") or "=" in words[i]):
            i += 2 if words[i] in _OPTION_VALUES.get(program, ()) else 1
        if program == "timeout" and i < len(words) and re.fullmatch(r"\d+(?:\.\d+)?[smhd]?", words[i]):
            i += 1
    if i >= len(words):
        return
    program, args = words[i], words[i + 1:]
    name = _base(program)
    if name == "cd":
        target = next((a for a in args if not a.startswith("-")), None)
        scan.cwd = _join(scan.cwd, target) if target else PurePosixPath(".")
        return
    if "/" in program:
        _add(program, scan, missing_ok=True)
    if name in SOURCE:
        if args:
            _add(args[0], scan, missing_ok=True)
        return
    if name in MAKE:
        _make(args, scan)
        return
    shell = bool(SHELLS.fullmatch(name))
    if not shell and not INTERPRETERS.fullmatch(name):
        return
    values = _OPTION_VALUES.get("shell" if shell else "python" if name.startswith(("python", "pypy")) else name,
                                set())
    j = 0
    while j < len(args):
        arg = args[j]
        if shell and re.fullmatch(r"-[A-Za-z]*c[A-Za-z]*", arg):
            if j + 1 < len(args) and depth < MAX_DEPTH:
                _walk(args[j + 1], scan, depth + 1)  # sh -c 'sh check.sh': the inner command line
                for positional in args[j + 2:]:  # sh -c 'sh "$0"' check.sh
                    _add(positional, scan, missing_ok=False)
            return
        if not shell and arg in ("-c", "-e", "-E", "--eval", "-r"):
            return  # inline code, not a file
        if not shell and arg == "-m" and j + 1 < len(args):
            _module(args[j + 1], args[j + 2:], scan)
            return
        if arg.startswith(("-", "+")):
            j += 2 if arg in values else 1
            continue
        _add(arg, scan, missing_ok=True)
        return
    for source in stdin[:1]:  # ``sh < check.sh``: the script comes on stdin
        _add(source, scan, missing_ok=False)
    for word in piped[1:]:  # ``cat check.sh | sh``: what the command before the pipe reads
        if not word.startswith("-"):
            _add(word, scan, missing_ok=False)


def _module(module: str, rest: list[str], scan: _Scan) -> None:
    """``python -m MODULE …``: the module's file when it is in the workspace, and the
    ``.py`` files a test runner is given."""
    if module in MODULE_RUNNERS:
        for arg in rest:
            if arg.endswith(".py") and not arg.startswith("-"):
                _add(arg, scan, missing_ok=False)
        return
    if re.fullmatch(r"[A-Za-z_][\w.]*", module):
        base = module.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__main__.py"):
            if (scan.root / scan.cwd / candidate).is_file():
                _add(candidate, scan, missing_ok=False)
                return


def _make(args: list[str], scan: _Scan) -> None:
    """Every makefile ``make`` would read: ``-f FILE``, else the three names in its folder
    (``-C DIR``), present or not — a ``GNUmakefile`` the run adds is read before ``Makefile``."""
    folder = scan.cwd
    given: list[str] = []
    for j, arg in enumerate(args[:-1]):
        if arg in ("-C", "--directory"):
            folder = _join(folder, args[j + 1])
        if arg in ("-f", "--file", "--makefile"):
            given.append(args[j + 1])
    saved, scan.cwd = scan.cwd, folder
    for makefile in given or list(MAKEFILES):
        _add(makefile, scan, missing_ok=True)
    scan.cwd = saved


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _join(cwd: PurePosixPath, target: str) -> PurePosixPath:
    return PurePosixPath(target) if target.startswith("/") else cwd / target


def _add(word: str, scan: _Scan, *, missing_ok: bool) -> None:
    """Pin the workspace file(s) ``word`` names: a glob as its match set, a missing file
    (``missing_ok``: a script position) as ``missing``."""
    if len(scan.found) >= MAX_FILES or not word.strip():
        return
    word = _PWD.sub(lambda _: str(scan.root / scan.cwd), word)
    if any(c in word for c in "$`"):
        return
    if any(c in word for c in "*?["):
        if word.startswith("/"):
            return
        pattern = (scan.cwd / word).as_posix()
        if f"{GLOB_PREFIX}{pattern}" not in scan.found:
            scan.found.append(f"{GLOB_PREFIX}{pattern}")  # a file the run adds that the glob matches
        try:
            matches = sorted(scan.root.glob(pattern))[:MAX_FILES]
        except (ValueError, OSError, NotImplementedError):
            return
        for match in matches:  # and each file it matches now
            _add(str(match.relative_to(scan.root)), scan, missing_ok=False)
        return
    target = Path(word) if word.startswith("/") else scan.root / scan.cwd / word
    path = Path(os.path.normpath(target))
    try:
        relative = path.relative_to(scan.root)
    except ValueError:
        return
    if str(relative) in ("", ".") or str(relative) in scan.found:
        return
    if path.is_file() or path.is_symlink() or (missing_ok and not path.exists()):
        scan.found.append(str(relative))


def pin_files(paths: list[str], workspace: Path) -> dict[str, str]:
    """The pins of ``paths`` now (:func:`check_files`' keys).

    Returns:
        ``{key: pin}``: ``sha256:HEX`` for a file (``stat:SIZE:MTIME_NS`` over
        :data:`MAX_FILE_BYTES`), ``link:TARGET|PIN`` for a symlink, ``set:HEX`` (the SHA-256
        of the sorted matches) for a ``glob:`` key, ``missing`` when nothing is there.
    """
    root = workspace.resolve()
    pins: dict[str, str] = {}
    for key in paths:
        if key.startswith(GLOB_PREFIX):
            try:
                matches = sorted(str(p.relative_to(root)) for p in root.glob(key[len(GLOB_PREFIX):]))
            except (ValueError, OSError, NotImplementedError):
                matches = []
            pins[key] = "set:" + hashlib.sha256("\n".join(matches).encode()).hexdigest()
            continue
        pins[key] = _pin(workspace / key)
    return pins


def _pin(path: Path) -> str:
    try:
        if path.is_symlink():
            return f"link:{os.readlink(path)}|" + (_pin(path.resolve()) if path.exists() else "missing")
        if not path.is_file():
            return "missing"
        stat = path.stat()
        if stat.st_size > MAX_FILE_BYTES:
            return f"stat:{stat.st_size}:{stat.st_mtime_ns}"
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def changed_files(pins: dict[str, str], workspace: Path) -> list[str]:
    """The pinned keys whose pin differs now (a ``glob:`` key named by its pattern)."""
    now = pin_files(list(pins), workspace)
    return [rel for rel, pin in pins.items() if now.get(rel) != pin]
