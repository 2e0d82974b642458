"""The ``RunEvent`` union the runner yields to front ends.

Front ends render these and nothing else (DESIGN.md rule 1), so the TUI and the CLI
show a run identically. Events are frozen pydantic models discriminated on
``event_kind``; ``RUN_EVENT_ADAPTER`` loads and saves them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from amos.messages import Usage
from amos.policy.stop import LoopDiagnostics, StopReceipt


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RunStarted(_Event):
    """A run (or a resumed run) began."""

    event_kind: Literal["run_started"] = "run_started"
    session_id: str
    execution_id: str
    model: str
    resumed: bool = False


class StepStarted(_Event):
    """A model call (step) is about to be made; ``max_steps`` is the cap in force."""

    event_kind: Literal["step_started"] = "step_started"
    step: int
    max_steps: int


class TextDelta(_Event):
    """A streaming delta of assistant text."""

    event_kind: Literal["text_delta"] = "text_delta"
    text: str


class ToolCallStarted(_Event):
    """A tool call began running."""

    event_kind: Literal["tool_call_started"] = "tool_call_started"
    call_id: str
    tool: str
    summary: str
    effect: str


class ToolCallFinished(_Event):
    """A tool call ended (whatever the outcome, including denied and cancelled)."""

    event_kind: Literal["tool_call_finished"] = "tool_call_finished"
    call_id: str
    tool: str
    summary: str
    status: str
    duration_s: float = 0.0
    error: str | None = None
    evidence_id: str | None = None
    content: str = ""


class ApprovalRequested(_Event):
    """A tool call needs a person's decision before it can run.

    An interactive front end answers with ``Host.answer_approval``; the run
    waits for the answer. Non-interactive runs pause WAITING instead and never emit it.
    """

    event_kind: Literal["approval_requested"] = "approval_requested"
    call_id: str
    tool: str
    effect: str
    summary: str
    arguments: Any = None
    resume_token: str | None = None
    escalation: bool = False
    """The call asks to run a command outside the sandbox (issue 19)."""
    justification: str | None = None
    """The model's reason for running it unsandboxed."""
    rule: str | None = None
    """The rule an "always in this session" answer grants (``run_command(git status:*)``), or
    None when none fits (an escalation, a compound command)."""


class ConfirmationRequested(_Event):
    """The model claimed completion, the host checks passed, and a person must confirm
    (``completion.human``). An interactive front end answers with
    ``Host.answer_confirmation``; non-interactive runs end WAITING instead."""

    event_kind: Literal["confirmation_requested"] = "confirmation_requested"
    claim: str
    route: str = "answer"
    resume_token: str | None = None


class Notice(_Event):
    """Host information shown apart from assistant prose (loop events, warnings)."""

    event_kind: Literal["notice"] = "notice"
    level: Literal["info", "warning", "error"] = "info"
    text: str
    phase: Literal["running", "recovering", "complete", "input-needed", "stopped"] | None = None
    """The loop phase this notice announces, when it announces a phase change."""


class RunFinished(_Event):
    """The run ended; always the last event, with its stop receipt."""

    event_kind: Literal["run_finished"] = "run_finished"
    receipt: StopReceipt
    loop: LoopDiagnostics
    output_text: str = ""
    usage: Usage = Field(default_factory=Usage)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    session_path: str | None = None
    files_changed: list[dict[str, str]] = Field(default_factory=list)
    """``{"path", "change"}`` of every file the run changed, from its workspace snapshots
    (so what ``run_command`` changed is included; issue 20); [] when file checkpoints are off."""


RunEvent = Annotated[
    RunStarted | StepStarted | TextDelta | ToolCallStarted | ToolCallFinished
    | ApprovalRequested | ConfirmationRequested | Notice | RunFinished,
    Field(discriminator="event_kind"),
]

RUN_EVENT_ADAPTER: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)
"""Loads and saves single events: ``RUN_EVENT_ADAPTER.validate_python(data)``."""
