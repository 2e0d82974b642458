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
import re
from dataclasses import dataclass, field
from typing import Any

from amos.errors import ProviderError, UsageError
from amos.redact import mask_url

ERROR_KINDS = (
    "auth", "rate_limit", "overloaded", "timeout", "bad_request",
    "context_length", "server", "connection",
)

_CONTEXT_WORDS = (
    "context_length", "context length", "context window", "prompt is too long",
    "too many tokens", "maximum context", "input token count", "exceeds the maximum",
    "context size", "exceed_context_size", "context window",
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
        tool_choice: ``auto``, ``required`` or ``none``, sent with requests that offer
            tools; None sends nothing (``openai-compatible`` only, issue 23).
        stream: False makes one non-streamed request per call (``openai-compatible``
            only, issue 23); the events are the same.
    """

    provider_name: str
    model: str
    api_key: str | None = None
    base_url: str | None = None
    max_retries: int = 2
    timeout_s: float = 600.0
    max_tokens: int | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)
    tool_choice: str | None = None
    stream: bool = True

    def __repr__(self) -> str:  # the key must never be printed by accident
        return (f"ProviderSettings(provider_name={self.provider_name!r}, model={self.model!r}, "
                f"base_url={mask_url(self.base_url) if self.base_url else None!r})")


def check_base_url(value: str, *, source: str = "--base-url") -> str:
    """``value`` unchanged when it is a usable base URL, by the config file's own rule.

    Checked before any request, so a bad ``--base-url`` is a usage error (exit 2) like
    the same value in the config, not a connection retried for seconds (issue 23).

    Args:
        value: the URL as given.
        source: where it came from, for the message (``--base-url``).

    Raises:
        UsageError: not an ``http://`` or ``https://`` URL with a host and a valid port.
    """
    from amos.config_models import check_http_url

    try:
        return check_http_url(value)
    except ValueError:
        shown = mask_url(value) if "@" in value or "?" in value else value
        raise UsageError(f"{source} {json.dumps(serialisable(shown))} must be an http:// or https:// URL "
                         "with a host (and a port from 1 to 65535, if any), e.g. http://127.0.0.1:8080/v1") from None


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
    """``text`` with every secret value, and the value of every environment variable named
    like a secret (:func:`amos.evidence.redact.environment_secret_values`), masked as
    ``****`` — plain or encoded, through the one masker
    (:func:`amos.evidence.redact.redact_text`, issue 17 item 3)."""
    from amos.evidence.redact import environment_secret_values, redact_text

    return redact_text(text, set(secrets) | environment_secret_values(), mask="****")


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


MAX_DETAIL_CHARS = 2000
"""Longest provider error detail kept, characters (issue 23: a 300-character cut hid the
field a llama-cpp-python 500 named). Longer details end in ``…``."""

_FIELD_LINE = re.compile(r"^\s*[\w\-\[\]]+(\.[\w\-\[\]]+)+\s*$")


def serialisable(text: str) -> str:
    """``text`` that encodes as UTF-8: surrogate pairs joined, lone surrogates as ``\\udXXX``.

    Text from outside (an SDK exception, a JSON body with a ``"\\ud800"`` escape) may hold
    lone surrogates, which no JSON writer of amos can save (issue 17 item 10): they become
    the six visible characters of their escape. Valid text is returned as it is.
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return joined.encode("utf-8", "backslashreplace").decode("utf-8")


def error_detail(message: str, secrets: tuple[str, ...] = (), *, limit: int = MAX_DETAIL_CHARS) -> str:
    """A provider's error text as one bounded, secret-free, serialisable line.

    The first line is kept whole. When it does not itself name the field at fault
    (``7 validation errors:``), the first later line that does is kept whole too, joined
    with `` | ``: a pydantic error line (``{'type': …, 'loc': (…), 'msg': …}``, as
    llama-cpp-python sends) that is not a union branch ruled out by its ``role``, or a
    dotted field line (``messages.2.content``) with the reason line after it. Whitespace
    runs become one space (issue 23: the 300-character cut showed two of seven errors and
    not the one about ``content``).

    Args:
        message: the provider's error text, any length.
        secrets: values to mask (see ``scrub``).
        limit: most characters returned (the last one ``…`` when cut).

    Returns:
        The detail, at most ``limit`` characters, or ``no details`` for blank text.
    """
    text = serialisable(scrub(str(message), secrets))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "no details"
    keep = [lines[0]]
    if len(lines) > 1 and not _names_field(lines[0]):
        keep += _field_lines(lines[1:200])
    detail = " | ".join(" ".join(line.split()) for line in keep)
    return detail if len(detail) <= limit else detail[:limit - 1] + "…"


def _names_field(line: str) -> bool:
    return "'loc':" in line or bool(_FIELD_LINE.match(line))


def _field_lines(lines: list[str]) -> list[str]:
    """The first line (or field + reason pair) naming the field really at fault."""
    import ast

    parsed: list[tuple[str, dict[str, Any]]] = []
    for n, line in enumerate(lines):
        if _FIELD_LINE.match(line):
            return lines[n:n + 2]
        if "'loc':" in line and len(line) < 20_000:
            try:
                value = ast.literal_eval(line.rstrip(","))
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                value = None
            if isinstance(value, dict) and isinstance(value.get("loc"), (tuple, list)):
                parsed.append((line, value))
    ruled_out = {tuple(err["loc"][:-1]) for _, err in parsed
                 if err.get("type") == "literal_error" and err["loc"] and err["loc"][-1] in ("role", "type")}
    for line, err in parsed:
        if tuple(err["loc"][:-1]) not in ruled_out:
            return [line]
    return [parsed[0][0]] if parsed else []


def provider_error(
    provider_name: str,
    kind: str,
    message: str,
    *,
    status: int | None = None,
    secrets: tuple[str, ...] = (),
) -> ProviderError:
    """A ``ProviderError`` whose one-line message names the kind and the provider.

    The detail is ``error_detail(message)``: the whole first line (and the line naming
    the field, for a multi-line validation error), at most ``MAX_DETAIL_CHARS``
    characters, scrubbed of secrets and serialisable, so it is safe for the screen,
    ``--json`` and the session file.
    """
    first = error_detail(message, secrets)
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
            message = err.get("message") or json.dumps(err)
            code = err.get("type") or err.get("code") or err.get("status")
            return str(message), str(code) if code is not None else None
        if isinstance(err, str):
            return err, None
    if isinstance(body, str):
        return body, None
    return "", None
