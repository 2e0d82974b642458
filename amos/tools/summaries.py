"""Result summaries of the built-in tools, for evidence projections.

When evidence is enabled and a large result is durably stored, the model sees a
*projection* — one of these summaries plus an envelope naming the evidence record —
instead of the raw result, and can read the exact result back with
``evidence_read`` (seeds/durable-tool-evidence.txt "What is recorded and projected").
A summary keeps the essential status and identifiers: the header line (path, line
span, totals), counts, and the first or last lines. Each is pure, synchronous and
bounded to ``MAX_SUMMARY_CHARS``.
"""

from __future__ import annotations

from typing import Any

MAX_SUMMARY_CHARS = 2000
PREVIEW_LINES = 12


def _clip(text: str) -> str:
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 1] + "…"


def _lines(text: str) -> list[str]:
    return text.splitlines()


def summarize_read_file(result: Any) -> str:
    """``read_file``: its header (path and line span), size, and the first lines."""
    text = str(result)
    lines = _lines(text)
    head, body = (lines[0], lines[1:]) if lines else ("", [])
    preview = "\n".join(body[:PREVIEW_LINES])
    more = f"\n… {len(body) - PREVIEW_LINES} more lines" if len(body) > PREVIEW_LINES else ""
    return _clip(f"{head} — {len(text.encode('utf-8', 'replace'))} bytes; first lines:\n{preview}{more}")


def summarize_list_dir(result: Any) -> str:
    """``list_dir``: the folder line, the entry count, and the first entries."""
    lines = _lines(str(result))
    head, entries = (lines[0], lines[1:]) if lines else ("", [])
    shown = "\n".join(entries[:PREVIEW_LINES * 2])
    more = f"\n… {len(entries) - PREVIEW_LINES * 2} more entries" if len(entries) > PREVIEW_LINES * 2 else ""
    return _clip(f"{head} — {len(entries)} entries:\n{shown}{more}")


def summarize_search_text(result: Any) -> str:
    """``search_text``: its totals line and the first matches."""
    lines = _lines(str(result))
    notes = [line for line in lines if line.startswith("[")]
    matches = [line for line in lines if not line.startswith("[")]
    first = "\n".join(matches[:PREVIEW_LINES])
    return _clip("\n".join(notes) + f"\nfirst matches:\n{first}")


def summarize_run_command(result: Any) -> str:
    """``run_command``: exit code, whether it timed out, and the tails of stdout and stderr."""
    if not isinstance(result, dict):
        return _clip(str(result)[-MAX_SUMMARY_CHARS:])
    out = _lines(str(result.get("stdout") or ""))
    err = _lines(str(result.get("stderr") or ""))
    parts = [f"exit code: {result.get('exit_code')}" + (" (timed out)" if result.get("timed_out") else ""),
             f"stdout: {len(out)} lines; last lines:", *out[-PREVIEW_LINES:]]
    if err:
        parts += [f"stderr: {len(err)} lines; last lines:", *err[-PREVIEW_LINES // 2:]]
    return _clip("\n".join(parts))
