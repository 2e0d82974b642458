"""Text rules of the doom-loop detector (spec/doom-loop-behaviour.md §5).

Whitespace, normalisation and the within-response repetition scan, split out of
:mod:`amos.policy.doom_loop` (which re-exports :func:`detect_text_repetition`). The rules
follow ECMAScript, not Python, because the reference detector is JavaScript and the
verdicts must agree across ports:

- whitespace is the ES ``\\s`` set: it includes U+FEFF and excludes U+0085 and
  U+001C–U+001F, which Python's ``\\s`` and ``str.split()`` treat the other way round;
- string lengths are counted in UTF-16 code units, so a character outside the Basic
  Multilingual Plane (an emoji) counts 2.

Pure code: no I/O, no import-time side effects, and nothing here raises on any ``str``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHARS_PER_WINDOW_TOKEN",
    "DEFAULT_TEXT_OPTIONS",
    "DoomLoopTextOptions",
    "TextRepetition",
    "detect_text_repetition",
    "normalize_text",
    "split_tokens",
]

CHARS_PER_WINDOW_TOKEN = 64
"""UTF-16 code units of tail kept per window token before tokenizing (spec §5 step 1)."""

# ES WhiteSpace + LineTerminator, i.e. what /\s/ and String.prototype.trim match.
_ES_WHITESPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_WHITESPACE_RUN = re.compile(f"[{_ES_WHITESPACE}]+")


@dataclass(frozen=True)
class DoomLoopTextOptions:
    """Resolved text-detection options (spec §1 "Text defaults"; config ``doom_loop.text``).

    Attributes:
        enabled: Master switch for both text detectors (text-repetition and text-streak).
        max_period_tokens: Longest repeating block looked for, in tokens.
        min_repeats: Consecutive copies of the block needed.
        min_covered_tokens: Tokens the copies must cover (repeats × period).
        max_window_tokens: Only the trailing tokens of a response are scanned.
        stop_repeats: Copies of one block in one response at which a ``text-repetition``
            verdict reaches *stop*, when that is earlier than ``ladder.stop`` (amos's
            option, issue 23; None, the reference's behaviour: the ladder's ``stop``).
            Not used by :func:`detect_text_repetition`; see
            :func:`amos.policy.doom_loop_config.text_rungs`.

    Values are not range-checked when resolved (spec §1); :func:`detect_text_repetition`
    tolerates any value (see there).
    """

    enabled: bool = True
    max_period_tokens: Any = 16
    min_repeats: Any = 4
    min_covered_tokens: Any = 12
    max_window_tokens: Any = 400
    stop_repeats: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The options as a plain dict with the config file's keys."""
        return {
            "enabled": self.enabled,
            "max_period_tokens": self.max_period_tokens,
            "min_repeats": self.min_repeats,
            "min_covered_tokens": self.min_covered_tokens,
            "max_window_tokens": self.max_window_tokens,
            "stop_repeats": self.stop_repeats,
        }


DEFAULT_TEXT_OPTIONS = DoomLoopTextOptions()
"""Text defaults: enabled, period 16, 4 repeats, 12 covered tokens, 400-token window, stop at the ladder's."""


@dataclass(frozen=True)
class TextRepetition:
    """A token block repeating at the tail of a response (spec header, §5).

    Attributes:
        repeats: Consecutive copies of the block; feeds the ladder as the streak.
        period_tokens: Block length, in whitespace-delimited tokens.
        covered_tokens: ``repeats * period_tokens``.
        sample: The block itself, its tokens joined by single spaces.
    """

    repeats: int
    period_tokens: int
    covered_tokens: int
    sample: str

    def to_dict(self) -> dict[str, Any]:
        """The result as plain JSON data (snake_case keys)."""
        return {
            "repeats": self.repeats,
            "period_tokens": self.period_tokens,
            "covered_tokens": self.covered_tokens,
            "sample": self.sample,
        }


_ES_WHITESPACE_CHARS = tuple(
    chr(code)
    for code in (*range(0x9, 0xE), 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029)
    + (0x202F, 0x205F, 0x3000, 0xFEFF)
)
"""Every ES whitespace character but the space itself (the set of ``_ES_WHITESPACE``)."""


def normalize_text(text: str) -> str:
    """Collapse each run of ES whitespace to one space and trim (spec §5).

    Equivalent to ``text.replace(/\\s+/g, " ").trim()`` in JavaScript, but written with
    ``str.replace`` passes: a 5 MB response normalises in about 10 ms where one regex
    substitution takes about 200 ms. Runs of spaces halve on each pass, so a run of
    length L takes log2(L) passes.

    Args:
        text: Assistant text.

    Returns:
        The normalised text; empty when ``text`` is empty or only whitespace.
    """
    for char in _ES_WHITESPACE_CHARS:
        if char in text:
            text = text.replace(char, " ")
    while "  " in text:
        text = text.replace("  ", " ")
    return text.strip(" ")


def split_tokens(text: str) -> list[str]:
    """Split on runs of ES whitespace, dropping empty tokens (``trim().split(/\\s+/)``)."""
    return [token for token in _WHITESPACE_RUN.split(text) if token]


def _utf16_tail(text: str, budget: int) -> str:
    """The last ``budget`` UTF-16 code units of ``text`` (a JS ``slice(-budget)``).

    A surrogate pair cut in half leaves its low half as a lone surrogate, as in
    JavaScript; it then sits inside the first token and only affects that token.
    """
    if len(text) <= budget // 2:
        return text  # even if every character were astral it fits
    tail = text[-budget:]  # at least `budget` units, since each character is 1 or 2
    units = tail.encode("utf-16-le", "surrogatepass")
    if len(units) <= 2 * budget:
        return tail
    return units[-2 * budget :].decode("utf-16-le", "surrogatepass")


def _number(value: Any, default: float) -> float:
    """``value`` when it is a finite int/float (bools are not numbers), else ``default``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    if isinstance(value, float) and not math.isfinite(value):
        return default
    return value


def _option(options: Any, name: str) -> Any:
    if options is None:
        return None
    if isinstance(options, Mapping):
        return options.get(name)
    return getattr(options, name, None)


def detect_text_repetition(
    text: str, options: Mapping[str, Any] | DoomLoopTextOptions | None = None
) -> TextRepetition | None:
    """Find a token block repeating at the tail of ``text`` (spec §5 ``detect_text_repetition``).

    The shape of an in-response token doom loop ("I am stuck. I am stuck. …"):

    1. keep only the last ``64 × max_window_tokens`` UTF-16 code units (an emoji counts
       2), so a multi-megabyte response costs no more than a short one;
    2. trim, split on ES whitespace and keep the last ``max_window_tokens`` tokens;
    3. with fewer than ``max(min_covered_tokens, 2)`` tokens, there is no repetition;
    4. for each period ``p`` from 1 to ``min(max_period_tokens, n // 2)`` count the
       consecutive copies of the final ``p``-token block; ``p`` qualifies with
       ``repeats >= min_repeats`` and ``repeats * p >= min_covered_tokens``, and
       replaces the best only with strictly more covered tokens, so a tie keeps the
       smallest period ("no no no no no no" is 6 × 1, not 3 × 2).

    Blocks must repeat exactly: paraphrased loops are not detected.

    Args:
        text: The response text (not necessarily normalised). A non-``str`` is no text.
        options: A partial mapping of text options or a :class:`DoomLoopTextOptions`;
            missing or ``None`` fields take the defaults. Options are never range-checked
            upstream (spec §1), so here a value that is not a finite number takes its
            default, a window below 1 token is treated as 1 token, and fractions behave
            as in JavaScript (the token window and the period are floored). ``enabled`` is ignored: the
            caller decides whether to scan.

    Returns:
        The best :class:`TextRepetition`, or None when no block qualifies.
    """
    if not isinstance(text, str) or not text:
        return None
    defaults = DEFAULT_TEXT_OPTIONS
    max_period = _number(_option(options, "max_period_tokens"), defaults.max_period_tokens)
    min_repeats = _number(_option(options, "min_repeats"), defaults.min_repeats)
    min_covered = _number(_option(options, "min_covered_tokens"), defaults.min_covered_tokens)
    raw_window = max(1, _number(_option(options, "max_window_tokens"), defaults.max_window_tokens))
    window = math.floor(raw_window)

    budget = raw_window * CHARS_PER_WINDOW_TOKEN  # may overflow to inf for a huge float
    tail = text if budget >= 2 * len(text) else _utf16_tail(text, math.floor(budget))
    tokens = split_tokens(tail)[-window:]
    n = len(tokens)
    if n < max(min_covered, 2):
        return None

    best: TextRepetition | None = None
    last_period = min(math.floor(max_period), n // 2)
    for period in range(1, last_period + 1):
        block = tokens[n - period :]
        repeats = 1
        for start in range(n - 2 * period, -1, -period):
            if tokens[start : start + period] != block:
                break
            repeats += 1
        covered = repeats * period
        if repeats >= min_repeats and covered >= min_covered:
            if best is None or covered > best.covered_tokens:
                best = TextRepetition(repeats, period, covered, " ".join(block))
    return best
