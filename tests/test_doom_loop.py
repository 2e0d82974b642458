"""The doom-loop detector, section by section of spec/doom-loop-behaviour.md.

§1 config, §2 ladder, §3 fingerprints (through amos.policy.canonical), §4 tool streaks,
§5 text, §6 state, §7 loop_key; then property tests (hypothesis).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amos.config_models import AmosConfig
from amos.policy.canonical import (
    CanonicalizationError,
    fingerprint_key_material,
    fingerprint_tool_call,
)
from amos.policy.doom_loop import (
    DEFAULT_DOOM_LOOP_LADDER,
    MAX_RESTORED_STREAK,
    MAX_ROUND_WIDTH,
    MAX_TRACKED_TOOLS,
    DoomLoopCallRecord,
    DoomLoopLadder,
    DoomLoopMonitor,
    DoomLoopTextOptions,
    DoomLoopVerdict,
    ResolvedDoomLoop,
    ResolvedEscalation,
    detect_text_repetition,
    resolve_doom_loop_option,
    resolve_ladder_action,
    resolve_loop_key_material,
)
from amos.policy.doom_loop_text import _WHITESPACE_RUN, normalize_text, split_tokens

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors" / "doom-loop-fingerprints.json"

A, B, C, D = ({"path": name} for name in "abcd")


def monitor(option=True, state=None) -> DoomLoopMonitor:
    return DoomLoopMonitor(resolve_doom_loop_option(option), state)


def play_round(mon: DoomLoopMonitor, round_no: int, calls, *, declare=True, tool="read"):
    """Declare (optionally) and record one round; returns the records in call order."""
    if declare:
        mon.declare_round(round_no, [(tool, key) for key in calls])
    return [mon.record_tool_call(tool, key, round_no) for key in calls]


def action(record: DoomLoopCallRecord) -> str | None:
    return record.verdict.action if record.verdict else None


# --------------------------------------------------------------------------- §1 config


@pytest.mark.parametrize("option", [None, False])
def test_off(option):
    assert resolve_doom_loop_option(option) is None


@pytest.mark.parametrize("option", [True, {}, 5, "yes", {"ladder": None, "text": None}])
def test_defaults(option):
    config = resolve_doom_loop_option(option)
    assert config.ladder == DoomLoopLadder(observe=2, steer=False, escalate=False, block=3, stop=6)
    assert config.text == DoomLoopTextOptions(True, 16, 4, 12, 400)
    assert config.escalation is None
    assert config.warnings == ()


@pytest.mark.parametrize(
    "value,expected",
    [
        (False, False),
        (1, 1),
        (2.9, 2),
        (10**30, 10**30),
        (0, "default"),
        (0.5, "default"),
        (-3, "default"),
        (math.nan, "default"),
        (math.inf, "default"),
        ("4", "default"),
        (True, "default"),  # a bool is not a number
        (None, "default"),
        ([3], "default"),
    ],
)
def test_each_rung_sanitised(value, expected):
    for rung in ("observe", "steer", "escalate", "block", "stop"):
        config = resolve_doom_loop_option({"ladder": {rung: value}})
        default = getattr(DEFAULT_DOOM_LOOP_LADDER, rung)
        assert getattr(config.ladder, rung) == (default if expected == "default" else expected)
        assert getattr(config.ladder, rung) is not True


def test_ladder_not_a_mapping_is_defaults():
    assert resolve_doom_loop_option({"ladder": 7}).ladder == DEFAULT_DOOM_LOOP_LADDER


def test_text_options():
    assert resolve_doom_loop_option({"text": False}).text == DoomLoopTextOptions(enabled=False)
    assert resolve_doom_loop_option({"text": True}).text == DoomLoopTextOptions()
    partial = resolve_doom_loop_option({"text": {"max_period_tokens": 5, "min_repeats": None}})
    assert partial.text == DoomLoopTextOptions(True, 5, 4, 12, 400)
    # values are not range-checked (spec §1)
    odd = resolve_doom_loop_option({"text": {"min_repeats": -3, "max_window_tokens": 2.5}})
    assert (odd.text.min_repeats, odd.text.max_window_tokens) == (-3, 2.5)
    assert resolve_doom_loop_option({"text": {"enabled": False}}).text.enabled is False


@pytest.mark.parametrize(
    "raw,expected",
    [
        (None, None),
        ({}, None),
        ({"max_escalations": 5}, None),
        ({"advisor": False}, None),
        ({"model": None}, None),
        ({"model": "m"}, ResolvedEscalation("m", 2)),
        ({"model": "m", "max_escalations": 3.9}, ResolvedEscalation("m", 3)),
        ({"model": "m", "max_escalations": 0}, ResolvedEscalation("m", 2)),
        ({"model": "m", "max_escalations": "4"}, ResolvedEscalation("m", 2)),
        ({"model": "m", "max_escalations": math.inf}, ResolvedEscalation("m", 2)),
        ({"model": "m", "advisor": False}, ResolvedEscalation("m", 2, None)),
        ({"advisor": True}, ResolvedEscalation(None, 2, True)),
        ({"advisor": {"x": 1}}, ResolvedEscalation(None, 2, {"x": 1})),
    ],
)
def test_escalation(raw, expected):
    config = resolve_doom_loop_option({"escalation": raw, "ladder": {"escalate": 2, "block": 4}})
    assert config.escalation == expected


def test_no_warnings_for_the_defaults_and_a_complete_ladder():
    config = resolve_doom_loop_option(
        {
            "ladder": {"observe": 1, "steer": 2, "escalate": 3, "block": 4, "stop": 5},
            "escalation": {"model": "m"},
        }
    )
    assert config.warnings == ()


def test_warning_block_without_stop():
    (warning,) = resolve_doom_loop_option({"ladder": {"stop": False}}).warnings
    assert "never stops" in warning
    assert resolve_doom_loop_option({"ladder": {"stop": False, "block": False}}).warnings == ()


def test_warning_dead_rungs_one_per_rung():
    warnings = resolve_doom_loop_option({"ladder": {"observe": 4, "steer": 4, "block": 3}}).warnings
    assert len(warnings) == 2
    # the first stronger enabled rung it cannot beat is named
    assert '"observe" (4)' in warnings[0] and '"steer" (4)' in warnings[0]
    assert '"steer" (4)' in warnings[1] and '"block" (3)' in warnings[1]
    # observe 6 equals stop 6: dead too
    (warning,) = resolve_doom_loop_option({"ladder": {"observe": 6, "block": False}}).warnings
    assert '"observe" (6)' in warning and '"stop" (6)' in warning


def test_warning_escalate_rung_without_mechanism_and_the_reverse():
    (warning,) = resolve_doom_loop_option(
        {"ladder": {"observe": 1, "escalate": 2, "block": 4}}
    ).warnings
    assert "no escalation model" in warning
    (warning,) = resolve_doom_loop_option({"escalation": {"model": "m"}}).warnings
    assert "ladder.escalate is off" in warning


def test_validated_config_model_is_accepted():
    model = AmosConfig.model_validate(
        {
            "doom_loop": {
                "ladder": {"steer": 2, "observe": 1},
                "text": False,
                "escalation": {"model": "anthropic:claude-opus-4-1", "max_escalations": 3},
            }
        }
    ).doom_loop
    config = resolve_doom_loop_option(model)
    assert config.ladder == DoomLoopLadder(observe=1, steer=2, escalate=False, block=3, stop=5)  # amos's stop
    assert config.text.enabled is False
    assert config.escalation == ResolvedEscalation("anthropic:claude-opus-4-1", 3)
    assert AmosConfig.model_validate({"doom_loop": True}).doom_loop is not None
    # amos's config defaults (issue 17 item 15) differ from the reference's, which the
    # lenient resolution keeps for programmatic callers
    from amos.policy.doom_loop_config import AMOS_DOOM_LOOP_LADDER, AMOS_TEXT_OPTIONS

    configured = resolve_doom_loop_option(AmosConfig.model_validate({"doom_loop": True}).doom_loop)
    assert (configured.ladder, configured.text) == (AMOS_DOOM_LOOP_LADDER, AMOS_TEXT_OPTIONS)
    assert resolve_doom_loop_option(True).ladder == DoomLoopLadder(stop=6)
    assert resolve_doom_loop_option(config) is config


def test_monitor_accepts_a_raw_option_and_collects_its_warnings():
    mon = DoomLoopMonitor({"ladder": {"stop": False}})
    assert isinstance(mon.config, ResolvedDoomLoop)
    assert len(mon.warnings) == 1
    assert mon.take_warnings() and mon.warnings == []
    with pytest.raises(ValueError):
        DoomLoopMonitor(False)


# --------------------------------------------------------------------------- §2 ladder


@pytest.mark.parametrize(
    "streak,expected",
    [(0, None), (1, None), (2, "observe"), (3, "block"), (5, "block"), (6, "stop"), (99, "stop")],
)
def test_default_ladder(streak, expected):
    assert resolve_ladder_action(DEFAULT_DOOM_LOOP_LADDER, streak, allow_block=True) == expected


@pytest.mark.parametrize("streak,expected", [(2, "observe"), (3, "observe"), (6, "stop")])
def test_block_not_allowed_falls_through_but_stop_still_stops(streak, expected):
    assert resolve_ladder_action(DEFAULT_DOOM_LOOP_LADDER, streak, allow_block=False) == expected


def test_ladder_order_and_escalate_flag():
    ladder = DoomLoopLadder(observe=1, steer=2, escalate=3, block=4, stop=5)
    got = [resolve_ladder_action(ladder, s, allow_block=True) for s in range(6)]
    assert got == [None, "observe", "steer", "escalate", "block", "stop"]
    assert resolve_ladder_action(ladder, 3, allow_block=True, allow_escalate=False) == "steer"
    assert resolve_ladder_action(ladder, 4, allow_block=False) == "escalate"
    assert resolve_ladder_action(ladder, 4, allow_block=False, allow_escalate=False) == "steer"
    # every rung is checked separately; a disabled rung never fires
    only_stop = DoomLoopLadder(observe=False, block=False, stop=2)
    assert resolve_ladder_action(only_stop, 1, allow_block=True) is None
    assert resolve_ladder_action(only_stop, 2, allow_block=True) == "stop"


def test_ladder_as_mapping():
    assert resolve_ladder_action({"block": 2}, 2, allow_block=True) == "block"
    assert resolve_ladder_action({"block": 2, "observe": False}, 1, allow_block=True) is None


def test_monitor_offers_escalate_only_while_budget_remains():
    mon = monitor(
        {
            "ladder": {"observe": 1, "escalate": 2, "block": 4, "stop": 6},
            "escalation": {"model": "m", "max_escalations": 1},
        }
    )
    assert mon.can_escalate()
    assert action(mon.record_tool_call("t", {}, 1)) == "observe"
    assert action(mon.record_tool_call("t", {}, 2)) == "escalate"
    assert action(mon.record_tool_call("t", {}, 3)) == "escalate"  # only the engine spends
    mon.consume_escalation()
    assert not mon.can_escalate()
    assert action(mon.record_tool_call("t", {}, 4)) == "block"
    assert action(mon.record_tool_call("u", {}, 1)) == "observe"
    assert action(mon.record_tool_call("u", {}, 2)) == "observe"  # falls through
    assert mon.get_state()["escalations_used"] == 1
    assert not monitor({"ladder": {"escalate": 2, "block": 4}}).can_escalate()
    # advisor escalation is out of scope in amos: resolved, but never offered
    advisor_only = monitor({"ladder": {"escalate": 2, "block": 4}, "escalation": {"advisor": True}})
    assert advisor_only.config.escalation is not None and not advisor_only.can_escalate()


# --------------------------------------------------------------------------- §3 fingerprints


def test_fingerprints_come_from_canonical():
    mon = monitor()
    record = mon.record_tool_call("bash", {"cwd": "/tmp", "command": "ls -la"}, 1)
    assert record.fingerprint == fingerprint_tool_call("bash", {"command": "ls -la", "cwd": "/tmp"})
    assert (
        record.fingerprint
        != mon.record_tool_call("sh", {"command": "ls -la", "cwd": "/tmp"}, 1).fingerprint
    )


@pytest.mark.skipif(not VECTORS.exists(), reason="shared vectors not present")
def test_tool_call_vectors_through_the_monitor():
    vectors = json.loads(VECTORS.read_text(encoding="utf-8"))
    for number, vector in enumerate(vectors["toolCallVectors"]):
        record = monitor().record_tool_call(vector["toolName"], vector["keyMaterial"], number)
        assert record.fingerprint == vector["fingerprint"], vector["name"]


@pytest.mark.skipif(not VECTORS.exists(), reason="shared vectors not present")
def test_text_fingerprints_are_bare_hashes_of_the_vectors():
    vectors = {
        v["keyMaterial"]: v["fingerprint"]
        for v in json.loads(VECTORS.read_text(encoding="utf-8"))["keyMaterialVectors"]
    }
    verdict = monitor().record_assistant_text("I am stuck. " * 6)
    assert verdict.detector == "text-repetition"
    assert verdict.fingerprint == vectors["I am stuck."]
    mon = monitor()
    mon.record_assistant_text("Retrying  the\tsame plan.")
    verdict = mon.record_assistant_text("\n Retrying the same\u00a0plan.  ")
    assert verdict.detector == "text-streak"
    assert verdict.fingerprint == vectors["Retrying the same plan."]


# --------------------------------------------------------------------------- §4 tool streaks


def test_repeated_single_call_climbs_the_default_ladder():
    mon = monitor()
    records = [mon.record_tool_call("run_command", {"command": "make"}, r) for r in range(1, 8)]
    assert [r.streak for r in records] == [1, 2, 3, 4, 5, 6, 7]
    assert [action(r) for r in records] == [
        None,
        "observe",
        "block",
        "block",
        "block",
        "stop",
        "stop",
    ]
    assert not any(r.duplicate_in_round for r in records)
    verdict = records[2].verdict
    assert (verdict.detector, verdict.tool_name, verdict.streak) == (
        "tool-fingerprint",
        "run_command",
        3,
    )
    assert verdict.fingerprint == records[2].fingerprint
    assert '"run_command"' in verdict.message and "3 consecutive rounds" in verdict.message


def test_changed_arguments_reset():
    mon = monitor()
    streaks = [
        mon.record_tool_call("t", key, r).streak for r, key in enumerate([A, A, B, B, B, A], 1)
    ]
    assert streaks == [1, 2, 1, 2, 3, 1]


def test_fan_out_of_two_calls_trips_as_one_unit():
    mon = monitor()
    rounds = [play_round(mon, r, [A, B]) for r in range(1, 5)]
    assert [[rec.streak for rec in rnd] for rnd in rounds] == [[1, 1], [2, 2], [3, 3], [4, 4]]
    assert [[action(rec) for rec in rnd] for rnd in rounds][1:] == [
        ["observe", "observe"],
        ["block", "block"],
        ["block", "block"],
    ]
    first, second = rounds[2]
    # one round identity: the same message for both, so steer dedupes it to one
    assert first.verdict.message == second.verdict.message
    assert "same set of 2 parallel calls" in first.verdict.message
    assert first.verdict.fingerprint != second.verdict.fingerprint


def test_fan_out_order_does_not_matter():
    mon = monitor()
    play_round(mon, 1, [A, B, C])
    assert [r.streak for r in play_round(mon, 2, [C, A, B])] == [2, 2, 2]


def test_superset_round_resets_the_round_streak():
    mon = monitor()
    play_round(mon, 1, [A, B])
    play_round(mon, 2, [A, B])
    a, b, c = play_round(mon, 3, [A, B, C])
    assert c.streak == 1 and c.verdict is None
    assert mon.get_state()["tools"]["read"]["streak"] == 1  # the round streak reset
    # a and b keep their own per-call streaks (spec §4.6: max of round and call streak)
    assert (a.streak, b.streak) == (3, 3)
    assert "this exact" in a.verdict.message
    # after [a,b] x1 the superset resets the lone new call and leaves a, b at 2
    mon = monitor()
    play_round(mon, 1, [A, B])
    assert [r.streak for r in play_round(mon, 2, [A, B, C])] == [2, 2, 1]
    # a subset round resets the round streak too
    assert mon.record_tool_call("read", A, 3).streak == 3
    assert mon.get_state()["tools"]["read"]["streak"] == 1


def test_interleaved_other_tools_do_not_reset():
    mon = monitor()
    streaks = []
    for r in range(1, 4):
        streaks.append(mon.record_tool_call("search", {"q": "x"}, 2 * r - 1).streak)
        mon.record_tool_call("read", {"path": f"f{r}"}, 2 * r)
    assert streaks == [1, 2, 3]


def test_duplicates_in_a_round_reuse_the_first_decision():
    mon = monitor()
    play_round(mon, 1, [A])
    play_round(mon, 2, [A])
    first, dup, dup2 = play_round(mon, 3, [A, A, A])
    assert not first.duplicate_in_round and dup.duplicate_in_round and dup2.duplicate_in_round
    assert first.streak == dup.streak == dup2.streak == 3
    assert first.verdict == dup.verdict == dup2.verdict
    assert mon.record_tool_call("read", A, 4).streak == 4  # nothing was incremented twice
    # an undeclared round behaves the same
    mon = monitor()
    mon.record_tool_call("t", A, 1)
    one, two = (mon.record_tool_call("t", A, 2) for _ in range(2))
    assert (one.streak, two.streak, two.duplicate_in_round) == (2, 2, True)


def test_round_numbers_only_compare_for_equality():
    mon = monitor()
    assert [mon.record_tool_call("t", A, r).streak for r in (5, 9, 2, 2, 7)] == [1, 2, 3, 3, 4]


def test_per_call_streak_inside_changing_rounds():
    mon = monitor()
    results = [play_round(mon, r, [A, other]) for r, other in enumerate([B, C, D], 1)]
    assert [[rec.streak for rec in rnd] for rnd in results] == [[1, 1], [2, 1], [3, 1]]
    a3 = results[2][0]
    assert action(a3) == "block"
    assert "this exact" in a3.verdict.message and a3.fingerprint[:16] in a3.verdict.message


def test_undeclared_fan_out_is_caught_per_call():
    mon = monitor()
    rounds = [play_round(mon, r, [A, B], declare=False) for r in (1, 2, 3)]
    assert [[rec.streak for rec in rnd] for rnd in rounds] == [[1, 1], [2, 2], [3, 3]]
    a3, b3 = rounds[2]
    assert "this exact" in a3.verdict.message and a3.verdict.message != b3.verdict.message


def test_declaration_for_another_round_is_ignored():
    mon = monitor()
    mon.declare_round(1, [("read", A), ("read", B)])
    mon.record_tool_call("read", A, 2)  # not round 1: scored as a single call
    mon.declare_round(3, [("read", A), ("read", B)])
    assert mon.record_tool_call("read", A, 3).streak == 2  # per-call
    assert mon.get_state()["tools"]["read"]["streak"] == 1


def test_call_outside_its_declared_round():
    mon = monitor()
    play_round(mon, 1, [A, B])
    mon.declare_round(2, [("read", A), ("read", B)])
    outsider = mon.record_tool_call("read", C, 2)
    assert outsider.streak == 1
    state = mon.get_state()["tools"]["read"]
    assert state["fingerprint"] == fingerprint_tool_call("read", B)  # identity kept
    assert [mon.record_tool_call("read", key, 2).streak for key in (A, B)] == [2, 2]


def test_unhashable_key_raises_and_changes_nothing():
    mon = monitor()
    mon.record_tool_call("t", A, 1)
    before = mon.get_state()
    for bad in ({"x": math.nan}, {"x": 2**1100}, {"x": (1,)}, {1: "a"}):
        with pytest.raises(CanonicalizationError):
            mon.record_tool_call("t", bad, 2)
    cycle: dict = {}
    cycle["self"] = cycle
    with pytest.raises(CanonicalizationError):
        mon.record_tool_call("t", cycle, 2)
    deep: list = []
    for _ in range(66):
        deep = [deep, 1]
    with pytest.raises(CanonicalizationError):
        mon.record_tool_call("t", deep, 2)
    with pytest.raises(CanonicalizationError):  # a non-str name, one documented error
        mon.record_tool_call(None, A, 2)
    assert mon.get_state() == before
    assert mon.record_tool_call("t", A, 2).streak == 2


def test_declare_round_skips_unhashable_calls_with_a_warning():
    mon = monitor()
    mon.declare_round(1, [("read", A), ("read", {"x": math.inf}), "not a pair"])
    assert len(mon.warnings) == 2
    assert mon.record_tool_call("read", A, 1).streak == 1
    mon.declare_round(2, 42)  # not even a list: ignored, never raises
    assert len(mon.warnings) == 3


def test_server_tool_records():
    mon = monitor()
    records = [
        mon.record_tool_call(
            "server:web_search",
            {"q": "x"},
            r,
            allow_block=False,
            detector="server-tool-fingerprint",
        )
        for r in (1, 2, 3, 6)
    ]
    assert [action(r) for r in records] == [None, "observe", "observe", "observe"]
    assert records[1].verdict.detector == "server-tool-fingerprint"


def test_tracked_tools_are_bounded():
    mon = monitor()
    for number in range(MAX_TRACKED_TOOLS + 5):
        mon.record_tool_call(f"tool{number}", {}, 1)
    tools = mon.get_state()["tools"]
    assert len(tools) == MAX_TRACKED_TOOLS
    assert "tool0" not in tools and f"tool{MAX_TRACKED_TOOLS + 4}" in tools


def test_very_wide_rounds_are_saved_bounded():
    mon = monitor()
    calls = [{"n": n} for n in range(MAX_ROUND_WIDTH + 10)]
    play_round(mon, 1, calls)
    records = play_round(mon, 2, calls)
    assert {r.streak for r in records} == {2}  # scored as a unit all the same
    saved = mon.get_state()["tools"]["read"]
    assert (
        saved["streak"] == 1 and "round_fingerprints" not in saved and "call_streaks" not in saved
    )


# --------------------------------------------------------------------------- §5 text


def test_text_streak_across_turns():
    mon = monitor()
    verdicts = [mon.record_assistant_text("Let me check the file again.") for _ in range(7)]
    assert [v and v.action for v in verdicts] == [
        None,
        "observe",
        "observe",
        "observe",
        "observe",
        "stop",
        "stop",
    ]
    assert verdicts[1].detector == "text-streak" and verdicts[1].tool_name is None
    assert verdicts[5].streak == 6
    assert mon.record_assistant_text("Something else.") is None
    assert mon.get_state()["text"]["streak"] == 1


def test_text_streak_steers_when_configured():
    mon = monitor({"ladder": {"steer": 2, "observe": False}})
    mon.record_assistant_text("same")
    assert mon.record_assistant_text("same").action == "steer"


def test_empty_text_is_a_no_op():
    mon = monitor()
    mon.record_assistant_text("Retrying.")
    for empty in ("", "   ", "\n\t\ufeff\u3000", None, 42):
        assert mon.record_assistant_text(empty) is None
    assert mon.record_assistant_text("Retrying.").streak == 2  # neither counted nor reset


def test_text_disabled():
    mon = monitor({"text": False})
    assert [mon.record_assistant_text("x y z " * 20) for _ in range(3)] == [None] * 3
    assert "text" not in mon.get_state()


def test_reset_text_streak_keeps_tool_streaks():
    mon = monitor()
    mon.record_tool_call("t", A, 1)
    mon.record_assistant_text("Still waiting.")
    mon.reset_text_streak()
    assert mon.record_assistant_text("Still waiting.") is None
    assert mon.record_tool_call("t", A, 2).streak == 2


def test_one_response_repeating_a_sentence_trips_the_ladder():
    sentence = "I will try running the tests again."  # 7 tokens
    verdict = monitor().record_assistant_text(f"Okay. {sentence} " + f"{sentence} " * 3)
    assert (verdict.detector, verdict.action, verdict.streak) == ("text-repetition", "observe", 4)
    assert sentence in verdict.message
    verdict = monitor().record_assistant_text(f"{sentence}\n" * 40)
    assert (verdict.detector, verdict.action, verdict.streak) == ("text-repetition", "stop", 40)
    steer = monitor({"ladder": {"steer": 3}}).record_assistant_text(f"{sentence} " * 4)
    assert steer.action == "steer"  # never block: the text is already out
    assert monitor().record_assistant_text(f"{sentence} " * 3) is None


def test_stronger_text_verdict_wins_and_repetition_wins_ties():
    mon = monitor({"ladder": {"observe": 1, "block": False, "stop": False}})
    tie = mon.record_assistant_text("no " * 12)
    assert (tie.detector, tie.action) == ("text-repetition", "observe")
    mon = monitor()
    text = "one two three " * 4  # repetition: 4 repeats → observe
    verdicts = [mon.record_assistant_text(text) for _ in range(6)]
    assert [v.detector for v in verdicts[:5]] == ["text-repetition"] * 5
    assert (verdicts[5].detector, verdicts[5].action) == ("text-streak", "stop")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("no " * 6, None),  # 6 tokens < min_covered 12
        ("no " * 12, (12, 1, 12, "no")),
        ("a b " * 6, (6, 2, 12, "a b")),
        ("no no " * 8, (16, 1, 16, "no")),  # smallest period on ties
        ("x y z " * 3, None),  # 3 repeats < 4
        ("a b c " * 4, (4, 3, 12, "a b c")),
        ("loop " * 20 + "then something else entirely", None),  # only the tail counts
        ("w " * 10 + "a b c d e f g h " * 4, (4, 8, 32, "a b c d e f g h")),
    ],
)
def test_detect_text_repetition(text, expected):
    result = detect_text_repetition(text)
    assert (
        result and (result.repeats, result.period_tokens, result.covered_tokens, result.sample)
    ) == expected


def test_detect_options_partial_and_dataclass():
    assert detect_text_repetition("no " * 6, {"min_covered_tokens": 6}).repeats == 6
    assert detect_text_repetition("no " * 6, {"min_covered_tokens": None}) is None
    options = DoomLoopTextOptions(min_covered_tokens=4, min_repeats=2)
    assert detect_text_repetition("a b " * 2, options).period_tokens == 2
    assert detect_text_repetition("a b c d e " * 4, {"max_period_tokens": 4}) is None
    # the window keeps the last max_window_tokens tokens
    assert detect_text_repetition("no " * 30, {"max_window_tokens": 20}).repeats == 20
    # unchecked values never raise: a huge window is no window, nonsense takes defaults
    assert detect_text_repetition("no " * 12, {"max_window_tokens": 1e306}).repeats == 12
    assert detect_text_repetition("no " * 12, {"min_repeats": "x", "max_window_tokens": -1}) is None


def test_es_whitespace_rules():
    # U+FEFF and U+3000 separate tokens, as in JavaScript
    assert detect_text_repetition("no\ufeff" * 12).repeats == 12
    assert detect_text_repetition("no\u3000" * 12).repeats == 12
    # U+0085 and U+001C-U+001F do not (Python's \s would split on them)
    for char in "\x85\x1c\x1d\x1e\x1f":
        assert detect_text_repetition(f"no{char}" * 12) is None
    mon = monitor()
    mon.record_assistant_text("a\x85b")
    assert mon.record_assistant_text("a b") is None  # different text, streak 1
    assert mon.record_assistant_text("a\ufeff\ufeffb ").streak == 2  # same once normalised


def test_window_budget_counts_utf16_units():
    options = {
        "max_window_tokens": 2,
        "min_repeats": 2,
        "min_covered_tokens": 2,
        "max_period_tokens": 1,
    }  # budget 128 UTF-16 units
    # "pq😀" + 122 spaces + "q😀" is 129 units (127 code points): the cut drops "p"
    assert detect_text_repetition("pq😀" + " " * 122 + "q😀", options).sample == "q😀"
    assert detect_text_repetition("pq😀" + " " * 121 + "q😀", options) is None
    # a cut through a surrogate pair leaves a lone low surrogate, never an error
    assert detect_text_repetition("😀q" + " " * 125 + "q", options) is None


def test_large_response_only_the_tail_is_scanned():
    text = "filler text " * 400_000 + "I am stuck. " * 30
    result = detect_text_repetition(text)
    assert (result.repeats, result.sample) == (30, "I am stuck.")


# --------------------------------------------------------------------------- §6 state


def run_script(mon: DoomLoopMonitor, script, start_round: int):
    """Feed (kind, payload) steps; returns verdict dicts (or None) per step."""
    out = []
    for offset, (kind, payload) in enumerate(script):
        r = start_round + offset
        if kind == "round":
            mon.declare_round(r, [("read", key) for key in payload])
            out.append(
                [
                    (rec.streak, rec.duplicate_in_round, rec.verdict and rec.verdict.to_dict())
                    for rec in (mon.record_tool_call("read", key, r) for key in payload)
                ]
            )
        else:
            verdict = mon.record_assistant_text(payload)
            out.append(verdict and verdict.to_dict())
    return out


def test_state_round_trip_gives_the_same_next_verdicts():
    option = {"ladder": {"escalate": 2, "block": 4}, "escalation": {"model": "m"}}
    before = [
        ("round", [A, B]),
        ("round", [A, B]),
        ("text", "hmm"),
        ("text", "hmm"),
        ("round", [A, C]),
    ]
    after = [
        ("round", [A, C]),
        ("round", [A, C, C]),
        ("text", "hmm"),
        ("round", [A]),
        ("round", [A]),
        ("round", [A, D]),
    ]
    original = monitor(option)
    run_script(original, before, 1)
    original.consume_escalation()
    state = json.loads(json.dumps(original.get_state()))
    assert state["escalations_used"] == 1
    restored = monitor(option, state)
    assert restored.get_state() == original.get_state()
    assert run_script(restored, after, 100) == run_script(original, after, 100)
    assert restored.get_state() == original.get_state()
    assert restored.warnings == []


def test_state_shape():
    mon = monitor()
    assert mon.get_state() == {"tools": {}}
    mon.record_tool_call("t", A, 1)
    mon.record_tool_call("t", A, 2)
    fp_a = fingerprint_tool_call("t", A)
    assert mon.get_state() == {"tools": {"t": {"fingerprint": fp_a, "streak": 2}}}
    play_round(mon, 1, [A, B])
    play_round(mon, 2, [A, B])
    saved = mon.get_state()["tools"]["read"]
    assert saved["round_fingerprints"] == sorted(fingerprint_tool_call("read", k) for k in (A, B))
    assert "call_streaks" not in saved  # every member at the round's streak
    play_round(mon, 3, [A, C])
    saved = mon.get_state()["tools"]["read"]
    assert saved["streak"] == 1
    assert saved["call_streaks"] == {
        fingerprint_tool_call("read", A): 3,
        fingerprint_tool_call("read", C): 1,
    }
    mon.record_assistant_text("hello")
    assert mon.get_state()["text"] == {
        "fingerprint": fingerprint_key_material("hello"),
        "streak": 1,
    }
    snapshot = mon.get_state()
    snapshot["tools"]["read"]["call_streaks"].clear()
    snapshot["tools"]["read"]["round_fingerprints"].append("x")
    assert mon.get_state() != snapshot  # a deep copy


@pytest.mark.parametrize("blob", ["garbage", [1, 2], 3, None, True])
def test_invalid_state_is_ignored_with_a_warning(blob):
    mon = monitor()
    mon.record_tool_call("t", A, 1)
    before = mon.get_state()
    mon.restore(blob)
    assert mon.get_state() == before
    assert len(mon.warnings) == 1 and "ignoring" in mon.warnings[0]
    fresh = monitor(True, blob if blob is not None else "x")
    assert fresh.get_state() == {"tools": {}} and len(fresh.warnings) == 1


def test_restore_drops_invalid_entries_with_one_warning():
    fp = "f" * 64
    mon = monitor(
        True,
        {
            "tools": {
                "ok": {"fingerprint": fp, "streak": 2},
                "no_fp": {"streak": 2},
                "fp_not_str": {"fingerprint": 5, "streak": 2},
                "nan": {"fingerprint": fp, "streak": math.nan},
                "str_streak": {"fingerprint": fp, "streak": "3"},
                "bool_streak": {"fingerprint": fp, "streak": True},
                "not_a_dict": [fp, 2],
            },
            "text": {"fingerprint": 3, "streak": 1},
            "stop_verdict": {"action": "stop"},  # the runner's: ignored silently
            "pending_steer": ["x"],
        },
    )
    assert list(mon.get_state()["tools"]) == ["ok"]
    assert "text" not in mon.get_state()
    assert len(mon.warnings) == 2  # the dropped tools, the dropped text
    assert monitor(True, {"tools": "nope"}).get_state() == {"tools": {}}


@pytest.mark.parametrize(
    "streak,expected",
    [
        (2.7, 2),
        (1, 1),
        (0, 1),
        (-5, 1),
        (0.2, 1),
        (1e9, MAX_RESTORED_STREAK),
        (10**40, MAX_RESTORED_STREAK),
    ],
)
def test_restore_floors_and_clamps_tool_streaks(streak, expected):
    mon = monitor(True, {"tools": {"t": {"fingerprint": "f", "streak": streak}}})
    assert mon.get_state()["tools"]["t"]["streak"] == expected


def test_restore_round_sets_and_call_streaks():
    fp_a, fp_b, fp_c = (fingerprint_tool_call("read", key) for key in (A, B, C))
    state = {
        "tools": {"read": {"fingerprint": fp_b, "streak": 2, "round_fingerprints": [fp_b, fp_a]}}
    }
    mon = monitor(True, state)
    saved = mon.get_state()["tools"]["read"]
    assert saved["round_fingerprints"] == sorted([fp_a, fp_b])  # sorted
    assert "call_streaks" not in saved  # defaulted to the streak for each member
    assert [r.streak for r in play_round(mon, 1, [A, B])] == [3, 3]
    # a one-element or non-string list means the single fingerprint
    for bad in ([fp_a], [fp_a, 7], "ab", None):
        state = {"tools": {"read": {"fingerprint": fp_a, "streak": 2, "round_fingerprints": bad}}}
        assert "round_fingerprints" not in monitor(True, state).get_state()["tools"]["read"]
    # call streaks: finite counts >= 1, floored; otherwise the default
    state = {
        "tools": {
            "read": {
                "fingerprint": fp_a,
                "streak": 1,
                "call_streaks": {fp_a: 2.9, fp_b: 0, fp_c: "4", "x": math.inf},
            }
        }
    }
    mon = monitor(True, state)
    assert mon.get_state()["tools"]["read"]["call_streaks"] == {fp_a: 2}
    assert mon.record_tool_call("read", A, 1).streak == 3
    state["tools"]["read"]["call_streaks"] = {fp_b: -1}
    assert "call_streaks" not in monitor(True, state).get_state()["tools"]["read"]


def test_restore_text_and_escalations():
    mon = monitor(
        True, {"tools": {}, "text": {"fingerprint": "x", "streak": 2.5}, "escalations_used": 2.7}
    )
    assert mon.get_state() == {
        "tools": {},
        "text": {"fingerprint": "x", "streak": 2.5},
        "escalations_used": 2,
    }
    for used in (-1, "3", math.nan, None, True):
        assert "escalations_used" not in monitor(True, {"escalations_used": used}).get_state()


def test_first_record_after_restore_is_a_new_round():
    mon = monitor()
    mon.record_tool_call("t", A, 1)
    again = monitor(True, mon.get_state())
    record = again.record_tool_call("t", A, 1)  # same round number as before the save
    assert (record.streak, record.duplicate_in_round) == (2, False)


def test_restored_text_streak_continues():
    mon = monitor()
    mon.record_assistant_text("same")
    again = monitor(True, mon.get_state())
    assert again.record_assistant_text("same").streak == 2


# --------------------------------------------------------------------------- §7 loop_key


def _raise(args):
    raise RuntimeError("boom")


ARGS = {"command": "ls", "cwd": "/tmp", "note": None}


@pytest.mark.parametrize(
    "loop_key,kind,key_material",
    [
        (None, "key", ARGS),
        (False, "exempt", None),
        (["command"], "key", {"command": "ls"}),
        (("command", "cwd"), "key", {"command": "ls", "cwd": "/tmp"}),
        (["note"], "key", {"note": None}),  # a None value counts as present
        (["command", 3, "missing"], "key", {"command": "ls"}),
        ([], "fallback", ARGS),
        (["missing"], "fallback", ARGS),
        (_raise, "fallback", ARGS),
        (lambda args: None, "exempt", None),
        (lambda args: args["command"], "key", "ls"),
        (lambda args: False, "key", False),
        (lambda args: {}, "key", {}),
        (True, "fallback", ARGS),
        ("command", "fallback", ARGS),
        ({"command": 1}, "fallback", ARGS),
        (0, "fallback", ARGS),
    ],
)
def test_loop_key_table(loop_key, kind, key_material):
    resolution = resolve_loop_key_material(loop_key, ARGS)
    assert resolution.kind == kind
    assert resolution.key_material == key_material
    assert (resolution.warning is not None) == (kind == "fallback")


def test_loop_key_on_malformed_arguments():
    raw = '{"command": "ls'
    assert resolve_loop_key_material(None, raw).key_material == raw
    fallback = resolve_loop_key_material(["command"], raw)
    assert (fallback.kind, fallback.key_material) == ("fallback", raw)


# --------------------------------------------------------------------------- verdict shape


def test_verdict_to_dict_is_json_and_round_trips():
    mon = monitor()
    mon.record_tool_call("t", A, 1)
    verdict = mon.record_tool_call("t", A, 2).verdict
    data = json.loads(json.dumps(verdict.to_dict()))
    assert set(data) == {"detector", "action", "streak", "fingerprint", "tool_name", "message"}
    assert DoomLoopVerdict.from_dict(data) == verdict
    text = monitor().record_assistant_text("no " * 12)
    assert "tool_name" not in text.to_dict()
    assert DoomLoopVerdict.from_dict(text.to_dict()) == text
    for bad in (
        None,
        [],
        {"action": "stop"},
        {**data, "action": "explode"},
        {**data, "streak": "2"},
    ):
        assert DoomLoopVerdict.from_dict(bad) is None


# --------------------------------------------------------------------------- properties

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=None), max_size=300) | st.lists(
    st.sampled_from(["no", "I am", "stuck.", "\ufeff", "\x85", " ", "\n", "😀", "\ud800"]),
    max_size=80,
).map("".join)


def reorder(value):
    """The same JSON value with every object's keys in reverse insertion order."""
    if isinstance(value, dict):
        return {key: reorder(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reorder(item) for item in value]
    return value


@settings(max_examples=300, deadline=None)
@given(
    text=ANY_TEXT,
    options=st.none()
    | st.dictionaries(
        st.sampled_from(
            ["max_period_tokens", "min_repeats", "min_covered_tokens", "max_window_tokens"]
        ),
        st.none() | st.integers(-5, 50) | st.floats() | st.text(max_size=2) | st.booleans(),
    ),
)
def test_text_detection_never_raises(text, options):
    result = detect_text_repetition(text, options)
    if result is not None:
        assert result.covered_tokens == result.repeats * result.period_tokens
    mon = monitor({"text": options or True, "ladder": {"observe": 1}})
    for _ in range(2):
        verdict = mon.record_assistant_text(text)
        assert verdict is None or verdict.detector in ("text-repetition", "text-streak")
    assert mon.warnings == []
    json.dumps(mon.get_state())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys=st.lists(JSON, min_size=1, max_size=4), rounds=st.integers(1, 4))
def test_tool_detection_never_raises_except_for_unhashable_keys(keys, rounds):
    mon = monitor({"ladder": {"observe": 1}})
    for r in range(rounds):
        mon.declare_round(r, [("tool", key) for key in keys])
        for key in keys:
            try:
                record = mon.record_tool_call("tool", key, r)
            except CanonicalizationError:
                continue
            assert record.streak >= 1
    assert all("internal error" not in w for w in mon.warnings)
    json.dumps(mon.get_state())


@settings(max_examples=200, deadline=None)
@given(
    key=st.dictionaries(st.text(max_size=5), JSON, min_size=2, max_size=6), rounds=st.integers(1, 5)
)
def test_key_order_never_changes_fingerprints_or_streaks(key, rounds):
    try:
        fingerprint_tool_call("t", key)
    except CanonicalizationError:
        return
    plain, shuffled = monitor(), monitor()
    for r in range(rounds):
        first = plain.record_tool_call("t", key, r)
        second = shuffled.record_tool_call("t", reorder(key) if r % 2 else key, r)
        assert first == second
    assert plain.get_state() == shuffled.get_state()


ROUND = st.lists(st.sampled_from([A, B, C, D]), min_size=1, max_size=4)
STEP = st.tuples(st.just("round"), ROUND) | st.tuples(
    st.just("text"), st.sampled_from(["hmm", "ok ok", ""])
)


@settings(max_examples=200, deadline=None)
@given(before=st.lists(STEP, max_size=8), after=st.lists(STEP, min_size=1, max_size=8))
def test_state_round_trip_property(before, after):
    original = monitor({"ladder": {"observe": 1, "steer": 2}})
    run_script(original, before, 1)
    restored = monitor(
        {"ladder": {"observe": 1, "steer": 2}}, json.loads(json.dumps(original.get_state()))
    )
    assert run_script(restored, after, 50) == run_script(original, after, 50)
    assert restored.warnings == []


@settings(max_examples=300, deadline=None)
@given(
    text=ANY_TEXT
    | st.lists(st.sampled_from([" ", "  ", "\t", "x", "\ufeff", "\x85"]), max_size=60).map("".join)
)
def test_normalisation_is_the_es_regex(text):
    expected = _WHITESPACE_RUN.sub(" ", text).strip(" ")
    assert normalize_text(text) == expected
    assert split_tokens(text) == (expected.split(" ") if expected else [])


STREAK_FIELDS = st.sampled_from(["fingerprint", "streak", "round_fingerprints", "call_streaks"])
TOOL_BLOB = st.dictionaries(
    STREAK_FIELDS,
    JSON
    | st.lists(st.text(max_size=3), max_size=4)
    | st.dictionaries(st.text(max_size=3), JSON, max_size=3),
)
STATE_BLOB = JSON | st.fixed_dictionaries(
    {},
    optional={
        "tools": st.dictionaries(st.sampled_from(["read", "t"]), TOOL_BLOB, max_size=2) | JSON,
        "text": st.dictionaries(STREAK_FIELDS, JSON),
        "escalations_used": JSON,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blob=STATE_BLOB)
def test_restore_never_raises_and_the_monitor_keeps_working(blob):
    mon = monitor(True, blob if blob is not None else {})
    for round_no in (1, 2):
        play_round(mon, round_no, [A, B])
        mon.record_assistant_text("same")
    assert all("internal error" not in w for w in mon.warnings)
    json.dumps(mon.get_state())
