"""A tool call described once: :class:`PlannedCall` (issue 15 "one call identity").

Before a tool round passes its calls through the gates, each call is planned: looked
up, validated, and given its effect, permission, one-line summary and its two
digests. The gates and the round read these facts from the planned call; nothing asks
the tool manager for them again.

- ``identity``: the full-argument identity (:func:`amos.policy.canonical.call_identity`,
  ``sha256(tool + "\\n" + JCS(arguments))``), used by approvals ("never ask the same
  question twice", session approvals) and loop-policy admission.
- ``loop_fingerprint``: the doom-loop fingerprint of the call's loop-key material
  (spec/doom-loop-behaviour.md §3 and §7), which may ignore arguments such as
  ``run_command``'s ``timeout_s``.

Both are computed lazily and at most once per call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from amos.messages import ToolCallPart
from amos.permissions.access import Access
from amos.policy.canonical import CanonicalizationError, call_identity, fingerprint_tool_call
from amos.tools.base import Effect, Permission, Tool
from amos.tools.manager import ToolManager

if TYPE_CHECKING:
    from amos.engine.access import CallAccess

log = logging.getLogger("amos.doom_loop")


@dataclass(frozen=True)
class LoopKey:
    """A call's doom-loop key, resolved once (spec/doom-loop-behaviour.md §7, §8 "Rounds").

    Attributes:
        exempt: the call is not scored (``loop_key`` False, or a callable returning None).
        declared: fingerprint of the key material for the round declaration, or None
            when it cannot be fingerprinted (then ``declare_error`` says why).
        scored: fingerprint the call is scored with: the key material's, else the full
            arguments'; None when neither can be fingerprinted (the call goes unscored).
    """

    exempt: bool
    declared: str | None = None
    scored: str | None = None
    declare_error: Exception | None = None


@dataclass(eq=False)
class PlannedCall:
    """One tool call of a round with every fact the gates need.

    Attributes:
        call: the call as recorded in the transcript (cleaned and masked).
        tool: its definition, or None for a tool that does not exist.
        valid: the call validates against its tool's arguments (invalid calls fail at
            execution, unasked).
        effect: the tool's declared effect (``unknown`` for an unknown tool).
        permission: ``allow`` / ``ask`` / ``deny`` in force for the call.
        permission_source: where the permission came from (``tools.permissions``, a
            rule, the tool's default) — shown in receipts and denials.
        summary: a one-line summary for people.
        access: the whole permission decision (rule, escalation, why; issue 19), or
            None when planned without rules (the configured permission alone).
    """

    call: ToolCallPart
    tool: Tool | None
    valid: bool
    effect: Effect
    permission: Permission
    summary: str
    permission_source: str | None = None
    access: Access | None = None
    _loop_key_decl: Any = field(default=None, repr=False)

    @property
    def escalation(self) -> bool:
        """The call asks to run a command outside the sandbox (only a person approves it)."""
        return self.access is not None and self.access.escalation

    @property
    def call_id(self) -> str:
        """The model's call id (unique in the session)."""
        return self.call.call_id

    @property
    def tool_name(self) -> str:
        """The tool name as the model sent it."""
        return self.call.tool_name

    @property
    def arguments(self) -> Any:
        """The decoded arguments, or the raw argument string when they were not valid JSON."""
        return self.call.raw_arguments if self.call.raw_arguments is not None else self.call.arguments

    @cached_property
    def identity(self) -> str | None:
        """The full-argument identity (None: the arguments are not JSON data)."""
        return call_identity(self.tool_name, self.arguments)

    @cached_property
    def loop_key(self) -> LoopKey:
        """The doom-loop key, resolved and fingerprinted once."""
        from amos.policy.doom_loop import resolve_loop_key_material

        resolution = resolve_loop_key_material(self._loop_key_decl, self.arguments)
        if resolution.warning:
            log.debug("loop_key fallback: %s", resolution.warning)
        if resolution.kind == "exempt":
            return LoopKey(exempt=True)
        material = resolution.key_material
        declared = error = None
        try:
            declared = fingerprint_tool_call(self.tool_name, material)
        except (CanonicalizationError, TypeError, ValueError) as exc:
            error = exc
        scored = declared
        if scored is None:
            try:  # an unhashable key is scored with the full arguments (spec §8)
                scored = fingerprint_tool_call(self.tool_name, self.arguments)
            except (CanonicalizationError, TypeError, ValueError):
                scored = None
        return LoopKey(exempt=False, declared=declared, scored=scored, declare_error=error)


class CallPlanner:
    """Plans the calls of a round against the tool set in force.

    Args:
        tools: the tool manager (definitions, permissions, summaries).
        access: permission rules, the sandbox and plan mode (None: the configured
            permission of each tool alone).
    """

    def __init__(self, tools: ToolManager, access: CallAccess | None = None):
        self.tools = tools
        self.access = access

    def plan(self, call: ToolCallPart) -> PlannedCall:
        """The planned form of ``call`` (never raises)."""
        tools = self.tools
        tool = tools.get(call.tool_name)
        try:
            tools.validate(call)
            valid = True
        except Exception:  # noqa: BLE001 - an invalid call fails at execution, unasked
            valid = False
        effect = tools.effect(call.tool_name)
        permission, source = tools.permission(call.tool_name), tools.permission_source(call.tool_name)
        access = None
        if self.access is not None:
            access = self.access.decide(call.tool_name, call.arguments, effect=effect, configured=permission,
                                        configured_source=source)
            permission, source = access.permission, access.source
        return PlannedCall(call=call, tool=tool, valid=valid, effect=effect, permission=permission,
                           summary=tools.summarize(call), permission_source=source, access=access,
                           _loop_key_decl=tool.loop_key if tool is not None else None)
