"""The context-window part of :class:`~amos.runner.AgentRunner` (a mixin).

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
session. Uses the runner's ``session``, ``config``, ``tools``, ``provider``,
``model_spec``, ``evidence``, ``tasks``, ``store``, ``system_prompt`` and ``_emit``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
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
from amos.context import (
    MessageSizeCache,
    RequestBudget,
    TokenEstimator,
    context_window,
    measure_request,
)
from amos.errors import AmosError, ProviderError, SessionError
from amos.events import Notice
from amos.journal import MAX_MODEL_CALL_ROWS
from amos.messages import Message, Usage
from amos.providers.base import FinishEvent, ModelRequest, TextDeltaEvent

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


class ContextDuties:
    """Context budget, compaction and usage recording of the runner."""

    session: Any
    config: Any
    tools: Any
    provider: Any
    model_spec: str
    evidence: Any
    tasks: Any
    store: Any
    autosave: bool
    system_prompt: str
    _emit: Callable[..., None]
    _ensure_idle: Callable[[], None]
    _checkpoint: Callable[..., Any]
    _journal_write: Callable[..., bool]
    _journal_fields: Callable[..., None]
    request_system_prompt: Callable[[], str]

    _sizes: MessageSizeCache | None = None
    _estimator: TokenEstimator | None = None
    _compact_notice_for: str | None = None
    _compact_failed_for: str | None = None
    _task: Any = None

    # ------------------------------------------------------------------ budget (host API)

    def _context_config(self) -> Any:
        return getattr(self.config, "context", None)

    def context_window(self) -> tuple[int, str]:
        """``(window tokens, source)``: ``config``, ``model table`` or ``default``."""
        configured = getattr(self._context_config(), "window_tokens", None)
        return context_window(self.model_spec, configured)

    @property
    def estimator(self) -> TokenEstimator:
        """The session's token estimator (calibrated by the usage providers report)."""
        if self._estimator is None:
            self._estimator = TokenEstimator.from_state(self.session.estimator)
        return self._estimator

    def measure_context(self) -> RequestBudget:
        """Estimated size of the next request, by part (tokens; offline, < 20 ms for
        2,000 messages thanks to a per-message size cache)."""
        if self._sizes is None:
            self._sizes = MessageSizeCache()
        task_view = self.tasks.view() if self.tasks is not None else ""
        return measure_request(self.system_prompt, task_view, self.tools.specs(), self.session.messages,
                               self.estimator, sizes=self._sizes)

    def estimate_request_tokens(self) -> int:
        """Estimated tokens of the next request (see :meth:`measure_context`)."""
        return self.measure_context().total

    def context_overview(self) -> dict[str, Any]:
        """The ``/context`` figures: window, each part of the next request, how close
        to compaction, usage and cost so far."""
        window, source = self.context_window()
        budget = self.measure_context()
        compact_at = float(getattr(self._context_config(), "compact_at", 0.8))
        keep = int(getattr(self._context_config(), "keep_recent_turns", 4))
        plan = plan_compaction(self.session.messages, budget.message_tokens, keep_recent_turns=keep)
        return {
            "window_tokens": window, "window_source": source,
            "estimated_tokens": budget.total, "fraction": round(budget.total / window, 4),
            "parts": {"system": budget.system, "task_view": budget.task_view, "tools": budget.tools,
                      "history": budget.history, "protected": budget.protected},
            "compact_at": compact_at, "compact_at_tokens": int(window * compact_at),
            "compactable_tokens": plan.replaced_tokens if plan.possible else 0,
            "estimator_factor": round(budget.factor, 4),
        }

    # ------------------------------------------------------------------ usage

    def _record_call(self, usage: Usage, model_spec: str, purpose: str, estimated: int | None) -> Usage:
        """Price one model call, calibrate the estimator and keep its usage row.

        Returns:
            The usage with ``cost_usd`` set when the model's price is known.
        """
        from amos.pricing import cost_usd
        from amos.sessions import utc_now

        try:
            cost = cost_usd(model_spec, usage)
        except (ValueError, LookupError, TypeError):
            cost = None
        usage = usage.model_copy(update={"cost_usd": cost})
        if estimated and usage.input_tokens and purpose == "turn":
            self.estimator.observe(estimated, usage.input_tokens)
            self.session.estimator = self.estimator.to_state()
        row = {"at": utc_now(), "model": model_spec, "purpose": purpose, "estimated_input_tokens": estimated,
               **{name: getattr(usage, name) for name in Usage.TOKEN_FIELDS if name != "model_calls"},
               "cost_usd": cost}
        self.session.model_calls = [*self.session.model_calls, row][-MAX_MODEL_CALL_ROWS:]
        self._journal_write("model_call", row=row)  # a killed run still counts what it spent
        return usage

    # ------------------------------------------------------------------ compaction

    async def compact(self, instructions: str | None = None) -> CompactionResult:
        """Compact now (``/compact [INSTRUCTIONS]``), refused while a run is active.

        Returns:
            What happened; ``compacted`` False (history unchanged) when there is
            nothing to compact, only protected content is old, or a step failed.

        Raises:
            SessionError: ``busy`` while a run is active.
        """
        self._ensure_idle()
        if instructions and len(instructions) > MAX_INSTRUCTIONS_CHARS:
            return CompactionResult(False, f"nothing compacted: INSTRUCTIONS are limited to "
                                           f"{MAX_INSTRUCTIONS_CHARS:,} characters (got {len(instructions):,})",
                                    failed=True)
        if self.session.pending is not None:
            return CompactionResult(False, "nothing compacted: the session is waiting for an approval, and the "
                                           "pending tool-call protocol is never compacted; decide it first")
        self._task = asyncio.current_task()  # a run or host edit is refused as busy meanwhile
        try:
            result = await self._compact_now(instructions, current_start=None, usage_sink=None)
        finally:
            self._task = None
        if result.compacted and self.store is not None and self.autosave:
            try:
                self.store.save(self.session)
            except SessionError as exc:
                result.message += f" (not saved: {exc})"
        return result

    async def _compact_now(self, instructions: str | None, *, current_start: int | None,
                           usage_sink: Usage | None, must_fit: int | None = None) -> CompactionResult:
        """Plan, keep the replaced history, ask for the summary, replace. Any failure
        leaves the history unchanged and says why."""
        keep = int(getattr(self._context_config(), "keep_recent_turns", 4))
        messages = list(self.session.messages)
        budget = self.measure_context()
        plan = plan_compaction(messages, budget.message_tokens, keep_recent_turns=keep, current_start=current_start)
        if not plan.possible:
            return CompactionResult(False, plan.refusal or "nothing to compact", before_tokens=budget.total,
                                    after_tokens=budget.total)
        if must_fit is not None and budget.total - plan.replaced_tokens > must_fit:
            # No summary call when even replacing all older turns by nothing cannot fit.
            return CompactionResult(False, f"nothing compacted: even without the ~{plan.replaced_tokens} tokens "
                                           f"of older turns the request would need ~"
                                           f"{budget.total - plan.replaced_tokens} tokens, more than the window "
                                           f"of {must_fit}", before_tokens=budget.total, after_tokens=budget.total)
        if plan.replaced_tokens < MIN_COMPACT_TOKENS:
            return CompactionResult(False, f"nothing worth compacting: the turns older than the recent ones hold "
                                           f"only ~{plan.replaced_tokens} tokens", before_tokens=budget.total,
                                    after_tokens=budget.total)
        replaced = [messages[i] for i in plan.replaced]
        try:
            usage, text = await self._summarize(messages, plan, instructions)
        except Exception as exc:  # noqa: BLE001 - unreadable wire data is a provider error, as for a turn
            if not isinstance(exc, (ProviderError, AmosError)):
                exc = self._unreadable(exc)
            return CompactionResult(False, f"nothing compacted: the summary call failed ({exc}); the history is "
                                           "unchanged", before_tokens=budget.total, after_tokens=budget.total, failed=True)
        if usage_sink is not None:
            usage_sink.add(usage)
        else:
            self.session.usage.add(usage)
        if not text.strip():
            return CompactionResult(False, "nothing compacted: the model returned an empty summary; the history "
                                           "is unchanged", before_tokens=budget.total, after_tokens=budget.total,
                                    usage=usage, failed=True)
        saved = plan.replaced_tokens - self._sizes_tokens(summary_message(text, replaced=len(replaced), source=""))
        if saved <= 0:
            return CompactionResult(False, f"nothing compacted: the summary is not smaller than the ~"
                                           f"{plan.replaced_tokens} tokens it would replace; the history is "
                                           "unchanged", before_tokens=budget.total, after_tokens=budget.total,
                                    usage=usage)
        try:
            evidence_id, checkpoint = self._keep_replaced(replaced, instructions)
        except (AmosError, OSError) as exc:
            return CompactionResult(False, f"nothing compacted: the replaced history could not be kept ({exc}); "
                                           "the history is unchanged", before_tokens=budget.total,
                                    after_tokens=budget.total, usage=usage, failed=True)
        where = []
        if evidence_id:
            where.append(f"the exact messages are evidence record {evidence_id}")
        if checkpoint:
            where.append(f"checkpoint {checkpoint} holds the history before this compaction")
        summary = summary_message(text, replaced=len(replaced),
                                  source="; ".join(where) or "the exact messages were not kept (no session store)")
        self.session.messages[:] = apply_plan(messages, plan, summary)
        self._journal_write("messages", messages=[m.model_dump(mode="json") for m in self.session.messages],
                            compaction={"replaced": len(replaced), "evidence_id": evidence_id,
                                        "checkpoint": checkpoint})
        self._journaled = len(self.session.messages)
        after = self.measure_context().total
        return CompactionResult(True, f"compacted {len(replaced)} older message(s) into a summary: "
                                      f"~{budget.total} → ~{after} tokens"
                                      + (f"; {'; '.join(where)}" if where else ""),
                                replaced=len(replaced), before_tokens=budget.total, after_tokens=after,
                                evidence_id=evidence_id, checkpoint=checkpoint, usage=usage)

    def _sizes_tokens(self, message: Message) -> int:
        """Estimated tokens of one message as the next request would carry it."""
        return measure_request("", "", (), [message], self.estimator).history

    async def _summarize(self, messages: list[Message], plan: CompactionPlan,
                         instructions: str | None) -> tuple[Usage, str]:
        window, _ = self.context_window()
        # Each part of the summary request is clipped so the request fits half the window.
        part_chars = max(200, min(4000, (window * 2) // max(1, len(plan.replaced))))
        system = SUMMARY_INSTRUCTIONS + (f"\n\nThe user adds: {instructions.strip()}" if instructions else "")
        request = ModelRequest(system=system, messages=tuple(summary_request_messages(
            messages, plan, "Summarise the conversation above as instructed.", part_chars)), tools=(),
            purpose="summary")
        text: list[str] = []
        finish: FinishEvent | None = None
        async for event in self.provider.stream(request):
            if isinstance(event, TextDeltaEvent):
                text.append(event.text)
            elif isinstance(event, FinishEvent):
                finish = event
        if finish is None or finish.finish_reason in ("error", "content_filter", "refusal"):
            raise ProviderError("bad_response", "the summary call ended without a usable answer")
        reported = {name: max(0, int(getattr(finish.usage, name) or 0)) for name in Usage.TOKEN_FIELDS}
        reported["model_calls"] = max(1, reported["model_calls"])
        usage = self._record_call(Usage(**reported), self.model_spec, "summary", None)
        return usage, "".join(text)

    def _unreadable(self, exc: Exception) -> ProviderError:
        """A provider's unexpected exception as the ``bad_response`` error a turn would give."""
        from amos.providers.common import scrub

        secrets = tuple(getattr(getattr(self, "settings", None), "secrets", ()) or ())
        what = scrub(" ".join(str(exc).split())[:200], secrets)
        name = getattr(self.provider, "provider_name", "the provider")
        return ProviderError("bad_response", f"{name}: the response could not be read ({type(exc).__name__}: {what})")

    def _keep_replaced(self, replaced: list[Message], instructions: str | None) -> tuple[str | None, int | None]:
        """Keep the exact replaced messages before anything changes.

        Returns:
            ``(evidence id or None, checkpoint number or None)``.

        Raises:
            AmosError: neither could be written (the compaction must not happen).
        """
        evidence_id = None
        if self.evidence is not None:
            evidence_id = self._context_source_record(replaced, instructions)
        checkpoint = None
        if self.store is not None and self.autosave:
            checkpoint = self._checkpoint("before_compaction").number
        if evidence_id is None and checkpoint is None and self.store is not None:
            raise SessionError("write_failed", "no evidence store and no checkpoint to keep the replaced history")
        return evidence_id, checkpoint

    def _context_source_record(self, replaced: list[Message], instructions: str | None) -> str:
        from amos.sessions import utc_now
        from amos.tools.base import ToolOutcome

        now = utc_now()
        outcome = ToolOutcome(
            call_id=f"compaction-{uuid.uuid4().hex[:12]}", execution_id=f"session-{self.session.id}",
            tool=CONTEXT_SOURCE_TOOL, effect="read", status="succeeded", started_at=now, ended_at=now,
            result={"messages": [m.model_dump(mode="json") for m in replaced]},
            content=json.dumps({"replaced_messages": len(replaced)}))
        captured = self.evidence.capture(outcome, {"instructions": instructions, "replaced": len(replaced)}, None)
        if captured.reference is None:
            raise SessionError("write_failed", f"evidence record not stored: {captured.error}")
        return captured.reference.id

    async def _fit_context(self, ex: Any) -> bool:
        """Before a model request: compact at ``compact_at``; stop when it cannot fit.

        Returns:
            True when the run stopped (cause ``provider_error``, reason
            ``context_length``, no model call made).
        """
        window, source = self.context_window()
        budget = self.measure_context()
        compact_at = float(getattr(self._context_config(), "compact_at", 0.8))
        failure = None
        # After a failed compaction (a summary call spent, or the replaced history not
        # kept) the run does not try again before every request: only when the request
        # would not fit otherwise, once more before stopping.
        failed_before = self._compact_failed_for == ex.record.execution_id
        if budget.total > window * compact_at and (not failed_before or budget.total > window):
            current = self._current_start()
            result = await self._compact_now(None, current_start=current, usage_sink=ex.record.usage,
                                             must_fit=window if budget.total > window else None)
            if result.compacted:
                self._compact_failed_for = None
                self._emit(ex, Notice(text=f"context: {result.message} (window {window} tokens)"))
                budget = self.measure_context()
            else:
                if result.failed:
                    self._compact_failed_for = ex.record.execution_id
                    failure = result.message
                if self._compact_notice_for != ex.record.execution_id:
                    self._compact_notice_for = ex.record.execution_id
                    self._emit(ex, Notice(level="warning", text=f"context: ~{budget.total} of {window} tokens; "
                                                                f"{result.message}"))
        if budget.total <= window:
            return False
        ex.record.steps -= 1  # no model call was made
        ex.stop("provider_error", "context_length", self._overflow_detail(budget, window, source, failure),
                {"window_tokens": window, "estimated_tokens": budget.total})
        return True

    def _current_start(self) -> int | None:
        for index in range(len(self.session.messages) - 1, -1, -1):
            message = self.session.messages[index]
            if message.role == "user" and message.kind == "prompt":
                return index
        return None

    def _overflow_detail(self, budget: RequestBudget, window: int, source: str, failure: str | None = None) -> str:
        protected = [p for m in self.session.messages for p in m.tool_results if p.protected]
        holds = [f"system prompt ~{budget.system}", f"tool schemas ~{budget.tools}",
                 f"history ~{budget.history}"]
        if self.tasks is not None:
            holds.insert(1, f"the task view ~{budget.task_view}")
        kept = []
        if self.tasks is not None:
            kept.append("the task view")
        if protected:
            kept.append(f"{len(protected)} raw tool result(s) whose evidence was not stored "
                        f"({', '.join(p.call_id for p in protected[:5])}; ~{budget.protected} tokens)")
        remedy = ("repair evidence storage and acknowledge them (AgentRunner.acknowledge_tool_evidence), "
                  if protected else "")
        keep_note = f" and holds {' and '.join(kept)}, which amos will not drop" if kept else ""
        after = " even after compaction" if failure is None else f" and compaction failed ({failure})"
        return (f"the next request (~{budget.total} tokens: {', '.join(holds)}) does not fit the context window "
                f"of {window} tokens ({source}){after}{keep_note} — {remedy}lower "
                "context.keep_recent_turns, prune the task notes, or continue in a new session")
