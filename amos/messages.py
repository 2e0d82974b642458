"""Provider-neutral conversation model.

Messages are small frozen pydantic models; parts form a discriminated union on
``part_kind`` and one ``TypeAdapter`` loads and saves a whole history (STYLE.md §2).
This is also the transcript format of ``session.json``.

Roles: ``user`` (prompts and host feedback), ``assistant`` (model turns), ``tool``
(one tool result per message, correlated by ``call_id``) — the roles the scripted
provider's ``last_message_role`` matcher sees (spec/scripted-provider.md).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_serializer, model_validator


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Frozen):
    """Plain text written by a person, the host or the model."""

    part_kind: Literal["text"] = "text"
    text: str


class ToolCallPart(_Frozen):
    """One tool call the model asked for.

    Attributes:
        call_id: provider call id (generated when the provider sent none).
        tool_name: name of the tool.
        arguments: the decoded JSON arguments, or None when ``raw_arguments`` could not
            be decoded.
        raw_arguments: the literal argument string the model sent, kept only when it
            was not valid JSON (so the model can be told exactly what was wrong).
        provider_details: provider leftovers (signatures, item ids) needed to echo the
            call back verbatim; never read by the core.
    """

    part_kind: Literal["tool_call"] = "tool_call"
    call_id: str
    tool_name: str
    arguments: Any = None
    raw_arguments: str | None = None
    provider_details: dict[str, Any] | None = None


class ToolResultPart(_Frozen):
    """The result of one tool call, as the model sees it.

    Attributes:
        call_id: id of the tool call this answers.
        tool_name: name of the tool.
        content: the text the model sees (capped by ``tools.max_output_bytes``).
        is_error: True for every status other than ``succeeded``.
        status: outcome status of spec/tools.md (``succeeded``, ``failed``, ``denied``,
            ``blocked``, ``cancelled``, ``timed_out``, ``not_started``).
        evidence_id: id of the durable evidence record, when evidence is enabled.
        evidence: the record's full reference (``{version, id, sha256, size,
            acknowledgement}``) once acknowledged.
        evidence_error: why storing the evidence failed; the raw ``content`` is then
            *protected*: never dropped, truncated or compacted until the host
            acknowledges a repaired record (``Host.acknowledge_tool_evidence``).
        projected: True when ``content`` is a projection (summary + evidence envelope)
            rather than the raw result.
    """

    part_kind: Literal["tool_result"] = "tool_result"
    call_id: str
    tool_name: str
    content: str
    is_error: bool = False
    status: str = "succeeded"
    evidence_id: str | None = None
    evidence: dict[str, Any] | None = None
    evidence_error: str | None = None
    projected: bool = False

    @property
    def protected(self) -> bool:
        """True for a raw result whose evidence storage failed (and was not acknowledged since)."""
        return self.evidence_error is not None and self.evidence is None


Part = Annotated[TextPart | ToolCallPart | ToolResultPart, Field(discriminator="part_kind")]


class Message(_Frozen):
    """One message of the neutral conversation.

    Attributes:
        role: ``user``, ``assistant`` or ``tool``.
        parts: text, tool-call or tool-result parts.
        kind: what produced a ``user`` message: ``prompt`` (a person), ``feedback``
            (host feedback such as a failed completion check), ``summary`` (a
            compaction summary standing for older messages) — host messages are
            labelled so model text can never pass for them.
        provider_details: provider leftovers for the whole message.
        partial: why an assistant turn is incomplete — ``error`` (the provider failed
            mid-stream), ``cancelled`` (Ctrl+C or the run's time limit) or ``doom_loop``
            (the ladder stopped a runaway stream) — or None for a whole turn (issue 23).
            A partial turn keeps only its text (masked, as streamed); requests carry it
            marked incomplete (:func:`amos.context.build_request`). Saved only when set.
    """

    role: Literal["user", "assistant", "tool"]
    parts: tuple[Part, ...] = ()
    kind: Literal["prompt", "feedback", "summary", "turn", "result"] = "prompt"
    provider_details: dict[str, Any] | None = None
    partial: Literal["error", "cancelled", "doom_loop"] | None = None

    @model_serializer(mode="wrap")
    def _serialize(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and self.partial is None:
            data.pop("partial", None)  # present only when set: whole turns keep the session shape
        return data

    @property
    def text(self) -> str:
        """Concatenated text of the text parts (``""`` when there are none)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The tool-call parts, in order."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        """The tool-result parts, in order."""
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    @classmethod
    def user(cls, text: str, *, kind: Literal["prompt", "feedback"] = "prompt") -> Message:
        """A user message with one text part."""
        return cls(role="user", parts=(TextPart(text=text),), kind=kind)

    @classmethod
    def tool_result(cls, result: ToolResultPart) -> Message:
        """A ``tool`` message carrying one tool result."""
        return cls(role="tool", parts=(result,), kind="result")


MIN_RATE_S = 0.1
"""Least generation time a tokens-per-second figure is given for (seconds)."""


class Usage(BaseModel):
    """Token usage, added up across model calls (STYLE.md §4).

    Attributes:
        input_tokens: prompt tokens (tokens).
        output_tokens: completion tokens (tokens).
        cached_tokens: input tokens served from the provider's prompt cache (tokens;
            included in ``input_tokens``).
        reasoning_tokens: hidden reasoning tokens (tokens; included in ``output_tokens``).
        model_calls: number of model calls counted.
        cost_usd: price of the counted calls whose model ``genai-prices`` knows (US
            dollars); None when no counted call had a known price — never a guess.
        estimated: True when some counted call's tokens come from amos's offline
            estimator because the provider reported no usage (the counts stay integers;
            screens show them with ``~``) — issue 16 "Unknown usage is unknown".
        generation_s: seconds the timed model calls spent producing their output: from
            the first streamed text delta to the end of each call, or the whole call when
            fewer than two text deltas came (a non-streamed reply, a tool-call-only turn).
        generated_tokens: output tokens of those timed calls (tokens; estimated ones too).

    ``output_tokens_per_s`` (:attr:`output_tokens_per_s`) is derived, and saved with the
    two timing fields only once it can be given (issue 23: local users want the speed).
    """

    model_config = ConfigDict(extra="forbid")

    TOKEN_FIELDS: ClassVar[tuple[str, ...]] = (
        "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "model_calls")

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    model_calls: int = 0
    cost_usd: float | None = None
    estimated: bool = False
    generation_s: float = 0.0
    generated_tokens: int = 0

    @model_validator(mode="before")
    @classmethod
    def _derived(cls, data: Any) -> Any:
        if isinstance(data, dict) and "output_tokens_per_s" in data:
            data = {k: v for k, v in data.items() if k != "output_tokens_per_s"}  # derived, not stored
        return data

    @model_serializer(mode="wrap")
    def _serialize(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            if not self.estimated:
                data.pop("estimated", None)  # present only when true: the shape stays what scripts parse
            rate = self.output_tokens_per_s
            if rate is None:
                data.pop("generation_s", None)
                data.pop("generated_tokens", None)
            else:
                data["generation_s"] = round(self.generation_s, 3)
                data["output_tokens_per_s"] = rate
        return data

    @property
    def output_tokens_per_s(self) -> float | None:
        """Output tokens per second of the timed calls (one decimal), or None while under
        :data:`MIN_RATE_S` of generation was timed (an offline script's instant replies)."""
        if self.generation_s < MIN_RATE_S or self.generated_tokens <= 0:
            return None
        return round(self.generated_tokens / self.generation_s, 1)

    @property
    def total_tokens(self) -> int:
        """input + output tokens."""
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        """Add ``other`` into this usage in place."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_tokens += other.cached_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.model_calls += other.model_calls
        self.generation_s += other.generation_s
        self.generated_tokens += other.generated_tokens
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd
        self.estimated = self.estimated or other.estimated

    def since(self, start: Usage) -> Usage:
        """The usage added after ``start`` (a copy of this usage taken earlier)."""
        delta = Usage(**{name: getattr(self, name) - getattr(start, name) for name in self.TOKEN_FIELDS})
        if self.cost_usd is not None:
            delta.cost_usd = self.cost_usd - (start.cost_usd or 0.0)
        delta.estimated = self.estimated
        delta.generation_s = max(0.0, self.generation_s - start.generation_s)
        delta.generated_tokens = max(0, self.generated_tokens - start.generated_tokens)
        return delta


MESSAGES_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
"""Loads and saves a whole conversation: ``MESSAGES_ADAPTER.validate_python(data)``."""
