"""MCP tool names, input-schema checks and adaptation, raw-schema tools in the ToolManager,
prompt arguments and result rendering (issue 18, "Tools")."""

from __future__ import annotations

import re
from types import SimpleNamespace as NS

import pytest

from amos.errors import SlashCommandError
from amos.mcp.naming import safe_name, tool_names
from amos.mcp.prompts import McpPrompt, PromptArgument, parse_prompt_arguments
from amos.mcp.results import render_call_result, render_prompt
from amos.mcp.schema import SchemaProblem, adapt_schema
from amos.tools import Tool, ToolContext, ToolFailure, ToolManager
from amos.tools.base import ToolEffectUncertain

from .mcp_support import call

PROVIDER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


def test_names_that_fit_are_kept():
    assert tool_names("git", "git_status") == ("mcp__git__git_status", "mcp__git__git_status")
    assert safe_name("mcp__everything__get-sum") == "mcp__everything__get-sum"


def test_long_or_odd_names_are_shortened_deterministically():
    long_full = "mcp__" + "s" * 30 + "__" + "t" * 60
    short, full = tool_names("s" * 30, "t" * 60)
    assert full == long_full and len(short) == 64 and PROVIDER_NAME.fullmatch(short)
    assert tool_names("s" * 30, "t" * 60)[0] == short  # same input, same name
    assert tool_names("s" * 30, "t" * 59 + "u")[0] != short
    dotted, _ = tool_names("my.server", "read file")
    assert PROVIDER_NAME.fullmatch(dotted) and dotted.startswith("mcp__my_server__read_file_")
    assert tool_names("my.server", "read file")[0] != tool_names("my_server", "read_file")[0]
    assert PROVIDER_NAME.fullmatch(tool_names("s", "名前")[0])


def test_schema_adaptation_gives_every_provider_an_object_schema():
    adapted = adapt_schema({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "properties": {
            "where": {"$ref": "#/$defs/Point", "description": "a point"},
            "tags": {"type": "array"},
            "anything": True,
        },
    })
    offered = adapted.offered
    assert offered["type"] == "object" and "$schema" not in offered and "$defs" not in offered
    assert offered["properties"]["where"] == {"type": "object", "properties": {"x": {"type": "number"}},
                                              "description": "a point"}
    assert offered["properties"]["tags"] == {"type": "array", "items": {}}
    assert offered["properties"]["anything"] == {}
    assert not adapted.loosened


def test_recursive_refs_stay_with_their_definitions():
    schema = {"type": "object", "properties": {"tree": {"$ref": "#/$defs/Node"}},
              "$defs": {"Node": {"type": "object", "properties": {"kids": {"type": "array",
                                                                          "items": {"$ref": "#/$defs/Node"}}}}}}
    offered = adapt_schema(schema).offered
    assert "$defs" in offered and offered["properties"]["tree"]["properties"]["kids"]["items"] == {
        "$ref": "#/$defs/Node"}


def test_root_combinators_are_dropped_but_still_enforced():
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
              "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    adapted = adapt_schema(schema)
    assert "oneOf" not in adapted.offered and adapted.loosened and adapted.original is schema


@pytest.mark.parametrize(("schema", "why"), [
    ({"type": "object", "properties": {"x": {"type": "strnig"}}}, "not valid JSON Schema"),
    ({"type": "string"}, "root type is \"string\""),
    ([1, 2], "not a JSON object"),
    ({"type": "object", "properties": {"x": {"$ref": "https://example.invalid/x.json"}}},
     "a $ref providers cannot follow (https://example.invalid/x.json)"),
    ({"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}}, "a $ref providers cannot follow"),
])
def test_unusable_schemas_are_refused_with_a_reason(schema, why):
    with pytest.raises(SchemaProblem, match=re.escape(why)):
        adapt_schema(schema)


async def _echo(args, ctx):
    return {"got": args}


async def _uncertain(args, ctx):
    raise ToolEffectUncertain("the server vanished")


def _schema_tool(name="echo", run=_echo, effect="unknown", **kwargs):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}},
              "required": ["n"], "additionalProperties": False}
    return Tool(name=name, description="d", args_model=None, input_schema=schema, effect=effect, run=run, **kwargs)


def test_a_tool_needs_exactly_one_argument_description():
    with pytest.raises(ValueError, match="exactly one"):
        Tool(name="x", description="d", args_model=None, effect="read", run=_echo)


async def test_manager_validates_raw_schema_arguments(tmp_path):
    m = ToolManager([_schema_tool()], context=ToolContext(workspace=tmp_path))
    assert m.specs()[0].parameters["required"] == ["n"]
    ok = await call(m, "echo", {"n": 3})
    assert ok.status == "succeeded" and ok.result == {"got": {"n": 3}}
    bad = await call(m, "echo", {"n": "three", "x": 1})
    assert bad.status == "failed"
    assert bad.error.startswith("invalid arguments for echo: ")
    assert "field 'n': 'three' is not of type 'integer'" in bad.error
    assert "accepted fields: n: integer, s?: string" in bad.error
    missing = await call(m, "echo", {})
    assert "'n' is a required property" in missing.error
    assert m.summarize(NS(tool_name="echo", arguments={"n": 1, "s": "hello"}, raw_arguments=None)) == "echo hello"


async def test_uncertain_failure_has_unknown_completion_for_non_read_tools(tmp_path):
    m = ToolManager([_schema_tool("w", _uncertain), _schema_tool("r", _uncertain, effect="read")],
                    context=ToolContext(workspace=tmp_path))
    write = await call(m, "w", {"n": 1})
    read = await call(m, "r", {"n": 1})
    assert (write.status, write.completion, write.error) == ("failed", "unknown", "the server vanished")
    assert (read.status, read.completion) == ("failed", "complete")


async def test_tool_timeout_overrides_the_context_limit(tmp_path):
    import asyncio

    async def slow(args, ctx):
        await asyncio.sleep(5)

    m = ToolManager([_schema_tool("slow", slow, timeout_s=0.05)], context=ToolContext(workspace=tmp_path))
    outcome = await call(m, "slow", {"n": 1})
    assert (outcome.status, outcome.completion) == ("timed_out", "unknown")
    assert "0.05 s" in outcome.error


PROMPT = McpPrompt("mcp__s__greet", "mcp__s__greet", "s", "greet", "Greet",
                   (PromptArgument("name", required=True), PromptArgument("style")))


def test_prompt_arguments_by_position_and_name():
    assert parse_prompt_arguments(PROMPT, "Ada") == {"name": "Ada"}
    assert parse_prompt_arguments(PROMPT, 'Ada style="very warm"') == {"name": "Ada", "style": "very warm"}
    assert parse_prompt_arguments(PROMPT, "style=dry Ada") == {"style": "dry", "name": "Ada"}
    assert parse_prompt_arguments(PROMPT, "Ada warm and kind") == {"name": "Ada", "style": "warm and kind"}
    assert parse_prompt_arguments(PROMPT, "\"Ada Lovelace\" it's fine") == {
        "name": "Ada Lovelace", "style": "it's fine"}
    assert PROMPT.usage == "/mcp__s__greet NAME [STYLE]"


@pytest.mark.parametrize(("rest", "message"), [
    ("", "needs NAME"), ("style=warm", "needs NAME"), ('"Ada', "unterminated"),
    ("name=a name=b", "given twice"),
])
def test_bad_prompt_arguments_name_the_problem_and_carry_the_usage(rest, message):
    with pytest.raises(SlashCommandError, match=message) as caught:
        parse_prompt_arguments(PROMPT, rest)
    assert caught.value.usage == PROMPT.usage


def test_prompt_without_arguments_refuses_text():
    bare = McpPrompt("mcp__s__p", "mcp__s__p", "s", "p", "")
    assert parse_prompt_arguments(bare, "") == {}
    with pytest.raises(SlashCommandError, match="takes no arguments"):
        parse_prompt_arguments(bare, "x")


def test_results_map_text_structured_content_and_placeholders():
    result = NS(content=[NS(type="text", text="hello"),
                         NS(type="image", data="aGVsbG8=", mime_type="image/png"),
                         NS(type="resource_link", uri="file:///a.txt", name="a"),
                         NS(type="resource", resource=NS(uri="memo://x", text="embedded", mime_type=None))],
                structured_content=None)
    value, text = render_call_result(result)
    assert value == text == ("hello\n[image: image/png, 5 bytes — not shown]\n"
                             "[resource link: file:///a.txt (a)]\nembedded")
    value, text = render_call_result(NS(content=[], structured_content={"t": 1}))
    assert value == {"text": '{"t": 1}', "structured_content": {"t": 1}} and text == '{"t": 1}'
    prompt = NS(messages=[NS(role="user", content=NS(type="text", text="Q")),
                          NS(role="assistant", content=NS(type="text", text="A"))])
    assert render_prompt(prompt) == "Q\n\n[assistant]\nA"


def test_tool_failure_stays_a_tool_failure():
    assert issubclass(ToolEffectUncertain, ToolFailure)
