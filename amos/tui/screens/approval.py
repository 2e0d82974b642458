"""The approval prompt: approve a tool call once or for the session, or deny it.

Pushed when the runner emits ``ApprovalRequested`` (spec/stop-receipts.md
"Approvals that pause a run"; the interactive form of it). The screen shows the
tool, its declared effect, what it would do and the full arguments:

- ``write_file`` / ``edit_file``: a unified diff against the file in the workspace
  now (the host's ``preview_call``, computed in a worker thread so a large file
  never freezes the app), with a note when the file cannot be diffed or the call will
  fail;
- ``run_command``: the command line, prominently, and where it runs;
- the arguments as pretty JSON (long texts verbatim below it).

It dismisses with an :class:`ApprovalAnswer`; the app hands it to
``Host.answer_approval``. Keys: ``y`` approve once, ``s`` approve this exact
call (same tool, same arguments) for the rest of the session, ``n`` deny with a
reason (an input appears; Enter sends), ``Esc`` deny.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Static

from amos.engine import FileDiff
from amos.events import ApprovalRequested
from amos.safe_text import capped, printable
from amos.tui.screens.once import DismissOnce
from amos.tui.widgets.tool_line import call_detail


class ApprovalAnswer(NamedTuple):
    """What the approval screen dismisses with.

    Attributes:
        approved: run the call.
        reason: why it was denied (None: no reason given, or approved).
        remember: approved for the rest of the session (same tool, same arguments).
        always: approved, and the request's ``rule`` (a pattern) granted for the rest of
            this amos session (issue 19; never saved).
    """

    approved: bool
    reason: str | None = None
    remember: bool = False
    always: bool = False


_BLOCK_MIN_CHARS = 80

ANSWER_DELAY_S = 0.6
"""y / s / n (and the buttons) do nothing this long after the dialog opens
(type-ahead protection); Esc (deny) always works."""

MAX_SHOWN_CHARS = 20_000
"""Longest text of one argument drawn in the dialog (characters); the diff shows files."""
_DIFF_STYLES = {"+": "green", "-": "red", "@": "cyan", "\\": "dim"}


def arguments_text(arguments: Any, in_diff: frozenset[str] = frozenset()) -> Text:
    """The call's arguments for people: pretty JSON, long texts shown as blocks.

    String fields that span lines or are long (a file's ``content``, an edit's
    ``old_text``/``new_text``) are shown verbatim under their name instead of as one
    escaped JSON string.

    Args:
        arguments: the decoded JSON arguments of the call (any JSON value).
        in_diff: names of fields the diff above already shows; their JSON value
            says so (their full text still follows below the JSON).

    Returns:
        Plain text (no markup), ready for a ``Static``.
    """
    blocks: dict[str, str] = {}
    shown = arguments
    if isinstance(arguments, dict):
        shown = {}
        for key, value in arguments.items():
            if isinstance(value, str) and ("\n" in value or len(value) > _BLOCK_MIN_CHARS or key in in_diff):
                blocks[key] = value
                lines = value.count("\n") + (0 if value.endswith("\n") or not value else 1)
                where = "in the diff; full text below" if key in in_diff else "below"
                shown[key] = f"<{len(value.encode())} bytes, {lines} line{'s' if lines != 1 else ''}: {where}>"
            else:
                shown[key] = value
    text = Text(printable(capped(json.dumps(shown, indent=2, ensure_ascii=False, default=str), MAX_SHOWN_CHARS)))
    for key, value in blocks.items():
        text.append(f"\n\n{printable(str(key))}:\n", style="bold")
        text.append(printable(capped(value, MAX_SHOWN_CHARS)))  # a 5 MB write took 40 s to draw
    return text


def diff_text(diff: FileDiff) -> Text:
    """A ``FileDiff`` (the host's preview) as coloured text (added green, removed red).

    Args:
        diff: the diff to show.

    Returns:
        Text without markup: the note (if any), then the diff lines, then how many
        lines were left out.
    """
    text = Text()
    if diff.note:
        text.append(f"⚠ {diff.note}", style="bold yellow")
    for line in diff.lines:
        if text:
            text.append("\n")
        header = line.startswith(("--- ", "+++ "))
        text.append(line, style="bold" if header else _DIFF_STYLES.get(line[:1], ""))
    if diff.truncated:
        text.append(f"\n… {diff.truncated} more diff lines not shown", style="dim")
    if not text:
        text.append("no change", style="dim")
    return text


def diff_title(diff: FileDiff) -> str:
    """The diff box's title: the path and the size of the change."""
    if not diff.shown:
        return f"diff: {diff.path}"
    what = "new file, " if diff.new_file else ""
    return f"diff: {diff.path} ({what}+{diff.added} −{diff.removed})"


def effect_line(request: ApprovalRequested, workspace: Path | None) -> str:
    """The line under the title: the declared effect and what approving does."""
    text = f"effect: {request.effect}"
    if request.tool == "run_command" and workspace is not None:
        text += f" · runs in {workspace}"
    return text + " · s approves this exact call (same tool and arguments) for the session"


def command_text(arguments: Any) -> Text | None:
    """``$ COMMAND`` for a ``run_command`` call (None without a string command)."""
    if not isinstance(arguments, dict) or not isinstance(arguments.get("command"), str):
        return None
    text = Text("$ ", style="bold")
    text.append(printable(arguments["command"]), style="bold")  # ESC[14D could disguise it
    timeout = arguments.get("timeout_s")
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        text.append(f"\n(time limit {timeout:g} s)", style="dim")
    return text


class ApprovalScreen(DismissOnce[ApprovalAnswer]):
    """Ask a person to approve or deny one tool call.

    Args:
        request: the ``ApprovalRequested`` event to decide.
        workspace: the host's workspace (named for ``run_command``), or None.
        preview: computes the call's diff (the host's ``preview_call``; run in a worker
            thread), or None when the call has none (the arguments only).

    Attributes:
        diff: the computed diff once the worker finished (None before, and for
            tools without one).
    """

    BINDINGS = [
        Binding("y", "approve", "Approve once"),
        Binding("s", "approve_session", "Approve for the session"),
        Binding("a", "approve_always", "Always allow the pattern"),
        Binding("n", "deny_with_reason", "Deny with a reason"),
        Binding("escape", "deny", "Deny"),
    ]
    CSS_PATH = Path(__file__).with_suffix(".tcss")

    def __init__(self, request: ApprovalRequested, workspace: Path | None = None,
                 preview: Callable[[], FileDiff | None] | None = None) -> None:
        super().__init__()
        self.request = request
        self.workspace = workspace
        self.preview = preview
        self.diff: FileDiff | None = None

    @property
    def wants_diff(self) -> bool:
        """True when this call gets a diff (the host previews a file-writing call)."""
        return self.preview is not None

    def compose(self) -> ComposeResult:
        """Title, effect, the diff or command, the arguments, the choices, the reason input."""
        req = self.request
        with Vertical(id="approval-dialog", classes="-diff" if self.wants_diff else "") as dialog:
            dialog.border_title = "approval needed"
            title = Text()
            title.append(printable(req.tool), style="bold")
            detail = call_detail(req.tool, req.summary)
            if detail:
                title.append(" " + printable(detail))
            yield Static(title, id="approval-title")
            yield Static(Text(effect_line(req, self.workspace)), id="approval-summary")
            if req.escalation:
                why = printable(req.justification or "(the model gave no reason)")
                yield Static(Text(f"asks to run OUTSIDE the sandbox (full access to your files and network): "
                                  f"{why}", style="bold red"), id="approval-escalation")
            command = command_text(req.arguments) if req.tool == "run_command" else None
            if command is not None:
                with VerticalScroll(id="approval-command") as box:
                    box.border_title = "command"
                    yield Static(command)
            if self.wants_diff:
                path = req.arguments.get("path") if isinstance(req.arguments, dict) else None
                with VerticalScroll(id="approval-diff") as box:
                    box.border_title = f"diff: {path}" if isinstance(path, str) else "diff"
                    yield Static(Text("computing the diff…", style="dim"), id="approval-diff-text")
            with VerticalScroll(id="approval-arguments") as scroll:
                scroll.border_title = "arguments"
                yield Static(arguments_text(req.arguments), id="approval-arguments-text")
            with Horizontal(id="approval-buttons"):
                yield Button("Yes, once (y)", id="approve", variant="success")
                yield Button("Session (s)", id="approve-session", variant="primary",
                             tooltip="approve this exact call for the rest of this amos session")
                if req.rule:
                    yield Button("Always (a)", id="approve-always", variant="primary",
                                 tooltip=f"allow {req.rule} for the rest of this amos session (not saved)")
                yield Button("Deny… (n)", id="deny-reason", variant="warning")
                yield Button("Deny (Esc)", id="deny", variant="error")
            yield Input(placeholder="why? (Enter denies with this reason; Esc denies without)",
                        id="approval-reason")

    def on_mount(self) -> None:
        """Focus the diff (or the arguments): arrow keys scroll; y/s/n/Esc decide (y, s
        and n only after :data:`ANSWER_DELAY_S`)."""
        self._opened_at = time.monotonic()
        focus = "#approval-diff" if self.wants_diff else "#approval-arguments"
        self.query_one(focus).focus()
        if self.wants_diff:
            self._compute_diff()

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False)
    def _compute_diff(self) -> None:
        """Read the file and diff it off the event loop; show the result when done."""
        assert self.preview is not None
        try:
            diff = self.preview()
        except Exception as exc:  # noqa: BLE001 - a display helper must never cost the decision
            path = self.request.arguments.get("path") if isinstance(self.request.arguments, dict) else None
            diff = FileDiff(str(path), note=f"the diff could not be computed ({type(exc).__name__}: {exc})")
        if diff is None:
            diff = FileDiff("?", note="the arguments name no file path; see the arguments")
        self.app.call_from_thread(self._show_diff, diff)

    def _show_diff(self, diff: FileDiff) -> None:
        if not self.is_attached:
            return
        self.diff = diff
        self.query_one("#approval-diff", VerticalScroll).border_title = diff_title(diff)
        self.query_one("#approval-diff-text", Static).update(diff_text(diff))
        self._fit_diff()
        if diff.shown:
            in_diff = frozenset(k for k in ("content", "old_text", "new_text")
                                if isinstance(self.request.arguments, dict) and k in self.request.arguments)
            self.query_one("#approval-arguments-text", Static).update(arguments_text(self.request.arguments,
                                                                                       in_diff))

    def on_resize(self) -> None:
        """Keep the diff box compact or tall for the new terminal size."""
        self._fit_diff()

    def _fit_diff(self) -> None:
        """A diff that fits a third of the screen is shown at its own height; a longer one
        makes the dialog as tall as it may be and fills it (the buttons stay visible)."""
        if self.diff is None:
            return
        width = max(20, min(110, int(self.size.width * 0.9)) - 8)
        rows = sum(max(1, -(-len(line) // width)) for line in diff_text(self.diff).plain.split("\n"))
        # On a short terminal the diff always takes the room there is, so the change and
        # the buttons are both on screen (at 80x24 an auto-height diff was cut to its header).
        dialog = self.query_one("#approval-dialog")
        dialog.set_class(rows + 2 > self.size.height // 3 or self.size.height < 40, "-tall")
        # Under 30 rows the arguments (all in the diff) give their room to it.
        dialog.set_class(self.size.height < 30, "-short")

    def _too_soon(self) -> bool:
        """True for a key pressed right after the dialog opened: someone typing ahead
        ("… say yes") must not approve a call they have not seen."""
        if time.monotonic() - self._opened_at >= ANSWER_DELAY_S:
            return False
        self.notify("read the call first: keys answer after a moment", severity="warning", timeout=2)
        return True

    def action_approve(self) -> None:
        """Approve this call once."""
        if not self._too_soon():
            self.dismiss(ApprovalAnswer(True))

    def action_approve_session(self) -> None:
        """Approve this call, and the same call (same tool and arguments) for the rest of the session."""
        if not self._too_soon():
            self.dismiss(ApprovalAnswer(True, remember=True))

    def action_approve_always(self) -> None:
        """Approve this call and allow its pattern (``request.rule``) for the rest of the session."""
        if self.request.rule and not self._too_soon():
            self.dismiss(ApprovalAnswer(True, always=True))

    def action_deny(self) -> None:
        """Deny this call without a reason."""
        self.dismiss(ApprovalAnswer(False))

    def action_deny_with_reason(self) -> None:
        """Show the reason input; Enter there denies with that reason."""
        if self._too_soon():
            return
        reason = self.query_one("#approval-reason", Input)
        reason.add_class("-visible")
        reason.focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Buttons do what their keys do."""
        event.stop()
        {"approve": self.action_approve, "approve-session": self.action_approve_session,
         "approve-always": self.action_approve_always, "deny": self.action_deny, "deny-reason": self.action_deny_with_reason}[event.button.id or "deny"]()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Deny with the typed reason (an empty one means no reason)."""
        event.stop()
        self.dismiss(ApprovalAnswer(False, event.value.strip() or None))
