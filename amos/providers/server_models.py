"""The models an OpenAI-compatible server says it serves (``GET /v1/models``), for ``amos models``.

Asked through the official ``openai`` SDK client (the one the provider uses), with no
retries and a short timeout: a listing must answer quickly or say why it cannot. Any
failure becomes one line of text, never an exception, so the rest of the listing is
still printed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amos.redact import mask_url

KEYLESS = "not-needed"
"""The API key sent to a server that needs none (the SDK insists on one)."""

MAX_MODELS = 500
"""Most model ids kept from one listing (a server listing more is said to, not printed whole)."""

MAX_ID_CHARS = 200
"""Longest model id kept; a longer one is not a model name anyone types."""


@dataclass(frozen=True)
class ServerModels:
    """What a server answered.

    Attributes:
        base_url: the base URL asked, masked for display (no password or token).
        models: the model ids it listed, in its order (empty on failure): strings only,
            at most :data:`MAX_MODELS`, each a single line of at most :data:`MAX_ID_CHARS`.
        error: None, or one line saying why there is no list (not reachable, HTTP 404…).
        dropped: ids left out: past :data:`MAX_MODELS`, not a string, or not one printable
            line (a newline in an id could fake rows of the listing).
    """

    base_url: str
    models: list[str] = field(default_factory=list)
    error: str | None = None
    dropped: int = 0


def list_server_models(base_url: str, *, api_key: str | None = None, timeout_s: float = 3.0) -> ServerModels:
    """Ask the server at ``base_url`` for ``/models`` (``base_url`` ends in ``/v1`` as configured).

    Args:
        base_url: the OpenAI-compatible base URL (``http://localhost:11434/v1``).
        api_key: the key to send, if the server needs one.
        timeout_s: connect and read timeout, seconds.

    Returns:
        :class:`ServerModels`; ``error`` set (and ``models`` empty) when the server cannot
        be reached, answers an HTTP error or something that is not a model list (said
        without quoting the answer: it may hold anything, a key included).
    """
    import openai

    shown = mask_url(base_url)
    try:
        client = openai.OpenAI(api_key=api_key or KEYLESS, base_url=base_url, max_retries=0, timeout=timeout_s)
        with client:
            page = client.models.list()
            data = page.data
            if not isinstance(data, list):
                raise TypeError("no data list")
            ids = [getattr(item, "id", None) for item in data]
    except openai.APITimeoutError:
        return ServerModels(shown, error=f"no answer within {timeout_s:g} s")
    except openai.APIConnectionError as exc:
        cause = exc.__cause__
        why = "connection refused" if "refused" in str(cause or exc).lower() else "not reachable"
        return ServerModels(shown, error=why)
    except openai.APIStatusError as exc:
        return ServerModels(shown, error=f"HTTP {exc.status_code} from GET /models")
    except Exception:  # noqa: BLE001 - a listing says what went wrong and goes on
        return ServerModels(shown, error="the answer to GET /models is not a model list")
    kept = list(dict.fromkeys(i for i in ids if _usable_id(i)))  # a repeated id once
    return ServerModels(shown, kept[:MAX_MODELS], dropped=len(ids) - len(kept[:MAX_MODELS]))


def _usable_id(value: object) -> bool:
    """A model id worth listing: a non-empty printable string with no whitespace (spaces
    could fake the listing's columns; no server we know names a model with one)."""
    return (isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS and value.isprintable()
            and not any(c.isspace() for c in value))
