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

EXIT_COMMAND_FAILED = 1
"""A slash command ran and failed (a busy session, an evidence read that failed…)."""
EXIT_TASK_REFUSED = 9
"""A task-notebook edit was refused (``TASK_STATE_CONFLICT``, ``…_INVALID``, ``…_CAPACITY``…);
the notebook is unchanged (issue 21: distinct from a run's FAILED)."""
EXIT_DISABLED = 10
"""A slash command needs a feature the config turns off (``TASK_STATE_DISABLED``,
``EVIDENCE_DISABLED``)."""


def command_exit_code(error_code: str | None) -> int:
    """The exit code of a slash command that ran and failed with ``error_code``."""
    code = (error_code or "").upper()
    if code.endswith("_DISABLED"):
        return EXIT_DISABLED
    if code.startswith("TASK_STATE_"):
        return EXIT_TASK_REFUSED
    return EXIT_COMMAND_FAILED


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
