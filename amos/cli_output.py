"""The machine-readable output of ``amos run`` / ``amos resume`` (issue 21).

``--output-format text`` (the default) prints the answer on stdout; ``json`` (also
``--json``) prints one JSON object; ``stream-json`` prints one JSON object per line
as the run goes, the last line being the same object ``json`` prints. Every object
carries ``type``; the final one (``type: "result"``) shares ``ok``, ``exit_code``,
``verdict`` (or ``error``), ``model`` and ``session_id`` whether it reports a run,
a slash command or an error. Event texts come from the host already masked.
"""

from __future__ import annotations

import json
import re
from typing import Any, TextIO

from amos.events import RunFinished

OUTPUT_FORMATS = ("text", "json", "stream-json")
"""The values ``--output-format`` accepts."""

RUN_EVENT_TYPES = ("run_started", "step_started", "text_delta", "tool_call_started", "tool_call_finished", "notice",
                   "result")
"""The ``type`` of the lines every run that uses tools streams (the demo shows each)."""

PERSON_EVENT_TYPES = ("approval_requested", "confirmation_requested", "approval_pending")
"""Lines about a person's decision: asked at a terminal (``*_requested``, only when amos
can ask), or one ``approval_pending`` per held call when the run ends WAITING."""

STREAM_EVENT_TYPES = RUN_EVENT_TYPES + PERSON_EVENT_TYPES
"""Every ``type`` a ``stream-json`` line may have (documented in the README, "Event stream")."""

CONTENT_LIMIT = 2000
"""Characters of a tool result a ``tool_call_finished`` line carries (the whole is in its evidence)."""


def output_format(value: str | None, json_out: bool) -> str:
    """The output format in force: ``--output-format``, else ``json`` for ``--json``, else ``text``.

    Raises:
        UsageError: an unknown format, or ``--json`` with another format.
    """
    from amos.errors import UsageError

    if value is None:
        return "json" if json_out else "text"
    if value not in OUTPUT_FORMATS:
        raise UsageError(f"--output-format {value!r} is not one of {', '.join(OUTPUT_FORMATS)}")
    if json_out and value != "json":
        raise UsageError(f"--json means --output-format json; it cannot be combined with --output-format {value}")
    return value


def event_line(event: Any) -> dict[str, Any] | None:
    """One run event as a ``stream-json`` object, or None for ``RunFinished`` (the
    ``result`` line stands for it)."""
    if isinstance(event, RunFinished):
        return None
    data = event.model_dump(mode="json")
    kind = data.pop("event_kind")
    if kind == "tool_call_finished":
        content = data.pop("content", "") or ""
        data["content"] = content[:CONTENT_LIMIT]
        data["content_truncated"] = len(content) > CONTENT_LIMIT
    return {"type": kind, **data}


def pending_lines(finished: RunFinished, held: list[Any] | None, session_id: str) -> list[dict[str, Any]]:
    """One ``approval_pending`` object per call the run ended WAITING on, in order, with
    its masked arguments and how to decide it."""
    by_id = {call.call_id: call for call in held or []}
    lines = []
    for info in finished.receipt.pending_approvals:
        call = by_id.get(info.call_id)
        lines.append({"type": "approval_pending", "call_id": info.call_id, "tool": info.tool,
                      "summary": call.summary if call is not None else None,
                      "arguments": call.arguments if call is not None else None,
                      "resume_token": info.resume_token,
                      "resume": f"amos resume {session_id} --approve {info.call_id}"})
    return lines


def run_document(finished: RunFinished, *, session_id: str, model: str | None, exit_code: int,
                 held: list[Any] | None = None, typed: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``result`` object of a prompt run (spec/cli.md "``--json`` output of a prompt run", widened).

    Args:
        finished: the run's last event.
        session_id: the session's id.
        model: ``PROVIDER:MODEL`` in force.
        exit_code: what the command exits with (130/143 after a signal).
        held: the host's held calls; their masked arguments go into
            ``stop.pending_approvals`` entries (``summary``, ``arguments``).
        typed: ``{"command": the slash line as typed (None for a plain prompt), "prompt":
            the prompt the model received — a custom command's expansion — masked}``
            (issue 21); None for a resume (both keys are then null).
    """
    stop = finished.receipt.model_dump(mode="json")
    by_id = {call.call_id: call for call in held or []}
    for entry in stop.get("pending_approvals") or []:
        call = by_id.get(entry.get("call_id"))
        entry["summary"] = call.summary if call is not None else None
        entry["arguments"] = call.arguments if call is not None else None
    return {
        "type": "result", "ok": exit_code == 0, "exit_code": exit_code, "verdict": finished.receipt.verdict,
        "error": None, "model": model, "session_id": session_id, "session_path": finished.session_path,
        "output_text": finished.output_text, "stop": stop, "loop": finished.loop.model_dump(mode="json"),
        "usage": finished.usage.model_dump(mode="json"), "tool_calls": finished.tool_calls,
        "files_changed": finished.files_changed,
        "command": (typed or {}).get("command"), "prompt": (typed or {}).get("prompt"),
    }


def command_document(data: dict[str, Any], *, exit_code: int, model: str | None) -> dict[str, Any]:
    """The ``result`` object of a slash command: its ``to_json`` shape plus the shared keys."""
    return {"type": "result", "ok": bool(data.get("ok")), "exit_code": exit_code, "verdict": None,
            "model": model, **data}


def error_document(exc: Exception, *, exit_code: int, session_id: str | None = None, model: str | None = None,
                   command: str | None = None) -> dict[str, Any]:
    """The ``result`` object of a command that could not run (usage, config, a bad slash line)."""
    code = getattr(exc, "code", None) or re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__)
    doc: dict[str, Any] = {"type": "result", "ok": False, "exit_code": exit_code, "verdict": None,
                           "error": {"code": str(code).upper(), "message": str(exc)}, "model": model,
                           "session_id": session_id}
    if command is not None:
        doc["command"] = command
        doc["result"] = None
    return doc


def write_line(out: TextIO, doc: dict[str, Any]) -> None:
    """Write one JSON object on its own line and flush (a reader sees it at once)."""
    out.write(json.dumps(doc, ensure_ascii=False, default=str) + "\n")
    out.flush()
