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


@dataclass(frozen=True)
class ServerModels:
    """What a server answered.

    Attributes:
        base_url: the base URL asked, masked for display (no password or token).
        models: the model ids it listed, in its order (empty on failure).
        error: None, or one line saying why there is no list (not reachable, HTTP 404…).
    """

    base_url: str
    models: list[str] = field(default_factory=list)
    error: str | None = None


def list_server_models(base_url: str, *, api_key: str | None = None, timeout_s: float = 3.0,
                       secrets: tuple[str, ...] = ()) -> ServerModels:
    """Ask the server at ``base_url`` for ``/models`` (``base_url`` ends in ``/v1`` as configured).

    Args:
        base_url: the OpenAI-compatible base URL (``http://localhost:11434/v1``).
        api_key: the key to send, if the server needs one.
        timeout_s: connect and read timeout, seconds.
        secrets: values masked out of an error message.

    Returns:
        :class:`ServerModels`; ``error`` set (and ``models`` empty) when the server cannot
        be reached, answers an HTTP error or something that is not a model list.
    """
    import openai

    shown = mask_url(base_url)
    try:
        client = openai.OpenAI(api_key=api_key or KEYLESS, base_url=base_url, max_retries=0, timeout=timeout_s)
        with client:
            page = client.models.list()
            ids = [str(getattr(item, "id", "")) for item in page.data]
    except openai.APITimeoutError:
        return ServerModels(shown, error=f"no answer within {timeout_s:g} s")
    except openai.APIConnectionError as exc:
        cause = exc.__cause__
        why = "connection refused" if "refused" in str(cause or exc).lower() else "not reachable"
        return ServerModels(shown, error=why)
    except openai.APIStatusError as exc:
        return ServerModels(shown, error=f"HTTP {exc.status_code} from GET /models")
    except Exception as exc:  # noqa: BLE001 - a listing says what went wrong and goes on
        text = str(exc)
        for secret in secrets:
            text = text.replace(secret, "****")
        return ServerModels(shown, error=f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}")
    return ServerModels(shown, [i for i in ids if i])
