"""How a run ends, for :class:`~amos.runner.AgentRunner` (a mixin).

Close the calls left open, build the stop receipt and loop diagnostics
(spec/stop-receipts.md), record them in the session, take the run's checkpoint, save,
and always end the event stream with ``RunFinished`` — even on a bug. Uses the
runner's ``session``, ``settings``, ``doom``, ``tasks``, ``store`` and ``autosave``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from amos.approvals import pending_infos
from amos.errors import SessionError
from amos.events import Notice, RunFinished
from amos.execution import Execution
from amos.receipts import build_receipt
from amos.runner_journal import JOURNALLED_FIELDS

END = object()
"""Put on an execution's event queue after its last event."""

log = logging.getLogger("amos.runner")


class FinishDuties:
    """The end of every run."""

    session: Any
    settings: Any
    doom: Any
    tasks: Any
    store: Any
    autosave: bool
    _emit: Callable[..., None]
    _close_open_calls: Callable[[Execution], None]
    _journal_fields: Callable[..., None]
    _checkpoint: Callable[..., Any]

    # ------------------------------------------------------------------ finishing

    def _in_call_order(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Tool-call rows in the order the model made the calls (concurrent reads finish
        in any order; people and scripts read them in call order)."""
        order = {c.call_id: i for i, c in enumerate(c for m in self.session.messages for c in m.tool_calls)}
        return sorted(rows, key=lambda row: order.get(row.get("call_id"), len(order)))

    def _finish(self, ex: Execution) -> None:
        """Close open calls, build the receipt, save, and always end the event stream."""
        try:
            self._close_open_calls(ex)
            rec = ex.record
            policy = ex.policy
            if ex.guard is not None:
                rec.recovery_attempts = ex.guard.tracker.recovery_attempts
                rec.progress_changed = ex.guard.tracker.progress_changed
                rec.tracked = ex.guard.tracker.counts()
                rec.policy_state = ex.guard.tracker.to_state() if ex.pending is not None else None
            if ex.pending is not None:
                self.session.pending = ex.pending
            receipt, loop = build_receipt(
                rec, cause=ex.cause, reason=ex.reason, detail=ex.detail, stop_condition=ex.stop_condition,
                pending=pending_infos(ex.pending, self.session.id),
                completion_configured=policy.completion_configured if policy else bool(self.settings.verify),
                policy_hash=self.settings.policy_hash, policy_enabled=policy is not None,
                max_recovery_attempts=policy.max_recovery_attempts if policy else None)
            if self.doom is not None:
                self.session.doom_loop = self.doom.state()
                loop = loop.model_copy(update={"doom_loop": self.doom.diagnostics()})
            self.session.loop = loop
            self.session.last_stop = receipt
            if self.tasks is not None:
                self.session.task_state = self.tasks.to_snapshot()
            self.session.usage.add(rec.usage.since(ex.usage_at_start))
            self._journal_fields(*JOURNALLED_FIELDS)
            path = None
            if self.autosave:
                # The checkpoint first, so the snapshot names it (last_checkpoint); a
                # failed checkpoint never keeps the session from being saved.
                checkpoint_error = None
                try:
                    self._checkpoint("waiting" if ex.pending is not None else "run_end")
                except SessionError as exc:
                    checkpoint_error = exc
                try:
                    path = str(self.store.save(self.session))
                except SessionError as exc:  # one notice when the disk refuses both
                    checkpoint_error = exc
                if checkpoint_error is not None:
                    self._emit(ex, Notice(level="error", text=str(checkpoint_error)))
            self._emit(ex, RunFinished(receipt=receipt, loop=loop, output_text=rec.output_text, usage=rec.usage,
                                       tool_calls=self._in_call_order(rec.tool_calls), session_path=path))
        except Exception as exc:  # noqa: BLE001 - the stream must end even on a bug
            log.exception("finishing the run failed")
            self._emit(ex, Notice(level="error", text=f"internal error while finishing the run: "
                                                      f"{type(exc).__name__}: {exc}"))
        finally:
            assert ex.queue is not None
            ex.queue.put_nowait(END)
