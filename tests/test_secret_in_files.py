"""A key the agent writes into a file, or into a file's name, is never shown (break-it).

``run_command`` copies a secret into ``out.txt`` and into a file name. The snapshot keeps
the exact bytes (``/undo`` must restore them), but what amos prints or reports — the run's
``files_changed``, ``amos diff``, ``/diff`` — masks the key.
"""

from __future__ import annotations

import json

from tests.support import cli, cli_json, write_script

KEY = "sk-local-SECRETVALUE-abc123xyz"


def test_a_key_in_a_changed_file_and_its_name_is_masked_in_every_report(tmp_path, amos_home, monkeypatch):
    monkeypatch.setenv("MY_LOCAL_KEY", KEY)
    cfg = tmp_path / "amos.json"
    cfg.write_text(json.dumps({"providers": {"openai-compatible": {"api_key_env": "MY_LOCAL_KEY"}}}))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".k").write_text(KEY)
    command = 'touch "n-$(cat .k).txt"; cat .k > out.txt'
    script = write_script(tmp_path, [{"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]},
                                     {"text": "done"}])
    code, out = cli_json("run", "--config", str(cfg), "--script", str(script), "--workspace", str(ws), "--yes",
                         "--sandbox", "danger-full-access", "go")
    assert code == 0, out
    assert (ws / f"n-{KEY}.txt").exists() and (ws / "out.txt").read_text() == KEY, "the command really ran"
    assert KEY not in json.dumps(out)
    assert any("n-" in row["path"] for row in out["files_changed"])
    shown = cli("diff", out["session_id"], "--config", str(cfg))
    assert shown.exit_code == 0 and "out.txt" in shown.stdout
    assert KEY not in shown.stdout + shown.stderr
    as_json = cli("diff", out["session_id"], "--config", str(cfg), "--json")
    assert KEY not in as_json.stdout
    code, doc = cli_json("run", "--config", str(cfg), "--session", out["session_id"], "--workspace", str(ws), "/diff")
    assert code == 0 and "out.txt" in doc["result"]["diff"] and KEY not in json.dumps(doc)
