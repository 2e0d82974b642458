"""Typed configuration: loading, merging, error messages, project trust and masking.

The file format is spec/config.md; its pydantic models and value types are in
:mod:`amos.config_models`, and every public name there is re-exported here, so callers
import everything from ``amos.config``. Layers, later wins: built-in defaults < the user
config file (``paths.user_config_file()``) < ``<cwd>/amos.json`` when trusted
(spec/cli.md, "Project config trust") < ``--config PATH`` < command-line flags.
Objects merge key by key; any other value, ``null`` included, replaces.

Every model forbids unknown keys and validates bounds, so every error names the file,
the dotted JSON path and what is accepted (spec/cli.md, "Errors").
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shlex
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from amos import paths
from amos.atomic import atomic_write_text
from amos.config_models import (
    PROVIDERS,
    AmosConfig,
    AnthropicProviderConfig,
    ApprovalsConfig,
    BaseUrl,
    CheckpointsConfig,
    CompletionConfig,
    ConfigPath,
    ContextConfig,
    DoomLoopConfig,
    DoomLoopEscalationConfig,
    DoomLoopLadderConfig,
    DoomLoopTextConfig,
    EnvName,
    EvidenceConfig,
    EvidenceScopeConfig,
    GoogleProviderConfig,
    LoopPolicyConfig,
    McpServerConfig,
    McpServerName,
    McpToolConfig,
    ModelString,
    NonNegInt,
    OpenAICompatibleProviderConfig,
    OpenAIProviderConfig,
    Permission,
    PermissionRule,
    PermissionsConfig,
    PosInt,
    ProgressConfig,
    ProviderConfig,
    ProvidersConfig,
    RunConfig,
    Rung,
    SandboxConfig,
    SandboxPath,
    Seconds,
    SessionsConfig,
    TaskStateConfig,
    Text,
    Threshold,
    ToolName,
    ToolsConfig,
    UiConfig,
    config_to_json,
    default_config,
    parse_model,
)
from amos.errors import ConfigError
from amos.redact import mask_url
from amos.safe_read import NotRegularFileError, read_regular

# --------------------------------------------------------------------------- errors


def _unwrap(tp: Any) -> list[Any]:
    """The alternatives of a (possibly Annotated / Optional) type."""
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    if get_origin(tp) in (Union, types.UnionType):
        return [alt for arg in get_args(tp) for alt in _unwrap(arg)]
    return [tp]


def _walk(loc: tuple[Any, ...]) -> tuple[type[BaseModel] | None, bool]:
    """The model found at ``loc`` (or None) and whether the field there accepts null."""
    alts: list[Any] = [AmosConfig]
    nullable = False
    for part in loc:
        nxt: list[Any] = []
        nullable = False
        for tp in alts:
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                for name, info in tp.model_fields.items():
                    if part in (name, info.alias):
                        found = _unwrap(info.annotation)
                        nullable = nullable or type(None) in found
                        nxt += found
            elif get_origin(tp) is dict:
                nxt += _unwrap(get_args(tp)[1])
            elif get_origin(tp) is list and isinstance(part, int):
                nxt += _unwrap(get_args(tp)[0])
        alts = nxt
    models = [tp for tp in alts if isinstance(tp, type) and issubclass(tp, BaseModel)]
    return (models[0] if models else None), nullable


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


_TYPE_PHRASES = {
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "path_type": "must be a path string",
    "finite_number": "must be a finite number",
}


def _accepted(err: dict[str, Any], nullable: bool) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in _TYPE_PHRASES:
        return _TYPE_PHRASES[kind] + (" or null" if nullable else "")
    if kind == "greater_than_equal":
        return f"must be at least {_num(ctx['ge'])}"
    if kind == "greater_than":
        return f"must be greater than {_num(ctx['gt'])}"
    if kind == "less_than_equal":
        return f"must be at most {_num(ctx['le'])}"
    if kind == "less_than":
        return f"must be less than {_num(ctx['lt'])}"
    if kind == "literal_error":
        return "must be one of " + str(ctx.get("expected", "")).replace("'", '"')
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_too_long":
        return f"must be at most {ctx['max_length']} characters"
    if kind == "too_long":
        return f"must have at most {ctx['max_length']} items"
    if kind == "missing":
        return "is required"
    msg = str(err.get("msg", "is invalid"))
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return msg[:1].lower() + msg[1:]


def format_validation_error(exc: ValidationError, file: Path | str | None, index: int = 0) -> ConfigError:
    """Turn one error of ``exc`` (the first by default) into one ``ConfigError`` line.

    Args:
        exc: the error pydantic raised validating config data.
        file: the file the data came from (or a label such as ``command line``).
        index: which of ``exc.errors()`` to describe.

    Returns:
        A ``ConfigError`` whose ``json_path`` is dotted (``loop_policy.read_only_tools.3``)
        and whose message says what is accepted and what was given, e.g.
        ``must be at most 1000 (got 5000)`` or ``unknown key "x"; accepted keys: ...``.
    """
    err = exc.errors(include_url=False)[index]
    # a tagged union's member (``entry:path``) is not part of the JSON path people write
    loc = tuple(part for part in err["loc"] if not str(part).startswith("entry:"))
    json_path = ".".join(str(part) for part in loc) or None
    label = str(file) if file is not None else None
    if err["type"] == "extra_forbidden":
        model, _ = _walk(loc[:-1])
        keys = [info.alias or name for name, info in model.model_fields.items()] if model else []
        message = f"unknown key {json.dumps(str(loc[-1]))}"
        if keys:
            message += "; accepted keys: " + ", ".join(keys)
        return ConfigError(message, file=label, json_path=json_path)
    _, nullable = _walk(loc)
    message = _accepted(err, nullable)
    if err["type"] != "missing":
        got = err["input"]
        # an api_key_env value may be a pasted key, a URL may carry credentials, MCP server
        # env/headers/args values are secrets (issue 18): never echo them
        secret_prone = bool(loc) and (str(loc[-1]) == "api_key_env" or str(loc[-1]).endswith("url")
                                      or any(str(part) in _SECRET_MAPS for part in loc[:-1]))
        if err["type"] == "too_long" and isinstance(got, list):
            message += f" (got {len(got)})"
        elif not secret_prone:
            message += f" (got {_show(got)})"
    return ConfigError(message, file=label, json_path=json_path)


# --------------------------------------------------------------------------- reading files


MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""Largest config file read, bytes (a config is a few KiB; this stops a runaway file)."""


def _read_bytes(path: Path) -> bytes:
    """A config file's bytes through the one safe reader (issue 17 item 9): a FIFO or a
    device is refused at once, never waited on or read without end."""
    try:
        return read_regular(path, max_bytes=MAX_CONFIG_BYTES)
    except FileNotFoundError:
        raise ConfigError("no such file", file=str(path)) from None
    except NotRegularFileError as exc:
        if exc.kind == "a folder":
            raise ConfigError("is a directory, not a config file", file=str(path)) from None
        raise ConfigError(f"cannot read: {exc.strerror}; a config must be a regular JSON file",
                          file=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None


def _present(path: Path) -> bool:
    """True when something that is not a folder sits at ``path`` (a FIFO or a device
    there is then refused by :func:`_read_bytes`, never silently skipped)."""
    try:
        return path.exists() and not path.is_dir()
    except OSError:
        return True


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {json.dumps(key)}")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(data: bytes, file: str) -> dict[str, Any]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text", file=file) from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except RecursionError:
        raise ConfigError("invalid JSON: nested too deeply", file=file) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", file=file
        ) from None
    except ValueError as exc:
        raise ConfigError(f"invalid JSON: {exc}", file=file) from None
    if not isinstance(value, dict):
        raise ConfigError(f"must hold a JSON object (got {_show(value)})", file=file)
    return value


def _resolve(value: Any, base: Path) -> Any:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        return value
    path = Path(value).expanduser()
    return str(Path(os.path.normpath(base / path))) if not path.is_absolute() else str(path)


def _resolve_model(value: Any, base: Path) -> Any:
    if isinstance(value, str) and value.startswith("scripted:") and len(value) > 9:
        return "scripted:" + _resolve(value[9:], base)
    return value


def _prepare(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """A copy of one layer with its relative paths resolved against ``base``."""
    data = copy.deepcopy(data)
    if "workspace" in data:
        data["workspace"] = _resolve(data["workspace"], base)
    for section in ("evidence", "sessions"):
        if isinstance(data.get(section), dict) and "directory" in data[section]:
            data[section]["directory"] = _resolve(data[section]["directory"], base)
    if "model" in data:
        data["model"] = _resolve_model(data["model"], base)
    sandbox = data.get("sandbox")
    if isinstance(sandbox, dict):
        for key in ("writable_paths", "hidden_paths"):
            if isinstance(sandbox.get(key), list):
                sandbox[key] = [_resolve(item, base) for item in sandbox[key]]
    doom = data.get("doom_loop")
    if isinstance(doom, dict) and isinstance(doom.get("escalation"), dict):
        escalation = doom["escalation"]
        if "model" in escalation:
            escalation["model"] = _resolve_model(escalation["model"], base)
    return data


def _validate(data: dict[str, Any], file: Path | str | None) -> AmosConfig:
    try:
        return AmosConfig.model_validate(data)
    except ValidationError as exc:
        first = format_validation_error(exc, file)
        # every other error too, for `amos config check` (issue 21): one line each
        first.others = [format_validation_error(exc, file, i) for i in range(1, exc.error_count())]
        raise first from None


def _load_layer(path: Path, raw: bytes | None = None) -> tuple[dict[str, Any], AmosConfig]:
    data = _prepare(_parse_json(_read_bytes(path) if raw is None else raw, str(path)), path.parent)
    return data, _validate(data, path)


def validate_config_file(path: Path) -> AmosConfig:
    """Read and validate one config file on its own (``amos config check PATH``).

    Raises:
        ConfigError: unreadable file, invalid JSON (with line and column), or an invalid
            value (with its JSON path and what is accepted).
    """
    return _load_layer(Path(path).expanduser())[1]


def advisories(config: AmosConfig) -> list[str]:
    """Settings that validate but that ``amos run`` refuses or ignores in most uses, one
    line each (``amos config check`` prints them as warnings).

    Args:
        config: a validated config (one file, or the merged layers).
    """
    notes = []
    completion = config.loop_policy.completion if config.loop_policy else None
    if completion is not None and completion.done_tool and not (
            completion.command or completion.files or completion.require_tools or completion.python
            or completion.human):
        notes.append("loop_policy.completion.done_tool needs a completion check (command, files, require_tools, "
                     "python or human): amos run refuses this config unless --verify gives one")
    builtin = {"read_file", "list_dir", "search_text", "write_file", "edit_file", "run_command"}
    if completion is not None and completion.done_tool in builtin:
        notes.append(f"loop_policy.completion.done_tool {completion.done_tool!r} is the name of a built-in tool: "
                     "amos run refuses this config; choose another name (e.g. \"done\")")
    return notes


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _is_process_cwd(directory: Path) -> bool:
    try:
        return _same_file(directory, Path.cwd())
    except OSError:
        return False


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- loading


@dataclass
class LoadedConfig:
    """The merged config and where it came from.

    Attributes:
        config: the validated, merged config; ``workspace`` and configured directories
            are absolute.
        sources: the files actually used, in the order they were applied.
        warnings: one-line notices (an ignored project file, an ignored key).
        user_config_path: the user config file, whether or not it exists.
        layers: ``(label, data)`` of every layer applied, in order (label: the file
            path or ``command line``), for settings that add up across layers instead
            of replacing (permission rules: ``amos.permissions.merge_rules``).
    """

    config: AmosConfig
    sources: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    user_config_path: Path = field(default_factory=paths.user_config_file)
    layers: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _drop_trust(data: dict[str, Any], label: str, warnings: list[str]) -> dict[str, Any]:
    if data.pop("trusted_projects", None):
        warnings.append(
            f"ignoring trusted_projects in {label}: only the user config file can trust projects"
        )
    return data


def load_config(
    config_path: Path | None = None,
    cwd: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> LoadedConfig:
    """Load, validate and merge every config layer (spec/config.md).

    Args:
        config_path: the ``--config`` file; relative to ``cwd``. It must exist.
        cwd: the current directory (``./amos.json``, relative overrides); default the
            process's.
        overrides: config-file-shaped data built from command-line flags; its relative
            paths are relative to ``cwd``.

    Returns:
        The merged config, the files used, and warnings (e.g. an untrusted or changed
        ``./amos.json``, which is ignored).

    Raises:
        ConfigError: a file is unreadable or invalid; the error names the file (or
            ``command line``), the JSON path and what is accepted.
    """
    cwd = Path(cwd).expanduser().absolute() if cwd is not None else Path.cwd()
    user_file = paths.user_config_file()
    layers: list[dict[str, Any]] = []
    labels: list[str] = []
    sources: list[Path] = []
    warnings: list[str] = []
    trusted: dict[str, str] = {}
    if _present(user_file):
        data, user_config = _load_layer(user_file)
        trusted = user_config.trusted_projects
        layers.append(data)
        labels.append(str(user_file))
        sources.append(user_file)

    explicit = None
    if config_path is not None:
        explicit = Path(config_path).expanduser()
        explicit = explicit if explicit.is_absolute() else cwd / explicit

    project = paths.project_config_file(cwd)
    if _present(project) and not (explicit is not None and _same_file(explicit, project)):
        raw = _read_bytes(project)
        label = "./amos.json" if _is_process_cwd(cwd) else str(project)
        recorded = trusted.get(str(project))
        hint = f"run `amos config trust {shlex.quote(str(project.parent))}` to trust it"
        if recorded is None:
            warnings.append(f"ignoring {label}: not trusted; {hint}")
        elif recorded != _sha256(raw):
            warnings.append(f"ignoring {label}: changed since it was trusted; {hint} again")
        else:
            data, _ = _load_layer(project, raw)
            layers.append(_drop_trust(data, str(project), warnings))
            labels.append(str(project))
            sources.append(project)

    if explicit is not None and not _same_file(explicit, user_file):
        data, _ = _load_layer(explicit)
        layers.append(_drop_trust(data, str(explicit), warnings))
        labels.append(str(explicit))
        sources.append(explicit)

    if overrides:
        data = _drop_trust(_prepare(overrides, cwd), "command-line options", warnings)
        _validate(data, "command line")
        layers.append(data)
        labels.append("command line")

    merged = config_to_json(default_config())  # so partial maps (permissions) keep defaults
    for layer in layers:
        merged = _deep_merge(merged, layer)
    merged["workspace"] = _resolve(merged.get("workspace", "."), cwd)
    return LoadedConfig(
        _validate(merged, "merged config"), sources, warnings, user_file, list(zip(labels, layers, strict=True))
    )


# --------------------------------------------------------------------------- trust


def _atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (temp file + fsync + os.replace), mode 0600."""
    target = path.resolve() if path.is_symlink() else path
    try:
        paths.ensure_dir(target.parent)
        atomic_write_text(target, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise ConfigError(f"cannot write: {exc.strerror or exc}", file=str(path)) from None


def _read_user_config() -> dict[str, Any]:
    user_file = paths.user_config_file()
    if not user_file.exists():
        return {}
    return _parse_json(_read_bytes(user_file), str(user_file))


def read_trusted_projects() -> dict[str, str]:
    """The ``trusted_projects`` recorded in the user config file (empty if none).

    Raises:
        ConfigError: the user config file is unreadable or not valid JSON.
    """
    trusted = _read_user_config().get("trusted_projects")
    return dict(trusted) if isinstance(trusted, dict) else {}


def record_trust(path: Path, raw: bytes) -> None:
    """Record ``path`` (absolute) and the SHA-256 of ``raw`` in the user config's ``trusted_projects``.

    Used for ``amos.json`` here and for a project's ``.mcp.json`` (amos.mcp.config). The
    user config file is created if missing (folder 0700, file 0600) and rewritten
    atomically, keeping every other key as it was.

    Raises:
        ConfigError: the user config is not valid JSON or its ``trusted_projects`` is not
            an object (it is then left untouched), or it cannot be written.
    """
    user_file = paths.user_config_file()
    data = _read_user_config()
    trusted = data.get("trusted_projects", {})
    if not isinstance(trusted, dict):
        raise ConfigError(
            f"must be an object (got {_show(trusted)}); fix it before trusting a project",
            file=str(user_file),
            json_path="trusted_projects",
        )
    data["trusted_projects"] = {**trusted, str(path): _sha256(raw)}
    _atomic_write_json(user_file, data)


def trust_state(path: Path, raw: bytes, trusted: dict[str, str]) -> str:
    """Whether ``path`` with content ``raw`` is trusted: ``trusted``, ``untrusted`` or ``changed``.

    Args:
        path: the absolute project file path (the key ``trusted_projects`` records).
        raw: the file's bytes as read now.
        trusted: ``trusted_projects`` of the user config.
    """
    recorded = trusted.get(str(path))
    if recorded is None:
        return "untrusted"
    return "trusted" if recorded == _sha256(raw) else "changed"


def trust_project(dir: Path) -> Path:
    """Record ``dir/amos.json`` and its SHA-256 in the user config's ``trusted_projects``.

    The project file must exist and be a valid config. The user config file is created
    if missing (folder 0700, file 0600) and rewritten atomically, keeping every other
    key as it was.

    Args:
        dir: the project folder.

    Returns:
        The absolute path of the trusted ``amos.json`` (the key recorded).

    Raises:
        ConfigError: the project file is missing, unreadable or invalid; the user config
            is not valid JSON (it is then left untouched); or it cannot be written.
    """
    project = paths.project_config_file(dir)
    if not project.is_file():
        raise ConfigError("no such file; nothing to trust", file=str(project))
    raw = _read_bytes(project)
    _load_layer(project, raw)
    record_trust(project, raw)
    return project


# --------------------------------------------------------------------------- display

_SECRET_WORDS = ("key", "token", "secret", "password", "authorization")
_NAME_MAPS = frozenset({"permissions", "trusted_projects"})
_SECRET_MAPS = frozenset({"env", "headers", "args"})
"""Lists and maps of an MCP server config whose values are secrets (issue 18)."""


def _is_secret(key: Any) -> bool:
    lowered = str(key).lower()
    return lowered != "api_key_env" and any(word in lowered for word in _SECRET_WORDS)


def mask_secrets(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` safe to display: secret-looking string values become ``****``.

    A key containing ``key``, ``token``, ``secret``, ``password`` or ``authorization``
    (any case) whose value is a non-empty string is masked, at any depth, except
    ``api_key_env`` (its value is a variable name). URLs (keys ending in ``url``) keep
    their host but lose a password and secret-looking query values. Keys of name-to-value maps
    (``permissions``, ``trusted_projects``) are names, not settings, and are kept. Every
    value of an MCP server's ``env`` and ``headers`` is masked (issue 18).
    """

    def walk(value: Any) -> Any:
        if isinstance(value, list):
            return [walk(item) for item in value]
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _NAME_MAPS and isinstance(item, dict):
                out[key] = copy.deepcopy(item)
            elif key in ("env", "headers") and isinstance(item, dict):
                out[key] = {name: "****" if isinstance(v, str) and v else v for name, v in item.items()}
            elif isinstance(item, str) and item and _is_secret(key):
                out[key] = "****"
            elif isinstance(item, str) and item and key.endswith("url"):
                out[key] = mask_url(item)
            else:
                out[key] = walk(item)
        return out

    return walk(data)


__all__ = [
    # re-exported from amos.config_models
    "PROVIDERS", "parse_model", "PosInt", "NonNegInt", "Threshold", "Seconds", "Text", "ToolName",
    "ModelString", "BaseUrl", "EnvName", "Rung", "Permission", "ConfigPath", "ProviderConfig",
    "OpenAIProviderConfig", "AnthropicProviderConfig", "GoogleProviderConfig",
    "OpenAICompatibleProviderConfig", "ProvidersConfig", "ToolsConfig", "ApprovalsConfig",
    "RunConfig", "ContextConfig", "CompletionConfig", "ProgressConfig", "LoopPolicyConfig",
    "DoomLoopLadderConfig", "DoomLoopTextConfig", "DoomLoopEscalationConfig", "DoomLoopConfig",
    "EvidenceScopeConfig", "EvidenceConfig", "TaskStateConfig", "SessionsConfig", "UiConfig",
    "AmosConfig", "CheckpointsConfig", "McpServerConfig", "McpServerName", "McpToolConfig", "PermissionRule",
    "PermissionsConfig", "SandboxPath", "SandboxConfig", "default_config", "config_to_json",
    # defined here
    "format_validation_error", "validate_config_file", "LoadedConfig", "load_config",
    "read_trusted_projects", "trust_project", "record_trust", "trust_state", "mask_secrets",
]
