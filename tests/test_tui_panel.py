"""The side panel (F2), the help screen (F1), the status bar's loop phase and saved
marker, and the theme from the config — through Textual's pilot on real runners.

Fixtures and helpers come from ``tests/test_tui.py`` (real runner, scripted model,
real tools, sessions in the per-test ``AMOS_HOME``).
"""

from __future__ import annotations

import json
from pathlib import Path

from textual.command import CommandPalette

from amos.slash import COMMANDS
from amos.tui.app import AmosApp
from amos.tui.screens.approval import ApprovalScreen
from amos.tui.screens.help import HelpContent, HelpScreen
from amos.tui.texts import SaveTracker
from amos.tui.widgets.side_panel import (
    EvidenceRow,
    LoopData,
    PanelData,
    SidePanel,
    TaskData,
    UsageData,
    evidence_content,
    loop_content,
    usage_content,
)
from amos.tui.widgets.status_bar import Status, StatusBar, format_tokens, status_phase, status_text
from tests import test_tui
from tests.test_tui import notices, submit, wait_for

make_runner = test_tui.make_runner
workspace = test_tui.workspace

SIZE = (120, 40)


def config(tmp_path: Path, **sections: object) -> Path:
    """Write a config file with ``sections`` and return its path."""
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(sections), encoding="utf-8")
    return path


def panel(app: AmosApp) -> SidePanel:
    return app.query_one(SidePanel)


def bar_text(app: AmosApp) -> str:
    return app.query_one(StatusBar).render().plain


async def idle(pilot, app: AmosApp) -> None:
    await wait_for(pilot, lambda: app.receipts and not app.busy)
    await pilot.pause()


# ---------------------------------------------------------------------------- F2: the side panel


async def test_f2_toggles_the_panel_which_starts_hidden(make_runner):
    runner, opened = make_runner([{"text": "hi"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not panel(app).display, "hidden by default"
        conversation_width = app.conversation.size.width
        await pilot.press("f2")
        await pilot.pause()
        assert panel(app).display and panel(app).size.width > 30
        assert app.conversation.size.width < conversation_width, "the panel sits beside the conversation"
        assert app.focused is app.prompt_input, "the input keeps the focus"
        await pilot.press("f2")
        await pilot.pause()
        assert not panel(app).display
        assert app.conversation.size.width == conversation_width


async def test_without_task_state_or_evidence_only_loop_context_and_usage_show(make_runner):
    runner, opened = make_runner([{"text": "hi"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f2")
        await pilot.pause()
        side = panel(app)
        assert side.section_text("task") is None
        assert side.section_text("evidence") is None
        assert side.section_text("loop") == "LOOP\nno run yet in this session"
        assert "CONTEXT\n~" in side.section_text("context") and "compacts at ~25.6k (80%)" in side.section_text(
            "context")
        assert side.section_text("usage").startswith("USAGE\n0 in / 0 out tokens")
        await submit(pilot, app, "say hi")
        await idle(pilot, app)
        loop = side.section_text("loop")
        assert "phase complete · answer_returned" in loop
        assert "1 model call · no loop policy" in loop
        assert " · task " not in side.section_text("context"), "no task view without task state"
        assert "doom-loop" not in loop, "doom-loop detection is off"
        assert "cost: unknown price" in side.section_text("usage"), "the scripted model has no price"


async def test_task_notes_and_evidence_appear_when_enabled_and_follow_commands_and_runs(make_runner, tmp_path):
    cfg = config(tmp_path, task_state={"enabled": True}, evidence={"enabled": True, "max_records": 1},
                 doom_loop=True, loop_policy={"max_recovery_attempts": 2})
    runner, opened = make_runner([
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}},
                        {"id": "r2", "name": "read_file", "arguments": {"path": "missing.md"}}]},
        {"text": "done"},
    ], config_path=cfg)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f2")
        await pilot.pause()
        side = panel(app)
        assert side.section_text("task") == ("TASK NOTES · revision 0\n"
                                             "no notes yet · /context task add 0 objective ID TEXT…")
        assert side.section_text("evidence") == "EVIDENCE\nno tool outcomes stored yet"
        await submit(pilot, app, "/context task add 0 objective goal Keep the public API stable")
        assert side.section_text("task") == "TASK NOTES · revision 1\nobjective goal: Keep the public API stable"
        await submit(pilot, app, "read both")
        await idle(pilot, app)
        evidence = side.section_text("evidence").splitlines()
        stored_id = runner.session.evidence_recent[0]["id"]
        assert evidence[:2] == ["EVIDENCE", "✓ read_file succeeded"]
        assert stored_id.startswith(evidence[2].strip()) and len(evidence[2].strip()) == 13  # its short id
        assert evidence[3:] == ["✗ read_file failed", "  NOT stored · raw result kept"], \
            "the second record does not fit (max_records 1): flagged, no id"
        loop = side.section_text("loop")
        assert "recovery 1/2" in loop and "doom-loop streaks read_file ×1" in loop
        assert "doom-loop verdict none" in loop


async def test_the_cost_line_follows_show_cost(make_runner, tmp_path):
    runner, opened = make_runner([{"text": "hi"}], config_path=config(tmp_path, ui={"show_cost": False}))
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f2")
        await submit(pilot, app, "hi")
        await idle(pilot, app)
        usage = panel(app).section_text("usage")
        assert "in /" in usage and "cost" not in usage


async def test_the_panel_is_redrawn_during_a_run(make_runner, tmp_path):
    cfg = config(tmp_path, evidence={"enabled": True})
    runner, opened = make_runner([
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}}]},
        {"delay_ms": 800, "text": "slowly done"},
    ], config_path=cfg)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f2")
        await submit(pilot, app, "read it")
        await wait_for(pilot, lambda: "read_file succeeded" in (panel(app).section_text("evidence") or ""))
        assert app.busy, "the receipt showed while the run was still going"
        assert "phase running" in panel(app).section_text("loop")
        await idle(pilot, app)


def test_section_drawings_for_edge_cases():
    rows = (EvidenceRow(tool="run_command", status="timed_out", id=None, stored=False),)
    assert evidence_content(rows, 9).plain == ("EVIDENCE · last 1 of 9\n⏱ run_command timed_out\n"
                                               "  NOT stored · raw result kept")
    loop = LoopData(phase="stopped", reason="doom_loop", iterations=6, recovery_attempts=2, max_recovery_attempts=2,
                    doom_streaks={"read_file": 6}, text_streak=None,
                    doom_last={"action": "stop", "detector": "tool", "streak": 6})
    assert loop_content(loop).plain == ("LOOP\nphase stopped · doom_loop\n6 model calls · recovery 2/2\n"
                                        "doom-loop streaks read_file ×6\ndoom-loop verdict stop (tool, streak 6)")
    assert usage_content(UsageData(tokens_in=12_345, tokens_out=678, calls=3, cost_usd=0.0123)).plain == \
        "USAGE\n12.3k in / 678 out tokens\n3 model calls\ncost: $0.01"
    assert usage_content(UsageData()).plain == "USAGE\n0 in / 0 out tokens\n0 model calls\ncost: none yet"
    assert usage_content(UsageData(tokens_in=1200, tokens_out=300, calls=1, estimated=True, tokens_per_s=35.2,
                                   show_cost=False)).plain == \
        "USAGE\n~1.2k in / ~300 out tokens\n~35 tok/s\n1 model call", "estimates marked as on the status bar"
    assert PanelData().task is None and PanelData().evidence is None
    many = TaskData(revision=3, notes=(), actions=2)
    from amos.tui.widgets.side_panel import task_content
    assert task_content(many).plain.endswith("2 action receipts · /context task")
    assert format_tokens(32_000) == "32k" and format_tokens(25_600) == "25.6k" and format_tokens(950) == "950"


# ---------------------------------------------------------------------------- F1: help


async def test_f1_opens_help_with_every_key_and_command_and_esc_f1_q_close_it(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        for closing_key in ("escape", "f1", "q"):
            await pilot.press("f1")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen), closing_key
            content = app.screen.content
            assert [r["usage"] for r in content.commands] == [c.usage for c in COMMANDS.values()]
            assert [r["summary"] for r in content.commands] == [c.summary for c in COMMANDS.values()]
            assert any(r["usage"].startswith("/greet") for r in content.customs), "bundled custom commands"
            assert content.theme == "textual-dark"
            await pilot.press(closing_key)
            await pilot.pause()
            assert not isinstance(app.screen, HelpScreen), closing_key
            assert app.focused is app.prompt_input
        assert app.prompt_input.value == "", "q closed the help; it typed nothing"


async def test_help_lists_a_workspace_custom_command_with_its_file(make_runner, workspace):
    (workspace / "commands").mkdir()
    (workspace / "commands" / "shipit.md").write_text(
        "---\ndescription: Prepare a release\narguments: VERSION\n---\nRelease $1.\n", encoding="utf-8")
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f1")
        await pilot.pause()
        rows = {r["usage"]: r["summary"] for r in app.screen.content.customs}
        assert rows["/shipit VERSION"] == "Prepare a release · custom, commands/shipit.md"


def test_help_content_lists_the_new_line_keys_only_for_a_multiline_input():
    from amos.tui.screens.help import NEWLINE_KEYS, keys_table

    assert keys_table(True).row_count == keys_table(False).row_count + 1
    assert NEWLINE_KEYS[0].startswith("Shift+Enter")
    content = HelpContent.from_help_result({"commands": [{"usage": "/a", "summary": "x"},
                                                         {"usage": "/b", "summary": "y", "custom": True}],
                                            "custom_warnings": ["bad.md: not UTF-8"]})
    assert [r["usage"] for r in content.commands] == ["/a"] and [r["usage"] for r in content.customs] == ["/b"]
    assert content.warnings == ("bad.md: not UTF-8",)


async def test_f1_does_not_open_over_an_approval(make_runner):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},
        {"text": "ok"},
    ])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "write")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.press("escape")
        await idle(pilot, app)


# ---------------------------------------------------------------------------- status bar: phase and saved marker


async def test_the_status_phase_goes_running_recovering_input_needed_then_complete(make_runner, tmp_path,
                                                                                   monkeypatch):
    phases: list[str | None] = []
    original = StatusBar.watch_status

    def record(self, status: Status) -> None:
        if not phases or phases[-1] != status.phase:
            phases.append(status.phase)
        original(self, status)

    monkeypatch.setattr(StatusBar, "watch_status", record)
    cfg = config(tmp_path, loop_policy={"max_recovery_attempts": 2})
    runner, opened = make_runner([
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "missing.md"}}]},
        {"tool_calls": [{"id": "w1", "name": "write_file",
                                          "arguments": {"path": "done.txt", "content": "ok"}}]},
        {"text": "written"},
    ], config_path=cfg, verify="test -f done.txt")
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert bar_text(app).startswith(" ○ idle │"), "no phase before the first run"
        await submit(pilot, app, "make done.txt")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        assert phases[-2:] == ["recovering", "input-needed"], "the failed read's feedback turn asks for approval"
        assert bar_text(app).startswith(" ⏸ input-needed · step 2/20")
        await pilot.press("y")
        await idle(pilot, app)
        assert app.receipts[-1].verdict == "VERIFIED_COMPLETE"
        assert bar_text(app).startswith(" ○ idle · complete │")
    # after the approval the recovery turn goes on; the completion check's notice ends it
    assert phases == [None, "running", "recovering", "input-needed", "recovering", "running", "complete"]


async def test_a_cancelled_run_leaves_the_phase_stopped(make_runner):
    runner, opened = make_runner([{"delay_ms": 5000, "text": "too late"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "wait")
        await wait_for(pilot, lambda: runner.is_running)
        assert " running" in bar_text(app)
        await pilot.press("ctrl+c")
        await idle(pilot, app)
        assert bar_text(app).startswith(" ○ idle · stopped │")


def test_status_phase_derivation():
    assert status_phase("idle", None, None) is None
    assert status_phase("running", None, "ANSWERED") == "running"
    assert status_phase("running", "recovering", None) == "recovering"
    assert status_phase("cancelling", "complete", None) == "running"
    assert status_phase("approval", "recovering", None) == "input-needed"
    assert status_phase("idle", None, "VERIFIED_COMPLETE") == "complete"
    assert status_phase("idle", None, "WAITING_UNROUTED") == "input-needed"
    assert status_phase("idle", None, "BOUNDED_STOP") == "stopped"
    assert status_phase("idle", None, "FALSE_COMPLETE") == "stopped"


def test_the_status_bar_keeps_unsaved_and_drops_saved_and_the_idle_phase_first():
    base = dict(model="openai:gpt-4o-mini", session_id="20261130-034521-8537c7", workspace="/w/project",
                last_verdict="BOUNDED_STOP", phase="stopped", tokens_in=1200, tokens_out=300)
    saved, unsaved = Status(**base, saved="saved"), Status(**base, saved="unsaved")
    assert status_text(saved, 200).plain == (
        " ○ idle · stopped │ openai:gpt-4o-mini │ 1.2k in / 300 out tok │ last ■ BOUNDED_STOP │ "
        "session 20261130-034521-8537c7 │ saved │ /w/project")
    assert status_text(saved, 120).plain == (
        " ○ idle · stopped │ openai:gpt-4o-mini │ 1.2k in / 300 out tok │ last ■ BOUNDED_STOP │ "
        "session 20261130-034521-8537c7"), "the workspace, then 'saved', give way first"
    assert status_text(unsaved, 120).plain == (
        " ○ idle · stopped │ openai:gpt-4o-mini │ 1.5k tok │ last ■ BOUNDED_STOP │ "
        "session 20261130-034521-8537c7 │ unsaved"), "'unsaved' stays; the usage shortens"
    assert status_text(unsaved, 100).plain == (
        " ○ idle │ openai:gpt-4o-mini │ 1.5k tok │ ■ BOUNDED_STOP │ 20261130-034521-8537c7 │ unsaved"), \
        "the labels, then the idle phase, give way before the session"
    assert status_text(unsaved, 60).plain == " ○ idle │ openai:gpt-4o-mini │ 1.5k tok │ last ■ │ unsaved"
    assert status_text(unsaved, 40).plain == " ○ idle │ openai:gpt-4o-mini │ last ■", "last of all, 'unsaved'"
    for width in (120, 100, 80, 60, 40):
        assert len(status_text(unsaved, width).plain) <= width
    assert status_text(Status(model="m:x", phase="complete", last_verdict="VERIFIED_COMPLETE"), 80).plain == \
        " ○ idle · complete │ m:x │ last ✔ VERIFIED_COMPLETE"
    recovering = Status(model="m:x", state="running", phase="recovering", step=3, max_steps=20, elapsed_s=5)
    assert status_text(recovering, 40).plain.startswith(" ⠋ recovering · step 3/20 · 5s")
    waiting = Status(model="m:x", state="approval", phase="input-needed", step=2, max_steps=20)
    assert status_text(waiting, 40).plain.startswith(" ⏸ input-needed · step 2/20")


async def test_saved_marker_with_autosave_no_save_and_autosave_off(make_runner, tmp_path):
    auto, opened = make_runner([{"text": "hi"}])
    app = AmosApp(auto, opened)
    async with app.run_test(size=(200, 24)) as pilot:
        await pilot.pause()
        assert app.query_one(StatusBar).status.saved is None, "nothing sent, nothing saved"
        await submit(pilot, app, "hi")
        await idle(pilot, app)
        assert app.query_one(StatusBar).status.saved == "saved"

    nosave, opened = make_runner([{"text": "hi"}], no_save=True)
    app = AmosApp(nosave, opened)
    async with app.run_test(size=(200, 24)) as pilot:
        await submit(pilot, app, "hi")
        await idle(pilot, app)
        assert app.query_one(StatusBar).status.saved == "unsaved"
        assert "│ unsaved" in bar_text(app)

    manual, opened = make_runner([{"text": "one"}, {"text": "two"}],
                                 config_path=config(tmp_path, sessions={"autosave": False}))
    app = AmosApp(manual, opened)
    async with app.run_test(size=(200, 24)) as pilot:
        await submit(pilot, app, "first")
        await idle(pilot, app)
        assert app.query_one(StatusBar).status.saved == "unsaved"
        await submit(pilot, app, "/session save")
        assert app.query_one(StatusBar).status.saved == "saved"
        await submit(pilot, app, "second")
        await wait_for(pilot, lambda: len(app.receipts) == 2 and not app.busy)
        await pilot.pause()
        assert app.query_one(StatusBar).status.saved == "unsaved"


def test_save_tracker_reads_only_the_host_api(make_runner):
    runner, _ = make_runner([{"text": "hi"}], no_save=True)
    tracker = SaveTracker()
    assert tracker.marker(runner) is None
    runner.session.name = "renamed"
    assert tracker.marker(runner) == "unsaved"


# ---------------------------------------------------------------------------- theme


async def test_ui_theme_from_the_config_is_applied(make_runner, tmp_path):
    runner, opened = make_runner([{"text": "hi"}], config_path=config(tmp_path, ui={"theme": "nord"}))
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "nord"
        assert not [n for n in notices(app) if n.level == "warning"]


async def test_an_unknown_theme_warns_and_keeps_the_default(make_runner, tmp_path):
    runner, opened = make_runner([{"text": "hi"}], config_path=config(tmp_path, ui={"theme": "no-such-theme"}))
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "textual-dark"
        warnings = [n.text for n in notices(app) if n.level == "warning"]
        assert len(warnings) == 1 and "unknown theme 'no-such-theme' in ui.theme; using textual-dark" in warnings[0]
        assert "nord" in warnings[0], "the notice names the themes there are"
        await pilot.press("f1")
        await pilot.pause()
        assert app.screen.content.config_theme == "no-such-theme"


async def test_ctrl_p_opens_textuals_command_palette_with_the_theme_chooser(make_runner):
    runner, opened = make_runner([{"text": "hi"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"theme")
        await pilot.pause(0.3)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CommandPalette)
        assert any(c.title == "Theme" for c in app.get_system_commands(app.screen))
