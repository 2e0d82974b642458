"""The TUI details a first-time user relies on, through Textual's pilot on real runners.

Readable ``/help``, ``/tools`` and session lists at 80 and 120 columns, a collapsed
``/context loop`` JSON, one line per approval decision, errors shown once, Tab
completion, exit codes on tool lines, liveness in the status bar, and the line
printed after the app exits. Fixtures and helpers come from ``tests/test_tui.py``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path

import pytest
from textual.widgets import Collapsible, Static
from textual.widgets._collapsible import CollapsibleTitle

from amos.host import RunOptions
from amos.slash import COMMANDS
from amos.tui.app import AmosApp, run_tui
from amos.tui.screens.approval import ApprovalScreen
from amos.tui.screens.confirm_quit import ConfirmQuitScreen
from amos.tui.texts import exit_message
from amos.tui.widgets.command_output import CommandOutput
from amos.tui.widgets.prompt_input import PLACEHOLDER, complete
from amos.tui.widgets.status_bar import Status, StatusBar, status_text
from tests import test_tui
from tests.test_tui import notices, shown_text, submit, wait_for, write_script

make_runner = test_tui.make_runner
workspace = test_tui.workspace


def rendered_lines(widget: Static) -> list[str]:
    """What ``widget`` shows on screen, one string per row (trailing spaces removed)."""
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


def command_lines(app: AmosApp) -> list[str]:
    """The rendered rows of the latest command output's text (not its JSON block)."""
    output = list(app.conversation.query(CommandOutput))[-1]
    return rendered_lines(output.query_one(".command-text", Static))


def notice_line(app: AmosApp) -> str:
    return str(app.query_one("#notice-line", Static).content)


def columns(lines: list[str], *headers: str) -> list[str]:
    """Each column of a rendered table as one text (rows joined, wraps undone)."""
    starts = [lines[0].index(h) for h in headers] + [None]
    texts = []
    for start, end in zip(starts, starts[1:], strict=False):
        cells = [line[start:end].strip() for line in lines[1:]]
        texts.append(" ".join(c for c in cells if c))
    return texts


# ---------------------------------------------------------------------------- /help, /tools, /session list


@pytest.mark.parametrize("width", [80, 120])
async def test_help_keeps_every_usage_and_summary_readable(make_runner, width):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(width, 40)) as pilot:
        await submit(pilot, app, "/help")
        lines = command_lines(app)
        assert lines[0].startswith("command") and "what it does" in lines[0]
        usage_column, summary_column = columns([ln for ln in lines if not ln.startswith("A line")],
                                               "command", "what it does")
        for command in COMMANDS.values():
            assert command.usage in usage_column, f"{command.usage!r} is cut at {width} columns"
            assert command.summary in summary_column, f"{command.summary!r} missing at {width} columns"
        assert lines[0].index("what it does") <= width // 2, "the usage column leaves room for summaries"
        assert all(len(line) <= width for line in lines)


async def test_tools_is_a_table_of_name_effect_and_permission_at_80_columns(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 30)) as pilot:
        await submit(pilot, app, "/tools")
        lines = command_lines(app)
        assert lines[0].split() == ["tool", "effect", "permission"]
        assert any(line.split() == ["write_file", "write", "ask"] for line in lines)


async def _saved_sessions(make_runner) -> list[str]:
    """Save a named and an unnamed session; return their ids (named first)."""
    ids = []
    for name in ("release-notes", None):
        runner, _ = make_runner([{"text": "done"}])
        [e async for e in runner.run(f"prompt of {name or 'the unnamed one'}")]
        runner.save(name)
        ids.append(runner.session_id)
        runner.close()
    return ids


async def test_session_list_rows_line_up_with_and_without_names(make_runner):
    named_id, unnamed_id = await _saved_sessions(make_runner)
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(120, 30)) as pilot:
        await submit(pilot, app, "/session list")
        lines = command_lines(app)
        header = lines[0]
        assert header.split()[:3] == ["id", "updated", "(UTC)"]
        verdict_at, label_at = header.index("verdict"), header.index("name · title")
        rows = {line.split()[0]: line for line in lines[1:]}
        assert set(rows) == {named_id, unnamed_id}
        for row in rows.values():
            assert row[verdict_at:].startswith("○ ANSWERED")
        assert rows[named_id][label_at:] == "release-notes · prompt of release-notes"
        assert rows[unnamed_id][label_at:] == "prompt of the unnamed one"


async def test_session_list_at_80_columns_puts_the_name_under_each_session(make_runner):
    named_id, _ = await _saved_sessions(make_runner)
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 30)) as pilot:
        await submit(pilot, app, "/session list")
        lines = command_lines(app)
        at = next(i for i, line in enumerate(lines) if line.startswith(named_id))
        assert "○ ANSWERED" in lines[at]
        assert lines[at + 1] == "    release-notes · prompt of release-notes"
        assert all(len(line) <= 80 for line in lines)


# ---------------------------------------------------------------------------- /context loop


async def test_context_loop_shows_the_summary_with_the_json_collapsed(make_runner):
    reads = [{"id": f"r{i}", "name": "read_file", "arguments": {"path": "README.md"}} for i in range(4)]
    runner, opened = make_runner([{"tool_calls": reads}, {"text": "answered"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, app, "answer")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        await submit(pilot, app, "/context loop")
        output = list(app.conversation.query(CommandOutput))[-1]
        assert output.summary.startswith("phase complete")
        assert '"phase": "complete"' in output.json_block
        assert "phase complete" in " ".join(command_lines(app))
        collapsible = output.query_one(Collapsible)
        assert collapsible.collapsed
        assert output.size.height <= 4, "the summary stays on screen; the JSON is folded away"
        # Keyboard: Tab from the empty input reaches the block, Enter opens it, Esc returns.
        await pilot.press("tab")
        assert isinstance(app.focused, CollapsibleTitle)
        await pilot.press("enter")
        await pilot.pause()
        assert not collapsible.collapsed
        await pilot.press("escape")
        assert app.focused is app.prompt_input
        # The expanded JSON pushed the bottom out of view; the next command is still shown.
        await submit(pilot, app, "/tools")
        await pilot.pause(0.1)
        assert app.conversation.is_vertical_scroll_end


async def test_reading_back_is_not_interrupted_but_sending_a_line_returns_to_the_bottom(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, app, "/help")
        await submit(pilot, app, "/tools")
        conv = app.conversation
        conv.on_mouse_scroll_up()  # what a mouse wheel turn up does
        conv.scroll_home(animate=False, immediate=True)
        await conv.add_notice("something happened meanwhile")
        await pilot.pause(0.1)
        assert conv.scroll_y == 0, "a new block does not yank the view while reading back"
        await submit(pilot, app, "/tools")
        await pilot.pause(0.1)
        assert conv.is_vertical_scroll_end


# ---------------------------------------------------------------------------- approvals and errors shown once


async def test_a_denial_is_shown_once_on_the_tool_line(make_runner, workspace):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "x"}}]},
        {"text": "ok"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(100, 32)) as pilot:
        await submit(pilot, app, "write the notes")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("n", *"not today", "enter")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        denied = [line for line in shown_text(app).splitlines() if "denied" in line]
        assert denied == ["⊘ write_file notes.txt (1 bytes)  denied by the user: not today"]
        assert not [n for n in notices(app) if n.level in ("approved", "denied")]


async def test_an_unknown_command_is_reported_once_with_its_usage(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, app, "/nope")
        errors = [n.text for n in notices(app) if n.level == "error"]
        assert errors == ["unknown command /nope; /help lists commands; usage: /help [command]"]
        assert notice_line(app) == ""


# ---------------------------------------------------------------------------- the input line


def test_the_placeholder_fits_an_80_column_input():
    assert len(PLACEHOLDER) <= 76  # 80 columns minus the input's border and padding


async def test_tab_completes_command_names_and_lists_several_matches(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("/", "h", "e", "tab")
        assert app.prompt_input.value == "/help "
        assert notice_line(app).endswith("/help [command] — list commands, or one command's usage")
        app.prompt_input.value = ""
        await pilot.press("/", "c", "tab")
        await pilot.pause()
        assert app.prompt_input.value == "/c"
        assert notice_line(app) == "ℹ matches: /clear  /compact  /context"
        await pilot.press("o", "n", "tab")
        assert app.prompt_input.value == "/context "
        app.prompt_input.value = ""
        await pilot.press(*"/session li", "tab")
        assert app.prompt_input.value == "/session list "


async def test_typing_a_command_shows_its_usage_and_prompts_clear_the_hint(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(120, 24)) as pilot:
        await pilot.press(*"/session ")
        await pilot.pause()
        assert COMMANDS["session"].usage in notice_line(app)
        app.prompt_input.value = ""
        await pilot.press(*"hello")
        await pilot.pause()
        assert notice_line(app) == ""


async def test_tab_in_a_prompt_moves_the_focus_as_usual(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(*"hi", "tab")
        assert app.prompt_input.value == "hi"


def test_completion_of_subcommands_and_help_arguments():
    assert complete("/context l") == ("/context loop ", ["/context loop"])
    assert complete("/help se") == ("/help session ", ["/help session"])
    assert complete("/zzz") == ("/zzz", [])
    assert complete("plain prompt") == ("plain prompt", [])


async def test_ctrl_c_when_idle_asks_before_quitting(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, ConfirmQuitScreen), "tests/test_tui_control.py tests the answers"
        assert not app.receipts and app.return_code is None


# ---------------------------------------------------------------------------- tool lines and status bar


async def test_a_command_exiting_non_zero_shows_its_exit_code(make_runner):
    command = f"{shlex.quote(sys.executable)} -c 'import sys; sys.exit(3)'"
    runner, opened = make_runner([
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": command}}]},
        {"text": "it failed"},
    ], yes=True)
    app = AmosApp(runner, opened)
    async with app.run_test(size=(120, 24)) as pilot:
        await submit(pilot, app, "run it")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        line = app.conversation.tool_line("c1")
        assert line.status == "succeeded" and line.exit_code == 3
        assert re.search(r"^! run_command .*  exit 3  \d+\.\d\ds$", str(line.content))
        assert line.has_class("-exit-nonzero")


def test_the_status_bar_gives_way_workspace_first_and_never_cuts_the_session_id_blindly():
    status = Status(model="openai:gpt-4o-mini", session_id="20261130-034521-8537c7",
                    workspace="/home/someone/projects/a/rather/long/workspace/path", state="running",
                    step=1, max_steps=20, elapsed_s=3.4, last_verdict="VERIFIED_COMPLETE")
    wide = status_text(status, 200).plain
    assert wide.endswith("│ session 20261130-034521-8537c7 │ /home/someone/projects/a/rather/long/workspace/path")
    assert status_text(status, 125).plain == (" ⠋ running · step 1/20 · 3s │ openai:gpt-4o-mini │ last ✔ "
                                              "VERIFIED_COMPLETE │ session 20261130-034521-8537c7 │ /hom…pace/path")
    assert status_text(status, 100).plain == (" ⠋ running · step 1/20 · 3s │ openai:gpt-4o-mini │ last ✔ "
                                              "VERIFIED_COMPLETE │ 20261130-034521-8537c7")
    assert status_text(status, 80).plain == " ⠋ running · step 1/20 · 3s │ openai:gpt-4o-mini │ ✔ VERIFIED_COMPLETE"
    idle = Status(model="m:x", session_id="20261130-034521-8537c7", workspace="/w", last_verdict="ANSWERED")
    assert status_text(idle, 80).plain == " ○ idle │ m:x │ last ○ ANSWERED │ session 20261130-034521-8537c7 │ /w"
    named = status_text(Status(model="m:x", session_id="20261130-034521-8537c7", session_name="notes"), 80)
    assert named.plain == " ○ idle │ m:x │ session notes"


async def test_the_status_bar_shows_liveness_while_the_model_is_silent(make_runner):
    runner, opened = make_runner([{"delay_ms": 1600, "text": "finally"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, app, "take your time")
        bar = app.query_one(StatusBar)
        await wait_for(pilot, lambda: "· 1s" in bar.render().plain)
        assert re.match(r" \S running · step 1/20 · 1s", bar.render().plain)
        frame = bar.status.frame
        await pilot.pause(0.3)
        assert bar.status.frame > frame, "the spinner moves"
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert bar.render().plain.startswith(" ○ idle")
        assert app._ticker is None


# ---------------------------------------------------------------------------- sessions: resume, name, quit


async def test_opening_with_session_says_resumed_and_shows_the_name(make_runner, tmp_path):
    first, _ = make_runner([{"text": "hello"}])
    [e async for e in first.run("first question")]
    first.save("notes")
    first_id = first.session_id
    first.close()

    runner, opened = make_runner(session="notes")
    app = AmosApp(runner, opened, options=RunOptions(session="notes", cwd=tmp_path, interactive=True))
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.pause()
        assert notices(app)[-1].text == f"resumed session notes ({first_id})", "shown under the history"
        assert "│ session notes" in app.query_one(StatusBar).render().plain


def test_run_tui_prints_where_the_session_was_saved(tmp_path, workspace, monkeypatch, capsys):
    script = write_script(tmp_path, [{"text": "hi there"}])
    original_run = AmosApp.run

    async def use_it(pilot) -> None:
        app = pilot.app
        await submit(pilot, app, "hello")
        deadline = time.monotonic() + 5
        while not (app.receipts and not app.busy) and time.monotonic() < deadline:
            await pilot.pause(0.02)
        await pilot.press("ctrl+q")

    monkeypatch.setattr(AmosApp, "run", lambda self: original_run(self, headless=True, size=(80, 24),
                                                                   auto_pilot=use_it))
    code = run_tui(RunOptions(model=f"scripted:{script}", workspace=workspace, interactive=True, cwd=tmp_path))
    out = capsys.readouterr().out
    assert code == 0
    match = re.fullmatch(r"session saved — reopen with: amos --session (\S+)\n", out)
    assert match, out
    assert len(out) <= 80
    assert list(Path(os.environ["AMOS_HOME"]).rglob(f"{match.group(1)}/session.json")), "the id is a saved session"


def test_the_exit_message_when_nothing_was_saved(make_runner):
    runner, _ = make_runner([{"text": "hi"}], no_save=True)
    assert exit_message(runner) == f"session {runner.session_id} not saved (--no-save)"
    fresh, _ = make_runner([{"text": "hi"}])
    assert exit_message(fresh) == f"session {fresh.session_id} not saved: nothing was sent"


async def test_the_demo_banner_says_writes_run_without_asking(make_runner):
    runner, opened = make_runner(require_model=False)
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        banner = [n for n in notices(app) if n.level == "banner"][0]
        assert "writes and commands run without asking in this temporary copy" in banner.text
    shutil.rmtree(opened.demo_workspace, ignore_errors=True)
