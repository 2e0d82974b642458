"""The Gemini adapter against recorded wire responses, through the real google-genai client.

Every test drives ``google.genai`` itself over an ``httpx2.MockTransport`` that records
the JSON body the SDK sends and answers with fixture bytes (tests/data/providers/README.md).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from amos.errors import ProviderError
from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart
from amos.providers import build_provider
from amos.providers.base import FinishEvent, ModelRequest, TextDeltaEvent, ToolCallEvent
from amos.providers.common import ProviderSettings
from amos.providers.google import StreamState, build, to_contents
from amos.tools.base import ToolSpec

GEMINI = Path(__file__).parent / "data" / "providers" / "gemini"
KEY = "AIzaSy-test-key-0123456789abcdef"
SIGNATURE = base64.b64decode("CiQBc3ludGhldGljIHRob3VnaHQgc2lnbmF0dXJl+/+//g==")
WEATHER = {"temp_c": 18, "conditions": "light rain"}
TIME = {"iso": "2026-11-05T21:04:00+09:00"}


def fixture(name: str) -> Any:
    return json.loads((GEMINI / name).read_text(encoding="utf-8"))


def sse(*chunks: dict) -> bytes:
    """A Gemini SSE body (``data:`` lines, CRLF) holding ``chunks``."""
    return b"".join(b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\r\n\r\n" for c in chunks)


def body_of(name: str) -> bytes:
    """Fixture bytes to stream: an ``.sse`` file as is, a ``.json`` response as one event."""
    path = GEMINI / name
    return path.read_bytes() if name.endswith(".sse") else sse(fixture(name))


class Wire:
    """A mock transport: records request bodies, answers with queued replies."""

    def __init__(self, *replies: tuple[int, bytes] | Callable[[], httpx2.Response], byte_by_byte: bool = False):
        self.replies = list(replies)
        self.requests: list[httpx2.Request] = []
        self.byte_by_byte = byte_by_byte

    @property
    def bodies(self) -> list[dict]:
        return [json.loads(r.content) for r in self.requests]

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        status, data = self.replies.pop(0)
        if status != 200:
            return httpx2.Response(status, content=data, headers={"content-type": "application/json"})
        if self.byte_by_byte:
            return httpx2.Response(200, content=_bytewise(data), headers={"content-type": "text/event-stream"})
        return httpx2.Response(200, content=data, headers={"content-type": "text/event-stream"})

    def provider(self, model: str = "gemini-2.5-flash", *, max_retries: int = 2, **settings: Any):
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler))
        return build(ProviderSettings("google", model, api_key=KEY, max_retries=max_retries,
                                      secrets=(KEY,), **settings),
                     http_client=client, retry_initial_delay_s=0.001)


async def _bytewise(data: bytes) -> AsyncIterator[bytes]:
    for i in range(len(data)):
        yield data[i:i + 1]


def turn1_request(messages: tuple[Message, ...] | None = None, max_output_tokens: int | None = 1024) -> ModelRequest:
    """The fixtures' scenario as a neutral request."""
    req = fixture("request_turn1.json")
    tools = tuple(ToolSpec(d["name"], d["description"], d["parameters_json_schema"])
                  for d in req["tools"][0]["functionDeclarations"])
    prompt = Message.user(req["contents"][0]["parts"][0]["text"])
    return ModelRequest(system=req["systemInstruction"]["parts"][0]["text"],
                        messages=messages or (prompt,), tools=tools, max_output_tokens=max_output_tokens)


def run(provider, request: ModelRequest) -> list:
    async def go():
        return [event async for event in provider.stream(request)]

    return asyncio.run(go())


def fails(provider, request: ModelRequest) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        run(provider, request)
    return info.value


def calls_of(events: list) -> list[ToolCallPart]:
    return [e.call for e in events if isinstance(e, ToolCallEvent)]


def text_of(events: list) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDeltaEvent))


def history_after_calls(calls: list[ToolCallPart]) -> tuple[Message, ...]:
    """Prompt, the assistant turn as the runner stores it, one tool message per call."""
    prompt = turn1_request().messages[0]
    results = (json.dumps(WEATHER), json.dumps(TIME))
    return (prompt, Message(role="assistant", kind="turn", parts=tuple(calls)),
            *(Message.tool_result(ToolResultPart(call_id=c.call_id, tool_name=c.tool_name, content=r))
              for c, r in zip(calls, results, strict=True)))


def expected_turn2(name: str) -> dict:
    """A turn-2 request fixture with amos's response shape: ``{"output": text}``."""
    expected = fixture(name)
    for part in expected["contents"][2]["parts"]:
        response = part["functionResponse"]
        response["response"] = {"output": json.dumps(response["response"]["result"])}
    return expected


def decoded_signatures(body: dict) -> dict:
    """``body`` with each thoughtSignature replaced by its decoded bytes (the SDK re-encodes
    it as URL-safe base64)."""
    body = copy.deepcopy(body)
    for content in body["contents"]:
        for part in content["parts"]:
            if "thoughtSignature" in part:
                part["thoughtSignature"] = base64.urlsafe_b64decode(
                    part["thoughtSignature"].replace("+", "-").replace("/", "_"))
    return body


# ------------------------------------------------------------------------- turns


def test_build_provider_selects_this_adapter():
    provider = build_provider(ProviderSettings("google", "gemini-2.5-flash", api_key=KEY),
                              http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: None)))
    assert provider.provider_name == "google" and provider.model_name == "gemini-2.5-flash"


def test_turn1_request_body_equals_the_fixture_and_calls_get_stable_generated_ids():
    wire = Wire((200, body_of("response_turn1_function_calls.sse")),
                (200, body_of("response_turn1_function_calls.sse")))
    provider = wire.provider()
    first = run(provider, turn1_request())
    second = run(provider, turn1_request())
    assert wire.bodies[0] == fixture("request_turn1.json")
    assert "streamGenerateContent" in str(wire.requests[0].url) and "alt=sse" in str(wire.requests[0].url)
    assert wire.requests[0].headers["x-goog-api-key"] == KEY
    calls = calls_of(first)
    assert [(c.tool_name, c.arguments) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}), ("get_time", {"timezone": "Asia/Tokyo"})]
    assert [c.call_id for c in calls] == [c.call_id for c in calls_of(second)]  # stable per turn
    assert len({c.call_id for c in calls}) == 2
    google = [c.provider_details["google"] for c in calls]
    assert all(d["id_generated"] for d in google)
    assert base64.b64decode(google[0]["thought_signature"]) == SIGNATURE
    assert "thought_signature" not in google[1]
    finish = first[-1]
    assert isinstance(finish, FinishEvent) and finish.finish_reason == "tool_calls"
    usage = finish.usage
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens, usage.model_calls) == (97, 34 + 88, 88, 1)


def test_turn2_request_echoes_the_model_content_and_all_results_in_one_user_content():
    wire = Wire((200, body_of("response_turn1_function_calls.sse")), (200, body_of("response_turn2_text.sse")))
    provider = wire.provider()
    calls = calls_of(run(provider, turn1_request()))
    events = run(provider, turn1_request(history_after_calls(calls)))
    sent = wire.bodies[1]
    assert decoded_signatures(sent) == decoded_signatures(expected_turn2("request_turn2.json"))
    assert "id" not in json.dumps(sent["contents"][1:])  # generated ids never go back to Gemini
    assert text_of(events) == "Paris: 18 °C with light rain. Tokyo: it is 21:04 (JST)."
    assert events[-1].finish_reason == "stop" and events[-1].usage.input_tokens == 171


def test_gemini3_ids_are_kept_and_echoed_in_function_responses():
    wire = Wire((200, body_of("response_turn1_function_calls_with_ids.json")),
                (200, body_of("response_turn2_text.json")))
    provider = wire.provider("gemini-3-flash-preview")
    calls = calls_of(run(provider, turn1_request()))
    assert [c.call_id for c in calls] == ["h5v2k8qx", "p9d3m1zw"]
    assert "id_generated" not in calls[0].provider_details["google"]
    events = run(provider, turn1_request(history_after_calls(calls)))
    assert decoded_signatures(wire.bodies[1]) == decoded_signatures(expected_turn2("request_turn2_with_ids.json"))
    assert text_of(events).startswith("Paris: 18 °C")


def test_a_call_renamed_by_the_runner_still_echoes_gemini_s_id():
    wire = Wire((200, body_of("response_turn2_text.json")))
    call = ToolCallPart(call_id="h5v2k8qx~2", tool_name="get_time", arguments={},
                        provider_details={"google": {"id": "h5v2k8qx"}})
    result = ToolResultPart(call_id="h5v2k8qx~2", tool_name="get_time", content="boom", is_error=True,
                            status="failed")
    history = (Message.user("hi"), Message(role="assistant", parts=(call,)), Message.tool_result(result))
    run(wire.provider(), turn1_request(history))
    model, answer = wire.bodies[0]["contents"][1:]
    assert model["parts"][0]["functionCall"]["id"] == "h5v2k8qx"
    assert answer["parts"] == [{"functionResponse": {"id": "h5v2k8qx", "name": "get_time",
                                                     "response": {"error": "boom"}}}]


def test_byte_at_a_time_stream_keeps_the_split_utf8_degree_sign():
    wire = Wire((200, body_of("response_turn2_text.sse")), byte_by_byte=True)
    events = run(wire.provider(), turn1_request())
    assert text_of(events) == "Paris: 18 °C with light rain. Tokyo: it is 21:04 (JST)."
    assert [e.text for e in events if isinstance(e, TextDeltaEvent)][1] == "°C with light"
    assert events[-1].usage.output_tokens == 22


def test_byte_at_a_time_function_calls():
    wire = Wire((200, body_of("response_turn1_function_calls.sse")), byte_by_byte=True)
    calls = calls_of(run(wire.provider(), turn1_request()))
    assert [c.tool_name for c in calls] == ["get_weather", "get_time"]
    assert base64.b64decode(calls[0].provider_details["google"]["thought_signature"]) == SIGNATURE


def test_no_argument_call_has_empty_arguments():
    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "list_dir"}}]},
                             "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3}}
    events = run(Wire((200, sse(chunk))).provider(), turn1_request())
    [call] = calls_of(events)
    assert call.tool_name == "list_dir" and call.arguments == {} and call.raw_arguments is None
    assert events[-1].finish_reason == "tool_calls"


# ---------------------------------------------------------------------- endings


def test_max_tokens_without_parts_is_length():
    events = run(Wire((200, body_of("response_max_tokens_no_parts.json"))).provider(), turn1_request())
    assert events == [events[-1]]
    assert events[-1].finish_reason == "length" and events[-1].usage.output_tokens == 1024


def test_safety_block_is_content_filter_with_refusal_text():
    finish = run(Wire((200, body_of("response_safety_blocked.json"))).provider(), turn1_request())[-1]
    assert finish.finish_reason == "content_filter" and "SAFETY" in finish.refusal and finish.detail == "SAFETY"


def test_blocked_prompt_without_candidates_is_content_filter_naming_the_reason():
    events = run(Wire((200, body_of("response_prompt_blocked.json"))).provider(), turn1_request())
    assert len(events) == 1
    finish = events[0]
    assert finish.finish_reason == "content_filter" and "PROHIBITED_CONTENT" in finish.refusal
    assert finish.usage.input_tokens == 40


def test_malformed_function_call_is_error_with_detail():
    finish = run(Wire((200, body_of("response_malformed_function_call.json"))).provider(), turn1_request())[-1]
    assert finish.finish_reason == "error"
    # google-genai 3.6.1 drops finishMessage ("Malformed function call: print(...)") while
    # parsing the Gemini API response, so the detail explains the reason itself
    assert finish.detail.startswith("MALFORMED_FUNCTION_CALL: ") and "function call" in finish.detail


def test_stream_that_ends_without_a_finish_reason_is_an_error():
    text_only = {"candidates": [{"content": {"role": "model", "parts": [{"text": "half"}]}, "index": 0}]}
    finish = run(Wire((200, sse(text_only))).provider(), turn1_request())[-1]
    assert finish.finish_reason == "error" and "finish reason" in finish.detail


# ------------------------------------------------------------------------ errors


@pytest.mark.parametrize(("name", "status", "kind"), [
    ("error_400_api_key_invalid.json", 400, "auth"),
    ("error_403_permission_denied.json", 403, "auth"),
    ("error_500_internal.json", 500, "server"),
    ("error_503_overloaded.json", 503, "overloaded"),
    ("error_429_resource_exhausted.json", 429, "rate_limit"),
    ("error_400_missing_thought_signature.json", 400, "bad_request"),
])
def test_http_errors_map_to_kinds_without_the_key(name, status, kind):
    body = json.loads((GEMINI / name).read_text())
    body["error"]["message"] = f"key={KEY}: " + body["error"]["message"]  # even if echoed, never shown
    wire = Wire(*[(status, json.dumps(body).encode())] * 3)
    error = fails(wire.provider(), turn1_request())
    assert error.kind == kind and f"HTTP {status}" in str(error)
    assert KEY not in str(error) and "****" in str(error)
    retried = status in (429, 500, 503)
    assert len(wire.requests) == (3 if retried else 1)  # max_retries=2: the SDK retried, amos did not


def test_401_is_auth():
    wire = Wire((401, b'{"error": {"code": 401, "message": "Request had invalid authentication credentials.",'
                      b' "status": "UNAUTHENTICATED"}}'))
    assert fails(wire.provider(), turn1_request()).kind == "auth"


def test_429_then_success_is_retried_by_the_sdk():
    wire = Wire((429, body_of("error_429_resource_exhausted.json")[6:-4]),
                (200, body_of("response_turn2_text.sse")))
    start = time.monotonic()
    events = run(wire.provider(max_retries=1), turn1_request())
    assert len(wire.requests) == 2 and wire.bodies[0] == wire.bodies[1]
    assert events[-1].finish_reason == "stop" and time.monotonic() - start < 5


def test_no_retries_when_max_retries_is_zero():
    wire = Wire((503, (GEMINI / "error_503_overloaded.json").read_bytes()))
    assert fails(wire.provider(max_retries=0), turn1_request()).kind == "overloaded"
    assert len(wire.requests) == 1


@pytest.mark.parametrize(("exception", "kind"), [
    (httpx2.ReadTimeout, "timeout"), (httpx2.ConnectError, "connection"), (httpx2.RemoteProtocolError, "connection"),
])
def test_timeout_and_connection_errors(exception, kind):
    attempts = []

    def handler(request):
        attempts.append(request)
        raise exception(f"failed for key {KEY}", request=request)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    provider = build(ProviderSettings("google", "gemini-2.5-flash", api_key=KEY, max_retries=1),
                     http_client=client, retry_initial_delay_s=0.001)
    error = fails(provider, turn1_request())
    assert error.kind == kind and KEY not in str(error)
    assert len(attempts) == (1 if exception is httpx2.RemoteProtocolError else 2)  # the SDK's retry rule


def test_error_chunk_after_200_is_a_provider_error():
    body = b'data: {"error": {"code": 500, "message": "Internal error mid-stream", "status": "INTERNAL"}}\r\n\r\n'
    error = fails(Wire((200, body)).provider(max_retries=0), turn1_request())
    assert error.kind == "server" and "mid-stream" in str(error)


def test_base_url_is_used(monkeypatch):
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")  # must not switch the client to Vertex AI
    wire = Wire((200, body_of("response_turn2_text.sse")))
    run(wire.provider(base_url="http://127.0.0.1:9/gemini"), turn1_request())
    assert str(wire.requests[0].url).startswith(
        "http://127.0.0.1:9/gemini/v1/models/gemini-2.5-flash:streamGenerateContent")


# ---------------------------------------------------------------- history shapes


def test_feedback_after_results_joins_the_same_user_content_and_results_go_in_call_order():
    calls = [ToolCallPart(call_id=f"c{i}", tool_name=f"t{i}", arguments={"i": i}) for i in range(3)]
    results = [Message.tool_result(ToolResultPart(call_id=f"c{i}", tool_name=f"t{i}", content=str(i)))
               for i in (2, 0, 1)]
    history = [Message.user("go"), Message(role="assistant", parts=(TextPart(text="On it."), *calls)),
               *results, Message.user("the check failed", kind="feedback"),
               Message(role="assistant", parts=()),  # a turn cut off before any part
               Message.user("and again")]
    contents = [c.model_dump(exclude_none=True) for c in to_contents(history)]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    user = contents[2]["parts"]
    assert [p["function_response"]["name"] for p in user[:3]] == ["t0", "t1", "t2"]
    assert [p["text"] for p in user[3:]] == ["the check failed", "and again"]
    assert contents[1]["parts"][0] == {"text": "On it."}
    assert "id" not in contents[1]["parts"][1]["function_call"]  # a foreign call: no id, no signature


def test_history_from_another_provider_converts_cleanly():
    call = ToolCallPart(call_id="call_abc", tool_name="read_file", arguments={"path": "x"},
                        provider_details={"openai": {"item_id": "fc_1"}, "anthropic": {"signature": "zzz"}})
    history = [Message.user("read"), Message(role="assistant", parts=(call,)),
               Message.tool_result(ToolResultPart(call_id="call_abc", tool_name="read_file", content="hi"))]
    model = to_contents(history)[1].parts[0]
    assert model.thought_signature is None and model.function_call.id is None
    assert to_contents(history)[2].parts[0].function_response.id is None


def test_text_signature_and_part_order_are_rebuilt():
    text_sig, call_sig = b"text-signature", b"call-signature"
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Let me "}]}, "index": 0}]},
        {"candidates": [{"content": {"role": "model", "parts": [
            {"text": "look.", "thoughtSignature": base64.b64encode(text_sig).decode()},
            {"functionCall": {"name": "read_file", "args": {"path": "a"}},
             "thoughtSignature": base64.b64encode(call_sig).decode()}]}, "index": 0}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Then more."}]},
                         "finishReason": "STOP", "index": 0}]},
    ]
    wire = Wire((200, sse(*chunks)), (200, body_of("response_turn2_text.json")))
    provider = wire.provider()
    events = run(provider, turn1_request())
    text = text_of(events)
    assert text == "Let me look.Then more."
    calls = calls_of(events)
    # the runner stores one TextPart first, then the calls
    history = (Message.user("q"), Message(role="assistant", parts=(TextPart(text=text), *calls)),
               Message.tool_result(ToolResultPart(call_id=calls[0].call_id, tool_name="read_file", content="A")))
    run(provider, turn1_request(history))
    parts = decoded_signatures(wire.bodies[1])["contents"][1]["parts"]
    assert parts == [
        {"text": "Let me look.", "thoughtSignature": text_sig},
        {"functionCall": {"name": "read_file", "args": {"path": "a"}}, "thoughtSignature": call_sig},
        {"text": "Then more."},
    ]


def test_thought_parts_are_not_shown():
    chunk = {"candidates": [{"content": {"role": "model", "parts": [
        {"text": "thinking hard", "thought": True}, {"text": "Answer."}]}, "finishReason": "STOP", "index": 0}]}
    events = run(Wire((200, sse(chunk))).provider(), turn1_request())
    assert text_of(events) == "Answer."


# ------------------------------------------------------------------ performance


def test_per_chunk_handling_is_cheap():
    from google.genai import types

    line = (GEMINI / "response_turn2_text.sse").read_bytes().split(b"\r\n\r\n")[1][len(b"data: "):]
    chunk = types.GenerateContentResponse.model_validate_json(line)
    state = StreamState(seed="x")
    samples = []
    for _ in range(2000):
        start = time.perf_counter()
        state.feed(chunk)
        samples.append(time.perf_counter() - start)
    samples.sort()
    assert samples[len(samples) // 2] < 20e-6
