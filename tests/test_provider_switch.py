"""Switching providers mid-session (``/model``): the neutral history converts to each wire format.

A history produced by one provider's real SDK stream is sent through another
provider's real SDK client (httpx2 mock transport, or real HTTP to a loopback
server); the captured request must be valid for the target API: tool calls and
results kept and correlated, foreign leftovers (thought signatures) dropped.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import httpx2
import pytest

from amos.messages import Message, ToolResultPart
from amos.providers import build_provider
from amos.providers.base import ModelRequest, ToolCallEvent
from amos.providers.common import ProviderSettings
from amos.tools.base import ToolSpec

from .support import collect, finished, make_runner, write_script
from .wire_server import FIXTURES, WireServer

TOOLS = (
    ToolSpec("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"},
                                                                        "unit": {"type": "string"}}}),
    ToolSpec("get_time", "Time", {"type": "object", "properties": {"timezone": {"type": "string"}}}),
)
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def run_provider(name: str, body: bytes, messages: list[Message]) -> tuple[list, dict]:
    """Stream one request through the real SDK; returns (events, captured request JSON)."""
    captured: dict = {}

    def handler(request: httpx2.Request) -> httpx2.Response:
        captured.update(json.loads(request.content))
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async def go():
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        settings = ProviderSettings(provider_name=name, model="m", api_key="test-key", max_retries=0,
                                    base_url="http://127.0.0.1:9/v1" if name.startswith("openai") else None)
        provider = build_provider(settings, http_client=client)
        events = [e async for e in provider.stream(ModelRequest(system="sys", messages=messages, tools=TOOLS))]
        await client.aclose()
        return events

    return asyncio.run(go()), captured


def history_from(name: str, fixture: Path) -> list[Message]:
    """A neutral history whose assistant turn came from ``name``'s real stream."""
    question = Message.user("What's the weather in Paris and the current time in Tokyo?")
    events, _ = run_provider(name, fixture.read_bytes(), [question])
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert len(calls) == 2
    assistant = Message(role="assistant", kind="turn", parts=tuple(calls))
    results = [Message.tool_result(ToolResultPart(call_id=c.call_id, tool_name=c.tool_name, content=f"result {i}"))
               for i, c in enumerate(calls)]
    return [question, assistant, *results, Message.user("[amos host feedback] keep going", kind="feedback")]


def test_gemini_history_to_anthropic_and_openai():
    history = history_from("google", FIXTURES / "gemini/response_turn1_function_calls.sse")
    assert any(c.provider_details for c in history[1].tool_calls)  # the signature was kept for Gemini

    _, body = run_provider("anthropic", (FIXTURES / "anthropic/response_turn2_text.sse").read_bytes(), history)
    assert "ignature" not in json.dumps(body)
    uses = [b for b in body["messages"][1]["content"] if b["type"] == "tool_use"]
    results = body["messages"][2]["content"]
    assert [u["name"] for u in uses] == ["get_weather", "get_time"]
    assert all(ANTHROPIC_ID.match(u["id"]) for u in uses)
    assert [r["tool_use_id"] for r in results[:2]] == [u["id"] for u in uses]
    assert results[2]["type"] == "text" and "keep going" in results[2]["text"]

    _, body = run_provider("openai", (FIXTURES / "openai_chat/response_turn2_text.sse").read_bytes(), history)
    assert "ignature" not in json.dumps(body)
    calls = body["messages"][2]["tool_calls"]
    tool_msgs = [m for m in body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == [c["id"] for c in calls]


def test_anthropic_history_to_gemini():
    history = history_from("anthropic", FIXTURES / "anthropic/response_turn1_tool_use.sse")
    _, body = run_provider("google", (FIXTURES / "gemini/response_turn2_text.sse").read_bytes(), history)
    contents = body["contents"]
    model_parts = contents[1]["parts"]
    calls = [p["functionCall"] for p in model_parts if "functionCall" in p]
    assert [c["name"] for c in calls] == ["get_weather", "get_time"]
    assert all("id" not in c for c in calls)  # Anthropic ids mean nothing to Gemini
    responses = [p["functionResponse"] for p in contents[2]["parts"] if "functionResponse" in p]
    assert [r["name"] for r in responses] == ["get_weather", "get_time"]  # one user Content, call order


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_model_switch_in_a_session_sends_the_scripted_history_to_anthropic(tmp_path, monkeypatch):
    """``set_model`` (what ``/model`` calls) between runs: the next run speaks Anthropic over real HTTP."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-switch-test-key-123456")
    (tmp_path / "a.txt").write_text("alpha")
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "call.1/x", "name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": "alpha it is"},
    ])
    with WireServer() as server:
        server.reply(200, FIXTURES / "anthropic/response_turn2_text.sse", sse=True)
        runner, _ = make_runner(script, tmp_path, base_url=server.url)
        try:
            assert finished(collect(runner, "read a.txt")).receipt.verdict == "ANSWERED"
            runner.set_model("anthropic:claude-sonnet-4-5")
            done = finished(collect(runner, "and now?"))
        finally:
            runner.close()
    assert done.receipt.verdict == "ANSWERED", done.receipt.detail
    body = server.requests[0].json
    use = next(b for m in body["messages"] if m["role"] == "assistant" for b in m["content"]
               if b["type"] == "tool_use")
    result = next(b for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                  for b in m["content"] if b["type"] == "tool_result")
    assert ANTHROPIC_ID.match(use["id"]) and result["tool_use_id"] == use["id"]
    assert "alpha" in json.dumps(result["content"])
    assert body["messages"][-1]["role"] == "user" and "and now?" in json.dumps(body["messages"][-1])


def test_gemini_text_only_turn_keeps_its_thought_signature():
    import base64

    from amos.providers.base import FinishEvent, TextDeltaEvent

    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hello.", "thoughtSignature":
                                                                      base64.b64encode(b"sig-one").decode()}]},
                             "finishReason": "STOP"}],
             "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}}
    body = f"data: {json.dumps(chunk)}\r\n\r\n".encode()
    question = Message.user("hi")
    events, _ = run_provider("google", body, [question])
    finish = next(e for e in events if isinstance(e, FinishEvent))
    text = "".join(e.text for e in events if isinstance(e, TextDeltaEvent))
    from amos.messages import TextPart

    assistant = Message(role="assistant", kind="turn", parts=(TextPart(text=text),),
                        provider_details=finish.provider_details)
    _, sent = run_provider("google", (FIXTURES / "gemini/response_turn2_text.sse").read_bytes(),
                           [question, assistant, Message.user("and?")])
    part = sent["contents"][1]["parts"][0]
    signature = part["thoughtSignature"]
    assert base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)) == b"sig-one"
