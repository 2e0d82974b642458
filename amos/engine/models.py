"""The models amos knows, per provider, for ``amos models`` and the TUI's ``/model`` picker (issue 21).

:class:`ModelCatalog` is the host API of that listing. Per provider it gives the rows of
amos's context-window table (:data:`amos.context.MODEL_WINDOWS`) with the price
genai-prices' bundled snapshot knows (never fetched), whether the provider's key
variable is set (never the key), and for ``openai-compatible`` what the server at its
base URL answers to ``GET /v1/models``.

A table row that is a family prefix genai-prices does not price (``claude``,
``gemini-3-pro``) is replaced by the priced model names that fall under it
(``claude-sonnet-4-5`` …), so every listed name can be typed after ``--model``.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from amos.config_models import AmosConfig
from amos.context import MODEL_WINDOWS, context_window, window_key
from amos.pricing import price_per_million, priced_model_names

PROVIDERS = ("openai", "anthropic", "google", "openai-compatible")
"""The API providers listed, in this order (``scripted:PATH`` is a file, not a list)."""


@dataclass(frozen=True)
class KnownModel:
    """One model row.

    Attributes:
        model: ``provider:name``, as ``--model`` takes it.
        window_tokens: its context window (tokens): amos's table's, for a name only the
            server listed ``context.window_tokens`` or else the 32,000-token default a run
            would assume (:data:`amos.context.DEFAULT_WINDOW_TOKENS`).
        input_usd_per_mtok / output_usd_per_mtok: US dollars per million tokens (None: not
            priced).
        source: ``table`` (amos's window table, priced where known) or ``server``.
        window_source: where ``window_tokens`` comes from: ``table``, ``config`` or
            ``assumed`` (the default; issue 21: a listed model never shows no window).
    """

    model: str
    window_tokens: int | None
    input_usd_per_mtok: float | None = None
    output_usd_per_mtok: float | None = None
    source: str = "table"
    window_source: str = "table"


@dataclass(frozen=True)
class ProviderModels:
    """One provider's part of the listing.

    Attributes:
        provider: the provider name.
        key_variables: the environment variables its key is read from, in order.
        key: ``set``, ``not set`` or ``not needed`` — never the key.
        base_url: the base URL in force (config or ``--base-url``; None: the SDK's).
        models: the known rows (the window table's, priced where known).
        server_models: what the server listed (``openai-compatible`` only; None when not
            asked).
        server_error: why the server gave no list (one line), or None.
        server_dropped: ids the server listed that are not shown (past 500, not a string,
            or not one printable line).
    """

    provider: str
    key_variables: list[str]
    key: str
    base_url: str | None
    models: list[KnownModel] = field(default_factory=list)
    server_models: list[KnownModel] | None = None
    server_error: str | None = None
    server_dropped: int = 0


@dataclass(frozen=True)
class ModelsReport:
    """What ``amos models`` shows.

    Attributes:
        current: the model in force (``--model``, else the config's), or None.
        current_window: ``(tokens, source)`` of the current model's window.
        providers: one entry per provider of :data:`PROVIDERS`.
    """

    current: str | None
    current_window: tuple[int, str] | None
    providers: list[ProviderModels]

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document (keys as the attributes; windows in tokens, prices in USD per 1M tokens)."""
        current = None
        if self.current is not None:
            price = price_per_million(self.current)
            current = {"model": self.current,
                       "window_tokens": self.current_window[0] if self.current_window else None,
                       "window_source": _WINDOW_SOURCES.get(self.current_window[1], self.current_window[1])
                       if self.current_window else None,
                       "input_usd_per_mtok": price[0] if price else None,
                       "output_usd_per_mtok": price[1] if price else None}
        return {"current": current, "providers": [asdict(p) for p in self.providers]}

    def choices(self) -> list[KnownModel]:
        """Every listed model, provider by provider (server models first for their provider)."""
        rows: list[KnownModel] = []
        for entry in self.providers:
            rows += (entry.server_models or []) + entry.models
        return rows


def _provider_of(key: str) -> str:
    """Which provider a window-table key belongs to (open-weight names: ``openai-compatible``)."""
    if key.startswith("claude"):
        return "anthropic"
    if key.startswith("gemini"):
        return "google"
    if key.startswith(("gpt-", "chatgpt", "o1", "o3", "o4")) and not key.startswith("gpt-oss"):
        return "openai"
    return "openai-compatible"


def _row(provider: str, name: str) -> KnownModel:
    spec = f"{provider}:{name}"
    price = price_per_million(spec)
    return KnownModel(spec, MODEL_WINDOWS.get(window_key(spec) or "", None),
                      price[0] if price else None, price[1] if price else None)


_WINDOW_SOURCES = {"config": "config", "model table": "table", "default": "assumed"}


def _server_row(spec: str, configured: int | None) -> KnownModel:
    """A model the server listed, with the window a run of it would budget against."""
    tokens, source = context_window(spec, configured)
    return KnownModel(spec, tokens, source="server", window_source=_WINDOW_SOURCES[source])


def known_models(provider: str) -> list[KnownModel]:
    """The window table's rows of ``provider``, a family row genai-prices does not price
    replaced by the priced names under it.

    Args:
        provider: one of :data:`PROVIDERS`.
    """
    keys = [k for k in MODEL_WINDOWS if _provider_of(k) == provider]
    priced = priced_model_names(provider)
    rows: list[KnownModel] = []
    seen: set[str] = set()
    for key in keys:
        row = _row(provider, key)
        members = [] if row.input_usd_per_mtok is not None else \
            [n for n in priced if n != key and window_key(f"{provider}:{n}") == key]
        for name in members or [key]:
            if name not in seen:
                seen.add(name)
                rows.append(_row(provider, name) if members else row)
    return rows


class ModelCatalog:
    """The listing of one config (and ``--model`` / ``--base-url`` overrides).

    Args:
        config: the loaded config.
        model: the model in force (``--model``), None for the config's.
        base_url: ``--base-url`` (used for ``openai-compatible``), None for the config's.
    """

    def __init__(self, config: AmosConfig, *, model: str | None = None, base_url: str | None = None):
        self._config = config
        self._model = model or config.model
        self._base_url = base_url

    @classmethod
    def open(cls, config_path: Path | None = None, *, model: str | None = None,
             base_url: str | None = None) -> tuple[ModelCatalog, list[str]]:
        """The catalog of the config at ``config_path`` (else the layered default).

        Returns:
            ``(catalog, config warnings)``.

        Raises:
            ConfigError: an unreadable or invalid config file (exit 2).
            UsageError: a ``base_url`` that is not an http(s) URL, a malformed ``model``.
        """
        from amos.engine.opening import load_host_config
        from amos.engine.options import RunOptions
        from amos.providers import parse_model_spec
        from amos.providers.common import check_base_url

        if base_url is not None:
            check_base_url(base_url)
        if model is not None:
            parse_model_spec(model)
        config, warnings = load_host_config(RunOptions(config_path=config_path))
        return cls(config, model=model, base_url=base_url), warnings

    @classmethod
    def for_host(cls, host: Any) -> ModelCatalog:
        """The catalog of a running host's config and model (the TUI's ``/model`` picker)."""
        return cls(host.config, model=host.model_spec, base_url=host.session.host.base_url)

    def _provider_config(self, provider: str) -> Any:
        return getattr(self._config.providers, provider.replace("-", "_"), None)

    def report(self, *, ask_server: bool = True, timeout_s: float = 3.0) -> ModelsReport:
        """Build the listing; the server is asked (blocking, at most ``timeout_s``) unless not ``ask_server``.

        Never raises for an unreachable server: :attr:`ProviderModels.server_error` says why.
        """
        from amos.providers import api_key_variables

        entries = []
        current_provider = (self._model or "").partition(":")[0]
        for provider in PROVIDERS:
            pconf = self._provider_config(provider)
            variables = list(api_key_variables(provider, pconf))
            key = "not needed" if not variables else (
                "set" if any(os.environ.get(v, "").strip() for v in variables) else "not set")
            base_url = getattr(pconf, "base_url", None)
            if self._base_url is not None and (provider == "openai-compatible" or provider == current_provider):
                base_url = self._base_url
            server, error, dropped = None, None, 0
            if provider == "openai-compatible" and ask_server and base_url:
                from amos.providers.server_models import list_server_models

                api_key = next((os.environ[v].strip() for v in variables if os.environ.get(v, "").strip()), None)
                answer = list_server_models(base_url, api_key=api_key, timeout_s=timeout_s)
                server = [_server_row(f"{provider}:{name}", self._config.context.window_tokens)
                          for name in answer.models]
                error, dropped = answer.error, answer.dropped
            shown_url = None
            if base_url:
                from amos.redact import mask_url

                shown_url = mask_url(base_url)
            entries.append(ProviderModels(provider, variables, key, shown_url, known_models(provider),
                                          server, error, dropped))
        window = None
        if self._model:
            configured = self._config.context.window_tokens
            window = context_window(self._model, configured)
        return ModelsReport(self._model, window, entries)
