"""A snapshot killed at any moment leaves a shadow repository the next use repairs (issue 20)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from amos.snapshots import ShadowRepo
from amos.snapshots.git import Git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")

CHILD = """
import sys
from pathlib import Path
from amos.snapshots import ShadowRepo
repo = ShadowRepo(Path(sys.argv[1]), Path(sys.argv[2]))
print("ready", flush=True)
sys.stdin.readline()
repo.snapshot("in the child")
print("done", flush=True)
"""


def _fill(ws: Path, round_: int, files: int) -> None:
    for i in range(files):
        folder = ws / f"r{round_}" / f"d{i % 20}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_text(f"round {round_} file {i}\n" * 20)


def _fsck(git_dir: Path, ws: Path) -> None:
    Git(git_dir, ws).run(["fsck", "--no-progress", "--no-dangling", "--cache"])


def test_sigkill_at_random_moments_during_a_snapshot_leaves_a_usable_repository(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    git_dir = tmp_path / "snap" / "git"
    _fill(ws, 0, 600)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    rng = random.Random(20)
    killed_mid = 0
    warnings: list[str] = []
    files = 600
    window = 0.2  # seconds after the snapshot starts in which to kill; shrinks to fit the machine
    deadline = time.monotonic() + 4
    for round_ in range(1, 9):
        if round_ > 2 and (time.monotonic() > deadline or killed_mid >= 3):
            break
        _fill(ws, round_, 300)  # every round has new files to hash and write
        files += 300
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(git_dir), str(ws)], env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        assert child.stdout.readline() == b"ready\n"
        child.stdin.write(b"go\n")
        child.stdin.flush()
        started = time.monotonic()
        while not (git_dir / "amos-busy").exists() and child.poll() is None:
            time.sleep(0.001)  # the snapshot has begun once its busy marker is there
        time.sleep(rng.uniform(0, window))
        os.killpg(child.pid, signal.SIGKILL)  # amos and its git children, as a crash would
        child.wait()
        if child.stdout.read() == b"done\n":
            window = max(0.005, (time.monotonic() - started) / 2)
        else:
            killed_mid += 1

        repo = ShadowRepo(git_dir, ws)
        snap = repo.snapshot("after the crash")
        warnings += snap.warnings
        _fsck(git_dir, ws)
        assert snap.files == files
        assert repo.changed(snap, None) == []
        if round_ == 2:
            victim = ws / "r2" / "d0" / "f0.txt"
            data = victim.read_bytes()
            victim.unlink()
            assert repo.restore(snap, ["r2/d0/f0.txt"]).restored == ("r2/d0/f0.txt",)
            assert victim.read_bytes() == data
    assert killed_mid >= 1  # kills landed inside a snapshot
    assert all(w.startswith("snapshots: removed ") and "left by an interrupted snapshot" in w for w in warnings)


def test_a_stale_index_lock_is_removed_and_said(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a").write_text("a")
    git_dir = tmp_path / "snap" / "git"
    ShadowRepo(git_dir, ws).snapshot("first")
    (git_dir / "index.lock").write_bytes(b"half")
    (git_dir / "amos-busy").touch()
    (ws / "a").write_text("b")
    snap = ShadowRepo(git_dir, ws).snapshot("second")
    assert snap.warnings == ("snapshots: removed 1 stale file(s) left by an interrupted snapshot (index.lock)",)
    assert not (git_dir / "index.lock").exists() and not (git_dir / "amos-busy").exists()
    assert snap.files == 1


def test_a_damaged_index_is_rebuilt_and_damaged_objects_start_a_new_repository(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a").write_text("a")
    git_dir = tmp_path / "snap" / "git"
    first = ShadowRepo(git_dir, ws).snapshot("first")
    (git_dir / "index").write_bytes(b"DIRC garbage")
    (git_dir / "amos-busy").touch()
    repo = ShadowRepo(git_dir, ws)
    snap = repo.snapshot("second")
    assert len(snap.warnings) == 1 and snap.warnings[0].startswith("snapshots: rebuilt the snapshot index")
    assert snap.id == first.id  # nothing changed, and the history is intact

    # a half-written object (as after a power cut): the commit itself is unreadable
    obj = git_dir / "objects" / first.id[:2] / first.id[2:]
    os.chmod(obj, 0o644)
    obj.write_bytes(obj.read_bytes()[:5])
    (git_dir / "amos-busy").touch()
    snap = ShadowRepo(git_dir, ws).snapshot("third")
    assert "a new one started" in snap.warnings[-1] and (git_dir.with_name("git.broken")).is_dir()
    assert snap.files == 1 and snap.id != first.id
    _fsck(git_dir, ws)
