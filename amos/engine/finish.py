"""How a run ends: receipt, diagnostics, checkpoint, save — and always ``RunFinished``.

spec/stop-receipts.md. The calls left open are closed, every gate records what it
keeps, the stop receipt and loop diagnostics are built from what was recorded where the
run stopped, the session takes them, the run's checkpoint is taken before the snapshot
is saved (so ``session.json`` names its newest checkpoint), and the event stream ends
with ``RunFinished`` — even when something here fails.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from amos.approvals import pending_infos
from amos.engine.binding import SessionBinding
from amos.engine.doom import DoomGate
from amos.engine.file_history import masked_rows
from amos.engine.gates import Gate
from amos.engine.settings import RunSettings
from amos.engine.state import RunState
from amos.engine.tasks import Instructions
from amos.engine.transcript import END_OF_RUN_FIELDS, Transcript
from amos.errors import SessionError
from amos.events import Notice, RunFinished
from amos.policy.stop import CheckInForce
from amos.receipts import build_receipt

log = logging.getLogger("amos.runner")

SAVE_RETRY_S = 3.0
"""After the journal failed, how long the end of a run keeps trying to save (seconds)."""
SAVE_RETRY_PAUSE_S = 0.5


def unsaved_summary(run: RunState, session_id: str) -> str:
    """What a run that could not be saved leaves only in memory, for stderr."""
    rec = run.record
    calls = ", ".join(f"{r['tool']} {r['call_id']} {r['status']}" for r in rec.tool_calls[-10:]) or "none"
    answer = " ".join(rec.output_text.split())[:300]
    return (f"NOT SAVED: session {session_id} could not be written; this run ({rec.execution_id}) exists only "
            f"here — its tool calls: {calls}" + (f"; its last answer: {answer}" if answer else "")
            + f"; stopped {run.cause or 'without a cause'} ({run.reason or '-'})")


class RunEnd:
    """Finishes runs of one session.

    Args:
        settings: limits, ``policy_hash``.
        transcript: the session.
        binding: checkpoints and saving.
        instructions: the task notebook (its snapshot is kept in the session).
        autosave: checkpoint and save at the end of every run.
    """

    def __init__(self, settings: RunSettings, transcript: Transcript, binding: SessionBinding,
                 instructions: Instructions, *, autosave: bool):
        self.settings = settings
        self.transcript = transcript
        self.binding = binding
        self.instructions = instructions
        self.autosave = autosave

    def finish(self, run: RunState, gates: Sequence[Gate], *, completion_configured: bool,
               check: CheckInForce | None = None, policy: Any = None, doom: DoomGate | None = None) -> None:
        """Record the run's end in the session, save, and emit ``RunFinished``.

        Args:
            run: the execution that stopped.
            gates: every gate of the run (``run_finishing`` is called on each).
            completion_configured: a host completion check (or a person) was configured.
            check: which check was in force and how it stood (the receipt's ``check``).
            policy: the loop policy in force (None: no policy).
            doom: the doom-loop gate, if detection is on.
        """
        session = self.transcript.session
        rec = run.record
        for gate in gates:
            gate.run_finishing(run)
        if run.pending is not None:
            session.pending = run.pending
        receipt, loop = build_receipt(
            rec, cause=run.cause, reason=run.reason, detail=run.detail, stop_condition=run.stop_condition,
            pending=pending_infos(run.pending, session.id), completion_configured=completion_configured,
            policy_hash=self.settings.policy_hash, policy_enabled=policy is not None,
            max_recovery_attempts=policy.max_recovery_attempts if policy is not None else None,
            check=check, sandbox=run.sandbox, workspace_changed=run.workspace_changed)
        if doom is not None:
            loop = loop.model_copy(update={"doom_loop": doom.diagnostics()})
        session.loop = loop
        session.last_stop = receipt
        self.instructions.snapshot_into_session()
        session.usage.add(rec.usage.since(run.usage_at_start))
        self.transcript.fields(*END_OF_RUN_FIELDS)
        path = self._save(run)
        run.emit(RunFinished(receipt=receipt, loop=loop, output_text=rec.output_text, usage=rec.usage,
                             tool_calls=self._in_call_order(rec.tool_calls), session_path=path,
                             files_changed=masked_rows(run.files_changed, run.mask)))  # a key in a file name

    def _save(self, run: RunState) -> str | None:
        if not self.autosave:
            return None
        # The checkpoint first, so the snapshot names it (last_checkpoint); a failed
        # checkpoint never keeps the session from being saved.
        session = self.transcript.session
        problem = None
        try:
            self.binding.checkpoint(session, "waiting" if run.pending is not None else "run_end")
        except SessionError as exc:
            problem = exc
        path, error = self._save_retrying(session, SAVE_RETRY_S if self.transcript.lost else 0.0)
        problem = error or problem
        if problem is not None:  # one notice when the disk refuses both
            run.emit(Notice(level="error", text=str(problem)))
        if error is not None and self.transcript.lost:
            run.emit(Notice(level="error", text=unsaved_summary(run, session.id)))
        return path

    def _save_retrying(self, session: Any, for_s: float) -> tuple[str | None, SessionError | None]:
        """Save, retrying for ``for_s`` seconds (the disk may get room again)."""
        deadline = time.monotonic() + for_s
        while True:
            try:
                return str(self.binding.save(session)), None
            except SessionError as exc:
                if time.monotonic() >= deadline:
                    return None, exc
                time.sleep(SAVE_RETRY_PAUSE_S)

    def _in_call_order(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Tool-call rows in the order the model made the calls (concurrent reads finish
        in any order; people and scripts read them in call order)."""
        order = {c.call_id: i for i, c in enumerate(c for m in self.transcript.messages for c in m.tool_calls)}
        return sorted(rows, key=lambda row: order.get(row.get("call_id"), len(order)))
