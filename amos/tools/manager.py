"""``ToolManager``: validation, timeouts, output caps and outcome normalization.

The manager turns one ``ToolCallPart`` into one ``ToolOutcome`` (spec/tools.md,
"Outcomes") and never raises for anything a tool or a model did wrong: unknown tools,
bad arguments, tool failures, timeouts and unexpected exceptions all become outcomes.
Only ``asyncio.CancelledError`` propagates, so the runner can cancel a call.

It does not decide approvals or parallelism: the runner asks ``permission()`` and
``effect()`` and then calls ``execute`` (safe to run concurrently; the manager keeps
no per-call state) or ``outcome_for`` for calls that never ran.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, get_args

from pydantic import ValidationError

from amos.messages import ToolCallPart
from amos.tools.base import (
    Completion,
    Effect,
    OutcomeStatus,
    Permission,
    Tool,
    ToolContext,
    ToolEffectUncertain,
    ToolFailure,
    ToolOutcome,
    ToolSpec,
    ToolTimeout,
)

SELF_TIMED_GRACE_S = 5.0
"""Extra seconds the manager allows a tool that enforces its own time limit."""

RAW_ARGUMENTS_SHOWN = 200
"""How many characters of undecodable raw arguments an error message shows."""

SUMMARY_CHARS = 100
"""Longest one-line call summary (characters)."""

_PERMISSIONS: tuple[str, ...] = get_args(Permission)


def now_iso() -> str:
    """The current time as an ISO-8601 UTC timestamp (``2025-01-31T12:00:00.123456+00:00``)."""
    return datetime.now(UTC).isoformat()


def cap_output(text: str, max_bytes: int) -> tuple[str, int]:
    """Cap ``text`` at ``max_bytes`` of UTF-8, cutting on a character boundary.

    Args:
        text: the full text.
        max_bytes: the cap (bytes); ``<= 0`` means no cap.

    Returns:
        ``(content, cut_bytes)``: the first ``max_bytes`` bytes (never half a character)
        followed by a marker line ``[… N bytes cut; showing the first M bytes …]`` when
        something was cut, and the number of bytes cut (0 when nothing was).
    """
    data = text.encode("utf-8", errors="replace")
    if max_bytes <= 0 or len(data) <= max_bytes:
        return text, 0
    head = data[:max_bytes].decode("utf-8", errors="ignore")
    kept = len(head.encode("utf-8"))
    cut = len(data) - kept
    separator = "" if head.endswith("\n") else "\n"
    return f"{head}{separator}[… {cut} bytes cut; showing the first {kept} bytes …]", cut


class ToolManager:
    """The set of tools of one run and the one place tool calls are executed.

    Args:
        tools: the tool definitions; names must be unique.
        permissions: config ``tools.permissions`` (tool name → ``allow``/``ask``/``deny``);
            tools it does not name use their default permission.
        context: what tools may use while they run (workspace, limits, child env).

    Raises:
        ValueError: two tools share a name, or a permission is not allow/ask/deny.
    """

    def __init__(
        self,
        tools: list[Tool],
        *,
        permissions: Mapping[str, Permission] | None = None,
        context: ToolContext,
    ):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools are named {tool.name!r}")
            self._tools[tool.name] = tool
        self._permissions: dict[str, Permission] = {}
        for name, value in (permissions or {}).items():
            if value not in _PERMISSIONS:
                raise ValueError(
                    f"permission of {name!r} is {value!r}; accepted: {', '.join(_PERMISSIONS)}"
                )
            self._permissions[name] = value
        self.context = context
        self._validators: dict[str, Any] = {}
        self._external: list[str] = []
        self.shadowed: list[str] = []
        """External tool names left out by :meth:`set_external` (a built-in has the name)."""

    def set_external(self, tools: list[Tool]) -> None:
        """Replace the tools added from outside amos (MCP servers) with ``tools``.

        Built-in tools keep their place; a name already used by a built-in tool is left
        out (the built-in wins). Called before a run builds its first request (issue 18).

        Args:
            tools: the external tools now offered, in order.

        Returns:
            None. The names left out because a built-in has them are in
            :attr:`shadowed`.
        """
        for name in self._external:
            self._tools.pop(name, None)
            self._validators.pop(name, None)
        self._external = []
        self.shadowed = []
        for tool in tools:
            if tool.name in self._tools:
                self.shadowed.append(tool.name)
                continue
            self._tools[tool.name] = tool
            self._validators.pop(tool.name, None)
            self._external.append(tool.name)

    # ------------------------------------------------------------ lookup

    def specs(self) -> list[ToolSpec]:
        """What the provider is told about each tool, in registration order."""
        return [tool.spec() for tool in self._tools.values()]

    def names(self) -> list[str]:
        """The tool names, in registration order."""
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def effect(self, name: str) -> Effect:
        """The declared effect of ``name``; ``unknown`` for a tool that does not exist."""
        tool = self._tools.get(name)
        return tool.effect if tool else "unknown"

    def loop_key(self, name: str) -> Any:
        """The tool's doom-loop ``loop_key`` declaration (None, i.e. absent, for unknown tools)."""
        tool = self.get(name)
        return tool.loop_key if tool is not None else None

    def permission(self, name: str) -> Permission:
        """The permission of ``name``: config first, else the tool's default.

        A tool that does not exist is always ``deny``.
        """
        tool = self._tools.get(name)
        if tool is None:
            return "deny"
        return self._permissions.get(name, tool.default_permission)

    def permission_source(self, name: str) -> str:
        """Where :meth:`permission` of ``name`` comes from: ``tools.permissions.NAME``,
        ``default`` (the tool's own) or ``unknown tool``."""
        tool = self._tools.get(name)
        if tool is None:
            return "unknown tool"
        if name in self._permissions:
            return f"tools.permissions.{name}"
        return tool.permission_origin or "default"

    # ------------------------------------------------------------ validation

    def validate(self, call: ToolCallPart) -> Any:
        """Check a call against its tool's argument model (or its ``input_schema``).

        Args:
            call: the model's tool call. ``arguments`` None with ``raw_arguments`` set
                means the model sent undecodable JSON; both None means no arguments.

        Returns:
            The validated arguments: an instance of the tool's ``args_model``, or a copy
            of the arguments ``dict`` for a tool with an ``input_schema``.

        Raises:
            ToolFailure: one line naming the problem: an unknown tool (with the list of
                available tools), arguments that were not valid JSON (with their first
                ~200 characters), arguments that are not an object, or missing, extra or
                wrongly typed fields (each named, with the expected type).
        """
        name = call.tool_name
        tool = self._tools.get(name)
        if tool is None:
            available = ", ".join(self._tools) or "none"
            raise ToolFailure(f"unknown tool {name!r}; available tools: {available}")
        arguments = call.arguments
        if arguments is None and call.raw_arguments is not None:
            raise ToolFailure(_invalid_json_message(name, call.raw_arguments))
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolFailure(
                f"arguments for {name} must be a JSON object, got {_json_type(arguments)}"
            )
        if tool.args_model is None:
            return self._validate_schema(tool, arguments)
        try:
            return tool.args_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolFailure(_validation_message(tool, exc)) from None

    def _validate_schema(self, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate against ``tool.input_schema`` (jsonschema, imported on first use)."""
        validator = self._validators.get(tool.name)
        if validator is None:
            from jsonschema.validators import validator_for

            schema = dict(tool.input_schema or {})
            validator = validator_for(schema)(schema)
            self._validators[tool.name] = validator
        try:
            problems = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        except Exception as exc:  # an unresolvable $ref and the like: the schema's fault
            raise ToolFailure(f"cannot check the arguments of {tool.name}: {_describe(exc)}") from None
        if problems:
            raise ToolFailure(_schema_message(tool, problems))
        return json.loads(json.dumps(arguments))

    # ------------------------------------------------------------ execution

    async def execute(
        self, call: ToolCallPart, execution_id: str, *, context: ToolContext | None = None
    ) -> ToolOutcome:
        """Validate and run one call, and normalize how it ended.

        The call runs with a time limit of the tool's ``timeout_s`` or else
        ``context.command_timeout_s`` seconds (plus ``SELF_TIMED_GRACE_S`` for tools that
        enforce the limit themselves).

        Args:
            call: the model's tool call.
            execution_id: the run execution this call belongs to.
            context: this call's context instead of the manager's (e.g. one whose
                ``sandbox_escalation_approved`` is True for an approved escalation).

        Returns:
            An outcome with status ``succeeded`` (result, rendered and capped content),
            ``failed`` (invalid call, ``ToolFailure``, or any other exception as
            ``"ExcType: message"``; completion ``unknown`` for a ``ToolEffectUncertain``
            of a write/unknown tool) or ``timed_out`` (completion ``unknown`` for write
            and unknown effects).

        Raises:
            asyncio.CancelledError: the call was cancelled; it is never swallowed.
        """
        started = now_iso()
        name = call.tool_name
        effect = self.effect(name)
        try:
            args = self.validate(call)
        except ToolFailure as exc:
            return self._outcome(call, execution_id, started, "failed", error=str(exc))
        tool = self._tools[name]
        ctx = context if context is not None else self.context
        limit = tool.timeout_s if tool.timeout_s is not None else ctx.command_timeout_s
        if tool.manages_timeout:
            limit += SELF_TIMED_GRACE_S
        unsure: Completion = "unknown" if effect in ("write", "unknown") else "complete"
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                result = await tool.run(args, ctx)
        except ToolTimeout as exc:
            content = str(exc) if not exc.partial else f"{exc}\n{exc.partial}"
            return self._outcome(
                call,
                execution_id,
                started,
                "timed_out",
                error=str(exc),
                content=content,
                completion=unsure,
            )
        except TimeoutError as exc:
            if scope.expired():
                message = f"{name} did not finish within {limit:g} s and was stopped"
                return self._outcome(
                    call, execution_id, started, "timed_out", error=message, completion=unsure
                )
            return self._outcome(call, execution_id, started, "failed", error=_describe(exc))
        except ToolEffectUncertain as exc:
            return self._outcome(
                call, execution_id, started, "failed", error=str(exc), completion=unsure
            )
        except ToolFailure as exc:
            return self._outcome(call, execution_id, started, "failed", error=str(exc))
        except Exception as exc:  # a tool bug must not crash the run
            return self._outcome(call, execution_id, started, "failed", error=_describe(exc))
        result = _jsonable(result)
        return self._outcome(
            call, execution_id, started, "succeeded", result=result, content=_render(tool, result)
        )

    def outcome_for(
        self,
        call: ToolCallPart,
        execution_id: str,
        status: OutcomeStatus,
        message: str,
        *,
        completion: Completion = "complete",
    ) -> ToolOutcome:
        """An outcome for a call that was not executed (denied, blocked, cancelled, …).

        Args:
            call: the model's tool call.
            execution_id: the run execution this call belongs to.
            status: usually ``denied``, ``blocked``, ``cancelled`` or ``not_started``.
            message: one line the model sees (also the outcome's ``error``).
            completion: ``complete`` unless the action may have happened.

        Returns:
            The outcome, with equal start and end timestamps.
        """
        return self._outcome(
            call, execution_id, now_iso(), status, error=message, completion=completion
        )

    def summarize(self, call: ToolCallPart) -> str:
        """A one-line summary of a call for progress display (``read_file calc.py``).

        Never raises and never exceeds ``SUMMARY_CHARS`` characters.
        """
        try:
            detail = ""
            tool = self._tools.get(call.tool_name)
            if isinstance(call.arguments, dict):
                detail = _generic_summary(call.arguments)
                if tool is not None and tool.summarize is not None:
                    try:
                        args = (call.arguments if tool.args_model is None
                                else tool.args_model.model_validate(call.arguments))
                        detail = tool.summarize(args)
                    except Exception:  # fall back to the generic summary
                        pass
            elif call.arguments is None and call.raw_arguments is not None:
                detail = "(arguments were not valid JSON)"
            shown = (tool.display_name if tool is not None else None) or call.tool_name
            text = " ".join(f"{shown} {detail}".split())
            return _shorten(text)
        except Exception:  # a summary must never break progress display
            return _shorten(str(getattr(call, "tool_name", "tool")))

    # ------------------------------------------------------------ internals

    def _outcome(
        self,
        call: ToolCallPart,
        execution_id: str,
        started: str,
        status: OutcomeStatus,
        *,
        result: Any = None,
        error: str | None = None,
        content: str | None = None,
        completion: Completion = "complete",
    ) -> ToolOutcome:
        text = content if content is not None else (error or "")
        capped, cut = cap_output(text, self.context.max_output_bytes)
        return ToolOutcome(
            call_id=call.call_id,
            execution_id=execution_id,
            tool=call.tool_name,
            effect=self.effect(call.tool_name),
            status=status,
            completion=completion,
            started_at=started,
            ended_at=now_iso(),
            result=result if status == "succeeded" else None,
            error=error,
            content=capped,
            cut_bytes=cut,
        )


# ---------------------------------------------------------------- helpers


def _describe(exc: BaseException) -> str:
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _render(tool: Tool, result: Any) -> str:
    if tool.render is not None:
        try:
            return tool.render(result)
        except Exception:  # fall back to the default rendering
            pass
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    """``value`` itself when it is JSON-serializable, else a JSON-safe copy (``str`` fallback)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=str))


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if value is None:
        return "null"
    return type(value).__name__


def _invalid_json_message(name: str, raw: str) -> str:
    reason = " (they held text that is not valid Unicode, e.g. a lone surrogate, which was replaced by '?')"
    try:
        json.loads(raw)
    except json.JSONDecodeError as exc:
        reason = f" ({exc.msg} at character {exc.pos})"
    except (TypeError, ValueError):
        reason = ""
    except RecursionError:
        reason = " (nested too deeply)"
    shown = raw[:RAW_ARGUMENTS_SHOWN] + ("…" if len(raw) > RAW_ARGUMENTS_SHOWN else "")
    return f"arguments for {name} were not valid JSON{reason}: {shown!r}"


def _schema_type(prop: Mapping[str, Any]) -> str:
    """A short human name of a JSON-schema property type (``integer or null``)."""
    if "type" in prop:
        kind = prop["type"]
        return " or ".join(kind) if isinstance(kind, list) else str(kind)
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " or ".join(_schema_type(option) for option in prop[key])
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    return "any value"


def _schema_message(tool: Tool, problems: list[Any]) -> str:
    """One line naming each jsonschema error (its field and what was wrong), at most five."""
    shown: list[str] = []
    for error in problems[:5]:
        where = ".".join(str(part) for part in error.absolute_path)
        text = " ".join(str(error.message).split())
        if len(text) > 160:
            text = text[:159] + "…"
        shown.append(f"field '{where}': {text}" if where else text)
    if len(problems) > 5:
        shown.append(f"and {len(problems) - 5} more")
    message = f"invalid arguments for {tool.name}: " + "; ".join(shown)
    properties = (tool.input_schema or {}).get("properties")
    if isinstance(properties, Mapping) and any(
        error.validator in ("required", "additionalProperties") for error in problems
    ):
        required = (tool.input_schema or {}).get("required") or []
        accepted = ", ".join(
            f"{field}{'' if field in required else '?'}: "
            f"{_schema_type(prop) if isinstance(prop, Mapping) else 'any value'}"
            for field, prop in properties.items()
        )
        message += f" (accepted fields: {accepted or 'none'})"
    return message


def _validation_message(tool: Tool, exc: ValidationError) -> str:
    assert tool.args_model is not None
    schema = tool.args_model.model_json_schema()
    properties: dict[str, Any] = schema.get("properties", {})
    problems: list[str] = []
    show_accepted = False
    for error in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in error.get("loc", ())) or "(arguments)"
        top = str(error["loc"][0]) if error.get("loc") else ""
        expected = _schema_type(properties[top]) if top in properties else None
        kind = error.get("type", "")
        if kind == "missing":
            problems.append(f"missing required field '{loc}' ({expected or 'any value'})")
            show_accepted = True
        elif kind == "extra_forbidden":
            problems.append(f"unexpected field '{loc}'")
            show_accepted = True
        else:
            got = json.dumps(error.get("input"), ensure_ascii=False, default=str)
            if len(got) > 60:
                got = got[:60] + "…"
            want = f" must be {expected}" if expected else ""
            problems.append(f"field '{loc}'{want}: {error.get('msg', 'invalid')} (got {got})")
    message = f"invalid arguments for {tool.name}: " + "; ".join(problems)
    if show_accepted:
        accepted = ", ".join(
            f"{field}{'' if field in schema.get('required', []) else '?'}: {_schema_type(prop)}"
            for field, prop in properties.items()
        )
        message += f" (accepted fields: {accepted or 'none'})"
    return message


def _generic_summary(arguments: Mapping[str, Any]) -> str:
    if not arguments:
        return ""
    for value in arguments.values():
        if isinstance(value, str) and value.strip():
            return value
    try:
        return json.dumps(arguments, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return ""


def _shorten(text: str) -> str:
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"
