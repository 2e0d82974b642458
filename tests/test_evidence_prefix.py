"""Issue 21: evidence ids by a unique prefix, like git hashes — in `amos evidence read`,
`/context evidence read`, and the short ids the TUI shows.

Records come from real runs (three read_file calls of one step, so their UUIDv7 ids share
the same millisecond prefix, the hard case) through the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amos.evidence import EvidenceError, FileEvidenceStore
from amos.evidence.prefix import resolve_record_id, short_id
from tests.support import cli, cli_json, write_script


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"evidence": {"enabled": True}}))
    return path


@pytest.fixture
def recorded(tmp_path, amos_home):
    """``(config path, [evidence ids])`` of one run with three reads."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in "abc":
        (ws / f"{name}.txt").write_text(f"file {name}\n")
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": f"r{n}", "name": "read_file", "arguments": {"path": f"{n}.txt"}} for n in "abc"]},
        {"text": "read them"}])
    cfg = _config(tmp_path)
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "read")
    assert code == 0, doc
    ids = [call["evidence_id"] for call in doc["tool_calls"]]
    assert all(ids) and len(set(ids)) == 3
    return cfg, ids


def _common_prefix(ids: list[str]) -> str:
    import os

    return os.path.commonprefix(ids)


def test_evidence_read_takes_a_unique_prefix(recorded):
    cfg, ids = recorded
    target = ids[1]
    prefix = next(target[:n] for n in range(4, 37) if sum(i.startswith(target[:n]) for i in ids) == 1)
    for typed in (prefix, prefix.upper(), prefix.replace("-", "")):
        result = cli("evidence", "read", typed, "--config", str(cfg))
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["call_id"] == "rb"


def test_an_ambiguous_prefix_exits_2_listing_the_candidates(recorded):
    cfg, ids = recorded
    shared = _common_prefix(ids)
    assert len(shared.replace("-", "")) >= 4  # one step's records share their millisecond
    result = cli("evidence", "read", shared, "--config", str(cfg))
    assert result.exit_code == 2
    assert "matches 3 records" in result.stderr and all(i in result.stderr for i in ids)
    assert result.stdout == ""


def test_a_too_short_prefix_is_a_clear_error(recorded):
    cfg, ids = recorded
    result = cli("evidence", "read", ids[0][:3], "--config", str(cfg))
    assert result.exit_code == 2
    assert "too short: give at least 4 characters" in result.stderr
    result = cli("evidence", "read", "zzzz", "--config", str(cfg))
    assert result.exit_code == 2 and "not an evidence id" in result.stderr
    result = cli("evidence", "read", "ffff", "--config", str(cfg))
    assert result.exit_code == 1 and "no evidence id starts with 'ffff'" in result.stderr


def test_slash_evidence_read_takes_a_prefix_and_refuses_an_ambiguous_one(recorded, tmp_path):
    cfg, ids = recorded
    ws = tmp_path / "ws"
    short = next(ids[2][:n] for n in range(4, 37) if sum(i.startswith(ids[2][:n]) for i in ids) == 1)
    code, doc = cli_json("run", "--session", "latest", "--config", str(cfg), "--workspace", str(ws),
                         f"/context evidence read {short}")
    assert code == 0, doc
    assert json.loads(doc["result"]["text"])["call_id"] == "rc"
    code, doc = cli_json("run", "--session", "latest", "--config", str(cfg), "--workspace", str(ws),
                         f"/context evidence read {_common_prefix(ids)}")
    assert code == 2 and doc["error"]["code"] == "BAD_ARGUMENTS"
    assert all(i in doc["error"]["message"] for i in ids)
    for typed, expected in (("zzzz", 2), (ids[0][:3], 2), ("ffff", 1)):  # as `amos evidence read` exits
        code, doc = cli_json("run", "--session", "latest", "--config", str(cfg), "--workspace", str(ws),
                             f"/context evidence read {typed}")
        assert code == expected, (typed, doc)


def test_short_ids_are_the_shortest_unique_prefixes(recorded):
    from amos.engine import EvidenceIds, Library

    cfg, ids = recorded
    library, _ = Library.open(cfg)
    store = library.evidence()
    assert isinstance(store, FileEvidenceStore)
    names = EvidenceIds(store)
    for record_id in ids:
        shown = names.short(record_id)  # what the TUI shows: at least the id's whole millisecond
        assert record_id.startswith(shown) and len(shown.replace("-", "")) >= 12 and len(shown) < len(record_id)
        assert resolve_record_id(store, shown) == record_id
        shortest = short_id(store, record_id, min_hex=4)
        assert resolve_record_id(store, shortest) == record_id
        shorter = shortest[:-1].rstrip("-")
        if len(shorter.replace("-", "")) >= 4:  # one digit less is shared with another record
            with pytest.raises(EvidenceError) as info:
                resolve_record_id(store, shorter)
            assert info.value.code == "ambiguous" and info.value.exit_code == 2
    assert names.complete(_common_prefix(ids)) == ids
    assert names.complete(ids[0][:3]) == []
