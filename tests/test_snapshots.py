"""Workspace snapshots in a shadow git repository, with real git on real folders (issue 20)."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from amos.config import AmosConfig
from amos.errors import SnapshotError
from amos.paths import snapshots_dir
from amos.snapshots import FileChange, ShadowRepo, open_session_repo, snapshot_refusal

from .support import user_git as _git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")



def _tree_digest(folder: Path) -> dict[str, tuple[int, str]]:
    """Every entry under ``folder``: relative path -> (mode, sha256 of content or link target)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            data = os.readlink(path).encode()
        elif stat.S_ISREG(st.st_mode):
            data = path.read_bytes()
        else:
            data = b""
        out[path.relative_to(folder).as_posix()] = (st.st_mode, hashlib.sha256(data).hexdigest())
    return out


def _state(folder: Path, skip: str = ".git") -> dict[str, tuple[int, str]]:
    return {k: v for k, v in _tree_digest(folder).items() if not (k == skip or k.startswith(skip + "/"))}


@pytest.fixture
def ws(tmp_path):
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
def repo(tmp_path, ws):
    return ShadowRepo(tmp_path / "snapshots" / "git", ws)


def _project(ws: Path) -> None:
    (ws / "edit.py").write_text("print('v1')\n")
    (ws / "gone.txt").write_bytes(b"\x00binary\xffbytes\r\n")
    (ws / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(ws / "tool.sh", 0o750)
    os.chmod(ws / "gone.txt", 0o640)
    (ws / "src").mkdir()
    (ws / "src" / "crlf.txt").write_bytes(b"line one\r\nline two\r\n")


def test_write_edit_and_shell_delete_are_undone_exactly_and_the_users_work_is_kept(repo, ws):
    _project(ws)
    _git(ws, "init", "-q")
    (ws / ".gitattributes").write_text("* text=auto eol=lf\n")
    _git(ws, "add", "edit.py", ".gitattributes")
    _git(ws, "commit", "-qm", "base")
    (ws / "edit.py").write_text("print('staged')\n")
    _git(ws, "add", "edit.py")  # the user has staged changes
    user_git = _tree_digest(ws / ".git")
    before_files = _state(ws)

    before = repo.snapshot("before step 1", include=["new.txt", "edit.py"])
    (ws / "new.txt").write_text("written by the agent\n")  # write_file
    (ws / "edit.py").write_text("print('agent')\n")  # edit_file
    os.chmod(ws / "edit.py", 0o755)
    subprocess.run("rm gone.txt && printf x >> src/crlf.txt", shell=True, cwd=ws, check=True)  # run_command
    after = repo.snapshot("after step 1")
    (ws / "mine.txt").write_text("the user's own file\n")  # the user, meanwhile

    assert repo.changed(before, after) == [
        ("edit.py", "modified"), ("gone.txt", "deleted"), ("new.txt", "added"), ("src/crlf.txt", "modified"),
    ]
    changes = repo.agent_changes([(before.id, after.id)])
    result = repo.revert(changes)

    assert result.conflicts == () and result.failed == ()
    assert sorted(result.restored) == ["edit.py", "gone.txt", "new.txt", "src/crlf.txt"]
    now = _state(ws)
    assert now.pop("mine.txt") and now == before_files
    assert (ws / "src" / "crlf.txt").read_bytes() == b"line one\r\nline two\r\n"  # no line-ending conversion
    assert _tree_digest(ws / ".git") == user_git  # the user's .git, index and staged change untouched
    assert _git(ws, "diff", "--cached", "--name-only").split() == ["edit.py"]
    # the restore itself can be undone
    redo = repo.restore(result.before, [c.path for c in changes])
    assert (ws / "new.txt").read_text() == "written by the agent\n" and not (ws / "gone.txt").exists()
    assert redo.before.id != result.before.id


def test_a_file_changed_after_the_agent_is_a_conflict_and_kept_without_force(repo, ws):
    _project(ws)
    before = repo.snapshot("before", include=["edit.py"])
    (ws / "edit.py").write_text("agent\n")
    (ws / "tool.sh").write_text("agent too\n")
    after = repo.snapshot("after")
    (ws / "edit.py").write_text("the user edited it after the agent\n")
    changes = repo.agent_changes([(before.id, after.id)])

    assert [(c.path, c.reason) for c in repo.conflicts([c.path for c in changes], after)] == [
        ("edit.py", "changed after the agent's change")]
    result = repo.revert(changes)
    assert [c.path for c in result.conflicts] == ["edit.py"]
    assert (ws / "edit.py").read_text() == "the user edited it after the agent\n"
    assert result.restored == ("tool.sh",) and (ws / "tool.sh").read_text() == "#!/bin/sh\necho hi\n"
    assert oct(os.stat(ws / "tool.sh").st_mode & 0o7777) == "0o750"

    forced = repo.revert(changes, force=True)
    assert forced.forced and (ws / "edit.py").read_text() == "print('v1')\n"
    # the user's edit is in the snapshot taken just before the forced restore
    repo.restore(forced.before, ["edit.py"])
    assert (ws / "edit.py").read_text() == "the user edited it after the agent\n"


def test_a_file_deleted_or_recreated_by_the_user_is_a_conflict(repo, ws):
    _project(ws)
    before = repo.snapshot("before")
    (ws / "edit.py").write_text("agent\n")
    os.unlink(ws / "tool.sh")
    after = repo.snapshot("after")
    os.unlink(ws / "edit.py")
    (ws / "tool.sh").write_text("user made a new one\n")
    result = repo.revert(repo.agent_changes([(before.id, after.id)]))
    assert {c.path: c.reason for c in result.conflicts} == {
        "edit.py": "deleted after the agent's change", "tool.sh": "created after the agent deleted it"}
    assert not (ws / "edit.py").exists() and (ws / "tool.sh").read_text() == "user made a new one\n"


def test_ignore_rules_of_the_workspace_and_the_user_are_respected(tmp_path, ws, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[core]\n\texcludesFile = ~/global-ignore\n")
    (home / "global-ignore").write_text("*.global\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    _git(ws, "init", "-q")
    (ws / ".git" / "info" / "exclude").write_text("/local-only/\n")
    (ws / ".gitignore").write_text("*.log\nbuild/\n")
    for name in ("keep.py", "debug.log", "x.global", "build/out.o", "local-only/notes.md", ".env.log"):
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_bytes(os.fsencode(name))
    repo = ShadowRepo(tmp_path / "snap" / "git", ws)

    first = repo.snapshot("first")
    assert first.files == 2  # keep.py and .gitignore
    assert repo.changed(first, None) == []
    # a file the write tools touch is snapshotted before the write even when ignored
    before = repo.snapshot("before write", include=[".env.log"])
    (ws / ".env.log").write_text("changed by the agent")
    (ws / "debug.log").write_text("changed by a command: ignored, so never restored")
    after = repo.snapshot("after write")
    result = repo.revert(repo.agent_changes([(before.id, after.id)]))
    assert result.restored == (".env.log",) and (ws / ".env.log").read_text() == ".env.log"
    assert (ws / "debug.log").read_text().startswith("changed by a command")
    # asking for an ignored file no snapshot holds leaves it alone
    gone = repo.restore(first, ["debug.log"])
    assert [c.path for c in gone.unavailable] == ["debug.log"] and (ws / "debug.log").exists()


def test_an_ignored_file_touched_later_in_a_step_is_undone_from_the_snapshot_before_it(repo, ws):
    (ws / ".gitignore").write_text("*.secret\n")
    (ws / "a.secret").write_text("original")
    step_before = repo.snapshot("before step", include=["main.py"])  # first change of the step
    (ws / "main.py").write_text("new")
    repo.snapshot("before the second write", include=["a.secret"])  # a later write tool
    (ws / "a.secret").write_text("agent")
    step_after = repo.snapshot("after step")
    changes = repo.agent_changes([(step_before.id, step_after.id)])
    assert [(c.path, c.change) for c in changes] == [("a.secret", "modified"), ("main.py", "added")]
    repo.revert(changes)
    assert (ws / "a.secret").read_text() == "original" and not (ws / "main.py").exists()


def test_large_files_are_skipped_and_named_and_the_size_cap_is_reported(tmp_path, ws):
    (ws / "small.txt").write_text("s")
    (ws / "big.bin").write_bytes(b"x" * 200)
    repo = ShadowRepo(tmp_path / "snap" / "git", ws, max_file_bytes=100, max_workspace_bytes=150)
    first = repo.snapshot("first")
    assert [(s.path, s.size_bytes) for s in first.skipped] == [("big.bin", 200)]
    assert "checkpoints.max_file_bytes" in first.skipped[0].reason and not first.exceeded
    (ws / "small.txt").write_text("x" * 120)  # grows past the limit
    (ws / "big.bin").write_bytes(b"x" * 300)
    (ws / "more.txt").write_text("y" * 90)
    (ws / "more2.txt").write_text("y" * 90)
    second = repo.snapshot("second")
    assert second.exceeded and second.files == 0
    assert any("max_workspace_bytes" in w and "2 new file(s) were left out" in w for w in second.warnings)
    assert repo.changed(first, second) == [("big.bin", "modified"), ("small.txt", "modified")]
    result = repo.restore(first, ["big.bin", "more.txt"])
    assert [(c.path, c.reason) for c in result.unavailable] == [
        ("big.bin", "not in the snapshot: larger than checkpoints.max_file_bytes (100 bytes)")]
    assert not (ws / "more.txt").exists() and (ws / "big.bin").stat().st_size == 300
    repo.restore(result.before, ["more.txt"])  # a path to restore is kept first even over the cap
    assert (ws / "more.txt").read_text() == "y" * 90


def test_empty_folders_symlinks_and_exact_modes_come_back(repo, ws):
    (ws / "empty" / "deeper").mkdir(parents=True)
    (ws / "private").mkdir(mode=0o700)
    os.chmod(ws / "private", 0o700)
    (ws / "private" / "key").write_text("k")
    os.chmod(ws / "private" / "key", 0o600)
    (ws / "odd").write_text("o")
    os.chmod(ws / "odd", 0o4744)
    os.symlink("private/key", ws / "link")
    expected = _state(ws)
    before = repo.snapshot("before")
    subprocess.run("rm -rf empty private odd link && mkdir made && ln -s nowhere link", shell=True, cwd=ws, check=True)
    after = repo.snapshot("after")
    assert repo.changed(before, after) == [
        FileChange("empty/", "deleted"), FileChange("empty/deeper/", "deleted"), FileChange("link", "modified"),
        FileChange("made/", "added"), FileChange("odd", "deleted"), FileChange("private/key", "deleted"),
    ]
    result = repo.revert(repo.agent_changes([(before.id, after.id)]))
    assert result.failed == ()
    assert _state(ws) == expected
    assert repo.changed(before, None) == []
    os.chmod(ws / "odd", 0o644)
    assert repo.changed(before, None) == [("odd", "mode")]


def test_a_mode_change_in_the_same_second_is_seen(repo, ws):
    (ws / "f").write_text("same")
    first = repo.snapshot("first")
    os.chmod(ws / "f", 0o600)
    assert repo.changed(first, None) == [("f", "mode")]
    assert repo.diff(first, None) == "# mode 0644 -> 0600: f\n"


def test_unchanged_workspace_gives_the_same_snapshot(repo, ws):
    (ws / "a").write_text("a")
    first = repo.snapshot("one")
    assert repo.snapshot("two").id == first.id
    (ws / "a").write_text("b")
    assert repo.snapshot("three").id != first.id
    assert [s.message for s in repo.log()] == ["three", "one"]
    assert repo.get(first.id[:10]).id == first.id


def test_restore_never_writes_through_a_symlink_or_touches_other_paths(repo, ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "dir").mkdir()
    (ws / "dir" / "f").write_text("inside")
    (ws / "other").write_text("other")
    before = repo.snapshot("before")
    shutil.rmtree(ws / "dir")
    os.symlink(outside, ws / "dir")  # something put a link where the folder was
    (ws / "other").write_text("changed, not asked for")
    result = repo.restore(before, ["dir/f"])
    assert [c.path for c in result.failed] == ["dir/f"] and "symbolic link" in result.failed[0].reason
    assert list(outside.iterdir()) == [] and (ws / "other").read_text() == "changed, not asked for"


def test_nested_repositories_are_snapshotted_as_plain_files_but_their_git(repo, ws, monkeypatch):
    (ws / "top.txt").write_text("t")
    (ws / "vendor" / "lib" / "node_modules").mkdir(parents=True)
    _git(ws / "vendor" / "lib", "init", "-q")
    (ws / "vendor" / "lib" / "x.c").write_text("x")
    (ws / "vendor" / "lib" / ".gitignore").write_text("node_modules/\n")
    (ws / "vendor" / "lib" / "node_modules" / "dep.js").write_text("ignored by the nested repository")
    snap = repo.snapshot("s")
    assert snap.skipped == () and snap.files == 3  # top.txt, x.c, its .gitignore; never its .git
    listed = repo._git.run(["ls-tree", "-r", "--name-only", snap.id]).decode().split()
    assert listed == ["top.txt", "vendor/lib/.gitignore", "vendor/lib/x.c"]

    import amos.snapshots.capture as capture

    monkeypatch.setattr(capture, "MAX_NESTED_FILES", 2)
    (ws / "big").mkdir()
    _git(ws / "big", "init", "-q")
    for i in range(3):
        (ws / "big" / f"f{i}").write_text("x")
    snap = repo.snapshot("s2")
    assert [(s.path, s.reason) for s in snap.skipped] == [("big/", "nested git repository with more than 2 files")]


def test_diff_is_unified_plain_or_colored(repo, ws):
    (ws / "a.txt").write_text("one\n")
    first = repo.snapshot("first")
    (ws / "a.txt").write_text("two\n")
    text = repo.diff(first)
    assert "--- a/a.txt\n+++ b/a.txt\n" in text and "-one\n+two\n" in text and "\x1b[" not in text
    assert "\x1b[" in repo.diff(first, color=True)
    assert "1 file changed" in repo.diff(first, stat=True)
    (ws / "b.txt").write_text("other\n")
    assert "b.txt" in repo.diff(first) and "b.txt" not in repo.diff(first, paths=["a.txt"])
    assert "a.txt" in repo.diff(first, paths=["a.txt"]) and repo.diff(first, paths=[]) == ""


def test_the_users_git_environment_and_config_never_reach_the_shadow_repository(tmp_path, ws, monkeypatch):
    _git(ws, "init", "-q")
    marker = tmp_path / "ran"
    (ws / ".git" / "hooks" / "pre-commit").write_text(f"#!/bin/sh\ntouch {marker}\n")
    os.chmod(ws / ".git" / "hooks" / "pre-commit", 0o755)
    _git(ws, "config", "filter.evil.clean", f"touch {marker}; cat")
    (ws / ".gitattributes").write_text("* filter=evil\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[core]\n\thooksPath = {ws}/.git/hooks\n\tautocrlf = true\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(ws / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(ws / ".git" / "index"))
    (ws / "f.txt").write_bytes(b"a\r\nb\n")
    user_git = _tree_digest(ws / ".git")
    repo = ShadowRepo(tmp_path / "snap" / "git", ws)
    before = repo.snapshot("s")
    (ws / "f.txt").write_text("changed")
    repo.restore(before, ["f.txt"])
    assert (ws / "f.txt").read_bytes() == b"a\r\nb\n"
    assert not marker.exists()
    assert _tree_digest(ws / ".git") == user_git


def test_bad_paths_are_one_line_errors(repo, ws):
    for bad in ("../x", "/etc/passwd", ".git/config", ""):
        with pytest.raises(SnapshotError) as info:
            repo.snapshot("s", include=[bad])
        assert info.value.code == "bad_path" and "\n" not in str(info.value)
    with pytest.raises(SnapshotError) as info:
        repo.get("deadbeef")
    assert info.value.code == "not_found"


def test_git_missing_is_a_clear_one_line_error(tmp_path, ws, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(SnapshotError) as info:
        ShadowRepo(tmp_path / "snap" / "git", ws)
    assert info.value.code == "git_missing"
    assert str(info.value) == ("file checkpoints need the git program, which is not on PATH "
                               "(install git, or set checkpoints.files to false)")
    repo, why = open_session_repo(AmosConfig(), "s1", ws)
    assert repo is None and why.startswith("file checkpoints are off: file checkpoints need the git program")


def test_which_folders_may_be_snapshotted(tmp_path, ws, amos_home):
    home = tmp_path / "home"
    (home / "proj").mkdir(parents=True)
    assert snapshot_refusal(Path("/"), home=home) == "/ is the root of the file system"
    assert "is your home folder" in snapshot_refusal(home, home=home)
    assert "holds your home folder" in snapshot_refusal(tmp_path, home=home)
    assert snapshot_refusal(home / "proj", home=home) is None
    assert "does not exist" in snapshot_refusal(tmp_path / "nope", home=home)
    inside = amos_home / "data" / "x"
    inside.mkdir(parents=True)
    assert "amos's data folder" in snapshot_refusal(inside, home=home)
    repo, why = open_session_repo(AmosConfig.model_validate({"checkpoints": {"files": False}}), "s1", ws)
    assert repo is None and "checkpoints.files is false" in why
    repo, why = open_session_repo(AmosConfig(), "s1", ws)
    assert why is None and repo.git_dir == snapshots_dir("s1") / "git"


def test_amos_data_inside_the_workspace_is_never_snapshotted(tmp_path, monkeypatch):
    ws = tmp_path / "proj"
    ws.mkdir()
    monkeypatch.setenv("AMOS_HOME", str(ws / ".amos"))
    (ws / "a.txt").write_text("a")
    repo, _ = open_session_repo(AmosConfig(), "s1", ws)
    (ws / ".amos" / "data" / "sessions").mkdir(parents=True)
    (ws / ".amos" / "data" / "sessions" / "x.json").write_text("{}")
    snap = repo.snapshot("s")
    assert snap.files == 1 and repo.changed(snap, None) == []


def test_a_linked_worktree_git_file_and_odd_names_are_handled(tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    _git(main, "init", "-q")
    (main / "a.txt").write_text("a")
    _git(main, "add", "a.txt")
    _git(main, "commit", "-qm", "a")
    ws = tmp_path / "linked"
    _git(main, "worktree", "add", "-q", str(ws))
    assert (ws / ".git").is_file()
    odd = os.fsdecode(b"caf\xe9 [1]*.txt")  # not UTF-8, and glob characters
    (ws / odd).write_bytes(b"odd")
    repo = ShadowRepo(tmp_path / "snap" / "git", ws)
    before = repo.snapshot("s", include=[".env"])
    assert before.files == 2  # a.txt and the odd name; never the .git file
    os.unlink(ws / odd)
    (ws / ".env").write_text("created by the agent while ignored")
    (ws / ".gitignore").write_text(".env\n")
    after = repo.snapshot("t")
    result = repo.revert(repo.agent_changes([(before.id, after.id)]))
    assert sorted(result.restored) == [".env", ".gitignore", odd]
    assert (ws / odd).read_bytes() == b"odd" and not (ws / ".env").exists()
    assert (ws / ".git").is_file()


def test_a_first_snapshot_of_many_files_is_exact_too(repo, ws):
    for i in range(80):  # past capture.BULK_FILES: one pack, trees written by fast-import
        (ws / "many" / f"d{i % 7}").mkdir(parents=True, exist_ok=True)
        (ws / "many" / f"d{i % 7}" / f"f{i}").write_text(f"file {i}\n")
    for name in ('quote"and\\back', "new\nline", "tab\there", os.fsdecode(b"\xff\xfe")):
        (ws / name).write_bytes(os.fsencode(name))
    (ws / "run").write_text("#!/bin/sh\n")
    os.chmod(ws / "run", 0o755)
    os.symlink("run", ws / "link")
    expected = _state(ws)
    first = repo.snapshot("first")
    assert first.files == 86 and repo.changed(first, None) == []
    for child in ws.iterdir():
        shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    result = repo.restore(first, [p for p, _ in repo.changed(first, None)])
    assert result.failed == () and _state(ws) == expected


def test_agent_changes_say_when_something_else_changed_a_file_between_steps(repo, ws):
    (ws / "a").write_text("0")
    s1 = repo.snapshot("before 1")
    (ws / "a").write_text("agent 1")
    s2 = repo.snapshot("after 1")
    (ws / "a").write_text("user in between")
    s3 = repo.snapshot("before 2")
    (ws / "a").write_text("agent 2")
    (ws / "b").write_text("agent 2 made it")
    s4 = repo.snapshot("after 2")
    changes = repo.agent_changes([(s1.id, s2.id), (s3.id, s4.id)])
    assert [(c.path, c.change, c.before, c.after, c.outside) for c in changes] == [
        ("a", "modified", s1.id, s4.id, True), ("b", "added", s3.id, s4.id, False)]
    assert [c.path for c in repo.agent_changes([(s3.id, s4.id)])] == ["a", "b"]
