"""The amos TUI: a Textual app over the runner's host API.

Presentation only (DESIGN.md rule 1): the app opens a runner with
:func:`amos.engine.open_host`, sends prompts with ``Host.run``, runs typed lines
with :func:`amos.slash.run_line`, answers approvals with
``Host.answer_approval`` and renders the :mod:`amos.events` it gets back.
Runs are consumed in a Textual worker so the event loop is never blocked and the
input stays usable; Ctrl+C (or Esc twice) cancels a run, which then ends with a
``user_abort`` stop receipt like any other run (spec/stop-receipts.md).
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Static

from amos.engine import Opened, RunOptions, StopReceipt, masked_text
from amos.errors import AmosError, SlashCommandError
from amos.events import (
    ApprovalRequested,
    ConfirmationRequested,
    Notice,
    RunEvent,
    RunFinished,
    RunStarted,
    StepStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from amos.render import files_changed_line
from amos.slash import (
    COMMANDS,
    CustomCommand,
    LineOutcome,
    custom_commands,
    execute_line,
    parse_line,
    run_line,
)
from amos.tui.app_files import FilesLink
from amos.tui.app_mcp import McpLink
from amos.tui.app_models import ModelPicking
from amos.tui.app_sessions import TERMINATE_GRACE_S, SessionControl  # noqa: F401 - re-exported
from amos.tui.evidence_ids import ShortIds
from amos.tui.live_rate import LiveRate
from amos.tui.screens.approval import ApprovalAnswer, ApprovalScreen
from amos.tui.screens.confirm_done import HINT as HINT_CONFIRM
from amos.tui.screens.confirm_done import ConfirmationAnswer, ConfirmDoneScreen
from amos.tui.screens.confirm_quit import ConfirmQuitScreen
from amos.tui.screens.help import HelpContent, HelpScreen
from amos.tui.texts import SaveTracker, demo_banner, exit_message, resumed_notice
from amos.tui.widgets import (
    assistant,
    command_output,
    conversation,
    notice,
    prompt_input,
    receipt,
    side_panel,
    status_bar,
    tool_line,
)
from amos.tui.widgets.conversation import ConversationView
from amos.tui.widgets.notice import LEVEL_GLYPHS
from amos.tui.widgets.prompt_input import PromptInput, command_hint
from amos.tui.widgets.side_panel import SidePanel, panel_data
from amos.tui.widgets.status_bar import Status, StatusBar, status_phase
from amos.tui.widgets.tool_line import call_detail, exit_code_of

DOUBLE_ESCAPE_S = 1.0
"""Two Esc presses within this many seconds cancel a running run."""

BUSY_NOTICE = "a run is active: wait for it to end, or press Ctrl+C (or Esc twice) to cancel it"
SIGTERM_EXIT = 143
"""Exit status after SIGTERM (128 + 15), as ``amos run`` (spec/cli.md)."""
TICK_S = 0.2
"""How often the status bar's spinner and elapsed time advance while a run is active."""
PANEL_REFRESH_S = 0.1
"""During a run, the side panel is redrawn at most this often (a batch of events, one draw)."""
NARROW_COLUMNS = 100
"""Terminals narrower than this (columns) get the side panel over the conversation, not beside it."""


class AmosApp(App[int]):
    """The interactive front end of one runner (one session at a time).

    Args:
        runner: an opened :class:`~amos.engine.Host` (from :func:`amos.engine.open_host`); the app
            does not close it — :func:`run_tui` does, or the test that opened it.
        opened: what ``open_host`` prepared besides the host (demo mode, warnings).
        options: the options the runner was opened with; ``/session load`` reopens
            with them (config, ``--yes``, ``--no-save``). Optional in tests.

    Attributes:
        runner: the runner in use (``/session load`` replaces it; the replaced one is
            closed by the app).
        receipts: stop receipts of the runs finished in this app, oldest first.
    """

    TITLE = "amos"
    CSS_PATH = [
        Path(__file__).with_suffix(".tcss"),
        conversation.CSS_PATH,
        assistant.CSS_PATH,
        command_output.CSS_PATH,
        tool_line.CSS_PATH,
        notice.CSS_PATH,
        receipt.CSS_PATH,
        prompt_input.CSS_PATH,
        status_bar.CSS_PATH,
        side_panel.CSS_PATH,
    ]
    BINDINGS = [
        Binding("ctrl+c", "interrupt", "Cancel run", show=False, priority=True),
        Binding("escape", "escape", "Cancel run (twice)", show=False),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("f1", "help", "Help", show=False),
        Binding("f2", "toggle_panel", "Side panel", show=False),
        Binding("pageup,shift+pageup", "page_conversation(-1)", "Scroll up", show=False, priority=True),
        Binding("pagedown,shift+pagedown", "page_conversation(1)", "Scroll down", show=False, priority=True),
    ]

    def __init__(self, runner: Any, opened: Opened | None = None, *, options: RunOptions | None = None,
                 first_line: str | None = None) -> None:
        super().__init__()
        self.runner = runner
        self.first_line = first_line
        """A line sent as soon as the app is up (``amos "prompt"``)."""
        self.opened = opened or Opened()
        self.options = options
        self.receipts: list[StopReceipt] = []
        self._busy = False
        self._cancel_pending = False
        self._state = "idle"
        self._step = 0
        self._max_steps = 0
        self._approval: ApprovalScreen | ConfirmDoneScreen | None = None
        self._last_escape = 0.0
        self._notice_transient = True
        self._notice_hint = False
        self._quit_requested: bool | None = None
        self._run_started = 0.0
        self._frame = 0
        self._live_rate = LiveRate()
        self._ticker: Any = None
        self._customs: dict[str, CustomCommand] = {}
        self._mcp_prompts: dict[str, tuple[str, str]] = {}
        self.mcp = McpLink(self)
        """Starts the MCP servers and turns their prompts into commands (``app_mcp``)."""
        self._phase: str | None = None  # the latest phase a Notice of the active run announced
        self._saves = SaveTracker()
        self._panel_timer: Any = None
        self.sessions = SessionControl(self)
        self.files = FilesLink(self)
        self.models = ModelPicking(self)
        """Opens the ``/model`` picker (``app_models``)."""
        self.evidence_ids = ShortIds(self)
        """Short evidence ids in tool lines and the panel; Tab completes them (``evidence_ids``)."""
        """Shows /undo, /rewind and /diff, and asks before overwriting files (``app_files``)."""

    # ------------------------------------------------------------------ sessions and quitting (SessionControl)

    @property
    def terminated(self) -> bool:
        """True once SIGTERM asked the app to exit (:func:`run_tui` then returns 143)."""
        return self.sessions.terminated

    async def action_quit(self) -> None:
        """Ctrl+Q: exit (a running run is cancelled first; a second Ctrl+Q exits at once)."""
        await self.sessions.action_quit()

    async def quit_app(self, *, save: bool) -> None:
        """Exit the app, cancelling a run first and saving when autosave is on."""
        await self.sessions.quit_app(save=save)

    async def load_session(self, session_id: str, *, reload: bool = False) -> None:
        """Replace the current session with a saved one (``/session load``, a restore's reload)."""
        await self.sessions.load_session(session_id, reload=reload)

    def confirm_quit(self) -> None:
        """Ask before quitting (Ctrl+C on an idle, empty prompt)."""
        self.sessions.confirm_quit()

    def pick_session(self, rows: list[dict[str, Any]]) -> None:
        """Show the session picker; the chosen session is loaded."""
        self.sessions.pick_session(rows)

    def on_load(self) -> None:
        """Install the SIGTERM handler on the app's event loop."""
        self.sessions.on_load()

    def on_unmount(self) -> None:
        """Give SIGTERM back to its previous behaviour."""
        self.sessions.on_unmount()

    def _on_sigterm(self) -> None:
        self.sessions._on_sigterm()

    def _wants_picker(self, line: str, result: Any) -> bool:
        return self.sessions.wants_picker(line, result)

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        """Conversation (with the side panel beside it, hidden until F2), notice line,
        input, status bar (top to bottom)."""
        with Horizontal(id="body"):
            yield ConversationView(id="conversation")
            yield SidePanel(id="side-panel")
        yield Static("", id="notice-line")
        yield PromptInput(id="prompt")
        yield StatusBar(id="status")

    @property
    def conversation(self) -> ConversationView:
        """The conversation view."""
        return self.query_one(ConversationView)

    @property
    def prompt_input(self) -> PromptInput:
        """The input line."""
        return self.query_one(PromptInput)

    @property
    def busy(self) -> bool:
        """True from the moment a run is sent until its last event was rendered."""
        return self._busy

    async def on_mount(self) -> None:
        """Banner and warnings, the saved transcript, then resume a WAITING session."""
        conv = self.conversation
        conv.find_call = self._find_call
        if self.opened.demo:
            await conv.add_notice(demo_banner(self.opened.demo_workspace or self.runner.workspace,
                                              writes_allowed=self.opened.demo_workspace is not None), "banner")
        for warning in self.opened.warnings:
            await conv.add_notice(warning, "warning")
        await self._apply_theme()
        await self._show_history()
        if self.options is not None and self.options.session:
            await conv.add_notice(resumed_notice(self.runner))
        self._refresh_status()
        self._fit_panel(self.size.width)
        self._reload_customs()
        self.prompt_input.evidence_completer = self.evidence_ids.complete
        self.mcp.start_in_background()
        self.prompt_input.focus()
        if self.runner.is_waiting:
            await conv.add_notice("this session paused waiting for approval of held tool calls; "
                                  "asking you now", "approval")
            try:
                events = self.runner.resume()
            except AmosError as exc:
                await conv.add_notice(str(exc), "error")
            else:
                self._start(events)
        elif self.first_line and self.first_line.strip():
            self.post_message(PromptInput.Submitted(self.prompt_input, self.first_line))

    async def _show_history(self) -> None:
        runner = self.runner
        messages = runner.messages()
        if messages:
            await self.conversation.show_history(list(messages), summarize=self._summarize)
        if runner.last_receipt is not None:
            await self.conversation.add_receipt(runner.last_receipt)

    def _summarize(self, call: Any) -> str:
        return self.runner.summarize_call(call)

    def _find_call(self, call_id: str) -> Any:
        """The session's tool call with ``call_id`` (an expanded tool block shows its arguments)."""
        return self.runner.find_call(call_id)

    # ------------------------------------------------------------------ status and notices

    def _set_state(self, state: str) -> None:
        self._state = state
        self._refresh_status()

    def _refresh_status(self, *, panel: bool = True) -> None:
        """Redraw the status bar (and, unless ``panel`` is False, the side panel if shown)."""
        runner = self.runner
        last = runner.last_receipt
        usage = runner.usage
        check = runner.check_in_force()
        verdict = last.verdict if last is not None else None
        elapsed = time.monotonic() - self._run_started if self._busy else None
        live = self._live_rate.value() if self._busy else None
        bars = self.query(StatusBar)
        if not bars:  # a worker finishing while the app is closing or between screens
            return
        bars.first().status = Status(
            model=runner.model_spec, session_id=runner.session_id, session_name=runner.session_name,
            workspace=str(runner.workspace), state=self._state, step=self._step, max_steps=self._max_steps,
            last_verdict=verdict, elapsed_s=elapsed, frame=self._frame,
            tokens_in=usage.input_tokens, tokens_out=usage.output_tokens,
            cost_usd=usage.cost_usd if self._show_cost() else None,
            phase=status_phase(self._state, self._phase, verdict), saved=self._saves.marker(runner),
            check=check.summary, check_source=check.source, tokens_estimated=usage.estimated,
            tokens_per_s=live if live is not None else usage.output_tokens_per_s, rate_live=live is not None)
        if panel:
            self._schedule_panel()

    def _show_cost(self) -> bool:
        return self.runner.ui.show_cost

    def _tick(self) -> None:
        """Advance the spinner and the elapsed time while a run is active (liveness)."""
        self._frame += 1
        self._refresh_status(panel=False)

    def _start_ticker(self) -> None:
        self._stop_ticker()
        self._run_started = time.monotonic()
        self._frame = 0
        self._ticker = self.set_interval(TICK_S, self._tick)

    def _stop_ticker(self) -> None:
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.stop()

    def show_notice_line(self, text: str, level: str = "info", *, transient: bool = False) -> None:
        """Put ``text`` on the notice line above the input (the latest host notice).

        Args:
            text: one line, shown literally.
            level: a :class:`~amos.tui.widgets.notice.NoticeLine` level.
            transient: a hint about the run in progress, cleared when the run ends
                (host warnings and errors stay until the next line is sent).
        """
        line = self.query_one("#notice-line", Static)
        glyph = LEVEL_GLYPHS.get(level, "ℹ")
        line.update(Text(f"{glyph} {text}" if text else "", no_wrap=True, overflow="ellipsis"))
        for name in LEVEL_GLYPHS:
            line.set_class(name == level, f"-{name}")
        self._notice_transient = transient or not text
        self._notice_hint = False

    def _show_hint(self, text: str) -> None:
        """A typing hint (usage, completions): replaced or cleared as the input changes."""
        self.show_notice_line(text, "info", transient=True)
        self._notice_hint = True

    # ------------------------------------------------------------------ side panel (F2), help (F1), theme

    @property
    def side_panel(self) -> SidePanel:
        """The side panel beside the conversation."""
        return self.query_one(SidePanel)

    def on_resize(self, event: events.Resize) -> None:
        """Below :data:`NARROW_COLUMNS` the side panel overlays the conversation instead of
        squeezing it (issue 21: at 80 columns F2 left a 44-column conversation)."""
        self._fit_panel(event.size.width)

    def _fit_panel(self, width: int) -> None:
        for body in self.query("#body"):
            body.set_class(width < NARROW_COLUMNS, "-narrow")

    def action_toggle_panel(self) -> None:
        """F2: show or hide the side panel (hidden at start; nothing is remembered)."""
        panel = self.side_panel
        panel.toggle_class("-visible")
        if panel.has_class("-visible"):
            self._refresh_panel()

    def _schedule_panel(self) -> None:
        """Redraw the side panel if shown: at once when idle; during a run, once per
        :data:`PANEL_REFRESH_S` however many events arrive (one draw per batch)."""
        if not self.side_panel.has_class("-visible"):
            return
        if not self._busy:
            self._refresh_panel()
        elif self._panel_timer is None:
            self._panel_timer = self.set_timer(PANEL_REFRESH_S, self._refresh_panel)

    def _refresh_panel(self) -> None:
        timer, self._panel_timer = self._panel_timer, None
        if timer is not None:
            timer.stop()
        panel = self.side_panel
        if panel.has_class("-visible"):
            panel.show(panel_data(self.runner))

    def _note_event(self, event: RunEvent) -> None:
        """Every run event but text: follow the announced loop phase, redraw status and panel."""
        if isinstance(event, TextDelta):
            self._live_rate.feed(event.text)
            return
        if not isinstance(event, Notice):  # a tool call, a step or the run's end: no reply is streaming
            self._live_rate.reset()
        if isinstance(event, (RunStarted, RunFinished)):
            self._phase = None
        elif isinstance(event, Notice):  # the latest notice says which phase the run is in
            self._phase = event.phase
        self._refresh_status()

    def action_help(self) -> None:
        """F1: open the help screen (or close it); not over another dialog (an approval)."""
        from textual.widgets import TextArea  # a multi-line composer takes Shift+Enter / Ctrl+J

        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        if len(self.screen_stack) > 1:
            return
        try:
            result = execute_line(self.runner, "/help").result
        except AmosError:
            result = {"commands": [{"usage": c.usage, "summary": c.summary} for c in COMMANDS.values()]}
        self.push_screen(HelpScreen(HelpContent.from_help_result(
            result, theme=self.theme, config_theme=str(self.runner.ui.theme or ""),
            multiline=isinstance(self.prompt_input, TextArea))))

    async def _apply_theme(self) -> None:
        """Use ``ui.theme`` from the config; an unknown name keeps the default and says so."""
        name = self.runner.ui.theme
        if not name or name == self.theme:
            return
        if name in self.available_themes:
            self.theme = name
            return
        await self.conversation.add_notice(
            f"unknown theme {name!r} in ui.theme; using {self.theme}. Themes: "
            f"{', '.join(sorted(self.available_themes))} (Ctrl+P, then \"theme\", previews them)", "warning")

    # ------------------------------------------------------------------ input

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """PgUp/PgDn scroll the conversation only on the main screen (a dialog scrolls
        its own content)."""
        if action == "page_conversation":
            return self.screen is self.screen_stack[0]
        return True

    def action_page_conversation(self, direction: int) -> None:
        """PgUp / PgDn: scroll the conversation a page from the keyboard (the input keeps
        the focus; scrolling up stops following the stream, the end resumes it)."""
        self.conversation.page(direction)

    def on_key(self, event: events.Key) -> None:
        """A printable key that reached the app (a tool block or the view had the focus)
        goes to the input, focused, so typing is never lost."""
        field = self.prompt_input
        if (event.is_printable and event.character and event.key != "space"  # space expands a block
                and self.screen is self.screen_stack[0] and self.focused is not field):
            event.stop()
            field.focus()
            field.insert(event.character)

    def on_prompt_input_changed(self, event: PromptInput.Changed) -> None:
        """While a slash command is typed, show its usage (or the matching names)."""
        hint = self._custom_hint(event.value) or command_hint(event.value)
        if hint:
            self._show_hint(hint)
        elif self._notice_hint:
            self.show_notice_line("")

    def on_prompt_input_hint(self, message: PromptInput.Hint) -> None:
        """Tab found several completions (or none): say which."""
        self._show_hint(message.text)

    async def on_prompt_input_submitted(self, event: PromptInput.Submitted) -> None:
        """Enter: a slash command runs now; a prompt (or a custom command's prompt) starts
        a run, refused while one is active (the line then stays in the input)."""
        event.stop()
        line = event.value
        if not line.strip():
            return
        try:
            outcome = run_line(self.runner, line, start=False)
        finally:
            if parse_line(line).kind == "command":
                self._reload_customs()
        if outcome.kind == "run":
            if self._busy:
                self.show_notice_line(BUSY_NOTICE, "warning", transient=True)
                return
            self._take_line(line)
            if outcome.expand is not None:  # an MCP prompt: the server renders it first
                self.run_worker(self.mcp.send(outcome), group="mcp-prompt", exit_on_error=False)
                return
            assert outcome.prompt is not None
            await self.send_prompt(outcome.prompt, typed=line if outcome.result is not None else None)
            return
        self._take_line(line)
        await self._show_command(outcome)

    def _take_line(self, line: str) -> None:
        self.prompt_input.remember(masked_text(self.runner, line))  # Up never brings a pasted key back
        self.prompt_input.value = ""
        self.show_notice_line("")

    async def send_prompt(self, prompt: str, typed: str | None = None) -> None:
        """Start a run of ``prompt`` (shown in the conversation) in a worker.

        Args:
            prompt: the prompt text (already stripped of a ``//`` escape).
            typed: the custom command line it came from: shown as typed, the prompt folded under it.
        """
        try:
            events = self.runner.run(prompt, title=typed)
        except AmosError as exc:
            await self.conversation.add_notice(str(exc), "error")
            return
        if typed is not None:  # what was typed is shown masked too: a pasted key never stays on screen
            await self.conversation.add_prompt(masked_text(self.runner, typed),
                                               expansion=masked_text(self.runner, prompt))
        else:
            await self.conversation.add_prompt(masked_text(self.runner, prompt))
        self._start(events)

    async def _show_command(self, outcome: LineOutcome) -> None:
        """Show what a slash command did, and do what it asks of the app."""
        conv = self.conversation
        line = outcome.line
        await conv.add_prompt(masked_text(self.runner, line))
        if outcome.kind == "error":
            exc = outcome.error
            usage = exc.usage if isinstance(exc, SlashCommandError) else None
            await conv.add_notice(f"{exc}; usage: {usage}" if usage else str(exc), "error")
            return
        result = outcome.result
        assert result is not None
        if outcome.finish is not None:  # /compact, /undo…: the work runs in a worker
            await conv.add_notice(result.text)
            self.run_worker(self._finish_command(outcome), group="compact")
            return
        if result.action == "clear":
            await conv.clear()
        elif result.action == "new_session":
            await self.sessions.new_session()
            return
        elif result.action == "quit":
            await self.quit_app(save=True)
            return
        elif self._wants_picker(line, result):
            self.pick_session(result.result["sessions"])
            return
        elif self.models.wants_picker(line, result):
            self.run_worker(self.models.pick(), group="model-picker", exit_on_error=False)
            return
        elif result.action in ("load_session", "reload_session") and result.action_arg:
            await conv.add_command_output(result.text)
            await self.load_session(result.action_arg, reload=result.action == "reload_session")
            if result.action == "reload_session":  # the reload cleared the view: say what happened again
                await conv.add_notice(result.text)
            return
        await conv.add_command_output(result.text, result.result, ok=result.ok, command=line)
        if isinstance(result.result, dict):  # /help: command files that were skipped, and why
            for warning in result.result.get("custom_warnings") or []:
                await conv.add_notice(warning, "warning")
        if outcome.save_error is not None:
            await conv.add_notice(f"not saved: {outcome.save_error}", "error")
        self._refresh_status()

    async def _finish_command(self, outcome: LineOutcome) -> None:
        """Await a long command (``/compact``) while the app stays usable, then show it."""
        conv = self.conversation
        assert outcome.finish is not None
        try:
            done = await outcome.finish()
        except AmosError as exc:
            await conv.add_notice(str(exc), "error")
            return
        if self.files.handles(outcome.line):  # may ask before overwriting, or reopen the session
            await self.files.finished(done)
            return
        result = done.result
        assert result is not None
        await conv.add_command_output(result.text, result.result, ok=result.ok, command=outcome.line)
        if done.save_error is not None:
            await conv.add_notice(f"not saved: {done.save_error}", "error")
        self._refresh_status()

    # ------------------------------------------------------------------ custom commands

    def _reload_customs(self) -> None:
        """Re-read the custom commands (``commands/*.md``) the hints and Tab offer."""
        try:
            self._customs = custom_commands(self.runner)[0]
        except Exception:  # noqa: BLE001 - hints are a convenience; execute_line reports problems
            self._customs = {}
        self._mcp_prompts = self.mcp.commands()
        self.prompt_input.set_custom_commands(
            {**{name: (c.usage, c.description) for name, c in self._customs.items() if name not in COMMANDS},
             **self._mcp_prompts})

    def refresh_commands(self) -> None:
        """Commands changed (MCP servers started): completion, hints and the panel."""
        self._reload_customs()
        self._refresh_status()

    def _custom_hint(self, value: str) -> str | None:
        """The notice-line hint when ``value`` names (or starts) a custom command, else None."""
        if not value.startswith("/") or value.startswith("//") or not (self._customs or self._mcp_prompts):
            return None
        name, space, _ = value[1:].partition(" ")
        custom = self._customs.get(name)  # never a built-in name (those files are skipped)
        if custom is not None:
            return f"{custom.usage} — {custom.description or 'custom prompt'} (custom, {custom.source.name})"
        if name in self._mcp_prompts:
            usage, description = self._mcp_prompts[name]
            return f"{usage} — {description}"
        if space or name in COMMANDS:
            return None
        names = sorted({n for n in [*COMMANDS, *self._customs, *self._mcp_prompts] if n.startswith(name)})
        if not any(n in self._customs or n in self._mcp_prompts for n in names):
            return None
        return "Tab completes: " + " ".join(f"/{n}" for n in names)

    # ------------------------------------------------------------------ runs

    def _start(self, events: AsyncIterator[RunEvent]) -> None:
        self._busy = True
        self._cancel_pending = False
        self._step = 0
        self._start_ticker()
        self._set_state("running")
        self._consume(events)

    @work(exclusive=True, group="run", exit_on_error=False)
    async def _consume(self, events: AsyncIterator[RunEvent]) -> None:
        """Render every event of one run; the runner keeps running while modals are open."""
        conv = self.conversation
        try:
            async for event in events:
                await self._show_event(event)
            await conv.end_assistant()
        except AmosError as exc:
            await conv.add_notice(str(exc), "error")
        except Exception as exc:  # noqa: BLE001 - one notice line, never a traceback
            await conv.add_notice(f"internal error while showing the run: {type(exc).__name__}: {exc}", "error")
        finally:
            self._busy = False
            self._cancel_pending = False
            self._stop_ticker()
            self._close_approval()
            self._set_state("idle")
            if self._quit_requested is not None:
                self.call_later(self.quit_app, save=self._quit_requested)

    async def _show_event(self, event: RunEvent) -> None:
        conv = self.conversation
        self._note_event(event)
        if isinstance(event, TextDelta):
            await conv.append_assistant(event.text)
        elif isinstance(event, ToolCallStarted):
            await conv.tool_status(event.call_id, event.tool, event.summary, "running")
            if self._state == "approval":
                self._set_state("running")
        elif isinstance(event, ToolCallFinished):
            await conv.tool_status(event.call_id, event.tool, event.summary, event.status,
                                   event.duration_s, event.error, exit_code_of(event.content),
                                   evidence_id=event.evidence_id, result=event.content)
        elif isinstance(event, StepStarted):
            await conv.end_assistant()
            self._step, self._max_steps = event.step, event.max_steps
            self._refresh_status()
        elif isinstance(event, ApprovalRequested):
            await conv.tool_status(event.call_id, event.tool, event.summary, "approval")
            self._ask_approval(event)
        elif isinstance(event, ConfirmationRequested):
            self._ask_confirmation(event)
        elif isinstance(event, Notice):
            await conv.add_notice(event.text, event.level)
            if event.level != "info":
                self.show_notice_line(event.text, event.level)
        elif isinstance(event, RunStarted):
            if self._cancel_pending:
                self.runner.cancel()
            if event.resumed:
                await conv.add_notice(f"continuing execution {event.execution_id}")
        elif isinstance(event, RunFinished):
            self._close_approval()
            await conv.add_receipt(event.receipt)
            self.receipts.append(event.receipt)
            files = files_changed_line(event.files_changed)
            if files:
                await conv.add_notice(files)
            if self._notice_transient:
                self.show_notice_line("")

    def _ask_approval(self, request: ApprovalRequested) -> None:
        """Push the approval screen; its answer goes to the runner, which is waiting for it."""
        self._set_state("approval")
        call = f"{request.tool} {call_detail(request.tool, request.summary)}".rstrip()
        always = f" · a always {request.rule}" if request.rule else ""
        self.show_notice_line(f"approval needed: {call} · y once · s for this session{always} · n deny with a "
                              "reason · Esc deny", "approval", transient=True)
        runner = self.runner
        preview = ((lambda: runner.preview_call(request.tool, request.arguments))
                   if runner.previews(request.tool) else None)
        screen = ApprovalScreen(request, runner.workspace, preview)
        self._approval = screen

        async def answered(answer: ApprovalAnswer | None) -> None:
            if self._approval is screen:
                self._approval = None
            answer = answer if answer is not None else ApprovalAnswer(False)
            approved, reason, remember = answer.approved, answer.reason, answer.remember
            # The decision is shown on the call's own line, before the runner goes on
            # (its ToolCallStarted/Finished then update that same line): one line per call.
            self.conversation.tool_decision(request.call_id, approved)
            self.show_notice_line("")
            if answer.always and request.rule:  # the pattern first, so later calls run unasked
                rule = self.runner.permissions.grant(request.rule)
                await self.conversation.add_notice(f"allowed for this session: {rule} (not saved)", "approved")
            self.runner.answer_approval(request.call_id, approved, reason, remember=remember)
            if remember and approved:
                await self.conversation.add_notice(
                    f"approved for this session: {call} — the same call runs without asking until amos exits",
                    "approved")
            if self._busy and self._state == "approval":
                self._set_state("running")

        self.push_screen(screen, answered)

    def _ask_confirmation(self, request: ConfirmationRequested) -> None:
        """``completion.human``: a person confirms or rejects the model's completion claim."""
        self._set_state("approval")
        self.show_notice_line(f"is the work done? {HINT_CONFIRM}", "approval", transient=True)
        screen = ConfirmDoneScreen(request.claim)
        self._approval = screen

        async def answered(answer: ConfirmationAnswer | None) -> None:
            if self._approval is screen:
                self._approval = None
            confirmed, reason = answer if answer is not None else ConfirmationAnswer(False)
            self.show_notice_line("")
            self.runner.answer_confirmation(confirmed, reason)
            await self.conversation.add_notice("you confirmed the work is done" if confirmed else
                                               "you rejected the claim" + (f": {reason}" if reason else ""),
                                               "approved" if confirmed else "warning")
            if self._busy and self._state == "approval":
                self._set_state("running")

        self.push_screen(screen, answered)

    def _close_approval(self) -> None:
        screen, self._approval = self._approval, None
        if screen is not None and screen.is_attached and self.screen is screen:
            self.pop_screen()

    def cancel_run(self) -> None:
        """Cancel the active run; it ends with a ``user_abort`` receipt (BOUNDED_STOP)."""
        if not self._busy:
            return
        if self.runner.is_running:
            self.runner.cancel()
        else:
            self._cancel_pending = True
        self._set_state("cancelling")
        self.show_notice_line("cancelling the run…", "warning", transient=True)

    def action_interrupt(self) -> None:
        """Ctrl+C: cancel a running run; when idle, clear the input, or ask before quitting
        (a second Ctrl+C or ``y`` quits; any other key stays)."""
        if isinstance(self.screen, ConfirmQuitScreen):
            self.screen.dismiss(True)
        elif self._busy:
            self.cancel_run()
        elif self.prompt_input.value:
            self.prompt_input.value = ""
        else:
            self.confirm_quit()

    def action_escape(self) -> None:
        """Esc twice within a second cancels a running run; when idle, Esc returns to the input."""
        if not self._busy:
            self.prompt_input.focus()
            return
        now = time.monotonic()
        if now - self._last_escape <= DOUBLE_ESCAPE_S:
            self._last_escape = 0.0
            self.cancel_run()
        else:
            self._last_escape = now
            self.show_notice_line("press Esc again to cancel the run", "warning", transient=True)


def run_tui(options: RunOptions, first_line: str | None = None) -> int:
    """Open a runner for ``options``, run the TUI until it exits, release the runner.

    With no model chosen (``options.require_model`` False) the runner opens in the
    offline demo mode and the app shows a banner saying so.

    Args:
        options: the command line's options (``interactive`` should be True).
        first_line: a line to send once the app is up (``amos "prompt"``).

    After the app exits, one line on stdout says whether the session was saved and
    how to reopen it (:func:`amos.tui.texts.exit_message`).

    Returns:
        The process exit code (0 after a normal exit).

    Raises:
        AmosError: the runner could not be opened (bad config, unknown or busy
            session…); the CLI prints it as one line.
    """
    from amos.engine import open_host

    runner, opened = open_host(options)
    app = AmosApp(runner, opened, options=options, first_line=first_line)
    opened_digest = session_digest(runner)
    problem = None
    try:
        app.run()
    finally:
        # Also after a crash in the app (then the exception propagates after this).
        problem = save_on_exit(app.runner, opened_digest if app.runner is runner else None)
        app.runner.close()
    if problem:
        print(problem, file=sys.stderr, flush=True)
    print(exit_message(app.runner), flush=True)
    if app.terminated:
        return SIGTERM_EXIT
    return app.return_code or 0


def session_digest(runner: Any) -> str:
    """A digest of the runner's session as it is now (whatever it holds but its save time)."""
    return runner.state_digest()


def save_on_exit(runner: Any, opened_digest: str | None = None) -> str | None:
    """Save the session as the TUI exits, best effort (after a crash too).

    Saved when autosave is on (``sessions.autosave``, not ``--no-save``), the session
    holds something (a message) and it changed since it was opened (``opened_digest``;
    None: assume it changed), so opening a session and quitting does not move it to the
    top of ``amos sessions list``.

    Args:
        runner: the ``Host`` the app ended with (not closed yet).
        opened_digest: :func:`session_digest` when that runner was opened, or None.

    Returns:
        None, or one line saying why the session could not be saved.
    """
    try:
        if not runner.autosave or not runner.messages():
            return None
        if opened_digest is not None and session_digest(runner) == opened_digest:
            return None
        runner.save()
    except Exception as exc:  # noqa: BLE001 - exiting must go on; say what happened
        return f"amos: the session could not be saved on exit: {exc}"
    return None


__all__ = ["AmosApp", "run_tui", "demo_banner", "exit_message"]
