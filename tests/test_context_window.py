"""Learning a server's context window (issue 17 item 16): probe and error parsing.

Recorded answers from real servers are in test_provider_llamacpp.py; the vLLM and Ollama
shapes here are from their API documentation (no such server was run for these tests).
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from amos.providers.context_window import probe_context_window, server_root, window_from_error
from tests.wire_server import Recorded, Reply, WireServer


def serve(routes: dict[tuple[str, str], dict | None]) -> WireServer:
    server = WireServer()

    def route(request: Recorded) -> Reply:
        body = routes.get((request.method, request.path.split("?")[0]))
        if body is None:
            return Reply(404, b'{"detail": "Not Found"}', {"content-type": "application/json"})
        return Reply(200, json.dumps(body).encode(), {"content-type": "application/json"})

    server.route = route
    return server


def test_server_root_drops_v1():
    assert server_root("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080"
    assert server_root("http://h:1/proxy/v1/?x=1") == "http://h:1/proxy"
    assert server_root("http://h:1") == "http://h:1"


def test_vllm_max_model_len_from_models():
    routes = {("GET", "/v1/models"): {"object": "list", "data": [
        {"id": "other", "max_model_len": 1024},
        {"id": "Qwen/Qwen2.5-7B", "object": "model", "owned_by": "vllm", "max_model_len": 32768}]}}
    with serve(routes) as server:
        assert probe_context_window(f"{server.url}/v1", "Qwen/Qwen2.5-7B") == 32768


def test_ollama_loaded_context_then_num_ctx():
    ps = {"models": [{"name": "qwen2.5:7b", "model": "qwen2.5:7b", "context_length": 8192}]}
    show = {"parameters": "stop \"<|im_end|>\"\nnum_ctx                        16384",
            "model_info": {"qwen2.context_length": 32768}}
    with serve({("GET", "/api/ps"): ps, ("POST", "/api/show"): show}) as server:
        assert probe_context_window(f"{server.url}/v1", "qwen2.5:7b") == 8192
    with serve({("POST", "/api/show"): show}) as server:
        assert probe_context_window(f"{server.url}/v1", "qwen2.5:7b") == 16384
        assert server.requests[-1].json == {"model": "qwen2.5:7b"}


def test_training_length_is_not_the_window():
    show = {"parameters": "stop \"<|im_end|>\"", "model_info": {"qwen2.context_length": 32768}}
    models = {"data": [{"id": "m", "meta": {"n_ctx_train": 8192}}]}
    with serve({("POST", "/api/show"): show, ("GET", "/v1/models"): models}) as server:
        assert probe_context_window(f"{server.url}/v1", "m") is None


def test_closed_port_is_none_at_once():
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    started = time.monotonic()
    assert probe_context_window(f"http://127.0.0.1:{port}/v1", "m") is None
    assert time.monotonic() - started < 1.5


def test_garbage_answers_are_none():
    routes = {("GET", "/props"): {"n_ctx": "lots"}, ("GET", "/v1/models"): {"data": "x"}}
    with serve(routes) as server:
        assert probe_context_window(f"{server.url}/v1", "m") is None


@pytest.mark.parametrize(("message", "window"), [
    ("This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
     128000),
    ("Requested tokens (4712) exceed context window of 2048", 2048),
    ("prompt is too long: 210000 tokens > 200000 maximum", 200000),
    ("The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", 1048576),
    ("Trying to keep the first 5000 tokens when context the overflows. However, the model is loaded with "
     "context length of only 4096 tokens, which is not enough.", 4096),
    ("the request exceeds the available context size, try increasing it", None),
    ("rate limited", None),
])
def test_window_from_error_messages(message, window):
    assert window_from_error(message) == window


def test_window_from_llama_server_error_body():
    body = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                      "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}
    assert window_from_error(body["error"]["message"], body) == 4096
