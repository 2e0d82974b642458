"""What front ends see of permissions and the sandbox: ``host.permissions`` (issue 19).

A small facade over :class:`~amos.engine.access.CallAccess` for ``/permissions``,
``/plan``, the shell's "always" answer and the TUI; usable on a host without one
(every list empty, no sandbox).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amos.errors import SlashCommandError

if TYPE_CHECKING:
    from amos.engine.access import CallAccess


class PermissionsControl:
    """The permission rules, sandbox and plan mode of one host.

    Args:
        access: the engine's access collaborator, or None.
        idle: raises when a run is in progress (plan mode changes between runs only).
    """

    def __init__(self, access: CallAccess | None, idle: Any = None):
        self._access = access
        self._idle = idle

    def listing(self) -> dict[str, Any]:
        """``{"rules": [{"kind", "rule", "source"}], "sandbox": {"mode", "configured_mode",
        "available", "network", "problem"}, "plan": bool, "explicit_command_ask": bool}``."""
        if self._access is None:
            return {"rules": [], "sandbox": {"mode": "danger-full-access", "configured_mode": "danger-full-access",
                                             "available": False, "network": True, "problem": None},
                    "plan": False, "explicit_command_ask": False}
        return self._access.listing()

    @property
    def plan(self) -> bool:
        """Plan mode is on for the next run."""
        return bool(self._access is not None and self._access.plan)

    def set_plan(self, on: bool) -> None:
        """Turn plan mode on or off for the next runs (``/plan``, ``/plan off``).

        Raises:
            SlashCommandError: ``UNAVAILABLE`` on a host without permission control.
            SessionError: ``busy`` while a run is in progress.
        """
        if self._access is None:
            raise SlashCommandError("plan mode is not available in this session", code="UNAVAILABLE")
        if self._idle is not None:
            self._idle()
        self._access.set_plan(on)

    def grant(self, rule: str) -> str:
        """Allow calls matching ``rule`` for the rest of this process (never saved).

        Returns:
            The rule text in force.

        Raises:
            SlashCommandError: ``BAD_RULE`` naming what is wrong and the accepted forms;
                ``UNAVAILABLE`` on a host without permission control.
        """
        from amos.permissions import RuleError

        if self._access is None:
            raise SlashCommandError("permission rules are not available in this session", code="UNAVAILABLE")
        try:
            return self._access.grant(rule)
        except RuleError as exc:
            raise SlashCommandError(str(exc), code="BAD_RULE") from None
