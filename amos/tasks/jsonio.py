"""Strict JSON admission of task-state inputs and snapshots.

Inputs must be plain JSON data: ``dict`` with ``str`` keys, ``list``, ``str``, ``int``,
finite ``float``, ``bool`` and ``None`` — exactly those types, no subclasses, no
cycles, at most :data:`MAX_DEPTH` levels, no lone surrogates. Anything else (tuples,
objects with accessors or custom serialization, NaN) is ``TASK_STATE_INVALID``.
Sizes are UTF-8 bytes of the compact JSON text (seed "Capacity…": 256 KiB of strict
JSON per input/snapshot).

Pure code: no I/O and no import-time side effects.
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from amos.tasks.errors import FREE_ROOM_HINT, TaskStateError

__all__ = ["MAX_DEPTH", "admit", "check_json", "dump_json", "json_size"]

MAX_DEPTH = 32
"""Deepest accepted nesting level of an input (the root is depth 0)."""

M = TypeVar("M", bound=BaseModel)


def check_json(value: Any, what: str) -> None:
    """Check that ``value`` is plain strict JSON data.

    Args:
        value: the candidate input.
        what: names the input in the error message.

    Raises:
        TaskStateError: ``TASK_STATE_INVALID`` naming the JSON path of the first
            offending value.
    """
    _check(value, what, "$", 0, set())


def _check(value: Any, what: str, path: str, depth: int, seen: set[int]) -> None:
    kind = type(value)
    if value is None or kind is bool:
        return
    if kind is int:
        return
    if kind is float:
        if not math.isfinite(value):
            raise TaskStateError("TASK_STATE_INVALID", f"{what}: {path} is not a finite number")
        return
    if kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise TaskStateError("TASK_STATE_INVALID", f"{what}: {path} holds a lone surrogate") from None
        return
    if kind is not dict and kind is not list:
        raise TaskStateError(
            "TASK_STATE_INVALID", f"{what}: {path} is a {kind.__name__}, not JSON data"
        )
    if depth >= MAX_DEPTH:
        raise TaskStateError("TASK_STATE_INVALID", f"{what}: {path} is nested too deeply")
    if id(value) in seen:
        raise TaskStateError("TASK_STATE_INVALID", f"{what}: {path} is a cycle")
    seen.add(id(value))
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise TaskStateError("TASK_STATE_INVALID", f"{what}: {path} has a non-string key")
            _check(key, what, path, depth + 1, seen)
            _check(item, what, f"{path}.{key}", depth + 1, seen)
    else:
        for index, item in enumerate(value):
            _check(item, what, f"{path}[{index}]", depth + 1, seen)
    seen.discard(id(value))


def dump_json(value: Any) -> str:
    """Compact JSON text of checked data (UTF-8 kept, no NaN)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_size(value: Any) -> int:
    """UTF-8 bytes of :func:`dump_json` of ``value``."""
    return len(dump_json(value).encode("utf-8"))


def admit(model: type[M], value: Any, what: str, max_bytes: int) -> M:
    """Validate one strict-JSON input or snapshot into ``model``.

    Args:
        model: the frozen model to build.
        value: plain JSON data (see module docstring), or an instance of ``model``.
        what: names the input in error messages.
        max_bytes: the input limit (``max_snapshot_bytes``), UTF-8 bytes.

    Returns:
        The validated model.

    Raises:
        TaskStateError: ``TASK_STATE_INVALID`` for non-JSON data, unknown or missing
            fields or bad values; ``TASK_STATE_CAPACITY`` when the JSON text is larger
            than ``max_bytes``.
    """
    if isinstance(value, model):
        value = value.model_dump(mode="json")
    check_json(value, what)
    text = dump_json(value)
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise TaskStateError(
            "TASK_STATE_CAPACITY",
            f"{what} is {size} bytes of JSON, over the {max_bytes}-byte limit; {FREE_ROOM_HINT}",
        )
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        raise TaskStateError("TASK_STATE_INVALID", f"{what}: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    """One line naming up to three failing fields."""
    parts = []
    for error in exc.errors()[:3]:
        loc = ".".join(str(p) for p in error["loc"]) or "value"
        parts.append(f"{loc}: {error['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
