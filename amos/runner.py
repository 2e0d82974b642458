"""AgentRunner: the managed loop and the host API front ends call.

The flow of one run is DESIGN.md "The flow of one run": build the request, stream
the model call, run the round's tool calls (permissions, approvals, concurrency),
and stop with a :class:`~amos.policy.stop.StopReceipt` whose cause is recorded at
the boundary where it happened (spec/stop-receipts.md). Seams are left where the
loop policy, the doom-loop ladder, evidence capture and the task view plug in.

Front ends (TUI, CLI, slash commands) call only the public methods of
:class:`AgentRunner` and render the :mod:`amos.events` it yields.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amos.approvals import apply_decisions, call_fingerprint, new_pause, pending_infos
from amos.context import build_request
from amos.errors import ProviderError, SessionError
from amos.events import (
    ApprovalRequested,
    Notice,
    RunEvent,
    RunFinished,
    RunStarted,
    StepStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
from amos.policy.stop import (
    LoopDiagnostics,
    LoopObservation,
)
from amos.policy.verifiers import CheckerError, run_command_check
from amos.providers.base import FinishEvent, Provider, TextDeltaEvent, ToolCallEvent
from amos.receipts import build_receipt
from amos.sessions import (
    ExecutionRecord,
    PendingApproval,
    Session,
    SessionStore,
    utc_now,
)
from amos.tools.base import ToolOutcome
from amos.tools.manager import ToolManager

_END = object()
log = logging.getLogger("amos.runner")


@dataclass
class RunSettings:
    """Limits and host choices in force for the runs of one runner (STYLE.md §4).

    Attributes:
        max_steps: model calls per execution; the step limit fires when the count
            equals it, after that step's tool calls ran.
        token_budget: cumulative tokens (input + output) per execution, or None.
        timeout_s: wall-clock limit of one run (seconds), or None.
        verify: completion-check command (``--verify``), or None.
        verify_timeout_s: limit of one completion check (seconds).
        approvals_owner: who decides paused approvals (None → WAITING_UNROUTED).
        approvals_deadline_s: how long a paused approval may wait (seconds).
        auto_approve: ``--yes``: approve every call that would ask (never ``deny``).
        interactive: a person can answer approvals now (the TUI); otherwise an
            ``ask`` call pauses the run WAITING.
        policy_hash: hash of the loop policy and doom-loop config in force.
        loop_policy_enabled: whether a loop policy is configured.
        max_recovery_attempts: the loop policy's recovery limit, when configured.
        autosave: save the session at the end of every run (always for ``amos run``;
            ``sessions.autosave`` in the TUI).
    """

    max_steps: int = 20
    token_budget: int | None = None
    timeout_s: float | None = None
    verify: str | None = None
    verify_timeout_s: float = 120.0
    approvals_owner: str | None = None
    approvals_deadline_s: float = 86400.0
    auto_approve: bool = False
    interactive: bool = False
    policy_hash: str | None = None
    loop_policy_enabled: bool = False
    max_recovery_attempts: int | None = None
    autosave: bool = True


@dataclass
class _Execution:
    """Mutable state of one execution while the loop runs."""

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
    queue: asyncio.Queue | None = None
    usage_at_start: Usage = field(default_factory=Usage)
    started_monotonic: float = field(default_factory=time.monotonic)

    def stop(self, cause: str, reason: str, detail: str, condition: dict[str, Any] | None = None) -> None:
        if self.cause is None:
            self.cause, self.reason, self.detail, self.stop_condition = cause, reason, detail, condition


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (undecodable input bytes) replaced by ``?``."""
    return text.encode("utf-8", "replace").decode("utf-8") if not text.isascii() else text


class AgentRunner:
    """The managed agent loop over one session.

    Build one with :func:`amos.host.open_runner`. Only one run may be active at a
    time; the session's lock is held from construction until :meth:`close`.

    Args:
        session: the session to run (its transcript is extended in place).
        store: where the session is saved, or None with ``--no-save``.
        provider: the model.
        model_spec: the ``PROVIDER:MODEL`` string shown to people.
        tools: the tool manager (permissions, confinement, caps).
        workspace: the workspace root.
        system_prompt: built system prompt (built-in or configured + project files).
        settings: limits and approval routing.
        env: environment for completion checks (provider keys removed).
        provider_factory: builds a provider for ``set_model``.
        lock: the session's held lock (released by :meth:`close`).
        config: the loaded config, for ``/policy`` and ``/tools``.
    """

    def __init__(
        self,
        *,
        session: Session,
        store: SessionStore | None,
        provider: Provider,
        model_spec: str,
        tools: ToolManager,
        workspace: Path,
        system_prompt: str,
        settings: RunSettings,
        env: Mapping[str, str],
        provider_factory: Callable[[str], Provider] | None = None,
        lock: Any = None,
        config: Any = None,
        on_close: Iterable[Callable[[], None]] = (),
    ):
        self.session = session
        self.store = store
        self.provider = provider
        self.model_spec = model_spec
        self.tools = tools
        self.workspace = workspace
        self.system_prompt = system_prompt
        self.settings = settings
        self.env = dict(env)
        self.config = config
        self._provider_factory = provider_factory
        self._lock = lock
        self._on_close = list(on_close)
        self._task: asyncio.Task | None = None
        self._cancel_requested = False
        self._approvals: dict[str, asyncio.Future] = {}

    # ------------------------------------------------------------------ host API

    @property
    def session_id(self) -> str:
        """Id of the session this runner drives."""
        return self.session.id

    @property
    def session_path(self) -> Path | None:
        """Path of ``session.json`` (None with ``--no-save``)."""
        return self.store.path(self.session.id) if self.store else None

    @property
    def is_running(self) -> bool:
        """True while a run is executing."""
        return self._task is not None and not self._task.done()

    @property
    def is_waiting(self) -> bool:
        """True when the session is paused on approvals (resume with :meth:`resume`)."""
        return self.session.pending is not None

    @property
    def autosave(self) -> bool:
        """Whether the session is saved automatically (``sessions.autosave`` and not ``--no-save``)."""
        return self.store is not None and self.settings.autosave

    def summarize_call(self, call: ToolCallPart) -> str:
        """A one-line summary of a tool call for display (never raises)."""
        return self.tools.summarize(call)

    def run(self, prompt: str) -> AsyncIterator[RunEvent]:
        """Send ``prompt`` and run the loop until it stops.

        Yields:
            ``RunEvent``s; the last is always ``RunFinished`` with the stop receipt.

        Raises:
            SessionError: ``busy`` when a run is already active.
        """
        self._ensure_idle()
        prompt = clean_text(prompt)
        record = ExecutionRecord(execution_id=str(uuid.uuid4()), started_at=utc_now())
        ex = _Execution(record=record)
        return self._drive(ex, lambda: self._start(ex, prompt))

    def resume(
        self,
        approve: Iterable[str] = (),
        deny: Mapping[str, str | None] | None = None,
        approve_all: bool = False,
    ) -> AsyncIterator[RunEvent]:
        """Decide held calls of a WAITING session and continue the same execution.

        Args:
            approve: call ids to approve.
            deny: call id → reason (or None) to deny.
            approve_all: approve every pending call.

        Yields:
            ``RunEvent``s ending with ``RunFinished``. Until every pending call is
            decided (and no person can be asked now) the run stays WAITING without
            a model call.

        Raises:
            SessionError: ``not_waiting`` (nothing to resume) or ``bad_decision``
                (a call id that is not pending in this pause).
        """
        self._ensure_idle()
        pending = self.session.pending
        if pending is None:
            raise SessionError("not_waiting", f"session {self.session.id} is not waiting for an approval")
        apply_decisions(pending, self.session.id, approve, deny or {}, approve_all)
        record = pending.execution.model_copy(deep=True)
        ex = _Execution(record=record, resumed=True, usage_at_start=record.usage.model_copy())
        return self._drive(ex, lambda: self._continue_held(ex, pending))

    def answer_approval(self, call_id: str, approved: bool, reason: str | None = None) -> None:
        """Answer an ``ApprovalRequested`` event (interactive front ends)."""
        future = self._approvals.get(call_id)
        if future is not None and not future.done():
            future.set_result((approved, reason))

    def cancel(self) -> None:
        """Stop the running model call and tools; the run ends ``user_abort``."""
        if self.is_running and not self._cancel_requested:
            self._cancel_requested = True
            assert self._task is not None
            self._task.cancel()

    def get_loop_diagnostics(self) -> LoopDiagnostics | None:
        """Diagnostics of the latest execution of the session (None before any run)."""
        return self.session.loop

    def save(self, name: str | None = None) -> Path:
        """Write the session now; ``name`` (optional) becomes its name.

        Raises:
            SessionError: ``write_failed``, or ``no_store`` with ``--no-save``.
        """
        if name is not None:
            self.session.name = name
        if self.store is None:
            raise SessionError("no_store", "this session is not saved (--no-save)")
        return self.store.save(self.session)

    def set_model(self, spec: str) -> None:
        """Switch the model for the next run (refused while a run is active).

        Raises:
            UsageError / ConfigError: the model string or its provider is not usable.
        """
        self._ensure_idle()
        if self._provider_factory is None:
            raise SessionError("unsupported", "switching models is not available here")
        self.provider = self._provider_factory(spec)
        self.model_spec = spec
        self.session.host.model = spec

    def close(self) -> None:
        """Release the session lock and temporary resources."""
        for fn in self._on_close:
            fn()
        self._on_close.clear()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # ------------------------------------------------------------------ driving

    def _ensure_idle(self) -> None:
        if self.is_running:
            raise SessionError("busy", "a run is already active in this session")

    async def _drive(self, ex: _Execution, body: Callable[[], Awaitable[None]]) -> AsyncIterator[RunEvent]:
        queue: asyncio.Queue = asyncio.Queue()
        ex.queue = queue
        self._cancel_requested = False
        self._task = asyncio.create_task(self._execute(ex, body))
        try:
            while True:
                event = await queue.get()
                if event is _END:
                    break
                yield event
        finally:
            task = self._task
            if task is not None and not task.done():
                self.cancel()
                try:
                    await task
                except BaseException:  # noqa: BLE001 - the run already recorded its stop
                    pass
            self._task = None

    def _emit(self, ex: _Execution, event: RunEvent) -> None:
        assert ex.queue is not None
        if log.isEnabledFor(logging.DEBUG) and not isinstance(event, TextDelta):
            log.debug("%s %s", ex.record.execution_id[:8], event.model_dump_json(exclude={"content"})[:2000])
        ex.queue.put_nowait(event)

    async def _execute(self, ex: _Execution, body: Callable[[], Awaitable[None]]) -> None:
        self._emit(ex, RunStarted(session_id=self.session.id, execution_id=ex.record.execution_id,
                                  model=self.model_spec, resumed=ex.resumed))
        try:
            try:
                async with asyncio.timeout(self.settings.timeout_s):
                    await body()
            except TimeoutError:
                ex.stop("timeout", "timeout", f"the run's time limit of {self.settings.timeout_s:g} s expired",
                        {"timeout_s": self.settings.timeout_s,
                         "elapsed_s": round(time.monotonic() - ex.started_monotonic, 3)})
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            ex.stop("user_abort", "cancelled", "the run was cancelled by the user")
        except Exception as exc:  # noqa: BLE001 - a bug must still end with a receipt
            self._emit(ex, Notice(level="error", text=f"internal error: {type(exc).__name__}: {exc}"))
            ex.detail = f"the run ended on an internal error: {type(exc).__name__}: {exc}"
        finally:
            self._finish(ex)

    # ------------------------------------------------------------------ the loop

    async def _start(self, ex: _Execution, prompt: str) -> None:
        self._close_stale_pending(ex)
        if self.session.title is None:
            self.session.title = prompt.strip().splitlines()[0][:80] if prompt.strip() else None
        self.session.messages.append(Message.user(prompt))
        await self._loop(ex)

    async def _continue_held(self, ex: _Execution, pending: PendingApproval) -> None:
        if pending.undecided() and not self.settings.interactive and not self.settings.auto_approve:
            ex.pending = pending
            first = pending.undecided()[0]
            ex.stop("approval_required", "approval_pending",
                    f"{len(pending.undecided())} held call(s) still need a decision, starting with "
                    f"{first.call.tool_name} ({first.call.call_id})")
            return
        self.session.pending = None
        ex.open_calls = [h.call for h in pending.held]
        preset = {h.call.call_id: (h.decision == "approve", h.reason) for h in pending.held if h.decision}
        if await self._run_batch(ex, [h.call for h in pending.held], preset):
            return
        if self._after_step_limits(ex):
            return
        await self._loop(ex)

    async def _loop(self, ex: _Execution) -> None:
        while True:
            ex.record.steps += 1
            self._emit(ex, StepStarted(step=ex.record.steps, max_steps=self.settings.max_steps))
            turn = await self._model_turn(ex)
            if turn is None:
                return
            finish, calls = turn
            if finish == "length":
                for call in calls:
                    self._record_outcome(ex, call, self.tools.outcome_for(
                        call, ex.record.execution_id, "not_started",
                        "not run: the model's turn was cut off by its output limit before this call was complete"))
                ex.stop("output_limit", "output_truncated", "the model's turn was cut off by its output limit")
                return
            if finish in ("content_filter", "refusal"):
                reason = "content_filtered" if finish == "content_filter" else "refused"
                ex.stop("refusal", reason, "the model or provider refused to answer"
                        + (" (content filter)" if finish == "content_filter" else ""))
                return
            if calls:
                if await self._run_batch(ex, calls, {}):
                    return
                if self._after_step_limits(ex):
                    return
                continue
            await self._complete(ex)
            return

    def _after_step_limits(self, ex: _Execution) -> bool:
        steps, max_steps = ex.record.steps, self.settings.max_steps
        if steps >= max_steps:
            ex.stop("step_limit", "iteration_limit", f"the step limit of {max_steps} model calls was reached",
                    {"max_steps": max_steps, "steps": steps})
            return True
        budget = self.settings.token_budget
        used = ex.record.usage.total_tokens
        if budget is not None and used >= budget:
            ex.stop("token_budget", "token_budget", f"the token budget of {budget} was reached ({used} used)",
                    {"token_budget": budget, "total_tokens": used})
            return True
        return False

    async def _model_turn(self, ex: _Execution) -> tuple[str, list[ToolCallPart]] | None:
        request = build_request(self.system_prompt, self.session.messages, self.tools.specs())
        text: list[str] = []
        calls: list[ToolCallPart] = []
        finish = None
        try:
            async for event in self.provider.stream(request):
                if isinstance(event, TextDeltaEvent):
                    delta = clean_text(event.text)
                    text.append(delta)
                    self._emit(ex, TextDelta(text=delta))
                elif isinstance(event, ToolCallEvent):
                    calls.append(event.call)
                elif isinstance(event, FinishEvent):
                    finish = event
        except ProviderError as exc:
            if text:
                self.session.messages.append(Message(role="assistant", kind="turn", parts=(TextPart(text="".join(text)),)))
            ex.record.usage.model_calls += 1
            ex.stop("provider_error", exc.kind, f"the model call failed ({exc.kind}): {exc}")
            return None
        if finish is None:
            ex.stop("provider_error", "bad_response", "the model stream ended without a finish reason")
            return None
        ex.record.usage.add(finish.usage if finish.usage.model_calls else finish.usage.model_copy(update={"model_calls": 1}))
        joined = "".join(text)
        parts: list[Any] = [TextPart(text=joined)] if joined else []
        parts.extend(calls)
        self.session.messages.append(Message(role="assistant", kind="turn", parts=tuple(parts)))
        ex.record.output_text = joined
        ex.open_calls = list(calls)
        return finish.finish_reason, calls

    async def _complete(self, ex: _Execution) -> None:
        command = self.settings.verify
        if not command:
            ex.stop("answer", "answer_returned", "the model answered; no completion check is configured")
            return
        self._emit(ex, Notice(text=f"completion check: running `{command}`"))
        try:
            result = await run_command_check(command, workspace=self.workspace, env=self.env,
                                             timeout_s=self.settings.verify_timeout_s)
        except CheckerError as exc:
            ex.stop("checker_error", "checker_error", str(exc))
            return
        ex.record.completion = result
        if result.complete:
            self._emit(ex, Notice(text=f"completion check passed: `{command}` exited 0"))
            ex.stop("answer", "completed", f"the model answered and the completion check `{command}` passed")
        else:
            self._emit(ex, Notice(level="warning", text=f"completion check failed: `{command}` {result.reason}"))
            ex.stop("answer", "check_failed",
                    f"the model answered but the completion check `{command}` failed ({result.reason})")

    # ------------------------------------------------------------------ tool rounds

    async def _run_batch(self, ex: _Execution, calls: list[ToolCallPart],
                         preset: Mapping[str, tuple[bool, str | None]]) -> bool:
        """Run one round of tool calls; returns True when the run paused for approval.

        Reads with permission ``allow`` run concurrently in groups; writes and unknown
        effects run one at a time in the order given (spec/tools.md).
        """
        reads: list[ToolCallPart] = []
        for index, call in enumerate(calls):
            try:
                self.tools.validate(call)
            except Exception:  # noqa: BLE001 - invalid calls fail at execute, unasked
                await self._flush_reads(ex, reads)
                await self._run_one(ex, call)
                continue
            permission = self.tools.permission(call.tool_name)
            if permission == "deny":
                await self._flush_reads(ex, reads)
                self._record_outcome(ex, call, self.tools.outcome_for(
                    call, ex.record.execution_id, "denied",
                    f"denied: tool {call.tool_name} is set to deny (tools.permissions.{call.tool_name})"))
                continue
            if permission == "ask":
                fp = call_fingerprint(call)
                if fp in ex.record.denied:
                    await self._flush_reads(ex, reads)
                    self._record_outcome(ex, call, self.tools.outcome_for(
                        call, ex.record.execution_id, "denied",
                        f"denied again without asking (identical to a call denied earlier): {ex.record.denied[fp]}"))
                    continue
                if call.call_id in preset:
                    approved, reason = preset[call.call_id]
                elif self.settings.auto_approve:
                    approved, reason = True, None
                elif self.settings.interactive:
                    await self._flush_reads(ex, reads)
                    approved, reason = await self._ask(ex, call)
                else:
                    await self._flush_reads(ex, reads)
                    self._pause(ex, calls[index:])
                    return True
                if not approved:
                    await self._flush_reads(ex, reads)
                    text = f"denied by the user: {reason}" if reason else "denied by the user"
                    ex.record.denied[fp] = text
                    self._record_outcome(ex, call, self.tools.outcome_for(
                        call, ex.record.execution_id, "denied", text))
                    continue
            if permission == "allow" and self.tools.effect(call.tool_name) == "read":
                reads.append(call)
                continue
            await self._flush_reads(ex, reads)
            await self._run_one(ex, call)
        await self._flush_reads(ex, reads)
        return False

    async def _flush_reads(self, ex: _Execution, reads: list[ToolCallPart]) -> None:
        if not reads:
            return
        batch = list(reads)
        reads.clear()
        if len(batch) == 1:
            await self._run_one(ex, batch[0])
            return
        for call in batch:
            self._started(ex, call)
        outcomes = await asyncio.gather(*(self.tools.execute(c, ex.record.execution_id) for c in batch))
        for call, outcome in zip(batch, outcomes, strict=True):
            self._record_outcome(ex, call, outcome)

    async def _run_one(self, ex: _Execution, call: ToolCallPart) -> None:
        self._started(ex, call)
        outcome = await self.tools.execute(call, ex.record.execution_id)
        self._record_outcome(ex, call, outcome)

    def _started(self, ex: _Execution, call: ToolCallPart) -> None:
        ex.running.add(call.call_id)
        self._emit(ex, ToolCallStarted(call_id=call.call_id, tool=call.tool_name,
                                       summary=self.tools.summarize(call), effect=self.tools.effect(call.tool_name)))

    async def _ask(self, ex: _Execution, call: ToolCallPart) -> tuple[bool, str | None]:
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._approvals[call.call_id] = future
        self._emit(ex, ApprovalRequested(
            call_id=call.call_id, tool=call.tool_name, effect=self.tools.effect(call.tool_name),
            summary=self.tools.summarize(call), arguments=call.arguments,
            resume_token=f"{self.session.id}:{ex.record.execution_id}:{call.call_id}"))
        try:
            return await future
        finally:
            self._approvals.pop(call.call_id, None)

    def _pause(self, ex: _Execution, held_calls: list[ToolCallPart]) -> None:
        def needs(call: ToolCallPart) -> bool:
            return self.tools.permission(call.tool_name) == "ask" and call_fingerprint(call) not in ex.record.denied

        ex.pending = new_pause(ex.record, held_calls, needs, owner=self.settings.approvals_owner,
                               deadline_s=self.settings.approvals_deadline_s)
        first = ex.pending.undecided()[0]
        ex.stop("approval_required", "approval_pending",
                f"{self.tools.summarize(first.call)} ({first.call.call_id}) needs approval")

    def _record_outcome(self, ex: _Execution, call: ToolCallPart, outcome: ToolOutcome) -> None:
        ex.running.discard(call.call_id)
        ex.answered.add(call.call_id)
        content = clean_text(outcome.content)
        result = ToolResultPart(call_id=call.call_id, tool_name=call.tool_name, content=content,
                                is_error=outcome.status != "succeeded", status=outcome.status)
        self.session.messages.append(Message.tool_result(result))
        rec = ex.record
        rec.tool_calls.append({"call_id": call.call_id, "tool": call.tool_name, "status": outcome.status,
                               "evidence_id": None})
        rec.observations.append(LoopObservation(tool=call.tool_name, call_id=call.call_id,
                                                effect=outcome.effect, status=outcome.status))
        if outcome.status == "succeeded" and outcome.effect in ("write", "unknown"):
            rec.effect_succeeded = True
        self._emit(ex, ToolCallFinished(
            call_id=call.call_id, tool=call.tool_name, summary=self.tools.summarize(call),
            status=outcome.status, duration_s=round(outcome.duration_s, 3),
            error=clean_text(outcome.error) if outcome.error else None, content=content))

    def _close_open_calls(self, ex: _Execution) -> None:
        """Give every call of the last turn without a result one, so history stays valid."""
        if ex.pending is not None:
            return
        interrupted = ex.cause in ("user_abort", "timeout")
        for call in ex.open_calls:
            if call.call_id in ex.answered:
                continue
            was_running = call.call_id in ex.running
            status = "cancelled" if interrupted else "not_started"
            why = {"user_abort": "the run was cancelled by the user",
                   "timeout": "the run's time limit expired"}.get(ex.cause or "", "the run stopped")
            text = (f"cancelled: {why} while this call was running" if was_running
                    else f"not run: {why} before this call started")
            outcome = self.tools.outcome_for(call, ex.record.execution_id, status, text)
            if was_running and outcome.effect != "read":
                outcome = outcome.model_copy(update={"completion": "unknown"})
            self._record_outcome(ex, call, outcome)

    def _close_stale_pending(self, ex: _Execution) -> None:
        pending = self.session.pending
        if pending is None:
            return
        self.session.pending = None
        for held in pending.held:
            result = ToolResultPart(
                call_id=held.call.call_id, tool_name=held.call.tool_name, is_error=True, status="not_started",
                content="not run: the session continued with a new prompt before this call was decided")
            self.session.messages.append(Message.tool_result(result))
        self._emit(ex, Notice(level="warning", text=f"{len(pending.held)} held call(s) were dropped unrun: "
                                                    "a new prompt replaced the pending approval"))

    # ------------------------------------------------------------------ finishing

    def _finish(self, ex: _Execution) -> None:
        """Close open calls, build the receipt, save, and always end the event stream."""
        try:
            self._close_open_calls(ex)
            rec = ex.record
            if ex.pending is not None:
                self.session.pending = ex.pending
            receipt, loop = build_receipt(
                rec, cause=ex.cause, reason=ex.reason, detail=ex.detail, stop_condition=ex.stop_condition,
                pending=pending_infos(ex.pending, self.session.id),
                completion_configured=bool(self.settings.verify), policy_hash=self.settings.policy_hash,
                policy_enabled=self.settings.loop_policy_enabled,
                max_recovery_attempts=self.settings.max_recovery_attempts)
            self.session.loop = loop
            self.session.last_stop = receipt
            self.session.usage.add(Usage(
                input_tokens=rec.usage.input_tokens - ex.usage_at_start.input_tokens,
                output_tokens=rec.usage.output_tokens - ex.usage_at_start.output_tokens,
                model_calls=rec.usage.model_calls - ex.usage_at_start.model_calls))
            path = None
            if self.autosave:
                try:
                    path = str(self.store.save(self.session))
                except SessionError as exc:
                    self._emit(ex, Notice(level="error", text=str(exc)))
            self._emit(ex, RunFinished(receipt=receipt, loop=loop, output_text=rec.output_text, usage=rec.usage,
                                       tool_calls=list(rec.tool_calls), session_path=path))
        except Exception as exc:  # noqa: BLE001 - the stream must end even on a bug
            log.exception("finishing the run failed")
            self._emit(ex, Notice(level="error", text=f"internal error while finishing the run: "
                                                      f"{type(exc).__name__}: {exc}"))
        finally:
            assert ex.queue is not None
            ex.queue.put_nowait(_END)
