"""Config models: the pydantic models of the config file.

The file format is spec/config.md. Every model forbids unknown keys and validates
bounds, so :func:`amos.config.format_validation_error` can name the dotted JSON path and
what is accepted (spec/cli.md, "Errors"). Loading, merging, error messages, project
trust and masking are in :mod:`amos.config`, which re-exports every public name here;
callers import from ``amos.config``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Discriminator, Field, Tag, field_validator, model_validator

from amos.config_models_tools import (  # noqa: F401 - the tool-side models are re-exported here
    McpServerConfig,
    McpServerName,
    McpToolConfig,
    PermissionRule,
    PermissionsConfig,
    SandboxConfig,
    SandboxPath,
)
from amos.config_types import (  # noqa: F401 - the value types are re-exported here
    PROVIDERS,
    BaseUrl,
    ConfigPath,
    EnvName,
    ModelString,
    NonNegInt,
    Permission,
    PosInt,
    Rung,
    Seconds,
    Text,
    Threshold,
    ToolName,
    _check_absolute,
    _check_sha256,
    _Model,
    check_http_url,
    parse_model,
)
from amos.policy.doom_loop_config import AMOS_DOOM_LOOP_LADDER, AMOS_TEXT_OPTIONS

OutputCap = Annotated[int, Field(ge=1, le=10_000_000)]
"""An output cap, tokens: no model writes ten million tokens in one call (a typo'd ``1e29``
would be sent as is)."""

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
    max_tokens: OutputCap | None = None
    """Output cap per model call, tokens (1 to 10,000,000); null leaves it to the server (issue 23: a base model
    on a local server ran 4,079 tokens for 467 s with no cap). Sent as ``max_completion_tokens``
    to OpenAI, ``max_tokens`` to compatible servers and Anthropic, ``max_output_tokens`` to Gemini."""


class OpenAIProviderConfig(ProviderConfig):
    """The ``openai`` provider."""

    api_key_env: EnvName | None = "OPENAI_API_KEY"
    """Name of the environment variable holding the OpenAI API key."""


class AnthropicProviderConfig(ProviderConfig):
    """The ``anthropic`` provider."""

    api_key_env: EnvName | None = "ANTHROPIC_API_KEY"
    """Name of the environment variable holding the Anthropic API key."""
    max_tokens: OutputCap = 8192
    """Output cap per model call, tokens (1 to 10,000,000; Anthropic requires one)."""


class GoogleProviderConfig(ProviderConfig):
    """The ``google`` provider (``GOOGLE_API_KEY`` is tried after this variable)."""

    api_key_env: EnvName | None = "GEMINI_API_KEY"
    """Name of the environment variable holding the Gemini API key."""


class OpenAICompatibleProviderConfig(ProviderConfig):
    """The ``openai-compatible`` provider (Ollama, llama.cpp, vLLM)."""

    base_url: BaseUrl | None = "http://localhost:11434/v1"
    """Server base URL; the default is a local Ollama."""
    tool_choice: Literal["auto", "required", "none"] | None = None
    """``tool_choice`` sent with every request that offers tools; null sends none (the server's
    default). llama-cpp-python's ``chatml-function-calling`` format shows the model no tools
    unless one is sent, and answers an empty stream to ``auto`` while streaming (README,
    "Local models")."""
    stream: bool = True
    """Stream responses; false makes one non-streamed request per model call (for servers that
    cannot stream tool calls), turned into the same events."""


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


_CHECKER_SPEC = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*")


def _check_checker_spec(value: str) -> str:
    if not _CHECKER_SPEC.fullmatch(value):
        raise ValueError("must be 'package.module:function', e.g. 'checks:done'")
    return value


CheckerSpec = Annotated[str, AfterValidator(_check_checker_spec)]
"""A Python checker, ``package.module:function``."""


def _check_relative(value: str) -> str:
    parts = Path(value).parts
    if Path(value).is_absolute() or ".." in parts or not parts:
        raise ValueError("must be a path inside the workspace, relative and without '..'")
    return value


WorkspaceFile = Annotated[str, Field(min_length=1), AfterValidator(_check_relative)]


def _check_schema(value: dict[str, Any]) -> dict[str, Any]:
    from amos.policy.destinations import check_schema

    check_schema(value)
    return value


def _check_pattern(value: str) -> str:
    from amos.policy.destinations import check_pattern

    check_pattern(value)
    return value


Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")]
"""64 hexadecimal digits."""


class FileCheckConfig(_Model):
    """A destination check on one workspace file or folder (issue 16)."""

    path: WorkspaceFile
    """Path relative to the workspace, without ``..``."""
    type: Literal["file", "dir"] = "file"
    """What must be there: a regular ``file`` or a folder (``dir``)."""
    min_bytes: NonNegInt | None = None
    """The file holds at least this many bytes."""
    sha256: Sha256Hex | None = None
    """The file's exact SHA-256 (64 hex digits)."""
    json_schema: Annotated[dict[str, Any], AfterValidator(_check_schema)] | None = None
    """The file is JSON valid against this JSON Schema (inline in the config)."""
    contains: Annotated[str, Field(min_length=1), AfterValidator(_check_pattern)] | None = None
    """A regular expression the file's text must contain a match for."""

    @model_validator(mode="after")
    def _only_file_checks_for_files(self) -> FileCheckConfig:
        if self.type == "dir" and any(getattr(self, n) is not None
                                      for n in ("min_bytes", "sha256", "json_schema", "contains")):
            raise ValueError("a folder (type \"dir\") can only be checked for existence")
        return self


class CompletionConfig(_Model):
    """Completion checks; every configured kind must confirm (spec/config.md)."""

    command: Text | None = None
    """Shell command run in the workspace; complete only when it exits 0 (``--verify``)."""
    timeout_s: Seconds = 120
    """Time limit of the command, seconds; past it is a checker error."""
    files: list[Annotated[Annotated[WorkspaceFile, Tag("entry:path")] | Annotated[FileCheckConfig, Tag("entry:check")],
                          Discriminator(lambda v: "entry:path" if isinstance(v, str) else "entry:check")]] = \
        Field(default_factory=list)
    """Files or folders (relative to the workspace) that must exist: a path, or an object
    with ``path`` and requirements (``type``, ``min_bytes``, ``sha256``, ``json_schema``,
    ``contains``)."""
    require_tools: list[ToolName] = Field(default_factory=list)
    """Tools that must have been observed succeeding."""
    python: CheckerSpec | None = None
    """Python checker, ``module:function``."""
    baseline: bool = True
    """Evaluate the checks once before the first model call; a run whose checks already
    passed then and whose workspace did not change is not VERIFIED_COMPLETE."""
    done_tool: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")] | None = None
    """Name of a tool offered to the model to declare completion (off when null)."""
    human: bool = False
    """A person confirms completion (``amos resume --confirm``, or the TUI's dialog)."""


class ProgressConfig(_Model):
    """How to compute the host progress key."""

    command: Text | None = None
    """Shell command whose output is the progress key."""
    python: CheckerSpec | None = None
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
    stop: Rung = AMOS_DOOM_LOOP_LADDER.stop
    """End the run (cause ``doom_loop``). 5: a response repeating a sentence five times
    is a loop (issue 17 item 15; the reference detector's default is 6); copies within
    one response stop earlier, at ``text.stop_repeats``."""


class DoomLoopTextConfig(_Model):
    """Repetition detection in assistant text (``true``/``false`` or this object)."""

    enabled: bool = True
    """Detect repeated text."""
    max_period_tokens: Annotated[int, Field(ge=1, le=256)] = AMOS_TEXT_OPTIONS.max_period_tokens
    """Longest repeated block looked for, tokens (at most 256: the work grows with it).
    160 finds a repeated sentence, sentence cycle or paragraph (the reference: 16)."""
    min_repeats: Threshold = AMOS_TEXT_OPTIONS.min_repeats
    """Consecutive copies needed (at most 1000)."""
    min_covered_tokens: Annotated[int, Field(ge=1, le=4000)] = AMOS_TEXT_OPTIONS.min_covered_tokens
    """Tokens the copies must cover (at most 4000)."""
    max_window_tokens: Annotated[int, Field(ge=1, le=4000)] = AMOS_TEXT_OPTIONS.max_window_tokens
    """Tail of the text examined, tokens (at most 4000: bounds the work per turn); 800
    holds five copies of the longest block (the reference: 400)."""
    stop_repeats: Threshold | None = AMOS_TEXT_OPTIONS.stop_repeats
    """Copies of one block in one response that end the run (cause ``doom_loop``), while
    it streams or when it ends; only ever earlier than ``ladder.stop`` (false there
    turns it off too); null means ``ladder.stop``. 4: a paragraph written four times is
    a loop (issue 23); the cross-turn text streak and tool streaks keep ``ladder.stop``."""


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


ScopeField = Annotated[str, Field(min_length=1, max_length=256)]
"""One evidence scope field, 1 to 256 characters."""


class EvidenceScopeConfig(_Model):
    """Who owns the evidence records."""

    owner_id: ScopeField | None = None
    """Owner; null means the local user name."""
    tenant_id: ScopeField | None = None
    """Tenant; null means none."""
    namespace: ScopeField | None = None
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


_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}")


def _check_task_id(value: str) -> str:
    if not _TASK_ID.fullmatch(value):
        raise ValueError("must be 1-128 characters: letters, digits and . _ : @ / + - (starting with a letter "
                         "or digit)")
    return value


TaskId = Annotated[str, AfterValidator(_check_task_id)]


class TaskStateConfig(_Model):
    """Host-owned task notes (seeds/protected-task-state)."""

    enabled: bool = False
    """Keep a task-state notebook."""
    task_id: TaskId | None = None
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


def _check_store_url(value: str) -> str:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise ValueError("is not a URL (postgresql://USER@HOST:PORT/DATABASE)") from None
    if parts.scheme not in ("postgresql", "postgres") or not (parts.hostname or "host=" in parts.query):
        raise ValueError("must be a postgresql://USER@HOST:PORT/DATABASE URL") from None
    return value


StoreUrl = Annotated[str, AfterValidator(_check_store_url)]


class StoreConfig(_Model):
    """Where sessions and evidence are kept (issue 22): local files, or one PostgreSQL database."""

    backend: Literal["files", "postgres"] = "files"
    """``files`` (the default: ``sessions.directory``/``evidence.directory``) or ``postgres``."""
    url: StoreUrl | None = None
    """``postgresql://USER@HOST:PORT/DATABASE`` for ``postgres``; ``AMOS_STORE_URL`` overrides it. Keep the
    password out of this file: ``PGPASSWORD``, ``~/.pgpass`` or ``AMOS_STORE_URL``."""


class CheckpointsConfig(_Model):
    """Workspace snapshots taken with each checkpoint (issue 20: /undo, /rewind, /diff)."""

    files: bool = True
    """Snapshot the workspace's files in a shadow git repository (needs the git program)."""
    max_file_bytes: PosInt = 10 * 1024 * 1024
    """Files larger than this are left out of snapshots (and listed as skipped), bytes."""
    max_workspace_bytes: PosInt = 500 * 1024 * 1024
    """Most file content one snapshot holds; past it new files are left out, bytes."""


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
    permissions: PermissionsConfig = Field(default_factory=PermissionsConfig)
    """Permission rules (``allow``/``ask``/``deny`` patterns)."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """The command sandbox."""
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
    store: StoreConfig = Field(default_factory=StoreConfig)
    """Storage backend of sessions and evidence (files or PostgreSQL)."""
    checkpoints: CheckpointsConfig = Field(default_factory=CheckpointsConfig)
    """Workspace file snapshots."""
    ui: UiConfig = Field(default_factory=UiConfig)
    """TUI settings."""
    mcp_servers: dict[McpServerName, McpServerConfig] = Field(default_factory=dict, alias="mcpServers")
    """MCP servers by name (``.mcp.json`` servers are merged under these); see issue 18."""
    trusted_projects: dict[
        Annotated[str, AfterValidator(_check_absolute)], Annotated[str, AfterValidator(_check_sha256)]
    ] = Field(default_factory=dict)
    """Absolute path of a project's amos.json or .mcp.json to its SHA-256; read only from the user config."""

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

    @model_validator(mode="after")
    def _owners_match(self) -> AmosConfig:
        task_owner = self.task_state.owner_id
        evidence_owner = self.evidence.scope.owner_id
        if (self.task_state.enabled and self.evidence.enabled and task_owner and evidence_owner
                and task_owner != evidence_owner):
            raise ValueError(f"task_state.owner_id {task_owner!r} must match evidence.scope.owner_id "
                             f"{evidence_owner!r} when both are enabled")
        return self


def default_config() -> AmosConfig:
    """The built-in defaults (what ``amos config show --defaults`` prints)."""
    return AmosConfig()


def config_to_json(config: AmosConfig) -> dict[str, Any]:
    """``config`` as JSON-ready data with the keys of the file (``openai-compatible``)."""
    return config.model_dump(mode="json", by_alias=True)
