"""Anthropic Messages API adapter: neutral request in, neutral events out (issue 3).

Translation only (DESIGN.md rule 2): the official ``anthropic`` SDK does HTTP,
retries (``max_retries``) and SSE parsing; this module maps the conversation to the
Messages wire format and the raw stream events back to ``ProviderEvent``s.

Request rules:

- the system prompt goes in the top-level ``system`` field; tools are
  ``{"name", "description", "input_schema"}`` with ``tool_choice`` auto;
- roles strictly alternate: neutral ``tool`` messages become ``user`` messages and
  consecutive same-role messages merge, so every result of a turn sits in ONE user
  message that starts with the ``tool_result`` blocks in call order, followed by any
  host feedback or prompt text;
- a call without a result gets an error result, a result without its call becomes
  text, and an empty message is dropped (the API rejects all three);
- call ids outside ``^[a-zA-Z0-9_-]+$`` (another provider's, or the runner's
  ``ID~2`` renames) map deterministically through :func:`wire_call_id`.

Stream rules: text deltas stream as they come; a ``tool_use`` call is emitted when its
block stops, arguments decoded by ``decode_arguments`` (an empty input is ``{}``,
invalid JSON keeps ``raw_arguments``). ``thinking``/``redacted_thinking`` blocks are
kept on the turn's first call under ``provider_details["anthropic"]["thinking"]`` and
echoed only from that key.

Usage: ``output_tokens`` is cumulative in ``message_delta`` (the last value wins);
``input_tokens`` is the WHOLE prompt, i.e. Anthropic's ``input_tokens`` +
``cache_read_input_tokens`` + ``cache_creation_input_tokens`` (Anthropic reports the
three apart; amos's ``Usage.input_tokens`` includes cached tokens), and
``cached_tokens`` is ``cache_read_input_tokens``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anthropic
import httpx2

from amos.errors import ProviderError
from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
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

PROVIDER = "anthropic"
DEFAULT_MAX_TOKENS = 8192
"""Output cap (tokens) when neither the request nor the config sets one (the API requires one)."""

_FINISH: dict[str, tuple[FinishReason, str | None]] = {
    "end_turn": ("stop", None),
    "stop_sequence": ("stop", "stop_sequence"),
    "tool_use": ("tool_calls", None),
    "max_tokens": ("length", "max_tokens: the output limit was reached"),
    "model_context_window_exceeded": (
        "length", "model_context_window_exceeded: the model's context window filled up"),
    "refusal": ("refusal", None),
    # amos offers no server tools, so a paused long-running server-tool turn is not
    # resumed: what arrived is the answer (its calls, if any, still run).
    "pause_turn": ("stop", "pause_turn: the API paused the turn; amos does not resume paused turns"),
}

# Anthropic error ``type`` -> the HTTP status it comes with, for an ``error`` event
# inside a 200 stream (the SDK's exception then carries status 200).
_TYPE_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
    "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
}

_ID_BAD = re.compile(r"[^a-zA-Z0-9_-]")
_MISSING_RESULT = "no result was recorded for this tool call"


def build(settings: ProviderSettings, *, http_client: Any | None = None) -> AnthropicProvider:
    """Build the Anthropic provider (``build_provider`` calls this).

    Args:
        settings: resolved provider settings (key, base URL, retries, timeout in
            seconds, output cap in tokens).
        http_client: an ``httpx2.AsyncClient`` for the SDK (tests pass one with a
            mock transport); None lets the SDK build its own.
    """
    return AnthropicProvider(settings, http_client=http_client)


class AnthropicProvider:
    """A Claude model behind the ``Provider`` protocol.

    Args:
        settings: resolved provider settings.
        http_client: optional ``httpx2.AsyncClient`` handed to the SDK.
    """

    provider_name = PROVIDER

    def __init__(self, settings: ProviderSettings, *, http_client: Any | None = None):
        self.model_name = settings.model
        self._settings = settings
        self._secrets = settings.secrets + ((settings.api_key,) if settings.api_key else ())
        self._client = anthropic.AsyncAnthropic(
            api_key=settings.api_key,
            base_url=settings.base_url,
            max_retries=settings.max_retries,
            timeout=settings.timeout_s,
            http_client=http_client,
        )

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for ``request`` (without ``stream``).

        Returns:
            ``model``, ``max_tokens`` (tokens: the request's cap, else the config's,
            else 8192), ``messages``, and ``system``/``tools``/``tool_choice`` when
            there are any.
        """
        body: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": request.max_output_tokens or self._settings.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": wire_messages(request.messages),
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
            body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": False}
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        """Make one Messages API call and stream its events; the last is a ``FinishEvent``.

        Raises:
            ProviderError: the call failed after the SDK's retries, an ``error`` event
                arrived inside the stream (``overloaded_error`` -> kind ``overloaded``),
                or the stream ended before ``message_delta`` gave a stop reason.
        """
        body = self.request_body(request)
        turn = _TurnState()
        try:
            events = await self._client.messages.create(**body, stream=True)
            async with events:
                async for raw in events:
                    event = turn.feed(raw)
                    if event is not None:
                        yield event
        except (anthropic.AnthropicError, httpx2.HTTPError, ValueError) as exc:
            raise self._error(exc) from None
        for event in turn.finish():
            yield event
        if turn.stop_reason is None:
            raise provider_error(PROVIDER, "connection", "the response stream ended before the message was complete",
                                 secrets=self._secrets)

    def _error(self, exc: Exception) -> ProviderError:
        """The neutral ``ProviderError`` for an SDK, transport or stream-parsing failure."""
        if isinstance(exc, (anthropic.APITimeoutError, httpx2.TimeoutException)):
            return provider_error(PROVIDER, "timeout", f"no complete response within {self._settings.timeout_s:g} s "
                                  f"({_describe(exc.__cause__ or exc)})", secrets=self._secrets)
        if isinstance(exc, (anthropic.APIConnectionError, httpx2.HTTPError)):
            return provider_error(PROVIDER, "connection", _describe(exc), secrets=self._secrets)
        if isinstance(exc, anthropic.APIStatusError):
            message, code = error_body_message(exc.body)
            message = message or str(exc)
            status = exc.status_code
            if status < 400:  # an ``error`` event inside a 200 stream
                kind = error_kind(_TYPE_STATUS.get(code or "", 500), message, code=code)
                return provider_error(PROVIDER, kind, f"{code or 'error'} in the response stream: {message}",
                                      secrets=self._secrets)
            return provider_error(PROVIDER, error_kind(status, message, code=code), message, status=status,
                                  secrets=self._secrets)
        if isinstance(exc, anthropic.CredentialsError):
            return provider_error(PROVIDER, "auth", _describe(exc), secrets=self._secrets)
        if isinstance(exc, (anthropic.APIResponseValidationError, ValueError)):
            return provider_error(PROVIDER, "server", f"unusable response: {_describe(exc)}", secrets=self._secrets)
        return provider_error(PROVIDER, "bad_request", _describe(exc), secrets=self._secrets)


def _describe(exc: BaseException) -> str:
    """``Type: message`` of an exception, plus the transport error the SDK wrapped, if any."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    cause = exc.__cause__
    if isinstance(exc, anthropic.APIConnectionError) and cause is not None:
        text += f" ({_describe(cause)})"
    return text


# ---------------------------------------------------------------------------- stream


class _Block:
    """One content block while it streams."""

    __slots__ = ("kind", "call_id", "name", "start_input", "parts", "signature", "data")

    def __init__(self, kind: str, call_id: str = "", name: str = "", start_input: Any = None, data: str = ""):
        self.kind = kind
        self.call_id = call_id
        self.name = name
        self.start_input = start_input
        self.parts: list[str] = []
        self.signature = ""
        self.data = data


class _TurnState:
    """Folds the raw stream events of one call into neutral events.

    ``feed`` is called once per raw SDK event and returns at most one neutral event;
    it only reads attributes and appends to lists, so it stays cheap per delta.
    """

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.thinking: list[dict[str, Any]] = []
        self.message_id = ""
        self.calls = 0
        self.input_tokens = 0
        self.cache_read = 0
        self.cache_creation = 0
        self.output_tokens = 0
        self.reasoning_tokens = 0
        self.stop_reason: str | None = None
        self.stop_details: Any = None

    def feed(self, event: Any) -> ProviderEvent | None:
        """Take one raw stream event; return the neutral event it completes, if any."""
        kind = event.type
        if kind == "content_block_delta":
            delta = event.delta
            dtype = delta.type
            if dtype == "text_delta":
                return TextDeltaEvent(serialisable(delta.text)) if delta.text else None
            block = self.blocks.get(event.index)
            if block is None:
                return None
            if dtype == "input_json_delta":
                block.parts.append(delta.partial_json)
            elif dtype == "thinking_delta":
                block.parts.append(delta.thinking)
            elif dtype == "signature_delta":
                block.signature += delta.signature
            return None
        if kind == "content_block_start":
            self._start(event.index, event.content_block)
            return None
        if kind == "content_block_stop":
            return self._stop(self.blocks.pop(event.index, None))
        if kind == "message_start":
            self.message_id = event.message.id or ""
            self._usage(event.message.usage)
            return None
        if kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self.stop_details = getattr(event.delta, "stop_details", None)
            self._usage(event.usage)
        return None

    def _start(self, index: int, block: Any) -> None:
        btype = block.type
        if btype == "tool_use":
            self.blocks[index] = _Block("tool_use", block.id or "", block.name, block.input)
        elif btype in ("text", "thinking"):
            self.blocks[index] = _Block(btype)
            if btype == "thinking" and block.thinking:
                self.blocks[index].parts.append(block.thinking)
        elif btype == "redacted_thinking":
            self.blocks[index] = _Block(btype, data=block.data)

    def _stop(self, block: _Block | None) -> ToolCallEvent | None:
        if block is None:
            return None
        if block.kind == "tool_use":
            return ToolCallEvent(self._call(block))
        if block.kind == "thinking":
            self.thinking.append({"type": "thinking", "thinking": "".join(block.parts), "signature": block.signature})
        elif block.kind == "redacted_thinking":
            self.thinking.append({"type": "redacted_thinking", "data": block.data})
        return None

    def _call(self, block: _Block) -> ToolCallPart:
        raw = "".join(block.parts)
        if not raw.strip() and isinstance(block.start_input, dict) and block.start_input:
            arguments, raw_arguments = block.start_input, None
        else:
            arguments, raw_arguments = decode_arguments(raw)
        details: dict[str, Any] = {}
        if self.thinking:
            details["thinking"], self.thinking = self.thinking, []
        call_id = block.call_id or generated_call_id("toolu", self.message_id, self.calls)
        self.calls += 1
        return ToolCallPart(call_id=call_id, tool_name=block.name, arguments=arguments,
                            raw_arguments=raw_arguments, provider_details=with_details(PROVIDER, details))

    def _usage(self, usage: Any) -> None:
        if usage is None:
            return
        self.output_tokens = usage.output_tokens or self.output_tokens
        if usage.input_tokens is not None:
            self.input_tokens = usage.input_tokens
        if usage.cache_read_input_tokens is not None:
            self.cache_read = usage.cache_read_input_tokens
        if usage.cache_creation_input_tokens is not None:
            self.cache_creation = usage.cache_creation_input_tokens
        details = getattr(usage, "output_tokens_details", None)
        if details is not None and details.thinking_tokens is not None:
            self.reasoning_tokens = details.thinking_tokens

    def finish(self) -> list[ProviderEvent]:
        """Calls still open when the stream ended, then the ``FinishEvent``.

        Returns no ``FinishEvent`` when no stop reason arrived (the caller raises).
        """
        if self.stop_reason is None:
            return []
        events: list[ProviderEvent] = [
            ToolCallEvent(self._call(b)) for _, b in sorted(self.blocks.items()) if b.kind == "tool_use"]
        self.blocks.clear()
        reason, detail = _FINISH.get(self.stop_reason, ("stop", f"unknown stop_reason {self.stop_reason}"))
        refusal = None
        if reason == "refusal":
            refusal, detail = _refusal(self.stop_details)
        usage = Usage(
            input_tokens=self.input_tokens + self.cache_read + self.cache_creation,
            output_tokens=self.output_tokens,
            cached_tokens=self.cache_read,
            reasoning_tokens=self.reasoning_tokens,
            model_calls=1,
        )
        events.append(FinishEvent(reason, usage, refusal=refusal, detail=detail))
        return events


def _refusal(stop_details: Any) -> tuple[str | None, str]:
    """``(refusal text, detail)`` from a refusal's ``stop_details`` (either may be absent)."""
    explanation = getattr(stop_details, "explanation", None)
    category = getattr(stop_details, "category", None)
    detail = "refusal" + (f" (category {category})" if category else "")
    return (explanation or None), detail


# ---------------------------------------------------------------------------- request


def wire_call_id(call_id: str) -> str:
    """The id sent to Anthropic for a neutral call id.

    Ids matching ``^[a-zA-Z0-9_-]+$`` pass unchanged; any other id (another
    provider's, or a runner rename like ``toolu_X~2``) has each other character
    replaced by ``_`` and 8 hex digits of its SHA-256 appended, so the mapping is
    deterministic (the ``tool_use`` and its ``tool_result`` agree) and two different
    ids never map to one.
    """
    if call_id and not _ID_BAD.search(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:8]
    return f"{_ID_BAD.sub('_', call_id) or 'call'}_{digest}"


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The Messages API ``messages`` list for a neutral conversation.

    Returns:
        Alternating ``user``/``assistant`` messages starting with ``user``, none empty;
        see the module docstring for the rules.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _assistant_blocks(message) if role == "assistant" else _user_blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    _pair_results(out)
    if out and out[0]["role"] == "assistant":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": "(conversation continues)"}]})
    for item in out:
        content = item["content"]
        if item["role"] == "user" and len(content) == 1 and content[0]["type"] == "text":
            item["content"] = content[0]["text"]
    return out


def _text_block(text: str) -> dict[str, Any] | None:
    # The API rejects empty and whitespace-only text blocks.
    return {"type": "text", "text": text} if text.strip() else None


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    thinking: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    uses: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            block = _text_block(part.text)
            if block:
                texts.append(block)
        elif isinstance(part, ToolCallPart):
            kept = details_for(part.provider_details, PROVIDER).get("thinking")
            if isinstance(kept, list):
                thinking.extend(kept)
            arguments = part.arguments if isinstance(part.arguments, dict) else {}
            uses.append({"type": "tool_use", "id": wire_call_id(part.call_id), "name": part.tool_name,
                         "input": arguments})
    return thinking + texts + uses


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            block = _text_block(part.text)
            if block:
                blocks.append(block)
        elif isinstance(part, ToolResultPart):
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": wire_call_id(part.call_id)}
            if part.content:
                result["content"] = part.content
            if part.is_error:
                result["is_error"] = True
            blocks.append(result)
    return blocks


def _pair_results(out: list[dict[str, Any]]) -> None:
    """Make each user message after a ``tool_use`` turn start with exactly its results, in call order.

    A call without a result gets an error result; a result whose call is not in the
    preceding assistant message becomes a text block (the API rejects both as they are).
    """
    expected: list[str] = []
    for item in out:
        if item["role"] == "assistant":
            expected = [b["id"] for b in item["content"] if b["type"] == "tool_use"]
            continue
        results = {b["tool_use_id"]: b for b in item["content"] if b["type"] == "tool_result"}
        others = [b for b in item["content"] if b["type"] != "tool_result"]
        ordered = [results.pop(call_id, None) or _missing(call_id) for call_id in expected]
        orphans = [{"type": "text", "text": f"[result of tool call {b['tool_use_id']}]\n{b.get('content', '')}"}
                   for b in results.values()]
        item["content"] = ordered + orphans + others
        expected = []
    if expected:
        out.append({"role": "user", "content": [_missing(call_id) for call_id in expected]})


def _missing(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": _MISSING_RESULT, "is_error": True}
