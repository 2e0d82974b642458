"""Hostile MCP servers (tests/mcp_servers/hostile.py): each gives one notice or an error
outcome; nothing hangs, no process outlives amos, no traceback (issue 18)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .mcp_support import alive, call, hostile, make_hub, manager, processes_with, wait_gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process checks read /proc")


async def test_server_exiting_at_start_is_one_notice_and_the_others_go_on(tmp_path):
    hub = make_hub({"dead": hostile("exit", tmp_path), "fine": hostile("ok", tmp_path),
                    "missing": {"command": "no-such-mcp-server-here"}}, tmp_path)
    tools = await hub.tools()
    assert [t.name for t in tools] == ["mcp__fine__poke"]
    notices = hub.take_notices()
    assert len(notices) == 2
    assert notices[1].startswith("MCP server missing failed to start: command 'no-such-mcp-server-here' "
                                 "not found or not executable on PATH")
    notice = notices[0]
    assert notice.startswith("MCP server dead failed to start: it exited")
    assert "hostile.py exit" in notice  # the command
    assert "stderr: hostile: missing configuration, giving up" in notice
    assert str(tmp_path / "logs" / "mcp-dead.log") in notice
    assert "Traceback" not in notice and "\n" not in notice
    assert "giving up" in (tmp_path / "logs" / "mcp-dead.log").read_text()
    status = {s.name: s for s in hub.status()}
    assert status["dead"].text.startswith("failed: it exited") and status["fine"].text == "running"
    assert status["missing"].state == "failed"
    assert hub.take_notices() == []  # reported once
    await hub.tools()
    assert hub.take_notices() == []
    outcome = await call(manager(tools, tmp_path), "mcp__fine__poke", {"text": "hi"})
    assert outcome.status == "succeeded" and outcome.content == "poked: hi"
    await hub.close()
    assert processes_with(str(tmp_path)) == []


async def test_crash_mid_call_is_uncertain_and_restarts_once(tmp_path):
    hub = make_hub({"crashy": hostile("crash", tmp_path)}, tmp_path)
    m = manager(await hub.tools(), tmp_path)
    first = await call(m, "mcp__crashy__poke")
    assert (first.status, first.completion) == ("failed", "unknown")
    assert "whether the call had an effect is unknown" in first.error
    assert "hostile: crashing mid-call" in first.error and "restarts on the next call" in first.error
    assert hub.status()[0].will_restart
    second = await call(m, "mcp__crashy__poke")  # restarted, crashes again
    assert (second.status, second.completion) == ("failed", "unknown")
    assert "not restarted again" in second.error
    third = await call(m, "mcp__crashy__poke")  # never reached the server: the effect is known
    assert (third.status, third.completion) == ("failed", "complete")
    assert "is not running" in third.error and "already restarted once" in third.error
    assert any("restarting after" in n for n in hub.take_notices())
    await hub.close()
    assert processes_with(str(tmp_path)) == []


async def test_crash_once_then_the_restarted_server_answers(tmp_path):
    hub = make_hub({"flaky": hostile("crash_once", tmp_path, trust_annotations=True)}, tmp_path)
    m = manager(await hub.tools(), tmp_path)
    assert (await call(m, "mcp__flaky__poke")).status == "failed"
    again = await call(m, "mcp__flaky__poke", {"text": "again"})
    assert (again.status, again.content) == ("succeeded", "poked: again")
    assert hub.status()[0].state == "running"
    await hub.close()


async def test_server_that_never_answers_times_out(tmp_path):
    hub = make_hub({"stuck": hostile("hang", tmp_path, timeout_s=0.5)}, tmp_path)
    m = manager(await hub.tools(), tmp_path)
    started = time.monotonic()
    outcome = await call(m, "mcp__stuck__poke")
    assert time.monotonic() - started < 3
    assert (outcome.status, outcome.completion) == ("timed_out", "unknown")
    assert "did not answer the call to poke within 0.5 s" in outcome.error
    status = hub.status()[0]
    assert status.state == "failed" and status.will_restart
    await hub.close()
    assert wait_gone(processes_with(str(tmp_path))) == []


async def test_server_that_never_starts_hits_the_start_timeout(tmp_path):
    hub = make_hub({"mute": hostile("mute", tmp_path, start_timeout_s=0.5), "fine": hostile("ok", tmp_path)},
                   tmp_path)
    started = time.monotonic()
    assert [t.name for t in await hub.tools()] == ["mcp__fine__poke"]
    assert time.monotonic() - started < 3
    (notice,) = hub.take_notices()
    assert notice.startswith("MCP server mute failed to start: did not start within 0.5 s (start_timeout_s)")
    await hub.close()
    assert wait_gone(processes_with(str(tmp_path))) == []


async def test_server_gone_while_idle_is_restarted_before_the_call(tmp_path):
    hub = make_hub({"idle": hostile("idle_exit_once", tmp_path)}, tmp_path)
    m = manager(await hub.tools(), tmp_path)
    time.sleep(0.3)  # the server exits meanwhile
    await asyncio.sleep(0.1)  # and the SDK notices
    outcome = await call(m, "mcp__idle__poke", {"text": "still there?"})
    assert (outcome.status, outcome.content) == ("succeeded", "poked: still there?")
    assert any("restarting after: stopped or closed its connection while idle" in n for n in hub.take_notices())
    await hub.close()
    closed = await call(m, "mcp__idle__poke")
    assert closed.status == "failed" and "amos closed it" in closed.error
    assert processes_with(str(tmp_path)) == []


async def test_five_megabytes_are_capped_like_builtin_results(tmp_path):
    hub = make_hub({"big": hostile("big", tmp_path)}, tmp_path)
    m = manager(await hub.tools(), tmp_path, max_output_bytes=4096)
    outcome = await call(m, "mcp__big__poke")
    assert outcome.status == "succeeded"
    assert len(outcome.result) == 5 * 1024 * 1024  # the whole result, for evidence
    assert outcome.cut_bytes == 5 * 1024 * 1024 - 4096
    assert outcome.content.endswith("bytes cut; showing the first 4096 bytes …]")
    await hub.close()


async def test_invalid_schema_leaves_only_that_tool_out(tmp_path):
    hub = make_hub({"schemas": hostile("badschema", tmp_path)}, tmp_path)
    tools = await hub.tools()
    assert [t.name for t in tools] == ["mcp__schemas__poke"]
    notices = hub.take_notices()
    assert len(notices) == 1
    assert "tool 'broken' (mcp__schemas__broken) left out" in notices[0]
    assert "not valid JSON Schema" in notices[0] and "properties/when/type" in notices[0]
    entry = next(e for e in hub.tool_entries() if e.tool == "broken")
    assert not entry.included and "not valid JSON Schema" in entry.note
    await hub.close()


async def test_garbage_on_stdout_is_ignored_with_one_notice(tmp_path, capfd):
    hub = make_hub({"noisy": hostile("garbage", tmp_path)}, tmp_path)
    m = manager(await hub.tools(), tmp_path)
    for _ in range(2):
        outcome = await call(m, "mcp__noisy__poke", {"text": "x"})
        assert (outcome.status, outcome.content) == ("succeeded", "poked: x")
    notices = hub.take_notices()
    assert len(notices) == 1 and "printed text that is not MCP on stdout" in notices[0]
    await hub.close()
    assert "Traceback" not in capfd.readouterr().err
    assert "Failed to parse JSONRPC message" in (tmp_path / "logs" / "mcp-noisy.log").read_text()


async def test_tool_names_colliding_across_servers_keep_the_first(tmp_path):
    hub = make_hub({"a__b": hostile("ok", tmp_path), "a": hostile("ok", tmp_path, env={"HOSTILE_TOOL": "b__poke"})},
                   tmp_path)
    tools = await hub.tools()
    assert [t.name for t in tools] == ["mcp__a__b__poke"]
    manager(tools, tmp_path)  # a ToolManager accepts them (it refuses two tools of one name)
    (notice,) = hub.take_notices()
    assert notice == ("MCP server a: tool mcp__a__b__poke left out: "
                      "MCP server a__b has a tool of the same name")
    await hub.close()


async def test_is_error_result_is_a_failed_outcome(tmp_path):
    hub = make_hub({"sad": hostile("error", tmp_path)}, tmp_path)
    outcome = await call(manager(await hub.tools(), tmp_path), "mcp__sad__poke")
    assert (outcome.status, outcome.completion) == ("failed", "complete")
    assert outcome.error == "mcp__sad__poke reported an error: the poke went wrong"
    await hub.close()


async def test_stdio_server_gets_a_minimal_environment_and_never_provider_keys(tmp_path):
    environ = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8",
               "OPENAI_API_KEY": "sk-must-not-leak", "AWS_SECRET_ACCESS_KEY": "nope-nope", "RANDOM_VAR": "x"}
    server = hostile("env", tmp_path, env={"SERVER_TOKEN": "tok-${UPSTREAM}", "PLAIN": "${MISSING:-fallback}"})
    hub = make_hub({"envy": server}, tmp_path, environ={**environ, "UPSTREAM": "abcdef123456"})
    outcome = await call(manager(await hub.tools(), tmp_path), "mcp__envy__poke")
    seen = json.loads(outcome.result)
    assert seen["SERVER_TOKEN"] == "tok-abcdef123456" and seen["PLAIN"] == "fallback"
    assert seen["HOME"] == str(tmp_path) and seen["LANG"] == "C.UTF-8"
    for leaked in ("OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "RANDOM_VAR", "UPSTREAM"):
        assert leaked not in seen
    assert "sk-must-not-leak" not in outcome.content
    assert "tok-abcdef123456" in hub.secret_values()
    await hub.close()


async def test_close_stops_every_server_and_what_it_started(tmp_path):
    hub = make_hub({"parent": hostile("spawn", tmp_path), "plain": hostile("ok", tmp_path)}, tmp_path)
    await hub.tools()
    server_pid, child_pid = map(int, (tmp_path / "pids").read_text().split())
    assert processes_with(str(tmp_path))
    await hub.close()
    assert wait_gone([server_pid, child_pid]) == []
    assert processes_with(str(tmp_path)) == []


PARENT = """
import asyncio, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from mcp_support import hostile, make_hub
async def main():
    state = Path(sys.argv[1])
    hub = make_hub({{"spawn": hostile("spawn", state)}}, state)
    await hub.tools()
    print("ready", flush=True)
    await asyncio.sleep(600)
asyncio.run(main())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_stdio_servers_die_when_amos_is_killed(tmp_path):
    """SIGKILL of the amos process: its server and the server's own child die too."""
    script = tmp_path / "parent.py"
    script.write_text(PARENT.format(tests=str(Path(__file__).parent)))
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        server_pid, child_pid = map(int, (tmp_path / "pids").read_text().split())
        running = processes_with(str(tmp_path))
        assert server_pid in running and alive(child_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=5)
        assert wait_gone([server_pid, child_pid, *running]) == []
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
