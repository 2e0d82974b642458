"""A base URL's password never reaches the screen or the disk, in any form (issue 21).

An HTTP client turns ``http://user:pass@host/v1`` into ``Authorization: Basic
base64(user:pass)``; a server echoing that header in an error body used to put the
base64 form on screen and into the session, its checkpoints, journal and log. The real
CLI and openai SDK talk to a 127.0.0.1 server that echoes the header back.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from amos.redact import url_credentials
from tests.support import cli
from tests.wire_server import Reply, WireServer

PASSWORD = "hunter2pass"
BASIC = base64.b64encode(f"bob:{PASSWORD}".encode()).decode()


def _echo_authorization(recorded) -> Reply:
    said = recorded.headers.get("authorization") or recorded.headers.get("Authorization") or "none"
    body = {"error": {"message": f"bad credentials: {said}", "type": "invalid_request_error"}}
    return Reply(400, json.dumps(body).encode(), {"content-type": "application/json"})


def _everything_written(home: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in home.rglob("*") if p.is_file())


def test_a_password_in_the_base_url_is_masked_in_its_basic_auth_form_too(tmp_path, amos_home, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-sent-0123456789")
    ws = tmp_path / "ws"
    ws.mkdir()
    with WireServer() as server:
        server.route = _echo_authorization
        url = f"http://bob:{PASSWORD}@127.0.0.1:{server.url.rsplit(':', 1)[1]}/v1"
        result = cli("run", "--model", "openai-compatible:m1", "--base-url", url, "--workspace", str(ws),
                     "--verbose", "--json", "hi")
        sent = server.requests[0].headers
    assert any(BASIC in value for value in sent.values()), "the SDK really sent Basic auth"
    assert result.exit_code != 0
    shown = result.stdout + result.stderr
    assert "bad credentials" in shown, shown
    for secret in (PASSWORD, BASIC):
        assert secret not in shown
        assert secret not in _everything_written(amos_home)


def test_url_credentials_cover_each_form():
    assert url_credentials("http://bob:hunter2pass@h/v1") >= {PASSWORD, BASIC}
    assert "p%40ss" in url_credentials("http://bob:p%40ssword@h/") or "p@ssword" in url_credentials(
        "http://bob:p%40ssword@h/")
    token = url_credentials("https://tok3n-abcdef@h/")
    assert "tok3n-abcdef" in token
    assert url_credentials("http://h/v1") == set() and url_credentials(None) == set()
    assert "ab" not in url_credentials("http://ab:cd@h/"), "too short to mask alone"
