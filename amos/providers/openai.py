"""OpenAI Chat Completions, and every server that speaks it (Ollama, llama.cpp, vLLM).

One adapter serves two provider names: ``openai`` (api.openai.com, or a proxy via
``base_url``) and ``openai-compatible`` (a local or self-hosted server, key optional).
It translates, nothing more (DESIGN.md rule 2): the official ``openai`` SDK does the
HTTP, the SSE parsing and the retries; this module turns a ``ModelRequest`` into a
Chat Completions body and the streamed chunks into neutral events.

The pieces, each usable on its own:

- ``chat_messages``/``chat_tools``: neutral conversation and tools to the wire shape.
- ``ChatStreamAssembler``: folds ``ChatCompletionChunk`` objects into text deltas,
  complete tool calls and one ``FinishEvent``, tolerating what compatible servers
  send (calls without ids, several calls at index 0, object arguments, tool calls
  finishing with ``stop``, usage on the finish chunk or nowhere). It needs no HTTP,
  so ``benchmarks/provider_deltas.py`` drives it directly.
- ``OpenAIChatProvider``: the ``Provider``; maps SDK exceptions to ``ProviderError``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import deque
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx2
import openai

from amos.errors import ProviderError
from amos.messages import Message, ToolCallPart, ToolResultPart, Usage
from amos.providers.base import (
    FinishEvent,
    FinishReason,
    ModelRequest,
    ProviderEvent,
    TextDeltaEvent,
    ToolCallEvent,
)
from amos.providers.common import (
    ProviderSettings,
    decode_arguments,
    details_for,
    error_body_message,
    error_kind,
    generated_call_id,
    provider_error,
    serialisable,
    with_details,
)
from amos.redact import mask_url

KEYLESS_PLACEHOLDER = "not-needed"
"""Key sent when none is configured (a keyless local server, or ``api_key_env: null``):
the SDK refuses to start without one, and an unset key must never fall back to the
SDK's own ``OPENAI_API_KEY`` lookup (that would hand the OpenAI key to any server)."""

MAX_CALL_ID_CHARS = 40
"""Longest tool-call id OpenAI accepts in a request (characters); longer ids (from
another provider's history) are replaced by a stable hash on the wire."""

_WIRE_CALL_KEYS = frozenset({"index", "id", "type", "function"})
_NO_RESULT = "not run: no result was recorded for this call"


def build(settings: ProviderSettings, *, http_client: Any | None = None) -> OpenAIChatProvider:
    """Build the Chat Completions provider for ``openai`` or ``openai-compatible``.

    Args:
        settings: resolved provider settings (``provider_name`` picks the flavour).
        http_client: an ``httpx2.AsyncClient`` for the SDK (tests pass one with a mock
            transport); None lets the SDK build its own, once per event loop.

    Returns:
        A ready provider; no request is made until ``stream`` is called.
    """
    return OpenAIChatProvider(settings, http_client=http_client)


# --------------------------------------------------------------------------- request


def wire_call_id(call_id: str) -> str:
    """``call_id`` as sent to the API: unchanged, or a stable hash when it is too long.

    The same neutral id always maps to the same wire id, so an assistant tool call and
    the tool message answering it stay correlated.
    """
    if len(call_id) <= MAX_CALL_ID_CHARS:
        return call_id
    return "call_" + hashlib.sha256(call_id.encode()).hexdigest()[:32]


def chat_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """``ToolSpec``s as Chat Completions function tools."""
    return [
        {"type": "function",
         "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def _wire_arguments(call: ToolCallPart) -> str:
    if call.arguments is None and call.raw_arguments is not None:
        return call.raw_arguments
    value = {} if call.arguments is None else call.arguments
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _wire_tool_call(call: ToolCallPart, provider_name: str) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "id": wire_call_id(call.call_id),
        "type": "function",
        "function": {"name": call.tool_name, "arguments": _wire_arguments(call)},
    }
    for key, value in details_for(call.provider_details, provider_name).items():
        if key not in _WIRE_CALL_KEYS:
            wire[key] = value
    return wire


def _tool_message(result: ToolResultPart) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": wire_call_id(result.call_id), "content": result.content}


def _orphan_result(result: ToolResultPart) -> dict[str, Any]:
    # A result whose call is not in the history (the API rejects a bare tool message).
    return {"role": "user",
            "content": f"[tool result for call {result.call_id} ({result.tool_name})]\n{result.content}"}


def chat_messages(system: str, messages: Sequence[Message], provider_name: str) -> list[dict[str, Any]]:
    """The neutral conversation as Chat Completions ``messages``.

    The system prompt comes first. Every assistant message with tool calls is followed
    at once by one ``tool`` message per call, in call order (the API requires an answer
    per ``tool_call_id`` before anything else), wherever the results sit in the history;
    a call without a recorded result is answered with a "not run" note, and a result
    without a call becomes user text. Only ``provider_details[provider_name]`` is read.

    Args:
        system: system prompt text ("" for none).
        messages: the neutral conversation.
        provider_name: ``openai`` or ``openai-compatible`` (the details key).

    Returns:
        JSON-ready message dicts.
    """
    queues: dict[str, deque[ToolResultPart]] = {}
    for message in messages:
        if message.role == "tool":
            for result in message.tool_results:
                queues.setdefault(result.call_id, deque()).append(result)
    consumed: set[int] = set()
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message.role == "assistant":
            _append_assistant(out, message, provider_name, queues, consumed)
        elif message.role == "tool":
            for result in message.tool_results:
                if id(result) not in consumed:  # no call before it: it heads its queue
                    queues[result.call_id].popleft()
                    out.append(_orphan_result(result))
        else:
            out.append({"role": "user", "content": message.text})
    return out


def _append_assistant(out: list[dict[str, Any]], message: Message, provider_name: str,
                      queues: dict[str, deque[ToolResultPart]], consumed: set[int]) -> None:
    calls = message.tool_calls
    text = message.text
    if not calls and not text:
        return  # an empty turn (e.g. a refusal): nothing the API would accept
    # OpenAI takes null content beside tool calls; llama-cpp-python answers it with HTTP 500
    # ("Input should be a valid string"), and "" is accepted everywhere we know of (issue 23).
    empty = "" if provider_name == "openai-compatible" else None
    wire: dict[str, Any] = {"role": "assistant", "content": text or empty}
    if calls:
        wire["tool_calls"] = [_wire_tool_call(c, provider_name) for c in calls]
    out.append(wire)
    for call in calls:
        queue = queues.get(call.call_id)
        if queue:
            result = queue.popleft()
            consumed.add(id(result))
        else:
            result = ToolResultPart(call_id=call.call_id, tool_name=call.tool_name,
                                    content=_NO_RESULT, is_error=True, status="not_started")
        out.append(_tool_message(result))


def request_body(request: ModelRequest, settings: ProviderSettings) -> dict[str, Any]:
    """Keyword arguments for ``chat.completions.create``; the SDK sends them as the JSON body.

    ``tools`` is omitted when no tool is offered. ``tool_choice`` is sent with tools only
    when configured (``settings.tool_choice``: llama-cpp-python's function-calling format
    needs it, issue 23); ``parallel_tool_calls`` is left to its default (true): some models
    reject it outright. The output cap goes in ``max_completion_tokens`` for OpenAI and in
    ``max_tokens`` for compatible servers (which do not all know the newer name); it is the
    request's cap, else the configured ``max_tokens`` (tokens), else none. With
    ``settings.stream`` false the body asks for one whole response (``stream: false``).
    """
    body: dict[str, Any] = {
        "model": settings.model,
        "messages": chat_messages(request.system, request.messages, settings.provider_name),
    }
    if request.tools:
        body["tools"] = chat_tools(request.tools)
        if settings.tool_choice:
            body["tool_choice"] = settings.tool_choice
    cap = request.max_output_tokens if request.max_output_tokens is not None else settings.max_tokens
    if cap is not None:
        key = "max_completion_tokens" if settings.provider_name == "openai" else "max_tokens"
        body[key] = cap
    if settings.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    else:
        body["stream"] = False
    return body


# --------------------------------------------------------------------------- response


class _CallBuffer:
    """One tool call being assembled from its deltas."""

    __slots__ = ("id", "name", "parts", "whole", "extra")

    def __init__(self, call_id: str | None) -> None:
        self.id = call_id
        self.name = ""
        self.parts: list[str] = []
        self.whole: Any = None  # arguments a server sent as an object
        self.extra: dict[str, Any] = {}

    def complete_json(self) -> bool:
        """True when the arguments so far are a whole JSON object (checked rarely)."""
        if self.whole is not None:
            return True
        if not self.parts or not self.parts[-1].rstrip().endswith("}"):
            return False
        return decode_arguments("".join(self.parts))[1] is None


class ChatStreamAssembler:
    """Folds streamed ``ChatCompletionChunk``s into neutral events.

    ``feed`` is called once per chunk and returns the text to show at once; tool calls
    and the finish come from ``finish`` after the stream ended. Per-delta work is a few
    attribute reads and a list append: argument fragments are joined once, at the end.

    Args:
        provider_name: key for ``provider_details`` (``openai``/``openai-compatible``).
        turn_seed: text identifying the request; ids generated for calls sent without
            one are derived from it (called only when needed, so hashing a long
            history costs nothing on the usual path).
    """

    def __init__(self, provider_name: str, turn_seed: Any = "") -> None:
        self.provider_name = provider_name
        self._turn_seed = turn_seed
        self.calls: list[_CallBuffer] = []
        self._by_index: dict[Any, _CallBuffer] = {}
        self.finish_reason: str | None = None
        self.refusal: list[str] = []
        self.usage: Any = None
        self.chunks = 0

    def feed(self, chunk: Any) -> str | None:
        """Take one chunk; return its text delta (None when it has none).

        Args:
            chunk: an SDK ``ChatCompletionChunk`` (or anything with the same attributes).
        """
        self.chunks += 1
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage
        choices = chunk.choices
        if not choices:
            return None
        choice = choices[0]
        if choice.finish_reason:
            self.finish_reason = choice.finish_reason
        delta = getattr(choice, "delta", None)
        if delta is None:
            return None
        tool_calls = delta.tool_calls
        if tool_calls:
            for tc in tool_calls:
                self._tool_delta(tc)
        refusal = delta.refusal
        if refusal:
            self.refusal.append(serialisable(refusal))
        text = delta.content
        return serialisable(text) if text else None

    def feed_completion(self, completion: Any) -> str | None:
        """Take a whole (non-streamed) ``ChatCompletion``; return its text (None when none).

        The calls, finish reason and usage are kept as ``feed`` keeps them, so ``finish``
        gives the same events for either mode. A legacy ``function_call`` on a message
        with no ``tool_calls`` counts as one call.
        """
        self.chunks += 1
        usage = getattr(completion, "usage", None)
        if usage is not None:
            self.usage = usage
        choices = getattr(completion, "choices", None)
        if not choices:
            return None
        choice = choices[0]
        if choice.finish_reason:
            self.finish_reason = choice.finish_reason
        message = getattr(choice, "message", None)
        if message is None:
            return None
        calls = list(getattr(message, "tool_calls", None) or ())
        legacy = getattr(message, "function_call", None)
        if not calls and legacy is not None:
            calls = [_LegacyCall(legacy)]
        for position, tc in enumerate(calls):
            self._tool_delta(tc, position=position)
        refusal = getattr(message, "refusal", None)
        if refusal:
            self.refusal.append(serialisable(refusal))
        text = message.content
        return serialisable(text) if text else None

    def _tool_delta(self, tc: Any, *, position: int | None = None) -> None:
        call_id = tc.id
        index = getattr(tc, "index", None) if position is None else position
        buf = self._by_index.get(index)
        fn = tc.function
        name = fn.name if fn is not None else None
        fresh_name = bool(name and buf is not None and buf.name and name != buf.name)
        if buf is None or (call_id and buf.id and call_id != buf.id) or (
                not call_id and name and buf.name and buf.complete_json()) or (
                not call_id and fresh_name and getattr(tc, "type", None) is not None):
            # a new call: a new id, a whole call again at the same index (Ollama), or a
            # differently named call announced as one ("type": "function") after a call
            # with no arguments yet
            buf = _CallBuffer(call_id)
            self.calls.append(buf)
            self._by_index[index] = buf
        elif call_id and not buf.id:
            buf.id = call_id
        if fn is not None:
            if name and not buf.name:
                buf.name = name
            elif name and name != buf.name and not buf.parts and buf.whole is None:
                buf.name += name  # the name streamed in pieces ("read", "_file"), each without a "type"
            args = fn.arguments
            if isinstance(args, str):
                if args:
                    buf.parts.append(serialisable(args))
            elif args is not None:
                buf.whole = args
        extra = tc.model_extra if hasattr(tc, "model_extra") else None
        if extra:
            buf.extra.update({k: v for k, v in extra.items() if v is not None})

    def _seed(self) -> str:
        seed = self._turn_seed() if callable(self._turn_seed) else self._turn_seed
        return str(seed)

    def tool_calls(self) -> list[ToolCallPart]:
        """The assembled calls, in the order they started."""
        seed: str | None = None
        out: list[ToolCallPart] = []
        for n, buf in enumerate(self.calls):
            call_id = buf.id
            if not call_id:
                seed = self._seed() if seed is None else seed
                call_id = generated_call_id("call", seed, n)
            raw = buf.whole if buf.whole is not None else "".join(buf.parts)
            arguments, raw_arguments = decode_arguments(raw)
            out.append(ToolCallPart(call_id=call_id, tool_name=buf.name, arguments=arguments,
                                    raw_arguments=raw_arguments,
                                    provider_details=with_details(self.provider_name, buf.extra)))
        return out

    def finish(self) -> list[ProviderEvent]:
        """The ``ToolCallEvent``s, then the ``FinishEvent``, once the stream has ended."""
        calls = self.tool_calls()
        events: list[ProviderEvent] = [ToolCallEvent(c) for c in calls]
        refusal = "".join(self.refusal) or None
        reason = self._reason(bool(calls), refusal)
        detail = self.finish_reason if reason != "error" else self._no_finish_detail()
        events.append(FinishEvent(reason, self._usage(), refusal=refusal, detail=detail,
                                  usage_reported=self.usage is not None))
        return events

    def _no_finish_detail(self) -> str:
        if self.chunks == 0 and self.provider_name == "openai-compatible":
            # Recorded from llama-cpp-python 0.3.36: an error after it started streaming
            # (tool_choice auto/required, a prompt over its n_ctx) ends the 200 at once.
            return ("the server sent an empty stream (HTTP 200 and no chunk): llama-cpp-python does this when it "
                    "fails after starting to stream (tool_choice auto or required, or a prompt longer than its "
                    "context window); set providers.openai-compatible.stream to false to see the server's error")
        return "the stream ended without a finish reason (the response was cut off or was not a chat stream)"

    def _reason(self, has_calls: bool, refusal: str | None) -> FinishReason:
        raw = self.finish_reason
        if raw == "content_filter":
            return "content_filter"
        if refusal:
            return "refusal"
        if raw == "length":
            return "length"
        if raw is None:
            return "error"  # the stream ended without a finish reason: a cut-off answer is no answer
        # "tool_calls", "function_call", and compatible servers' "stop" with calls.
        return "tool_calls" if has_calls else "stop"

    def _usage(self) -> Usage:
        u = self.usage
        if u is None:
            return Usage(model_calls=1)
        prompt = getattr(u, "prompt_tokens_details", None)
        completion = getattr(u, "completion_tokens_details", None)
        return Usage(
            input_tokens=getattr(u, "prompt_tokens", None) or 0,
            output_tokens=getattr(u, "completion_tokens", None) or 0,
            cached_tokens=(getattr(prompt, "cached_tokens", None) or 0) if prompt is not None else 0,
            reasoning_tokens=(getattr(completion, "reasoning_tokens", None) or 0) if completion is not None else 0,
            model_calls=1,
        )


def _count(chunks: int) -> str:
    return f"{chunks} chunk" if chunks == 1 else f"{chunks} chunks"


class _LegacyCall:
    """A message's legacy ``function_call`` seen as a tool call without an id."""

    def __init__(self, function: Any) -> None:
        self.id = None
        self.function = function
        self.model_extra = None


# --------------------------------------------------------------------------- errors

_CODE_STATUS = (
    ("rate_limit", 429), ("quota", 429), ("api_key", 401), ("authentication", 401),
    ("permission", 403), ("overloaded", 529), ("timeout", 408), ("context_length", 400),
    ("invalid_request", 400),
)


def _status_for_code(body: Any) -> int:
    """The HTTP status an error sent inside a 200 stream would have had (500 by default)."""
    text = ""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            text = f"{inner.get('type') or ''} {inner.get('code') or ''}".lower()
    return next((status for word, status in _CODE_STATUS if word in text), 500)


def map_error(exc: Exception, settings: ProviderSettings, *, chunks: int | None = None) -> ProviderError:
    """A ``ProviderError`` for an SDK exception (after the SDK's own retries).

    With ``chunks`` set (the response had started: HTTP 200 and that many chunks read),
    a broken connection is ``connection`` saying the stream was cut after so many chunks,
    and a read timeout is ``timeout`` saying the stream stalled: the server was reached,
    so "cannot reach" would mislead (issue 23).

    ``APITimeoutError`` → ``timeout``; ``APIConnectionError`` → ``connection``;
    ``APIStatusError`` → kind from its status and body; a bare ``APIError`` (an
    ``{"error": …}`` event after HTTP 200) → kind from the error's type/code, server
    by default; anything else the SDK raised → ``server``. The key never appears.
    """
    secrets = settings.secrets + ((settings.api_key,) if settings.api_key else ())
    name = settings.provider_name
    where = mask_url(settings.base_url) if settings.base_url else "the OpenAI API"
    transport = isinstance(exc, (openai.APIConnectionError, httpx2.TransportError))
    cause = (exc.__cause__ or exc.__context__) if isinstance(exc, openai.APIConnectionError) else exc
    detail = f": {type(cause).__name__}: {cause}" if cause is not None else ""
    timed_out = isinstance(exc, (openai.APITimeoutError, httpx2.TimeoutException))
    if transport and chunks is not None:
        if timed_out:
            return provider_error(name, "timeout", f"the stream from {where} stalled after {_count(chunks)}: "
                                  f"no data within {settings.timeout_s:g} s", secrets=secrets)
        return provider_error(name, "connection", f"the stream from {where} was cut after {_count(chunks)} "
                              f"(the server was reached; the connection broke mid-stream){detail}", secrets=secrets)
    if timed_out:
        return provider_error(name, "timeout", f"no answer from {where} within {settings.timeout_s:g} s",
                              secrets=secrets)
    if transport and isinstance(cause, httpx2.TransportError) and not isinstance(
            cause, (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.ProxyError)):
        return provider_error(name, "connection", f"the connection to {where} broke before the response was "
                              f"complete{detail}", secrets=secrets)
    if transport:
        return provider_error(name, "connection", f"cannot reach {where}{detail}", secrets=secrets)
    if isinstance(exc, openai.APIStatusError):
        message, code = error_body_message(exc.body)
        message = message or exc.message
        kind = error_kind(exc.status_code, message, code=code)
        return provider_error(name, kind, message, status=exc.status_code, secrets=secrets)
    if isinstance(exc, openai.APIError):
        message, code = error_body_message(exc.body)
        message = message or exc.message
        kind = error_kind(_status_for_code(exc.body), message, code=code)
        return provider_error(name, kind, f"error in the response stream: {message}", secrets=secrets)
    if isinstance(exc, json.JSONDecodeError):  # a data line that is not JSON
        return provider_error(name, "server", f"the server sent an unreadable stream: {exc}", secrets=secrets)
    return provider_error(name, "server", f"{type(exc).__name__}: {exc}", secrets=secrets)


# --------------------------------------------------------------------------- provider


class OpenAIChatProvider:
    """Chat Completions over the official SDK, streamed.

    Args:
        settings: resolved settings (never printed: the key stays inside the SDK client).
        http_client: optional ``httpx2.AsyncClient`` handed to the SDK.
    """

    def __init__(self, settings: ProviderSettings, *, http_client: Any | None = None) -> None:
        self.settings = settings
        self.provider_name = settings.provider_name
        self.model_name = settings.model
        self._http_client = http_client
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def probe_window(self) -> int | None:
        """The context window an OpenAI-compatible server serves (its ``/props``,
        ``/models`` or Ollama's API), or None (issue 17, item 16). Blocking: call it in a
        thread. Never for the OpenAI API itself (its models are in amos's table)."""
        s = self.settings
        if self.provider_name != "openai-compatible" or not s.base_url:
            return None
        from amos.providers.context_window import probe_context_window

        return probe_context_window(s.base_url, self.model_name, api_key=s.api_key or None)

    def __repr__(self) -> str:
        return f"OpenAIChatProvider({self.settings!r})"

    def _sdk_client(self) -> openai.AsyncOpenAI:
        """The SDK client, rebuilt when a new event loop runs (its pool is per loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or (self._http_client is None and self._client_loop is not loop):
            s = self.settings
            self._client = openai.AsyncOpenAI(
                api_key=s.api_key or KEYLESS_PLACEHOLDER, base_url=s.base_url, max_retries=s.max_retries,
                timeout=s.timeout_s, http_client=self._http_client)
            self._client_loop = loop
        return self._client

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        """Make one streamed Chat Completions call; the last event is a ``FinishEvent``.

        Raises:
            ProviderError: the call failed after the SDK's retries, or the stream broke
                (an error event after HTTP 200, a dropped connection, unreadable data).
        """
        body = request_body(request, self.settings)
        assembler = ChatStreamAssembler(self.provider_name, lambda: _seed_of(body))
        try:
            response = await self._sdk_client().chat.completions.create(**body)
        except (openai.OpenAIError, json.JSONDecodeError, httpx2.TransportError) as exc:
            raise map_error(exc, self.settings) from None
        if not body["stream"]:
            text = assembler.feed_completion(response)
            if text:
                yield TextDeltaEvent(text)
        else:
            chunks = 0
            try:
                async for chunk in response:
                    chunks += 1
                    text = assembler.feed(chunk)
                    if text:
                        yield TextDeltaEvent(text)
            except (openai.OpenAIError, json.JSONDecodeError, httpx2.TransportError) as exc:
                raise map_error(exc, self.settings, chunks=chunks) from None
            finally:
                await response.close()
        for event in assembler.finish():
            yield event


def _seed_of(body: dict[str, Any]) -> str:
    """A short digest of the request's messages (seeds ids for calls sent without one)."""
    text = json.dumps(body["messages"], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
