"""Test-wide guards: no network, and an isolated AMOS_HOME for every test; shared fixtures."""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _is_local(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", "", None):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self, address):
    if not _is_local(address):
        raise RuntimeError(f"test tried to reach the network: {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if not _is_local(address):
        raise RuntimeError(f"test tried to reach the network: {address!r}")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):
    if not _is_local((host,)):
        raise RuntimeError(f"test tried to resolve a network host: {host!r}")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Fail any test that tries to reach anything but loopback."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo)


@pytest.fixture(autouse=True)
def amos_home(tmp_path_factory, monkeypatch):
    """Every test gets its own empty AMOS_HOME and no provider keys."""
    home = tmp_path_factory.mktemp("amos_home")
    monkeypatch.setenv("AMOS_HOME", str(home))
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AMOS_LOG"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(autouse=True)
def _approval_keys_answer_at_once(monkeypatch):
    """Pilot tests press y/s/n the moment the dialog is up; people get a short delay
    (type-ahead protection, tested with the delay on in test_tui_approvals.py)."""
    monkeypatch.setattr("amos.tui.screens.approval.ANSWER_DELAY_S", 0.0)


@pytest.fixture
def visible() -> Iterator[Path]:
    """A scratch folder outside /tmp (so visible, read-only, inside the command sandbox,
    which replaces /tmp); removed afterwards."""
    base = Path("/var/tmp")
    if not base.is_dir() or not os.access(base, os.W_OK):
        pytest.skip("needs a writable /var/tmp (a folder the sandbox does not replace)")
    folder = Path(tempfile.mkdtemp(prefix="amos-test-", dir=base)).resolve()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------------- PostgreSQL (issue 22)


@pytest.fixture(scope="session")
def pg_cluster():
    """One PostgreSQL cluster for the whole test session (tests/pg_server.py), with a
    migrated template database; skipped with the reason when it cannot start here —
    except under ``CI=true``, where a PostgreSQL test fails instead."""
    from . import pg_server

    why = pg_server.missing()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL tests cannot run under CI=true: {why}")
        pytest.skip(f"PostgreSQL tests need a server: {why}")
    cluster = pg_server.start_cluster()
    try:
        import psycopg

        from amos.store_pg.schema import ensure_schema

        with psycopg.connect(cluster.url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE amos_template")
        with psycopg.connect(cluster.url_of("amos_template"), autocommit=True) as conn:
            ensure_schema(conn, "template")
        yield cluster
    finally:
        cluster.stop()


_pg_counter = iter(range(1, 1_000_000))


@pytest.fixture
def pg_url(pg_cluster, monkeypatch) -> Iterator[str]:
    """A fresh, migrated database of the session's cluster for one test, its URL in
    ``AMOS_STORE_URL`` (the config still has to choose ``store.backend: "postgres"``)."""
    import psycopg

    name = f"amos_t{os.getpid()}_{next(_pg_counter)}"
    with psycopg.connect(pg_cluster.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE amos_template")
    url = pg_cluster.url_of(name)
    monkeypatch.setenv("AMOS_STORE_URL", url)
    try:
        yield url
    finally:
        from amos.store_pg import connect

        db = connect._DATABASES.pop(url, None)
        if db is not None:
            db.close()


@pytest.fixture
def pg_home(amos_home, pg_url) -> Path:
    """AMOS_HOME whose user config keeps sessions and evidence in ``pg_url``."""
    import json

    (amos_home / "config").mkdir(exist_ok=True)
    (amos_home / "config" / "config.json").write_text(json.dumps(
        {"store": {"backend": "postgres"}}))
    return amos_home
