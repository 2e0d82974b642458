"""Permission rules: ``permissions.allow`` / ``ask`` / ``deny`` patterns (issue 19).

- :mod:`amos.permissions.rules`: :func:`parse_rule` and :class:`Rule` (the accepted
  forms: ``read_file``, ``mcp__git__*``, ``run_command(git status)``,
  ``run_command(python -m pytest:*)``, ``write_file(docs/**)``).
- :mod:`amos.permissions.shell`: :func:`split_command`, a command line → its simple
  commands (bashlex).
- :mod:`amos.permissions.ruleset`: :class:`RuleSet` (``decide`` → :class:`Decision`),
  :func:`merge_rules` (layers with their sources) and :func:`suggest_rule`.

Pure and without side effects; bashlex and pathspec are imported when a rule is
parsed or a command is split.
"""

from __future__ import annotations

from amos.permissions.rules import (
    ACCEPTED_FORMS,
    COMMAND_TOOL,
    PATH_TOOLS,
    Rule,
    RuleError,
    parse_rule,
)
from amos.permissions.ruleset import (
    KINDS,
    NO_DECISION,
    Decision,
    Kind,
    RuleSet,
    SourcedRule,
    merge_rules,
    normalise_call_path,
    rules_from_layers,
    suggest_rule,
)
from amos.permissions.shell import SimpleCommand, SplitCommand, split_command

__all__ = [
    "ACCEPTED_FORMS",
    "COMMAND_TOOL",
    "KINDS",
    "NO_DECISION",
    "PATH_TOOLS",
    "Decision",
    "Kind",
    "Rule",
    "RuleError",
    "RuleSet",
    "SimpleCommand",
    "SourcedRule",
    "SplitCommand",
    "merge_rules",
    "normalise_call_path",
    "parse_rule",
    "rules_from_layers",
    "split_command",
    "suggest_rule",
]
