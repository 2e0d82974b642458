"""Who may run what: permission rules, the command sandbox and plan mode (issue 19).

:class:`CallAccess` is the engine's one place for the facts
:func:`amos.permissions.access.decide_access` combines: the rules of every config
layer and of the command line (``--allow`` / ``--deny``), the grants a person gave in
this process (the ``a`` answer: never saved), the sandbox (probed once; one launcher
per mode, so ``/plan`` can switch to ``read-only`` and back) and plan mode. The call
planner asks it for every call; the loop gives each run the tool context of the
mode in force; the receipt takes :meth:`CallAccess.in_force`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from amos.permissions import RuleSet, parse_rule, rules_from_layers
from amos.permissions.access import Access, Permission, SandboxState, decide_access
from amos.policy.stop import SandboxInForce
from amos.sandbox import SandboxLauncher, SandboxPolicy, SandboxProbe
from amos.tools.command_sandbox import wants_unsandboxed

PLAN_NOTE = (
    "Plan mode is on: do not change anything. Read what you need (files, read-only commands — "
    "commands run in a read-only sandbox), then answer with a numbered plan of the changes you would "
    "make, the files involved and how to check the result. Write tools are refused in plan mode."
)
"""Added to the instructions of every request while plan mode is on."""


class CommandSandbox:
    """The sandbox commands run in: the configured policy, the probe, a launcher per mode.

    Args:
        policy: the configured policy (``sandbox.*`` and ``--sandbox``).
        probe: whether bwrap works here (None when no sandboxed mode was asked for,
            so it was never tried).
    """

    def __init__(self, policy: SandboxPolicy, probe: SandboxProbe | None):
        self.policy = policy
        self.probe = probe
        self._launchers: dict[str, SandboxLauncher] = {}

    @property
    def works(self) -> bool:
        """The sandbox was tried and works here."""
        return bool(self.probe and self.probe.available)

    def state(self, plan: bool) -> SandboxState:
        """What commands would run in: ``read-only`` in plan mode, else the configured mode."""
        mode = "read-only" if plan else self.policy.mode
        if mode == "danger-full-access":
            return SandboxState(mode, available=False, network=True)
        return SandboxState(mode, available=self.works, network=self.policy.network or not self.works)

    def launcher(self, plan: bool) -> SandboxLauncher | None:
        """The launcher of the mode in force, or None when commands run unsandboxed."""
        state = self.state(plan)
        if not state.confines:
            return None
        launcher = self._launchers.get(state.mode)
        if launcher is None:
            policy = dataclasses.replace(self.policy, mode=state.mode)  # type: ignore[arg-type]
            bwrap = self.probe.bwrap if self.probe is not None else None
            launcher = self._launchers[state.mode] = SandboxLauncher(policy, bwrap=bwrap)
        return launcher

    def hidden(self, workspace: Path | None = None) -> tuple[Path, ...]:
        """The hidden paths, as written and resolved (the file tools compare resolved paths),
        without those that hold the workspace: the workspace itself stays usable (as in
        the sandbox), e.g. the demo's copy under amos's data folder."""
        found: dict[Path, None] = {}
        for path in self.policy.hidden_paths:
            found[Path(path)] = None
            try:
                found[Path(path).resolve()] = None
            except (OSError, RuntimeError):
                pass
        if workspace is not None:
            root = workspace.resolve()
            return tuple(h for h in found if not (root == h or root.is_relative_to(h)))
        return tuple(found)

    def close(self) -> None:
        """Remove every launcher's private folder."""
        for launcher in self._launchers.values():
            launcher.close()
        self._launchers.clear()


class CallAccess:
    """Permission rules, session grants, the sandbox and plan mode of one host.

    Args:
        rules: the rules of the config layers and the command line.
        sandbox: the command sandbox.
        workspace: the workspace root (path rules).
        explicit_command_ask: a config layer sets ``tools.permissions.run_command: ask``
            (the sandbox then does not make commands run unasked).
        plan: start in plan mode (``--plan``).
    """

    def __init__(self, rules: RuleSet, sandbox: CommandSandbox, workspace: Path, *,
                 explicit_command_ask: bool = False, plan: bool = False):
        self.rules = rules
        self.grants = RuleSet()
        self._in_force = rules  # the rules and the grants, combined when a grant is added
        self.sandbox = sandbox
        self.workspace = workspace
        self.explicit_command_ask = explicit_command_ask
        self.plan = plan

    def decide(self, tool_name: str, arguments: Any, *, effect: str, configured: Permission,
               configured_source: str, rules_apply: bool = True) -> Access:
        """The permission in force for one call (see :mod:`amos.permissions.access`);
        ``rules_apply`` False gives what a call no rule speaks of gets (``/tools``)."""
        state = self.sandbox.state(self.plan)
        rules = self._in_force if rules_apply else RuleSet()
        return decide_access(
            tool_name, arguments, effect=effect, configured=configured, configured_source=configured_source,
            rules=rules, workspace=self.workspace, sandbox=state, plan=self.plan,
            explicit_command_ask=self.explicit_command_ask,
            escalation=state.confines and wants_unsandboxed(tool_name, arguments))

    def grant(self, rule: str) -> str:
        """Allow calls matching ``rule`` for the rest of this process (the ``a`` answer).

        Returns:
            The rule as parsed.

        Raises:
            RuleError: the rule is invalid.
        """
        self.grants = self.grants.with_rule("allow", rule, "this session (answered 'a')")
        self._in_force = RuleSet([*self.rules, *self.grants])
        return parse_rule(rule).text

    def set_plan(self, on: bool) -> None:
        """Turn plan mode on or off for later runs (``/plan``, ``/plan off``); the sandbox
        is tried now if it never was (plan mode runs commands ``read-only``)."""
        if on and self.sandbox.probe is None:
            from amos.sandbox import probe_sandbox

            self.sandbox.probe = probe_sandbox()
        self.plan = bool(on)

    def tool_context(self, context: Any) -> Any:
        """``context`` (a :class:`~amos.tools.ToolContext`) with the launcher of the mode in
        force and the hidden paths the file tools refuse (none in ``danger-full-access``)."""
        launcher = self.sandbox.launcher(self.plan)
        hidden = (self.sandbox.hidden(self.workspace) if self.sandbox.state(self.plan).mode != "danger-full-access"
                  else ())
        if context.sandbox is launcher and context.hidden_paths == hidden:
            return context
        return dataclasses.replace(context, sandbox=launcher, hidden_paths=hidden)

    def in_force(self) -> SandboxInForce:
        """The receipt's ``sandbox`` field for a run starting now."""
        state = self.sandbox.state(self.plan)
        return SandboxInForce(mode=state.mode, available=state.confines, network=state.network, plan=self.plan)

    def instructions_note(self) -> str:
        """What the instructions say about the mode ("" outside plan mode)."""
        return PLAN_NOTE if self.plan else ""

    def listing(self) -> dict[str, Any]:
        """``/permissions``: the rules with their sources, the sandbox and plan mode."""
        state = self.sandbox.state(self.plan)
        probe = self.sandbox.probe
        return {
            "rules": [*self.rules.listing(), *self.grants.listing()],
            "sandbox": {"mode": state.mode, "configured_mode": self.sandbox.policy.mode,
                        "available": state.confines, "network": state.network,
                        "problem": probe.message if probe is not None and not probe.available else None},
            "plan": self.plan,
            "explicit_command_ask": self.explicit_command_ask,
        }

    def close(self) -> None:
        """Remove the sandbox's private folders."""
        self.sandbox.close()


def explicit_command_ask(layers: Iterable[tuple[str, Any]]) -> bool:
    """Whether any config layer sets ``tools.permissions.run_command`` to ``ask``."""
    for _label, data in layers:
        tools = data.get("tools") if isinstance(data, dict) else None
        permissions = tools.get("permissions") if isinstance(tools, dict) else None
        if isinstance(permissions, dict) and permissions.get("run_command") == "ask":
            return True
    return False


def build_access(config: Any, layers: list[tuple[str, Any]], workspace: Path, *, mode: str | None,
                 plan: bool, allow: Iterable[str] = (), deny: Iterable[str] = (),
                 warnings: list[str]) -> CallAccess:
    """The host's :class:`CallAccess`: rules from the layers and flags, the sandbox probed once.

    Args:
        config: the loaded config (``sandbox.*``).
        layers: ``LoadedConfig.layers`` (rules add up across layers).
        workspace: the workspace root.
        mode: ``--sandbox MODE`` (None: ``sandbox.mode``).
        plan: ``--plan``.
        allow / deny: ``--allow`` / ``--deny`` patterns.
        warnings: gets one line when a sandbox was asked for but does not work here.

    Raises:
        ConfigError: a rule is invalid (names where it came from, exit 2).
        UsageError: ``mode`` is not a mode name.
    """
    from amos.errors import ConfigError, UsageError
    from amos.permissions import RuleError
    from amos.sandbox import MODES, probe_sandbox, sandbox_policy

    if mode is not None and mode not in MODES:
        raise UsageError(f"--sandbox {mode!r} is not a sandbox mode; accepted: {', '.join(MODES)}")
    try:
        rules = rules_from_layers(layers)
    except RuleError as exc:
        raise ConfigError(str(exc), json_path="permissions") from None
    for kind, flag, items in (("allow", "--allow", allow), ("deny", "--deny", deny)):
        for text in items:
            try:
                rules = rules.with_rule(kind, text, flag)  # type: ignore[arg-type]
            except RuleError as exc:
                raise UsageError(f"{flag}: {exc}") from None
    policy = sandbox_policy(config, mode=mode)  # type: ignore[arg-type]
    probe = None
    if policy.sandboxed or plan:
        probe = probe_sandbox()
        if not probe.available:
            warnings.append(f"{probe.message} — until then every command asks before it runs "
                            "(sandbox.mode \"danger-full-access\" in the config silences this)")
    return CallAccess(rules, CommandSandbox(policy, probe), workspace,
                      explicit_command_ask=explicit_command_ask(layers), plan=plan)
