"""`amos run`, `amos resume` and `amos sessions` as a user drives them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from amos.host import demo_workspace_source

from .support import amos_process, cli, cli_json, write_script

PY = sys.executable


def _unittest(folder: Path) -> int:
    return subprocess.run([PY, "-m", "unittest", "-q"], cwd=folder, capture_output=True).returncode


def test_demo_json_is_verified_complete_and_fixes_the_tests(tmp_path):
    assert _unittest(demo_workspace_source()) != 0  # the bundled project starts broken
    code, doc = cli_json("run", "--demo")
    assert code == 0, doc
    assert doc["stop"]["verdict"] == "VERIFIED_COMPLETE"
    assert doc["stop"]["cause"] == "answer" and doc["loop"]["phase"] == "complete"
    session = json.loads(Path(doc["session_path"]).read_text())
    workspace = Path(session["host"]["workspace"])
    assert workspace != demo_workspace_source() and _unittest(workspace) == 0
    assert [c["status"] for c in doc["tool_calls"]] == ["succeeded"] * 5
    assert doc["usage"]["model_calls"] == 5
    assert _unittest(demo_workspace_source()) != 0  # the bundled copy is untouched


def test_no_model_exits_2_with_guidance():
    result = cli("run", "hello")
    assert result.exit_code == 2
    assert "--model" in result.stderr and "amos run --demo" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_false_complete_exits_3(tmp_path):
    script = write_script(tmp_path, [{"text": "All done, everything works!"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(tmp_path),
                         "--verify", f"{PY} -c 'raise SystemExit(1)'", "fix it")
    assert code == 3
    assert doc["stop"]["verdict"] == "FALSE_COMPLETE" and doc["stop"]["reason"] == "check_failed"
    assert doc["output_text"] == "All done, everything works!"


def test_write_without_yes_waits_then_resume_approve_completes(tmp_path, amos_home):
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "hi"}}]},
        {"text": "wrote it"},
    ])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "write a note")
    assert code == 5 and doc["stop"]["verdict"] == "WAITING_UNROUTED"
    assert doc["stop"]["pending_approvals"][0]["call_id"] == "w1"
    assert not (tmp_path / "note.txt").exists()

    code, resumed = cli_json("resume", doc["session_id"], "--approve", "w1")
    assert code == 0, resumed
    assert resumed["stop"]["verdict"] == "ANSWERED" and resumed["output_text"] == "wrote it"
    assert (tmp_path / "note.txt").read_text() == "hi"


def test_routed_approval_is_waiting_and_deny_reaches_the_model(tmp_path):
    cfg = tmp_path / "amos-config.json"
    cfg.write_text(json.dumps({"approvals": {"owner": "ops@example.com"}}))
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "c", "name": "run_command", "arguments": {"command": "touch made"}}]},
        {"expect": {"last_tool_result_contains": "too risky"}, "text": "ok, not running it"},
    ])
    code, doc = cli_json("run", "--config", str(cfg), "--script", str(script), "--workspace", str(tmp_path),
                         "--sandbox", "danger-full-access", "go")  # unsandboxed, a command asks
    assert code == 4 and doc["stop"]["verdict"] == "WAITING"
    approval = doc["stop"]["approval"]
    assert approval["owner"] == "ops@example.com" and approval["deadline"] and approval["resume_token"]

    # the session remembers config, script and workspace: no flags needed
    code, resumed = cli_json("resume", doc["session_id"], "--deny", "c", "--reason", "too risky")
    assert code == 0, resumed
    assert resumed["tool_calls"][-1]["status"] == "denied"
    assert not (tmp_path / "made").exists()


def test_resume_unknown_call_or_not_waiting_exits_2(tmp_path):
    script = write_script(tmp_path, [{"text": "hi"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "x")
    assert code == 0
    result = cli("resume", doc["session_id"], "--approve", "nope")
    assert result.exit_code == 2 and "not waiting" in result.stderr


def test_bad_config_exits_2_naming_the_field(tmp_path):
    cfg = tmp_path / "bad.json"
    cfg.write_text(json.dumps({"loop_policy": {"max_recovery_attempts": 5000}}))
    script = write_script(tmp_path, [{"text": "hi"}])
    result = cli("run", "--config", str(cfg), "--script", str(script), "x")
    assert result.exit_code == 2
    assert "loop_policy.max_recovery_attempts" in result.stderr and str(cfg) in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_bad_script_exits_2_naming_the_turn(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"version": 1, "turns": [{"text": "a"}, {"tool_calls": [
        {"name": "read_file", "arguments": {}, "raw_arguments": "{}"}]}]}))
    result = cli("run", "--script", str(bad), "x")
    assert result.exit_code == 2 and "turn 1" in result.stderr and "turns.1" in result.stderr
    bad.write_text(json.dumps({"version": 1, "turns": [{"txt": "a"}]}))
    result = cli("run", "--script", str(bad), "x")
    assert result.exit_code == 2 and "'txt'" in result.stderr
    result = cli("run", "--script", str(tmp_path / "missing.json"), "x")
    assert result.exit_code == 2 and "missing.json" in result.stderr
    assert "Traceback" not in result.stderr


def test_prompt_from_stdin_and_plain_output(tmp_path):
    script = write_script(tmp_path, [{"expect": {"any_message_contains": "line one\nline two"}, "text": "got it"}])
    result = cli("run", "--script", str(script), "--workspace", str(tmp_path), "-", input="line one\nline two\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "got it\n"
    assert "ANSWERED" in result.stderr


def test_slash_command_json_and_unknown_command(tmp_path):
    script = write_script(tmp_path, [{"text": "hi"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "x")
    sid = doc["session_id"]
    code, loop = cli_json("run", "--session", sid, "/context loop")
    assert code == 0 and loop["ok"] is True and loop["command"] == "/context loop"
    assert loop["result"]["phase"] == "complete" and loop["result"]["execution_id"] == doc["stop"]["execution_id"]
    code, bad = cli_json("run", "--session", sid, "/nope")
    assert code == 2 and bad["ok"] is False and bad["error"]["code"] == "UNKNOWN_COMMAND"
    code, task = cli_json("run", "--session", sid, "/context task")
    assert code == 10 and task["error"]["code"] == "TASK_STATE_DISABLED"
    code, saved = cli_json("run", "--session", sid, "/session save my-work")
    assert code == 0 and saved["result"]["name"] == "my-work"
    result = cli("sessions", "show", "my-work")
    assert result.exit_code == 0 and sid in result.stdout
    # //text is a prompt, not a command
    script2 = write_script(tmp_path, [{"expect": {"any_message_contains": "/literal"}, "text": "ok"}], name="s2.json")
    code, doc = cli_json("run", "--script", str(script2), "--workspace", str(tmp_path), "//literal")
    assert code == 0


def test_sessions_list_show_delete(tmp_path):
    script = write_script(tmp_path, [{"text": "hi"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "first prompt")
    sid = doc["session_id"]
    code, listing = cli_json("sessions", "list")
    assert code == 0 and listing["sessions"][0]["id"] == sid
    assert listing["sessions"][0]["last_verdict"] == "ANSWERED"
    shown = cli("sessions", "show", sid)
    assert "first prompt" in shown.stdout and "ANSWERED" in shown.stdout
    assert cli("sessions", "delete", sid).exit_code == 0
    missing = cli("sessions", "show", sid)
    assert missing.exit_code == 2 and "no session" in missing.stderr


def test_no_save_writes_nothing(tmp_path, amos_home):
    script = write_script(tmp_path, [{"text": "hi"}])
    code, doc = cli_json("run", "--no-save", "--script", str(script), "--workspace", str(tmp_path), "x")
    assert code == 0 and doc["session_path"] is None
    assert not (amos_home / "data" / "sessions").exists() or not any((amos_home / "data" / "sessions").iterdir())


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid or int(fields[2]) == pid:  # ppid or process group
                found.append(int(entry))
    return found


def test_sigint_during_long_command_exits_130_and_leaves_nothing(tmp_path):
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "slow", "name": "run_command",
                         "arguments": {"command": "sleep 60 & echo $! > child.pid; sleep 60"}}]},
        {"text": "never"},
    ])
    proc = amos_process("run", "--json", "--yes", "--script", str(script), "--workspace", str(tmp_path), "wait",
                        "--sandbox", "danger-full-access", cwd=tmp_path)  # host pids (the sandbox: test_sandbox_*)
    pid_file = tmp_path / "child.pid"
    deadline = time.monotonic() + 20
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_file.exists(), proc.stderr.read() if proc.poll() is not None else "command never started"
    time.sleep(0.2)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=15)
    assert time.monotonic() - started < 5
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert (doc["stop"]["verdict"], doc["stop"]["cause"]) == ("BOUNDED_STOP", "user_abort")
    grandchild = int(pid_file.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{grandchild}").exists() or "Z" in Path(f"/proc/{grandchild}/stat").read_text().split()[2]
    assert "Traceback" not in err
    # the session loads and its history is valid: every call has a result
    shown = cli("sessions", "show", doc["session_id"], "--json")
    session = json.loads(shown.stdout)
    calls = [p["call_id"] for m in session["messages"] for p in m["parts"] if p["part_kind"] == "tool_call"]
    results = [p["call_id"] for m in session["messages"] for p in m["parts"] if p["part_kind"] == "tool_result"]
    assert calls == results == ["slow"]


def test_sigterm_exits_143(tmp_path):
    script = write_script(tmp_path, [{"delay_ms": 30000, "text": "late"}])
    proc = amos_process("run", "--json", "--script", str(script), "--workspace", str(tmp_path), "wait", cwd=tmp_path)
    # Signal once the model call is under way (the journal says so), not after a guessed
    # delay: a loaded machine may still be importing amos after 1.5 s.
    deadline = time.monotonic() + 30
    home = Path(os.environ["AMOS_HOME"])
    while time.monotonic() < deadline and not any(
            "step_started" in j.read_text(errors="replace") for j in home.rglob("journal.jsonl")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 143, err
    stop = json.loads(out)["stop"]
    assert stop["cause"] == "user_abort"
    # a CI job that killed the run is not "the user": the receipt names the signal
    assert "SIGTERM" in stop["detail"] and "by the user" not in stop["detail"]


def test_startup_imports_no_sdk_or_textual():
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['amos'] + sys.argv[1:]\n"
        "try:\n"
        "    runpy.run_module('amos.cli', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'openai', 'anthropic', 'google'})\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    for args in (["--version"], ["--help"], ["run", "--help"]):
        out = subprocess.run([PY, "-c", probe, *args], capture_output=True, text=True, timeout=30).stdout
        assert "HEAVY=\n" in out, (args, out[-300:])


def test_demo_imports_no_provider_sdk(tmp_path):
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['amos', 'run', '--demo', '--quiet']\n"
        "try:\n"
        "    runpy.run_module('amos.cli', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'openai', 'anthropic', 'google'})\n"
        "print('HEAVY=' + ','.join(heavy) + ' CODE=' + str(code))\n"
    )
    out = subprocess.run([PY, "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path).stdout
    assert "HEAVY= CODE=0" in out, out[-500:]


def test_tui_options_before_a_subcommand_are_refused(tmp_path):
    script = write_script(tmp_path, [{"text": "hi"}])
    result = cli("--script", str(script), "run", "hi")
    assert result.exit_code == 2 and "--script goes after the subcommand" in result.stderr


def test_script_that_is_not_an_object_says_what_a_script_is(tmp_path):
    path = tmp_path / "l.json"
    path.write_text('[{"text": "hi"}]')
    result = cli("run", "--script", str(path), "hi")
    assert result.exit_code == 2 and '"turns"' in result.stderr and "pydantic" not in result.stderr.lower()


def test_latest_session_and_waiting_summary_names_the_action(tmp_path):
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "plan.md", "content": "x"}}]},
        {"text": "ok"},
    ])
    result = cli("run", "--script", str(script), "--workspace", str(tmp_path), "plan")
    assert result.exit_code == 5
    assert "needs approval: w  write_file plan.md" in result.stderr
    assert "amos resume" in result.stderr
    code, doc = cli_json("resume", "latest", "--all")
    assert code == 0 and doc["stop"]["verdict"] == "ANSWERED"
    assert (tmp_path / "plan.md").read_text() == "x"
