"""The offline context budget: model windows, the calibrated estimator, measure_request."""

from __future__ import annotations

import math
import time

import pytest

from amos.context import (
    DEFAULT_WINDOW_TOKENS,
    MessageSizeCache,
    RequestBudget,
    TokenEstimator,
    context_window,
    known_window,
    measure_request,
    message_units,
)
from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart
from amos.tools.base import ToolSpec

REFERENCE = {"version": 1, "id": "ev-1", "sha256": "0" * 64, "size": 123456, "acknowledgement": "fsync"}
TOOLS = [ToolSpec(name="read_file", description="Read a file of the workspace.",
                  parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})]


def result(content: str, **fields) -> Message:
    return Message.tool_result(ToolResultPart(call_id="c1", tool_name="read_file", content=content, **fields))


def call(arguments: dict) -> Message:
    return Message(role="assistant", kind="turn",
                   parts=(TextPart(text="reading"), ToolCallPart(call_id="c1", tool_name="read_file",
                                                                 arguments=arguments)))


# --- windows ---------------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "window"), [
    ("openai:gpt-4o", 128_000),
    ("openai:gpt-4o-mini", 128_000),
    ("openai:gpt-4o-2024-08-06", 128_000),
    ("openai:gpt-4", 8_192),
    ("openai:gpt-4-0613", 8_192),
    ("openai:gpt-4.1", 1_047_576),
    ("openai:gpt-4.1-mini-2025-04-14", 1_047_576),
    ("openai:o3", 200_000),
    ("openai:o4-mini", 200_000),
    ("openai:o1-mini", 128_000),
    ("openai:gpt-5", 400_000),
    ("openai:gpt-5-mini-2025-08-07", 400_000),
    ("anthropic:claude-sonnet-4-20250514", 200_000),
    ("anthropic:claude-3-5-sonnet-20241022", 200_000),
    ("anthropic:claude-3-7-sonnet-latest", 200_000),
    ("anthropic:claude-opus-4-1", 200_000),
    ("anthropic:claude-haiku-4-5", 200_000),
    ("google:gemini-1.5-pro-002", 2_097_152),
    ("google:gemini-2.0-flash", 1_048_576),
    ("google:models/gemini-2.5-pro", 1_048_576),
    ("google:gemini-2.5-flash-lite", 1_048_576),
    ("google:gemini-3-pro-preview", 1_048_576),
    ("openai-compatible:llama3.1:8b", 131_072),
    ("openai-compatible:llama3:8b", 8_192),
    ("openai-compatible:meta-llama/Llama-3.1-8B-Instruct", 131_072),
    ("openai-compatible:qwen2.5-coder:32b", 32_768),
    ("openai-compatible:qwen2.5:7b", 32_768),
    ("OpenAI:GPT-4O-MINI", 128_000),
])
def test_window_table(spec: str, window: int) -> None:
    assert context_window(spec, None) == (window, "model table")


def test_longest_prefix_at_a_name_boundary() -> None:
    assert known_window("openai:gpt-4o") != known_window("openai:gpt-4")  # not the gpt-4 entry
    assert known_window("openai:gpt-4omega") is None  # a prefix must end at a boundary
    assert known_window("openai-compatible:o1x") is None


def test_unknown_model_takes_the_default() -> None:
    assert context_window("openai-compatible:my-finetune", None) == (DEFAULT_WINDOW_TOKENS, "default")
    assert context_window("scripted:demo.json", None) == (32_000, "default")
    assert context_window("", None) == (32_000, "default")


def test_config_overrides_the_table() -> None:
    assert context_window("anthropic:claude-sonnet-4-20250514", 1_000_000) == (1_000_000, "config")
    assert context_window("openai-compatible:llama3.1:8b", 8_192) == (8_192, "config")


# --- estimator -------------------------------------------------------------------------

def test_uncalibrated_estimate_is_four_units_per_token_plus_margin() -> None:
    estimator = TokenEstimator()
    assert estimator.estimate(0) == 0
    assert estimator.estimate(400) == math.ceil(100 * 1.1)
    assert estimator.estimate(1) == 1


@pytest.mark.parametrize("true_ratio", [0.7, 1.0, 1.6, 2.5])
def test_calibration_converges_to_the_reported_ratio(true_ratio: float) -> None:
    estimator = TokenEstimator()
    units = 40_000
    for _ in range(25):
        estimated = estimator.estimate(units)
        reported = round(units / 4 * true_ratio)  # what a tokenizer that far from 4 chars/token bills
        estimator.observe(estimated, reported)
    assert estimator.factor == pytest.approx(true_ratio, rel=0.01)
    assert estimator.samples == 25
    # calibrated estimates keep the 10% safety margin above what the provider bills
    assert estimator.estimate(units) == pytest.approx(units / 4 * true_ratio * 1.1, rel=0.01)


def test_one_odd_report_moves_the_factor_a_bounded_step() -> None:
    estimator = TokenEstimator()
    estimator.observe(estimator.estimate(4000), 1000 * 10)  # 10× more than estimated
    assert 1.0 < estimator.factor < 2.0


def test_factor_is_clamped() -> None:
    high, low = TokenEstimator(), TokenEstimator()
    for _ in range(50):
        high.observe(high.estimate(4000), 1_000_000)
        low.observe(low.estimate(4000), 1)
    assert high.factor == pytest.approx(3.0)
    assert low.factor == pytest.approx(0.5)
    assert TokenEstimator(factor=99).factor == 3.0


def test_useless_observations_are_ignored() -> None:
    estimator = TokenEstimator()
    estimator.observe(0, 500)
    estimator.observe(500, 0)  # e.g. the scripted provider reports no usage
    assert (estimator.factor, estimator.samples) == (1.0, 0)


def test_state_round_trip_and_damaged_state() -> None:
    estimator = TokenEstimator()
    for _ in range(3):
        estimator.observe(estimator.estimate(8000), 3000)
    state = estimator.to_state()
    assert set(state) == {"version", "factor", "samples"}
    again = TokenEstimator.from_state(state)
    assert again.factor == pytest.approx(estimator.factor) and again.samples == 3
    for damaged in (None, {}, {"factor": "x"}, {"factor": float("nan")}, {"factor": True}, []):
        fresh = TokenEstimator.from_state(damaged)  # type: ignore[arg-type]
        assert fresh.factor == 1.0
    assert TokenEstimator.from_state({"factor": 50.0, "samples": -2}).factor == 3.0


# --- measure_request -------------------------------------------------------------------

def test_parts_add_up() -> None:
    messages = [Message.user("fix the failing test"), call({"path": "src/app.py"}), result("x = 1\n" * 200),
                Message(role="assistant", kind="turn", parts=(TextPart(text="done"),))]
    budget = measure_request("system prompt " * 50, "# Task notes\n- one\n", TOOLS, messages, TokenEstimator(),
                             sizes=MessageSizeCache())
    assert isinstance(budget, RequestBudget)
    assert budget.total == budget.system + budget.task_view + budget.tools + budget.history
    assert budget.history == sum(budget.message_tokens)
    assert len(budget.message_tokens) == len(messages) == len(budget.message_protected)
    assert all(t > 0 for t in (budget.system, budget.task_view, budget.tools))
    assert budget.protected == 0 and not any(budget.message_protected)
    assert budget.fixed == budget.system + budget.task_view + budget.tools
    assert budget.history_after(2) == sum(budget.message_tokens[2:])
    assert budget.total_after(0) == budget.total
    assert budget.fits(budget.total) and not budget.fits(budget.total - 1)


def test_empty_request() -> None:
    budget = measure_request("", "", [], [])
    assert (budget.total, budget.history, budget.message_tokens) == (0, 0, ())


def test_calibration_scales_the_measure() -> None:
    messages = [Message.user("word " * 1000)]
    plain = measure_request("s" * 400, "", TOOLS, messages, TokenEstimator())
    doubled = measure_request("s" * 400, "", TOOLS, messages, TokenEstimator(factor=2.0))
    assert doubled.total == pytest.approx(2 * plain.total, rel=0.01)
    assert doubled.factor == 2.0


def test_projection_is_measured_not_the_raw_result_nor_the_reference() -> None:
    raw = "line of a very long file\n" * 4000
    projection = "[projected result — the complete result (100 KB) is stored as evidence ev-1] first lines…"
    projected = result(projection, projected=True, evidence_id="ev-1", evidence=REFERENCE)
    plain = result(projection)
    unprojected = result(raw, evidence_id="ev-1", evidence=REFERENCE)
    sizes = MessageSizeCache()
    budget = measure_request("", "", [], [projected, plain, unprojected], sizes=sizes)
    projected_tokens, plain_tokens, raw_tokens = budget.message_tokens
    assert projected_tokens == plain_tokens  # the evidence reference is not sent, so not counted
    assert raw_tokens > 50 * projected_tokens
    assert budget.protected == 0  # stored evidence is not protected


def test_protected_results_are_counted_as_part_of_history() -> None:
    protected = result("raw output the evidence store failed to keep\n" * 100, evidence_error="disk full")
    messages = [Message.user("go"), call({"path": "a"}), protected, Message.user("next")]
    budget = measure_request("", "", [], messages, sizes=MessageSizeCache())
    assert budget.message_protected == (False, False, True, False)
    assert 0 < budget.protected <= budget.message_tokens[2] <= budget.history
    acknowledged = protected.model_copy(update={"parts": (protected.parts[0].model_copy(
        update={"evidence": REFERENCE, "evidence_id": "ev-1", "evidence_error": None}),)})
    messages[2] = acknowledged
    budget = measure_request("", "", [], messages, sizes=MessageSizeCache())
    assert budget.protected == 0 and not any(budget.message_protected)


def test_json_is_denser_and_non_ascii_counts_bytes() -> None:
    text_units, _ = message_units(Message.user("a" * 300))
    json_units, _ = message_units(call({"k": "a" * 300}))
    assert json_units > text_units
    ascii_units, _ = message_units(Message.user("a" * 300))
    cjk_units, _ = message_units(Message.user("数" * 300))
    assert cjk_units - ascii_units == 600  # 3 UTF-8 bytes each


def test_raw_arguments_and_provider_details_are_measured() -> None:
    bad = Message(role="assistant", kind="turn", parts=(ToolCallPart(
        call_id="c", tool_name="t", arguments=None, raw_arguments="{not json" + "x" * 400),))
    assert message_units(bad)[0] > 400
    bare = Message(role="assistant", kind="turn", parts=(TextPart(text="hi"),))
    thought = bare.model_copy(update={"provider_details": {"anthropic": {"thinking": "t" * 800}}})
    assert message_units(thought)[0] > message_units(bare)[0] + 800


def test_cache_follows_replaced_messages() -> None:
    sizes = MessageSizeCache()
    messages = [Message.user("short"), result("tiny")]
    first = measure_request("", "", [], messages, sizes=sizes)
    assert len(sizes) == 2
    messages[1] = result("much longer content now\n" * 300)  # a history edit makes a new object
    second = measure_request("", "", [], messages, sizes=sizes)
    assert second.message_tokens[0] == first.message_tokens[0]
    assert second.message_tokens[1] > 10 * first.message_tokens[1]
    uncached = measure_request("", "", [], messages, sizes=MessageSizeCache())
    assert uncached == second


def test_cache_never_trusts_a_reused_id() -> None:
    sizes = MessageSizeCache()
    old, new = Message.user("x" * 5000), Message.user("y")
    sizes.units(old)
    entry = sizes._entries.pop(id(old))
    sizes._entries[id(new)] = (old, entry[1], entry[2])  # as if `new` had reused old's id
    assert sizes.units(new) == message_units(new)


def test_cache_is_bounded() -> None:
    sizes = MessageSizeCache()
    measure_request("", "", [], [Message.user(f"m{i}") for i in range(3000)], sizes=sizes)
    assert len(sizes) == 3000
    small = [Message.user("a"), Message.user("b")]
    measure_request("", "", [], small, sizes=sizes)
    assert len(sizes) <= 2 * len(small) + 1024
    assert measure_request("", "", [], small, sizes=sizes) == measure_request("", "", [], small,
                                                                              sizes=MessageSizeCache())


def test_warm_measure_of_2000_messages_is_fast() -> None:
    messages = []
    for i in range(500):
        messages += [Message.user(f"prompt {i} " * 20), call({"path": f"src/m{i}.py", "limit": 200}),
                     result("content line\n" * 300, evidence_error="disk full" if i % 50 == 0 else None),
                     Message(role="assistant", kind="turn", parts=(TextPart(text="ok " * 40),))]
    sizes, estimator = MessageSizeCache(), TokenEstimator()
    measure_request("s" * 4000, "v" * 2000, TOOLS, messages, estimator, sizes=sizes)
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        measure_request("s" * 4000, "v" * 2000, TOOLS, messages, estimator, sizes=sizes)
        timings.append(time.perf_counter() - start)
    assert min(timings) < 0.020  # the budget (benchmarks/context_budget.py: ~1 ms)
