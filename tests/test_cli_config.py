"""``amos config …`` through Typer's test runner, on a tiny app that mounts config_app."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from amos import paths
from amos.cli_config import config_app


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(config_app, name="config")
    return app


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_show_defaults(app, runner):
    result = runner.invoke(app, ["config", "show", "--defaults"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["run"]["max_steps"] == 20
    assert data["workspace"] == "."


def test_bad_config_exits_2_naming_the_field(app, runner, tmp_path):
    bad = write(tmp_path / "bad.json", {"loop_policy": {"max_recovery_attempts": 5000}})
    for args in (["show", "--config", str(bad)], ["check", str(bad)], ["path", "--config", str(bad)]):
        result = runner.invoke(app, ["config", *args])
        assert result.exit_code == 2
        assert "Traceback" not in result.output
        assert result.stdout == ""
        assert result.stderr == (
            f"amos: {bad}: loop_policy.max_recovery_attempts: must be at most 1000 (got 5000)\n"
        )


def test_invalid_json_and_missing_file_exit_2(app, runner, tmp_path):
    bad = write(tmp_path / "bad.json", '{"run": }')
    result = runner.invoke(app, ["config", "check", str(bad)])
    assert result.exit_code == 2
    assert "line 1, column 9" in result.stderr
    result = runner.invoke(app, ["config", "show", "--config", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert result.stderr == f"amos: {tmp_path / 'nope.json'}: no such file\n"


def test_show_masks_secrets(app, runner, tmp_path, monkeypatch):
    # No config key holds a secret, so simulate one reaching the display path.
    import types

    import amos.cli_config as cli_config
    import amos.config as config_module

    proxy = types.SimpleNamespace(**vars(config_module))
    proxy.config_to_json = lambda c: {
        **config_module.config_to_json(c),
        "extra": {"api_key": "sk-secret"},
    }
    monkeypatch.setattr(cli_config, "_cfg", lambda: proxy)
    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 0, result.output
    assert "sk-secret" not in result.output
    data = json.loads(result.stdout)
    assert data["extra"]["api_key"] == "****"
    assert data["providers"]["openai"]["api_key_env"] == "OPENAI_API_KEY"


def test_check_default_layers(app, runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["config", "check"])
    assert result.exit_code == 0
    assert result.stdout == "ok: no config files in use (built-in defaults)\n"
    user = write(paths.user_config_file(), {"run": {"max_steps": 4}})
    other = write(tmp_path / "c.json", {})
    result = runner.invoke(app, ["config", "check", "--config", str(other)])
    assert result.exit_code == 0
    assert result.stdout == f"ok: {user}\nok: {other}\n"


def test_trust_then_show_picks_up_project_file(app, runner, tmp_path, monkeypatch):
    project = write(tmp_path / "amos.json", {"run": {"max_steps": 3}})
    monkeypatch.chdir(tmp_path)

    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["run"]["max_steps"] == 20
    assert "not trusted" in result.stderr and "amos config trust" in result.stderr

    result = runner.invoke(app, ["config", "trust"])
    assert result.exit_code == 0, result.output
    assert str(project.resolve()) in result.stdout
    assert __import__("hashlib").sha256(project.read_bytes()).hexdigest() in result.stdout

    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 0
    assert result.stderr == ""
    assert json.loads(result.stdout)["run"]["max_steps"] == 3

    result = runner.invoke(app, ["config", "path"])
    assert result.exit_code == 0
    assert str(project.resolve()) in result.stdout


def test_trust_errors_exit_2(app, runner, tmp_path):
    result = runner.invoke(app, ["config", "trust", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.startswith("amos: ") and "no such file" in result.stderr
    write(tmp_path / "amos.json", {"workspace": 3})
    result = runner.invoke(app, ["config", "trust", str(tmp_path)])
    assert result.exit_code == 2
    assert "workspace" in result.stderr and "Traceback" not in result.output


def test_path_lists_locations(app, runner, amos_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["config", "path"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for expected in (paths.config_dir(), paths.user_config_file(), paths.data_dir(),
                     paths.sessions_dir(), paths.evidence_dir(), paths.log_dir()):
        assert str(expected) in out
    assert "(none: built-in defaults)" in out


def test_help_has_examples(app, runner):
    for command in ("show", "check", "path", "trust"):
        result = runner.invoke(app, ["config", command, "--help"])
        assert result.exit_code == 0
        assert "Examples" in result.stdout and f"amos config {command}" in result.stdout


def test_module_imports_no_ui_or_provider_sdk():
    code = (
        "import sys, amos.cli_config\n"
        "bad = [m for m in ('textual', 'openai', 'anthropic', 'google.genai') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
