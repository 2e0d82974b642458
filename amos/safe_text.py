"""Text from the model or the workspace, made safe to draw or print (TUI and CLI).

Model output, tool names, arguments and file contents may hold terminal control
sequences (``ESC[14D`` moves the cursor back over what was drawn, OSC sets the window
title). Drawn raw, a command could be made to look like another in the approval
dialog. :func:`printable` shows every control character except newline and tab as a
visible escape.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with control characters shown as visible escapes: C0 (but newline and
    tab), DEL and C1 as ``\\xNN`` — so no ESC/CSI/OSC sequence (clear the screen, set the
    title, write the clipboard, hidden links) reaches a terminal — and the bidirectional
    embedding, override and isolate controls (U+202A–U+202E, U+2066–U+2069) as
    ``\\uNNNN``, so text cannot be drawn reordered (issue 17, item 4a)."""
    return _CONTROL.sub(_escape, text)


def capped(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a note of what was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… {len(text) - limit:,} more characters not shown"
