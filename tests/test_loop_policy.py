"""The pure loop-policy tracker: admission identities, bounds and recovery (issue 4)."""

from __future__ import annotations

import math

import pytest

from amos.errors import ConfigError
from amos.policy.loop_policy import (
    MAX_FINGERPRINT_BYTES,
    LoopPolicy,
    PolicyTracker,
    action_fingerprint,
    coerce_policy,
    feedback_text,
)


def tracker(**kw) -> PolicyTracker:
    return PolicyTracker(LoopPolicy(**kw))


def test_fingerprint_is_key_order_independent_and_bounded():
    assert action_fingerprint("t", {"a": 1, "b": 2}) == action_fingerprint("t", {"b": 2, "a": 1})
    assert action_fingerprint("t", {"a": 1}) != action_fingerprint("u", {"a": 1})
    assert action_fingerprint("t", {"x": "y" * (MAX_FINGERPRINT_BYTES - 20)}) is not None
    assert action_fingerprint("t", {"x": "y" * MAX_FINGERPRINT_BYTES}) is None
    assert action_fingerprint("t", {"x": math.nan}) is None


def test_write_identity_includes_the_workspace_revision():
    t = tracker()
    t.begin_round()
    assert t.admit("c1", "run_command", "unknown", {"command": "pytest"}).decision == "run"
    t.observe("c1", "run_command", "unknown", "failed", "complete")
    t.begin_round()
    blocked = t.admit("c2", "run_command", "unknown", {"command": "pytest"})
    assert blocked.decision == "blocked" and "c1" in blocked.message
    t.begin_round()
    assert t.admit("c3", "edit_file", "write", {"path": "a"}).decision == "run"
    t.observe("c3", "edit_file", "write", "succeeded", "complete")
    assert t.revision == 1
    t.begin_round()
    assert t.admit("c4", "run_command", "unknown", {"command": "pytest"}).decision == "run"


def test_two_identical_calls_in_one_response_are_one_admission_even_after_a_write():
    t = tracker()
    t.begin_round()
    assert t.admit("c1", "write_file", "write", {"path": "a"}).decision == "run"
    t.observe("c1", "write_file", "write", "succeeded", "complete")
    assert t.admit("c2", "write_file", "write", {"path": "a"}).decision == "blocked"


def test_not_started_releases_the_admission():
    t = tracker()
    t.begin_round()
    assert t.admit("c1", "run_command", "unknown", {"command": "x"}).decision == "run"
    t.observe("c1", "run_command", "unknown", "not_started", "complete")
    t.begin_round()
    assert t.admit("c2", "run_command", "unknown", {"command": "x"}).decision == "run"


def test_unknown_completion_of_a_write_is_uncertain_but_a_read_is_not():
    t = tracker()
    t.begin_round()
    t.admit("c1", "run_command", "unknown", {"command": "x"})
    assert t.observe("c1", "run_command", "unknown", "timed_out", "unknown") == "uncertain"
    t.admit("c2", "read_file", "read", {"path": "x"})
    assert t.observe("c2", "read_file", "read", "timed_out", "unknown") == "failure"


@pytest.mark.parametrize("status, verdict", [("failed", "failure"), ("timed_out", "failure"),
                                             ("denied", "failure"), ("blocked", "ok"), ("succeeded", "ok")])
def test_failure_statuses(status, verdict):
    t = tracker()
    assert t.observe("c", "read_file", "read", status, "complete") == verdict


def test_repeated_read_runs_n_times_then_blocked_with_feedback_then_stops():
    t = tracker(max_repeated_reads=2)
    decisions = []
    for i in range(4):
        t.begin_round()
        a = t.admit(f"c{i}", "read_file", "read", {"path": "a"})
        decisions.append((a.decision, a.feedback, a.reason))
        if a.decision == "run":
            t.observe(f"c{i}", "read_file", "read", "succeeded", "complete", result="same")
    assert decisions == [("run", False, None), ("run", False, None), ("blocked", True, None),
                         ("stop", False, "repeated_action")]


def test_read_after_any_successful_effect_or_changed_progress_is_fresh():
    t = tracker(max_repeated_reads=1)
    t.begin_round()
    assert t.admit("c1", "read_file", "read", {"path": "a"}).decision == "run"
    t.observe("c1", "read_file", "read", "succeeded", "complete", result="v1")
    t.begin_round()
    t.admit("c2", "run_command", "unknown", {"command": "touch a"})
    t.observe("c2", "run_command", "unknown", "succeeded", "complete")
    t.begin_round()
    assert t.admit("c3", "read_file", "read", {"path": "a"}).decision == "run"
    t.sample_progress("k1")
    t.sample_progress("k2")
    t.begin_round()
    assert t.admit("c4", "read_file", "read", {"path": "a"}).decision == "run"


def test_read_only_tools_restricts_read_treatment():
    t = tracker(read_only_tools=frozenset({"list_dir"}))
    assert t.is_read("list_dir", "read") and not t.is_read("read_file", "read")
    assert not t.is_read("list_dir", "write")
    policy = LoopPolicy(read_only_tools=frozenset({"run_command"}))
    with pytest.raises(ValueError, match="effect 'unknown'"):
        policy.check_tools({"run_command": "unknown"})
    with pytest.raises(ValueError, match="not an available tool"):
        LoopPolicy(read_only_tools=frozenset({"nope"})).check_tools({})


def test_tracking_bound_stops_before_the_next_dispatch():
    t = tracker(max_tracked=3)
    t.begin_round()
    for i in range(3):
        assert t.admit(f"c{i}", "write_file", "write", {"path": str(i)}).decision == "run"
    stop = t.admit("c9", "write_file", "write", {"path": "9"})
    assert (stop.decision, stop.cause, stop.reason) == ("stop", "policy_stop", "tracking_bound")


def test_observation_bound_counts_too():
    t = tracker(max_tracked=2)
    t.observe("a", "x", "read", "failed", "complete")
    t.observe("b", "x", "read", "failed", "complete")
    t.begin_round()
    assert t.admit("c", "read_file", "read", {}).reason == "tracking_bound"


def test_unfingerprintable_arguments_stop_before_dispatch():
    t = tracker()
    t.begin_round()
    stop = t.admit("c", "write_file", "write", {"content": "x" * (MAX_FINGERPRINT_BYTES + 1)})
    assert (stop.decision, stop.reason) == ("stop", "unfingerprintable")


def test_recovery_budget():
    t = tracker(max_recovery_attempts=2)
    assert t.try_recover() and t.try_recover() and not t.try_recover()
    assert t.recovery_attempts == 2
    assert not tracker(max_recovery_attempts=0).try_recover()


def test_progress_key_unchanged_threshold_restarts_after_firing():
    t = tracker(max_unchanged_progress=2)
    assert [t.sample_progress("k") for _ in range(6)] == [False, False, True, False, True, False]
    assert not t.progress_changed
    t.sample_progress("other")
    assert t.progress_changed


def test_feedback_is_labelled():
    text = feedback_text("completion", "missing a.txt", 1, 2)
    assert text.startswith("[amos host feedback — loop policy, recovery 1/2")
    assert "missing a.txt" in text and "Nothing is retried automatically" in text


@pytest.mark.parametrize("value, path", [
    ({"max_tracked": 0}, "loop_policy.max_tracked"),
    ({"max_recovery_attempts": 1001}, "loop_policy.max_recovery_attempts"),
    ({"read_only_tools": [""]}, "loop_policy.read_only_tools.0"),
    ({"read_only_tools": ["x"] * 101}, "loop_policy.read_only_tools"),
    ({"read_only_tools": ["x" * 257]}, "loop_policy.read_only_tools.0"),
    ({"bogus": 1}, "loop_policy.bogus"),
])
def test_coerce_policy_validates(value, path):
    with pytest.raises(ConfigError) as info:
        coerce_policy(value)
    assert path in str(info.value)


def test_coerce_policy_accepts_none_empty_and_instances():
    assert coerce_policy(None) is None
    assert coerce_policy({}) == LoopPolicy()
    policy = LoopPolicy(max_recovery_attempts=0)
    assert coerce_policy(policy) is policy
    with pytest.raises(ConfigError, match="must be null or an object"):
        coerce_policy([1])
    assert LoopPolicy().with_verify("make test").completion.command == "make test"
    assert LoopPolicy().completion_configured is False
