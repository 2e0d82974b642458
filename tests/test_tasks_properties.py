"""Property tests of amos.tasks over random operation sequences (hypothesis)."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amos.tasks import CATEGORIES, CONFIRM_STATUSES, TaskLimits, TaskState, TaskStateError

BINDING = {
    "scope": {"owner_id": "u", "namespace": "n"},
    "task_id": "t",
    "lifecycle": {"kind": "task", "id": "L"},
}
IDS = st.sampled_from(["a", "b", "c", "d"])
EIDS = st.sampled_from(["x1", "x2"])
TEXT = st.text(alphabet="ab \n\"#é", min_size=1, max_size=60)
SOURCE = st.fixed_dictionaries({"label": st.sampled_from(["host", "user", "proof"])})


@st.composite
def note(draw, supersede: bool = True):
    data = {"id": draw(IDS), "category": draw(st.sampled_from(CATEGORIES)), "text": draw(TEXT),
            "source": draw(SOURCE)}
    if supersede and draw(st.booleans()):
        data["supersedes"] = draw(IDS)
    if draw(st.booleans()):
        data["conflicts_with"] = draw(st.lists(IDS, max_size=2))
    return data


OUTCOME = st.fixed_dictionaries({
    "execution_id": EIDS,
    "call_id": st.just("c"),
    "tool": st.just("tool"),
    "status": st.sampled_from(["succeeded", "failed", "timed_out", "cancelled"]),
    "completion": st.sampled_from(["complete", "unknown"]),
})

OPS = st.one_of(
    st.tuples(st.just("host"), st.fixed_dictionaries({}, optional={
        "notes": st.lists(note(), max_size=3),
        "resolve": st.lists(IDS, max_size=2),
        "confirm_actions": st.lists(st.fixed_dictionaries({
            "execution_id": EIDS, "status": st.sampled_from(CONFIRM_STATUSES), "source": SOURCE}), max_size=2),
        "prune": st.fixed_dictionaries({}, optional={
            "note_ids": st.lists(IDS, max_size=2), "execution_ids": st.lists(EIDS, max_size=2)}),
    })),
    st.tuples(st.just("add"), note()),
    st.tuples(st.just("add"), note(supersede=False)),
    st.tuples(st.just("resolve"), IDS),
    st.tuples(st.just("resolve-prune"), IDS),
    st.tuples(st.just("confirm-prune"), st.tuples(EIDS, st.sampled_from(["completed", "failed"]))),
    st.tuples(st.just("propose"), st.lists(note(supersede=False), min_size=1, max_size=2)),
    st.tuples(st.just("assume"), st.lists(note(), min_size=1, max_size=2)),
    st.tuples(st.just("record"), OUTCOME),
    st.tuples(st.just("confirm"), st.tuples(EIDS, st.sampled_from(CONFIRM_STATUSES), SOURCE)),
    st.tuples(st.just("prune"), st.tuples(st.lists(IDS, max_size=2), st.lists(EIDS, max_size=2))),
    st.tuples(st.just("lifecycle"), st.fixed_dictionaries({"status": st.sampled_from(["open", "done"])})),
    st.tuples(st.just("stale"), note()),
)


def apply(task: TaskState, op: str, arg, rev: int):
    if op == "host":
        return task.update_host(arg, rev)
    if op == "add":
        return task.update_host({"notes": [arg]}, rev)
    if op == "resolve":
        return task.update_host({"resolve": [arg]}, rev)
    if op == "resolve-prune":
        return task.update_host({"resolve": [arg], "prune": {"note_ids": [arg]}}, rev)
    if op == "confirm-prune":
        confirm = {"execution_id": arg[0], "status": arg[1], "source": {"label": "proof"}}
        return task.update_host({"confirm_actions": [confirm], "prune": {"execution_ids": [arg[0]]}}, rev)
    if op == "propose":
        return task.propose(arg, rev)
    if op == "assume":
        return task.assume(arg, rev)
    if op == "record":
        return task.record_action(arg, rev)
    if op == "confirm":
        return task.confirm_action(*arg, rev)
    if op == "prune":
        return task.prune_resolved(*arg, rev)
    if op == "lifecycle":
        return task.sync_lifecycle(arg, rev)
    return task.update_host({"notes": [arg]}, max(rev - 1, 0) if rev else rev + 1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(OPS, max_size=25),
    max_entries=st.integers(min_value=1, max_value=8),
    max_tokens=st.integers(min_value=150, max_value=600),
)
def test_random_operation_sequences(ops, max_entries, max_tokens):
    limits = TaskLimits(max_entries=max_entries, max_prompt_tokens=max_tokens, max_snapshot_bytes=8192)
    task = TaskState(**BINDING, limits=limits)
    for op, arg in ops:
        before = copy.deepcopy(task.to_snapshot())
        rev = task.revision
        try:
            result = apply(task, op, arg, rev)
        except TaskStateError as exc:
            assert exc.code in {"TASK_STATE_CONFLICT", "TASK_STATE_INVALID", "TASK_STATE_CAPACITY"}
            assert task.to_snapshot() == before  # failed operations change nothing
            assert task.revision == rev
            continue
        assert op != "stale"
        after = task.to_snapshot()
        assert result == after
        if after == before:
            assert task.revision == rev  # a no-op keeps the revision
        else:
            assert task.revision == rev + 1  # revisions only grow, by one per change
        # every committed state validates and round-trips like a restored snapshot
        restored = TaskState.from_snapshot(after, **BINDING, limits=limits)
        assert restored.to_snapshot() == after
        assert restored.view() == task.view()
        assert task.view_tokens() <= max_tokens
        assert len(task.notes) + len(task.actions) <= max_entries


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(OPS, max_size=15))
def test_proposals_never_change_host_notes(ops):
    task = TaskState(**BINDING)
    for op, arg in ops:
        try:
            apply(task, op, arg, task.revision)
        except TaskStateError:
            pass
    host = [n for n in task.notes if n.authority == "host"]
    before = copy.deepcopy(task.to_snapshot())
    try:
        task.propose([{"id": "zz", "category": "constraint", "text": "t", "source": {"label": "m"},
                       "supersedes": n.id} for n in host[:1]] or [{"id": "zz", "category": "constraint",
                                                                   "text": "t", "source": {"label": "m"}}],
                     task.revision)
    except TaskStateError:
        assert task.to_snapshot() == before
        return
    assert [n for n in task.notes if n.authority == "host"] == host
