"""MCP tools as amos ``Tool``s, and the built-in ``mcp_read_resource`` (issue 18, "Tools").

Each tool a running server lists becomes one :class:`~amos.tools.Tool`:

- named ``mcp__SERVER__TOOL`` (shortened for providers when needed, the full name kept
  as ``display_name``; amos.mcp.naming);
- described by its input schema, checked and adapted (amos.mcp.schema), which the
  ``ToolManager`` validates arguments against before the call; a tool whose schema is
  unusable is left out with a notice naming it;
- effect ``unknown`` and permission ``ask`` — unless the server has
  ``"trust_annotations": true`` and the tool says ``readOnlyHint``, which makes it
  ``read`` and ``allow``; ``tools.NAME`` in the server config overrides the permission
  and the doom-loop ``loop_key`` and can leave the tool out;
- its results mapped by amos.mcp.results; ``isError`` is a failed outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amos.mcp.naming import tool_names
from amos.mcp.results import (
    render_call_result,
    render_resource,
    render_result_text,
    summarize_result,
)
from amos.mcp.schema import SchemaProblem, adapt_schema, check_schema
from amos.tools.base import Tool, ToolContext, ToolFailure

if TYPE_CHECKING:
    from amos.mcp.connection import ServerConnection

MAX_DESCRIPTION_CHARS = 4000
"""A tool description longer than this is cut (characters)."""

MAX_ERROR_CHARS = 16000
"""What an ``isError`` result keeps as the outcome's error (characters; content is capped too)."""

READ_RESOURCE = "mcp_read_resource"
"""The built-in tool reading a resource of a server that offers resources."""

MAX_LISTED_RESOURCES = 20
"""Resources named in ``mcp_read_resource``'s description."""


@dataclass(frozen=True)
class ToolEntry:
    """One MCP tool for display (``amos mcp tools``, ``/mcp``, the side panel).

    Attributes:
        name: the name providers and scripts use (maybe shortened).
        full_name: ``mcp__SERVER__TOOL``.
        server / tool: the server and the server's own tool name.
        effect / permission: as offered (permission before ``tools.permissions``).
        description: the first line of its description.
        included: False when it was left out (disabled, bad schema, duplicate).
        note: why it was left out, or None.
    """

    name: str
    full_name: str
    server: str
    tool: str
    effect: str
    permission: str
    description: str
    included: bool = True
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (``--json`` output)."""
        return dict(self.__dict__)


def build_tools(conn: ServerConnection) -> tuple[list[Tool], list[ToolEntry], list[str]]:
    """The amos tools of one running server.

    Args:
        conn: a connection whose ``listing`` is set.

    Returns:
        ``(tools, entries, notices)``: usable tools, one entry per listed tool (left-out
        ones too), and one-line notices for tools left out for a bad schema or name.
    """
    spec = conn.spec
    settings = spec.settings
    tools: list[Tool] = []
    entries: list[ToolEntry] = []
    notices: list[str] = []
    seen: set[str] = set()
    for listed in conn.listing.tools if conn.listing else []:
        raw_name = str(getattr(listed, "name", ""))
        name, full = tool_names(spec.name, raw_name)
        override = settings.tools.get(raw_name)
        annotations = getattr(listed, "annotations", None)
        read_only = bool(getattr(annotations, "read_only_hint", False))
        effect = "read" if settings.trust_annotations and read_only else "unknown"
        permission = (override.permission if override and override.permission else
                      "allow" if effect == "read" else "ask")
        description = _description(listed, spec.name)
        entry = ToolEntry(name, full, spec.name, raw_name, effect, permission, description.split("\n")[0][:200])
        note = None
        if override is not None and not override.enabled:
            note = "disabled in the config"
        elif name in seen:
            note = "the server lists this name twice"
        if note is None:
            try:
                adapted = adapt_schema(getattr(listed, "input_schema", None))
            except SchemaProblem as exc:
                note = str(exc)
                notices.append(f"MCP server {spec.name}: tool {raw_name!r} ({full}) left out: {exc}")
        if note is not None:
            entries.append(_left_out(entry, note))
            continue
        seen.add(name)
        strict = check_schema(adapted.original) if adapted.loosened else None
        tools.append(Tool(
            name=name,
            description=description,
            args_model=None,
            input_schema=adapted.offered,
            effect=effect,  # type: ignore[arg-type]
            run=_runner(conn, raw_name, full, strict),
            default_permission=permission,  # type: ignore[arg-type]
            render=render_result_text,
            manages_timeout=True,
            loop_key=override.loop_key if override is not None else None,
            summarize_result=summarize_result,
            timeout_s=float(settings.timeout_s) if settings.timeout_s is not None else None,
            display_name=full if full != name else None,
            permission_origin=(f"mcpServers.{spec.name}.tools.{raw_name}.permission"
                               if override and override.permission else None),
        ))
        entries.append(entry)
    return tools, entries, notices


def _left_out(entry: ToolEntry, note: str) -> ToolEntry:
    return ToolEntry(entry.name, entry.full_name, entry.server, entry.tool, entry.effect, entry.permission,
                     entry.description, included=False, note=note)


def _description(listed: Any, server: str) -> str:
    text = str(getattr(listed, "description", None) or getattr(listed, "title", None) or "").strip()
    if not text:
        text = f"Tool {getattr(listed, 'name', '?')} of MCP server {server}."
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[: MAX_DESCRIPTION_CHARS - 1] + "…"


def _runner(conn: ServerConnection, tool: str, full: str, strict: Any) -> Any:
    async def run(args: dict[str, Any], ctx: ToolContext) -> Any:
        if strict is not None:
            problems = list(strict.iter_errors(args))
            if problems:
                raise ToolFailure(f"invalid arguments for {full}: {problems[0].message}")
        limit = conn.spec.settings.timeout_s or ctx.command_timeout_s
        result = await conn.call_tool(tool, args, float(limit), label=f"the call to {tool}")
        value, text = render_call_result(result)
        if getattr(result, "is_error", False):
            text = text.strip() or "(no message)"
            if len(text) > MAX_ERROR_CHARS:
                text = text[:MAX_ERROR_CHARS] + f"… [{len(text) - MAX_ERROR_CHARS} characters cut]"
            raise ToolFailure(f"{full} reported an error: {text}")
        return value

    return run


def build_read_resource(conns: Sequence[ServerConnection]) -> Tool | None:
    """``mcp_read_resource(server, uri)`` over the running servers that offer resources, or None.

    Effect ``read`` and permission ``allow``: ``resources/read`` is defined by the MCP
    spec as reading data (unlike a tool, whose annotations are only hints). The
    description names up to ``MAX_LISTED_RESOURCES`` listed resources.
    """
    offering = {conn.spec.name: conn for conn in conns
                if conn.listing is not None and conn.listing.resources_supported}
    if not offering:
        return None
    lines = []
    for server, conn in offering.items():
        for resource in (conn.listing.resources if conn.listing else [])[:MAX_LISTED_RESOURCES - len(lines)]:
            name = getattr(resource, "name", "") or ""
            lines.append(f"- {server}: {getattr(resource, 'uri', '?')}" + (f" ({name})" if name else ""))
    description = ("Read a resource (a file, record or document) from an MCP server by its URI. "
                   f"Servers offering resources: {', '.join(offering)}.")
    if lines:
        description += " Known resources:\n" + "\n".join(lines)
    schema = {
        "type": "object",
        "properties": {
            "server": {"type": "string", "enum": list(offering), "description": "The MCP server name."},
            "uri": {"type": "string", "minLength": 1, "description": "The resource URI."},
        },
        "required": ["server", "uri"],
        "additionalProperties": False,
    }

    async def run(args: dict[str, Any], ctx: ToolContext) -> str:
        conn = offering[args["server"]]
        limit = conn.spec.settings.timeout_s or ctx.command_timeout_s
        result = await conn.read_resource(args["uri"], float(limit))
        return render_resource(result)

    return Tool(name=READ_RESOURCE, description=description, args_model=None, input_schema=schema,
                effect="read", run=run, default_permission="allow", manages_timeout=True,
                summarize=lambda args: f"{args.get('server')} {args.get('uri')}",
                summarize_result=summarize_result)


__all__ = ["ToolEntry", "build_tools", "build_read_resource", "READ_RESOURCE"]
