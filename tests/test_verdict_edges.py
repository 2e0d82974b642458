"""Edges of "verified" and of what a run shows, found by a new user trying amos from the
README (issues 16 and 17): each test is a run a person could make, on the real CLI, the
scripted model, real checks and real session files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from .support import cli, cli_json, write_script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
KEY = "sk-test-abcdef1234567890XYZ"


def _passing_project(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "test_ok.py").write_text("import unittest\n\nclass T(unittest.TestCase):\n"
                                   "    def test_ok(self):\n        self.assertTrue(True)\n")
    return ws


def _noop(tmp_path: Path, text: str = "All done, tests pass.") -> Path:
    return write_script(tmp_path, [{"text": text}], name="noop.json")


def test_a_provider_error_quoting_a_key_is_masked_on_screen_and_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("MY_TOKEN", "tok-secret-value-123456")
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"error": {"kind": "auth",
                                                "message": f"bad key {KEY} and tok-secret-value-123456"}}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "hi")
    assert result.exit_code == 1
    assert "FAILED (provider_error/auth)" in result.stderr and "bad key ****" in result.stderr
    assert KEY not in result.output and "tok-secret-value-123456" not in result.output
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "hi")
    assert KEY not in doc["stop"]["detail"] and "****" in doc["stop"]["detail"]
    for path in Path(os.environ["AMOS_HOME"]).rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert KEY.encode() not in data and b"tok-secret-value-123456" not in data, path


def test_a_check_that_writes_into_the_workspace_never_verifies_a_run_that_did_nothing(tmp_path):
    ws = _passing_project(tmp_path)
    for check in ("python3 -m unittest 2>>log.txt", "date +%N > stamp.txt"):
        code, doc = cli_json("run", "--script", str(_noop(tmp_path)), "--workspace", str(ws), "--verify", check,
                             "fix it")
        assert (code, doc["stop"]["verdict"], doc["stop"]["reason"]) == (0, "ANSWERED", "check_already_passing"), \
            (check, doc["stop"])
        assert doc["stop"]["check"]["workspace_changed"] is False


def test_a_confirmation_runs_the_checks_again(tmp_path, monkeypatch):
    monkeypatch.setenv("AMOS_USER", "support-lead")
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "human_confirmation" / "workspace", ws)
    cfg = str(EXAMPLES / "human_confirmation" / "config.json")
    script = str(EXAMPLES / "human_confirmation" / "script.json")
    code, doc = cli_json("run", "--script", script, "--config", cfg, "--workspace", str(ws), "draft the letter")
    assert doc["stop"]["reason"] == "confirmation_pending"
    (ws / "letter.md").unlink()  # the file the check needs goes away while the claim waits
    code, doc = cli_json("resume", doc["session_id"], "--confirm", "--config", cfg)
    assert doc["stop"]["verdict"] == "UNCERTAIN" and doc["stop"]["reason"] == "check_failed", doc["stop"]
    assert "no longer passes" in doc["stop"]["detail"]
    assert code == 8


def test_an_empty_reply_over_a_check_that_already_passed_is_not_an_answer(tmp_path):
    ws = _passing_project(tmp_path)
    code, doc = cli_json("run", "--script", str(_noop(tmp_path, "")), "--workspace", str(ws), "--verify", "true", "x")
    assert (code, doc["stop"]["verdict"], doc["stop"]["reason"]) == (8, "UNCERTAIN", "empty_answer")


def test_a_rejected_claim_that_then_fails_prints_no_stale_answer(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"text": "Fixed add; tests pass."}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--verify", "human", "fix it")
    assert doc["stop"]["reason"] == "confirmation_pending"
    result = cli("resume", doc["session_id"], "--reject", "also add a docstring")
    assert result.exit_code == 1 and "script_exhausted" in result.stderr
    assert "Fixed add" not in result.stdout
    code, doc = cli_json("run", "--session", doc["session_id"], "--script", str(script), "again")
    assert doc["output_text"] == ""


def test_a_check_program_that_does_not_exist_stops_before_any_model_call(tmp_path):
    ws = _passing_project(tmp_path)
    code, doc = cli_json("run", "--script", str(_noop(tmp_path)), "--workspace", str(ws), "--verify",
                         "pyhton3 -m unittest", "fix it")
    assert (code, doc["stop"]["verdict"], doc["stop"]["reason"]) == (8, "UNCERTAIN", "checker_error")
    assert "'pyhton3' is not a command on PATH" in doc["stop"]["detail"]
    assert doc["usage"]["model_calls"] == 0
    # a script the model is to write, and shell builtins, are not "missing"
    for check in ("./check.sh", "test -f done.txt", "FOO=1 sh -c 'exit 1'"):
        code, doc = cli_json("run", "--script", str(_noop(tmp_path)), "--workspace", str(ws), "--verify", check, "x")
        assert doc["usage"]["model_calls"] == 1, (check, doc["stop"])


def test_a_new_prompt_over_a_pending_confirmation_says_what_it_dropped(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"text": "Done."}, {"text": "Something else."}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--verify", "human", "x")
    result = cli("run", "--session", doc["session_id"], "--script", str(script), "anything else?")
    assert "the completion claim waiting for a person's confirmation was dropped unanswered" in result.stderr
    assert "0 held call(s)" not in result.stderr


def test_demo_honours_no_verify_and_names_its_own_check(tmp_path):
    code, doc = cli_json("run", "--demo")
    assert doc["stop"]["check"]["source"] == "demo" and doc["stop"]["verdict"] == "VERIFIED_COMPLETE"
    code, doc = cli_json("run", "--demo", "--no-verify")
    assert doc["stop"]["check"]["source"] == "none" and doc["stop"]["verdict"] == "ANSWERED"
    result = cli("run", "--demo", "do something else", "--json")
    assert "plays a fixed script whatever the prompt says" in result.stderr
    assert "demo workspace:" in result.stderr


def test_no_save_waiting_run_does_not_offer_a_resume_that_cannot_work(tmp_path):
    result = cli("run", "--no-save", "--script", str(EXAMPLES / "approval" / "script.json"),
                 "--workspace", str(tmp_path), "write a note")
    assert result.exit_code == 5
    assert "amos resume" not in result.stderr
    assert "not saved (--no-save), so it cannot be resumed" in result.stderr


def test_a_verify_command_holding_a_secret_is_not_remembered(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ws = _passing_project(tmp_path)
    result = cli("run", "--script", str(_noop(tmp_path)), "--workspace", str(ws), "--verify", f"test {KEY} = {KEY}",
                 "x")
    assert result.exit_code == 0, result.output
    assert "not remembered by the session" in result.stderr
    for path in Path(os.environ["AMOS_HOME"]).rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_config_check_warns_about_a_done_tool_without_a_check(tmp_path):
    path = tmp_path / "d0.json"
    path.write_text(json.dumps({"loop_policy": {"completion": {"done_tool": "done"}}}))
    result = cli("config", "check", str(path))
    assert result.exit_code == 0
    assert "done_tool needs a completion check" in result.stderr


def test_every_destination_failure_is_in_the_text_receipt(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"loop_policy": {"max_recovery_attempts": 0, "completion": {"files": [
        {"path": "r.txt", "min_bytes": 50, "sha256": "0" * 64, "contains": "total is 42"}]}}}))
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "r.txt", "content": "total is 10\n"}}]},
        {"text": "Wrote it."}])
    result = cli("run", "--yes", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "x")
    assert "3 destination check(s) failed" in result.stderr
    assert "at least 50" in result.stderr and "sha256" in result.stderr and "total is 42" in result.stderr


# ---------------------------------------------------------------- second new-user pass

def _writes_out(tmp_path: Path, path: str = "out.txt", content: str = "result\n") -> Path:
    return write_script(tmp_path, [{"tool_calls": [{"name": "write_file", "arguments": {"path": path,
                                                                                       "content": content}}]},
                                   {"text": "Done."}], name="writes.json")


def test_the_broken_checks_people_type_are_uncertain_never_false_complete(tmp_path):
    import sys

    ws = tmp_path / "ws"
    ws.mkdir()
    script = _writes_out(tmp_path)
    py = sys.executable
    for check in (f"{py} -m pytset -q", f"{py} -m pytest -q tests/test_nope.py", "sh check.sh", f"{py} check.py"):
        code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--no-save", "--yes",
                             "--verify", check, "do")
        assert (code, doc["stop"]["verdict"], doc["stop"]["cause"]) == (8, "UNCERTAIN", "checker_error"), check
        assert "could not" in doc["stop"]["detail"], check
        assert doc["stop"]["completion"]["reason"].startswith("the check could not give a verdict"), check


def test_a_failing_test_is_still_false_complete(tmp_path):
    import sys

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "test_x.py").write_text("def test_x():\n    assert False\n")
    code, doc = cli_json("run", "--script", str(_writes_out(tmp_path)), "--workspace", str(ws), "--no-save", "--yes",
                         "--verify", f"{sys.executable} -m pytest -q test_x.py", "do")
    assert (code, doc["stop"]["verdict"]) == (3, "FALSE_COMPLETE")


def test_a_run_that_rewrites_the_check_script_is_never_verified(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "check.sh").write_text("#!/bin/sh\nexit 1\n")
    script = _writes_out(tmp_path, "check.sh", "#!/bin/sh\nexit 0\n")
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--no-save", "--yes",
                         "--verify", "sh check.sh", "do")
    assert (code, doc["stop"]["verdict"], doc["stop"]["reason"]) == (8, "UNCERTAIN", "check_tampered")
    assert "check.sh" in doc["stop"]["detail"]
    # the same work without touching the check's file is verified
    (ws / "check.sh").write_text("#!/bin/sh\ntest -f out.txt\n")
    code, doc = cli_json("run", "--script", str(_writes_out(tmp_path)), "--workspace", str(ws), "--no-save",
                         "--yes", "--verify", "sh check.sh", "do")
    assert (code, doc["stop"]["verdict"]) == (0, "VERIFIED_COMPLETE"), doc["stop"]


def test_a_check_script_behind_a_nested_shell_is_pinned_and_a_data_file_is_not(tmp_path):
    """Second-round break-it findings: ``bash -c 'sh check.sh'`` let a rewritten script
    verify; ``grep -q z a.txt`` refused a run that was asked to change a.txt."""
    for check in ("bash -c 'sh check.sh'", "sh c*.sh"):
        ws = tmp_path / f"ws{len(check)}"
        ws.mkdir()
        (ws / "check.sh").write_text("#!/bin/sh\nexit 1\n")
        code, doc = cli_json("run", "--script", str(_writes_out(tmp_path, "check.sh", "#!/bin/sh\nexit 0\n")),
                             "--workspace", str(ws), "--no-save", "--yes", "--verify", check, "do")
        assert (code, doc["stop"]["reason"]) == (8, "check_tampered"), (check, doc["stop"])
    ws = tmp_path / "data"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    code, doc = cli_json("run", "--script", str(_writes_out(tmp_path, "a.txt", "a\nz\n")), "--workspace", str(ws),
                         "--no-save", "--yes", "--verify", "grep -q z a.txt", "do")
    assert (code, doc["stop"]["verdict"]) == (0, "VERIFIED_COMPLETE"), doc["stop"]
