"""What a provider failure tells the user: whole, bounded, secret-free, serialisable.

Issue 17 item 10 (a lone surrogate in an error message ended the run with a
serialization traceback and exit 8) and issue 23 "Messages" (a stream cut mid-way said
"cannot reach URL"; details were cut at 300 characters; ``--base-url "not a url"``
retried for 3.5 s and exited 1). Through the real CLI and the real openai SDK against a
loopback server.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from amos.errors import UsageError
from amos.providers.common import (
    MAX_DETAIL_CHARS,
    check_base_url,
    error_detail,
    provider_error,
    serialisable,
)
from tests.support import cli
from tests.wire_server import FIXTURES, WireServer


def run_json(base_url: str, workspace: Path, *extra: str) -> tuple[int, dict, str]:
    result = cli("run", "--model", "openai-compatible:m", "--base-url", base_url, "--workspace", str(workspace),
                 *extra, "--json", "hi")
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, (result.stdout, result.stderr)
    return result.exit_code, json.loads(lines[0]), result.stderr


def test_lone_surrogate_in_a_provider_error_ends_with_a_receipt(tmp_path, amos_home):
    body = b'{"error": {"message": "bad \\ud800 input \\ud83d\\ude00", "type": "invalid_request_error"}}'
    with WireServer() as server:
        server.reply(400, body)
        code, out, stderr = run_json(f"{server.url}/v1", tmp_path)
    assert code == 1, stderr
    assert (out["stop"]["verdict"], out["stop"]["cause"], out["stop"]["reason"]) == (
        "FAILED", "provider_error", "bad_request")
    assert "bad \\ud800 input \U0001F600" in out["stop"]["detail"]  # visible escape; a real pair is joined
    assert "Traceback" not in stderr
    session = Path(out["session_path"])
    assert "\\\\ud800" in session.read_text(encoding="utf-8")  # saved, and loadable again
    shown = cli("sessions", "show", out["session_id"])
    assert shown.exit_code == 0, shown.stderr


def test_serialisable_keeps_valid_text_and_escapes_lone_surrogates():
    assert serialisable("plain é 東京") == "plain é 東京"
    assert serialisable("a\ud800b") == "a\\ud800b"
    assert serialisable("\ud83d\ude00") == "\U0001F600"
    assert serialisable("x\udfff").encode("utf-8") == b"x\\udfff"


RECORDED_500 = FIXTURES / "llamacpp" / "llama-cpp-python" / "content_null_1.response.json"


def test_error_detail_keeps_the_whole_line_that_names_the_field():
    message = json.loads(RECORDED_500.read_text())["error"]["message"]
    assert message.startswith("7 validation errors:\n")
    assert message.index("'ChatCompletionRequestAssistantMessage', 'content')") > 300  # past the old cut
    detail = error_detail(message)
    assert detail == ("7 validation errors: | {'type': 'string_type', 'loc': ('body', 'messages', 2, "
                      "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid "
                      "string', 'input': None}")


def test_error_detail_is_bounded():
    cut = error_detail("field messages.2.content: " + "x" * 5000)
    assert len(cut) == MAX_DETAIL_CHARS and cut.endswith("…") and cut.startswith("field messages.2.content")


def test_error_detail_reaches_the_line_that_names_the_field():
    message = ("7 validation errors for CreateChatCompletionRequest\n"
               "messages.2.typed-dict.content\n"
               "  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]\n"
               "messages.2.typed-dict.role\n  Input should be 'user'\n")
    assert error_detail(message) == ("7 validation errors for CreateChatCompletionRequest | "
                                     "messages.2.typed-dict.content | Input should be a valid string "
                                     "[type=string_type, input_value=None, input_type=NoneType]")


def test_error_detail_is_scrubbed_and_serialisable():
    err = provider_error("openai-compatible", "server", "key sk-secret-123456 and \udc80",
                         status=500, secrets=("sk-secret-123456",))
    assert "sk-secret" not in str(err) and "****" in str(err)
    str(err).encode("utf-8")


def test_a_stream_cut_mid_way_does_not_say_cannot_reach(tmp_path, amos_home):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    chunk = (b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":'
             b'[{"index":0,"delta":{"content":"Hello "},"finish_reason":null}]}\n\n')

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                         + f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        code, out, _ = run_json(f"http://127.0.0.1:{port}/v1", tmp_path)
    finally:
        listener.close()
    assert code == 1
    detail = out["stop"]["detail"]
    assert out["stop"]["reason"] == "connection"
    assert "cannot reach" not in detail
    assert "was cut after 1 chunk" in detail and "mid-stream" in detail


def test_a_closed_port_still_says_cannot_reach(tmp_path, amos_home):
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    config = tmp_path / "amos.json"
    config.write_text(json.dumps({"providers": {"openai-compatible": {"max_retries": 0}}}))
    code, out, _ = run_json(f"http://127.0.0.1:{port}/v1", tmp_path, "--config", str(config))
    assert code == 1 and "cannot reach" in out["stop"]["detail"]


@pytest.mark.parametrize("value", ["not a url", "ftp://host/v1", "localhost:8080", "http://",
                                   "http://127.0.0.1:abc/v1", "http://127.0.0.1:99999/v1", "http://127.0.0.1:0/v1",
                                   "http://127.0.0.1:/v1", "http://:80/v1"])
def test_a_bad_base_url_flag_is_a_usage_error_at_once(tmp_path, amos_home, value):
    started = time.monotonic()
    result = cli("run", "--model", "openai-compatible:m", "--base-url", value, "--workspace", str(tmp_path), "hi")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "--base-url" in result.stderr and "http:// or https://" in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 3  # no connection attempt, no retries


def test_check_base_url_accepts_what_the_config_accepts():
    assert check_base_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"
    with pytest.raises(UsageError, match="must be an http"):
        check_base_url("127.0.0.1:8080")
    assert check_base_url("http://[::1]:8080/v1") == "http://[::1]:8080/v1"
    assert check_base_url("https://user:pw@proxy.example/v1") == "https://user:pw@proxy.example/v1"


def test_a_bad_port_in_the_config_is_found_by_config_check(tmp_path, amos_home):
    config = tmp_path / "amos.json"
    config.write_text(json.dumps({"providers": {"openai-compatible": {"base_url": "http://127.0.0.1:abc/v1"}}}))
    result = cli("config", "check", "--config", str(config))
    assert result.exit_code == 2
    assert "providers.openai-compatible.base_url" in result.stderr and "port from 1 to 65535" in result.stderr


def test_lone_surrogate_in_streamed_text_is_saved_as_an_escape(tmp_path, amos_home):
    def chunk(delta: dict, finish: str | None = None) -> str:
        return "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"

    body = chunk({"role": "assistant", "content": "half \ud83d"}) + chunk({"content": " done"}, "stop") + "data: [DONE]\n\n"
    with WireServer() as server:
        server.reply(200, body, sse=True)
        code, out, stderr = run_json(f"{server.url}/v1", tmp_path)
    assert code == 0, stderr
    assert out["output_text"] == "half \\ud83d done"
    assert cli("sessions", "show", out["session_id"]).exit_code == 0
