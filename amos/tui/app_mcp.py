"""The TUI's side of MCP servers (issue 18): started in the background when the app
opens, their prompts offered as slash commands, an MCP prompt line expanded and sent.

A collaborator of :class:`~amos.tui.app.AmosApp` (``app.mcp``) that only calls the host
API (``runner.mcp``, ``runner.run``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amos.errors import AmosError, SlashCommandError

if TYPE_CHECKING:
    from amos.slash import LineOutcome
    from amos.tui.app import AmosApp


class McpLink:
    """Starts the session's MCP servers and turns their prompts into commands.

    Args:
        app: the app (its ``runner`` may be replaced when another session is loaded).
    """

    def __init__(self, app: AmosApp):
        self.app = app

    def start_in_background(self) -> None:
        """Start the servers in a worker (so prompts complete and ``/help`` lists them);
        the app stays usable, and a run started meanwhile waits for the same start."""
        if self.app.runner.mcp.configured:
            self.app.run_worker(self._start(self.app.runner), group="mcp", exit_on_error=False)

    async def _start(self, runner: Any) -> None:
        conv = self.app.conversation
        try:
            await runner.mcp.start()
        except Exception as exc:  # noqa: BLE001 - a server problem is a notice, never a crash
            if runner is self.app.runner:
                await conv.add_notice(f"MCP: the servers could not be started: {exc}", "error")
            return
        if runner is not self.app.runner:  # another session was loaded meanwhile
            return
        for notice in runner.mcp.take_notices():
            await conv.add_notice(notice, "warning")
        self.app.refresh_commands()

    def commands(self) -> dict[str, tuple[str, str]]:
        """``{command: (usage, description)}`` of the running servers' prompts."""
        try:
            prompts = self.app.runner.mcp.prompts()
        except Exception:  # noqa: BLE001 - completion is a convenience
            return {}
        return {p.command: (p.usage, f"{p.description} (MCP {p.server})") for p in prompts}

    async def send(self, outcome: LineOutcome) -> None:
        """Have the server render an MCP prompt line, then send it as a prompt; a bad
        argument or a failed server is an error notice (the line was already taken)."""
        conv = self.app.conversation
        assert outcome.expand is not None
        try:
            text = await outcome.expand()
        except SlashCommandError as exc:
            await conv.add_prompt(outcome.line)
            await conv.add_notice(f"{exc}; usage: {exc.usage}" if exc.usage else str(exc), "error")
            return
        except AmosError as exc:
            await conv.add_notice(str(exc), "error")
            return
        await self.app.send_prompt(text)


__all__ = ["McpLink"]
