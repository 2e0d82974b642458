"""Crash safety on PostgreSQL (issue 22): the writer of ``test_session_crash.py`` — saves,
journal appends and checkpoints through the real store — SIGKILLed at random points,
now writing to the database through its run lock's connection. A reopened session is
the state of the last reported operation or of the one in flight: old or new, never a
mix, never torn. The killed writer's lock goes with its connection.
"""

from __future__ import annotations

import os
import random
import select
import signal
import time

from amos.errors import SessionError
from amos.messages import Message

from .test_session_crash import operations, states

SEED = 20261202
KILLS = 40


def _store(url: str):
    from amos.store_pg.connect import Database
    from amos.store_pg.sessions import PgSessionStore

    return PgSessionStore(Database(url))  # a Database of its own: nothing shared across fork()


def _writer(url: str, session_id: str, seed: int, report: int) -> None:
    store = _store(url)
    store.lock(session_id)
    session = store.load(session_id)
    journal = None
    for n, (kind, k, i) in enumerate(operations(seed)):
        if kind == "open":
            journal = store.journal(session)
        elif kind == "message":
            message = Message.user(str(k))
            if i == len(session.messages):
                session.messages.append(message)
            else:
                session.messages[i] = message
            journal.append("message", "t", index=i, message=message.model_dump(mode="json"))
        elif kind == "title":
            session.title = str(k)
            journal.append("fields", "t", fields={"title": session.title})
        elif kind == "save":
            session.title = str(k)
            session.messages = [Message.user(str(k)) for _ in range(k)]
            store.save(session)
        elif kind == "checkpoint":
            store.take_checkpoint(session, "save", label="kept" if i else None, keep=3)
        os.write(report, f"{n}\n".encode())


def _lock_again(store, session_id: str):
    deadline = time.monotonic() + 10
    while True:
        try:
            return store.lock(session_id)
        except SessionError as exc:  # the server notices the dead client a moment later
            if exc.code != "busy" or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def test_a_writer_killed_at_random_points_leaves_old_or_new_never_a_mix(pg_url):
    rng = random.Random(SEED)
    furthest = 0
    reader = _store(pg_url)
    try:
        for attempt in range(KILLS):
            session = reader.create()
            session.title = "0"
            reader.save(session)
            seed = rng.randrange(1 << 30)
            expected = states(seed)
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child never returns into pytest
                code = 0
                try:
                    os.close(read_fd)
                    _writer(pg_url, session.id, seed, write_fd)
                    time.sleep(60)
                except BaseException:  # noqa: BLE001
                    code = 1
                finally:
                    os._exit(code)
            os.close(write_fd)
            first = b""
            if select.select([read_fd], [], [], 20)[0]:
                first = os.read(read_fd, 4096)
            time.sleep(rng.uniform(0, 0.060))
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            with os.fdopen(read_fd, "rb") as pipe:
                reported = [int(line) for line in (first + pipe.read()).split()]
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, \
                f"attempt {attempt}: the writer failed before it was killed (status {status})"
            done = reported[-1] if reported else -1
            furthest = max(furthest, done)

            lock = _lock_again(reader, session.id)  # the dead writer's lock went with its connection
            try:
                loaded = reader.load(session.id)
            finally:
                lock.release()
            seen = (loaded.title, tuple(m.text for m in loaded.messages))
            allowed = [(expected[n] if n >= 0 else ("0", ())) for n in (done, done + 1) if n < len(expected)]
            assert seen in allowed, (f"attempt {attempt} (seed {seed}): after operation {done} the session reads "
                                     f"{seen}, expected one of {allowed}")
    finally:
        reader.db.close()
    assert furthest >= 8, furthest
