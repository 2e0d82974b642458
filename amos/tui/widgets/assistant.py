"""One block of assistant prose, streamed in as deltas.

Deltas are appended to this block only (through Textual's ``MarkdownStream``,
which coalesces fast writes and re-parses only the tail of the document), so a
long transcript is never re-rendered per delta.
"""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownStream

CSS_PATH = Path(__file__).with_suffix(".tcss")


class AssistantText(Markdown):
    """Assistant text of one model turn, rendered as Markdown.

    Args:
        text: initial text (a whole turn when replaying a saved transcript).
    """

    def __init__(self, text: str = "") -> None:
        super().__init__(text, open_links=False)
        self._chunks: list[str] = [text] if text else []
        self._stream: MarkdownStream | None = None

    @property
    def text(self) -> str:
        """The raw text received so far."""
        return "".join(self._chunks)

    async def write(self, delta: str) -> None:
        """Append a streamed delta (the widget must be mounted).

        Args:
            delta: the next piece of assistant text.
        """
        if not delta:
            return
        self._chunks.append(delta)
        if self._stream is None:
            self._stream = Markdown.get_stream(self)
        await self._stream.write(delta)

    async def finish(self) -> None:
        """Flush pending deltas and stop streaming into this block."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.stop()
