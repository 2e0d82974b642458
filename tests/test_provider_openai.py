"""The OpenAI Chat Completions adapter against recorded wire responses.

Every test drives the real ``openai`` SDK client through ``httpx2.MockTransport``:
the handler records the JSON body the SDK sent and answers with fixture bytes from
``tests/data/providers`` (or SSE composed in the same style from the non-streaming
fixtures, since amos always streams).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from amos.errors import ProviderError
from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
from amos.providers import build_provider
from amos.providers.base import FinishEvent, ModelRequest, TextDeltaEvent, ToolCallEvent
from amos.providers.common import ProviderSettings
from amos.providers.openai import MAX_CALL_ID_CHARS, chat_messages, wire_call_id
from amos.tools.base import ToolSpec

FIXTURES = Path(__file__).parent / "data" / "providers"
CHAT = FIXTURES / "openai_chat"
COMPAT = FIXTURES / "openai_compat"
KEY = "sk-amos-test-9f8e7d6c5b4a39281706"
QUESTION = "What's the weather in Paris and the current time in Tokyo?"
# Fields of the recorded request we deliberately do not send: both are the API's
# defaults ("auto", true), and some models reject parallel_tool_calls outright
# (openai_chat/error_400_parallel_tool_calls_unsupported.json).
DEFAULTED = ("tool_choice", "parallel_tool_calls")


# --------------------------------------------------------------------------- helpers


def sse_lines(*chunks: dict[str, Any]) -> bytes:
    """SSE in the fixtures' style: ``data:`` lines, ``data: [DONE]`` at the end."""
    body = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks)
    return (body + "data: [DONE]\n\n").encode()


def sse_from_completion(path: Path) -> bytes:
    """The stream the server would send for a non-streaming ``chat.completion`` fixture."""
    data = json.loads(path.read_text(encoding="utf-8"))
    choice = data["choices"][0]
    message = choice["message"]
    base = {"id": data["id"], "object": "chat.completion.chunk", "created": data["created"],
            "model": data["model"]}
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if "refusal" in message:
        delta["refusal"] = message["refusal"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(message["tool_calls"])]
    return sse_lines(
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        {**base, "choices": [], "usage": data["usage"]},
    )


class Wire:
    """A mock transport: queued replies served in order, request bodies recorded."""

    def __init__(self, *replies: tuple[int, bytes | Path] | tuple[int, bytes | Path, dict[str, str]],
                 byte_by_byte: bool = False) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[httpx2.Headers] = []
        self.byte_by_byte = byte_by_byte

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        self.headers.append(request.headers)
        status, body, *rest = self.replies.pop(0)
        data = body.read_bytes() if isinstance(body, Path) else body
        kind = "text/event-stream" if status == 200 else "application/json"
        headers = {"content-type": kind, **(rest[0] if rest else {})}
        content = _one_byte_at_a_time(data) if self.byte_by_byte and status == 200 else data
        return httpx2.Response(status, headers=headers, content=content)

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler))


async def _one_byte_at_a_time(data: bytes) -> AsyncIterator[bytes]:
    for i in range(len(data)):
        yield data[i:i + 1]


def provider(wire: Wire, name: str = "openai", *, key: str | None = KEY, retries: int = 0,
             model: str = "gpt-4.1-mini"):
    settings = ProviderSettings(provider_name=name, model=model, api_key=key,
                                base_url="http://127.0.0.1:9/v1", max_retries=retries, timeout_s=5,
                                secrets=(KEY,))
    return build_provider(settings, http_client=wire.client())


def fixture_tools() -> list[ToolSpec]:
    raw = json.loads((CHAT / "request_turn1_stream.json").read_text())["tools"]
    return [ToolSpec(t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
            for t in raw]


def turn1_request(messages: list[Message] | None = None) -> ModelRequest:
    return ModelRequest(system="You are a terminal assistant. Use tools when they help.",
                        messages=messages or [Message.user(QUESTION)], tools=fixture_tools(),
                        max_output_tokens=1024)


def collect(prov, request: ModelRequest | None = None) -> list[Any]:
    async def go() -> list[Any]:
        return [event async for event in prov.stream(request or turn1_request())]

    return asyncio.run(go())


def split(events: list[Any]) -> tuple[str, list[ToolCallPart], FinishEvent]:
    """(joined text, calls, finish); also checks the event order the runner relies on."""
    assert isinstance(events[-1], FinishEvent)
    kinds = [type(e).__name__ for e in events]
    assert kinds == sorted(kinds, key=["TextDeltaEvent", "ToolCallEvent", "FinishEvent"].index)
    text = "".join(e.text for e in events if isinstance(e, TextDeltaEvent))
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    return text, calls, events[-1]


def without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


def raises(prov, request: ModelRequest | None = None) -> tuple[ProviderError, list[Any]]:
    seen: list[Any] = []

    async def go() -> None:
        async for event in prov.stream(request or turn1_request()):
            seen.append(event)

    with pytest.raises(ProviderError) as info:
        asyncio.run(go())
    return info.value, seen


# --------------------------------------------------------------------------- OpenAI turns


def test_text_turn_streams_deltas_and_usage():
    wire = Wire((200, CHAT / "response_turn2_text.sse"))
    events = collect(provider(wire))
    text, calls, finish = split(events)
    assert text == "Paris: 18 °C with light rain. Tokyo: it is 21:04 (JST)."
    assert [e.text for e in events[:-1]] == ["Paris: 18 ", "°C with light", " rain. Tokyo: it is", " 21:04 (JST)."]
    assert calls == []
    assert finish == FinishEvent("stop", Usage(input_tokens=231, output_tokens=21, model_calls=1), detail="stop")


def test_turn1_request_body_matches_the_recorded_request():
    wire = Wire((200, CHAT / "response_turn1_tool_calls.sse"))
    collect(provider(wire))
    expected = json.loads((CHAT / "request_turn1_stream.json").read_text())
    assert wire.bodies[0] == without(expected, *DEFAULTED)
    assert wire.headers[0]["authorization"] == f"Bearer {KEY}"


def test_two_parallel_tool_calls():
    wire = Wire((200, CHAT / "response_turn1_tool_calls.sse"))
    text, calls, finish = split(collect(provider(wire)))
    assert text == ""
    assert [(c.call_id, c.tool_name, c.arguments, c.raw_arguments) for c in calls] == [
        ("call_Qm7fP2xZ0aB1cD3eF4gH5iJ6", "get_weather", {"city": "Paris", "unit": "celsius"}, None),
        ("call_Vn8gR3yA1bC2dE4fG5hI6jK7", "get_time", {"timezone": "Asia/Tokyo"}, None),
    ]
    assert all(c.provider_details is None for c in calls)
    assert finish.finish_reason == "tool_calls"
    assert finish.usage == Usage(input_tokens=148, output_tokens=52, model_calls=1)


def test_follow_up_request_carries_the_results_exactly_as_recorded():
    wire = Wire((200, CHAT / "response_turn1_tool_calls.sse"), (200, CHAT / "response_turn2_text.sse"))
    prov = provider(wire)
    _, calls, _ = split(collect(prov))
    contents = ['{"temp_c":18,"conditions":"light rain"}', '{"iso":"2026-11-05T21:04:00+09:00"}']
    history = [
        Message.user(QUESTION),
        Message(role="assistant", kind="turn", parts=tuple(calls)),
        *(Message.tool_result(ToolResultPart(call_id=c.call_id, tool_name=c.tool_name, content=text))
          for c, text in zip(calls, contents, strict=True)),
    ]
    text, _, finish = split(collect(prov, turn1_request(history)))
    expected = json.loads((CHAT / "request_turn2_stream.json").read_text())
    assert wire.bodies[1] == without(expected, *DEFAULTED)
    assert finish.finish_reason == "stop" and text.startswith("Paris: 18 °C")


def test_no_argument_call_gets_empty_object():
    wire = Wire((200, sse_from_completion(CHAT / "response_tool_call_empty_arguments.json")))
    _, calls, finish = split(collect(provider(wire)))
    assert [(c.call_id, c.tool_name, c.arguments, c.raw_arguments) for c in calls] == [
        ("call_Lx0aB1cD2eF3gH4iJ5kL6mN7", "list_files", {}, None)]
    assert finish.finish_reason == "tool_calls"


def test_invalid_json_arguments_are_kept_raw():
    wire = Wire((200, sse_from_completion(CHAT / "response_tool_call_invalid_json_arguments.json")))
    _, calls, finish = split(collect(provider(wire)))
    assert calls[0].arguments is None
    assert calls[0].raw_arguments == "{'city': 'Paris', 'unit': 'celsius',}"
    assert finish.finish_reason == "tool_calls"


def test_raw_arguments_are_echoed_verbatim():
    call = ToolCallPart(call_id="call_1", tool_name="get_weather", raw_arguments="{'city': 'Paris',}")
    wire_messages = chat_messages("", [Message(role="assistant", parts=(call,)),
                                       Message.tool_result(ToolResultPart(call_id="call_1", tool_name="get_weather",
                                                                          content="bad json", is_error=True))],
                                  "openai")
    assert wire_messages[0]["tool_calls"][0]["function"]["arguments"] == "{'city': 'Paris',}"


def test_truncated_call_finishes_with_length():
    wire = Wire((200, CHAT / "stream_length_truncated_mid_tool_call.sse"))
    _, calls, finish = split(collect(provider(wire)))
    assert [c.tool_name for c in calls] == ["get_weather", "get_time"]
    assert calls[0].arguments == {"city": "Paris", "unit": "celsius"}
    assert (calls[1].arguments, calls[1].raw_arguments) == (None, '{"timez')
    assert finish.finish_reason == "length" and finish.detail == "length"
    assert finish.usage == Usage(input_tokens=148, output_tokens=24, model_calls=1)


def test_refusal_is_surfaced_with_its_text():
    wire = Wire((200, sse_from_completion(CHAT / "response_refusal.json")))
    text, calls, finish = split(collect(provider(wire)))
    assert (text, calls) == ("", [])
    assert finish.finish_reason == "refusal"
    assert finish.refusal == "I'm sorry, I can't help with that."
    assert finish.usage == Usage(input_tokens=60, output_tokens=10, model_calls=1)


def test_refusal_streamed_in_pieces_is_joined():
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    pieces = ["I'm sorry, ", "I can't ", "help with that."]
    body = sse_lines(*({**base, "choices": [{"index": 0, "delta": {"refusal": p}, "finish_reason": None}]}
                       for p in pieces),
                     {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    _, _, finish = split(collect(provider(Wire((200, body)))))
    assert (finish.finish_reason, finish.refusal) == ("refusal", "I'm sorry, I can't help with that.")


def test_content_filter_is_surfaced():
    wire = Wire((200, sse_from_completion(CHAT / "response_content_filter.json")))
    text, calls, finish = split(collect(provider(wire)))
    assert (text, calls, finish.finish_reason, finish.detail) == ("", [], "content_filter", "content_filter")


def test_byte_at_a_time_stream_with_split_utf8():
    wire = Wire((200, CHAT / "stream_tool_args_utf8.sse"), byte_by_byte=True)
    _, calls, finish = split(collect(provider(wire)))
    assert calls[0].arguments == {"city": "München", "unit": "celsius"}
    assert calls[1].arguments == {"timezone": "Asia/Tokyo", "label": "東京"}
    assert finish.finish_reason == "tool_calls"


def test_byte_at_a_time_text():
    wire = Wire((200, CHAT / "response_turn2_text.sse"), byte_by_byte=True)
    text, _, _ = split(collect(provider(wire)))
    assert text == "Paris: 18 °C with light rain. Tokyo: it is 21:04 (JST)."


def test_cached_and_reasoning_tokens():
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body = sse_lines(
        {**base, "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 900, "completion_tokens": 300, "total_tokens": 1200,
                                          "prompt_tokens_details": {"cached_tokens": 512},
                                          "completion_tokens_details": {"reasoning_tokens": 256}}})
    _, _, finish = split(collect(provider(Wire((200, body)))))
    assert finish.usage == Usage(input_tokens=900, output_tokens=300, cached_tokens=512, reasoning_tokens=256,
                                 model_calls=1)


# --------------------------------------------------------------------------- errors


def test_401_is_auth_and_never_shows_the_key():
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "invalid_request_error",
                                 "code": "invalid_api_key"}}).encode()
    error, _ = raises(provider(Wire((401, body)), retries=2))
    assert error.kind == "auth"
    assert KEY not in str(error)
    assert str(error).startswith("openai HTTP 401 auth: Incorrect API key provided")
    assert "\n" not in str(error)


def test_401_fixture():
    wire = Wire((401, CHAT / "error_401_invalid_api_key.json"))
    error, _ = raises(provider(wire, retries=2))
    assert error.kind == "auth" and len(wire.bodies) == 1  # not retried


def test_429_is_retried_by_the_sdk_then_succeeds():
    wire = Wire((429, CHAT / "error_429_rate_limit.json", {"retry-after-ms": "1"}),
                (200, CHAT / "response_turn2_text.sse"))
    text, _, finish = split(collect(provider(wire, retries=1)))
    assert len(wire.bodies) == 2 and wire.bodies[0] == wire.bodies[1]
    assert text.startswith("Paris") and finish.finish_reason == "stop"


def test_429_after_the_retries_is_rate_limit():
    wire = Wire((429, CHAT / "error_429_rate_limit.json", {"retry-after-ms": "1"}),
                (429, CHAT / "error_429_insufficient_quota.json", {"retry-after-ms": "1"}))
    error, _ = raises(provider(wire, retries=1))
    assert error.kind == "rate_limit" and "exceeded your current quota" in str(error)
    assert len(wire.bodies) == 2


@pytest.mark.parametrize(("status", "fixture", "kind"), [
    (400, "error_400_context_length.json", "context_length"),
    (400, "error_400_missing_tool_response.json", "bad_request"),
    (400, "error_400_parallel_tool_calls_unsupported.json", "bad_request"),
    (500, "error_500_server_error.json", "server"),
])
def test_status_errors_map_to_kinds(status, fixture, kind):
    error, _ = raises(provider(Wire((status, CHAT / fixture))))
    assert error.kind == kind
    assert str(error).startswith(f"openai HTTP {status} {kind}: ")


def test_error_after_http_200_mid_stream():
    wire = Wire((200, CHAT / "stream_error_midstream.sse"))
    error, seen = raises(provider(wire, retries=2))
    assert error.kind == "server"
    assert "The server had an error while processing your request." in str(error)
    assert seen == [TextDeltaEvent("Paris: 18")]
    assert len(wire.bodies) == 1


def test_unreadable_stream_data_is_a_provider_error():
    body = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n' \
           b"data: {not json\n\n"
    error, seen = raises(provider(Wire((200, body))))
    assert error.kind == "server" and seen == [TextDeltaEvent("a")]


def test_connection_and_timeout_errors():
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    def slow(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("timed out", request=request)

    for handler, kind in ((refuse, "connection"), (slow, "timeout")):
        settings = ProviderSettings(provider_name="openai-compatible", model="llama3", api_key=KEY,
                                    base_url="http://127.0.0.1:9/v1", max_retries=0, timeout_s=5)
        prov = build_provider(settings, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
        error, _ = raises(prov)
        assert error.kind == kind
        assert str(error).startswith(f"openai-compatible {kind}: ") and "127.0.0.1:9" in str(error)
        assert KEY not in str(error)


def test_consumer_may_stop_early():
    prov = provider(Wire((200, CHAT / "response_turn2_text.sse")))

    async def go() -> str:
        stream = prov.stream(turn1_request())
        first = await stream.__anext__()
        await stream.aclose()
        return first.text

    assert asyncio.run(go()) == "Paris: 18 "


# --------------------------------------------------------------------------- compatible servers


def test_compat_parallel_calls_sharing_index_zero():
    wire = Wire((200, COMPAT / "stream_parallel_calls_same_index.sse"))
    _, calls, finish = split(collect(provider(wire, "openai-compatible", model="qwen3:8b")))
    assert [(c.call_id, c.tool_name, c.arguments) for c in calls] == [
        ("call_4x0c2q1m", "get_weather", {"city": "Paris", "unit": "celsius"}),
        ("call_9s7f3k2d", "get_time", {"timezone": "Asia/Tokyo"}),
    ]
    assert finish.finish_reason == "tool_calls"
    assert finish.usage == Usage(input_tokens=190, output_tokens=41, model_calls=1)


def test_compat_calls_without_ids_at_index_zero_are_split_when_complete():
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    calls_wire = [{"index": 0, "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
                  {"index": 0, "function": {"name": "get_time", "arguments": '{"timezone":"Asia/Tokyo"}'}}]
    body = sse_lines(*({**base, "choices": [{"index": 0, "delta": {"tool_calls": [c]}, "finish_reason": None}]}
                       for c in calls_wire),
                     {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    _, calls, _ = split(collect(provider(Wire((200, body)), "openai-compatible")))
    assert [(c.tool_name, c.arguments) for c in calls] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {"timezone": "Asia/Tokyo"})]
    assert calls[0].call_id != calls[1].call_id


def test_compat_call_without_id_gets_a_stable_generated_id():
    ids = []
    for _ in range(2):
        wire = Wire((200, COMPAT / "stream_tool_call_without_id.sse"))
        _, calls, finish = split(collect(provider(wire, "openai-compatible", key=None, model="gpt-oss:20b")))
        assert [(c.tool_name, c.arguments) for c in calls] == [("get_weather", {"city": "Paris", "unit": "celsius"})]
        ids.append(calls[0].call_id)
        # no usage anywhere in the stream: zeros, one model call
        assert finish.usage == Usage(model_calls=1) and finish.finish_reason == "tool_calls"
    assert ids[0] == ids[1]
    assert re.fullmatch(r"call_[0-9a-f]{12}_0", ids[0])


def test_compat_tool_calls_with_finish_reason_stop_still_run():
    wire = Wire((200, COMPAT / "stream_tool_calls_with_finish_reason_stop.sse"))
    _, calls, finish = split(collect(provider(wire, "openai-compatible")))
    assert [(c.call_id, c.tool_name) for c in calls] == [("call_1", "get_weather")]
    assert (finish.finish_reason, finish.detail) == ("tool_calls", "stop")


def test_compat_usage_on_the_finish_chunk():
    wire = Wire((200, COMPAT / "stream_usage_on_finish_chunk.sse"))
    text, calls, finish = split(collect(provider(wire, "openai-compatible")))
    assert (text, calls, finish.finish_reason) == ("Hi", [], "stop")
    assert finish.usage == Usage(input_tokens=12, output_tokens=2, model_calls=1)


def test_compat_arguments_sent_as_an_object():
    wire = Wire((200, sse_from_completion(COMPAT / "response_arguments_as_object.json")))
    _, calls, _ = split(collect(provider(wire, "openai-compatible")))
    assert (calls[0].call_id, calls[0].arguments, calls[0].raw_arguments) == (
        "call_obj1", {"city": "Paris", "unit": "celsius"}, None)


def test_compat_gemini_thought_signature_is_kept_and_echoed():
    signature = "CiQBc3ludGhldGljIHRob3VnaHQgc2lnbmF0dXJl+/+//g=="
    wire = Wire((200, sse_from_completion(COMPAT / "response_gemini_compat_thought_signature.json")),
                (200, COMPAT / "stream_usage_on_finish_chunk.sse"))
    prov = provider(wire, "openai-compatible", model="gemini-3-flash-preview")
    _, calls, _ = split(collect(prov))
    assert calls[0].provider_details == {
        "openai-compatible": {"extra_content": {"google": {"thought_signature": signature}}}}
    assert calls[1].provider_details is None
    history = [Message.user(QUESTION), Message(role="assistant", kind="turn", parts=tuple(calls)),
               *(Message.tool_result(ToolResultPart(call_id=c.call_id, tool_name=c.tool_name, content="ok"))
                 for c in calls)]
    collect(prov, turn1_request(history))
    echoed = wire.bodies[1]["messages"][2]["tool_calls"]
    assert echoed[0]["extra_content"] == {"google": {"thought_signature": signature}}
    assert "extra_content" not in echoed[1]
    # The same history sent to OpenAI drops what only the compatible server understands.
    openai_wire = chat_messages("", history, "openai")
    assert all("extra_content" not in tc for tc in openai_wire[1]["tool_calls"])


@pytest.mark.parametrize("fixture", ["response_tool_call_in_content_hermes_tags.json",
                                     "response_tool_call_in_content_llama_json.json"])
def test_compat_tool_call_written_as_text_stays_text(fixture):
    # Model output is data (DESIGN.md rule 5): amos does not guess calls out of text;
    # the server's tool parser (vLLM --tool-call-parser, Ollama templates) owns that.
    wire = Wire((200, sse_from_completion(COMPAT / fixture)))
    text, calls, finish = split(collect(provider(wire, "openai-compatible")))
    assert text == json.loads((COMPAT / fixture).read_text())["choices"][0]["message"]["content"]
    assert calls == [] and finish.finish_reason == "stop"


def test_compat_without_key_never_sends_the_openai_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    wire = Wire((200, COMPAT / "stream_usage_on_finish_chunk.sse"))
    collect(provider(wire, "openai-compatible", key=None), ModelRequest(system="", messages=[Message.user("hi")],
                                                                        max_output_tokens=64))
    assert wire.headers[0]["authorization"] == "Bearer not-needed"
    assert wire.bodies[0] == {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "hi"}],
                              "max_tokens": 64, "stream": True, "stream_options": {"include_usage": True}}


# --------------------------------------------------------------------------- history conversion


def _call(call_id: str, name: str = "read_file") -> ToolCallPart:
    return ToolCallPart(call_id=call_id, tool_name=name, arguments={"path": "a.txt"})


def _result(call_id: str, content: str = "text") -> Message:
    return Message.tool_result(ToolResultPart(call_id=call_id, tool_name="read_file", content=content))


def test_results_follow_their_assistant_message_in_call_order():
    history = [
        Message.user("go"),
        Message(role="assistant", kind="turn", parts=(TextPart(text="Reading."), _call("c1"), _call("c2"))),
        _result("c2", "two"),
        Message.user("[amos host] note", kind="feedback"),
        _result("c1", "one"),
    ]
    out = chat_messages("sys", history, "openai")
    assert [(m["role"], m.get("tool_call_id"), m.get("content")) for m in out] == [
        ("system", None, "sys"), ("user", None, "go"), ("assistant", None, "Reading."),
        ("tool", "c1", "one"), ("tool", "c2", "two"), ("user", None, "[amos host] note")]


def test_missing_results_orphans_and_empty_turns_keep_the_history_valid():
    history = [
        Message.user("go"),
        Message(role="assistant", kind="turn", parts=(_call("c1"),)),
        Message(role="assistant", kind="turn", parts=()),
        _result("zz", "orphan"),
    ]
    out = chat_messages("", history, "openai")
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "user"]
    assert out[2]["tool_call_id"] == "c1" and out[2]["content"].startswith("not run")
    assert "orphan" in out[3]["content"] and "zz" in out[3]["content"]


def test_long_foreign_ids_are_shortened_consistently_and_foreign_details_ignored():
    long_id = "toolu_" + "x" * 60
    call = ToolCallPart(call_id=long_id, tool_name="read_file", arguments={"path": "a"},
                        provider_details={"anthropic": {"cache": True}, "google": {"thought_signature": "s"}})
    out = chat_messages("", [Message(role="assistant", parts=(call,)), _result(long_id)], "openai")
    wire_id = out[0]["tool_calls"][0]["id"]
    assert len(wire_id) <= MAX_CALL_ID_CHARS and wire_id == wire_call_id(long_id) == out[1]["tool_call_id"]
    assert set(out[0]["tool_calls"][0]) == {"id", "type", "function"}
    assert out[0]["content"] is None


def test_a_stray_result_never_steals_the_answer_of_a_later_call():
    history = [
        _result("c1", "stray"),
        Message.user("go"),
        Message(role="assistant", kind="turn", parts=(_call("c1"),)),
        _result("c1", "real"),
    ]
    out = chat_messages("", history, "openai-compatible")
    assert [(m["role"], m.get("tool_call_id")) for m in out] == [
        ("user", None), ("user", None), ("assistant", None), ("tool", "c1")]
    assert "stray" in out[0]["content"] and out[3]["content"] == "real"
