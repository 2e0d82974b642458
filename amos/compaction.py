"""Compaction planning: which older messages a summary may replace (pure, no I/O).

Issue "Context window": the oldest turns beyond ``context.keep_recent_turns`` are
replaced by one summary message, while these are never removed or altered:

- tool results whose evidence is not acknowledged (``ToolResultPart.protected``) —
  kept with the whole step they belong to (the assistant turn with its tool calls and
  every result of that turn), so the tool-call/result protocol stays valid;
- host feedback of the current execution, and the prompt that started it;
- the prompt (or host feedback) right before a kept step — a recent turn or a protected
  step — which that step answers;
- the pending tool-call/result protocol (a turn whose calls are not all answered, and
  everything after it);
- the task view, which is never part of the history (it is rebuilt into the
  instructions of every request).

The history is cut into *steps*: a user message on its own, or an assistant turn
together with the tool-result messages that follow it. ``keep_recent_turns`` counts
assistant turns from the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from amos.context import marked_partial
from amos.messages import Message, TextPart, ToolResultPart

SUMMARY_PREFIX = "[amos host: summary of earlier conversation]"
"""First line of every summary message (the model and people can tell it apart)."""

MAX_SUMMARY_PART_CHARS = 4000
"""Longest text of one part sent to the summary call (characters); the exact text is
kept in the replaced-history record."""


@dataclass(frozen=True)
class Step:
    """Messages ``start .. end-1``: a user message, or an assistant turn plus its results."""

    start: int
    end: int
    kind: str  # "user" or "turn"


@dataclass(frozen=True)
class CompactionPlan:
    """What a compaction would do.

    Attributes:
        replaced: indices of the messages the summary replaces (ascending).
        kept_old: indices of older messages kept verbatim (protected steps, feedback of
            the current execution), in order.
        recent_start: index of the first message of the recent part (kept verbatim).
        replaced_tokens: estimated tokens of the replaced messages.
        kept_protected: how many protected tool results older messages keep.
        refusal: why nothing can be compacted (then ``replaced`` is empty).
    """

    replaced: tuple[int, ...] = ()
    kept_old: tuple[int, ...] = ()
    recent_start: int = 0
    replaced_tokens: int = 0
    kept_protected: int = 0
    refusal: str | None = None

    @property
    def possible(self) -> bool:
        """True when at least one message can be replaced."""
        return bool(self.replaced) and self.refusal is None


def steps_of(messages: Sequence[Message]) -> list[Step]:
    """Cut a history into steps (tool results belong to the assistant turn before them)."""
    steps: list[Step] = []
    start = 0
    for index in range(1, len(messages) + 1):
        if index == len(messages) or messages[index].role != "tool":
            if index == len(messages) or messages[index].role in ("user", "assistant"):
                kind = "turn" if messages[start].role == "assistant" else "user"
                steps.append(Step(start, index, kind))
                start = index
    return steps


def _unanswered(messages: Sequence[Message], step: Step) -> bool:
    calls = {c.call_id for c in messages[step.start].tool_calls} if step.kind == "turn" else set()
    answered = {r.call_id for m in messages[step.start + 1:step.end] for r in m.tool_results}
    return bool(calls - answered)


def _answered_by_kept(messages: Sequence[Message], steps: Sequence[Step], shielded: Sequence[int]) -> list[bool]:
    """Per step: a prompt or host feedback right before a kept protected step (directly or
    through other such messages), which that step answers and so keeps, as a kept recent
    turn keeps the prompt it answers."""
    out = [False] * len(steps)
    answered = False
    for position in range(len(steps) - 1, -1, -1):
        step = steps[position]
        if step.kind == "turn":
            answered = bool(shielded[position])
        elif messages[step.start].kind in ("prompt", "feedback"):
            out[position] = answered
        else:  # an earlier summary is not a question
            answered = False
    return out


def plan_compaction(messages: Sequence[Message], message_tokens: Sequence[int], *, keep_recent_turns: int,
                    current_start: int | None = None) -> CompactionPlan:
    """Choose the messages a summary replaces.

    Args:
        messages: the history.
        message_tokens: estimated tokens of each message (``RequestBudget.message_tokens``).
        keep_recent_turns: assistant turns at the end that are never compacted.
        current_start: index of the current execution's prompt (None outside a run);
            it and the host feedback after it are kept.

    A prompt (or host feedback) right before a kept step is kept with it: a protected
    step, like a recent turn, never appears without the question it answers.

    Returns:
        A plan; ``refusal`` says why when nothing can be replaced.
    """
    steps = steps_of(messages)
    recent = len(steps)
    turns = 0
    for position in range(len(steps) - 1, -1, -1):
        if turns >= keep_recent_turns:
            break
        recent = position
        if steps[position].kind == "turn":
            turns += 1
    for position, step in enumerate(steps[:recent]):
        if _unanswered(messages, step):
            recent = position
            break
    while 0 < recent < len(steps) and steps[recent - 1].kind == "user":
        recent -= 1  # a kept turn keeps the prompt (and host feedback) it answers
    recent_start = steps[recent].start if recent < len(steps) else len(messages)
    if recent == 0:
        return CompactionPlan(recent_start=recent_start, refusal=(
            f"nothing to compact: the history is only the {keep_recent_turns} most recent turn(s) that "
            "context.keep_recent_turns keeps" if messages else "nothing to compact: the history is empty"))
    replaced: list[int] = []
    kept: list[int] = []
    protected = 0
    feedback = 0
    asked = 0
    shielded = [sum(1 for i in range(step.start, step.end) for p in messages[i].tool_results if p.protected)
                for step in steps[:recent]]
    answers = _answered_by_kept(messages, steps[:recent], shielded)
    for position, step in enumerate(steps[:recent]):
        indices = range(step.start, step.end)
        step_protected = shielded[position]
        pinned_host = current_start is not None and step.kind == "user" and step.start >= current_start and (
            messages[step.start].kind == "feedback" or step.start == current_start)
        if step_protected or pinned_host or answers[position]:
            kept.extend(indices)
            protected += step_protected
            feedback += bool(pinned_host)
            asked += bool(answers[position] and not pinned_host)
        else:
            replaced.extend(indices)
    if replaced and all(messages[i].kind == "summary" for i in replaced):
        return CompactionPlan(kept_old=tuple(kept), recent_start=recent_start, kept_protected=protected, refusal=(
            "nothing to compact: only the summary of an earlier compaction is older than the recent turns"))
    if not replaced:
        what = []
        if protected:
            what.append(f"{protected} tool result(s) whose evidence is not acknowledged")
        if asked:
            what.append(f"{asked} prompt/host-feedback message(s) those results answer")
        if feedback:
            what.append(f"{feedback} prompt/host-feedback message(s) of the current run")
        return CompactionPlan(kept_old=tuple(kept), recent_start=recent_start, kept_protected=protected, refusal=(
            "nothing can be compacted: everything older than the recent turns is protected ("
            + " and ".join(what) + "); the history is unchanged"))
    return CompactionPlan(replaced=tuple(replaced), kept_old=tuple(kept), recent_start=recent_start,
                          replaced_tokens=sum(message_tokens[i] for i in replaced), kept_protected=protected)


def apply_plan(messages: Sequence[Message], plan: CompactionPlan, summary: Message) -> list[Message]:
    """The new history: the kept older messages in their order with the summary where
    the first replaced message was (so during a run it follows the run's prompt), then
    the recent part."""
    first = plan.replaced[0] if plan.replaced else plan.recent_start
    return [*(messages[i] for i in plan.kept_old if i < first), summary,
            *(messages[i] for i in plan.kept_old if i > first), *messages[plan.recent_start:]]


def summary_message(text: str, *, replaced: int, source: str) -> Message:
    """The user message that stands for the replaced messages.

    Args:
        text: the model's summary.
        replaced: how many messages it replaces.
        source: where the exact replaced history is kept (an evidence id or a
            checkpoint number), so the model and people can find it.
    """
    header = f"{SUMMARY_PREFIX} {replaced} earlier message(s) were replaced by this summary; {source}."
    return Message(role="user", kind="summary", parts=(TextPart(text=f"{header}\n\n{text.strip()}"),))


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit} more characters omitted from this summary request …]"


def summary_request_messages(messages: Sequence[Message], plan: CompactionPlan, instruction: str,
                             part_chars: int = MAX_SUMMARY_PART_CHARS) -> list[Message]:
    """The messages of the summary call: the replaced ones (long parts clipped to
    ``part_chars`` characters) and a final host instruction (``kind == "feedback"``)."""
    out: list[Message] = []
    for index in plan.replaced:
        message = marked_partial(messages[index])  # a partial turn is summarised as incomplete
        parts = []
        for part in message.parts:
            if isinstance(part, TextPart):
                parts.append(part.model_copy(update={"text": _clip(part.text, part_chars)}))
            elif isinstance(part, ToolResultPart):
                parts.append(part.model_copy(update={"content": _clip(part.content, part_chars)}))
            else:
                parts.append(part)
        out.append(message.model_copy(update={"parts": tuple(parts)}))
    out.append(Message.user(instruction, kind="feedback"))
    return out


SUMMARY_INSTRUCTIONS = """\
You are compacting the conversation above so the work can continue in a smaller context.
Write a faithful, compact summary for yourself: the user's goals and constraints, decisions
made, files read or changed (with paths), commands run and their outcomes, errors met, and
what remains to do. Keep exact names, paths, numbers and error messages. Do not invent
anything. Answer with the summary only, no tool calls."""
