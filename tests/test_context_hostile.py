"""Context-window edge cases from a break-it session."""

from __future__ import annotations

import json
import re

from amos.paths import sessions_dir
from amos.sessions import SessionStore

from .support import cli, cli_json, write_script


def test_the_checkpoint_a_summary_names_as_its_undo_is_never_pruned(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"context": {"compact_at": 0.0001, "keep_recent_turns": 0},
                               "sessions": {"max_checkpoints": 3}}))
    script = write_script(tmp_path, [{"text": f"answer number {n} " + "words " * 60} for n in range(12)])
    code, doc = cli_json("run", "--config", str(cfg), "--script", str(script), "--workspace", str(ws), "p0")
    sid = doc["session_id"]
    for n in range(1, 8):
        code, doc = cli_json("run", "--config", str(cfg), "--session", sid, f"prompt {n} " + "more " * 60)
        assert code == 0, doc
    session = SessionStore(sessions_dir()).load(sid)
    (summary,) = [m for m in session.messages if m.kind == "summary"]
    named = [int(n) for n in re.findall(r"checkpoint (\d+) holds the history before this compaction", summary.text)]
    code, listing = cli_json("sessions", "checkpoints", sid)
    numbers = [r["number"] for r in listing["checkpoints"]]
    assert named and set(named) <= set(numbers)  # the undo (and any the summary carries over) stay
    assert len(numbers) <= 3 + len(named)  # the bound, plus the protected ones


def test_no_summary_call_when_even_a_perfect_compaction_cannot_fit(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"context": {"window_tokens": 4000, "keep_recent_turns": 0}}))
    script = write_script(tmp_path, [{"text": "short " * 100}, {"text": "never"}])
    code, doc = cli_json("run", "--config", str(cfg), "--script", str(script), "--workspace", str(ws), "hi")
    assert code == 0, doc
    code, doc = cli_json("run", "--config", str(cfg), "--session", doc["session_id"], "x" * 200_000)
    assert doc["stop"]["reason"] == "context_length"
    session = SessionStore(sessions_dir()).load(doc["session_id"])
    assert [r["purpose"] for r in session.model_calls] == ["turn"]  # no summary call was paid for


def test_compact_instructions_are_bounded(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"text": "a"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "hi")
    result = cli("run", "--session", doc["session_id"], "/compact " + "k" * 5000)
    assert result.exit_code == 1 and "limited to 4,000 characters" in result.stderr
