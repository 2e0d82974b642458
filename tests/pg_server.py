"""A throwaway PostgreSQL cluster for the tests (issue 22).

:func:`start_cluster` runs ``initdb`` and ``pg_ctl start`` as the ``postgres`` user (the
server refuses to run as root, and CI runs as root) in a temporary folder under
``/var/tmp`` that user owns, listening on 127.0.0.1 on a free port, and returns a
:class:`Cluster` whose :meth:`Cluster.stop` stops it and removes the folder.
:func:`missing` says why no cluster can be started here (None when one can).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def missing() -> str | None:
    """Why a test cluster cannot be started on this machine, or None."""
    if _bindir() is None:
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/postgres; Debian package postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser (the server refuses to run as root)"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "no postgres OS user to run the server as"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'amos[postgres]')"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Cluster:
    """A running test cluster.

    Attributes:
        folder: its temporary folder (data, socket and log).
        port: the TCP port on 127.0.0.1.
        url: a superuser URL of the ``postgres`` database (no password: trust auth).
    """

    folder: Path
    port: int
    bindir: Path
    as_user: list[str]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url_of(self, database: str) -> str:
        """The URL of another database of this cluster."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its folder."""
        subprocess.run([*self.as_user, str(self.bindir / "pg_ctl"), "-D", str(self.folder / "data"),
                        "-m", "fast", "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_cluster(*, durable: bool = False) -> Cluster:
    """initdb and start a cluster on 127.0.0.1 (fsync off unless ``durable``: a test
    cluster, never a real one; benchmarks ask for a durable one).

    Raises:
        RuntimeError: initdb or the start failed (the message holds their output).
    """
    bindir = _bindir()
    assert bindir is not None
    root = os.geteuid() == 0
    as_user = ["runuser", "-u", "postgres", "--"] if root else []
    folder = Path(tempfile.mkdtemp(prefix="amos-pg-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    if root:
        shutil.chown(folder, "postgres", "postgres")
    port = _free_port()
    data = folder / "data"
    steps = [
        [*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
         "--no-locale", "--no-sync"],
        [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w", "-t", "60", "-o",
         f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=200"
         + ("" if durable else " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"), "start"],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = (folder / "log").read_text(errors="replace") if (folder / "log").exists() else ""
            shutil.rmtree(folder, ignore_errors=True)
            raise RuntimeError(f"{' '.join(step[:len(as_user) + 1])} failed: {done.stdout}{done.stderr}{log}")
    return Cluster(folder, port, bindir, as_user)
