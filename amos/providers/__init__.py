"""Provider registry: model strings to providers, with lazy imports.

``PROVIDER:MODEL`` is split at the first colon (spec/cli.md "Choosing the model").
Provider modules, and the SDKs they import, are loaded only when selected, so the
scripted path never imports a provider SDK.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amos.errors import ConfigError, UsageError
from amos.providers.common import ProviderSettings, check_base_url
from amos.redact import url_credentials

if TYPE_CHECKING:
    from amos.providers.base import Provider

KNOWN_PROVIDERS = ("openai", "anthropic", "google", "openai-compatible", "scripted")
_KEY_FALLBACKS = {"google": ("GEMINI_API_KEY", "GOOGLE_API_KEY")}


def parse_model_spec(spec: str) -> tuple[str, str]:
    """Split ``PROVIDER:MODEL`` at the first colon.

    Raises:
        UsageError: no colon, an unknown provider or an empty model name.
    """
    provider, sep, model = spec.partition(":")
    if not sep or not model:
        raise UsageError(
            f"model {spec!r} must be PROVIDER:MODEL, e.g. openai:gpt-4o-mini, "
            "anthropic:claude-sonnet-4-5, google:gemini-2.5-flash, scripted:PATH"
        )
    if provider not in KNOWN_PROVIDERS:
        raise UsageError(
            f"unknown provider {provider!r} in model {spec!r}; accepted: {', '.join(KNOWN_PROVIDERS)}"
        )
    return provider, model


def api_key_variables(provider: str, provider_config: Any | None) -> tuple[str, ...]:
    """Names of the environment variables that may hold the provider's key, in order."""
    configured = getattr(provider_config, "api_key_env", None) if provider_config else None
    if provider == "google" and configured in (None, "GEMINI_API_KEY"):
        return _KEY_FALLBACKS["google"]
    return (configured,) if configured else ()


def create_provider(
    spec: str,
    *,
    config: Any,
    base_url: str | None = None,
    state: MutableMapping[str, Any] | None = None,
    cwd: Path | None = None,
) -> Provider:
    """Build the provider a model string names.

    Args:
        spec: ``PROVIDER:MODEL`` (``scripted:PATH`` for a script file).
        config: the loaded ``AmosConfig`` (its ``providers`` section is used).
        base_url: ``--base-url`` override.
        state: the session's provider state, which a provider may keep positions in
            (the scripted provider keeps its script positions there).
        cwd: folder a relative script path is resolved against.

    Returns:
        A ready ``Provider``.

    Raises:
        UsageError: a malformed model string, or a ``base_url`` that is not an
            http(s) URL with a host.
        ConfigError: a missing API key (naming the variable) or a bad script file.
    """
    provider, model = parse_model_spec(spec)
    if base_url is not None:
        check_base_url(base_url)
    if provider == "scripted":
        from amos.providers.scripted import ScriptedProvider

        path = Path(model)
        if not path.is_absolute():
            path = (cwd or Path.cwd()) / path
        return ScriptedProvider.from_file(path, state=state if state is not None else {})
    providers_cfg = getattr(config, "providers", None)
    pconf = None
    if providers_cfg is not None:
        pconf = getattr(providers_cfg, provider.replace("-", "_"), None)
    variables = api_key_variables(provider, pconf)
    if variables and not any(os.environ.get(v) for v in variables):
        names = " or ".join(variables)
        raise ConfigError(
            f"no API key for {provider}: set {names} (or choose another model; "
            "`amos run --demo` works offline)",
            json_path=f"providers.{provider}.api_key_env",
        )
    key = next((os.environ[v] for v in variables if os.environ.get(v)), None)
    if key is not None:
        key = key.strip()  # a key pasted with a trailing newline or \r (a Windows .env) still works
        if not key or any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
            name = next(v for v in variables if os.environ.get(v))
            raise ConfigError(f"the API key in {name} contains control characters or is blank; "
                              "set it to the key alone", json_path=f"providers.{provider}.api_key_env")
    settings = ProviderSettings(
        provider_name=provider,
        model=model,
        api_key=key,
        base_url=base_url or getattr(pconf, "base_url", None),
        max_retries=getattr(pconf, "max_retries", 2),
        timeout_s=float(getattr(pconf, "timeout_s", 600)),
        max_tokens=getattr(pconf, "max_tokens", None),
        secrets=tuple(sorted(set(secret_values(config)) | url_credentials(base_url))),  # --base-url's too
        tool_choice=getattr(pconf, "tool_choice", None),
        stream=getattr(pconf, "stream", True),
    )
    return build_provider(settings)


def build_provider(settings: ProviderSettings, *, http_client: Any | None = None) -> Provider:
    """Import the adapter module for ``settings.provider_name`` and build it.

    Args:
        settings: resolved provider settings.
        http_client: an ``httpx2`` client for the SDK (tests pass one with a mock
            transport); None lets the SDK build its own.
    """
    name = settings.provider_name
    if name in ("openai", "openai-compatible"):
        from amos.providers.openai import build
    elif name == "anthropic":
        from amos.providers.anthropic import build
    elif name == "google":
        from amos.providers.google import build
    else:  # pragma: no cover - parse_model_spec rejects the rest
        raise UsageError(f"unknown provider {name!r}")
    return build(settings, http_client=http_client)


def secret_values(config: Any) -> tuple[str, ...]:
    """Values of every configured provider key variable set in the environment.

    Whichever provider is active, none of these may reach the screen or the disk.
    """
    providers_cfg = getattr(config, "providers", None)
    names: set[str] = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"}
    if providers_cfg is not None:
        for provider in KNOWN_PROVIDERS:
            pconf = getattr(providers_cfg, provider.replace("-", "_"), None)
            env = getattr(pconf, "api_key_env", None)
            if env:
                names.add(env)
    values: set[str] = set()
    for name in names:
        value = os.environ.get(name)
        if value:
            values.add(value)
            if value.strip():
                values.add(value.strip())  # the form the SDK sends, and error messages echo
    from amos.store_pg.connect import secret_values as store_secrets

    values.update(store_secrets(config))  # the session store's password (issue 22)
    if providers_cfg is not None:  # a base URL's password and its Basic-auth form (issue 21)
        for provider in KNOWN_PROVIDERS:
            values.update(url_credentials(getattr(getattr(providers_cfg, provider.replace("-", "_"), None),
                                                  "base_url", None)))
    return tuple(sorted(values))
