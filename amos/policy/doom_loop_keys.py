"""Doom-loop ``loop_key`` resolution: which part of a call is its identity (spec §7).

Holds :class:`LoopKeyResolution` and :func:`resolve_loop_key_material`, which turn a
tool's ``loop_key`` declaration and one call's arguments into the key material the
monitor fingerprints. Split out of :mod:`amos.policy.doom_loop`, which re-exports both
names; deterministic and free of I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["LoopKeyResolution", "resolve_loop_key_material"]


# --------------------------------------------------------------------------- loop_key (§7)


@dataclass(frozen=True)
class LoopKeyResolution:
    """A tool's ``loop_key`` resolved against one call's arguments (spec §7).

    Attributes:
        kind: ``"key"`` (use ``key_material``), ``"fallback"`` (use ``key_material``,
            the full arguments, and surface ``warning``) or ``"exempt"`` (do not score
            the call).
        key_material: The identity to fingerprint; None when exempt.
        warning: Why the declaration fell back; None unless ``kind == "fallback"``.
    """

    kind: Literal["key", "fallback", "exempt"]
    key_material: Any = None
    warning: str | None = None


def resolve_loop_key_material(loop_key: Any, args: Any) -> LoopKeyResolution:
    """Resolve a tool's ``loop_key`` declaration against one call's arguments (spec §7).

    ====================================================  ==========================
    ``loop_key``                                          result
    ====================================================  ==========================
    ``None`` (absent)                                     key: the full ``args``
    ``False``                                             exempt
    list/tuple of names                                   key: ``{name: args[name]}``
                                                          for each string name present
                                                          in ``args`` (a None value
                                                          counts as present)
    empty list, or no listed name present                 fallback (full args)
    callable raising an ``Exception``                     fallback (full args)
    callable returning None                               exempt (this call only)
    callable returning anything else (even ``False``)     key: that value
    any other shape (``True``, a str, a dict, …)          fallback (full args)
    ====================================================  ==========================

    Python has no ``undefined``, so the reference's "function returned undefined" row
    has no counterpart. Malformed (unparseable) arguments arrive as their raw string;
    a field list then falls back to that string.

    Args:
        loop_key: The declaration (``Tool.loop_key``).
        args: The call's arguments: a dict, or the raw string of malformed arguments.

    Returns:
        The resolution; this function never raises for an ``Exception`` from a callable.
    """
    if loop_key is None:
        return LoopKeyResolution("key", args)
    if loop_key is False:
        return LoopKeyResolution("exempt")
    if isinstance(loop_key, list | tuple):
        subset = {}
        if isinstance(args, Mapping):
            subset = {
                name: args[name] for name in loop_key if isinstance(name, str) and name in args
            }
        if subset:
            return LoopKeyResolution("key", subset)
        why = "is empty" if not loop_key else "names no field present in the arguments"
        return LoopKeyResolution(
            "fallback", args, f"loop_key field list {why}; using the full arguments"
        )
    if callable(loop_key):
        try:
            result = loop_key(args)
        except Exception as exc:
            return LoopKeyResolution(
                "fallback", args, f"loop_key raised {exc!r}; using the full arguments"
            )
        if result is None:
            return LoopKeyResolution("exempt")
        return LoopKeyResolution("key", result)
    return LoopKeyResolution(
        "fallback",
        args,
        f"loop_key has an unsupported shape ({type(loop_key).__name__}); using the full arguments",
    )
