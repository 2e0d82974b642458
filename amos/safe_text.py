"""Text from the model or the workspace, made safe to draw or print (TUI and CLI).

Model output, tool names, arguments and file contents may hold terminal control
sequences (``ESC[14D`` moves the cursor back over what was drawn, OSC sets the window
title). Drawn raw, a command could be made to look like another in the approval
dialog. :func:`printable` shows every control character except newline and tab as a
visible escape.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters (C0 but newline and tab, DEL, C1) shown as
    ``\\xNN`` escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def capped(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a note of what was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… {len(text) - limit:,} more characters not shown"
