"""Console entry point: ``amos`` and ``python -m amos``.

``amos --version`` is answered before the CLI framework is imported, so it costs
only the interpreter's start-up.

Ctrl+C exits 130 quietly from the first statement of :func:`main` on (issue 17 item
11): while the CLI is imported (a few hundred milliseconds of import machinery, where a
``KeyboardInterrupt`` used to print a traceback) SIGINT ends the process at once, as
there is nothing to clean up yet; once the CLI is loaded it raises ``SystemExit(130)``,
which click does not turn into "Aborted!" and exit 1. A run replaces this with its own
handling (a stop receipt, exit 130) while it is in progress. This module imports only
what the interpreter has already loaded (``_signal``, ``os``, ``sys``), so the window
before the handler is tiny.
"""

from __future__ import annotations

import _signal  # the C module behind ``signal``: already loaded, so importing it costs no path search
import os
import sys

INTERRUPTED = 130
"""Exit code after Ctrl+C (128 + SIGINT), as a shell reports a process killed by it."""


def _exit_at_once(signum: int, frame: object) -> None:
    """SIGINT during start-up: exit now, without a traceback (nothing is open yet)."""
    os._exit(INTERRUPTED)


def _exit_quietly(signum: int, frame: object) -> None:
    """SIGINT once the CLI is loaded: a clean ``SystemExit`` (``finally`` blocks run)."""
    raise SystemExit(INTERRUPTED)


def main() -> None:
    """Run the ``amos`` command line."""
    handled = _signal.getsignal(_signal.SIGINT) is not _signal.SIG_IGN  # an ignoring parent is obeyed
    if handled:
        _signal.signal(_signal.SIGINT, _exit_at_once)
    try:
        if sys.argv[1:] == ["--version"]:
            from amos import __version__

            print(f"amos {__version__}")
            return
        from amos.cli import main as cli_main

        if handled:
            _signal.signal(_signal.SIGINT, _exit_quietly)
        try:
            cli_main()
        except SystemExit as done:
            _leave(done.code)
            raise
        _leave(0)
    except KeyboardInterrupt:
        raise SystemExit(INTERRUPTED) from None


def _leave(code: object) -> None:
    """Exit now when a worker thread is still alive (a file read stuck on a slow or odd
    file after a cancel): its result is no longer wanted, and the interpreter would wait
    for it at exit for ever (issue 17, item 8). Output is flushed first."""
    import threading

    if not any(t.is_alive() and not t.daemon and t is not threading.main_thread() for t in threading.enumerate()):
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


if __name__ == "__main__":
    main()
