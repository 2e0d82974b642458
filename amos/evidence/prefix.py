"""Evidence ids given by a unique prefix, like git's abbreviated hashes (issue 21).

A person types ``019adf3c-7a1`` (or ``019adf3c7a1``, any case) where an id is taken; it
names the one live record of the scope whose id starts with it. Ids are UUIDv7, whose
first 12 hex digits are the millisecond they were stored, so a prefix is short only
between records stored apart: :func:`short_id` gives the shortest unique one (at least
:data:`SHORT_MIN_HEX` digits) for display, and :func:`resolve_record_id` turns what was
typed back into the full id.

Works on any store through its public ``list`` (sorted by id, expired records skipped).
"""

from __future__ import annotations

import uuid
from typing import Any

from amos.evidence import codec
from amos.evidence.model import EvidenceError

MIN_PREFIX_HEX = 4
"""Fewest hex digits a typed prefix may have (shorter ones are refused, not guessed)."""
SHORT_MIN_HEX = 12
"""Fewest hex digits :func:`short_id` shows: the whole millisecond an id was stored in, so a
short id stays unique when later records arrive (only one stored in the same millisecond
can share it, and then a longer prefix is shown)."""
SHOWN_CANDIDATES = 10
"""Candidates an ambiguous prefix's error lists."""
_HEX = frozenset("0123456789abcdef")
_HYPHENS_AFTER = (8, 12, 16, 20)


def _hyphenated(hex_digits: str) -> str:
    """``hex_digits`` (a prefix of a 32-digit id) with the id's hyphens where they fall."""
    parts, start = [], 0
    for end in (*_HYPHENS_AFTER, 32):
        if start >= len(hex_digits):
            break
        parts.append(hex_digits[start:end])
        start = end
    text = "-".join(parts)
    return text + "-" if len(hex_digits) in _HYPHENS_AFTER else text


def _digits(text: str) -> str:
    return text.strip().lower().replace("-", "")


def matching_ids(store: Any, prefix: str, limit: int = SHOWN_CANDIDATES + 1) -> list[str]:
    """Live ids of ``store``'s scope starting with ``prefix`` (hex digits, hyphens optional), in order.

    Args:
        store: an evidence store.
        prefix: what was typed; not validated here beyond being hex.
        limit: most ids returned.
    """
    digits = _digits(prefix)
    if not digits or not set(digits) <= _HEX or len(digits) > 32:
        return []
    start = int(digits.ljust(32, "0"), 16)
    cursor = str(uuid.UUID(int=start - 1)) if start > 0 else None
    wanted = _hyphenated(digits).rstrip("-")
    found: list[str] = []
    page = store.list(cursor, min(max(limit, 1), 100))
    while True:
        for meta in page.entries:
            if not meta.id.startswith(wanted):
                return found
            found.append(meta.id)
            if len(found) >= limit:
                return found
        if not page.next_cursor:
            return found
        page = store.list(page.next_cursor, 100)


def resolve_record_id(store: Any, text: str) -> str:
    """The full id ``text`` names: a whole id, or a unique prefix of one (at least 4 hex digits).

    Args:
        store: an evidence store.
        text: an id or prefix as typed (hyphens optional, any case).

    Returns:
        The lowercase hyphenated id (a whole id is returned as given, normalised, without
        looking it up: reading it reports a missing record as before).

    Raises:
        EvidenceError: ``ambiguous`` (exit 2) for a prefix shorter than 4 digits or one
            several records start with (the message lists them); ``missing`` when no
            record starts with it; ``invalid`` when it is not hex.
    """
    digits = _digits(text)
    if len(digits) == 32:
        return codec.normalize_id(text.strip())
    if not digits or not set(digits) <= _HEX or len(digits) > 32:
        raise EvidenceError("invalid", f"not an evidence id or id prefix: {text.strip()[:64]!r}")
    if len(digits) < MIN_PREFIX_HEX:
        raise EvidenceError("ambiguous", f"evidence id prefix {text.strip()!r} is too short: give at least "
                                         f"{MIN_PREFIX_HEX} characters of the id (`amos evidence list` shows ids)")
    found = matching_ids(store, digits)
    if not found:
        raise EvidenceError("missing", f"no evidence id starts with {text.strip()!r} in this scope")
    if len(found) > 1:
        shown = ", ".join(found[:SHOWN_CANDIDATES]) + (" …" if len(found) > SHOWN_CANDIDATES else "")
        raise EvidenceError("ambiguous", f"evidence id prefix {text.strip()!r} matches {len(found)}"
                                         f"{'+' if len(found) > SHOWN_CANDIDATES else ''} records: {shown}; "
                                         "give more characters")
    return found[0]


def short_id(store: Any, record_id: str, min_hex: int = SHORT_MIN_HEX) -> str:
    """The shortest prefix of ``record_id`` (at least ``min_hex`` digits) no other live record shares.

    Args:
        store: the evidence store holding the record.
        record_id: a full id.
        min_hex: fewest hex digits shown.

    Returns:
        The hyphenated prefix (``019adf3c-7a1``); the whole id when the record is not
        in the store.
    """
    digits = _digits(record_id)
    lo, hi = max(1, min(min_hex, 32)), 32
    if matching_ids(store, digits[:hi], limit=1) != [codec.normalize_id(record_id)]:
        return record_id
    while lo < hi:  # uniqueness only grows with length: the shortest unique length, by bisection
        mid = (lo + hi) // 2
        if len(matching_ids(store, digits[:mid], limit=2)) == 1:
            hi = mid
        else:
            lo = mid + 1
    return _hyphenated(digits[:lo]).rstrip("-")
