"""The TUI through Textual's pilot, driving the real runner on the scripted provider.

Every test opens a real runner with :func:`amos.host.open_runner` (scripted model,
real tools, a workspace in ``tmp_path``, sessions in the per-test ``AMOS_HOME``) and
drives :class:`amos.tui.app.AmosApp` the way a person would: typing, Enter, keys.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from amos.host import RunOptions, open_runner
from amos.tui.app import BUSY_NOTICE, AmosApp
from amos.tui.screens.approval import ApprovalScreen
from amos.tui.widgets.assistant import AssistantText
from amos.tui.widgets.command_output import CommandOutput
from amos.tui.widgets.notice import NoticeLine
from amos.tui.widgets.receipt import ReceiptPanel
from amos.tui.widgets.tool_line import format_duration

SIZE = (100, 32)


def write_script(folder: Path, turns: list[dict[str, Any]], name: str = "script.json") -> Path:
    """Write a scripted-provider script (spec/scripted-provider.md) and return its path."""
    path = folder / name
    path.write_text(json.dumps({"version": 1, "model": "scripted-test", "turns": turns}), encoding="utf-8")
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "README.md").write_text("# tiny project\n", encoding="utf-8")
    return folder


@pytest.fixture
def make_runner(tmp_path: Path, workspace: Path):
    """Open real runners over ``workspace``; every one is closed at the end of the test."""
    opened_runners: list[Any] = []

    def make(turns: list[dict[str, Any]] | None = None, **options: Any):
        if turns is not None:
            options.setdefault("model", f"scripted:{write_script(tmp_path, turns)}")
            options.setdefault("workspace", workspace)
        options.setdefault("interactive", True)
        options.setdefault("sandbox", "danger-full-access")  # commands ask, as without a sandbox
        runner, opened = open_runner(RunOptions(cwd=tmp_path, **options))
        opened_runners.append(runner)
        return runner, opened

    yield make
    for runner in opened_runners:
        runner.close()


async def wait_for(pilot, predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Let the app run until ``predicate()`` holds (fail after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(0.02)


async def submit(pilot, app: AmosApp, line: str) -> None:
    """Type ``line`` into the input and press Enter."""
    app.prompt_input.value = line
    await pilot.press("enter")
    await pilot.pause()


def shown_text(app: AmosApp) -> str:
    """Everything the conversation shows, as plain text (assistant text raw)."""
    parts = []
    for widget in app.conversation.children:
        if isinstance(widget, (AssistantText, CommandOutput)):
            parts.append(widget.text)
        elif isinstance(widget, ReceiptPanel):
            parts.extend(str(s.content) for s in widget.query(Static))
        elif isinstance(widget, Static):
            parts.append(str(widget.content))
    return "\n".join(parts)


def notices(app: AmosApp) -> list[NoticeLine]:
    return list(app.conversation.query(NoticeLine))


async def test_prompt_streams_text_and_ends_with_an_answered_receipt(make_runner):
    text = "Hello there, the answer streams in several small deltas."
    runner, opened = make_runner([{"text": text}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"say hi")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        blocks = list(app.conversation.query(AssistantText))
        assert len(blocks) == 1
        assert blocks[0].text == text
        assert len(blocks[0]._chunks) > 1, "deltas are appended to one block, not re-rendered at once"
        panel = app.conversation.query_one(ReceiptPanel)
        assert panel.receipt.verdict == "ANSWERED"
        assert "○ ANSWERED  answer/answer_returned" in shown_text(app)
        assert "› say hi" in shown_text(app)
        assert app.prompt_input.value == ""


async def test_write_file_opens_the_approval_modal_and_approving_writes(make_runner, workspace):
    content = "hello\nworld\n"
    runner, opened = make_runner([
        {"text": "I'll write the notes.",
         "tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "notes.txt", "content": content}}]},
        {"expect": {"last_message_role": "tool"}, "text": "Written."},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "write the notes")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        screen = app.screen
        assert screen.request.tool == "write_file"
        dialog_text = "\n".join(str(s.content) for s in screen.query(Static))
        assert "write_file" in dialog_text and "effect: write" in dialog_text
        assert "content:\nhello\nworld" in dialog_text, "the file's content is shown verbatim"
        assert app.conversation.tool_line("w1").status == "approval"
        assert not (workspace / "notes.txt").exists()
        await pilot.press("y")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert (workspace / "notes.txt").read_text(encoding="utf-8") == content
        assert app.receipts[-1].verdict == "ANSWERED"
        line = app.conversation.tool_line("w1")
        assert line.status == "succeeded" and line.approved
        decision_lines = [t for t in shown_text(app).splitlines() if "approved" in t]
        assert decision_lines == ["✓ write_file notes.txt (12 bytes)  approved  " + format_duration(line.duration_s)], \
            "the decision is shown once, on the call's own line"


async def test_denying_with_a_reason_leaves_the_file_absent_and_tells_the_model(make_runner, workspace):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "x"}}]},
        {"expect": {"last_tool_result_contains": "not in this folder"}, "text": "Understood, I won't write it."},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "write the notes")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("n")
        await pilot.press(*"not in this folder")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert not (workspace / "notes.txt").exists()
        # The script's `expect` would have failed the run (FAILED) had the model not seen the reason.
        assert app.receipts[-1].verdict == "ANSWERED"
        line = app.conversation.tool_line("w1")
        assert line.status == "denied" and "not in this folder" in (line.error or "")


async def test_escape_in_the_approval_modal_denies(make_runner, workspace):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
        {"expect": {"last_tool_result_contains": "denied by the user"}, "text": "ok"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "go")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert not (workspace / "a.txt").exists()
        assert app.receipts[-1].verdict == "ANSWERED"


async def test_slash_help_tools_and_an_unknown_command(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "/help")
        text = shown_text(app)
        assert "/session save [NAME]" in text and "/tools" in text and "/quit" in text
        await submit(pilot, app, "/tools")
        text = shown_text(app)
        assert "tool           effect   permission" in text
        assert any(line.startswith("write_file") and line.rstrip().endswith("ask") for line in text.splitlines())
        await submit(pilot, app, "/nope")
        errors = [n for n in notices(app) if n.level == "error"]
        assert errors and "unknown command /nope" in errors[-1].text and "usage: /help" in errors[-1].text
        assert not app.receipts, "slash commands make no model call"
        await submit(pilot, app, "/clear")
        assert not app.conversation.children


async def test_ctrl_c_cancels_a_running_run_with_a_bounded_stop(make_runner):
    runner, opened = make_runner([{"delay_ms": 5000, "text": "too late"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "take your time")
        await wait_for(pilot, lambda: runner.is_running)
        await submit(pilot, app, "another prompt")
        assert app.prompt_input.value == "another prompt", "a refused prompt stays in the input"
        assert BUSY_NOTICE in str(app.query_one("#notice-line", Static).content)
        started = time.monotonic()
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: app.receipts and not app.busy, timeout_s=3.0)
        assert time.monotonic() - started < 2.0
        receipt = app.receipts[-1]
        assert (receipt.verdict, receipt.cause) == ("BOUNDED_STOP", "user_abort")
        assert "■ BOUNDED_STOP  user_abort/cancelled" in shown_text(app)
        assert "too late" not in shown_text(app)


async def test_escape_twice_cancels_a_running_run(make_runner):
    runner, opened = make_runner([{"delay_ms": 5000, "text": "too late"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "take your time")
        await wait_for(pilot, lambda: runner.is_running)
        await pilot.press("escape")
        assert runner.is_running, "one Esc only warns"
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.receipts and not app.busy, timeout_s=3.0)
        assert app.receipts[-1].verdict == "BOUNDED_STOP"


async def test_a_saved_session_reopened_shows_the_earlier_transcript(make_runner, tmp_path):
    runner, opened = make_runner([
        {"text": "Reading it.", "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}}]},
        {"text": "It is a tiny project."},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "what is this project?")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        await submit(pilot, app, "/session save first")
        assert "saved session" in shown_text(app)
    session_id = runner.session_id
    runner.close()

    again, opened_again = make_runner(session="first")
    assert again.session_id == session_id
    app2 = AmosApp(again, opened_again)
    async with app2.run_test(size=SIZE) as pilot:
        await pilot.pause()
        text = shown_text(app2)
        assert "› what is this project?" in text
        assert "Reading it." in text and "It is a tiny project." in text
        assert app2.conversation.tool_line("r1").status == "succeeded"
        assert app2.conversation.query_one(ReceiptPanel).receipt.verdict == "ANSWERED"


async def test_a_waiting_session_asks_for_its_held_calls_on_open(make_runner, workspace):
    turns = [
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "later.txt", "content": "ok"}}]},
        {"expect": {"last_message_role": "tool"}, "text": "Wrote it after approval."},
    ]
    runner, _ = make_runner(turns, interactive=False)
    receipts = [e.receipt async for e in runner.run("write later.txt") if e.event_kind == "run_finished"]
    assert receipts[0].verdict == "WAITING_UNROUTED"
    session_id = runner.session_id
    runner.close()

    again, opened = make_runner(session=session_id)
    assert again.is_waiting
    app = AmosApp(again, opened)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert (workspace / "later.txt").read_text(encoding="utf-8") == "ok"
        assert app.receipts[-1].verdict == "ANSWERED"


async def test_quit_saves_and_exits(make_runner):
    runner, opened = make_runner([{"text": "hi"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "/quit")
        await pilot.pause()
    assert app.return_code == 0
    assert runner.session_path is not None and runner.session_path.exists()


async def test_demo_mode_shows_the_banner(make_runner):
    runner, opened = make_runner(require_model=False)
    assert opened.demo
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        banner = [n for n in notices(app) if n.level == "banner"]
        assert banner and "offline demo mode" in banner[0].text
        assert str(opened.demo_workspace) in banner[0].text and "--model" in banner[0].text
    shutil.rmtree(opened.demo_workspace, ignore_errors=True)


async def test_ctrl_c_while_the_approval_modal_is_open_cancels_and_closes_it(make_runner, workspace):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "go")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: app.receipts and not app.busy, timeout_s=3.0)
        assert not isinstance(app.screen, ApprovalScreen)
        assert app.receipts[-1].verdict == "BOUNDED_STOP"
        assert not (workspace / "a.txt").exists()
        assert app.conversation.tool_line("w1").status in ("cancelled", "not_started")


async def test_ctrl_q_during_an_approval_cancels_the_run_saves_and_exits(make_runner, workspace):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "go")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: app.return_code is not None, timeout_s=3.0)
    assert app.return_code == 0
    assert app.receipts[-1].verdict == "BOUNDED_STOP"
    assert runner.session.last_stop.verdict == "BOUNDED_STOP"
    assert not (workspace / "a.txt").exists()


async def test_session_load_replaces_the_session_and_shows_its_transcript(make_runner, tmp_path):
    first, _ = make_runner([{"text": "The first session's answer."}])
    receipts = [e async for e in first.run("first question") if e.event_kind == "run_finished"]
    assert receipts
    first.save("earlier")
    first_id = first.session_id
    first.close()

    second, opened = make_runner([{"text": "unused"}])
    app = AmosApp(second, opened, options=RunOptions(cwd=tmp_path, interactive=True, require_model=False))
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "/session load earlier")
        await wait_for(pilot, lambda: app.runner is not second)
        await pilot.pause()
        assert app.runner.session_id == first_id
        text = shown_text(app)
        assert "› first question" in text and "The first session's answer." in text
    app.runner.close()
