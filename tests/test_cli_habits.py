"""Issue 21: the habits users bring — event streams, one JSON shape, short flags, -c.

Everything goes through the real CLI (typer's runner) on the scripted provider.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from amos.cli_output import PERSON_EVENT_TYPES, RUN_EVENT_TYPES, STREAM_EVENT_TYPES
from tests.support import cli, cli_json, write_script

README = Path(__file__).resolve().parents[1] / "README.md"
SECRET = "sk-habits-0123456789abcdef"


def _lines(stdout: str) -> list[dict]:
    """Every stdout line parsed on its own (each must be one JSON object)."""
    return [json.loads(line) for line in stdout.splitlines()]


def _write_script(tmp_path: Path) -> Path:
    return write_script(tmp_path, [
        {"text": "writing", "tool_calls": [{"name": "write_file",
                                            "arguments": {"path": "b.txt", "content": f"key {SECRET}"}}]},
        {"text": "done"}])


def _ws(tmp_path: Path, name: str = "ws") -> Path:
    ws = tmp_path / name
    ws.mkdir()
    return ws


def test_demo_stream_has_every_documented_run_event_and_ends_with_the_receipt():
    result = cli("run", "--demo", "--output-format", "stream-json")
    assert result.exit_code == 0, result.stderr
    lines = _lines(result.stdout)  # every line is one JSON object
    types = [line["type"] for line in lines]
    assert set(RUN_EVENT_TYPES) <= set(types), types
    assert types[0] == "run_started" and types.count("result") == 1 and types[-1] == "result"
    last = lines[-1]
    assert last["ok"] is True and last["exit_code"] == 0 and last["verdict"] == "VERIFIED_COMPLETE"
    assert last["stop"]["verdict"] == "VERIFIED_COMPLETE" and last["session_id"] == lines[0]["session_id"]
    finished = [line for line in lines if line["type"] == "tool_call_finished"]
    assert all({"tool", "summary", "status", "duration_s", "evidence_id"} <= set(f) for f in finished)
    # the stream's last line is exactly what --json prints (the same result object)
    code, doc = cli_json("run", "--demo")
    assert code == 0 and set(doc) == set(last)


def test_readme_documents_every_stream_event_type_with_an_example():
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Event stream"):]
    for kind in STREAM_EVENT_TYPES:
        assert f'{{"type": "{kind}"' in section, kind


def test_a_waiting_stream_shows_the_held_call_with_masked_arguments(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    script = _write_script(tmp_path)
    result = cli("run", "--script", str(script), "--workspace", str(_ws(tmp_path)), "write it",
                 "--output-format", "stream-json")
    assert result.exit_code == 5, result.stderr
    assert SECRET not in result.stdout and SECRET not in result.stderr
    lines = _lines(result.stdout)
    pending = [line for line in lines if line["type"] == "approval_pending"]
    assert [p["call_id"] for p in pending] == ["call_0_0"] and pending[0]["arguments"]["path"] == "b.txt"
    assert "[REDACTED]" in pending[0]["arguments"]["content"] and "amos resume" in pending[0]["resume"]
    entry = lines[-1]["stop"]["pending_approvals"][0]
    assert entry["arguments"] == pending[0]["arguments"] and entry["summary"].startswith("write_file")
    assert set(PERSON_EVENT_TYPES) >= {"approval_pending"}


def test_progress_lines_on_a_stderr_that_is_not_a_terminal_and_quiet_silences_them(tmp_path):
    script = _write_script(tmp_path)
    result = cli("run", "--script", str(script), "--workspace", str(_ws(tmp_path)), "-y", "write it")
    assert result.exit_code == 0
    assert "amos: step 1/20" in result.stderr and "amos: step 2/20" in result.stderr
    assert re.search(r"amos: ✓ write_file b.txt .*\[succeeded, \d+\.\d\d s\]", result.stderr), result.stderr
    assert result.stdout == "done\n"
    quiet = cli("run", "--script", str(script), "--workspace", str(_ws(tmp_path, "w2")), "-y", "-q", "write it")
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == "done\n"


def test_success_and_error_objects_share_the_same_keys(tmp_path):
    script = write_script(tmp_path, [{"text": "hi"}])
    ws = _ws(tmp_path)
    shared = {"type", "ok", "exit_code", "verdict", "error", "model", "session_id"}
    code, run = cli_json("run", "--script", str(script), "--workspace", str(ws), "hello")
    assert code == 0 and shared <= set(run) and run["ok"] and run["model"] == f"scripted:{script}"
    code, bad_config = cli_json("run", "--model", "nosuch:x", "--workspace", str(ws), "hello")
    assert code == 2 and shared <= set(bad_config) and bad_config["ok"] is False
    assert bad_config["exit_code"] == 2 and bad_config["error"]["code"] and bad_config["verdict"] is None
    sid = run["session_id"]
    code, command = cli_json("run", "--session", sid, "/context loop")
    assert code == 0 and shared <= set(command) and command["session_id"] == sid and command["exit_code"] == 0
    code, unknown = cli_json("run", "--session", sid, "/nosuch")
    assert code == 2 and shared <= set(unknown) and unknown["error"]["code"] == "UNKNOWN_COMMAND"
    stream = cli("run", "--session", sid, "/nosuch", "--output-format", "stream-json")
    assert stream.exit_code == 2 and _lines(stream.stdout)[-1]["type"] == "result"


def test_slash_commands_exit_with_their_own_documented_codes(tmp_path):
    script = write_script(tmp_path, [{"text": "hi"}])
    cfg = tmp_path / "amos.json"
    cfg.write_text(json.dumps({"task_state": {"enabled": True}}))
    code, run = cli_json("run", "--script", str(script), "--workspace", str(_ws(tmp_path)), "--config", str(cfg),
                         "hello")
    sid = run["session_id"]
    code, refused = cli_json("run", "--session", sid, "--config", str(cfg), "/context task add 7 objective a b")
    assert code == 9 and refused["exit_code"] == 9 and refused["error"]["code"] == "TASK_STATE_CONFLICT"
    code, disabled = cli_json("run", "--session", sid, "/context evidence")
    assert code == 10 and disabled["error"]["code"] == "EVIDENCE_DISABLED"
    code, usage = cli_json("run", "--session", sid, "/context loop extra")
    assert code == 2
    table = README.read_text(encoding="utf-8")
    assert "| 9 |" in table and "| 10 |" in table


def test_output_format_is_checked(tmp_path):
    result = cli("run", "--demo", "--output-format", "yaml")
    assert result.exit_code == 2 and "stream-json" in result.stderr and "Traceback" not in result.stderr
    both = cli("run", "--demo", "--json", "--output-format", "stream-json")
    assert both.exit_code == 2 and both.stderr.count("\n") == 1
    assert json.loads(both.stdout)["error"]["code"] == "USAGE_ERROR", "--json was given: one error object"
    unknown = cli("run", "--demo", "--json", "--output-format", "xml")
    assert unknown.exit_code == 2 and json.loads(unknown.stdout)["ok"] is False
    assert result.stdout == "", "no JSON asked for, none printed"


def test_print_flag_runs_one_shot_with_options_before_it(tmp_path):
    script = write_script(tmp_path, [{"text": "hi there"}], on_exhausted="repeat_last")
    ws = _ws(tmp_path)
    result = cli("--workspace", str(ws), "--script", str(script), "-q", "-p", "hello")
    assert result.exit_code == 0 and result.stdout == "hi there\n" and result.stderr == ""
    # a word equal to a subcommand after -p is the prompt; `--` always sends the text
    code, doc = cli_json("--workspace", str(ws), "-m", f"scripted:{script}", "-p", "sessions")
    assert code == 0 and doc["verdict"] == "ANSWERED"
    result = cli("--workspace", str(ws), "--script", str(script), "-p", "--json", "--", "sessions", "list")
    assert result.exit_code == 0 and json.loads(result.stdout)["session_id"]
    # without -p, one-shot options say where they belong instead of opening the TUI
    misplaced = cli("hello", "--json")
    assert misplaced.exit_code == 2 and "amos -p" in misplaced.stderr
    # a subcommand name still runs the subcommand
    listing = cli("sessions", "list", "--json")
    assert listing.exit_code == 0 and "sessions" in json.loads(listing.stdout)


def test_continue_picks_the_latest_session_of_this_workspace(tmp_path):
    script = write_script(tmp_path, [{"text": "ok"}], on_exhausted="repeat_last")
    mine, other = _ws(tmp_path, "mine"), _ws(tmp_path, "other")
    _, first = cli_json("run", "--script", str(script), "--workspace", str(mine), "one")
    _, elsewhere = cli_json("run", "--script", str(script), "--workspace", str(other), "two")
    code, again = cli_json("-c", "--workspace", str(mine), "--script", str(script), "-p", "three")
    assert code == 0 and again["session_id"] == first["session_id"] != elsewhere["session_id"]
    code, run_c = cli_json("run", "-c", "--workspace", str(other), "--script", str(script), "four")
    assert code == 0 and run_c["session_id"] == elsewhere["session_id"]
    none = cli("run", "-c", "--workspace", str(_ws(tmp_path, "empty")), "--script", str(script), "x")
    assert none.exit_code == 2 and "no saved session of this workspace" in none.stderr
    both = cli("run", "-c", "-s", first["session_id"], "--script", str(script), "x")
    assert both.exit_code == 2 and "--session" in both.stderr


def test_sessions_list_shows_workspaces_and_filters_by_one(tmp_path):
    script = write_script(tmp_path, [{"text": "ok"}])
    mine, other = _ws(tmp_path, "mine"), _ws(tmp_path, "other")
    _, first = cli_json("run", "--script", str(script), "--workspace", str(mine), "one")
    _, second = cli_json("run", "--script", str(script), "--workspace", str(other), "two")
    listing = cli("sessions", "list")
    assert listing.exit_code == 0 and "WORKSPACE" in listing.stdout and "mine" in listing.stdout
    code, filtered = cli_json("sessions", "list", "--workspace", str(mine))
    assert code == 0 and [s["id"] for s in filtered["sessions"]] == [first["session_id"]]
    assert filtered["sessions"][0]["workspace"] == str(mine.resolve())
    assert filtered["sessions"][0]["current_workspace"] is True


def test_short_flags_are_the_long_ones(tmp_path):
    script = write_script(tmp_path, [
        {"text": "", "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
        {"text": "wrote"}])
    ws = _ws(tmp_path)
    result = cli("run", "-m", f"scripted:{script}", "-s", "new-one", "--workspace", str(ws), "-y", "-q", "go")
    assert result.exit_code == 2 and "new-one" in result.stderr  # -s names a session that must exist
    result = cli("run", "-m", f"scripted:{script}", "--workspace", str(ws), "-y", "-q", "go")
    assert result.exit_code == 0 and result.stdout == "wrote\n" and (ws / "a.txt").read_text() == "x"


# ---------------------------------------------------------------------------- first-hour snags


def test_config_check_reports_every_error_at_once(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"model": 5, "bogus": 1, "run": {"max_steps": -1}}))
    result = cli("config", "check", str(bad))
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 3 and all(line.startswith(f"amos: {bad}: ") for line in lines)
    assert any("run.max_steps" in line for line in lines) and any('"bogus"' in line for line in lines)


def test_no_model_message_names_the_untrusted_project_file(tmp_path, monkeypatch):
    project = _ws(tmp_path, "proj")
    (project / "amos.json").write_text(json.dumps({"model": "openai:gpt-4o-mini"}))
    monkeypatch.chdir(project)
    result = cli("run", "hi")
    assert result.exit_code == 2 and "no model chosen" in result.stderr
    assert "./amos.json: not trusted" in result.stderr and "amos config trust" in result.stderr


def _session(tmp_path: Path, *extra: str) -> str:
    script = write_script(tmp_path, [{"text": "ok"}])
    _, doc = cli_json("run", "--script", str(script), "--workspace", str(_ws(tmp_path)), *extra, "hello")
    return doc["session_id"]


def test_policy_and_context_loop_print_a_summary_and_leave_json_to_json(tmp_path):
    sid = _session(tmp_path)
    policy = cli("run", "--session", sid, "/policy")
    assert policy.exit_code == 0 and "timeout - s" not in policy.stdout and "{" not in policy.stdout
    loop = cli("run", "--session", sid, "/context loop")
    assert loop.exit_code == 0 and loop.stdout.startswith("phase complete") and '"phase"' not in loop.stdout
    code, doc = cli_json("run", "--session", sid, "/context loop")
    assert code == 0 and doc["result"]["phase"] == "complete"


def test_task_note_short_form_adds_a_constraint_and_shows_only_that_note(tmp_path):
    cfg = tmp_path / "tasks.json"
    cfg.write_text(json.dumps({"task_state": {"enabled": True}}))
    sid = _session(tmp_path, "--config", str(cfg))
    strict = cli("run", "--session", sid, "--config", str(cfg), '/context task add "keep the API stable"')
    assert strict.exit_code == 2 and "/context task note TEXT" in strict.stderr
    first = cli("run", "--session", sid, "--config", str(cfg), '/context task note "keep the API stable"')
    assert first.exit_code == 0, first.stderr
    assert "n1 [constraint, active] keep the API stable" in first.stdout
    code, doc = cli_json("run", "--session", sid, "--config", str(cfg), "/context task note no new deps")
    assert code == 0 and [n["id"] for n in doc["result"]["changed"]] == ["n2"]
    text = cli("run", "--session", sid, "--config", str(cfg), "/context task note third")
    assert "keep the API stable" not in text.stdout and "n3 [constraint, active] third" in text.stdout
    for line, says in (('/context task add 3 constraint k1 ""', "text is missing"),
                       ("/context task note a\x01b", "control characters"),
                       ('/context task correct 3 n1 n9 ""', "corrected text is missing"),
                       ("/context task note csi\u009b31mRED", "control characters"),
                       ('/context task add 3 constraint "" text', "is not a note id"),
                       ("/context task add 3 bogus k9 text", "CATEGORY must be one of")):
        bad = cli("run", "--session", sid, "--config", str(cfg), line)
        assert bad.exit_code == 2 and says in bad.stderr and "String should match" not in bad.stderr, (line, bad.stderr)


def test_demo_copies_live_under_the_data_folder_and_old_ones_are_pruned(amos_home):
    from amos import paths
    from amos.engine.options import DEMO_COPIES_KEPT

    root = paths.ensure_dir(paths.demo_dir())
    for i in range(DEMO_COPIES_KEPT + 5):
        old = root / f"amos-demo-old{i:02d}"
        old.mkdir()
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
    result = cli("run", "--demo")
    assert result.exit_code == 0
    shown = re.search(r"amos: demo workspace: (\S+)", result.stderr)
    assert shown and Path(shown.group(1)).parent == root  # it still says where the copy is
    copies = sorted(p.name for p in root.glob("amos-demo-*"))
    assert len(copies) == DEMO_COPIES_KEPT and "amos-demo-old00" not in copies
    assert f"amos-demo-old{DEMO_COPIES_KEPT + 4:02d}" in copies


def test_a_custom_command_run_headless_shows_what_was_typed_and_the_prompt_sent(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    ws = _ws(tmp_path)
    script = write_script(tmp_path, [{"text": "Hello!"}], on_exhausted="repeat_last")
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--no-save", f"/greet bob {SECRET}")
    assert code == 0, doc
    assert doc["command"] == "/greet bob [REDACTED]"
    assert doc["prompt"].startswith("Say hello to bob [REDACTED]") and SECRET not in json.dumps(doc)
    stream = cli("run", "--script", str(script), "--workspace", str(ws), "--no-save", "--output-format",
                 "stream-json", "/greet bob")
    last = _lines(stream.stdout)[-1]
    assert last["type"] == "result" and last["command"] == "/greet bob" and "bob" in last["prompt"]
    text = cli("run", "--script", str(script), "--workspace", str(ws), "--no-save", "/greet bob")
    assert text.stdout == "Hello!\n"
    assert "amos: /greet bob → prompt: Say hello to bob" in text.stderr


def test_resume_prints_each_answer_once(tmp_path):
    ws = _ws(tmp_path)
    script = write_script(tmp_path, [{"text": "The report is written."}])
    first = cli("run", "--script", str(script), "--workspace", str(ws), "--verify", "human", "write the report")
    assert first.exit_code == 5 and first.stdout == "The report is written.\n"
    confirmed = cli("resume", "latest", "--confirm")
    assert confirmed.exit_code == 0, confirmed.stderr
    assert confirmed.stdout == ""  # the run that wrote the answer printed it; the receipt says confirmed
    assert "VERIFIED_COMPLETE" in confirmed.stderr
    approved_ws = _ws(tmp_path, "ws2")
    waiting = cli("run", "--script", str(_write_script(tmp_path)), "--workspace", str(approved_ws), "write b")
    assert waiting.exit_code in (4, 5) and waiting.stdout == "writing\n"
    resumed = cli("resume", "latest", "--all")
    assert resumed.exit_code == 0, resumed.stderr
    assert resumed.stdout == "done\n"  # the new answer, once; "writing" is not printed again


def _amos_without_a_terminal(args: list[str], *, stdin_tty: bool) -> tuple[int, str, str]:
    """Run the real ``amos`` entry point with stdout a pipe and stdin a pipe or a pty."""
    import pty
    import subprocess
    import sys

    master = slave = None
    if stdin_tty:
        master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "amos.cli", *args],
                              stdin=slave if stdin_tty else subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60)
    finally:
        for fd in (master, slave):
            if fd is not None:
                os.close(fd)
    return proc.returncode, proc.stdout, proc.stderr


def test_the_tui_without_a_terminal_refuses_and_points_at_print(tmp_path):
    """``amos -- TEXT`` (or ``amos "prompt"``, or bare ``amos``) in a pipe would draw the full
    TUI's escape codes into it; it exits 2 naming -p instead, before any model call."""
    for args, stdin_tty, which in ((["--", "hello"], False, "stdin"), (["hello there"], True, "stdout"),
                                   ([], False, "stdin")):
        code, out, err = _amos_without_a_terminal(["--workspace", str(tmp_path), *args], stdin_tty=stdin_tty)
        assert code == 2, (args, out, err)
        assert out == "", "nothing, and no escape codes, on stdout"
        assert f"the TUI needs a terminal and {which} is not one" in err and 'amos -p "PROMPT"' in err
        assert "Traceback" not in err


def test_a_session_begun_by_a_custom_command_is_titled_as_typed(tmp_path):
    script = write_script(tmp_path, [{"text": "Hello, Ada!"}])
    code, out = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "/greet Ada Lovelace")
    assert code == 0, out
    listed = json.loads(cli("sessions", "list", "--json").stdout)
    row = next(s for s in (listed if isinstance(listed, list) else listed["sessions"]) if s["id"] == out["session_id"])
    assert row["title"] == "/greet Ada Lovelace"


def test_a_usage_error_click_finds_still_gives_json_when_json_was_asked_for(tmp_path):
    """Through the real entry point (``main``): click's own usage errors (an unknown
    option, a bad value) print the error result on stdout under --json / stream-json."""
    import subprocess
    import sys

    for args in (["run", "--json", "--max-steps", "0", "hi"], ["run", "--output-format", "stream-json", "--bogus", "hi"],
                 ["-p", "--output-format=json", "--bogus", "hi"], ["models", "--json", "--base-url", "not a url"]):
        proc = subprocess.run([sys.executable, "-m", "amos.cli", *args], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stdout.splitlines()
        assert len(lines) == 1, (args, proc.stdout)
        doc = json.loads(lines[0])
        assert doc["ok"] is False and doc["error"]["code"] == "USAGE_ERROR", doc
        assert "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "amos.cli", "run", "--bogus", "hi"], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), "no JSON unless asked for"
    assert "No such option: --bogus" in proc.stderr


def test_a_resume_that_cannot_go_on_names_its_session_in_the_json(tmp_path):
    script = write_script(tmp_path, [{"text": "done"}])
    code, out = cli_json("run", "--script", str(script), "--workspace", str(tmp_path), "hi")
    assert code == 0
    code, doc = cli_json("resume", out["session_id"], "--approve", "nosuch")
    assert code == 2 and doc["error"]["code"] == "NOT_WAITING"
    assert doc["session_id"] == out["session_id"]
    for given in ("latest", out["session_id"][:17]):  # a name or a unique prefix: the id it resolved to
        code, doc = cli_json("resume", given, "--approve", "nosuch")
        assert code == 2 and doc["session_id"] == out["session_id"], (given, doc)
    code, doc = cli_json("resume", "", "--approve", "x")
    assert code == 2 and "needs a session id" in doc["error"]["message"], doc


def test_a_reader_that_goes_away_stops_the_run_which_is_saved_and_exits_141(tmp_path):
    """``amos run --output-format stream-json … | head -1``: the run stops at the closed
    pipe, the receipt says why, the session is saved, the exit code is 128 + SIGPIPE."""
    import subprocess
    import sys

    script = write_script(tmp_path, [{"text": " ".join(f"w{n}" for n in range(300)), "delta_delay_ms": 10}])
    proc = subprocess.Popen([sys.executable, "-m", "amos.cli", "run", "--script", str(script), "--workspace",
                             str(tmp_path), "--output-format", "stream-json", "go"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    assert json.loads(first)["type"] == "run_started"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "stdout was closed" in err and "Traceback" not in err
    sid = re.search(r"session (\d{8}-\d{6}-[0-9a-f]{6})", err).group(1)
    shown = json.loads(cli("sessions", "show", sid, "--json").stdout)
    assert shown["last_stop"]["detail"] == "the run was stopped by a closed stdout"


def test_a_ctrl_c_after_the_result_is_written_does_not_change_the_exit_code(tmp_path):
    """Break-it finding: SIGINT landing after the verdict (while the session closes) made
    the process exit 130 under a result that said 8."""
    import signal
    import subprocess
    import sys
    import time

    script = write_script(tmp_path, [{"text": "done"}])
    proc = subprocess.Popen([sys.executable, "-m", "amos.cli", "run", "--script", str(script), "--workspace",
                             str(tmp_path), "--verify", "sh -c 'exit 126'", "--output-format", "stream-json", "go"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    result = None
    for line in proc.stdout:
        event = json.loads(line)
        if event["type"] == "result":
            result = event
            proc.send_signal(signal.SIGINT)
            time.sleep(0.04)  # the round-3 tester's window: 20-80 ms after the result line
            proc.send_signal(signal.SIGINT)
            time.sleep(0.04)
            proc.send_signal(signal.SIGTERM)
    proc.stdout.close()
    code = proc.wait(timeout=60)
    assert result is not None and result["exit_code"] == code, (result and result["exit_code"], code)
    from amos.cli_run import _HELD

    assert not _HELD and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
