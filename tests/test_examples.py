"""Every example in examples/ runs offline and ends as examples/README.md says."""

from __future__ import annotations

import shutil
from pathlib import Path

from .support import cli_json

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def copy_workspace(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(EXAMPLES / name / "workspace", target)
    return target


def test_hello(tmp_path):
    ws = copy_workspace("hello", tmp_path)
    code, doc = cli_json("run", "--script", str(EXAMPLES / "hello/script.json"), "--workspace", str(ws),
                         "what is here?")
    assert code == 0 and doc["stop"]["verdict"] == "ANSWERED"
    assert "README" in doc["output_text"]


def test_approval_then_resume(tmp_path):
    ws = copy_workspace("approval", tmp_path)
    code, doc = cli_json("run", "--script", str(EXAMPLES / "approval/script.json"), "--workspace", str(ws),
                         "write the notes")
    assert code == 5 and doc["stop"]["verdict"] == "WAITING_UNROUTED"
    assert not (ws / "NOTES.md").exists()
    code, doc = cli_json("resume", doc["session_id"], "--approve", "write_note")
    assert code == 0 and doc["stop"]["verdict"] == "ANSWERED"
    assert (ws / "NOTES.md").read_text().startswith("# Release notes")


def test_false_complete(tmp_path):
    ws = copy_workspace("false-complete", tmp_path)
    code, doc = cli_json("run", "--script", str(EXAMPLES / "false-complete/script.json"), "--workspace", str(ws),
                         "--verify", "test -f report.txt", "write the report")
    assert code == 3 and doc["stop"]["verdict"] == "FALSE_COMPLETE"
    assert "report.txt" in doc["stop"]["detail"]


def test_feedback_agent(tmp_path):
    ws = copy_workspace("feedback_agent", tmp_path)
    code, doc = cli_json("run", "--script", str(EXAMPLES / "feedback_agent/script.json"),
                         "--config", str(EXAMPLES / "feedback_agent/config.json"), "--workspace", str(ws),
                         "Verify artifact A42 and write receipt.txt")
    assert code == 0 and doc["stop"]["verdict"] == "VERIFIED_COMPLETE"
    # one premature answer rejected, one failed read recovered
    assert doc["stop"]["recovery_attempts"] == 2 and doc["loop"]["status"] == "completed"
    statuses = [c["status"] for c in doc["tool_calls"]]
    assert statuses == ["failed", "succeeded", "succeeded"]
    assert (ws / "receipt.txt").read_text() == "A42 ready: true\n"


def test_amos_loop(tmp_path):
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(EXAMPLES / "amos_loop/run.py")], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("1. WAITING (approval_required) owner=release-team token=")
    assert lines[2].strip().startswith("phase input-needed")
    assert lines[-1] == "4. VERIFIED_COMPLETE (answer/completed) loop.status=completed"


def _run_example(name: str) -> list[str]:
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(EXAMPLES / name / "run.py")], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout.splitlines()


def test_durable_evidence():
    lines = _run_example("durable_evidence")
    assert "(projected=True)" in lines[0] and lines[-1].endswith("exact result: True")


def test_evidence_recovery():
    lines = _run_example("evidence_recovery")
    assert "raw result kept: True; protected=True" in lines[0]
    assert lines[1].endswith("protected=False") and lines[2] == "3. the command ran 1 time(s)"


def test_ambiguous_evidence():
    lines = _run_example("ambiguous_evidence")
    assert "status=timed_out completion=unknown" in lines[0]
    assert lines[1].startswith("2. UNCERTAIN (policy_stop/uncertain_effect) after 1 model call")
    assert lines[2] == "3. deploy started 1 time(s)"


def test_task_state():
    lines = _run_example("task_state")
    assert lines[1] == "2. proposal recorded: UNCONFIRMED"
    assert lines[3] == "4. another process sees: waiting_external"
    assert lines[4].endswith(": True")


def test_amos_task_state():
    lines = _run_example("amos_task_state")
    assert lines[1].endswith("TASK_STATE_CONFLICT") and lines[3].endswith("revision 3")
    assert lines[4].startswith("5. next run ANSWERED") and lines[5].endswith("True")


def test_done_tool(tmp_path):
    ws = copy_workspace("done_tool", tmp_path)
    code, doc = cli_json("run", "--script", str(EXAMPLES / "done_tool/script.json"),
                         "--config", str(EXAMPLES / "done_tool/config.json"), "--workspace", str(ws), "count the items")
    assert code == 0 and doc["stop"]["verdict"] == "VERIFIED_COMPLETE"
    assert doc["stop"]["check"]["route"] == "done_tool" and doc["stop"]["recovery_attempts"] == 1
    assert (ws / "summary.json").read_text() == '{"total": 10}\n'


def test_destination_schema(tmp_path):
    ws = copy_workspace("destination_schema", tmp_path)
    code, doc = cli_json("run", "--script", str(EXAMPLES / "destination_schema/script.json"),
                         "--config", str(EXAMPLES / "destination_schema/config.json"), "--workspace", str(ws),
                         "write the report")
    assert code == 0 and doc["stop"]["verdict"] == "VERIFIED_COMPLETE"
    assert doc["stop"]["recovery_attempts"] == 1  # the first report.json failed its schema


def test_human_confirmation(tmp_path, monkeypatch):
    monkeypatch.setenv("AMOS_USER", "support-lead")
    ws = copy_workspace("human_confirmation", tmp_path)
    cfg = str(EXAMPLES / "human_confirmation/config.json")
    code, doc = cli_json("run", "--script", str(EXAMPLES / "human_confirmation/script.json"), "--config", cfg,
                         "--workspace", str(ws), "draft the letter")
    assert code == 4 and doc["stop"]["reason"] == "confirmation_pending"
    code, doc = cli_json("resume", doc["session_id"], "--reject", "mention the order number", "--config", cfg)
    assert code == 4 and "4711" in (ws / "letter.md").read_text()
    code, doc = cli_json("resume", doc["session_id"], "--confirm", "--config", cfg)
    assert code == 0 and doc["stop"]["verdict"] == "VERIFIED_COMPLETE"
    assert doc["stop"]["check"]["confirmed_by"] == "support-lead"
