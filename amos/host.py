"""Opening a runner: config, session, model, workspace and tools from host options.

This is where flags, the session's host section and config meet (spec/cli.md:
"flags given again override" the settings a session remembers; "Choosing the model":
``--model``/``--script`` > session > config ``model`` > nothing, with no silent
fallback). The CLI and the TUI call :func:`open_runner`, then only the runner.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from amos import paths
from amos.context import build_system_prompt
from amos.doom_guard import DoomLoopGuard
from amos.errors import AmosError, ConfigError, UsageError
from amos.policy.loop_policy import LoopPolicy
from amos.providers import secret_values
from amos.redact import strip_url_secrets
from amos.sessions import HostSettings, Session, SessionStore

NO_MODEL_HELP = (
    "no model chosen: pass --model PROVIDER:MODEL (e.g. openai:gpt-4o-mini, "
    "anthropic:claude-sonnet-4-5) or --script PATH, or set \"model\" in the config "
    "(`amos config path` shows where); `amos run --demo` works offline with no key"
)


def demo_script_path() -> Path:
    """The bundled demo script (package data)."""
    return Path(str(resources.files("amos.demo").joinpath("script.json")))


def demo_workspace_source() -> Path:
    """The bundled demo workspace (package data, never modified)."""
    return Path(str(resources.files("amos.demo").joinpath("workspace")))


def copy_demo_workspace() -> Path:
    """Copy the demo workspace to a new temporary folder and return it."""
    target = Path(tempfile.mkdtemp(prefix="amos-demo-"))
    shutil.copytree(demo_workspace_source(), target, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def demo_verify_command() -> str:
    """The demo's completion check: its unittest suite with the Python running amos."""
    return f"{shlex.quote(sys.executable)} -m unittest"


@dataclass
class RunOptions:
    """What the user asked for on the command line or in the TUI.

    Attributes:
        config_path: ``--config``.
        model: ``--model`` (``--script PATH`` is passed here as ``scripted:PATH``).
        base_url: ``--base-url``.
        workspace: ``--workspace``.
        session: ``--session`` id or name to resume.
        max_steps: ``--max-steps``.
        verify: ``--verify`` completion-check command.
        yes: ``--yes`` (never remembered by the session).
        no_save: ``--no-save``.
        demo: run the bundled demo (``amos run --demo``; the TUI's offline mode).
        interactive: a person can answer approvals now (TUI).
        require_model: when no model is chosen, fail (``amos run``) instead of demo.
        cwd: folder relative flags are resolved against.
    """

    config_path: Path | None = None
    model: str | None = None
    base_url: str | None = None
    workspace: Path | None = None
    session: str | None = None
    max_steps: int | None = None
    verify: str | None = None
    yes: bool = False
    no_save: bool = False
    demo: bool = False
    interactive: bool = False
    require_model: bool = True
    cwd: Path = field(default_factory=Path.cwd)


@dataclass
class Opened:
    """What :func:`open_runner` prepared, besides the runner itself."""

    demo: bool = False
    demo_workspace: Path | None = None
    warnings: list[str] = field(default_factory=list)


def load_host_config(options: RunOptions) -> tuple[Any, list[str]]:
    """Load the layered config for these options.

    Raises:
        ConfigError: an unreadable or invalid config file.
    """
    from amos.config import load_config

    config_path = options.config_path
    if config_path is not None and not config_path.is_absolute():
        config_path = options.cwd / config_path
    loaded = load_config(config_path=config_path, cwd=options.cwd)
    return loaded.config, list(loaded.warnings)


def open_store(config: Any) -> SessionStore:
    """The session store the config points at."""
    return SessionStore(paths.sessions_dir(config))


def _policy_hash(config: Any) -> str:
    data = {
        "loop_policy": config.loop_policy.model_dump(mode="json") if config.loop_policy else None,
        "doom_loop": config.doom_loop.model_dump(mode="json") if config.doom_loop else None,
    }
    from amos.policy.canonical import fingerprint_key_material

    return "sha256:" + fingerprint_key_material(data)


def _task_state(config: Any, session: Any) -> Any:
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


def _evidence(config: Any, session: Any) -> tuple[Any, list]:
    """Evidence capture and the retrieval tools when ``evidence.enabled`` (else ``(None, [])``).

    Raises:
        ConfigError: the session's records belong to another evidence scope (nothing
            is changed; the session must be opened with the config that created it).
    """
    if not config.evidence.enabled:
        return None, []
    from amos.evidence import open_evidence_store
    from amos.evidence.capture import EvidenceCapture
    from amos.evidence.tools import evidence_tools
    store = open_evidence_store(config)
    scope = {"owner_id": store.scope.owner_id, "namespace": store.scope.namespace,
             "tenant_id": store.scope.tenant_id}
    if session.evidence_scope is not None and session.evidence_scope != scope:
        raise ConfigError(f"session {session.id} keeps its evidence in scope {session.evidence_scope}, but the "
                          f"config gives {scope}; open it with the config that created it",
                          json_path="evidence.scope")
    session.evidence_scope = scope
    capture = EvidenceCapture(store, secrets=secret_values(config), identity=dict(scope), session_id=session.id,
                              project_threshold_bytes=int(config.evidence.project_threshold_bytes))
    from amos.evidence.model import EvidenceReference

    def known(record_id: str) -> EvidenceReference | None:
        for message in session.messages:
            for part in message.tool_results:
                if part.evidence_id == record_id and part.evidence:
                    return EvidenceReference.model_validate(part.evidence)
        return None

    capture.known = known
    return capture, evidence_tools(store, known)


def _is_utf8(text: str) -> bool:
    """False when ``text`` holds undecodable bytes (lone surrogates from the OS)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _key_variables(config: Any) -> set[str]:
    names = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"}
    for pconf in (config.providers.openai, config.providers.anthropic, config.providers.google,
                  config.providers.openai_compatible):
        if pconf.api_key_env:
            names.add(pconf.api_key_env)
    return names


def open_runner(options: RunOptions):  # -> tuple[AgentRunner, Opened]
    """Build a runner for these options, holding the session's lock.

    Returns:
        ``(AgentRunner, Opened)``.

    Raises:
        ConfigError: invalid config, script or missing API key (exit 2).
        UsageError: no model chosen with ``require_model``, or a bad flag value.
        SessionError: the session is unknown, corrupt or busy.
    """
    from amos.execution import RunSettings
    from amos.providers import create_provider
    from amos.runner import AgentRunner
    from amos.tools import ToolContext, ToolManager, builtin_tools
    from amos.tools.command import child_env

    config, warnings = load_host_config(options)
    store = open_store(config)
    opened = Opened(warnings=warnings)

    session: Session
    lock = None
    if options.session is not None:
        if not options.session.strip():
            raise UsageError("--session needs a session id, a name or 'latest'")
        session_id = store.resolve(options.session)
        lock = store.lock(session_id)
        try:
            session = store.load(session_id)
        except AmosError:
            lock.release()
            raise
        opened.warnings.extend(store.warnings)  # a recovered journal, a torn last line…
        store.warnings.clear()
    else:
        session = store.create()
    host = session.host

    try:
        cwd = options.cwd
        if options.config_path is None and host.config_path:
            remembered = RunOptions(config_path=Path(host.config_path), cwd=cwd)
            config, warnings = load_host_config(remembered)
            opened.warnings = warnings + [w for w in opened.warnings if w not in warnings]
        demo = options.demo
        model = options.model or host.model or (str(config.model) if config.model else None)
        if options.demo:
            model = options.model or f"scripted:{demo_script_path()}"
        if model is None:
            if options.require_model:
                raise UsageError(NO_MODEL_HELP)
            demo = True
            model = f"scripted:{demo_script_path()}"
        workspace_opt = options.workspace
        if demo and workspace_opt is None and not options.session:
            opened.demo_workspace = copy_demo_workspace()
            workspace = opened.demo_workspace
        elif workspace_opt is not None:
            workspace = (cwd / workspace_opt) if not workspace_opt.is_absolute() else workspace_opt
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
            raise UsageError(f"workspace {workspace} is not a folder; pass --workspace DIR")
        opened.demo = demo

        if options.verify is not None and (not options.verify.strip() or not _is_utf8(options.verify)):
            raise UsageError("--verify needs a command (non-blank UTF-8 text) that exits 0 when the work is done")
        # Only --verify is remembered by the session; the config's completion.command is
        # read afresh every time, so editing the config takes effect on the next run.
        flag_verify = options.verify if options.verify is not None else host.verify
        if demo and options.verify is None and opened.demo_workspace is not None:
            flag_verify = demo_verify_command()
        verify = flag_verify
        if verify is None and config.loop_policy and config.loop_policy.completion:
            verify = config.loop_policy.completion.command
        max_steps = options.max_steps or host.max_steps or config.run.max_steps
        if max_steps < 1:
            raise UsageError(f"--max-steps must be at least 1 (got {max_steps})")
        base_url = options.base_url or host.base_url

        env = child_env(os.environ, _key_variables(config))
        if demo:
            env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        permissions = dict(config.tools.permissions)
        if demo and opened.demo_workspace is not None:
            permissions.update({"write_file": "allow", "edit_file": "allow", "run_command": "allow"})

        def factory(spec: str):
            return create_provider(spec, config=config, base_url=base_url, state=session.provider_state, cwd=cwd)

        if model.startswith("scripted:"):
            from amos.providers import parse_model_spec

            parse_model_spec(model)
            model = "scripted:" + str((cwd / model[len("scripted:"):]).resolve())
        provider = factory(model)
        escalation = config.doom_loop.escalation if config.doom_loop else None
        if escalation is not None and escalation.model:
            try:
                factory(escalation.model)
            except AmosError as exc:
                raise ConfigError(f"escalation model is not usable: {exc}",
                                  json_path="doom_loop.escalation.model") from None
        capture, extra_tools = _evidence(config, session)
        tasks = _task_state(config, session)
        tools = ToolManager(
            builtin_tools() + extra_tools,
            permissions=permissions,
            context=ToolContext(workspace=workspace, command_timeout_s=float(config.tools.command_timeout_s),
                                max_output_bytes=int(config.tools.max_output_bytes), env=env),
        )
        policy = config.loop_policy
        verify_timeout = float(policy.completion.timeout_s) if policy and policy.completion else 120.0
        loop_policy = LoopPolicy.from_config(policy) if policy is not None else None
        if loop_policy is not None:
            try:
                loop_policy.check_tools({spec.name: tools.effect(spec.name) for spec in tools.specs()})
            except ValueError as exc:
                raise ConfigError(str(exc), json_path="loop_policy") from None
        settings = RunSettings(
            max_steps=int(max_steps),
            token_budget=config.run.token_budget,
            timeout_s=float(config.run.timeout_s) if config.run.timeout_s else None,
            verify=verify,
            verify_timeout_s=verify_timeout,
            approvals_owner=config.approvals.owner,
            approvals_deadline_s=float(config.approvals.deadline_s),
            auto_approve=options.yes,
            interactive=options.interactive,
            policy_hash=_policy_hash(config),
            loop_policy=loop_policy,
            autosave=bool(config.sessions.autosave) or not options.interactive,
            secrets=secret_values(config),
        )
        session.host = HostSettings(
            model=model,
            base_url=strip_url_secrets(base_url),
            workspace=str(workspace),
            config_path=str((cwd / options.config_path).resolve()) if options.config_path else host.config_path,
            verify=flag_verify,
            max_steps=options.max_steps or host.max_steps,
            checker_pins=dict(host.checker_pins),
        )
        if lock is None and not options.no_save:
            lock = store.lock(session.id)
        runner = AgentRunner(
            session=session,
            store=None if options.no_save else store,
            provider=provider,
            model_spec=model,
            tools=tools,
            workspace=workspace,
            system_prompt=build_system_prompt(workspace, config.system_prompt),
            settings=settings,
            env=env,
            provider_factory=factory,
            lock=lock,
            config=config,
            doom=DoomLoopGuard.from_config(config.doom_loop, session.doom_loop) if config.doom_loop else None,
            evidence=capture,
            tasks=tasks,
        )
    except BaseException:
        if lock is not None:
            lock.release()
        if opened.demo_workspace is not None:
            shutil.rmtree(opened.demo_workspace, ignore_errors=True)
        raise
    return runner, opened


__all__ = ["RunOptions", "Opened", "open_runner", "open_store", "load_host_config", "ConfigError",
           "NO_MODEL_HELP", "demo_script_path", "copy_demo_workspace"]
