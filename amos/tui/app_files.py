"""The TUI's side of ``/undo``, ``/rewind N`` and ``/diff`` (issue 20).

A collaborator of :class:`~amos.tui.app.AmosApp` (``app.files``). ``run_line`` gives
these commands a ``finish`` that the app awaits in a worker; the result comes here:
files changed after the agent's change open :class:`ConfirmOverwriteScreen` (``y``
runs the command again with ``--force``), a rewind that restored the conversation
reopens the session, anything else is shown in the conversation (a diff in color).
Presentation only: it calls ``run_line`` and the host API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amos.errors import AmosError
from amos.slash import parse_line, run_line
from amos.tui.screens.confirm_overwrite import ConfirmOverwriteScreen

if TYPE_CHECKING:
    from amos.slash import LineOutcome
    from amos.tui.app import AmosApp

FILE_COMMANDS = frozenset({"undo", "rewind", "diff"})


class FilesLink:
    """Shows what ``/undo``, ``/rewind`` and ``/diff`` did, and asks before overwriting.

    Args:
        app: the app (its runner may be replaced by a reload).
    """

    def __init__(self, app: AmosApp):
        self.app = app

    @staticmethod
    def handles(line: str) -> bool:
        """True for a line of one of :data:`FILE_COMMANDS`."""
        return parse_line(line).name in FILE_COMMANDS

    async def finished(self, outcome: LineOutcome) -> None:
        """The final result of one of these commands (``outcome`` as ``run_line`` finished it)."""
        conv = self.app.conversation
        result = outcome.result
        assert result is not None
        data = result.result if isinstance(result.result, dict) else {}
        force_line = data.get("force_line")
        if not result.ok and result.error and result.error.get("code") == "FILES_CHANGED" and force_line:
            await conv.add_command_output(result.text, None, ok=False, command=outcome.line)
            self.ask_overwrite(outcome.line, force_line, conflict_rows(data))
            return
        if result.action == "reload_session" and result.action_arg:
            await conv.add_command_output(result.text)
            await self.app.load_session(result.action_arg, reload=True)
            await self.app.conversation.add_notice(result.text)  # the reload cleared the view
            return
        await conv.add_command_output(result.text, result.result, ok=result.ok, command=outcome.line)
        if outcome.save_error is not None:
            await conv.add_notice(f"not saved: {outcome.save_error}", "error")
        self.app._refresh_status()

    def ask_overwrite(self, line: str, force_line: str, conflicts: list[dict[str, str]]) -> None:
        """Ask whether to overwrite the conflicting files; ``y`` runs ``force_line``."""
        command = "/" + (parse_line(line).name or "")

        async def answered(overwrite: bool | None) -> None:
            if not overwrite:
                await self.app.conversation.add_notice(f"{command}: kept your changes; nothing was restored")
                return
            await self.run(force_line)

        self.app.push_screen(ConfirmOverwriteScreen(command, conflicts), answered)

    async def run(self, line: str) -> None:
        """Run a file command line (the forced one) as if typed, in a worker."""
        outcome = run_line(self.app.runner, line)
        await self.app.conversation.add_prompt(line)
        if outcome.finish is None:  # refused at once (a run started meanwhile)
            shown = outcome.result.text if outcome.result is not None else str(outcome.error)
            await self.app.conversation.add_notice(shown, "error")
            return
        self.app.run_worker(self._finish(outcome), group="files", exit_on_error=False)

    async def _finish(self, outcome: LineOutcome) -> None:
        assert outcome.finish is not None
        try:
            done = await outcome.finish()
        except AmosError as exc:
            await self.app.conversation.add_notice(str(exc), "error")
            return
        await self.finished(done)


def conflict_rows(data: Any) -> list[dict[str, str]]:
    """The ``{"path", "reason"}`` conflict rows of an ``/undo`` or ``/rewind`` result."""
    if not isinstance(data, dict):
        return []
    files = data.get("files") if isinstance(data.get("files"), dict) else data
    return list(files.get("conflicts") or [])
