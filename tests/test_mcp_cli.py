"""``amos mcp list|tools|check`` and the README's .mcp.json example (issue 18, "Seeing it")."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from typer.testing import CliRunner

from amos.cli import app

from .mcp_support import hostile

BIN = Path(sys.executable).parent
README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_mcp_json_example_works(tmp_path, monkeypatch):
    """The README's .mcp.json, trusted, starts mcp-server-time and lists its tools."""
    match = re.search(r"<!-- mcp-example -->\s*```json\n(.*?)```", README.read_text(), re.S)
    assert match, "README.md lost its .mcp.json example"
    (tmp_path / ".mcp.json").write_text(match.group(1))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    runner = CliRunner()
    untrusted = runner.invoke(app, ["mcp", "tools"])
    assert untrusted.exit_code == 0 and "amos config trust" in untrusted.stderr
    assert runner.invoke(app, ["config", "trust"]).exit_code == 0
    result = runner.invoke(app, ["mcp", "tools"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("time: running\n")
    assert re.search(r"mcp__time__get_current_time\s+effect unknown\s+ask\s+Get current time", result.stdout)


def test_check_exits_1_when_a_server_fails_and_lists_why(tmp_path, monkeypatch):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"mcpServers": {"good": hostile("ok", tmp_path),
                                                 "dead": hostile("exit", tmp_path),
                                                 "off": {**hostile("ok", tmp_path), "enabled": False}},
                                  "tools": {"permissions": {"mcp__good__poke": "deny"}}}))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["mcp", "check", "--config", str(config)])
    assert result.exit_code == 1
    assert "good (stdio, config): running — 1 tool" in result.stdout
    assert "dead (stdio, config): failed: it exited or closed its connection during start-up" in result.stdout
    assert "off (stdio, config): disabled" in result.stdout
    assert "warning: MCP server dead failed to start" in result.stderr and "giving up" in result.stderr
    assert "Traceback" not in result.output
    data = json.loads(runner.invoke(app, ["mcp", "tools", "--json", "--config", str(config)]).stdout)
    assert [(t["name"], t["effect"], t["permission"]) for t in data["tools"]] == [("mcp__good__poke", "unknown", "deny")]
    listed = runner.invoke(app, ["mcp", "list", "--config", str(config)])
    assert listed.exit_code == 0 and "good (stdio, config): not started" in listed.stdout
    config.write_text(json.dumps({"mcpServers": {"good": hostile("ok", tmp_path)}}))
    assert runner.invoke(app, ["mcp", "check", "--config", str(config)]).exit_code == 0


def test_help_has_examples():
    runner = CliRunner()
    for command in ("list", "tools", "check"):
        result = runner.invoke(app, ["mcp", command, "--help"])
        assert result.exit_code == 0 and f"amos mcp {command}" in result.stdout


def test_cli_start_up_does_not_import_the_sdk():
    import subprocess

    code = ("import sys, amos, amos.cli, amos.mcp, amos.config; "
            "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'jsonschema'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
