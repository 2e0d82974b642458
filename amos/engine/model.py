"""The model a host talks to, and one model turn streamed into the transcript.

:class:`ModelSlot` holds the provider in force (``/model`` switches it; the doom-loop
ladder may run one turn on its escalation model). :func:`stream_turn` makes one model
call: it streams the text deltas out as events — masked as they arrive, so a key is
never on the screen (issue 17, item 1) — collects the tool calls (cleaned, masked and
given ids unique in the session), and returns what the turn ended with. It appends
nothing itself; the loop records the turn. A turn cut short — the provider failed
mid-stream, the run was cancelled, or the doom-loop watch stopped a runaway stream —
keeps the text streamed so far and says why (:attr:`Turn.partial`, issue 23).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amos.engine.masking import Masker
from amos.engine.state import RunState
from amos.errors import AmosError, ProviderError
from amos.events import Notice, TextDelta
from amos.messages import Message, ToolCallPart, Usage
from amos.providers.base import FinishEvent, ModelRequest, Provider, TextDeltaEvent, ToolCallEvent

log = logging.getLogger("amos.runner")


class ModelSlot:
    """The provider in force and how to build another.

    Args:
        provider: the session's provider.
        spec: its ``PROVIDER:MODEL`` string, shown to people.
        factory: builds a provider for a spec (``/model``, the escalation model), or None.
    """

    def __init__(self, provider: Provider, spec: str, factory: Callable[[str], Provider] | None):
        self.provider = provider
        self.spec = spec
        self.factory = factory

    def switch(self, spec: str) -> None:
        """Use ``spec`` from now on.

        Raises:
            SessionError: ``unsupported`` when no factory was given.
            UsageError / ConfigError: the model string or its provider is not usable.
        """
        from amos.errors import SessionError

        if self.factory is None:
            raise SessionError("unsupported", "switching models is not available here")
        self.provider = self.factory(spec)
        self.spec = spec

    def for_turn(self, run: RunState, escalation: str | None) -> Provider:
        """The provider of this request: the session's, or the doom-loop escalation model."""
        run.turn_model = self.spec
        if escalation is None or self.factory is None:
            return self.provider
        try:
            provider = self.factory(escalation)
        except AmosError as exc:
            run.emit(Notice(level="error", text=f"doom loop: cannot escalate to {escalation}: {exc}"))
            return self.provider
        run.emit(Notice(level="warning", text=f"doom loop: this turn runs on the escalation model {escalation}"))
        run.turn_model = escalation
        return provider


@dataclass
class Turn:
    """What one model call produced.

    Attributes:
        text: the turn's text, masked.
        calls: its tool calls (cleaned, masked, ids unique in the session).
        finish: the finish event, or None when the stream ended without one.
        error: the provider error the call ended with, or None.
        cancelled: the run was cancelled (Ctrl+C, its time limit) while the call streamed.
        stopped_by: what the stream watch returned when it stopped the stream (the
            doom-loop ladder's ``stop`` verdict), or None.
    """

    text: str = ""
    calls: list[ToolCallPart] = field(default_factory=list)
    finish: FinishEvent | None = None
    error: ProviderError | None = None
    cancelled: bool = False
    stopped_by: Any = None
    started: float = 0.0
    first_text: float | None = None
    ended: float = 0.0
    text_deltas: int = 0

    @property
    def generation_s(self) -> float:
        """Seconds the call spent producing output (``time.monotonic``): from its first
        text delta to its end, or the whole call when fewer than two text deltas came
        (a non-streamed reply or a tool-call-only turn: no way to leave the prompt out)."""
        if self.text_deltas >= 2 and self.first_text is not None:
            return max(0.0, self.ended - self.first_text)
        return max(0.0, self.ended - self.started)

    @property
    def partial(self) -> str | None:
        """Why the turn is incomplete (``cancelled``, ``doom_loop``, ``error``), or None
        when it ended with a finish event (the ``partial`` of its message, issue 23)."""
        if self.cancelled:
            return "cancelled"
        if self.stopped_by is not None:
            return "doom_loop"
        return "error" if self.error is not None else None


async def stream_turn(run: RunState, provider: Provider, request: ModelRequest, masker: Masker,
                      used_ids: set[str], watch: Callable[[str], Any] | None = None) -> Turn:
    """Make one model call, emitting each text delta (masked) as a ``TextDelta`` event.

    Args:
        run: the execution (events go out through it).
        provider: the provider of this turn.
        request: the request to send.
        masker: masks secrets in the text and the calls.
        used_ids: call ids already used in the session (a reused id is suffixed ``~N``).
        watch: called with each masked text delta as it is shown (bounded work per
            delta: :class:`~amos.policy.doom_loop_stream.TextStreamWatch`); a result
            other than None stops the stream at once (the provider's stream is closed,
            so its connection is) and becomes :attr:`Turn.stopped_by`.

    Returns:
        The :class:`Turn`. Unreadable wire data (any exception other than
        ``ProviderError`` from the provider) becomes a ``bad_response`` provider error;
        a cancellation while streaming is caught and marked (``cancelled``): the caller
        records the partial turn and cancels on.
    """
    turn = Turn()
    stream = masker.stream()
    pieces: list[str] = []
    turn.started = time.monotonic()
    events = provider.stream(request)
    try:
        async for event in events:
            if isinstance(event, TextDeltaEvent):
                if event.text:
                    turn.text_deltas += 1
                    if turn.first_text is None:
                        turn.first_text = time.monotonic()
                shown = stream.feed(event.text)
                if shown:
                    pieces.append(shown)
                    run.emit(TextDelta(text=shown))
                    if watch is not None and (verdict := watch(shown)) is not None:
                        turn.stopped_by = verdict
                        break
            elif isinstance(event, ToolCallEvent):
                turn.calls.append(_unique(masker.call(event.call), used_ids, turn.calls))
            elif isinstance(event, FinishEvent):
                turn.finish = event
    except asyncio.CancelledError:
        turn.cancelled = True
    except Exception as exc:  # noqa: BLE001 - unreadable wire data is a provider error
        if not isinstance(exc, ProviderError):
            log.debug("provider %s produced an unreadable response", provider.provider_name, exc_info=True)
            exc = unreadable(provider, exc, masker)
        turn.error = exc
    finally:
        turn.ended = time.monotonic()
        await _close(events)
    if turn.partial is None and (turn.finish is None or turn.finish.finish_reason == "error"):
        # No usable finish (a stream that just ended, a provider's "error" finish): the text
        # is a cut-off answer, kept partial like one cut by a broken connection (issue 23).
        said = turn.finish.detail if turn.finish is not None and turn.finish.detail else None
        turn.error = ProviderError("bad_response", said or "the stream ended without a finish reason")
    if turn.partial is not None:
        turn.calls, turn.finish = [], None  # calls of a cut turn never run
    rest = stream.flush()
    if rest:
        pieces.append(rest)
        if turn.partial in (None, "doom_loop"):
            run.emit(TextDelta(text=rest))
    turn.text = "".join(pieces)
    return turn


async def _close(events: Any) -> None:
    """Close a provider's stream we stopped reading (its HTTP response with it)."""
    aclose = getattr(events, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:  # noqa: BLE001 - closing a broken stream must not hide why it broke
        log.debug("closing the provider stream failed", exc_info=True)


def timed(usage: Usage, turn: Turn) -> Usage:
    """``usage`` of one call with its generation time and output tokens (tokens per second)."""
    return usage.model_copy(update={"generation_s": turn.generation_s, "generated_tokens": usage.output_tokens})


def unreadable(provider: Any, exc: Exception, masker: Masker) -> ProviderError:
    """A provider's unexpected exception as the ``bad_response`` error a turn gives."""
    what = masker.clean(" ".join(str(exc).split())[:200])
    name = getattr(provider, "provider_name", "the provider")
    return ProviderError("bad_response", f"{name}: the response could not be read ({type(exc).__name__}: {what})")


def _unique(call: ToolCallPart, used: set[str], turn_calls: list[ToolCallPart]) -> ToolCallPart:
    """``call`` with an id no earlier call of the session used (two models, or a model
    that reuses ids, must not make tool results ambiguous)."""
    taken = used | {c.call_id for c in turn_calls}
    if call.call_id not in taken:
        return call
    n = 2
    while f"{call.call_id}~{n}" in taken:
        n += 1
    return call.model_copy(update={"call_id": f"{call.call_id}~{n}"})


def assistant_message(turn: Turn) -> Message:
    """The assistant message recording a turn: a finished one whole; a partial one
    (:attr:`Turn.partial`) with its text only (masked, as streamed) and marked partial."""
    from amos.messages import TextPart

    parts: list[Any] = [TextPart(text=turn.text)] if turn.text else []
    if turn.partial is not None:
        return Message(role="assistant", kind="turn", parts=tuple(parts), partial=turn.partial)
    parts.extend(turn.calls)
    details = turn.finish.provider_details if turn.finish is not None else None
    return Message(role="assistant", kind="turn", parts=tuple(parts), provider_details=details or None)
