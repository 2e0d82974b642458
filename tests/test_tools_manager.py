"""ToolManager: lookup, permissions, argument validation, outcomes, caps, timeouts."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from amos.messages import ToolCallPart
from amos.tools import (
    Tool,
    ToolArgs,
    ToolContext,
    ToolFailure,
    ToolManager,
    builtin_tools,
    cap_output,
)

BUILTIN_NAMES = ["read_file", "list_dir", "search_text", "write_file", "edit_file", "run_command"]


class NoArgs(ToolArgs):
    pass


class SizeArgs(ToolArgs):
    size: int = 10


def custom_tool(name: str, run: Any, *, effect: str = "read", **kwargs: Any) -> Tool:
    return Tool(
        name=name,
        description=f"test tool {name}",
        args_model=kwargs.pop("args_model", NoArgs),
        effect=effect,  # type: ignore[arg-type]
        run=run,
        **kwargs,
    )


async def _boom(args: NoArgs, ctx: ToolContext) -> None:
    raise ValueError("boom")


async def _refuse(args: NoArgs, ctx: ToolContext) -> None:
    raise ToolFailure("nothing to see in 'x'")


async def _slow(args: NoArgs, ctx: ToolContext) -> str:
    await asyncio.sleep(30)
    return "never"


async def _big(args: SizeArgs, ctx: ToolContext) -> str:
    return "é" * args.size


async def _odd(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
    return {"when": datetime(2024, 1, 2, tzinfo=UTC), "ok": False}


async def _own_timeout_error(args: NoArgs, ctx: ToolContext) -> None:
    raise TimeoutError("socket read timed out")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text("x = 1\n")
    return tmp_path.resolve()


@pytest.fixture
def manager(ws: Path) -> ToolManager:
    tools = [
        *builtin_tools(),
        custom_tool("boom", _boom),
        custom_tool("refuse", _refuse),
        custom_tool("slow_read", _slow),
        custom_tool("slow_write", _slow, effect="write"),
        custom_tool("big", _big, args_model=SizeArgs),
        custom_tool("odd", _odd),
        custom_tool("socket", _own_timeout_error),
    ]
    context = ToolContext(workspace=ws, command_timeout_s=0.3, max_output_bytes=100)
    return ToolManager(tools, permissions={"read_file": "ask", "boom": "deny"}, context=context)


def call(tool: str, arguments: Any = None, raw: str | None = None) -> ToolCallPart:
    return ToolCallPart(call_id="call-1", tool_name=tool, arguments=arguments, raw_arguments=raw)


def failure(manager: ToolManager, part: ToolCallPart) -> str:
    with pytest.raises(ToolFailure) as info:
        manager.validate(part)
    message = str(info.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------- lookup & permissions


def test_specs_names_and_lookup(ws: Path) -> None:
    manager = ToolManager(builtin_tools(), context=ToolContext(workspace=ws))
    assert manager.names() == BUILTIN_NAMES
    specs = {spec.name: spec for spec in manager.specs()}
    assert specs["read_file"].parameters["required"] == ["path"]
    assert set(specs["edit_file"].parameters["properties"]) == {
        "path",
        "old_text",
        "new_text",
        "replace_all",
    }
    assert set(specs["run_command"].parameters["properties"]) == {
        "command",
        "timeout_s",
    }
    sandboxed = {s.name: s for s in ToolManager(builtin_tools(sandboxed=True), context=manager.context).specs()}
    assert set(sandboxed["run_command"].parameters["properties"]) == {
        "command", "timeout_s",
        "sandbox",  # the model's request to run unsandboxed (issue 19)
        "justification",
    }
    assert manager.get("list_dir") is not None and manager.get("nope") is None


def test_effects_and_default_permissions(ws: Path) -> None:
    manager = ToolManager(builtin_tools(), context=ToolContext(workspace=ws))
    expected = {
        "read_file": ("read", "allow"),
        "list_dir": ("read", "allow"),
        "search_text": ("read", "allow"),
        "write_file": ("write", "ask"),
        "edit_file": ("write", "ask"),
        "run_command": ("unknown", "ask"),
    }
    for name, (effect, permission) in expected.items():
        assert manager.effect(name) == effect
        assert manager.permission(name) == permission
    assert manager.effect("nope") == "unknown"
    assert manager.permission("nope") == "deny"


def test_config_permissions_override_defaults(manager: ToolManager) -> None:
    assert manager.permission("read_file") == "ask"
    assert manager.permission("boom") == "deny"
    assert manager.permission("write_file") == "ask"


def test_construction_errors(ws: Path) -> None:
    context = ToolContext(workspace=ws)
    with pytest.raises(ValueError, match="two tools"):
        ToolManager([*builtin_tools(), *builtin_tools()], context=context)
    with pytest.raises(ValueError, match="accepted: allow, ask, deny"):
        ToolManager(builtin_tools(), permissions={"read_file": "maybe"}, context=context)  # type: ignore[dict-item]


# ---------------------------------------------------------------- validation


def test_unknown_tool_lists_available_tools(manager: ToolManager) -> None:
    message = failure(manager, call("delete_everything", {}))
    assert "unknown tool 'delete_everything'" in message
    assert "read_file, list_dir" in message


def test_missing_field_names_field_and_type(manager: ToolManager) -> None:
    message = failure(manager, call("write_file", {"path": "x.py"}))
    assert message.startswith("invalid arguments for write_file:")
    assert "missing required field 'content' (string)" in message


def test_extra_field_is_named(manager: ToolManager) -> None:
    message = failure(manager, call("read_file", {"path": "calc.py", "encoding": "utf-8"}))
    assert "unexpected field 'encoding'" in message
    assert "accepted fields: path" in message


def test_wrong_type_names_field_expected_type_and_value(manager: ToolManager) -> None:
    message = failure(manager, call("edit_file", {"path": "a", "old_text": 3, "new_text": "b"}))
    assert "field 'old_text' must be string" in message
    assert "got 3" in message
    message = failure(manager, call("read_file", {"path": "a", "limit": "many"}))
    assert "field 'limit' must be integer or null" in message


def test_invalid_raw_json_is_explained_with_a_prefix(manager: ToolManager) -> None:
    raw = '{"path": "x.py", "content": "' + "y" * 500
    message = failure(manager, call("write_file", None, raw))
    assert "arguments for write_file were not valid JSON" in message
    assert '{"path": "x.py"' in message
    assert "y" * 150 in message and "y" * 300 not in message


def test_arguments_must_be_an_object(manager: ToolManager) -> None:
    assert "must be a JSON object, got an array" in failure(manager, call("read_file", [1, 2]))
    assert "got a string" in failure(manager, call("read_file", "calc.py"))


def test_no_arguments_means_an_empty_object(manager: ToolManager) -> None:
    args = manager.validate(call("list_dir", None))
    assert args.model_dump() == {"path": ".", "depth": 1}


# ---------------------------------------------------------------- execute


async def test_success_outcome_fields(manager: ToolManager) -> None:
    outcome = await manager.execute(call("read_file", {"path": "calc.py"}), "exec-9")
    assert outcome.status == "succeeded" and outcome.completion == "complete"
    assert (outcome.call_id, outcome.execution_id, outcome.tool) == (
        "call-1",
        "exec-9",
        "read_file",
    )
    assert outcome.effect == "read"
    assert outcome.error is None and outcome.cut_bytes == 0
    assert outcome.result == outcome.content == "calc.py (lines 1-1 of 1)\nx = 1\n"
    started = datetime.fromisoformat(outcome.started_at)
    assert started.utcoffset() is not None and started.utcoffset().total_seconds() == 0
    assert 0 <= outcome.duration_s < 5


async def test_invalid_call_is_a_failed_outcome(manager: ToolManager) -> None:
    outcome = await manager.execute(call("nope", {}), "e")
    assert outcome.status == "failed"
    assert outcome.effect == "unknown"
    assert outcome.error.startswith("unknown tool 'nope'; available tools: read_file")
    assert outcome.error.endswith("socket")  # the full message, while the model's view is capped
    assert outcome.content.startswith(outcome.error[:90]) and outcome.cut_bytes > 0
    raw = await manager.execute(call("write_file", None, '{"path": '), "e")
    assert raw.status == "failed" and "not valid JSON" in raw.content


async def test_tool_failure_and_unexpected_exception(manager: ToolManager) -> None:
    refused = await manager.execute(call("refuse"), "e")
    assert refused.status == "failed" and refused.error == "nothing to see in 'x'"
    crashed = await manager.execute(call("boom"), "e")
    assert crashed.status == "failed" and crashed.error == "ValueError: boom"
    assert crashed.result is None
    own_timeout = await manager.execute(call("socket"), "e")
    assert own_timeout.status == "failed"
    assert own_timeout.error == "TimeoutError: socket read timed out"


async def test_timeout_completion_depends_on_effect(manager: ToolManager) -> None:
    read, write = await asyncio.gather(
        manager.execute(call("slow_read"), "e"), manager.execute(call("slow_write"), "e")
    )
    assert read.status == write.status == "timed_out"
    assert read.completion == "complete"
    assert write.completion == "unknown"
    assert "did not finish within 0.3 s" in write.error


async def test_output_cap_cuts_on_character_boundary_with_marker(manager: ToolManager) -> None:
    outcome = await manager.execute(call("big", {"size": 300}), "e")  # 600 bytes of 'é'
    assert outcome.status == "succeeded"
    assert outcome.result == "é" * 300  # the full result is kept
    head, marker = outcome.content.rsplit("\n", 1)
    assert head == "é" * 50
    assert marker == "[… 500 bytes cut; showing the first 100 bytes …]"
    assert outcome.cut_bytes == 500
    small = await manager.execute(call("big", {"size": 10}), "e")
    assert small.cut_bytes == 0 and small.content == "é" * 10


def test_cap_output_odd_boundary() -> None:
    content, cut = cap_output("aé" * 10, 4)  # 'a','é'(2),'a' = 4 bytes
    assert content.startswith("aéa\n[… ")
    assert cut == 30 - 4
    assert cap_output("short", 0) == ("short", 0)


async def test_non_json_result_is_made_serializable(manager: ToolManager) -> None:
    outcome = await manager.execute(call("odd"), "e")
    assert outcome.status == "succeeded"
    assert outcome.result == {"when": "2024-01-02 00:00:00+00:00", "ok": False}
    json.loads(outcome.model_dump_json())


async def test_cancellation_propagates(manager: ToolManager) -> None:
    task = asyncio.create_task(manager.execute(call("slow_write"), "e"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_concurrent_reads(manager: ToolManager, ws: Path) -> None:
    for i in range(8):
        (ws / f"f{i}.txt").write_text(f"file {i}\n")
    outcomes = await asyncio.gather(
        *(manager.execute(call("read_file", {"path": f"f{i}.txt"}), "e") for i in range(8))
    )
    assert [o.status for o in outcomes] == ["succeeded"] * 8
    assert [o.content.splitlines()[1] for o in outcomes] == [f"file {i}" for i in range(8)]


def test_outcome_for_not_executed_calls(manager: ToolManager) -> None:
    for status in ("denied", "blocked", "cancelled", "not_started"):
        outcome = manager.outcome_for(
            call("write_file", {"path": "x"}), "e", status, f"{status} by test"
        )
        assert outcome.status == status
        assert outcome.completion == "complete"
        assert outcome.content == outcome.error == f"{status} by test"
        assert outcome.effect == "write" and outcome.result is None
    unsure = manager.outcome_for(
        call("run_command"), "e", "cancelled", "stopped", completion="unknown"
    )
    assert unsure.completion == "unknown"


# ---------------------------------------------------------------- summaries


def test_summaries_are_short_single_lines(manager: ToolManager) -> None:
    assert manager.summarize(call("read_file", {"path": "calc.py"})) == "read_file calc.py"
    assert (
        manager.summarize(call("run_command", {"command": "python -m unittest"}))
        == "run_command python -m unittest"
    )
    long = manager.summarize(call("run_command", {"command": "echo " + "x" * 500 + "\nls"}))
    assert len(long) <= 100 and "\n" not in long and long.endswith("…")
    assert manager.summarize(call("search_text", {"pattern": "def "})) == "search_text /def /"
    assert manager.summarize(call("list_dir", None)) == "list_dir"


@pytest.mark.parametrize(
    "part",
    [
        call("read_file", {"path": 3}),
        call("read_file", [1]),
        call("write_file", None, "{oops"),
        call("nope", {"a": {"b": [1, 2]}}),
        call("x" * 300, {}),
    ],
)
def test_summarize_never_raises(manager: ToolManager, part: ToolCallPart) -> None:
    text = manager.summarize(part)
    assert isinstance(text, str) and 0 < len(text) <= 100


def test_import_has_no_ui_or_sdk_side_effects() -> None:
    code = (
        "import sys, amos.tools; "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('textual', 'openai', 'anthropic', 'google')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
