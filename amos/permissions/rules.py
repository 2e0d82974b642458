"""Permission rules in the shape Claude Code users write (issue 19, "Permission rules").

Accepted forms:

- ``read_file``: every call of that tool; ``mcp__git__*``: every tool whose name
  matches the glob (``*``, ``?``, ``[...]``).
- ``run_command(git status)``: that exact simple command (its words after quote
  removal); ``run_command(python -m pytest:*)``: the command and any arguments after
  those words (a word-wise prefix: ``pytest:*`` does not match ``pytestx``).
- ``write_file(docs/**)``, ``edit_file(src/*.py)``, ``read_file(*.md)``,
  ``list_dir(...)``, ``search_text(...)``: gitignore-style globs on the path the call
  names, relative to the workspace (``*`` stays inside a folder, ``**`` crosses them, a
  pattern without ``/`` matches at any depth, a leading ``/`` anchors at the root).

:func:`parse_rule` validates one rule; :meth:`Rule.matches_tool`,
:meth:`Rule.matches_part` and :meth:`Rule.matches_path` are the pure matchers the rule
set (amos/permissions/ruleset.py) combines.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from amos.permissions.shell import SimpleCommand, parse_words

COMMAND_TOOL = "run_command"
"""The tool whose specifier is a command pattern."""

PATH_TOOLS = ("read_file", "write_file", "edit_file", "list_dir", "search_text")
"""Tools whose specifier is a path glob, matched against their ``path`` argument."""

ACCEPTED_FORMS = (
    "TOOL or a tool-name glob (read_file, mcp__git__*), run_command(COMMAND), "
    "run_command(PREFIX:*), or TOOL(GLOB) for " + ", ".join(PATH_TOOLS)
)
"""What a rule may look like, for error messages."""

RuleKind = Literal["tool", "command", "path"]

_TOOL_PART = re.compile(r"[A-Za-z0-9_.*?\[\]-]+")
_RULE = re.compile(r"(?P<tool>[^()]*)(?:\((?P<spec>.*)\))?", re.DOTALL)


class RuleError(ValueError):
    """A permission rule that cannot be parsed.

    Attributes:
        rule: the rule as written.
        problem: what is wrong with it (one line, without the accepted forms).
    """

    def __init__(self, rule: str, problem: str):
        self.rule = rule
        self.problem = problem
        super().__init__(f"invalid permission rule {rule!r}: {problem}; accepted: {ACCEPTED_FORMS}")


@dataclass(frozen=True)
class Rule:
    """One parsed permission rule.

    Attributes:
        text: the rule as written (stripped), e.g. ``run_command(git status)``.
        tool: the tool name, or a tool-name glob for ``kind == "tool"``.
        kind: ``tool`` (bare name or glob), ``command`` or ``path``.
        words: the words of a command pattern (``("git", "status")``).
        prefix: True for a ``PREFIX:*`` command pattern.
        glob: the path glob of a path rule.
    """

    text: str
    tool: str
    kind: RuleKind
    words: tuple[str, ...] = ()
    prefix: bool = False
    glob: str | None = None
    _spec: Any = field(default=None, repr=False, compare=False)

    def matches_tool(self, tool_name: str) -> bool:
        """Whether this rule is about ``tool_name`` (a glob for bare rules)."""
        if self.kind == "tool":
            return fnmatch.fnmatchcase(tool_name, self.tool)
        return tool_name == self.tool

    def matches_part(self, part: SimpleCommand, *, loose: bool = False) -> bool:
        """Whether a command pattern matches one simple command.

        Args:
            part: one simple command of the call's command line.
            loose: also match the words after assignments and wrappers
                (``env``, ``sudo``, ``xargs``…), and ignore output redirections: for
                deny and ask rules, which should catch more, never for allow.

        Returns:
            False for rules that are not command patterns.
        """
        if self.kind != "command":
            return False
        candidates = [part.words]
        if loose:
            candidates.append(part.unwrapped())
            # /bin/rm is rm: deny and ask rules look at the program's name too
            candidates += [(w[0].rsplit("/", 1)[-1], *w[1:]) for w in list(candidates) if w and "/" in w[0]]
        elif part.writes:
            return False
        n = len(self.words)
        for words in candidates:
            if words == self.words or (self.prefix and words[:n] == self.words):
                return True
        return False

    def matches_path(self, rel_path: str) -> bool:
        """Whether a path rule's glob matches a workspace-relative path (``docs/a.md``)."""
        if self.kind != "path" or self._spec is None:
            return False
        return bool(self._spec.match_file(rel_path))


def _tool_glob(text: str, tool: str) -> str:
    if not _TOOL_PART.fullmatch(tool):
        raise RuleError(text, "a tool name may hold only letters, digits, _ . - and the globs * ? [ ]")
    return tool


def _command_rule(text: str, spec: str) -> Rule:
    body = spec.strip()
    prefix = body.endswith(":*")
    if prefix:
        body = body[:-2].rstrip()
    if not body:
        raise RuleError(text, "the command pattern is empty (a bare run_command matches every command)")
    words = parse_words(body)
    if words is None:
        raise RuleError(
            text, "a command pattern must be one simple command, without &&, ;, |, $( ), "
            "backticks or redirections (rules match each part of a compound command)",
        )
    if words[-1] == "*":
        hint = " ".join(words[:-1]) or "COMMAND"
        raise RuleError(text, f"to match any arguments write run_command({hint}:*)")
    return Rule(text, COMMAND_TOOL, "command", words=words, prefix=prefix)


def _path_rule(text: str, tool: str, spec: str) -> Rule:
    import pathspec

    glob = spec.strip()
    if not glob:
        raise RuleError(text, "the path glob is empty (a bare tool name matches every path)")
    if glob.startswith("!"):
        raise RuleError(text, "negated globs (!) are not accepted; use a deny or ask rule")
    if glob.startswith("~") or glob.startswith("//"):
        raise RuleError(text, "path globs are relative to the workspace")
    if ".." in re.split(r"[/\\]", glob):
        raise RuleError(text, "path globs are relative to the workspace; '..' is not accepted")
    if "\n" in glob or "\x00" in glob:
        raise RuleError(text, "a path glob must be one line")
    try:
        compiled = pathspec.GitIgnoreSpec.from_lines([glob])
    except Exception as exc:  # pathspec raises several error types
        raise RuleError(text, f"not a valid gitignore-style glob ({exc})") from None
    return Rule(text, tool, "path", glob=glob, _spec=compiled)


def parse_rule(text: str) -> Rule:
    """Parse one permission rule.

    Args:
        text: a rule such as ``run_command(python -m pytest:*)``, ``write_file(docs/**)``
            or ``mcp__git__*``.

    Returns:
        The rule.

    Raises:
        RuleError: the rule is empty, malformed, gives a specifier to a tool that has
            none, or its command pattern or glob is invalid; the message names the
            rule, what is wrong and the accepted forms.
    """
    if not isinstance(text, str):
        raise RuleError(str(text), "a rule must be a string")
    stripped = text.strip()
    if not stripped:
        raise RuleError(text, "the rule is empty")
    if "\n" in stripped or "\x00" in stripped:
        raise RuleError(text, "a rule must be one line")
    match = _RULE.fullmatch(stripped)
    if match is None:
        raise RuleError(text, "unbalanced parentheses")
    tool, spec = match["tool"].strip(), match["spec"]
    if not tool:
        raise RuleError(text, "the tool name is missing")
    if spec is None:
        return Rule(stripped, _tool_glob(text, tool), "tool")
    if tool == COMMAND_TOOL:
        return _command_rule(stripped, spec)
    if tool in PATH_TOOLS:
        return _path_rule(stripped, tool, spec)
    _tool_glob(text, tool)
    raise RuleError(
        text, f"only run_command and {', '.join(PATH_TOOLS)} take a (...) specifier; "
        f"write {tool} alone to match all its calls",
    )
