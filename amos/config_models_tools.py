"""Config models of the tool side: MCP servers, the command sandbox and permission rules.

Split out of :mod:`amos.config_models` (issues 18 and 19); :class:`amos.config_models.AmosConfig`
holds them and :mod:`amos.config` re-exports the public names.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from amos.config_types import EnvName, Permission, Seconds, Text, ToolName, _Model
from amos.permissions.rules import ACCEPTED_FORMS, RuleError, parse_rule
from amos.sandbox.modes import DEFAULT_HIDDEN_PATHS, DEFAULT_MODE, SandboxMode, normalise_path

_MCP_SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _check_mcp_server_name(value: str) -> str:
    if not _MCP_SERVER_NAME.fullmatch(value):
        raise ValueError("an MCP server name must be 1-64 letters, digits, '_', '.' or '-', "
                         "starting with a letter or digit")
    return value


McpServerName = Annotated[str, AfterValidator(_check_mcp_server_name)]
"""The key of one ``mcpServers`` entry; tools of the server become ``mcp__NAME__TOOL``."""
HeaderName = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]


class McpToolConfig(_Model):
    """Overrides for one tool of an MCP server, keyed by the server's own tool name (issue 18)."""

    enabled: bool = True
    """Offer this tool to the model; false leaves it out."""
    permission: Permission | None = None
    """``allow``, ``ask`` or ``deny``; null: ``allow`` for a trusted read-only tool, else ``ask``."""
    loop_key: Literal[False] | list[Annotated[str, Field(min_length=1)]] | None = None
    """Doom-loop identity: null (the full arguments), false (exempt) or argument names."""


class McpServerConfig(_Model):
    """One MCP server (the Claude Code ``mcpServers`` layout plus amos's keys; issue 18).

    ``${VAR}`` and ``${VAR:-default}`` in ``command``, ``args``, ``env``, ``url`` and
    ``headers`` are replaced from the environment when the server starts.
    """

    type: Text | None = None
    """``stdio``, ``http`` (streamable HTTP) or ``sse``; null: ``stdio`` with a command, else ``http``."""
    command: Text | None = None
    """Program of a stdio server (looked up on PATH)."""
    args: list[str] = Field(default_factory=list)
    """Arguments of a stdio server."""
    env: dict[EnvName, str] = Field(default_factory=dict)
    """Variables added to a stdio server's minimal environment (values are secrets)."""
    url: Text | None = None
    """Endpoint of an http or sse server."""
    headers: dict[HeaderName, str] = Field(default_factory=dict)
    """HTTP headers sent to an http or sse server (values are secrets)."""
    enabled: bool = True
    """Start this server; false keeps it listed but stopped."""
    trust_annotations: bool = False
    """Believe the server's ``readOnlyHint``: such tools get effect ``read`` and ``allow``."""
    start_timeout_s: Seconds = 30
    """Time limit of starting the server and listing its tools, seconds."""
    timeout_s: Seconds | None = None
    """Time limit of one tool call, seconds; null uses ``tools.command_timeout_s``."""
    tools: dict[ToolName, McpToolConfig] = Field(default_factory=dict)
    """Per-tool overrides, keyed by the server's tool name."""
def _check_sandbox_path(value: str) -> str:
    return str(normalise_path(value))


SandboxPath = Annotated[str, AfterValidator(_check_sandbox_path)]
"""An absolute path or one starting with ``~``; stored expanded and normalised."""


def _default_hidden_paths() -> list[str]:
    return [str(normalise_path(path)) for path in DEFAULT_HIDDEN_PATHS]


class SandboxConfig(_Model):
    """The command sandbox: bubblewrap on Linux (issue 19)."""

    mode: SandboxMode = DEFAULT_MODE
    """``read-only``, ``workspace-write`` (the workspace and a private /tmp writable) or
    ``danger-full-access`` (no sandbox)."""
    network: bool = False
    """Let sandboxed commands reach the network (and the host's 127.0.0.1 servers)."""
    writable_paths: list[SandboxPath] = Field(default_factory=list)
    """Folders or files writable besides the workspace in ``workspace-write`` (absolute or ~)."""
    hidden_paths: list[SandboxPath] = Field(default_factory=_default_hidden_paths)
    """Paths sandboxed commands cannot read (absolute or ~); setting it replaces the defaults.
    amos's own config and data folders and agent sockets are hidden in any case."""

    @field_validator("writable_paths")
    @classmethod
    def _not_root(cls, value: list[str]) -> list[str]:
        if "/" in value:
            raise ValueError("must not hold / (that is danger-full-access)")
        return value


def _check_rule(value: str) -> str:
    try:
        parse_rule(value)
    except RuleError as exc:
        raise ValueError(f"invalid rule: {exc.problem}; accepted: {ACCEPTED_FORMS}") from None
    return value.strip()


PermissionRule = Annotated[str, AfterValidator(_check_rule)]
"""One permission rule, e.g. ``run_command(python -m pytest:*)`` (amos/permissions/rules.py)."""


class PermissionsConfig(_Model):
    """Permission rules; deny wins over ask over allow; rules add up across layers."""

    allow: list[PermissionRule] = Field(default_factory=list)
    """Calls that run without asking, e.g. ``run_command(git status)``, ``write_file(docs/**)``."""
    ask: list[PermissionRule] = Field(default_factory=list)
    """Calls that always ask, even where the sandbox would let them run."""
    deny: list[PermissionRule] = Field(default_factory=list)
    """Calls that are refused, naming the rule."""
