"""Making outside text safe to keep: valid UTF-8, secrets masked (DESIGN.md "Storage").

Every text that enters the session — a prompt, a slash-command argument, a model's
streamed delta or finished turn, a tool call's arguments, a tool result — passes
through one :class:`Masker`, so a provider key never reaches ``session.json``, the
journal, a checkpoint, evidence, a later model request or the screen (issue 17, items
1 and 2). Streamed text is masked as it arrives by a :class:`StreamMasker`, which holds
back only the tail that could be the start of a secret split across two deltas.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from amos.messages import ToolCallPart
from amos.tools.base import ToolOutcome

MAX_ARGUMENT_DEPTH = 64
"""Deepest nesting of tool-call arguments accepted (JSON levels)."""


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (undecodable input bytes) replaced by ``?``."""
    return text.encode("utf-8", "replace").decode("utf-8") if not text.isascii() else text


class Masker:
    """Masks every secret value, and its common encodings, in text.

    A thin owner of :func:`amos.evidence.redact.masker_for`'s cached masker (the value,
    base64/base64url at every alignment, hex, URL-encoding, whitespace between their
    characters; secrets shorter than 8 characters are not masked).

    Args:
        secrets: the secret values (provider keys, server tokens…).
    """

    def __init__(self, secrets: Iterable[str] = ()):
        from amos.evidence.redact import masker_for

        self.secrets: tuple[str, ...] = tuple(secrets)
        self._masker = masker_for(self.secrets)

    def __bool__(self) -> bool:
        return bool(self._masker.forms)

    @property
    def forms(self) -> tuple[str, ...]:
        """Every form masked, longest first."""
        return self._masker.forms

    def text(self, text: str) -> str:
        """``text`` with every secret masked (unchanged when there are none)."""
        if not text or not self._masker.forms:
            return text
        return self._masker.mask(text)

    def clean(self, text: str) -> str:
        """``text`` made valid UTF-8, then masked: what every outside text gets."""
        return self.text(clean_text(text))

    def value(self, value: Any) -> Any:
        """A JSON value with every string (keys included) cleaned and masked."""
        if isinstance(value, str):
            return self.clean(value)
        if isinstance(value, dict):
            return {self.clean(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def outcome(self, outcome: ToolOutcome) -> ToolOutcome:
        """``outcome`` with every secret masked in its content, error and result."""
        if not self._masker.forms:
            return outcome
        from amos.evidence.redact import redact

        return outcome.model_copy(update={
            "content": self.text(outcome.content),
            "error": self.text(outcome.error) if outcome.error else outcome.error,
            "result": redact(outcome.result, self.secrets),
        })

    def call(self, call: ToolCallPart) -> ToolCallPart:
        """``call`` with lone surrogates replaced and secrets masked in every string.

        Arguments nested deeper than :data:`MAX_ARGUMENT_DEPTH` levels (the session could
        not even be saved) and arguments holding lone surrogates (running the call with
        ``?`` substituted would act on something the model did not name) make the call
        fail as invalid arguments: ``arguments`` None, ``raw_arguments`` a short note or
        the cleaned JSON. Returns the same object when nothing changed.
        """
        update: dict[str, Any] = {}
        for name in ("call_id", "tool_name", "raw_arguments"):
            value = getattr(call, name)
            if isinstance(value, str):
                cleaned = self.clean(value)
                if cleaned != value:
                    update[name] = cleaned
        if _depth(call.arguments) > MAX_ARGUMENT_DEPTH:
            update["arguments"] = None
            update["raw_arguments"] = f"<arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels were dropped>"
            return call.model_copy(update=update)
        try:
            cleaned_args = Masker().value(call.arguments)
            arguments = self.value(cleaned_args)
        except RecursionError:
            cleaned_args = arguments = call.arguments
        if cleaned_args != call.arguments:
            update["arguments"] = None
            update["raw_arguments"] = json.dumps(arguments, ensure_ascii=False)
        elif arguments != call.arguments:
            update["arguments"] = arguments
        return call.model_copy(update=update) if update else call

    def stream(self) -> StreamMasker:
        """A masker for one stream of deltas (see :class:`StreamMasker`)."""
        return StreamMasker(self)


class StreamMasker:
    """Masks a stream of text deltas as they arrive (issue 17, item 1).

    A secret (or an encoded form of it) may be split between two deltas, so the tail of
    what arrived that could be the start of one is held back until the next delta (or
    :meth:`flush`) decides it: a *partial* match of the masker's pattern reaching the
    end of the text so far (the ``regex`` module's ``partial=True``). The concatenation
    of everything returned equals ``masker.clean(whole text)``; nothing but such a tail
    is ever delayed.
    """

    def __init__(self, masker: Masker):
        self._masker = masker
        self._held = ""
        self._pattern = _partial_pattern(masker.forms) if masker.forms else None

    def feed(self, delta: str) -> str:
        """The masked text that may be shown now ("" while a possible secret is held)."""
        delta = clean_text(delta)
        if self._pattern is None:
            return delta
        buffer = self._held + delta
        cut = len(buffer)
        for match in self._pattern.finditer(buffer, partial=True):
            if match.partial:
                cut = match.start()
                break
        self._held = buffer[cut:]
        return self._masker.text(buffer[:cut])

    def flush(self) -> str:
        """The rest, masked (the stream ended)."""
        held, self._held = self._held, ""
        return self._masker.text(held)


def _partial_pattern(forms: tuple[str, ...]):
    """The masker's pattern (forms longest first, whitespace allowed between characters),
    compiled with the ``regex`` module, which can report a match cut off by the end."""
    import regex

    from amos.evidence.redact import _SEPARATOR_RUN

    return regex.compile("|".join(_SEPARATOR_RUN.join(regex.escape(c) for c in form) for form in forms))


def _depth(value: Any, limit: int = MAX_ARGUMENT_DEPTH + 1) -> int:
    """Nesting depth of a JSON value, counted up to ``limit`` (iteratively: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if level >= limit:
                return level
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest

