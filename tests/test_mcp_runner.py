"""MCP tools through the real runner and ``amos run`` (issue 18, "What it must show"):
the scripted model calls a real server's tool, the result reaches the next request and
the evidence store, a non-read MCP call pauses for approval and resumes, hostile servers
give a notice or an error result and the right receipt, and nothing is left running."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import pytest

from .mcp_support import hostile, http_server, processes_with, wait_gone
from .support import cli, cli_json, write_script

BIN = Path(sys.executable).parent
TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


def _config(tmp_path: Path, servers: dict, **extra) -> Path:
    path = tmp_path / "amos-config.json"
    path.write_text(json.dumps({"mcpServers": servers, **extra}))
    return path


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return ws


def test_time_server_tool_result_reaches_the_next_request_and_the_evidence(tmp_path):
    ws = _ws(tmp_path)
    config = _config(tmp_path, {"time": {**TIME, "trust_annotations": True}},
                     evidence={"enabled": True})
    script = write_script(tmp_path, [
        {"expect": {"tools_offered": ["mcp__time__get_current_time", "mcp__time__convert_time"]},
         "tool_calls": [{"id": "t1", "name": "mcp__time__get_current_time", "arguments": {"timezone": "UTC"}}]},
        {"expect": {"last_tool_result_contains": "\"timezone\": \"UTC\""}, "text": "It is now some time in UTC."},
    ])
    code, doc = cli_json("run", "What time is it?", "--script", str(script), "--workspace", str(ws),
                         "--config", str(config))
    assert code == 0, doc
    assert doc["stop"]["verdict"] == "ANSWERED" and doc["stop"]["cause"] == "answer"
    # the receipt names the MCP call like any other
    assert [(c["tool"], c["status"]) for c in doc["tool_calls"]] == [("mcp__time__get_current_time", "succeeded")]
    assert doc["tool_calls"][0]["evidence_id"]
    listing = cli("evidence", "list", "--session", doc["session_id"], "--config", str(config))
    assert listing.exit_code == 0, listing.output
    assert "mcp__time__get_current_time" in listing.stdout
    assert wait_gone(processes_with("mcp_server_time", cwd=ws.resolve())) == []


def test_non_read_mcp_call_pauses_for_approval_and_resumes(tmp_path):
    ws = _ws(tmp_path)
    config = _config(tmp_path, {"time": TIME})  # not trusted: effect unknown, permission ask
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "t1", "name": "mcp__time__convert_time",
                         "arguments": {"source_timezone": "UTC", "time": "12:00",
                                       "target_timezone": "Europe/Berlin"}}]},
        {"expect": {"last_tool_result_contains": "Europe/Berlin"}, "text": "Noon UTC is 13:00 in Berlin."},
    ])
    code, doc = cli_json("run", "convert", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert doc["stop"]["verdict"] == "WAITING_UNROUTED", doc
    assert [p["tool"] for p in doc["stop"]["pending_approvals"]] == ["mcp__time__convert_time"]
    assert wait_gone(processes_with("mcp_server_time", cwd=ws.resolve())) == []  # nothing runs while the session waits
    code, doc = cli_json("resume", doc["session_id"], "--approve", "t1", "--config", str(config))
    assert code == 0, doc
    assert doc["stop"]["cause"] == "answer"
    assert [(c["tool"], c["status"]) for c in doc["tool_calls"]] == [("mcp__time__convert_time", "succeeded")]
    assert wait_gone(processes_with("mcp_server_time", cwd=ws.resolve())) == []


def test_denied_by_config_is_refused_without_running(tmp_path):
    ws = _ws(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    config = _config(tmp_path, {"h": hostile("ok", state)}, tools={"permissions": {"mcp__h__poke": "deny"}})
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "p1", "name": "mcp__h__poke", "arguments": {"text": "hi"}}]},
        {"expect": {"last_tool_result_contains": "denied"}, "text": "I was not allowed."},
    ])
    code, doc = cli_json("run", "poke", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert code == 0, doc


@pytest.mark.parametrize("mode, expect", [
    ("exit", "MCP server h failed to start"),
    ("mute", "MCP server h failed to start"),
])
def test_server_that_never_starts_is_one_notice_and_the_run_goes_on(tmp_path, mode, expect):
    ws = _ws(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    config = _config(tmp_path, {"h": hostile(mode, state, start_timeout_s=2)})
    script = write_script(tmp_path, [{"text": "No MCP tools today."}])
    result = cli("run", "hello", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert result.exit_code == 0, result.output
    assert result.stderr.count(expect) == 1, result.stderr
    assert "Traceback" not in result.output
    assert processes_with(str(state)) == []


def test_crash_mid_call_is_an_uncertain_effect_and_nothing_is_left(tmp_path):
    ws = _ws(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    config = _config(tmp_path, {"h": hostile("crash", state)}, tools={"permissions": {"mcp__h__poke": "allow"}},
                     loop_policy={})
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "p1", "name": "mcp__h__poke", "arguments": {"text": "hi"}}]},
        {"text": "should not be reached"},
    ])
    code, doc = cli_json("run", "poke", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    receipt = doc["stop"]
    assert receipt["verdict"] == "UNCERTAIN" and receipt["reason"] == "uncertain_effect", doc
    assert wait_gone(processes_with(str(state))) == []


def test_crash_gives_an_error_result_then_the_restarted_server_answers(tmp_path):
    ws = _ws(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    config = _config(tmp_path, {"h": hostile("crash_once", state)}, tools={"permissions": {"mcp__h__poke": "allow"}})
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "p1", "name": "mcp__h__poke", "arguments": {"text": "one"}}]},
        {"expect": {"last_tool_result_contains": "whether the call had an effect is unknown"},
         "tool_calls": [{"id": "p2", "name": "mcp__h__poke", "arguments": {"text": "two"}}]},
        {"expect": {"last_tool_result_contains": "poked: two"}, "text": "The second poke worked."},
    ])
    code, doc = cli_json("run", "poke", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    # without a loop policy the run goes on (the model judges what to do next), but with no
    # check to tell, the answer over an effect that may or may not have happened is UNCERTAIN
    assert code == 8 and doc["stop"]["reason"] == "uncertain_effect", doc
    assert "mcp__h__poke p1" in doc["stop"]["detail"]
    assert [c["status"] for c in doc["tool_calls"]] == ["failed", "succeeded"]
    assert wait_gone(processes_with(str(state))) == []


def test_hanging_server_times_out_the_call_and_the_run_ends(tmp_path):
    ws = _ws(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    config = _config(tmp_path, {"h": hostile("hang", state, timeout_s=1)},
                     tools={"permissions": {"mcp__h__poke": "allow"}}, loop_policy={})
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "p1", "name": "mcp__h__poke", "arguments": {}}]},
        {"text": "not reached: the timed-out unknown call stops the run"},
    ])
    code, doc = cli_json("run", "poke", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert doc["stop"]["verdict"] == "UNCERTAIN" and doc["stop"]["reason"] == "uncertain_effect", doc
    assert [(c["tool"], c["status"]) for c in doc["tool_calls"]] == [("mcp__h__poke", "timed_out")]
    assert wait_gone(processes_with(str(state))) == []


def test_five_megabytes_are_capped_for_the_model_and_kept_whole_in_evidence(tmp_path):
    ws = _ws(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    config = _config(tmp_path, {"h": hostile("big", state)}, tools={"permissions": {"mcp__h__poke": "allow"},
                                                                    "max_output_bytes": 20000},
                     evidence={"enabled": True})
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "p1", "name": "mcp__h__poke", "arguments": {}}]},
        {"text": "That was big."},
    ])
    code, doc = cli_json("run", "poke", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert code == 0 and doc["stop"]["cause"] == "answer", doc
    session = Path(doc["session_path"]).read_text()
    assert len(session) < 200_000, "the 5 MB result reached the session uncapped"
    evidence_id = doc["tool_calls"][0]["evidence_id"]
    assert evidence_id
    shown = cli("evidence", "read", evidence_id, "--config", str(config))
    assert shown.exit_code == 0, shown.output[-500:]
    assert shown.stdout.count("x" * 1000) >= 5 * 1024, "evidence does not keep the whole 5 MB result"


def test_garbage_on_stdout_and_bad_schema_are_notices_not_failures(tmp_path):
    ws = _ws(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    config = _config(tmp_path, {"g": hostile("garbage", state), "b": hostile("badschema", state)},
                     tools={"permissions": {"mcp__g__poke": "allow"}})
    script = write_script(tmp_path, [
        {"expect": {"tools_offered": ["mcp__g__poke", "mcp__b__poke"]},
         "tool_calls": [{"id": "p1", "name": "mcp__g__poke", "arguments": {"text": "x"}}]},
        {"expect": {"last_tool_result_contains": "poked: x"}, "text": "done"},
    ])
    result = cli("run", "poke", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert result.exit_code == 0, result.output
    assert "tool 'broken' (mcp__b__broken) left out" in result.stderr
    assert "Traceback" not in result.output


def test_server_secrets_are_masked_in_the_session(tmp_path, monkeypatch):
    ws = _ws(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    secret = "sk-mcp-secret-0123456789abcdef"
    monkeypatch.setenv("HOSTILE_SECRET", secret)
    config = _config(tmp_path, {"h": {**hostile("env", state), "env": {"MY_TOKEN": "${HOSTILE_SECRET}"}}},
                     tools={"permissions": {"mcp__h__poke": "allow"}})
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "p1", "name": "mcp__h__poke", "arguments": {}}]},
        {"expect": {"last_tool_result_contains": "MY_TOKEN"}, "text": "I saw the environment."},
    ])
    code, doc = cli_json("run", "poke", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert code == 0, doc
    home = Path(os.environ["AMOS_HOME"])
    logs = [p for p in home.rglob("mcp-h.log")]
    assert logs and all(b"hostile: starting with token=" in p.read_bytes() for p in logs)  # its stderr was kept
    encoded = base64.b64encode(secret.encode())
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret.encode() not in data and encoded not in data, f"{path} holds the MCP server's secret"


def test_invalid_server_entry_is_exit_2_naming_server_and_field(tmp_path):
    ws = _ws(tmp_path)
    config = _config(tmp_path, {"broken": {"command": 42}})
    script = write_script(tmp_path, [{"text": "never"}])
    result = cli("run", "hi", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert result.exit_code == 2
    assert "broken" in result.stderr and "command" in result.stderr
    assert "Traceback" not in result.output


TOKEN = "runner-token-5d1e"


@pytest.fixture(scope="module")
def http_port():
    with http_server(TOKEN) as port:
        yield port


def _web(tmp_path: Path, http_port: int, monkeypatch) -> Path:
    monkeypatch.setenv("WEB_TOKEN", TOKEN)
    return _config(tmp_path, {"web": {"type": "http", "url": f"http://127.0.0.1:{http_port}/mcp",
                                      "headers": {"Authorization": "Bearer ${WEB_TOKEN}"},
                                      "trust_annotations": True}})


def test_http_server_prompt_is_a_slash_command_and_resources_are_read(tmp_path, http_port, monkeypatch):
    ws = _ws(tmp_path)
    config = _web(tmp_path, http_port, monkeypatch)
    script = write_script(tmp_path, [
        {"expect": {"last_message_role": "user", "any_message_contains": "Say hello to Ada in a warm way."},
         "tool_calls": [{"id": "r1", "name": "mcp_read_resource", "arguments": {"server": "web", "uri": "memo://hello"}},
                        {"id": "a1", "name": "mcp__web__add", "arguments": {"a": 2, "b": 3}}]},
        {"expect": {"last_tool_result_contains": "5"}, "text": "Hello Ada! (memo read, 2+3=5)"},
    ])
    code, doc = cli_json("run", '/mcp__web__greet Ada style=warm', "--script", str(script), "--workspace", str(ws),
                         "--config", str(config))
    assert code == 0, doc
    assert [(c["tool"], c["status"]) for c in doc["tool_calls"]] == [
        ("mcp_read_resource", "succeeded"), ("mcp__web__add", "succeeded")]
    session = Path(doc["session_path"]).read_text()
    assert "hello from a resource" in session
    assert TOKEN not in session


def test_bad_prompt_arguments_are_a_usage_error(tmp_path, http_port, monkeypatch):
    ws = _ws(tmp_path)
    config = _web(tmp_path, http_port, monkeypatch)
    script = write_script(tmp_path, [{"text": "never"}])
    result = cli("run", "/mcp__web__greet", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert result.exit_code == 2, result.output
    assert "/mcp__web__greet needs NAME" in result.stderr and "usage: /mcp__web__greet NAME [STYLE]" in result.stderr
    unknown = cli("run", "/mcp__web__nope", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert unknown.exit_code == 2 and "unknown MCP prompt /mcp__web__nope" in unknown.stderr
    assert "Traceback" not in result.output + unknown.output


def test_slash_mcp_starts_servers_and_lists_tools_and_prompts(tmp_path, http_port, monkeypatch):
    ws = _ws(tmp_path)
    config = _web(tmp_path, http_port, monkeypatch)
    script = write_script(tmp_path, [{"text": "never"}])
    result = cli("run", "/mcp", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("web: running")
    assert "mcp__web__add" in result.stdout and "effect read" in result.stdout
    assert "/mcp__web__greet NAME [STYLE]" in result.stdout
    helped = cli("run", "/help", "--script", str(script), "--workspace", str(ws), "--config", str(config))
    assert "MCP prompts are listed once the servers have started (/mcp starts them)" in helped.stdout
