"""The composer, through Textual's pilot on real runners (scripted model, real tools).

Multi-line drafts (Ctrl+J and Shift+Enter insert a new line, Enter sends), Up/Down
history that gives way to cursor moves inside a multi-line draft, the command menu
with each command's usage, and a 1 MB paste that neither freezes the composer nor
reaches the run cut. Fixtures and helpers come from ``tests/test_tui.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

from textual import events

from amos.tui.app import AmosApp
from amos.tui.widgets.conversation import PROMPT_MAX_CHARS
from amos.tui.widgets.prompt_input import (
    PASTE_COLLAPSE_CHARS,
    CommandMenu,
    PromptInput,
    menu_entries,
)
from amos.tui.widgets.tool_line import ToolCallLine
from tests import test_tui
from tests.test_tui import shown_text, submit, wait_for

make_runner = test_tui.make_runner
workspace = test_tui.workspace

SIZE = (120, 40)


def sent_prompts(runner) -> list[str]:
    """The prompts the runner received, oldest first."""
    return [m.text for m in runner.session.messages if m.role == "user" and m.kind == "prompt"]


def menu_lines(app: AmosApp) -> list[str]:
    menu = app.query_one(CommandMenu)
    if not menu.display:
        return []
    return [menu.render_line(y).text.rstrip() for y in range(menu.size.height)]


async def test_ctrl_j_inserts_a_new_line_and_enter_sends_the_whole_draft(make_runner):
    runner, opened = make_runner([{"text": "got both lines"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.prompt_input
        await pilot.press(*"first line", "ctrl+j", *"second line", "shift+enter", *"third")
        await pilot.pause()
        assert composer.text == "first line\nsecond line\nthird"
        assert composer.size.height == 3, "the composer grows with the draft"
        assert not app.busy and not app.receipts, "Ctrl+J and Shift+Enter never send"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert sent_prompts(runner) == ["first line\nsecond line\nthird"]
        assert "› first line\n  second line\n  third" in shown_text(app)
        assert composer.text == "" and composer.size.height == 1


async def test_up_and_down_recall_sent_lines_and_bring_the_draft_back(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.prompt_input
        await submit(pilot, app, "/tools")
        await submit(pilot, app, "/policy")
        await pilot.press(*"a draft")
        await pilot.press("up")
        assert composer.value == "/policy"
        await pilot.press("up")
        assert composer.value == "/tools"
        await pilot.press("up")
        assert composer.value == "/tools", "the oldest line stays"
        await pilot.press("down", "down")
        assert composer.value == "a draft", "past the newest line the draft returns"
        assert composer.cursor_location == (0, len("a draft"))
        await pilot.press("enter")
        assert composer.sent_lines == ["/tools", "/policy", "a draft"]


async def test_up_and_down_move_the_cursor_inside_a_multi_line_draft(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.prompt_input
        await submit(pilot, app, "/tools")
        await pilot.press(*"one", "ctrl+j", *"two", "ctrl+j", *"three")
        assert composer.cursor_location == (2, 5)
        await pilot.press("up")
        assert composer.cursor_location[0] == 1 and composer.text == "one\ntwo\nthree"
        await pilot.press("up")
        assert composer.cursor_location[0] == 0 and composer.text == "one\ntwo\nthree"
        await pilot.press("up")
        assert composer.text == "/tools", "Up on the first line recalls history"
        await pilot.press("down")
        assert composer.text == "one\ntwo\nthree", "and Down brings the multi-line draft back"


async def test_a_recalled_multi_line_entry_is_walked_line_by_line(make_runner):
    runner, opened = make_runner([{"text": "a"}, {"text": "b"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.prompt_input
        await submit(pilot, app, "/tools")
        await pilot.press(*"x", "ctrl+j", *"y")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        await pilot.press("up")
        assert composer.text == "x\ny" and composer.cursor_location == (0, 1), "Up lands on the entry's first line"
        await pilot.press("up")
        assert composer.text == "/tools", "so the next Up goes on back"
        await pilot.press("down")
        assert composer.text == "x\ny" and composer.cursor_location == (1, 1), "Down lands on its last line"
        await pilot.press("down")
        assert composer.text == ""


async def test_a_one_megabyte_paste_is_kept_aside_and_sent_whole(make_runner):
    runner, opened = make_runner([{"text": "read it all"}, {"text": "again"}])
    app = AmosApp(runner, opened)
    big = "".join(f"line {i:06d} of a long pasted log\n" for i in range(33_000))
    assert len(big) > 1_000_000
    async with app.run_test(size=SIZE) as pilot:
        composer = app.prompt_input
        await pilot.press(*"summarise: ")
        started = time.monotonic()
        app.post_message(events.Paste(big))
        await pilot.pause()
        await pilot.press(*" thanks")
        assert time.monotonic() - started < 1.0, "a 1 MB paste does not freeze the composer"
        assert composer.text == "summarise: [pasted 33,000 lines · 1.0 MB #1] thanks"
        assert composer.value == "summarise: " + big + " thanks"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert sent_prompts(runner) == ["summarise: " + big + " thanks"]
        shown = shown_text(app)
        assert len(shown) < 3 * PROMPT_MAX_CHARS, "the conversation shows the head of the prompt"
        assert "more characters (33,001 lines in all) sent, not shown" in shown
        # History brings back the placeholder (not a megabyte to lay out), and it still expands.
        await pilot.press("up")
        assert composer.text == "summarise: [pasted 33,000 lines · 1.0 MB #1] thanks"
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(app.receipts) == 2 and not app.busy)
        assert sent_prompts(runner)[-1] == "summarise: " + big + " thanks"


async def test_a_small_paste_is_typed_in_and_backspace_removes_a_paste_placeholder_whole(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.prompt_input
        app.post_message(events.Paste("two\r\nlines\rhere"))  # terminals paste line breaks as CR
        await pilot.pause()
        assert composer.text == "two\nlines\nhere"
        composer.value = ""
        app.post_message(events.Paste("".join(f"row {i}\r" for i in range(300))))
        await pilot.pause()
        assert composer.text == "[pasted 300 lines · 2 KB #1]"
        assert composer.value == "".join(f"row {i}\n" for i in range(300))
        composer.value = ""
        app.post_message(events.Paste("z" * (PASTE_COLLAPSE_CHARS + 1)))
        await pilot.pause()
        assert composer.text == "[pasted 10 KB #2]"
        await pilot.press("backspace")
        assert composer.text == ""


async def test_the_command_menu_lists_matching_commands_with_their_usage(make_runner, workspace: Path):
    (workspace / "commands").mkdir()
    (workspace / "commands" / "greet.md").write_text(
        "---\ndescription: Say hello\narguments: NAME…\n---\nSay hello to $ARGUMENTS", encoding="utf-8")
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        assert menu_lines(app) == []
        await pilot.press("/")
        await pilot.pause()
        lines = menu_lines(app)
        assert any(line.startswith("/help [command]") and "list commands" in line for line in lines)
        assert any(line.startswith("/greet NAME…") and "Say hello (custom)" in line for line in lines)
        await pilot.press(*"se")
        await pilot.pause()
        assert len(menu_lines(app)) == 1 and menu_lines(app)[0].startswith("/session save [NAME] | load")
        await pilot.press("tab")
        await pilot.pause()
        assert app.prompt_input.value == "/session "
        assert menu_lines(app) == [], "once the name is complete the notice line has its usage"
        app.prompt_input.value = "hello"
        await pilot.pause()
        assert menu_lines(app) == []


def test_menu_entries_keep_built_ins_over_customs_and_skip_prompts():
    customs = {"help": ("/help X", "shadow"), "hello": ("/hello", "")}
    entries = menu_entries("/hel", customs)
    assert entries == [("/hello", "custom prompt (custom)"), ("/help [command]", "list commands, or one command's usage")]
    assert menu_entries("hello") == [] and menu_entries("//help") == [] and menu_entries("/help x") == []


async def test_tab_in_a_prompt_reaches_the_newest_tool_block(make_runner):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}},
                        {"id": "r2", "name": "list_dir", "arguments": {"path": "."}}]},
        {"text": "done"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "look around")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        await pilot.press(*"draft", "tab")
        # a draft keeps the focus: Tab never carries typing off to the blocks
        assert isinstance(app.focused, PromptInput) and app.prompt_input.value == "draft"
        app.prompt_input.value = ""
        await pilot.press("tab")
        assert isinstance(app.focused, ToolCallLine) and app.focused.call_id == "r2"
        await pilot.press(*"more")  # typing on a block goes back to the input, nothing lost
        assert isinstance(app.focused, PromptInput) and app.prompt_input.value == "more"
