"""Tools: definitions, the ``ToolManager`` and the built-in tools (spec/tools.md).

Importing this package has no side effects and pulls in neither Textual nor any
provider SDK.
"""

from __future__ import annotations

from amos.tools.base import (
    Completion,
    Effect,
    OutcomeStatus,
    Permission,
    Tool,
    ToolArgs,
    ToolContext,
    ToolEffectUncertain,
    ToolFailure,
    ToolOutcome,
    ToolSpec,
    ToolTimeout,
)
from amos.tools.command import RUN_COMMAND, SANDBOXED_RUN_COMMAND, child_env, render_command_result
from amos.tools.command_sandbox import escalation_justification, sandbox_use, wants_unsandboxed
from amos.tools.files import EDIT_FILE, LIST_DIR, READ_FILE, WRITE_FILE
from amos.tools.manager import ToolManager, cap_output
from amos.tools.search import SEARCH_TEXT
from amos.tools.workspace import resolve_in_workspace


def builtin_tools(*, sandboxed: bool = False) -> list[Tool]:
    """The built-in tools, in the order the model is offered them.

    Args:
        sandboxed: commands run in the sandbox, so ``run_command`` offers the escalation
            arguments (``"sandbox": "none"`` with a ``justification``; issue 19).

    Returns:
        A new list: ``read_file``, ``list_dir``, ``search_text``, ``write_file``,
        ``edit_file``, ``run_command``.
    """
    return [READ_FILE, LIST_DIR, SEARCH_TEXT, WRITE_FILE, EDIT_FILE, SANDBOXED_RUN_COMMAND if sandboxed else RUN_COMMAND]


__all__ = [
    "Completion",
    "Effect",
    "OutcomeStatus",
    "Permission",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolEffectUncertain",
    "ToolFailure",
    "ToolManager",
    "ToolOutcome",
    "ToolSpec",
    "ToolTimeout",
    "builtin_tools",
    "cap_output",
    "child_env",
    "escalation_justification",
    "render_command_result",
    "resolve_in_workspace",
    "sandbox_use",
    "wants_unsandboxed",
]
