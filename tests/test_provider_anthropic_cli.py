"""``amos run --model anthropic:…`` end to end: the real CLI, the real SDK, real HTTP.

``WireServer`` replays SSE composed in the fixtures' style on 127.0.0.1 and records
what the SDK sent; ``ANTHROPIC_API_KEY`` is a recognisable fake that must never reach
stdout, stderr or the AMOS_HOME folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import cli, cli_json
from tests.wire_server import FIXTURES, WireServer

# The SDK warns that claude-sonnet-4-5 (the model the issue names) is deprecated.
pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

KEY = "sk-ant-api03-CLI-FAKE-key-5b8e2d90aa"
FILE_TEXT = "alpha line\nbeta line\n"
FINAL = "a.txt holds two lines: alpha and beta."


def sse(*events: dict[str, Any]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def _start(n: int) -> dict[str, Any]:
    return {"type": "message_start", "message": {
        "id": f"msg_01CliTurn{n}000000000000", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 900 + n, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "output_tokens": 1}}}


def _tool(index: int, call_id: str, name: str, *fragments: str) -> list[dict[str, Any]]:
    return [{"type": "content_block_start", "index": index,
             "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}},
            *({"type": "content_block_delta", "index": index,
               "delta": {"type": "input_json_delta", "partial_json": f}} for f in fragments),
            {"type": "content_block_stop", "index": index}]


def _end(stop_reason: str, output_tokens: int) -> list[dict[str, Any]]:
    return [{"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
             "usage": {"output_tokens": output_tokens}},
            {"type": "message_stop"}]


TURN1 = sse(
    _start(1),
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me look."}},
    {"type": "content_block_stop", "index": 0},
    *_tool(1, "toolu_01CliReadFile00000000", "read_file", "", '{"path": ', '"a.txt"}'),
    *_tool(2, "toolu_01CliListDir000000000", "list_dir", "", '{"path"', ': "."}'),
    *_end("tool_use", 60),
)
TURN2 = sse(
    _start(2),
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": FINAL}},
    {"type": "content_block_stop", "index": 0},
    *_end("end_turn", 15),
)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.txt").write_text(FILE_TEXT, encoding="utf-8")
    return folder


def run_cli(server: WireServer, workspace: Path, prompt: str = "what is in a.txt?"):
    result = cli("run", "--model", "anthropic:claude-sonnet-4-5", "--base-url", server.url,
                 "--workspace", str(workspace), "--json", prompt)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, (result.stdout, result.stderr)
    return result, json.loads(lines[0])


def assert_key_nowhere(result, amos_home: Path) -> None:
    assert KEY not in result.stdout
    assert KEY not in (result.stderr or "")
    for path in amos_home.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_two_parallel_reads_then_an_answer(workspace: Path, amos_home: Path):
    with WireServer() as server:
        server.reply(200, TURN1, sse=True)
        server.reply(200, TURN2, sse=True, byte_by_byte=True)
        result, out = run_cli(server, workspace)

    assert result.exit_code == 0, out
    assert out["stop"]["verdict"] == "ANSWERED"
    assert out["stop"]["cause"] == "answer"
    assert out["output_text"] == FINAL
    assert [(c["tool"], c["status"]) for c in out["tool_calls"]] == [
        ("read_file", "succeeded"), ("list_dir", "succeeded")]
    assert out["usage"]["input_tokens"] == 901 + 902 and out["usage"]["output_tokens"] == 75
    assert out["usage"]["model_calls"] == 2

    assert len(server.requests) == 2
    first, second = (r.json for r in server.requests)
    assert all(r.path == "/v1/messages" for r in server.requests)
    assert first["model"] == "claude-sonnet-4-5" and first["stream"] is True
    assert {"read_file", "list_dir"} <= {t["name"] for t in first["tools"]}
    assert isinstance(first["system"], str) and first["system"]

    assistant, last = second["messages"][-2], second["messages"][-1]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert last["role"] == "user"
    read, listing = last["content"][:2]
    assert (read["type"], read["tool_use_id"]) == ("tool_result", "toolu_01CliReadFile00000000")
    assert (listing["type"], listing["tool_use_id"]) == ("tool_result", "toolu_01CliListDir000000000")
    assert "alpha line" in read["content"] and "beta line" in read["content"]
    assert "a.txt" in listing["content"]
    assert not read.get("is_error") and not listing.get("is_error")
    assert_key_nowhere(result, amos_home)


def test_529_then_success_completes(workspace: Path, amos_home: Path):
    with WireServer() as server:
        server.reply(529, FIXTURES / "anthropic/error_529_overloaded.json", headers={"retry-after-ms": "1"})
        server.reply(200, TURN2, sse=True)
        result, out = run_cli(server, workspace, "hello")
    assert result.exit_code == 0, out
    assert out["stop"]["verdict"] == "ANSWERED"
    assert out["output_text"] == FINAL
    assert len(server.requests) == 2  # the SDK retried; amos did not loop
    assert_key_nowhere(result, amos_home)


def test_401_fails_cleanly_without_the_key(workspace: Path, amos_home: Path):
    with WireServer() as server:
        server.reply(401, FIXTURES / "anthropic/error_401_authentication.json")
        result, out = run_cli(server, workspace, "hello")
    assert result.exit_code == 1
    assert out["stop"]["verdict"] == "FAILED"
    assert out["stop"]["cause"] == "provider_error"
    assert out["stop"]["reason"] == "auth"
    assert "invalid x-api-key" in out["stop"]["detail"]
    assert "Traceback" not in result.stdout + (result.stderr or "")
    assert len(server.requests) == 1
    assert_key_nowhere(result, amos_home)


def test_turn_cut_off_mid_call_records_it_not_started(workspace: Path, amos_home: Path):
    with WireServer() as server:
        server.reply(200, FIXTURES / "anthropic/stream_max_tokens_mid_tool_use.sse", sse=True)
        code, out = cli_json("run", "--model", "anthropic:claude-sonnet-4-5", "--base-url", server.url,
                             "--workspace", str(workspace), "weather?")
    assert code == 6, out  # BOUNDED_STOP (amos run --help: exit codes)
    assert out["stop"]["verdict"] == "BOUNDED_STOP"
    assert (out["stop"]["cause"], out["stop"]["reason"]) == ("output_limit", "output_truncated")
    assert [(c["tool"], c["status"]) for c in out["tool_calls"]] == [("get_weather", "not_started")]
