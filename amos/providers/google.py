"""Google Gemini through ``google-genai``'s ``generate_content_stream`` (issue 3).

Translation rules (DESIGN.md rule 2: translate, nothing more; retries belong to the SDK):

- History: ``user`` messages become ``user`` Contents, ``assistant`` messages ``model``
  Contents, and every neutral ``tool`` message a ``functionResponse`` part. Consecutive
  Contents of one role are merged (Gemini wants alternating roles), so all the
  ``functionResponse`` parts of a turn sit in ONE user Content, in call order, followed
  by any host feedback text.
- ``functionResponse.response`` is ``{"output": content}`` for a succeeded call and
  ``{"error": content}`` for every other status (Gemini's documented convention for
  function results; ``content`` is the text the model sees).
- Call ids: Gemini 2.5 sends calls without ids; they get a ``generated_call_id`` that
  is stable for the turn and is never sent back (2.5 does not know it). Gemini 3 sends
  ``functionCall.id``; it is kept and echoed in ``functionCall.id`` and
  ``functionResponse.id``.
- ``thoughtSignature``: kept (standard base64) in ``provider_details["google"]`` and sent
  back on exactly the part it came with. Signatures of text parts, and the order of
  text and calls in the turn, are kept on the first call of the turn (the neutral
  protocol has no other place a provider can write to; a text-only turn's signature
  is dropped, which Gemini accepts: only function-call signatures are validated).
  Only the ``google`` key is read, so history from another provider converts cleanly.
- Finish: Gemini says ``STOP`` even for function calls, so the presence of calls
  decides ``tool_calls``; ``MAX_TOKENS`` is ``length``; the safety family is
  ``content_filter``; ``MALFORMED_FUNCTION_CALL`` and the other unusable endings are
  ``error``; a prompt blocked before any candidate is ``content_filter``.
- Usage: from the last ``usageMetadata`` of the stream. ``output_tokens`` =
  ``candidatesTokenCount`` + ``thoughtsTokenCount`` (thinking is billed as output),
  ``reasoning_tokens`` = ``thoughtsTokenCount``, ``input_tokens`` =
  ``promptTokenCount`` + ``toolUsePromptTokenCount``, ``cached_tokens`` =
  ``cachedContentTokenCount`` (part of the prompt count).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from amos.errors import ConfigError, ProviderError
from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
from amos.providers.base import (
    FinishEvent,
    ModelRequest,
    ProviderEvent,
    TextDeltaEvent,
    ToolCallEvent,
)
from amos.providers.common import (
    ProviderSettings,
    details_for,
    error_kind,
    generated_call_id,
    provider_error,
    serialisable,
    with_details,
)
from amos.tools.base import ToolSpec

PROVIDER = "google"
_ID_PREFIX = "gc"

RETRY_INITIAL_DELAY_S = 1.0
"""First wait before the SDK retries a transient error (seconds; doubles each retry)."""
RETRY_MAX_DELAY_S = 30.0
"""Longest wait between two SDK retries (seconds)."""

_FILTERED = frozenset({
    "SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII",
    "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR",
})
_UNUSABLE = {
    "MALFORMED_FUNCTION_CALL": "Gemini produced a function call it could not parse",
    "UNEXPECTED_TOOL_CALL": "Gemini called a tool that was not offered",
    "TOO_MANY_TOOL_CALLS": "Gemini made more tool calls than it allows in one turn",
    "MISSING_THOUGHT_SIGNATURE": "a function call in the history lacks its thought signature",
    "MALFORMED_RESPONSE": "Gemini produced a response it could not complete",
}
_API_KEY_WORDS = ("api key not valid", "api_key_invalid", "api key expired", "api key not found")


def build(
    settings: ProviderSettings,
    *,
    http_client: Any | None = None,
    retry_initial_delay_s: float | None = None,
) -> GoogleProvider:
    """Build the Gemini provider.

    Args:
        settings: resolved settings; ``api_key`` is passed to the SDK explicitly, so
            it never reads a key (or a Vertex AI switch) from the environment.
        http_client: an ``httpx2.AsyncClient`` for the SDK (tests pass one with a mock
            transport); None lets the SDK build its own (one per event loop).
        retry_initial_delay_s: first retry wait (seconds), None for
            ``RETRY_INITIAL_DELAY_S`` (tests make it tiny).

    Returns:
        A ready ``GoogleProvider``.

    Raises:
        ConfigError: there is no API key.
    """
    if not settings.api_key:
        raise ConfigError("no API key for google: set GEMINI_API_KEY or GOOGLE_API_KEY")
    delay = RETRY_INITIAL_DELAY_S if retry_initial_delay_s is None else retry_initial_delay_s
    return GoogleProvider(settings, http_client=http_client, retry_initial_delay_s=delay)


class GoogleProvider:
    """Gemini behind the neutral provider protocol (see the module docstring).

    Args:
        settings: resolved provider settings.
        http_client: an ``httpx2.AsyncClient`` the SDK must use, or None.
        retry_initial_delay_s: first retry wait (seconds).
    """

    provider_name = PROVIDER

    def __init__(self, settings: ProviderSettings, *, http_client: Any | None, retry_initial_delay_s: float):
        self.model_name = settings.model
        self._settings = settings
        self._http_client = http_client
        self._retry_initial_delay_s = retry_initial_delay_s
        self._client: genai.Client | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def _http_options(self) -> types.HttpOptions:
        s = self._settings
        return types.HttpOptions(
            base_url=s.base_url,
            timeout=max(1, round(s.timeout_s * 1000)),
            retry_options=types.HttpRetryOptions(
                attempts=s.max_retries + 1,
                initial_delay=self._retry_initial_delay_s,
                max_delay=max(RETRY_MAX_DELAY_S, self._retry_initial_delay_s),
                jitter=self._retry_initial_delay_s,  # random extra wait, up to one initial delay
            ),
            httpx_async_client=self._http_client,
            # the SDK follows redirects and only strips Authorization on a cross-origin
            # hop; the key travels in x-goog-api-key, so never follow one
            client_args={"follow_redirects": False},
            async_client_args={"follow_redirects": False},
        )

    def _sdk(self) -> genai.Client:
        """The SDK client; one per event loop unless a client was injected (pooled
        connections belong to the loop that opened them)."""
        loop = asyncio.get_running_loop()
        if self._client is None or (self._http_client is None and loop is not self._client_loop):
            self._client = genai.Client(api_key=self._settings.api_key, vertexai=False,
                                        http_options=self._http_options())
            self._client_loop = loop
        return self._client

    def _config(self, request: ModelRequest) -> types.GenerateContentConfig:
        max_tokens = request.max_output_tokens or self._settings.max_tokens
        tools = to_tools(request.tools)
        return types.GenerateContentConfig(
            system_instruction=request.system or None,
            tools=tools,
            tool_config=types.ToolConfig(
                function_calling_config=types.FunctionCallingConfig(mode=types.FunctionCallingConfigMode.AUTO)
            ) if tools else None,
            max_output_tokens=max_tokens,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        """Make one ``streamGenerateContent`` call and translate its chunks.

        Text deltas are yielded as they arrive; tool calls are yielded together at the
        end of the stream (Gemini may add a signature or text after them), then one
        ``FinishEvent``.

        Raises:
            ProviderError: the call failed after the SDK's retries (kinds of
                ``common.error_kind``; the key is scrubbed from the message).
        """
        secrets = (*self._settings.secrets, self._settings.api_key or "")
        turn = StreamState(seed=str(len(request.messages)))
        try:
            chunks = await self._sdk().aio.models.generate_content_stream(
                model=self.model_name, contents=to_contents(request.messages), config=self._config(request),
            )
            try:
                async for chunk in chunks:
                    for text in turn.feed(chunk):
                        yield TextDeltaEvent(serialisable(text))
            finally:
                await chunks.aclose()
        except genai_errors.APIError as exc:
            raise api_error(exc, secrets) from None
        except (httpx2.TransportError, OSError) as exc:
            raise transport_error(exc, secrets) from None
        except genai_errors.UnknownApiResponseError as exc:
            raise provider_error(PROVIDER, "server", f"unreadable response: {exc}", secrets=secrets) from None
        for call in turn.calls():
            yield ToolCallEvent(call)
        yield turn.finish()


# --------------------------------------------------------------------- request side


def to_tools(specs: Sequence[ToolSpec]) -> list[types.Tool] | None:
    """One ``Tool`` holding a ``FunctionDeclaration`` per spec (None when no tools).

    The JSON schema is passed as ``parameters_json_schema`` (full JSON Schema, not
    Gemini's OpenAPI subset).
    """
    if not specs:
        return None
    return [types.Tool(function_declarations=[
        types.FunctionDeclaration(name=s.name, description=s.description, parameters_json_schema=s.parameters)
        for s in specs
    ])]


def to_contents(messages: Sequence[Message]) -> list[types.Content]:
    """The neutral conversation as Gemini Contents (rules in the module docstring).

    Empty messages (e.g. a turn cut off before any part) are skipped; Contents of the
    same role in a row are merged; in a user Content, ``functionResponse`` parts come
    first, in the order of the calls they answer.
    """
    groups: list[tuple[str, list[tuple[str | None, types.Part]]]] = []
    wire_ids: dict[str, str | None] = {}
    order: dict[str, int] = {}
    for message in messages:
        if message.role == "assistant":
            role = "model"
            tagged = [(None, part) for part in model_parts(message, wire_ids, order)]
        elif message.role == "tool":
            role = "user"
            tagged = [(r.call_id, response_part(r, wire_ids)) for r in message.tool_results]
        else:
            role = "user"
            tagged = [(None, types.Part(text=p.text)) for p in message.parts if isinstance(p, TextPart) and p.text]
        if not tagged:
            continue
        if groups and groups[-1][0] == role:
            groups[-1][1].extend(tagged)
        else:
            groups.append((role, tagged))
    return [types.Content(role=role, parts=_in_call_order(tagged, order) if role == "user" else
                          [part for _, part in tagged]) for role, tagged in groups]


def _in_call_order(tagged: list[tuple[str | None, types.Part]], order: dict[str, int]) -> list[types.Part]:
    """User parts with the function responses first, in call order, then the rest."""
    if len(tagged) < 2:
        return [part for _, part in tagged]
    last = len(order)

    def key(item: tuple[int, tuple[str | None, types.Part]]) -> tuple[int, int, int]:
        index, (call_id, _) = item
        if call_id is None:
            return (1, 0, index)
        return (0, order.get(call_id, last), index)

    return [part for _, (_, part) in sorted(enumerate(tagged), key=key)]


def model_parts(message: Message, wire_ids: dict[str, str | None], order: dict[str, int]) -> list[types.Part]:
    """The parts of one assistant message, with ids and signatures as Gemini sent them.

    Args:
        message: an ``assistant`` message.
        wire_ids: filled with ``call_id -> id to echo`` (None: do not send an id).
        order: filled with ``call_id -> position of the call in its turn``.
    """
    calls = message.tool_calls
    call_parts: list[types.Part] = []
    for index, call in enumerate(calls):
        details = details_for(call.provider_details, PROVIDER)
        wire_id = details.get("id") if isinstance(details.get("id"), str) else None
        wire_ids[call.call_id] = wire_id
        order[call.call_id] = index
        args = call.arguments if isinstance(call.arguments, dict) else {}
        call_parts.append(types.Part(
            function_call=types.FunctionCall(id=wire_id, name=call.tool_name, args=args),
            thought_signature=_signature(details.get("thought_signature")),
        ))
    text = message.text
    runs = _text_runs(message, calls, len(text))
    if not runs:
        return ([types.Part(text=text)] if text else []) + call_parts
    parts: list[types.Part] = []
    start = 0
    next_call = 0
    for at, chars, signature in runs:
        while next_call < min(at, len(call_parts)):
            parts.append(call_parts[next_call])
            next_call += 1
        piece = text[start:start + chars]
        start += chars
        if piece or signature:
            parts.append(types.Part(text=piece, thought_signature=_signature(signature)))
    parts.extend(call_parts[next_call:])
    return parts


def _text_runs(message: Message, calls: list[ToolCallPart], text_len: int) -> list[tuple[int, int, Any]]:
    """The stored text layout ``[(calls_before, chars, signature)]``, or ``[]`` when
    none is stored or it does not match the message's text (edited history)."""
    stored = details_for(message.provider_details, PROVIDER).get("text_parts")
    if stored is None and calls:
        stored = details_for(calls[0].provider_details, PROVIDER).get("text_parts")
    if not isinstance(stored, list):
        return []
    try:
        runs = [(int(r["at"]), int(r["chars"]), r.get("thought_signature")) for r in stored]
    except (TypeError, KeyError, ValueError):
        return []
    if sum(chars for _, chars, _ in runs) != text_len:
        return []
    return runs


def response_part(result: ToolResultPart, wire_ids: dict[str, str | None]) -> types.Part:
    """A ``functionResponse`` part for one tool result.

    ``response`` is ``{"output": content}``, or ``{"error": content}`` when the call did
    not succeed; ``id`` is echoed only when Gemini sent the call with one.
    """
    key = "error" if result.is_error else "output"
    return types.Part(function_response=types.FunctionResponse(
        id=wire_ids.get(result.call_id), name=result.tool_name, response={key: result.content},
    ))


def _signature(value: Any) -> bytes | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


# -------------------------------------------------------------------- response side


class StreamState:
    """What one streamed turn has said so far; ``feed`` is called once per chunk.

    Args:
        seed: text identifying the turn for generated call ids (with the response id).
    """

    __slots__ = ("_calls", "_runs", "_seed", "_text_since_call", "block", "finish_message",
                 "finish_reason", "response_id", "usage")

    def __init__(self, seed: str):
        self._seed = seed
        self._calls: list[tuple[Any, bytes | None]] = []
        self._runs: list[list[Any]] = []  # [calls_before, chars, signature]
        self._text_since_call = False
        self.finish_reason: str | None = None
        self.finish_message: str | None = None
        self.block: Any = None
        self.response_id: str | None = None
        self.usage: Any = None

    def feed(self, chunk: types.GenerateContentResponse) -> list[str]:
        """Take one chunk; returns its text deltas (thought summaries are not shown)."""
        if chunk.usage_metadata is not None:
            self.usage = chunk.usage_metadata
        if self.response_id is None and chunk.response_id:
            self.response_id = chunk.response_id
        candidates = chunk.candidates
        if not candidates:
            feedback = chunk.prompt_feedback
            if feedback is not None and feedback.block_reason is not None:
                self.block = feedback
            return []
        candidate = candidates[0]
        if candidate.finish_reason is not None:
            self.finish_reason = _enum_text(candidate.finish_reason)
            self.finish_message = candidate.finish_message
        content = candidate.content
        parts = content.parts if content is not None else None
        if not parts:
            return []
        texts: list[str] = []
        for part in parts:
            if part.thought:
                continue
            if part.function_call is not None:
                self._calls.append((part.function_call, part.thought_signature))
                self._text_since_call = False
            elif part.text is not None or part.thought_signature is not None:
                self._text(part.text or "", part.thought_signature, texts)
        return texts

    def _text(self, text: str, signature: bytes | None, texts: list[str]) -> None:
        if text:
            texts.append(text)
        if self._text_since_call and self._runs:
            run = self._runs[-1]
            run[1] += len(text)
        else:
            run = [len(self._calls), len(text), None]
            self._runs.append(run)
            self._text_since_call = True
        if signature is not None:
            run[2] = signature

    def calls(self) -> list[ToolCallPart]:
        """The turn's calls, in order, with ids and signatures (see module docstring)."""
        seed = f"{self.response_id or ''}:{self._seed}"
        layout = self._layout()
        result = []
        for index, (call, signature) in enumerate(self._calls):
            details: dict[str, Any] = {}
            if call.id:
                call_id = details["id"] = call.id
            else:
                call_id = generated_call_id(_ID_PREFIX, seed, index)
                details["id_generated"] = True
            if signature is not None:
                details["thought_signature"] = _b64(signature)
            if index == 0 and layout:
                details["text_parts"] = layout
            result.append(ToolCallPart(
                call_id=call_id, tool_name=call.name or "", arguments=dict(call.args or {}),
                provider_details=with_details(PROVIDER, details),
            ))
        return result

    def _layout(self) -> list[dict[str, Any]] | None:
        """Text runs worth storing: any signature, or text that followed a call."""
        if not any(sig is not None or at > 0 for at, _, sig in self._runs):
            return None
        return [{"at": at, "chars": chars, "thought_signature": _b64(sig) if sig is not None else None}
                for at, chars, sig in self._runs]

    def finish(self) -> FinishEvent:
        """The turn's ``FinishEvent`` (mapping in the module docstring)."""
        usage = _usage(self.usage)
        reason = self.finish_reason
        if reason is None and self.block is not None:
            block = _enum_text(self.block.block_reason)
            why = f": {self.block.block_reason_message}" if self.block.block_reason_message else ""
            return FinishEvent("content_filter", usage, refusal=f"Gemini blocked the prompt ({block}){why}",
                               detail=block)
        if reason is None:
            return FinishEvent("error", usage, detail="the Gemini stream ended without a finish reason")
        if reason == "STOP":
            layout = None if self._calls else self._layout()
            return FinishEvent("tool_calls" if self._calls else "stop", usage,
                               provider_details=with_details(PROVIDER, {"text_parts": layout}) if layout else None)
        if reason == "MAX_TOKENS":
            return FinishEvent("length", usage, detail=reason)
        if reason in _FILTERED:
            refusal = self.finish_message or f"Gemini blocked the response ({reason})"
            return FinishEvent("content_filter", usage, refusal=refusal, detail=reason)
        # google-genai drops the Gemini API's finishMessage; it is used when present
        explanation = self.finish_message or _UNUSABLE.get(reason)
        return FinishEvent("error", usage, detail=f"{reason}: {explanation}" if explanation else reason)


def _enum_text(value: Any) -> str:
    return value.value if hasattr(value, "value") else str(value)


def _usage(meta: Any) -> Usage:
    if meta is None:
        return Usage(model_calls=1)
    thoughts = meta.thoughts_token_count or 0
    return Usage(
        input_tokens=(meta.prompt_token_count or 0) + (meta.tool_use_prompt_token_count or 0),
        output_tokens=(meta.candidates_token_count or 0) + thoughts,
        cached_tokens=meta.cached_content_token_count or 0,
        reasoning_tokens=thoughts,
        model_calls=1,
    )


# ------------------------------------------------------------------------ errors


def api_error(exc: genai_errors.APIError, secrets: tuple[str, ...]) -> ProviderError:
    """A ``ProviderError`` for an HTTP error the SDK raised (after its retries).

    ``400 INVALID_ARGUMENT`` for a bad API key is ``auth`` (Gemini does not use 401);
    the rest follows ``common.error_kind`` (403 auth, 429 rate_limit, 503 overloaded,
    5xx server, context-length wording, else bad_request).
    """
    status = exc.code if isinstance(exc.code, int) else None
    message = exc.message or str(exc)
    lowered = f"{message} {exc.details}".lower()
    if status == 400 and any(word in lowered for word in _API_KEY_WORDS):
        kind = "auth"
    else:
        kind = error_kind(status, message, code=exc.status)
    return provider_error(PROVIDER, kind, message, status=status, secrets=secrets)


def transport_error(exc: BaseException, secrets: tuple[str, ...]) -> ProviderError:
    """``timeout`` or ``connection`` for a failure below HTTP (after the SDK's retries)."""
    timeout = isinstance(exc, (httpx2.TimeoutException, TimeoutError))
    kind = "timeout" if timeout else "connection"
    text = str(exc) or type(exc).__name__
    return provider_error(PROVIDER, kind, f"{type(exc).__name__}: {text}", secrets=secrets)
