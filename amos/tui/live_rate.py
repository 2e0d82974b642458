"""Tokens per second of the reply streaming now, for the TUI status bar (issue 23).

The receipts' ``output_tokens_per_s`` is known only once a model call ends; a local model
can stream one reply for minutes, so while text streams the status bar shows a live
estimate instead: characters streamed so far over 4 (amos's offline estimate,
:data:`amos.context.CHARS_PER_TOKEN`), over the seconds since the call's first text
delta — the same span the receipt measures. Shown with ``~`` (an estimate).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from amos.messages import MIN_RATE_S

CHARS_PER_TOKEN = 4
"""Characters per estimated token (as amos's offline estimator)."""


class LiveRate:
    """The streaming rate of one model call's text.

    Args:
        clock: monotonic seconds (injectable for tests).

    Example::

        rate = LiveRate()
        rate.feed("Hello ")   # each TextDelta's text
        rate.value()          # tokens per second, or None under 0.1 s of streaming
        rate.reset()          # a new model call (a step started) or the run ended
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._first: float | None = None
        self._chars = 0

    def reset(self) -> None:
        """Forget the call's text (the next delta starts a new measurement)."""
        self._first = None
        self._chars = 0

    def feed(self, text: str) -> None:
        """Count one streamed text delta (characters)."""
        if not text:
            return
        if self._first is None:
            self._first = self._clock()
        self._chars += len(text)

    def value(self) -> float | None:
        """Estimated output tokens per second so far, or None before :data:`MIN_RATE_S`
        seconds of streaming (or with no text yet)."""
        if self._first is None:
            return None
        elapsed = self._clock() - self._first
        if elapsed < MIN_RATE_S:
            return None
        return math.ceil(self._chars / CHARS_PER_TOKEN) / elapsed
