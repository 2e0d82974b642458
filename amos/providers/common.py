"""Pieces every API provider shares: settings, call ids, argument decoding, errors.

Providers translate, nothing more (DESIGN.md rule 2); this module keeps the
translation rules that must be identical across them in one place:

- ``ProviderSettings``: what ``create_provider`` hands an adapter (never saved).
- ``decode_arguments``: one rule for argument strings, whatever the wire sent.
- ``generated_call_id``: stable ids for calls that arrive without one.
- ``error_kind``/``provider_error``: the neutral ``ProviderError`` kinds of issue 3,
  from an HTTP status and the provider's error text, with secrets scrubbed.
- ``details_for``/``with_details``: provider leftovers are stored under the
  provider's own key in ``provider_details``, so switching models (``/model``)
  drops what the target cannot take simply by not reading foreign keys.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from amos.errors import ProviderError
from amos.redact import mask_url

ERROR_KINDS = (
    "auth", "rate_limit", "overloaded", "timeout", "bad_request",
    "context_length", "server", "connection",
)

_CONTEXT_WORDS = (
    "context_length", "context length", "context window", "prompt is too long",
    "too many tokens", "maximum context", "input token count", "exceeds the maximum",
)


@dataclass(frozen=True)
class ProviderSettings:
    """Everything an API adapter needs to build its SDK client.

    Attributes:
        provider_name: ``openai``, ``openai-compatible``, ``anthropic`` or ``google``.
        model: the model id as the user selected it.
        api_key: the key read from the environment (None for a keyless local server).
            Never stored, logged or shown.
        base_url: API base URL, None for the SDK's default.
        max_retries: retries the SDK makes on transient errors (the SDK retries; amos
            never loops on an error the SDK already retried).
        timeout_s: per-request timeout, seconds.
        max_tokens: output cap per call, tokens (Anthropic requires one); None for
            the provider default.
        secrets: values that must never appear in an error message (the key, plus
            the value of every configured key variable set in the environment).
    """

    provider_name: str
    model: str
    api_key: str | None = None
    base_url: str | None = None
    max_retries: int = 2
    timeout_s: float = 600.0
    max_tokens: int | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def __repr__(self) -> str:  # the key must never be printed by accident
        return (f"ProviderSettings(provider_name={self.provider_name!r}, model={self.model!r}, "
                f"base_url={mask_url(self.base_url) if self.base_url else None!r})")


def decode_arguments(raw: Any) -> tuple[Any, str | None]:
    """Decode tool-call arguments as a provider sent them.

    Args:
        raw: a JSON string, ``""``/None (a no-argument call), or an already decoded
            object (some OpenAI-compatible servers send one).

    Returns:
        ``(arguments, raw_arguments)``: the decoded JSON object and None, or
        ``(None, raw)`` when the text is not valid JSON (the runner then answers
        the call with a tool error naming the problem; it never crashes).
    """
    if raw is None:
        return {}, None
    if isinstance(raw, (dict, list)):
        return raw, None
    if not isinstance(raw, str):
        return None, json.dumps(raw) if not isinstance(raw, bytes) else raw.decode("utf-8", "replace")
    if raw.strip() == "":
        return {}, None
    try:
        return json.loads(raw, parse_constant=_reject_constant), None
    except (ValueError, RecursionError):
        return None, raw  # NaN/Infinity are not JSON either: the model is told, nothing breaks later


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def generated_call_id(prefix: str, turn_seed: str, index: int) -> str:
    """A stable id for a call the provider sent without one.

    Args:
        prefix: short provider tag, e.g. ``call`` or ``gc``.
        turn_seed: text identifying the turn (e.g. a hash of the request), so the same
            recorded response always yields the same ids.
        index: the call's position in the turn (0-based).

    Returns:
        ``{prefix}_{12 hex}_{index}``: letters, digits, ``_`` only (valid for every
        provider's id pattern).
    """
    digest = hashlib.sha256(f"{turn_seed}\x00{index}".encode()).hexdigest()[:12]
    return f"{prefix}_{digest}_{index}"


def details_for(provider_details: dict[str, Any] | None, provider_name: str) -> dict[str, Any]:
    """The leftovers one provider stored on a part or message (``{}`` when none)."""
    if not provider_details:
        return {}
    value = provider_details.get(provider_name)
    return value if isinstance(value, dict) else {}


def with_details(provider_name: str, details: dict[str, Any]) -> dict[str, Any] | None:
    """``provider_details`` for a part: ``{provider_name: details}``, None when empty."""
    return {provider_name: details} if details else None


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with every secret value, and the value of every ``*KEY*``/``*TOKEN*``
    environment variable, masked as ``****`` — plain or encoded, through the one masker
    (:func:`amos.evidence.redact.redact_text`, issue 17 item 3)."""
    from amos.evidence.redact import redact_text

    values = set(secrets)
    for name, value in os.environ.items():
        if value and ("KEY" in name or "TOKEN" in name):
            values.add(value)
    return redact_text(text, values, mask="****")


def error_kind(status: int | None, message: str = "", *, code: str | None = None) -> str:
    """The neutral error kind for an HTTP status and the provider's error text.

    Args:
        status: HTTP status code, None for transport errors (then ``connection``).
        message: the provider's error message (checked for context-length wording).
        code: the provider's error type/code string (``overloaded_error``,
            ``context_length_exceeded``, ``RESOURCE_EXHAUSTED``…).

    Returns:
        One of ``ERROR_KINDS``.
    """
    text = f"{code or ''} {message}".lower()
    if "overloaded" in text or status in (529, 503):
        return "overloaded"
    if status is None:
        return "connection"
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limit"
    if status in (408, 504):
        return "timeout"
    if any(word in text for word in _CONTEXT_WORDS):
        return "context_length"
    if status >= 500:
        return "server"
    return "bad_request"


def provider_error(
    provider_name: str,
    kind: str,
    message: str,
    *,
    status: int | None = None,
    secrets: tuple[str, ...] = (),
) -> ProviderError:
    """A ``ProviderError`` whose one-line message names the kind and the provider.

    The message is cut to its first line, at most 300 characters, and scrubbed of
    secrets, so it is safe for the screen, ``--json`` and the session file.
    """
    first = " ".join(scrub(str(message), secrets).split())[:300] or "no details"
    where = f"HTTP {status} " if status else ""
    hint = ""
    if status == 404:
        hint = (f" (check the model name and --base-url / providers.{provider_name}.base_url; "
                "OpenAI-style servers usually end in /v1)")
    return ProviderError(kind, f"{provider_name} {where}{kind}: {first}{hint}")


def error_body_message(body: Any) -> tuple[str, str | None]:
    """``(message, code)`` out of a provider error body (``{"error": {...}}`` shapes)."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            message = err.get("message") or json.dumps(err)[:300]
            code = err.get("type") or err.get("code") or err.get("status")
            return str(message), str(code) if code is not None else None
        if isinstance(err, str):
            return err, None
    if isinstance(body, str):
        return body, None
    return "", None
