"""The PostgreSQL backend of the session and evidence stores (issue 22).

Selected by ``store.backend: "postgres"`` and ``store.url`` (or ``AMOS_STORE_URL``);
reached only through the factories :func:`amos.engine.opening.open_store` and
:func:`amos.evidence.open_evidence_store`, never by front ends. One job per module:
``connect`` (URL, secrets, pool), ``schema`` (migrations), ``lock`` (run lock),
``journal``, ``checkpoints``, ``recovery``, ``sessions`` (the session store),
``evidence`` (the evidence store), ``migrate`` (``amos store migrate``). Nothing here
connects at import time; psycopg is imported on the first connection.
"""

from __future__ import annotations

from typing import Any


def open_session_store(config: Any) -> Any:
    """The :class:`~amos.store_pg.sessions.PgSessionStore` of the config's URL (no
    connection is made until first use).

    Raises:
        ConfigError: no URL, a bad ``AMOS_STORE_URL``, or psycopg missing (exit 2).
    """
    from amos.store_pg.connect import _driver, database, store_url
    from amos.store_pg.sessions import PgSessionStore

    url = store_url(config)
    _driver()
    return PgSessionStore(database(url))


def open_evidence_store(config: Any, scope: Any) -> Any:
    """The :class:`~amos.store_pg.evidence.PgEvidenceStore` of the config's URL and ``scope``.

    Raises:
        ConfigError: as :func:`open_session_store`.
    """
    from amos.store_pg.connect import _driver, database, store_url
    from amos.store_pg.evidence import PgEvidenceStore

    url = store_url(config)
    _driver()
    evidence = config.evidence
    return PgEvidenceStore(database(url), scope, max_records=evidence.max_records,
                           max_record_bytes=evidence.max_record_bytes, ttl_days=evidence.ttl_days)
