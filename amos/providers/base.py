"""The provider protocol: neutral request in, neutral events out (DESIGN.md rule 2).

Providers translate, nothing more. Retries and HTTP belong to the official SDKs;
loop decisions belong to the runner and policy modules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from amos.messages import Message, ToolCallPart, Usage
from amos.tools.base import ToolSpec

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "refusal", "error"]


@dataclass(frozen=True)
class ModelRequest:
    """One model call as the runner builds it.

    Attributes:
        system: system prompt text (built-in prompt + project instructions).
        messages: the neutral conversation to send.
        tools: tools offered to the model.
        max_output_tokens: output cap for the call (tokens), None for the provider default.
        purpose: ``turn`` for a loop step; ``summary`` for a host request (compaction)
            that must not consume a scripted turn.
    """

    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    max_output_tokens: int | None = None
    purpose: Literal["turn", "summary"] = "turn"


@dataclass(frozen=True)
class TextDeltaEvent:
    """A piece of assistant text, as it streams."""

    text: str


@dataclass(frozen=True)
class ToolCallEvent:
    """One complete tool call (arguments fully assembled)."""

    call: ToolCallPart


@dataclass(frozen=True)
class FinishEvent:
    """The end of a model call: why it finished and what it used.

    Attributes:
        finish_reason: neutral finish reason: ``stop`` (an answer, or calls from a
            provider that has no tool-call reason), ``tool_calls``, ``length`` (cut off by
            the output limit: calls of the turn never run), ``content_filter``,
            ``refusal``, ``error`` (the model produced something unusable, e.g. Gemini's
            ``MALFORMED_FUNCTION_CALL``).
        usage: usage the provider reported (or estimated), ``model_calls`` = 1.
        refusal: refusal text when the model refused.
        detail: the provider's own finish reason or error text, for the stop receipt.
        provider_details: provider leftovers for the whole assistant turn (stored on its
            message under the provider's key, e.g. Gemini text-part signatures).
        usage_reported: False when the provider reported no usage at all (llama.cpp's
            server, a stream without a usage chunk): the host then estimates the counts
            and marks them estimated (issue 16 "Unknown usage is unknown").
    """

    finish_reason: FinishReason
    usage: Usage = field(default_factory=Usage)
    refusal: str | None = None
    detail: str | None = None
    provider_details: dict | None = None
    usage_reported: bool = True


ProviderEvent = TextDeltaEvent | ToolCallEvent | FinishEvent


@runtime_checkable
class Provider(Protocol):
    """A model behind one protocol.

    Attributes:
        provider_name: ``scripted``, ``openai``, ``anthropic``, ``google``,
            ``openai-compatible``.
        model_name: the model id as the user selected it.
    """

    provider_name: str
    model_name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        """Make one model call and stream its events; the last one is a ``FinishEvent``.

        Raises:
            ProviderError: the call failed (after the SDK's own retries).
        """
        ...
