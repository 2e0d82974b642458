"""Opening a host: config, session, model, workspace and tools from the options.

This is where flags, the session's host section and the config meet (spec/cli.md:
"flags given again override" the settings a session remembers; "Choosing the model":
``--model``/``--script`` > session > config ``model`` > nothing, with no silent
fallback). Each step is one small function; :func:`open_host` runs them in order and
wires the collaborators (:class:`~amos.engine.engine.Engine`) into a
:class:`~amos.engine.host.Host`.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amos import paths
from amos.config_models import AmosConfig
from amos.context import build_system_prompt
from amos.doom_guard import DoomLoopGuard
from amos.engine.access import CallAccess, build_access
from amos.engine.binding import SessionBinding
from amos.engine.completion import Completion
from amos.engine.context_budget import ContextBudget
from amos.engine.engine import Engine
from amos.engine.evidence import EvidenceRecorder
from amos.engine.finish import RunEnd
from amos.engine.gates import Gate
from amos.engine.host import Host
from amos.engine.masking import Masker
from amos.engine.mcp import McpBridge, McpTools, is_mcp_tool_name
from amos.engine.model import ModelSlot
from amos.engine.options import (
    HUMAN_VERIFY,
    NO_MODEL_HELP,
    Opened,
    RunOptions,
    copy_demo_workspace,
    demo_script_path,
    demo_verify_command,
)
from amos.engine.permissions import Approvals
from amos.engine.settings import RunSettings
from amos.engine.snapshots import SnapshotGate
from amos.engine.tasks import Instructions
from amos.engine.transcript import Transcript
from amos.errors import AmosError, ConfigError, UsageError
from amos.policy.loop_policy import LoopPolicy
from amos.providers import secret_values
from amos.redact import strip_url_secrets, url_credentials
from amos.session_store import SessionStore
from amos.sessions import HostSettings, Session


def load_host_config(options: RunOptions) -> tuple[AmosConfig, list[str]]:
    """Load the layered config for these options.

    Raises:
        ConfigError: an unreadable or invalid config file.
    """
    loaded = _load_layers(options)
    return loaded.config, list(loaded.warnings)


def _load_layers(options: RunOptions) -> Any:
    """The ``LoadedConfig`` (config, warnings and every layer: permission rules add up
    across layers)."""
    from amos.config import load_config

    config_path = options.config_path
    if config_path is not None and not config_path.is_absolute():
        config_path = options.cwd / config_path
    return load_config(config_path=config_path, cwd=options.cwd)


def open_store(config: AmosConfig) -> SessionStore:
    """The session store the config points at: the sessions folder, or the PostgreSQL
    database of ``store.url`` with ``store.backend: "postgres"`` (the same interface).

    Raises:
        ConfigError: the PostgreSQL backend without a usable URL or driver (exit 2).
    """
    if config.store.backend == "postgres":
        from amos.store_pg import open_session_store

        return open_session_store(config)
    return SessionStore(paths.sessions_dir(config))


def policy_hash(config: AmosConfig) -> str:
    """``sha256:`` of the loop policy and doom-loop config in force (receipts' ``policy``)."""
    from amos.policy.canonical import fingerprint_key_material

    data = {
        "loop_policy": config.loop_policy.model_dump(mode="json") if config.loop_policy else None,
        "doom_loop": config.doom_loop.model_dump(mode="json") if config.doom_loop else None,
    }
    return "sha256:" + fingerprint_key_material(data)


@dataclass
class _Choice:
    """What the options, the session and the config decided together."""

    model: str
    demo: bool
    workspace: Path
    flag_verify: str | None
    verify: str | None
    verify_source: str
    human: bool
    max_steps: int
    base_url: str | None


def _replace_choice(choice: _Choice, **changes: Any) -> _Choice:
    from dataclasses import replace

    return replace(choice, **changes)


# ---------------------------------------------------------------------------- steps


def _open_session(store: SessionStore, options: RunOptions, opened: Opened) -> tuple[Session, Any]:
    """The session to run (resumed and locked, or new) and its lock (None for a new one)."""
    if options.session is None:
        return store.create(), None
    if not options.session.strip():
        raise UsageError("--session needs a session id, a name or 'latest'")
    session_id = store.resolve(options.session)
    lock = store.lock(session_id)
    try:
        session, warnings = store.open(session_id)
    except AmosError:
        lock.release()
        raise
    opened.warnings.extend(warnings)  # a recovered journal, a torn last line…
    return session, lock


def _remembered_config(options: RunOptions, session: Session, config: AmosConfig,
                       opened: Opened) -> AmosConfig:
    """The config file the session was run with, when no ``--config`` is given now."""
    if options.config_path is not None or not session.host.config_path:
        return config
    remembered, warnings = load_host_config(RunOptions(config_path=Path(session.host.config_path), cwd=options.cwd))
    opened.warnings = warnings + [w for w in opened.warnings if w not in warnings]
    return remembered


def _is_utf8(text: str) -> bool:
    """False when ``text`` holds undecodable bytes (lone surrogates from the OS)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _missing_workspace(workspace: Path, host: HostSettings, options: RunOptions) -> str:
    """Why the workspace cannot be used; for a session resumed on another machine (a
    shared session store, issue 22) it names where the session last ran."""
    here = socket.gethostname()
    if options.workspace is None and host.workspace and host.machine and host.machine != here:
        return (f"workspace {workspace} does not exist on this machine ({here}); the session last ran there on "
                f"{host.machine}. Pass --workspace DIR with this machine's copy of the project")
    return f"workspace {workspace} is not a folder; pass --workspace DIR"


def _note_moved_workspace(workspace: Path, host: HostSettings, opened: Opened) -> None:
    """A warning when the session last ran on another machine (a shared store, issue 22)."""
    if not host.machine or host.machine == socket.gethostname() or not host.workspace:
        return  # the same machine: nothing to say (as before issue 22)
    if Path(host.workspace) != workspace:
        opened.warnings.append(f"this session last ran in {host.workspace} on {host.machine}; it now runs in "
                               f"{workspace}")
    else:
        opened.warnings.append(f"this session last ran on {host.machine}; its workspace {workspace} here is "
                               "this machine's copy, which may differ")


def _choose(options: RunOptions, session: Session, config: AmosConfig, opened: Opened) -> _Choice:
    """Model, demo mode, workspace, completion check, step cap and base URL."""
    host, cwd = session.host, options.cwd
    demo = options.demo
    model = options.model or host.model or (str(config.model) if config.model else None)
    if options.demo:
        model = options.model or f"scripted:{demo_script_path()}"
    if model is None:
        if options.require_model:  # an ignored project file may be why (issue 21)
            ignored = [w for w in opened.warnings if w.startswith("ignoring ") and "trust" in w]
            raise UsageError(NO_MODEL_HELP + "".join(f"\n  ({w})" for w in ignored))
        demo = True
        model = f"scripted:{demo_script_path()}"
    if demo and options.workspace is None and not options.session:
        opened.demo_workspace = copy_demo_workspace()
        workspace = opened.demo_workspace
    elif options.workspace is not None:
        workspace = options.workspace if options.workspace.is_absolute() else cwd / options.workspace
    elif host.workspace:
        workspace = Path(host.workspace)
    else:
        workspace = Path(config.workspace)
        if not workspace.is_absolute():
            workspace = cwd / workspace
    workspace = workspace.expanduser().resolve()
    if not str(workspace).isascii() and not _is_utf8(str(workspace)):
        raise UsageError(f"workspace path {str(workspace)!r} is not valid UTF-8; choose a folder with a UTF-8 name")
    if not workspace.is_dir():
        raise UsageError(_missing_workspace(workspace, host, options))
    _note_moved_workspace(workspace, host, opened)
    opened.demo = demo
    if options.verify is not None and (not options.verify.strip() or not _is_utf8(options.verify)):
        raise UsageError("--verify needs a command (non-blank UTF-8 text) that exits 0 when the work is done")
    # Only --verify is remembered by the session; the config's completion.command is
    # read afresh every time, so editing the config takes effect on the next run.
    if options.no_verify and options.verify is not None:
        raise UsageError("--verify and --no-verify exclude each other")
    flag_verify = options.verify if options.verify is not None else (None if options.no_verify else host.verify)
    source = "flag" if options.verify is not None else "session"
    if demo and options.verify is None and not options.no_verify and opened.demo_workspace is not None:
        flag_verify, source = demo_verify_command(), "demo"
    human = flag_verify is not None and flag_verify.strip() == HUMAN_VERIFY
    verify = None if human else flag_verify
    if verify is None and not human and config.loop_policy and config.loop_policy.completion:
        verify = config.loop_policy.completion.command
        source = "config"
    max_steps = options.max_steps or host.max_steps or config.run.max_steps
    if max_steps < 1:
        raise UsageError(f"--max-steps must be at least 1 (got {max_steps})")
    if model.startswith("scripted:"):
        from amos.providers import parse_model_spec

        parse_model_spec(model)
        model = "scripted:" + str((cwd / model[len("scripted:"):]).resolve())
    return _Choice(model=model, demo=demo, workspace=workspace, flag_verify=flag_verify, verify=verify,
                   verify_source=source if (verify or human) else "none", human=human,
                   max_steps=int(max_steps), base_url=options.base_url or host.base_url)


def _key_variables(config: AmosConfig) -> set[str]:
    # the session store's URL and password too (issue 22): a tool must not reach the shared database
    names = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AMOS_STORE_URL", "PGPASSWORD"}
    for pconf in (config.providers.openai, config.providers.anthropic, config.providers.google,
                  config.providers.openai_compatible):
        if pconf.api_key_env:
            names.add(pconf.api_key_env)
    return names


def _provider_factory(config: AmosConfig, choice: _Choice, session: Session, cwd: Path) -> Callable[[str], Any]:
    from amos.providers import create_provider

    def factory(spec: str) -> Any:
        return create_provider(spec, config=config, base_url=choice.base_url, state=session.provider_state, cwd=cwd)

    return factory


def _check_escalation(config: AmosConfig, factory: Callable[[str], Any]) -> None:
    escalation = config.doom_loop.escalation if config.doom_loop else None
    if escalation is not None and escalation.model:
        try:
            factory(escalation.model)
        except AmosError as exc:
            raise ConfigError(f"escalation model is not usable: {exc}", json_path="doom_loop.escalation.model") from None


def _task_state(config: AmosConfig, session: Session) -> Any:
    """The session's task notebook when ``task_state.enabled`` (else None).

    The whole snapshot is validated before anything in the session changes.

    Raises:
        ConfigError: the snapshot belongs to another owner, scope or task, or is
            invalid (``TASK_STATE_SCOPE`` / ``TASK_STATE_INVALID``); with evidence
            enabled, the task owner differs from the evidence owner.
    """
    if not config.task_state.enabled:
        return None
    from amos.evidence.model import local_user_name
    from amos.tasks import TaskState, TaskStateError, binding_from_config

    binding = binding_from_config(config.task_state, session_id=session.id, local_user=local_user_name())
    if config.evidence.enabled:
        owner = config.evidence.scope.owner_id or local_user_name()
        if owner != binding["scope"].owner_id:
            raise ConfigError(f"the task owner {binding['scope'].owner_id!r} must match the evidence owner "
                              f"{owner!r}", json_path="task_state.owner_id")
    try:
        tasks = TaskState.restore(session.task_state, **binding)
    except TaskStateError as exc:
        hint = ""
        if exc.code == "TASK_STATE_CAPACITY":
            hint = (" — the saved notebook is larger than this config allows; raise task_state.max_entries / "
                    "max_prompt_tokens / max_snapshot_bytes to open it")
        error = ConfigError(f"{exc.code}: session {session.id}: {exc}{hint}", json_path="task_state")
        error.code = exc.code  # --json reports TASK_STATE_SCOPE / _INVALID / _CAPACITY
        raise error from None
    needed = tasks.view_tokens()
    if needed > tasks.limits.max_prompt_tokens:
        raise ConfigError(f"task_state.max_prompt_tokens {tasks.limits.max_prompt_tokens} is smaller than the task "
                          f"view needs (~{needed} tokens even now); raise it", json_path="task_state.max_prompt_tokens")
    return tasks


def _evidence_capture(config: AmosConfig, session: Session, secrets: tuple[str, ...]) -> Any:
    """Evidence capture when ``evidence.enabled`` (else None).

    Raises:
        ConfigError: the session's records belong to another evidence scope (nothing
            is changed; the session must be opened with the config that created it).
    """
    if not config.evidence.enabled:
        return None
    from amos.evidence import open_evidence_store
    from amos.evidence.capture import EvidenceCapture

    store = open_evidence_store(config)
    scope = {"owner_id": store.scope.owner_id, "namespace": store.scope.namespace,
             "tenant_id": store.scope.tenant_id}
    if session.evidence_scope is not None and session.evidence_scope != scope:
        raise ConfigError(f"session {session.id} keeps its evidence in scope {session.evidence_scope}, but the "
                          f"config gives {scope}; open it with the config that created it",
                          json_path="evidence.scope")
    session.evidence_scope = scope
    return EvidenceCapture(store, secrets=secrets, identity=dict(scope), session_id=session.id,
                           project_threshold_bytes=int(config.evidence.project_threshold_bytes))


def _tool_manager(config: AmosConfig, choice: _Choice, opened: Opened, extra_tools: list, *,
                  sandboxed: bool = False) -> Any:
    from amos.tools import ToolContext, ToolManager, builtin_tools
    from amos.tools.command import child_env

    env = child_env(os.environ, _key_variables(config))
    if choice.demo:
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    permissions = dict(config.tools.permissions)
    if choice.demo and opened.demo_workspace is not None:
        permissions.update({"write_file": "allow", "edit_file": "allow", "run_command": "allow"})
    tools = builtin_tools(sandboxed=sandboxed) + extra_tools
    completion = config.loop_policy.completion if config.loop_policy else None
    if completion is not None and completion.done_tool:
        from amos.engine.done_tool import done_tool

        if completion.done_tool in {t.name for t in tools}:
            raise ConfigError(f"done_tool {completion.done_tool!r} is the name of a tool amos already has; choose "
                              "another name (e.g. \"done\")", json_path="loop_policy.completion.done_tool")
        tools.append(done_tool(completion.done_tool))
    return ToolManager(
        tools, permissions=permissions,
        context=ToolContext(workspace=choice.workspace, command_timeout_s=float(config.tools.command_timeout_s),
                            max_output_bytes=int(config.tools.max_output_bytes), env=env))


def _loop_policy(config: AmosConfig, tools: Any, choice: _Choice, mcp: bool) -> LoopPolicy | None:
    if config.loop_policy is None:
        return None
    policy = LoopPolicy.from_config(config.loop_policy)
    effects = {spec.name: tools.effect(spec.name) for spec in tools.specs()}
    if mcp:  # MCP tools are listed when a run starts (McpTools.prepare checks them then)
        named = [*(policy.read_only_tools or ()), *(policy.completion.require_tools if policy.completion else ())]
        effects.update({name: "read" for name in named if is_mcp_tool_name(name) and name not in effects})
    try:
        policy.check_tools(effects)
    except ValueError as exc:
        raise ConfigError(str(exc), json_path="loop_policy") from None
    comp = policy.with_verify(choice.verify).completion
    if comp is not None and comp.done_tool and not (comp.configured or comp.human or choice.human):
        raise ConfigError("done_tool needs a completion check to decide the claim (command, files, require_tools, "
                          "python or human, or --verify): a done call without a receipt is a false completion",
                          json_path="loop_policy.completion.done_tool")
    return policy


def _settings(config: AmosConfig, options: RunOptions, choice: _Choice, loop_policy: LoopPolicy | None,
              secrets: tuple[str, ...]) -> RunSettings:
    policy = config.loop_policy
    return RunSettings(
        max_steps=choice.max_steps,
        token_budget=config.run.token_budget,
        timeout_s=float(config.run.timeout_s) if config.run.timeout_s else None,
        verify=choice.verify,
        verify_source=choice.verify_source,
        human=choice.human,
        verify_timeout_s=float(policy.completion.timeout_s) if policy and policy.completion else 120.0,
        approvals_owner=config.approvals.owner,
        approvals_deadline_s=float(config.approvals.deadline_s),
        auto_approve=options.yes,
        interactive=options.interactive or options.ask,
        policy_hash=policy_hash(config),
        loop_policy=loop_policy,
        autosave=bool(config.sessions.autosave) or not options.interactive,
        secrets=secrets,
    )


def _remember_host(session: Session, options: RunOptions, choice: _Choice, secrets: tuple[str, ...],
                   opened: Opened) -> None:
    host = session.host
    if choice.flag_verify and Masker(secrets).text(choice.flag_verify) != choice.flag_verify:
        # a secret never reaches disk: the check runs now but the session does not keep it
        opened.warnings.append("the --verify command holds a secret value (an API key or token); it is used for "
                               "this run but not remembered by the session — refer to the variable instead "
                               "(e.g. \"$MY_TOKEN\" in single quotes) to have it remembered")
        choice = _replace_choice(choice, flag_verify=host.verify if host.verify != choice.flag_verify else None)
    session.host = HostSettings(
        model=choice.model, base_url=strip_url_secrets(choice.base_url), workspace=str(choice.workspace),
        config_path=str((options.cwd / options.config_path).resolve()) if options.config_path else host.config_path,
        verify=choice.flag_verify, max_steps=options.max_steps or host.max_steps,
        checker_pins=dict(host.checker_pins), machine=socket.gethostname() or None)


def _mcp_servers(config: AmosConfig, options: RunOptions, opened: Opened) -> Any:
    """The configured MCP servers (``mcpServers`` and a trusted ``./.mcp.json``); their
    loading notices (an untrusted file, ignored keys) become warnings of the open.

    Raises:
        ConfigError: an invalid server entry or ``.mcp.json`` (names the server and field).
    """
    from amos.mcp import McpServers, load_mcp_servers

    loaded = load_mcp_servers(config, project_dir=options.cwd)
    opened.warnings.extend(w for w in loaded.warnings if w not in opened.warnings)
    return McpServers(list(loaded.servers))


def _mcp_tools(servers: Any, tools: Any, *, store: SessionStore, session: Session, saved: bool,
               workspace: Path, secrets: tuple[str, ...]) -> McpTools | None:
    """The MCP collaborator (None without servers); the hub is built on first use and
    its servers' stderr logs kept under the session folder."""
    if not servers.servers:
        return None
    from amos.mcp import McpHub

    log_dir = store.session_dir(session.id) / "mcp" if saved else paths.log_dir() / "mcp"

    def make_hub() -> McpHub:
        return McpHub(servers, log_dir=log_dir, cwd=workspace, secrets=secrets)

    return McpTools(McpBridge(make_hub), tools, [spec.name for spec in servers.servers])


def wire(*, config: AmosConfig, settings: RunSettings, session: Session, binding: SessionBinding,
         model: ModelSlot, tools: Any, workspace: Path, capture: Any, tasks: Any,
         extra_gates: list[Gate] | None = None, mcp: McpTools | None = None,
         access: CallAccess | None = None) -> Engine:
    """Wire the collaborators of one session into an :class:`Engine`.

    Args:
        config: the loaded config.
        settings: limits and approval routing.
        session: the session to run.
        binding: its store and lock.
        model: the model in force.
        tools: the tool manager.
        workspace: the workspace root.
        capture: evidence capture, or None.
        tasks: the task notebook, or None.
        extra_gates: gates to add after the built-in ones (see :mod:`amos.engine.gates`).
        mcp: the MCP collaborator, or None.
        access: permission rules, the sandbox and plan mode, or None (configured
            permissions alone).
    """
    autosave = binding.saved and settings.autosave
    masker = Masker(settings.secrets)
    if tasks is not None:
        tasks.filter_inputs(masker.value)  # every note a front end adds is masked (issue 17, item 2)
    approvals = Approvals()
    transcript = Transcript(session, binding, journalled=autosave)
    instructions = Instructions(build_system_prompt(workspace, config.system_prompt), tasks, transcript, binding,
                                mode_note=access.instructions_note if access is not None else None)
    env = dict(tools.context.env)
    return Engine(
        config=config, settings=settings, workspace=workspace, env=env, transcript=transcript, binding=binding,
        model=model, tools=tools, masker=masker, instructions=instructions,
        context=ContextBudget(config.context, transcript, model, tools, instructions, binding, capture, masker,
                              autosave=autosave),
        evidence=EvidenceRecorder(capture, transcript, binding, autosave=autosave),
        completion=Completion(settings, workspace, env, transcript, instructions, approvals, masker,
                              config_completion=config.loop_policy.completion if config.loop_policy else None),
        approvals=approvals,
        run_end=RunEnd(settings, transcript, binding, instructions, autosave=autosave),
        doom_guard=DoomLoopGuard.from_config(config.doom_loop, session.doom_loop) if config.doom_loop else None,
        extra_gates=list(extra_gates or []),
        mcp=mcp,
        access=access,
        snapshots=SnapshotGate(_snapshot_opener(config, session.id, workspace), transcript),
    )


def _snapshot_opener(config: AmosConfig, session_id: str, workspace: Path) -> Callable[[], Any]:
    """Opens the session's shadow repository on first need (``amos.snapshots`` loads then)."""

    def opener() -> Any:
        from amos.snapshots import open_session_repo

        return open_session_repo(config, session_id, workspace)

    return opener


def open_host(options: RunOptions, *, extra_gates: list[Gate] | None = None) -> tuple[Host, Opened]:
    """Build a host for these options, holding the session's lock.

    Args:
        options: what the front end asked for.
        extra_gates: gates added after the built-in ones (see ``docs/architecture.md``
            "Add a gate").

    Returns:
        ``(Host, Opened)``.

    Raises:
        ConfigError: invalid config, script or missing API key (exit 2).
        UsageError: no model chosen with ``require_model``, or a bad flag value.
        SessionError: the session is unknown, corrupt or busy.
    """
    loaded = _load_layers(options)
    config = loaded.config
    store = open_store(config)
    opened = Opened(warnings=list(loaded.warnings))
    session, lock = _open_session(store, options, opened)
    try:
        config = _remembered_config(options, session, config, opened)
        choice = _choose(options, session, config, opened)
        factory = _provider_factory(config, choice, session, options.cwd)
        provider = factory(choice.model)
        _check_escalation(config, factory)
        servers = _mcp_servers(config, options, opened)
        secrets = tuple(dict.fromkeys(secret_values(config) + servers.secret_values()
                                      + tuple(sorted(url_credentials(choice.base_url)))))
        capture = _evidence_capture(config, session, secrets)
        extra_tools: list = []
        if capture is not None:
            from amos.evidence.tools import evidence_tools

            # capture.known is the EvidenceRecorder's lookup over the current session.
            extra_tools = evidence_tools(capture.store, lambda record_id: capture.known(record_id))
        tasks = _task_state(config, session)
        access = build_access(config, list(loaded.layers), choice.workspace, mode=options.sandbox,
                              plan=options.plan, allow=options.allow, deny=options.deny, warnings=opened.warnings)
        tools = _tool_manager(config, choice, opened, extra_tools, sandboxed=access.sandbox.works)
        settings = _settings(config, options, choice, _loop_policy(config, tools, choice, bool(servers.servers)),
                             secrets)
        _remember_host(session, options, choice, secrets, opened)
        if lock is None and not options.no_save:
            lock = store.lock(session.id)
        binding = SessionBinding(None if options.no_save else store, lock,
                                 max_checkpoints=int(config.sessions.max_checkpoints))
        mcp = _mcp_tools(servers, tools, store=store, session=session, saved=not options.no_save,
                         workspace=choice.workspace, secrets=secrets)
        engine = wire(config=config, settings=settings, session=session, binding=binding,
                      model=ModelSlot(provider, choice.model, factory), tools=tools, workspace=choice.workspace,
                      capture=capture, tasks=tasks, extra_gates=extra_gates, mcp=mcp, access=access)
    except BaseException:
        if lock is not None:
            lock.release()
        if opened.demo_workspace is not None:
            shutil.rmtree(opened.demo_workspace, ignore_errors=True)
        raise
    return Host(engine), opened
