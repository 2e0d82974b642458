"""SessionStore: atomic versioned files, locks, names, and what never reaches disk."""

from __future__ import annotations

import json
import os
import stat

import pytest

from amos.errors import SessionError
from amos.messages import MESSAGES_ADAPTER, Message, TextPart, ToolCallPart, ToolResultPart
from amos.sessions import SESSION_VERSION, HostSettings, SessionStore

from .support import cli, cli_json, collect, make_runner, write_script


def test_round_trip_is_versioned_private_and_atomic(tmp_path):
    store = SessionStore(tmp_path / "sessions")
    session = store.create(HostSettings(model="scripted:/x.json", workspace="/w"))
    session.messages.append(Message.user("hello"))
    session.messages.append(Message(role="assistant", kind="turn", parts=(
        TextPart(text="calling"), ToolCallPart(call_id="c1", tool_name="read_file", arguments={"path": "a"},
                                               provider_details={"sig": "abc"}))))
    session.messages.append(Message.tool_result(ToolResultPart(call_id="c1", tool_name="read_file", content="x")))
    path = store.save(session)
    data = json.loads(path.read_text())
    assert data["version"] == SESSION_VERSION == 2
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    loaded = store.load(session.id)
    assert loaded.messages == session.messages
    assert loaded.messages[1].tool_calls[0].provider_details == {"sig": "abc"}
    # one TypeAdapter loads and saves the transcript
    dumped = MESSAGES_ADAPTER.dump_python(loaded.messages, mode="json")
    assert MESSAGES_ADAPTER.validate_python(dumped) == loaded.messages


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    store = SessionStore(tmp_path)
    session = store.create()
    session.title = "first"
    path = store.save(session)
    before = path.read_text()

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    session.title = "second"
    with pytest.raises(SessionError) as info:
        store.save(session)
    assert info.value.code == "write_failed" and "No space left" in str(info.value)
    assert path.read_text() == before


def test_corrupt_and_future_files_are_reported_not_guessed(tmp_path):
    store = SessionStore(tmp_path)
    session = store.create()
    path = store.save(session)
    path.write_text("{not json")
    with pytest.raises(SessionError) as info:
        store.load(session.id)
    assert info.value.code == "corrupt" and str(path) in str(info.value)
    assert path.read_text() == "{not json"
    path.write_text(json.dumps({"version": 99, "id": session.id}))
    with pytest.raises(SessionError, match="version 99"):
        store.load(session.id)
    result = cli("sessions", "show", session.id, "--config", str(_cfg(tmp_path)))
    assert result.exit_code == 2 and "Traceback" not in result.stderr


def _cfg(tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"sessions": {"directory": str(tmp_path)}}))
    return cfg


def test_names_and_prefixes_resolve(tmp_path):
    store = SessionStore(tmp_path)
    a = store.create()
    a.name = "alpha"
    store.save(a)
    assert store.resolve("alpha") == a.id
    assert store.resolve(a.id[:-2]) == a.id
    with pytest.raises(SessionError) as info:
        store.resolve("nope")
    assert info.value.code == "not_found"


def test_a_session_in_use_is_busy_for_another_runner(tmp_path):
    script = write_script(tmp_path, [{"text": "hi"}])
    runner, _ = make_runner(script, tmp_path)
    try:
        collect(runner, "x")
        sid = runner.session_id
        with pytest.raises(SessionError) as info:
            make_runner(script, tmp_path, session=sid)
        assert info.value.code == "busy"
        result = cli("run", "--session", sid, "again")
        assert result.exit_code == 2 and "in use" in result.stderr
    finally:
        runner.close()
    other, _ = make_runner(script, tmp_path, session=sid)
    other.close()


def test_no_secret_and_no_yes_reach_the_session(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-SECRET123")
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "env"}}]},
        {"text": "done"},
    ])
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(tmp_path),
                         "--base-url", "https://user:hunter2@proxy.example/v1", "print env")
    assert code == 0, doc
    text = open(doc["session_path"]).read()
    assert "sk-live-SECRET123" not in text
    assert "hunter2" not in text
    host = json.loads(text)["host"]
    assert "yes" not in host and set(host) == {"model", "base_url", "workspace", "config_path", "verify", "max_steps",
                                           "checker_pins", "machine"}
