"""The doom-loop text rung on text still streaming (issue 23).

The text rung (spec/doom-loop-behaviour.md §5) scores a response when it ends, so a
model looping inside one answer used to run to its output limit first (a base model ran
4,079 tokens for 467 s). :class:`TextStreamWatch` scores the tail of a response while it
streams and says when the ladder reaches ``stop``, so the caller can close the stream.

Bounded work per delta: the watch keeps only the tail the detector would look at (at most
two windows of ``64 × max_window_tokens`` characters) and scans it at most once per delta,
only when the delta completes a token (it holds whitespace) and at least
:data:`SCAN_EVERY_CHARS` characters arrived since the last scan. The scanned text ends at
a token boundary, so a half-streamed word never hides a repetition.

Pure code: no I/O; it is handed the scoring function (``DoomLoopMonitor.preview_text_repetition``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from amos.policy.doom_loop_text import _ES_WHITESPACE_CHARS, CHARS_PER_WINDOW_TOKEN

__all__ = ["MAX_TAIL_CHARS", "SCAN_EVERY_CHARS", "TextStreamWatch"]

SCAN_EVERY_CHARS = 48
"""Fewest characters streamed between two scans (about eight English words)."""

MAX_TAIL_CHARS = 1 << 20
"""Most characters of tail kept whatever ``max_window_tokens`` says (1 Mi characters)."""

_SPACES = frozenset((" ", *_ES_WHITESPACE_CHARS))


class TextStreamWatch:
    """Watches one streamed response for a repetition the ladder would stop.

    Args:
        preview: scores text without changing any state and returns a verdict (an
            object with an ``action``) or None.
        window_tokens: the text options' ``max_window_tokens`` (tokens); the tail kept is
            ``64 ×`` that many characters, at most :data:`MAX_TAIL_CHARS`.
        scan_every_chars: fewest characters between two scans.

    Example::

        watch = TextStreamWatch(monitor.preview_text_repetition, 800)
        for delta in stream:
            if (verdict := watch.feed(delta)) is not None:
                break  # verdict.action == "stop"
    """

    def __init__(self, preview: Callable[[str], Any], window_tokens: Any,
                 scan_every_chars: int = SCAN_EVERY_CHARS) -> None:
        self._preview = preview
        window = window_tokens if isinstance(window_tokens, int | float) and not isinstance(window_tokens, bool) else 0
        if not math.isfinite(window) or window * CHARS_PER_WINDOW_TOKEN > MAX_TAIL_CHARS:
            self._keep = MAX_TAIL_CHARS
        else:
            self._keep = max(CHARS_PER_WINDOW_TOKEN, math.ceil(max(1, window) * CHARS_PER_WINDOW_TOKEN))
        self._every = max(1, scan_every_chars)
        self._tail = ""
        self._since = 0
        self.scans = 0
        """Scans made so far (for tests and benchmarks)."""

    def feed(self, delta: str) -> Any:
        """Take the next piece of the response; return the ``stop`` verdict, else None.

        Args:
            delta: text as shown (masked), any length.

        Returns:
            The preview's verdict when its action is ``stop``; None otherwise (also
            for weaker rungs: those act when the turn ends, as before).
        """
        if not delta:
            return None
        if len(delta) > self._keep:
            delta = delta[-self._keep:]
        self._tail += delta
        if len(self._tail) > 2 * self._keep:
            self._tail = self._tail[-self._keep:]
        self._since += len(delta)
        if self._since < self._every:
            return None
        boundary = _last_space(delta)
        if boundary < 0:
            return None  # the delta completes no token: wait for one that does
        end = len(self._tail) - len(delta) + boundary
        self._since = 0
        self.scans += 1
        verdict = self._preview(self._tail[:end])
        return verdict if verdict is not None and getattr(verdict, "action", None) == "stop" else None


def _last_space(text: str) -> int:
    """Index of the last ES whitespace character of ``text``, or -1."""
    for index in range(len(text) - 1, -1, -1):
        if text[index] in _SPACES:
            return index
    return -1
