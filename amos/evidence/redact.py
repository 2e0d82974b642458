"""Credential redaction applied to arguments and results before they are stored.

Pure code (seed "Failure and recovery": common credential keys are redacted
recursively before storage). Two rules, applied together by :func:`redact`:

1. The value under a credential-looking key is replaced by ``"[REDACTED]"``, at any
   depth. Keys compare case-insensitively with ``-``, ``_``, ``.`` and spaces
   ignored: a key is a credential when it equals one of :data:`CREDENTIAL_KEYS` or
   ends with one of :data:`CREDENTIAL_SUFFIXES` (``OPENAI_API_KEY``, ``X-Api-Key``,
   ``github_token``, ``client_secret``…). Header lists written as
   ``{"name": "Authorization", "value": "…"}`` pairs are covered too.
2. Every given secret value (e.g. the provider key environment variables) is
   replaced wherever it appears inside any string, keys included.

This is not a universal secret detector: arbitrary sensitive text needs host policy.
Note that rule 1 also hides pagination tokens such as ``next_page_token``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 4
"""Shorter secret values are ignored (replacing them would shred ordinary text)."""
MAX_REDACT_DEPTH = 256

CREDENTIAL_KEYS = frozenset({
    "apikey", "authorization", "proxyauthorization", "token", "accesstoken",
    "refreshtoken", "idtoken", "authtoken", "sessiontoken", "bearer", "password",
    "passwd", "passphrase", "secret", "clientsecret", "privatekey", "secretkey",
    "cookie", "setcookie", "xapikey", "xauthtoken", "credentials", "credential",
    "auth", "awssecretaccesskey",
})
"""Normalized (lowercase, no ``-``/``_``/``.``/space) keys always redacted."""

CREDENTIAL_SUFFIXES = (
    "apikey", "token", "password", "passwd", "secret", "privatekey", "secretkey",
    "accesskey", "authorization", "cookie", "credentials",
)
"""Normalized key endings that make a key a credential (``github_token``…)."""

_STRIP = str.maketrans("", "", "-_. ")


def is_credential_key(key: str) -> bool:
    """True when ``key`` names a credential (see the module docstring)."""
    norm = key.translate(_STRIP).lower()
    return norm in CREDENTIAL_KEYS or norm.endswith(CREDENTIAL_SUFFIXES)


def secret_values(secrets: Iterable[str]) -> tuple[str, ...]:
    """The literal strings masked for ``secrets``, longest first (shorter than
    :data:`MIN_SECRET_LENGTH` characters: ignored)."""
    return tuple(sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH},
                        key=len, reverse=True))


def _secret_pattern(secrets: Iterable[str]) -> re.Pattern[str] | None:
    values = secret_values(secrets)
    if not values:
        return None
    return re.compile("|".join(re.escape(v) for v in values))


class _Redactor:
    def __init__(self, pattern: re.Pattern[str] | None):
        self.pattern = pattern
        self.active: set[int] = set()

    def text(self, value: str) -> str:
        if self.pattern is None:
            return value
        return self.pattern.sub(REDACTED, value)

    def value(self, value: Any, depth: int) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if not isinstance(value, dict | list | tuple):
            return value
        if depth >= MAX_REDACT_DEPTH:
            raise ValueError(f"value nested deeper than {MAX_REDACT_DEPTH} levels")
        if id(value) in self.active:
            raise ValueError("value contains a cycle")
        self.active.add(id(value))
        try:
            if isinstance(value, dict):
                return self.mapping(value, depth)
            items = [self.value(item, depth + 1) for item in value]
            return tuple(items) if isinstance(value, tuple) else items
        finally:
            self.active.discard(id(value))

    def mapping(self, value: dict[Any, Any], depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        pair_name = next((value[k] for k in ("name", "key", "header") if k in value), None)
        pair_secret = isinstance(pair_name, str) and is_credential_key(pair_name)
        for key, item in value.items():
            new_key = self.text(key) if isinstance(key, str) else key
            if isinstance(key, str) and item is not None and (
                is_credential_key(key) or (pair_secret and key == "value")
            ):
                out[new_key] = REDACTED
            else:
                out[new_key] = self.value(item, depth + 1)
        return out


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of ``value`` with credentials replaced by ``"[REDACTED]"``.

    Args:
        value: JSON-like data (dicts, lists, tuples, strings, numbers…); other
            objects are returned as they are (the store rejects them later).
        secrets: exact secret strings to hide wherever they occur inside strings
            (dict keys and values, nested); values shorter than
            :data:`MIN_SECRET_LENGTH` characters are ignored.

    Returns:
        A new structure (``value`` is not modified); containers keep their types.
        ``None`` under a credential key stays ``None``.

    Raises:
        ValueError: ``value`` contains a cycle or nests deeper than 256 levels.
    """
    return _Redactor(_secret_pattern(secrets)).value(value, 0)


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every given secret value (>= 4 characters) replaced."""
    return _Redactor(_secret_pattern(secrets)).text(text)
