"""Provider-safe names of MCP tools and prompts: ``mcp__SERVER__TOOL`` (issue 18, "Tools").

Every provider amos talks to accepts tool names matching ``[A-Za-z_][A-Za-z0-9_-]{0,63}``
(OpenAI and Anthropic: letters, digits, ``_`` and ``-``, at most 64; Gemini also starts
with a letter or ``_``). A name that fits is used as is. Any other is shortened
deterministically: unsupported characters become ``_``, the text is cut, and ``_`` plus
the first 8 hex digits of the SHA-256 of the full name are appended, so two different
full names never share a shortened one in practice and the same server always gets the
same names. The full name is kept for display.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME_CHARS = 64
"""Longest tool name every provider accepts."""

PREFIX = "mcp"
"""The first part of every MCP tool and prompt command name."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_HASH_CHARS = 8


def full_name(server: str, name: str) -> str:
    """``mcp__SERVER__NAME``, exactly as the server spells its tool or prompt."""
    return f"{PREFIX}__{server}__{name}"


def safe_name(full: str, limit: int = MAX_NAME_CHARS) -> str:
    """``full`` when providers accept it, else its deterministic shortening.

    Args:
        full: the full name (``mcp__git__git_status``).
        limit: longest accepted name (characters).

    Returns:
        A name of at most ``limit`` characters of ``[A-Za-z0-9_-]``: ``full`` itself, or
        ``<cleaned prefix>_<8 hex digits>``.
    """
    if len(full) <= limit and not _UNSAFE.search(full) and full[:1].isalpha():
        return full
    digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    cleaned = _UNSAFE.sub("_", full)
    if not cleaned[:1].isalpha():
        cleaned = "m" + cleaned
    return f"{cleaned[: limit - _HASH_CHARS - 1]}_{digest}"


def tool_names(server: str, name: str) -> tuple[str, str]:
    """``(provider-safe name, full name)`` of one MCP tool or prompt."""
    full = full_name(server, name)
    return safe_name(full), full


__all__ = ["MAX_NAME_CHARS", "PREFIX", "full_name", "safe_name", "tool_names"]
