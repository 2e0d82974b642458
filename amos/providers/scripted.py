"""The scripted provider: a deterministic, offline model (spec/scripted-provider.md).

It powers ``amos run --demo``, the TUI's demo mode, every example and the tests. Each
model call consumes the next turn of a JSON script; the position is kept per script
(by the SHA-256 of its contents) in the session's provider state, so a resumed
session continues where it stopped.

A script is checked strictly when loaded: besides the schema, a leaf that is not JSON
or not representable (``NaN``, ``Infinity``, an integer of more than
:data:`MAX_INT_DIGITS` digits, a number out of range), a key given
twice, a ``delay_ms`` over an hour or token counts over 10**12 are a configuration
error (exit 2) naming the JSON path (issue 17 item 12). ``raw_arguments`` are decoded
by the rule every provider follows (:func:`amos.providers.common.decode_arguments`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from amos.errors import ConfigError, ProviderError, ScriptExhausted, ScriptMismatch
from amos.messages import Message, ToolCallPart, Usage
from amos.providers.base import (
    FinishEvent,
    ModelRequest,
    ProviderEvent,
    TextDeltaEvent,
    ToolCallEvent,
)
from amos.providers.common import decode_arguments
from amos.safe_read import FileTooLargeError, NotRegularFileError, read_regular

ErrorKind = Literal["rate_limit", "overloaded", "timeout", "auth", "bad_request", "server"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # "10" or true is no number of milliseconds


class ScriptToolCall(_Strict):
    """A tool call the script "sends"; exactly one of ``arguments``/``raw_arguments``."""

    id: str | None = None
    name: str = Field(min_length=1)
    arguments: Any = None
    raw_arguments: str | None = None

    @model_validator(mode="after")
    def _one_argument_form(self) -> ScriptToolCall:
        has_args = "arguments" in self.model_fields_set
        has_raw = "raw_arguments" in self.model_fields_set
        if has_args == has_raw:
            raise ValueError("a tool call needs exactly one of 'arguments' and 'raw_arguments'")
        return self


class ScriptError(_Strict):
    """Makes the call raise the provider error of this kind."""

    kind: ErrorKind
    message: str = "scripted provider error"


class ScriptUsage(_Strict):
    """Usage reported as given (tokens)."""

    input_tokens: int = Field(default=0, ge=0, le=10**12)
    output_tokens: int = Field(default=0, ge=0, le=10**12)


class ScriptExpect(_Strict):
    """Assertions about the request the runner sent; all given must hold."""

    last_message_role: Literal["user", "tool", "assistant"] | None = None
    last_tool_result_contains: str | None = None
    any_message_contains: str | None = None
    system_contains: str | None = None
    tools_offered: list[str] | None = None


MAX_DELAY_MS = 3_600_000
"""Longest ``delay_ms`` of a turn, milliseconds (an hour; a larger one slept for good)."""

MAX_DELTA_DELAY_MS = 60_000
"""Longest ``delta_delay_ms`` of a turn, milliseconds: the pause between two streamed text
deltas, which paces a reply like a real model's so its tokens per second can be seen and
tested offline (issue 21; an addition to spec/scripted-provider.md, documented in the README)."""


class ScriptTurn(_Strict):
    """One model call's answer."""

    text: str | None = None
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    finish_reason: Literal["stop", "tool_calls", "length", "content_filter"] | None = None
    usage: ScriptUsage | None = None
    error: ScriptError | None = None
    expect: ScriptExpect | None = None
    delay_ms: int | None = Field(default=None, ge=0, le=MAX_DELAY_MS)
    delta_delay_ms: int | None = Field(default=None, ge=0, le=MAX_DELTA_DELAY_MS)


class Script(_Strict):
    """A whole script file."""

    version: Literal[1] = 1
    model: str = "scripted"
    turns: list[ScriptTurn] = Field(default_factory=list)
    on_exhausted: Literal["error", "repeat_last"] | ScriptTurn = "error"
    summaries: list[str] = Field(default_factory=list)


def load_script(path: Path) -> tuple[Script, str]:
    """Read and validate a script file.

    Returns:
        ``(script, sha256_hex_of_contents)``.

    Raises:
        ConfigError: unreadable file, invalid JSON or an invalid script, naming the file
            and the JSON path (``turns.3.tool_calls.0``) of the first problem.
    """
    try:
        raw = read_regular(path, max_bytes=MAX_SCRIPT_BYTES)  # a FIFO or device is refused, never waited on
    except FileNotFoundError:
        raise ConfigError("a script must be a regular JSON file (no such file)", file=str(path)) from None
    except NotRegularFileError as exc:
        raise ConfigError(f"a script must be a regular JSON file ({exc.strerror})", file=str(path)) from None
    except FileTooLargeError:
        raise ConfigError(f"script is larger than {MAX_SCRIPT_BYTES} bytes", file=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read script: {exc.strerror or exc}", file=str(path)) from None
    digest = hashlib.sha256(raw).hexdigest()
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_Bad.constant, parse_int=_Bad.integer,
                          parse_float=_Bad.number, object_pairs_hook=_Object.of)
    except UnicodeDecodeError:
        raise ConfigError("script is not UTF-8 text", file=str(path)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", file=str(path)
        ) from None
    except RecursionError:
        raise ConfigError("invalid JSON: nested too deeply", file=str(path)) from None
    if not isinstance(data, dict):
        raise ConfigError(
            'a script is a JSON object like {"version": 1, "turns": [{"text": "hi"}]}, '
            f"not a JSON {type(data).__name__}", file=str(path))
    problem = _first_problem(data)
    if problem is not None:
        where, why = problem
        raise ConfigError(why, file=str(path), json_path=".".join(map(str, where)) or None)
    try:
        return Script.model_validate(data), digest
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = _json_path(data, err["loc"])
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = f"unknown key {err['loc'][-1]!r}"
        elif err["type"] == "literal_error":
            msg = f"{msg} (got {_shown(err.get('input'))})"
        turn = ""
        if len(err["loc"]) >= 2 and err["loc"][0] == "turns":
            turn = f"turn {err['loc'][1]}: "
        raise ConfigError(f"{turn}{msg}", file=str(path), json_path=loc or None) from None


# ---------------------------------------------------------------------------------- strict JSON of scripts
#
# Issue 17 item 12: generated malformed scripts ended with a traceback and no receipt (an
# integer literal past Python's 4300-digit limit raised ValueError from json.loads), or
# were accepted and broke later (NaN, duplicate keys). The decoder
# hooks below turn each such leaf into a marker; :func:`_first_problem` then names the
# JSON path of the first one, and nothing odd gets past the loader.


class _Bad:
    """A JSON leaf that is not acceptable (kept in place so its path can be named)."""

    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why

    @classmethod
    def constant(cls, name: str) -> _Bad:
        return cls(f"{name} is not JSON; use a number or null")

    @classmethod
    def integer(cls, digits: str) -> int | _Bad:
        if len(digits) > MAX_INT_DIGITS:
            return cls(f"an integer of {len(digits.lstrip('-'))} digits is out of range")
        return int(digits)

    @classmethod
    def number(cls, digits: str) -> float | _Bad:
        value = float(digits)
        return value if math.isfinite(value) else cls(f"the number {digits[:40]} is out of range")


class _Object(dict):
    """A JSON object that remembers the first key it was given twice."""

    duplicate: str | None = None

    @classmethod
    def of(cls, pairs: list[tuple[str, Any]]) -> _Object:
        obj = cls()
        for key, value in pairs:
            if key in obj and obj.duplicate is None:
                obj.duplicate = key
            obj[key] = value
        return obj


MAX_INT_DIGITS = 1000
"""Longest integer literal a script may hold, digits (far below Python's own limit)."""


def _first_problem(data: Any) -> tuple[list[Any], str] | None:
    """``(path, why)`` of the first unacceptable leaf or object, in document order.

    A lone surrogate (``"\\udcff"``) stays accepted: it is how a script plays a model
    that sends one, and the runner must cope with that at its own boundary.
    """
    stack: list[tuple[list[Any], Any]] = [([], data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, _Bad):
            return where, value.why
        if isinstance(value, dict):
            if isinstance(value, _Object) and value.duplicate is not None:
                return where, f"the key {value.duplicate!r} is given twice"
            stack.extend(reversed([([*where, key], item) for key, item in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([([*where, n], item) for n, item in enumerate(value)]))
    return None


def _json_path(data: Any, loc: tuple[Any, ...]) -> str:
    """A pydantic error location as a JSON path of ``data`` (union member tags dropped)."""
    parts: list[str] = []
    current = data
    for part in loc:
        if isinstance(current, dict) and isinstance(part, str) and part in current:
            current = current[part]
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        elif isinstance(current, dict) and isinstance(part, str) and part.isidentifier():
            parts.append(part)  # a missing field or an unknown key: still its name
            current = None
            continue
        else:
            continue
        parts.append(str(part))
    return ".".join(parts)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


MAX_SCRIPT_BYTES = 16 * 1024 * 1024
"""Largest script file accepted (bytes)."""

_DELTA = re.compile(r"\S+\s*|\s+")


def _estimate_input_tokens(request: ModelRequest) -> int:
    payload = {
        "system": request.system,
        "tools": [asdict(t) for t in request.tools],
        "messages": [m.model_dump(mode="json") for m in request.messages],
    }
    return math.ceil(len(json.dumps(payload, ensure_ascii=False)) / 4)


class ScriptedProvider:
    """A provider that answers from a script.

    Args:
        script: the validated script.
        digest: SHA-256 hex of the script file's contents (the position key).
        state: the session's provider state; positions live in
            ``state["scripted_positions"][digest]`` (number of turns consumed).
    """

    provider_name = "scripted"

    def __init__(self, script: Script, digest: str, state: MutableMapping[str, Any], *, path: Path | None = None):
        self.script = script
        self.digest = digest
        self.path = path
        self.model_name = script.model
        self._state = state

    @classmethod
    def from_file(cls, path: Path, *, state: MutableMapping[str, Any]) -> ScriptedProvider:
        """Load and validate ``path`` (see :func:`load_script`)."""
        script, digest = load_script(path)
        return cls(script, digest, state, path=path)

    @property
    def position(self) -> int:
        """Turns of this script consumed so far in the session."""
        return int(self._state.get("scripted_positions", {}).get(self.digest, 0))

    def _advance(self) -> int:
        positions = self._state.setdefault("scripted_positions", {})
        pos = int(positions.get(self.digest, 0))
        positions[self.digest] = pos + 1
        return pos

    def _turn_for(self, pos: int) -> ScriptTurn:
        if pos < len(self.script.turns):
            return self.script.turns[pos]
        exhausted = self.script.on_exhausted
        if isinstance(exhausted, ScriptTurn):
            return exhausted
        if exhausted == "repeat_last" and self.script.turns:
            return self.script.turns[-1]
        raise ScriptExhausted(
            f"script {self.path.name if self.path else ''} has no turn left "
            f"(all {len(self.script.turns)} used; on_exhausted is \"error\")"
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        """Answer one model call from the next turn (see module docstring).

        Raises:
            ScriptExhausted: no turn left and ``on_exhausted`` is ``"error"``.
            ScriptMismatch: the turn's ``expect`` did not hold.
            ProviderError: the turn has an ``error``.
        """
        if request.purpose == "summary":
            async for event in self._summary(request):
                yield event
            return
        pos = self._advance()
        turn = self._turn_for(pos)
        if turn.delay_ms:
            await asyncio.sleep(turn.delay_ms / 1000)
        if turn.expect is not None:
            _check_expect(turn.expect, request, pos)
        if turn.error is not None:
            raise ProviderError(turn.error.kind, turn.error.message)
        text = turn.text or ""
        pause = (turn.delta_delay_ms or 0) / 1000
        for n, piece in enumerate(_DELTA.findall(text)):
            if pause and n:
                await asyncio.sleep(pause)
            yield TextDeltaEvent(piece)
        arg_chars = 0
        for n, tc in enumerate(turn.tool_calls):
            if "raw_arguments" in tc.model_fields_set:
                raw = tc.raw_arguments or ""
                arg_chars += len(raw)
                args, keep_raw = decode_arguments(raw)  # the one rule every provider follows
                if keep_raw is None and raw.strip() == "":
                    args, keep_raw = None, raw  # "" is what the script sent: not valid JSON
            else:
                args, keep_raw = tc.arguments, None
                arg_chars += len(json.dumps(args, ensure_ascii=False))
            call = ToolCallPart(
                call_id=tc.id or f"call_{pos}_{n}",
                tool_name=tc.name,
                arguments=args,
                raw_arguments=keep_raw,
            )
            yield ToolCallEvent(call)
        finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
        if turn.usage is None and "usage" in turn.model_fields_set:  # "usage": null — none reported
            yield FinishEvent(finish, Usage(model_calls=1), usage_reported=False)
            return
        if turn.usage is not None:
            usage = Usage(
                input_tokens=turn.usage.input_tokens,
                output_tokens=turn.usage.output_tokens,
                model_calls=1,
            )
        else:
            usage = Usage(
                input_tokens=_estimate_input_tokens(request),
                output_tokens=math.ceil((len(text) + arg_chars) / 4),
                model_calls=1,
            )
        yield FinishEvent(finish, usage)

    async def _summary(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        # The summaries used so far are part of the session, like the turn position.
        used = self._state.setdefault("scripted_summary_positions", {})
        index = int(used.get(self.digest, 0))
        if index < len(self.script.summaries):
            text = self.script.summaries[index]
            used[self.digest] = index + 1
        else:
            # The first line of each replaced message; the runner's closing instruction
            # (a host ``feedback`` message) is not part of what is replaced.
            replaced = list(request.messages)
            if replaced and replaced[-1].kind == "feedback":
                replaced.pop()
            lines = [_message_text(m).strip().splitlines()[0][:200] for m in replaced if _message_text(m).strip()]
            text = "\n".join(lines)
        yield TextDeltaEvent(text)
        yield FinishEvent("stop", Usage(input_tokens=_estimate_input_tokens(request),
                                        output_tokens=math.ceil(len(text) / 4), model_calls=1))


def _last_tool_result(messages: list[Message]) -> str | None:
    for message in reversed(messages):
        results = message.tool_results
        if results:
            return results[-1].content
    return None


def _message_text(message: Message) -> str:
    chunks = [message.text]
    for r in message.tool_results:
        chunks.append(r.content)
    return "\n".join(chunks)


def _check_expect(expect: ScriptExpect, request: ModelRequest, pos: int) -> None:
    messages = list(request.messages)
    problems: list[str] = []
    if expect.last_message_role is not None:
        role = messages[-1].role if messages else None
        if role != expect.last_message_role:
            problems.append(f"last message role {expect.last_message_role!r}, got {role!r}")
    if expect.last_tool_result_contains is not None:
        last = _last_tool_result(messages)
        if last is None or expect.last_tool_result_contains not in last:
            shown = (last or "")[-200:].replace("\n", "\\n")
            problems.append(
                f"last tool result containing {expect.last_tool_result_contains!r}, got {shown!r}"
            )
    if expect.any_message_contains is not None:
        if not any(expect.any_message_contains in _message_text(m) for m in messages):
            problems.append(f"a message containing {expect.any_message_contains!r}")
    if expect.system_contains is not None and expect.system_contains not in request.system:
        problems.append(f"system instructions containing {expect.system_contains!r}")
    if expect.tools_offered is not None:
        offered = {t.name for t in request.tools}
        missing = [t for t in expect.tools_offered if t not in offered]
        if missing:
            problems.append(f"tools offered including {missing} (offered: {sorted(offered)})")
    if problems:
        raise ScriptMismatch(f"turn {pos}: expected " + "; ".join(problems))
