"""A provider's "context too long" error has a way forward (issue 17, item 16): amos learns
the window from the error, compacts once, asks again, and budgets against that window
from then on; when nothing can make it fit, the message names ``context.window_tokens``.
Real openai SDK against a loopback server."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import cli, cli_json, write_script
from tests.test_provider_openai_cli import text_turn
from tests.wire_server import WireServer

TOO_LONG = {"error": {"message": "This model's maximum context length is 3000 tokens. However, your messages "
                                 "resulted in 5120 tokens. Please reduce the length of the messages.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


def _long_session(tmp_path: Path, ws: Path, cfg: Path) -> str:
    """A session with a long history, made offline on the scripted model."""
    turns = [{"text": f"part {n}: " + "a long explanation of the work so far " * 40} for n in range(5)]
    script = write_script(tmp_path, turns)
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "start")
    sid = doc["session_id"]
    for n in range(4):
        code, doc = cli_json("run", "--session", sid, "--config", str(cfg), f"go on {n}")
        assert code == 0
    return sid


def test_a_context_length_error_is_learned_compacted_and_retried(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"context": {"keep_recent_turns": 1}}))
    sid = _long_session(tmp_path, ws, cfg)
    with WireServer() as server:
        server.reply(400, TOO_LONG)
        server.reply(200, text_turn("Summary: five long explanations of the work."), sse=True)
        server.reply(200, text_turn("Here is the next step."), sse=True)
        result = cli("run", "--session", sid, "--config", str(cfg), "--model", "openai-compatible:small",
                     "--base-url", f"{server.url}/v1", "--json", "and now?")
    doc = json.loads(result.stdout)
    assert doc["stop"]["verdict"] == "ANSWERED" and doc["output_text"] == "Here is the next step.", doc["stop"]
    assert len(server.requests) == 3  # the failed request, the summary, the request again
    shown = json.loads(cli("sessions", "show", sid, "--json", "--config", str(cfg)).stdout)
    assert shown["context_window"] == 3000
    code, ctx = cli_json("run", "--session", sid, "--config", str(cfg), "--script",
                         str(write_script(tmp_path, [{"text": "x"}], name="x.json")), "/context")
    assert ctx["result"]["context"]["window_tokens"] == 3000
    assert ctx["result"]["context"]["window_source"] == "server"


def test_when_nothing_fits_the_error_names_context_window_tokens(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    with WireServer() as server:
        server.reply(400, TOO_LONG)
        result = cli("run", "--model", "openai-compatible:small", "--base-url", f"{server.url}/v1",
                     "--workspace", str(ws), "--json", "hello")
    doc = json.loads(result.stdout)
    assert (doc["stop"]["verdict"], doc["stop"]["reason"]) == ("FAILED", "context_length")
    assert "context.window_tokens" in doc["stop"]["detail"]
