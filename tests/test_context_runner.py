"""The context window through the real runner and CLI (issue "Context window", "What it
must show"): automatic compaction in a 60-step session, ``/compact``, flat per-step input
with evidence projection, usage and cost in ``--json``, ``sessions list`` and ``/context``.

Model-facing requests are observed by wrapping the scripted provider object's ``stream``
on the real runner (the wrapper records the request, then delegates).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from amos.context import measure_request
from amos.events import Notice
from amos.messages import Message, Usage
from amos.pricing import cost_usd
from tests.support import cli, cli_json, collect, finished, make_runner, write_script
from tests.test_provider_openai_cli import USAGE, openai_tool_turn, text_turn
from tests.wire_server import WireServer

_spec = importlib.util.spec_from_file_location(
    "context_steps", Path(__file__).resolve().parent.parent / "benchmarks" / "context_steps.py")
assert _spec is not None and _spec.loader is not None
steps_bench = importlib.util.module_from_spec(_spec)
sys.modules["context_steps"] = steps_bench
_spec.loader.exec_module(steps_bench)

FAKE_KEY = "sk-amos-fake-context-0123456789"


@dataclass
class Seen:
    """One model-facing request, as the provider received it."""

    purpose: str
    system: str
    messages: tuple[Message, ...]
    view: str
    tokens: int


def observe(runner: Any) -> list[Seen]:
    """Record every request the runner sends to its provider (then delegate to it)."""
    seen: list[Seen] = []
    original = runner.provider.stream

    def stream(request):
        budget = measure_request(request.system, "", request.tools, request.messages, runner.estimator)
        view = runner.tasks.view() if runner.tasks is not None else ""
        seen.append(Seen(request.purpose, request.system, request.messages, view, budget.total))
        return original(request)

    runner.provider.stream = stream
    return seen


@dataclass
class Observed:
    runner: Any
    seen: list[Seen]
    events: list
    turn_tokens: list[int]
    journal: list[dict] = field(default_factory=list)


@pytest.fixture(scope="module")
def projected(tmp_path_factory):
    """The 60-step session of benchmarks/context_steps.py with evidence projection on."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AMOS_HOME", str(tmp_path_factory.mktemp("context_home")))
        runner = steps_bench.open_session(tmp_path_factory.mktemp("context_on"), projection=True)
        try:
            seen = observe(runner)
            events = collect(runner, "Read every file, one per step.")
            journal_path = runner.store.journal_path(runner.session_id)
            journal = [json.loads(line) for line in journal_path.read_text().splitlines()]
            yield Observed(runner, seen, events, steps_bench.turn_input_tokens(runner.session), journal)
        finally:
            runner.close()


def test_long_session_compacts_before_the_window_and_keeps_what_must_survive(projected):
    runner, seen, events = projected.runner, projected.seen, projected.events
    window = steps_bench.WINDOW
    receipt = finished(events).receipt
    assert (receipt.cause, receipt.reason) == ("answer", "answer_returned") and receipt.steps == 60
    turns = [s for s in seen if s.purpose == "turn"]
    summaries = [s for s in seen if s.purpose == "summary"]
    notices = [e.text for e in events if isinstance(e, Notice) and e.text.startswith("context: compacted")]
    assert len(turns) == 60 and summaries and len(notices) == len(summaries)
    # the model-facing request never exceeds the window (same estimator the runner budgets with)
    assert max(s.tokens for s in seen) <= window
    assert max(s.tokens for s in turns) > window * 0.7  # the run did come close to it
    # the task view, with the host note, is in the instructions of every turn, byte for byte
    for s in turns:
        assert s.view in s.system and steps_bench.HOST_NOTE in s.view
    # the big result failed to store: raw, protected, and in every request after it
    big = [p for m in runner.session.messages for p in m.tool_results if p.call_id == "r05"]
    assert len(big) == 1 and big[0].protected and not big[0].projected
    assert "too_large" in big[0].evidence_error
    assert big[0].content.endswith(steps_bench.big_text())  # the whole file, uncut
    for index, s in enumerate(turns[steps_bench.BIG_STEP:], start=steps_bench.BIG_STEP):
        assert any(p == big[0] for m in s.messages for p in m.tool_results), f"turn {index + 1} lost it"
    # the other large results were stored and projected
    r01 = [p for s in turns[1:2] for m in s.messages for p in m.tool_results if p.call_id == "r01"][0]
    assert r01.projected and r01.evidence_id and "projected result" in r01.content
    # the current run's prompt stays
    assert all(any(m.text == "Read every file, one per step." for m in s.messages) for s in turns)


def test_replaced_history_is_kept_as_evidence_and_in_a_checkpoint(projected):
    runner = projected.runner
    compactions = [e for e in projected.journal if e["kind"] == "messages" and e.get("compaction")]
    notices = [e for e in projected.events if isinstance(e, Notice) and e.text.startswith("context: compacted")]
    assert len(compactions) == len(notices) >= 1
    first = compactions[0]
    evidence_id, number = first["compaction"]["evidence_id"], first["compaction"]["checkpoint"]
    assert evidence_id and number
    # during the run the summary follows the run's prompt (kept) where the replaced turns were
    assert Message.model_validate(first["messages"][0]).kind == "prompt"
    summary = next(Message.model_validate(m) for m in first["messages"] if m.get("kind") == "summary")
    assert summary.kind == "summary" and evidence_id in summary.text and f"checkpoint {number}" in summary.text
    # the checkpoint taken just before holds the uncompacted history
    infos = {c.number: c for c in runner.list_checkpoints()}
    assert infos[number].reason == "before_compaction"
    before = runner.store.checkpoints_of(runner.session_id).read(number)["messages"]
    replaced = [m for m in before if m not in first["messages"]]
    assert len(replaced) == first["compaction"]["replaced"] and len(replaced) > 4
    # the evidence record holds exactly the replaced messages
    chunk = runner.evidence_chunk(evidence_id, 0, 10_000_000)
    assert chunk.next_offset is None
    record = json.loads(chunk.text)
    assert record["tool"] == "__context_source__"
    assert record["result"]["messages"] == replaced
    assert any(p.get("call_id") == "r01" for m in replaced for p in m["parts"])
    # restoring the checkpoint brings back the uncompacted history
    restored = runner.restore_checkpoint(number)
    assert [m.model_dump(mode="json") for m in restored.messages] == before
    assert [m.model_dump(mode="json") for m in runner.store.load(runner.session_id).messages] == before


def test_projection_keeps_per_step_input_flat(projected, tmp_path):
    on = projected.turn_tokens
    runner = steps_bench.open_session(tmp_path / "off", projection=False)
    try:
        events = collect(runner, "Read every file, one per step.")
        off = steps_bench.turn_input_tokens(runner.session)
    finally:
        runner.close()
    assert finished(events).receipt.cause == "answer"
    assert len(on) == len(off) == 60
    f_on, f_off = steps_bench.figures(on), steps_bench.figures(off)
    assert f_on["max_10_on"] <= 1.5 * f_on["median_10_on"]  # a flat band
    # unprojected, each large result adds its whole size until compaction replaces it
    assert f_off["growth"] >= 2000 and f_off["growth"] >= 4 * f_on["growth"]
    assert steps_bench.compactions(events) > steps_bench.compactions(projected.events)
    rises = sum(1 for a, b in zip(off, off[1:], strict=False) if b - a >= 2000)
    assert rises >= 30


def test_a_failed_compaction_is_not_retried_before_every_request(tmp_path):
    # records up to 16,000 bytes: each ~11 KB file is stored, but not the big file, nor
    # the replaced history of a compaction (so every compaction fails after its summary call)
    runner = steps_bench.open_session(tmp_path, projection=True, max_record_bytes=16_000)
    try:
        seen = observe(runner)
        events = collect(runner, "Read every file, one per step.")
        history = list(runner.session.messages)
    finally:
        runner.close()
    receipt = finished(events).receipt
    assert (receipt.cause, receipt.reason) == ("provider_error", "context_length")
    assert "compaction failed" in receipt.detail and "could not be kept" in receipt.detail
    assert "r05" in receipt.detail  # what takes the room
    # one summary call when compaction first failed, one last try before stopping
    assert [s.purpose for s in seen].count("summary") == 2
    assert max(s.tokens for s in seen) <= steps_bench.WINDOW
    warnings = [e.text for e in events if isinstance(e, Notice) and "could not be kept" in e.text]
    assert len(warnings) == 1
    assert not any(m.kind == "summary" for m in history)  # the history was never changed


# ---------------------------------------------------------------------- /compact


def scripted_session(tmp_path: Path, turns: list[dict], config: dict | None = None,
                     files: dict[str, str] | None = None) -> tuple[str, Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        (ws / name).write_text(text)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(config or {}))
    script = write_script(tmp_path, turns)
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), "start")
    assert code == 0, doc
    return doc["session_id"], cfg, ws


def saved_messages(amos_home: Path, session_id: str) -> str:
    data = json.loads(next(amos_home.rglob(f"{session_id}/session.json")).read_text())
    return json.dumps(data["messages"], sort_keys=True)


def test_compact_on_a_short_session_has_nothing_to_compact(tmp_path, amos_home):
    sid, cfg, _ = scripted_session(tmp_path, [{"text": "hello"}])
    before = saved_messages(amos_home, sid)
    code, doc = cli_json("run", "--session", sid, "--config", str(cfg), "/compact")
    assert code == 0
    assert doc["session_id"] == sid and doc["command"] == "/compact" and doc["ok"] is True and doc["error"] is None
    result = doc["result"]
    assert result["compacted"] is False and result["failed"] is False and result["replaced"] == 0
    assert result["message"].startswith("nothing to compact")
    assert set(result) == {"compacted", "message", "replaced", "before_tokens", "after_tokens", "evidence_id",
                           "checkpoint", "usage", "failed"}
    plain = cli("run", "--session", sid, "--config", str(cfg), "/compact")
    assert plain.exit_code == 0 and "nothing to compact" in plain.stdout
    assert saved_messages(amos_home, sid) == before


PROTECTED_CONFIG = {"evidence": {"enabled": True, "max_record_bytes": 200},  # no record fits: all protected
                    "task_state": {"enabled": True}, "context": {"window_tokens": 30000, "keep_recent_turns": 2}}
READS = [{"tool_calls": [{"id": f"r{n}", "name": "read_file", "arguments": {"path": f"{n}.txt"}}]} for n in "abc"]


def test_compact_leaves_only_protected_old_content_unchanged_and_says_why(tmp_path, amos_home):
    files = {f"{n}.txt": f"content of {n}\n" for n in "abc"}
    sid, cfg, _ = scripted_session(tmp_path, [*READS, {"text": "done"}], PROTECTED_CONFIG, files)
    before = saved_messages(amos_home, sid)
    assert before.count('"evidence_error"') >= 3 and "too_large" in before
    code, doc = cli_json("run", "--session", sid, "--config", str(cfg), "/compact")
    assert code == 0, doc
    result = doc["result"]
    assert result["compacted"] is False and result["failed"] is False
    assert "protected" in result["message"] and "not acknowledged" in result["message"]
    assert "unchanged" in result["message"]
    assert saved_messages(amos_home, sid) == before


def test_context_overview_shows_parts_window_and_usage(tmp_path, amos_home):
    files = {f"{n}.txt": f"content of {n}\n" for n in "abc"}
    sid, cfg, _ = scripted_session(tmp_path, [*READS, {"text": "done"}], PROTECTED_CONFIG, files)
    code, doc = cli_json("run", "--session", sid, "--config", str(cfg), "/context")
    assert code == 0, doc
    ctx = doc["result"]["context"]
    assert (ctx["window_tokens"], ctx["window_source"]) == (30000, "config")
    parts = ctx["parts"]
    assert set(parts) == {"system", "task_view", "tools", "history", "protected"}
    assert all(parts[name] > 0 for name in parts)
    assert parts["protected"] <= parts["history"]
    assert ctx["estimated_tokens"] == parts["system"] + parts["task_view"] + parts["tools"] + parts["history"]
    assert ctx["compact_at_tokens"] == 24000
    usage = doc["result"]["usage"]
    assert usage["model_calls"] == 4 and usage["input_tokens"] > 0 and usage["cost_usd"] is None
    plain = cli("run", "--session", sid, "--config", str(cfg), "/context")
    assert "window from config" in plain.stdout and "protected ~" in plain.stdout
    assert "cost unknown for this model" in plain.stdout
    # no configured window and no table entry for a scripted model: the default
    sid2, cfg2, _ = scripted_session(tmp_path / "other", [{"text": "hi"}])
    code, doc = cli_json("run", "--session", sid2, "--config", str(cfg2), "/context")
    assert (doc["result"]["context"]["window_tokens"], doc["result"]["context"]["window_source"]) == (
        32000, "default")


def test_compact_instructions_reach_the_summary_request(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    for n in "abcd":
        (ws / f"{n}.txt").write_text(f"text of {n}\n")
    turns = [{"tool_calls": [{"id": f"r{n}", "name": "read_file", "arguments": {"path": f"{n}.txt"}}]} for n in "abcd"]
    script = write_script(tmp_path, [*turns, {"text": "done"}], summaries=["Read a, b, c and d."])
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"context": {"keep_recent_turns": 1}}))
    runner, _ = make_runner(script, ws, config_path=cfg)
    try:
        collect(runner, "read the files")
        seen = observe(runner)
        before = list(runner.session.messages)
        outcome = asyncio.run(runner.compact("Keep the file names exact."))
        assert outcome.compacted, outcome.message
        assert [s.purpose for s in seen] == ["summary"]
        assert seen[0].system.endswith("The user adds: Keep the file names exact.")
        assert seen[0].messages[-1].kind == "feedback"
        summary = runner.session.messages[0]
        assert summary.kind == "summary" and summary.text.endswith("Read a, b, c and d.")
        assert runner.session.messages[1:] == before[-1:]  # the one kept recent turn
        assert outcome.checkpoint and outcome.evidence_id is None
        assert runner.session.model_calls[-1]["purpose"] == "summary"
        assert runner.session.usage.model_calls == 6  # five turns and the summary call
    finally:
        runner.close()


# ---------------------------------------------------------------------- wire: cost and a failing summary


def openai_session(server: WireServer, workspace: Path, config: Path | None = None) -> dict:
    args = ["run", "--model", "openai:gpt-4o-mini", "--base-url", f"{server.url}/v1", "--workspace", str(workspace)]
    if config is not None:
        args += ["--config", str(config)]
    code, doc = cli_json(*args, "What is in a.txt?")
    assert code == 0, doc
    return doc


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha line\nbeta line\n")
    (ws / "b.md").write_text("# b\n")
    return ws


def test_json_cost_for_a_priced_model_and_null_for_scripted(monkeypatch, workspace, tmp_path, amos_home):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with WireServer() as server:
        server.reply(200, text_turn("It holds two lines.", USAGE), sse=True)
        doc = openai_session(server, workspace)
    expected = cost_usd("openai:gpt-4o-mini", Usage(input_tokens=300, output_tokens=40, cached_tokens=128,
                                                     model_calls=1))
    assert expected is not None and expected > 0
    assert doc["usage"]["cost_usd"] == expected
    priced = doc["session_id"]
    script = write_script(tmp_path, [{"text": "hi"}])
    code, scripted = cli_json("run", "--script", str(script), "--workspace", str(workspace), "hello")
    assert code == 0 and "cost_usd" in scripted["usage"] and scripted["usage"]["cost_usd"] is None
    code, listed = cli_json("sessions", "list")
    rows = {row["id"]: row for row in listed["sessions"]}
    assert rows[priced]["cost_usd"] == expected
    assert rows[scripted["session_id"]]["cost_usd"] is None
    # /context on the priced session: the model table's window and the same cost
    with WireServer() as server:
        code, ctx = cli_json("run", "--session", priced, "--base-url", f"{server.url}/v1", "/context")
    assert code == 0, ctx
    assert (ctx["result"]["context"]["window_tokens"], ctx["result"]["context"]["window_source"]) == (
        128000, "model table")
    assert ctx["result"]["usage"]["cost_usd"] == expected


SUMMARY_FAILURES = {
    "http_400": (400, {"error": {"message": "the summary request was refused", "type": "invalid_request_error",
                                 "param": None, "code": None}}, False),
    "unreadable_stream": (200, b'data: {"choices": "not a list"}\n\ndata: [DONE]\n\n', True),
}


@pytest.mark.parametrize("failure", sorted(SUMMARY_FAILURES))
def test_failing_summary_call_leaves_history_unchanged(failure, monkeypatch, workspace, tmp_path, amos_home):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"context": {"keep_recent_turns": 1}}))
    with WireServer() as server:
        server.reply(200, openai_tool_turn(), sse=True)
        server.reply(200, text_turn("a.txt holds two lines.", USAGE), sse=True)
        sid = openai_session(server, workspace, cfg)["session_id"]
    before = saved_messages(amos_home, sid)
    checkpoints = len(list(amos_home.rglob(f"{sid}/checkpoints/*.json")))
    status, body, sse = SUMMARY_FAILURES[failure]
    with WireServer() as server:
        server.reply(status, body, sse=sse)
        code, doc = cli_json("run", "--session", sid, "--config", str(cfg), "--base-url", f"{server.url}/v1",
                             "/compact Keep the file names exact.")
        requests = [r.json for r in server.requests]
    assert code == 1 and doc["ok"] is False and doc["error"]["code"] == "COMPACTION_FAILED"
    assert "summary call failed" in doc["error"]["message"] and "unchanged" in doc["error"]["message"]
    assert doc["result"]["failed"] is True and doc["result"]["compacted"] is False
    # the instructions reached the wire, in the system message of the summary request
    assert len(requests) == 1 and not requests[0].get("tools")
    assert "The user adds: Keep the file names exact." in requests[0]["messages"][0]["content"]
    assert saved_messages(amos_home, sid) == before
    assert len(list(amos_home.rglob(f"{sid}/checkpoints/*.json"))) == checkpoints
