"""`amos run --model google:…` end to end: the real CLI, the real google-genai client, real
HTTP to a loopback server replaying Gemini wire responses (tests/wire_server.py)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from .support import cli
from .wire_server import FIXTURES, WireServer

KEY = "AIzaSyFAKE-gemini-e2e-key-7f3a9c"
SIGNATURE = b"\x0a\x24synthetic signature for read_file\xff\xfe"


def sse(*chunks: dict) -> str:
    """Gemini's stream format: ``data:`` lines with CRLF, no [DONE]."""
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)


def chunk(parts: list[dict], *, finish: str | None = None, prompt: int = 120, out: int = 0) -> dict:
    candidate: dict = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate],
            "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": out,
                              "totalTokenCount": prompt + out},
            "modelVersion": "gemini-2.5-flash", "responseId": "e2eSyntheticResp"}


TURN1 = sse(
    chunk([{"functionCall": {"name": "read_file", "args": {"path": "a.txt"}},
            "thoughtSignature": base64.b64encode(SIGNATURE).decode()}], out=9),
    chunk([{"functionCall": {"name": "list_dir", "args": {"path": "."}}}], finish="STOP", out=18),
)
TURN2 = sse(
    chunk([{"text": "a.txt says: hello from "}], prompt=260),
    chunk([{"text": "the workspace °"}], finish="STOP", prompt=260, out=12),
)


def run_cli(server: WireServer, workspace: Path, prompt: str = "read a.txt and list the folder"):
    result = cli("run", "--model", "google:gemini-2.5-flash", "--base-url", server.url,
                 "--workspace", str(workspace), "--json", prompt)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, (result.stdout, result.stderr)
    return result, json.loads(lines[0])


def key_absent_everywhere(result, home: Path) -> None:
    assert KEY not in result.stdout and KEY not in (result.stderr or "")
    for path in home.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


@pytest.fixture
def gemini_key(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)


def test_two_read_only_calls_then_an_answer(tmp_path, amos_home, gemini_key):
    (tmp_path / "a.txt").write_text("hello from the workspace\n", encoding="utf-8")
    with WireServer() as server:
        server.reply(200, TURN1, sse=True)
        server.reply(200, TURN2, sse=True, byte_by_byte=True)
        result, doc = run_cli(server, tmp_path)
        requests = list(server.requests)
    assert result.exit_code == 0, doc
    assert doc["stop"]["verdict"] == "ANSWERED" and doc["stop"]["cause"] == "answer"
    assert doc["output_text"] == "a.txt says: hello from the workspace °"
    assert [(c["tool"], c["status"]) for c in doc["tool_calls"]] == [
        ("read_file", "succeeded"), ("list_dir", "succeeded")]
    assert doc["usage"]["model_calls"] == 2 and doc["usage"]["input_tokens"] == 380

    assert len(requests) == 2
    assert requests[0].path == "/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert requests[0].headers.get("x-goog-api-key") == KEY  # the key goes in the header only
    contents = requests[1].json["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    model_parts = contents[1]["parts"]
    assert [p["functionCall"]["name"] for p in model_parts] == ["read_file", "list_dir"]
    assert base64.urlsafe_b64decode(model_parts[0]["thoughtSignature"]) == SIGNATURE
    assert "thoughtSignature" not in model_parts[1]
    answers = contents[2]["parts"]
    assert [p["functionResponse"]["name"] for p in answers] == ["read_file", "list_dir"]
    assert all("id" not in p["functionCall"] for p in model_parts)  # generated ids stay local
    assert all("id" not in p["functionResponse"] for p in answers)
    assert "hello from the workspace" in answers[0]["functionResponse"]["response"]["output"]
    assert "a.txt" in answers[1]["functionResponse"]["response"]["output"]
    key_absent_everywhere(result, amos_home)


@pytest.mark.parametrize("name", ["error_400_api_key_invalid.json", "error_403_permission_denied.json"])
def test_rejected_key_fails_cleanly(tmp_path, amos_home, gemini_key, name):
    with WireServer() as server:
        server.reply(int(name.split("_")[1]), FIXTURES / "gemini" / name)
        result, doc = run_cli(server, tmp_path, "hello")
        assert len(server.requests) == 1  # auth errors are not retried
    assert result.exit_code == 1
    assert doc["stop"]["verdict"] == "FAILED" and doc["stop"]["cause"] == "provider_error"
    assert doc["stop"]["reason"] == "auth"
    assert "Traceback" not in result.stdout + (result.stderr or "")
    key_absent_everywhere(result, amos_home)
