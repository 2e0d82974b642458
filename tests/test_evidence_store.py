"""Evidence stores on real files in tmp dirs (and the in-memory store on the same contract)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from filelock import FileLock

from amos.evidence import (
    EvidenceError,
    EvidenceRecord,
    EvidenceReference,
    EvidenceScope,
    EvidenceStore,
    FileEvidenceStore,
    InMemoryEvidenceStore,
    record_from_outcome,
)

SCOPE = EvidenceScope(owner_id="alice", namespace="default")
OTHER = EvidenceScope(owner_id="bob", namespace="default")


def make_record(n: int = 0, *, session: str | None = "s1", result: object = None) -> EvidenceRecord:
    return EvidenceRecord(
        session_id=session,
        execution_id=f"exec-{n}",
        call_id=f"call-{n}",
        tool="read_file",
        effect="read",
        status="succeeded",
        started_at="2026-01-01T00:00:00.000+00:00",
        ended_at="2026-01-01T00:00:01.000+00:00",
        identity={"owner_id": "alice", "tenant_id": None, "namespace": "default"},
        arguments={"path": f"file-{n}.txt"},
        result=result if result is not None else {"n": n, "text": "line\n" * 10},
    )


class Clock:
    def __init__(self, t: float = 1_790_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture(params=["file", "memory", "postgres"])
def make_store(request, tmp_path):
    def factory(scope: EvidenceScope = SCOPE, **kw) -> EvidenceStore:
        if request.param == "file":
            return FileEvidenceStore(tmp_path / "evidence", scope, **kw)
        kw.pop("fsync", None)
        if request.param == "postgres":  # issue 22: the same contract on a real server
            from amos.store_pg.connect import database
            from amos.store_pg.evidence import PgEvidenceStore

            kw.pop("lock_timeout_s", None)
            return PgEvidenceStore(database(request.getfixturevalue("pg_url")), scope, **kw)
        return InMemoryEvidenceStore(scope, **kw)

    return factory


def record_path(store: FileEvidenceStore, ref: EvidenceReference) -> Path:
    return store.records_dir / f"{ref.id}.json"


def assert_code(code: str, call, *args, **kw) -> EvidenceError:
    with pytest.raises(EvidenceError) as info:
        call(*args, **kw)
    assert info.value.code == code, str(info.value)
    return info.value


# --- both stores ------------------------------------------------------------------------


def test_round_trip(make_store):
    store = make_store()
    assert isinstance(store, EvidenceStore)
    ref = store.put(make_record(1))
    assert ref.acknowledgement == store.acknowledgement
    assert store.get_reference(ref.id) == ref
    back = store.read_record(ref)
    assert back.result == {"n": 1, "text": "line\n" * 10}
    assert back.arguments == {"path": "file-1.txt"}
    assert back.scope == SCOPE and back.stored_at is not None
    assert back.model_copy(update={"scope": None, "stored_at": None}) == make_record(1)
    data = store.read_bytes(ref)
    assert json.loads(data)["call_id"] == "call-1"
    assert len(data) == ref.size
    assert EvidenceReference.model_validate_json(ref.model_dump_json()) == ref


def test_meta_has_no_content(make_store):
    store = make_store()
    ref = store.put(make_record(1))
    meta = store.get_meta(ref.id)
    row = meta.to_dict()
    assert "result" not in row and "arguments" not in row
    assert row["tool"] == "read_file" and row["session_id"] == "s1" and row["size"] == ref.size
    assert meta.reference() == ref


def test_record_from_outcome():
    from amos.tools.base import ToolOutcome

    outcome = ToolOutcome(call_id="c", execution_id="e", tool="write_file", effect="write",
                          status="timed_out", completion="unknown", started_at="a",
                          ended_at="b", error="took too long")
    record = record_from_outcome(outcome, arguments={"path": "x"}, identity={"owner_id": "me"},
                                 session_id="s")
    assert (record.completion, record.effect, record.error) == ("unknown", "write", "took too long")
    assert InMemoryEvidenceStore(SCOPE).put(record).size > 0


def test_unknown_and_malformed_ids(make_store):
    store = make_store()
    store.put(make_record())
    assert_code("missing", store.get_reference, "01900000-0000-7000-8000-000000000000")
    assert_code("invalid", store.get_reference, "../../etc/passwd")
    assert_code("invalid", store.list, after="not-a-cursor")
    assert_code("invalid", store.list, limit=0)


def test_capacity_fails_without_eviction(make_store):
    store = make_store(max_records=3)
    refs = [store.put(make_record(n)) for n in range(3)]
    assert_code("capacity", store.put, make_record(9))
    assert [store.read_record(r).call_id for r in refs] == ["call-0", "call-1", "call-2"]
    assert len(store.list().entries) == 3
    store.delete(refs[0])
    store.put(make_record(9))
    assert len(store.list().entries) == 3


def test_too_large_writes_nothing(make_store):
    store = make_store(max_record_bytes=2000)
    store.put(make_record(0))
    assert_code("too_large", store.put, make_record(1, result={"text": "x" * 5000}))
    assert len(store.list().entries) == 1
    if isinstance(store, FileEvidenceStore):
        assert len(list(store.records_dir.iterdir())) == 1


def test_exact_size_limit(make_store):
    probe = make_store()
    size = probe.put(make_record(0)).size
    store = make_store(EvidenceScope(owner_id="alicf", namespace="default"), max_record_bytes=size)
    assert store.put(make_record(0)).size == size
    store = make_store(EvidenceScope(owner_id="alicg", namespace="default"),
                       max_record_bytes=size - 1)
    assert_code("too_large", store.put, make_record(0))


@pytest.mark.parametrize("bad", [
    float("nan"), float("inf"), {1: "int key"}, {"a": {1, 2}}, b"bytes", object(),
    "lone \ud800 surrogate", {"deep": [[[[float("-inf")]]]]},
])
def test_not_json_writes_nothing(make_store, bad):
    store = make_store()
    err = assert_code("not_json", store.put, make_record(0, result={"v": bad}))
    assert "$.result" in str(err) or "surrogate" in str(err)
    assert store.list().entries == ()


def test_cycle_is_not_json(make_store):
    store = make_store()
    loop: dict = {}
    loop["self"] = loop
    assert_code("not_json", store.put, make_record(0, result=loop))


def test_record_of_other_scope_refused(make_store):
    store = make_store()
    record = make_record().model_copy(update={"scope": OTHER})
    assert_code("scope", store.put, record)
    assert store.put(make_record().model_copy(update={"scope": SCOPE})).size > 0


def test_scope_isolation(make_store):
    a, b = make_store(SCOPE), make_store(OTHER)
    ref = a.put(make_record(1))
    assert_code("missing", b.get_reference, ref.id)
    assert_code("missing", b.read_record, ref)
    assert_code("missing", b.read_text_chunk, ref, 0, 10)
    assert b.list().entries == ()
    assert_code("missing", b.delete, ref)
    assert a.read_record(ref).call_id == "call-1"


def test_listing_pages_250(make_store):
    store = make_store()
    ids = [store.put(make_record(n, session="odd" if n % 2 else "even")).id for n in range(250)]
    assert ids == sorted(ids)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = store.list(after=cursor, limit=37)
        seen += [e.id for e in page.entries]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ids and pages == 7
    assert [e.call_id for e in store.list(limit=3).entries] == ["call-0", "call-1", "call-2"]
    odd = store.list(limit=1000, session_id="odd")
    assert [e.call_id for e in odd.entries] == [f"call-{n}" for n in range(1, 250, 2)]
    assert odd.next_cursor is None
    exact = store.list(limit=250)
    assert len(exact.entries) == 250 and exact.next_cursor is None
    assert store.list(after=ids[-1]).entries == ()
    assert [e.id for e in store.list(after=ids[99], limit=2).entries] == ids[100:102]


def test_chunks_rebuild_exact_json(make_store):
    store = make_store()
    text = "naïve café — 日本語 😀🎉 𝄞 \u2028 \"quoted\" \\ back\n" * 40
    ref = store.put(make_record(0, result={"text": text, "emoji": "🧪"}))
    whole = store.read_bytes(ref).decode("utf-8")
    assert "😀" in whole  # stored as UTF-8, not \u escapes
    for limit in (1, 7, 100, 10_000):
        parts, offset = [], 0
        while offset is not None:
            chunk = store.read_text_chunk(ref, offset, limit)
            assert chunk.offset == offset and len(chunk.text) <= limit
            assert chunk.total_chars == len(whole)
            parts.append(chunk.text)
            offset = chunk.next_offset
        assert "".join(parts) == whole
    astral = whole.index("😀")
    assert store.read_text_chunk(ref, astral, 1).text == "😀"  # code points, not UTF-16 units
    end = store.read_text_chunk(ref, len(whole), 5)
    assert end.text == "" and end.next_offset is None
    assert_code("invalid", store.read_text_chunk, ref, len(whole) + 1, 5)
    assert_code("invalid", store.read_text_chunk, ref, -1, 5)
    assert_code("invalid", store.read_text_chunk, ref, 0, 0)
    assert json.loads(whole)["result"]["text"] == text


def test_ttl_expiry_and_prune(make_store):
    clock = Clock()
    store = make_store(ttl_days=2, clock=clock)
    old = [store.put(make_record(n)) for n in range(3)]
    clock.t += 86_400
    new = store.put(make_record(9))
    clock.t += 86_400 + 1
    assert [e.id for e in store.list().entries] == [new.id]
    assert_code("missing", store.get_reference, old[0].id)
    assert_code("missing", store.read_record, old[0])
    assert store.prune_expired() == 3
    assert store.prune_expired() == 0
    assert store.read_record(new).call_id == "call-9"
    later = datetime.fromtimestamp(clock.t + 2 * 86_400, UTC)
    assert store.prune_expired(now=later) == 1
    if isinstance(store, FileEvidenceStore):
        assert list(store.records_dir.iterdir()) == []
    assert make_store(OTHER).prune_expired() == 0  # no ttl → never


def test_prune_by_age_and_session(make_store):
    clock = Clock()
    store = make_store(clock=clock)
    store.put(make_record(0, session="a"))
    store.put(make_record(1, session="b"))
    clock.t += 10 * 86_400
    keep = store.put(make_record(2, session="a"))
    store.put(make_record(3, session="b"))
    assert_code("invalid", store.prune)
    assert store.prune(older_than_days=5, session_id="a") == 1
    assert store.prune(older_than_days=5) == 1
    assert store.prune(session_id="b") == 1
    assert [e.id for e in store.list().entries] == [keep.id]
    assert store.prune(older_than_days=0) == 1
    assert store.list().entries == ()


def test_delete(make_store):
    store = make_store()
    ref = store.put(make_record(0))
    other = store.put(make_record(1))
    store.delete(ref.id)
    assert_code("missing", store.read_record, ref)
    assert_code("missing", store.delete, ref)
    assert [e.id for e in store.list().entries] == [other.id]


def test_wrong_reference_is_corrupt(make_store):
    store = make_store()
    ref = store.put(make_record(0))
    assert_code("corrupt", store.read_bytes, ref.model_copy(update={"size": ref.size + 1}))
    assert_code("corrupt", store.read_record, ref.model_copy(update={"sha256": "0" * 64}))


def test_read_slots_fail_busy(make_store):
    store = make_store(max_concurrent_reads=1)
    ref = store.put(make_record(0))
    store._read_slots.acquire()
    try:
        assert_code("busy", store.read_bytes, ref)
    finally:
        store._read_slots.release()
    assert store.read_bytes(ref)


# --- file store only --------------------------------------------------------------------


@pytest.fixture
def fstore(tmp_path) -> FileEvidenceStore:
    return FileEvidenceStore(tmp_path / "evidence", SCOPE)


def test_tampered_file_is_corrupt_and_returns_nothing(fstore):
    ref = fstore.put(make_record(0, result={"secret_plan": "attack at dawn"}))
    path = record_path(fstore, ref)
    data = bytearray(path.read_bytes())
    at = data.index(b"dawn")
    data[at] = ord("D")
    path.write_bytes(bytes(data))
    for read in (fstore.read_bytes, fstore.read_record, fstore.read_text_chunk):
        err = assert_code("corrupt", read, ref)
        assert "dawn" not in str(err) and "Dawn" not in str(err)


def test_size_mismatch_and_missing_file(fstore):
    ref = fstore.put(make_record(0))
    path = record_path(fstore, ref)
    with open(path, "ab") as fh:
        fh.write(b" ")
    assert_code("corrupt", fstore.read_bytes, ref)
    path.write_bytes(path.read_bytes()[:-10])
    assert_code("corrupt", fstore.read_text_chunk, ref)
    path.unlink()
    assert_code("missing", fstore.read_record, ref)


def test_oversized_file_is_too_large(tmp_path):
    store = FileEvidenceStore(tmp_path, SCOPE, max_record_bytes=4096)
    ref = store.put(make_record(0))
    record_path(store, ref).write_bytes(b"x" * 5000)
    assert_code("too_large", store.read_bytes, ref)


def test_valid_json_of_other_scope_in_file(tmp_path):
    store = FileEvidenceStore(tmp_path, SCOPE)
    other = InMemoryEvidenceStore(OTHER)
    ref = store.put(make_record(0))
    foreign = other.read_bytes(other.put(make_record(0)))
    record_path(store, ref).write_bytes(foreign)
    forged = EvidenceReference(id=ref.id, sha256=__import__("hashlib").sha256(foreign).hexdigest(),
                               size=len(foreign), acknowledgement="fsync")
    assert_code("corrupt", store.read_record, forged)  # the index still holds the true hash


def test_permissions(tmp_path):
    store = FileEvidenceStore(tmp_path / "ev", SCOPE)
    ref = store.put(make_record(0))
    for folder in (store.root, store.records_dir):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in (record_path(store, ref), store.index_path, store.root / "scope.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in store.records_dir.iterdir()] == [f"{ref.id}.json"]  # no temp left


def test_scope_folder_names_and_mismatch(tmp_path):
    a = EvidenceScope(owner_id="a:b", namespace="c")
    b = EvidenceScope(owner_id="a", namespace="b:c")
    c = EvidenceScope(owner_id="A:B", namespace="c")
    assert len({a.key, b.key, c.key}) == 3
    store = FileEvidenceStore(tmp_path, a)
    store.put(make_record(0))
    assert json.loads((store.root / "scope.json").read_text()) == {
        "namespace": "c", "owner_id": "a:b", "tenant_id": None}
    (store.root / "scope.json").write_text(b.canonical_json() + "\n")
    assert_code("scope", FileEvidenceStore(tmp_path, a).list)


def test_reads_do_not_create_folders(tmp_path):
    store = FileEvidenceStore(tmp_path / "ev", SCOPE)
    assert store.list().entries == ()
    assert_code("missing", store.get_reference, "01900000-0000-7000-8000-000000000000")
    assert store.prune_expired() == 0
    assert not (tmp_path / "ev").exists()


def test_second_instance_sees_records_and_continues_ids(tmp_path):
    first = FileEvidenceStore(tmp_path, SCOPE)
    refs = [first.put(make_record(n)) for n in range(5)]
    second = FileEvidenceStore(tmp_path, SCOPE)
    assert second.get_reference(refs[2].id) == refs[2]
    more = second.put(make_record(5))
    assert more.id > refs[-1].id
    assert first.put(make_record(6)).id > more.id
    assert len(first.list().entries) == 7


def test_clock_going_backwards_keeps_ids_increasing(tmp_path):
    clock = Clock()
    store = FileEvidenceStore(tmp_path, SCOPE, clock=clock)
    a = store.put(make_record(0))
    clock.t -= 3600
    b = store.put(make_record(1))
    assert b.id > a.id


def test_written_acknowledgement_without_fsync(tmp_path):
    store = FileEvidenceStore(tmp_path, SCOPE, fsync=False)
    ref = store.put(make_record(0))
    assert ref.acknowledgement == "written"
    assert FileEvidenceStore(tmp_path, SCOPE).get_reference(ref.id).acknowledgement == "written"


def test_torn_index_tail_is_ignored_then_repaired(fstore):
    refs = [fstore.put(make_record(n)) for n in range(3)]
    with open(fstore.index_path, "ab") as fh:
        fh.write(b'{"id":"0190')  # a writer died mid-append
    assert len(fstore.list().entries) == 3
    assert fstore.get_reference(refs[2].id) == refs[2]
    ref = fstore.put(make_record(3))
    assert [e.id for e in fstore.list().entries] == [r.id for r in refs] + [ref.id]
    assert fstore.index_path.read_bytes().endswith(b"\n")


def test_damaged_index_is_corrupt_and_rebuild_recovers(fstore):
    refs = [fstore.put(make_record(n)) for n in range(4)]
    lines = fstore.index_path.read_bytes().split(b"\n")
    lines[2] = b"garbage" + lines[2]
    fstore.index_path.write_bytes(b"\n".join(lines))
    assert_code("corrupt", fstore.list)
    report = fstore.rebuild_index()
    assert report == {"indexed": 4, "skipped": [], "corrupt": []}
    assert [fstore.get_reference(r.id) for r in refs[2:]] == refs[2:]  # fsync kept where known
    assert fstore.get_reference(refs[1].id).acknowledgement == "written"


def test_rebuild_after_lost_index(fstore):
    refs = [fstore.put(make_record(n)) for n in range(3)]
    fstore.index_path.unlink()
    record_path(fstore, refs[0]).write_bytes(b"{not json")
    report = fstore.rebuild_index()
    assert report == {"indexed": 2, "skipped": [refs[0].id], "corrupt": []}
    assert fstore.read_record(fstore.get_reference(refs[1].id)).call_id == "call-1"


def test_rebuild_never_reindexes_a_changed_record_under_a_new_hash(fstore):
    refs = [fstore.put(make_record(n)) for n in range(3)]
    path = record_path(fstore, refs[1])
    path.write_bytes(path.read_bytes().replace(b"call-1", b"call-X"))
    record_path(fstore, refs[2]).write_bytes(b"{not json")  # stored, then garbled
    report = fstore.rebuild_index()
    assert report == {"indexed": 3, "skipped": [], "corrupt": [refs[1].id, refs[2].id]}
    assert fstore.get_reference(refs[1].id) == refs[1]  # still the stored hash
    for ref in refs[1:]:
        assert_code("corrupt", fstore.read_bytes, ref)
    # without the index, a hash recorded elsewhere (a session's reference) is checked too
    fstore.index_path.unlink()
    report = fstore.rebuild_index({refs[1].id: (refs[1].sha256, refs[1].size)})
    assert report["corrupt"] == [refs[1].id] and report["skipped"] == [refs[2].id]
    assert fstore.get_reference(refs[1].id).sha256 == refs[1].sha256
    assert_code("corrupt", fstore.read_bytes, refs[1])


def test_lock_timeout_is_busy(fstore):
    fstore.put(make_record(0))
    holder = FileLock(str(fstore.root / ".lock"), thread_local=False)
    holder.acquire()
    try:
        slow = FileEvidenceStore(fstore.directory, SCOPE, lock_timeout_s=0.05)
        assert_code("busy", slow.put, make_record(1))
        assert len(slow.list().entries) == 1  # readers take no lock
    finally:
        holder.release()


WRITER = textwrap.dedent("""
    import sys
    from amos.evidence import EvidenceRecord, EvidenceScope, FileEvidenceStore
    store = FileEvidenceStore(sys.argv[1], EvidenceScope(owner_id="alice", namespace="default"))
    for n in range(int(sys.argv[3])):
        store.put(EvidenceRecord(execution_id=sys.argv[2], call_id=f"{sys.argv[2]}-{n}",
                                 tool="t", status="succeeded", result={"n": n}))
""")


def test_two_processes_write_concurrently(tmp_path):
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name, "60"], env=env)
        for name in ("p1", "p2")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    store = FileEvidenceStore(tmp_path, SCOPE)
    entries = store.list(limit=1000).entries
    assert len(entries) == 120
    ids = [e.id for e in entries]
    assert ids == sorted(set(ids))
    assert {e.call_id for e in entries} == {f"p{p}-{n}" for p in (1, 2) for n in range(60)}
    assert all(store.read_record(e.reference()).result is not None for e in entries)
    assert len(list(store.records_dir.iterdir())) == 120


def test_threads_and_instances_in_one_process(tmp_path):
    import threading

    stores = [FileEvidenceStore(tmp_path, SCOPE), FileEvidenceStore(tmp_path, SCOPE)]
    errors: list[BaseException] = []

    def writer(store: FileEvidenceStore, name: str) -> None:
        try:
            for n in range(40):
                store.put(make_record(n, session=name))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(stores[i % 2], f"t{i}")) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    ids = [e.id for e in stores[1].list(limit=1000).entries]
    assert len(ids) == 240 and ids == sorted(set(ids))
