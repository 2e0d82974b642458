"""Issue 21: ``amos models`` — known models per provider, key status, a server's own list.

The OpenAI-compatible server is a real HTTP server on 127.0.0.1 (tests/wire_server.py),
asked through the openai SDK exactly as a user's Ollama or llama.cpp would be.
"""

from __future__ import annotations

import json
import socket

from tests.support import cli
from tests.wire_server import WireServer

SECRET = "sk-models-0123456789abcdef"


def _models(*args: str, env: dict[str, str] | None = None):
    from typer.testing import CliRunner

    from amos.cli import app

    return CliRunner().invoke(app, ["models", *args], env=env)


def _provider(doc: dict, name: str) -> dict:
    return next(p for p in doc["providers"] if p["provider"] == name)


def test_models_json_lists_server_models_and_key_status_without_the_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with WireServer() as server:
        server.reply(200, {"object": "list", "data": [{"id": "qwen2.5:7b", "object": "model", "owned_by": "me"},
                                                      {"id": "mystery-model", "object": "model", "owned_by": "me"}]})
        result = _models("--base-url", f"{server.url}/v1", "--json")
    assert result.exit_code == 0, result.stderr
    assert SECRET not in result.stdout and SECRET not in result.stderr
    doc = json.loads(result.stdout)
    assert server.requests[0].method == "GET" and server.requests[0].path == "/v1/models"
    compatible = _provider(doc, "openai-compatible")
    assert [m["model"] for m in compatible["server_models"]] == ["openai-compatible:qwen2.5:7b",
                                                                 "openai-compatible:mystery-model"]
    assert compatible["server_models"][0]["window_tokens"] == 32_768  # from amos's window table
    assert compatible["server_models"][0]["window_source"] == "table"
    # a name amos's table does not know: the 32,000 a run would assume, said to be assumed
    assert compatible["server_models"][1]["window_tokens"] == 32_000
    assert compatible["server_models"][1]["window_source"] == "assumed"
    assert compatible["server_error"] is None
    assert _provider(doc, "anthropic")["key"] == "set"
    assert _provider(doc, "openai")["key"] == "not set"
    openai_rows = {m["model"]: m for m in _provider(doc, "openai")["models"]}
    assert openai_rows["openai:gpt-4o-mini"]["window_tokens"] == 128_000
    assert openai_rows["openai:gpt-4o-mini"]["input_usd_per_mtok"] == 0.15  # genai-prices' snapshot
    # the "claude" family row is replaced by names --model takes, each with the family's window
    anthropic = {m["model"]: m for m in _provider(doc, "anthropic")["models"]}
    assert "anthropic:claude" not in anthropic
    assert anthropic["anthropic:claude-sonnet-4-5"]["window_tokens"] == 200_000


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_an_unreachable_server_is_one_line_and_the_rest_is_listed():
    result = _models("--base-url", f"http://127.0.0.1:{_closed_port()}/v1")
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert "server: connection refused — is it running?" in result.stdout
    assert "openai:gpt-4o-mini" in result.stdout and "anthropic:claude-sonnet-4-5" in result.stdout


def test_a_server_error_status_is_reported_not_raised():
    with WireServer() as server:
        server.reply(404, {"error": {"message": "no such route"}})
        result = _models("--base-url", f"{server.url}/v1", "--json")
    assert result.exit_code == 0
    assert _provider(json.loads(result.stdout), "openai-compatible")["server_error"] == "HTTP 404 from GET /models"


def test_the_model_in_force_comes_first_with_its_window_and_price_and_is_marked():
    result = _models("-m", "openai:gpt-4o-mini", "--offline")
    assert result.exit_code == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first == ("model in force: openai:gpt-4o-mini (window 128,000 tokens, amos's table; "
                     "$0.15 / $0.60 per 1M tokens in / out)")
    assert any(line.startswith(" *openai:gpt-4o-mini ") for line in result.stdout.splitlines())
    assert "server: not asked (--offline)" in result.stdout


def test_bad_flags_exit_2_with_one_line():
    result = _models("-m", "nosuch:x")
    assert result.exit_code == 2
    assert "unknown provider 'nosuch'" in result.stderr and "Traceback" not in result.stderr
    result = _models("--base-url", "ftp://x")
    assert result.exit_code == 2


def test_models_is_a_subcommand_and_its_help_has_examples():
    result = cli("models", "--help")
    assert result.exit_code == 0
    assert "Examples:" in result.stdout and "amos models --json" in result.stdout


def test_a_server_model_shows_the_window_a_run_would_use(tmp_path):
    """Text output marks an assumed window, and ``context.window_tokens`` replaces it."""
    cfg = tmp_path / "amos.json"
    cfg.write_text(json.dumps({"context": {"window_tokens": 4096}}))
    with WireServer() as server:
        server.reply(200, {"object": "list", "data": [{"id": "mystery-model", "object": "model"}]})
        server.reply(200, {"object": "list", "data": [{"id": "mystery-model", "object": "model"}]})
        plain = _models("--base-url", f"{server.url}/v1")
        configured = _models("--config", str(cfg), "--base-url", f"{server.url}/v1")
    assert plain.exit_code == 0 and configured.exit_code == 0, (plain.stderr, configured.stderr)
    row = next(line for line in plain.stdout.splitlines() if "openai-compatible:mystery-model" in line)
    assert "32,000" in row or "32k" in row.replace(" ", ""), row
    assert "window assumed" in row
    row = next(line for line in configured.stdout.splitlines() if "openai-compatible:mystery-model" in line)
    assert "window from the config" in row and "assumed" not in row


def test_a_hostile_model_list_cannot_fake_rows_and_is_capped():
    names = ["good-model", "two\nlines  128,000  $0.01", "esc\x1b[31mred", None, 5, "x" * 300,
             "fake  128,000  $1.00 / $2.00", " lead", "good-model"]
    names += [f"bulk-{n}" for n in range(600)]
    with WireServer() as server:
        server.reply(200, {"object": "list", "data": [{"id": n, "object": "model"} for n in names]})
        server.reply(200, {"object": "list", "data": [{"id": n, "object": "model"} for n in names]})
        text = _models("--base-url", f"{server.url}/v1")
        doc = json.loads(_models("--base-url", f"{server.url}/v1", "--json").stdout)
    assert text.exit_code == 0, text.stderr
    compatible = _provider(doc, "openai-compatible")
    listed = [m["model"].removeprefix("openai-compatible:") for m in compatible["server_models"]]
    assert listed[0] == "good-model" and len(listed) == 500
    assert all(n.isprintable() for n in listed)
    assert compatible["server_dropped"] == len(names) - 500
    lines = text.stdout.splitlines()
    assert not any(line.startswith("lines") for line in lines), "a newline in an id made a row"
    assert "\x1b" not in text.stdout and "openai-compatible:None" not in text.stdout
    assert f"server: {len(names) - 500:,} more ids not shown" in text.stdout


def test_an_answer_that_is_not_a_model_list_is_one_plain_line():
    for body in ("<html>oops</html>", {"object": "list", "data": "nope"}, {"data": None}, "[1, 2]"):
        with WireServer() as server:
            server.reply(200, body if not isinstance(body, str) else body.encode(),
                         headers={"content-type": "application/json"} if isinstance(body, str) else None)
            result = _models("--base-url", f"{server.url}/v1")
        assert result.exit_code == 0, (body, result.stderr)
        line = next(x for x in result.stdout.splitlines() if x.startswith("  server:"))
        assert line.startswith("  server: the answer to GET /models is not a model list"), (body, line)
        assert "Error" not in line and "object has no attribute" not in line


def test_the_model_in_force_names_its_window_source_like_the_rows():
    doc = json.loads(_models("-m", "openai-compatible:tiny-1", "--offline", "--json").stdout)
    assert doc["current"]["window_tokens"] == 32_000 and doc["current"]["window_source"] == "assumed"
    doc = json.loads(_models("-m", "openai:gpt-4o", "--offline", "--json").stdout)
    assert doc["current"]["window_source"] == "table"
