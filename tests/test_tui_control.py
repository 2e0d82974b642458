"""Control of the TUI: cancelling, quitting, signals, the session picker, and staying
usable when something fails.

Real runners on the scripted provider and real tools, through Textual's pilot
(fixtures and helpers from ``tests/test_tui.py``); SIGTERM is also sent for real to
``amos`` running under a pseudo-terminal.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shlex
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from textual.widgets import OptionList

from amos.host import RunOptions
from amos.tui.app import BUSY_NOTICE, SIGTERM_EXIT, AmosApp, run_tui, save_on_exit, session_digest
from amos.tui.screens.confirm_quit import HINT, ConfirmQuitScreen
from amos.tui.screens.session_picker import SessionPickerScreen
from tests import test_tui
from tests.support import collect, finished
from tests.test_tui import notices, shown_text, submit, wait_for, write_script

make_runner = test_tui.make_runner
workspace = test_tui.workspace

SIZE = (100, 32)


def alive(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def group_alive(pgid: int) -> bool:
    """True while any live process is in process group ``pgid``."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def sleeper(workspace: Path) -> str:
    """A command that records its shell's pid (its process group) and a child's, then sleeps 30 s."""
    return (f"sleep 30 & echo $! > {shlex.quote(str(workspace / 'sleep.pid'))}; "
            f"echo $$ > {shlex.quote(str(workspace / 'group.pid'))}; wait")


# ---------------------------------------------------------------------------- cancelling a run


@pytest.mark.parametrize("keys", [("escape", "escape"), ("ctrl+c",)])
async def test_cancelling_a_long_command_kills_its_process_group_at_once(make_runner, workspace, keys):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": sleeper(workspace)}}]},
        {"text": "never asked"},
    ], yes=True)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "sleep a while")
        await wait_for(pilot, lambda: (workspace / "group.pid").exists() and (workspace / "sleep.pid").exists())
        await pilot.pause(0.1)
        group = int((workspace / "group.pid").read_text())
        child = int((workspace / "sleep.pid").read_text())
        assert alive(child) and group_alive(group)
        started = time.monotonic()
        await pilot.press(*keys)
        await wait_for(pilot, lambda: app.receipts and not app.busy, timeout_s=5.0)
        elapsed = time.monotonic() - started
        assert elapsed < 2.0, f"cancelling took {elapsed:.2f} s"
        assert not alive(child) and not group_alive(group), "the command's processes are gone"
        receipt = app.receipts[-1]
        assert (receipt.verdict, receipt.cause) == ("BOUNDED_STOP", "user_abort")
        assert app.conversation.tool_line("c1").status == "cancelled"
        await submit(pilot, app, "/context loop")
        assert "phase" in shown_text(app), "the app is usable after a cancel"


async def test_a_new_prompt_while_a_run_is_active_is_refused_and_never_interleaved(make_runner):
    runner, opened = make_runner([{"delay_ms": 1500, "text": "first answer"}, {"text": "second answer"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "first")
        await wait_for(pilot, lambda: runner.is_running)
        await submit(pilot, app, "second")
        assert app.prompt_input.value == "second"
        assert BUSY_NOTICE in str(app.query_one("#notice-line").content)
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        await submit(pilot, app, "second")
        await wait_for(pilot, lambda: len(app.receipts) == 2 and not app.busy)
    prompts = [m for m in runner.session.messages if m.role == "user"]
    assert [p.parts[0].text for p in prompts] == ["first", "second"]
    assert [r.verdict for r in app.receipts] == ["ANSWERED", "ANSWERED"]


# ---------------------------------------------------------------------------- quitting


async def test_ctrl_c_on_an_idle_prompt_asks_and_another_key_dismisses(make_runner):
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, ConfirmQuitScreen)
        hint = app.screen.query_one("#confirm-quit-hint")
        assert hint.region.width >= len(HINT) and str(hint.content) == HINT, "the question is readable"
        await pilot.press("x")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmQuitScreen) and app.return_code is None
        assert app.prompt_input.value == "", "the dismissing key is not typed into the input"
        app.prompt_input.value = "draft"
        await pilot.press("ctrl+c")
        assert app.prompt_input.value == "" and not isinstance(app.screen, ConfirmQuitScreen), \
            "with text in the input, Ctrl+C clears it"
        await pilot.press("ctrl+c")
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmQuitScreen) and app.return_code is None


@pytest.mark.parametrize("confirm", ["ctrl+c", "y"])
async def test_ctrl_c_then_ctrl_c_or_y_quits_and_saves(make_runner, confirm):
    runner, opened = make_runner([{"text": "an answer"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await submit(pilot, app, "hello")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        runner.session.name = "renamed-after-the-run"  # in memory only: quitting must save it
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, ConfirmQuitScreen)
        await pilot.press(confirm)
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0
    assert json.loads(runner.session_path.read_text())["name"] == "renamed-after-the-run"


async def test_slash_quit_saves_and_exits_zero(make_runner):
    runner, opened = make_runner([{"text": "an answer"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "hello")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        runner.session.name = "before-quit"
        await submit(pilot, app, "/quit")
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0
    saved = json.loads(runner.session_path.read_text())
    assert saved["name"] == "before-quit" and len(saved["messages"]) == 2


async def test_sigterm_handler_cancels_the_run_saves_and_exits(make_runner):
    runner, opened = make_runner([{"delay_ms": 30000, "text": "too late"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "take your time")
        await wait_for(pilot, lambda: runner.is_running)
        app._on_sigterm()  # what the installed SIGTERM handler calls
        await wait_for(pilot, lambda: app.return_code is not None, timeout_s=5.0)
    assert app.terminated
    saved = json.loads(runner.session_path.read_text())
    assert saved["last_stop"]["cause"] == "user_abort"
    assert saved["messages"][0]["parts"][0]["text"] == "take your time"


def _run_under_a_pty(args: list[str], cwd: Path) -> tuple[subprocess.Popen, int, list[bytes]]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100", LINES="30")
    proc = subprocess.Popen([sys.executable, "-m", "amos.cli", *args], cwd=cwd, env=env, stdin=slave,
                            stdout=slave, stderr=slave, start_new_session=True, close_fds=True)
    os.close(slave)
    output: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            output.append(chunk)

    threading.Thread(target=drain, daemon=True).start()
    return proc, master, output


def test_sigterm_to_the_real_tui_cancels_the_run_saves_and_exits_143(tmp_path, workspace, amos_home):
    script = write_script(tmp_path, [{"delay_ms": 30000, "text": "too late"}])
    proc, master, output = _run_under_a_pty(["--script", str(script), "--workspace", str(workspace)], tmp_path)
    try:
        deadline = time.monotonic() + 20
        while b"F2 panel" not in b"".join(output):  # the input's placeholder: the app is up
            assert time.monotonic() < deadline and proc.poll() is None, b"".join(output)[-2000:]
            time.sleep(0.05)
        os.write(master, b"wait for it\r")
        while not list(amos_home.rglob("journal.jsonl")):  # the run started
            assert time.monotonic() < deadline and proc.poll() is None, b"".join(output)[-2000:]
            time.sleep(0.05)
        time.sleep(0.3)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=10)
        assert time.monotonic() - started < 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        time.sleep(0.1)
        os.close(master)
    assert code == SIGTERM_EXIT
    text = b"".join(output).decode(errors="replace")
    assert "saved — reopen with: amos --session" in text
    saved = json.loads(next(amos_home.rglob("session.json")).read_text())
    assert saved["last_stop"]["cause"] == "user_abort"
    assert saved["messages"][0]["parts"][0]["text"] == "wait for it"


# ---------------------------------------------------------------------------- saving on exit


def test_run_tui_saves_after_a_crash_in_the_app(tmp_path, workspace, monkeypatch, capsys):
    script = write_script(tmp_path, [{"text": "hi there"}])
    original_run = AmosApp.run

    async def crash_after_a_run(pilot) -> None:
        app = pilot.app
        await submit(pilot, app, "hello")
        deadline = time.monotonic() + 5
        while not (app.receipts and not app.busy) and time.monotonic() < deadline:
            await pilot.pause(0.02)
        app.runner.session.name = "unsaved-change"

        def boom() -> None:
            raise RuntimeError("a bug in the app")

        app.call_later(boom)
        await pilot.pause(0.2)

    monkeypatch.setattr(AmosApp, "run", lambda self: original_run(self, headless=True, size=(80, 24),
                                                                   auto_pilot=crash_after_a_run))
    code = run_tui(RunOptions(model=f"scripted:{script}", workspace=workspace, interactive=True, cwd=tmp_path))
    assert code == 1
    saved = list(Path(os.environ["AMOS_HOME"]).rglob("session.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["name"] == "unsaved-change"
    assert "saved — reopen with" in capsys.readouterr().out


def test_save_on_exit_skips_an_unchanged_or_empty_session(make_runner):
    runner, _ = make_runner([{"text": "hi"}])
    assert save_on_exit(runner) is None and not runner.session_path.exists(), "nothing sent, nothing saved"
    collect(runner, "hello")
    before = runner.session_path.stat().st_mtime_ns
    digest = session_digest(runner)
    time.sleep(0.01)
    assert save_on_exit(runner, digest) is None
    assert runner.session_path.stat().st_mtime_ns == before, "opening and quitting does not rewrite it"
    runner.session.name = "changed"
    assert save_on_exit(runner, digest) is None
    assert json.loads(runner.session_path.read_text())["name"] == "changed"


# ---------------------------------------------------------------------------- the session picker


async def _saved_sessions(make_runner, amos_home: Path) -> tuple[str, str, str]:
    ids = []
    for name, prompt in (("alpha", "first question"), ("beta", "second question")):
        runner, _ = make_runner([{"text": f"answer to {prompt}"}])
        assert finished([e async for e in runner.run(prompt)]).receipt.verdict == "ANSWERED"
        runner.save(name)
        ids.append(runner.session_id)
        runner.close()
    broken_id = "20200101-000000-bad001"
    folder = next(amos_home.rglob("session.json")).parent.parent / broken_id
    folder.mkdir()
    (folder / "session.json").write_text("{ not json")
    return ids[0], ids[1], broken_id


async def test_session_load_without_an_argument_opens_the_picker(make_runner, amos_home, tmp_path):
    alpha, beta, broken = await _saved_sessions(make_runner, amos_home)
    current, opened = make_runner([{"text": "unused"}])
    app = AmosApp(current, opened, options=RunOptions(cwd=tmp_path, interactive=True, require_model=False))
    async with app.run_test(size=(120, 32)) as pilot:
        await submit(pilot, app, "/session load")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionPickerScreen))
        listing = app.screen.query_one(OptionList)
        rows = {listing.get_option_at_index(i).id: listing.get_option_at_index(i)
                for i in range(listing.option_count)}
        assert set(rows) == {alpha, beta, broken}
        assert rows[broken].disabled and "cannot be opened" in str(rows[broken].prompt)
        assert "beta — second question" in str(rows[beta].prompt) and "ANSWERED" in str(rows[beta].prompt)
        assert listing.get_option_at_index(listing.highlighted).id == beta, "newest first, highlighted"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, SessionPickerScreen) and app.runner is current
        assert "no session loaded" in [n.text for n in notices(app)]

        await submit(pilot, app, "/session load")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionPickerScreen))
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: app.runner is not current)
        await pilot.pause()
        assert app.runner.session_id == alpha
        assert "› first question" in shown_text(app)
    app.runner.close()


# ---------------------------------------------------------------------------- failures leave the app usable


async def test_a_provider_error_is_shown_and_the_app_stays_usable(make_runner):
    runner, opened = make_runner([{"error": {"kind": "rate_limit", "message": "slow down"}},
                                  {"text": "back again"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "hello")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        receipt = app.receipts[-1]
        assert (receipt.verdict, receipt.cause, receipt.reason) == ("FAILED", "provider_error", "rate_limit")
        assert "FAILED  provider_error/rate_limit" in shown_text(app) and "slow down" in shown_text(app)
        await submit(pilot, app, "try again")
        await wait_for(pilot, lambda: len(app.receipts) == 2 and not app.busy)
        assert app.receipts[-1].verdict == "ANSWERED" and "back again" in shown_text(app)


async def test_a_crashing_tool_is_shown_as_failed_and_the_app_stays_usable(make_runner):
    runner, opened = make_runner([
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}}]},
        {"expect": {"last_tool_result_contains": "kaboom"}, "text": "the tool broke"},
        {"text": "still here"},
    ])

    async def boom(args, ctx):
        raise RuntimeError("kaboom")

    runner.tools._tools["read_file"] = dataclasses.replace(runner.tools.get("read_file"), run=boom)
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, "read it")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        line = app.conversation.tool_line("r1")
        assert line.status == "failed" and "kaboom" in (line.error or "")
        assert app.receipts[-1].verdict == "ANSWERED"
        await submit(pilot, app, "again")
        await wait_for(pilot, lambda: len(app.receipts) == 2 and not app.busy)
        assert "still here" in shown_text(app)


@pytest.mark.parametrize(("line", "said"), [
    ("/nope", "unknown command /nope"),
    ("/session restore abc", "usage: /session restore N"),
    ("/context task add x y z", "task state is not enabled"),
    ("/model nope:x", "unknown provider 'nope'"),
])
async def test_a_bad_slash_command_is_reported_and_the_app_stays_usable(make_runner, line, said):
    runner, opened = make_runner([{"text": "fine"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=SIZE) as pilot:
        await submit(pilot, app, line)
        assert said in shown_text(app)
        assert not app.receipts and not app.busy
        await submit(pilot, app, "hello")
        await wait_for(pilot, lambda: app.receipts and not app.busy)
        assert app.receipts[-1].verdict == "ANSWERED"


async def test_two_keys_in_one_burst_never_dismiss_a_dialog_twice(make_runner):
    # A paste or a fast typist delivers both keys before the first dismissal pops the
    # screen; the second dismiss() used to raise ScreenStackError and end the app.
    runner, opened = make_runner([{"text": "unused"}])
    app = AmosApp(runner, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, ConfirmQuitScreen)
        screen = app.screen
        screen.dismiss(False)
        screen.dismiss(False)  # the second key of the burst
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmQuitScreen) and app.return_code is None
        app.prompt_input.value = "still usable"
        assert app.prompt_input.value == "still usable"
