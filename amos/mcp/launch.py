"""Starting stdio MCP servers safely: a minimal environment, death with amos, a stderr log.

Issue 18, "Lifecycle":

- **Environment.** A stdio server gets only :data:`MINIMAL_ENV_NAMES` from amos's
  environment (those set), plus the ``env`` its config names — never the provider key
  variables or anything else amos happens to have. (The SDK also copies ``HOME``,
  ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM`` and ``USER`` from the process environment.)
- **Dying with amos.** On Linux the server is started through :data:`SUPERVISOR`, a
  few lines of Python that set ``PR_SET_PDEATHSIG`` (so the kernel signals it when amos
  dies, SIGKILL included), then fork the server into the new process group the SDK
  creates and wait for it. When amos dies, the supervisor kills the whole group —
  the server and anything it started (``npx`` and ``uvx`` launch the real server as a
  grandchild). SIGTERM reaches the whole group anyway, so the SDK's own shutdown (close
  stdin, SIGTERM the group, SIGKILL) works unchanged; and when the server exits, the
  supervisor ends what it left behind in its group (SIGTERM, then SIGKILL 0.1 s later),
  itself last, so a server's children never outlive it.
  The death signal fires when the *thread* that started the server ends, so the hub
  must run on an event loop whose thread lives as long as the servers should.
  Elsewhere, servers are expected to exit when their stdin closes (the MCP spec).
- **Log.** The server's stderr goes straight to ``<log_dir>/mcp-<server>.log`` (a
  file, so a chatty server never blocks on a pipe); a start-up failure quotes its
  last lines.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

MINIMAL_ENV_NAMES = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
    "LC_MESSAGES", "TZ", "TMPDIR", "TEMP", "TMP", "XDG_RUNTIME_DIR", "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME", "XDG_DATA_HOME", "SYSTEMROOT", "SYSTEMDRIVE", "COMSPEC", "PATHEXT",
    "WINDIR", "APPDATA", "LOCALAPPDATA", "USERPROFILE", "PROGRAMDATA",
)
"""Variables a stdio server inherits from amos (when set); everything else must be in its ``env``."""

MAX_LOG_BYTES = 1024 * 1024
"""A server log larger than this at start is moved to ``.log.1`` (one old copy kept)."""

STDERR_TAIL_LINES = 3
"""Lines of a server's stderr quoted when it fails."""

SUPERVISOR = r"""
import ctypes, os, signal, sys, time
parent = int(sys.argv[1])
def kill_group(*_):
    os.killpg(0, signal.SIGKILL)
signal.signal(signal.SIGUSR1, kill_group)
signal.signal(signal.SIGTERM, lambda *_: None)
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGUSR1)
if os.getppid() != parent:
    kill_group()
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as exc:
        sys.stderr.write("amos: cannot run %r: %s\n" % (sys.argv[2], exc.strerror))
        os._exit(127)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
while True:
    try:
        status = os.waitpid(pid, 0)[1]
        break
    except ChildProcessError:
        os._exit(0)
os.killpg(0, signal.SIGTERM)
time.sleep(0.1)
os.killpg(0, signal.SIGKILL)
"""
"""The Linux supervisor run as ``python -I -S -c SUPERVISOR AMOS_PID COMMAND ARGS…``."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def server_env(configured: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """A stdio server's environment: :data:`MINIMAL_ENV_NAMES` from ``environ`` plus ``configured``.

    Args:
        configured: the server's expanded ``env``.
        environ: amos's environment.
    """
    env = {name: environ[name] for name in MINIMAL_ENV_NAMES if environ.get(name)}
    env.update(configured)
    return env


def supervised(command: str, args: Iterable[str]) -> tuple[str, list[str]]:
    """``(command, args)`` to spawn so the server dies with amos (Linux; unchanged elsewhere)."""
    if not sys.platform.startswith("linux"):
        return command, list(args)
    return sys.executable, ["-I", "-S", "-c", SUPERVISOR, str(os.getpid()), command, *args]


def log_path(log_dir: Path, server: str) -> Path:
    """``<log_dir>/mcp-<server>.log`` (server names are already file-name safe)."""
    return Path(log_dir) / f"mcp-{server}.log"


def open_log(path: Path, header: str) -> tuple[IO[str], int]:
    """Open a server log for appending, rotating a large one, and write a header line.

    Args:
        path: the log file (its folder is created, mode 0700).
        header: what is starting (already masked), e.g. ``starting time: python -m …``.

    Returns:
        ``(file, offset)``: the open file (its descriptor becomes the server's stderr)
        and where this start's output begins.

    Raises:
        OSError: the folder or file cannot be created.
    """
    from amos.paths import ensure_dir

    ensure_dir(path.parent)
    try:
        if path.stat().st_size > MAX_LOG_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass
    handle = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 - lives as long as the server
    try:
        os.chmod(path, 0o600)
    except OSError:
        pass
    handle.write(f"=== {datetime.now(UTC).isoformat(timespec='seconds')} {header}\n")
    handle.flush()
    return handle, handle.tell()


class MaskedStderr:
    """A server's stderr, masked line by line on its way to the log (issue 18: server
    secrets and provider keys never reach disk).

    The server writes into a pipe (:attr:`errlog`, its stderr); a daemon thread reads
    it, masks each line (the values and their common encodings,
    :func:`amos.evidence.redact.masker_for`) and appends it to the log file, so a
    chatty server never blocks. A line is masked whole (a secret split across reads is
    still caught); one longer than ``MAX_LINE_BYTES`` is masked in pieces of that size.

    Args:
        log: the open log file (:func:`open_log`); written by the thread only.
        secrets: the values to mask.
    """

    MAX_LINE_BYTES = 65536

    def __init__(self, log: IO[str], secrets: Iterable[str]):
        import threading

        from amos.evidence.redact import masker_for

        self.log = log
        self._lock = threading.Lock()
        self._masker = masker_for(tuple(s for s in secrets if s))
        read_fd, write_fd = os.pipe()
        self._read = os.fdopen(read_fd, "rb", buffering=0)
        self.errlog: IO[str] = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._thread = threading.Thread(target=self._pump, name="amos-mcp-stderr", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        pending = b""
        try:
            while True:
                chunk = self._read.read(65536)
                if not chunk:
                    break
                pending += chunk
                while b"\n" in pending or len(pending) > self.MAX_LINE_BYTES:
                    cut = pending.find(b"\n") + 1 or self.MAX_LINE_BYTES
                    self._write(pending[:cut])
                    pending = pending[cut:]
            if pending:
                self._write(pending)
        except (OSError, ValueError):
            pass
        finally:
            try:
                self._read.close()
            except OSError:
                pass
            with self._lock:
                try:
                    self.log.close()
                except OSError:
                    pass

    def _write(self, data: bytes) -> None:
        self.write(data.decode("utf-8", "replace"))

    def write(self, text: str) -> None:
        """Append ``text`` to the log, masked (amos's own ``## …`` lines too); never raises."""
        with self._lock:
            try:
                self.log.write(self._masker.mask(text))
                self.log.flush()
            except (OSError, ValueError):
                pass

    def settle(self, max_s: float = 0.5) -> None:
        """Wait (up to ``max_s`` seconds) until what the server wrote so far is in the log:
        the pipe holds nothing unread and no line is being written (before quoting the
        log's tail in an error)."""
        import select
        import time

        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline and self._thread.is_alive():
            try:
                pending = select.select([self._read], [], [], 0)[0]
            except (OSError, ValueError):
                return
            if not pending and not self._lock.locked():
                time.sleep(0.02)  # the pump may hold a chunk it just read: let it write
                if not select.select([self._read], [], [], 0)[0] and not self._lock.locked():
                    return
            time.sleep(0.01)

    def close(self, wait_s: float = 1.0) -> None:
        """Close amos's write end; the thread writes what is left and closes the log once
        the server's copy is closed too (waited for ``wait_s`` seconds)."""
        try:
            self.errlog.close()
        except OSError:
            pass
        self._thread.join(wait_s)


def stderr_tail(path: Path, offset: int, secrets: Iterable[str] = (), lines: int = STDERR_TAIL_LINES) -> list[str]:
    """The last non-empty lines a server wrote to its log since ``offset``, masked and cleaned.

    Lines amos itself wrote (``=== `` headers, ``## `` notes) are skipped.

    Each line is cut at 200 characters; control characters become ``?``.
    """
    try:
        with open(path, "rb") as handle:
            handle.seek(max(offset, os.path.getsize(path) - 65536))
            data = handle.read().decode("utf-8", "replace")
    except OSError:
        return []
    found = [line.strip() for line in data.splitlines()
             if line.strip() and not line.startswith(("=== ", "## "))]
    shown = []
    ordered = sorted((s for s in secrets if s), key=len, reverse=True)
    for line in found[-lines:]:
        for secret in ordered:
            line = line.replace(secret, "****")
        line = _CONTROL.sub("?", line)
        shown.append(line if len(line) <= 200 else line[:199] + "…")
    return shown


__all__ = ["MINIMAL_ENV_NAMES", "SUPERVISOR", "server_env", "supervised", "log_path", "open_log",
           "stderr_tail", "MaskedStderr"]
