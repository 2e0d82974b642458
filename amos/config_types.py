"""Config value types: the checked scalars and the strict base model of every config model.

Split out of :mod:`amos.config_models` (one job each: these are the value types and their
checks; the models are there, the tool-side ones in :mod:`amos.config_models_tools`).
:mod:`amos.config` re-exports the public names; callers import from ``amos.config``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator

from amos.errors import ConfigError

PROVIDERS = ("openai", "anthropic", "google", "openai-compatible", "scripted")
"""Provider names accepted before the first colon of a model string."""

# --------------------------------------------------------------------------- value types


def _split_model(value: str) -> tuple[str, str]:
    provider, sep, model = value.partition(":")
    if not sep or provider not in PROVIDERS or not model:
        raise ValueError(
            f"must be PROVIDER:MODEL with PROVIDER one of {', '.join(PROVIDERS)} "
            "and a non-empty MODEL (e.g. openai:gpt-4o-mini, scripted:PATH)"
        )
    return provider, model


def parse_model(value: str) -> tuple[str, str]:
    """Split a model string at its first colon: ``"openai-compatible:qwen2.5:7b"``.

    Returns:
        ``(provider, model)``, e.g. ``("openai-compatible", "qwen2.5:7b")``.

    Raises:
        ConfigError: unknown provider, no colon, or an empty model part
            (spec/cli.md, "Options").
    """
    try:
        return _split_model(value)
    except ValueError as exc:
        raise ConfigError(f"{exc} (got {json.dumps(value)})", json_path="model") from None


def _check_model(value: str) -> str:
    _split_model(value)
    return value


def check_http_url(value: str) -> str:
    """``value`` unchanged when it is an ``http://`` or ``https://`` URL with a host.

    The one rule for every base URL, from the config file or ``--base-url`` (issue 23).

    Raises:
        ValueError: any other text ("must be an http:// or https:// URL"), or a port that
            is not a number from 1 to 65535 (``http://127.0.0.1:abc/v1``, ``:99999``).
    """
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.netloc.rsplit("@", 1)[-1].endswith(":")):
        raise ValueError("must be an http:// or https:// URL with a port from 1 to 65535 (or none)")
    return value


_check_url = check_http_url


def _check_env_name(value: str) -> str:
    if not value or not (value[0].isalpha() or value[0] == "_") or not all(
        c.isalnum() or c == "_" for c in value
    ) or not value.isascii():
        raise ValueError("must be an environment variable name (letters, digits, _)")
    return value


def _check_rung(value: Any) -> int | bool:
    if value is False:
        return False
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise ValueError("must be false or an integer from 1 to 1000")
    return value


def _check_sha256(value: str) -> str:
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise ValueError("must be a SHA-256 digest (64 lowercase hex digits)")
    return value


def _check_absolute(value: str) -> str:
    if not Path(value).is_absolute():
        raise ValueError("must be an absolute path")
    return value


def _compact_number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
Threshold = Annotated[int, Field(ge=1, le=1000)]
Seconds = Annotated[
    float, Field(gt=0, allow_inf_nan=False), PlainSerializer(_compact_number, when_used="json")
]
Text = Annotated[str, Field(min_length=1)]
ToolName = Annotated[str, Field(min_length=1, max_length=256)]
ModelString = Annotated[str, AfterValidator(_check_model)]
BaseUrl = Annotated[str, AfterValidator(_check_url)]
EnvName = Annotated[str, AfterValidator(_check_env_name)]
Rung = Annotated[int | Literal[False], PlainValidator(_check_rung)]
Permission = Literal["allow", "ask", "deny"]
ConfigPath = Annotated[Path, Field(strict=False)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)
