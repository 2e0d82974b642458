"""Text both front ends show for the same thing (issue 15: one shared rendering module).

``amos run``, ``amos resume``, ``amos sessions …`` and the TUI render stop receipts,
tool statuses, checkpoints and held calls with these functions, so a person sees the
same words and glyphs wherever they look. Pure functions over host API values.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from amos.verdicts import phase_for, verdict_glyph

__all__ = ["STATUS_GLYPHS", "summary_line", "verdict_glyph", "phase_for", "checkpoint_rows_text",
           "status_glyph", "held_call_lines", "files_changed_line", "FILE_CHANGE_WORDS", "arguments_preview", "check_line", "failing_output", "token_counts",
           "confirmation_lines", "tool_line"]

STATUS_GLYPHS = {
    "running": "◌",
    "approval": "⏸",
    "succeeded": "✓",
    "failed": "✗",
    "denied": "⊘",
    "blocked": "⊘",
    "cancelled": "■",
    "timed_out": "⏱",
    "not_started": "·",
}
"""Glyph of each tool status (the statuses of spec/tools.md plus ``running`` and ``approval``)."""


def status_glyph(status: str) -> str:
    """The glyph of a tool status (``?`` for one not in :data:`STATUS_GLYPHS`)."""
    return STATUS_GLYPHS.get(status, "?")


def tool_line(event: Any) -> str:
    """``  ✓ read_file a.py [succeeded, 0.01 s, ev 3f2a9c1d]`` for a finished tool call (a
    ``ToolCallFinished``); a call that never ran (denied, cancelled, blocked) shows no
    duration, and an error its first words. At most 300 characters."""
    timed = event.duration_s > 0 or event.status in ("succeeded", "failed", "timed_out")
    parts = [event.status] + ([f"{event.duration_s:.2f} s"] if timed else [])
    if getattr(event, "evidence_id", None):
        parts.append(f"ev {event.evidence_id[:8]}")
    extra = f" — {event.error}" if event.error and event.status != "succeeded" else ""
    line = f"  {status_glyph(event.status)} {event.summary} [{', '.join(parts)}]{extra}"
    return line if len(line) <= 300 else line[:299] + "…"


def token_counts(usage: Any) -> str:
    """``120+30`` input+output tokens; ``~120+~30`` when amos estimated them (the provider
    reported no usage: issue 16 "Unknown usage is unknown")."""
    about = "~" if getattr(usage, "estimated", False) else ""
    return f"{about}{usage.input_tokens}+{about}{usage.output_tokens}"


def summary_line(receipt: Any) -> str:
    """One line describing a stop receipt, e.g.
    ``✔ VERIFIED_COMPLETE (answer/completed) — 4 steps, 5 tool calls, 120+30 tokens. …``."""
    steps = f"{receipt.steps} step" + ("" if receipt.steps == 1 else "s")
    calls = f"{receipt.tool_call_count} tool call" + ("" if receipt.tool_call_count == 1 else "s")
    sandbox = getattr(receipt, "sandbox", None)
    plan = " [plan run]" if sandbox is not None and sandbox.plan else ""
    return (
        f"{verdict_glyph(receipt.verdict)} {receipt.verdict}{plan} ({receipt.cause or 'none'}/{receipt.reason})"
        f" — {steps}, {calls}, {token_counts(receipt.usage)} tokens. {receipt.detail}"
    )


def check_line(receipt: Any) -> str | None:
    """Which completion check decided the run and where it came from, e.g.
    ``check: command `pytest -q` (flag) · baseline failed → passing`` (None: no check)."""
    check = getattr(receipt, "check", None)
    if check is None or check.source == "none":
        return None
    line = f"check: {check.summary} ({check.source})"
    if check.route == "done_tool":
        line += " · claimed with the done tool"
    if check.baseline:
        line += f" · baseline {check.baseline}"
        completion = receipt.completion
        if check.baseline == "failed" and completion is not None and completion.complete:
            line += " → passing"
        if check.baseline == "passed" and check.workspace_changed is False:
            line += ", workspace unchanged"
    if check.confirmed_by:
        line += f" · confirmed by {check.confirmed_by}"
    return line


def failing_output(receipt: Any) -> str | None:
    """The last lines (at most ~15) of a failing check's output, secrets already masked
    by the host; None when the check passed or printed nothing."""
    completion = getattr(receipt, "completion", None)
    if completion is None or completion.complete is not False:
        return None
    return completion.output or None


def checkpoint_rows_text(rows: Sequence[Any]) -> str:
    """A table of checkpoints (``CheckpointInfo`` rows, oldest first) for people."""
    if not rows:
        return "no checkpoints yet (one is taken at the end of every run and by /session save)"
    lines = [f"{'N':>4}  {'TAKEN (UTC)':<19}  {'REASON':<17}  {'MSGS':>4}  {'LAST VERDICT':<17}  LABEL"]
    for r in rows:
        lines.append(f"{r.number:>4}  {r.created_at[:19].replace('T', ' '):<19}  {r.reason:<17}  {r.messages:>4}  "
                     f"{r.last_verdict or '-':<17}  {r.label or ''}".rstrip())
    return "\n".join(lines)


FILE_CHANGE_WORDS = {"added": "created", "deleted": "deleted", "modified": "modified",
                     "mode": "permissions changed", "type": "replaced by another kind of file"}
"""How each kind of file change (issue 20 snapshots) reads for people."""


UNDO_HINT = "/undo puts the last step's back, /diff shows them"
NO_SAVE_HINT = "not saved (--no-save), so no later /undo or amos diff can reach them"


def files_changed_line(rows: Sequence[dict[str, str]], limit: int = 8, *, hint: str = UNDO_HINT) -> str | None:
    """``files changed: a.py (modified), b.txt (created) …`` for a run's receipt, or None when none.

    Args:
        rows: ``RunFinished.files_changed`` (``{"path", "change"}``, plus ``not_restorable``
            for an ignored file a command changed).
        limit: files named before ``and N more``.
        hint: what can be done about them (:data:`NO_SAVE_HINT` for a run not saved).
    """
    if not rows:
        return None

    def one(r: dict[str, str]) -> str:
        word = FILE_CHANGE_WORDS.get(r["change"], r["change"])
        return f"{r['path']} ({word}; not restorable: ignored, no copy kept)" if r.get("not_restorable") else \
            f"{r['path']} ({word})"

    shown = ", ".join(one(r) for r in rows[:limit])
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return f"files changed: {shown}{more} — {hint}"


def arguments_preview(arguments: Any, limit: int = 120) -> str:
    """A call's arguments on one line (compact JSON, cut at ``limit`` characters)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def held_call_lines(session_id: str, held: Iterable[Any]) -> list[str]:
    """What a person needs to decide a WAITING session: each held call needing a
    decision, then the ``amos resume`` line."""
    waiting = [h for h in held if h.needs_approval and h.decision is None]
    lines = []
    escapes = False
    for h in waiting:
        lines.append(f"  needs approval: {h.call_id}  {h.summary}")
        if getattr(h, "escalation", False):  # issue 19: say it plainly
            escapes = True
            args = h.arguments if isinstance(h.arguments, dict) else {}
            why = " ".join(str(args.get("justification") or "(no reason given)").split())[:300]
            lines.append(f"    it asks to run OUTSIDE the sandbox (full access to your files and network): {why}")
    if waiting:
        ids = " ".join(f"--approve {h.call_id}" for h in waiting)
        also = "--deny CALL_ID" + ("" if escapes else ", --all")
        lines.append(f"  resume with: amos resume {session_id} {ids}   (or {also})")
        if escapes:
            lines.append("  (--all and --yes never approve running outside the sandbox: approve it by its id)")
    return lines


def confirmation_lines(session_id: str, claim: str | None) -> list[str]:
    """What a person needs to answer a completion claim (``completion.human``)."""
    lines = []
    if claim:
        first = claim.strip().splitlines()[0] if claim.strip() else ""
        lines.append(f"  claim: {first[:200]}")
    lines.append(f"  confirm with: amos resume {session_id} --confirm   (or --reject \"REASON\")")
    return lines

