"""Crash safety: a writer killed with SIGKILL at 200 random points never leaves a session
that reopens as a mix of two states, and never loses an entry it had written.

The child (``os.fork()``) writes successive states through the real store: saves of
``session.json``, journal appends and checkpoints. Its operations are a pure function of
a seed, so the parent computes every state the session passes through. After each
operation the child reports its number on a pipe. The parent kills it 0-30 ms after its
first report, reopens the session with a fresh store and requires the state of the last
reported operation or of the one in flight: never an older one (lost work), never
anything else (a mix).

State ``S_k`` is title ``str(k)`` with ``k`` messages that each name ``k``. A step from
``S_k-1`` to ``S_k`` is a save of the whole state, or journal entries (each message, then
the title: a journal entry is atomic, a step of several entries is not, so the states
between two ``S_k`` are the journal's prefixes), or both; checkpoints are taken on the way.
"""

from __future__ import annotations

import os
import random
import select
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from amos.errors import SessionError
from amos.journal import read_journal
from amos.messages import Message
from amos.sessions import SessionStore

SEED = 20261130
KILLS = 200
MAX_STEPS = 40

State = tuple[str | None, tuple[str, ...]]
"""(title, message texts) as a reader sees them."""


def operations(seed: int) -> Iterator[tuple[str, int, int]]:
    """The writer's operations in order: ``(kind, k, i)``.

    ``message``: set message ``i`` to name ``k``; ``title``: set the title to ``str(k)``
    (both through the journal); ``save``: write ``session.json`` with the state in memory;
    ``checkpoint``: take a checkpoint (``i`` is 1 for a labelled one).
    """
    rng = random.Random(seed)
    yield "open", 0, 0
    for k in range(1, MAX_STEPS + 1):
        mode = rng.choice(("journal", "save", "both"))
        if mode in ("journal", "both"):
            for i in range(k):
                yield "message", k, i
            yield "title", k, 0
        if mode in ("save", "both") or rng.random() < 0.2:
            yield "save", k, 0
        if rng.random() < 0.3:
            yield "checkpoint", k, int(rng.random() < 0.2)


def states(seed: int) -> list[State]:
    """``states[n]``: what a reader must see once operation ``n`` is done (``states[-1]`` …
    before the first). Memory and disk agree after every operation."""
    title: str | None = "0"
    messages: list[str] = []
    seen: list[State] = []
    for kind, k, i in operations(seed):
        if kind == "message":
            if i == len(messages):
                messages.append(str(k))
            else:
                messages[i] = str(k)
        elif kind == "title":
            title = str(k)
        elif kind == "save":  # the whole state S_k in memory is written
            title, messages = str(k), [str(k)] * k
        seen.append((title, tuple(messages)))
    return seen


def writer(root: Path, session_id: str, seed: int, report: int) -> None:
    """The child: perform :func:`operations` through the real store, reporting each."""
    store = SessionStore(root)
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


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*.tmp") if p.is_file()]


def _read_state(root: Path, session_id: str) -> State:
    session = SessionStore(root).load(session_id)
    for message in session.messages:
        assert message.role == "user" and message.kind == "prompt" and len(message.parts) == 1
    return session.title, tuple(m.text for m in session.messages)


def test_a_writer_killed_at_random_points_leaves_old_or_new_never_a_mix(tmp_path):
    rng = random.Random(SEED)
    outcomes = {"state": 0, "error": 0}
    furthest = 0
    leftovers = 0
    for attempt in range(KILLS):
        root = tmp_path / f"r{attempt}"
        store = SessionStore(root)
        session = store.create()
        session.title = "0"
        store.save(session)
        seed = rng.randrange(1 << 30)
        expected = states(seed)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns into pytest
            code = 0
            try:
                os.close(read_fd)
                writer(root, session.id, seed, write_fd)
                time.sleep(60)
            except BaseException:  # noqa: BLE001
                code = 1
            finally:
                os._exit(code)
        os.close(write_fd)
        # the delay counts from the writer's first report (its journal is open), so a
        # loaded machine's slower fork and start do not move the kill points
        first = b""
        if select.select([read_fd], [], [], 10)[0]:
            first = os.read(read_fd, 4096)
        time.sleep(rng.uniform(0, 0.030))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        with os.fdopen(read_fd, "rb") as pipe:
            reported = [int(line) for line in (first + pipe.read()).split()]
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, \
            f"attempt {attempt}: the writer failed before it was killed (status {status})"
        done = reported[-1] if reported else -1
        furthest = max(furthest, done)

        try:
            seen = _read_state(root, session.id)
        except SessionError as exc:  # allowed if clean, but atomic writes should make it impossible
            assert exc.code in ("corrupt",) and str(root) in str(exc), exc
            outcomes["error"] += 1
            continue
        outcomes["state"] += 1
        allowed = [(expected[n] if n >= 0 else ("0", ())) for n in (done, done + 1) if n < len(expected)]
        assert seen in allowed, (f"attempt {attempt} (seed {seed}): after operation {done} the session reads "
                                 f"{seen}, expected one of {allowed}")

        # the next lock holder removes the temp files of writes the kill cut short
        leftovers += len(_temp_files(root))
        store.lock(session.id).release()
        assert not _temp_files(root)

        # the torn tail (if any) is cut before a new writer appends; nothing is lost
        if attempt % 10 == 0:
            writer_store = SessionStore(root)
            current = writer_store.load(session.id)
            writer_store.journal(current).append(
                "message", "t", index=len(current.messages), message=Message.user("next").model_dump(mode="json"))
            writer_store.close_journal(session.id)
            assert not read_journal(writer_store.journal_path(session.id)).warnings
            title, texts = _read_state(root, session.id)
            assert (title, texts[:-1]) == seen and texts[-1] == "next"

    assert outcomes["error"] == 0, outcomes
    # coverage, loosely (a loaded machine is slower): kills landed past the first steps
    # and inside atomic writes
    assert furthest >= 8, furthest
    assert leftovers > 0, "no kill landed inside an atomic write"
