"""One block of assistant prose, rendered as Markdown and streamed in as deltas.

Why not Textual's ``Markdown`` widget and its ``MarkdownStream``: that widget mounts
one widget per Markdown block (each paragraph, list item, fence), and Textual lays
out every widget of the screen again on each frame the content grows. A
10,000-delta answer became ~770 widgets and 250–300 ms frames (about 120 deltas/s),
and every finished answer kept adding to the cost of the frames of the next one.

Here a block is one widget drawn with the line API from a few Markdown segments,
each rendered by Rich's ``Markdown`` once per width and kept. Deltas go to the live
tail, which is re-rendered at most every :data:`FLUSH_S` seconds (fast deltas
coalesce, as ``MarkdownStream`` did); once the tail holds :data:`SEGMENT_CHARS`
characters it is sealed at a blank line outside a code fence and a new tail takes the
rest. So the work per frame stays the same however long the answer, and a whole
saved transcript costs one widget per answer. Styles (headings, inline code, links,
lists) come from the app's theme; text selection is the terminal's own (Shift+drag in
most terminals).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from markdown_it import MarkdownIt
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import CodeBlock, Heading, Markdown
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from rich.theme import Theme
from textual.geometry import Size
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from amos.safe_text import printable

CSS_PATH = Path(__file__).with_suffix(".tcss")

FLUSH_S = 1 / 20
"""Longest a streamed delta waits before it is shown (seconds); deltas in between coalesce."""
SEGMENT_CHARS = 1_200
"""A live segment longer than this (characters) is sealed at its last blank line outside a fence."""

LIVE_PLAIN_CHARS = 4_000
"""A streaming tail longer than this (characters) is drawn as plain text until the turn
ends, and redrawn less often the longer it is."""

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


class _CodeBlock(CodeBlock):
    """Code indented two cells, without Rich's blank padding lines around it."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        code = str(self.text).rstrip()
        yield Syntax(code, self.lexer_name, theme=self.theme, word_wrap=True, padding=(0, 0, 0, 2))


class _AmosMarkdown(Markdown):
    """Rich ``Markdown`` with flush-left headings and one parser for every document.

    Rich builds a new ``MarkdownIt`` parser per document (about 1 ms); a replayed
    transcript has hundreds of documents, so the parser is made once and reused.
    """

    elements = {**Markdown.elements, "heading_open": _LeftHeading, "fence": _CodeBlock, "code_block": _CodeBlock}
    _parser: MarkdownIt | None = None

    def __init__(self, markup: str, code_theme: str, hyperlinks: bool = False) -> None:
        if _AmosMarkdown._parser is None:
            _AmosMarkdown._parser = MarkdownIt().enable("strikethrough").enable("table")
        self.markup = markup
        self.parsed = _AmosMarkdown._parser.parse(markup)
        self.code_theme = code_theme
        self.justify = None
        self.style = "none"
        self.hyperlinks = hyperlinks
        self.inline_code_lexer = None
        self.inline_code_theme = code_theme


def _style(value: str | None, extra: str = "") -> Style:
    try:
        return Style.parse(f"{extra} {value}".strip()) if value else Style.parse(extra or "none")
    except Exception:  # noqa: BLE001 - a theme colour Rich cannot read (ansi_*) falls back to no colour
        return Style.parse(extra or "none")


def markdown_theme(variables: Mapping[str, str]) -> Theme:
    """Rich Markdown styles drawn from a Textual theme's variables.

    Args:
        variables: ``App.theme_variables`` (``primary``, ``accent``, ``foreground``…).
    """
    return _markdown_theme(variables.get("primary"), variables.get("accent"), variables.get("foreground"))


@lru_cache(maxsize=16)
def _markdown_theme(primary: str | None, accent: str | None, foreground: str | None) -> Theme:
    muted = f"dim {foreground}" if foreground else "dim"
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
        markdown = _AmosMarkdown(self.text, code_theme="ansi_dark" if self.dark else "ansi_light")
        with console.use_theme(markdown_theme(self.variables)):
            lines = console.render_lines(markdown, options, pad=False, new_lines=True)
        for line in lines:
            yield from line


class AssistantText(Widget):
    """Assistant text of one model turn, rendered as Markdown.

    One widget, drawn with the line API: the text is kept as sealed segments (each
    rendered once per width and style, then reused) and a live tail re-rendered at
    most every :data:`FLUSH_S` seconds while deltas arrive.

    Args:
        text: initial text (a whole turn when replaying a saved transcript).
    """

    DEFAULT_CSS = """
    AssistantText {
        height: auto;
    }
    """

    def __init__(self, text: str = "") -> None:
        super().__init__()
        text = printable(text)  # model text never drives the terminal
        self._chunks: list[str] = [text] if text else []
        self._joined = len(self._chunks)
        self._text = text
        parts = segments_of(text)
        self._segments: list[str] = parts[:-1]
        self._live = parts[-1]
        self._sealed = len(text) - len(self._live)
        self._rendered: list[tuple[tuple[object, ...], list[Strip]]] = []
        self._lines: tuple[tuple[object, ...], list[Strip]] | None = None
        self._flush_timer: Timer | None = None
        self._streaming = False

    @property
    def text(self) -> str:
        """The raw text received so far."""
        if self._joined != len(self._chunks):
            self._text = "".join(self._chunks)
            self._joined = len(self._chunks)
        return self._text

    @property
    def segments(self) -> list[str]:
        """The Markdown documents the text is drawn as (the last one is the live tail)."""
        return [*self._segments, self._live]

    async def write(self, delta: str) -> None:
        """Append a streamed delta; it is shown within :data:`FLUSH_S` seconds.

        Args:
            delta: the next piece of assistant text.
        """
        if not delta:
            return
        delta = printable(delta)
        self._chunks.append(delta)
        self._streaming = True
        if self._flush_timer is None and self.is_mounted:
            # A tail that cannot be sealed (a long code fence) is redrawn less often the
            # longer it gets, so each redraw's cost stays a small share of the time.
            pending = len(self._live) + sum(map(len, self._chunks[self._joined:]))
            self._flush_timer = self.set_timer(FLUSH_S * max(1.0, pending / LIVE_PLAIN_CHARS), self._flush)
        await asyncio.sleep(0)  # a fast stream still lets the screen and the keys have their turn

    def _flush(self) -> None:
        self._flush_timer = None
        parts = segments_of(self.text[self._sealed:])
        self._segments.extend(parts[:-1])
        self._sealed += sum(map(len, parts[:-1]))
        self._live = parts[-1]
        self._lines = None
        self.refresh(layout=True)

    async def finish(self) -> None:
        """Show every delta received and stop streaming into this block."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
        self._streaming = False
        self._flush()

    # ------------------------------------------------------------------ drawing

    def _render_segment(self, source: str, width: int, style: Style) -> list[Strip]:
        if not source.strip():
            return []
        console = self.app.console
        options = console.options.update(width=width, height=None, highlight=False)
        markdown = MarkdownText(source, self.app.theme_variables, self.app.current_theme.dark)
        return [Strip(line, width) for line in console.render_lines(markdown, options, style=style, pad=True)]

    def lines(self, width: int) -> list[Strip]:
        """Every rendered line at ``width`` (cells): sealed segments from their cache, then the tail."""
        style = self.rich_style
        key = (width, style, self.app.theme)
        if self._lines is not None and self._lines[0] == (key, len(self._segments), self._live):
            return self._lines[1]
        rendered = self._rendered
        del rendered[len(self._segments):]
        out: list[Strip] = []
        for index, source in enumerate(self._segments):
            if index < len(rendered) and rendered[index][0] == key:
                strips = rendered[index][1]
            else:
                strips = self._render_segment(source, width, style)
                if index < len(rendered):
                    rendered[index] = (key, strips)
                else:
                    rendered.append((key, strips))
            if strips:
                out.extend(strips)
                out.append(Strip.blank(width, style))
        if self._streaming and len(self._live) > LIVE_PLAIN_CHARS:
            # While it streams, a long unsealed tail (inside a code fence) is drawn as
            # plain text: Markdown with syntax highlighting took 0.7 s per redraw at
            # 23 KB and froze the app for minutes. The finished turn is Markdown again.
            tail = [Strip(line, width) for line in self.app.console.render_lines(
                Text(self._live), self.app.console.options.update(width=width, height=None), style=style, pad=True)]
        else:
            tail = self._render_segment(self._live, width, style)
        if tail:
            out.extend(tail)
        elif out:
            out.pop()
        self._lines = ((key, len(self._segments), self._live), out)
        return out

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The number of lines the text takes at ``width``."""
        return len(self.lines(width))

    def render_line(self, y: int) -> Strip:
        """One rendered line (blank below the text)."""
        width = self.size.width
        lines = self.lines(width)
        return lines[y] if y < len(lines) else Strip.blank(width, self.rich_style)
