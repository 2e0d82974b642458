"""Rules from several layers, and the decision they give one tool call (issue 19).

Precedence is deny > ask > allow, whatever the layer: a deny anywhere wins. For
``run_command``:

- a deny or ask rule matches when it matches any part of the command line (also
  looking past wrappers such as ``env`` or ``sudo``, and in a rough split of a
  command the parser could not read);
- an allow rule set allows only when every part is matched by some allow command
  rule (or a bare ``run_command`` rule allows all commands), and a part that writes
  files through redirections matches no allow rule;
- a command the parser cannot read is never allowed by a command pattern: when an
  allow rule would have matched one of its recognisable parts, the decision is
  ``ask`` (no rule, with a reason).

Paths are normalised before matching (``~`` expanded, joined to the workspace,
``..`` folded, symlinks resolved when asked); a path outside the workspace matches no
allow rule, and with symlinks followed both the written and the resolved path must be
allowed.

Pure: the only disk access is resolving symlinks when ``follow_symlinks`` is set.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from amos.permissions.rules import COMMAND_TOOL, PATH_TOOLS, Rule, RuleError, parse_rule
from amos.permissions.shell import WRAPPERS, split_command

Kind = Literal["allow", "ask", "deny"]
KINDS: tuple[Kind, ...] = ("deny", "ask", "allow")
"""The rule kinds in order of precedence."""

_DEFAULT_PATHS = {"list_dir": ".", "search_text": "."}


@dataclass(frozen=True)
class Decision:
    """What the rules say about one call.

    Iterates as ``(decision, rule, source)``.

    Attributes:
        decision: ``allow``, ``ask``, ``deny``, or None when no rule speaks (the
            configured tool permission and the sandbox decide).
        rule: the rule text that decided (several joined with ``"; "`` when the parts
            of a compound command were allowed by different rules), or None.
        source: where the rule came from (``"; "``-joined likewise), or None.
        reason: one line for a decision no rule gave (an unparsable command).
    """

    decision: Kind | None
    rule: str | None = None
    source: str | None = None
    reason: str | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.decision, self.rule, self.source))


NO_DECISION = Decision(None)


@dataclass(frozen=True)
class SourcedRule:
    """A rule, its kind and where it came from.

    Attributes:
        kind: ``allow``, ``ask`` or ``deny``.
        rule: the parsed rule.
        source: a label such as ``user config``, ``./amos.json``, ``--allow``,
            ``session``.
    """

    kind: Kind
    rule: Rule
    source: str

    @property
    def text(self) -> str:
        """The rule as written."""
        return self.rule.text


def normalise_call_path(
    path: str, workspace: Path, *, follow_symlinks: bool = False
) -> str | None:
    """A tool's path argument as a workspace-relative POSIX path, or None when outside.

    Args:
        path: the path the call names (relative to the workspace, absolute, or ``~``).
        workspace: the workspace root (absolute).
        follow_symlinks: resolve symlinks (of the workspace and of the path's existing
            part) before making the path relative.

    Returns:
        ``"docs/a.md"``, ``"."`` for the root itself, or None for a path outside the
        workspace (or an empty one).
    """
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        return None
    root = os.path.abspath(workspace)
    target = os.path.join(root, os.path.expanduser(path))
    if follow_symlinks:
        root, target = os.path.realpath(root), os.path.realpath(target)
    target = os.path.normpath(target)
    rel = os.path.relpath(target, root)
    if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/")


class RuleSet:
    """The permission rules in force, in the order their layers were given.

    Args:
        rules: the rules; duplicates (same kind and text) keep the first source.
    """

    def __init__(self, rules: Iterable[SourcedRule] = ()):
        seen: dict[tuple[str, str], SourcedRule] = {}
        for rule in rules:
            seen.setdefault((rule.kind, rule.text), rule)
        self.rules: tuple[SourcedRule, ...] = tuple(seen.values())

    def __iter__(self) -> Iterator[SourcedRule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def with_rule(self, kind: Kind, text: str, source: str) -> RuleSet:
        """A new rule set with one more rule (a session grant, a ``--allow`` flag).

        Raises:
            RuleError: the rule is invalid.
            ValueError: ``kind`` is not allow, ask or deny.
        """
        if kind not in KINDS:
            raise ValueError(f"rule kind {kind!r} is unknown; accepted: allow, ask, deny")
        return RuleSet([*self.rules, SourcedRule(kind, parse_rule(text), source)])

    def listing(self) -> list[dict[str, str]]:
        """The rules for ``/permissions``: ``[{"kind", "rule", "source"}]``, deny first."""
        return [
            {"kind": kind, "rule": rule.text, "source": rule.source}
            for kind in KINDS
            for rule in self.rules
            if rule.kind == kind
        ]

    def decide(
        self,
        tool_name: str,
        arguments: Any,
        *,
        workspace: Path,
        follow_symlinks: bool = True,
    ) -> Decision:
        """What the rules say about one call (deny > ask > allow).

        Args:
            tool_name: the call's tool name.
            arguments: the call's arguments (a JSON object; anything else can only be
                matched by bare tool rules).
            workspace: the workspace root, for path rules.
            follow_symlinks: resolve symlinks in path arguments (see module doc).

        Returns:
            The decision and the rule and source that gave it; ``Decision(None)`` when
            no rule speaks.
        """
        relevant = [r for r in self.rules if r.rule.matches_tool(tool_name)]
        if not relevant:
            return NO_DECISION
        args = arguments if isinstance(arguments, Mapping) else {}
        if tool_name == COMMAND_TOOL:
            return _decide_command(relevant, args.get("command"))
        if tool_name in PATH_TOOLS:
            path = args.get("path", _DEFAULT_PATHS.get(tool_name))
            forms = _path_forms(path, workspace, follow_symlinks)
            return _decide_path(relevant, forms)
        for kind in KINDS:
            for rule in relevant:
                if rule.kind == kind and rule.rule.kind == "tool":
                    return Decision(kind, rule.text, rule.source)
        return NO_DECISION


def _path_forms(path: Any, workspace: Path, follow: bool) -> list[str | None]:
    if not isinstance(path, str):
        return [None]
    forms = [normalise_call_path(path, workspace)]
    if follow:
        forms.append(normalise_call_path(path, workspace, follow_symlinks=True))
    return forms


def _decide_path(relevant: list[SourcedRule], forms: list[str | None]) -> Decision:
    inside = [form for form in forms if form is not None]
    for kind in ("deny", "ask"):
        for rule in relevant:
            if rule.kind != kind:
                continue
            if rule.rule.kind == "tool" or any(rule.rule.matches_path(f) for f in inside):
                return Decision(kind, rule.text, rule.source)
    for rule in relevant:
        if rule.kind != "allow":
            continue
        if rule.rule.kind == "tool":
            return Decision("allow", rule.text, rule.source)
        if len(inside) == len(forms) and all(rule.rule.matches_path(f) for f in inside):
            return Decision("allow", rule.text, rule.source)
    return NO_DECISION


def _decide_command(relevant: list[SourcedRule], command: Any) -> Decision:
    split = split_command(command) if isinstance(command, str) else None
    parts = split.parts if split is not None else ()
    for kind in ("deny", "ask"):
        for rule in relevant:
            if rule.kind != kind:
                continue
            if rule.rule.kind == "tool" or any(rule.rule.matches_part(p, loose=True) for p in parts):
                return Decision(kind, rule.text, rule.source)
    allows = [rule for rule in relevant if rule.kind == "allow"]
    for rule in allows:
        if rule.rule.kind == "tool":
            return Decision("allow", rule.text, rule.source)
    if split is None or not parts:
        return NO_DECISION
    if not split.parsed:
        if any(rule.rule.matches_part(p, loose=True) for rule in allows for p in parts):
            return Decision("ask", None, None, reason=(
                f"the command could not be parsed ({split.error}), so no allow rule can "
                "cover all of it"))
        return NO_DECISION
    used: list[SourcedRule] = []
    for part in parts:
        rule = next((r for r in allows if r.rule.matches_part(part)), None)
        if rule is None:
            return NO_DECISION
        if rule not in used:
            used.append(rule)
    return Decision(
        "allow",
        "; ".join(r.text for r in used),
        "; ".join(dict.fromkeys(r.source for r in used)),
    )


def merge_rules(layers: Iterable[tuple[str, Any]]) -> RuleSet:
    """The rules of several config layers, each rule remembering its layer.

    Config files merge lists by replacing them; permission rules instead add up
    across layers (user config, trusted ``./amos.json``, ``--config``, command-line
    ``--allow``/``--deny``), so ``/permissions`` can show each rule and its source.

    Args:
        layers: ``(source, section)`` pairs in the order they apply; ``section`` is a
            ``PermissionsConfig``, a mapping with ``allow``/``ask``/``deny`` lists of
            rule strings, or None.

    Returns:
        The merged rule set (duplicates keep the first source).

    Raises:
        RuleError: a rule is invalid (the message names it).
    """
    rules: list[SourcedRule] = []
    for source, section in layers:
        if section is None:
            continue
        for kind in KINDS:
            items = section.get(kind) if isinstance(section, Mapping) else getattr(section, kind, None)
            for text in items or ():
                rules.append(SourcedRule(kind, parse_rule(text), source))
    return RuleSet(rules)


_RUNS_ANYTHING = frozenset({
    *WRAPPERS, "sh", "bash", "dash", "zsh", "ksh", "python", "python3", "node", "deno", "bun", "ruby", "perl",
    "php", "rm", "npx", "bunx", "uvx", "pipx", "dd", "chmod", "chown", "find", "curl", "wget",
})
"""Programs whose arguments are (or may run) any command, or that destroy: the "always"
answer offers the exact command, never a prefix pattern."""
_READ_ONLY_PROGRAMS = frozenset({"ls", "cat", "head", "tail", "wc", "grep", "rg", "pwd", "echo", "stat", "file",
                                 "du", "df", "tree", "which", "diff", "less", "sort", "uniq"})
"""Programs that only read: the "always" answer offers ``PROGRAM:*``."""
_RUNNER_PAIRS = frozenset({("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pnpm", "exec"),
                           ("pnpm", "dlx"), ("npm", "exec"), ("yarn", "dlx"), ("conda", "run")})


def suggest_rule(tool_name: str, arguments: Any) -> str | None:
    """A rule for "always allow this in this session" (the ``a`` answer), or None.

    ``run_command``: the command's first words and ``:*`` (``git status:*``,
    ``python -m pytest:*``, ``ls:*``), or the exact command for programs that run any
    command or destroy (``env``, ``timeout``, ``python3 -c``, ``rm``, ``uv run``…); None for
    a compound or unparsable command or one that writes files through redirections. Path tools: the exact path. Other
    tools: the bare tool name.

    Args:
        tool_name: the call's tool name.
        arguments: the call's arguments.

    Returns:
        A rule string :func:`parse_rule` accepts, or None.
    """
    args = arguments if isinstance(arguments, Mapping) else {}
    if tool_name == COMMAND_TOOL:
        command = args.get("command")
        split = split_command(command) if isinstance(command, str) else None
        if split is None or not split.parsed or len(split.parts) != 1 or split.parts[0].writes:
            return None
        words = list(split.parts[0].words)
        if not words or any("$" in w or "`" in w for w in words):
            return None
        program = words[0].rsplit("/", 1)[-1]
        keep = 0  # 0: the exact command only
        if len(words) > 2 and words[1] == "-m" and program not in WRAPPERS:
            keep = 3  # python -m pytest:*
        elif (len(words) > 1 and not words[1].startswith("-") and "/" not in words[1]
              and program not in _RUNS_ANYTHING and (program, words[1]) not in _RUNNER_PAIRS):
            keep = 2  # git status:*, npm test:*
        elif program in _READ_ONLY_PROGRAMS:
            keep = 1  # ls:*, cat:*
        shown = " ".join(shlex.quote(w) for w in (words[:keep] if keep else words))
        text = f"{COMMAND_TOOL}({shown}:*)" if keep else f"{COMMAND_TOOL}({shown})"
    elif tool_name in PATH_TOOLS:
        path = args.get("path", _DEFAULT_PATHS.get(tool_name))
        if not isinstance(path, str) or not path.strip():
            return None
        clean = path.strip()
        while clean.startswith("./"):
            clean = clean[2:]
        if clean in ("", "."):
            return tool_name
        escaped = "".join("\\" + c if c in "*?[]!#\\" else c for c in clean)
        text = f"{tool_name}(/{escaped})"
    else:
        text = tool_name
    try:
        parse_rule(text)
    except RuleError:
        return None
    return text


def rules_from_layers(layers: Iterable[tuple[str, Any]]) -> RuleSet:
    """The rules of every config layer: ``LoadedConfig.layers`` → :func:`merge_rules`.

    Args:
        layers: ``(label, layer data)`` pairs, the whole config data of each layer
            (its ``permissions`` section is read; layers without one are skipped).

    Returns:
        The merged rule set, each rule's source the layer's label.

    Raises:
        RuleError: a rule is invalid.
    """
    return merge_rules(
        (label, data.get("permissions") if isinstance(data, Mapping) else None)
        for label, data in layers
    )
