"""Provider keys never reach the screen, ``--json``, the debug log or the session files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import cli
from tests.wire_server import WireServer

KEY = "sk-proj-SECRETVALUE-0123456789abcdef"


@pytest.mark.parametrize("provider, model, env, suffix", [
    ("openai", "openai:gpt-4o-mini", "OPENAI_API_KEY", "/v1"),
    ("anthropic", "anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY", ""),
    ("google", "google:gemini-2.5-flash", "GEMINI_API_KEY", ""),
])
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_error_body_echoing_the_key_under_verbose_logging(tmp_path: Path, amos_home: Path, monkeypatch,
                                                          provider, model, env, suffix):
    monkeypatch.setenv(env, KEY)
    monkeypatch.setenv("OTHER_SERVICE_TOKEN", "tok-OTHERSECRET-42")
    body = {"error": {"message": f"Incorrect API key provided: {KEY}. tok-OTHERSECRET-42",
                      "type": "invalid_request_error", "code": 401, "status": "UNAUTHENTICATED"}}
    with WireServer() as server:
        server.reply(401, body)
        result = cli("run", "--verbose", "--model", model, "--base-url", server.url + suffix,
                     "--workspace", str(tmp_path), "--json", "hi")
    out = json.loads([line for line in result.stdout.splitlines() if line.strip()][-1])
    assert result.exit_code == 1 and out["stop"]["cause"] == "provider_error", out
    assert out["stop"]["reason"] == "auth"
    for secret in (KEY, "tok-OTHERSECRET-42"):
        assert secret not in result.stdout and secret not in (result.stderr or "")
        for path in amos_home.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
    assert any(amos_home.rglob("*.log")), "the --verbose debug log was written"


@pytest.mark.parametrize("suffix", ["\r", "\n", " "])
def test_key_with_trailing_whitespace_is_stripped_and_never_shown(tmp_path: Path, amos_home: Path, monkeypatch,
                                                                  suffix):
    monkeypatch.setenv("OPENAI_API_KEY", KEY + suffix)
    with WireServer() as server:
        server.reply(401, {"error": {"message": f"bad key {KEY}", "type": "invalid_request_error"}})
        result = cli("run", "--model", "openai:gpt-4o-mini", "--base-url", server.url + "/v1",
                     "--workspace", str(tmp_path), "--json", "hi")
    headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert headers["authorization"] == f"Bearer {KEY}"
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["stop"]["reason"] == "auth"
    assert KEY not in result.stdout and KEY not in (result.stderr or "")
    for path in amos_home.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_key_with_inner_control_characters_is_a_config_error(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-abc\x07def")
    result = cli("run", "--model", "anthropic:claude-x", "--workspace", str(tmp_path), "hi")
    assert result.exit_code == 2 and "control characters" in result.stderr and "abc" not in result.stderr
