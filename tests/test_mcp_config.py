"""MCP server configuration: mcpServers in amos's config, a trusted .mcp.json, ${VAR}
expansion, errors naming server and field, secrets (issue 18, "Configuration", "Secrets")."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from amos.cli import app
from amos.config import load_config, mask_secrets
from amos.config_models import AmosConfig
from amos.errors import ConfigError
from amos.mcp import load_mcp_servers, mcp_json_path, trust_mcp_file


@pytest.fixture
def runner():
    return CliRunner()


def _write(path, data):
    path.write_text(json.dumps(data))
    return path


def _config(servers):
    return AmosConfig.model_validate({"mcpServers": servers})


def test_untrusted_mcp_json_starts_nothing_and_says_how_to_trust(tmp_path):
    _write(tmp_path / ".mcp.json", {"mcpServers": {"time": {"command": "mcp-server-time"}}})
    loaded = load_mcp_servers(AmosConfig(), project_dir=tmp_path)
    assert loaded.servers == []
    assert len(loaded.warnings) == 1
    assert "not trusted" in loaded.warnings[0] and f"amos config trust {tmp_path.resolve()}" in loaded.warnings[0]


def test_trusted_mcp_json_is_read_until_it_changes(tmp_path):
    path = _write(tmp_path / ".mcp.json", {"mcpServers": {"time": {"command": "mcp-server-time"}}})
    assert trust_mcp_file(tmp_path) == mcp_json_path(tmp_path)
    config = load_config(cwd=tmp_path).config
    loaded = load_mcp_servers(config, project_dir=tmp_path)
    assert [(s.name, s.transport, s.command, s.source) for s in loaded.servers] == [
        ("time", "stdio", "mcp-server-time", str(path.resolve()))]
    _write(path, {"mcpServers": {"time": {"command": "something-else"}}})
    loaded = load_mcp_servers(config, project_dir=tmp_path)
    assert loaded.servers == [] and "changed since it was trusted" in loaded.warnings[0]


def test_unknown_keys_in_mcp_json_are_warnings(tmp_path):
    path = _write(tmp_path / ".mcp.json", {
        "mcpServers": {
            "time": {"command": "x", "disabled": False, "autoApprove": []},
            "bad name!": {"command": "y"},
        },
        "$schema": "whatever",
    })
    trust_mcp_file(tmp_path)
    loaded = load_mcp_servers(load_config(cwd=tmp_path).config, project_dir=tmp_path)
    assert [s.name for s in loaded.servers] == ["time"]
    joined = "\n".join(loaded.warnings)
    assert f'{path.resolve()}: ignoring unknown key "$schema"' in joined
    assert 'mcpServers.time: ignoring unknown key "disabled"' in joined
    assert 'mcpServers.time: ignoring unknown key "autoApprove"' in joined
    assert 'ignoring server "bad name!"' in joined


def test_invalid_mcp_json_names_file_server_and_field_without_echoing_secrets(tmp_path):
    _write(tmp_path / ".mcp.json", {"mcpServers": {"time": {"command": "x", "env": {"TOKEN": 12345678}}}})
    with pytest.raises(ConfigError) as caught:
        trust_mcp_file(tmp_path)
    message = str(caught.value)
    assert caught.value.json_path == "mcpServers.time.env.TOKEN"
    assert ".mcp.json" in message and "must be a string" in message and "12345678" not in message


def test_amos_config_errors_exit_2_and_name_the_server(runner, tmp_path, monkeypatch):
    config = _write(tmp_path / "c.json", {"mcpServers": {"git": {"command": "x", "tools": {"git_log": {"permission": "maybe"}}}}})
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["mcp", "list", "--config", str(config)])
    assert result.exit_code == 2
    assert result.stderr.startswith("amos: ") and "mcpServers.git.tools.git_log.permission" in result.stderr
    assert "Traceback" not in result.output


def test_missing_command_or_url_is_a_config_error():
    with pytest.raises(ConfigError) as caught:
        load_mcp_servers(_config({"web": {"type": "http"}}), project_dir=None)
    assert caught.value.json_path == "mcpServers.web.url"
    with pytest.raises(ConfigError) as caught:
        load_mcp_servers(_config({"both": {"command": "x", "url": "http://127.0.0.1:1/mcp"}}), project_dir=None)
    assert caught.value.json_path == "mcpServers.both.url"
    with pytest.raises(ConfigError) as caught:
        load_mcp_servers(_config({"none": {}}), project_dir=None)
    # neither: the error names both ways to fix it, not only "url is required"
    assert caught.value.json_path == "mcpServers.none"
    assert "command" in str(caught.value) and "url" in str(caught.value)


def test_config_check_reports_an_incomplete_mcp_server(runner, tmp_path, monkeypatch):
    config = _write(tmp_path / "c.json", {"mcpServers": {"none": {}}})
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["config", "check", "--config", str(config)])
    assert result.exit_code == 2
    assert "mcpServers.none" in result.stderr and "command" in result.stderr
    assert "ok:" not in result.stdout


def test_variables_are_expanded_and_problems_stay_with_their_server():
    environ = {"TOKEN": "s3cr3t-token-value", "HOST": "127.0.0.1", "EMPTY": ""}
    loaded = load_mcp_servers(_config({
        "web": {"type": "http", "url": "http://${HOST}:${PORT:-8080}/mcp",
                "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "cli": {"command": "srv", "args": ["--x=${EMPTY:-fallback}", "${HOST}"], "env": {"K": "${TOKEN}"}},
        "unset": {"command": "srv", "args": ["${NOT_SET}"]},
        "ws": {"type": "websocket", "url": "ws://127.0.0.1/"},
        "sse": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
    }), project_dir=None, environ=environ)
    by_name = {s.name: s for s in loaded.servers}
    assert by_name["web"].url == "http://127.0.0.1:8080/mcp"
    assert by_name["web"].headers == {"Authorization": "Bearer s3cr3t-token-value"}
    assert by_name["cli"].args == ("--x=fallback", "127.0.0.1") and by_name["cli"].env == {"K": "s3cr3t-token-value"}
    assert by_name["unset"].problem.startswith("args.0: ${NOT_SET} is not set and has no default")
    assert by_name["ws"].problem == 'type "websocket" is not supported; accepted: stdio, http, sse'
    assert by_name["sse"].transport == "sse" and by_name["sse"].problem is None
    assert by_name["web"].problem is None and by_name["cli"].problem is None


def test_mcp_json_and_config_entries_merge_key_by_key(tmp_path):
    _write(tmp_path / ".mcp.json", {"mcpServers": {"git": {"command": "mcp-server-git", "args": ["-r", "."]}}})
    trust_mcp_file(tmp_path)
    user = load_config(cwd=tmp_path).config.model_dump(mode="json", by_alias=True, exclude_unset=True)
    user["mcpServers"] = {"git": {"trust_annotations": True, "tools": {"git_commit": {"permission": "deny"}}}}
    config = AmosConfig.model_validate(user)
    (spec,) = load_mcp_servers(config, project_dir=tmp_path).servers
    assert spec.command == "mcp-server-git" and spec.args == ("-r", ".")
    assert spec.settings.trust_annotations and spec.settings.tools["git_commit"].permission == "deny"
    assert spec.source.endswith(".mcp.json + config")


def test_secret_values_cover_headers_env_and_substitutions(tmp_path):
    loaded = load_mcp_servers(_config({
        "web": {"url": "https://mcp.example.invalid/${API_TOKEN}", "headers": {"Authorization": "Bearer abcd1234efgh"}},
        "cli": {"command": "x", "env": {"DB_PASSWORD": "correct-horse-battery", "DEBUG": "1",
                                        "DATA_DIR": str(tmp_path)}},
    }), project_dir=None, environ={"API_TOKEN": "tok-0123456789"})
    secrets = loaded.secret_values()
    assert {"Bearer abcd1234efgh", "abcd1234efgh", "correct-horse-battery", "tok-0123456789"} <= set(secrets)
    assert "1" not in secrets and str(tmp_path) not in secrets  # would shred ordinary output
    assert "tok-0123456789" not in loaded.servers[0].display_target()


def test_config_show_masks_env_and_header_values():
    data = {"mcpServers": {"x": {"env": {"PLAIN_NAME": "value-1"}, "headers": {"X-Custom": "value-2"},
                                 "command": "srv"}}}
    masked = mask_secrets(data)
    assert masked["mcpServers"]["x"]["env"] == {"PLAIN_NAME": "****"}
    assert masked["mcpServers"]["x"]["headers"] == {"X-Custom": "****"}
    assert masked["mcpServers"]["x"]["command"] == "srv"


def test_config_trust_trusts_mcp_json_too(runner, tmp_path, monkeypatch):
    _write(tmp_path / ".mcp.json", {"mcpServers": {"time": {"command": "x"}}})
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["config", "trust"])
    assert result.exit_code == 0, result.output
    assert f"trusted: {mcp_json_path(tmp_path)}" in result.stdout and "amos.json" not in result.stdout
    result = runner.invoke(app, ["mcp", "list"])
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.startswith(f"time (stdio, {mcp_json_path(tmp_path)}): not started")
