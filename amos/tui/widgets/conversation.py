"""The conversation view: prompts, streamed assistant text, tool blocks, notices, receipts.

The view is a scrolling list of small widgets. It keeps a handle on the assistant
block being streamed and on each tool call's block (by call id), so every event
touches one widget.

Following the bottom uses Textual's anchor: while anchored, every layout keeps the
view scrolled to the end, however the content grew (a Markdown stream appends its
blocks after the delta that caused them). Scrolling up (wheel, scrollbar) releases
the anchor, so reading back is never interrupted; scrolling back to the end, or
sending a line, anchors it again. Expanding a block keeps the block's first line in
view instead of jumping to the end of what it revealed.

A saved transcript is shown a page at a time: the newest :data:`HISTORY_PAGE`
messages are built in one batch (one mount, one layout), and an
:class:`EarlierMessages` line at the top shows the previous page when clicked or
activated with Enter, or when the wheel scrolls past the top — opening a session of
thousands of messages costs the same as opening one of a hundred.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Collapsible, Static

from amos.engine import StopReceipt
from amos.messages import Message, ToolCallPart
from amos.safe_text import printable
from amos.tui.widgets.assistant import AssistantText
from amos.tui.widgets.command_output import CommandOutput
from amos.tui.widgets.notice import NoticeLine
from amos.tui.widgets.receipt import ReceiptPanel
from amos.tui.widgets.tool_line import ToolCallLine, exit_code_of

CSS_PATH = Path(__file__).with_suffix(".tcss")

HISTORY_PAGE = 100
"""Messages of a saved transcript shown at first, and added per click on the "earlier" line."""
PROMPT_MAX_CHARS = 4_000
"""Most characters of a sent prompt the view shows (the run gets all of it)."""
PROMPT_MAX_LINES = 20
"""Most lines of a sent prompt the view shows."""
PARTIAL_WHY = {
    "error": "the provider failed mid-stream",
    "cancelled": "the run was interrupted",
    "doom_loop": "amos stopped it because it kept repeating itself",
}
"""Why a saved assistant turn is partial (``Message.partial``, issue 23), as its mark says it."""

Summarize = Callable[[ToolCallPart], str]


def prompt_text(text: str) -> Text:
    """A sent line as the view shows it: ``› text``, capped with a note when very long.

    Args:
        text: the line as sent (a 1 MB paste included).
    """
    head = text[:PROMPT_MAX_CHARS]
    cut = -1
    for _ in range(PROMPT_MAX_LINES):
        cut = head.find("\n", cut + 1)
        if cut < 0:
            break
    if cut >= 0:
        head = head[:cut]
    shown = Text("› " + head.replace("\n", "\n  "))
    if len(head) < len(text):
        lines = text.count("\n") + 1
        shown.append(f"\n… {len(text) - len(head):,} more characters ({lines:,} lines in all) sent, not shown",
                     style="dim italic not bold")
    return shown


def partial_mark(why: str) -> NoticeLine:
    """The line under a partial assistant turn of a saved transcript (issue 23).

    Args:
        why: the message's ``partial``: ``error``, ``cancelled`` or ``doom_loop``
            (another value is shown as it is).

    Returns:
        A warning notice: ``partial — WHY: this reply was cut off (REASON); it is incomplete``.
    """
    reason = PARTIAL_WHY.get(why, why)
    return NoticeLine(f"partial — {printable(why)}: this reply was cut off ({printable(reason)}); it is incomplete",
                      "warning")


class EarlierMessages(Static, can_focus=True):
    """The line at the top of a replayed transcript that stands for its older messages.

    Args:
        messages: the messages not shown yet, oldest first.
        summarize: one-line summary of a call (see :meth:`ConversationView.show_history`).
    """

    BINDINGS = [Binding("enter,space", "show_more", "Show earlier messages", show=False)]

    def __init__(self, messages: Sequence[Message], summarize: Summarize | None) -> None:
        self.messages = list(messages)
        self.summarize = summarize
        super().__init__(self._label(), classes="earlier")

    def _label(self) -> Text:
        count = len(self.messages)
        page = min(count, HISTORY_PAGE)
        return Text(f"▲ {count:,} earlier message{'s' if count != 1 else ''} · "
                    f"click or Enter to show {'them' if page == count else f'{page} more'}")

    def take_page(self) -> list[Message]:
        """Remove and return the newest page of the messages not shown yet."""
        start = _page_start(self.messages, HISTORY_PAGE)
        page, self.messages = self.messages[start:], self.messages[:start]
        self.update(self._label())
        return page

    async def action_show_more(self) -> None:
        """Show the previous page of the transcript above what is shown."""
        parent = self.parent
        if isinstance(parent, ConversationView):
            await parent.show_earlier(self)

    def focus_on_click(self) -> bool:
        """A click shows the page without taking the focus from the composer."""
        return False

    async def on_click(self, event: events.Click) -> None:
        """A click shows the previous page."""
        event.stop()
        await self.action_show_more()


def _page_start(messages: Sequence[Message], size: int) -> int:
    """Where the last page of ``messages`` starts: never on a tool result (it follows its call)."""
    start = max(0, len(messages) - size)
    while start > 0 and messages[start].role == "tool":
        start -= 1
    return start


class ConversationView(VerticalScroll, can_focus=False):
    """The transcript of the session as people see it.

    Attributes:
        find_call: looks a tool call up by id (the app answers from the session the
            runner is building); an expanded block of a live run shows its arguments
            with it.
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self._assistant: AssistantText | None = None
        self._tools: dict[str, ToolCallLine] = {}
        self.find_call: Callable[[str], ToolCallPart | None] | None = None

    def on_mount(self) -> None:
        """Follow the bottom from the start."""
        self.anchor()

    # ------------------------------------------------------------------ following the bottom

    @property
    def following(self) -> bool:
        """True when new content keeps the view scrolled to the bottom."""
        return self.is_anchored and not self._anchor_released

    def release_anchor(self) -> None:
        """Stop following (the user scrolled); follow again if that left the view at the end.

        A scroll that could not move (the content fits, or the view already shows the
        end) must not stop the view from following what comes next.
        """
        super().release_anchor()
        self.call_after_refresh(self._check_anchor)

    def on_mouse_scroll_up(self) -> None:
        """The user scrolled up to read: stop following until they return or send a line.

        Scrolling past the top of a replayed transcript shows its previous page.
        """
        self.release_anchor()
        self.call_after_refresh(self._earlier_at_top)

    async def _earlier_at_top(self) -> None:
        if self.scroll_y <= 0 and self.children and isinstance(self.children[0], EarlierMessages):
            await self.show_earlier(self.children[0])

    def page(self, direction: int) -> None:
        """Scroll a page up (``direction`` < 0) or down from the keyboard: up stops
        following and, at the top of a replayed transcript, shows its previous page;
        down to the end follows again."""
        self.release_anchor()
        if direction < 0:
            self.scroll_page_up(animate=False)
            self.call_after_refresh(self._earlier_at_top)
        else:
            self.scroll_page_down(animate=False)

    def follow(self) -> None:
        """Scroll to the bottom and follow it again (a line was sent)."""
        self.scroll_end(animate=False, immediate=False)

    def _keep_top_in_view(self, block: Widget) -> None:
        """After ``block`` grew in place, show its first line rather than the new end."""
        if self.following:
            self.release_anchor()
        self.call_after_refresh(self.scroll_to_widget, block, animate=False, top=False)

    def on_tool_call_line_toggled(self, event: ToolCallLine.Toggled) -> None:
        """An expanded tool block stays where it was read from."""
        if event.line.expanded:
            self._keep_top_in_view(event.line)

    def on_collapsible_expanded(self, event: Collapsible.Expanded) -> None:
        """A command's JSON block opened: keep its title in view."""
        self._keep_top_in_view(event.collapsible)

    # ------------------------------------------------------------------ adding blocks

    async def _add(self, widget: Widget) -> Widget:
        await self.mount(widget)
        return widget

    async def add_prompt(self, text: str, expansion: str | None = None) -> None:
        """Show a prompt the user sent (or a slash command line they ran).

        Args:
            text: the line, shown literally (capped at :data:`PROMPT_MAX_LINES` lines
                and :data:`PROMPT_MAX_CHARS` characters, with a note).
            expansion: for a custom command, the prompt the model receives, shown folded
                under the line as typed (issue 21).
        """
        await self.end_assistant()
        self.follow()
        await self._add(Static(prompt_text(printable(text)), classes="prompt"))
        if expansion is not None:
            lines = expansion.count("\n") + 1
            fold = Collapsible(Static(prompt_text(printable(expansion)), classes="expansion-text"),
                               title=f"the prompt sent ({lines} line{'s' if lines != 1 else ''}) · click to expand",
                               collapsed=True, classes="expansion")
            await self._add(fold)

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
        await self._add(NoticeLine(printable(text), level))

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
        await self._assistant.write(delta)

    async def end_assistant(self) -> None:
        """Close the block being streamed; the next delta starts a new one."""
        if self._assistant is not None:
            block, self._assistant = self._assistant, None
            await block.finish()

    # ------------------------------------------------------------------ tool calls

    def _new_line(self, call_id: str, tool: str, summary: str, status: str,
                  call: ToolCallPart | None = None) -> ToolCallLine:
        line = ToolCallLine(call_id, tool, summary, status, call=call, find_call=self._find_call)
        self._tools[call_id] = line
        return line

    def _find_call(self, call_id: str) -> ToolCallPart | None:
        return self.find_call(call_id) if self.find_call is not None else None

    async def tool_status(self, call_id: str, tool: str, summary: str, status: str,
                          duration_s: float | None = None, error: str | None = None,
                          exit_code: int | None = None, *, evidence_id: str | None = None,
                          result: str | None = None) -> ToolCallLine:
        """Add the block of a tool call, or update it when it is already shown.

        Args:
            call_id: the call id.
            tool: tool name.
            summary: one-line summary of the arguments.
            status: ``running``, ``approval`` or a finished status.
            duration_s: run time in seconds once finished.
            error: the outcome's error line, if any.
            exit_code: the command's exit code, when the result reports one.
            evidence_id: the evidence record of the result (``ToolCallFinished.evidence_id``).
            result: the result the model saw (``ToolCallFinished.content``).

        Returns:
            The block widget.
        """
        await self.end_assistant()
        line = self._tools.get(call_id)
        if line is None or not line.is_attached:
            line = self._new_line(call_id, tool, summary, status)
            await self._add(line)
        if (status != line.status or duration_s is not None or error is not None or exit_code is not None
                or evidence_id is not None or result is not None):
            line.set_status(status, duration_s, error, exit_code, evidence_id=evidence_id, result=result)
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
        """The block shown for ``call_id``, if any."""
        return self._tools.get(call_id)

    # ------------------------------------------------------------------ whole view

    async def clear(self) -> None:
        """Remove everything shown (the session is untouched)."""
        await self.end_assistant()
        self._tools.clear()
        await self.remove_children()
        self.follow()

    def _history_widgets(self, messages: Iterable[Message], summarize: Summarize | None) -> list[Widget]:
        """Build (without mounting) the widgets of a run of saved messages."""
        messages = list(messages)
        # Each block is built in its final state: a class changed before mounting costs a restyle.
        results = {r.call_id: r for m in messages if m.role == "tool" for r in m.tool_results}
        widgets: list[Widget] = []
        for message in messages:
            if message.role == "user":
                if message.kind == "feedback":
                    widgets.append(NoticeLine("host feedback: " + message.text, "info"))
                elif message.kind == "summary":
                    widgets.append(NoticeLine(message.text, "info"))
                else:
                    widgets.append(Static(prompt_text(message.text), classes="prompt"))
            elif message.role == "assistant":
                if message.text:
                    widgets.append(AssistantText(message.text))
                if message.partial is not None:
                    widgets.append(partial_mark(message.partial))
                for call in message.tool_calls:
                    summary = summarize(call) if summarize else ""
                    result = results.get(call.call_id)
                    if result is None:
                        line = ToolCallLine(call.call_id, call.tool_name, summary, "not_started", call=call,
                                            find_call=self._find_call)
                    else:
                        line = ToolCallLine(call.call_id, call.tool_name, summary, result.status, call=call,
                                            find_call=self._find_call,
                                            error=result.content if result.is_error else None,
                                            exit_code=exit_code_of(result.content), evidence_id=result.evidence_id,
                                            result=result.content)
                    self._tools[call.call_id] = line
                    widgets.append(line)
        return widgets

    async def show_history(self, messages: Iterable[Message], summarize: Summarize | None = None) -> None:
        """Render a saved transcript: prompts, assistant turns, tool calls and results.

        The newest :data:`HISTORY_PAGE` messages are mounted in one batch; older ones
        wait behind an :class:`EarlierMessages` line.

        Args:
            messages: the session's neutral messages, oldest first.
            summarize: optional ``ToolCallPart -> str`` one-line summary of a call;
                without it the line shows the tool name only.
        """
        await self.end_assistant()
        messages = list(messages)
        start = _page_start(messages, HISTORY_PAGE)
        widgets = self._history_widgets(messages[start:], summarize)
        if start:
            widgets.insert(0, EarlierMessages(messages[:start], summarize))
        if widgets:
            await self.mount_all(widgets)
        self.follow()

    async def show_earlier(self, marker: EarlierMessages) -> None:
        """Show the page of messages before ``marker`` (the "earlier messages" line).

        The view keeps showing what it showed: the new page goes above it.

        Args:
            marker: the line standing for the messages not shown yet.
        """
        if not marker.messages:
            return
        following = [w for w in self.children if w is not marker]
        first = following[0] if following else None
        widgets = self._history_widgets(marker.take_page(), marker.summarize)
        if widgets:
            await self.mount_all(widgets, after=marker)
        if not marker.messages:
            await marker.remove()
        if first is not None:
            self.release_anchor()
            self.call_after_refresh(self.scroll_to_widget, first, animate=False, top=True)
