"""Checking an MCP tool's input schema and adapting it so every provider accepts it.

Issue 18, "Tools": a server's ``inputSchema`` is third-party data. It must be a valid
JSON Schema (checked with the ``jsonschema`` library against the draft it names, 2020-12
by default), or the tool is left out with a notice naming it. What amos offers the
providers is then adapted to what OpenAI, Anthropic and Gemini all accept, the shape of
the built-in tools' pydantic schemas:

- the root is ``{"type": "object", "properties": {…}}`` (a root without ``type``
  becomes an object; a root of another type is refused);
- ``$schema``, ``$id``, ``$comment`` and ``$anchor`` at the root are dropped;
- local ``$ref``s (``#/$defs/X``, ``#/definitions/X``) are inlined unless recursive; a
  schema with any other ``$ref`` (a URL, a missing definition) is refused;
- an array without ``items`` gets ``"items": {}`` (OpenAI rejects it otherwise);
- ``true`` / ``false`` subschemas become ``{}`` / ``{"not": {}}``;
- root-level ``anyOf``/``oneOf``/``allOf``/``not``/``if``/``then``/``else`` (Anthropic
  refuses them) are dropped from what is offered; arguments are still validated against
  the server's own schema (``AdaptedSchema.loosened`` says when that differs).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

MAX_SCHEMA_BYTES = 65536
"""Largest input schema offered to a model (bytes of compact JSON)."""

_ROOT_DROPPED = ("$schema", "$id", "$comment", "$anchor", "$dynamicAnchor")
_ROOT_COMBINATORS = ("anyOf", "oneOf", "allOf", "not", "if", "then", "else",
                     "dependentSchemas", "dependencies")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("not", "if", "then", "else", "additionalProperties", "contains", "propertyNames",
               "unevaluatedProperties", "unevaluatedItems", "additionalItems")
_MAX_INLINE_DEPTH = 16


class SchemaProblem(ValueError):
    """The schema cannot be offered; the message says why in a few words."""


@dataclass(frozen=True)
class AdaptedSchema:
    """An input schema ready for providers.

    Attributes:
        offered: what providers are sent (and the ToolManager validates against).
        original: the server's schema, as checked.
        loosened: True when ``offered`` accepts arguments ``original`` refuses (root
            combinators were dropped), so calls must also be checked against ``original``.
    """

    offered: dict[str, Any]
    original: dict[str, Any]
    loosened: bool


def check_schema(schema: Any) -> Any:
    """Check that ``schema`` is a valid JSON Schema and return a validator for it.

    Args:
        schema: the decoded ``inputSchema``.

    Returns:
        A ``jsonschema`` validator instance (``.iter_errors(instance)``).

    Raises:
        SchemaProblem: not an object, not a valid JSON Schema (with the first error and
            where it is), or a ``$ref`` that cannot be resolved.
    """
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict):
        raise SchemaProblem(f"the input schema is {_kind(schema)}, not a JSON object")
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
        for _ in validator.iter_errors({}):  # resolves $refs reachable from an empty call
            pass
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "the root"
        raise SchemaProblem(f"the input schema is not valid JSON Schema ({_short(exc.message)} at {where})") from None
    except RecursionError:
        raise SchemaProblem("the input schema is nested too deeply") from None
    except Exception as exc:  # unresolvable $ref (referencing.exceptions), unknown $schema …
        raise SchemaProblem(f"the input schema cannot be used ({type(exc).__name__}: {_short(str(exc))})") from None
    return validator


def adapt_schema(schema: Any) -> AdaptedSchema:
    """Check ``schema`` and build the provider-facing copy (rules in the module docstring).

    Raises:
        SchemaProblem: invalid (see :func:`check_schema`), a root type other than
            object, or larger than ``MAX_SCHEMA_BYTES`` once adapted.
    """
    check_schema(schema)
    offered = copy.deepcopy(schema)
    for key in _ROOT_DROPPED:
        offered.pop(key, None)
    kind = offered.get("type")
    if kind is None or (isinstance(kind, list) and "object" in kind):
        offered["type"] = "object"
    elif kind != "object":
        raise SchemaProblem(f"the input schema's root type is {json.dumps(kind)}; providers need an object")
    loosened = False
    for key in _ROOT_COMBINATORS:
        if key in offered:
            offered.pop(key)
            loosened = True
    definitions = {**offered.get("definitions", {}), **offered.get("$defs", {})} if isinstance(
        offered.get("$defs", {}), dict) and isinstance(offered.get("definitions", {}), dict) else {}
    remaining: list[int] = [0]
    offered = _inline(offered, definitions, (), remaining)
    if remaining[0] == 0:
        offered.pop("$defs", None)
        offered.pop("definitions", None)
    offered = _normalize(offered)
    if not isinstance(offered.get("properties"), dict):
        offered["properties"] = {}
    size = len(json.dumps(offered, separators=(",", ":")).encode("utf-8"))
    if size > MAX_SCHEMA_BYTES:
        raise SchemaProblem(f"the input schema is {size} bytes; at most {MAX_SCHEMA_BYTES} are offered")
    return AdaptedSchema(offered=offered, original=schema, loosened=loosened)


def _inline(node: Any, definitions: dict[str, Any], seen: tuple[str, ...], remaining: list[int]) -> Any:
    """``node`` with local, non-recursive ``$ref``s replaced by their definitions."""
    if isinstance(node, list):
        return [_inline(item, definitions, seen, remaining) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = _local_ref(ref)
        if ref != "#" and (name is None or name not in definitions):
            raise SchemaProblem(f"the input schema has a $ref providers cannot follow ({_short(ref, 80)})")
        if name is not None and name not in seen and len(seen) < _MAX_INLINE_DEPTH:
            target = _inline(copy.deepcopy(definitions[name]), definitions, (*seen, name), remaining)
            siblings = {k: _inline(v, definitions, seen, remaining) for k, v in node.items() if k != "$ref"}
            if isinstance(target, dict):
                return {**target, **siblings}
            return target if not siblings else {"allOf": [target], **siblings}
        remaining[0] += 1
    return {key: (value if key in ("$defs", "definitions", "enum", "const", "default", "examples")
                  else _inline(value, definitions, seen, remaining))
            for key, value in node.items()}


def _local_ref(ref: str) -> str | None:
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix) and "/" not in ref[len(prefix):]:
            return ref[len(prefix):].replace("~1", "/").replace("~0", "~")
    return None


def _normalize(node: Any) -> Any:
    """Booleans as object schemas, ``items`` for every array, recursively."""
    if node is True:
        return {}
    if node is False:
        return {"not": {}}
    if not isinstance(node, dict):
        return node
    out = dict(node)
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: _normalize(sub) for name, sub in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_normalize(sub) for sub in out[key]]
    for key in _SCHEMA_ONE:
        if key in out and isinstance(out[key], dict | bool):
            out[key] = _normalize(out[key])
    items = out.get("items")
    if isinstance(items, list):  # draft-7 tuple form
        out["items"] = [_normalize(sub) for sub in items]
    elif items is not None:
        out["items"] = _normalize(items)
    kind = out.get("type")
    if (kind == "array" or (isinstance(kind, list) and "array" in kind)) and "items" not in out \
            and "prefixItems" not in out:
        out["items"] = {}
    return out


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, list):
        return "an array"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["MAX_SCHEMA_BYTES", "AdaptedSchema", "SchemaProblem", "adapt_schema", "check_schema"]
