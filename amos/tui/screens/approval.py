"""The approval prompt: approve a tool call once, or deny it with a reason.

Pushed when the runner emits ``ApprovalRequested`` (spec/stop-receipts.md
"Approvals that pause a run"; the interactive form of it). The screen shows the
tool, its declared effect, its one-line summary and the full arguments, then
dismisses with ``(approved, reason)``; the app hands that to
``AgentRunner.answer_approval``. Keys: ``y`` approve once, ``n`` deny with a reason
(an input appears; Enter sends), ``Esc`` deny.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from amos.events import ApprovalRequested
from amos.tui.widgets.tool_line import call_detail

ApprovalAnswer = tuple[bool, str | None]
"""``(approved, reason)``: what the screen dismisses with."""

_BLOCK_MIN_CHARS = 80


def arguments_text(arguments: Any) -> Text:
    """The call's arguments for people: pretty JSON, long texts shown as blocks.

    String fields that span lines or are long (a file's ``content``, an edit's
    ``old_text``/``new_text``) are shown verbatim under their name instead of as one
    escaped JSON string.

    Args:
        arguments: the decoded JSON arguments of the call (any JSON value).

    Returns:
        Plain text (no markup), ready for a ``Static``.
    """
    blocks: dict[str, str] = {}
    shown = arguments
    if isinstance(arguments, dict):
        shown = {}
        for key, value in arguments.items():
            if isinstance(value, str) and ("\n" in value or len(value) > _BLOCK_MIN_CHARS):
                blocks[key] = value
                lines = value.count("\n") + (0 if value.endswith("\n") else 1)
                shown[key] = f"<{len(value.encode())} bytes, {lines} line{'s' if lines != 1 else ''}: below>"
            else:
                shown[key] = value
    text = Text(json.dumps(shown, indent=2, ensure_ascii=False, default=str))
    for key, value in blocks.items():
        text.append(f"\n\n{key}:\n", style="bold")
        text.append(value)
    return text


class ApprovalScreen(ModalScreen[ApprovalAnswer]):
    """Ask a person to approve or deny one tool call.

    Args:
        request: the ``ApprovalRequested`` event to decide.
    """

    BINDINGS = [
        Binding("y", "approve", "Approve once"),
        Binding("n", "deny_with_reason", "Deny with a reason"),
        Binding("escape", "deny", "Deny"),
    ]
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, request: ApprovalRequested) -> None:
        super().__init__()
        self.request = request

    def compose(self) -> ComposeResult:
        """Title, what the call does, its arguments, the choices and the reason input."""
        req = self.request
        with Vertical(id="approval-dialog") as dialog:
            dialog.border_title = "approval needed"
            title = Text()
            title.append(req.tool, style="bold")
            detail = call_detail(req.tool, req.summary)
            if detail:
                title.append(" " + detail)
            yield Static(title, id="approval-title")
            yield Static(Text(f"effect: {req.effect} · approving runs this call once"), id="approval-summary")
            with VerticalScroll(id="approval-arguments") as scroll:
                scroll.border_title = "arguments"
                yield Static(arguments_text(req.arguments))
            with Horizontal(id="approval-buttons"):
                yield Button("Approve once (y)", id="approve", variant="success")
                yield Button("Deny with reason (n)", id="deny-reason", variant="warning")
                yield Button("Deny (Esc)", id="deny", variant="error")
            yield Input(placeholder="why? (Enter denies with this reason; Esc denies without)",
                        id="approval-reason")

    def on_mount(self) -> None:
        """Focus the arguments (arrow keys scroll them; y/n/Esc decide)."""
        self.query_one("#approval-arguments").focus()

    def action_approve(self) -> None:
        """Approve this call once."""
        self.dismiss((True, None))

    def action_deny(self) -> None:
        """Deny this call without a reason."""
        self.dismiss((False, None))

    def action_deny_with_reason(self) -> None:
        """Show the reason input; Enter there denies with that reason."""
        reason = self.query_one("#approval-reason", Input)
        reason.add_class("-visible")
        reason.focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Buttons do what their keys do."""
        event.stop()
        {"approve": self.action_approve, "deny": self.action_deny,
         "deny-reason": self.action_deny_with_reason}[event.button.id or "deny"]()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Deny with the typed reason (an empty one means no reason)."""
        event.stop()
        self.dismiss((False, event.value.strip() or None))
