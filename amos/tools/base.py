"""Tool definitions, tool context and normalized outcomes (spec/tools.md).

A tool is a name, a pydantic model for its arguments (whose JSON schema is what the
model is offered and what arguments are validated against) or a raw JSON Schema (tools
from MCP servers, issue 18), a declared effect
(``read``, ``write`` or ``unknown`` — never inferred from the name), a default
permission and an async ``run``. The ``ToolManager`` (tools/manager.py) owns
validation, permissions, confinement, caps, timeouts and outcome normalization.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from amos.sandbox.bwrap import SandboxLauncher

Effect = Literal["read", "write", "unknown"]
Permission = Literal["allow", "ask", "deny"]
OutcomeStatus = Literal[
    "succeeded", "failed", "denied", "blocked", "cancelled", "timed_out", "not_started"
]
Completion = Literal["complete", "unknown"]


class ToolFailure(Exception):
    """Raised by a tool's ``run`` for a framework-level failure the model should see.

    The message is shown to the model as the tool error; it must name what was wrong
    (e.g. ``path 'a.txt' does not exist``). Application data that says "no" is not a
    failure: return it as a result instead (spec/tools.md "Outcomes").
    """


class ToolTimeout(ToolFailure):
    """Raised by a tool that enforces its own time limit (``Tool.manages_timeout``).

    The manager reports it as status ``timed_out`` (completion ``unknown`` for
    write/unknown effects). The message names the limit; ``partial`` is optional text
    the tool gathered before the limit (e.g. the output tails of a killed command),
    shown to the model after the message.

    Args:
        message: one line naming what timed out and after how long (seconds).
        partial: text gathered before the limit, or None.
    """

    def __init__(self, message: str, *, partial: str | None = None):
        super().__init__(message)
        self.partial = partial


class ToolEffectUncertain(ToolFailure):
    """Raised by a tool whose call broke off in a way that leaves its effect unknown.

    E.g. the MCP server running the call exited or its connection dropped mid-call
    (issue 18, ``uncertain_effect``). The manager reports status ``failed`` with
    completion ``unknown`` for write/unknown effects (``complete`` for reads).
    """


class ToolArgs(BaseModel):
    """Base class of tool argument models: unknown arguments are rejected."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class ToolContext:
    """What a tool may use while it runs.

    Attributes:
        workspace: resolved absolute root the file tools are confined to and the
            working directory of ``run_command``.
        command_timeout_s: upper bound of one call's run time (seconds).
        max_output_bytes: cap of what the model sees of one result (bytes).
        env: environment for child processes, already stripped of every provider
            key variable.
        sandbox: the launcher ``run_command`` runs commands in (issue 19); None runs
            them unsandboxed, as before.
        sandbox_escalation_approved: True in the context of one call whose request to
            run unsandboxed (``"sandbox": "none"``) a person approved; without it such a
            call still runs in the sandbox.
        hidden_paths: resolved paths the file tools refuse and folder walks skip, like
            the sandbox hides them from commands (``sandbox.hidden_paths`` and amos's own
            folders; issue 19).
    """

    workspace: Path
    command_timeout_s: float = 120.0
    max_output_bytes: int = 65536
    env: Mapping[str, str] = field(default_factory=dict)
    sandbox: SandboxLauncher | None = None
    sandbox_escalation_approved: bool = False
    hidden_paths: tuple[Path, ...] = ()


@dataclass(frozen=True)
class ToolSpec:
    """What a provider is told about a tool: name, description, JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Tool:
    """A tool definition.

    Attributes:
        name: unique tool name (a contract: scripts call tools by name).
        description: one paragraph the model sees.
        args_model: pydantic model of the arguments (subclass of ``ToolArgs``), or None
            for a tool described by ``input_schema``.
        effect: declared effect; ``unknown`` unless the tool is known to only read
            or to write.
        run: ``async (args, ctx) -> result``; the result is a ``str`` or a JSON value.
            Raises ``ToolFailure`` for failures the model should see.
        default_permission: used when config does not name the tool.
        summarize: one-line summary of validated arguments for progress lines.
        render: turns a JSON result into the text the model sees (default: compact
            JSON, or the string itself).
        manages_timeout: True when ``run`` enforces ``ctx.command_timeout_s`` itself
            (raising ``ToolTimeout``) and cleans up after itself; the manager then
            allows a short grace period beyond that limit before cancelling it.
        loop_key: what identifies a call for doom-loop detection
            (spec/doom-loop-behaviour.md §7): None (absent) → the full arguments;
            False → exempt; a list of argument names → that subset; a callable
            ``args -> key`` (returning None exempts the call).
        summarize_result: pure ``result -> str`` summary of a large result, used as
            its evidence projection (None: the tool's results are never projected).
        input_schema: a JSON Schema object (``{"type": "object", …}``) offered to the
            model and used to validate arguments instead of ``args_model``; ``run`` then
            receives the arguments as a ``dict``. The schema must already be valid.
        timeout_s: time limit of one call (seconds) instead of the context's
            ``command_timeout_s``; None uses the context's.
        display_name: the name shown on screen when ``name`` had to be shortened for
            providers (an MCP tool's full ``mcp__SERVER__TOOL``); None shows ``name``.
        permission_origin: the setting ``default_permission`` came from, shown in denials
            (``mcpServers.git.tools.git_commit.permission``); None says ``default``.
    """

    name: str
    description: str
    args_model: type[ToolArgs] | None
    effect: Effect
    run: Callable[[Any, ToolContext], Awaitable[Any]]
    default_permission: Permission = "ask"
    summarize: Callable[[Any], str] | None = None
    render: Callable[[Any], str] | None = None
    manages_timeout: bool = False
    loop_key: Any = None
    summarize_result: Callable[[Any], str] | None = None
    input_schema: Mapping[str, Any] | None = None
    timeout_s: float | None = None
    display_name: str | None = None
    permission_origin: str | None = None

    def __post_init__(self) -> None:
        if (self.args_model is None) == (self.input_schema is None):
            raise ValueError(f"tool {self.name!r} needs exactly one of args_model and input_schema")

    def spec(self) -> ToolSpec:
        """The provider-facing description of this tool (JSON schema of its arguments)."""
        if self.input_schema is not None:
            return ToolSpec(self.name, self.description, copy.deepcopy(dict(self.input_schema)))
        assert self.args_model is not None
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return ToolSpec(self.name, self.description, schema)


class ToolOutcome(BaseModel):
    """The normalized end of one tool call (spec/tools.md "Outcomes").

    Attributes:
        call_id: the model's call id.
        execution_id: the run execution this call belongs to.
        tool: tool name as the model sent it.
        effect: declared effect of the tool (``unknown`` for an unknown tool).
        status: framework outcome status.
        completion: ``unknown`` when a timed-out or cancelled write/unknown action may
            or may not have happened, else ``complete``.
        started_at / ended_at: ISO-8601 UTC timestamps.
        result: the tool's JSON result (None when it did not succeed).
        error: one line naming what went wrong (None when it succeeded).
        content: exactly what the model sees (capped, with a marker when cut).
        cut_bytes: how many bytes of the rendered result were cut by the cap.
    """

    model_config = ConfigDict(extra="forbid")

    call_id: str
    execution_id: str
    tool: str
    effect: Effect
    status: OutcomeStatus
    completion: Completion = "complete"
    started_at: str
    ended_at: str
    result: Any = None
    error: str | None = None
    content: str = ""
    cut_bytes: int = 0

    @property
    def duration_s(self) -> float:
        """Wall time of the call (seconds)."""
        from datetime import datetime

        try:
            return (
                datetime.fromisoformat(self.ended_at) - datetime.fromisoformat(self.started_at)
            ).total_seconds()
        except ValueError:
            return 0.0
