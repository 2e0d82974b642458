"""Learning a server's context window: ask the server, or read it off its error.

Issue 17 item 16: a llama.cpp server with ``n_ctx 4096`` behind an amos that assumes a
32,000-token window ends a long run with "the stream ended without a finish reason".
The engine decides when to learn the window and what to do with it; this module only
finds the number:

- ``probe_context_window``: asks an OpenAI-compatible server what window it serves,
  with a short timeout, and returns None when it cannot tell.
- ``window_from_error``: the window a context-length error message (or body) states.

Both are pure look-ups: no state, no retries, nothing logged; a probe never raises for a
server that is down, slow, or speaks another dialect.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

PROBE_TIMEOUT_S = 2.0
"""Default time allowed for each probe request, seconds."""

MAX_PROBE_BYTES = 1_048_576
"""Largest probe response read, bytes (an Ollama ``/api/show`` with a long template is
tens of KB; anything bigger is not a metadata answer)."""

_MIN_WINDOW, _MAX_WINDOW = 16, 100_000_000


def server_root(base_url: str) -> str:
    """The server's root URL for ``base_url``: a trailing ``/v1`` (and ``/``) removed.

    ``http://127.0.0.1:8080/v1`` → ``http://127.0.0.1:8080``; the query is dropped.
    """
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def probe_context_window(
    base_url: str,
    model: str | None = None,
    *,
    api_key: str | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
    http_client: Any | None = None,
) -> int | None:
    """Ask an OpenAI-compatible server for the context window it serves, in tokens.

    Tried in order, each with ``timeout_s`` (a connection refused ends the probe at once):

    1. ``GET {root}/props`` (llama.cpp ``llama-server``):
       ``default_generation_settings.n_ctx``, else a top-level ``n_ctx``.
    2. ``GET {base_url}/models`` (vLLM ``max_model_len``; LM Studio-style
       ``max_context_length``/``context_length``; llama-cpp-python and llama.cpp
       entries with ``meta.n_ctx``/``n_ctx``), for the entry whose ``id`` is ``model``
       or the only entry. A training length (llama.cpp's ``meta.n_ctx_train``, Ollama's
       ``*.context_length``) is never taken as the served window.
    3. Ollama: ``GET {root}/api/ps`` (the loaded model's ``context_length``), then
       ``POST {root}/api/show`` ``{"model": model}`` (``num_ctx`` in ``parameters``).

    Args:
        base_url: the OpenAI-style base URL amos uses (usually ending in ``/v1``).
        model: the model id amos sends (picks the ``/models`` entry and Ollama's model).
        api_key: sent as a bearer token when given (vLLM ``--api-key``); never logged.
        timeout_s: per request, seconds.
        http_client: an ``httpx2.Client`` to use (tests); None builds one and closes it.

    Returns:
        The window in tokens, or None when no endpoint states one.
    """
    import httpx2

    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    client = http_client or httpx2.Client(timeout=timeout_s, headers=headers, follow_redirects=False)
    root = server_root(base_url)
    models_url = base_url.rstrip("/") + "/models"
    steps = (
        ("GET", f"{root}/props", None, _from_props),
        ("GET", models_url, None, lambda body: _from_models(body, model)),
        ("GET", f"{root}/api/ps", None, lambda body: _from_ollama_ps(body, model)),
        ("POST", f"{root}/api/show", {"model": model}, _from_ollama_show),
    )
    try:
        for method, url, payload, read in steps:
            if payload is not None and not model:
                continue
            body, reachable = _get_json(client, method, url, payload, headers, timeout_s)
            if not reachable:
                return None
            window = read(body) if body is not None else None
            if window is not None:
                return window
        return None
    finally:
        if http_client is None:
            client.close()


def _get_json(client: Any, method: str, url: str, payload: Any, headers: dict[str, str],
              timeout_s: float) -> tuple[Any, bool]:
    """``(decoded JSON or None, server reachable)``."""
    import httpx2

    try:
        with client.stream(method, url, json=payload, headers=headers, timeout=timeout_s) as response:
            if response.status_code != 200:
                return None, True
            data = bytearray()
            for piece in response.iter_bytes():
                data += piece
                if len(data) > MAX_PROBE_BYTES:
                    return None, True
    except (httpx2.ConnectError, httpx2.ConnectTimeout):
        return None, False
    except (httpx2.HTTPError, OSError, ValueError):
        return None, True
    try:
        return json.loads(bytes(data)), True
    except ValueError:
        return None, True


def _window(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and _MIN_WINDOW <= value <= _MAX_WINDOW:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return _window(int(value.strip()))
    return None


def _from_props(body: Any) -> int | None:
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    if isinstance(settings, dict) and _window(settings.get("n_ctx")):
        return _window(settings.get("n_ctx"))
    return _window(body.get("n_ctx"))


_MODEL_KEYS = ("max_model_len", "max_context_length", "context_length", "context_window", "n_ctx")


def _from_models(body: Any, model: str | None) -> int | None:
    entries = body.get("data") if isinstance(body, dict) else body
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    chosen = next((e for e in entries if model and e.get("id") == model), None)
    if chosen is None and len(entries) == 1:
        chosen = entries[0]
    if chosen is None:
        return None
    for holder in (chosen, chosen.get("meta"), chosen.get("metadata")):
        if isinstance(holder, dict):
            for key in _MODEL_KEYS:
                window = _window(holder.get(key))
                if window:
                    return window
    return None


def _from_ollama_ps(body: Any, model: str | None) -> int | None:
    entries = body.get("models") if isinstance(body, dict) else None
    if not isinstance(entries, list) or not model:
        return None
    for entry in entries:
        if isinstance(entry, dict) and model in (entry.get("name"), entry.get("model")):
            return _window(entry.get("context_length"))
    return None


def _from_ollama_show(body: Any) -> int | None:
    if not isinstance(body, dict):
        return None
    parameters = body.get("parameters")
    if isinstance(parameters, str):
        match = re.search(r"^\s*num_ctx\s+(\d+)\s*$", parameters, re.MULTILINE)
        if match:
            return _window(int(match.group(1)))
    return None


_ERROR_PATTERNS = (
    # OpenAI, vLLM, many proxies: "This model's maximum context length is 4096 tokens."
    r"maximum context length is (\d[\d,]*) tokens",
    # llama-cpp-python: "Requested tokens (5000) exceed context window of 4096"
    r"exceed(?:s)? context window of (\d[\d,]*)",
    # LM Studio: "... the model is loaded with context length of only 4096 tokens"
    r"context length of only (\d[\d,]*)",
    # llama.cpp (older): "... (5000 tokens) is larger than the context size (4096 tokens)"
    r"context size \((\d[\d,]*) tokens\)",
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    r"tokens > (\d[\d,]*) maximum",
    # Gemini: "... exceeds the maximum number of tokens allowed (1048576)"
    r"maximum number of tokens allowed \((\d[\d,]*)\)",
    # generic: "context window of 8192 tokens", "n_ctx: 4096", "n_ctx = 4096"
    r"context window (?:is |of )?(\d[\d,]*) tokens",
    r"\bn_ctx\b\W{0,3}(\d[\d,]*)",
)


def window_from_error(message: str, body: Any = None) -> int | None:
    """The context window a context-length error states, in tokens (None when it does not).

    Reads llama.cpp's structured error (``{"error": {"type": "exceed_context_size_error",
    "n_ctx": 4096, ...}}``) when ``body`` is given, then the message text: OpenAI and vLLM
    ("maximum context length is N tokens"), llama-cpp-python ("exceed context window of
    N"), LM Studio, older llama.cpp, Anthropic ("N tokens > M maximum"), Gemini.

    Args:
        message: the provider's error text (any length; only a bounded prefix is read).
        body: the decoded error body, when the caller has it.

    Returns:
        The window in tokens, or None.
    """
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            window = _window(inner.get("n_ctx"))
            if window:
                return window
            inner_message = inner.get("message")
            if isinstance(inner_message, str) and inner_message != message:
                found = window_from_error(inner_message)
                if found:
                    return found
    text = str(message)[:20_000]
    for pattern in _ERROR_PATTERNS:
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            window = _window(int(match.group(1).replace(",", "")))
            if window:
                return window
    return None
