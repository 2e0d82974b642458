"""Sessions and quitting for :class:`~amos.tui.app.AmosApp` (a collaborator it owns).

``/session load`` and the session picker, ``/session restore``'s reload, Ctrl+Q and
``/quit`` (autosave), the Ctrl+C quit question, SIGTERM (cancel the run, save, exit
143) and saving on any exit. Presentation only: it calls the runner's host API.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from amos.engine import RunOptions
from amos.errors import AmosError
from amos.slash import parse_line
from amos.tui.screens.confirm_quit import ConfirmQuitScreen
from amos.tui.screens.session_picker import SessionPickerScreen
from amos.tui.texts import demo_banner, resumed_notice

TERMINATE_GRACE_S = 5.0
"""After SIGTERM, how long a run may take to cancel and save before the app exits anyway."""


class SessionControl:
    """Session loading, quitting and signals of the app.

    Args:
        app: the app (its runner, conversation, status and run state are read here).

    Attributes:
        terminated: True once SIGTERM asked the app to exit (:func:`~amos.tui.app.run_tui`
            then returns 143).
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.terminated = False

    # ------------------------------------------------------------------ sessions and quitting

    async def action_quit(self) -> None:
        """Ctrl+Q: exit; a running run is cancelled first (it saves with its receipt).

        A second Ctrl+Q while that cancellation is still under way exits at once.
        """
        if self.app._quit_requested is not None:
            self.app.exit(0)
            return
        await self.quit_app(save=False)

    async def quit_app(self, *, save: bool) -> None:
        """Exit the app, cancelling a run first and saving when autosave is on.

        Never waits inside a message handler: with a run active, the run is cancelled
        and the exit happens when its worker has rendered the last event.

        Args:
            save: save the session before exiting when ``sessions.autosave`` (``/quit``).
        """
        if self.app._busy:
            self.app._quit_requested = save
            self.app.cancel_run()
            return
        if save and self._autosave():
            try:
                self.app.runner.save()
            except AmosError as exc:
                if getattr(exc, "code", None) != "no_store":
                    await self.app.conversation.add_notice(f"not saved: {exc}; Ctrl+Q quits anyway", "error")
                    return
        self.app.exit(0)

    def _autosave(self) -> bool:
        return self.app.runner.autosave

    async def load_session(self, session_id: str, *, reload: bool = False) -> None:
        """Replace the current session with a saved one (``/session load``).

        Args:
            session_id: the resolved id of the session to load.
            reload: reopen the current session from disk (after ``/session restore``).
        """
        conv = self.app.conversation
        if self.app._busy:
            await conv.add_notice("a run is active; wait for it to end or cancel it first", "error")
            return
        if reload and session_id == self.app.runner.session_id:
            self.app.runner.close()  # releases the lock so the session can be reopened; never saves
        elif session_id == self.app.runner.session_id:
            await conv.add_notice(f"session {session_id} is already open")
            return
        base = self.app.options or RunOptions(cwd=self.app.runner.workspace)
        options = RunOptions(config_path=base.config_path, session=session_id, yes=base.yes,
                             no_save=base.no_save, interactive=True, require_model=False, cwd=base.cwd)
        try:
            # Opened on the event loop's thread: the session lock is a thread-local
            # FileLock, so it must be acquired on the thread that releases it.
            from amos.engine import open_host

            runner, opened = open_host(options)
        except AmosError as exc:
            await conv.add_notice(str(exc), "error")
            if reload:  # the old runner let go of the lock for the reopen: take it back
                try:
                    self.app.runner.relock()
                except AmosError as again:
                    await conv.add_notice(f"{again}; this window no longer holds the session — quit and reopen "
                                          "it", "error")
            return
        old, self.app.runner, self.app.opened = self.app.runner, runner, opened
        old.close()
        await conv.clear()
        await self.app._show_history()
        await conv.add_notice(resumed_notice(runner, "loaded"))
        self.app._refresh_status()
        self.app._reload_customs()
        self.app.mcp.start_in_background()
        if runner.is_waiting:
            await conv.add_notice("this session paused waiting for approval; asking you now", "approval")
            self.app._start(runner.resume())

    async def new_session(self) -> None:
        """``/new``: save the current session (when autosave is on and it has messages),
        then open a fresh one with the same model and workspace (a fresh demo copy in
        the demo mode)."""
        app, conv = self.app, self.app.conversation
        if app._busy:
            await conv.add_notice("a run is active; wait for it to end or cancel it first", "error")
            return
        old = app.runner
        if old.autosave and old.messages():
            try:
                old.save()
            except AmosError as exc:
                await conv.add_notice(f"not saved: {exc}; the session stays open", "error")
                return
        base = app.options or RunOptions(cwd=old.workspace)
        demo = app.opened.demo
        options = RunOptions(config_path=base.config_path, model=None if demo else old.model_spec,
                             workspace=None if demo else Path(old.workspace), base_url=base.base_url,
                             yes=base.yes, no_save=base.no_save, interactive=True, require_model=False,
                             cwd=base.cwd, sandbox=base.sandbox, allow=base.allow, deny=base.deny)
        old.close()  # its lock is released before the new host opens
        try:
            from amos.engine import open_host

            runner, opened = open_host(options)
        except AmosError as exc:
            await conv.add_notice(f"{exc}; reopening session {old.session_id}", "error")
            await self.load_session_after_failure(old.session_id)
            return
        app.runner, app.opened = runner, opened
        app.receipts.clear()
        await conv.clear()
        if opened.demo:
            await conv.add_notice(demo_banner(opened.demo_workspace or runner.workspace,
                                              writes_allowed=opened.demo_workspace is not None), "banner")
        await conv.add_notice(f"new session {runner.session_id} (the previous one, {old.session_id}, is saved: "
                              f"/session load {old.session_id})")
        app._refresh_status()
        app._reload_customs()
        app.mcp.start_in_background()

    async def load_session_after_failure(self, session_id: str) -> None:
        """Reopen ``session_id`` after ``/new`` could not open a fresh session."""
        from amos.engine import open_host

        base = self.app.options or RunOptions(cwd=Path.cwd())
        try:
            self.app.runner, self.app.opened = open_host(RunOptions(
                config_path=base.config_path, session=session_id, interactive=True, require_model=False,
                cwd=base.cwd))
        except AmosError as exc:
            await self.app.conversation.add_notice(f"{exc}; quit and reopen amos", "error")

    # ------------------------------------------------------------------ quitting, signals, the session picker

    def confirm_quit(self) -> None:
        """Ask before quitting (Ctrl+C on an idle, empty prompt): ``y`` or Ctrl+C quits
        (saving when autosave is on), anything else stays."""
        if isinstance(self.app.screen, ConfirmQuitScreen):
            return

        async def answered(quit_now: bool | None) -> None:
            if quit_now:
                await self.quit_app(save=bool(self.app.runner.messages()))
            else:
                self.app.show_notice_line("")

        self.app.push_screen(ConfirmQuitScreen(), answered)

    def on_load(self) -> None:
        """Install the SIGTERM handler on the app's event loop (removed on unmount)."""
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self._on_sigterm)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            pass

    def on_unmount(self) -> None:
        """Give SIGTERM back to its previous behaviour."""
        try:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    def _on_sigterm(self) -> None:
        self.terminated = True
        self.app.call_later(self.terminate)

    async def terminate(self) -> None:
        """SIGTERM: cancel a run (it saves with its ``user_abort`` receipt), save, exit.

        The exit happens after at most :data:`TERMINATE_GRACE_S` even if the cancelled
        run or the save does not finish; :func:`run_tui` saves once more (best effort)
        and returns :data:`SIGTERM_EXIT`.
        """
        self.terminated = True
        self.app.set_timer(TERMINATE_GRACE_S, lambda: self.app.exit(0))
        await self.quit_app(save=bool(self.app.runner.messages()))
        if not self.app._busy:  # a failed save leaves the app open; a signal must not
            self.app.exit(0)

    @staticmethod
    def wants_picker(line: str, result: Any) -> bool:
        """``/session load`` without an argument listed the sessions: show the picker."""
        parsed = parse_line(line)
        return (parsed.name == "session" and parsed.rest.split() == ["load"] and result.ok
                and result.action is None and isinstance(result.result, dict)
                and bool(result.result.get("sessions")))

    def pick_session(self, rows: list[dict[str, Any]]) -> None:
        """Show the session picker; the chosen session is loaded (Esc keeps this one).

        Args:
            rows: ``SessionSummary`` dicts, newest first (from ``/session load``).
        """

        async def chosen(session_id: str | None) -> None:
            if session_id:
                await self.load_session(session_id)
            else:
                await self.app.conversation.add_notice("no session loaded")

        self.app.push_screen(SessionPickerScreen(rows, current=self.app.runner.session_id), chosen)
