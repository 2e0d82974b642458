"""``amos store migrate --to postgres|files`` (issue 22): sessions and evidence copied both
ways through the real CLI, every hash verified, safe to rerun, conflicts left alone."""

from __future__ import annotations

import json
from pathlib import Path

from .support import cli, cli_json, write_script


def _home(root: Path, name: str, backend: str) -> Path:
    home = root / name
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.json").write_text(json.dumps({"store": {"backend": backend},
                                                             "evidence": {"enabled": True}}))
    return home


def test_sessions_and_evidence_move_to_postgres_and_back(tmp_path, pg_url, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "echo moved-evidence"}}]},
        {"text": "first"}, {"text": "second"}, {"text": "third"}, {"text": "fourth"},
    ])
    monkeypatch.setenv("AMOS_HOME", str(_home(tmp_path, "files-a", "files")))
    code, one = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), "one")
    assert code == 0, one
    code, again = cli_json("run", "--session", one["session_id"], "more")
    assert code == 0, again
    code, two = cli_json("run", "--yes", "--script", str(script), "--workspace", str(ws), "two")
    assert code == 0, two
    record = cli_json("evidence", "list")[1]["entries"][0]["id"]

    result = cli("store", "migrate", "--to", "postgres")
    assert result.exit_code == 0, result.stderr
    assert "sessions: 2 to copy" in result.stdout and result.stdout.count(": copied,") == 2
    assert "sha256" in result.stdout and "2 copied, 0 already there, 2 verified in the destination" in result.stdout
    rerun = cli("store", "migrate", "--to", "postgres", "--json")
    assert rerun.exit_code == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert (report["sessions_copied"], report["sessions_present"], report["evidence_copied"],
            report["evidence_present"]) == (0, 2, 0, 2)

    monkeypatch.setenv("AMOS_HOME", str(_home(tmp_path, "pg", "postgres")))
    code, listed = cli_json("sessions", "list")
    assert sorted(r["id"] for r in listed["sessions"]) == sorted([one["session_id"], two["session_id"]])
    assert "moved-evidence" in cli("evidence", "read", record).stdout
    code, resumed = cli_json("run", "--session", one["session_id"], "on postgres")
    assert code == 0 and resumed["output_text"] == "third", resumed  # the script position came along

    monkeypatch.setenv("AMOS_HOME", str(_home(tmp_path, "files-b", "files")))
    back = cli("store", "migrate", "--to", "files")
    assert back.exit_code == 0, back.stderr
    code, listed = cli_json("sessions", "list")
    assert sorted(r["id"] for r in listed["sessions"]) == sorted([one["session_id"], two["session_id"]])
    assert "moved-evidence" in cli("evidence", "read", record).stdout
    code, doc = cli_json("sessions", "checkpoints", one["session_id"])
    assert [r["number"] for r in doc["checkpoints"]] == [1, 2, 3]
    assert cli("store", "migrate", "--to", "files").exit_code == 0  # rerun: nothing new

    # a session that changed on one side since is a conflict, never overwritten
    monkeypatch.setenv("AMOS_HOME", str(tmp_path / "pg"))
    assert cli_json("run", "--session", one["session_id"], "later")[0] == 0
    monkeypatch.setenv("AMOS_HOME", str(tmp_path / "files-b"))
    before = (tmp_path / "files-b" / "data" / "sessions" / one["session_id"] / "session.json").read_bytes()
    conflict = cli("store", "migrate", "--to", "files")
    assert conflict.exit_code == 1 and f"session {one['session_id']}: CONFLICT" in conflict.stdout
    assert (tmp_path / "files-b" / "data" / "sessions" / one["session_id"] / "session.json").read_bytes() == before


def test_a_bad_target_is_exit_2(amos_home):
    result = cli("store", "migrate", "--to", "mysql")
    assert result.exit_code == 2 and "--to must be postgres or files" in result.stderr
