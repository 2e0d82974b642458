"""``/undo`` and ``/diff`` in the TUI through Textual's pilot (issue 20).

A real runner on the scripted provider changes real files; ``/undo`` typed in the app
puts them back, and when the user changed a file after the agent the overwrite question
opens: ``n`` keeps everything, ``y`` overwrites.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from amos.tui.app import AmosApp
from amos.tui.screens.confirm_overwrite import ConfirmOverwriteScreen
from amos.tui.widgets.command_output import CommandOutput

from .test_tui import SIZE, make_runner, shown_text, submit, wait_for, workspace  # noqa: F401 - fixtures

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")

TURNS = [
    {"tool_calls": [
        {"id": "w", "name": "write_file", "arguments": {"path": "notes.txt", "content": "by the agent\n"}},
        {"id": "e", "name": "edit_file", "arguments": {"path": "README.md", "old_text": "tiny",
                                                       "new_text": "agent's"}},
        {"id": "r", "name": "run_command", "arguments": {"command": "rm old.txt"}}]},
    {"text": "changed three files"},
]


def _outputs(app: AmosApp) -> list[str]:
    return [w.text for w in app.conversation.query(CommandOutput)]


async def _run_agent(app: AmosApp, pilot) -> None:
    await submit(pilot, app, "change the files")
    await wait_for(pilot, lambda: app.receipts and not app.busy, 20)


async def test_undo_in_the_tui_puts_the_files_back_and_diff_shows_them(make_runner, workspace: Path):  # noqa: F811
    (workspace / "old.txt").write_text("keep me\n")
    runner, opened = make_runner(TURNS, yes=True)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await _run_agent(app, pilot)
        assert not (workspace / "old.txt").exists() and (workspace / "notes.txt").exists()
        assert "files changed: README.md (modified), notes.txt (created), old.txt (deleted)" in shown_text(app)

        await submit(pilot, app, "/diff")
        await wait_for(pilot, lambda: any("+# agent's project" in t for t in _outputs(app)), 20)

        await submit(pilot, app, "/undo")
        await wait_for(pilot, lambda: any("put back 3 file(s)" in t for t in _outputs(app)), 20)
        assert (workspace / "README.md").read_text() == "# tiny project\n"
        assert (workspace / "old.txt").read_text() == "keep me\n" and not (workspace / "notes.txt").exists()


async def test_undo_asks_before_overwriting_a_file_the_user_changed(make_runner, workspace: Path):  # noqa: F811
    (workspace / "old.txt").write_text("keep me\n")
    runner, opened = make_runner(TURNS, yes=True)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await _run_agent(app, pilot)
        (workspace / "notes.txt").write_text("the user's edit\n")

        await submit(pilot, app, "/undo")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmOverwriteScreen), 20)
        assert "notes.txt" in str(app.screen.conflicts)
        await pilot.press("n")
        await wait_for(pilot, lambda: "kept your changes; nothing was restored" in shown_text(app))
        assert (workspace / "notes.txt").read_text() == "the user's edit\n" and not (workspace / "old.txt").exists()

        await submit(pilot, app, "/undo")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmOverwriteScreen), 20)
        await pilot.press("y")
        await wait_for(pilot, lambda: any("overwritten although changed after the agent: notes.txt" in t
                                          for t in _outputs(app)), 20)
        assert not (workspace / "notes.txt").exists() and (workspace / "old.txt").read_text() == "keep me\n"


async def test_rewind_lists_checkpoints_and_brings_back_files_and_conversation(make_runner, workspace: Path):  # noqa: F811
    (workspace / "old.txt").write_text("keep me\n")
    runner, opened = make_runner([{"text": "just looking"}, *TURNS], yes=True)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "look first")
        await wait_for(pilot, lambda: len(app.receipts) == 1 and not app.busy, 20)
        await _run_agent(app, pilot)
        await submit(pilot, app, "/rewind")
        await wait_for(pilot, lambda: any("look first" in t and "change the files" in t for t in _outputs(app)))

        await submit(pilot, app, "/rewind 1")
        await wait_for(pilot, lambda: "conversation restored to checkpoint 1 (2 messages)" in shown_text(app), 20)
        assert app.runner.session_id == runner.session_id and len(app.runner.messages()) == 2
        assert (workspace / "README.md").read_text() == "# tiny project\n" and (workspace / "old.txt").exists()
        app.runner.close()  # the reopened host (the fixture closes the first one)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_overwrite_dialog_shows_all_of_its_text_at_common_sizes(size):
    from textual.app import App
    from textual.geometry import Region
    from textual.widgets import Static

    from amos.tui.screens.confirm_overwrite import HINT

    conflicts = [{"path": "src/some/long/path/module_name.py", "reason": "changed after the agent's change"},
                 {"path": "b.txt", "reason": "deleted after the agent's change"}]
    app = App()
    async with app.run_test(size=size) as pilot:
        app.push_screen(ConfirmOverwriteScreen("/rewind 3 --both", conflicts))
        await pilot.pause()
        dialog = app.screen.query_one("#confirm-overwrite-dialog")
        inside = dialog.content_region
        assert Region(0, 0, *size).contains_region(dialog.region)
        shown = ""
        for widget in app.screen.query(Static):
            assert inside.contains_region(widget.region), (widget.id, widget.region, inside)
            lines = widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))
            shown += " ".join(strip.text.strip() for strip in lines) + " "
        words = " ".join(shown.split())
        for text in (HINT, "src/some/long/path/module_name.py — changed after the agent's change",
                     "Overwrite them?"):
            assert " ".join(text.split()) in words, (text, words)
