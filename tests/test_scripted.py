"""The scripted provider as spec/scripted-provider.md describes it."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from amos.errors import ConfigError, ProviderError, ScriptExhausted, ScriptMismatch
from amos.messages import Message, ToolResultPart
from amos.providers import create_provider, parse_model_spec
from amos.providers.base import FinishEvent, ModelRequest, TextDeltaEvent, ToolCallEvent
from amos.providers.scripted import ScriptedProvider
from amos.tools.base import ToolSpec

from .support import write_script


def call(provider, request=None):
    request = request or ModelRequest(system="sys", messages=[Message.user("hi")])

    async def go():
        return [e async for e in provider.stream(request)]

    return asyncio.run(go())


def test_text_streams_in_deltas_and_calls_follow(tmp_path):
    path = write_script(tmp_path, [{"text": "one two  three", "tool_calls": [
        {"name": "read_file", "arguments": {"path": "a"}},
        {"id": "mine", "name": "x", "raw_arguments": "{\"a\": 1}"},
        {"name": "y", "raw_arguments": "{broken"}]}])
    provider = ScriptedProvider.from_file(path, state={})
    events = call(provider)
    deltas = [e.text for e in events if isinstance(e, TextDeltaEvent)]
    assert deltas == ["one ", "two  ", "three"]
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert [c.call_id for c in calls] == ["call_0_0", "mine", "call_0_2"]
    assert calls[1].arguments == {"a": 1} and calls[1].raw_arguments is None
    assert calls[2].arguments is None and calls[2].raw_arguments == "{broken"
    finish = events[-1]
    assert isinstance(finish, FinishEvent) and finish.finish_reason == "tool_calls"
    assert finish.usage.output_tokens > 0 and finish.usage.input_tokens > 0


def test_usage_estimate_follows_the_spec_formula(tmp_path):
    path = write_script(tmp_path, [{"text": "abcdefgh"}])
    events = call(ScriptedProvider.from_file(path, state={}))
    assert events[-1].usage.output_tokens == 2  # ceil(8 / 4)


def test_positions_are_kept_per_script_in_the_state(tmp_path):
    a = write_script(tmp_path, [{"text": "a1"}, {"text": "a2"}], name="a.json")
    b = write_script(tmp_path, [{"text": "b1"}], name="b.json")
    state: dict = {}
    assert call(ScriptedProvider.from_file(a, state=state))[0].text == "a1"
    assert call(ScriptedProvider.from_file(b, state=state))[0].text == "b1"
    assert call(ScriptedProvider.from_file(a, state=state))[0].text == "a2"
    digest = hashlib.sha256(a.read_bytes()).hexdigest()
    assert state["scripted_positions"][digest] == 2


def test_on_exhausted_modes(tmp_path):
    path = write_script(tmp_path, [{"text": "only"}])
    provider = ScriptedProvider.from_file(path, state={})
    call(provider)
    with pytest.raises(ScriptExhausted):
        call(provider)
    path = write_script(tmp_path, [{"text": "only"}], name="r.json", on_exhausted="repeat_last")
    provider = ScriptedProvider.from_file(path, state={})
    assert [call(provider)[0].text for _ in range(3)] == ["only"] * 3
    path = write_script(tmp_path, [], name="t.json", on_exhausted={"text": "fallback"})
    assert call(ScriptedProvider.from_file(path, state={}))[0].text == "fallback"


def test_expect_matchers(tmp_path):
    request = ModelRequest(
        system="be brief", tools=[ToolSpec("read_file", "", {})],
        messages=[Message.user("hello world"),
                  Message.tool_result(ToolResultPart(call_id="c", tool_name="t", content="3 passed"))])
    ok = {"last_message_role": "tool", "last_tool_result_contains": "passed", "any_message_contains": "world",
          "system_contains": "brief", "tools_offered": ["read_file"]}
    path = write_script(tmp_path, [{"expect": ok, "text": "fine"}])
    assert call(ScriptedProvider.from_file(path, state={}), request)[0].text == "fine"
    for bad in ({"last_message_role": "user"}, {"tools_offered": ["write_file"]},
                {"last_tool_result_contains": "failed"}):
        path = write_script(tmp_path, [{"expect": bad, "text": "x"}], name="bad.json")
        with pytest.raises(ScriptMismatch, match="turn 0"):
            call(ScriptedProvider.from_file(path, state={}), request)


@pytest.mark.parametrize("kind", ["rate_limit", "overloaded", "timeout", "auth", "bad_request", "server"])
def test_error_turns(tmp_path, kind):
    path = write_script(tmp_path, [{"error": {"kind": kind, "message": "boom"}}])
    with pytest.raises(ProviderError) as info:
        call(ScriptedProvider.from_file(path, state={}))
    assert info.value.kind == kind


def test_summary_requests_do_not_consume_turns(tmp_path):
    path = write_script(tmp_path, [{"text": "turn"}], summaries=["custom summary"])
    state: dict = {}
    provider = ScriptedProvider.from_file(path, state=state)
    summary = ModelRequest(system="s", messages=[Message.user("first line\nsecond")], purpose="summary")
    assert call(provider, summary)[0].text == "custom summary"
    assert call(provider, summary)[0].text == "first line"
    assert call(provider)[0].text == "turn"


def test_summaries_used_are_kept_in_the_session_state(tmp_path):
    # A second `amos run --session ID "/compact"` opens a new provider on the same state.
    path = write_script(tmp_path, [{"text": "turn"}], summaries=["FIRST", "SECOND"])
    state: dict = {}
    summary = ModelRequest(system="s", messages=[Message.user("older")], purpose="summary")
    assert call(ScriptedProvider.from_file(path, state=state), summary)[0].text == "FIRST"
    assert call(ScriptedProvider.from_file(path, state=state), summary)[0].text == "SECOND"
    assert call(ScriptedProvider.from_file(path, state={}), summary)[0].text == "FIRST"


@pytest.mark.parametrize("body,needle", [
    ({"version": 1, "turns": [{"tool_calls": [{"name": "a", "arguments": {}, "raw_arguments": "{}"}]}]},
     "exactly one"),
    ({"version": 1, "turns": [{"tool_calls": [{"name": "a"}]}]}, "exactly one"),
    ({"version": 1, "turns": [{"error": {"kind": "nope"}}]}, "turns.0.error.kind"),
    ({"version": 1, "turns": [], "extra": 1}, "unknown key 'extra'"),
    ({"version": 2, "turns": []}, "version"),
])
def test_invalid_scripts_are_config_errors(tmp_path, body, needle):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(body))
    with pytest.raises(ConfigError) as info:
        ScriptedProvider.from_file(path, state={})
    assert needle in str(info.value) and str(path) in str(info.value)


def test_registry_is_lazy_and_names_missing_keys(tmp_path):
    from amos.config import default_config

    assert parse_model_spec("openai-compatible:qwen2.5:7b") == ("openai-compatible", "qwen2.5:7b")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        create_provider("openai:gpt-4o-mini", config=default_config())
    with pytest.raises(ConfigError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        create_provider("google:gemini-2.5-flash", config=default_config())
