"""A host notice: information shown apart from assistant prose.

NoticeLines carry host facts (loop events, completion checks, approvals, errors, the
demo-mode banner). They are rendered as plain text, never markup, so text that
came from a model or a file cannot restyle the screen (DESIGN.md rule 5).
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import Static

CSS_PATH = Path(__file__).with_suffix(".tcss")

LEVEL_GLYPHS = {"info": "ℹ", "warning": "⚠", "error": "✘", "banner": "◆", "approval": "⏸",
                "approved": "✓", "denied": "⊘"}
"""Glyph shown before a notice of each level, so notices read without colour."""


class NoticeLine(Static):
    """One notice line (or a few lines) in the conversation.

    Args:
        text: the notice text, shown literally.
        level: ``info``, ``warning``, ``error``, ``banner``, ``approval`` (a decision
            is needed), ``approved`` or ``denied``; selects the glyph and the
            ``-LEVEL`` CSS class.
    """

    def __init__(self, text: str, level: str = "info") -> None:
        self.level = level if level in LEVEL_GLYPHS else "info"
        self.text = text
        super().__init__(Text(f"{LEVEL_GLYPHS[self.level]} {text}"), classes=f"-{self.level}")
