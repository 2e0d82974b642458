"""Issue 17 item 12: a malformed script is a one-line error (exit 2) naming its JSON path.

Hypothesis builds scripts the way the hostile tests did: a valid script, then perhaps one
poison put somewhere — ``NaN``/``Infinity``, an integer literal of thousands of digits, a
number out of range, a duplicate key, an unknown key, a value of the
wrong type, a delay that would sleep for good. The JSON text is written by hand (so it
can hold what ``json.dumps`` refuses). Every script must either validate (and then a
run ends with a stop receipt) or be refused with one line naming the file and the JSON
path of the problem — never a traceback. 200 examples through the loader the CLI uses,
and a bounded number end to end through ``amos run``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amos.errors import ConfigError
from amos.providers.scripted import load_script

from .support import cli


@dataclass(frozen=True)
class Raw:
    """A JSON token written as it is (``NaN``, a huge integer…)."""

    text: str


@dataclass(frozen=True)
class Pairs:
    """A JSON object as key/value pairs (so a key can appear twice)."""

    items: tuple[tuple[str, Any], ...]


def dump(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in value.items) + "}"
    if isinstance(value, dict):
        return dump(Pairs(tuple(value.items())))
    if isinstance(value, list):
        return "[" + ",".join(dump(v) for v in value) + "]"
    return json.dumps(value)  # ensure_ascii: a lone surrogate becomes a \\udXXX escape


POISONS = [
    (Raw("NaN"), "is not JSON"), (Raw("-Infinity"), "is not JSON"), (Raw("1" * 5000), "out of range"),
    (Raw("9e999"), "out of range"),
]
"""Leaves no script may hold wherever they are, with a word the error must say."""

ODD = st.sampled_from([None, True, -1, 0, 1.5, "", "x", [], {}, [1, "a"], {"k": 1}, 10**12 + 1, "\u202e"])

CALL_NAMES = st.sampled_from(["read_file", "list_dir", "search_text", "no_such_tool", ""])


def _call() -> st.SearchStrategy[dict[str, Any]]:
    args = st.one_of(st.just({"path": "a.txt"}), st.just({"pattern": "hello"}), st.just({}),
                     st.dictionaries(st.sampled_from(["path", "depth", "x"]), ODD, max_size=2))
    return st.one_of(
        st.fixed_dictionaries({"name": CALL_NAMES, "arguments": args},
                              optional={"id": st.sampled_from(["c1", "c2", "", "id with space"])}),
        st.fixed_dictionaries({"name": CALL_NAMES,
                               "raw_arguments": st.sampled_from(['{"path": "a.txt"}', "{bad", "NaN", "", "1" * 5000])}),
    )


TURN = st.fixed_dictionaries({}, optional={
    "text": st.one_of(st.text(max_size=30), ODD),
    "tool_calls": st.lists(_call(), max_size=2),
    "finish_reason": st.sampled_from(["stop", "tool_calls", "length", "content_filter", "done"]),
    "usage": st.fixed_dictionaries({}, optional={"input_tokens": st.integers(-1, 100),
                                                 "output_tokens": st.integers(0, 100)}),
    "error": st.fixed_dictionaries({"kind": st.sampled_from(["rate_limit", "server", "auth", "bogus"])}),
    "expect": st.fixed_dictionaries({}, optional={"last_message_role": st.sampled_from(["user", "tool", "x"]),
                                                  "tools_offered": st.just(["read_file"])}),
    "delay_ms": st.sampled_from([0, 1, -1, 10**30]),
    "bogus_key": ODD,
})

SCRIPT = st.fixed_dictionaries({"version": st.sampled_from([1, 1, 1, 2, "1"]),
                                "turns": st.lists(TURN, max_size=3)},
                               optional={"model": st.sampled_from(["m", "", 5]),
                                         "on_exhausted": st.one_of(st.sampled_from(["error", "repeat_last", "x"]),
                                                                   TURN),
                                         "summaries": st.lists(st.text(max_size=5), max_size=2)})


def _paths(value: Any, where: tuple = ()) -> list[tuple]:
    found = [where]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*where, key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            found += _paths(item, (*where, n))
    return found


def _replace(value: Any, where: tuple, new: Any) -> Any:
    if not where:
        return new
    head, rest = where[0], where[1:]
    if isinstance(value, dict):
        return {k: _replace(v, rest, new) if k == head else v for k, v in value.items()}
    return [_replace(v, rest, new) if n == head else v for n, v in enumerate(value)]


@st.composite
def scripts(draw) -> tuple[str, tuple | None, str | None]:
    """``(JSON text, poison path or None, word its error must say)``."""
    script = draw(SCRIPT)
    kind = draw(st.sampled_from(["none", "none", "leaf", "duplicate"]))
    if kind == "leaf":
        where = draw(st.sampled_from([p for p in _paths(script) if p]))
        poison, word = draw(st.sampled_from(POISONS))
        return dump(_replace(script, where, poison)), where, word
    if kind == "duplicate":
        objects = [p for p in _paths(script) if isinstance(_at(script, p), dict) and _at(script, p)]
        where = draw(st.sampled_from(objects))
        obj = _at(script, where)
        key = draw(st.sampled_from(sorted(obj)))
        doubled = Pairs((*obj.items(), (key, obj[key])))
        return dump(_replace(script, where, doubled)), where, "given twice"
    return dump(script), None, None


def _at(value: Any, where: tuple) -> Any:
    for part in where:
        value = value[part]
    return value


def _resolves(text: str, path: str | None) -> bool:
    """Whether a reported JSON path names a place in the script (its last part may be a
    missing or unknown key)."""
    if path is None:
        return True
    data = json.loads(text, parse_constant=lambda _: None, parse_int=lambda s: 0)
    parts = path.split(".")
    for n, part in enumerate(parts):
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return n == len(parts) - 1
    return True


def _dotted(where: tuple) -> str | None:
    return ".".join(map(str, where)) or None


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=scripts())
def test_every_generated_script_validates_or_is_one_error_naming_its_path(tmp_path, case):
    text, poison, word = case
    path = tmp_path / "script.json"
    path.write_text(text, encoding="utf-8")
    try:
        script, _ = load_script(path)
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(f"{path}: "), message
        assert _resolves(text, exc.json_path), (exc.json_path, text[:300])
        if poison is not None:
            assert exc.json_path == _dotted(poison), (exc.json_path, poison, message)
            assert word in message, message
        return
    assert poison is None, f"accepted a script with {word!r} at {poison}: {text[:300]}"
    assert all(t.delay_ms is None or t.delay_ms <= 3_600_000 for t in script.turns)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[Path, Path]:
    ws = tmp_path_factory.mktemp("ws")
    (ws / "a.txt").write_text("hello\n")
    cfg = ws.parent / f"{ws.name}-cfg.json"
    cfg.write_text(json.dumps({"run": {"timeout_s": 5}}))  # an unbounded sleep must not hang the suite
    return ws, cfg


@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=scripts())
def test_amos_run_ends_every_generated_script_with_a_receipt_or_exit_2(workspace, case):
    ws, cfg = workspace
    text, poison, _ = case
    path = ws.parent / f"{ws.name}-script.json"
    path.write_text(text, encoding="utf-8")
    result = cli("run", "--no-save", "--config", str(cfg), "--script", str(path), "--workspace", str(ws),
                 "--json", "go")
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.stderr
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    if result.exit_code == 2:
        errors = [line for line in result.stderr.splitlines() if not line.startswith("amos: warning:")]
        assert len(errors) == 1 and str(path) in errors[0], result.stderr
        assert doc["ok"] is False
    else:
        assert poison is None, (poison, result.exit_code, text[:300])
        assert doc["stop"]["verdict"] and result.exit_code in (0, 1, 3, 4, 5, 6, 7), (result.exit_code, doc["stop"])


def test_the_failures_the_hostile_tests_found(tmp_path, workspace):
    ws, cfg = workspace
    for raw, where in [
        ('{"version":1,"turns":[{"usage":{"input_tokens":' + "1" * 5000 + '}}]}', "turns.0.usage.input_tokens"),
        ('{"version":1,"turns":[{"text":"x","delay_ms":' + "1" * 30 + '}]}', "turns.0.delay_ms"),
        ('{"version":1,"turns":[{"tool_calls":[{"name":"read_file","arguments":{"path":NaN}}]}]}',
         "turns.0.tool_calls.0.arguments.path"),
    ]:
        path = tmp_path / "s.json"
        path.write_text(raw)
        result = cli("run", "--no-save", "--config", str(cfg), "--script", str(path), "--workspace", str(ws), "go")
        assert result.exit_code == 2, (where, result.exit_code, result.stderr[-300:], repr(result.exception))
        assert result.stderr.strip() .count("\n") == 0 and f"{path}: {where}: " in result.stderr, result.stderr
