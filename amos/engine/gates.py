"""The gate interface: the seams a capability plugs into the loop (issue 15).

A gate sees every model request and every tool call of a run. The loop calls the
hooks of every gate in the order the gates were given, at six points:

==================  ===================================================================
hook                when
==================  ===================================================================
before_request      before each model request (a gate may stop the run, or add a message
                    the request will carry — e.g. a doom-loop steer)
round_declared      a model turn's tool calls are known, before any of them is admitted
admit               one call is about to be dispatched: return None to let it pass to
                    the next gate, or a :class:`Decision` (refuse it with an outcome,
                    hold it for a person, stop the run)
observed            a call's outcome was recorded (after masking and evidence capture)
round_finished      every call of the round has an outcome (a gate may stop the run, or
                    add host feedback for the next request)
run_finishing       the run stopped; record what the gate keeps in the session
==================  ===================================================================

The order of the built-in gates is fixed in :func:`amos.engine.loop.builtin_gates`:
**permission → doom loop → loop-policy admission**. A call is scored by the doom loop
only after its permission was granted (spec/doom-loop-behaviour.md §8: a call that is
denied or never asked about is not a repetition the model chose to make), and admitted
by the loop policy last, just before dispatch, so an admission is only counted for a
call that really runs (seeds/loop-policy-bounded-recovery.txt "Admission"). Gates added
with ``extra_gates`` (see ``docs/architecture.md`` "Add a gate") run after them.

Every hook has a no-op default here, so a gate implements only what it needs. A gate
owns its state; it receives the run's :class:`~amos.engine.state.RunState` and, in
``admit``, the round's :class:`RoundControl`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from amos.engine.calls import PlannedCall
    from amos.engine.state import RunState
    from amos.tools.base import OutcomeStatus, ToolOutcome


@dataclass(frozen=True)
class Decision:
    """What a gate decided about one call (None from ``admit`` means "pass it on").

    Attributes:
        kind: ``refuse`` (answer the call with an outcome of ``status`` and ``text``;
            it does not run), ``hold`` (an approval pause: this call and every later
            call of the turn are held; the run stops WAITING), or ``stop`` (the gate
            recorded a stop cause on the run; no further call of the round runs).
        status: the outcome status of a refusal (``denied`` or ``blocked``).
        text: what the model is told about a refused call.
    """

    kind: Literal["refuse", "hold", "stop"]
    status: OutcomeStatus = "blocked"
    text: str = ""

    @classmethod
    def refuse(cls, status: OutcomeStatus, text: str) -> Decision:
        """Answer the call with a ``status`` outcome carrying ``text``; it does not run."""
        return cls("refuse", status, text)

    @classmethod
    def hold(cls) -> Decision:
        """Hold this call and the rest of the turn for a person's decision."""
        return cls("hold")

    @classmethod
    def stopped(cls) -> Decision:
        """The gate stopped the run (it called ``run.stop`` first)."""
        return cls("stop")


@dataclass
class RoundControl:
    """What a gate may do to the round in progress from ``admit``.

    Attributes:
        flush: runs the read calls admitted so far and not yet dispatched (reads run
            concurrently in groups); a gate calls it before it does something a person
            sees — asking for an approval — so earlier calls finish first.
        calls: every planned call of the round, in order.
    """

    flush: Callable[[], Awaitable[None]]
    calls: Sequence[PlannedCall]


class Gate:
    """Base of every gate: all hooks are no-ops (see the module docstring for when each runs)."""

    name = "gate"
    """Shown in diagnostics and in the architecture document's gate table."""

    async def before_request(self, run: RunState) -> None:
        """Before each model request; may ``run.stop(...)`` or add a message to the transcript."""

    def round_declared(self, run: RunState, calls: Sequence[PlannedCall]) -> None:
        """A turn's calls are known, before any is admitted."""

    async def admit(self, run: RunState, call: PlannedCall, round: RoundControl) -> Decision | None:
        """One call is about to be dispatched: None lets it pass to the next gate."""
        return None

    def observed(self, run: RunState, call: PlannedCall, outcome: ToolOutcome) -> None:
        """A call's outcome was recorded."""

    async def round_finished(self, run: RunState) -> None:
        """Every call of the round has an outcome; may stop the run or add host feedback."""

    def run_finishing(self, run: RunState) -> None:
        """The run stopped (its receipt is about to be built)."""
