"""Durability as a gate: once the session journal cannot be written, nothing with a
side effect runs (issue 17, item 6).

A write or unknown-effect tool that ran while the journal was failing could be lost
from the session on a crash — and then run again by ``continue``. So from the first
failed append or fsync of a run, such a call is not dispatched: the run stops
``storage_error`` (verdict FAILED) naming the error. Reads still run. The gate comes
first, before anyone is asked about the call.
"""

from __future__ import annotations

from amos.engine.calls import PlannedCall
from amos.engine.gates import Decision, Gate, RoundControl
from amos.engine.state import RunState
from amos.engine.transcript import Transcript


def storage_stop(run: RunState, call: PlannedCall, lost: str) -> None:
    """Stop the run ``storage_error`` because ``call`` cannot be made durable."""
    run.stop("storage_error", "storage_error",
             f"the session journal cannot be written ({lost}), so {call.summary} ({call.call_id}) was not run: "
             "after a crash nothing could show whether it ran. Free disk space or fix the sessions folder, "
             "then continue the session")


class DurabilityGate(Gate):
    """Refuses to dispatch write/unknown calls once the journal failed (first gate).

    Args:
        transcript: the session's transcript (it knows whether the journal failed).
    """

    name = "durability"

    def __init__(self, transcript: Transcript):
        self.transcript = transcript

    async def admit(self, run: RunState, call: PlannedCall, round: RoundControl) -> Decision | None:
        lost = self.transcript.lost
        if lost is None or call.effect == "read":
            return None
        storage_stop(run, call, lost)
        return Decision.stopped()
