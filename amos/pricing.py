"""The cost of model usage in US dollars, from the price data bundled with genai-prices.

``cost_usd(model_spec, usage)`` prices a ``Usage`` (input, output and cache-read
tokens) for a ``provider:model`` spec, or returns None when the price is not known —
never a guessed price. ``ui.show_cost`` decides whether front ends show it.

Offline by construction: genai-prices reads the snapshot shipped inside the installed
package (``genai_prices.data``). Its only network path is ``UpdatePrices``, a background
fetch from GitHub that a program must start explicitly; amos never starts it, so a price
is as current as the installed genai-prices release. genai-prices (and its ~30,000-line
data module) is imported on the first call, never at ``amos`` start-up.

Limits: amos's ``Usage`` has no cache-write count, so Anthropic cache writes are
priced as ordinary input tokens (Anthropic bills them at 1.25×); reasoning tokens are
part of ``output_tokens`` and priced with them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from amos.messages import Usage

PROVIDER_IDS: dict[str, str | None] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "openai-compatible": None,
}
"""amos provider name → genai-prices provider id. None: no fixed provider — the model
name alone must identify a priced model (``deepseek-chat`` behind an OpenAI-compatible
URL is priced; a local ``llama3.1:8b`` is not). Providers not listed (``scripted``) have
no price."""


def _split(model_spec: str) -> tuple[str, str] | None:
    provider, sep, model = model_spec.strip().partition(":")
    if not sep or not model or provider not in PROVIDER_IDS:
        return None
    if model.startswith("models/"):  # Gemini's resource-name form
        model = model[len("models/"):]
    return provider, model


def _calculation(model_spec: str, usage: Usage, at: datetime | None) -> Any | None:
    split = _split(model_spec)
    if split is None:
        return None
    provider, model = split
    import genai_prices  # lazy: keeps the package and its price data out of amos start-up

    cached = max(0, min(usage.cached_tokens, usage.input_tokens))
    priced = genai_prices.Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                                cache_read_tokens=cached)
    try:
        return genai_prices.calc_price(priced, model, provider_id=PROVIDER_IDS[provider],
                                       genai_request_timestamp=at)
    except LookupError:  # unknown provider or model: no price rather than a guess
        return None


def cost_usd(model_spec: str, usage: Usage, *, at: datetime | None = None) -> float | None:
    """What ``usage`` cost on ``model_spec``, in US dollars, or None when unknown.

    Args:
        model_spec: ``provider:model`` as amos selects models (``openai:gpt-4o-mini``,
            ``anthropic:claude-sonnet-4-20250514``, ``google:gemini-2.5-flash``).
        usage: token usage; ``input_tokens`` includes ``cached_tokens``, which are
            priced at the model's cache-read rate.
        at: when the calls were made (timezone-aware), for models whose price changed
            over time; None for now.

    Returns:
        The cost in dollars (0.0 for zero usage of a priced model), or None for an
        unknown provider or model, a ``scripted`` model, or a malformed spec.

    Raises:
        ValueError: a negative token count.
    """
    if min(usage.input_tokens, usage.output_tokens, usage.cached_tokens) < 0:
        raise ValueError(f"token counts must not be negative: {usage!r}")
    calculation = _calculation(model_spec, usage, at)
    return None if calculation is None else float(calculation.total_price)


def price_known(model_spec: str) -> bool:
    """True when ``cost_usd`` can price ``model_spec`` (lets a front end hide the cost column)."""
    return _calculation(model_spec, Usage(), None) is not None


def price_per_million(model_spec: str) -> tuple[float, float] | None:
    """``(input, output)`` US dollars per million tokens of ``model_spec`` today, or None
    when genai-prices does not price it (``amos models`` shows these). Priced on a
    1,000-token call, so a model whose long prompts cost more shows its base tier.
    """
    sample = 1000
    input_cost = _calculation(model_spec, Usage(input_tokens=sample), None)
    if input_cost is None:
        return None
    output_cost = _calculation(model_spec, Usage(output_tokens=sample), None)
    per_million = 1_000_000 / sample
    output = float(output_cost.total_price) * per_million if output_cost is not None else 0.0
    return round(float(input_cost.total_price) * per_million, 6), round(output, 6)


def priced_model_names(provider: str) -> list[str]:
    """The model ids genai-prices' bundled snapshot lists for an amos provider name
    (``[]`` for ``openai-compatible``, ``scripted`` and unknown names)."""
    provider_id = PROVIDER_IDS.get(provider)
    if provider_id is None:
        return []
    from genai_prices import data  # lazy, as above

    return [model.id for entry in data.providers if entry.id == provider_id for model in entry.models]
