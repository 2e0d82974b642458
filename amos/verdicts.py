"""The verdict vocabulary: verdicts, loop phases, exit codes and glyphs (spec/stop-receipts.md).

Dependency-free, so the policy that decides verdicts and the front ends that show them
share one definition.
"""

from __future__ import annotations

from typing import Literal

Verdict = Literal[
    "FAILED",
    "WAITING",
    "WAITING_UNROUTED",
    "STUCK",
    "BOUNDED_STOP",
    "VERIFIED_COMPLETE",
    "FALSE_COMPLETE",
    "ANSWERED",
    "UNCERTAIN",
]

Phase = Literal["running", "recovering", "complete", "input-needed", "stopped"]

EXIT_CODES: dict[str, int] = {
    "VERIFIED_COMPLETE": 0,
    "ANSWERED": 0,
    "FAILED": 1,
    "FALSE_COMPLETE": 3,
    "WAITING": 4,
    "WAITING_UNROUTED": 5,
    "BOUNDED_STOP": 6,
    "STUCK": 7,
    "UNCERTAIN": 8,
}
"""Exit code of ``amos run``/``amos resume`` for each verdict (spec/cli.md "Exit codes")."""

def phase_for(verdict: str) -> Phase:
    """The diagnostics phase a finished execution ends in.

    ``complete`` for a natural or verified finish, ``input-needed`` while waiting for
    a person, ``stopped`` for everything else.
    """
    if verdict in ("VERIFIED_COMPLETE", "ANSWERED"):
        return "complete"
    if verdict in ("WAITING", "WAITING_UNROUTED"):
        return "input-needed"
    return "stopped"


def verdict_glyph(verdict: str) -> str:
    """A glyph that reads without colour, for summaries and the TUI."""
    return {
        "VERIFIED_COMPLETE": "✔",
        "ANSWERED": "○",
        "FAILED": "✘",
        "FALSE_COMPLETE": "✘",
        "WAITING": "⏸",
        "WAITING_UNROUTED": "⏸",
        "BOUNDED_STOP": "■",
        "STUCK": "↻",
        "UNCERTAIN": "?",
    }.get(verdict, "?")
