"""One block of assistant prose, rendered as Markdown and streamed in as deltas.

Why not Textual's ``Markdown`` widget and its ``MarkdownStream``: that widget mounts
one widget per Markdown block (each paragraph, list item, fence), and Textual lays
out every widget of the screen again on each frame the content grows. A
10,000-delta answer became ~770 widgets and 250–300 ms frames (about 120 deltas/s),
and every finished answer kept adding to the cost of the frames of the next one.

Here a block is a short column of :class:`MarkdownSegment` widgets, each one Rich
``Markdown`` renderable in a ``Static`` (so its rendered lines are cached and cost
nothing while they do not change). Deltas go to the last, live segment, which is
re-rendered at most every :data:`FLUSH_S` seconds (fast deltas coalesce, as
``MarkdownStream`` did); once it holds :data:`SEGMENT_CHARS` characters it is sealed at
a blank line outside a code fence and a new live segment takes the rest. So the work
per frame stays the same however long the answer, and a long saved answer replays as
a few segments rather than hundreds of widgets. Styles (headings, inline code, links,
lists) come from the app's theme.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import Heading, Markdown
from rich.style import Style
from rich.theme import Theme
from textual.app import ComposeResult
from textual.geometry import Size
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

CSS_PATH = Path(__file__).with_suffix(".tcss")

FLUSH_S = 1 / 20
"""Longest a streamed delta waits before it is shown (seconds); deltas in between coalesce."""
SEGMENT_CHARS = 1_200
"""A live segment longer than this (characters) is sealed at its last blank line outside a fence."""

_FENCE = re.compile(r"^[ ]{0,3}(```|~~~)", re.MULTILINE)


def split_point(text: str) -> int:
    """Where ``text`` can be cut into two Markdown documents that render as one.

    Args:
        text: Markdown source.

    Returns:
        The offset just after the last blank line that is not inside a code fence, or
        0 when there is none.
    """
    end = len(text)
    while True:
        cut = text.rfind("\n\n", 0, end)
        if cut <= 0:
            return 0
        if len(_FENCE.findall(text, 0, cut)) % 2 == 0:
            return cut + 2
        end = cut


def segments_of(text: str, size: int = SEGMENT_CHARS) -> list[str]:
    """``text`` cut into segments of about ``size`` characters at safe blank lines.

    Args:
        text: a whole Markdown answer.
        size: the segment length to aim for (characters).
    """
    out: list[str] = []
    while len(text) > size:
        cut = split_point(text[: size * 2])
        if not cut:
            cut = split_point(text)
            if not cut:
                break
        out.append(text[:cut])
        text = text[cut:]
    out.append(text)
    return out


class _LeftHeading(Heading):
    """Headings flush left (Rich centres ``#`` headings)."""

    LEVEL_ALIGN = dict.fromkeys(("h1", "h2", "h3", "h4", "h5", "h6"), "left")


class _AmosMarkdown(Markdown):
    elements = {**Markdown.elements, "heading_open": _LeftHeading}


def _style(value: str | None, extra: str = "") -> Style:
    try:
        return Style.parse(f"{extra} {value}".strip()) if value else Style.parse(extra or "none")
    except Exception:  # noqa: BLE001 - a theme colour Rich cannot read (ansi_*) falls back to no colour
        return Style.parse(extra or "none")


def markdown_theme(variables: Mapping[str, str]) -> Theme:
    """Rich Markdown styles drawn from a Textual theme's variables.

    Args:
        variables: ``App.theme_variables`` (``primary``, ``accent``, ``text-muted``…).
    """
    primary, accent = variables.get("primary"), variables.get("accent")
    muted = variables.get("text-muted")
    return Theme({
        "markdown.h1": _style(primary, "bold underline"),
        "markdown.h2": _style(primary, "bold"),
        "markdown.h3": Style(bold=True),
        "markdown.h4": Style(bold=True, italic=True),
        "markdown.h5": Style(italic=True),
        "markdown.h6": Style(italic=True, dim=True),
        "markdown.code": _style(accent, "bold"),
        "markdown.code_block": Style(),
        "markdown.block_quote": _style(muted, "italic"),
        "markdown.list": Style(),
        "markdown.item.bullet": _style(primary, "bold"),
        "markdown.item.number": _style(primary),
        "markdown.link": _style(accent, "underline"),
        "markdown.link_url": _style(muted, "underline"),
        "markdown.hr": _style(muted),
        "markdown.table.border": _style(muted),
        "markdown.table.header": Style(bold=True),
    }, inherit=False)


class MarkdownText:
    """A Rich renderable: ``text`` as Markdown, styled from a Textual theme.

    Args:
        text: Markdown source.
        variables: the theme's variables (``App.theme_variables``).
        dark: True for a dark theme (code blocks pick their palette from it).
    """

    def __init__(self, text: str, variables: Mapping[str, str], dark: bool = True) -> None:
        self.text = text
        self.variables = variables
        self.dark = dark

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        markdown = _AmosMarkdown(self.text, code_theme="ansi_dark" if self.dark else "ansi_light",
                                 hyperlinks=False)
        with console.use_theme(markdown_theme(self.variables)):
            lines = console.render_lines(markdown, options, pad=False, new_lines=True)
        for line in lines:
            yield from line


class MarkdownSegment(Widget):
    """Part of an assistant block: one Markdown document, rendered once per width.

    The rendered lines serve both the layout (the height) and the screen, and are
    kept until the text, the width or the style changes.

    Args:
        text: Markdown source.
    """

    DEFAULT_CSS = """
    MarkdownSegment {
        height: auto;
    }
    """

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.source = text
        self._key: tuple[object, ...] | None = None
        self._strips: list[Strip] = []

    def set_source(self, text: str) -> None:
        """Show ``text`` instead (re-rendered at the next refresh)."""
        if text != self.source:
            self.source = text
            self.refresh(layout=True)

    def lines(self, width: int) -> list[Strip]:
        """The rendered lines at ``width`` (cells)."""
        style = self.rich_style
        key = (width, self.source, style, self.app.theme)
        if key != self._key:
            console = self.app.console
            options = console.options.update(width=width, height=None, highlight=False)
            markdown = MarkdownText(self.source, self.app.theme_variables, self.app.current_theme.dark)
            rendered = console.render_lines(markdown, options, style=style, pad=True) if self.source else []
            self._strips = [Strip(line, width) for line in rendered]
            self._key = key
        return self._strips

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The number of lines the text takes at ``width``."""
        return len(self.lines(width))

    def render_line(self, y: int) -> Strip:
        """One rendered line (blank below the text)."""
        width = self.size.width
        lines = self.lines(width)
        return lines[y] if y < len(lines) else Strip.blank(width, self.rich_style)


class AssistantText(Widget):
    """Assistant text of one model turn, rendered as Markdown.

    Args:
        text: initial text (a whole turn when replaying a saved transcript).
    """

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self._chunks: list[str] = [text] if text else []
        self._joined = len(self._chunks)
        self._text = text
        self._sealed = 0
        self._flush_timer: Timer | None = None
        self._live: MarkdownSegment | None = None

    def compose(self) -> ComposeResult:
        """The segments of the initial text; the last one is live."""
        parts = segments_of(self._text)
        for part in parts[:-1]:
            yield MarkdownSegment(part).add_class("-sealed")
        self._sealed = len(self._text) - len(parts[-1])
        self._live = MarkdownSegment(parts[-1])
        yield self._live

    @property
    def text(self) -> str:
        """The raw text received so far."""
        if self._joined != len(self._chunks):
            self._text = "".join(self._chunks)
            self._joined = len(self._chunks)
        return self._text

    async def write(self, delta: str) -> None:
        """Append a streamed delta; it is shown within :data:`FLUSH_S` seconds.

        Args:
            delta: the next piece of assistant text.
        """
        if not delta:
            return
        self._chunks.append(delta)
        if self._flush_timer is None and self.is_mounted:
            self._flush_timer = self.set_timer(FLUSH_S, self._flush)
        await asyncio.sleep(0)  # a fast stream still lets the screen and the keys have their turn

    def _flush(self) -> None:
        self._flush_timer = None
        live = self._live
        if live is None:
            return
        parts = segments_of(self.text[self._sealed:])
        if len(parts) == 1:
            live.set_source(parts[0])
            return
        live.set_source(parts[0])
        live.add_class("-sealed")
        new = [MarkdownSegment(part).add_class("-sealed") for part in parts[1:-1]]
        self._live = MarkdownSegment(parts[-1])
        self._sealed += sum(map(len, parts[:-1]))
        self.mount_all([*new, self._live])

    async def finish(self) -> None:
        """Show every delta received and stop streaming into this block."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
        if self.is_mounted:
            self._flush()
