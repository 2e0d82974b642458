"""The permission in force for one call: rules, the sandbox, plan mode (issue 19).

One pure function, :func:`decide_access`, combines what decides whether a call runs,
asks or is refused, in this order:

1. Plan mode refuses every tool that may change something (write effects, unknown
   effects, escalations), except ``run_command`` itself, which runs in the read-only
   sandbox — and is refused where the sandbox does not work.
2. A ``deny`` — a rule, or ``tools.permissions.NAME: deny`` — refuses.
3. A request to run a command outside the sandbox (``"sandbox": "none"``) always asks
   a person; ``--yes`` and allow rules never approve it.
4. An ``ask`` rule asks; an ``allow`` rule allows (naming the rule).
5. With no rule: ``run_command`` runs without asking when a working sandbox confines it
   (``workspace-write`` or ``read-only``), unless a config layer sets
   ``tools.permissions.run_command`` to ``ask`` explicitly; every other tool — and
   ``run_command`` without a working sandbox — keeps its configured permission.

The sandbox changes what commands may do, not what a person reviews: ``write_file``
and ``edit_file`` keep their configured permission in every mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from amos.permissions.rules import COMMAND_TOOL
from amos.permissions.ruleset import RuleSet

Permission = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class SandboxState:
    """The sandbox commands run in, as the permission decision sees it.

    Attributes:
        mode: the mode in force (``read-only``, ``workspace-write``,
            ``danger-full-access``); plan mode passes ``read-only``.
        available: the sandbox was tried once and works (always False for
            ``danger-full-access``, which has none).
        network: commands can reach the network.
    """

    mode: str = "danger-full-access"
    available: bool = False
    network: bool = True

    @property
    def confines(self) -> bool:
        """True when commands really run confined (a sandboxed mode that works)."""
        return self.available and self.mode != "danger-full-access"


@dataclass(frozen=True)
class Access:
    """The permission of one call and why.

    Attributes:
        permission: ``allow``, ``ask`` or ``deny``.
        source: what decided, for receipts and messages: ``rule``, ``plan mode``,
            ``sandbox``, ``sandbox escalation`` or the configured source
            (``tools.permissions.NAME``, ``default``, ``unknown tool``).
        rule: the rule text that decided (with ``rule_source``), or None.
        rule_source: where that rule came from (a config file, ``--allow``, ``session``).
        escalation: the call asks to run outside the sandbox: only a person approves it.
        reason: one line for a refusal or an ask that no rule gave, or None.
    """

    permission: Permission
    source: str
    rule: str | None = None
    rule_source: str | None = None
    escalation: bool = False
    reason: str | None = None

    @property
    def allowed_by(self) -> str | None:
        """What let the call run without asking, e.g. ``rule run_command(git status) (--allow)``,
        ``sandbox (workspace-write)``; None when it asks or is refused."""
        if self.permission != "allow":
            return None
        if self.rule is not None:
            return f"rule {self.rule} ({self.rule_source})"
        return self.source


def decide_access(
    tool_name: str,
    arguments: Any,
    *,
    effect: str,
    configured: Permission,
    configured_source: str,
    rules: RuleSet,
    workspace: Path,
    sandbox: SandboxState,
    plan: bool = False,
    explicit_command_ask: bool = False,
    escalation: bool = False,
) -> Access:
    """The permission in force for one call (see the module doc for the order).

    Args:
        tool_name: the call's tool name.
        arguments: the call's arguments (a JSON object, or anything a model sent).
        effect: the tool's effect (``read``, ``write``, ``unknown``).
        configured: the tool's configured permission (``tools.permissions`` or its default;
            ``deny`` for a tool that does not exist).
        configured_source: where ``configured`` came from.
        rules: the permission rules in force (config layers, flags, session grants).
        workspace: the workspace root (path rules).
        sandbox: the sandbox commands would run in.
        plan: plan mode is on.
        explicit_command_ask: a config layer sets ``tools.permissions.run_command: ask``.
        escalation: the call asks to run unsandboxed (``"sandbox": "none"``) while the
            sandbox confines commands.

    Returns:
        The :class:`Access`; never raises.
    """
    is_command = tool_name == COMMAND_TOOL
    if configured_source == "unknown tool":
        return Access(configured, configured_source)
    if plan and (escalation or (effect != "read" and not is_command)):
        what = "running a command outside the sandbox" if escalation else f"{tool_name} may change files"
        return Access("deny", "plan mode", reason=f"denied: plan mode ({what}); only reading and read-only "
                                                  "commands run — /plan off (or a run without --plan) makes changes")
    if plan and is_command and not sandbox.confines:
        return Access("deny", "plan mode", reason="denied: plan mode runs commands only in a read-only sandbox, "
                                                  "and the sandbox does not work here (see /permissions)")
    decided = rules.decide(tool_name, arguments, workspace=workspace)
    if decided.decision == "deny":
        return Access("deny", "rule", decided.rule, decided.source,
                      reason=f"denied by the rule {decided.rule} ({decided.source})")
    if configured == "deny":
        return Access("deny", configured_source, reason=f"denied: tool {tool_name} is set to deny ({configured_source})")
    if escalation:
        return Access("ask", "sandbox escalation", escalation=True,
                      reason="asks to run outside the sandbox: only a person can approve that")
    sandbox_allows = is_command and sandbox.confines and not (explicit_command_ask and configured == "ask")
    if decided.decision == "ask" and decided.rule is None and sandbox_allows:
        return Access("allow", f"sandbox ({sandbox.mode})")  # unreadable for the rules, confined anyway
    if decided.decision in ("ask", "allow"):
        return Access(decided.decision, "rule", decided.rule, decided.source, reason=decided.reason)
    if sandbox_allows:
        return Access("allow", f"sandbox ({sandbox.mode})")
    return Access(configured, configured_source)
