"""The turn loop of one execution, top to bottom (DESIGN.md "The flow of one run").

::

    prompt ─► before request (gates) ─► step ─► fit the context window
          ─► model turn (streamed, masked) ─► doom-loop text score
          ─► finish reason: length / error / refusal stop the run
          ─► tool calls? ─► tool round (gates per call) ─► round finished (gates) ─► limits ─┐
          ─► no calls  ─► completion check ─► recovery turn? ─► limits ───────────────────────┤
          ◄──────────────────────────────────────────────────────────────────────────────────┘

Every stop is recorded on the :class:`~amos.engine.state.RunState` where it happens
(spec/stop-receipts.md); :meth:`TurnLoop.execute` always ends the run through
:class:`~amos.engine.finish.RunEnd`, so the last event is ``RunFinished`` even after a
timeout, a cancellation or a bug.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from amos.context import build_request
from amos.doom_guard import repeats_like_a_runaway
from amos.engine.calls import CallPlanner
from amos.engine.completion import CheckPlan, Claim
from amos.engine.context_budget import reported_usage
from amos.engine.doom import DoomGate
from amos.engine.durability import DurabilityGate
from amos.engine.gates import Gate
from amos.engine.model import Turn, assistant_message, stream_turn, timed
from amos.engine.permissions import PermissionGate
from amos.engine.policy_gate import PolicyGate
from amos.engine.state import END, RunState
from amos.engine.tool_round import OutcomeRecorder, ToolRound
from amos.events import Notice, RunEvent, RunStarted, StepStarted, TextDelta
from amos.messages import Message, ToolCallPart, ToolResultPart
from amos.providers.common import scrub
from amos.sessions import PendingApproval

if TYPE_CHECKING:
    from amos.engine.engine import Engine

log = logging.getLogger("amos.runner")


def builtin_gates(durability: DurabilityGate, permissions: PermissionGate, doom: DoomGate | None,
                  policy: PolicyGate | None) -> list[Gate]:
    """The built-in gates in their documented order: durability → permission → doom loop
    → admission.

    Nothing with a side effect is dispatched once the journal failed, so nobody is asked
    about it; a call is scored by the doom loop only after its permission was granted,
    and admitted by the loop policy just before dispatch (see :mod:`amos.engine.gates`).
    """
    return [gate for gate in (durability, permissions, doom, policy) if gate is not None]


class TurnLoop:
    """One execution: its state, its gates, and the loop over turns.

    Args:
        engine: the host's collaborators (long-lived, shared by its runs).
        run: this execution's state.
        preset: decisions given with ``Host.resume`` (call id → (approved, reason)).
    """

    def __init__(self, engine: Engine, run: RunState,
                 preset: Mapping[str, tuple[bool, str | None]] | None = None):
        self.engine = engine
        self.run = run
        self.durability = DurabilityGate(engine.transcript)
        self.permissions = PermissionGate(engine.settings, engine.approvals, engine.transcript, preset)
        self.doom = DoomGate(engine.doom_guard, engine.transcript) if engine.doom_guard is not None else None
        self.policy: PolicyGate | None = None
        self.plan: CheckPlan = engine.completion.plan(None)  # until the loop policy is captured
        self.gates: list[Gate] = []
        self.round: ToolRound | None = None
        self._wire()

    def _wire(self) -> None:
        """(Re)build the gate list and the round around them (the policy gate arrives at start)."""
        engine = self.engine
        self.gates = [*builtin_gates(self.durability, self.permissions, self.doom, self.policy),
                      *([engine.mcp] if engine.mcp is not None else []), *engine.extra_gates,
                      *([engine.snapshots] if engine.snapshots is not None else [])]  # last: just before dispatch
        recorder = OutcomeRecorder(engine.tools, engine.transcript, engine.evidence, engine.masker, self.gates)
        self.round = ToolRound(engine.tools, CallPlanner(engine.tools, engine.access), self.gates, self.permissions, recorder,
                               done_tool=self.plan.done_tool)

    # ------------------------------------------------------------------ driving

    def emit(self, event: RunEvent) -> None:
        """Journal ``event`` (a journal failure is announced once, first) and send it out."""
        run = self.run
        assert run.queue is not None
        if log.isEnabledFor(logging.DEBUG) and not isinstance(event, TextDelta):
            log.debug("%s %s", run.execution_id[:8], event.model_dump_json(exclude={"content"})[:2000])
        if isinstance(event, Notice):  # a notice may quote an error message (issue 17, item 3)
            event = event.model_copy(update={"text": run.mask(event.text)})
        transcript = self.engine.transcript
        transcript.event(event)
        problem = transcript.problem()
        if problem is not None:
            run.queue.put_nowait(problem)
        run.queue.put_nowait(event)

    async def execute(self, body: Callable[[], Awaitable[None]]) -> None:
        """Run ``body`` (a new prompt, or held calls being resumed) under the run's time
        limit, record how it stopped, and finish the run."""
        engine, run = self.engine, self.run
        run._emit = self.emit
        run.mask = functools.partial(scrub, secrets=tuple(engine.settings.secrets))
        warnings = engine.transcript.open()
        if engine.access is not None:  # the sandbox of the mode in force (plan mode: read-only)
            if run.resumed and run.record.plan and not engine.access.plan:
                engine.access.set_plan(True)  # a paused plan run goes on as one
            run.record.plan = engine.access.plan
            engine.tools.context = engine.access.tool_context(engine.tools.context)
            run.sandbox = engine.access.in_force()
        if run.resumed:
            engine.transcript.fields("pending")  # the decisions of this resume
        self.emit(RunStarted(session_id=engine.transcript.session.id, execution_id=run.execution_id,
                             model=engine.model.spec, resumed=run.resumed))
        for warning in warnings:
            self.emit(Notice(level="warning", text=warning))
        if engine.doom_guard is not None:
            for warning in engine.doom_guard.take_warnings():
                text = warning if warning.startswith("doom_loop") else f"doom_loop: {warning}"
                self.emit(Notice(level="warning", text=text))
        timeout = engine.settings.timeout_s
        try:
            try:
                async with asyncio.timeout(timeout):
                    if await self._start_policy():
                        if engine.mcp is not None:  # before the first request and before held calls run
                            await engine.mcp.prepare(run, self.policy.policy if self.policy else None)
                        await engine.completion.baseline(run, self.policy, self.plan)
                        if not run.stopped:  # a check that can never run stops before any model call
                            await body()
            except TimeoutError:
                run.stop("timeout", "timeout", f"the run's time limit of {timeout:g} s expired",
                         {"timeout_s": timeout, "elapsed_s": round(time.monotonic() - run.started_monotonic, 3)})
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            run.stop("user_abort", "cancelled", f"the run was stopped by {run.cancelled_by}"
                     if run.cancelled_by else "the run was cancelled by the user")
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a bug must still end with a receipt
            self.emit(Notice(level="error", text=f"internal error: {type(exc).__name__}: {exc}"))
            run.detail = f"the run ended on an internal error: {type(exc).__name__}: {exc}"
        finally:
            self._finish()

    async def _start_policy(self) -> bool:
        """Capture the loop policy (and its Python callbacks) for this execution.

        Returns:
            False when a callback cannot be loaded (the run stopped ``checker_error``).
        """
        policy = self.engine.loop_policy()
        if policy is None:
            return True
        engine = self.engine
        self.policy = await PolicyGate.start(self.run, policy, transcript=engine.transcript,
                                             workspace=engine.workspace, env=engine.env)
        if self.policy is None:
            return False
        self.plan = engine.completion.plan(self.policy.policy)
        self._wire()
        return True

    def _finish(self) -> None:
        engine, run = self.engine, self.run
        try:
            assert self.round is not None
            self.round.close_open_calls(run)
            engine.run_end.finish(run, self.gates, completion_configured=self.plan.configured,
                                  check=engine.completion.check_view(self.plan, run),
                                  policy=self.policy.policy if self.policy is not None else None, doom=self.doom)
        except Exception as exc:  # noqa: BLE001 - the stream must end even on a bug
            log.exception("finishing the run failed")
            self.emit(Notice(level="error", text=f"internal error while finishing the run: "
                                                 f"{type(exc).__name__}: {exc}"))
        finally:
            assert run.queue is not None
            run.queue.put_nowait(END)

    # ------------------------------------------------------------------ entry points

    async def prompt(self, text: str, title: str | None = None) -> None:
        """A new prompt: drop a stale approval pause, record the prompt, run the turns.

        ``title`` names a session that has none yet (its first line, 80 characters at
        most); default: the prompt."""
        transcript = self.engine.transcript
        self._drop_stale_pending()
        title = title if title is not None and title.strip() else text
        if transcript.session.title is None and title.strip():
            transcript.set(title=title.strip().splitlines()[0][:80])
        transcript.append(Message.user(text))
        if self.doom is not None:
            self.doom.new_user_turn()
        await self.turns()

    async def resume(self, pending: PendingApproval) -> None:
        """Run the held calls of a pause (every one decided), then go on with the turns."""
        settings, run = self.engine.settings, self.run
        if pending.confirmation is not None:
            await self._resume_confirmation(pending)
            return
        if pending.undecided() and not settings.interactive and not settings.auto_approve:
            run.pending = pending
            first = pending.undecided()[0]
            run.stop("approval_required", "approval_pending",
                     f"{len(pending.undecided())} held call(s) still need a decision, starting with "
                     f"{first.call.tool_name} ({first.call.call_id})")
            return
        self.engine.transcript.session.pending = None
        run.open_calls = [h.call for h in pending.held]
        if await self._tool_round(run.open_calls):
            return
        await self.turns()

    async def _resume_confirmation(self, pending: PendingApproval) -> None:
        """A completion claim a person was asked to confirm: decided now, or still WAITING."""
        run, engine = self.run, self.engine
        request = pending.confirmation
        assert request is not None
        if request.decision is None:
            run.pending = pending
            run.stop("approval_required", "confirmation_pending",
                     f"a person must still confirm the work is done (amos resume {engine.transcript.session.id} "
                     "--confirm | --reject REASON)")
            return
        engine.transcript.session.pending = None
        if await engine.completion.apply_confirmation(run, self.policy, self.plan, request):
            return
        if not self._limits_reached():
            await self.turns()

    # ------------------------------------------------------------------ the loop

    async def turns(self) -> None:
        """Model turns until a stop is recorded."""
        while True:
            if await self._before_request():
                return
            turn = await self._model_turn()
            if turn is None or self._turn_stops_run(turn):
                return
            if turn.calls:
                if await self._tool_round(turn.calls):
                    return
                continue
            if await self.engine.completion.decide(self.run, self.policy, self.plan, Claim("answer", turn.text)):
                return
            if self._limits_reached():
                return

    async def _before_request(self) -> bool:
        for gate in self.gates:
            await gate.before_request(self.run)
            if self.run.stopped:
                return True
        return False

    async def _model_turn(self) -> Turn | None:
        """One step: fit the window, stream the model call, record the turn.

        A context-length error is answered once per step: the window is learned (from
        the error or the server), the history compacted to fit it, and the call made
        again (issue 17, item 16).
        """
        engine, run = self.engine, self.run
        run.record.steps += 1
        run.record.output_text = ""  # the final text is the latest turn's: a failed call has none
        self.emit(StepStarted(step=run.record.steps, max_steps=engine.settings.max_steps))
        if await engine.context.fit(run):
            return None
        transcript = engine.transcript
        provider = engine.model.for_turn(run, self.doom.take_escalation() if self.doom is not None else None)
        retried = False
        while True:
            estimated = engine.context.measure().total
            request = build_request(engine.instructions.text(), transcript.messages, engine.tools.specs())
            used = {c.call_id for m in transcript.messages for c in m.tool_calls}
            watch = self.doom.stream_watch() if self.doom is not None else None
            turn = await stream_turn(run, provider, request, engine.masker, used,
                                     watch=watch.feed if watch is not None else None)
            if transcript.session.provider_state:
                transcript.fields("provider_state")  # the scripted provider's position
            error = turn.error
            if error is None or error.kind != "context_length" or turn.text or retried:
                break
            retried = True
            if await engine.context.recover_overflow(run, provider, str(error)) is None:
                break
            run.record.usage.model_calls += 1  # the attempt that failed; the next one is made now
        if turn.partial is not None:
            self._record_partial(turn, estimated)
            if turn.cancelled:
                raise asyncio.CancelledError  # the partial turn is kept; the run stops user_abort / timeout
            if turn.error is not None:
                hint = f"; {engine.context.overflow_hint()}" if turn.error.kind == "context_length" else ""
                run.stop("provider_error", turn.error.kind,
                         f"the model call failed ({turn.error.kind}): {turn.error}{hint}")
            elif self.doom is not None:
                self.doom.stream_stopped(run, turn.stopped_by)
            return None
        assert turn.finish is not None and turn.finish.finish_reason != "error"  # else partial (stream_turn)
        message = assistant_message(turn)
        usage = timed((reported_usage(turn.finish) if turn.finish.usage_reported
                       else engine.context.estimated_usage(estimated, message)), turn)  # the provider said nothing
        run.record.usage.add(engine.context.record_call(usage, run.turn_model, "turn", estimated))
        transcript.append(message)
        run.record.output_text = turn.text
        run.finish_detail = turn.finish.refusal or turn.finish.detail
        run.open_calls = list(turn.calls)
        return turn

    def _record_partial(self, turn: Turn, estimated: int) -> None:
        """A turn cut short (issue 23): its text kept, masked, marked partial; one model call
        counted (its tokens estimated when text came) — never twice, never none."""
        engine, run = self.engine, self.run
        if not turn.text:
            run.record.usage.model_calls += 1  # nothing came back: a call, with no tokens to count
            return
        message = assistant_message(turn)
        engine.transcript.append(message)
        usage = timed(engine.context.estimated_usage(estimated, message), turn)
        run.record.usage.add(engine.context.record_call(usage, run.turn_model, "turn", estimated))
        if turn.partial == "doom_loop":  # the answer the ladder stopped; a failed call has none
            run.record.output_text = turn.text

    def _turn_stops_run(self, turn: Turn) -> bool:
        """The doom-loop text score, and the finish reasons that end the run."""
        run = self.run
        assert turn.finish is not None
        if self.doom is not None and turn.text:
            self.doom.score_text(run, turn.text)
            if not turn.calls and self.doom.stop_if_armed(run):
                return True
        finish = turn.finish.finish_reason
        if finish == "length":
            assert self.round is not None
            planner = CallPlanner(self.engine.tools, self.engine.access)
            for call in turn.calls:
                self.round.recorder.refuse(run, planner.plan(call), "not_started",
                                           "not run: the model's turn was cut off by its output limit before "
                                           "this call was complete")
            if self.doom is None and turn.text and repeats_like_a_runaway(turn.text):
                run.emit(Notice(level="warning", text="the reply kept repeating itself until its output limit; "
                                "\"doom_loop\": true in the config stops such loops while they stream"))
            run.stop("output_limit", "output_truncated", "the model's turn was cut off by its output limit")
            return True
        if finish in ("content_filter", "refusal"):
            reason = "content_filtered" if finish == "content_filter" else "refused"
            said = f": {' '.join(run.finish_detail.split())[:300]}" if run.finish_detail else ""
            run.stop("refusal", reason, "the model or provider refused to answer"
                     + (" (content filter)" if finish == "content_filter" else "") + said)
            return True
        return False

    async def _tool_round(self, calls: list[ToolCallPart]) -> bool:
        """A tool round, the gates' view of it once it finished, and the limits."""
        assert self.round is not None
        run = self.run
        if await self.round.run(run, calls):
            return True
        for gate in self.gates:
            await gate.round_finished(run)
            if run.stopped:
                return True
        if run.done_claim is not None:  # the done tool: a completion claim at this step
            claim, run.done_claim = run.done_claim, None
            if await self.engine.completion.decide(run, self.policy, self.plan, Claim("done_tool", claim)):
                return True
        return self._limits_reached()

    def _limits_reached(self) -> bool:
        """The step limit and the token budget, checked after each step's calls ran."""
        run, settings = self.run, self.engine.settings
        steps = run.record.steps
        if steps >= settings.max_steps:
            run.stop("step_limit", "iteration_limit", f"the step limit of {settings.max_steps} model calls was "
                     "reached", {"max_steps": settings.max_steps, "steps": steps})
            return True
        budget = settings.token_budget
        used = run.record.usage.total_tokens
        if budget is not None and used >= budget:
            run.stop("token_budget", "token_budget", f"the token budget of {budget} was reached ({used} used)",
                     {"token_budget": budget, "total_tokens": used})
            return True
        return False

    def _drop_stale_pending(self) -> None:
        """A new prompt replaces a pending approval: its held calls get "not run" results."""
        transcript = self.engine.transcript
        pending = transcript.session.pending
        if pending is None:
            return
        transcript.session.pending = None
        for held in pending.held:
            transcript.append(Message.tool_result(ToolResultPart(
                call_id=held.call.call_id, tool_name=held.call.tool_name, is_error=True, status="not_started",
                content="not run: the session continued with a new prompt before this call was decided")))
        if pending.confirmation is not None and not pending.held:
            self.emit(Notice(level="warning", text="the completion claim waiting for a person's confirmation was "
                                                   "dropped unanswered: a new prompt replaced it"))
            return
        summarize = self.engine.tools.summarize
        names = ", ".join(f"{summarize(h.call)} ({h.call.call_id})" for h in pending.held[:5])
        self.emit(Notice(level="warning", text=f"{len(pending.held)} held call(s) were dropped unrun: "
                                               f"{names}{' …' if len(pending.held) > 5 else ''} — a new "
                                               "prompt replaced the pending approval"))
