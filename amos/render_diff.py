"""A unified diff as Rich text: the TUI's ``/diff`` and ``amos diff`` on a terminal (issue 20).

Colors by line, as ``git diff --color`` does: file headers bold, hunk headers cyan,
added lines green, removed lines red, amos's own ``# …`` notes (exact modes, empty
folders) dim. Control characters are escaped first (:func:`amos.safe_text.printable`).
"""

from __future__ import annotations

from rich.text import Text

from amos.safe_text import printable

_STYLES = (
    ("diff --git ", "bold"), ("index ", "bold"), ("--- ", "bold"), ("+++ ", "bold"),
    ("new file mode", "bold"), ("deleted file mode", "bold"), ("old mode", "bold"), ("new mode", "bold"),
    ("@@", "cyan"), ("+", "green"), ("-", "red"), ("# ", "dim italic"),
)


def line_style(line: str) -> str:
    """The Rich style of one diff line ("" for context lines)."""
    for prefix, style in _STYLES:
        if line.startswith(prefix):
            return style
    return ""


def diff_renderable(text: str) -> Text:
    """``text`` (a unified diff or a ``--stat`` summary) styled line by line."""
    out = Text()
    for line in printable(text).splitlines(keepends=True):
        out.append(line, style=line_style(line) or None)
    return out


__all__ = ["diff_renderable", "line_style"]
