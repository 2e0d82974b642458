"""Config models, layering, trust, errors and the example file (spec/config.md)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import pytest
from pydantic import BaseModel

from amos import paths
from amos.config import (
    AmosConfig,
    CompletionConfig,
    LoadedConfig,
    LoopPolicyConfig,
    ProgressConfig,
    config_to_json,
    default_config,
    format_validation_error,
    load_config,
    mask_secrets,
    parse_model,
    read_trusted_projects,
    trust_project,
    validate_config_file,
)
from amos.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "config.example.json"


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def user_config(data: Any) -> Path:
    return write(paths.user_config_file(), data)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- paths


def test_paths_derive_from_amos_home(amos_home):
    assert paths.config_dir() == amos_home / "config"
    assert paths.data_dir() == amos_home / "data"
    assert paths.user_config_file() == amos_home / "config" / "config.json"
    assert paths.sessions_dir() == amos_home / "data" / "sessions"
    assert paths.evidence_dir() == amos_home / "data" / "evidence"
    assert paths.log_dir() == amos_home / "data" / "logs"
    assert paths.commands_dir() == amos_home / "config" / "commands"
    assert list(amos_home.iterdir()) == []  # computing paths creates nothing


def test_paths_fall_back_to_platformdirs(monkeypatch):
    import platformdirs

    monkeypatch.delenv("AMOS_HOME")
    assert paths.config_dir() == Path(platformdirs.user_config_dir("amos", appauthor=False))
    assert paths.data_dir() == Path(platformdirs.user_data_dir("amos", appauthor=False))


def test_store_dirs_honour_config(tmp_path):
    config = AmosConfig.model_validate(
        {"sessions": {"directory": str(tmp_path / "s")}, "evidence": {"directory": str(tmp_path / "e")}}
    )
    assert paths.sessions_dir(config) == tmp_path / "s"
    assert paths.evidence_dir(config) == tmp_path / "e"


def test_ensure_dir_creates_private_folders(tmp_path):
    target = tmp_path / "a" / "b"
    assert paths.ensure_dir(target) == target
    for folder in (tmp_path / "a", target):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    paths.ensure_dir(target)  # idempotent


# --------------------------------------------------------------------------- defaults


def test_defaults_match_the_spec():
    data = config_to_json(default_config())
    assert data["model"] is None
    assert data["providers"]["openai-compatible"]["base_url"] == "http://localhost:11434/v1"
    assert data["providers"]["anthropic"]["max_tokens"] == 8192
    assert data["providers"]["google"]["api_key_env"] == "GEMINI_API_KEY"
    assert data["providers"]["openai"]["timeout_s"] == 600
    assert data["tools"]["permissions"]["run_command"] == "ask"
    assert data["run"] == {"max_steps": 20, "token_budget": None, "timeout_s": None}
    assert data["loop_policy"] is None and data["doom_loop"] is None
    assert data["workspace"] == "."
    assert data["trusted_projects"] == {}


def test_every_field_has_a_docstring():
    def models(model: type[BaseModel], seen: set) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name} has no docstring"
            for sub in _models_in(info.annotation):
                models(sub, seen)

    models(AmosConfig, set())


# --------------------------------------------------------------------------- layering


def test_layers_merge_deeply_in_order(tmp_path):
    user = user_config({"run": {"max_steps": 5}, "tools": {"permissions": {"run_command": "allow"}}})
    explicit = write(tmp_path / "c.json", {"run": {"token_budget": 100}, "ui": {"show_cost": False}})
    loaded = load_config(config_path=explicit, cwd=tmp_path, overrides={"run": {"max_steps": 7}})
    assert isinstance(loaded, LoadedConfig)
    config = loaded.config
    assert config.run.max_steps == 7
    assert config.run.token_budget == 100
    assert config.tools.permissions["run_command"] == "allow"
    assert config.tools.permissions["read_file"] == "allow"  # default kept by the deep merge
    assert config.ui.show_cost is False and config.ui.theme == "textual-dark"
    assert loaded.sources == [user, explicit]
    assert loaded.user_config_path == user
    assert loaded.warnings == []


def test_null_replaces_an_object(tmp_path):
    user_config({"loop_policy": {"max_tracked": 10}, "doom_loop": {"ladder": {"stop": 9}}})
    explicit = write(tmp_path / "c.json", {"loop_policy": None, "doom_loop": False})
    loaded = load_config(config_path=explicit, cwd=tmp_path)
    assert loaded.config.loop_policy is None
    assert loaded.config.doom_loop is None


def test_later_scalar_replaces_earlier_object(tmp_path):
    user_config({"doom_loop": {"ladder": {"stop": 9}}})
    loaded = load_config(cwd=tmp_path, overrides={"doom_loop": True})
    assert loaded.config.doom_loop is not None
    assert loaded.config.doom_loop.ladder.stop == 5  # amos's default, not the earlier 9


def test_relative_paths_resolve_against_the_files_folder(tmp_path):
    explicit = write(
        tmp_path / "conf" / "c.json",
        {
            "workspace": "ws",
            "evidence": {"directory": "ev"},
            "sessions": {"directory": "../sessions"},
            "model": "scripted:script.json",
            "doom_loop": {"escalation": {"model": "scripted:other.json"}},
        },
    )
    config = load_config(config_path=explicit, cwd=tmp_path / "elsewhere").config
    assert config.workspace == tmp_path / "conf" / "ws"
    assert config.evidence.directory == tmp_path / "conf" / "ev"
    assert config.sessions.directory == tmp_path / "sessions"
    assert config.model == f"scripted:{tmp_path / 'conf' / 'script.json'}"
    assert config.doom_loop.escalation.model == f"scripted:{tmp_path / 'conf' / 'other.json'}"


def test_user_config_relative_paths_resolve_against_its_folder(tmp_path):
    user_config({"sessions": {"directory": "mine"}})
    config = load_config(cwd=tmp_path).config
    assert config.sessions.directory == paths.config_dir() / "mine"


def test_overrides_resolve_against_cwd(tmp_path):
    config = load_config(cwd=tmp_path, overrides={"workspace": "ws", "model": "scripted:s.json"}).config
    assert config.workspace == tmp_path / "ws"
    assert config.model == f"scripted:{tmp_path / 's.json'}"


def test_default_workspace_is_cwd(tmp_path):
    assert load_config(cwd=tmp_path).config.workspace == tmp_path


def test_relative_config_path_is_relative_to_cwd(tmp_path):
    write(tmp_path / "c.json", {"run": {"max_steps": 3}})
    loaded = load_config(config_path=Path("c.json"), cwd=tmp_path)
    assert loaded.config.run.max_steps == 3
    assert loaded.sources == [tmp_path / "c.json"]


# --------------------------------------------------------------------------- project trust


def test_untrusted_project_file_is_ignored_with_a_warning(tmp_path, monkeypatch):
    write(tmp_path / "amos.json", {"run": {"max_steps": 3}})
    monkeypatch.chdir(tmp_path)
    loaded = load_config()
    assert loaded.config.run.max_steps == 20
    assert loaded.sources == []
    assert loaded.warnings == [
        f"ignoring ./amos.json: not trusted; run `amos config trust {tmp_path.resolve()}` to trust it"
    ]


def test_untrusted_project_file_is_not_even_parsed(tmp_path):
    write(tmp_path / "amos.json", "{ not json")
    loaded = load_config(cwd=tmp_path)
    assert "not trusted" in loaded.warnings[0]


def test_trusted_project_file_is_used(tmp_path):
    project = write(tmp_path / "amos.json", {"run": {"max_steps": 3}, "workspace": "src"})
    assert trust_project(tmp_path) == project.resolve()
    loaded = load_config(cwd=tmp_path)
    assert loaded.config.run.max_steps == 3
    assert loaded.config.workspace == tmp_path.resolve() / "src"
    assert loaded.sources == [paths.user_config_file(), project.resolve()]
    assert loaded.warnings == []
    assert loaded.config.trusted_projects == {str(project.resolve()): sha(project)}


def test_changed_project_file_is_ignored(tmp_path):
    project = write(tmp_path / "amos.json", {"run": {"max_steps": 3}})
    trust_project(tmp_path)
    write(project, {"run": {"max_steps": 4}, "tools": {"permissions": {"run_command": "allow"}}})
    loaded = load_config(cwd=tmp_path)
    assert loaded.config.run.max_steps == 20
    assert loaded.config.tools.permissions["run_command"] == "ask"
    assert len(loaded.warnings) == 1
    assert "changed since it was trusted" in loaded.warnings[0]
    assert "amos config trust" in loaded.warnings[0]


def test_project_file_sits_between_user_config_and_explicit_file(tmp_path):
    user_config({"run": {"max_steps": 2, "token_budget": 10}, "ui": {"theme": "user"}})
    write(tmp_path / "amos.json", {"run": {"max_steps": 3, "token_budget": 11}})
    trust_project(tmp_path)
    explicit = write(tmp_path / "c.json", {"run": {"max_steps": 4}})
    config = load_config(config_path=explicit, cwd=tmp_path).config
    assert (config.run.max_steps, config.run.token_budget, config.ui.theme) == (4, 11, "user")


def test_trusted_projects_only_honoured_from_the_user_config(tmp_path):
    project = write(tmp_path / "amos.json", {"run": {"max_steps": 3}})
    fake = {str(project.resolve()): sha(project)}
    explicit = write(tmp_path / "c.json", {"trusted_projects": fake})
    loaded = load_config(config_path=explicit, cwd=tmp_path)
    assert loaded.config.run.max_steps == 20  # the project stays untrusted
    assert loaded.config.trusted_projects == {}
    assert any("only the user config file can trust" in w for w in loaded.warnings)
    loaded = load_config(cwd=tmp_path, overrides={"trusted_projects": fake})
    assert loaded.config.trusted_projects == {}


def test_trusted_but_invalid_project_file_names_the_file(tmp_path):
    project = write(tmp_path / "amos.json", {"run": {"max_steps": 0}})
    user_config({"trusted_projects": {str(project.resolve()): sha(project)}})
    with pytest.raises(ConfigError) as info:
        load_config(cwd=tmp_path)
    assert str(info.value) == f"{project.resolve()}: run.max_steps: must be at least 1 (got 0)"


def test_trust_preserves_other_keys_and_writes_atomically(tmp_path):
    user = user_config(
        {"model": "openai:gpt-4o-mini", "ui": {"theme": "x"}, "trusted_projects": {"/old/amos.json": "a" * 64}}
    )
    project = write(tmp_path / "amos.json", {})
    trust_project(tmp_path)
    data = json.loads(user.read_text())
    assert data["model"] == "openai:gpt-4o-mini"
    assert data["ui"] == {"theme": "x"}
    assert data["trusted_projects"] == {"/old/amos.json": "a" * 64, str(project.resolve()): sha(project)}
    assert stat.S_IMODE(user.stat().st_mode) == 0o600
    assert [p.name for p in user.parent.iterdir()] == ["config.json"]  # no temp file left
    assert read_trusted_projects() == data["trusted_projects"]


def test_trust_creates_the_user_config(tmp_path, amos_home):
    write(tmp_path / "amos.json", {})
    trust_project(tmp_path)
    user = paths.user_config_file()
    assert stat.S_IMODE(user.stat().st_mode) == 0o600
    assert stat.S_IMODE(user.parent.stat().st_mode) == 0o700


def test_trust_refuses_an_invalid_user_config(tmp_path):
    user = user_config("{ broken")
    write(tmp_path / "amos.json", {})
    with pytest.raises(ConfigError) as info:
        trust_project(tmp_path)
    assert str(user) in str(info.value) and "line 1" in str(info.value)
    assert user.read_text() == "{ broken"


def test_trust_refuses_missing_or_invalid_project_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        trust_project(tmp_path)
    write(tmp_path / "amos.json", {"tools": {"permissions": {"run_command": "yes"}}})
    with pytest.raises(ConfigError, match=r"tools\.permissions\.run_command"):
        trust_project(tmp_path)
    assert not paths.user_config_file().exists()


# --------------------------------------------------------------------------- errors

BAD_VALUES = [
    ({"model": "gpt-4o"}, "model", "PROVIDER:MODEL"),
    ({"model": "openai:"}, "model", "non-empty MODEL"),
    ({"model": "azure:gpt"}, "model", "openai-compatible"),
    ({"providers": {"openai": {"max_retries": -1}}}, "providers.openai.max_retries", "at least 0"),
    ({"providers": {"google": {"timeout_s": 0}}}, "providers.google.timeout_s", "greater than 0"),
    ({"providers": {"anthropic": {"max_tokens": 0}}}, "providers.anthropic.max_tokens", "at least 1"),
    ({"providers": {"openai-compatible": {"base_url": "ftp://x"}}}, "providers.openai-compatible.base_url", "http"),
    ({"providers": {"openai": {"api_key_env": "sk-123"}}}, "providers.openai.api_key_env", "variable name"),
    ({"tools": {"permissions": {"run_command": "maybe"}}}, "tools.permissions.run_command", '"allow", "ask" or "deny"'),
    ({"tools": {"command_timeout_s": 0}}, "tools.command_timeout_s", "greater than 0"),
    ({"tools": {"max_output_bytes": 0}}, "tools.max_output_bytes", "at least 1"),
    ({"approvals": {"deadline_s": -1}}, "approvals.deadline_s", "greater than 0"),
    ({"run": {"max_steps": 0}}, "run.max_steps", "at least 1"),
    ({"run": {"max_steps": "20"}}, "run.max_steps", "must be an integer"),
    ({"run": {"max_steps": True}}, "run.max_steps", "must be an integer"),
    ({"run": {"token_budget": 0}}, "run.token_budget", "at least 1"),
    ({"run": {"token_budget": "x"}}, "run.token_budget", "integer or null"),
    ({"run": {"timeout_s": 0}}, "run.timeout_s", "greater than 0"),
    ({"context": {"compact_at": 0}}, "context.compact_at", "greater than 0"),
    ({"context": {"compact_at": 1.5}}, "context.compact_at", "at most 1"),
    ({"context": {"keep_recent_turns": -1}}, "context.keep_recent_turns", "at least 0"),
    ({"context": {"window_tokens": 0}}, "context.window_tokens", "at least 1"),
    ({"loop_policy": {"max_recovery_attempts": 5000}}, "loop_policy.max_recovery_attempts", "at most 1000 (got 5000)"),
    ({"loop_policy": {"max_recovery_attempts": -1}}, "loop_policy.max_recovery_attempts", "at least 0"),
    ({"loop_policy": {"max_repeated_reads": 0}}, "loop_policy.max_repeated_reads", "at least 1"),
    ({"loop_policy": {"max_unchanged_progress": 1001}}, "loop_policy.max_unchanged_progress", "at most 1000"),
    ({"loop_policy": {"max_tracked": 0}}, "loop_policy.max_tracked", "at least 1"),
    ({"loop_policy": {"read_only_tools": ["a", "b", "c", ""]}}, "loop_policy.read_only_tools.3", "must not be empty"),
    ({"loop_policy": {"read_only_tools": ["x" * 257]}}, "loop_policy.read_only_tools.0", "at most 256 characters"),
    ({"loop_policy": {"read_only_tools": ["t"] * 101}}, "loop_policy.read_only_tools", "at most 100 items"),
    ({"loop_policy": {"completion": {"timeout_s": 0}}}, "loop_policy.completion.timeout_s", "greater than 0"),
    ({"loop_policy": {"completion": {"files": [""]}}}, "loop_policy.completion.files.0", "must not be empty"),
    ({"loop_policy": {"checker_timeout_s": 0}}, "loop_policy.checker_timeout_s", "greater than 0"),
    ({"doom_loop": 3}, "doom_loop", "null, false, true or an object"),
    ({"doom_loop": {"ladder": {"stop": 0}}}, "doom_loop.ladder.stop", "false or an integer from 1 to 1000"),
    ({"doom_loop": {"ladder": {"block": True}}}, "doom_loop.ladder.block", "false or an integer"),
    ({"doom_loop": {"ladder": {"observe": 1.5}}}, "doom_loop.ladder.observe", "false or an integer"),
    ({"doom_loop": {"text": "yes"}}, "doom_loop.text", "true, false or an object"),
    ({"doom_loop": {"text": {"min_repeats": 0}}}, "doom_loop.text.min_repeats", "at least 1"),
    ({"doom_loop": {"escalation": {"model": "nope"}}}, "doom_loop.escalation.model", "PROVIDER:MODEL"),
    ({"doom_loop": {"escalation": {"model": "openai:o3", "max_escalations": 0}}}, "doom_loop.escalation.max_escalations", "at least 1"),
    ({"doom_loop": {"escalation": {}}}, "doom_loop.escalation.model", "is required"),
    ({"evidence": {"max_record_bytes": 0}}, "evidence.max_record_bytes", "at least 1"),
    ({"evidence": {"project_threshold_bytes": -1}}, "evidence.project_threshold_bytes", "at least 0"),
    ({"evidence": {"scope": {"owner_id": ""}}}, "evidence.scope.owner_id", "must not be empty"),
    ({"task_state": {"max_entries": 0}}, "task_state.max_entries", "at least 1"),
    ({"sessions": {"max_checkpoints": 0}}, "sessions.max_checkpoints", "at least 1"),
    ({"sessions": {"autosave": "yes"}}, "sessions.autosave", "true or false"),
    ({"ui": {"show_cost": 1}}, "ui.show_cost", "true or false"),
    ({"trusted_projects": {"/p/amos.json": "abc"}}, "trusted_projects./p/amos.json", "SHA-256"),
]


@pytest.mark.parametrize(("data", "json_path", "fragment"), BAD_VALUES)
def test_bounds_name_file_path_and_what_is_accepted(tmp_path, data, json_path, fragment):
    bad = write(tmp_path / "amos.json", data)
    with pytest.raises(ConfigError) as info:
        load_config(config_path=bad, cwd=tmp_path / "x")
    error = info.value
    assert error.file == str(bad)
    assert error.json_path == json_path
    assert fragment in str(error)
    assert str(error).startswith(f"{bad}: {json_path}: ")


def test_error_message_exact_shape(tmp_path):
    bad = write(tmp_path / "amos.json", {"loop_policy": {"max_recovery_attempts": 5000}})
    with pytest.raises(ConfigError) as info:
        validate_config_file(bad)
    assert str(info.value) == f"{bad}: loop_policy.max_recovery_attempts: must be at most 1000 (got 5000)"


@pytest.mark.parametrize(
    ("data", "json_path", "accepted"),
    [
        ({"colour": 1}, "colour", "model, providers, system_prompt"),
        ({"loop_policy": {"max_retries": 1}}, "loop_policy.max_retries", "max_recovery_attempts"),
        ({"providers": {"openai_compatible": {}}}, "providers.openai_compatible", "openai-compatible"),
        ({"doom_loop": {"ladder": {"warn": 1}}}, "doom_loop.ladder.warn", "observe, steer, escalate, block, stop"),
        ({"loop_policy": {"completion": {"cmd": "x"}}}, "loop_policy.completion.cmd", "command, timeout_s"),
    ],
)
def test_unknown_keys_are_errors_listing_accepted_keys(tmp_path, data, json_path, accepted):
    bad = write(tmp_path / "c.json", data)
    with pytest.raises(ConfigError) as info:
        validate_config_file(bad)
    key = json_path.rsplit(".", 1)[-1]
    assert info.value.json_path == json_path
    assert f'unknown key "{key}"; accepted keys: ' in str(info.value)
    assert accepted in str(info.value)


def test_user_config_errors_name_the_user_config(tmp_path):
    user = user_config({"run": {"max_steps": -3}})
    with pytest.raises(ConfigError) as info:
        load_config(cwd=tmp_path)
    assert info.value.file == str(user)
    assert info.value.json_path == "run.max_steps"


def test_override_errors_name_the_command_line(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(cwd=tmp_path, overrides={"run": {"max_steps": 0}})
    assert str(info.value).startswith("command line: run.max_steps: ")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{\n  "run": {\n    "max_steps": 3,\n  }\n}', "invalid JSON at line 4, column 3"),
        ("", "invalid JSON at line 1, column 1"),
        ('{"run": {"max_steps": NaN}}', "NaN is not valid JSON"),
        ('{"model": null, "model": "openai:x"}', 'duplicate key "model"'),
        ("[1, 2]", "must hold a JSON object"),
    ],
)
def test_invalid_json_names_file_line_and_column(tmp_path, text, fragment):
    bad = write(tmp_path / "c.json", text)
    with pytest.raises(ConfigError) as info:
        load_config(config_path=bad, cwd=tmp_path)
    assert str(info.value).startswith(f"{bad}: ")
    assert fragment in str(info.value)


def test_missing_or_unreadable_explicit_config(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(config_path=tmp_path / "nope.json", cwd=tmp_path)
    assert str(info.value) == f"{tmp_path / 'nope.json'}: no such file"
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(config_path=tmp_path, cwd=tmp_path)
    if os.geteuid() != 0:
        locked = write(tmp_path / "locked.json", {})
        locked.chmod(0)
        with pytest.raises(ConfigError, match="cannot read"):
            load_config(config_path=locked, cwd=tmp_path)


def test_format_validation_error_directly():
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        AmosConfig.model_validate({"loop_policy": {"read_only_tools": ["a", "b", "c", 4]}})
    error = format_validation_error(info.value, Path("/x/amos.json"))
    assert isinstance(error, ConfigError)
    assert error.json_path == "loop_policy.read_only_tools.3"
    assert str(error) == "/x/amos.json: loop_policy.read_only_tools.3: must be a string (got 4)"


# --------------------------------------------------------------------------- values


def test_parse_model_splits_at_the_first_colon():
    assert parse_model("openai-compatible:qwen2.5:7b") == ("openai-compatible", "qwen2.5:7b")
    assert parse_model("scripted:/a/b.json") == ("scripted", "/a/b.json")
    for bad in ("openai", "openai:", "bedrock:x", ":x"):
        with pytest.raises(ConfigError):
            parse_model(bad)


def test_doom_loop_shorthands():
    assert AmosConfig.model_validate({"doom_loop": None}).doom_loop is None
    assert AmosConfig.model_validate({"doom_loop": False}).doom_loop is None
    on = AmosConfig.model_validate({"doom_loop": True}).doom_loop
    assert on is not None and on.ladder.block == 3 and on.text.enabled and on.escalation is None
    off_text = AmosConfig.model_validate({"doom_loop": {"text": False}}).doom_loop
    assert off_text.text.enabled is False and off_text.text.min_repeats == 4
    assert AmosConfig.model_validate({"doom_loop": {"ladder": {"steer": 1}}}).doom_loop.ladder.steer == 1


def test_loop_policy_empty_object_enables_defaults():
    policy = AmosConfig.model_validate({"loop_policy": {}}).loop_policy
    assert policy == LoopPolicyConfig()
    assert policy.completion is None and policy.progress is None


def test_config_to_json_round_trips():
    data = config_to_json(AmosConfig.model_validate(json.loads(EXAMPLE.read_text())))
    assert AmosConfig.model_validate(data) == AmosConfig.model_validate(json.loads(EXAMPLE.read_text()))
    assert data["providers"]["openai"]["timeout_s"] == 600  # whole seconds stay integers


# --------------------------------------------------------------------------- example file


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    stack = [annotation]
    while stack:
        tp = stack.pop()
        if get_origin(tp) is Annotated:
            stack.append(get_args(tp)[0])
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            found.append(tp)
        elif get_origin(tp) is list:  # entries of a list (destination checks) are data, not settings
            continue
        elif get_origin(tp) is not None:  # Optional/Union, dict
            stack.extend(get_args(tp))
    return found


def _field_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{info.alias or name}"
        out.append(key)
        if get_origin(info.annotation) is dict:  # a name-to-model map (mcpServers): its keys are the user's
            continue
        for sub in _models_in(info.annotation):
            out += _field_paths(sub, key + ".")
    return out


def test_example_file_validates():
    config = validate_config_file(EXAMPLE)
    assert config.loop_policy is not None and config.doom_loop is not None


def test_example_file_shows_every_field():
    example = json.loads(EXAMPLE.read_text())
    missing = []
    for dotted in _field_paths(AmosConfig):
        node: Any = example
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                missing.append(dotted)
                break
            node = node[part]
    assert missing == []


def test_example_file_shows_the_documented_values():
    example = config_to_json(validate_config_file(EXAMPLE))
    defaults = config_to_json(default_config())
    expected_policy = LoopPolicyConfig(completion=CompletionConfig(), progress=ProgressConfig())
    assert example.pop("loop_policy") == config_to_json(AmosConfig(loop_policy=expected_policy))["loop_policy"]
    doom = example.pop("doom_loop")
    assert doom["ladder"] == {"observe": 2, "steer": False, "escalate": False, "block": 3, "stop": 5}
    assert doom["text"] == {"enabled": True, "max_period_tokens": 160, "min_repeats": 4, "min_covered_tokens": 12,
                            "max_window_tokens": 800, "stop_repeats": 4}
    assert doom["escalation"] == {"model": "anthropic:claude-opus-4-1", "max_escalations": 2}
    for key in ("loop_policy", "doom_loop"):
        assert defaults.pop(key) is None
    assert json.loads(EXAMPLE.read_text())["workspace"] == defaults.pop("workspace") == "."
    assert example.pop("workspace") == str(REPO)  # "." resolved against the file's folder
    assert example == defaults


# --------------------------------------------------------------------------- secrets


def test_mask_secrets():
    data = {
        "providers": {"openai": {"api_key_env": "OPENAI_API_KEY", "api_key": "sk-live"}},
        "headers": [{"Authorization": "Bearer x"}, {"X-Token": ""}],
        "nested": {"client_secret": "s", "password": "p", "refresh_TOKEN": "t", "note": "keep"},
        "context": {"window_tokens": 1000},
        "tools": {"permissions": {"get_api_key": "allow"}},
        "trusted_projects": {"/home/keyser/amos.json": "ab" * 32},
    }
    masked = mask_secrets(data)
    assert masked["providers"]["openai"] == {"api_key_env": "OPENAI_API_KEY", "api_key": "****"}
    assert masked["headers"] == [{"Authorization": "****"}, {"X-Token": ""}]
    assert masked["nested"] == {"client_secret": "****", "password": "****", "refresh_TOKEN": "****", "note": "keep"}
    assert masked["context"] == {"window_tokens": 1000}
    assert masked["tools"] == {"permissions": {"get_api_key": "allow"}}
    assert masked["trusted_projects"] == data["trusted_projects"]
    assert data["providers"]["openai"]["api_key"] == "sk-live"  # input untouched
