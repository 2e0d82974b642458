"""Issue 17 item 4: ``amos evidence rebuild`` never blesses a record whose content changed.

A real run stores a real record; one bit of its file is flipped. ``read`` refuses it;
after ``rebuild`` it must still be refused, listed with the SHA-256 it was stored with,
and reported as corrupt — whether the old index is there to say what was recorded or
was lost too (then the sessions' own references say it).
"""

from __future__ import annotations

import json
from pathlib import Path

from .support import cli, cli_json, write_script


def _stored(tmp_path: Path, amos_home: Path) -> tuple[Path, dict, Path]:
    """One run whose read_file result is stored as evidence; returns (config, call row, record file)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("the quick brown fox\n" * 20)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"evidence": {"enabled": True}}))
    script = write_script(tmp_path, [{"tool_calls": [{"id": "r1", "name": "read_file",
                                                      "arguments": {"path": "notes.txt"}}]}, {"text": "read"}])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "read")
    assert code == 0, doc
    (call,) = doc["tool_calls"]
    record = next(amos_home.rglob(f"{call['evidence_id']}.json"))
    return cfg, call, record


def _flip_a_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    at = data.index(b"quick")
    data[at] ^= 0x01  # "quick" -> "puick": still valid JSON, a valid record
    path.write_bytes(bytes(data))


def _listed_sha(cfg: Path, evidence_id: str) -> str:
    code, page = cli_json("evidence", "list", "--config", str(cfg))
    assert code == 0, page
    (entry,) = [e for e in page["entries"] if e["id"] == evidence_id]
    return entry["sha256"]


def test_rebuild_keeps_a_tampered_record_corrupt(tmp_path, amos_home):
    cfg, call, record = _stored(tmp_path, amos_home)
    recorded = _listed_sha(cfg, call["evidence_id"])
    _flip_a_bit(record)
    assert cli("evidence", "read", call["evidence_id"], "--config", str(cfg)).exit_code != 0

    rebuilt = cli("evidence", "rebuild", "--config", str(cfg), "--json")
    report = json.loads(rebuilt.stdout)
    assert report["corrupt"] == [call["evidence_id"]], report
    assert rebuilt.exit_code == 1  # the index is rebuilt, but the store is not intact
    assert _listed_sha(cfg, call["evidence_id"]) == recorded  # still the hash it was stored with
    read = cli("evidence", "read", call["evidence_id"], "--config", str(cfg))
    assert read.exit_code != 0 and "SHA-256" in read.stderr and "puick" not in read.stdout
    assert record.exists()  # kept, never deleted
    text = cli("evidence", "rebuild", "--config", str(cfg))
    assert text.exit_code == 1 and "1 corrupt" in text.stdout + text.stderr and call["evidence_id"] in text.stdout


def test_rebuild_after_a_lost_index_checks_the_hashes_the_sessions_recorded(tmp_path, amos_home):
    cfg, call, record = _stored(tmp_path, amos_home)
    recorded = _listed_sha(cfg, call["evidence_id"])
    _flip_a_bit(record)
    next(amos_home.rglob("index.jsonl")).unlink()

    rebuilt = cli("evidence", "rebuild", "--config", str(cfg), "--json")
    report = json.loads(rebuilt.stdout)
    assert report["corrupt"] == [call["evidence_id"]] and rebuilt.exit_code == 1, report
    assert _listed_sha(cfg, call["evidence_id"]) == recorded
    assert cli("evidence", "read", call["evidence_id"], "--config", str(cfg)).exit_code != 0


def test_an_intact_store_rebuilds_cleanly(tmp_path, amos_home):
    cfg, call, _ = _stored(tmp_path, amos_home)
    next(amos_home.rglob("index.jsonl")).unlink()
    code, report = cli_json("evidence", "rebuild", "--config", str(cfg))
    assert code == 0 and report == {"indexed": 1, "skipped": [], "corrupt": []}, report
    assert cli("evidence", "read", call["evidence_id"], "--config", str(cfg)).exit_code == 0
