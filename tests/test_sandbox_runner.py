"""The sandbox and permission rules through the real CLI (issue 19, "What it must show").

Real ``bwrap``, the real ``amos run`` on the scripted provider, real workspaces. Tests
that need the sandbox skip with the probe's reason where it cannot run. Paths meant
to be seen from inside the sandbox live under /var/tmp (the sandbox replaces /tmp).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from amos.sandbox import probe_sandbox
from tests.support import amos_process, cli, cli_json, write_script

needs_bwrap = pytest.mark.skipif(not probe_sandbox().available, reason=probe_sandbox().message)


def command_turn(command: str, **extra) -> dict:
    return {"tool_calls": [{"name": "run_command", "arguments": {"command": command, **extra}}]}


def result_of(session_path: str, call_id: str = "call_0_0") -> str:
    session = json.loads(Path(session_path).read_text())
    for message in session["messages"]:
        for part in message["parts"]:
            if part["part_kind"] == "tool_result" and part["call_id"] == call_id:
                return part["content"]
    raise AssertionError(f"no result for {call_id} in {session_path}")


@pytest.fixture
def ws(visible: Path) -> Path:
    root = visible / "ws"
    root.mkdir()
    return root


def run(tmp_path: Path, ws: Path, turns: list[dict], *flags: str) -> tuple[int, dict]:
    script = write_script(tmp_path, [*turns, {"text": "done"}])
    return cli_json("run", "--script", str(script), "--workspace", str(ws), *flags, "go")


# ------------------------------------------------------------------ the sandbox buys

@needs_bwrap
def test_commands_run_unasked_in_the_sandbox_and_cannot_write_outside_the_workspace(tmp_path, ws, visible):
    outside = visible / "outside.txt"
    code, doc = run(tmp_path, ws, [command_turn(f"echo in > inside.txt; echo out > {outside}")])
    assert code == 0, doc
    assert (ws / "inside.txt").read_text() == "in\n"
    assert not outside.exists()
    row = doc["tool_calls"][0]
    assert row["allowed_by"] == "sandbox (workspace-write)"
    assert row["sandbox"] == {"mode": "workspace-write", "network": False}
    assert doc["stop"]["sandbox"] == {"mode": "workspace-write", "available": True, "network": False, "plan": False}
    assert "sandbox" in result_of(doc["session_path"]).lower()  # the model is told what blocked it


@needs_bwrap
def test_read_only_refuses_writes_in_the_workspace(tmp_path, ws):
    code, doc = run(tmp_path, ws, [command_turn("echo x > made.txt")], "--sandbox", "read-only")
    assert code == 0
    assert not (ws / "made.txt").exists()
    assert doc["tool_calls"][0]["sandbox"]["mode"] == "read-only"


@needs_bwrap
def test_network_is_off_unless_configured(tmp_path, ws):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    accepted: list[int] = []

    def serve() -> None:
        server.settimeout(20)
        try:
            while True:
                conn, _ = server.accept()
                accepted.append(1)
                conn.sendall(b"hello\n")
                conn.close()
        except OSError:
            return

    threading.Thread(target=serve, daemon=True).start()
    probe = (f"{sys.executable} -c \"import socket; s=socket.create_connection(('127.0.0.1',{port}),3); "
             "print('GOT', s.recv(10))\"")
    try:
        code, doc = run(tmp_path, ws, [command_turn(probe)])
        assert code == 0 and not accepted
        assert "GOT" not in result_of(doc["session_path"])
        config = tmp_path / "net.json"
        config.write_text(json.dumps({"sandbox": {"network": True}}))
        code, doc = run(tmp_path, ws, [command_turn(probe)], "--config", str(config))
        assert code == 0 and accepted
        assert "GOT b'hello" in result_of(doc["session_path"])
        assert doc["tool_calls"][0]["sandbox"] == {"mode": "workspace-write", "network": True}
    finally:
        server.close()


@needs_bwrap
def test_hidden_home_paths_and_amos_environment_cannot_be_read(tmp_path, ws, visible, monkeypatch):
    home = visible / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PLANTED-PRIVATE-KEY\n")
    monkeypatch.setenv("HOME", str(home))
    key = "sk-test-" + "q" * 20 + "ZZ9"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    command = ("cat ~/.ssh/id_ed25519; for f in /proc/1/environ /proc/$PPID/environ; do "
               "tr '\\0' '\\n' < $f | grep OPENAI | rev; done; echo end")
    code, doc = run(tmp_path, ws, [command_turn(command)])
    assert code == 0, doc
    text = result_of(doc["session_path"])
    assert "PLANTED-PRIVATE-KEY" not in text
    assert key[::-1] not in text and key not in text
    assert "end" in text


@needs_bwrap
def test_a_setsid_child_is_gone_after_amos_is_sigkilled(tmp_path, ws):
    marker = f"amos-orphan-{os.getpid()}-{time.monotonic_ns()}"
    started = ws / "started"
    command = (f"setsid sh -c 'exec -a {marker} sleep 300' </dev/null >/dev/null 2>&1 & "
               f"touch started; sleep 60")
    script = write_script(tmp_path, [command_turn(command, timeout_s=120), {"text": "done"}])
    proc = amos_process("run", "--script", str(script), "--workspace", str(ws), "go")
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), "the command never started"
        assert _pgrep(marker), "the detached child should be running before the kill"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while _pgrep(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _pgrep(marker), "a detached child outlived amos"
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(["pkill", "-f", marker], check=False)


def _pgrep(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0


# ------------------------------------------------------------------ permission rules

def test_an_allowed_pattern_runs_without_asking_and_a_denied_one_is_refused_naming_the_rule(tmp_path, ws):
    turns = [{"tool_calls": [
        {"name": "write_file", "arguments": {"path": "docs/a.md", "content": "a"}},
        {"name": "write_file", "arguments": {"path": "src/b.py", "content": "b"}},
    ]}]
    config = tmp_path / "rules.json"
    config.write_text(json.dumps({"permissions": {"allow": ["write_file(docs/**)"],
                                                  "deny": ["write_file(src/**)"]}}))
    code, doc = run(tmp_path, ws, turns, "--config", str(config))
    assert code == 0, doc
    rows = {r["call_id"]: r for r in doc["tool_calls"]}
    assert rows["call_0_0"]["status"] == "succeeded"
    assert rows["call_0_0"]["allowed_by"] == f"rule write_file(docs/**) ({config})"
    assert (ws / "docs" / "a.md").read_text() == "a"
    assert rows["call_0_1"]["status"] == "denied" and not (ws / "src" / "b.py").exists()
    assert f"write_file(src/**) ({config})" in result_of(doc["session_path"], "call_0_1")


def test_deny_wins_over_ask_wins_over_allow(tmp_path, ws):
    command = "git status"
    turns = [command_turn(command)]
    base = ["--sandbox", "danger-full-access", "--allow", "run_command(git status:*)"]
    code, doc = run(tmp_path, ws, turns, *base)
    assert doc["tool_calls"][0]["allowed_by"] == "rule run_command(git status:*) (--allow)"
    config = tmp_path / "ask.json"
    config.write_text(json.dumps({"permissions": {"ask": ["run_command(git:*)"]}}))
    code, doc = run(tmp_path, ws, turns, *base, "--config", str(config))
    assert code == 5 and doc["stop"]["verdict"] == "WAITING_UNROUTED"  # ask beats allow: nobody can answer here
    code, doc = run(tmp_path, ws, turns, *base, "--config", str(config), "--deny", "run_command(git:*)")
    assert code == 0 and doc["tool_calls"][0]["status"] == "denied"  # deny beats both
    assert "run_command(git:*) (--deny)" in result_of(doc["session_path"])


def test_a_compound_command_is_allowed_only_when_every_part_is(tmp_path, ws):
    turns = [command_turn("git status && rm -rf build")]
    code, doc = run(tmp_path, ws, turns, "--sandbox", "danger-full-access", "--allow", "run_command(git status:*)")
    assert code == 5 and doc["stop"]["verdict"] == "WAITING_UNROUTED"


def test_bad_rules_and_modes_are_one_line_errors(tmp_path, ws):
    script = write_script(tmp_path, [{"text": "hi"}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--allow", "run_command(git", "go")
    assert result.exit_code == 2 and "--allow: invalid permission rule" in result.stderr
    assert "Traceback" not in result.stderr
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--sandbox", "nope", "go")
    assert result.exit_code == 2 and "accepted: read-only, workspace-write, danger-full-access" in result.stderr
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"permissions": {"allow": ["write_file(**"]}}))
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--config", str(config), "go")
    assert result.exit_code == 2 and "permissions" in result.stderr and "Traceback" not in result.stderr


def test_write_tools_keep_asking_in_every_sandbox_mode(tmp_path, ws):
    turns = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}}]}]
    for mode in ("workspace-write", "read-only", "danger-full-access"):
        code, doc = run(tmp_path, ws, turns, "--sandbox", mode)
        assert code == 5 and doc["stop"]["pending_approvals"][0]["tool"] == "write_file", mode


@needs_bwrap
def test_an_explicit_ask_for_run_command_in_config_still_asks(tmp_path, ws):
    config = tmp_path / "ask.json"
    config.write_text(json.dumps({"tools": {"permissions": {"run_command": "ask"}}}))
    code, doc = run(tmp_path, ws, [command_turn("true")], "--config", str(config))
    assert code == 5 and doc["stop"]["pending_approvals"][0]["tool"] == "run_command"


# ------------------------------------------------------------------ escalation

@needs_bwrap
def test_running_unsandboxed_needs_a_person_never_yes(tmp_path, ws, visible):
    outside = visible / "escaped.txt"
    turn = command_turn(f"echo free > {outside}", sandbox="none", justification="needs to write the cache")
    code, doc = run(tmp_path, ws, [turn], "--yes")
    assert code == 5 and doc["stop"]["verdict"] == "WAITING_UNROUTED" and not outside.exists()
    session = doc["session_id"]
    code, doc = cli_json("resume", session, "--all")
    assert code == 5 and not outside.exists()  # --all never approves it
    code, doc = cli_json("resume", session, "--approve", "call_0_0")
    assert code == 0, doc
    assert outside.read_text() == "free\n"
    assert doc["tool_calls"][0]["sandbox"]["mode"] == "none"


# ------------------------------------------------------------------ plan mode

@needs_bwrap
def test_a_plan_run_denies_writes_runs_commands_read_only_and_says_so(tmp_path, ws):
    turns = [{"tool_calls": [
        {"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}},
        {"name": "run_command", "arguments": {"command": "ls; touch b.txt"}},
    ]}]
    code, doc = run(tmp_path, ws, turns, "--plan")
    assert code == 0, doc
    assert doc["stop"]["sandbox"]["plan"] is True and doc["stop"]["sandbox"]["mode"] == "read-only"
    rows = {r["call_id"]: r for r in doc["tool_calls"]}
    assert rows["call_0_0"]["status"] == "denied" and "plan mode" in result_of(doc["session_path"], "call_0_0")
    assert rows["call_0_1"]["sandbox"]["mode"] == "read-only"
    assert not (ws / "a.txt").exists() and not (ws / "b.txt").exists()
    session = json.loads(Path(doc["session_path"]).read_text())
    assert "plan" in json.dumps(session).lower()


def test_slash_permissions_lists_rules_with_their_sources(tmp_path, ws):
    config = tmp_path / "rules.json"
    config.write_text(json.dumps({"permissions": {"allow": ["run_command(pytest:*)"], "deny": ["mcp__git__*"]}}))
    script = write_script(tmp_path, [{"text": "hi"}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--config", str(config),
                 "--allow", "read_file", "/permissions")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "run_command(pytest:*)" in out and str(config) in out
    assert "mcp__git__*" in out and "--allow" in out
    assert out.index("deny") < out.index("allow")
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "/permissions")
    assert code == 0 and doc["result"]["sandbox"]["mode"] in ("workspace-write", "danger-full-access")


def test_file_tools_refuse_hidden_paths_too(tmp_path, visible, monkeypatch):
    home = visible / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("SSHSECRET\n")
    (home / "notes.txt").write_text("hello\n")
    monkeypatch.setenv("HOME", str(home))
    turns = [{"tool_calls": [
        {"name": "read_file", "arguments": {"path": ".ssh/id_rsa"}},
        {"name": "search_text", "arguments": {"pattern": "SECRET|hello"}},
        {"name": "list_dir", "arguments": {"path": ".", "depth": 3}},
    ]}]
    code, doc = run(tmp_path, home, turns, "--sandbox", "workspace-write")
    assert code == 0, doc
    results = [result_of(doc["session_path"], f"call_0_{i}") for i in range(3)]
    assert "hidden" in results[0] and all("SSHSECRET" not in r for r in results)
    assert "notes.txt" in results[1] and "id_rsa" not in results[2]


@needs_bwrap
def test_plan_runs_stay_plan_runs_when_resumed(tmp_path, ws):
    config = tmp_path / "ask.json"
    config.write_text(json.dumps({"permissions": {"ask": ["run_command(touch:*)"]}}))
    turns = [command_turn("touch held.txt"), {"tool_calls": [
        {"name": "write_file", "arguments": {"path": "w.txt", "content": "w"}}]}]
    code, doc = run(tmp_path, ws, turns, "--plan", "--config", str(config))
    assert code == 5 and doc["stop"]["sandbox"]["plan"] is True
    code, doc = cli_json("resume", doc["session_id"], "--all", "--config", str(config))
    assert doc["stop"]["sandbox"]["plan"] is True, doc["stop"]
    rows = {r["call_id"]: r for r in doc["tool_calls"]}
    assert rows["call_0_0"]["sandbox"]["mode"] == "read-only" and not (ws / "held.txt").exists()
    assert rows["call_1_0"]["status"] == "denied" and not (ws / "w.txt").exists()


def test_plan_mode_refuses_commands_where_the_sandbox_does_not_work(tmp_path, ws, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    probe_sandbox.cache_clear()
    try:
        code, doc = run(tmp_path, ws, [command_turn("touch made.txt")], "--plan", "--yes")
    finally:
        probe_sandbox.cache_clear()
    assert code == 0 and doc["tool_calls"][0]["status"] == "denied" and not (ws / "made.txt").exists()
    assert doc["stop"]["sandbox"] == {"mode": "read-only", "available": False, "network": True, "plan": True}


@needs_bwrap
def test_a_waiting_escape_request_says_so_in_the_shell(tmp_path, ws):
    turn = command_turn("echo free", sandbox="none", justification="needs the real cache")
    script = write_script(tmp_path, [turn, {"text": "done"}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "go")
    assert result.exit_code == 5
    assert "OUTSIDE the sandbox" in result.stderr and "needs the real cache" in result.stderr
    assert "--all and --yes never approve" in result.stderr


@needs_bwrap
def test_kernel_settings_cannot_be_changed_from_the_sandbox(tmp_path, ws):
    before = Path("/proc/sys/kernel/hostname").read_text()
    command = ("printf amos-test > /proc/sys/kernel/hostname; echo rc=$?; "
               "cat /proc/sys/kernel/core_pattern > /dev/null && printf x >> /proc/sys/kernel/core_pattern; "
               "echo rc2=$?; hostname amos-test2; echo rc3=$?")
    for mode in ("workspace-write", "read-only"):
        code, doc = run(tmp_path, ws, [command_turn(command)], "--sandbox", mode)
        assert code == 0, doc
        text = result_of(doc["session_path"])
        assert "rc=0" not in text and "rc2=0" not in text, text
        assert Path("/proc/sys/kernel/hostname").read_text() == before
