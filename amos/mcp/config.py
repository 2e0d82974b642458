"""Which MCP servers a run may start: ``mcpServers`` of amos's config and a project ``.mcp.json``.

Issue 18, "Configuration in the format users already have". Two sources, merged per
server name, later wins key by key (amos's usual merge):

1. ``<project>/.mcp.json`` (the Claude Code layout ``{"mcpServers": {NAME: {…}}}``), read
   only once trusted like ``./amos.json`` (``amos config trust``). Other tools write
   this file too, so unknown keys (top level or in a server) are warnings and a server
   name amos cannot use is skipped with a warning.
2. ``mcpServers`` in amos's own config (user config, trusted ``./amos.json``,
   ``--config``), validated with the rest of the config (amos.config_models).

``${VAR}`` and ``${VAR:-default}`` in ``command``, ``args``, ``env``, ``url`` and
``headers`` are replaced from the environment; an unset variable without a default, or
an unsupported ``type``, makes that one server unstartable (``McpServerSpec.problem``)
and the others go on. Structural mistakes (a missing command, a wrong value type) raise
``ConfigError`` naming the file, the server and the field (exit 2).

Nothing here imports the MCP SDK.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from amos.errors import ConfigError

MCP_JSON_NAME = ".mcp.json"
"""The project file Claude Code and others write: ``<project>/.mcp.json``."""

TRANSPORTS = ("stdio", "http", "sse")
"""Supported ``type`` values (``streamable-http`` / ``streamableHttp`` mean ``http``)."""

_TYPE_ALIASES = {"stdio": "stdio", "http": "http", "streamable-http": "http",
                 "streamablehttp": "http", "sse": "sse"}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MIN_SECRET_CHARS = 8
"""Env values and substituted variables shorter than this are not masked (headers: 4)."""


@dataclass(frozen=True)
class McpServerSpec:
    """One configured MCP server, merged and with ``${VAR}`` expanded.

    Attributes:
        name: the ``mcpServers`` key.
        source: where it came from: ``config``, the ``.mcp.json`` path, or both joined
            by `` + ``.
        settings: the merged ``McpServerConfig`` (unexpanded; amos-only keys such as
            ``trust_annotations``, ``tools`` and the timeouts are read from here).
        transport: ``stdio``, ``http``, ``sse``, or the unsupported ``type`` as given.
        command / args / env: a stdio server's program, arguments and extra variables.
        url / headers: an http or sse server's endpoint and headers.
        problem: why the server cannot be started (unsupported type, unset variable,
            bad URL), or None.
        substituted: values that came from ``${VAR}`` (for masking).
    """

    name: str
    source: str
    settings: Any
    transport: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    problem: str | None = None
    substituted: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        """False when the config says ``"enabled": false``."""
        return bool(self.settings.enabled)

    def secret_values(self) -> tuple[str, ...]:
        """Values to mask everywhere: header values, env values and substituted variables.

        Header values of at least 4 characters (and the credential after ``Bearer ``
        and the like); env values and ``${VAR}`` substitutions of at least
        ``MIN_SECRET_CHARS`` characters that do not name an existing path (a path is
        not a credential, and masking it would shred ordinary output).
        """
        values: set[str] = set()
        for value in self.headers.values():
            if len(value) >= 4:
                values.add(value)
            scheme, _, credential = value.partition(" ")
            if scheme and len(credential.strip()) >= 4:
                values.add(credential.strip())
        for value in (*self.env.values(), *self.substituted):
            if len(value) >= MIN_SECRET_CHARS and not _is_existing_path(value):
                values.add(value)
        return tuple(sorted(values))

    def display_target(self) -> str:
        """The command line or URL for screens and logs, with secret values masked."""
        if self.transport == "stdio" and self.command:
            text = shlex.join([self.command, *self.args])
        else:
            from amos.redact import mask_url

            text = mask_url(self.url) if self.url else ""
        for secret in sorted(self.secret_values(), key=len, reverse=True):
            text = text.replace(secret, "****")
        return text


@dataclass
class McpServers:
    """Every configured server and the notices loading them produced.

    Attributes:
        servers: in config order (``.mcp.json`` servers first, then config-only ones).
        warnings: one-line notices: an untrusted or changed ``.mcp.json``, ignored keys.
    """

    servers: list[McpServerSpec] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def secret_values(self) -> tuple[str, ...]:
        """Every server's :meth:`McpServerSpec.secret_values`, for the engine's masking."""
        return tuple(sorted({v for spec in self.servers for v in spec.secret_values()}))


def mcp_json_path(directory: Path) -> Path:
    """``<directory>/.mcp.json`` with the folder resolved (the key ``trusted_projects`` records)."""
    return Path(directory).expanduser().resolve() / MCP_JSON_NAME


def read_mcp_json(path: Path, raw: bytes | None = None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Read a ``.mcp.json`` and validate its servers with amos's server model.

    Args:
        path: the file.
        raw: its bytes when already read.

    Returns:
        ``(servers, warnings)``: the server entries (only keys amos knows, as given), and
        one-line warnings for unknown keys and unusable server names.

    Raises:
        ConfigError: unreadable, not JSON, not an object, or a server entry with a bad
            value (the message names the file, ``mcpServers.NAME.FIELD`` and what is
            accepted).
    """
    from amos.config_models import AmosConfig, McpServerConfig

    label = str(path)
    if raw is None:
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read: {exc.strerror or exc}", file=label) from None
    data = _parse(raw, label)
    warnings = [f"{label}: ignoring unknown key {json.dumps(key)}" for key in data if key != "mcpServers"]
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError("must be an object of servers by name", file=label, json_path="mcpServers")
    known = {info.alias or name for name, info in McpServerConfig.model_fields.items()}
    kept: dict[str, dict[str, Any]] = {}
    for name, entry in servers.items():
        if not _SERVER_NAME.fullmatch(name):
            warnings.append(f"{label}: ignoring server {json.dumps(name)}: amos needs a name of 1-64 "
                            "letters, digits, '_', '.' or '-', starting with a letter or digit")
            continue
        if not isinstance(entry, dict):
            raise ConfigError("must be an object", file=label, json_path=f"mcpServers.{name}")
        for key in entry:
            if key not in known:
                warnings.append(f"{label}: mcpServers.{name}: ignoring unknown key {json.dumps(key)}")
        kept[name] = {key: value for key, value in entry.items() if key in known}
    try:
        AmosConfig.model_validate({"mcpServers": kept})
    except ValidationError as exc:
        from amos.config import format_validation_error

        raise format_validation_error(exc, label) from None
    return kept, warnings


def _parse(raw: bytes, label: str) -> dict[str, Any]:
    try:
        value = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text", file=label) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                          file=label) from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"invalid JSON: {exc}", file=label) from None
    if not isinstance(value, dict):
        raise ConfigError("must hold a JSON object", file=label)
    return value


def load_mcp_servers(
    config: Any, *, project_dir: Path | None, environ: Mapping[str, str] | None = None
) -> McpServers:
    """Every MCP server a run may start, merged and expanded (issue 18).

    Args:
        config: the loaded ``AmosConfig`` (its ``mcp_servers`` and ``trusted_projects``).
        project_dir: the folder whose ``.mcp.json`` is read (the one ``./amos.json`` is
            read from, usually the current directory); None reads none.
        environ: the variables ``${VAR}`` is expanded from; default ``os.environ``.

    Returns:
        The servers and warnings (e.g. ``ignoring ./.mcp.json: not trusted; run `amos
        config trust DIR` to trust it``).

    Raises:
        ConfigError: an invalid ``.mcp.json`` (when trusted), or a server that after
            merging lacks its ``command`` (stdio) or ``url`` (http/sse), or has both.
    """
    from amos.config import trust_state
    from amos.config_models import McpServerConfig

    environ = os.environ if environ is None else environ
    result = McpServers()
    from_file: dict[str, dict[str, Any]] = {}
    file_label = ""
    if project_dir is not None:
        path = mcp_json_path(project_dir)
        if path.is_file():
            file_label = str(path)
            try:
                raw = path.read_bytes()
            except OSError as exc:
                raise ConfigError(f"cannot read: {exc.strerror or exc}", file=file_label) from None
            state = trust_state(path, raw, dict(getattr(config, "trusted_projects", {}) or {}))
            hint = f"run `amos config trust {shlex.quote(str(path.parent))}` to trust it"
            if state == "untrusted":
                result.warnings.append(f"ignoring {path}: not trusted, so its MCP servers are not "
                                       f"started; {hint}")
            elif state == "changed":
                result.warnings.append(f"ignoring {path}: changed since it was trusted; {hint} again")
            else:
                from_file, warnings = read_mcp_json(path, raw)
                result.warnings += warnings
    configured: dict[str, Any] = dict(getattr(config, "mcp_servers", {}) or {})
    for name in [*from_file, *(n for n in configured if n not in from_file)]:
        merged = copy.deepcopy(from_file.get(name, {}))
        sources = [file_label] if name in from_file else []
        if name in configured:
            merged = _merge(merged, configured[name].model_dump(mode="json", exclude_unset=True))
            sources.append("config")
        source = " + ".join(sources)
        try:
            settings = McpServerConfig.model_validate(merged)
        except ValidationError as exc:  # both layers were valid, so this is rare
            from amos.config import format_validation_error

            error = format_validation_error(exc, source)
            raise ConfigError(error.detail, file=source, json_path=f"mcpServers.{name}.{error.json_path}") from None
        result.servers.append(resolve_server(name, settings, source, environ))
    return result


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class _Unset(Exception):
    pass


def resolve_server(name: str, settings: Any, source: str, environ: Mapping[str, str]) -> McpServerSpec:
    """Expand ``${VAR}`` in one server's settings and decide its transport.

    Args:
        name: the server name.
        settings: its merged ``McpServerConfig``.
        source: where it came from (for error messages).
        environ: the variables to expand from.

    Returns:
        The spec; its ``problem`` is set when the server cannot be started.

    Raises:
        ConfigError: a stdio server without ``command``, an http/sse server without
            ``url``, or a server with both.
    """
    where = f"mcpServers.{name}"
    raw_type = settings.type
    transport = _TYPE_ALIASES.get(raw_type.lower(), raw_type) if raw_type else (
        "stdio" if settings.command else "http")
    if not raw_type and not settings.command and not settings.url:
        raise ConfigError("a server needs a \"command\" (stdio) or a \"url\" (http); it has neither",
                          file=source, json_path=where)
    if transport == "stdio" and not settings.command:
        raise ConfigError("is required for a stdio server (or give a url and \"type\": \"http\")",
                          file=source, json_path=f"{where}.command")
    if transport in ("http", "sse") and not settings.url:
        raise ConfigError(f"is required for an {transport} server", file=source, json_path=f"{where}.url")
    if transport in ("http", "sse") and settings.command:
        raise ConfigError(f"is only for stdio servers; an {transport} server has a url",
                          file=source, json_path=f"{where}.command")
    if transport == "stdio" and settings.url:
        raise ConfigError("is only for http and sse servers; a stdio server has a command",
                          file=source, json_path=f"{where}.url")
    substituted: list[str] = []

    def expand(value: str, path: str) -> str:
        def one(match: re.Match[str]) -> str:
            variable, default = match.group(1), match.group(2)
            found = environ.get(variable)
            if found is None or (found == "" and default is not None):
                if default is None:
                    raise _Unset(f"{path}: ${{{variable}}} is not set and has no default "
                                 f"(write ${{{variable}:-default}} for one)")
                return default
            substituted.append(found)
            return found

        return _VARIABLE.sub(one, value)

    problem: str | None = None
    command, args, env, url, headers = settings.command, tuple(settings.args), dict(settings.env), \
        settings.url, dict(settings.headers)
    try:
        command = expand(command, "command") if command else None
        args = tuple(expand(arg, f"args.{i}") for i, arg in enumerate(args))
        env = {key: expand(value, f"env.{key}") for key, value in env.items()}
        url = expand(url, "url") if url else None
        headers = {key: expand(value, f"headers.{key}") for key, value in headers.items()}
    except _Unset as exc:
        problem = str(exc)
    if problem is None and transport not in TRANSPORTS:
        problem = f"type {json.dumps(raw_type)} is not supported; accepted: {', '.join(TRANSPORTS)}"
    if problem is None and url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            problem = "url must be an http:// or https:// URL"
    return McpServerSpec(name=name, source=source, settings=settings, transport=transport,
                         command=command, args=args, env=env, url=url, headers=headers,
                         problem=problem, substituted=tuple(substituted))


def _is_existing_path(value: str) -> bool:
    if "\n" in value or "\x00" in value or not (value.startswith(("/", "~", ".")) or os.sep in value):
        return False
    try:
        return Path(value).expanduser().exists()
    except (OSError, ValueError):
        return False


def trust_mcp_file(directory: Path) -> Path:
    """Trust ``<directory>/.mcp.json``: record its path and SHA-256 like ``amos config trust``.

    The file must exist and its servers must be valid (unknown keys are allowed).

    Args:
        directory: the project folder.

    Returns:
        The absolute path recorded.

    Raises:
        ConfigError: the file is missing, unreadable or invalid, or the user config
            cannot be updated.
    """
    from amos.config import record_trust

    path = mcp_json_path(directory)
    if not path.is_file():
        raise ConfigError("no such file; nothing to trust", file=str(path))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    read_mcp_json(path, raw)
    record_trust(path, raw)
    return path


__all__ = ["MCP_JSON_NAME", "TRANSPORTS", "McpServerSpec", "McpServers", "mcp_json_path",
           "read_mcp_json", "load_mcp_servers", "resolve_server", "trust_mcp_file"]
