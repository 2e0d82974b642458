"""Hostile input from a break-it session: each case ends in one clear line, never a hang."""

from __future__ import annotations

import json
import os

import pytest

from .support import cli, cli_json, write_script


def test_undecodable_file_names_do_not_hang_or_lose_the_run(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    open(os.path.join(os.fsencode(ws), b"bad\xe9name.txt"), "wb").close()
    script = write_script(tmp_path, [{"tool_calls": [{"name": "list_dir", "arguments": {}}]}, {"text": "done"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "list it")
    assert code == 0 and doc["stop"]["verdict"] == "ANSWERED"
    saved = json.loads(open(doc["session_path"]).read())
    assert "bad" in json.dumps(saved["messages"])


def test_blank_verify_and_empty_session_and_empty_model_are_usage_errors(tmp_path):
    script = write_script(tmp_path, [{"text": "hi"}])
    for args in (["--verify", "   "], ["--verify", ""], ["--session", ""]):
        result = cli("run", "--script", str(script), "--workspace", str(tmp_path), *args, "x")
        assert result.exit_code == 2, (args, result.stderr)
    result = cli("run", "--model", "scripted:", "x")
    assert result.exit_code == 2 and "PROVIDER:MODEL" in result.stderr


def test_json_mode_prints_one_error_object_for_usage_errors():
    result = cli("run", "--json", "hello")
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and "no model chosen" in doc["error"]["message"]


def test_session_names_cannot_shadow_ids(tmp_path):
    script = write_script(tmp_path, [{"text": "hi"}], on_exhausted="repeat_last")
    code, first = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "one")
    for bad in (first["session_id"], "20991231-235959-abcdef", "latest", "../../x", '"unterminated'):
        code, doc = cli_json("run", "--session", first["session_id"], f"/session save {bad}")
        assert code == 2 and doc["ok"] is False, bad
    code, doc = cli_json("run", "--session", first["session_id"], '/session save "my name"')
    assert code == 0 and doc["result"]["name"] == "my name"


@pytest.mark.parametrize("body", ["[" * 100000, '{"a":' * 100000])
def test_deeply_nested_json_is_a_clean_error(tmp_path, body):
    path = tmp_path / "deep.json"
    path.write_text(body)
    for args in (["run", "--script", str(path), "x"], ["config", "check", str(path)]):
        result = cli(*args)
        assert result.exit_code == 2 and "nested too deeply" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_a_deeply_nested_session_file_is_listed_as_unreadable(tmp_path, amos_home):
    script = write_script(tmp_path, [{"text": "hi"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "x")
    with open(doc["session_path"], "w") as fh:
        fh.write("[" * 100000)
    code, listing = cli_json("sessions", "list")
    assert code == 0 and "nested too deeply" in listing["sessions"][0]["broken"]
    result = cli("sessions", "show", doc["session_id"])
    assert result.exit_code == 2 and "nested too deeply" in result.stderr


def test_amos_home_that_is_a_file_names_the_problem(tmp_path, monkeypatch):
    bogus = tmp_path / "afile"
    bogus.write_text("")
    monkeypatch.setenv("AMOS_HOME", str(bogus))
    script = write_script(tmp_path, [{"text": "hi"}])
    result = cli("run", "--script", str(script), "--workspace", str(tmp_path), "x")
    assert result.exit_code == 2 and "AMOS_HOME" in result.stderr and "Traceback" not in result.stderr


def test_config_display_never_shows_url_credentials_or_pasted_keys(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"providers": {"openai": {"base_url": "http://bob:hunter2@example.com/v1?key=QS"}}}))
    result = cli("config", "show", "--config", str(cfg))
    assert result.exit_code == 0 and "hunter2" not in result.stdout and "QS" not in result.stdout
    assert "example.com" in result.stdout
    cfg.write_text(json.dumps({"providers": {"openai": {"api_key_env": "sk-realkeyvalue123456789"}}}))
    result = cli("config", "check", str(cfg))
    assert result.exit_code == 2 and "sk-realkey" not in result.stderr and "api_key_env" in result.stderr


def test_script_must_be_a_regular_file(tmp_path):
    result = cli("run", "--script", "/dev/zero", "x")
    assert result.exit_code == 2 and "regular" in result.stderr
