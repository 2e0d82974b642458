"""The conversation view: prompts, streamed assistant text, tool lines, notices, receipts.

The view is a scrolling list of small widgets. It keeps a handle on the assistant
block being streamed and on each tool call's line (by call id), so every event
touches one widget. It follows the bottom while the user has not scrolled up; sending
a line (a prompt or a command) brings it back to the bottom and following again, even
when an expanded block had pushed the bottom out of view.
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
from amos.tui.widgets.tool_line import ToolCallLine, exit_code_of

CSS_PATH = Path(__file__).with_suffix(".tcss")


class ConversationView(VerticalScroll, can_focus=False):
    """The transcript of the session as people see it."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self._assistant: AssistantText | None = None
        self._tools: dict[str, ToolCallLine] = {}
        self._pinned = True

    # ------------------------------------------------------------------ following the bottom

    @property
    def following(self) -> bool:
        """True when new blocks scroll the view to the bottom."""
        return self._pinned or self.is_vertical_scroll_end or self.max_scroll_y == 0

    def on_mouse_scroll_up(self) -> None:
        """The user scrolled up to read: stop following until they send a line."""
        self._pinned = False

    def on_scroll_up(self) -> None:
        """A click above the scrollbar's thumb: the user is reading back."""
        self._pinned = False

    def on_scroll_to(self) -> None:
        """A drag of the scrollbar: follow again only if it ends at the bottom."""
        self._pinned = False

    def _follow(self, follow: bool) -> None:
        if follow:
            self.scroll_end(animate=False, immediate=False)

    # ------------------------------------------------------------------ adding blocks

    async def _add(self, widget: Widget) -> Widget:
        follow = self.following
        await self.mount(widget)
        self._follow(follow)
        return widget

    async def add_prompt(self, text: str) -> None:
        """Show a prompt the user sent (or a slash command line they ran).

        Args:
            text: the line, shown literally.
        """
        await self.end_assistant()
        self._pinned = True
        await self._add(Static(Text("› " + text), classes="prompt"))

    async def add_command_output(self, text: str, data: Any = None, ok: bool = True, command: str = "") -> None:
        """Show what a slash command returned.

        Args:
            text: the command's rendering (plain text).
            data: the command's JSON-ready result (tables for ``/help``, ``/tools``
                and session lists; a trailing JSON block is shown collapsed).
            ok: False when the command ran and failed.
            command: the command line as typed.
        """
        if text:
            await self._add(CommandOutput(text, data, ok, command))

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
        follow = self.following
        await self._assistant.write(delta)
        self._follow(follow)

    async def end_assistant(self) -> None:
        """Close the block being streamed; the next delta starts a new one."""
        if self._assistant is not None:
            block, self._assistant = self._assistant, None
            await block.finish()

    # ------------------------------------------------------------------ tool calls

    async def tool_status(self, call_id: str, tool: str, summary: str, status: str,
                          duration_s: float | None = None, error: str | None = None,
                          exit_code: int | None = None) -> ToolCallLine:
        """Add the line of a tool call, or update it when it is already shown.

        Args:
            call_id: the call id.
            tool: tool name.
            summary: one-line summary of the arguments.
            status: ``running``, ``approval`` or a finished status.
            duration_s: run time in seconds once finished.
            error: the outcome's error line, if any.
            exit_code: the command's exit code, when the result reports one.

        Returns:
            The line widget.
        """
        await self.end_assistant()
        line = self._tools.get(call_id)
        if line is None or not line.is_attached:
            line = ToolCallLine(call_id, tool, summary, status)
            self._tools[call_id] = line
            await self._add(line)
        if status != line.status or duration_s is not None or error is not None or exit_code is not None:
            line.set_status(status, duration_s, error, exit_code)
        return line

    def tool_decision(self, call_id: str, approved: bool) -> None:
        """Show a person's approval decision on the call's own line (one line per call).

        An approved call is marked ``approved`` until it runs and finishes; a denied
        one turns ``denied`` at once (the runner's result then adds the reason).

        Args:
            call_id: the call that was decided.
            approved: the decision.
        """
        line = self._tools.get(call_id)
        if line is None:
            return
        if approved:
            line.set_approved()
        else:
            line.set_status("denied")

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
                elif message.kind == "summary":
                    await self.add_notice(message.text)
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
                        line.set_status(result.status, None, error, exit_code_of(result.content))
        self.scroll_end(animate=False, immediate=False)
