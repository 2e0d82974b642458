"""``amos run`` against a loopback server speaking the OpenAI Chat Completions wire format.

The real CLI, the real runner, the real ``openai`` SDK over real HTTP (``WireServer``):
turn 1 asks for two parallel read-only tool calls, turn 2 answers. The fake key must
reach the server (as the bearer token) and nowhere else: not stdout, not stderr, not a
file under ``AMOS_HOME``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support import cli
from tests.wire_server import WireServer

FAKE_KEY = "sk-amos-fake-0e1d2c3b4a5968778695"
PROMPT = "What is in a.txt, and what else is here?"
FILE_TEXT = "alpha line\nbeta line\n"


def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    return {"id": "chatcmpl-wire", "object": "chat.completion.chunk", "created": 1762333440,
            "model": "gpt-4o-mini-2024-07-18", "choices": choices, **extra}


def sse(*chunks: dict[str, Any]) -> bytes:
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


USAGE = {"prompt_tokens": 300, "completion_tokens": 40, "total_tokens": 340,
         "prompt_tokens_details": {"cached_tokens": 128}, "completion_tokens_details": {"reasoning_tokens": 0}}


def openai_tool_turn() -> bytes:
    """OpenAI style: ids and names on each call's first delta, arguments in fragments."""
    return sse(
        chunk({"role": "assistant", "content": None, "refusal": None}),
        chunk({"tool_calls": [{"index": 0, "id": "call_ReadA0000000000000000001", "type": "function",
                               "function": {"name": "read_file", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "a.txt"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_ListB0000000000000000002", "type": "function",
                               "function": {"name": "list_dir", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"path": "."}'}}]}),
        chunk({}, "tool_calls"),
        chunk(None, usage=USAGE),
    )


def compat_tool_turn() -> bytes:
    """Ollama style: no ids, everything at index 0, no-argument call with "", no usage."""
    return sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"tool_calls": [{"index": 0, "type": "function",
                               "function": {"name": "read_file", "arguments": '{"path":"a.txt"}'}}]}),
        chunk({"tool_calls": [{"index": 0, "type": "function", "function": {"name": "list_dir", "arguments": ""}}]}),
        chunk({}, "stop"),
    )


def text_turn(text: str, usage: dict[str, Any] | None = None) -> bytes:
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in re.findall(r"\S+\s*", text)]
    chunks.append(chunk({}, "stop"))
    if usage:
        chunks.append(chunk(None, usage=usage))
    return sse(*chunks)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text(FILE_TEXT, encoding="utf-8")
    (ws / "b.md").write_text("# b\n", encoding="utf-8")
    return ws


def run(model: str, server: WireServer, workspace: Path) -> tuple[int, dict[str, Any], str, str]:
    result = cli("run", "--model", model, "--base-url", f"{server.url}/v1", "--workspace", str(workspace),
                 "--json", PROMPT)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, (result.stdout, result.stderr, result.exception)
    return result.exit_code, json.loads(lines[0]), result.stdout, result.stderr


def bearer(request: Any) -> str | None:
    return next((v for k, v in request.headers.items() if k.lower() == "authorization"), None)


def assert_key_nowhere(home: Path, *texts: str) -> None:
    for text in texts:
        assert FAKE_KEY not in text
    for path in home.rglob("*"):
        if path.is_file():
            assert FAKE_KEY.encode() not in path.read_bytes(), path


def assert_results_correlated(second: dict[str, Any], ids: list[str], content: str | None = None) -> None:
    messages = second["messages"]
    assert messages[0]["role"] == "system"
    assert messages[1] == {"role": "user", "content": PROMPT}
    assistant = messages[2]
    assert assistant["role"] == "assistant" and assistant["content"] == content
    assert [tc["id"] for tc in assistant["tool_calls"]] == ids
    assert [tc["function"]["name"] for tc in assistant["tool_calls"]] == ["read_file", "list_dir"]
    tools = messages[3:5]
    assert [m["role"] for m in tools] == ["tool", "tool"]
    assert [m["tool_call_id"] for m in tools] == ids
    assert "alpha line" in tools[0]["content"] and "beta line" in tools[0]["content"]
    assert "a.txt" in tools[1]["content"] and "b.md" in tools[1]["content"]
    assert len(messages) == 5


def test_openai_run_with_parallel_tool_calls(monkeypatch, workspace, amos_home):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with WireServer() as server:
        server.reply(200, openai_tool_turn(), sse=True)
        server.reply(200, text_turn("a.txt holds two lines.", USAGE), sse=True)
        code, out, stdout, stderr = run("openai:gpt-4o-mini", server, workspace)
    assert code == 0, out
    assert (out["stop"]["verdict"], out["stop"]["cause"]) == ("ANSWERED", "answer")
    assert out["output_text"] == "a.txt holds two lines."
    assert [(c["tool"], c["status"]) for c in out["tool_calls"]] == [("read_file", "succeeded"),
                                                                     ("list_dir", "succeeded")]
    cost = out["usage"].pop("cost_usd")
    assert out["usage"] == {"input_tokens": 600, "output_tokens": 80, "cached_tokens": 256,
                            "reasoning_tokens": 0, "model_calls": 2}
    assert cost is not None and cost > 0  # genai-prices knows this model (tests/test_context_usage.py checks sums)
    first, second = (r.json for r in server.requests)
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2
    assert all(bearer(r) == f"Bearer {FAKE_KEY}" for r in server.requests)
    assert first["model"] == "gpt-4o-mini" and first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    assert {"read_file", "list_dir"} <= {t["function"]["name"] for t in first["tools"]}
    assert_results_correlated(second, ["call_ReadA0000000000000000001", "call_ListB0000000000000000002"])
    assert_key_nowhere(amos_home, stdout, stderr)


def test_openai_compatible_run_without_key_ids_or_usage(monkeypatch, workspace, amos_home):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)  # set, but must not go to the local server
    with WireServer() as server:
        server.reply(200, compat_tool_turn(), sse=True, byte_by_byte=True)
        server.reply(200, text_turn("Two files."), sse=True)
        code, out, stdout, stderr = run("openai-compatible:llama3", server, workspace)
    assert code == 0, out
    assert (out["stop"]["verdict"], out["stop"]["cause"]) == ("ANSWERED", "answer")
    assert [(c["tool"], c["status"]) for c in out["tool_calls"]] == [("read_file", "succeeded"),
                                                                     ("list_dir", "succeeded")]
    assert out["usage"]["model_calls"] == 2 and out["usage"]["estimated"] is True  # no usage: estimated
    assert out["usage"]["input_tokens"] > 0
    assert all(bearer(r) == "Bearer not-needed" for r in server.requests)
    first, second = (r.json for r in server.requests)
    assert first["model"] == "llama3"
    ids = [tc["id"] for tc in second["messages"][2]["tool_calls"]]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    assert second["messages"][2]["tool_calls"][1]["function"]["arguments"] == "{}"
    assert_results_correlated(second, ids, content="")  # not null: llama-cpp-python rejects it (issue 23)
    assert_key_nowhere(amos_home, stdout, stderr)


def test_openai_401_fails_cleanly(monkeypatch, workspace, amos_home):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    body = {"error": {"message": f"Incorrect API key provided: {FAKE_KEY}.", "type": "invalid_request_error",
                      "param": None, "code": "invalid_api_key"}}
    with WireServer() as server:
        server.reply(401, body)
        code, out, stdout, stderr = run("openai:gpt-4o-mini", server, workspace)
    assert code == 1
    assert (out["stop"]["verdict"], out["stop"]["cause"], out["stop"]["reason"]) == (
        "FAILED", "provider_error", "auth")
    assert "openai HTTP 401 auth" in out["stop"]["detail"]
    assert "Traceback" not in stdout + stderr
    assert len(server.requests) == 1
    assert_key_nowhere(amos_home, stdout, stderr)


def test_a_tool_name_streamed_in_pieces_and_calls_sharing_index_0(monkeypatch, workspace, amos_home):
    """A server that streams a call's name in pieces (no ``type`` on the later ones), and an
    Ollama-style turn whose first call has no arguments: each call keeps its own name."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    pieces = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "_file"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "a.txt"}'}}]}),
        chunk({}, "tool_calls"))
    shared = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"tool_calls": [{"index": 0, "type": "function", "function": {"name": "list_dir", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "type": "function",
                               "function": {"name": "read_file", "arguments": '{"path":"a.txt"}'}}]}),
        chunk({}, "stop"))
    for body, expected in ((pieces, [("read_file", "succeeded")]),
                           (shared, [("list_dir", "succeeded"), ("read_file", "succeeded")])):
        with WireServer() as server:
            server.reply(200, body, sse=True)
            server.reply(200, text_turn("done."), sse=True)
            code, out, _, _ = run("openai:gpt-4o-mini", server, workspace)
        assert code == 0, out
        assert [(c["tool"], c["status"]) for c in out["tool_calls"]] == expected
