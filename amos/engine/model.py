"""The model a host talks to, and one model turn streamed into the transcript.

:class:`ModelSlot` holds the provider in force (``/model`` switches it; the doom-loop
ladder may run one turn on its escalation model). :func:`stream_turn` makes one model
call: it streams the text deltas out as events — masked as they arrive, so a key is
never on the screen (issue 17, item 1) — collects the tool calls (cleaned, masked and
given ids unique in the session), and returns what the turn ended with. It appends
nothing itself; the loop records the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amos.engine.masking import Masker
from amos.engine.state import RunState
from amos.errors import AmosError, ProviderError
from amos.events import Notice, TextDelta
from amos.messages import Message, ToolCallPart
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
    """

    text: str = ""
    calls: list[ToolCallPart] = field(default_factory=list)
    finish: FinishEvent | None = None
    error: ProviderError | None = None


async def stream_turn(run: RunState, provider: Provider, request: ModelRequest, masker: Masker,
                      used_ids: set[str]) -> Turn:
    """Make one model call, emitting each text delta (masked) as a ``TextDelta`` event.

    Args:
        run: the execution (events go out through it).
        provider: the provider of this turn.
        request: the request to send.
        masker: masks secrets in the text and the calls.
        used_ids: call ids already used in the session (a reused id is suffixed ``~N``).

    Returns:
        The :class:`Turn`. Unreadable wire data (any exception other than
        ``ProviderError`` from the provider) becomes a ``bad_response`` provider error.
    """
    turn = Turn()
    stream = masker.stream()
    pieces: list[str] = []
    try:
        async for event in provider.stream(request):
            if isinstance(event, TextDeltaEvent):
                shown = stream.feed(event.text)
                if shown:
                    pieces.append(shown)
                    run.emit(TextDelta(text=shown))
            elif isinstance(event, ToolCallEvent):
                turn.calls.append(_unique(masker.call(event.call), used_ids, turn.calls))
            elif isinstance(event, FinishEvent):
                turn.finish = event
    except Exception as exc:  # noqa: BLE001 - unreadable wire data is a provider error
        if not isinstance(exc, ProviderError):
            log.debug("provider %s produced an unreadable response", provider.provider_name, exc_info=True)
            exc = unreadable(provider, exc, masker)
        turn.error = exc
    rest = stream.flush()
    if rest:
        pieces.append(rest)
        if turn.error is None:
            run.emit(TextDelta(text=rest))
    turn.text = "".join(pieces)
    return turn


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
    """The assistant message recording a finished turn."""
    from amos.messages import TextPart

    parts: list[Any] = [TextPart(text=turn.text)] if turn.text else []
    parts.extend(turn.calls)
    details = turn.finish.provider_details if turn.finish is not None else None
    return Message(role="assistant", kind="turn", parts=tuple(parts), provider_details=details or None)
