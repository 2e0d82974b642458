"""Sessions, approvals and evidence on PostgreSQL (issue 22 "What it must show"), against a
real server on 127.0.0.1 (the ``pg_cluster`` fixture in conftest.py: skipped with the reason
when no server can start, failed instead under ``CI=true``).

Each test gets a fresh database; machines are simulated by separate ``AMOS_HOME`` folders
sharing the database and, where a machine's name matters, ``socket.gethostname``.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from amos.errors import SessionError

from .support import cli, cli_json, write_script

PASSWORD = "s3cret-Pg-passw0rd"


def _home(root: Path, name: str, **config) -> Path:
    """An AMOS_HOME whose user config keeps everything in the shared database."""
    home = root / name
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.json").write_text(json.dumps({"store": {"backend": "postgres"}, **config}))
    return home


def _approval_script(tmp_path: Path) -> Path:
    return write_script(tmp_path, [
        {"text": "writing", "tool_calls": [{"id": "w1", "name": "write_file",
                                            "arguments": {"path": "note.txt", "content": "hi"}}]},
        {"expect": {"last_message_role": "tool"}, "text": "wrote it"},
    ])


def _sql(url: str, statement: str, args: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, args)
        return cur.fetchall() if cur.description else []


# ---------------------------------------------------------------------------- across machines


def test_an_approval_paused_on_one_machine_is_resumed_on_another(tmp_path, pg_url, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = _approval_script(tmp_path)
    monkeypatch.setenv("AMOS_HOME", str(_home(tmp_path, "machine-a")))
    monkeypatch.setattr(socket, "gethostname", lambda: "machine-a")
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "write a note")
    assert code == 5 and doc["stop"]["verdict"] == "WAITING_UNROUTED", doc
    sid = doc["session_id"]
    assert not (ws / "note.txt").exists()
    assert not (tmp_path / "machine-a" / "data" / "sessions").exists()  # nothing of it on local disk

    monkeypatch.setenv("AMOS_HOME", str(_home(tmp_path, "machine-b")))
    monkeypatch.setattr(socket, "gethostname", lambda: "machine-b")
    listed = cli("sessions", "list")
    assert listed.exit_code == 0 and "HOST" in listed.stdout and "machine-a" in listed.stdout, listed.stdout
    code, resumed = cli_json("resume", sid, "--approve", "w1")
    assert code == 0, resumed
    assert resumed["stop"]["verdict"] == "ANSWERED" and resumed["output_text"] == "wrote it"
    assert (ws / "note.txt").read_text() == "hi"
    code, rows = cli_json("sessions", "list")
    assert [(r["id"], r["machine"]) for r in rows["sessions"]] == [(sid, "machine-b")]
    assert not (tmp_path / "machine-b" / "data" / "sessions").exists()


def test_resuming_on_a_machine_without_the_workspace_says_so(tmp_path, pg_url, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("AMOS_HOME", str(_home(tmp_path, "a")))
    monkeypatch.setattr(socket, "gethostname", lambda: "machine-a")
    code, doc = cli_json("run", "--script", str(_approval_script(tmp_path)), "--workspace", str(ws), "go")
    assert code == 5, doc
    ws.rename(tmp_path / "elsewhere")  # machine B has no such folder

    monkeypatch.setenv("AMOS_HOME", str(_home(tmp_path, "b")))
    monkeypatch.setattr(socket, "gethostname", lambda: "machine-b")
    result = cli("resume", doc["session_id"], "--approve", "w1")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert f"workspace {ws} does not exist on this machine (machine-b); the session last ran there on " \
           "machine-a. Pass --workspace DIR" in result.stderr
    # its own copy, named: the session goes on there, with a warning that the folder differs
    result = cli("resume", doc["session_id"], "--approve", "w1", "--workspace", str(tmp_path / "elsewhere"))
    assert result.exit_code == 0, result.stderr
    assert f"this session last ran in {ws} on machine-a; it now runs in {tmp_path / 'elsewhere'}" in result.stderr
    assert (tmp_path / "elsewhere" / "note.txt").read_text() == "hi"


# ---------------------------------------------------------------------------- the run lock

_LOCKER = """
import sys, time
from amos.store_pg.connect import Database
from amos.store_pg.sessions import PgSessionStore
store = PgSessionStore(Database(sys.argv[1]))
ready = sys.argv[3]
while not __import__("os").path.exists(ready):
    time.sleep(0.005)
try:
    store.lock(sys.argv[2])
except Exception as exc:
    print("refused", exc, flush=True)
    sys.exit(0)
print("locked", flush=True)
time.sleep(60)
"""


def test_two_machines_racing_for_one_session_one_is_refused_naming_the_holder(tmp_path, pg_home, pg_url):
    ws = tmp_path / "ws"
    ws.mkdir()
    code, doc = cli_json("run", "--script", str(write_script(tmp_path, [{"text": "one"}, {"text": "two"}])),
                         "--workspace", str(ws), "hello")
    assert code == 0, doc
    sid = doc["session_id"]
    go = tmp_path / "go"
    racers = [subprocess.Popen([sys.executable, "-c", _LOCKER, pg_url, sid, str(go)], stdout=subprocess.PIPE,
                               text=True) for _ in range(2)]
    try:
        go.write_text("now")  # both start at once
        lines = {p.pid: p.stdout.readline().strip() for p in racers}
        winners = [pid for pid, line in lines.items() if line == "locked"]
        assert len(winners) == 1, lines
        loser = next(line for line in lines.values() if line != "locked")
        host = socket.gethostname()
        assert loser.startswith(f"refused session {sid} is in use by another amos process (host {host}, "
                                f"pid {winners[0]}, since"), loser
        started = time.monotonic()
        result = cli("run", "--session", sid, "again")
        assert time.monotonic() - started < 5
        assert result.exit_code == 2 and f"(host {host}, pid {winners[0]}," in result.stderr, result.stderr
        for args in (("sessions", "delete", sid), ("sessions", "restore", sid, "--checkpoint", "1")):
            assert f"pid {winners[0]}" in cli(*args).stderr, args
    finally:
        for racer in racers:
            racer.send_signal(signal.SIGKILL)
            racer.wait(timeout=10)
            racer.stdout.close()
    # a killed holder's lock goes with its connection
    deadline = time.monotonic() + 10
    while True:
        code, doc = cli_json("run", "--session", sid, "again")
        if code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert code == 0 and doc["output_text"] == "two", doc


def test_a_lost_connection_takes_the_storage_error_path(tmp_path, pg_home, pg_url):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "url.txt").write_text(pg_url)
    kill = (f"{sys.executable} -c \"import psycopg; c = psycopg.connect(open('url.txt').read(), autocommit=True); "
            "c.execute('SELECT pg_terminate_backend(backend_pid) FROM amos_run_locks')\"")
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": kill}}]},
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "after.txt", "content": "x"}}]},
        {"text": "done"},
    ])
    code, doc = cli_json("run", "--yes", "--sandbox", "danger-full-access", "--script", str(script),
                         "--workspace", str(ws), "go")
    assert code == 1, doc
    assert doc["stop"]["verdict"] == "FAILED" and doc["stop"]["reason"] == "storage_error", doc["stop"]
    assert not (ws / "after.txt").exists()  # nothing with a side effect ran once the store was lost
    assert "the session journal cannot be written" in json.dumps(doc), doc["stop"]


# ---------------------------------------------------------------------------- evidence


def test_evidence_is_readable_from_any_machine_and_tampering_is_detected(tmp_path, pg_url, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "echo evidence-body"}}]},
        {"text": "ok"},
    ])
    monkeypatch.setenv("AMOS_HOME", str(_home(tmp_path, "a", evidence={"enabled": True})))
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), "go")
    assert code == 0, doc
    assert not (tmp_path / "a" / "data" / "evidence").exists()

    monkeypatch.setenv("AMOS_HOME", str(_home(tmp_path, "b", evidence={"enabled": True})))
    code, page = cli_json("evidence", "list")
    assert code == 0 and len(page["entries"]) == 1, page
    record = page["entries"][0]["id"]
    result = cli("evidence", "read", record)
    assert result.exit_code == 0 and "evidence-body" in result.stdout, result.stderr

    with pytest.raises(psycopg.errors.RaiseException, match="immutable"):
        _sql(pg_url, "UPDATE amos_evidence SET body = body || 'x'::bytea")
    _sql(pg_url, "ALTER TABLE amos_evidence DISABLE TRIGGER amos_evidence_no_update")
    _sql(pg_url, "UPDATE amos_evidence SET body = convert_to(replace(convert_from(body, 'UTF8'), "
                 "'evidence-body', 'evidence-BODY'), 'UTF8')")
    result = cli("evidence", "read", record)
    assert result.exit_code != 0 and "Traceback" not in result.stderr
    assert f"evidence {record} does not match its SHA-256" in result.stderr  # the file store's words
    code, rebuilt = cli_json("evidence", "rebuild")
    assert rebuilt["corrupt"] == [record], rebuilt


# ---------------------------------------------------------------------------- schema, config, secrets


def test_the_schema_is_created_on_first_use_and_a_newer_one_is_refused(tmp_path, pg_cluster, monkeypatch,
                                                                        amos_home):
    _sql(pg_cluster.url, "CREATE DATABASE amos_empty TEMPLATE template0")
    url = pg_cluster.url_of("amos_empty")
    monkeypatch.setenv("AMOS_STORE_URL", url)
    _home(amos_home.parent, amos_home.name + "-x")
    monkeypatch.setenv("AMOS_HOME", str(amos_home.parent / (amos_home.name + "-x")))
    result = cli("sessions", "list")
    assert result.exit_code == 0, result.stderr
    assert _sql(url, "SELECT version FROM amos_schema") == [(1,)]
    _sql(url, "UPDATE amos_schema SET version = 99")
    from amos.store_pg import connect

    connect._DATABASES.pop(url, None)  # a new amos process
    result = cli("sessions", "list")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "has schema version 99, newer than this amos understands (1); upgrade amos" in result.stderr


@pytest.mark.parametrize(("store", "env", "expected"), [
    ({"backend": "mysql"}, None, "store.backend"),
    ({"backend": "postgres", "url": f"http://amos:{PASSWORD}@db/amos"}, None, "store.url"),
    ({"backend": "postgres"}, f"mysql://amos:{PASSWORD}@db", "AMOS_STORE_URL must be a postgresql://"),
    ({"backend": "postgres"}, "", "needs store.url or AMOS_STORE_URL"),
])
def test_bad_store_settings_are_one_line_exit_2_without_the_password(tmp_path, amos_home, monkeypatch, store, env,
                                                                     expected):
    (amos_home / "config").mkdir(exist_ok=True)
    (amos_home / "config" / "config.json").write_text(json.dumps({"store": store}))
    if env is None:
        monkeypatch.delenv("AMOS_STORE_URL", raising=False)
    else:
        monkeypatch.setenv("AMOS_STORE_URL", env)
    result = cli("sessions", "list")
    assert result.exit_code == 2, result.stdout
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert PASSWORD not in result.stderr + result.stdout and "Traceback" not in result.stderr


def test_the_password_is_masked_in_errors_and_in_what_a_run_records(tmp_path, pg_cluster, amos_home,
                                                                     monkeypatch):
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    free = port.getsockname()[1]
    port.close()
    monkeypatch.setenv("AMOS_STORE_URL", f"postgresql://amos:{PASSWORD}@127.0.0.1:{free}/amos")
    (amos_home / "config").mkdir(exist_ok=True)
    (amos_home / "config" / "config.json").write_text(json.dumps({"store": {"backend": "postgres"}}))
    result = cli("sessions", "list")
    assert result.exit_code == 2 and "cannot reach the session store postgresql://amos:****@127.0.0.1" \
        in result.stderr, result.stderr
    assert PASSWORD not in result.stderr

    # a run on the real server: the password a tool prints never reaches the session or evidence
    _sql(pg_cluster.url, "CREATE DATABASE amos_masked TEMPLATE amos_template")
    monkeypatch.setenv("AMOS_STORE_URL", f"postgresql://postgres:{PASSWORD}@127.0.0.1:{pg_cluster.port}/amos_masked")
    (amos_home / "config" / "config.json").write_text(json.dumps({"store": {"backend": "postgres"},
                                                                  "evidence": {"enabled": True}}))
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": f"echo {PASSWORD}; env"}}]},
        {"text": "ok"},
    ])
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), "go")
    assert code == 0, doc
    url = pg_cluster.url_of("amos_masked")
    stored = json.dumps(_sql(url, "SELECT data FROM amos_sessions") + _sql(url, "SELECT entry FROM amos_journal"))
    bodies = b"".join(bytes(r[0]) for r in _sql(url, "SELECT body FROM amos_evidence"))
    assert PASSWORD not in stored and PASSWORD.encode() not in bodies
    assert "[REDACTED]" in stored
    assert b"AMOS_STORE_URL" not in bodies  # the tool's environment does not carry the store's URL
    from amos.store_pg import connect

    for key in [k for k in connect._DATABASES if "amos_masked" in k]:
        connect._DATABASES.pop(key).close()


def test_store_methods_match_the_file_store(pg_url):
    """The file store's public methods all exist on the PostgreSQL store (same interface)."""
    from amos.session_store import SessionStore
    from amos.store_pg.connect import database
    from amos.store_pg.sessions import PgSessionStore

    public = {n for n in vars(SessionStore) if not n.startswith("_")} - {"journal_class", "write_file",
                                                                         "unwritable"}
    assert public <= set(dir(PgSessionStore)), public - set(dir(PgSessionStore))
    store = PgSessionStore(database(pg_url))
    with pytest.raises(SessionError) as caught:
        store.resolve("nope")
    assert caught.value.code == "not_found"


# ---------------------------------------------------------------------------- the file store's durability rules


def _pg_saved_session(url: str, messages: int = 2):
    from amos.messages import Message
    from amos.store_pg.connect import database
    from amos.store_pg.sessions import PgSessionStore

    store = PgSessionStore(database(url))
    session = store.create()
    session.title = "journal test"
    for n in range(messages):
        session.messages.append(Message.user(f"m{n}"))
    store.save(session)
    return store, session


def _fresh(url: str):
    from amos.store_pg.connect import database
    from amos.store_pg.sessions import PgSessionStore

    return PgSessionStore(database(url))


def test_a_journal_ahead_of_the_snapshot_is_replayed_on_load(pg_url):
    from amos.messages import Message

    store, session = _pg_saved_session(pg_url)
    journal = store.journal(session)  # starts with a snapshot of the saved state
    journal.append("message", "t", index=2, message=Message.user("m2").model_dump(mode="json"))
    journal.append("message", "t", index=1, message=Message.user("m1 edited").model_dump(mode="json"))
    journal.append("fields", "t", fields={"title": "retitled", "provider_state": {"k": 1}})
    journal.append("event", "t", event={"event_kind": "step_started", "step": 1, "max_steps": 5})
    journal.append("messages", "t", messages=[m.model_dump(mode="json") for m in
                                              (Message.user("compacted"), Message.user("m2"))])
    journal.append("message", "t", index=2, message=Message.user("m3").model_dump(mode="json"))
    store.save(session)  # entries the snapshot already reflects are not applied twice
    assert _sql(pg_url, "SELECT journal_seq FROM amos_sessions") == [(7,)]
    store.close_journal(session.id)
    assert [m.text for m in _fresh(pg_url).load(session.id).messages] == ["m0", "m1"]

    # a snapshot that lags behind (a run killed before its save): the entries after it are applied
    data = json.loads(_sql(pg_url, "SELECT data FROM amos_sessions")[0][0])
    data["journal_seq"] = 1
    _sql(pg_url, "UPDATE amos_sessions SET data = %s, journal_seq = 1", (json.dumps(data),))
    fresh = _fresh(pg_url)
    loaded = fresh.load(session.id)
    assert [m.text for m in loaded.messages] == ["compacted", "m2", "m3"]
    assert loaded.title == "retitled" and loaded.provider_state == {"k": 1} and loaded.journal_seq == 7
    assert fresh.warnings == [f"session {session.id}: recovered 5 journal entries written after its last "
                              "snapshot (amos stopped before saving)"]
    (row,) = fresh.list()
    assert row.messages == 3 and row.title == "retitled"
    journal = fresh.journal(loaded)
    journal.append("message", "t", index=9, message=Message.user("gap").model_dump(mode="json"))
    journal.append("fields", "t", fields={"title": "never"})
    fresh.close_journal(session.id)
    other = _fresh(pg_url)
    assert other.load(session.id).title == "retitled"
    assert any("does not fit the history" in w for w in other.warnings)


def test_pruning_keeps_labelled_checkpoints_and_numbers_are_never_reused(pg_url):
    from amos.messages import Message

    store, session = _pg_saved_session(pg_url)
    taken = []
    for n in range(8):
        session.messages.append(Message.user(f"extra {n}"))
        taken.append(store.take_checkpoint(session, "save", label="keep-me" if n in (1, 4) else None,
                                           keep=3).number)
    assert taken == list(range(1, 9))
    assert [(r.number, r.label) for r in store.checkpoints_of(session.id).list()] == [
        (2, "keep-me"), (5, "keep-me"), (8, None)]
    store.save(session)
    forgetful = _fresh(pg_url).load(session.id)
    forgetful.last_checkpoint = 0  # an older snapshot: numbering continues after the highest row
    assert store.take_checkpoint(forgetful, "save", label="keep-me", keep=3).number == 9
    lock = store.lock(session.id)
    try:
        restored = store.restore(store.load(session.id), 2, keep=3)
    finally:
        store.close_journal(session.id)
        lock.release()
    assert restored.last_checkpoint == 10 and len(restored.messages) == 4
    loaded = _fresh(pg_url).load(session.id)
    assert loaded.last_checkpoint == 10 and [m.text for m in loaded.messages][-1] == "extra 1"
    assert store.take_checkpoint(loaded, "save", keep=3).number == 11


def test_a_snapshot_that_no_longer_validates_is_listed_broken_and_repaired(tmp_path, pg_home, pg_url):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"text": "one"}, {"text": "two"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "hello")
    assert code == 0, doc
    sid = doc["session_id"]
    _sql(pg_url, "UPDATE amos_sessions SET data = '{\"id\": \"' || id || '\", \"messages\": 7}'")
    listed = cli("sessions", "list")
    assert listed.exit_code == 0 and "BROKEN" in listed.stdout, listed.stdout
    result = cli("run", "--session", sid, "again")
    assert result.exit_code == 2 and f"`amos sessions repair {sid}` rebuilds it from checkpoint 1" in result.stderr
    result = cli("sessions", "repair", sid)
    assert result.exit_code == 0, result.stderr
    code, doc = cli_json("run", "--session", sid, "again")
    assert code == 0 and doc["output_text"] == "two", doc


def test_another_process_holding_the_lock_makes_a_session_live_elsewhere(pg_url):
    """A journal read while another machine runs the session is that live run, not an
    interrupted one (the file store's ``live_elsewhere``)."""
    holder, session = _pg_saved_session(pg_url)
    other = _fresh(pg_url)
    assert not other.live_elsewhere(session.id)
    lock = holder.lock(session.id)
    try:
        assert other.live_elsewhere(session.id) and not holder.live_elsewhere(session.id)
        with pytest.raises(SessionError) as caught:
            other.lock(session.id)
        assert caught.value.code == "busy" and f"host {socket.gethostname()}" in str(caught.value)
    finally:
        lock.release()
    assert not other.live_elsewhere(session.id)
    other.lock(session.id).release()
