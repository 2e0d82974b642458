"""RFC 8785 (JCS) canonical JSON and doom-loop fingerprints.

Implements spec/doom-loop-behaviour.md §3 ("Fingerprints"): key material is serialized
exactly as ECMAScript ``JSON.stringify`` would serialize the equivalent JavaScript
value, with object keys sorted by UTF-16 code units (RFC 8785), and hashed with SHA-256
over its UTF-8 bytes. The Python, TypeScript and Go ports must produce byte-identical
canonical strings; the conformance contract is ``shared/vectors/doom-loop-fingerprints.json``.

The ``rfc8785`` package is not used: it rejects lone surrogates (the reference escapes
them as ``\\udxxx``) and integers beyond ±(2**53 - 1) (the reference rounds them to the
nearest double, spec §3 "Integers are doubles").

Pure code: no I/O and no import-time side effects.
"""

from __future__ import annotations

import hashlib
import math
import re
from json import dumps as _json_dumps

__all__ = [
    "MAX_CANONICALIZE_DEPTH",
    "CanonicalizationError",
    "canonicalize",
    "fingerprint_key_material",
    "fingerprint_tool_call",
]

MAX_CANONICALIZE_DEPTH = 64
"""Deepest accepted nesting level; the root value is depth 0 (spec §3 "Errors")."""

_MAX_EXACT_INT = 2**53
"""Integers in [-2**53, 2**53] are exactly representable as doubles."""


class CanonicalizationError(ValueError):
    """Key material that JCS cannot represent (spec §3 "Errors").

    Raised for non-finite numbers, integers too large for a double (the reference's
    bigint), cycles, nesting deeper than :data:`MAX_CANONICALIZE_DEPTH`, dict keys that
    are not strings, and values that are not JSON data (tuples, bytes, sets, other
    objects). The engine catches it and falls back to the full arguments (spec §8
    "Unhashable keys").
    """


# Characters JSON.stringify escapes: the two JSON metacharacters, C0 controls and
# surrogates. U+007F, U+2028/2029 and "/" stay literal (spec §3 "Strings").
_NEEDS_ESCAPE = re.compile('[\x00-\x1f"\\\\\ud800-\udfff]')
# A high+low surrogate pair held as two Python code points is one valid UTF-16 character
# in JavaScript, so it is matched first and written as that character.
_ESCAPE_UNIT = re.compile('[\ud800-\udbff][\udc00-\udfff]|[\x00-\x1f"\\\\\ud800-\udfff]')
_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_ESCAPES = {chr(c): f"\\u{c:04x}" for c in range(0x20)} | _SHORT_ESCAPES


def _escape_unit(match: re.Match[str]) -> str:
    unit = match.group()
    if len(unit) == 2:
        high, low = ord(unit[0]), ord(unit[1])
        return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    escaped = _ESCAPES.get(unit)
    return escaped if escaped is not None else f"\\u{ord(unit):04x}"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _quote(text: str) -> str:
    """Quote a string as ``JSON.stringify`` does (lowercase ``\\u00xx`` and ``\\udxxx``).

    Without surrogates, ``json.dumps(ensure_ascii=False)`` escapes exactly the same
    characters in the same way, at C speed; surrogates take the careful path.
    """
    if _NEEDS_ESCAPE.search(text) is None:
        return f'"{text}"'
    if _SURROGATE.search(text) is None:
        return _json_dumps(text, ensure_ascii=False)
    return f'"{_ESCAPE_UNIT.sub(_escape_unit, text)}"'


def _utf16_units(text: str) -> bytes:
    """Sort key ordering strings by UTF-16 code units (big-endian bytes compare alike)."""
    return text.encode("utf-16-be", "surrogatepass")


def _format_float(number: float) -> str:
    """ECMA-262 Number::toString(number) for a finite double.

    ``repr`` gives the shortest digit string that round-trips, the same digits
    Number::toString chooses; only the placement of the decimal point and the exponent
    notation differ, and those are redone here.
    """
    if float.is_integer(number) and -_MAX_EXACT_INT <= number <= _MAX_EXACT_INT:
        return int.__repr__(int(number))  # also turns -0.0 into "0"
    if number < 0:
        return "-" + _format_float(-number)
    mantissa, _, exponent = float.__repr__(number).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    # number == 0.<digits> * 10**point
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point  # the k and n of ECMA-262 Number::toString
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return f"{digits[:n]}.{digits[n:]}"
    if -6 < n <= 0:
        return f"0.{'0' * -n}{digits}"
    exp = n - 1
    sign = "+" if exp >= 0 else "-"
    if k == 1:
        return f"{digits}e{sign}{abs(exp)}"
    return f"{digits[0]}.{digits[1:]}e{sign}{abs(exp)}"


def _format_int(number: int) -> str:
    """An int as the double JavaScript would hold (spec §3 "Integers are doubles")."""
    if -_MAX_EXACT_INT <= number <= _MAX_EXACT_INT:
        return int.__repr__(number)
    try:
        as_double = int.__float__(number)  # round-half-even, like JSON.parse
    except OverflowError:
        raise CanonicalizationError(
            "integer too large for a double has no JCS representation"
        ) from None
    return _format_float(as_double)


def _emit(value: object, depth: int, out: list[str], active: set[int]) -> None:
    if depth > MAX_CANONICALIZE_DEPTH:
        raise CanonicalizationError(
            f"key material nests deeper than {MAX_CANONICALIZE_DEPTH} levels"
        )
    if isinstance(value, str):
        out.append(_quote(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(_format_int(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalizationError(f"non-finite number {value!r} has no JCS representation")
        out.append(_format_float(value))
    elif isinstance(value, list):
        _emit_list(value, depth, out, active)
    elif isinstance(value, dict):
        _emit_dict(value, depth, out, active)
    else:
        raise CanonicalizationError(
            f"{type(value).__name__} is not JSON data (expected dict, list, str, int, "
            "float, bool or None)"
        )


def _enter(container: list[object] | dict[object, object], active: set[int]) -> int:
    marker = id(container)
    if marker in active:
        raise CanonicalizationError("key material contains a circular reference")
    active.add(marker)
    return marker


def _emit_list(items: list[object], depth: int, out: list[str], active: set[int]) -> None:
    if not items:
        out.append("[]")
        return
    marker = _enter(items, active)
    out.append("[")
    for index, item in enumerate(items):
        if index:
            out.append(",")
        _emit(item, depth + 1, out, active)
    out.append("]")
    active.discard(marker)


def _emit_dict(mapping: dict[object, object], depth: int, out: list[str], active: set[int]) -> None:
    if not mapping:
        out.append("{}")
        return
    marker = _enter(mapping, active)
    keys = list(mapping)
    for key in keys:
        if not isinstance(key, str):
            raise CanonicalizationError(f"object keys must be strings, not {type(key).__name__}")
    if all(map(str.isascii, keys)):
        keys.sort()  # code points and UTF-16 units agree below U+10000
    else:
        keys.sort(key=_utf16_units)
        units = [_utf16_units(key) for key in keys]
        if any(a == b for a, b in zip(units, units[1:], strict=False)):
            # Two Python keys spelling one JavaScript string (a surrogate pair held as
            # two code points, and the character itself): no JS object has both.
            raise CanonicalizationError("two object keys are the same UTF-16 string")
    out.append("{")
    for index, key in enumerate(keys):
        if index:
            out.append(",")
        out.append(_quote(key))
        out.append(":")
        _emit(mapping[key], depth + 1, out, active)
    out.append("}")
    active.discard(marker)


def canonicalize(value: object) -> str:
    """Serialize key material as RFC 8785 (JCS) canonical JSON (spec §3).

    The output is what ECMAScript ``JSON.stringify`` produces for the equivalent
    JavaScript value with object keys sorted by UTF-16 code units:

    - numbers per ECMA-262 Number::toString: ``-0.0`` → ``0``, ``5.0`` → ``5``,
      ``1e21`` → ``1e+21``, ``1e-6`` → ``0.000001``, ``1e-7`` → ``1e-7``; an ``int`` is
      the double JavaScript would hold (``2**53 + 1`` → ``9007199254740992``);
    - strings escape ``"``, ``\\``, ``\\b\\f\\n\\r\\t``, other C0 controls as ``\\u00xx``
      and lone surrogates as ``\\udxxx`` (lowercase hex); ``/``, U+007F and U+2028 stay
      literal; no Unicode normalisation. A surrogate pair held as two code points is
      written as the character it encodes, as JavaScript sees it;
    - ``True``/``False`` are booleans, ``None`` is ``null``, lists keep their order.

    Only ``dict`` (with ``str`` keys), ``list``, ``str``, ``int``, ``float``, ``bool``
    and ``None`` (and their subclasses) are JSON data. Tuples are rejected: the spec
    defines no Python mapping for them and parsed tool arguments never contain them.

    Args:
        value: The key material, usually parsed JSON tool arguments.

    Returns:
        The canonical JSON text. It never contains a lone surrogate, so it always
        encodes as UTF-8.

    Raises:
        CanonicalizationError: ``value`` holds a non-finite float, an int too large for
            a double, a circular reference, a value deeper than
            :data:`MAX_CANONICALIZE_DEPTH` levels below the root (the root is depth 0),
            a non-string dict key, or a type that is not JSON data.
    """
    out: list[str] = []
    _emit(value, 0, out, set())
    return "".join(out)


def _utf8(text: str) -> bytes:
    """UTF-8 as JavaScript's encoders write it: lone surrogates become U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        units = text.encode("utf-16-be", "surrogatepass")
        return units.decode("utf-16-be", "replace").encode("utf-8")


def fingerprint_key_material(value: object) -> str:
    """Bare fingerprint of key material or text: ``sha256(utf8(JCS(value)))`` (spec §3).

    Text is hashed with its JSON quotes, since ``JCS("x")`` is ``"x"`` in quotes.

    Args:
        value: JSON data, as for :func:`canonicalize`.

    Returns:
        64 lowercase hex digits.

    Raises:
        CanonicalizationError: As :func:`canonicalize`.
    """
    return hashlib.sha256(canonicalize(value).encode("utf-8")).hexdigest()


def fingerprint_tool_call(tool_name: str, value: object) -> str:
    """Tool-call fingerprint: ``sha256(utf8(tool_name + "\\n" + JCS(value)))`` (spec §3).

    A lone surrogate in ``tool_name`` is hashed as U+FFFD, as the reference's UTF-8
    encoding does.

    Args:
        tool_name: The tool's name.
        value: The call's key material, as for :func:`canonicalize`.

    Returns:
        64 lowercase hex digits.

    Raises:
        CanonicalizationError: As :func:`canonicalize`.
        TypeError: ``tool_name`` is not a string.
    """
    if not isinstance(tool_name, str):
        raise TypeError(f"tool_name must be a string, not {type(tool_name).__name__}")
    return hashlib.sha256(_utf8(tool_name + "\n" + canonicalize(value))).hexdigest()


class _HashSink:
    """Feeds canonical JSON pieces to a SHA-256 as they are produced (no joined copy)."""

    __slots__ = ("hasher",)

    def __init__(self, hasher: hashlib._Hash):
        self.hasher = hasher

    def append(self, piece: str) -> None:
        self.hasher.update(_utf8(piece))


def call_identity(tool_name: str, arguments: object) -> str | None:
    """The one identity of a tool call: ``sha256(utf8(tool_name + "\n" + JCS(arguments)))``.

    The same digest as :func:`fingerprint_tool_call` on the full arguments, computed
    by streaming the canonical form into the hash, so arguments of any size have an
    identity (issue 17, item 14: a 70 KB ``write_file`` is not "unfingerprintable").
    Approvals ("never ask the same question twice") and loop-policy admission use it.

    Args:
        tool_name: the tool's name.
        arguments: the call's decoded arguments, or its raw argument string when they
            were not valid JSON.

    Returns:
        64 lowercase hex digits, or None when the arguments are not JSON data (a
        non-finite number, a cycle, nesting deeper than 64 levels…).
    """
    hasher = hashlib.sha256(_utf8(str(tool_name) + "\n"))
    try:
        _emit(arguments, 0, _HashSink(hasher), set())  # type: ignore[arg-type]
    except (CanonicalizationError, RecursionError, TypeError, ValueError):
        return None
    return hasher.hexdigest()

