"""Provider edge cases found in trials: cut-off streams, non-stream bodies, refusal text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import cli
from tests.wire_server import WireServer

CUT = ('data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
       '"delta":{"role":"assistant","content":"All tests pass and I have "},"finish_reason":null}]}\n\n')
REFUSAL = ('data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
           '"delta":{"role":"assistant","refusal":"I can\'t help with that."},"finish_reason":null}]}\n\n'
           'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
           '"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


def run(tmp_path: Path, body: str, model: str = "openai:gpt-4o-mini"):
    with WireServer() as server:
        server.reply(200, body, sse=True)
        result = cli("run", "--model", model, "--base-url", server.url + "/v1", "--workspace", str(tmp_path),
                     "--json", "hi")
    return result, json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("model", ["openai:gpt-4o-mini", "openai-compatible:llama3"])
@pytest.mark.parametrize("body", [CUT, "this is not json at all\n"])
def test_stream_without_finish_reason_is_failed_not_answered(tmp_path, monkeypatch, model, body):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123456")
    result, out = run(tmp_path, body, model)
    assert result.exit_code == 1 and out["stop"]["verdict"] == "FAILED", out
    assert out["stop"]["cause"] == "provider_error"


def test_openai_refusal_text_reaches_the_receipt(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123456")
    result, out = run(tmp_path, REFUSAL)
    assert out["stop"]["cause"] == "refusal" and "I can't help with that." in out["stop"]["detail"]


def test_nan_arguments_are_invalid_json_not_a_later_crash():
    from amos.providers.common import decode_arguments

    assert decode_arguments('{"x": NaN}') == (None, '{"x": NaN}')
    assert decode_arguments('{"x": Infinity}')[0] is None


def test_deeply_nested_invalid_arguments_are_a_tool_error(tmp_path):
    import gc

    from tests.support import collect, finished, make_runner, write_script

    # Objects earlier tests left for the collector (closed event loops) must not be
    # finalised while this run's stack is deep: their __del__ would hit the recursion
    # limit and pytest reports that as this test's failure.
    gc.collect()

    deep = "[" * 100_000 + "]" * 99_999
    script = write_script(tmp_path, [{"tool_calls": [{"name": "read_file", "raw_arguments": deep}]},
                                     {"text": "ok"}])
    cfg = tmp_path / "wide.json"  # 200 KB of arguments is more than the default 32,000-token window
    cfg.write_text('{"context": {"window_tokens": 1000000}}')
    runner, _ = make_runner(script, tmp_path, config_path=cfg)
    try:
        done = finished(collect(runner, "go"))
    finally:
        runner.close()
    assert done.receipt.verdict == "ANSWERED"
    assert done.tool_calls[0]["status"] == "failed"
