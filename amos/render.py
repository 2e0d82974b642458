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
           "status_glyph", "held_call_lines", "arguments_preview"]

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


def summary_line(receipt: Any) -> str:
    """One line describing a stop receipt, e.g.
    ``✔ VERIFIED_COMPLETE (answer/completed) — 4 steps, 5 tool calls, 120+30 tokens. …``."""
    u = receipt.usage
    steps = f"{receipt.steps} step" + ("" if receipt.steps == 1 else "s")
    calls = f"{receipt.tool_call_count} tool call" + ("" if receipt.tool_call_count == 1 else "s")
    return (
        f"{verdict_glyph(receipt.verdict)} {receipt.verdict} ({receipt.cause or 'none'}/{receipt.reason})"
        f" — {steps}, {calls}, {u.input_tokens}+{u.output_tokens} tokens. {receipt.detail}"
    )


def checkpoint_rows_text(rows: Sequence[Any]) -> str:
    """A table of checkpoints (``CheckpointInfo`` rows, oldest first) for people."""
    if not rows:
        return "no checkpoints yet (one is taken at the end of every run and by /session save)"
    lines = [f"{'N':>4}  {'TAKEN (UTC)':<19}  {'REASON':<17}  {'MSGS':>4}  {'LAST VERDICT':<17}  LABEL"]
    for r in rows:
        lines.append(f"{r.number:>4}  {r.created_at[:19].replace('T', ' '):<19}  {r.reason:<17}  {r.messages:>4}  "
                     f"{r.last_verdict or '-':<17}  {r.label or ''}".rstrip())
    return "\n".join(lines)


def arguments_preview(arguments: Any, limit: int = 120) -> str:
    """A call's arguments on one line (compact JSON, cut at ``limit`` characters)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def held_call_lines(session_id: str, held: Iterable[Any]) -> list[str]:
    """What a person needs to decide a WAITING session: each held call needing a
    decision, then the ``amos resume`` line."""
    waiting = [h for h in held if h.needs_approval and h.decision is None]
    lines = [f"  needs approval: {h.call_id}  {h.summary}" for h in waiting]
    if waiting:
        ids = " ".join(f"--approve {h.call_id}" for h in waiting)
        lines.append(f"  resume with: amos resume {session_id} {ids}   (or --deny CALL_ID, --all)")
    return lines
