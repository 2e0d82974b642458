"""A shell command split into the simple commands it runs (issue 19, "Permission rules").

A command pattern such as ``run_command(git status)`` must match every part of a
compound command: each simple command of ``&&``, ``||``, ``;``, ``|``, ``&``, newlines,
subshells, ``{ }`` groups, ``if``/``for``/``while`` bodies, and each command inside
``$( )``, backticks and ``<( )``. :func:`split_command` parses with ``bashlex`` (a real
bash parser); what it cannot parse (``[[ ]]``, ``case``, ``$(( ))``, ``time``, a
heredoc whose body holds a substitution) comes back with ``parsed=False`` and a rough
split that deny and ask rules may still recognise but allow rules must never trust.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_ROUGH_SPLIT = re.compile(r"&&|\|\||;;?|\|&?|&|\n|\$\(|<\(|>\(|`|\(|\)|\{|\}")
_ROUGH_REDIRECT = re.compile(r"\d*(?:<<<|<<-?|>>|&>>?|>&|<&|>\||<>|<|>)")
_ROUGH_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac",
     "!", "time", "[[", "]]", "coproc", "function", "select", "in"}
)
WRAPPERS = frozenset(
    {"env", "command", "builtin", "exec", "nohup", "nice", "time", "sudo", "doas", "xargs",
     "timeout", "stdbuf", "setsid", "ionice", "chrt", "taskset", "watch", "strace", "eval"}
)
"""Commands that run their arguments as a command: deny and ask rules look past them."""


@dataclass(frozen=True)
class SimpleCommand:
    """One simple command of a shell command line.

    Attributes:
        words: its words after quote removal, leading ``NAME=value`` assignments
            included (``("FOO=1", "git", "status")``); expansions stay as written.
        writes: files its output redirections write to (``/dev/null`` and the standard
            streams do not count); a command that writes files matches no allow rule.
    """

    words: tuple[str, ...]
    writes: tuple[str, ...] = ()

    def unwrapped(self) -> tuple[str, ...]:
        """``words`` without leading assignments and wrappers (``env X=1 nice -n 5 rm a`` → ``rm a``).

        For deny and ask rules only: a wrapper's own options and numeric arguments are
        skipped as well, which is a heuristic.
        """
        words = list(self.words)
        while words:
            head = words[0]
            if _is_assignment(head):
                words.pop(0)
            elif head.rsplit("/", 1)[-1] in WRAPPERS and len(words) > 1:
                words.pop(0)
                while words and (words[0].startswith("-") or _is_assignment(words[0])
                                 or re.fullmatch(r"[0-9.]+[smhd]?", words[0])):
                    words.pop(0)
            else:
                break
        return tuple(words)


@dataclass(frozen=True)
class SplitCommand:
    """The simple commands of one command line.

    Attributes:
        parts: every simple command, outer ones first, then those inside substitutions.
        parsed: False when the parser failed: ``parts`` is then a rough split on shell
            operators, good enough to recognise a denied command, never to allow one.
        error: one line saying why parsing failed (None when ``parsed``).
    """

    parts: tuple[SimpleCommand, ...]
    parsed: bool = True
    error: str | None = None


def _is_assignment(word: str) -> bool:
    return re.match(r"[A-Za-z_][A-Za-z0-9_]*\+?=", word) is not None


def _children(node: Any) -> list[Any]:
    found: list[Any] = []
    for name in ("parts", "list"):
        found += list(getattr(node, name, None) or [])
    for name in ("command", "output", "heredoc"):
        child = getattr(node, name, None)
        if child is not None and hasattr(child, "kind"):
            found.append(child)
    return found


class _Opaque(Exception):
    """A construct whose commands cannot be seen (a heredoc body with a substitution).

    ``parts`` are commands recognised inside it all the same (for deny and ask rules).
    """

    def __init__(self, message: str, parts: tuple[SimpleCommand, ...] = ()):
        super().__init__(message)
        self.parts = parts


_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})
_MAX_NESTING = 4


def _shell_script(command: SimpleCommand) -> str | None:
    """The script of ``sh -c SCRIPT`` (also after wrappers), else None."""
    words = command.unwrapped()
    if not words or words[0].rsplit("/", 1)[-1] not in _SHELLS:
        return None
    for index, word in enumerate(words[1:-1], start=1):
        if word.startswith("-") and not word.startswith("--") and "c" in word:
            return words[index + 1]
    return None


def _collect(node: Any, out: list[SimpleCommand], depth: int = 0) -> None:
    kind = getattr(node, "kind", "")
    if kind == "heredoc":
        value = str(getattr(node, "value", ""))
        if "$(" in value or "`" in value:
            raise _Opaque("a heredoc body holds a command substitution")
        return
    if kind == "command":
        words: list[str] = []
        writes: list[str] = []
        for part in node.parts:
            if part.kind in ("word", "assignment"):
                words.append(part.word)
            elif part.kind == "redirect":
                target = getattr(part, "output", None)
                if (part.type in _WRITE_REDIRECTS and hasattr(target, "word")
                        and target.word not in _HARMLESS_TARGETS):
                    writes.append(target.word)
        simple = SimpleCommand(tuple(words), tuple(writes))
        out.append(simple)
        script = _shell_script(simple)
        if script is not None:  # `bash -c "..."`: its commands are parts too
            inner = _split(script, depth + 1)
            out.extend(inner.parts)
            if not inner.parsed:
                raise _Opaque(f"a shell -c script could not be parsed ({inner.error})", inner.parts)
    for child in _children(node):
        _collect(child, out, depth)


def _rough_split(command: str) -> tuple[SimpleCommand, ...]:
    parts: list[SimpleCommand] = []
    for piece in _ROUGH_SPLIT.split(command):
        try:
            words = shlex.split(piece, comments=True)
        except ValueError:
            words = piece.split()
        while words and words[0] in _ROUGH_KEYWORDS:
            words.pop(0)
        kept: list[str] = []
        skip_next = False
        for word in words:
            operator = _ROUGH_REDIRECT.match(word)
            if skip_next:
                skip_next = False
            elif operator is None:
                kept.append(word)
            else:
                skip_next = operator.end() == len(word)  # "> file": the target follows
        if kept:
            parts.append(SimpleCommand(tuple(kept)))
    return tuple(parts)


def parse_words(text: str) -> tuple[str, ...] | None:
    """The words of ``text`` when it is exactly one simple command, else None.

    Used for command patterns: no operators, substitutions or redirections.
    """
    import bashlex

    try:
        nodes = bashlex.parse(text)
    except Exception:  # bashlex raises several error types, some not exported
        return None
    if len(nodes) != 1 or nodes[0].kind != "command":
        return None
    words: list[str] = []
    for part in nodes[0].parts:
        if part.kind not in ("word", "assignment"):
            return None
        if any(sub.kind in ("commandsubstitution", "processsubstitution")
               for sub in getattr(part, "parts", None) or []):
            return None
        words.append(part.word)
    return tuple(words) or None


def split_command(command: str) -> SplitCommand:
    """Split ``command`` into its simple commands with bashlex.

    The script of ``sh -c SCRIPT`` (``bash``, ``dash``…) is split as well and its
    commands added to the parts, a few levels deep.

    Args:
        command: a shell command line as ``run_command`` gets it.

    Returns:
        The parts (``parsed=True``), or a rough split with ``parsed=False`` and the
        parser's complaint when bashlex cannot parse it. Never raises.
    """
    return _split(command, 0)


def _split(command: str, depth: int) -> SplitCommand:
    import bashlex  # lazy: only permission checks pay for the parser

    if not command.strip():
        return SplitCommand(())
    if depth > _MAX_NESTING:
        return SplitCommand(_rough_split(command), parsed=False, error="nested too deeply")
    try:
        nodes = bashlex.parse(command)
        parts: list[SimpleCommand] = []
        for node in nodes:
            _collect(node, parts, depth)
    except _Opaque as exc:
        return SplitCommand(_rough_split(command) + exc.parts, parsed=False, error=str(exc))
    except Exception as exc:  # bashlex raises ParsingError, NotImplementedError, others
        message = " ".join(str(exc).split())[:120] or type(exc).__name__
        return SplitCommand(_rough_split(command), parsed=False, error=message)
    hidden = _hidden_commands(command, parts)
    if hidden is not None:  # commands bashlex does not show: never allowed by a pattern
        return SplitCommand(tuple(parts) + _rough_split(command), parsed=False, error=hidden)
    return SplitCommand(tuple(parts))


def _hidden_commands(command: str, parts: list[SimpleCommand]) -> str | None:
    """Why some command of ``command`` may be invisible in ``parts``, else None: a
    substitution inside a parameter expansion (``${x:=$(rm a)}``, which bashlex does not
    split out) or a command word that is itself an expansion (``$RM -f a``)."""
    if "${" in command and ("$(" in command or "`" in command):
        return "a parameter expansion holds a command substitution"
    for part in parts:
        words = part.unwrapped()
        if words and ("$" in words[0] or "`" in words[0]):
            return f"the command word {words[0]!r} is an expansion"
    return None
