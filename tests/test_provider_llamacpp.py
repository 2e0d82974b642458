"""``amos run`` against traffic recorded from real llama.cpp-family servers (issue 23).

The real CLI and the real ``openai`` SDK speak HTTP to ``LlamaCppPythonReplay`` and
``LlamaServerReplay``, which serve what llama-cpp-python 0.3.36 and llama.cpp's
``llama-server`` answered and refuse requests the way they did
(tests/data/providers/llamacpp/README.md says how each recording was made).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
import pytest

from amos.errors import ProviderError
from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart
from amos.providers import build_provider
from amos.providers.base import ModelRequest
from amos.providers.common import ProviderSettings
from amos.providers.context_window import probe_context_window, window_from_error
from tests.llamacpp_replay import LlamaCppPythonReplay, LlamaServerReplay
from tests.support import cli

PROMPT = "Read the file a.txt and tell me the secret word."


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("The secret word is pineapple.\n", encoding="utf-8")
    return ws


def run(server: LlamaCppPythonReplay | LlamaServerReplay, workspace: Path, settings: dict[str, Any], *extra: str,
        prompt: str = PROMPT, config: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    data = {"providers": {"openai-compatible": {"max_retries": 0, **settings}}, **(config or {})}
    path = workspace.parent / "amos.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = cli("run", "--config", str(path), "--model", "openai-compatible:smollm2", "--base-url",
                 f"{server.url}/v1", "--workspace", str(workspace),
                 "--sandbox", "danger-full-access",  # the recorded requests offer run_command without escalation
                 *extra, "--json", prompt)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result.exit_code, json.loads(lines[0])


def stop(out: dict[str, Any]) -> tuple[str, str, str]:
    return out["stop"]["verdict"], out["stop"]["cause"], out["stop"]["reason"]


def stream_once(settings: ProviderSettings, history: list[Message]) -> list:
    """One real model call through the provider adapter; its events (raises its ProviderError)."""
    provider = build_provider(settings)

    async def call() -> list:
        return [e async for e in provider.stream(ModelRequest(system="s", messages=history))]

    return asyncio.run(call())


def without_system(body: dict[str, Any]) -> dict[str, Any]:
    """A request body minus the system prompt (it names the workspace path) and call ids."""
    data = json.loads(json.dumps(body))
    data["messages"] = data["messages"][1:]
    for message in data["messages"]:
        for call in message.get("tool_calls") or ():
            call["id"] = "ID"
        if message.get("role") == "tool":
            message["tool_call_id"] = "ID"
    return data


def test_tool_round_trip_not_streamed_with_tool_choice_auto(workspace):
    with LlamaCppPythonReplay() as server:
        server.serve("roundtrip_1", "roundtrip_2", "roundtrip_3")
        code, out = run(server, workspace, {"tool_choice": "auto", "stream": False, "max_tokens": 48},
                        "--max-steps", "3")
    assert server.refusals == []
    # The model called read_file, got its result back (the server accepted it), and asked
    # for more: SmolLM2 in this chat format never sees tool results (README), so it loops.
    assert [(c["tool"], c["status"]) for c in out["tool_calls"]] == [
        ("read_file", "succeeded"), ("list_dir", "failed"), ("list_dir", "failed")]
    assert stop(out) == ("BOUNDED_STOP", "step_limit", "iteration_limit") and code == 6
    assert out["usage"]["input_tokens"] == 1099 + 1157 + 1202 and out["usage"]["model_calls"] == 3
    recorded = server.recording("roundtrip_2").request
    sent = [r.json for r in server.requests]
    assert without_system(sent[1]) == without_system(recorded)  # what amos sends is what was recorded
    assistant = sent[1]["messages"][2]
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "read_file"
    assert sent[1]["messages"][3]["content"].endswith("The secret word is pineapple.\n")
    assert all(b["tool_choice"] == "auto" and b["stream"] is False and b["max_tokens"] == 48 for b in sent)
    assert all("stream_options" not in b for b in sent)


def test_null_content_gets_the_recorded_500_with_the_field_named(workspace):
    """What amos sent before the fix (the ``openai`` flavour still sends null, as OpenAI accepts)."""
    history = [
        Message(role="user", parts=[TextPart(text=PROMPT)]),
        Message(role="assistant", parts=[ToolCallPart(call_id="call_1", tool_name="read_file",
                                                      arguments={"path": "a.txt"})]),
        Message(role="tool", parts=[ToolResultPart(call_id="call_1", tool_name="read_file", content="pineapple")]),
    ]
    with LlamaCppPythonReplay() as server:
        settings = ProviderSettings(provider_name="openai", model="smollm2", api_key="x", max_retries=0,
                                    base_url=f"{server.url}/v1", stream=False, tool_choice="auto")
        with pytest.raises(ProviderError) as caught:
            stream_once(settings, history)
    assert server.refusals == ["content_null_1"]
    assert server.requests[0].json["messages"][2]["content"] is None
    message = str(caught.value)
    assert caught.value.kind == "server" and "HTTP 500" in message
    assert message.startswith("openai HTTP 500 server: 7 validation errors: | ")
    assert "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string'" in message


def test_without_tool_choice_the_model_answers_text_and_no_usage(workspace):
    with LlamaCppPythonReplay() as server:
        server.serve("tools_no_choice_1")
        code, out = run(server, workspace, {"max_tokens": 48})
    assert code == 0 and stop(out) == ("ANSWERED", "answer", "answer_returned")
    assert out["output_text"].startswith("The secret word:")
    assert out["tool_calls"] == []
    # the stream had no usage: the counts are amos's estimate, and say so (issue 16)
    assert out["usage"]["model_calls"] == 1 and out["usage"]["estimated"] is True
    assert out["usage"]["input_tokens"] > 0 and out["usage"]["output_tokens"] > 0
    body = server.requests[0].json
    assert body["stream"] is True and "tool_choice" not in body and len(body["tools"]) == 6


def test_streaming_with_tool_choice_auto_is_an_empty_stream_and_says_what_to_set(workspace):
    with LlamaCppPythonReplay() as server:
        code, out = run(server, workspace, {"tool_choice": "auto"})
    assert server.refusals == ["auto_stream_1"]
    assert code == 1 and stop(out) == ("FAILED", "provider_error", "bad_response")
    assert "empty stream" in out["stop"]["detail"]
    assert "providers.openai-compatible.stream to false" in out["stop"]["detail"]


def test_tool_choice_required_is_a_500_from_this_chat_format(workspace):
    with LlamaCppPythonReplay() as server:
        code, out = run(server, workspace, {"tool_choice": "required", "stream": False})
    assert server.refusals == ["required_1"]
    assert code == 1 and stop(out) == ("FAILED", "provider_error", "server")
    assert "HTTP 500" in out["stop"]["detail"]


def test_tool_choice_none_not_streamed(workspace):
    with LlamaCppPythonReplay() as server:
        server.serve("none_nostream_1")
        code, out = run(server, workspace, {"tool_choice": "none", "stream": False, "max_tokens": 32},
                        prompt="What is a build log? One sentence.")
    assert stop(out) == ("BOUNDED_STOP", "output_limit", "output_truncated")
    assert out["output_text"].startswith("A build log is a text file")
    assert out["usage"]["input_tokens"] == 134 and out["usage"]["output_tokens"] == 32
    assert server.requests[0].json["tool_choice"] == "none"


def test_runaway_stream_is_served_whole(workspace):
    """The recording the doom-loop text rung must stop mid-stream (the lead's part of issue 23)."""
    with LlamaCppPythonReplay() as server:
        server.serve("runaway_1")
        code, out = run(server, workspace, {"max_tokens": 256}, prompt="Tell me about the build log.")
    assert stop(out) == ("BOUNDED_STOP", "output_limit", "output_truncated")
    assert out["output_text"].count("including the build time, the build process, and the build results") == 10


def test_stream_cut_mid_way(workspace):
    with LlamaCppPythonReplay() as server:
        server.serve("cut_1")
        code, out = run(server, workspace, {"max_tokens": 64}, prompt="What is a build log? One sentence.")
    assert code == 1 and stop(out) == ("FAILED", "provider_error", "connection")
    assert "was cut after 6 chunks" in out["stop"]["detail"] and "cannot reach" not in out["stop"]["detail"]


def test_context_length_error_states_the_window(workspace):
    with LlamaCppPythonReplay() as server:
        server.serve("context_length_nostream_1")
        code, out = run(server, workspace, {"stream": False, "max_tokens": 32})
    assert stop(out) == ("FAILED", "provider_error", "context_length")
    assert window_from_error(out["stop"]["detail"]) == 2048
    body = json.loads(server.recording("context_length_nostream_1").body)
    assert window_from_error("", body) == 2048


def test_context_length_while_streaming_is_an_empty_stream(workspace):
    with LlamaCppPythonReplay() as server:
        server.serve("context_length_1")
        code, out = run(server, workspace, {"max_tokens": 32})
    assert stop(out) == ("FAILED", "provider_error", "bad_response")
    assert "context window" in out["stop"]["detail"]


def test_probe_finds_no_window_on_llama_cpp_python():
    with LlamaCppPythonReplay() as server:
        assert probe_context_window(f"{server.url}/v1", "smollm2", timeout_s=2) is None
    assert [(r.method, r.path) for r in server.requests] == [
        ("GET", "/props"), ("GET", "/v1/models"), ("GET", "/api/ps"), ("POST", "/api/show")]


# --------------------------------------------------------------------------- llama.cpp llama-server


def test_probe_reads_llama_server_props():
    with LlamaServerReplay() as server:
        assert probe_context_window(f"{server.url}/v1", "smollm2") == 2048
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/props")]


def test_llama_server_context_error_is_context_length_and_states_the_window(workspace):
    with LlamaServerReplay() as server:
        server.serve("ls_context_length_1")
        code, out = run(server, workspace, {"max_tokens": 32})
    assert stop(out) == ("FAILED", "provider_error", "context_length")
    assert "exceeds the available context size (2048 tokens)" in out["stop"]["detail"]
    assert window_from_error(out["stop"]["detail"]) == 2048
    assert window_from_error("", json.loads(server.recording("ls_context_length_1").body)) == 2048


def test_llama_server_streams_usage_and_ignores_tools_its_template_cannot_show(workspace):
    with LlamaServerReplay() as server:
        server.serve("ls_template_no_tools_1")
        code, out = run(server, workspace, {"max_tokens": 64})
    assert stop(out) == ("ANSWERED", "answer", "answer_returned")
    assert out["usage"]["input_tokens"] == 128 and out["usage"]["output_tokens"] == 33  # 6 tools sent, none shown


def test_llama_server_accepts_null_content_beside_tool_calls(workspace):
    with LlamaServerReplay() as server:
        server.serve("ls_content_null_1")
        settings = ProviderSettings(provider_name="openai", model="smollm2", api_key="x", max_retries=0,
                                    base_url=f"{server.url}/v1")
        history = [
            Message(role="user", parts=[TextPart(text=PROMPT)]),
            Message(role="assistant", parts=[ToolCallPart(call_id="call_1", tool_name="read_file",
                                                          arguments={"path": "a.txt"})]),
            Message(role="tool", parts=[ToolResultPart(call_id="call_1", tool_name="read_file", content="x")]),
        ]
        events = stream_once(settings, history)
    assert server.requests[0].json["messages"][2]["content"] is None
    assert events[-1].finish_reason == "length"


def test_a_runaway_run_to_its_cap_without_the_doom_loop_says_how_to_stop_it(workspace):
    """Detection is off by default (spec/config.md ``doom_loop: null``); a turn that loops
    until its output limit gets one notice naming ``"doom_loop": true``."""
    path = workspace.parent / "amos.json"
    path.write_text(json.dumps({"providers": {"openai-compatible": {"max_retries": 0, "max_tokens": 256}}}))
    with LlamaCppPythonReplay() as server:
        server.serve("runaway_1")
        result = cli("run", "--config", str(path), "--model", "openai-compatible:smollm2", "--base-url",
                     f"{server.url}/v1", "--workspace", str(workspace), "--output-format", "stream-json",
                     "Tell me about the build log.")
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    notices = [e["text"] for e in events if e["type"] == "notice"]
    assert result.exit_code == 6 and events[-1]["type"] == "result"
    assert [n for n in notices if "doom_loop" in n] == [
        "the reply kept repeating itself until its output limit; \"doom_loop\": true in the config stops such "
        "loops while they stream"]


ROUNDTRIP_PROMPT = "What is the secret word in the file a.txt?"


def recorded_body(server: LlamaServerReplay, name: str) -> dict[str, Any]:
    """The request ``name`` was recorded for, minus the keys the recording proxy overrode."""
    rec = server.recording(name)
    return {k: v for k, v in rec.request.items() if k not in (rec.entry["override"] or ())}


@pytest.mark.parametrize("stream", [True, False])
def test_llama_server_full_tool_round_trip_ends_with_the_recorded_answer(workspace, stream):
    """The model calls read_file, amos runs it, sends the result back, and the model answers."""
    prefix = "ls_roundtrip" if stream else "ls_roundtrip_nostream"
    settings: dict[str, Any] = {"max_tokens": 128} if stream else {"max_tokens": 128, "stream": False}
    with LlamaServerReplay() as server:
        server.serve(f"{prefix}_1", f"{prefix}_2")
        code, out = run(server, workspace, settings, "--max-steps", "4", prompt=ROUNDTRIP_PROMPT)
        first, second = (recorded_body(server, f"{prefix}_{n}") for n in (1, 2))
    assert server.refusals == [] and len(server.requests) == 2
    assert code == 0 and stop(out) == ("ANSWERED", "answer", "answer_returned")
    assert out["output_text"] == "a.txt says: The secret word is pineapple."
    # the call the model made really ran on the workspace
    assert [(c["tool"], c["status"]) for c in out["tool_calls"]] == [("read_file", "succeeded")]
    assert out["stop"]["tool_call_count"] == 1 and out["stop"]["steps"] == 2
    assert out["usage"]["input_tokens"] == 645 + 720 and out["usage"]["output_tokens"] == 26 + 12
    assert out["usage"]["model_calls"] == 2 and "estimated" not in out["usage"]  # the server counted them
    sent = [r.json for r in server.requests]
    assert without_system(sent[0]) == without_system(first)  # what amos sends is what was recorded
    assert without_system(sent[1]) == without_system(second)
    user, assistant, result = sent[1]["messages"][1:]
    assert user == {"role": "user", "content": ROUNDTRIP_PROMPT}
    assert assistant["content"] == "" and "content" in assistant  # "", not null
    call = assistant["tool_calls"][0]
    assert call["function"]["name"] == "read_file" and json.loads(call["function"]["arguments"]) == {"path": "a.txt"}
    assert result["role"] == "tool" and result["tool_call_id"] == call["id"]
    assert result["content"] == "a.txt (lines 1-1 of 1)\nThe secret word is pineapple.\n"  # read from the workspace
    assert all("tool_choice" not in b and b["stream"] is stream and len(b["tools"]) == 6 for b in sent)


def test_llama_server_round_trip_replay_refuses_null_content_as_a_mismatch(workspace):
    """The replay's rule, not the server's: the recording is of the turn amos sent with ``""``."""
    with LlamaServerReplay() as server:
        call_id = server.recording("ls_roundtrip_2").request["messages"][2]["tool_calls"][0]["id"]
        history = [
            Message(role="user", parts=[TextPart(text=ROUNDTRIP_PROMPT)]),
            Message(role="assistant", parts=[ToolCallPart(call_id=call_id, tool_name="read_file",
                                                          arguments={"path": "a.txt"})]),
            Message(role="tool", parts=[ToolResultPart(call_id=call_id, tool_name="read_file",
                                                       content="a.txt (lines 1-1 of 1)\nThe secret word is pineapple.\n")]),
        ]
        server.serve("ls_roundtrip_2")
        # the ``openai`` flavour sends null content, as OpenAI accepts
        settings = ProviderSettings(provider_name="openai", model="smollm2", api_key="x", max_retries=0,
                                    base_url=f"{server.url}/v1")
        with pytest.raises(ProviderError) as caught:
            stream_once(settings, history)
    assert server.requests[0].json["messages"][2]["content"] is None
    assert "HTTP 422" in str(caught.value)
    assert "ls_roundtrip_2 was recorded for another conversation: messages[2] differs in ['content']" in str(caught.value)


def test_llama_server_refuses_an_assistant_message_with_neither_content_nor_tool_calls():
    with LlamaServerReplay() as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="smollm2", messages=[
                {"role": "user", "content": ROUNDTRIP_PROMPT}, {"role": "assistant"},  # type: ignore[list-item]
                {"role": "user", "content": "again"}])
    assert server.refusals == ["ls_no_content_1"]
    assert "Assistant message must contain either 'content' or 'tool_calls'!" in str(caught.value)


def test_llama_server_accepts_a_tool_call_turn_with_no_content_key():
    with LlamaServerReplay() as server:
        server.serve("ls_content_missing_1")
        sent = server.recording("ls_content_missing_1").request
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
        reply = client.chat.completions.create(**{k: sent[k] for k in ("model", "messages", "tools", "max_tokens")})
    assert "content" not in server.requests[0].json["messages"][2]
    assert server.refusals == [] and reply.choices[0].message.content == "a.txt says: The secret word"
