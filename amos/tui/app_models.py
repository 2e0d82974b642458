"""The TUI's ``/model`` picker (issue 21): ``/model`` with no argument lists the models.

A collaborator of :class:`~amos.tui.app.AmosApp` (``app.models``). The listing is the
host's :class:`~amos.engine.ModelCatalog` — the same as ``amos models`` — built on a
worker thread (asking an OpenAI-compatible server takes up to a few seconds); the choice
is sent as the line ``/model PROVIDER:MODEL``, exactly as if it were typed.
Presentation only.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from amos.slash import parse_line
from amos.tui.screens.model_picker import ModelPickerScreen
from amos.tui.widgets.prompt_input import PromptInput

if TYPE_CHECKING:
    from amos.tui.app import AmosApp

SERVER_TIMEOUT_S = 2.0
"""How long the picker waits for an OpenAI-compatible server's list (seconds)."""


class ModelPicking:
    """Opens the model picker for ``/model`` and sends the choice.

    Args:
        app: the app (its runner may be replaced by ``/new`` or ``/session load``).
    """

    def __init__(self, app: AmosApp):
        self.app = app

    @staticmethod
    def wants_picker(line: str, result: Any) -> bool:
        """``/model`` with no argument succeeded (it showed the model in force): pick one."""
        parsed = parse_line(line)
        return parsed.name == "model" and not parsed.rest.strip() and bool(getattr(result, "ok", False))

    def report(self) -> dict[str, Any]:
        """The host's model listing as a dict (blocking: asks the server)."""
        from amos.engine import ModelCatalog

        return ModelCatalog.for_host(self.app.runner).report(timeout_s=SERVER_TIMEOUT_S).to_dict()

    async def pick(self) -> None:
        """Build the listing off the event loop, then show the picker."""
        conv = self.app.conversation
        await conv.add_notice("listing models…")
        report = await asyncio.to_thread(self.report)

        async def chosen(spec: str | None) -> None:
            if not spec:
                await conv.add_notice(f"model unchanged: {self.app.runner.model_spec}")
                return
            field = self.app.prompt_input
            self.app.post_message(PromptInput.Submitted(field, f"/model {spec}"))

        self.app.push_screen(ModelPickerScreen(report), chosen)
