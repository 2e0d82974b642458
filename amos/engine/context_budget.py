"""The context window: measure every request, compact when it fills, record usage.

Issue "Context window": every request is measured before dispatch (system prompt,
task view, tool schemas, history) with :func:`amos.context.measure_request`, against
the window from ``context.window_tokens`` or the model table (else 32,000). At
``context.compact_at`` of the window the oldest turns beyond ``keep_recent_turns`` are
replaced by one summary the model writes (:mod:`amos.compaction` decides what may go;
protected content never does). The exact replaced history is kept first — as an
evidence record (tool ``__context_source__``) when evidence is enabled, and always in
the checkpoint taken just before (restoring it undoes the compaction). A request that
cannot fit even then stops before dispatch naming what takes the room. Every model
call's usage (and its cost, when ``genai-prices`` knows the model) is recorded in the
session.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

from amos.compaction import (
    SUMMARY_INSTRUCTIONS,
    CompactionPlan,
    apply_plan,
    plan_compaction,
    summary_message,
    summary_request_messages,
)
from amos.config_models import ContextConfig
from amos.context import (
    MessageSizeCache,
    RequestBudget,
    TokenEstimator,
    context_window,
    measure_request,
)
from amos.engine.binding import SessionBinding
from amos.engine.masking import Masker
from amos.engine.model import ModelSlot, unreadable
from amos.engine.state import RunState
from amos.engine.tasks import Instructions
from amos.engine.transcript import Transcript
from amos.errors import AmosError, ProviderError, SessionError
from amos.events import Notice
from amos.evidence.capture import EvidenceCapture
from amos.journal import MAX_MODEL_CALL_ROWS
from amos.messages import Message, Usage
from amos.providers.base import FinishEvent, ModelRequest, TextDeltaEvent
from amos.sessions import utc_now
from amos.tools.manager import ToolManager

MAX_INSTRUCTIONS_CHARS = 4000
"""Longest ``/compact`` INSTRUCTIONS accepted (characters)."""

MIN_COMPACT_TOKENS = 64
"""Older turns holding fewer estimated tokens than this are not worth a summary call."""

CONTEXT_SOURCE_TOOL = "__context_source__"
"""Tool name of the evidence record that keeps a compaction's exact replaced history."""


@dataclass
class CompactionResult:
    """What a compaction did (or why it did nothing).

    Attributes:
        compacted: True when the history was replaced.
        message: one line for people.
        replaced: messages replaced by the summary.
        before_tokens / after_tokens: estimated request size before and after (tokens).
        evidence_id: evidence record holding the replaced history, or None.
        checkpoint: checkpoint taken just before (restoring it undoes the compaction).
        usage: usage of the summary call.
        failed: True when a step failed (the summary call, keeping the replaced
            history); False when there was simply nothing to compact.
    """

    compacted: bool
    message: str
    replaced: int = 0
    before_tokens: int = 0
    after_tokens: int = 0
    evidence_id: str | None = None
    checkpoint: int | None = None
    usage: Usage | None = None
    failed: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``--json`` of ``/compact``)."""
        return {"compacted": self.compacted, "message": self.message, "replaced": self.replaced,
                "before_tokens": self.before_tokens, "after_tokens": self.after_tokens,
                "evidence_id": self.evidence_id, "checkpoint": self.checkpoint,
                "usage": self.usage.model_dump() if self.usage else None, "failed": self.failed}


class ContextBudget:
    """Context budget, compaction and usage recording of one session.

    Args:
        config: the ``context`` section of the config.
        transcript: the session.
        model: the model in force (the window depends on it; it writes summaries).
        tools: the tool set (their schemas are part of every request).
        instructions: the system prompt and task view.
        binding: checkpoints taken before a compaction.
        evidence: evidence capture (the replaced history is kept as a record), or None.
        masker: secrets in provider errors.
        autosave: checkpoints are taken (the session is saved).
    """

    def __init__(self, config: ContextConfig, transcript: Transcript, model: ModelSlot, tools: ToolManager,
                 instructions: Instructions, binding: SessionBinding, evidence: EvidenceCapture | None,
                 masker: Masker, *, autosave: bool):
        self.config = config
        self.transcript = transcript
        self.model = model
        self.tools = tools
        self.instructions = instructions
        self.binding = binding
        self.evidence = evidence
        self.masker = masker
        self.autosave = autosave
        self._sizes = MessageSizeCache()
        self._estimator: TokenEstimator | None = None
        self._notice_for: str | None = None
        self._failed_for: str | None = None

    # ------------------------------------------------------------------ budget

    def window(self) -> tuple[int, str]:
        """``(window tokens, source)``: ``config``, ``server`` (learned from the server),
        ``model table`` or ``default``."""
        learned = self.transcript.session.context_window
        if self.config.window_tokens is None and learned:
            return learned, "server"
        return context_window(self.model.spec, self.config.window_tokens)

    async def recover_overflow(self, run: RunState, provider: Any, error: str) -> int | None:
        """The request was too long for the server (issue 17, item 16): learn the window
        from the error or the server, and compact once to fit it.

        Returns:
            The window in force after learning (tokens) when a compaction made the request
            fit and the call should be retried once; None when nothing more can be done.
        """
        from amos.providers.context_window import window_from_error

        learned = window_from_error(error)
        if learned is None and hasattr(provider, "probe_window"):
            try:
                learned = await asyncio.to_thread(provider.probe_window)
            except Exception:  # noqa: BLE001 - a probe is a hint, never a failure
                learned = None
        if learned is not None and self.config.window_tokens is None:
            self.transcript.set(context_window=int(learned))
            run.emit(Notice(text=f"context: the server's context window is {learned} tokens (learned from "
                                 f"{'its error' if window_from_error(error) else 'the server'}); amos budgets "
                                 "against it from now on"))
        window, _ = self.window()
        result = await self._compact_now(None, current_start=self._current_start(), usage_sink=run.record.usage,
                                         must_fit=int(window * self.config.compact_at))
        if result.compacted:
            run.emit(Notice(text=f"context: {result.message}; retrying the request once"))
            return window
        return None

    def overflow_hint(self) -> str:
        """What to do about a context-length error that compaction could not fix."""
        window, source = self.window()
        return (f"amos budgets against {window} tokens ({source}); set context.window_tokens to the server's "
                "context window (llama.cpp: its --ctx-size / n_ctx) or lower context.keep_recent_turns")

    @property
    def estimator(self) -> TokenEstimator:
        """The session's token estimator (calibrated by the usage providers report)."""
        if self._estimator is None:
            self._estimator = TokenEstimator.from_state(self.transcript.session.estimator)
        return self._estimator

    def measure(self) -> RequestBudget:
        """Estimated size of the next request, by part (tokens; offline, < 20 ms for
        2,000 messages thanks to a per-message size cache)."""
        return measure_request(self.instructions.system_prompt, self.instructions.task_view(), self.tools.specs(),
                               self.transcript.messages, self.estimator, sizes=self._sizes)

    def overview(self) -> dict[str, Any]:
        """The ``/context`` figures: window, each part of the next request, how close to compaction."""
        window, source = self.window()
        budget = self.measure()
        plan = plan_compaction(self.transcript.messages, budget.message_tokens,
                               keep_recent_turns=self.config.keep_recent_turns)
        return {
            "window_tokens": window, "window_source": source,
            "estimated_tokens": budget.total, "fraction": round(budget.total / window, 4),
            "parts": {"system": budget.system, "task_view": budget.task_view, "tools": budget.tools,
                      "history": budget.history, "protected": budget.protected},
            "compact_at": self.config.compact_at, "compact_at_tokens": int(window * self.config.compact_at),
            "compactable_tokens": plan.replaced_tokens if plan.possible else 0,
            "estimator_factor": round(budget.factor, 4),
        }

    # ------------------------------------------------------------------ usage

    def record_call(self, usage: Usage, model_spec: str, purpose: str, estimated: int | None) -> Usage:
        """Price one model call, calibrate the estimator and keep its usage row.

        Returns:
            The usage with ``cost_usd`` set when the model's price is known.
        """
        from amos.pricing import cost_usd

        try:
            cost = cost_usd(model_spec, usage)
        except (ValueError, LookupError, TypeError):
            cost = None
        usage = usage.model_copy(update={"cost_usd": cost})
        session = self.transcript.session
        if estimated and usage.input_tokens and purpose == "turn" and not usage.estimated:
            self.estimator.observe(estimated, usage.input_tokens)
            session.estimator = self.estimator.to_state()
        row = {"at": utc_now(), "model": model_spec, "purpose": purpose, "estimated_input_tokens": estimated,
               **{name: getattr(usage, name) for name in Usage.TOKEN_FIELDS if name != "model_calls"},
               "cost_usd": cost}
        if usage.estimated:
            row["estimated"] = True
        session.model_calls = [*session.model_calls, row][-MAX_MODEL_CALL_ROWS:]
        self.transcript.model_call(row)
        return usage

    def estimated_usage(self, input_tokens: int, reply: Message) -> Usage:
        """The usage of a call whose provider reported none: the request's estimate and
        the reply's, marked ``estimated`` (counts stay integers; budgets use them)."""
        return Usage(input_tokens=max(0, int(input_tokens)), output_tokens=self._tokens_of(reply), model_calls=1,
                     estimated=True)

    # ------------------------------------------------------------------ before a request

    async def fit(self, run: RunState) -> bool:
        """Before a model request: compact at ``compact_at``; stop when it cannot fit.

        Returns:
            True when the run stopped (cause ``provider_error``, reason
            ``context_length``, no model call made).
        """
        window, source = self.window()
        budget = self.measure()
        failure = None
        # After a failed compaction (a summary call spent, or the replaced history not
        # kept) the run does not try again before every request: only when the request
        # would not fit otherwise, once more before stopping.
        failed_before = self._failed_for == run.execution_id
        if budget.total > window * self.config.compact_at and (not failed_before or budget.total > window):
            result = await self._compact_now(None, current_start=self._current_start(), usage_sink=run.record.usage,
                                             must_fit=window if budget.total > window else None)
            if result.compacted:
                self._failed_for = None
                run.emit(Notice(text=f"context: {result.message} (window {window} tokens)"))
                budget = self.measure()
            else:
                if result.failed:
                    self._failed_for = run.execution_id
                    failure = result.message
                if self._notice_for != run.execution_id:
                    self._notice_for = run.execution_id
                    run.emit(Notice(level="warning", text=f"context: ~{budget.total} of {window} tokens; "
                                                          f"{result.message}"))
        if budget.total <= window:
            return False
        run.record.steps -= 1  # no model call was made
        run.stop("provider_error", "context_length", self._overflow_detail(budget, window, source, failure),
                 {"window_tokens": window, "estimated_tokens": budget.total})
        return True

    # ------------------------------------------------------------------ compaction

    async def compact(self, instructions: str | None = None) -> CompactionResult:
        """Compact now (``/compact [INSTRUCTIONS]``); the caller made sure no run is active.

        Returns:
            What happened; ``compacted`` False (history unchanged) when there is
            nothing to compact, only protected content is old, or a step failed.
        """
        if instructions and len(instructions) > MAX_INSTRUCTIONS_CHARS:
            return CompactionResult(False, f"nothing compacted: INSTRUCTIONS are limited to "
                                           f"{MAX_INSTRUCTIONS_CHARS:,} characters (got {len(instructions):,})",
                                    failed=True)
        if self.transcript.session.pending is not None:
            return CompactionResult(False, "nothing compacted: the session is waiting for an approval, and the "
                                           "pending tool-call protocol is never compacted; decide it first")
        result = await self._compact_now(instructions, current_start=None, usage_sink=None)
        if result.compacted and self.binding.saved and self.autosave:
            try:
                self.binding.save(self.transcript.session)
            except SessionError as exc:
                result.message += f" (not saved: {exc})"
        return result

    async def _compact_now(self, instructions: str | None, *, current_start: int | None,
                           usage_sink: Usage | None, must_fit: int | None = None) -> CompactionResult:
        """Plan, keep the replaced history, ask for the summary, replace. Any failure
        leaves the history unchanged and says why."""
        messages = list(self.transcript.messages)
        budget = self.measure()
        plan = plan_compaction(messages, budget.message_tokens, keep_recent_turns=self.config.keep_recent_turns,
                               current_start=current_start)
        unchanged = {"before_tokens": budget.total, "after_tokens": budget.total}
        if not plan.possible:
            return CompactionResult(False, plan.refusal or "nothing to compact", **unchanged)
        if must_fit is not None and budget.total - plan.replaced_tokens > must_fit:
            # No summary call when even replacing all older turns by nothing cannot fit.
            return CompactionResult(False, f"nothing compacted: even without the ~{plan.replaced_tokens} tokens "
                                           f"of older turns the request would need ~"
                                           f"{budget.total - plan.replaced_tokens} tokens, more than the window "
                                           f"of {must_fit}", **unchanged)
        if plan.replaced_tokens < MIN_COMPACT_TOKENS:
            return CompactionResult(False, f"nothing worth compacting: the turns older than the recent ones hold "
                                           f"only ~{plan.replaced_tokens} tokens", **unchanged)
        replaced = [messages[i] for i in plan.replaced]
        try:
            usage, text = await self._summarize(messages, plan, instructions)
        except Exception as exc:  # noqa: BLE001 - unreadable wire data is a provider error, as for a turn
            if not isinstance(exc, (ProviderError, AmosError)):
                exc = unreadable(self.model.provider, exc, self.masker)
            return CompactionResult(False, f"nothing compacted: the summary call failed ({exc}); the history is "
                                           "unchanged", failed=True, **unchanged)
        if usage_sink is not None:
            usage_sink.add(usage)
        else:
            self.transcript.session.usage.add(usage)
        if not text.strip():
            return CompactionResult(False, "nothing compacted: the model returned an empty summary; the history "
                                           "is unchanged", usage=usage, failed=True, **unchanged)
        saved = plan.replaced_tokens - self._tokens_of(summary_message(text, replaced=len(replaced), source=""))
        if saved <= 0:
            return CompactionResult(False, f"nothing compacted: the summary is not smaller than the ~"
                                           f"{plan.replaced_tokens} tokens it would replace; the history is "
                                           "unchanged", usage=usage, **unchanged)
        try:
            evidence_id, checkpoint = self._keep_replaced(replaced, instructions)
        except (AmosError, OSError) as exc:
            return CompactionResult(False, f"nothing compacted: the replaced history could not be kept ({exc}); "
                                           "the history is unchanged", usage=usage, failed=True, **unchanged)
        where = []
        if evidence_id:
            where.append(f"the exact messages are evidence record {evidence_id}")
        if checkpoint:
            where.append(f"checkpoint {checkpoint} holds the history before this compaction")
        summary = summary_message(text, replaced=len(replaced),
                                  source="; ".join(where) or "the exact messages were not kept (no session store)")
        self.transcript.replace_all(apply_plan(messages, plan, summary),
                                    compaction={"replaced": len(replaced), "evidence_id": evidence_id,
                                                "checkpoint": checkpoint})
        after = self.measure().total
        return CompactionResult(True, f"compacted {len(replaced)} older message(s) into a summary: "
                                      f"~{budget.total} → ~{after} tokens"
                                      + (f"; {'; '.join(where)}" if where else ""),
                                replaced=len(replaced), before_tokens=budget.total, after_tokens=after,
                                evidence_id=evidence_id, checkpoint=checkpoint, usage=usage)

    def _tokens_of(self, message: Message) -> int:
        """Estimated tokens of one message as the next request would carry it."""
        return measure_request("", "", (), [message], self.estimator).history

    async def _summarize(self, messages: list[Message], plan: CompactionPlan,
                         instructions: str | None) -> tuple[Usage, str]:
        window, _ = self.window()
        # Each part of the summary request is clipped so the request fits half the window.
        part_chars = max(200, min(4000, (window * 2) // max(1, len(plan.replaced))))
        system = SUMMARY_INSTRUCTIONS + (f"\n\nThe user adds: {instructions.strip()}" if instructions else "")
        request = ModelRequest(system=system, messages=tuple(summary_request_messages(
            messages, plan, "Summarise the conversation above as instructed.", part_chars)), tools=(),
            purpose="summary")
        text: list[str] = []
        finish: FinishEvent | None = None
        async for event in self.model.provider.stream(request):
            if isinstance(event, TextDeltaEvent):
                text.append(event.text)
            elif isinstance(event, FinishEvent):
                finish = event
        if finish is None or finish.finish_reason in ("error", "content_filter", "refusal"):
            raise ProviderError("bad_response", "the summary call ended without a usable answer")
        usage = self.record_call(reported_usage(finish), self.model.spec, "summary", None)
        return usage, self.masker.clean("".join(text))

    def _keep_replaced(self, replaced: list[Message], instructions: str | None) -> tuple[str | None, int | None]:
        """Keep the exact replaced messages before anything changes.

        Returns:
            ``(evidence id or None, checkpoint number or None)``.

        Raises:
            AmosError: neither could be written (the compaction must not happen).
        """
        evidence_id = self._context_source_record(replaced, instructions) if self.evidence is not None else None
        checkpoint = None
        if self.binding.saved and self.autosave:
            checkpoint = self.binding.checkpoint(self.transcript.session, "before_compaction").number
        if evidence_id is None and checkpoint is None and self.binding.saved:
            raise SessionError("write_failed", "no evidence store and no checkpoint to keep the replaced history")
        return evidence_id, checkpoint

    def _context_source_record(self, replaced: list[Message], instructions: str | None) -> str:
        from amos.tools.base import ToolOutcome

        assert self.evidence is not None
        now = utc_now()
        outcome = ToolOutcome(
            call_id=f"compaction-{uuid.uuid4().hex[:12]}", execution_id=f"session-{self.transcript.session.id}",
            tool=CONTEXT_SOURCE_TOOL, effect="read", status="succeeded", started_at=now, ended_at=now,
            result={"messages": [m.model_dump(mode="json") for m in replaced]},
            content=json.dumps({"replaced_messages": len(replaced)}))
        captured = self.evidence.capture(outcome, {"instructions": instructions, "replaced": len(replaced)}, None)
        if captured.reference is None:
            raise SessionError("write_failed", f"evidence record not stored: {captured.error}")
        return captured.reference.id

    def _current_start(self) -> int | None:
        messages = self.transcript.messages
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].role == "user" and messages[index].kind == "prompt":
                return index
        return None

    def _overflow_detail(self, budget: RequestBudget, window: int, source: str, failure: str | None = None) -> str:
        protected = [p for m in self.transcript.messages for p in m.tool_results if p.protected]
        tasks_on = self.instructions.tasks is not None
        holds = [f"system prompt ~{budget.system}", f"tool schemas ~{budget.tools}", f"history ~{budget.history}"]
        if tasks_on:
            holds.insert(1, f"the task view ~{budget.task_view}")
        kept = ["the task view"] if tasks_on else []
        if protected:
            kept.append(f"{len(protected)} raw tool result(s) whose evidence was not stored "
                        f"({', '.join(p.call_id for p in protected[:5])}; ~{budget.protected} tokens)")
        remedy = ("repair evidence storage and acknowledge them (Host.acknowledge_tool_evidence), "
                  if protected else "")
        keep_note = f" and holds {' and '.join(kept)}, which amos will not drop" if kept else ""
        after = " even after compaction" if failure is None else f" and compaction failed ({failure})"
        return (f"the next request (~{budget.total} tokens: {', '.join(holds)}) does not fit the context window "
                f"of {window} tokens ({source}){after}{keep_note} — {remedy}lower "
                "context.keep_recent_turns, prune the task notes, or continue in a new session")


def reported_usage(finish: FinishEvent) -> Usage:
    """The usage a provider reported for a call, counts clamped at 0 and one model call at
    least (negative counts from a server must not defeat ``token_budget``)."""
    reported = {name: max(0, int(getattr(finish.usage, name) or 0)) for name in Usage.TOKEN_FIELDS}
    reported["model_calls"] = max(1, reported["model_calls"])
    return Usage(**reported)
