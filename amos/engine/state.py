"""The state of one execution while the loop runs (:class:`RunState`).

One object per execution, handed to every collaborator and gate hook. It owns what
the execution has done so far (its :class:`~amos.sessions.ExecutionRecord`, the calls
of the current turn and which of them were answered or are running), the one place
a stop cause is recorded (:meth:`RunState.stop`: the first cause wins, recorded where
it happened — spec/stop-receipts.md "Causes"), and the event outlet front ends read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amos.events import RunEvent
from amos.messages import ToolCallPart, Usage
from amos.sessions import ExecutionRecord, PendingApproval

END = object()
"""Put on an execution's event queue after its last event."""


@dataclass
class RunState:
    """Mutable state of one execution.

    Attributes:
        record: what the execution did so far (saved with an approval pause).
        resumed: True for an execution continued by ``Host.resume``.
        cause / reason / detail / stop_condition: the recorded stop (None cause: running).
        open_calls: the tool calls of the latest turn (each must get a result).
        answered: call ids of ``open_calls`` that got a result.
        running: call ids being executed right now.
        pending: the approval pause this execution ends in, if any.
        usage_at_start: the record's usage when this run began (a resume continues it).
        turn_model: model spec of the current model call (an escalation model may differ).
        finish_detail: the provider's refusal text or detail of the latest turn.
        halted: set by a gate (the doom-loop ladder's stop) when every later call of
            the round must be refused instead of run or asked about.
        workspace_changed: the workspace's digest differs from the completion baseline
            (None: not compared).
        done_claim: the summary of a done-tool call made in the current round, if any.
        files_changed: ``{"path", "change"}`` of the files the run changed, from its
            workspace snapshots (set by the snapshot gate when the run finishes; issue 20).
        started_monotonic: ``time.monotonic()`` when the run began (seconds).
        allowed: call id → what let it run (``rule …``, ``sandbox (workspace-write)``,
            ``--yes``, ``approved by a person``…) for the receipt's tool-call rows.
        sandbox: how commands run in this execution and whether it is a plan run.
        mask: masks secrets in a stop's detail and in notices (provider keys, MCP server
            secrets and, as in provider errors, any ``*KEY*``/``*TOKEN*`` variable's
            value become ``****``); set by the loop.
        cancelled_by: who cancelled the run when it was not the user (e.g. ``"SIGTERM"``,
            set by ``Host.cancel``), named in the ``user_abort`` receipt's detail.
    """

    record: ExecutionRecord
    resumed: bool = False
    cause: str | None = None
    reason: str = ""
    detail: str = ""
    stop_condition: dict[str, Any] | None = None
    open_calls: list[ToolCallPart] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)
    pending: PendingApproval | None = None
    usage_at_start: Usage = field(default_factory=Usage)
    turn_model: str = ""
    finish_detail: str | None = None
    halted: str | None = None
    workspace_changed: bool | None = None
    done_claim: str | None = None
    files_changed: list[dict[str, str]] = field(default_factory=list)
    started_monotonic: float = field(default_factory=time.monotonic)
    allowed: dict[str, str] = field(default_factory=dict)
    sandbox: Any = None
    cancelled_by: str | None = None
    mask: Callable[[str], str] = field(default=lambda text: text, repr=False)
    queue: asyncio.Queue | None = field(default=None, repr=False)
    _emit: Callable[[RunEvent], None] | None = field(default=None, repr=False)

    @property
    def execution_id(self) -> str:
        """The execution's id."""
        return self.record.execution_id

    @property
    def stopped(self) -> bool:
        """True once a stop cause was recorded."""
        return self.cause is not None

    def stop(self, cause: str, reason: str, detail: str, condition: dict[str, Any] | None = None) -> None:
        """Record the stop cause (the first recorded cause wins; later ones are ignored)."""
        if self.cause is None:
            self.cause, self.reason, self.detail, self.stop_condition = cause, reason, self.mask(detail), condition

    def emit(self, event: RunEvent) -> None:
        """Send an event to the front end (journalled first, except text deltas)."""
        assert self._emit is not None, "the run has no event outlet"
        self._emit(event)
