"""The eleven cases of the stop-receipt article (seeds/stop-receipts-fr.txt), each through
the route the article names, on the real runner and CLI (issue 16 "What it must show").

Natural finish and the done tool, each with and without a receipt of the result; the
step cap; the token budget; a routed and an unrouted approval; a tool error; a timeout
without progress; a user abort.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from .support import cli_json, finished, make_runner, write_script


def _write(path: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": "{}"}}


def _config(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(data))
    return path


RECEIPT = {"files": [{"path": "report.json", "json_schema": {"type": "object"}}]}
"""The destination check: the report exists and is a JSON object."""

ALLOW_WRITES = {"tools": {"permissions": {"write_file": "allow"}}}

CASES = {
    "natural finish with a receipt": dict(
        turns=[{"tool_calls": [_write("report.json")]}, {"text": "the report is written"}],
        config={"loop_policy": {"max_recovery_attempts": 0, "completion": RECEIPT}, **ALLOW_WRITES},
        expect=("VERIFIED_COMPLETE", "answer", "completed")),
    "natural finish without a receipt": dict(
        turns=[{"text": "the report is written"}],
        config={"loop_policy": {"max_recovery_attempts": 0, "completion": RECEIPT}},
        expect=("FALSE_COMPLETE", "recovery_exhausted", "recovery_exhausted")),
    "done with a receipt": dict(
        turns=[{"tool_calls": [_write("report.json"), {"name": "done", "arguments": {"summary": "report written"}}]}],
        config={"loop_policy": {"max_recovery_attempts": 0, "completion": {**RECEIPT, "done_tool": "done"}},
                **ALLOW_WRITES},
        expect=("VERIFIED_COMPLETE", "answer", "completed")),
    "done without a receipt": dict(
        turns=[{"tool_calls": [{"name": "done", "arguments": {"summary": "report written"}}]}],
        config={"loop_policy": {"max_recovery_attempts": 0, "completion": {**RECEIPT, "done_tool": "done"}}},
        expect=("FALSE_COMPLETE", "recovery_exhausted", "recovery_exhausted")),
    "step cap": dict(
        turns=[{"tool_calls": [{"name": "list_dir", "arguments": {}}]}] * 3,
        config={"run": {"max_steps": 3}},
        expect=("BOUNDED_STOP", "step_limit", "iteration_limit")),
    "token budget": dict(
        turns=[{"usage": {"input_tokens": 600, "output_tokens": 10},
                "tool_calls": [{"name": "list_dir", "arguments": {}}]}] * 3,
        config={"run": {"token_budget": 1000}},
        expect=("BOUNDED_STOP", "token_budget", "token_budget")),
    "routed approval": dict(
        turns=[{"tool_calls": [_write("report.json")]}],
        config={"approvals": {"owner": "ops-team", "deadline_s": 3600}},
        expect=("WAITING", "approval_required", "approval_pending")),
    "unrouted approval": dict(
        turns=[{"tool_calls": [_write("report.json")]}],
        config={},
        expect=("WAITING_UNROUTED", "approval_required", "approval_pending")),
    "tool error": dict(
        turns=[{"tool_calls": [{"name": "read_file", "arguments": {"path": "missing.txt"}}]}, {"text": "never"}],
        config={"loop_policy": {"max_recovery_attempts": 0}},
        expect=("FAILED", "tool_error", "failure_budget")),
    "timeout without progress": dict(
        turns=[{"delay_ms": 3000, "text": "too late"}],
        config={"run": {"timeout_s": 0.5}},
        expect=("STUCK", "timeout", "timeout")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_case_gets_the_articles_verdict(tmp_path, case):
    spec = CASES[case]
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, spec["turns"])
    cfg = _config(tmp_path, spec["config"])
    code, doc = cli_json("run", "--script", str(script), "--workspace", str(ws), "--config", str(cfg), case)
    stop = doc["stop"]
    assert (stop["verdict"], stop["cause"], stop["reason"]) == spec["expect"], stop
    if "approval" in case:
        assert stop["approval"]["resume_token"].startswith(doc["session_id"] + ":")
        assert (stop["approval"]["owner"] is not None) == (case == "routed approval")
    if case.startswith("done"):
        assert stop["check"]["route"] == "done_tool"


def test_a_user_abort_is_a_bounded_stop(tmp_path):
    """The eleventh case: the person cancels (Ctrl+C, Esc Esc, SIGINT) while a tool runs."""
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path, [{"tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 10"}}]},
                                     {"text": "never"}])
    host, _ = make_runner(script, ws, yes=True, no_save=True)

    async def go():
        out = []
        async for event in host.run("long job"):
            out.append(event)
            if getattr(event, "event_kind", "") == "tool_call_started":
                asyncio.get_running_loop().call_later(0.2, host.cancel)
        return out

    try:
        done = finished(asyncio.run(asyncio.wait_for(go(), 20)))
    finally:
        host.close()
    receipt = done.receipt
    assert (receipt.verdict, receipt.cause, receipt.reason) == ("BOUNDED_STOP", "user_abort", "cancelled")
    assert done.tool_calls[0]["status"] == "cancelled"
