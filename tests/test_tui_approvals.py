"""Approvals in the TUI: what a person sees before deciding, and the three answers.

Real runners on the scripted provider, real tools, driven through Textual's pilot
(fixtures and helpers from ``tests/test_tui.py``). The diff helper is also tested
directly: confinement, size cap, binary and missing files.
"""

from __future__ import annotations

import os
import shlex
import sys

import pytest
from textual.widgets import Static

from amos.engine.previews import MAX_DIFF_BYTES, MAX_DIFF_LINES, call_diff
from amos.tui.app import AmosApp
from amos.tui.screens.approval import ApprovalScreen
from tests import test_tui
from tests.test_tui import notices, submit, wait_for

make_runner = test_tui.make_runner
workspace = test_tui.workspace

SIZE = (100, 32)


def dialog_text(screen: ApprovalScreen) -> str:
    return "\n".join(str(s.content) for s in screen.query(Static))


async def approval(pilot, app: AmosApp) -> ApprovalScreen:
    """Wait for the approval screen and, for file writes, its diff."""
    await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
    screen = app.screen
    assert isinstance(screen, ApprovalScreen)
    if screen.wants_diff:
        await wait_for(pilot, lambda: screen.diff is not None)
        await pilot.pause()
    return screen


def write(path: str, content: str, call_id: str) -> dict:
    return {"id": call_id, "name": "write_file", "arguments": {"path": path, "content": content}}


# ---------------------------------------------------------------------------- the three answers


async def test_approve_once_runs_the_call_and_asks_again_for_the_same_call(make_runner, workspace):
    runner, opened = make_runner([
        {"tool_calls": [write("a.txt", "one\n", "w1")]},
        {"tool_calls": [write("a.txt", "one\n", "w2")]},
        {"text": "done"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "write twice")
        first = await approval(pilot, app)
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen is not first)
        assert app.screen.request.call_id == "w2", "approve once is once"
        await pilot.press("y")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
    assert (workspace / "a.txt").read_text() == "one\n"
    assert runner.session_approvals == 0


async def test_approve_for_the_session_skips_the_same_call_but_asks_for_a_different_one(make_runner, workspace):
    runner, opened = make_runner([
        {"tool_calls": [write("a.txt", "one\n", "w1")]},
        {"tool_calls": [write("a.txt", "one\n", "w2")]},            # identical: not asked
        {"tool_calls": [write("a.txt", "two\n", "w3")]},            # other arguments: asked
        {"expect": {"last_tool_result_contains": "a.txt"}, "text": "done"},
        {"tool_calls": [write("a.txt", "one\n", "w4")]},            # a later run of the session: not asked
        {"text": "again"},
    ])
    app = AmosApp(runner, opened)
    asked: list[str] = []
    original = app._ask_approval

    def counting(request):
        asked.append(request.call_id)
        original(request)

    app._ask_approval = counting
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "write")
        await approval(pilot, app)
        await pilot.press("s")
        await wait_for(pilot, lambda: "w3" in asked)
        screen = await approval(pilot, app)
        assert screen.request.call_id == "w3"
        assert "-one" in screen.diff.lines and "+two" in screen.diff.lines, "the diff is against the file now"
        await pilot.press("y")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert asked == ["w1", "w3"]
        assert app.conversation.tool_line("w2").status == "succeeded"
        texts = [n.text for n in notices(app)]
        assert any(t.startswith("approved for this session: write_file a.txt") for t in texts)
        assert "write_file a.txt (4 bytes): approved for this session earlier (same tool, same arguments); " \
               "not asked again" in texts
        await submit(pilot, app, "once more")
        await wait_for(pilot, lambda: len(app.receipts) == 2 and not app.busy)
        assert asked == ["w1", "w3"], "the approval holds for the rest of the session"
        assert app.conversation.tool_line("w4").status == "succeeded"
    assert runner.session_approvals == 1
    assert (workspace / "a.txt").read_text() == "one\n"


def test_session_approvals_are_not_saved_with_the_session(make_runner, workspace):
    """An approval for the session lives in the runner only: a reopened session asks again."""
    runner, _ = make_runner([{"tool_calls": [write("a.txt", "x", "w1")]}, {"text": "ok"}], interactive=False)
    runner.engine.approvals.for_session.add("anything")
    runner.save()
    text = runner.session_path.read_text()
    assert "anything" not in text and "session_approved" not in text


async def test_deny_with_a_reason_reaches_the_model_and_the_same_call_is_not_asked_again(make_runner, workspace):
    runner, opened = make_runner([
        {"tool_calls": [write("notes.txt", "x", "w1")]},
        {"expect": {"any_message_contains": "use the docs folder"},
         "tool_calls": [write("notes.txt", "x", "w2")]},
        {"expect": {"last_tool_result_contains": "denied again without asking"}, "text": "I'll stop."},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "write the notes")
        await approval(pilot, app)
        await pilot.press("n", *"use the docs folder", "enter")
        # Asking again would leave the run waiting here; it must end on its own.
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert app.receipts[-1].verdict == "ANSWERED", "both `expect`s held: the model saw the reason"
        second = app.conversation.tool_line("w2")
        assert second.status == "denied" and "use the docs folder" in (second.error or "")
    results = [m for m in runner.session.messages if m.role == "tool"]
    assert "denied by the user: use the docs folder" in str(results[0].model_dump())
    assert not (workspace / "notes.txt").exists()


# ---------------------------------------------------------------------------- what the modal shows


async def test_write_file_shows_a_diff_against_the_current_file(make_runner, workspace):
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n", encoding="utf-8")
    runner, opened = make_runner([
        {"tool_calls": [write("calc.py", "def add(a, b):\n    return a + b\n", "w1")]},
        {"tool_calls": [write("pkg/new.py", "x = 1\ny = 2\n", "w2")]},
        {"text": "ok"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "fix add")
        screen = await approval(pilot, app)
        assert screen.diff.lines == ("--- a/calc.py", "+++ b/calc.py", "@@ -1,2 +1,2 @@", " def add(a, b):",
                                     "-    return a - b", "+    return a + b")
        text = dialog_text(screen)
        assert "+    return a + b" in text and "-    return a - b" in text
        assert "effect: write" in text
        assert "in the diff; full text below" in text and "content:\ndef add" in text, "full arguments too"
        assert screen.query_one("#approval-diff").border_title == "diff: calc.py (+1 −1)"
        await pilot.press("y")
        screen = await approval(pilot, app)
        assert screen.request.call_id == "w2"
        assert screen.diff.new_file and screen.diff.lines[:3] == ("--- /dev/null", "+++ b/pkg/new.py",
                                                                   "@@ -0,0 +1,2 @@")
        assert screen.query_one("#approval-diff").border_title == "diff: pkg/new.py (new file, +2 −0)"
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.receipts and not app.busy)


async def test_edit_file_shows_the_replacement_applied_to_the_file(make_runner, workspace):
    (workspace / "calc.py").write_text("".join(f"line {i}\n" for i in range(1, 21)), encoding="utf-8")
    runner, opened = make_runner([
        {"tool_calls": [{"id": "e1", "name": "edit_file",
                         "arguments": {"path": "calc.py", "old_text": "line 10\n", "new_text": "line ten\nline 10b\n"}}]},
        {"tool_calls": [{"id": "e2", "name": "edit_file",
                         "arguments": {"path": "calc.py", "old_text": "no such text", "new_text": "x"}}]},
        {"text": "ok"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "edit")
        screen = await approval(pilot, app)
        assert screen.diff.lines == ("--- a/calc.py", "+++ b/calc.py", "@@ -7,7 +7,8 @@", " line 7", " line 8",
                                     " line 9", "-line 10", "+line ten", "+line 10b", " line 11", " line 12",
                                     " line 13")
        await pilot.press("y")
        screen = await approval(pilot, app)
        assert "old_text is not in the current file, so the edit will fail" in dialog_text(screen)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
    assert "line ten\nline 10b\nline 11" in (workspace / "calc.py").read_text()


async def test_run_command_shows_the_command_line_prominently(make_runner, workspace):
    command = "python3 -m pytest -q tests/test_x.py"
    runner, opened = make_runner([
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": command, "timeout_s": 30}}]},
        {"text": "ok"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "test")
        screen = await approval(pilot, app)
        box = screen.query_one("#approval-command")
        assert box.border_title == "command"
        shown = "\n".join(str(s.content) for s in box.query(Static))
        assert shown == f"$ {command}\n(time limit 30 s)"
        assert f"effect: unknown · runs in {workspace}" in dialog_text(screen)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.receipts and not app.busy)


async def test_a_long_diff_keeps_the_buttons_on_screen(make_runner, workspace):
    (workspace / "big.txt").write_text("".join(f"old {i}\n" for i in range(200)), encoding="utf-8")
    runner, opened = make_runner([{"tool_calls": [write("big.txt", "new\n", "w1")]}, {"text": "ok"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "shrink")
        screen = await approval(pilot, app)
        assert screen.query_one("#approval-dialog").has_class("-tall")
        for button in ("#approve", "#approve-session", "#deny"):
            region = screen.query_one(button).region
            assert region.height and region.bottom <= SIZE[1], f"{button} is off screen"
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.receipts and not app.busy)


async def test_at_80x24_a_short_edit_shows_its_change_and_every_button(make_runner, workspace):
    # A new user at 80x24 saw only the diff's three header lines and no buttons.
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n")
    runner, opened = make_runner([{"tool_calls": [{"id": "e1", "name": "edit_file", "arguments": {
        "path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]}, {"text": "ok"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, app, "fix add")
        screen = await approval(pilot, app)
        await pilot.pause()
        diff = screen.query_one("#approval-diff")
        changed = [i for i, line in enumerate(screen.diff.lines) if line.startswith(("+ ", "+    "))]
        assert changed and diff.content_region.height > max(changed), "the changed lines are in view"
        for button in ("#approve", "#approve-session", "#deny-reason", "#deny"):
            region = screen.query_one(button).region
            assert region.height and region.bottom <= 24 and region.right <= 80, f"{button} is off screen"
        await pilot.press("y")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
    assert "return a + b" in (workspace / "calc.py").read_text()


async def test_typing_ahead_never_answers_the_dialog_and_control_codes_never_disguise_a_command(
        make_runner, workspace, monkeypatch):
    monkeypatch.setattr("amos.tui.screens.approval.ANSWER_DELAY_S", 5.0)  # a loaded CI machine is slow
    runner, opened = make_runner([{"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {
        "command": "touch PWNED # \u001b[14Dls -la        "}}]}, {"text": "ok"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "list the files")
        screen = await approval(pilot, app)
        await pilot.press(*"say yes")  # the next prompt, typed ahead as the dialog opens
        await pilot.pause()
        assert app.screen is screen, "a typed-ahead s or y answered the dialog"
        shown = dialog_text(screen)
        assert "\x1b" not in shown and "\\x1b[14D" in shown and "touch PWNED" in shown
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
    assert not (workspace / "PWNED").exists()


async def test_a_waiting_session_opened_in_the_tui_asks_with_the_diff(make_runner, workspace):
    (workspace / "README.md").write_text("# old\n", encoding="utf-8")
    runner, _ = make_runner([
        {"tool_calls": [write("README.md", "# new\n", "w1"), write("b.txt", "b\n", "w2")]},
        {"text": "both done"},
    ], interactive=False)
    receipts = [e.receipt async for e in runner.run("update") if e.event_kind == "run_finished"]
    assert receipts[0].verdict == "WAITING_UNROUTED" and len(receipts[0].pending_approvals) == 2
    session_id = runner.session_id
    runner.close()

    again, opened = make_runner(session=session_id)
    app = AmosApp(again, opened)
    async with app.run_test(size=SIZE) as pilot:
        screen = await approval(pilot, app)
        assert screen.request.call_id == "w1" and "+# new" in screen.diff.lines and "-# old" in screen.diff.lines
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen.request.call_id == "w2")
        await pilot.press("n", *"not b", "enter")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert app.receipts[-1].verdict == "ANSWERED"
    assert (workspace / "README.md").read_text() == "# new\n" and not (workspace / "b.txt").exists()


# ---------------------------------------------------------------------------- the diff helper


def test_diff_of_a_new_file_without_a_final_newline(tmp_path):
    diff = call_diff("write_file", {"path": "a/b.py", "content": "x = 1\ny = 2"}, tmp_path)
    assert diff.new_file and (diff.added, diff.removed) == (2, 0)
    assert diff.lines == ("--- /dev/null", "+++ b/a/b.py", "@@ -0,0 +1,2 @@", "+x = 1", "+y = 2",
                          "\\ No newline at end of file")


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "~/x", "link/secret.txt"])
def test_diff_never_reads_outside_the_workspace(tmp_path, path):
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET\n")
    os.symlink(outside, ws / "link")
    diff = call_diff("write_file", {"path": path, "content": "x"}, ws)
    assert not diff.lines and "SECRET" not in (diff.note or "")
    assert "the call will fail" in diff.note


def test_diff_of_binary_large_special_and_unreadable_files(tmp_path):
    (tmp_path / "bin.dat").write_bytes(b"\x00\x01binary")
    assert "binary" in call_diff("write_file", {"path": "bin.dat", "content": "x"}, tmp_path).note
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9\n")
    assert "not UTF-8" in call_diff("edit_file", {"path": "latin.txt", "old_text": "caf", "new_text": "x"},
                                    tmp_path).note
    (tmp_path / "big.txt").write_text("x" * (MAX_DIFF_BYTES + 1))
    note = call_diff("write_file", {"path": "big.txt", "content": "y"}, tmp_path).note
    assert f"more than the {MAX_DIFF_BYTES} bytes" in note
    os.mkfifo(tmp_path / "fifo")
    assert "not a regular file" in call_diff("write_file", {"path": "fifo", "content": "y"}, tmp_path).note
    (tmp_path / "folder").mkdir()
    assert "folder" in call_diff("write_file", {"path": "folder", "content": "y"}, tmp_path).note
    if os.geteuid() != 0:
        locked = tmp_path / "locked.txt"
        locked.write_text("x")
        locked.chmod(0)
        assert "cannot be read" in call_diff("write_file", {"path": "locked.txt", "content": "y"}, tmp_path).note
    missing = call_diff("edit_file", {"path": "nope.py", "old_text": "a", "new_text": "b"}, tmp_path)
    assert missing.note.startswith("the file does not exist, so the edit will fail")
    assert missing.lines[-4:] == ("-a", "\\ No newline at end of file", "+b", "\\ No newline at end of file")


def test_diff_shows_control_characters_and_caps_its_length(tmp_path):
    (tmp_path / "t.txt").write_text("a\r\nb\n")
    diff = call_diff("write_file", {"path": "t.txt", "content": "a\nb\x1b[31m\n"}, tmp_path)
    assert "-a␍" in diff.lines and "+b␛[31m" in diff.lines
    assert not any("\x1b" in line or "\r" in line for line in diff.lines)
    long = call_diff("write_file", {"path": "long.txt", "content": "x\n" * (MAX_DIFF_LINES + 50)}, tmp_path)
    assert len(long.lines) == MAX_DIFF_LINES and long.truncated == 53


def test_edit_file_diffs_for_replace_all_and_ambiguous_text(tmp_path):
    (tmp_path / "r.txt").write_text("a\nx\na\n")
    every = call_diff("edit_file", {"path": "r.txt", "old_text": "a", "new_text": "b", "replace_all": True}, tmp_path)
    assert (every.added, every.removed) == (2, 2) and every.note == "replaces all 2 occurrences"
    ambiguous = call_diff("edit_file", {"path": "r.txt", "old_text": "a", "new_text": "b"}, tmp_path)
    assert "matches 2 places and replace_all is not set" in ambiguous.note
    assert call_diff("read_file", {"path": "r.txt"}, tmp_path) is None
    assert call_diff("write_file", {"path": 3}, tmp_path) is None
    assert "no text content" in call_diff("write_file", {"path": "r.txt"}, tmp_path).note


# ---------------------------------------------------------------------------- nothing else blocks


async def test_the_app_stays_live_while_an_approval_waits(make_runner, workspace):
    command = f"{shlex.quote(sys.executable)} -c 'print(1)'"
    runner, opened = make_runner([
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": command}}]},
        {"text": "ok"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "run")
        await approval(pilot, app)
        frame = app._frame
        await pilot.pause(0.5)
        assert app._frame > frame, "the status bar keeps ticking while the runner awaits the decision"
        assert runner.is_running
        await pilot.press("y")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert app.conversation.tool_line("c1").status == "succeeded"


async def test_always_allows_the_pattern_for_the_session_and_says_so(make_runner, workspace):
    runner, opened = make_runner([
        {"tool_calls": [write("notes/a.md", "a\n", "w1")]},
        {"tool_calls": [write("notes/a.md", "b\n", "w2")]},   # the same path: the pattern covers it
        {"tool_calls": [write("other.md", "c\n", "w3")]},     # another path: asked
        {"text": "done"},
    ])
    app = AmosApp(runner, opened)
    asked: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "write")
        screen = await approval(pilot, app)
        assert screen.request.rule == "write_file(/notes/a.md)"
        assert "Always (a)" in [str(b.label) for b in screen.query("Button")]
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen is not screen)
        asked.append(app.screen.request.call_id)
        await pilot.press("n")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert any("allowed for this session: write_file(/notes/a.md)" in n.text for n in notices(app))
    assert asked == ["w3"]
    assert (workspace / "notes" / "a.md").read_text() == "b\n" and not (workspace / "other.md").exists()
    assert {r["rule"] for r in runner.permissions.listing()["rules"]} == {"write_file(/notes/a.md)"}
