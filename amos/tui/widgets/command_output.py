"""What a slash command returned, shown under the command line.

Commands return plain text (and JSON-ready data) for every front end. The text is
shown literally; where the data has a known table shape (``/help``'s commands,
``/tools``' tools) it is laid out as a table so long rows wrap within their column
instead of across the screen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

CSS_PATH = Path(__file__).with_suffix(".tcss")

_HELP_FOOTER = "A line that does not start with / is a prompt; //text sends the prompt /text."


def _table(*columns: str) -> Table:
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=False)
    for index, name in enumerate(columns):
        table.add_column(name, no_wrap=index == 0, overflow="fold")
    return table


def command_renderable(text: str, data: Any) -> RenderableType:
    """A renderable for a command's output.

    Args:
        text: the command's plain-text rendering.
        data: the command's JSON-ready result (``SlashResult.result``).

    Returns:
        A Rich table for ``/help`` (``{"commands": [...]}``) and ``/tools``
        (``{"tools": [...]}``) results; otherwise ``text`` as literal text.
    """
    if isinstance(data, dict) and isinstance(data.get("commands"), list):
        table = _table("command", "what it does")
        for row in data["commands"]:
            table.add_row(Text(str(row.get("usage", ""))), Text(str(row.get("summary", ""))))
        table.caption = _HELP_FOOTER
        table.caption_justify = "left"
        return table
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        table = _table("tool", "effect", "permission")
        for row in data["tools"]:
            table.add_row(Text(str(row.get("name", ""))), Text(str(row.get("effect", ""))),
                          Text(str(row.get("permission", ""))))
        return table
    return Text(text)


class CommandOutput(Static):
    """The output of one slash command.

    Args:
        text: the command's plain-text rendering (kept as :attr:`text`).
        data: the command's JSON-ready result, used to pick a table layout.
        ok: False when the command ran and failed (``-failed`` CSS class).
    """

    def __init__(self, text: str, data: Any = None, ok: bool = True) -> None:
        self.text = text
        super().__init__(command_renderable(text, data), classes="" if ok else "-failed")
