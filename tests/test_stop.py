"""The verdict precedence table of spec/stop-receipts.md, row by row."""

from __future__ import annotations

import pytest

from amos.policy.stop import EXIT_CODES, StopFacts, decide_verdict, phase_for

CONFIGURED_OK = StopFacts(completion_configured=True, completion_confirmed=True)
CONFIGURED_NO = StopFacts(completion_configured=True, completion_confirmed=False)


@pytest.mark.parametrize("cause,facts,verdict", [
    ("tool_error", StopFacts(), "FAILED"),
    ("provider_error", CONFIGURED_OK, "FAILED"),
    ("refusal", StopFacts(), "FAILED"),
    ("approval_required", StopFacts(approval_routed=True), "WAITING"),
    ("approval_required", StopFacts(approval_routed=False), "WAITING_UNROUTED"),
    ("no_progress", StopFacts(), "STUCK"),
    ("timeout", StopFacts(), "STUCK"),
    ("timeout", StopFacts(effect_succeeded=True), "BOUNDED_STOP"),
    ("timeout", StopFacts(progress_changed=True), "BOUNDED_STOP"),
    ("step_limit", CONFIGURED_OK, "BOUNDED_STOP"),  # a limit with a verifier is never verified
    ("token_budget", StopFacts(), "BOUNDED_STOP"),
    ("user_abort", StopFacts(), "BOUNDED_STOP"),
    ("doom_loop", StopFacts(), "BOUNDED_STOP"),
    ("output_limit", StopFacts(), "BOUNDED_STOP"),
    ("policy_stop", StopFacts(reason="repeated_action"), "BOUNDED_STOP"),
    ("policy_stop", StopFacts(reason="uncertain_effect"), "UNCERTAIN"),
    ("answer", CONFIGURED_OK, "VERIFIED_COMPLETE"),
    ("answer", CONFIGURED_NO, "FALSE_COMPLETE"),
    ("answer", StopFacts(completion_configured=True), "FALSE_COMPLETE"),
    ("recovery_exhausted", StopFacts(), "FALSE_COMPLETE"),
    ("answer", StopFacts(), "ANSWERED"),
    ("checker_error", CONFIGURED_OK, "UNCERTAIN"),
    ("answer", StopFacts(completion_configured=True, completion_confirmed=False, reason="completed"), "UNCERTAIN"),
    ("answer", StopFacts(completion_configured=True, completion_confirmed=True, reason="check_failed"), "UNCERTAIN"),
    ("policy_stop", StopFacts(reason="tracking_bound"), "BOUNDED_STOP"),
    ("policy_stop", StopFacts(reason="state_changed"), "BOUNDED_STOP"),
    (None, StopFacts(), "UNCERTAIN"),
])
def test_verdict_table(cause, facts, verdict):
    assert decide_verdict(cause, facts) == verdict


def test_every_verdict_has_an_exit_code_and_a_phase():
    assert set(EXIT_CODES) == {"VERIFIED_COMPLETE", "ANSWERED", "FAILED", "FALSE_COMPLETE", "WAITING",
                               "WAITING_UNROUTED", "BOUNDED_STOP", "STUCK", "UNCERTAIN"}
    assert EXIT_CODES["WAITING"] == 4 and EXIT_CODES["UNCERTAIN"] == 8
    assert phase_for("WAITING") == "input-needed"
    assert phase_for("ANSWERED") == "complete"
    assert phase_for("FALSE_COMPLETE") == "stopped"
