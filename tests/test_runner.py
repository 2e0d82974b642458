"""The real runner on the scripted provider: stop causes, verdicts, tools, sessions."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from amos.events import ApprovalRequested, Notice, TextDelta, ToolCallFinished
from amos.host import open_store

from .support import collect, finished, make_runner, write_script

PY = sys.executable


def tool_results(runner):
    return [p for m in runner.session.messages for p in m.tool_results]


def test_answer_without_check_is_answered_and_streams(tmp_path):
    script = write_script(tmp_path, [{"text": "hello there, friend"}])
    runner, _ = make_runner(script, tmp_path)
    try:
        events = collect(runner, "hi")
    finally:
        runner.close()
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 3 and "".join(deltas) == "hello there, friend"
    done = finished(events)
    assert done.receipt.verdict == "ANSWERED"
    assert (done.receipt.cause, done.receipt.reason) == ("answer", "answer_returned")
    assert done.loop.phase == "complete" and done.loop.status is None
    assert done.output_text == "hello there, friend"


def test_verify_pass_and_fail(tmp_path):
    script = write_script(tmp_path, [{"text": "done!"}], on_exhausted="repeat_last")
    runner, _ = make_runner(script, tmp_path, verify=f"{PY} -c 'import sys; sys.exit(1)'")
    try:
        done = finished(collect(runner, "do the work"))
    finally:
        runner.close()
    assert done.receipt.verdict == "FALSE_COMPLETE"
    assert done.receipt.reason == "check_failed"
    assert done.receipt.completion.complete is False
    assert done.loop.phase == "stopped"

    # The model does the work (creates the marker): failing → passing is verified.
    script = write_script(tmp_path, [{"tool_calls": [{"name": "run_command", "arguments": {"command": "touch marker"}}]},
                                     {"text": "done!"}], name="touch.json")
    runner, _ = make_runner(script, tmp_path, verify="test -f marker", yes=True)
    try:
        done = finished(collect(runner, "do the work"))
    finally:
        runner.close()
    assert done.receipt.verdict == "VERIFIED_COMPLETE"
    assert done.loop.status == "completed"


def test_tool_round_results_correlate_and_reads_outside_are_refused(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("TOP-SECRET-VALUE")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    (ws / "link.txt").symlink_to(outside)
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}},
            {"id": "r2", "name": "read_file", "arguments": {"path": "../secret.txt"}},
            {"id": "r3", "name": "read_file", "arguments": {"path": str(outside)}},
            {"id": "r4", "name": "read_file", "arguments": {"path": "link.txt"}},
        ]},
        {"expect": {"last_message_role": "tool"}, "text": "ok"},
    ])
    runner, _ = make_runner(script, ws)
    try:
        done = finished(collect(runner, "read"))
        saved = runner.session_path.read_text()
    finally:
        runner.close()
    results = {r.call_id: r for r in tool_results(runner)}
    assert results["r1"].status == "succeeded" and "alpha" in results["r1"].content
    for cid in ("r2", "r3", "r4"):
        assert results[cid].status == "failed" and results[cid].is_error
        assert "TOP-SECRET-VALUE" not in results[cid].content
    assert "TOP-SECRET-VALUE" not in saved
    assert done.receipt.verdict == "ANSWERED"
    assert [c["call_id"] for c in done.tool_calls] == ["r1", "r2", "r3", "r4"]


def test_invalid_arguments_become_a_tool_error_and_the_run_goes_on(tmp_path):
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "bad", "name": "write_file", "raw_arguments": "{\"path\": \"x.py\", "}]},
        {"tool_calls": [{"id": "bad2", "name": "read_file", "arguments": {"nope": 1}}]},
        {"tool_calls": [{"id": "bad3", "name": "no_such_tool", "arguments": {}}]},
        {"expect": {"last_tool_result_contains": "no_such_tool"}, "text": "I give up"},
    ])
    runner, _ = make_runner(script, tmp_path)
    try:
        events = collect(runner, "go")
    finally:
        runner.close()
    assert not any(isinstance(e, ApprovalRequested) for e in events)
    statuses = [r.status for r in tool_results(runner)]
    assert statuses == ["failed", "failed", "failed"]
    assert "JSON" in tool_results(runner)[0].content
    assert finished(events).receipt.verdict == "ANSWERED"
    assert not (tmp_path / "x.py").exists()


def test_step_limit_fires_after_that_steps_tools_ran(tmp_path):
    call = {"name": "list_dir", "arguments": {"path": "."}}
    script = write_script(tmp_path, [{"tool_calls": [call]}] * 5)
    runner, _ = make_runner(script, tmp_path, max_steps=3)
    try:
        done = finished(collect(runner, "loop"))
    finally:
        runner.close()
    r = done.receipt
    assert (r.verdict, r.cause, r.reason) == ("BOUNDED_STOP", "step_limit", "iteration_limit")
    assert r.steps == 3 and r.tool_call_count == 3
    assert r.stop_condition == {"max_steps": 3, "steps": 3}
    assert len(tool_results(runner)) == 3


def test_output_limit_never_runs_the_cut_calls(tmp_path):
    script = write_script(tmp_path, [
        {"text": "partial", "finish_reason": "length",
         "tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "f.txt", "content": "x"}}],
         "usage": {"input_tokens": 10, "output_tokens": 4000}},
    ])
    runner, _ = make_runner(script, tmp_path, yes=True)
    try:
        done = finished(collect(runner, "write"))
    finally:
        runner.close()
    assert (done.receipt.verdict, done.receipt.cause) == ("BOUNDED_STOP", "output_limit")
    assert not (tmp_path / "f.txt").exists()
    [result] = tool_results(runner)
    assert result.call_id == "w" and result.status == "not_started" and "output limit" in result.content
    assert done.receipt.usage.output_tokens == 4000


@pytest.mark.parametrize("turn,kind", [
    ({"error": {"kind": "rate_limit", "message": "slow down"}}, "rate_limit"),
    ({"error": {"kind": "auth", "message": "bad key"}}, "auth"),
    ({"expect": {"system_contains": "not in the prompt"}, "text": "x"}, "script_mismatch"),
])
def test_provider_errors_fail_the_run(tmp_path, turn, kind):
    script = write_script(tmp_path, [turn])
    runner, _ = make_runner(script, tmp_path)
    try:
        done = finished(collect(runner, "x"))
    finally:
        runner.close()
    assert (done.receipt.verdict, done.receipt.cause, done.receipt.reason) == ("FAILED", "provider_error", kind)


def test_script_exhausted_and_refusal(tmp_path):
    script = write_script(tmp_path, [{"text": "one"}])
    runner, _ = make_runner(script, tmp_path)
    try:
        assert finished(collect(runner, "a")).receipt.verdict == "ANSWERED"
        done = finished(collect(runner, "b"))
    finally:
        runner.close()
    assert done.receipt.reason == "script_exhausted" and done.receipt.verdict == "FAILED"

    script = write_script(tmp_path, [{"text": "no", "finish_reason": "content_filter"}], name="r.json")
    runner, _ = make_runner(script, tmp_path)
    try:
        done = finished(collect(runner, "a"))
    finally:
        runner.close()
    assert (done.receipt.verdict, done.receipt.cause, done.receipt.reason) == ("FAILED", "refusal", "content_filtered")


def test_token_budget(tmp_path, amos_home):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"run": {"token_budget": 100}}))
    call = {"name": "list_dir", "arguments": {}}
    script = write_script(tmp_path, [{"tool_calls": [call], "usage": {"input_tokens": 60, "output_tokens": 50}}] * 3)
    runner, _ = make_runner(script, tmp_path, config_path=cfg)
    try:
        done = finished(collect(runner, "x"))
    finally:
        runner.close()
    assert (done.receipt.verdict, done.receipt.cause) == ("BOUNDED_STOP", "token_budget")
    assert done.receipt.stop_condition == {"token_budget": 100, "total_tokens": 110}


def test_run_timeout_without_progress_is_stuck(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"run": {"timeout_s": 0.3}}))
    script = write_script(tmp_path, [{"delay_ms": 5000, "text": "late"}])
    runner, _ = make_runner(script, tmp_path, config_path=cfg)
    try:
        done = finished(collect(runner, "x"))
    finally:
        runner.close()
    assert (done.receipt.verdict, done.receipt.cause, done.receipt.reason) == ("STUCK", "timeout", "timeout")


def test_deny_permission_and_identical_denied_call_is_not_asked_twice(tmp_path):
    write = {"name": "write_file", "arguments": {"path": "f.txt", "content": "x"}}
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "w1", **write}]},
        {"tool_calls": [{"id": "w2", **write}]},
        {"text": "fine"},
    ])
    runner, _ = make_runner(script, tmp_path, interactive=True)
    asked: list[str] = []

    async def go():
        out = []
        async for event in runner.run("write"):
            out.append(event)
            if isinstance(event, ApprovalRequested):
                asked.append(event.call_id)
                runner.answer_approval(event.call_id, False, "not today")
        return out

    try:
        events = asyncio.run(go())
    finally:
        runner.close()
    assert asked == ["w1"]
    results = tool_results(runner)
    assert [r.status for r in results] == ["denied", "denied"]
    assert "not today" in results[0].content and "not today" in results[1].content
    assert "without asking" in results[1].content
    assert not (tmp_path / "f.txt").exists()
    assert finished(events).receipt.verdict == "ANSWERED"


def test_approval_pause_holds_later_calls_then_resume_runs_them_in_order(tmp_path, amos_home):
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"id": "r", "name": "list_dir", "arguments": {}},
            {"id": "w", "name": "write_file", "arguments": {"path": "out.txt", "content": "hello"}},
            {"id": "after", "name": "read_file", "arguments": {"path": "out.txt"}},
        ]},
        {"expect": {"last_tool_result_contains": "hello"}, "text": "written"},
    ])
    runner, _ = make_runner(script, tmp_path)
    try:
        done = finished(collect(runner, "write it"))
        session_id = runner.session_id
    finally:
        runner.close()
    r = done.receipt
    assert (r.verdict, r.cause, r.reason) == ("WAITING_UNROUTED", "approval_required", "approval_pending")
    assert r.approval.call_id == "w" and [p.call_id for p in r.pending_approvals] == ["w"]
    assert r.approval.resume_token == f"{session_id}:{r.execution_id}:w"
    assert done.loop.phase == "input-needed"
    assert not (tmp_path / "out.txt").exists()
    assert [c["call_id"] for c in done.tool_calls] == ["r"]

    # resuming without a decision stays WAITING and makes no model call
    runner, _ = make_runner(script, tmp_path, session=session_id)
    try:
        again = finished(collect(runner))
    finally:
        runner.close()
    assert again.receipt.verdict == "WAITING_UNROUTED" and again.receipt.steps == 1

    runner, _ = make_runner(script, tmp_path, session=session_id)
    try:
        resumed = finished(collect(runner, approve=["w"]))
    finally:
        runner.close()
    assert resumed.receipt.verdict == "ANSWERED"
    assert resumed.receipt.execution_id == r.execution_id
    assert resumed.receipt.steps == 2
    assert (tmp_path / "out.txt").read_text() == "hello"
    assert [c["call_id"] for c in resumed.tool_calls] == ["r", "w", "after"]
    assert runner.session.pending is None


def test_resume_refuses_a_call_that_is_not_pending(tmp_path):
    from amos.errors import SessionError

    script = write_script(tmp_path, [{"tool_calls": [{"id": "w", "name": "run_command",
                                                      "arguments": {"command": "true"}}]}])
    runner, _ = make_runner(script, tmp_path)
    try:
        collect(runner, "x")
        with pytest.raises(SessionError) as info:
            runner.resume(approve=["other"])
    finally:
        runner.close()
    assert info.value.code == "bad_decision"


def test_cancel_during_long_command_records_cancelled_results(tmp_path):
    script = write_script(tmp_path, [
        {"tool_calls": [{"id": "slow", "name": "run_command", "arguments": {"command": "sleep 30"}},
                        {"id": "next", "name": "read_file", "arguments": {"path": "x"}}]},
    ])
    runner, _ = make_runner(script, tmp_path, yes=True)

    async def go():
        out = []
        async for event in runner.run("x"):
            out.append(event)
            if getattr(event, "event_kind", "") == "tool_call_started":
                asyncio.get_running_loop().call_later(0.3, runner.cancel)
        return out

    try:
        events = asyncio.run(asyncio.wait_for(go(), 10))
    finally:
        runner.close()
    done = finished(events)
    assert (done.receipt.verdict, done.receipt.cause, done.receipt.reason) == ("BOUNDED_STOP", "user_abort", "cancelled")
    results = {r.call_id: r for r in tool_results(runner)}
    assert {k: r.status for k, r in results.items()} == {"slow": "cancelled", "next": "cancelled"}
    assert "while this call was running" in results["slow"].content
    assert "before this call started" in results["next"].content
    store = open_store(runner.config)
    assert len(store.load(runner.session_id).messages) == len(runner.session.messages)


def test_session_resume_carries_conversation_and_script_position(tmp_path):
    script = write_script(tmp_path, [
        {"text": "first answer"},
        {"expect": {"any_message_contains": "remember the word PAPAYA"}, "text": "second answer"},
    ])
    runner, _ = make_runner(script, tmp_path)
    try:
        collect(runner, "remember the word PAPAYA")
        session_id = runner.session_id
    finally:
        runner.close()
    runner, _ = make_runner(script, tmp_path, session=session_id)
    try:
        done = finished(collect(runner, "what was it?"))
    finally:
        runner.close()
    assert done.output_text == "second answer"
    roles = [m.role for m in runner.session.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert runner.session.host.workspace == str(tmp_path.resolve())


def test_project_instructions_reach_the_system_prompt(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Always answer in haiku.")
    script = write_script(tmp_path, [{"expect": {"system_contains": "Always answer in haiku."}, "text": "ok"}])
    runner, _ = make_runner(script, tmp_path)
    try:
        done = finished(collect(runner, "x"))
    finally:
        runner.close()
    assert done.receipt.verdict == "ANSWERED"


def test_failed_save_is_reported_not_swallowed(tmp_path, monkeypatch):
    from amos.errors import SessionError
    from amos.sessions import SessionStore

    def broken(self, session):
        raise SessionError("write_failed", "cannot save session: disk full", exit_code=1)

    script = write_script(tmp_path, [{"text": "ok"}])
    runner, _ = make_runner(script, tmp_path)
    monkeypatch.setattr(SessionStore, "save", broken)
    try:
        events = collect(runner, "x")
    finally:
        runner.close()
    assert any(isinstance(e, Notice) and e.level == "error" and "disk full" in e.text for e in events)
    assert finished(events).session_path is None


def test_parallel_reads_keep_call_order_and_writes_run_in_order(tmp_path):
    (tmp_path / "a.txt").write_text("A")
    script = write_script(tmp_path, [{"tool_calls": [
        {"id": "1", "name": "read_file", "arguments": {"path": "a.txt"}},
        {"id": "2", "name": "list_dir", "arguments": {}},
        {"id": "3", "name": "write_file", "arguments": {"path": "b.txt", "content": "B1"}},
        {"id": "4", "name": "edit_file", "arguments": {"path": "b.txt", "old_text": "B1", "new_text": "B2"}},
        {"id": "5", "name": "read_file", "arguments": {"path": "b.txt"}},
    ]}, {"text": "done"}])
    runner, _ = make_runner(script, tmp_path, yes=True)
    try:
        events = collect(runner, "x")
    finally:
        runner.close()
    finished_ids = [e.call_id for e in events if isinstance(e, ToolCallFinished)]
    assert finished_ids == ["1", "2", "3", "4", "5"]
    assert [r.call_id for r in tool_results(runner)] == ["1", "2", "3", "4", "5"]
    assert "B2" in tool_results(runner)[-1].content
