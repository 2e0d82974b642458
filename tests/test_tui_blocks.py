"""Tool blocks and following the stream, through Textual's pilot on real runners.

A tool call is a one-line block that expands (click, or Enter/Space when focused) to
its arguments as JSON and the result the model saw, and collapses again; the header
names the evidence record when the result was stored as evidence; long results are
capped. The view follows streamed text to the bottom unless the person scrolled up,
and a long saved transcript opens a page at a time. Fixtures and helpers come from
``tests/test_tui.py``.
"""

from __future__ import annotations

import json
import time

from textual.widgets import Static

from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart
from amos.tui.app import AmosApp
from amos.tui.widgets.assistant import AssistantText
from amos.tui.widgets.conversation import HISTORY_PAGE, EarlierMessages
from amos.tui.widgets.tool_line import BODY_MAX_CHARS, BODY_MAX_LINES, SPINNER, capped
from tests import test_tui
from tests.test_tui import submit, wait_for

make_runner = test_tui.make_runner
workspace = test_tui.workspace

SIZE = (120, 40)


def rows(widget: Static) -> list[str]:
    """What ``widget`` shows on screen, one string per row (trailing spaces removed)."""
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


async def run_tools(pilot, app: AmosApp, prompt: str = "go") -> None:
    await submit(pilot, app, prompt)
    await wait_for(pilot, lambda: app.receipts and not app.busy)


READ_README = [
    {"text": "Reading.", "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}}]},
    {"text": "It is tiny."},
]


async def test_a_click_expands_a_tool_block_and_a_click_on_its_header_collapses_it(make_runner):
    runner, opened = make_runner(READ_README)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await run_tools(pilot, app)
        line = app.conversation.tool_line("r1")
        assert rows(line) and len(rows(line)) == 1
        assert rows(line)[0].lstrip().startswith("▸ ✓ read_file README.md")
        await pilot.click(line, offset=(10, 0))
        await pilot.pause()
        assert line.expanded
        assert app.focused is app.prompt_input, "a click leaves the focus in the composer"
        shown = rows(line)
        assert shown[0].lstrip().startswith("▾ ✓ read_file README.md")
        assert "arguments" in [r.strip() for r in shown]
        assert '"path": "README.md"' in "\n".join(shown), "the arguments as pretty JSON"
        assert "# tiny project" in "\n".join(shown), "the result the model saw"
        await pilot.click(line, offset=(10, 3))  # in the body: selecting text there never collapses
        await pilot.pause()
        assert line.expanded
        await pilot.click(line, offset=(10, 0))
        await pilot.pause()
        assert not line.expanded and len(rows(line)) == 1


async def test_keyboard_reaches_expands_and_collapses_tool_blocks(make_runner):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}},
                        {"id": "l1", "name": "list_dir", "arguments": {"path": "."}}]},
        {"text": "done"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await run_tools(pilot, app)
        await pilot.press("tab")
        assert app.focused is app.conversation.tool_line("l1"), "Tab from the composer: the newest block"
        await pilot.press("up")
        first = app.conversation.tool_line("r1")
        assert app.focused is first
        await pilot.press("enter")
        await pilot.pause()
        assert first.expanded and '"path": "README.md"' in "\n".join(rows(first))
        await pilot.press("space")
        await pilot.pause()
        assert not first.expanded
        await pilot.press("down", "space")
        await pilot.pause()
        assert app.conversation.tool_line("l1").expanded
        await pilot.press("escape")
        assert app.focused is app.prompt_input


async def test_the_evidence_id_is_on_the_block_and_the_projection_in_its_body(make_runner, tmp_path, workspace):
    (workspace / "big.txt").write_text("".join(f"row {i} of the data\n" for i in range(3000)), encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"evidence": {"enabled": True, "project_threshold_bytes": 1024}}), encoding="utf-8")
    runner, opened = make_runner([
        {"tool_calls": [{"id": "b1", "name": "read_file", "arguments": {"path": "big.txt"}},
                        {"id": "s1", "name": "read_file", "arguments": {"path": "README.md"}}]},
        {"text": "read"},
    ], config_path=config)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await run_tools(pilot, app)
        big, small = app.conversation.tool_line("b1"), app.conversation.tool_line("s1")
        assert big.evidence_id and small.evidence_id and big.evidence_id != small.evidence_id
        shown = rows(big)[0].rsplit("  ev ", 1)[1]  # issue 21: the shortest unique prefix, not 36 characters
        assert big.evidence_id.startswith(shown) and len(shown) < len(big.evidence_id)
        assert big.evidence_id not in str(big.content)
        big.focus()
        await pilot.press("enter")
        await pilot.pause()
        shown = "\n".join(rows(big))
        assert f"evidence {big.evidence_id}" in shown  # expanded: the whole id, to copy
        assert "result (the projection the model saw; the full result is evidence)" in shown
        assert "[projected result" in shown and "row 11 of the data" in shown
        assert "row 2999 of the data" not in shown, "the body is what the model saw, not the raw record"


async def test_a_long_result_is_capped_with_a_note(make_runner, workspace):
    (workspace / "long.txt").write_text("".join(f"entry {i}\n" for i in range(5000)), encoding="utf-8")
    runner, opened = make_runner([
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "long.txt"}}]},
        {"text": "read"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await run_tools(pilot, app)
        line = app.conversation.tool_line("r1")
        assert len(line.result) > BODY_MAX_CHARS or line.result.count("\n") > BODY_MAX_LINES
        started = time.monotonic()
        await pilot.click(line, offset=(5, 0))
        await pilot.pause()
        assert time.monotonic() - started < 1.0
        shown = rows(line)
        assert len(shown) < BODY_MAX_LINES + 20
        assert any(r.strip().startswith("… ") and "more characters not shown" in r for r in shown)


def test_capping_a_megabyte_scans_only_the_head():
    text = "x" * 1_000_000 + "\n" + "y\n" * 1000
    started = time.perf_counter()
    head, note = capped(text)
    assert time.perf_counter() - started < 0.05
    assert len(head) == BODY_MAX_CHARS
    assert note == f"… {len(text) - BODY_MAX_CHARS:,} more characters not shown (1,001 lines in all)"
    head, note = capped("a\n" * 1000)
    assert head.count("\n") == BODY_MAX_LINES - 1 and note.endswith("(1,000 lines in all)")
    assert capped("ok\n") == ("ok", None)
    assert capped("\x1b[31mred") == ("\\x1b[31mred", None)
    assert capped("a\tb") == ("a   b", None)


async def test_command_blocks_keep_exit_codes_and_approval_marks(make_runner):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "n.txt", "content": "hi\n"}}]},
        {"text": "ok"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "write")
        await wait_for(pilot, lambda: app.screen is not app.screen_stack[0])
        await pilot.press("y")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        line = app.conversation.tool_line("w1")
        assert line.approved and "approved" in rows(line)[0]
        line.focus()
        await pilot.press("enter")
        await pilot.pause()
        shown = "\n".join(rows(line))
        assert '"content": "hi\\n"' in shown and "3 bytes written" in shown


# ---------------------------------------------------------------------------- following the stream


async def test_the_view_follows_a_long_stream_to_the_bottom(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        conv = app.conversation
        for i in range(120):
            await conv.append_assistant(f"paragraph {i} of a long answer.\n\n")
            if i % 10 == 0:
                await pilot.pause()
                assert conv.max_scroll_y == 0 or conv.is_vertical_scroll_end
        await conv.end_assistant()
        await pilot.pause(0.05)
        assert conv.max_scroll_y > 0 and conv.is_vertical_scroll_end
        assert conv.following


async def test_scrolling_up_mid_stream_stops_following_and_returning_to_the_end_resumes(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        conv = app.conversation
        for i in range(80):
            await conv.append_assistant(f"paragraph {i}.\n\n")
        await pilot.pause(0.05)
        conv.scroll_to(y=conv.max_scroll_y - 20, animate=False, immediate=True)  # a wheel turn up
        await pilot.pause()
        assert not conv.following
        where = conv.scroll_y
        for i in range(40):
            await conv.append_assistant(f"more {i}.\n\n")
        await pilot.pause(0.05)
        assert conv.scroll_y == where, "reading back is not interrupted"
        conv.scroll_to(y=conv.max_scroll_y, animate=False, immediate=True)  # back to the end
        await pilot.pause()
        assert conv.following
        for i in range(40):
            await conv.append_assistant(f"even more {i}.\n\n")
        await conv.end_assistant()
        await pilot.pause(0.05)
        assert conv.is_vertical_scroll_end


async def test_a_scripted_run_ends_with_its_receipt_in_view(make_runner):
    text = "".join(f"Point {i}: a sentence long enough to fill part of a line.\n\n" for i in range(60))
    runner, opened = make_runner([{"text": text}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await run_tools(pilot, app, "explain")
        await pilot.pause(0.05)
        conv = app.conversation
        assert conv.max_scroll_y > 0 and conv.is_vertical_scroll_end


async def test_expanding_a_tall_block_keeps_its_header_in_view(make_runner, workspace):
    (workspace / "long.txt").write_text("".join(f"entry {i}\n" for i in range(300)), encoding="utf-8")
    runner, opened = make_runner([
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "long.txt"}}]},
        {"text": "read"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await run_tools(pilot, app)
        line = app.conversation.tool_line("r1")
        line.focus()
        await pilot.press("enter")
        await pilot.pause(0.05)
        conv = app.conversation
        top = line.region.y
        assert conv.region.y <= top < conv.region.bottom, "the header is on screen"
        assert not conv.following


# ---------------------------------------------------------------------------- saved transcripts


def _long_history(turns: int) -> list[Message]:
    messages: list[Message] = []
    for i in range(turns):
        messages.append(Message.user(f"question {i}"))
        call = ToolCallPart(call_id=f"c{i}", tool_name="read_file", arguments={"path": f"f{i}.txt"})
        messages.append(Message(role="assistant", kind="turn", parts=(TextPart(text=f"answer {i}"), call)))
        messages.append(Message.tool_result(ToolResultPart(call_id=f"c{i}", tool_name="read_file",
                                                           content=f"contents of f{i}")))
        messages.append(Message(role="assistant", kind="turn", parts=(TextPart(text=f"done {i}"),)))
    return messages


async def test_a_long_transcript_opens_a_page_at_a_time(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    messages = _long_history(150)  # 600 messages, 4 per turn
    async with app.run_test(size=SIZE) as pilot:
        conv = app.conversation
        await conv.show_history(messages, summarize=runner.summarize_call)
        await pilot.pause()
        marker = conv.query_one(EarlierMessages)
        hidden = len(messages) - HISTORY_PAGE
        assert marker.messages == messages[:hidden]
        assert f"{hidden} earlier messages" in str(marker.content)
        assert conv.tool_line("c149").status == "succeeded" and conv.tool_line("c0") is None
        assert conv.is_vertical_scroll_end
        conv.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        await pilot.click(marker)
        await pilot.pause()
        assert len(marker.messages) == hidden - HISTORY_PAGE
        assert conv.tool_line(f"c{(hidden - HISTORY_PAGE) // 4}") is not None
        marker.focus()
        while conv.query(EarlierMessages):
            await pilot.press("enter")
            await pilot.pause()
        line = conv.tool_line("c0")
        assert line.status == "succeeded" and line.result == "contents of f0"
        texts = [w.text for w in conv.query(AssistantText)]
        assert texts[:2] == ["answer 0", "done 0"] and texts[-1] == "done 149", "pages keep the order"
        line.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert '"path": "f0.txt"' in "\n".join(rows(line)), "a replayed call shows its saved arguments"


async def test_scrolling_past_the_top_shows_the_previous_page(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    messages = _long_history(60)
    async with app.run_test(size=SIZE) as pilot:
        conv = app.conversation
        await conv.show_history(messages)
        await pilot.pause()
        marker = conv.query_one(EarlierMessages)
        before = len(marker.messages)
        conv.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        conv.on_mouse_scroll_up()  # what one more wheel turn up does at the top
        await wait_for(pilot, lambda: conv.scroll_y > 0)  # the view stays on what it showed
        assert len(marker.messages) < before, "the previous page is shown above"


async def test_a_saved_session_replays_evidence_ids(make_runner, tmp_path, workspace):
    (workspace / "big.txt").write_text("z" * 5000, encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"evidence": {"enabled": True, "project_threshold_bytes": 1024}}), encoding="utf-8")
    runner, _ = make_runner([
        {"tool_calls": [{"id": "b1", "name": "read_file", "arguments": {"path": "big.txt"}}]},
        {"text": "read"},
    ], config_path=config)
    [e async for e in runner.run("read big")]
    runner.save("ev")
    runner.close()
    again, opened = make_runner(session="ev", config_path=config)
    app = AmosApp(again, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        line = app.conversation.tool_line("b1")
        assert line.evidence_id and line.evidence_id.startswith(rows(line)[0].rsplit("  ev ", 1)[1])


def test_the_prompt_block_caps_a_huge_prompt():
    from amos.tui.widgets.conversation import PROMPT_MAX_LINES, prompt_text

    shown = prompt_text("\n".join(f"l{i}" for i in range(5000))).plain
    assert shown.count("\n") == PROMPT_MAX_LINES
    assert shown.endswith("more characters (5,000 lines in all) sent, not shown")
    assert prompt_text("a\nb").plain == "› a\n  b"


def test_history_pages_never_start_on_a_tool_result():
    from amos.tui.widgets.conversation import _page_start

    messages = _long_history(3)
    assert messages[2].role == "tool"
    assert _page_start(messages, len(messages) - 2) == 1
    assert _page_start(messages, 100) == 0



async def test_a_running_call_spins_and_counts_seconds(make_runner):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "sleep 1.6"}}]},
        {"text": "done"},
    ], yes=True)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "wait")
        await wait_for(pilot, lambda: (line := app.conversation.tool_line("c1")) is not None
                       and line.status == "running")
        line = app.conversation.tool_line("c1")
        glyphs = set()
        for _ in range(6):
            await pilot.pause(0.06)
            glyphs.add(str(line.content)[0])
        assert len(glyphs) > 1 and glyphs <= set(SPINNER), "the glyph spins while the call runs"
        await wait_for(pilot, lambda: " 1s" in str(line.content) or line.status != "running")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert str(line.content).startswith("✓ run_command") and line._spinner is None


async def test_page_up_and_down_scroll_the_conversation_from_the_input(make_runner):
    runner, opened = make_runner([{"text": "\n\n".join(f"paragraph {i} of a long answer" for i in range(80))}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "talk a lot")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        await pilot.pause()
        view = app.conversation
        bottom = view.scroll_y
        assert bottom > 0 and app.focused is app.prompt_input
        await pilot.press("pageup")
        await pilot.pause()
        assert view.scroll_y < bottom and not view.following and app.focused is app.prompt_input
        for _ in range(20):
            await pilot.press("pagedown")
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y
