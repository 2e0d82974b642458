"""Partial turns (issue 23): a provider error mid-stream and Ctrl+C are treated alike.

The text streamed before the turn was cut is kept, masked, as an assistant message
marked ``partial``; exactly one model call is counted; and every provider's request
builder sends it marked incomplete, never as a whole answer. Real SDK clients speak HTTP
to local replaying servers (the llama-cpp-python ``cut_1`` recording, and a stream that
stalls so it can be cancelled).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from amos.context import build_request, partial_note
from amos.engine import RunOptions, open_host
from amos.events import TextDelta
from amos.messages import Message, TextPart
from amos.providers.anthropic import wire_messages
from amos.providers.google import to_contents
from amos.providers.openai import chat_messages
from tests.llamacpp_replay import LlamaCppPythonReplay
from tests.support import cli, cli_json, finished, write_script
from tests.test_provider_openai_cli import chunk, sse
from tests.wire_server import Reply, WireServer

KEY = "sk-proj-PARTIAL-SECRET-0123456789abcdef"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


def _session(session_id: str) -> dict:
    return json.loads(cli("sessions", "show", session_id, "--json").stdout)


def test_a_stream_cut_mid_way_keeps_its_text_as_a_partial_turn_and_counts_one_call(ws, tmp_path):
    cfg = tmp_path / "amos.json"
    cfg.write_text(json.dumps({"providers": {"openai-compatible": {"max_retries": 0, "max_tokens": 64}}}))
    with LlamaCppPythonReplay() as server:
        server.serve("cut_1")
        code, out = cli_json("run", "--config", str(cfg), "--model", "openai-compatible:smollm2", "--base-url",
                             f"{server.url}/v1", "--workspace", str(ws), "What is a build log? One sentence.")
    assert (code, out["stop"]["cause"], out["stop"]["reason"]) == (1, "provider_error", "connection")
    assert "cannot reach" not in out["stop"]["detail"] and "was cut after 6 chunks" in out["stop"]["detail"]
    assert out["usage"]["model_calls"] == 1 and out["usage"]["estimated"] is True
    assert out["usage"]["output_tokens"] > 0
    last = _session(out["session_id"])["messages"][-1]
    assert last["role"] == "assistant" and last["partial"] == "error"
    assert last["parts"] == [{"part_kind": "text", "text": "A build log is a"}]


def test_the_next_request_carries_the_partial_turn_marked_incomplete(ws, tmp_path):
    cfg = tmp_path / "amos.json"
    cfg.write_text(json.dumps({"providers": {"openai-compatible": {"max_retries": 0, "max_tokens": 64}}}))
    with LlamaCppPythonReplay() as server:
        server.serve("cut_1")
        _, out = cli_json("run", "--config", str(cfg), "--model", "openai-compatible:smollm2", "--base-url",
                          f"{server.url}/v1", "--workspace", str(ws), "What is a build log? One sentence.")
        server.serve("tools_no_choice_1")
        cli_json("run", "--config", str(cfg), "--session", out["session_id"], "--base-url", f"{server.url}/v1",
                 "--workspace", str(ws), "Go on.")
    messages = server.requests[-1].json["messages"]
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert assistant == [{"role": "assistant", "content": f"A build log is a\n\n{partial_note('error')}"}]
    assert "partial" not in json.dumps(messages)


def _stalling_stream(text_pieces: list[str]) -> Reply:
    body = sse(chunk({"role": "assistant", "content": ""}), *[chunk({"content": p}) for p in text_pieces])
    body = body.replace(b"data: [DONE]\n\n", b"")  # the stream goes on: no finish, no [DONE]
    return Reply(200, body, {"content-type": "text/event-stream"}, cut=True, hold_s=3.0)


def test_ctrl_c_mid_stream_keeps_the_masked_partial_text_and_counts_one_call(ws, monkeypatch):
    monkeypatch.setenv("LOCAL_LLM_KEY", KEY)
    cfg = ws.parent / "amos.json"
    cfg.write_text(json.dumps({"providers": {"openai-compatible": {"max_retries": 0, "api_key_env": "LOCAL_LLM_KEY"}}}))
    text = f"Working on it: the key is {KEY} and then"
    pieces = [text[i:i + 6] for i in range(0, len(text), 6)]
    with WireServer() as server:
        server.replies.append(_stalling_stream(pieces))
        host, _ = open_host(RunOptions(config_path=cfg, model="openai-compatible:m", base_url=f"{server.url}/v1",
                                       workspace=ws, cwd=ws))

        async def go() -> list:
            out = []
            shown = ""
            async for event in host.run("tell me"):
                out.append(event)
                if isinstance(event, TextDelta):
                    shown += event.text
                    if "and" in shown:  # everything was shown but the stream is still open
                        host.cancel()
            return out

        try:
            events = asyncio.run(asyncio.wait_for(go(), 10))
            messages = list(host.session.messages)
        finally:
            host.close()
    done = finished(events)
    assert (done.receipt.verdict, done.receipt.cause, done.receipt.reason) == ("BOUNDED_STOP", "user_abort",
                                                                               "cancelled")
    assert done.usage.model_calls == 1 and done.usage.estimated  # one call, not none (the TUI counted it so)
    last = messages[-1]
    assert last.role == "assistant" and last.partial == "cancelled"
    assert KEY not in last.text and "Working on it: the key is" in last.text and "[REDACTED]" in last.text
    assert last.tool_calls == []


def test_ctrl_c_before_any_text_counts_the_call_and_records_nothing(ws, tmp_path):
    script = write_script(tmp_path, [{"delay_ms": 5000, "text": "late"}])
    host, _ = open_host(RunOptions(model=f"scripted:{script}", workspace=ws, cwd=ws))

    async def go() -> list:
        asyncio.get_running_loop().call_later(0.3, host.cancel)
        return [e async for e in host.run("x")]

    try:
        events = asyncio.run(asyncio.wait_for(go(), 10))
        messages = list(host.session.messages)
    finally:
        host.close()
    done = finished(events)
    assert done.receipt.cause == "user_abort" and done.usage.model_calls == 1
    assert [m.role for m in messages] == ["user"]


@pytest.mark.parametrize("why", ["error", "cancelled", "doom_loop"])
def test_every_provider_builder_sends_a_partial_turn_marked_incomplete(why):
    history = [Message.user("hi"),
               Message(role="assistant", kind="turn", parts=(TextPart(text="Half an ans"),), partial=why),
               Message.user("and?")]
    request = build_request("s", history, [])
    note = partial_note(why)
    sent = request.messages[1]
    assert sent.partial is None and sent.text == f"Half an ans\n\n{note}"
    assert history[1].text == "Half an ans"  # the session keeps what was streamed
    openai_wire = chat_messages("s", request.messages, "openai-compatible")
    assert openai_wire[2] == {"role": "assistant", "content": sent.text}
    anthropic_wire = wire_messages(request.messages)
    assert anthropic_wire[1]["role"] == "assistant" and note in json.dumps(anthropic_wire[1])
    google_wire = to_contents(request.messages)
    assert google_wire[1].role == "model" and google_wire[1].parts[-1].text.endswith(note)


def test_a_partial_turn_with_no_text_is_only_the_note():
    message = Message(role="assistant", kind="turn", parts=(), partial="cancelled")
    assert build_request("s", [message], []).messages[0].text == partial_note("cancelled")


def test_a_stream_that_just_ends_without_a_finish_is_a_partial_turn_not_an_answer(ws, tmp_path, monkeypatch):
    """A server closing its stream cleanly with no ``finish_reason`` and no ``[DONE]``: the
    text is a cut-off answer — not printed as the answer, kept ``partial``, sent back marked."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    body = sse(chunk({"role": "assistant", "content": ""}), chunk({"content": "The answer is"}),
               chunk({"content": " forty"})).replace(b"data: [DONE]\n\n", b"")
    with WireServer() as server:
        server.replies.append(Reply(200, body, {"content-type": "text/event-stream"}))
        result = cli("run", "--model", "openai-compatible:tiny", "--base-url", f"{server.url}/v1",
                     "--workspace", str(ws), "What is the answer?")
        assert result.exit_code == 1, result.stderr
        assert "The answer is" not in result.stdout, "a cut-off text is not the answer"
        assert "the stream ended without a finish reason" in result.stderr
        sid = _session_id_from(result.stderr)
        last = _session(sid)["messages"][-1]
        assert last["role"] == "assistant" and last["partial"] == "error"
        assert last["parts"] == [{"part_kind": "text", "text": "The answer is forty"}]
        server.replies.append(Reply(200, sse(chunk({"content": "42"}, finish="stop")),
                                    {"content-type": "text/event-stream"}))
        again = cli("run", "--session", sid, "--base-url", f"{server.url}/v1", "--workspace", str(ws), "Go on.")
    assert again.exit_code == 0, again.stderr
    assistant = [m for m in server.requests[-1].json["messages"] if m["role"] == "assistant"]
    assert assistant == [{"role": "assistant", "content": f"The answer is forty\n\n{partial_note('error')}"}]


def _session_id_from(stderr: str) -> str:
    import re

    found = re.search(r"\b(\d{8}-\d{6}-[0-9a-f]{6})\b", stderr)
    assert found, stderr
    return found.group(1)
