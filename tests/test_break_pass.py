"""What a hostile tester found in verdicts and masking (issues 16, 17), each on the real CLI
with the scripted model: broken checks are never the model's fault, a check that flips
on its own proves nothing, an unknown outcome without a check is UNCERTAIN, and a key
typed where it does not belong never reaches the screen or the disk."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

from .support import cli, cli_json, write_script

KEY = "sk-test-Zq8RvT3mLp0XwY7nB5cD2eF9gH4jK6"


def _done(tmp_path: Path) -> Path:
    return write_script(tmp_path, [{"text": "Done, all fixed."}], name="done.json")


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return ws


def test_a_check_the_shell_cannot_parse_is_uncertain(tmp_path):
    for check in ('test -f "a', "a | | cat", "if true; then"):
        code, doc = cli_json("run", "--no-save", "--script", str(_done(tmp_path)), "--workspace",
                             str(_ws(tmp_path)), "--verify", check, "x")
        assert (code, doc["stop"]["verdict"], doc["stop"]["cause"]) == (8, "UNCERTAIN", "checker_error"), check
        assert doc["usage"]["model_calls"] == 0, "no work can make the line itself parse: stopped before the model"
    for check in (";", "a | | cat"):  # the same through a script the model could still fix runs on
        ws = _ws(tmp_path)
        (ws / "check.sh").write_text(check + "\n")
        code, doc = cli_json("run", "--no-save", "--script", str(_done(tmp_path)), "--workspace", str(ws),
                             "--verify", "sh check.sh", "x")
        assert code == 8 and doc["usage"]["model_calls"] == 1, (check, doc["stop"])


def test_a_check_that_flips_without_any_change_proves_nothing(tmp_path):
    check = "sh -c '[ -f .stamp ] || { touch .stamp; exit 1; }'"
    code, doc = cli_json("run", "--no-save", "--script", str(_done(tmp_path)), "--workspace", str(_ws(tmp_path)),
                         "--verify", check, "x")
    assert (code, doc["stop"]["verdict"], doc["stop"]["reason"]) == (8, "UNCERTAIN", "check_unstable"), doc["stop"]


def test_a_write_of_the_bytes_already_there_is_no_work_for_a_flipping_check(tmp_path):
    """Break-it finding: writing ``f.txt`` back unchanged made the same flip VERIFIED_COMPLETE."""
    ws = _ws(tmp_path)
    (ws / "f.txt").write_text("same\n")
    check = "sh -c '[ -f .stamp ] || { touch .stamp; exit 1; }'"
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "f.txt", "content": "same\n"}}]},
        {"text": "Done, all fixed."}], name="noop.json")
    code, doc = cli_json("run", "--no-save", "--yes", "--script", str(script), "--workspace", str(ws),
                         "--verify", check, "x")
    assert (code, doc["stop"]["verdict"], doc["stop"]["reason"]) == (8, "UNCERTAIN", "check_unstable"), doc["stop"]
    assert doc["files_changed"] == []
    for command in ("nosuchcmd_xyz", "exit 3"):  # a command that failed did no work either
        (ws / ".stamp").unlink()
        failing = write_script(tmp_path, [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]},
            {"text": "Done, all fixed."}], name="failing.json")
        code, doc = cli_json("run", "--no-save", "--yes", "--sandbox", "danger-full-access", "--script",
                             str(failing), "--workspace", str(ws), "--verify", check, "x")
        assert (code, doc["stop"]["reason"]) == (8, "check_unstable"), (command, doc["stop"])
    real = write_script(tmp_path, [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "f.txt", "content": "changed\n"}}]},
        {"text": "Done, all fixed."}], name="real.json")
    (ws / ".stamp").unlink()
    code, doc = cli_json("run", "--no-save", "--yes", "--script", str(real), "--workspace", str(ws),
                         "--verify", check, "x")
    assert (code, doc["stop"]["verdict"]) == (0, "VERIFIED_COMPLETE"), doc["stop"]


def test_an_unknown_outcome_without_a_check_is_uncertain(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"tools": {"command_timeout_s": 1}}))
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 20; echo done > result.txt"}}]},
        {"text": "Done."}])
    code, doc = cli_json("run", "--no-save", "--yes", "--config", str(config), "--script", str(script),
                         "--workspace", str(_ws(tmp_path)), "x")
    assert (code, doc["stop"]["verdict"], doc["stop"]["reason"]) == (8, "UNCERTAIN", "uncertain_effect")


def test_verify_refuses_a_secret_and_malformed_lines_without_storing_them(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ws = _ws(tmp_path)
    script = _done(tmp_path)
    for line in (f"/verify test x = {KEY}", "/verify off extra", '/verify "unterminated', "/verify ;",
                 "/verify if true; then"):
        result = cli("run", "--workspace", str(ws), "--script", str(script), line)
        assert result.exit_code == 2 and "Traceback" not in result.output, (line, result.output)
        assert KEY not in result.output
    for path in Path(os.environ["AMOS_HOME"]).rglob("session.json"):
        host = json.loads(path.read_text())["host"]
        assert host.get("verify") in (None, ""), host  # nothing was remembered


def test_a_key_typed_into_an_id_a_url_or_a_command_name_is_masked(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ws = _ws(tmp_path)
    script = _done(tmp_path)
    for args in (["run", "--session", KEY, "--script", str(script), "hi"], ["sessions", "show", KEY],
                 ["evidence", "read", KEY], ["run", "--script", str(script), "--workspace", str(ws), f"/{KEY}"]):
        result = cli(*args)
        assert result.exit_code != 0 and KEY not in result.output, (args, result.output)
        assert "Traceback" not in result.output
    result = cli("run", "--base-url", f"http://{KEY}@127.0.0.1:9/v1", "--model", "openai:gpt-4o", "--workspace",
                 str(ws), "hi")
    assert KEY not in result.output
    home = Path(os.environ["AMOS_HOME"])
    for path in home.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_every_byte_percent_encoded_is_masked(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    encoded = "".join(f"%{b:02X}" for b in KEY.encode())
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": f"echo {encoded}; echo {encoded.lower()}"}}]},
        {"text": "ok"}])
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(_ws(tmp_path)), "x")
    assert code == 0
    data = Path(doc["session_path"]).read_text()
    assert encoded not in data and encoded.lower() not in data and quote(KEY) != encoded
