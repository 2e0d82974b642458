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
from pathlib import Path
from typing import Any

from amos.approvals import apply_decisions
from amos.context import build_request
from amos.doom_guard import DoomLoopGuard, doom_notice
from amos.errors import AmosError, ProviderError, SessionError
from amos.events import (
    Notice,
    RunEvent,
    RunStarted,
    StepStarted,
    TextDelta,
)
from amos.evidence.capture import EvidenceCapture
from amos.execution import Execution, RunSettings, ToolRounds, clean_call, clean_text, mask_text
from amos.messages import Message, TextPart, ToolCallPart, Usage
from amos.policy.stop import LoopDiagnostics
from amos.policy.verifiers import CheckerError, run_command_check
from amos.providers.base import FinishEvent, Provider, TextDeltaEvent, ToolCallEvent
from amos.runner_context import ContextDuties
from amos.runner_evidence import EvidenceDuties
from amos.runner_finish import END as _END
from amos.runner_finish import FinishDuties
from amos.runner_journal import JournalDuties
from amos.runner_policy import PolicyDuties
from amos.runner_tasks import TaskDuties
from amos.sessions import (
    ExecutionRecord,
    PendingApproval,
    Session,
    SessionStore,
    utc_now,
)
from amos.tools.manager import ToolManager

log = logging.getLogger("amos.runner")


class AgentRunner(FinishDuties, JournalDuties, ContextDuties, TaskDuties, PolicyDuties, EvidenceDuties, ToolRounds):
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
        doom: doom-loop detection (None when ``doom_loop`` is off).
        evidence: evidence capture (None when ``evidence.enabled`` is false).
        tasks: the host-owned task notebook (None when ``task_state.enabled`` is false);
            its view is part of the instructions of every model request.
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
        doom: DoomLoopGuard | None = None,
        evidence: EvidenceCapture | None = None,
        tasks: Any = None,
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
        self.doom = doom
        self.evidence = evidence
        self.tasks = tasks
        self._provider_factory = provider_factory
        self._lock = lock
        self._on_close = list(on_close)
        self._task: asyncio.Task | None = None
        self._cancel_requested = False
        self._approvals: dict[str, asyncio.Future] = {}
        self._session_approved: set[str] = set()
        self._live: Execution | None = None

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
        prompt = mask_text(clean_text(prompt), self.settings.secrets)
        record = ExecutionRecord(execution_id=str(uuid.uuid4()), started_at=utc_now())
        ex = Execution(record=record)
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
        ex = Execution(record=record, resumed=True, usage_at_start=record.usage.model_copy())
        return self._drive(ex, lambda: self._continue_held(ex, pending))

    def answer_approval(self, call_id: str, approved: bool, reason: str | None = None,
                        remember: bool = False) -> None:
        """Answer an ``ApprovalRequested`` event (interactive front ends).

        The run waiting on that call goes on at once. An answer for a call that is not
        waiting (already answered, or its run ended) is ignored.

        Args:
            call_id: the ``call_id`` of the ``ApprovalRequested`` event.
            approved: run the call (True) or deny it (False). A denied call gets a
                ``denied`` result carrying ``reason``, which the model sees; an
                identical call later in the same execution is denied again without
                asking (spec/stop-receipts.md "Approvals that pause a run").
            reason: why it was denied (optional; ignored when approved).
            remember: with ``approved``, approve this exact call pattern (same tool,
                same arguments: :func:`~amos.approvals.call_fingerprint`) for the rest
                of this session: such a call runs without asking (a notice says so).
                Kept in memory by this runner only, never saved with the session, so a
                later ``amos resume``/``amos run`` or a reopened session asks again.
        """
        future = self._approvals.get(call_id)
        if future is not None and not future.done():
            remember = bool(approved and remember)
            self._journal_write("approval", call_id=call_id, approved=approved, reason=reason, remember=remember)
            future.set_result((approved, reason, remember))

    @property
    def session_approvals(self) -> int:
        """How many call patterns were approved for this session (``answer_approval``
        with ``remember``); they are forgotten when this runner closes."""
        return len(self._session_approved)

    def cancel(self) -> None:
        """Stop the running model call and tools; the run ends ``user_abort``."""
        if self.is_running and not self._cancel_requested:
            self._cancel_requested = True
            assert self._task is not None
            self._task.cancel()

    def get_loop_diagnostics(self) -> LoopDiagnostics | None:
        """A detached snapshot of the latest execution's loop diagnostics.

        While a run is active it describes that run (phase ``running`` or
        ``recovering``); afterwards, the finished execution as saved with the session
        (spec/stop-receipts.md "Loop diagnostics"). None before any run.
        """
        ex = self._live
        if ex is not None and self.is_running:
            return self._live_diagnostics(ex)
        return self.session.loop.model_copy(deep=True) if self.session.loop else None

    def save(self, name: str | None = None) -> Path:
        """Write the session now; ``name`` (optional) becomes its name.

        Raises:
            SessionError: ``write_failed``, or ``no_store`` with ``--no-save``.
        """
        if self.store is None:
            raise SessionError("no_store", "this session is not saved (--no-save)")
        if name is not None:
            self.session.name = name
            self._journal_fields("name")
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
        self._journal_fields("host")

    def relock(self) -> None:
        """Take the session's run lock again after :meth:`close` (a reopen that failed).

        Raises:
            SessionError: ``busy`` when another process took the session meanwhile.
        """
        if self._lock is None and self.store is not None:
            self._lock = self.store.lock(self.session.id)

    def close(self) -> None:
        """Release the session lock and temporary resources (the journal is fsynced)."""
        self._journal_close()
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

    async def _drive(self, ex: Execution, body: Callable[[], Awaitable[None]]) -> AsyncIterator[RunEvent]:
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

    def _emit(self, ex: Execution, event: RunEvent) -> None:
        assert ex.queue is not None
        if log.isEnabledFor(logging.DEBUG) and not isinstance(event, TextDelta):
            log.debug("%s %s", ex.record.execution_id[:8], event.model_dump_json(exclude={"content"})[:2000])
        self._journal_event(event)
        problem = self._journal_problem()
        if problem is not None:
            ex.queue.put_nowait(problem)
        ex.queue.put_nowait(event)

    async def _execute(self, ex: Execution, body: Callable[[], Awaitable[None]]) -> None:
        self._live = ex
        self._journal_open()
        if ex.resumed:
            self._journal_fields("pending")  # the decisions of this resume
        self._emit(ex, RunStarted(session_id=self.session.id, execution_id=ex.record.execution_id,
                                  model=self.model_spec, resumed=ex.resumed))
        for warning in self._take_store_warnings():
            self._emit(ex, Notice(level="warning", text=warning))
        if self.doom is not None:
            for warning in self.doom.take_warnings():
                text = warning if warning.startswith("doom_loop") else f"doom_loop: {warning}"
                self._emit(ex, Notice(level="warning", text=text))
        try:
            try:
                async with asyncio.timeout(self.settings.timeout_s):
                    if await self._start_policy(ex):
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
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a bug must still end with a receipt
            self._emit(ex, Notice(level="error", text=f"internal error: {type(exc).__name__}: {exc}"))
            ex.detail = f"the run ended on an internal error: {type(exc).__name__}: {exc}"
        finally:
            self._finish(ex)

    # ------------------------------------------------------------------ the loop

    async def _start(self, ex: Execution, prompt: str) -> None:
        self._close_stale_pending(ex)
        if self.session.title is None:
            self.session.title = prompt.strip().splitlines()[0][:80] if prompt.strip() else None
        self.session.messages.append(Message.user(prompt))
        if self.doom is not None:
            self.doom.new_user_turn()
        await self._loop(ex)

    async def _continue_held(self, ex: Execution, pending: PendingApproval) -> None:
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
        if await self._after_round(ex):
            return
        if self._after_step_limits(ex):
            return
        await self._loop(ex)

    def _before_request(self, ex: Execution) -> bool:
        """Doom-loop duties before a model request: halt on an armed stop, deliver steer.

        Returns:
            True when the run must stop now (cause ``doom_loop``).
        """
        if self.doom is None:
            return False
        verdict = self.doom.stop_verdict
        if verdict is not None:
            ex.stop("doom_loop", "doom_loop", f"the doom-loop ladder stopped the run: {verdict.message}",
                    {"doom_loop": verdict.to_dict()})
            return True
        for message in self.doom.take_steer():
            self.session.messages.append(Message.user(f"[amos host: doom-loop steer] {message}", kind="feedback"))
        return False

    async def _loop(self, ex: Execution) -> None:
        while True:
            if self._before_request(ex):
                return
            ex.record.steps += 1
            self._emit(ex, StepStarted(step=ex.record.steps, max_steps=self.settings.max_steps))
            turn = await self._model_turn(ex)
            if turn is None:
                return
            finish, calls = turn
            if self.doom is not None and ex.record.output_text:
                verdict = self.doom.score_text(ex.record.output_text)
                if verdict is not None:
                    self._emit(ex, Notice(level="warning", text=doom_notice(verdict)))
                if self.doom.stop_verdict is not None and not calls:
                    self._before_request(ex)
                    return
            if finish == "length":
                for call in calls:
                    self._record_outcome(ex, call, self.tools.outcome_for(
                        call, ex.record.execution_id, "not_started",
                        "not run: the model's turn was cut off by its output limit before this call was complete"))
                ex.stop("output_limit", "output_truncated", "the model's turn was cut off by its output limit")
                return
            if finish == "error":
                ex.stop("provider_error", "bad_response",
                        f"the model's turn could not be used: {ex.finish_detail or 'the provider reported an error'}")
                return
            if finish in ("content_filter", "refusal"):
                reason = "content_filtered" if finish == "content_filter" else "refused"
                said = f": {' '.join(ex.finish_detail.split())[:300]}" if ex.finish_detail else ""
                ex.stop("refusal", reason, "the model or provider refused to answer"
                        + (" (content filter)" if finish == "content_filter" else "") + said)
                return
            if calls:
                if await self._run_batch(ex, calls, {}):
                    return
                if await self._after_round(ex):
                    return
                if self._after_step_limits(ex):
                    return
                continue
            if await self._complete(ex):
                return
            if self._after_step_limits(ex):
                return

    def _after_step_limits(self, ex: Execution) -> bool:
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

    def _unique_call_id(self, call: ToolCallPart, turn_calls: list[ToolCallPart]) -> ToolCallPart:
        """``call`` with an id no earlier call of the session used (two models, or a model
        that reuses ids, must not make tool results ambiguous), its strings made valid
        UTF-8 and provider key values masked (the session must always be savable and
        never hold a key)."""
        call = clean_call(call, self.settings.secrets)
        used = {c.call_id for m in self.session.messages for c in m.tool_calls} | {c.call_id for c in turn_calls}
        if call.call_id not in used:
            return call
        n = 2
        while f"{call.call_id}~{n}" in used:
            n += 1
        return call.model_copy(update={"call_id": f"{call.call_id}~{n}"})

    def _turn_provider(self, ex: Execution) -> Provider:
        """The provider for this request: the session's, or the doom-loop escalation model."""
        model = self.doom.take_escalation() if self.doom is not None else None
        ex.turn_model = self.model_spec
        if model is None or self._provider_factory is None:
            return self.provider
        try:
            provider = self._provider_factory(model)
        except AmosError as exc:
            self._emit(ex, Notice(level="error", text=f"doom loop: cannot escalate to {model}: {exc}"))
            return self.provider
        self._emit(ex, Notice(level="warning", text=f"doom loop: this turn runs on the escalation model {model}"))
        ex.turn_model = model
        return provider

    async def _model_turn(self, ex: Execution) -> tuple[str, list[ToolCallPart]] | None:
        if await self._fit_context(ex):
            return None
        estimated = self.estimate_request_tokens()
        request = build_request(self.request_system_prompt(), self.session.messages, self.tools.specs())
        provider = self._turn_provider(ex)
        text: list[str] = []
        calls: list[ToolCallPart] = []
        finish = None
        try:
            async for event in provider.stream(request):
                if isinstance(event, TextDeltaEvent):
                    delta = clean_text(event.text)
                    text.append(delta)
                    self._emit(ex, TextDelta(text=delta))
                elif isinstance(event, ToolCallEvent):
                    calls.append(self._unique_call_id(event.call, calls))
                elif isinstance(event, FinishEvent):
                    finish = event
        except (ProviderError, Exception) as exc:  # noqa: BLE001 - unreadable wire data is a provider error
            if not isinstance(exc, ProviderError):
                from amos.providers.common import scrub

                log.debug("provider %s produced an unreadable response", provider.provider_name, exc_info=True)
                what = scrub(" ".join(str(exc).split())[:200], self.settings.secrets)
                exc = ProviderError("bad_response", f"{provider.provider_name}: the response could not be read "
                                                    f"({type(exc).__name__}: {what})")
            if text:
                self.session.messages.append(Message(role="assistant", kind="turn", parts=(TextPart(text="".join(text)),)))
            ex.record.usage.model_calls += 1
            ex.stop("provider_error", exc.kind, f"the model call failed ({exc.kind}): {exc}")
            return None
        if finish is None:
            ex.stop("provider_error", "bad_response", "the model stream ended without a finish reason")
            return None
        reported = {name: max(0, int(getattr(finish.usage, name) or 0)) for name in Usage.TOKEN_FIELDS}
        reported["model_calls"] = max(1, reported["model_calls"])
        # Negative counts from a server must not defeat token_budget.
        ex.record.usage.add(self._record_call(Usage(**reported), ex.turn_model, "turn", estimated))
        joined = mask_text("".join(text), self.settings.secrets)
        parts: list[Any] = [TextPart(text=joined)] if joined else []
        parts.extend(calls)
        self.session.messages.append(Message(role="assistant", kind="turn", parts=tuple(parts),
                                             provider_details=finish.provider_details or None))
        ex.record.output_text = joined
        ex.finish_detail = finish.refusal or finish.detail
        ex.open_calls = list(calls)
        return finish.finish_reason, calls

    async def _complete(self, ex: Execution) -> bool:
        """The model answered: run the completion checks.

        Returns:
            True when the run stopped; False after a recovery turn was appended
            (loop policy, check said not done, budget left).
        """
        if ex.policy is not None:
            return await self._complete_with_policy(ex)
        command = self.settings.verify
        if not command:
            ex.stop("answer", "answer_returned", "the model answered; no completion check is configured")
            return True
        self._emit(ex, Notice(text=f"completion check: running `{command}`"))
        try:
            result = await run_command_check(command, workspace=self.workspace, env=self.env,
                                             timeout_s=self.settings.verify_timeout_s)
        except CheckerError as exc:
            ex.stop("checker_error", "checker_error", str(exc))
            return True
        ex.record.completion = result
        if result.complete:
            self._emit(ex, Notice(text=f"completion check passed: `{command}` exited 0"))
            ex.stop("answer", "completed", f"the model answered and the completion check `{command}` passed")
        else:
            self._emit(ex, Notice(level="warning", text=f"completion check failed: `{command}` {result.reason}"))
            ex.stop("answer", "check_failed",
                    f"the model answered but the completion check `{command}` failed ({result.reason})")
        return True
