"""The compaction planner (amos/compaction.py), pure: what a summary may replace."""

from __future__ import annotations

from amos.compaction import (
    SUMMARY_PREFIX,
    apply_plan,
    plan_compaction,
    steps_of,
    summary_message,
    summary_request_messages,
)
from amos.messages import Message, TextPart, ToolCallPart, ToolResultPart


def prompt(text: str = "do the work") -> Message:
    return Message.user(text)


def feedback(text: str = "[amos host] check failed") -> Message:
    return Message.user(text, kind="feedback")


def turn(*call_ids: str, text: str = "") -> Message:
    parts: list = [TextPart(text=text or f"turn {'/'.join(call_ids) or 'answer'}")]
    parts += [ToolCallPart(call_id=c, tool_name="read_file", arguments={"path": f"{c}.txt"}) for c in call_ids]
    return Message(role="assistant", kind="turn", parts=tuple(parts))


def result(call_id: str, *, protected: bool = False) -> Message:
    part = ToolResultPart(call_id=call_id, tool_name="read_file", content=f"content of {call_id}",
                          evidence_error="too_large: over max_record_bytes" if protected else None)
    assert part.protected is protected
    return Message.tool_result(part)


def plan(messages: list[Message], keep: int, current_start: int | None = None):
    return plan_compaction(messages, [10] * len(messages), keep_recent_turns=keep, current_start=current_start)


def compacted(messages: list[Message], keep: int, current_start: int | None = None) -> list[Message]:
    p = plan(messages, keep, current_start)
    assert p.possible, p.refusal
    return apply_plan(messages, p, summary_message("summary text", replaced=len(p.replaced), source="checkpoint 1"))


def assert_protocol_valid(messages: list[Message]) -> None:
    """Every tool call has exactly one result after it, every result a call before it."""
    calls: list[str] = []
    answered: list[str] = []
    for m in messages:
        for c in m.tool_calls:
            calls.append(c.call_id)
        for r in m.tool_results:
            assert r.call_id in calls, f"result {r.call_id} without its call"
            answered.append(r.call_id)
    assert sorted(calls) == sorted(answered), (calls, answered)
    assert len(set(answered)) == len(answered)


def long_history(n: int = 6) -> list[Message]:
    out = [prompt()]
    for i in range(n):
        out += [turn(f"c{i}"), result(f"c{i}")]
    out.append(turn(text="done"))
    return out


def test_steps_group_a_turn_with_its_results():
    messages = [prompt(), turn("a", "b"), result("a"), result("b"), feedback(), turn(text="ok")]
    assert [(s.start, s.end, s.kind) for s in steps_of(messages)] == [
        (0, 1, "user"), (1, 4, "turn"), (4, 5, "user"), (5, 6, "turn")]


def test_empty_and_short_histories_have_nothing_to_compact():
    empty = plan([], 2)
    assert not empty.possible and "empty" in empty.refusal
    short = [prompt(), turn("a"), result("a"), turn(text="done")]
    refused = plan(short, 4)
    assert not refused.possible and refused.replaced == ()
    assert "nothing to compact" in refused.refusal and "4 most recent" in refused.refusal


def test_keep_recent_turns_counts_assistant_turns():
    messages = long_history(6)  # prompt, 6 call turns with results, final answer
    p = plan(messages, 2)
    # the last two assistant turns (c5 with its result, the answer) stay verbatim
    assert messages[p.recent_start].tool_calls[0].call_id == "c5"
    assert p.replaced == tuple(range(p.recent_start))
    assert p.replaced_tokens == 10 * p.recent_start
    new = compacted(messages, 2)
    assert new[0].kind == "summary" and new[0].text.startswith(SUMMARY_PREFIX)
    assert new[1:] == messages[p.recent_start:]
    assert_protocol_valid(new)


def test_keep_recent_turns_zero_replaces_every_answered_step():
    messages = long_history(3)
    p = plan(messages, 0)
    assert p.replaced == tuple(range(len(messages))) and p.recent_start == len(messages)
    new = compacted(messages, 0)
    assert [m.kind for m in new] == ["summary"]


def test_protected_step_keeps_its_turn_and_every_result():
    messages = [prompt(), turn("a"), result("a"),
                turn("p", "q"), result("p", protected=True), result("q"),  # one protected result of two
                turn("b"), result("b"), turn("c"), result("c"), turn(text="done")]
    p = plan(messages, 2)
    assert p.possible and p.kept_protected == 1
    assert p.kept_old == (3, 4, 5)  # the assistant turn and both of its results
    assert set(p.replaced) == {0, 1, 2, 6, 7}
    new = compacted(messages, 2)
    assert new[1:4] == messages[3:6]  # byte-for-byte the same objects
    assert_protocol_valid(new)
    # the summary request sees only what is replaced, never the protected content
    request = summary_request_messages(messages, p, "summarise")
    assert [m.tool_results[0].call_id for m in request if m.tool_results] == ["a", "b"]
    assert request[-1].kind == "feedback"


def test_all_protected_old_content_is_refused():
    messages = [turn("p"), result("p", protected=True), turn("q"), result("q", protected=True),
                turn("r"), result("r"), turn(text="done")]
    p = plan(messages, 2)
    assert not p.possible and p.replaced == ()
    assert p.kept_protected == 2
    assert "protected" in p.refusal and "2 tool result(s)" in p.refusal and "unchanged" in p.refusal


def test_unanswered_call_is_never_compacted():
    # keep 0 would take everything, but the last turn's call has no result yet
    messages = [prompt(), turn("a"), result("a"), turn("b"), result("b"), turn("open")]
    p = plan(messages, 0)
    assert p.recent_start == 5 and 5 not in p.replaced
    new = compacted(messages, 0)
    assert new[-1] is messages[-1]
    # a partly answered turn (two calls, one result) is kept with everything after it
    partly = [prompt(), turn("a"), result("a"), turn("x", "y"), result("x"), feedback(), turn(text="t")]
    p = plan(partly, 0)
    assert p.recent_start == 3 and p.replaced == (0, 1, 2)
    assert compacted(partly, 0)[1:] == partly[3:]


def test_current_run_prompt_and_feedback_are_kept():
    earlier = [prompt("an earlier run"), turn("e"), result("e"), turn(text="earlier answer")]
    current = [prompt("the current run"), turn("a"), result("a"), feedback("[amos host] not done: tests fail"),
               turn("b"), result("b"), turn("c"), result("c"), turn("d"), result("d")]
    messages = earlier + current
    start = len(earlier)
    p = plan(messages, 2, current_start=start)
    assert p.kept_old == (start, start + 3)  # the prompt and the feedback of this run
    assert set(p.replaced) == {0, 1, 2, 3, start + 1, start + 2, start + 4, start + 5}
    new = compacted(messages, 2, current_start=start)
    assert new[1] is messages[start] and new[2] is messages[start + 3]
    assert [m.text for m in new if m.role == "user" and m.kind != "summary"] == [
        "the current run", "[amos host] not done: tests fail"]
    assert_protocol_valid(new)
    # outside a run (/compact) the same prompt and feedback may be summarised
    assert plan(messages, 2).kept_old == ()


def test_old_content_only_protected_or_current_host_messages_is_refused():
    messages = [prompt("go"), turn("p"), result("p", protected=True), turn("b"), result("b"), turn(text="x")]
    p = plan(messages, 2, current_start=0)
    assert not p.possible and p.kept_old == (0, 1, 2)
    assert "1 tool result(s)" in p.refusal and "1 prompt/host-feedback" in p.refusal


def test_a_protected_step_keeps_the_prompt_it_answers():
    # the only old content is the prompt and the protected steps that answer it
    messages = [prompt("read them"), turn("p"), result("p", protected=True), turn("q"),
                result("q", protected=True), turn("r"), result("r"), turn(text="done")]
    p = plan(messages, 2)
    assert not p.possible and p.kept_old == (0, 1, 2, 3, 4)
    assert "2 tool result(s)" in p.refusal and "1 prompt/host-feedback message(s) those results answer" in p.refusal
    # a prompt that is not right before a protected step is still replaced, an earlier summary too
    messages = [summary_message("s", replaced=3, source="checkpoint 1"), prompt("first"), turn("a"), result("a"),
                prompt("second"), feedback("[amos host] retry"), turn("p"), result("p", protected=True),
                turn("b"), result("b"), turn(text="done")]
    p = plan(messages, 2)
    assert p.replaced == (0, 1, 2, 3) and p.kept_old == (4, 5, 6, 7)
    assert_protocol_valid(compacted(messages, 2))


def test_a_kept_turn_keeps_the_prompt_it_answers():
    messages = [prompt("old"), turn("a"), result("a"), turn(text="old answer"),
                prompt("new"), feedback("[amos host] retry"), turn("b"), result("b"), turn(text="new answer")]
    p = plan(messages, 2)
    assert p.recent_start == 4 and p.replaced == (0, 1, 2, 3)
    assert compacted(messages, 2)[1:] == messages[4:]


def test_summary_request_clips_long_parts():
    big = Message.tool_result(ToolResultPart(call_id="a", tool_name="read_file", content="z" * 10_000))
    messages = [prompt(), turn("a"), big, turn(text="one"), turn(text="two")]
    p = plan(messages, 2)
    request = summary_request_messages(messages, p, "summarise", part_chars=500)
    clipped = request[2].tool_results[0].content
    assert clipped.startswith("z" * 500) and "9500 more characters omitted" in clipped
    assert messages[2].tool_results[0].content == "z" * 10_000  # the history itself is untouched
