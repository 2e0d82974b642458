"""Connections to the PostgreSQL store (issue 22): the URL, its secret, the pool, the errors.

The URL comes from ``AMOS_STORE_URL`` or the config's ``store.url``; its password (and
a ``password=`` query value) is a secret: :func:`secret_values` gives it to the maskers,
and every message names the database by :func:`display_url`, never the URL itself.
:class:`Database` is one process-wide pool per URL (opened on first use, never at
import), plus :meth:`Database.dedicated` connections with TCP keepalives for run locks.
psycopg is imported only here and only when a connection is made.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from amos.errors import ConfigError, SessionError

URL_ENV = "AMOS_STORE_URL"
"""Environment variable holding the store URL (wins over ``store.url``)."""

KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
              "tcp_user_timeout": 30_000}
"""TCP keepalive settings of run-lock connections: a dead peer is noticed within ~30 s."""

CONNECT_TIMEOUT_S = 10
"""Seconds to wait for a connection before the store is ``unavailable``."""

MASK = "****"


def store_url(config: Any) -> str:
    """The PostgreSQL URL in force: ``AMOS_STORE_URL``, else ``store.url``.

    Raises:
        ConfigError: no URL, or ``AMOS_STORE_URL`` is not a postgresql:// URL (exit 2;
            the URL is never echoed).
    """
    env = os.environ.get(URL_ENV, "").strip()
    if env:
        from amos.config_models import _check_store_url

        try:
            return _check_store_url(env)
        except ValueError as exc:
            raise ConfigError(f"{URL_ENV} {exc}") from None
    url = getattr(getattr(config, "store", None), "url", None)
    if not url:
        raise ConfigError(f'store.backend "postgres" needs store.url or {URL_ENV} '
                          "(postgresql://USER@HOST:PORT/DATABASE)", json_path="store.url")
    return url


def uses_postgres(config: Any) -> bool:
    """True when the config keeps sessions and evidence in PostgreSQL."""
    return getattr(getattr(config, "store", None), "backend", "files") == "postgres"


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The secret parts of a store URL: its password and a ``password=`` query value."""
    if not url:
        return ()
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
        found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() == "password"]
    except ValueError:
        return ()
    from urllib.parse import unquote

    values = {v for v in found if v} | {unquote(v) for v in found if v}
    return tuple(sorted(values))


def secret_values(config: Any) -> tuple[str, ...]:
    """The store password(s) the maskers must hide, whether or not the backend is in use."""
    urls = [os.environ.get(URL_ENV), getattr(getattr(config, "store", None), "url", None)]
    values: set[str] = set()
    for url in urls:
        values.update(url_secrets(url))
    if os.environ.get("PGPASSWORD"):
        values.add(os.environ["PGPASSWORD"])
    return tuple(sorted(values))


def display_url(url: str) -> str:
    """The URL for messages: ``postgresql://amos:****@db:5432/amos`` (password masked)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            host = netloc.rsplit("@", 1)[1]
            user = parts.username or ""
            netloc = f"{user}:{MASK}@{host}" if parts.password is not None else f"{user}@{host}"
        query = urlencode([(k, MASK if k.lower() == "password" else v)
                           for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "postgresql://" + MASK


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ConfigError('store.backend "postgres" needs psycopg: pip install "amos[postgres]"',
                          json_path="store.backend") from None
    return psycopg


def problem(exc: BaseException, url: str) -> str:
    """One line for a database error: its first line, every secret of ``url`` masked."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    for secret in url_secrets(url):
        text = text.replace(secret, MASK)
    return text


class Database:
    """One PostgreSQL store: a small pool for short statements, and dedicated connections.

    Build with :func:`database` (one per URL per process). The schema is checked and
    migrated on the first connection (:mod:`amos.store_pg.schema`).

    Args:
        url: the store URL (with its password, held in memory only).
    """

    def __init__(self, url: str):
        self.url = url
        self.shown = display_url(url)
        self._pool: Any = None
        self._lock = threading.Lock()
        self._ready = False

    def _kwargs(self) -> dict[str, Any]:
        return {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S, "application_name": "amos"}

    def unavailable(self, exc: BaseException) -> SessionError:
        """The one-line ``unavailable`` error (exit 2) for a database that cannot be reached."""
        return SessionError("unavailable", f"cannot reach the session store {self.shown}: {problem(exc, self.url)} "
                                           f"(check store.url or {URL_ENV})")

    def _check_schema(self, conn: Any) -> None:
        if not self._ready:
            from amos.store_pg.schema import ensure_schema

            ensure_schema(conn, self.shown)
            self._ready = True

    def dedicated(self, *, keepalive: bool = True) -> Any:
        """A new autocommit connection of its own (the caller closes it); TCP keepalives on.

        Raises:
            SessionError: ``unavailable``; ``too_new`` for a newer schema.
        """
        psycopg = _driver()
        extra = dict(KEEPALIVES) if keepalive else {}
        try:
            conn = psycopg.connect(self.url, **self._kwargs(), **extra)
        except psycopg.Error as exc:
            raise self.unavailable(exc) from None
        try:
            self._check_schema(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_pool(self) -> Any:
        with self._lock:
            if self._pool is None:
                from psycopg_pool import ConnectionPool

                first = self.dedicated(keepalive=False)  # reachability and schema, with a clean error
                first.close()
                # check: a connection the server dropped (a restart, a failover) is replaced, not handed out
                pool = ConnectionPool(self.url, min_size=1, max_size=4, kwargs=self._kwargs(), open=False,
                                      name="amos-store", timeout=CONNECT_TIMEOUT_S,
                                      check=ConnectionPool.check_connection)
                pool.open(wait=False)
                self._pool = pool
                atexit.register(self.close)
            return self._pool

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled autocommit connection for a few statements.

        Raises:
            SessionError: ``unavailable`` when no connection can be had.
        """
        psycopg = _driver()
        from psycopg_pool import PoolTimeout

        pool = self._open_pool()
        try:
            conn_cm = pool.connection()
            conn = conn_cm.__enter__()
        except (PoolTimeout, psycopg.Error) as exc:
            raise self.unavailable(exc) from None
        try:
            yield conn
        except BaseException as exc:
            conn_cm.__exit__(type(exc), exc, exc.__traceback__)
            raise
        else:
            conn_cm.__exit__(None, None, None)

    def close(self) -> None:
        """Close the pool (at exit; idempotent)."""
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None


_DATABASES: dict[str, Database] = {}
_REGISTRY_LOCK = threading.Lock()


def database(url: str) -> Database:
    """The process-wide :class:`Database` of ``url`` (created on first use)."""
    with _REGISTRY_LOCK:
        found = _DATABASES.get(url)
        if found is None:
            found = _DATABASES[url] = Database(url)
        return found


def is_db_error(exc: BaseException) -> bool:
    """True for a psycopg error (without importing psycopg when it is not installed)."""
    return type(exc).__module__.startswith("psycopg")
