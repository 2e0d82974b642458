"""Exporting a saved session: readable Markdown, or the full session JSON.

Pure functions of a :class:`~amos.sessions.Session` (``amos sessions export``,
spec/cli.md): no I/O, no clock, no config or environment — the same session always
exports to the same text, and nothing appears that the session file does not
already hold (secrets never reach a session file, DESIGN.md "Storage").

The Markdown keeps the conversation in order: each prompt, the assistant's text
verbatim (it is already Markdown), each tool call with its arguments and a summary
of its result, host feedback as quoted host notes, then the stop receipt and any
pending approvals. Everything amos adds around model or tool text is fenced so that
text cannot break out of it: a fence is always longer than any backtick run inside,
and a fence the assistant left open is closed after its turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from amos.compaction import SUMMARY_PREFIX
from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart
from amos.policy.stop import ApprovalInfo, StopReceipt
from amos.render import summary_line, verdict_glyph
from amos.safe_text import printable
from amos.sessions import HeldCall, PendingApproval, Session

MAX_ARG_CHARS = 400
"""Longest string value shown inside tool-call arguments (characters); longer ones are cut."""
MAX_ARGS_JSON_CHARS = 4000
"""Longest arguments JSON shown for one call (characters), after cutting long strings."""
RESULT_PREVIEW_LINES = 12
"""Lines of a tool result (or of its projected summary) shown."""
MAX_LINE_CHARS = 400
"""Longest result line shown (characters)."""

_BACKTICKS = re.compile(r"`+")
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_EXIT_CODE = re.compile(r"^exit code: (.+)$", re.MULTILINE)


# --- Markdown helpers ------------------------------------------------------------------


def _clean(text: str) -> str:
    """Text safe to print to a terminal: CRLF → LF, other control characters as ``\\xNN``."""
    return printable(text.replace("\r\n", "\n"))


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def fence(content: str, info: str = "") -> str:
    """A fenced code block that ``content`` cannot close.

    Args:
        content: the text to show literally.
        info: the info string (language), e.g. ``json``.

    Returns:
        The block, without a trailing newline: its fence has at least three backticks
        and more than the longest run of backticks in ``content``.
    """
    ticks = "`" * max(3, _longest_backtick_run(content) + 1)
    body = _clean(content).rstrip("\n")
    return f"{ticks}{info}\n{body}\n{ticks}"


def inline_code(value: object) -> str:
    """``value`` as one line of inline code, whatever backticks it contains."""
    text = " ".join(_clean(str(value)).split()) or " "
    ticks = "`" * (_longest_backtick_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _one_line(value: object) -> str:
    """Plain text on one line (whitespace runs collapsed)."""
    return " ".join(_clean(str(value)).split())


def _close_open_fences(text: str) -> str:
    """Append a closing fence when ``text`` leaves a fenced code block open (CommonMark).

    The text itself is kept verbatim; only the missing closing fence is added, so a
    turn that opened a block cannot swallow the rest of the export.
    """
    opened: str | None = None
    for line in text.split("\n"):
        match = _FENCE_LINE.match(line)
        if not match:
            continue
        marker, rest = match.groups()
        if opened is None:
            if not (marker[0] == "`" and "`" in rest):
                opened = marker
        elif marker[0] == opened[0] and len(marker) >= len(opened) and not rest.strip():
            opened = None
    return text if opened is None else f"{text.rstrip(chr(10))}\n{opened}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _quote(text: str) -> str:
    """``text`` as a Markdown blockquote (every line prefixed)."""
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


# --- Tool calls and results ----------------------------------------------------------------


def _truncate_strings(value: Any, path: str, cut: list[tuple[str, int]]) -> Any:
    """``value`` with every string longer than ``MAX_ARG_CHARS`` cut; ``cut`` collects (path, full length)."""
    if isinstance(value, str):
        if len(value) <= MAX_ARG_CHARS:
            return value
        cut.append((path, len(value)))
        return value[:MAX_ARG_CHARS] + "…"
    if isinstance(value, dict):
        return {k: _truncate_strings(v, f"{path}.{k}", cut) for k, v in value.items()}
    if isinstance(value, list):
        return [_truncate_strings(v, f"{path}[{i}]", cut) for i, v in enumerate(value)]
    return value


def render_arguments(call: ToolCallPart) -> str:
    """The arguments of one call: a compact JSON block, with notes on anything cut.

    Args:
        call: the call as the model sent it.

    Returns:
        Markdown: a ``json`` block (or a ``text`` block of the raw string when the model
        sent invalid JSON), followed by one line per string value cut to
        ``MAX_ARG_CHARS`` naming its JSON path and full length in characters.
    """
    notes: list[str] = []
    if call.raw_arguments is not None and call.arguments is None:
        raw = call.raw_arguments
        shown = raw if len(raw) <= MAX_ARGS_JSON_CHARS else raw[:MAX_ARGS_JSON_CHARS] + "…"
        notes.append("The arguments were not valid JSON; the raw string the model sent:")
        if len(raw) > MAX_ARGS_JSON_CHARS:
            notes.append(f"*(cut to {MAX_ARGS_JSON_CHARS} of {len(raw)} characters)*")
        return "\n\n".join([notes[0], fence(shown, "text"), *notes[1:]])
    cut: list[tuple[str, int]] = []
    shown_value = _truncate_strings(call.arguments, "$", cut)
    text = json.dumps(shown_value, ensure_ascii=False)
    full = len(text)
    if full > MAX_ARGS_JSON_CHARS:
        text = text[:MAX_ARGS_JSON_CHARS] + "…"
    parts = [fence(text, "json")]
    if cut:
        parts.append("*" + "; ".join(f"{inline_code(p)} cut to {MAX_ARG_CHARS} of {n} characters"
                                     for p, n in cut) + "*")
    if full > MAX_ARGS_JSON_CHARS:
        parts.append(f"*(arguments JSON cut to {MAX_ARGS_JSON_CHARS} of {full} characters)*")
    return "\n\n".join(parts)


def _preview(text: str) -> tuple[str, str | None]:
    """The first lines of ``text`` and a note on what was left out (None: nothing)."""
    lines = text.replace("\r\n", "\n").rstrip("\n").split("\n")
    head = lines[:RESULT_PREVIEW_LINES]
    shown = "\n".join(line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…" for line in head)
    more = len(lines) - len(head)
    clipped = any(len(line) > MAX_LINE_CHARS for line in head)
    if not more and not clipped:
        return shown, None
    left_out = f"{more} more line{'' if more == 1 else 's'}" if more else "long lines cut"
    return shown, f"*… {left_out}; {len(text)} characters in full*"


def render_result(result: ToolResultPart) -> str:
    """The summary of one tool result.

    Args:
        result: the result as the model saw it.

    Returns:
        Markdown: a status line (status, exit code of ``run_command`` when its
        ``exit code:`` line is visible, evidence id, size of a projected result), then
        the first ``RESULT_PREVIEW_LINES`` lines of the content — of the summary when
        the model saw a projection — in a fence.
    """
    facts = [f"**Result:** {inline_code(result.status)}"]
    content = result.content
    if result.tool_name == "run_command":
        match = _EXIT_CODE.search(content)
        if match:
            facts.append(f"exit code {inline_code(match.group(1).strip())}")
    if result.projected:
        lines = content.split("\n", 2)
        try:
            envelope = json.loads(lines[1]) if len(lines) > 1 else {}
        except ValueError:
            envelope = {}
        size = envelope.get("result_bytes") if isinstance(envelope, dict) else None
        if len(lines) == 3 and isinstance(envelope, dict) and envelope:
            content = lines[2]
        facts.append("projected: the model saw a summary" + (f" of {size} bytes" if size is not None else ""))
    if result.evidence_id:
        evidence = f"evidence {inline_code(result.evidence_id)}"
        sha = (result.evidence or {}).get("sha256")
        if sha:
            evidence += f" ({inline_code(sha)})"
        facts.append(evidence)
    if result.protected:
        facts.append(f"evidence NOT stored ({_one_line(result.evidence_error)}); the raw result was kept")
    parts = [" · ".join(facts)]
    if content.strip():
        shown, note = _preview(content)
        parts.append(fence(shown, "text"))
        if note:
            parts.append(note)
    else:
        parts.append("*(empty result)*")
    return "\n\n".join(parts)


def _held_status(held: HeldCall) -> str:
    if held.decision == "deny":
        return "denied" + (f": {_one_line(held.reason)}" if held.reason else "")
    if held.decision == "approve":
        return "approved, not run yet"
    if held.needs_approval:
        return "needs a decision"
    return "held; runs once every held call is decided"


# --- Conversation ------------------------------------------------------------------------


def _render_call(call: ToolCallPart, result: ToolResultPart | None, held: dict[str, HeldCall]) -> str:
    parts = [f"#### Tool call {inline_code(call.tool_name)} · {inline_code(call.call_id)}",
             render_arguments(call)]
    if result is not None:
        parts.append(render_result(result))
    elif call.call_id in held:
        parts.append(f"**Result:** none yet — {_held_status(held[call.call_id])} (see Pending approvals)")
    else:
        parts.append("**Result:** none recorded")
    return "\n\n".join(parts)


def _render_assistant(message: Message, results: dict[str, ToolResultPart], held: dict[str, HeldCall]) -> str:
    parts = ["### Assistant"]
    text = message.text
    if text.strip():
        parts.append(_clean(_close_open_fences(text.strip("\n"))))
    elif not message.tool_calls:
        parts.append("*(no text)*")
    parts.extend(_render_call(call, results.pop(call.call_id, None), held) for call in message.tool_calls)
    return "\n\n".join(parts)


def _results_after(messages: Sequence[Message], index: int) -> dict[str, ToolResultPart]:
    """Results answering the calls of the assistant turn at ``index``: up to the next turn."""
    calls = {c.call_id for c in messages[index].tool_calls}
    found: dict[str, ToolResultPart] = {}
    for message in messages[index + 1:]:
        if message.role == "assistant":
            break
        for result in message.tool_results:
            if result.call_id in calls and result.call_id not in found:
                found[result.call_id] = result
    return found


def render_conversation(session: Session) -> list[str]:
    """Markdown blocks of the transcript, in order.

    Each tool call is shown with the result that answers it (the first result with its
    call id before the next assistant turn); a result with no such call is shown where
    it stands.
    """
    held = {h.call.call_id: h for h in session.pending.held} if session.pending else {}
    messages = session.messages
    shown: set[tuple[int, int]] = set()
    blocks: list[str] = []
    prompts = 0
    for index, message in enumerate(messages):
        if message.role == "assistant":
            results = _results_after(messages, index)
            for later in range(index + 1, len(messages)):
                if messages[later].role == "assistant":
                    break
                for n, part in enumerate(messages[later].parts):
                    if isinstance(part, ToolResultPart) and results.get(part.call_id) is part:
                        shown.add((later, n))
            blocks.append(_render_assistant(message, results, held))
        elif message.role == "user" and message.kind == "summary":
            text = _clean(message.text)
            head, _, body = text.partition("\n")
            blocks.append(_quote(f"**amos host — compaction summary.** {head.removeprefix(SUMMARY_PREFIX).strip()}"
                                 f"\n\n{body.strip()}"))
        elif message.role == "user" and message.kind == "feedback":
            blocks.append(_quote(f"**amos host:** {_clean(message.text)}"))
        elif message.role == "user":
            prompts += 1
            blocks.append(f"## You · prompt {prompts}\n\n{_clean(_close_open_fences(message.text))}")
        else:
            for n, part in enumerate(message.parts):
                if isinstance(part, ToolResultPart) and (index, n) not in shown:
                    blocks.append(f"#### Tool result {inline_code(part.tool_name)} · "
                                  f"{inline_code(part.call_id)}\n\n{render_result(part)}")
                elif isinstance(part, TextPart) and part.text.strip():
                    blocks.append(_clean(_close_open_fences(part.text)))
    return blocks


# --- Receipts and approvals ------------------------------------------------------------------


def _approval_line(info: ApprovalInfo) -> str:
    line = f"{inline_code(info.call_id)} {inline_code(info.tool)}"
    if info.owner:
        line += f", owner {_one_line(info.owner)}"
    if info.deadline:
        line += f", decide by {info.deadline}"
    if info.resume_token:
        line += f", resume token {inline_code(info.resume_token)}"
    return line


def render_receipt(receipt: StopReceipt, heading: str = "Stop receipt") -> str:
    """One stop receipt (spec/stop-receipts.md "StopReceipt fields") as a Markdown section.

    Args:
        receipt: the receipt.
        heading: the section heading.

    Returns:
        A ``##`` section: the one-line summary, then each field as a list item.
    """
    u = receipt.usage
    tokens = f"{u.input_tokens} input + {u.output_tokens} output tokens in {_plural(u.model_calls, 'model call')}"
    if u.cached_tokens or u.reasoning_tokens:
        tokens += f" ({u.cached_tokens} cached, {u.reasoning_tokens} reasoning)"
    items = [
        f"**Verdict:** {verdict_glyph(receipt.verdict)} {receipt.verdict}",
        f"**Cause:** {inline_code(receipt.cause or 'none')}",
        f"**Reason:** {inline_code(receipt.reason)}",
        f"**Detail:** {_one_line(receipt.detail)}",
        f"**Execution:** {inline_code(receipt.execution_id)}",
        f"**Steps:** {receipt.steps} (model calls)",
        f"**Tool calls:** {receipt.tool_call_count}",
        f"**Recovery attempts:** {receipt.recovery_attempts}",
        f"**Tokens:** {tokens}",
    ]
    if receipt.completion is not None:
        c = receipt.completion
        text = "complete" if c.complete else "not complete"
        if c.reason:
            text += f" — {_one_line(c.reason)}"
        if c.feedback:
            text += f"; feedback: {_one_line(c.feedback)}"
        items.append(f"**Completion check:** {text}")
    if receipt.stop_condition is not None:
        items.append(f"**Stop condition:** {inline_code(json.dumps(receipt.stop_condition, ensure_ascii=False))}")
    if receipt.approval is not None:
        items.append(f"**Approval:** {_approval_line(receipt.approval)}")
    items.extend(f"**Pending approval:** {_approval_line(p)}" for p in receipt.pending_approvals
                 if p != receipt.approval)
    if receipt.policy:
        items.append(f"**Policy:** {inline_code(receipt.policy)}")
    items.append(f"**Started:** {receipt.started_at} · **ended:** {receipt.ended_at}")
    return "\n\n".join([f"## {heading}", _clean(summary_line(receipt)), "\n".join(f"- {i}" for i in items)])


def render_pending(session_id: str, pending: PendingApproval) -> str:
    """The calls a WAITING session holds, and how to decide them.

    Args:
        session_id: the session's id (for the resume command and tokens).
        pending: ``session.pending``.

    Returns:
        A ``## Pending approvals`` section. Whether a deadline has passed is not
        shown: the export does not read the clock.
    """
    lines = [f"Paused since {pending.created_at} in execution {inline_code(pending.execution.execution_id)}"
             + (f"; owner {_one_line(pending.owner)}" if pending.owner else "; no owner (unrouted)")
             + (f"; decide by {pending.deadline}." if pending.deadline else ".")]
    for held in pending.held:
        call = held.call
        lines.append(f"### {inline_code(call.call_id)} {inline_code(call.tool_name)} — {_held_status(held)}\n\n"
                     f"{render_arguments(call)}\n\nResume token: {inline_code(pending.token(session_id, call.call_id))}")
    lines.append(f"Decide with {inline_code(f'amos resume {session_id} --approve CALL_ID')}, "
                 f"{inline_code('--deny CALL_ID --reason TEXT')} or {inline_code('--all')}.")
    return "\n\n".join(["## Pending approvals", *lines])


# --- Header and entry points -----------------------------------------------------------------


def _header(session: Session) -> str:
    host = session.host
    u = session.usage
    prompts = sum(1 for m in session.messages if m.role == "user" and m.kind == "prompt")
    calls = sum(len(m.tool_calls) for m in session.messages)
    usage = f"{u.input_tokens} input + {u.output_tokens} output tokens in {_plural(u.model_calls, 'model call')}"
    if u.cached_tokens or u.reasoning_tokens:
        usage += f" ({u.cached_tokens} cached, {u.reasoning_tokens} reasoning)"
    rows: list[tuple[str, str | None]] = [
        ("Session", inline_code(session.id)),
        ("Name", _one_line(session.name) if session.name else None),
        ("Title", _one_line(session.title) if session.title else None),
        ("Model", inline_code(host.model) if host.model else "-"),
        ("Base URL", inline_code(host.base_url) if host.base_url else None),
        ("Workspace", inline_code(host.workspace) if host.workspace else "-"),
        ("Verify", inline_code(host.verify) if host.verify else None),
        ("Max steps", str(host.max_steps) if host.max_steps is not None else None),
        ("Created", session.created_at),
        ("Updated", session.updated_at),
        ("Usage", usage),
        ("Transcript", f"{_plural(len(session.messages), 'message')}, {_plural(prompts, 'prompt')}, "
                       f"{_plural(calls, 'tool call')}"),
        ("Last stop", f"{verdict_glyph(session.last_stop.verdict)} {session.last_stop.verdict}"
                      if session.last_stop else None),
    ]
    title = _one_line(session.title or session.name or session.id)
    items = "\n".join(f"- **{label}:** {value}" for label, value in rows if value is not None)
    return f"# amos session: {title}\n\n{items}"


def _receipts(session: Session, extra: Iterable[StopReceipt]) -> list[StopReceipt]:
    """Earlier receipts in start order, then ``last_stop``; one per execution."""
    latest = session.last_stop
    seen = {latest.execution_id} if latest else set()
    earlier: list[StopReceipt] = []
    for receipt in sorted(extra, key=lambda r: (r.started_at, r.ended_at)):
        if receipt.execution_id not in seen:
            seen.add(receipt.execution_id)
            earlier.append(receipt)
    return earlier + ([latest] if latest else [])


def export_markdown(session: Session, *, receipts: Iterable[StopReceipt] = ()) -> str:
    """The session as Markdown a person reads.

    Args:
        session: the session as loaded (already free of secrets).
        receipts: stop receipts of earlier executions found elsewhere (a session file
            keeps only ``last_stop``); shown in start order before ``last_stop``, one per
            execution id.

    Returns:
        The document, ending with a newline: header (id, name, title, model,
        workspace, times, usage), the conversation, every stop receipt, then pending
        approvals. Deterministic: the same session gives the same text.
    """
    blocks = [_header(session)]
    conversation = render_conversation(session)
    blocks.extend(conversation or ["*(no messages)*"])
    shown = _receipts(session, receipts)
    for n, receipt in enumerate(shown, 1):
        latest = receipt is session.last_stop
        blocks.append(render_receipt(receipt, "Stop receipt — latest run" if latest else f"Stop receipt — earlier run {n}"))
    prompts = sum(1 for m in session.messages if m.role == "user" and m.kind == "prompt")
    if session.last_stop is not None and len(shown) == 1 and prompts > 1:
        blocks.append("*Receipts of earlier runs are not kept in the session file; each run's "
                      "receipt replaces the previous one.*")
    if not shown:
        blocks.append("## Stop receipt\n\n*(no run has finished in this session)*")
    if session.pending is not None:
        blocks.append(render_pending(session.id, session.pending))
    return "\n\n".join(blocks) + "\n"


def export_json(session: Session) -> str:
    """The whole session as JSON (``indent=2``), loadable with ``Session.model_validate_json``.

    Args:
        session: the session as loaded.

    Returns:
        ``session.model_dump_json(indent=2)``; no trailing newline.
    """
    return session.model_dump_json(indent=2)
