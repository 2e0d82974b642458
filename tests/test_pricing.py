"""Cost of usage from genai-prices' bundled snapshot (amos/pricing.py)."""

from __future__ import annotations

import subprocess
import sys

import genai_prices
import pytest

from amos.messages import Usage
from amos.pricing import cost_usd, price_known

USAGE = Usage(input_tokens=12_000, output_tokens=800, cached_tokens=0)


@pytest.mark.parametrize(("spec", "provider_id", "model"), [
    ("openai:gpt-4o-mini", "openai", "gpt-4o-mini"),
    ("anthropic:claude-sonnet-4-20250514", "anthropic", "claude-sonnet-4-20250514"),
    ("google:gemini-2.5-flash", "google", "gemini-2.5-flash"),
])
def test_known_model_matches_genai_prices(spec: str, provider_id: str, model: str) -> None:
    usage = Usage(input_tokens=12_000, output_tokens=800, cached_tokens=2_000)
    cost = cost_usd(spec, usage)
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=12_000, output_tokens=800, cache_read_tokens=2_000),
        model, provider_id=provider_id)
    assert cost is not None and cost > 0
    assert cost == pytest.approx(float(expected.total_price))
    assert price_known(spec)


def test_gpt_4o_mini_list_price() -> None:
    # $0.15 / MTok input, $0.60 / MTok output in the bundled snapshot
    assert cost_usd("openai:gpt-4o-mini", Usage(input_tokens=1_000_000, output_tokens=1_000_000)) == \
        pytest.approx(0.75)


def test_cached_tokens_reduce_cost() -> None:
    for spec in ("openai:gpt-4o-mini", "anthropic:claude-sonnet-4-20250514"):
        full = cost_usd(spec, USAGE)
        cached = cost_usd(spec, USAGE.model_copy(update={"cached_tokens": 10_000}))
        assert full is not None and cached is not None
        assert 0 < cached < full


def test_zero_usage_costs_nothing() -> None:
    assert cost_usd("openai:gpt-4o-mini", Usage()) == 0.0
    assert cost_usd("anthropic:claude-sonnet-4-20250514", Usage()) == 0.0


@pytest.mark.parametrize("spec", [
    "openai:gpt-unknown-9000",
    "anthropic:claude-imaginary",
    "openai-compatible:llama3.1:8b",  # a local model: no price rather than a hosted one's
    "scripted:examples/demo/script.json",
    "gpt-4o-mini",  # no provider
    "nonsense:gpt-4o-mini",
    "",
])
def test_unknown_gives_none_never_a_guess(spec: str) -> None:
    assert cost_usd(spec, USAGE) is None
    assert not price_known(spec)


def test_openai_compatible_is_priced_only_by_a_known_model_name() -> None:
    assert cost_usd("openai-compatible:gpt-4o-mini", USAGE) == cost_usd("openai:gpt-4o-mini", USAGE)


def test_spec_forms() -> None:
    assert cost_usd("google:models/gemini-2.5-flash", USAGE) == cost_usd("google:gemini-2.5-flash", USAGE)
    assert cost_usd("openai:GPT-4o-mini", USAGE) == cost_usd("openai:gpt-4o-mini", USAGE)


def test_negative_tokens_are_an_error() -> None:
    with pytest.raises(ValueError):
        cost_usd("openai:gpt-4o-mini", Usage(input_tokens=-1))


def test_only_the_bundled_snapshot_is_used() -> None:
    # the conftest guard fails the test on any connection; also no updater thread runs
    cost_usd("openai:gpt-4o", USAGE)
    assert not genai_prices.data_snapshot.get_snapshot().from_auto_update
    updater = genai_prices.update_prices._shared_updater  # the one path that fetches prices
    assert updater.ref_count == 0 and updater.thread is None


def test_genai_prices_is_not_imported_at_startup() -> None:
    code = ("import sys, amos.cli, amos.pricing, amos.context, amos.engine.host, amos.engine.loop; "
            "print('genai_prices' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
