"""The files a completion check command runs, pinned at the baseline (issue 16).

A check such as ``sh check.sh`` or ``python3 tests/check.py`` is only as good as the
file it runs, and that file is in the workspace the model edits. The files the check
command runs (:func:`check_files`: a program given by path, an interpreter's script,
also inside ``sh -c '…'``) are hashed (SHA-256) when the baseline is taken; when the run claims completion, a pinned file that changed,
appeared or disappeared means the check may have been rewritten to pass, so the run
cannot be VERIFIED_COMPLETE (it stops UNCERTAIN ``check_tampered``, naming the files).
Python checkers (``module:function``) are pinned separately by the loop policy.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import Path

MAX_FILES = 20
"""Files pinned per check command."""
MAX_FILE_BYTES = 8 * 1024 * 1024
"""A larger file is pinned by its size and modification time only (bytes)."""


SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})
"""Interpreters whose ``-c STRING`` is itself a command line (parsed in turn)."""
INTERPRETERS = re.compile(r"(?:python|pypy)[\d.]*|node(?:js)?|ruby|perl|php|lua[\d.]*|Rscript|tclsh|bun|"
                          r"(?:ba|da|z|k)?sh|ash")
"""Programs whose first non-option argument is the script they run."""
WRAPPERS = frozenset({"env", "exec", "command", "time", "nohup", "nice", "timeout", "xargs", "stdbuf", "builtin"})
"""Programs that run the rest of their arguments as a command."""
SOURCE = frozenset({".", "source"})
MAKE = frozenset({"make", "gmake"})
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
MAX_DEPTH = 4
"""Nested ``sh -c`` levels followed."""
_OPTION_VALUES = {"python": {"-W", "-X", "-Q"}, "timeout": {"-s", "-k", "--signal", "--kill-after"},
                  "nice": {"-n"}, "env": {"-u", "-C", "-S"}}
"""Options of a program that take the next word as their value."""


def check_files(command: str | None, workspace: Path) -> list[str]:
    """The workspace-relative paths of the regular files ``command`` runs (at most
    :data:`MAX_FILES`): a program given by a path (``./check.sh``), the script an
    interpreter runs (``sh check.sh``, ``python3 -u tests/check.py``, ``sh c*.sh`` — a
    glob expanded in the workspace — ``sh < check.sh``), what ``. FILE`` sources, a
    ``make``'s makefile, and the same inside ``sh -c '…'`` (nested up to
    :data:`MAX_DEPTH`) and behind ``env``/``timeout``/``nice``… Files a check only reads
    (``grep -q ok a.txt``) are not pinned: the model may be asked to change them (README
    "What verified has to earn"). Never raises."""
    if not command:
        return []
    found: list[str] = []
    _scan(command, workspace.resolve(), found, 0)
    return found[:MAX_FILES]


def _scan(command: str, root: Path, found: list[str], depth: int) -> None:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return
    simple: list[str] = []
    redirect_in: list[str] = []
    pending_redirect = False
    for word in [*words, ";"]:
        if word and all(c in "();<>|&" for c in word):
            if word == "<":
                pending_redirect = True
                continue
            if word in (">", ">>", "<<", "<<<", "<>", ">|", "&>", "2>", ">&"):
                pending_redirect = None  # the next word is an output target or a here-doc: skip it
                continue
            _simple(simple, redirect_in, root, found, depth)
            simple, redirect_in, pending_redirect = [], [], False
            continue
        if pending_redirect is True:
            redirect_in.append(word)
            pending_redirect = False
            continue
        if pending_redirect is None:
            pending_redirect = False
            continue
        simple.append(word)


def _simple(words: list[str], redirect_in: list[str], root: Path, found: list[str], depth: int) -> None:
    """One simple command: find the file it runs."""
    i = 0
    while i < len(words) and "=" in words[i] and not words[i].startswith("="):
        i += 1  # VAR=value before the program
    while i < len(words) and _base(words[i]) in WRAPPERS:
        program = _base(words[i])
        i += 1
        while i < len(words) and (words[i].startswith("-") or "=" in words[i]
                                  or (program == "timeout" and _is_duration(words[i]))):
            takes = words[i] in _OPTION_VALUES.get(program, set())
            if program == "timeout" and _is_duration(words[i]) and not words[i].startswith("-"):
                i += 1
                break
            i += 2 if takes else 1
    if i >= len(words):
        return
    program, args = words[i], words[i + 1:]
    name = _base(program)
    if "/" in program:
        _add(program, root, found)
    if name in SOURCE:
        if args:
            _add(args[0], root, found)
        return
    if name in MAKE:
        given = [args[j + 1] for j, a in enumerate(args[:-1]) if a in ("-f", "--file", "--makefile")]
        for makefile in given or [m for m in MAKEFILES if (root / m).is_file()][:1]:
            _add(makefile, root, found)
        return
    if not INTERPRETERS.fullmatch(name):
        return
    values = _OPTION_VALUES.get("python" if name.startswith(("python", "pypy")) else name, set())
    shell = name in SHELLS or name.endswith("sh")
    j = 0
    while j < len(args):
        arg = args[j]
        if arg in ("-c", "-e", "--command", "--eval") or (shell and re.fullmatch(r"-[A-Za-z]*c[A-Za-z]*", arg)):
            if shell and j + 1 < len(args) and depth < MAX_DEPTH:
                _scan(args[j + 1], root, found, depth + 1)  # sh -c 'sh check.sh': the inner command line
            return  # the program is inline code, not a file
        if arg == "-m":
            return  # a module (python -m pytest): not a file named here
        if arg.startswith("-"):
            j += 2 if arg in values else 1
            continue
        _add(arg, root, found)
        return
    for target in redirect_in[:1]:  # ``sh < check.sh``: the script comes on stdin
        _add(target, root, found)


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _is_duration(word: str) -> bool:
    return bool(re.fullmatch(r"\d+(?:\.\d+)?[smhd]?", word))


def _add(word: str, root: Path, found: list[str]) -> None:
    """Add the workspace file(s) ``word`` names (a glob is expanded inside the workspace)."""
    if not word.strip() or any(c in word for c in "$`") or len(found) >= MAX_FILES:
        return
    if any(c in word for c in "*?["):
        if word.startswith("/"):
            return
        try:
            matches = sorted(root.glob(word))[:MAX_FILES]
        except (ValueError, OSError, NotImplementedError):
            return
        for match in matches:
            _add(str(match.relative_to(root)) if match.is_relative_to(root) else "", root, found)
        return
    path = (root / word).resolve() if not word.startswith("/") else Path(word).resolve()
    try:
        relative = path.relative_to(root)
    except ValueError:
        return
    if path.is_file() and str(relative) not in found:
        found.append(str(relative))


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
