"""``run_command`` and the sandbox: escalation requests and what a result records (issue 19).

The permission gate asks :func:`wants_unsandboxed` (and shows
:func:`escalation_justification`) before a call runs; receipts take
:func:`sandbox_use`; ``run_command`` adds the ``sandbox`` key and the denial note
through :func:`add_sandbox_result`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from amos.sandbox.denials import denial_note
from amos.tools.base import ToolContext

RUN_COMMAND_NAME = "run_command"
"""The tool's name (a contract: scripts and permission rules call it by name)."""


def wants_unsandboxed(tool_name: str, arguments: Any) -> bool:
    """Whether a tool call asks to run a command outside the sandbox (issue 19).

    The permission gate uses it before the call runs: such a call needs an approval
    that names the escalation (``--yes`` never gives it), and then runs with a context
    whose ``sandbox_escalation_approved`` is True.

    Args:
        tool_name: the call's tool name.
        arguments: the call's raw arguments (any JSON value; not validated here).

    Returns:
        True for ``run_command`` with ``"sandbox": "none"``.
    """
    return (
        tool_name == RUN_COMMAND_NAME
        and isinstance(arguments, Mapping)
        and arguments.get("sandbox") == "none"
    )


def escalation_justification(arguments: Any) -> str | None:
    """The model's one-line reason for running unsandboxed, or None (for the approval prompt)."""
    if not isinstance(arguments, Mapping):
        return None
    value = arguments.get("justification")
    if not isinstance(value, str) or not value.strip():
        return None
    return " ".join(value.split())[:500]


def sandbox_use(args: Any, ctx: ToolContext) -> dict[str, Any] | None:
    """How ``args`` runs under ``ctx``: what receipts record of the call (issue 19).

    Args:
        args: the validated call (``RunCommandArgs``).
        ctx: the call's context.

    Returns:
        None when the context has no launcher (no sandbox configured or available:
        the command runs as before, after asking). Otherwise
        ``{"mode": str, "network": bool, "escalated": bool}`` where ``mode`` is the
        launcher's mode, or ``"none"`` for an approved escalation (``escalated`` True).
    """
    launcher = ctx.sandbox
    if launcher is None:
        return None
    if getattr(args, "sandbox", None) == "none" and ctx.sandbox_escalation_approved:
        return {"mode": "none", "network": True, "escalated": True}
    return {"mode": launcher.mode, "network": launcher.network, "escalated": False}


def add_sandbox_result(
    result: dict[str, Any],
    use: dict[str, Any],
    args: Any,
    ctx: ToolContext,
    with_notes: Callable[[str, list[str]], str],
) -> None:
    """Record in ``result`` how the command ran; add notes when the sandbox got in the way.

    Args:
        result: ``run_command``'s result dict; ``stderr`` gets the notes and a
            ``sandbox`` key ``{"mode", "network", "escalated", "blocked"}`` is added.
        use: what :func:`sandbox_use` said for the call.
        args: the validated ``RunCommandArgs``.
        ctx: the call's context.
        with_notes: appends note lines to a stream's text.
    """
    notes = []
    blocked = False
    policy = ctx.sandbox.policy if ctx.sandbox is not None else None
    if getattr(args, "sandbox", None) == "none" and not use["escalated"]:
        notes.append("[amos: ran in the sandbox: running it unsandboxed was not approved]")
    sandboxed = policy is not None and policy.sandboxed and not use["escalated"]
    if sandboxed and result["exit_code"] == 1 and result["stderr"].startswith("bwrap: "):
        notes.append("[amos: the sandbox (bubblewrap) failed to start the command; see above]")
    elif sandboxed and policy is not None:
        note = denial_note(
            result["stderr"], result["exit_code"], mode=policy.mode, network=policy.network,
            hidden_paths=policy.hidden_paths, workspace=ctx.workspace,
        )
        if note is not None:
            blocked = True
            notes.append(note)
    result["stderr"] = with_notes(result["stderr"], notes)
    result["sandbox"] = {**use, "blocked": blocked}
