"""Running a command's coroutine without waiting for stuck worker threads at the end.

``asyncio.run`` joins the default executor's threads before it returns, so one file read
stuck in a thread (a slow network mount, an odd file) after a cancellation would keep
``amos run`` alive for good although its receipt was printed (issue 17, item 8).
:func:`run` closes the loop without that join; the entry point then exits even when such
a thread is still alive (``amos.__main__``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a new event loop and close it without joining worker threads."""
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        try:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()  # the default executor is shut down without waiting for its threads
