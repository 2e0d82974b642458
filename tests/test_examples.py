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
