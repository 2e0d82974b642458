"""What the TUI looks like, compared against accepted SVG snapshots (pytest-textual-snapshot).

The runs are real (scripted model, real tools), made deterministic: a fixed workspace
path (it is in the system prompt, so it moves the token estimates), a fixed session
id, no session store, and tool durations pinned. Regenerate after a deliberate change
with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and look at the SVGs.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from amos.evidence import codec
from amos.host import RunOptions, open_runner
from amos.slash import execute_line
from amos.tui import app as app_module
from amos.tui.screens.approval import ApprovalScreen
from amos.tui.widgets import tool_line

SIZE = (100, 32)
WORKSPACE = Path("/tmp/amos-tui-snapshot/ws")
SESSION_ID = "20260101-000000-snap01"


@pytest.fixture
def snapshot_runner(tmp_path, monkeypatch):
    """Build a runner on a fixed workspace with a fixed session id; close it afterwards."""
    monkeypatch.setattr(tool_line, "format_duration", lambda seconds: "0.01s")
    shutil.rmtree(WORKSPACE.parent, ignore_errors=True)
    WORKSPACE.mkdir(parents=True)
    (WORKSPACE / "calc.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    runners = []

    def make(turns, **options):
        script = tmp_path / "script.json"
        script.write_text(json.dumps({"version": 1, "model": "scripted-test", "turns": turns}), encoding="utf-8")
        runner, opened = open_runner(RunOptions(model=f"scripted:{script}", workspace=WORKSPACE,
                                                interactive=True, no_save=True, cwd=tmp_path,
                                                **{"sandbox": "danger-full-access", **options}))
        runner.session.id = SESSION_ID
        runners.append(runner)
        return app_module.AmosApp(runner, opened)

    yield make
    for runner in runners:
        runner.close()
    shutil.rmtree(WORKSPACE.parent, ignore_errors=True)


async def _send_and_wait(pilot, line: str, done) -> None:
    app = pilot.app
    app.prompt_input.cursor_blink = False
    app.prompt_input.value = line
    await pilot.press("enter")
    deadline = time.monotonic() + 5
    while not done(app):
        assert time.monotonic() < deadline, "the run did not get there in time"
        await pilot.pause(0.02)
    await pilot.pause()


def test_snapshot_of_a_completed_run(snap_compare, snapshot_runner):
    app = snapshot_runner([
        {"text": "I'll read `calc.py` first.",
         "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"expect": {"last_tool_result_contains": "return a + b"},
         "text": "`add` already adds its arguments; **nothing to fix**."},
    ])

    async def run_before(pilot):
        await _send_and_wait(pilot, "is add correct?", lambda a: a.receipts and not a.busy)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_of_the_approval_modal(snap_compare, snapshot_runner):
    app = snapshot_runner([
        {"text": "I'll add a subtraction helper.",
         "tool_calls": [{"id": "w1", "name": "write_file",
                         "arguments": {"path": "sub.py", "content": "def sub(a, b):\n    return a - b\n"}}]},
        {"text": "Done."},
    ])

    async def run_before(pilot):
        await _send_and_wait(pilot, "add sub()", _diff_shown)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def _diff_shown(app) -> bool:
    """The approval modal is up and its diff was computed (in a worker thread)."""
    return isinstance(app.screen, ApprovalScreen) and app.screen.diff is not None


def test_snapshot_of_the_approval_modal_with_an_edit_diff(snap_compare, snapshot_runner):
    app = snapshot_runner([
        {"text": "I'll document `add`.",
         "tool_calls": [{"id": "e1", "name": "edit_file",
                         "arguments": {"path": "calc.py", "old_text": "def add(a, b):\n",
                                       "new_text": "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n"}}]},
        {"text": "Done."},
    ])

    async def run_before(pilot):
        await _send_and_wait(pilot, "document add", _diff_shown)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


PANEL_SIZE = (120, 40)


def test_snapshot_of_the_side_panel(snap_compare, snapshot_runner, tmp_path, monkeypatch):
    ids = iter(range(1, 100))  # evidence ids are time-ordered UUIDs: numbered for the picture
    monkeypatch.setattr(codec, "next_record_id", lambda last, now: f"{next(ids):08d}-0000-7000-8000-000000000000")
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"task_state": {"enabled": True, "owner_id": "snap"},
                                  "evidence": {"enabled": True, "max_records": 1, "scope": {"owner_id": "snap"}},
                                  "doom_loop": True, "loop_policy": {"max_recovery_attempts": 2}}), encoding="utf-8")
    app = snapshot_runner([
        {"text": "Reading both files.",
         "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "calc.py"}},
                        {"id": "r2", "name": "read_file", "arguments": {"path": "missing.py"}}]},
        {"text": "`missing.py` does not exist; `calc.py` adds its arguments."},
    ], config_path=config)
    # Added before the app starts: the command's output names the task by the session's original (random) id.
    assert execute_line(app.runner, "/context task add 0 objective goal Keep add() correct and its API stable").ok

    async def run_before(pilot):
        await _send_and_wait(pilot, "read calc.py and missing.py", lambda a: a.receipts and not a.busy)
        await pilot.press("f2")
        await pilot.pause()

    assert snap_compare(app, terminal_size=PANEL_SIZE, run_before=run_before)


def test_snapshot_of_the_help_screen(snap_compare, snapshot_runner):
    app = snapshot_runner([{"text": "unused"}])

    async def run_before(pilot):
        pilot.app.prompt_input.cursor_blink = False
        await pilot.press("f1")
        await pilot.pause()

    assert snap_compare(app, terminal_size=PANEL_SIZE, run_before=run_before)


# ---------------------------------------------------------------------------- conversation view and tool blocks

BLOCKS_SIZE = (120, 40)


class _StillClock:
    """Stands in for the app module's ``time``: the run's elapsed time stays 0s."""

    @staticmethod
    def monotonic() -> float:
        return 1000.0


def _hold_after(runner, deltas: int):
    """Make ``runner.run`` stop yielding after ``deltas`` text deltas of its second step (held)."""
    import asyncio

    run = runner.run

    async def held(prompt, **options):
        step, seen = 0, 0
        async for event in run(prompt, **options):
            yield event
            if event.event_kind == "step_started":
                step = event.step
            elif event.event_kind == "text_delta" and step == 2:
                seen += 1
                if seen == deltas:
                    await asyncio.Event().wait()  # the model "keeps thinking" for the picture

    runner.run = held


def test_snapshot_of_the_conversation_mid_stream(snap_compare, snapshot_runner, monkeypatch):
    monkeypatch.setattr(app_module, "TICK_S", 3600)  # the spinner stays on its first frame
    monkeypatch.setattr(app_module, "time", _StillClock)
    answer = ("## Findings\n\n`add` returns `a + b`, so **it is correct**. Two things I checked:\n\n"
              "- the tests in `test_calc.py` call it with integers and floats\n"
              "- nothing else in the workspace redefines it\n\n"
              "```python\ndef add(a, b):\n    return a + b\n```\n\n"
              "Next I would look at the error handling for strings, which the current tests never reach.")
    app = snapshot_runner([
        {"text": "I'll read `calc.py` first.",
         "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "calc.py"}},
                        {"id": "l1", "name": "list_dir", "arguments": {"path": "."}}]},
        {"text": answer},
    ])
    _hold_after(app.runner, 50)

    async def run_before(pilot):
        await _send_and_wait(pilot, "is add correct?\nlook at the tests too",
                             lambda a: "```" in "".join(b.text for b in a.conversation.query("AssistantText")))
        await pilot.pause(0.2)  # the stream's last flush

    assert snap_compare(app, terminal_size=BLOCKS_SIZE, run_before=run_before)


def test_snapshot_of_an_expanded_tool_block_with_evidence(snap_compare, snapshot_runner, tmp_path, monkeypatch):
    ids = iter(range(1, 100))  # evidence ids are time-ordered UUIDs: numbered for the picture
    monkeypatch.setattr(codec, "next_record_id", lambda last, now: f"{next(ids):08d}-0000-7000-8000-000000000000")
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"evidence": {"enabled": True, "scope": {"owner_id": "snap"}}}), encoding="utf-8")
    app = snapshot_runner([
        {"text": "I'll read `calc.py` and list the folder.",
         "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "calc.py"}},
                        {"id": "l1", "name": "list_dir", "arguments": {"path": "."}}]},
        {"text": "`add` already adds its arguments; **nothing to fix**."},
    ], config_path=config)

    async def run_before(pilot):
        await _send_and_wait(pilot, "is add correct?", lambda a: a.receipts and not a.busy)
        await pilot.press("tab", "up", "enter")  # the newest block, the one above it, expand
        await pilot.pause()

    assert snap_compare(app, terminal_size=BLOCKS_SIZE, run_before=run_before)


# ---------------------------------------------------------------------------- 80 × 24 (issue 21)

SMALL_SIZE = (80, 24)


def test_snapshot_of_the_side_panel_over_the_conversation_at_80_columns(snap_compare, snapshot_runner, tmp_path,
                                                                         monkeypatch):
    ids = iter(range(1, 100))
    monkeypatch.setattr(codec, "next_record_id", lambda last, now: f"{next(ids):08d}-0000-7000-8000-000000000000")
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"evidence": {"enabled": True, "scope": {"owner_id": "snap"}}}), encoding="utf-8")
    app = snapshot_runner([
        {"text": "Reading it.", "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"text": "`calc.py` adds its arguments; nothing to fix."},
    ], config_path=config)

    async def run_before(pilot):
        await _send_and_wait(pilot, "is add correct?", lambda a: a.receipts and not a.busy)
        await pilot.press("f2")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SMALL_SIZE, run_before=run_before)


def test_snapshot_of_help_context_at_80_columns(snap_compare, snapshot_runner):
    app = snapshot_runner([{"text": "unused"}])

    async def run_before(pilot):
        await _send_and_wait(pilot, "/help context", lambda a: "/context evidence read" in "".join(
            str(getattr(w, "text", "")) for w in a.conversation.children))

    assert snap_compare(app, terminal_size=SMALL_SIZE, run_before=run_before)
