"""Every verdict earns its name (issue 16), through the real CLI on the scripted model:
baselines, broken checks, empty answers, the done tool, destination checks, a person as
the receipt, unknown usage, and the check in force named in every receipt."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from .support import cli, cli_json, write_script

PY = sys.executable


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    return ws


def _config(tmp_path: Path, **data: object) -> Path:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(data))
    return path


def _touch(name: str, content: str = "x") -> dict:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": name, "content": content}}]}


def _stop(doc: dict) -> tuple[str, str, str]:
    return doc["stop"]["verdict"], doc["stop"]["cause"], doc["stop"]["reason"]


# ---------------------------------------------------------------------------- broken checks


@pytest.mark.parametrize("check, said", [
    ("pytset -q", "exit 127, command not found"),
    ("./not-executable.sh", "exit 126, not executable"),
    ("kill -9 $$", "killed by SIGKILL"),
    (f"{PY} -c \"import os, signal; os.kill(os.getpid(), signal.SIGSEGV)\"", "killed by SIGSEGV"),
])
def test_a_broken_check_is_uncertain_never_false_complete(tmp_path, check, said):
    ws = _ws(tmp_path)
    (ws / "not-executable.sh").write_text("#!/bin/sh\nexit 0\n")
    script = write_script(tmp_path, [{"text": "fixed it"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--verify", check, "go")
    assert (code, *_stop(doc)) == (8, "UNCERTAIN", "checker_error", "checker_error")
    assert said in doc["stop"]["detail"] and check.split()[0] in doc["stop"]["detail"]
    assert doc["stop"]["recovery_attempts"] == 0


def test_a_check_that_times_out_or_a_verifier_that_raises_is_a_checker_error_and_costs_no_recovery(tmp_path):
    ws = _ws(tmp_path)
    (ws / "raising.py").write_text("def check(ctx):\n    raise RuntimeError('the checker broke')\n")
    script = write_script(tmp_path, [{"text": "done"}], on_exhausted="repeat_last")
    for completion, said in (({"command": "sleep 5", "timeout_s": 0.5}, "timed out"),
                             ({"python": "raising:check"}, "RuntimeError: the checker broke")):
        cfg = _config(tmp_path, loop_policy={"max_recovery_attempts": 3, "completion": completion})
        code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
        assert (code, *_stop(doc)) == (8, "UNCERTAIN", "checker_error", "checker_error"), doc["stop"]
        assert said in doc["stop"]["detail"] and doc["stop"]["recovery_attempts"] == 0
        assert doc["stop"]["steps"] == 1  # the model was never asked to fix the host's check


# ---------------------------------------------------------------------------- baselines


def test_an_already_passing_check_with_nothing_changed_is_not_verified(tmp_path):
    ws = _ws(tmp_path)
    (ws / "result.txt").write_text("ready\n")
    script = write_script(tmp_path, [{"tool_calls": [{"name": "run_command", "arguments": {"command": "cat result.txt"}}]},
                                     {"text": "done: the tests pass"}])
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws),
                         "--verify", "test -f result.txt", "go")
    assert (code, *_stop(doc)) == (0, "ANSWERED", "answer", "check_already_passing")
    assert "already passed before this run" in doc["stop"]["detail"]
    assert doc["stop"]["completion"]["baseline"] == "passed" and doc["stop"]["completion"]["complete"] is True
    assert doc["stop"]["check"] == {"summary": "command `test -f result.txt`", "source": "flag", "route": "answer",
                                    "baseline": "passed", "workspace_changed": False, "confirmed_by": None}


def test_failing_to_passing_is_verified_and_says_so(tmp_path):
    ws = _ws(tmp_path)
    script = write_script(tmp_path, [_touch("result.txt"), {"text": "created it"}])
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws),
                         "--verify", "test -f result.txt", "go")
    assert (code, *_stop(doc)) == (0, "VERIFIED_COMPLETE", "answer", "completed")
    assert doc["stop"]["completion"]["baseline"] == "failed" and "failing → passing" in doc["stop"]["detail"]
    result = cli("run", "--yes", "--script", str(script), "--workspace", str(_ws(tmp_path / "b")),
                 "--verify", "test -f result.txt", "again")
    assert "baseline failed → passing" in result.stderr


def test_a_baseline_that_cannot_run_yet_is_an_error_and_the_run_goes_on(tmp_path):
    ws = _ws(tmp_path)
    script = write_script(tmp_path, [{"tool_calls": [{"name": "write_file", "arguments": {
        "path": "check.sh", "content": "#!/bin/sh\nexit 0\n"}}]},
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "chmod +x check.sh"}}]},
        {"text": "wrote the check"}])
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), "--verify", "./check.sh",
                         "go")
    assert (code, *_stop(doc)) == (0, "VERIFIED_COMPLETE", "answer", "completed")
    assert doc["stop"]["completion"]["baseline"] == "error"


def test_the_baseline_can_be_switched_off_and_max_recovery_zero_gives_the_same_verdicts(tmp_path):
    ws = _ws(tmp_path)
    (ws / "result.txt").write_text("ready\n")
    script = write_script(tmp_path, [{"text": "done"}], on_exhausted="repeat_last")
    off = _config(tmp_path, loop_policy={"max_recovery_attempts": 0,
                                         "completion": {"command": "test -f result.txt", "baseline": False}})
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(off), "go")
    assert (code, *_stop(doc)) == (0, "VERIFIED_COMPLETE", "answer", "completed")
    assert doc["stop"]["completion"]["baseline"] == "skipped"
    on = _config(tmp_path, loop_policy={"max_recovery_attempts": 0, "completion": {"command": "test -f result.txt"}})
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(on), "go")
    assert (code, *_stop(doc)) == (0, "ANSWERED", "answer", "check_already_passing")
    assert doc["stop"]["recovery_attempts"] == 0 and doc["stop"]["steps"] == 1


def test_running_the_tests_and_saying_done_changes_nothing(tmp_path):
    """Caches a check run leaves behind (bytecode, pytest cache) are not a change."""
    ws = _ws(tmp_path)
    (ws / "mod.py").write_text("X = 1\n")
    (ws / "test_mod.py").write_text("import unittest\nimport mod\n\nclass T(unittest.TestCase):\n"
                                    "    def test_x(self):\n        self.assertEqual(mod.X, 1)\n")
    check = f"{PY} -m unittest -q && mkdir -p .pytest_cache __pycache__ && touch .pytest_cache/v __pycache__/m.pyc"
    script = write_script(tmp_path, [{"tool_calls": [{"name": "run_command", "arguments": {"command": check}}]},
                                     {"text": "all tests pass"}])
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), "--verify", check, "go")
    assert (code, *_stop(doc)) == (0, "ANSWERED", "answer", "check_already_passing")
    assert (ws / "__pycache__").is_dir()


# ---------------------------------------------------------------------------- empty answers


def test_an_empty_answer_is_uncertain(tmp_path):
    ws = _ws(tmp_path)
    script = write_script(tmp_path, [{"tool_calls": [{"name": "list_dir", "arguments": {}}]}, {"text": ""}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "go")
    assert (code, *_stop(doc)) == (8, "UNCERTAIN", "answer", "empty_answer")


def test_an_empty_answer_gets_one_nudge_with_a_policy_then_is_uncertain(tmp_path):
    ws = _ws(tmp_path)
    script = write_script(tmp_path, [{"text": ""}, {"expect": {"any_message_contains": "no text and no tool calls"},
                                                   "text": "   "}])
    cfg = _config(tmp_path, loop_policy={})
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert (code, *_stop(doc)) == (8, "UNCERTAIN", "answer", "empty_answer")
    assert doc["stop"]["steps"] == 2 and doc["stop"]["recovery_attempts"] == 1


def test_an_empty_answer_after_the_work_is_verified_by_a_passing_check(tmp_path):
    ws = _ws(tmp_path)
    script = write_script(tmp_path, [_touch("out.txt"), {"text": ""}])
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), "--verify", "test -f out.txt",
                         "go")
    assert (code, *_stop(doc)) == (0, "VERIFIED_COMPLETE", "answer", "completed")


# ---------------------------------------------------------------------------- the done tool


def _done(summary: str = "wrote report.json") -> dict:
    return {"name": "done", "arguments": {"summary": summary}}


def test_the_done_tool_with_a_receipt_is_verified_and_its_other_calls_run_first(tmp_path):
    ws = _ws(tmp_path)
    cfg = _config(tmp_path, loop_policy={"completion": {"done_tool": "done", "files": ["report.json"]}},
                  evidence={"enabled": True}, tools={"permissions": {"write_file": "allow"}})
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "d1", **_done()},
                        {"id": "w1", "name": "write_file", "arguments": {"path": "report.json", "content": "{}"}}]},
        {"text": "never asked"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert (code, *_stop(doc)) == (0, "VERIFIED_COMPLETE", "answer", "completed"), doc["stop"]
    assert doc["stop"]["check"]["route"] == "done_tool" and doc["stop"]["steps"] == 1
    assert [(c["call_id"], c["status"]) for c in doc["tool_calls"]] == [("d1", "succeeded"), ("w1", "succeeded")]
    done = next(c for c in doc["tool_calls"] if c["call_id"] == "d1")
    assert done["evidence_id"] is None  # the host wrote that result: no evidence record is invented
    show = cli("sessions", "show", doc["session_id"], "--config", str(cfg))
    assert "completion claim received" in show.stdout


def test_the_done_tool_without_a_receipt_is_false_complete_at_that_step(tmp_path):
    ws = _ws(tmp_path)
    cfg = _config(tmp_path, loop_policy={"max_recovery_attempts": 0,
                                         "completion": {"done_tool": "done", "files": ["report.json"]}})
    script = write_script(tmp_path, [{"tool_calls": [_done()]}, {"text": "never asked"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert (code, *_stop(doc)) == (3, "FALSE_COMPLETE", "recovery_exhausted", "recovery_exhausted")
    assert doc["stop"]["steps"] == 1 and doc["stop"]["check"]["route"] == "done_tool"


def test_a_refuted_done_gets_host_feedback_when_recovery_is_on(tmp_path):
    ws = _ws(tmp_path)
    cfg = _config(tmp_path, loop_policy={"completion": {"done_tool": "done", "files": ["report.json"]}},
                  tools={"permissions": {"write_file": "allow"}})
    script = write_script(tmp_path, [
        {"tool_calls": [_done("all done")]},
        {"expect": {"any_message_contains": "report.json"}, **_touch("report.json")},
        {"tool_calls": [_done()]}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert (code, *_stop(doc)) == (0, "VERIFIED_COMPLETE", "answer", "completed")
    assert doc["stop"]["recovery_attempts"] == 1


def test_done_tool_without_any_check_is_a_config_error(tmp_path):
    ws = _ws(tmp_path)
    cfg = _config(tmp_path, loop_policy={"completion": {"done_tool": "done"}})
    script = write_script(tmp_path, [{"text": "x"}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert result.exit_code == 2 and "done_tool" in result.stderr and "Traceback" not in result.stderr
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg),
                         "--verify", "true", "go")
    assert code == 0  # --verify supplies the check


def test_an_unknown_tool_gets_no_evidence_record(tmp_path):
    ws = _ws(tmp_path)
    cfg = _config(tmp_path, evidence={"enabled": True})
    script = write_script(tmp_path, [{"tool_calls": [{"id": "x1", "name": "done", "arguments": {"summary": "ok"}}]},
                                     {"text": "ok"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert doc["tool_calls"] == [{"call_id": "x1", "tool": "done", "status": "failed", "evidence_id": None}]


# ---------------------------------------------------------------------------- destination checks

SCHEMA = {"type": "object", "required": ["total"], "properties": {"total": {"type": "integer"}}}


@pytest.mark.parametrize("check, good, bad, named", [
    ({"path": "r.txt", "min_bytes": 10}, "0123456789ab", "short", "at least 10 are required"),
    ({"path": "r.txt", "sha256": hashlib.sha256(b"exact\n").hexdigest()}, "exact\n", "other\n", "has SHA-256"),
    ({"path": "r.json", "json_schema": SCHEMA}, '{"total": 3}', '{"total": "three"}',
     "does not match its JSON schema at total"),
    ({"path": "r.json", "json_schema": SCHEMA}, '{"total": 3}', "not json", "is not valid JSON"),
    ({"path": "r.txt", "contains": r"^TOTAL: \d+$"}, "head\nTOTAL: 12\n", "TOTAL: twelve\n",
     "does not contain a match for"),
    ({"path": "out", "type": "dir"}, None, "a file, not a folder", "is not a folder"),
])
def test_each_destination_check_fails_naming_why_and_passes(tmp_path, check, good, bad, named):
    ws = _ws(tmp_path)
    cfg = _config(tmp_path, loop_policy={"max_recovery_attempts": 0, "completion": {"files": [check],
                                                                                     "baseline": False}})
    script = write_script(tmp_path, [{"text": "done"}], on_exhausted="repeat_last")
    target = ws / check["path"]
    target.write_text(bad)
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert (code, doc["stop"]["verdict"]) == (3, "FALSE_COMPLETE")
    assert named in doc["stop"]["completion"]["feedback"], doc["stop"]["completion"]
    target.unlink()
    if good is None:
        target.mkdir()
    else:
        target.write_text(good)
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert (code, doc["stop"]["verdict"]) == (0, "VERIFIED_COMPLETE"), doc["stop"]


def test_a_destination_that_cannot_be_read_is_a_checker_error(tmp_path):
    ws = _ws(tmp_path)
    os.mkfifo(ws / "r.txt")
    cfg = _config(tmp_path, loop_policy={"completion": {"files": [{"path": "r.txt", "min_bytes": 1}]}})
    script = write_script(tmp_path, [{"text": "done"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert (code, *_stop(doc)) == (8, "UNCERTAIN", "checker_error", "checker_error")
    assert "not a regular file" in doc["stop"]["detail"]


def test_bad_destination_checks_are_config_errors(tmp_path):
    ws = _ws(tmp_path)
    script = write_script(tmp_path, [{"text": "x"}])
    for entry, said in (({"path": "a", "json_schema": {"type": "no-such-type"}}, "not a valid JSON Schema"),
                        ({"path": "a", "contains": "("}, "not a valid regular expression"),
                        ({"path": "a", "sha256": "abc"}, "loop_policy.completion.files.0.sha256"),
                        ({"path": "../a"}, "inside the workspace")):
        cfg = _config(tmp_path, loop_policy={"completion": {"files": [entry]}})
        result = cli("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
        assert result.exit_code == 2 and said in result.stderr and "Traceback" not in result.stderr, result.stderr


# ---------------------------------------------------------------------------- a person as the receipt


def test_a_person_confirms_through_amos_resume_and_yes_or_all_never_do(tmp_path, monkeypatch):
    monkeypatch.setenv("AMOS_USER", "ada")
    ws = _ws(tmp_path)
    cfg = _config(tmp_path, loop_policy={"completion": {"human": True}}, approvals={"owner": "ada"})
    script = write_script(tmp_path, [{"text": "I wrote the summary"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert (code, *_stop(doc)) == (4, "WAITING", "approval_required", "confirmation_pending")
    assert doc["stop"]["approval"]["call_id"] == "confirmation" and doc["stop"]["approval"]["owner"] == "ada"
    sid = doc["session_id"]
    code, again = cli_json("resume", sid, "--all", "--yes", "--config", str(cfg))
    assert (code, again["stop"]["reason"]) == (4, "confirmation_pending")  # neither --yes nor --all confirms
    bad = cli("resume", sid, "--approve", "c1", "--config", str(cfg))
    assert bad.exit_code == 2 and "--confirm or --reject" in bad.stderr
    code, done = cli_json("resume", sid, "--confirm", "--config", str(cfg))
    assert (code, *_stop(done)) == (0, "VERIFIED_COMPLETE", "answer", "confirmed")
    assert done["stop"]["check"]["confirmed_by"] == "ada" and "ada confirmed" in done["stop"]["detail"]


def test_a_rejection_reaches_the_model_as_host_feedback(tmp_path):
    ws = _ws(tmp_path)
    cfg = _config(tmp_path, loop_policy={"completion": {"human": True}})
    script = write_script(tmp_path, [
        {"text": "done"},
        {"expect": {"any_message_contains": "the totals are missing"}, "text": "added the totals"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert (code, doc["stop"]["verdict"]) == (5, "WAITING_UNROUTED")
    code, doc = cli_json("resume", doc["session_id"], "--reject", "the totals are missing", "--config", str(cfg))
    assert (code, *_stop(doc)) == (5, "WAITING_UNROUTED", "approval_required", "confirmation_pending")
    assert doc["stop"]["recovery_attempts"] == 1 and doc["output_text"] == "added the totals"


def test_verify_human_on_the_command_line(tmp_path):
    ws = _ws(tmp_path)
    script = write_script(tmp_path, [{"text": "done"}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--verify", "human", "go")
    assert result.exit_code == 5 and "--confirm" in result.stderr and "claim: done" in result.stderr


# ---------------------------------------------------------------------------- unknown usage


def test_a_server_without_usage_gives_estimated_counts_and_a_token_budget_that_fires(tmp_path):
    ws = _ws(tmp_path)
    cfg = _config(tmp_path, run={"token_budget": 500})
    turn = {"usage": None, "tool_calls": [{"name": "list_dir", "arguments": {}}]}
    script = write_script(tmp_path, [turn] * 5 + [{"text": "never"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert (code, *_stop(doc)) == (6, "BOUNDED_STOP", "token_budget", "token_budget")
    usage = doc["stop"]["usage"]
    assert usage["estimated"] is True and usage["input_tokens"] > 0 and isinstance(usage["input_tokens"], int)
    text = cli("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "again")
    assert "~" in text.stderr.splitlines()[0] or any(line.count("~") >= 2 for line in text.stderr.splitlines())


# ---------------------------------------------------------------------------- the check in force


def test_the_check_in_force_and_its_source_are_in_every_receipt(tmp_path):
    ws = _ws(tmp_path)
    script = write_script(tmp_path, [_touch("a.txt"), {"text": "done"}], on_exhausted="repeat_last")
    code, doc = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), "--verify", "test -f a.txt",
                         "go")
    assert doc["stop"]["check"]["source"] == "flag"
    sid = doc["session_id"]
    code, doc = cli_json("run", "--session", sid, "again")
    assert doc["stop"]["check"]["source"] == "session" and doc["stop"]["check"]["summary"] == "command `test -f a.txt`"
    code, doc = cli_json("run", "--session", sid, "--no-verify", "once more")
    assert doc["stop"]["check"]["source"] == "none" and doc["stop"]["reason"] == "answer_returned"
    code, doc = cli_json("run", "--session", sid, "/verify test -d .")
    assert code == 0 and doc["result"]["source"] == "session"
    code, doc = cli_json("run", "--session", sid, "and again")
    assert doc["stop"]["check"]["summary"] == "command `test -d .`"
    code, doc = cli_json("run", "--session", sid, "/verify off")
    code, doc = cli_json("run", "--session", sid, "/verify")
    assert doc["result"]["source"] == "none"
    cfg = _config(tmp_path, loop_policy={"completion": {"command": "true"}})
    code, doc = cli_json("run", "--session", sid, "--config", str(cfg), "with config")
    assert doc["stop"]["check"]["source"] == "config"


def test_a_text_receipt_shows_why_the_check_failed_with_secrets_masked(tmp_path, monkeypatch):
    key = "sk-test-CHECKOUTPUT-1234567890abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    ws = _ws(tmp_path)
    (ws / "settings.ini").write_text(f"api_key = {key}\n")  # a check that prints a file holding the key
    check = f"{PY} -c \"[print('line', i) for i in range(30)]\" && cat settings.ini && exit 1"
    script = write_script(tmp_path, [{"text": "done"}])
    result = cli("run", "--script", str(script), "--workspace", str(ws), "--verify", check, "go")
    assert result.exit_code == 3
    assert "the check's output ended with:" in result.stderr and "| line 29" in result.stderr
    assert "| line 10" not in result.stderr  # only the last ~15 lines
    assert key not in result.stderr and "| api_key = [REDACTED]" in result.stderr


def test_the_checker_packet_carries_the_task_notes(tmp_path):
    ws = _ws(tmp_path)
    (ws / "notes_check.py").write_text(
        "def check(ctx):\n"
        "    state = ctx['task_state']\n"
        "    return {'complete': state is not None and 'revision' in str(dict(state))}\n")
    cfg = _config(tmp_path, task_state={"enabled": True},
                  loop_policy={"max_recovery_attempts": 0, "completion": {"python": "notes_check:check",
                                                                          "baseline": False}})
    script = write_script(tmp_path, [{"text": "done"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "go")
    assert (code, doc["stop"]["verdict"]) == (0, "VERIFIED_COMPLETE"), doc["stop"]
