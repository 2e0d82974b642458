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
   replaced wherever it appears inside any string, keys included — as itself and in
   its common encodings (issue 17 item 3, :func:`encoded_forms`): base64 and base64url
   at all three byte alignments (so the key inside a longer encoded text is caught),
   hex in either case, and URL-encoding; each of them also when whitespace (a line
   break from ``base64``'s wrapping, ``fold``, one piece per line) is put between its
   characters. Values shorter than :data:`MIN_SECRET_LENGTH` are never masked.

This is not a universal secret detector: arbitrary sensitive text needs host policy.
Not covered: other encodings (base32, gzip, rot13, reversed text), a key split by
anything but whitespace, and a part of a key shorter than the whole. Note that rule 1
also hides pagination tokens such as ``next_page_token``.

One :class:`SecretMasker` per secret set is built once and cached
(:func:`masker_for`): the masker runs on every tool result and every streamed delta,
so text holding none of the forms costs one UTF-8 encode, one ``bytes.translate`` and a
substring test per form (``benchmarks/masking.py``); the full pattern is compiled on
first need.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8
"""Shorter secret values are never masked. Eight characters: provider keys are 20 or
more, while shorter values (a 4-letter password, a short word) occur in ordinary text,
and their encoded forms get shorter still (the base64 of 4 bytes at an odd alignment
keeps only 3-4 characters that depend on the secret alone), so masking them would
shred unrelated text; from 8 characters every form is at least 9 characters long."""
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


_SEPARATOR_BYTES = b" \t\r\n\f\v"
_SEPARATOR_RUN = "[ \\t\\r\\n\\f\\v]*"


def _base64_cores(data: bytes) -> list[str]:
    """The base64 characters that depend on ``data`` alone, for each of the three byte
    alignments ``data`` can have inside a longer encoded text."""
    cores = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data).decode("ascii").rstrip("=")
        first = -(-8 * shift // 6)  # the first character made of data bits only
        last = 8 * (shift + len(data)) // 6  # one past the last such character
        cores.append(encoded[first:last])
    return cores


def encoded_forms(secret: str) -> tuple[str, ...]:
    """Every form of ``secret`` the masker looks for (issue 17 item 3).

    Returns:
        The value itself; its UTF-8 bytes in base64 and base64url, each at the three
        byte alignments (only the characters that depend on the secret alone, so the
        secret is found inside a longer encoded text); hex, lower and upper case;
        URL-encoding (``quote``/``quote_plus``, with and without ``/`` kept, upper- and
        lower-case escapes, and every byte escaped) when it differs from the value. Empty when ``secret`` is shorter than
        :data:`MIN_SECRET_LENGTH`.
    """
    if not isinstance(secret, str) or len(secret) < MIN_SECRET_LENGTH:
        return ()
    data = secret.encode("utf-8", "surrogatepass")
    forms = {secret}
    for core in _base64_cores(data):
        forms.add(core)
        forms.add(core.translate(_URLSAFE))
    hexed = binascii.hexlify(data).decode("ascii")
    forms.update((hexed, hexed.upper()))
    for quoted in (quote(secret, safe=""), quote(secret), quote_plus(secret, safe=""), quote_plus(secret)):
        forms.add(quoted)
        forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quoted))
    every = "".join(f"%{byte:02X}" for byte in data)  # every byte escaped, as some encoders do
    forms.update((every, every.lower()))
    return tuple(sorted(forms, key=lambda f: (-len(f), f)))


_URLSAFE = str.maketrans("+/", "-_")


class SecretMasker:
    """Masks a fixed set of secret values and their encoded forms in text.

    Built once per secret set (:func:`masker_for`). Text that contains none of the
    forms, even with whitespace removed, is returned as it is after one UTF-8 encode,
    one ``bytes.translate`` and one substring test per form (the fast path). Otherwise
    one regular expression of the forms found replaces them, whitespace allowed between
    their characters, longest first; it is compiled on first need and kept per set of
    forms found, so a secret set never pays for compiling forms that never occur.

    Args:
        secrets: the secret values; those shorter than :data:`MIN_SECRET_LENGTH`
            characters are ignored.
    """

    def __init__(self, secrets: Iterable[str]):
        forms: set[str] = set()
        for secret in secrets:
            forms.update(encoded_forms(secret))
        self.forms: tuple[str, ...] = tuple(sorted(forms, key=lambda f: (-len(f), f)))
        self._needles = tuple(f.encode("utf-8", "surrogatepass") for f in self.forms)
        self._shortest = min((len(f) for f in self.forms), default=0)
        self._patterns: dict[tuple[str, ...], re.Pattern[str]] = {}

    def pattern(self, forms: tuple[str, ...] | None = None) -> re.Pattern[str]:
        """The compiled pattern of ``forms`` (default: every form), whitespace allowed
        between characters, longest first."""
        forms = self.forms if forms is None else forms
        compiled = self._patterns.get(forms)
        if compiled is None:
            compiled = re.compile("|".join(_SEPARATOR_RUN.join(re.escape(c) for c in form) for form in forms))
            if len(self._patterns) < 64:
                self._patterns[forms] = compiled
        return compiled

    def found(self, text: str) -> tuple[str, ...]:
        """The forms ``text`` may hold (whitespace between characters ignored), longest
        first; empty on the fast path."""
        if not self.forms or len(text) < self._shortest:  # a short delta cannot hold a whole form
            return ()
        # As UTF-8 bytes with the separators the pattern allows deleted: both in C.
        squeezed = text.encode("utf-8", "surrogatepass").translate(None, _SEPARATOR_BYTES)
        return tuple(form for form, needle in zip(self.forms, self._needles, strict=True) if needle in squeezed)

    def might_hold(self, text: str) -> bool:
        """False when ``text`` surely holds no form (the fast path); True when it may."""
        return bool(self.found(text))

    def mask(self, text: str, mask: str = REDACTED) -> str:
        """``text`` with every form of every secret replaced by ``mask``."""
        forms = self.found(text)
        if not forms:
            return text
        return self.pattern(forms).sub(mask, text)


@lru_cache(maxsize=64)
def _cached(values: tuple[str, ...]) -> SecretMasker:
    return SecretMasker(values)


@lru_cache(maxsize=64)
def _cached_tuple(secrets: tuple[Any, ...]) -> SecretMasker:
    return _normalized(secrets)


def _normalized(secrets: Iterable[Any]) -> SecretMasker:
    return _cached(tuple(sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH})))


def masker_for(secrets: Iterable[str]) -> SecretMasker:
    """The (cached) masker of a secret set; the same set always gives the same object.

    Args:
        secrets: secret values in any order; values that are not strings or are shorter
            than :data:`MIN_SECRET_LENGTH` characters are ignored. A tuple (what the
            runner passes on every call) is looked up as it is, without normalizing.
    """
    if type(secrets) is tuple:
        try:
            return _cached_tuple(secrets)
        except TypeError:  # an unhashable item
            pass
    return _normalized(secrets)


class _Redactor:
    def __init__(self, masker: SecretMasker):
        self.masker = masker
        self.active: set[int] = set()

    def text(self, value: str) -> str:
        return self.masker.mask(value)

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
        secrets: secret strings to hide wherever they occur inside strings (dict
            keys and values, nested), as themselves and in their encoded forms
            (:func:`encoded_forms`); values shorter than :data:`MIN_SECRET_LENGTH`
            characters are ignored.

    Returns:
        A new structure (``value`` is not modified); containers keep their types.
        ``None`` under a credential key stays ``None``.

    Raises:
        ValueError: ``value`` contains a cycle or nests deeper than 256 levels.
    """
    return _Redactor(masker_for(secrets)).value(value, 0)


def redact_text(text: str, secrets: Iterable[str], *, mask: str = REDACTED) -> str:
    """``text`` with every given secret value (>= :data:`MIN_SECRET_LENGTH` characters)
    and each of its encoded forms (:func:`encoded_forms`) replaced by ``mask``.

    The one masker of amos: tool results, streamed text, prompts and provider error
    messages (:func:`amos.providers.common.scrub`) all go through it.
    """
    return masker_for(secrets).mask(text, mask)


def mask_environment_secrets(text: str) -> str:
    """``text`` with the values of the provider key variables and of every environment
    variable named like a secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``)
    masked as ``****``, plain or encoded — for error lines the CLI prints before (or
    without) a host, e.g. a session id or a path typed with a key in it (issue 17).
    """
    values = environment_secret_values()
    return redact_text(text, values, mask="****") if values else text


def environment_secret_values() -> set[str]:
    """Values of the environment variables named like secrets (``*KEY*``, ``*TOKEN*``,
    ``*SECRET*``, ``*PASSWORD*``), at least :data:`MIN_SECRET_LENGTH` characters."""
    import os

    return {v for name, v in os.environ.items()
            if v and len(v) >= MIN_SECRET_LENGTH and any(w in name.upper() for w in _SECRET_NAME_WORDS)}


_SECRET_NAME_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
