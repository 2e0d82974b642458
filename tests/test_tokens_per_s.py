"""Tokens per second in receipts and the TUI status bar (issue 23).

Measured per model call from its first streamed text delta to its end (the whole call
when fewer than two deltas came), over reported or estimated output tokens; given once at
least 0.1 s of generation was timed, so offline scripts keep the usage shape they had.
"""

from __future__ import annotations

import json
from pathlib import Path

from amos.messages import Usage
from amos.tui.widgets.status_bar import Status, _usage_variants
from tests.llamacpp_replay import LlamaServerReplay
from tests.support import cli_json, write_script

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
