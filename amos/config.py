"""Typed configuration: pydantic models of the config file, and loading, merging, trust.

The file format is spec/config.md. Layers, later wins: built-in defaults < the user
config file (``paths.user_config_file()``) < ``<cwd>/amos.json`` when trusted
(spec/cli.md, "Project config trust") < ``--config PATH`` < command-line flags.
Objects merge key by key; any other value, ``null`` included, replaces.

Every model forbids unknown keys and validates bounds, so every error names the file,
the dotted JSON path and what is accepted (spec/cli.md, "Errors").
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import shlex
import tempfile
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    field_validator,
)

from amos import paths
from amos.errors import ConfigError

PROVIDERS = ("openai", "anthropic", "google", "openai-compatible", "scripted")
"""Provider names accepted before the first colon of a model string."""

# --------------------------------------------------------------------------- value types


def _split_model(value: str) -> tuple[str, str]:
    provider, sep, model = value.partition(":")
    if not sep or provider not in PROVIDERS or not model:
        raise ValueError(
            f"must be PROVIDER:MODEL with PROVIDER one of {', '.join(PROVIDERS)} "
            "and a non-empty MODEL (e.g. openai:gpt-4o-mini, scripted:PATH)"
        )
    return provider, model


def parse_model(value: str) -> tuple[str, str]:
    """Split a model string at its first colon: ``"openai-compatible:qwen2.5:7b"``.

    Returns:
        ``(provider, model)``, e.g. ``("openai-compatible", "qwen2.5:7b")``.

    Raises:
        ConfigError: unknown provider, no colon, or an empty model part
            (spec/cli.md, "Options").
    """
    try:
        return _split_model(value)
    except ValueError as exc:
        raise ConfigError(f"{exc} (got {json.dumps(value)})", json_path="model") from None


def _check_model(value: str) -> str:
    _split_model(value)
    return value


def _check_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an http:// or https:// URL")
    return value


def _check_env_name(value: str) -> str:
    if not value or not (value[0].isalpha() or value[0] == "_") or not all(
        c.isalnum() or c == "_" for c in value
    ) or not value.isascii():
        raise ValueError("must be an environment variable name (letters, digits, _)")
    return value


def _check_rung(value: Any) -> int | bool:
    if value is False:
        return False
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("must be false or an integer of at least 1")
    return value


def _check_sha256(value: str) -> str:
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise ValueError("must be a SHA-256 digest (64 lowercase hex digits)")
    return value


def _check_absolute(value: str) -> str:
    if not Path(value).is_absolute():
        raise ValueError("must be an absolute path")
    return value


def _compact_number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
Threshold = Annotated[int, Field(ge=1, le=1000)]
Seconds = Annotated[
    float, Field(gt=0, allow_inf_nan=False), PlainSerializer(_compact_number, when_used="json")
]
Text = Annotated[str, Field(min_length=1)]
ToolName = Annotated[str, Field(min_length=1, max_length=256)]
ModelString = Annotated[str, AfterValidator(_check_model)]
BaseUrl = Annotated[str, AfterValidator(_check_url)]
EnvName = Annotated[str, AfterValidator(_check_env_name)]
Rung = Annotated[int | Literal[False], PlainValidator(_check_rung)]
Permission = Literal["allow", "ask", "deny"]
ConfigPath = Annotated[Path, Field(strict=False)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)


# --------------------------------------------------------------------------- models


class ProviderConfig(_Model):
    """Settings shared by every API provider."""

    api_key_env: EnvName | None = None
    """Name of the environment variable holding the API key (never the key itself)."""
    base_url: BaseUrl | None = None
    """API base URL (local servers, proxies); null uses the SDK's default."""
    max_retries: NonNegInt = 2
    """Retries the official SDK makes on transient errors."""
    timeout_s: Seconds = 600
    """Per-request timeout, seconds."""


class OpenAIProviderConfig(ProviderConfig):
    """The ``openai`` provider."""

    api_key_env: EnvName | None = "OPENAI_API_KEY"
    """Name of the environment variable holding the OpenAI API key."""


class AnthropicProviderConfig(ProviderConfig):
    """The ``anthropic`` provider."""

    api_key_env: EnvName | None = "ANTHROPIC_API_KEY"
    """Name of the environment variable holding the Anthropic API key."""
    max_tokens: PosInt = 8192
    """Output cap per model call, tokens (Anthropic requires one)."""


class GoogleProviderConfig(ProviderConfig):
    """The ``google`` provider (``GOOGLE_API_KEY`` is tried after this variable)."""

    api_key_env: EnvName | None = "GEMINI_API_KEY"
    """Name of the environment variable holding the Gemini API key."""


class OpenAICompatibleProviderConfig(ProviderConfig):
    """The ``openai-compatible`` provider (Ollama, llama.cpp, vLLM)."""

    base_url: BaseUrl | None = "http://localhost:11434/v1"
    """Server base URL; the default is a local Ollama."""


class ProvidersConfig(_Model):
    """One entry per API provider."""

    openai: OpenAIProviderConfig = Field(default_factory=OpenAIProviderConfig)
    """OpenAI."""
    anthropic: AnthropicProviderConfig = Field(default_factory=AnthropicProviderConfig)
    """Anthropic."""
    google: GoogleProviderConfig = Field(default_factory=GoogleProviderConfig)
    """Google Gemini."""
    openai_compatible: OpenAICompatibleProviderConfig = Field(
        default_factory=OpenAICompatibleProviderConfig, alias="openai-compatible"
    )
    """Any server speaking the OpenAI chat API."""


def _default_permissions() -> dict[str, Permission]:
    return {
        "read_file": "allow", "list_dir": "allow", "search_text": "allow",
        "write_file": "ask", "edit_file": "ask", "run_command": "ask",
    }


class ToolsConfig(_Model):
    """Built-in tools: permissions and output limits."""

    permissions: dict[ToolName, Permission] = Field(default_factory=_default_permissions)
    """Tool name to ``allow``, ``ask`` or ``deny``; tools not listed ask."""
    command_timeout_s: Seconds = 120
    """Time limit of one ``run_command``, seconds."""
    max_output_bytes: PosInt = 65536
    """What the model sees of one unprojected tool result, bytes (the rest is cut)."""


class ApprovalsConfig(_Model):
    """Pending tool approvals (WAITING runs)."""

    owner: Text | None = None
    """Who may approve; null means the local user."""
    deadline_s: Seconds = 86400
    """How long a pending approval stays valid, seconds."""


class RunConfig(_Model):
    """Limits of one run."""

    max_steps: PosInt = 20
    """Model calls per run."""
    token_budget: PosInt | None = None
    """Input + output tokens per run; null is unlimited."""
    timeout_s: Seconds | None = None
    """Wall-clock limit of one run, seconds; null is unlimited."""


class ContextConfig(_Model):
    """How much history each model request carries."""

    window_tokens: PosInt | None = None
    """Context window, tokens; null takes the model's known window, else 32,000."""
    compact_at: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = 0.8
    """Fraction of the window, in (0, 1], at which older turns are compacted."""
    keep_recent_turns: NonNegInt = 4
    """Turns never compacted."""


class CompletionConfig(_Model):
    """Completion checks; every configured kind must confirm (spec/config.md)."""

    command: Text | None = None
    """Shell command run in the workspace; complete only when it exits 0 (``--verify``)."""
    timeout_s: Seconds = 120
    """Time limit of the command, seconds; past it is a checker error."""
    files: list[Text] = Field(default_factory=list)
    """Files (relative to the workspace) that must exist."""
    require_tools: list[ToolName] = Field(default_factory=list)
    """Tools that must have been observed succeeding."""
    python: Text | None = None
    """Python checker, ``module:function``."""


class ProgressConfig(_Model):
    """How to compute the host progress key."""

    command: Text | None = None
    """Shell command whose output is the progress key."""
    python: Text | None = None
    """Python function, ``module:function``, returning the progress key."""


class LoopPolicyConfig(_Model):
    """Bounded recovery, admission and completion (seeds/loop-policy-bounded-recovery)."""

    max_recovery_attempts: Annotated[int, Field(ge=0, le=1000)] = 2
    """Recovery turns after failures or false completions, 0 to 1000."""
    max_repeated_reads: Threshold = 2
    """Identical reads admitted before refusing, 1 to 1000."""
    max_unchanged_progress: Threshold = 3
    """Rounds with an unchanged progress key before stopping, 1 to 1000."""
    max_tracked: Threshold = 1000
    """Distinct actions tracked for admission, 1 to 1000."""
    read_only_tools: Annotated[list[ToolName], Field(max_length=100)] | None = None
    """Restricts read treatment to these tools (each must declare effect ``read``)."""
    completion: CompletionConfig | None = None
    """Completion verifier; null means none."""
    progress: ProgressConfig | None = None
    """Progress key; null means none."""
    checker_timeout_s: Seconds = 30
    """Time limit of a Python checker or progress key, seconds."""


class DoomLoopLadderConfig(_Model):
    """Streak thresholds of each rung: ``false`` (off) or an integer of at least 1."""

    observe: Rung = 2
    """Record a diagnostic."""
    steer: Rung = False
    """Tell the model it is repeating itself."""
    escalate: Rung = False
    """Use the escalation model for the next turn."""
    block: Rung = 3
    """Refuse the repeated tool call."""
    stop: Rung = 6
    """End the run (STUCK)."""


class DoomLoopTextConfig(_Model):
    """Repetition detection in assistant text (``true``/``false`` or this object)."""

    enabled: bool = True
    """Detect repeated text."""
    max_period_tokens: PosInt = 16
    """Longest repeated block looked for, tokens."""
    min_repeats: PosInt = 4
    """Consecutive copies needed."""
    min_covered_tokens: PosInt = 12
    """Tokens the copies must cover."""
    max_window_tokens: PosInt = 400
    """Tail of the text examined, tokens."""


class DoomLoopEscalationConfig(_Model):
    """What the ``escalate`` rung switches to."""

    model: ModelString
    """Model string used for the next turn, e.g. ``anthropic:claude-opus-4-1``."""
    max_escalations: Annotated[int, Field(ge=1, le=1000)] = 2
    """Escalations per run."""


class DoomLoopConfig(_Model):
    """Doom-loop detection (spec/doom-loop-behaviour.md §1)."""

    ladder: DoomLoopLadderConfig = Field(default_factory=DoomLoopLadderConfig)
    """Which rung fires at which streak."""
    text: DoomLoopTextConfig = Field(default_factory=DoomLoopTextConfig)
    """Text repetition detection; ``false`` disables it."""
    escalation: DoomLoopEscalationConfig | None = None
    """Escalation mechanism; null means none."""

    @field_validator("text", mode="before")
    @classmethod
    def _text_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return {"enabled": value}
        if not isinstance(value, dict | DoomLoopTextConfig):
            raise ValueError("must be true, false or an object")
        return value


class EvidenceScopeConfig(_Model):
    """Who owns the evidence records."""

    owner_id: Text | None = None
    """Owner; null means the local user name."""
    tenant_id: Text | None = None
    """Tenant; null means none."""
    namespace: Text | None = None
    """Namespace; null means ``default``."""


class EvidenceConfig(_Model):
    """Durable tool evidence (seeds/durable-tool-evidence)."""

    enabled: bool = False
    """Store full tool results as evidence records."""
    directory: ConfigPath | None = None
    """Evidence store; null means ``<data>/evidence``."""
    scope: EvidenceScopeConfig = Field(default_factory=EvidenceScopeConfig)
    """Owner, tenant and namespace of the records."""
    project_threshold_bytes: NonNegInt = 8192
    """Results larger than this reach the model as a projection, bytes."""
    max_record_bytes: PosInt = 8388608
    """Largest record stored, bytes."""
    max_records: PosInt = 100000
    """Records kept per scope."""
    ttl_days: PosInt | None = None
    """Records older than this may be pruned, days; null keeps them."""


class TaskStateConfig(_Model):
    """Host-owned task notes (seeds/protected-task-state)."""

    enabled: bool = False
    """Keep a task-state notebook."""
    task_id: Text | None = None
    """Task id; null means the session id."""
    owner_id: Text | None = None
    """Owner; null means the local user name (must match the evidence owner)."""
    namespace: Text | None = None
    """Namespace; null means ``default``."""
    tenant_id: Text | None = None
    """Tenant; null means none."""
    association: Text | None = None
    """Stable host workflow id the notebook is bound to."""
    max_entries: PosInt = 100
    """Notes, proposals and receipts kept."""
    max_prompt_tokens: PosInt = 8000
    """Size of the task view in each request, tokens."""
    max_snapshot_bytes: PosInt = 262144
    """Size of the saved notebook, bytes."""


class SessionsConfig(_Model):
    """The session store."""

    directory: ConfigPath | None = None
    """Session store; null means ``<data>/sessions``."""
    autosave: bool = True
    """Save the session after every run."""
    max_checkpoints: PosInt = 20
    """Checkpoints kept per session."""


class UiConfig(_Model):
    """The TUI."""

    theme: Text = "textual-dark"
    """Textual theme name."""
    show_cost: bool = True
    """Show token usage and cost."""


class AmosConfig(_Model):
    """The whole config file (spec/config.md)."""

    model: ModelString | None = None
    """``PROVIDER:MODEL``; null means none chosen (spec/cli.md, "Choosing the model")."""
    providers: ProvidersConfig = Field(default_factory=ProvidersConfig)
    """Per-provider settings."""
    system_prompt: str | None = None
    """Replaces the built-in system prompt; null keeps it."""
    workspace: ConfigPath = Path(".")
    """Root the file tools are confined to, and where commands run."""
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    """Tool permissions and limits."""
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    """Pending approvals."""
    run: RunConfig = Field(default_factory=RunConfig)
    """Limits of one run."""
    context: ContextConfig = Field(default_factory=ContextConfig)
    """Request context size."""
    loop_policy: LoopPolicyConfig | None = None
    """Bounded recovery and completion; null means no policy."""
    doom_loop: DoomLoopConfig | None = None
    """Doom-loop detection: null/false off, true the defaults, or an object."""
    evidence: EvidenceConfig = Field(default_factory=EvidenceConfig)
    """Durable tool evidence."""
    task_state: TaskStateConfig = Field(default_factory=TaskStateConfig)
    """Task-state notebook."""
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    """Session store."""
    ui: UiConfig = Field(default_factory=UiConfig)
    """TUI settings."""
    trusted_projects: dict[
        Annotated[str, AfterValidator(_check_absolute)], Annotated[str, AfterValidator(_check_sha256)]
    ] = Field(default_factory=dict)
    """Absolute path of a project's amos.json to its SHA-256; read only from the user config."""

    @field_validator("doom_loop", mode="before")
    @classmethod
    def _doom_bool(cls, value: Any) -> Any:
        if value is None or value is False:
            return None
        if value is True:
            return {}
        if not isinstance(value, dict | DoomLoopConfig):
            raise ValueError("must be null, false, true or an object")
        return value


def default_config() -> AmosConfig:
    """The built-in defaults (what ``amos config show --defaults`` prints)."""
    return AmosConfig()


def config_to_json(config: AmosConfig) -> dict[str, Any]:
    """``config`` as JSON-ready data with the keys of the file (``openai-compatible``)."""
    return config.model_dump(mode="json", by_alias=True)


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


def format_validation_error(exc: ValidationError, file: Path | str | None) -> ConfigError:
    """Turn the first error of ``exc`` into one ``ConfigError`` line.

    Args:
        exc: the error pydantic raised validating config data.
        file: the file the data came from (or a label such as ``command line``).

    Returns:
        A ``ConfigError`` whose ``json_path`` is dotted (``loop_policy.read_only_tools.3``)
        and whose message says what is accepted and what was given, e.g.
        ``must be at most 1000 (got 5000)`` or ``unknown key "x"; accepted keys: ...``.
    """
    err = exc.errors(include_url=False)[0]
    loc = tuple(err["loc"])
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
        if err["type"] == "too_long" and isinstance(got, list):
            message += f" (got {len(got)})"
        else:
            message += f" (got {_show(got)})"
    return ConfigError(message, file=label, json_path=json_path)


# --------------------------------------------------------------------------- reading files


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError("no such file", file=str(path)) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a config file", file=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None


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
        raise format_validation_error(exc, file) from None


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
    """

    config: AmosConfig
    sources: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    user_config_path: Path = field(default_factory=paths.user_config_file)


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
    sources: list[Path] = []
    warnings: list[str] = []
    trusted: dict[str, str] = {}
    if user_file.exists():
        data, user_config = _load_layer(user_file)
        trusted = user_config.trusted_projects
        layers.append(data)
        sources.append(user_file)

    explicit = None
    if config_path is not None:
        explicit = Path(config_path).expanduser()
        explicit = explicit if explicit.is_absolute() else cwd / explicit

    project = paths.project_config_file(cwd)
    if project.is_file() and not (explicit is not None and _same_file(explicit, project)):
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
            sources.append(project)

    if explicit is not None and not _same_file(explicit, user_file):
        data, _ = _load_layer(explicit)
        layers.append(_drop_trust(data, str(explicit), warnings))
        sources.append(explicit)

    if overrides:
        data = _drop_trust(_prepare(overrides, cwd), "command-line options", warnings)
        _validate(data, "command line")
        layers.append(data)

    merged = config_to_json(default_config())  # so partial maps (permissions) keep defaults
    for layer in layers:
        merged = _deep_merge(merged, layer)
    merged["workspace"] = _resolve(merged.get("workspace", "."), cwd)
    return LoadedConfig(_validate(merged, "merged config"), sources, warnings, user_file)


# --------------------------------------------------------------------------- trust


def _atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (temp file + fsync + os.replace), mode 0600."""
    target = path.resolve() if path.is_symlink() else path
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        paths.ensure_dir(target.parent)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(OSError):
            dir_fd = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
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
    user_file = paths.user_config_file()
    data = _read_user_config()
    trusted = data.get("trusted_projects", {})
    if not isinstance(trusted, dict):
        raise ConfigError(
            f"must be an object (got {_show(trusted)}); fix it before trusting a project",
            file=str(user_file),
            json_path="trusted_projects",
        )
    data["trusted_projects"] = {**trusted, str(project): _sha256(raw)}
    _atomic_write_json(user_file, data)
    return project


# --------------------------------------------------------------------------- display

_SECRET_WORDS = ("key", "token", "secret", "password", "authorization")
_NAME_MAPS = frozenset({"permissions", "trusted_projects"})


def _is_secret(key: Any) -> bool:
    lowered = str(key).lower()
    return lowered != "api_key_env" and any(word in lowered for word in _SECRET_WORDS)


def mask_secrets(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` safe to display: secret-looking string values become ``****``.

    A key containing ``key``, ``token``, ``secret``, ``password`` or ``authorization``
    (any case) whose value is a non-empty string is masked, at any depth, except
    ``api_key_env`` (its value is a variable name). Keys of name-to-value maps
    (``permissions``, ``trusted_projects``) are names, not settings, and are kept.
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
            elif isinstance(item, str) and item and _is_secret(key):
                out[key] = "****"
            else:
                out[key] = walk(item)
        return out

    return walk(data)
