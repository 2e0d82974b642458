"""The slash-command line grammar and built-in commands against a real runner."""

from __future__ import annotations

import pytest

from amos.errors import SlashCommandError
from amos.slash import execute_line, parse_line
from amos.slash.parser import split_tokens

from .support import collect, make_runner, write_script


def test_prompt_command_and_escape():
    assert parse_line("hello /there").kind == "prompt"
    escaped = parse_line("//etc/passwd is a path")
    assert (escaped.kind, escaped.text) == ("prompt", "/etc/passwd is a path")
    cmd = parse_line("/context task add 3 decision D1 don't use \"quotes\"  here")
    assert (cmd.kind, cmd.name) == ("command", "context")
    assert cmd.rest == "task add 3 decision D1 don't use \"quotes\"  here"


def test_tokens_then_rest_exactly_as_typed():
    tokens, rest = split_tokens('add 3 "two words" it\'s  "quoted" text ', 3, rest=True)
    assert tokens == ["add", "3", "two words"]
    assert rest == 'it\'s  "quoted" text '
    with pytest.raises(SlashCommandError, match="quote"):
        split_tokens('"open', 1)


@pytest.fixture
def runner(tmp_path):
    script = write_script(tmp_path, [{"text": "hi"}])
    runner, _ = make_runner(script, tmp_path)
    yield runner
    runner.close()


def test_builtins(runner, tmp_path):
    assert "/session save" in execute_line(runner, "/help").text
    assert execute_line(runner, "/help tools").result["usage"] == "/tools"
    tools = execute_line(runner, "/tools").result["tools"]
    assert {"name": "write_file", "effect": "write", "permission": "ask", "by": "tools.permissions.write_file"} in tools
    assert execute_line(runner, "/context loop").result is None
    collect(runner, "x")
    loop = execute_line(runner, "/context loop")
    assert loop.result["phase"] == "complete" and "phase complete" in loop.text
    overview = execute_line(runner, "/context").result
    assert overview["last_verdict"] == "ANSWERED" and overview["context"]["window_tokens"] == 32000
    assert execute_line(runner, "/policy").result["loop_policy"] is None
    assert execute_line(runner, "/model").result["model"].startswith("scripted:")
    assert execute_line(runner, "/quit").action == "quit"
    saved = execute_line(runner, "/session save \"release prep\"")
    assert saved.ok and runner.session.name == "release prep"
    assert execute_line(runner, "/session list").result["sessions"][0]["name"] == "release prep"
    load = execute_line(runner, f"/session load {runner.session_id}")
    assert (load.action, load.action_arg) == ("load_session", runner.session_id)


@pytest.mark.parametrize("line", ["/nope", "/tools extra", "/session", "/session fly", "/context bogus",
                                  "/model nonsense", "/help nope"])
def test_bad_lines_raise_with_usage_and_change_nothing(runner, line):
    before = runner.session.model_dump()
    with pytest.raises(SlashCommandError) as info:
        execute_line(runner, line)
    assert info.value.usage
    assert runner.session.model_dump() == before


def test_disabled_capabilities_say_how_to_enable(runner):
    result = execute_line(runner, "/context task add 0 objective O1 ship it")
    assert not result.ok and result.exit_code == 10 and "task_state" in result.text
    assert not execute_line(runner, "/context evidence").ok
