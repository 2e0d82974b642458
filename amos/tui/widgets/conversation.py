"""The conversation view: prompts, streamed assistant text, tool lines, notices, receipts.

The view is a scrolling list of small widgets. It keeps a handle on the assistant
block being streamed and on each tool call's line (by call id), so every event
touches one widget. It follows the bottom while the user has not scrolled up.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from amos.messages import Message
from amos.policy.stop import StopReceipt
from amos.tui.widgets.assistant import AssistantText
from amos.tui.widgets.command_output import CommandOutput
from amos.tui.widgets.notice import NoticeLine
from amos.tui.widgets.receipt import ReceiptPanel
from amos.tui.widgets.tool_line import ToolCallLine

CSS_PATH = Path(__file__).with_suffix(".tcss")


class ConversationView(VerticalScroll, can_focus=False):
    """The transcript of the session as people see it."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self._assistant: AssistantText | None = None
        self._tools: dict[str, ToolCallLine] = {}

    # ------------------------------------------------------------------ adding blocks

    async def _add(self, widget: Widget) -> Widget:
        follow = self.is_vertical_scroll_end or self.max_scroll_y == 0
        await self.mount(widget)
        if follow:
            self.scroll_end(animate=False, immediate=False)
        return widget

    async def add_prompt(self, text: str) -> None:
        """Show a prompt the user sent (or a slash command line they ran).

        Args:
            text: the line, shown literally.
        """
        await self.end_assistant()
        await self._add(Static(Text("› " + text), classes="prompt"))

    async def add_command_output(self, text: str, data: Any = None, ok: bool = True) -> None:
        """Show what a slash command returned.

        Args:
            text: the command's rendering (plain text).
            data: the command's JSON-ready result (tables for ``/help`` and ``/tools``).
            ok: False when the command ran and failed.
        """
        if text:
            await self._add(CommandOutput(text, data, ok))

    async def add_notice(self, text: str, level: str = "info") -> None:
        """Show a host notice apart from assistant prose.

        Args:
            text: the notice, shown literally.
            level: ``info``, ``warning``, ``error``, ``banner`` or ``approval``.
        """
        await self.end_assistant()
        await self._add(NoticeLine(text, level))

    async def add_receipt(self, receipt: StopReceipt) -> None:
        """Show a run's stop receipt panel."""
        await self.end_assistant()
        await self._add(ReceiptPanel(receipt))

    # ------------------------------------------------------------------ streaming

    async def append_assistant(self, delta: str) -> None:
        """Append streamed assistant text to the current block (a new one if none).

        Args:
            delta: the next piece of text.
        """
        if self._assistant is None:
            self._assistant = AssistantText()
            await self._add(self._assistant)
        follow = self.is_vertical_scroll_end
        await self._assistant.write(delta)
        if follow:
            self.scroll_end(animate=False, immediate=False)

    async def end_assistant(self) -> None:
        """Close the block being streamed; the next delta starts a new one."""
        if self._assistant is not None:
            block, self._assistant = self._assistant, None
            await block.finish()

    # ------------------------------------------------------------------ tool calls

    async def tool_status(self, call_id: str, tool: str, summary: str, status: str,
                          duration_s: float | None = None, error: str | None = None) -> ToolCallLine:
        """Add the line of a tool call, or update it when it is already shown.

        Args:
            call_id: the call id.
            tool: tool name.
            summary: one-line summary of the arguments.
            status: ``running``, ``approval`` or a finished status.
            duration_s: run time in seconds once finished.
            error: the outcome's error line, if any.

        Returns:
            The line widget.
        """
        await self.end_assistant()
        line = self._tools.get(call_id)
        if line is None or not line.is_attached:
            line = ToolCallLine(call_id, tool, summary, status)
            self._tools[call_id] = line
            await self._add(line)
        if status != line.status or duration_s is not None or error is not None:
            line.set_status(status, duration_s, error)
        return line

    def tool_line(self, call_id: str) -> ToolCallLine | None:
        """The line shown for ``call_id``, if any."""
        return self._tools.get(call_id)

    # ------------------------------------------------------------------ whole view

    async def clear(self) -> None:
        """Remove everything shown (the session is untouched)."""
        await self.end_assistant()
        self._tools.clear()
        await self.remove_children()

    async def show_history(self, messages: Iterable[Message], summarize=None) -> None:
        """Render a saved transcript: prompts, assistant turns, tool calls and results.

        Args:
            messages: the session's neutral messages, oldest first.
            summarize: optional ``ToolCallPart -> str`` one-line summary of a call;
                without it the line shows the tool name only.
        """
        for message in messages:
            if message.role == "user":
                if message.kind == "feedback":
                    await self.add_notice("host feedback: " + message.text)
                else:
                    await self.add_prompt(message.text)
            elif message.role == "assistant":
                if message.text:
                    await self._add(AssistantText(message.text))
                for call in message.tool_calls:
                    summary = summarize(call) if summarize else ""
                    await self.tool_status(call.call_id, call.tool_name, summary, "not_started")
            else:
                for result in message.tool_results:
                    line = self._tools.get(result.call_id)
                    if line is not None:
                        error = result.content if result.is_error else None
                        line.set_status(result.status, None, error)
        self.scroll_end(animate=False, immediate=False)
