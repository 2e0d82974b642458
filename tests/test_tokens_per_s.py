"""Tokens per second in receipts and the TUI status bar (issue 23).

Measured per model call from its first streamed text delta to its end (the whole call
when fewer than two deltas came), over reported or estimated output tokens; given once at
least 0.1 s of generation was timed, so offline scripts keep the usage shape they had.
"""

from __future__ import annotations

import json
from pathlib import Path

from amos.messages import Usage
from amos.tui.app import AmosApp
from amos.tui.widgets.status_bar import Status, StatusBar, _usage_variants
from tests import test_tui
from tests.llamacpp_replay import LlamaServerReplay
from tests.support import cli, cli_json, write_script
from tests.test_tui import submit, wait_for

make_runner = test_tui.make_runner
workspace = test_tui.workspace

PACE_S = 0.03
"""Seconds between two SSE events of the paced replay (about 33 tokens per second)."""


def _run_paced(tmp_path: Path, recording: str, settings: dict) -> dict:
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = tmp_path / "amos.json"
    cfg.write_text(json.dumps({"providers": {"openai-compatible": {"max_retries": 0, **settings}}}))
    with LlamaServerReplay() as server:
        server.serve(recording)
        server.replies[0].event_delay_s = PACE_S
        code, out = cli_json("run", "--config", str(cfg), "--model", "openai-compatible:smollm2", "--base-url",
                             f"{server.url}/v1", "--workspace", str(ws), "What is a build log? One sentence.")
    assert code == 0, out["stop"]
    return out


def test_json_usage_gives_output_tokens_per_second_of_a_paced_real_stream(tmp_path):
    """``ls_template_no_tools_1`` (llama-server, usage reported: 33 output tokens) replayed
    at one SSE event per 30 ms."""
    out = _run_paced(tmp_path, "ls_template_no_tools_1", {"max_tokens": 64})
    usage = out["usage"]
    assert usage["output_tokens"] == 33 and usage["generated_tokens"] == 33
    assert 0.8 <= usage["generation_s"] < 5
    assert 5 < usage["output_tokens_per_s"] <= 36
    assert out["stop"]["usage"]["output_tokens_per_s"] == usage["output_tokens_per_s"]


def test_a_scripted_run_keeps_the_usage_shape(tmp_path):
    script = write_script(tmp_path, [{"text": "done quickly", "usage": {"input_tokens": 10, "output_tokens": 2}}])
    code, out = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "go")
    assert code == 0
    assert set(out["usage"]) == {"input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens",
                                 "model_calls", "cost_usd"}


def test_usage_adds_and_reloads_its_timing():
    total = Usage()
    total.add(Usage(output_tokens=40, model_calls=1, generation_s=2.0, generated_tokens=40))
    total.add(Usage(output_tokens=5, model_calls=1))  # an untimed call (a compaction summary)
    assert total.output_tokens_per_s == 20.0
    data = total.model_dump(mode="json")
    assert data["output_tokens_per_s"] == 20.0 and data["generation_s"] == 2.0
    again = Usage.model_validate(data)  # the derived figure is not a field
    assert again.output_tokens_per_s == 20.0 and again.generated_tokens == 40
    start = again.model_copy()
    again.add(Usage(output_tokens=10, model_calls=1, generation_s=0.5, generated_tokens=10))
    assert again.since(start).output_tokens_per_s == 20.0
    assert Usage(output_tokens=9, generation_s=0.05, generated_tokens=9).output_tokens_per_s is None


def test_status_bar_shows_tokens_per_second_when_known():
    known = _usage_variants(Status(tokens_in=1200, tokens_out=300, tokens_per_s=35.24, tokens_estimated=True))
    assert known[0] == "~1.2k in / ~300 out tok · ~35 tok/s" and known[1] == "~1.5k tok · ~35 tok/s"
    assert _usage_variants(Status(tokens_in=10, tokens_out=3, tokens_per_s=8.44))[0].endswith("· 8.4 tok/s")
    assert "tok/s" not in " ".join(_usage_variants(Status(tokens_in=10, tokens_out=3)))


PACED_TEXT = " ".join(f"word{n}" for n in range(40))
"""A 40-delta reply (the scripted provider splits text at whitespace)."""


def test_a_paced_script_shows_tokens_per_second_offline(tmp_path):
    """``delta_delay_ms`` (issue 21: the speed must be visible without a server) paces the
    deltas, so the timed generation passes 0.1 s and the estimated rate appears."""
    script = write_script(tmp_path, [{"text": PACED_TEXT, "delta_delay_ms": 10}])
    code, out = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "go")
    assert code == 0, out
    usage = out["usage"]
    assert 0.39 <= usage["generation_s"] < 5, usage  # 39 pauses of 10 ms between 40 deltas
    assert abs(usage["output_tokens_per_s"] - usage["generated_tokens"] / usage["generation_s"]) < 1
    assert 0 < usage["output_tokens_per_s"] < usage["generated_tokens"] / 0.39


def test_a_bad_delta_delay_is_a_configuration_error_naming_the_turn(tmp_path):
    for bad in (-1, "10", True, 1.5, 60_001):
        for field in ("delta_delay_ms", "delay_ms"):
            if field == "delay_ms" and bad == 60_001:
                continue  # delay_ms goes up to an hour
            script = write_script(tmp_path, [{"text": "hi"}, {"text": "x", field: bad}])
            result = cli("run", "--script", str(script), "--workspace", str(tmp_path), "go")
            assert result.exit_code == 2, (field, bad)
            assert f"turns.1.{field}" in result.stderr, result.stderr
            assert "Traceback" not in result.stderr


async def test_the_tui_status_bar_shows_the_rate_of_a_paced_script(make_runner):
    runner, opened = make_runner([{"text": PACED_TEXT, "delta_delay_ms": 10}], no_save=True)
    app = AmosApp(runner, opened)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await submit(pilot, app, "go")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        await pilot.pause()
        assert "tok/s" in app.query_one(StatusBar).render().plain
        assert app.query_one(StatusBar).status.tokens_per_s is not None


async def test_the_status_bar_shows_a_live_rate_while_a_reply_streams(make_runner):
    """A local model can stream one reply for minutes: the bar estimates the rate live."""
    slow = " ".join(f"word{n}" for n in range(200))
    runner, opened = make_runner([{"text": slow, "delta_delay_ms": 20}], no_save=True)
    app = AmosApp(runner, opened)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await submit(pilot, app, "go")
        await wait_for(pilot, lambda: app.query_one(StatusBar).status.rate_live)
        status = app.query_one(StatusBar).status
        assert status.rate_live and status.tokens_per_s is not None and status.tokens_per_s > 0
        assert "tok/s" in app.query_one(StatusBar).render().plain
        assert not app.receipts, "still streaming"
        runner.cancel()
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        await pilot.pause()
        assert not app.query_one(StatusBar).status.rate_live, "after the run: the measured figure"


def test_live_rate_counts_from_the_first_delta_and_resets():
    from amos.tui.live_rate import LiveRate

    now = [100.0]
    rate = LiveRate(clock=lambda: now[0])
    assert rate.value() is None
    rate.feed("x" * 40)
    now[0] += 0.05
    assert rate.value() is None, "under 0.1 s"
    rate.feed("y" * 40)
    now[0] += 0.95
    assert rate.value() == 20.0  # 80 characters ≈ 20 tokens in 1 s
    rate.reset()
    assert rate.value() is None


def test_a_live_rate_stays_on_an_80_column_bar_while_the_first_reply_streams():
    from amos.tui.widgets.status_bar import status_text

    running = Status(model="openai-compatible:smollm2", state="running", step=1, max_steps=20, elapsed_s=4,
                     session_id="20261202-142656-b45f33", saved="unsaved", workspace="/var/tmp/ws",
                     tokens_per_s=12.34, rate_live=True)
    for width in (80, 100):
        assert "~12 tok/s" in status_text(running, width).plain, width
