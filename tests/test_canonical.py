"""JCS canonicalization and doom-loop fingerprints (spec/doom-loop-behaviour.md §3).

The conformance vectors are read from ``shared/vectors/doom-loop-fingerprints.json``
beside the repository (or under ``$AMOS_SHARED_DIR``) when it is there, otherwise from
the copy in ``tests/data``, so the conformance tests always run; a separate test checks
that the copy still matches the shared file.
"""

from __future__ import annotations

import decimal
import hashlib
import json
import math
import os
import random
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from amos.policy.canonical import (
    MAX_CANONICALIZE_DEPTH,
    CanonicalizationError,
    canonicalize,
    fingerprint_key_material,
    fingerprint_tool_call,
)

VECTORS_NAME = "doom-loop-fingerprints.json"
BUNDLED_VECTORS = Path(__file__).resolve().parent / "data" / VECTORS_NAME


def shared_vectors_candidates() -> list[Path]:
    """Where the shared vectors may live: beside the repo, then ``$AMOS_SHARED_DIR``."""
    candidates = [Path(__file__).resolve().parents[2] / "shared" / "vectors" / VECTORS_NAME]
    shared_dir = os.environ.get("AMOS_SHARED_DIR")
    if shared_dir:
        candidates.append(Path(shared_dir) / "vectors" / VECTORS_NAME)
    return candidates


def find_shared_vectors() -> Path | None:
    return next((path for path in shared_vectors_candidates() if path.is_file()), None)


SHARED_VECTORS = find_shared_vectors()
VECTORS_PATH = SHARED_VECTORS or BUNDLED_VECTORS
VECTORS: dict[str, Any] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))


def nested_lists(levels: int, leaf: object) -> object:
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def nested_dicts(levels: int, leaf: object) -> object:
    value = leaf
    for _ in range(levels):
        value = {"k": value}
    return value


def circular_list() -> list[object]:
    loop: list[object] = [1]
    loop.append(loop)
    return loop


def circular_dict() -> dict[str, object]:
    loop: dict[str, object] = {"a": 1}
    loop["self"] = loop
    return loop


def indirect_cycle() -> dict[str, object]:
    outer: dict[str, object] = {}
    outer["inner"] = [{"back": outer}]
    return outer


# Python inputs for each `rejected` class of the vectors file (which names the classes
# but, being JSON, cannot hold the values).
REJECTED_INPUTS: dict[str, list[object]] = {
    "bigint": [2**1024, -(2**1024), 10**400, {"n": [2**1024]}],
    "NaN / Infinity": [math.nan, math.inf, -math.inf, [1, math.nan], {"x": -math.inf}],
    "circular reference": [circular_list(), circular_dict(), indirect_cycle()],
    "nesting > 64 levels": [
        nested_lists(MAX_CANONICALIZE_DEPTH + 1, 0),
        nested_dicts(MAX_CANONICALIZE_DEPTH + 1, "leaf"),
        nested_lists(MAX_CANONICALIZE_DEPTH + 1, []),
        {"a": nested_lists(MAX_CANONICALIZE_DEPTH, None)},
        nested_lists(100_000, 0),
    ],
}


def vector_id(vector: dict[str, Any]) -> str:
    return vector["name"]


# -- conformance vectors ----------------------------------------------------------------


def test_shared_vectors_match_bundled_copy() -> None:
    if SHARED_VECTORS is None:
        looked = ", ".join(str(path) for path in shared_vectors_candidates())
        pytest.skip(
            f"shared conformance vectors not found (looked in {looked}; set "
            f"AMOS_SHARED_DIR to the shared/ directory); the conformance tests used "
            f"the bundled copy {BUNDLED_VECTORS}"
        )
    bundled = json.loads(BUNDLED_VECTORS.read_text(encoding="utf-8"))
    assert bundled == VECTORS, f"{BUNDLED_VECTORS} is stale: copy {SHARED_VECTORS} over it"


@pytest.mark.parametrize("vector", VECTORS["toolCallVectors"], ids=vector_id)
def test_tool_call_vector(vector: dict[str, Any]) -> None:
    assert canonicalize(vector["keyMaterial"]) == vector["jcs"]
    assert fingerprint_tool_call(vector["toolName"], vector["keyMaterial"]) == vector["fingerprint"]
    # The vector is self-consistent: its fingerprint is the hash of its own jcs.
    material = f"{vector['toolName']}\n{vector['jcs']}".encode()
    assert hashlib.sha256(material).hexdigest() == vector["fingerprint"]


@pytest.mark.parametrize("vector", VECTORS["keyMaterialVectors"], ids=vector_id)
def test_key_material_vector(vector: dict[str, Any]) -> None:
    assert canonicalize(vector["keyMaterial"]) == vector["jcs"]
    assert fingerprint_key_material(vector["keyMaterial"]) == vector["fingerprint"]
    assert hashlib.sha256(vector["jcs"].encode()).hexdigest() == vector["fingerprint"]


@pytest.mark.parametrize("rejected", VECTORS["rejected"], ids=vector_id)
def test_rejected_class_raises(rejected: dict[str, Any]) -> None:
    inputs = REJECTED_INPUTS.get(rejected["name"])
    assert inputs, f"no Python input for rejected class {rejected['name']!r}: add one"
    for value in inputs:
        with pytest.raises(CanonicalizationError):
            canonicalize(value)
        with pytest.raises(CanonicalizationError):
            fingerprint_key_material(value)
        with pytest.raises(CanonicalizationError):
            fingerprint_tool_call("tool", value)


def test_vector_names_are_unique() -> None:
    for group in ("toolCallVectors", "keyMaterialVectors", "rejected"):
        names = [vector["name"] for vector in VECTORS[group]]
        assert len(names) == len(set(names)), group


def test_negative_zero_vector_holds_for_a_real_negative_zero() -> None:
    # JSON cannot carry -0, so the vector's keyMaterial is a plain 0; check -0.0 itself.
    (vector,) = [v for v in VECTORS["toolCallVectors"] if "negative zero" in v["name"]]
    key = {"value": -0.0}
    assert canonicalize(key) == vector["jcs"]
    assert fingerprint_tool_call(vector["toolName"], key) == vector["fingerprint"]


def test_nfc_and_nfd_differ() -> None:
    (vector,) = [v for v in VECTORS["toolCallVectors"] if "normalization" in v["name"]]
    assert vector["keyMaterial"]["s"] == "e\u0301"  # the vector holds the NFD spelling
    nfc = {"s": "\u00e9"}
    assert fingerprint_tool_call(vector["toolName"], nfc) != vector["fingerprint"]


# -- numbers (spec §3 "Numbers") --------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (-0.0, "0"),
        (0.0, "0"),
        (5.0, "5"),
        (-5, "-5"),
        (1e21, "1e+21"),
        (-1e21, "-1e+21"),
        (1e20, "100000000000000000000"),
        (999999999999999900000.0, "999999999999999900000"),
        (1.2345678901234568e20, "123456789012345680000"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (0.1, "0.1"),
        (123.456, "123.456"),
        (1e16, "10000000000000000"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (2**53, "9007199254740992"),
        (2**53 + 1, "9007199254740992"),
        (-(2**53) - 1, "-9007199254740992"),
        (2**53 + 3, "9007199254740996"),
        (10**21, "1e+21"),
        (12345678901234567890123, "1.2345678901234568e+22"),
        (int(1.7976931348623157e308), "1.7976931348623157e+308"),
    ],
)
def test_numbers_format_as_ecmascript(value: float, expected: str) -> None:
    assert canonicalize(value) == expected


def test_booleans_are_not_numbers() -> None:
    assert canonicalize([True, False, None, 1, 0]) == "[true,false,null,1,0]"


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_agree_with_rfc8785(value: float) -> None:
    assert canonicalize(value) == rfc8785.dumps(value).decode()


@given(st.integers())
def test_ints_are_the_double_javascript_holds(value: int) -> None:
    try:
        as_double = float(value)
    except OverflowError:
        with pytest.raises(CanonicalizationError):
            canonicalize(value)
    else:
        assert canonicalize(value) == canonicalize(as_double)


# -- strings (spec §3 "Strings") --------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('say "hi"\\', r'"say \"hi\"\\"'),
        ("\b\f\n\r\t", r'"\b\f\n\r\t"'),
        ("\x00\x01\x0b\x1f", r'"\u0000\u0001\u000b\u001f"'),
        ("/\x7f\u2028\u2029", '"/\x7f\u2028\u2029"'),
        ("\ud800", r'"\ud800"'),
        ("\udfff", r'"\udfff"'),
        ("a\udc00\ud800b", r'"a\udc00\ud800b"'),
        ("\ud83d\ude00", '"\U0001f600"'),  # a pair held as two code points
        ("\U0001f600", '"\U0001f600"'),
        ("caf\u00e9 \u00a0", '"caf\u00e9 \u00a0"'),
    ],
)
def test_strings_escape_as_json_stringify(value: str, expected: str) -> None:
    assert canonicalize(value) == expected


def test_keys_sort_by_utf16_code_units() -> None:
    # U+1F600 is D83D DE00 in UTF-16, so it sorts before U+FF61 (code points disagree).
    value = {"\uff61": 1, "\U0001f600": 2, "b": 3, "a": 4, "\u00e9": 5, "": 6}
    assert canonicalize(value) == '{"":6,"a":4,"b":3,"\u00e9":5,"\U0001f600":2,"\uff61":1}'


def test_keys_are_escaped() -> None:
    assert canonicalize({"a\nb": 1, "\ud800": 2}) == '{"a\\nb":1,"\\ud800":2}'


def test_text_is_hashed_with_its_quotes() -> None:
    expected = hashlib.sha256(b'"I am stuck."').hexdigest()
    assert fingerprint_key_material("I am stuck.") == expected


def test_lone_surrogate_in_tool_name_hashes_as_replacement_character() -> None:
    expected = hashlib.sha256("a\ufffdb\n{}".encode()).hexdigest()
    assert fingerprint_tool_call("a\ud800b", {}) == expected


def test_tool_name_must_be_a_string() -> None:
    with pytest.raises(TypeError):
        fingerprint_tool_call(None, {})  # type: ignore[arg-type]


# -- structure, depth, types (spec §3 "Errors") ------------------------------------------


def test_depth_limit_counts_from_the_root() -> None:
    assert MAX_CANONICALIZE_DEPTH == 64
    # 64 arrays around a leaf: the leaf is at depth 64.
    assert canonicalize(nested_lists(64, 1)) == "[" * 64 + "1" + "]" * 64
    # 65 arrays, the innermost empty: that array is at depth 64 and has no children.
    assert canonicalize(nested_lists(64, [])) == "[" * 65 + "]" * 65
    assert canonicalize(nested_dicts(64, "x")).count("{") == 64
    # One level more: a leaf, or an empty array, at depth 65.
    for value in (nested_lists(65, 1), nested_lists(65, []), nested_dicts(65, None)):
        with pytest.raises(CanonicalizationError, match="deeper than 64"):
            canonicalize(value)


def test_shared_references_are_not_cycles() -> None:
    shared = {"x": [1]}
    assert canonicalize([shared, shared, {"y": shared}]) == (
        '[{"x":[1]},{"x":[1]},{"y":{"x":[1]}}]'
    )


def test_arrays_keep_order_and_nulls() -> None:
    assert canonicalize(["b", None, "a", {}, []]) == '["b",null,"a",{},[]]'


@pytest.mark.parametrize(
    "value",
    [
        (1, 2),
        {"a": (1,)},
        b"bytes",
        bytearray(b"x"),
        {1, 2},
        frozenset(),
        object(),
        decimal.Decimal("1.5"),
        1j,
        {1: "int key"},
        {None: "null key"},
        {("a",): "tuple key"},
        [print],
    ],
    ids=repr,
)
def test_non_json_values_are_rejected(value: object) -> None:
    with pytest.raises(CanonicalizationError):
        canonicalize(value)


def test_keys_equal_as_utf16_are_rejected() -> None:
    with pytest.raises(CanonicalizationError, match="same UTF-16"):
        canonicalize({"\ud83d\ude00": 1, "\U0001f600": 2})


def test_subclasses_of_json_types_are_json() -> None:
    class Name(str):
        pass

    class Args(dict):
        pass

    assert canonicalize(Args({Name("b"): 1, "a": [True]})) == '{"a":[true],"b":1}'


# -- properties -------------------------------------------------------------------------

ALL_CHARACTERS = st.characters(exclude_categories=())  # surrogates included
KEYS = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(ALL_CHARACTERS, max_size=12)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=30,
)


def as_javascript(value: Any) -> Any:
    """The value JSON.parse(JCS(value)) gives back, in Python terms."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return value.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    if isinstance(value, list):
        return [as_javascript(item) for item in value]
    return {as_javascript(key): as_javascript(item) for key, item in value.items()}


def shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: shuffled(item, rng) for key, item in items}
    return value


@given(JSON_VALUES, st.randoms(use_true_random=False), st.text(max_size=8))
def test_key_order_never_changes_a_fingerprint(value: Any, rng: random.Random, name: str) -> None:
    reordered = shuffled(value, rng)
    assert canonicalize(reordered) == canonicalize(value)
    assert fingerprint_key_material(reordered) == fingerprint_key_material(value)
    assert fingerprint_tool_call(name, reordered) == fingerprint_tool_call(name, value)


@given(JSON_VALUES)
def test_output_is_json_that_round_trips(value: Any) -> None:
    text = canonicalize(value)
    text.encode("utf-8")  # never holds a lone surrogate
    parsed = json.loads(text)
    assert as_javascript(parsed) == as_javascript(value)
    assert canonicalize(parsed) == text  # idempotent


def _self_referencing(container: list[Any] | dict[str, Any]) -> Any:
    if isinstance(container, list):
        container.append(container)
    else:
        container["self"] = container
    return container


ODD_LEAVES = (
    JSON_LEAVES
    | st.floats()
    | st.sampled_from([2**1024, -(10**400), math.nan, math.inf, -math.inf])
    | st.binary(max_size=4)
    | st.builds(object)
    | st.decimals(allow_nan=True)
    | st.complex_numbers(max_magnitude=10)
    | st.sets(st.integers(), max_size=3)
    | st.just(print)
)
ODD_VALUES = st.recursive(
    ODD_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(KEYS, inner, max_size=4)
        | st.dictionaries(st.integers() | st.none() | st.text(ALL_CHARACTERS), inner, max_size=3)
        | st.builds(_self_referencing, st.lists(inner, max_size=2))
        | st.builds(_self_referencing, st.dictionaries(KEYS, inner, max_size=2))
        | st.builds(nested_lists, st.integers(0, 200), inner)
        | st.builds(nested_dicts, st.integers(0, 200), inner)
    ),
    max_leaves=20,
)


@settings(deadline=None)
@given(ODD_VALUES)
def test_only_canonicalization_errors_escape(value: Any) -> None:
    try:
        text = canonicalize(value)
    except CanonicalizationError:
        with pytest.raises(CanonicalizationError):
            fingerprint_tool_call("tool", value)
        return
    text.encode("utf-8")
    json.loads(text)
    assert fingerprint_key_material(value) == hashlib.sha256(text.encode()).hexdigest()
