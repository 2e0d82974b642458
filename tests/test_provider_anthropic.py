"""The Anthropic adapter against recorded wire responses, through the real SDK client.

Every test drives ``anthropic.AsyncAnthropic`` over ``httpx2.MockTransport``: the
handler records the JSON body the SDK sent and answers with fixture bytes from
``tests/data/providers/anthropic`` (see its README), or with SSE composed in the same
style. Our adapter is never mocked.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import statistics
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from amos.errors import ProviderError
from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
from amos.providers import build_provider
from amos.providers.base import FinishEvent, ModelRequest, TextDeltaEvent, ToolCallEvent
from amos.providers.common import ProviderSettings
from amos.tools.base import ToolSpec

FIXTURES = Path(__file__).parent / "data" / "providers" / "anthropic"
KEY = "sk-ant-api03-FAKE-test-key-7f3a9c21e5"
QUESTION = "What's the weather in Paris and the current time in Tokyo?"
TURN2_TEXT = "Paris: 18 °C with light rain. Tokyo: it is 21:04 (JST)."
WEATHER_RESULT = '{"temp_c":18,"conditions":"light rain"}'
TIME_RESULT = '{"iso":"2026-11-05T21:04:00+09:00"}'


# ---------------------------------------------------------------------------- helpers


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def sse(*events: dict[str, Any]) -> bytes:
    """SSE bytes in the fixtures' style: ``event:`` + ``data:`` lines per event."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def message_start(input_tokens: int = 602, cache_read: int = 0, cache_creation: int = 0) -> dict[str, Any]:
    return {"type": "message_start", "message": {
        "id": "msg_01ComposedForTests000000", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-6", "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": cache_creation,
                  "cache_read_input_tokens": cache_read, "output_tokens": 1}}}


def tool_block(index: int, call_id: str, name: str, *fragments: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index,
         "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}},
        *({"type": "content_block_delta", "index": index,
           "delta": {"type": "input_json_delta", "partial_json": f}} for f in fragments),
        {"type": "content_block_stop", "index": index},
    ]


def text_block(index: int, *pieces: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}
          for p in pieces),
        {"type": "content_block_stop", "index": index},
    ]


def message_end(stop_reason: str, output_tokens: int = 10, **delta: Any) -> list[dict[str, Any]]:
    return [
        {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None, **delta},
         "usage": {"output_tokens": output_tokens}},
        {"type": "message_stop"},
    ]


async def _one_byte_at_a_time(data: bytes) -> AsyncIterator[bytes]:
    for i in range(len(data)):
        yield data[i:i + 1]


class Wire:
    """A MockTransport handler: records each request body, answers from a queue.

    Each queued reply is ``(status, body_bytes, headers, byte_by_byte)`` or an
    exception to raise.
    """

    def __init__(self) -> None:
        self.replies: list[Any] = []
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    def sse(self, body: bytes | str, *, byte_by_byte: bool = False) -> Wire:
        data = (FIXTURES / body).read_bytes() if isinstance(body, str) else body
        self.replies.append((200, data, {"content-type": "text/event-stream"}, byte_by_byte))
        return self

    def error(self, status: int, fixture: str, headers: dict[str, str] | None = None) -> Wire:
        data = (FIXTURES / fixture).read_bytes()
        self.replies.append((status, data, {"content-type": "application/json", **(headers or {})}, False))
        return self

    def raises(self, exc: Exception) -> Wire:
        self.replies.append(exc)
        return self

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        self.headers.append(dict(request.headers))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        status, data, headers, byte_by_byte = reply
        if byte_by_byte:
            return httpx2.Response(status, headers=headers, content=_one_byte_at_a_time(data))
        return httpx2.Response(status, headers=headers, content=data)


def make_provider(wire: Wire, *, max_retries: int = 0, max_tokens: int | None = None):
    settings = ProviderSettings(
        provider_name="anthropic", model="claude-sonnet-4-6", api_key=KEY,
        base_url="http://localhost:1", max_retries=max_retries, timeout_s=5.0,
        max_tokens=max_tokens, secrets=(KEY,))
    return build_provider(settings, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(wire)))


def fixture_tools() -> tuple[ToolSpec, ...]:
    tools = fixture_json("request_turn1_stream.json")["tools"]
    return tuple(ToolSpec(t["name"], t["description"], t["input_schema"]) for t in tools)


def fixture_system() -> str:
    return fixture_json("request_turn1_stream.json")["system"]


def request_for(messages: list[Message], **kwargs: Any) -> ModelRequest:
    return ModelRequest(system=fixture_system(), messages=tuple(messages), tools=fixture_tools(),
                        max_output_tokens=1024, **kwargs)


def run(provider, request: ModelRequest) -> list[Any]:
    async def go() -> list[Any]:
        return [event async for event in provider.stream(request)]

    return asyncio.run(go())


def run_error(provider, request: ModelRequest) -> tuple[ProviderError, list[Any]]:
    seen: list[Any] = []

    async def go() -> None:
        async for event in provider.stream(request):
            seen.append(event)

    with pytest.raises(ProviderError) as info:
        asyncio.run(go())
    return info.value, seen


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDeltaEvent))


def calls_of(events: list[Any]) -> list[ToolCallPart]:
    return [e.call for e in events if isinstance(e, ToolCallEvent)]


def finish_of(events: list[Any]) -> FinishEvent:
    assert isinstance(events[-1], FinishEvent), events[-1]
    assert sum(isinstance(e, FinishEvent) for e in events) == 1
    return events[-1]


def turn1_history(calls: list[ToolCallPart], results: list[ToolResultPart]) -> list[Message]:
    """The neutral history the runner keeps after turn 1 and its tool results."""
    return [
        Message.user(QUESTION),
        Message(role="assistant", kind="turn", parts=(TextPart(text="I'll check both for you."), *calls)),
        *(Message.tool_result(r) for r in results),
    ]


def simple_request(text: str = "hi") -> ModelRequest:
    return ModelRequest(system="sys", messages=(Message.user(text),))


# ---------------------------------------------------------------------------- turns


def test_two_parallel_tool_calls_and_the_turn1_request_body():
    wire = Wire().sse("response_turn1_tool_use.sse")
    provider = make_provider(wire)
    assert (provider.provider_name, provider.model_name) == ("anthropic", "claude-sonnet-4-6")

    events = run(provider, request_for([Message.user(QUESTION)]))

    assert wire.bodies[0] == fixture_json("request_turn1_stream.json")
    assert text_of(events) == "I'll check both for you."
    calls = calls_of(events)
    assert [(c.call_id, c.tool_name, c.arguments, c.raw_arguments) for c in calls] == [
        ("toolu_01A09q90qw90lq917835lq9W", "get_weather", {"city": "Paris", "unit": "celsius"}, None),
        ("toolu_01B2c3D4e5F6g7H8i9J0k1LT", "get_time", {"timezone": "Asia/Tokyo"}, None),
    ]
    assert all(c.provider_details is None for c in calls)
    finish = finish_of(events)
    assert finish.finish_reason == "tool_calls"
    # output_tokens is cumulative: the message_delta's 113 replaces message_start's 1.
    assert finish.usage == Usage(input_tokens=602, output_tokens=113, model_calls=1)


def test_text_turn():
    wire = Wire().sse("response_turn2_text.sse")
    events = run(make_provider(wire), simple_request())
    assert text_of(events) == TURN2_TEXT
    assert calls_of(events) == []
    finish = finish_of(events)
    assert (finish.finish_reason, finish.detail, finish.refusal) == ("stop", None, None)
    assert finish.usage == Usage(input_tokens=781, output_tokens=27, model_calls=1)


@pytest.mark.parametrize("fixture", ["response_turn2_text.sse", "response_turn1_tool_use.sse"])
def test_stream_fed_one_byte_at_a_time(fixture):
    whole = run(make_provider(Wire().sse(fixture)), simple_request())
    bytewise = run(make_provider(Wire().sse(fixture, byte_by_byte=True)), simple_request())
    assert text_of(bytewise) == text_of(whole)
    assert calls_of(bytewise) == calls_of(whole)
    assert finish_of(bytewise) == finish_of(whole)
    if fixture == "response_turn2_text.sse":
        assert "18 °C" in text_of(bytewise)  # the 2-byte ° was split across reads


def test_turn2_request_echoes_the_calls_and_sends_all_results_in_one_user_message():
    calls = calls_of(run(make_provider(Wire().sse("response_turn1_tool_use.sse")), request_for([Message.user(QUESTION)])))
    results = [
        ToolResultPart(call_id=calls[0].call_id, tool_name="get_weather", content=WEATHER_RESULT),
        ToolResultPart(call_id=calls[1].call_id, tool_name="get_time", content=TIME_RESULT),
    ]
    wire = Wire().sse("response_turn2_text.sse")
    events = run(make_provider(wire), request_for(turn1_history(calls, results)))

    expected = fixture_json("request_turn2_stream.json")
    # The one legitimate difference: the fixture sends the 2nd result's content as a
    # list of one text block, the 1st as a plain string (both are valid wire forms).
    # A neutral ToolResultPart holds a string, so amos sends the string form for both.
    second = expected["messages"][2]["content"][1]
    assert second["content"] == [{"type": "text", "text": TIME_RESULT}]
    second["content"] = TIME_RESULT
    assert wire.bodies[0] == expected
    assert text_of(events) == TURN2_TEXT


def test_failed_tool_result_is_sent_with_is_error():
    calls = calls_of(run(make_provider(Wire().sse("response_turn1_tool_use.sse")), simple_request()))
    results = [
        ToolResultPart(call_id=calls[0].call_id, tool_name="get_weather", content=WEATHER_RESULT),
        ToolResultPart(call_id=calls[1].call_id, tool_name="get_time", content="Error: unknown timezone",
                       is_error=True, status="failed"),
    ]
    wire = Wire().sse("response_turn2_text.sse")
    run(make_provider(wire), request_for(turn1_history(calls, results)))
    expected = fixture_json("request_turn2_tool_error.json")
    expected["stream"] = True  # the fixture is the non-streaming body; otherwise identical
    assert wire.bodies[0] == expected


def test_no_argument_call_gets_an_empty_object():
    events = run(make_provider(Wire().sse("stream_noarg_tool_use.sse")), simple_request())
    [call] = calls_of(events)
    assert (call.call_id, call.tool_name, call.arguments, call.raw_arguments) == (
        "toolu_01NoArgsListFiles000000", "list_files", {}, None)
    assert finish_of(events).finish_reason == "tool_calls"


def test_turn_cut_off_mid_tool_use_finishes_length_so_the_call_never_runs():
    events = run(make_provider(Wire().sse("stream_max_tokens_mid_tool_use.sse")), simple_request())
    assert text_of(events) == "I'll check both for you."
    [call] = calls_of(events)
    # The SDK's own accumulated message would say input={}; the fragments say otherwise.
    assert call.tool_name == "get_weather"
    assert call.arguments is None and call.raw_arguments == '{"city": "Par'
    finish = finish_of(events)
    assert finish.finish_reason == "length"
    assert "max_tokens" in finish.detail
    assert finish.usage.output_tokens == 24


def test_tool_use_block_never_stopped_is_still_reported_before_a_length_finish():
    body = sse(message_start(), tool_block(0, "toolu_cut", "read_file", "", '{"pa')[0],
               {"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"pa'}},
               *message_end("max_tokens"))
    events = run(make_provider(Wire().sse(body)), simple_request())
    [call] = calls_of(events)
    assert (call.call_id, call.arguments, call.raw_arguments) == ("toolu_cut", None, '{"pa')
    assert finish_of(events).finish_reason == "length"


def test_invalid_json_arguments_do_not_crash_and_keep_the_raw_text():
    body = sse(message_start(), *tool_block(0, "toolu_bad", "read_file", "", '{"path": ', '"a.txt"', ",,}"),
               *tool_block(1, "toolu_ok", "list_dir", '{"path": "."}'), *message_end("tool_use"))
    events = run(make_provider(Wire().sse(body)), simple_request())
    bad, ok = calls_of(events)
    assert (bad.arguments, bad.raw_arguments) == (None, '{"path": "a.txt",,}')
    assert (ok.arguments, ok.raw_arguments) == ({"path": "."}, None)
    assert finish_of(events).finish_reason == "tool_calls"

    # Echoed back, the unusable call carries input {}; its result says what was wrong.
    results = [ToolResultPart(call_id="toolu_bad", tool_name="read_file", content="invalid JSON", is_error=True,
                              status="failed"),
               ToolResultPart(call_id="toolu_ok", tool_name="list_dir", content="a.txt")]
    history = [Message.user("go"), Message(role="assistant", kind="turn", parts=(bad, ok)),
               *(Message.tool_result(r) for r in results)]
    wire = Wire().sse("response_turn2_text.sse")
    run(make_provider(wire), ModelRequest(system="s", messages=tuple(history)))
    uses = wire.bodies[0]["messages"][1]["content"]
    assert [(u["id"], u["input"]) for u in uses] == [("toolu_bad", {}), ("toolu_ok", {"path": "."})]


def test_refusal_finishes_refusal():
    events = run(make_provider(Wire().sse("stream_refusal.sse")), simple_request())
    assert text_of(events) == "Sure, here is"
    finish = finish_of(events)
    assert finish.finish_reason == "refusal"
    assert finish.refusal is None  # stop_details.explanation is null in the fixture
    assert finish.detail == "refusal"


def test_refusal_explanation_becomes_the_refusal_text():
    body = sse(message_start(), *text_block(0, "I can"), *message_end(
        "refusal", stop_details={"type": "refusal", "category": "cyber", "explanation": "Exploit development."}))
    finish = finish_of(run(make_provider(Wire().sse(body)), simple_request()))
    assert (finish.finish_reason, finish.refusal, finish.detail) == (
        "refusal", "Exploit development.", "refusal (category cyber)")


@pytest.mark.parametrize(("stop_reason", "reason", "detail_word"), [
    ("end_turn", "stop", None),
    ("stop_sequence", "stop", "stop_sequence"),
    ("pause_turn", "stop", "pause_turn"),
    ("model_context_window_exceeded", "length", "model_context_window_exceeded"),
    ("max_tokens", "length", "max_tokens"),
    ("some_future_reason", "stop", "some_future_reason"),
])
def test_stop_reasons(stop_reason, reason, detail_word):
    body = sse(message_start(), *text_block(0, "ok"), *message_end(stop_reason))
    finish = finish_of(run(make_provider(Wire().sse(body)), simple_request()))
    assert finish.finish_reason == reason
    if detail_word is None:
        assert finish.detail is None
    else:
        assert detail_word in finish.detail


def test_usage_counts_the_whole_prompt_and_takes_the_last_cumulative_output_count():
    body = sse(message_start(input_tokens=10, cache_read=100, cache_creation=50), *text_block(0, "a"),
               {"type": "message_delta", "delta": {"stop_reason": None}, "usage": {"output_tokens": 7}},
               *message_end("end_turn", output_tokens=12))
    finish = finish_of(run(make_provider(Wire().sse(body)), simple_request()))
    assert finish.usage == Usage(input_tokens=160, output_tokens=12, cached_tokens=100, model_calls=1)


def test_stream_without_a_stop_reason_is_a_provider_error():
    body = sse(message_start(), *text_block(0, "half"))
    err, seen = run_error(make_provider(Wire().sse(body)), simple_request())
    assert err.kind == "connection"
    assert text_of(seen) == "half"


def test_thinking_blocks_ride_on_the_first_call_and_are_echoed_from_the_anthropic_key_only():
    body = sse(
        message_start(),
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Need "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "a file."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2ln"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "redacted_thinking", "data": "ZW5j"}},
        {"type": "content_block_stop", "index": 1},
        *tool_block(2, "toolu_1", "read_file", '{"path": "a"}'),
        *tool_block(3, "toolu_2", "read_file", '{"path": "b"}'),
        *message_end("tool_use"))
    events = run(make_provider(Wire().sse(body)), simple_request())
    assert text_of(events) == ""  # thinking is never shown as answer text
    first, second = calls_of(events)
    thinking = [{"type": "thinking", "thinking": "Need a file.", "signature": "c2ln"},
                {"type": "redacted_thinking", "data": "ZW5j"}]
    assert first.provider_details == {"anthropic": {"thinking": thinking}}
    assert second.provider_details is None

    foreign = ToolCallPart(call_id="gc_1", tool_name="read_file", arguments={"path": "c"},
                           provider_details={"google": {"thought_signature": "xyz"}})
    history = [Message.user("go"), Message(role="assistant", kind="turn", parts=(TextPart(text="Reading."),
                                                                                 first, second)),
               *(Message.tool_result(ToolResultPart(call_id=c.call_id, tool_name="read_file", content="x"))
                 for c in (first, second)),
               Message(role="assistant", kind="turn", parts=(foreign,)),
               Message.tool_result(ToolResultPart(call_id="gc_1", tool_name="read_file", content="y"))]
    wire = Wire().sse("response_turn2_text.sse")
    run(make_provider(wire), ModelRequest(system="s", messages=tuple(history)))
    messages = wire.bodies[0]["messages"]
    assert [b["type"] for b in messages[1]["content"]] == [
        "thinking", "redacted_thinking", "text", "tool_use", "tool_use"]
    assert messages[1]["content"][:2] == thinking
    assert messages[3]["content"] == [{"type": "tool_use", "id": "gc_1", "name": "read_file",
                                       "input": {"path": "c"}}]


# ---------------------------------------------------------------------------- history shape


def _wire_messages_for(history: list[Message]) -> list[dict[str, Any]]:
    wire = Wire().sse("response_turn2_text.sse")
    run(make_provider(wire), ModelRequest(system="s", messages=tuple(history)))
    return wire.bodies[0]["messages"]


def test_results_feedback_and_prompt_merge_into_one_user_message_results_first_in_call_order():
    calls = (ToolCallPart(call_id="toolu_a", tool_name="t", arguments={}),
             ToolCallPart(call_id="toolu_b", tool_name="t", arguments={}))
    history = [
        Message.user("start"),
        Message(role="assistant", kind="turn", parts=(TextPart(text=""), *calls)),
        Message.tool_result(ToolResultPart(call_id="toolu_b", tool_name="t", content="B")),
        Message.tool_result(ToolResultPart(call_id="toolu_a", tool_name="t", content="A")),
        Message.user("check failed: tests red", kind="feedback"),
        Message.user("please go on"),
    ]
    messages = _wire_messages_for(history)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [{"type": "tool_use", "id": "toolu_a", "name": "t", "input": {}},
                                      {"type": "tool_use", "id": "toolu_b", "name": "t", "input": {}}]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A"},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "B"},
        {"type": "text", "text": "check failed: tests red"},
        {"type": "text", "text": "please go on"},
    ]


def test_ids_from_other_providers_and_runner_renames_map_to_valid_ids_consistently():
    ids = ["toolu_01A~2", "fc.call:1/x", "call_abc"]
    calls = tuple(ToolCallPart(call_id=i, tool_name="t", arguments={"n": n}) for n, i in enumerate(ids))
    history = [Message.user("go"), Message(role="assistant", kind="turn", parts=calls),
               *(Message.tool_result(ToolResultPart(call_id=i, tool_name="t", content=i)) for i in ids)]
    first = _wire_messages_for(history)
    again = _wire_messages_for(history)
    assert first == again  # deterministic
    use_ids = [b["id"] for b in first[1]["content"]]
    result_ids = [b["tool_use_id"] for b in first[2]["content"]]
    assert use_ids == result_ids
    assert use_ids[2] == "call_abc"  # valid ids pass unchanged
    assert len(set(use_ids)) == 3
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", i) for i in use_ids)
    assert use_ids[0].startswith("toolu_01A_2_")


def test_empty_messages_are_dropped_and_roles_alternate():
    history = [
        Message.user("one"),
        Message(role="assistant", kind="turn", parts=(TextPart(text="  "),)),
        Message.user("two"),
        Message(role="assistant", kind="turn", parts=(TextPart(text="answer"),)),
        Message(role="assistant", kind="turn", parts=(TextPart(text="more"),)),
        Message.user("three"),
    ]
    messages = _wire_messages_for(history)
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}, {"type": "text", "text": "more"}]},
        {"role": "user", "content": "three"},
    ]


def test_unpaired_calls_and_results_are_repaired():
    history = [
        Message.user("go"),
        Message(role="assistant", kind="turn", parts=(ToolCallPart(call_id="toolu_x", tool_name="t", arguments={}),)),
        Message.tool_result(ToolResultPart(call_id="toolu_orphan", tool_name="t", content="old")),
        Message.user("next"),
    ]
    messages = _wire_messages_for(history)
    content = messages[2]["content"]
    assert content[0]["tool_use_id"] == "toolu_x" and content[0]["is_error"] is True
    assert content[1] == {"type": "text", "text": "[result of tool call toolu_orphan]\nold"}
    assert content[2] == {"type": "text", "text": "next"}


def test_max_tokens_defaults():
    wire = Wire().sse("response_turn2_text.sse").sse("response_turn2_text.sse")
    run(make_provider(wire), simple_request())
    run(make_provider(wire, max_tokens=333), simple_request())
    assert [b["max_tokens"] for b in wire.bodies] == [8192, 333]
    assert "tools" not in wire.bodies[0] and "tool_choice" not in wire.bodies[0]


# ---------------------------------------------------------------------------- errors


def test_401_is_auth_and_never_shows_the_key():
    wire = Wire().error(401, "error_401_authentication.json")
    err, _ = run_error(make_provider(wire, max_retries=2), simple_request())
    assert err.kind == "auth"
    assert "invalid x-api-key" in str(err) and "401" in str(err)
    assert KEY not in str(err) and KEY[:12] not in str(err)
    assert len(wire.bodies) == 1  # not retried


@pytest.mark.parametrize(("status", "fixture"), [
    (429, "error_429_rate_limit.json"), (529, "error_529_overloaded.json"), (500, "error_500_api_error.json")])
def test_the_sdk_retries_then_succeeds(status, fixture):
    wire = Wire().error(status, fixture, {"retry-after-ms": "1"}).sse("response_turn2_text.sse")
    events = run(make_provider(wire, max_retries=1), simple_request())
    assert text_of(events) == TURN2_TEXT
    assert len(wire.bodies) == 2
    assert wire.headers[1]["x-stainless-retry-count"] == "1"


@pytest.mark.parametrize(("status", "fixture", "kind"), [
    (429, "error_429_rate_limit.json", "rate_limit"),
    (529, "error_529_overloaded.json", "overloaded"),
    (500, "error_500_api_error.json", "server"),
    (400, "error_400_prompt_too_long.json", "context_length"),
    (400, "error_400_tool_result_missing.json", "bad_request"),
])
def test_http_errors_map_to_kinds(status, fixture, kind):
    wire = Wire().error(status, fixture, {"retry-after-ms": "1"})
    err, _ = run_error(make_provider(wire, max_retries=0), simple_request())
    assert err.kind == kind
    assert f"HTTP {status}" in str(err)
    assert fixture_json(fixture)["error"]["message"][:40] in str(err)


def test_overloaded_error_event_inside_a_200_stream():
    err, seen = run_error(make_provider(Wire().sse("stream_overloaded_error.sse")), simple_request())
    assert err.kind == "overloaded"
    assert "Overloaded" in str(err) and "HTTP 200" not in str(err)
    assert text_of(seen) == "I'll check"
    assert not any(isinstance(e, FinishEvent) for e in seen)


def test_api_error_event_inside_a_stream_is_a_server_error():
    body = sse(message_start()) + b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"Internal"}}\n\n'
    err, _ = run_error(make_provider(Wire().sse(body)), simple_request())
    assert err.kind == "server"


@pytest.mark.parametrize(("exc", "kind"), [
    (httpx2.ReadTimeout("slow"), "timeout"),
    (httpx2.ConnectError("refused"), "connection"),
])
def test_transport_failures(exc, kind):
    err, _ = run_error(make_provider(Wire().raises(exc)), simple_request())
    assert err.kind == kind


def test_connection_dropped_mid_stream():
    async def broken() -> AsyncIterator[bytes]:
        yield sse(message_start(), text_block(0, "x")[0])
        raise httpx2.RemoteProtocolError("peer closed connection")

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=broken())

    settings = ProviderSettings(provider_name="anthropic", model="m", api_key=KEY, base_url="http://localhost:1",
                                max_retries=0, secrets=(KEY,))
    provider = build_provider(settings, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
    err, _ = run_error(provider, simple_request())
    assert err.kind == "connection"


# ---------------------------------------------------------------------------- speed


def _timed(feed: Callable[[Any], Any], events: list[Any]) -> float:
    start = time.perf_counter_ns()
    for event in events:
        feed(event)
    return (time.perf_counter_ns() - start) / len(events) / 1000


def test_per_delta_handling_is_cheap():
    """amos's own work per streamed delta (SDK parsing excluded): median < 20 µs."""
    from anthropic.types import RawContentBlockDeltaEvent, RawContentBlockStartEvent

    from amos.providers.anthropic import _TurnState

    text = RawContentBlockDeltaEvent.model_validate(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "word "}})
    args = RawContentBlockDeltaEvent.model_validate(
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '"ab'}})
    start = RawContentBlockStartEvent.model_validate(
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}})
    samples = []
    for _ in range(50):
        state = _TurnState()
        state.feed(start)
        samples.append(_timed(state.feed, [text] * 200))
        samples.append(_timed(state.feed, [args] * 200))
    assert statistics.median(samples) < 20, samples


def test_request_is_not_mutated_by_conversion():
    calls = (ToolCallPart(call_id="toolu_a", tool_name="t", arguments={"k": [1]}),)
    history = [Message.user("go"), Message(role="assistant", kind="turn", parts=calls)]
    before = copy.deepcopy([m.model_dump() for m in history])
    messages = _wire_messages_for(history)
    assert messages[-1]["content"][0]["is_error"] is True  # a call with no result gets an error result
    assert [m.model_dump() for m in history] == before


def test_connection_error_names_the_transport_cause():
    err, _ = run_error(make_provider(Wire().raises(httpx2.ConnectError("connection refused"))), simple_request())
    assert err.kind == "connection"
    assert "connection refused" in str(err)
