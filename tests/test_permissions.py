"""Permission rules: forms, precedence, compound commands, paths and layers (issue 19)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from amos.config import AmosConfig, format_validation_error, load_config, trust_project
from amos.permissions import (
    Decision,
    RuleError,
    RuleSet,
    merge_rules,
    normalise_call_path,
    parse_rule,
    rules_from_layers,
    split_command,
    suggest_rule,
)

WS = Path("/work/project")


def rules(**kinds: list[str]) -> RuleSet:
    return merge_rules([("user config", kinds)])


def decide(ruleset: RuleSet, tool: str, **arguments: object) -> tuple:
    return tuple(ruleset.decide(tool, arguments, workspace=WS, follow_symlinks=False))


def command(ruleset: RuleSet, text: str) -> str | None:
    return ruleset.decide("run_command", {"command": text}, workspace=WS).decision


# --------------------------------------------------------------------------- forms


@pytest.mark.parametrize(
    ("text", "kind", "tool"),
    [
        ("read_file", "tool", "read_file"),
        ("mcp__git__*", "tool", "mcp__git__*"),
        ("run_command(git status)", "command", "run_command"),
        ("run_command(python -m pytest:*)", "command", "run_command"),
        ("write_file(docs/**)", "path", "write_file"),
        ("  edit_file(src/*.py)  ", "path", "edit_file"),
    ],
)
def test_accepted_forms(text: str, kind: str, tool: str) -> None:
    rule = parse_rule(text)
    assert (rule.kind, rule.tool, rule.text) == (kind, tool, text.strip())


def test_command_patterns_are_words() -> None:
    assert parse_rule("run_command(git commit -m 'a b')").words == ("git", "commit", "-m", "a b")
    prefix = parse_rule("run_command(python -m pytest:*)")
    assert prefix.prefix and prefix.words == ("python", "-m", "pytest")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "the rule is empty"),
        ("run_command(", "unbalanced parentheses"),
        ("run_command()", "the command pattern is empty"),
        ("run_command(:*)", "the command pattern is empty"),
        ("run_command(git status && rm x)", "one simple command"),
        ("run_command(echo $(id))", "one simple command"),
        ("run_command(ls > out)", "one simple command"),
        ("run_command(npm run *)", "write run_command(npm run:*)"),
        ("write_file(../secrets)", "'..' is not accepted"),
        ("write_file(~/x)", "relative to the workspace"),
        ("write_file(!docs)", "negated globs"),
        ("write_file()", "the path glob is empty"),
        ("mcp__git__status(x)", "only run_command and"),
        ("read file", "a tool name may hold only"),
    ],
)
def test_invalid_rules_say_what_is_wrong_and_what_is_accepted(text: str, problem: str) -> None:
    with pytest.raises(RuleError) as info:
        parse_rule(text)
    message = str(info.value)
    assert message.startswith(f"invalid permission rule {text!r}: ")
    assert problem in info.value.problem
    assert "accepted: TOOL or a tool-name glob" in message and "\n" not in message


def test_config_rules_are_validated_with_their_json_path() -> None:
    with pytest.raises(ValidationError) as info:
        AmosConfig.model_validate({"permissions": {"allow": ["read_file", "run_command(a && b)"]}})
    message = str(format_validation_error(info.value, "amos.json"))
    assert message.startswith("amos.json: permissions.allow.1: invalid rule: a command pattern")
    assert "accepted: TOOL" in message and '(got "run_command(a && b)")' in message
    config = AmosConfig.model_validate({"permissions": {"deny": [" run_command(rm:*) "]}})
    assert config.permissions.deny == ["run_command(rm:*)"]


# --------------------------------------------------------------------------- precedence


def test_deny_beats_ask_beats_allow() -> None:
    everything = rules(allow=["run_command(git push:*)"], ask=["run_command(git push:*)"],
                       deny=["run_command(git push --force:*)"])
    assert decide(everything, "run_command", command="git push --force origin") == (
        "deny", "run_command(git push --force:*)", "user config")
    assert decide(everything, "run_command", command="git push origin")[0] == "ask"
    assert decide(rules(allow=["run_command(git push:*)"]), "run_command",
                  command="git push origin")[0] == "allow"


def test_a_deny_in_any_layer_wins_and_names_its_source() -> None:
    merged = merge_rules([
        ("user config", {"allow": ["write_file"]}),
        ("./amos.json", {"deny": ["write_file(secrets/**)"]}),
        ("--allow", {"allow": ["write_file(secrets/ok.txt)"]}),
    ])
    assert decide(merged, "write_file", path="secrets/ok.txt") == (
        "deny", "write_file(secrets/**)", "./amos.json")
    assert decide(merged, "write_file", path="docs/a.md") == ("allow", "write_file", "user config")


def test_no_rule_means_no_decision() -> None:
    ruleset = rules(allow=["run_command(git status)"])
    assert decide(ruleset, "write_file", path="a.txt") == (None, None, None)
    assert decide(ruleset, "run_command", command="git log") == (None, None, None)
    assert ruleset.decide("run_command", {"command": "git log"}, workspace=WS) == Decision(None)


# --------------------------------------------------------------------------- commands


def test_exact_and_prefix_command_patterns() -> None:
    ruleset = rules(allow=["run_command(git status)", "run_command(python -m pytest:*)"])
    assert command(ruleset, "git status") == "allow"
    assert command(ruleset, "  git   'status' ") == "allow"  # words, not characters
    assert command(ruleset, "git status -s") is None  # exact means exact
    assert command(ruleset, "python -m pytest") == "allow"
    assert command(ruleset, "python -m pytest -q tests/x.py") == "allow"
    assert command(ruleset, "python -m pytestx") is None  # a prefix of words, not of text
    assert command(ruleset, "FOO=1 git status") is None  # an assignment changes the command


@pytest.mark.parametrize(
    "line",
    [
        "git status && rm -rf build",
        "git status || rm -rf build",
        "git status; rm -rf build",
        "git status | rm -rf build",
        "git status\nrm -rf build",
        "git status & rm -rf build",
        "(cd sub; rm -rf build)",
        "{ git status; rm -rf build; }",
        "git status $(rm -rf build)",
        "git status `rm -rf build`",
        "diff <(rm -rf build) x",
        "if git status; then rm -rf build; fi",
        "for f in a; do rm -rf $f; done",
        "x=$(rm -rf build)",
    ],
)
def test_every_part_of_a_compound_command_must_be_allowed(line: str) -> None:
    allowed = rules(allow=["run_command(git status)", "run_command(cd sub)", "run_command(diff:*)"])
    assert command(allowed, line) is None
    denied = rules(allow=["run_command(git status)"], deny=["run_command(rm:*)"])
    assert decide(denied, "run_command", command=line)[:2] == ("deny", "run_command(rm:*)")


def test_a_compound_command_allowed_part_by_part_names_every_rule() -> None:
    ruleset = merge_rules([("user config", {"allow": ["run_command(git status)"]}),
                           ("--allow", {"allow": ["run_command(python -m pytest:*)"]})])
    assert decide(ruleset, "run_command", command="git status && python -m pytest -q | tail") == (
        None, None, None)  # tail is not allowed
    assert decide(ruleset, "run_command", command="git status && python -m pytest -q") == (
        "allow", "run_command(git status); run_command(python -m pytest:*)", "user config; --allow")


def test_output_redirection_to_a_file_is_not_covered_by_an_allow_rule() -> None:
    ruleset = rules(allow=["run_command(git status)"])
    assert command(ruleset, "git status > status.txt") is None
    assert command(ruleset, "git status >> ~/.bashrc") is None
    assert command(ruleset, "git status 2>/dev/null") == "allow"
    assert command(ruleset, "git status 2>&1") == "allow"


def test_deny_rules_look_past_wrappers() -> None:
    ruleset = rules(deny=["run_command(rm:*)"])
    for line in ("env rm -rf x", "sudo rm x", "nice -n 5 rm x", "timeout 5 rm x", "A=1 rm x",
                 "find . -print0 | xargs -0 rm"):
        assert command(ruleset, line) == "deny", line


def test_the_script_of_sh_c_is_split_too() -> None:
    ruleset = rules(allow=["run_command(bash -c:*)", "run_command(git status)"],
                    deny=["run_command(rm:*)"])
    assert command(ruleset, "bash -c 'git status'") == "allow"
    assert command(ruleset, "bash -c 'git status; make'") is None  # make is not allowed
    for line in ('bash -c "rm -rf x"', "sh -c 'git status; rm x'", "env A=1 bash -lc 'rm x'",
                 "bash -c '[[ -f x ]] && rm y'", "sh -c \"sh -c 'rm x'\""):
        assert command(ruleset, line) == "deny", line


def test_an_unparsable_command_is_never_allowed_but_still_denied() -> None:
    assert split_command("[[ -f x ]] && git status").parsed is False
    ruleset = rules(allow=["run_command(git status)"], deny=["run_command(rm:*)"])
    decision = ruleset.decide("run_command", {"command": "[[ -f x ]] && git status"}, workspace=WS)
    assert decision.decision == "ask" and decision.rule is None
    assert "could not be parsed" in decision.reason
    assert command(ruleset, "case x in a) rm -rf y;; esac") == "deny"
    assert command(ruleset, "time rm -rf y") == "deny"
    assert command(ruleset, "echo $((1+2))") is None  # no rule speaks about any part


def test_a_heredoc_that_runs_a_substitution_is_not_allowed() -> None:
    ruleset = rules(allow=["run_command(cat)"])
    assert command(ruleset, "cat <<EOF\nplain\nEOF") == "allow"
    decision = ruleset.decide("run_command", {"command": "cat <<EOF\n$(rm -rf x)\nEOF"}, workspace=WS)
    assert decision.decision == "ask"


def test_a_bare_tool_rule_covers_every_command() -> None:
    ruleset = rules(allow=["run_command"], deny=["run_command(git push:*)"])
    assert command(ruleset, "make && ./run.sh | tee log") == "allow"
    assert command(ruleset, "[[ -f x ]]") == "allow"
    assert command(ruleset, "git push") == "deny"


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("docs/a.md", "docs/a.md"),
        ("./docs//b/../a.md", "docs/a.md"),
        (str(WS / "docs" / "a.md"), "docs/a.md"),
        (".", "."),
        ("../other/docs/a.md", None),
        ("docs/../../x", None),
        ("/etc/passwd", None),
        ("", None),
    ],
)
def test_paths_are_normalised_to_the_workspace(path: str, expected: str | None) -> None:
    assert normalise_call_path(path, WS) == expected


def test_path_globs_are_gitignore_style() -> None:
    ruleset = rules(allow=["write_file(docs/**)", "edit_file(src/*.py)", "read_file(*.md)"])
    assert decide(ruleset, "write_file", path="docs/a/b/c.md")[0] == "allow"
    assert decide(ruleset, "write_file", path="src/docs/a.md")[0] is None  # anchored
    assert decide(ruleset, "edit_file", path="src/a.py")[0] == "allow"
    assert decide(ruleset, "edit_file", path="src/sub/a.py")[0] is None  # * stays in a folder
    assert decide(ruleset, "read_file", path="deep/down/README.md")[0] == "allow"  # no slash: any depth
    assert decide(ruleset, "write_file", path="./docs/../docs/a.md")[0] == "allow"
    assert decide(ruleset, "write_file", path=str(WS / "docs/x.md"))[0] == "allow"


def test_a_path_outside_the_workspace_never_matches_an_allow_rule() -> None:
    ruleset = rules(allow=["write_file(**)", "write_file(docs/**)"])
    for path in ("../docs/a.md", "docs/../../docs/a.md", "/etc/docs/a.md", "~/docs/a.md"):
        assert decide(ruleset, "write_file", path=path)[0] is None, path
    assert decide(ruleset, "write_file", path=5)[0] is None


def test_a_symlink_out_of_an_allowed_folder_is_not_allowed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "src").mkdir()
    (ws / "docs" / "link").symlink_to(ws / "src")
    ruleset = rules(allow=["write_file(docs/**)"], deny=["write_file(src/**)"])
    assert ruleset.decide("write_file", {"path": "docs/a.md"}, workspace=ws).decision == "allow"
    decision = ruleset.decide("write_file", {"path": "docs/link/main.py"}, workspace=ws)
    assert decision.decision == "deny"  # the resolved path is src/main.py
    lexical = ruleset.decide("write_file", {"path": "docs/link/main.py"}, workspace=ws,
                             follow_symlinks=False)
    assert lexical.decision == "allow"


def test_tool_name_globs() -> None:
    ruleset = rules(allow=["mcp__git__*"], deny=["mcp__git__push"])
    assert decide(ruleset, "mcp__git__status")[0] == "allow"
    assert decide(ruleset, "mcp__git__push") == ("deny", "mcp__git__push", "user config")
    assert decide(ruleset, "mcp__github__status")[0] is None


# --------------------------------------------------------------------------- layers


def test_rules_add_up_across_config_layers_with_their_sources(tmp_path: Path, amos_home: Path) -> None:
    user = amos_home / "config" / "config.json"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"permissions": {"allow": ["run_command(git status)"]}}))
    project = tmp_path / "proj"
    project.mkdir()
    (project / "amos.json").write_text(json.dumps({"permissions": {"deny": ["run_command(rm:*)"],
                                                                   "allow": ["read_file"]}}))
    untrusted = load_config(cwd=project)
    assert [r["source"] for r in rules_from_layers(untrusted.layers).listing()] == [str(user)]
    trust_project(project)
    loaded = load_config(cwd=project, overrides={"permissions": {"allow": ["write_file(docs/**)"]}})
    listing = rules_from_layers(loaded.layers).listing()
    assert listing == [
        {"kind": "deny", "rule": "run_command(rm:*)", "source": str(project / "amos.json")},
        {"kind": "allow", "rule": "run_command(git status)", "source": str(user)},
        {"kind": "allow", "rule": "read_file", "source": str(project / "amos.json")},
        {"kind": "allow", "rule": "write_file(docs/**)", "source": "command line"},
    ]


def test_session_grants_and_duplicates() -> None:
    ruleset = rules(allow=["read_file"]).with_rule("allow", "run_command(make:*)", "session")
    assert decide(ruleset, "run_command", command="make test") == (
        "allow", "run_command(make:*)", "session")
    again = ruleset.with_rule("allow", "read_file", "--allow")
    assert len(again) == 2 and again.listing()[0]["source"] == "user config"
    with pytest.raises(RuleError):
        ruleset.with_rule("deny", "run_command(", "--deny")
    with pytest.raises(ValueError, match="accepted: allow, ask, deny"):
        ruleset.with_rule("maybe", "read_file", "x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("run_command", {"command": "python -m pytest -q"}, "run_command(python -m pytest:*)"),
        ("run_command", {"command": "git status --short"}, "run_command(git status:*)"),
        ("run_command", {"command": "ls -la"}, "run_command(ls:*)"),
        ("run_command", {"command": "git status && rm x"}, None),
        ("run_command", {"command": "echo x > f"}, None),
        ("run_command", {"command": "$CMD x"}, None),
        ("write_file", {"path": "./docs/a[1].md"}, "write_file(/docs/a\\[1\\].md)"),
        ("write_file", {"path": ".gitignore"}, "write_file(/.gitignore)"),
        ("write_file", {"path": "/etc/passwd"}, None),
        ("mcp__git__status", {}, "mcp__git__status"),
    ],
)
def test_suggested_session_rules(tool: str, arguments: dict, expected: str | None) -> None:
    suggestion = suggest_rule(tool, arguments)
    assert suggestion == expected
    if suggestion is not None:
        ruleset = rules(allow=[suggestion])
        assert ruleset.decide(tool, arguments, workspace=WS).decision == "allow"
