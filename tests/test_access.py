"""The permission decision of one call, as a pure function (amos/permissions/access.py, issue 19)."""

from __future__ import annotations

from pathlib import Path

from amos.permissions import RuleSet
from amos.permissions.access import SandboxState, decide_access

WS = Path("/work/ws")
BOX = SandboxState("workspace-write", available=True, network=False)
NONE = SandboxState("danger-full-access", available=False)
BROKEN = SandboxState("workspace-write", available=False)


def rules(**kinds: list[str]) -> RuleSet:
    ruleset = RuleSet()
    for kind, items in kinds.items():
        for text in items:
            ruleset = ruleset.with_rule(kind, text, "test")
    return ruleset


def decide(tool="run_command", args=None, *, effect="unknown", configured="ask", source="default",
           ruleset=None, sandbox=BOX, **kw):
    return decide_access(tool, args if args is not None else {"command": "ls"}, effect=effect,
                         configured=configured, configured_source=source, rules=ruleset or RuleSet(),
                         workspace=WS, sandbox=sandbox, **kw)


def test_a_working_sandbox_lets_commands_run_unasked_and_nothing_else():
    assert decide().permission == "allow" and decide().allowed_by == "sandbox (workspace-write)"
    assert decide(sandbox=NONE).permission == "ask"
    assert decide(sandbox=BROKEN).permission == "ask"  # never silently unsandboxed
    write = decide("write_file", {"path": "a"}, effect="write")
    assert write.permission == "ask"  # the sandbox changes what commands do, not what a person reviews


def test_an_explicit_ask_for_run_command_keeps_asking():
    assert decide(explicit_command_ask=True).permission == "ask"


def test_deny_beats_ask_beats_allow():
    both = rules(allow=["run_command(ls:*)"], ask=["run_command(ls)"])
    assert decide(sandbox=NONE, ruleset=both).permission == "ask"
    all3 = rules(allow=["run_command(ls:*)"], ask=["run_command(ls)"], deny=["run_command"])
    denied = decide(ruleset=all3)
    assert denied.permission == "deny" and "run_command (test)" in denied.reason
    allowed = decide(sandbox=NONE, ruleset=rules(allow=["run_command(ls:*)"]))
    assert allowed.permission == "allow" and allowed.allowed_by == "rule run_command(ls:*) (test)"


def test_a_configured_deny_is_never_overridden_by_an_allow_rule():
    access = decide("write_file", {"path": "a"}, effect="write", configured="deny",
                    source="tools.permissions.write_file", ruleset=rules(allow=["write_file"]))
    assert access.permission == "deny" and "tools.permissions.write_file" in access.reason


def test_an_escalation_always_asks_even_with_an_allow_rule():
    access = decide(ruleset=rules(allow=["run_command"]), escalation=True)
    assert access.permission == "ask" and access.escalation and access.allowed_by is None
    assert decide(ruleset=rules(deny=["run_command(ls)"]), escalation=True).permission == "deny"


def test_plan_mode_refuses_changes_but_lets_commands_run_read_only():
    plan = SandboxState("read-only", available=True, network=False)
    assert decide("write_file", {"path": "a"}, effect="write", sandbox=plan, plan=True,
                  ruleset=rules(allow=["write_file"])).permission == "deny"
    assert decide("mcp__x__y", {}, effect="unknown", sandbox=plan, plan=True).source == "plan mode"
    assert decide("read_file", {"path": "a"}, effect="read", configured="allow", sandbox=plan,
                  plan=True).permission == "allow"
    assert decide(sandbox=plan, plan=True).permission == "allow"
    assert decide(sandbox=plan, plan=True, escalation=True).permission == "deny"


def test_an_unknown_tool_keeps_its_deny():
    assert decide("nope", {}, configured="deny", source="unknown tool").permission == "deny"
