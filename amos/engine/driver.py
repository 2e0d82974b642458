"""Running one thing at a time on a host: a run (an async iterator of events) or a
compaction, with cancellation (``Host.cancel``) and the latest run's loop kept for live
diagnostics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from amos.engine.state import END
from amos.errors import SessionError
from amos.events import RunEvent

if TYPE_CHECKING:
    from amos.engine.loop import TurnLoop


class RunDriver:
    """Owns the one active task of a host and its cancellation."""

    def __init__(self) -> None:
        self._task: asyncio.Task | None = None
        self._cancel_requested = False
        self.live: TurnLoop | None = None
        """The loop of the latest run (its diagnostics while it runs)."""

    @property
    def busy(self) -> bool:
        """True while a run (or a compaction) is executing."""
        return self._task is not None and not self._task.done()

    def ensure_idle(self) -> None:
        """Raises ``SessionError('busy')`` while something runs."""
        if self.busy:
            raise SessionError("busy", "a run is already active in this session")

    def cancel(self, why: str | None = None) -> None:
        """Cancel what runs (once); a run then ends ``user_abort`` (``why``: the
        cancellation's message, e.g. ``"SIGTERM"``, named in the receipt's detail)."""
        if self.busy and not self._cancel_requested:
            self._cancel_requested = True
            assert self._task is not None
            if why and self.live is not None:
                self.live.run.cancelled_by = why
            self._task.cancel()

    async def drive(self, loop: TurnLoop, body: Callable[[], Awaitable[None]]) -> AsyncIterator[RunEvent]:
        """Run ``loop.execute(body)`` as the active task and yield its events until
        ``RunFinished``; a consumer that stops early cancels the run and waits for it."""
        queue: asyncio.Queue = asyncio.Queue()
        loop.run.queue = queue
        self._cancel_requested = False
        self.live = loop
        self._task = asyncio.create_task(loop.execute(body))
        try:
            while True:
                event = await queue.get()
                if event is END:
                    break
                yield event
        finally:
            task = self._task
            if task is not None and not task.done():
                self.cancel()
                try:
                    await task
                except BaseException:  # noqa: BLE001 - the run already recorded its stop
                    pass
            self._task = None

    @contextmanager
    def holding(self) -> Any:
        """Mark the current task as the active one (a compaction awaited by a front end),
        so a run or a host edit meanwhile is refused as busy and ``cancel`` reaches it."""
        self._task = asyncio.current_task()
        self._cancel_requested = False
        try:
            yield
        finally:
            self._task = None
