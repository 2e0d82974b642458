"""The PostgreSQL store beside the file store (issue 22): journal appends, loading a
2,000-message session, and a page of 100 evidence records out of 10,000.

Prints, for each backend, the median (and p99 where it matters) in milliseconds of:

- one journal append per event (the runner's mix of events and messages, tool results up
  to 8 KB): the file store's one ``write``; PostgreSQL's one INSERT committed with
  ``synchronous_commit`` off (durable at the next sync), and the sync at a turn end
  (an fsync / a synchronous commit);
- a load of a 2,000-message session (snapshot plus its journal, nothing to replay);
- a page of 100 evidence records' metadata from the middle of 10,000, and reading
  (verifying) those 100 records' bytes.

Without ``--url`` it starts a throwaway cluster with fsync ON (``tests/pg_server.py``, as
the postgres user when run as root) on 127.0.0.1, so the figures include real commits.

Usage: python benchmarks/store_postgres.py [--url postgresql://…] [--runs N] [--records N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from context_budget import history  # the sibling benchmarks' realistic history
from sessions import dumped, journal_entries, median_ms

from amos.evidence import FileEvidenceStore
from amos.evidence.model import EvidenceRecord, EvidenceScope
from amos.session_store import SessionStore
from amos.sessions import utc_now
from amos.store_pg.connect import Database
from amos.store_pg.evidence import PgEvidenceStore
from amos.store_pg.sessions import PgSessionStore

SCOPE = EvidenceScope(owner_id="bench", namespace="default")


def _appends(store, session, entries, count: int) -> tuple[list[float], list[float]]:
    """Appends as a run makes them: the session saved and its run lock held (on PostgreSQL
    the journal then writes through the lock's connection)."""
    store.save(session)
    lock = store.lock(session.id)
    journal = store.journal(session)
    samples, syncs = [], []
    for n in range(count):
        kind, data = entries[n % len(entries)]
        start = time.perf_counter()
        journal.append(kind, utc_now(), **dumped(data))
        samples.append((time.perf_counter() - start) * 1000)
        if n % 10 == 9:
            start = time.perf_counter()
            journal.sync()
            syncs.append((time.perf_counter() - start) * 1000)
    store.close_journal(session.id)
    lock.release()
    return samples, syncs


def _record(n: int) -> EvidenceRecord:
    return EvidenceRecord(session_id=f"s{n % 7}", execution_id=f"e{n}", call_id=f"c{n}", tool="read_file",
                          effect="read", status="succeeded", arguments={"path": f"f{n}.txt"},
                          result={"n": n, "text": "line of output\n" * 20})


def _evidence(store, fill, records: int, runs: int, settle=None) -> tuple[float, float]:
    ids = [fill.put(_record(n)).id for n in range(records)]
    if settle is not None:
        settle()
    middle = ids[records // 2]
    page = median_ms(lambda: store.list(middle, 100), runs)
    refs = [m.reference() for m in store.list(middle, 100).entries]
    read = median_ms(lambda: [store.read_bytes(r) for r in refs], runs)
    return page, read


def bench(name: str, make_store, make_evidence, make_fill, args, messages, entries, settle=None) -> None:
    store = make_store()
    session = store.create()
    session.title = "benchmark"
    samples, syncs = _appends(store, session, entries, args.appends)
    print(f"[{name}] journal append per event:   {statistics.median(samples):8.3f} ms median, "
          f"{sorted(samples)[int(len(samples) * 0.99)]:.3f} ms p99; sync at a turn end "
          f"{statistics.median(syncs):.3f} ms median")
    long = store.create()
    long.title = "2,000 messages"
    long.messages = list(messages)
    journal = store.journal(long)
    for kind, data in entries:
        journal.append(kind, utc_now(), **dumped(data))
    journal.sync()
    store.save(long)
    store.close_journal(long.id)
    load = median_ms(lambda: make_store().load(long.id), args.runs)
    print(f"[{name}] load of a {len(messages):,}-message session: {load:8.2f} ms median")
    page, read = _evidence(make_evidence(), make_fill(), args.records, args.runs, settle)
    print(f"[{name}] evidence page of 100 of {args.records:,}: {page:8.2f} ms median; reading those 100 "
          f"records (verified): {read:.2f} ms median")


def _analyze(db: Database) -> None:
    """Fresh planner statistics after the bulk fill (what autovacuum does a moment later)."""
    with db.connection() as conn:
        conn.execute("VACUUM ANALYZE amos_evidence")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an empty PostgreSQL database to use (default: start a throwaway cluster)")
    parser.add_argument("--runs", type=int, default=9, help="timed runs per figure (default 9)")
    parser.add_argument("--messages", type=int, default=2000, help="session length (default 2000)")
    parser.add_argument("--appends", type=int, default=1000, help="timed journal appends (default 1000)")
    parser.add_argument("--records", type=int, default=10_000, help="evidence records stored (default 10,000)")
    args = parser.parse_args()
    messages = history(args.messages)
    entries = journal_entries(messages)
    cluster = None
    url = args.url
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        import pg_server

        why = pg_server.missing()
        if why:
            raise SystemExit(f"cannot start a PostgreSQL cluster: {why}; pass --url")
        cluster = pg_server.start_cluster(durable=True)
        url = cluster.url
        print(f"a throwaway cluster on 127.0.0.1:{cluster.port}, fsync on")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            bench("files", lambda: SessionStore(root / "sessions"),
                  lambda: FileEvidenceStore(root / "evidence", SCOPE, max_records=10**6),
                  lambda: FileEvidenceStore(root / "evidence", SCOPE, max_records=10**6, fsync=False),
                  args, messages, entries)
        db = Database(url)
        sep = "&" if "?" in url else "?"
        fast = Database(url + sep + "options=-c%20synchronous_commit%3Doff")  # only to fill 10,000 records fast
        bench("postgres", lambda: PgSessionStore(db), lambda: PgEvidenceStore(db, SCOPE, max_records=10**6),
              lambda: PgEvidenceStore(fast, SCOPE, max_records=10**6), args, messages, entries,
              settle=lambda: _analyze(db))
        db.close()
        fast.close()
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
