"""Workspace confinement: resolve_in_workspace and inside_workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from amos.tools import ToolFailure, resolve_in_workspace
from amos.tools.workspace import ACCEPTED, display_path, inside_workspace, normalize_rel


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("print('a')\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET\n")
    os.symlink(outside / "secret.txt", root / "leak.txt")
    os.symlink(outside, root / "leakdir")
    os.symlink(root / "src" / "a.py", root / "alias.py")
    return root


def test_relative_paths_resolve_inside(ws: Path) -> None:
    assert resolve_in_workspace(ws, "src/a.py", must_exist=True) == (ws / "src/a.py").resolve()
    assert resolve_in_workspace(ws, "./src//a.py", must_exist=True) == (ws / "src/a.py").resolve()
    assert resolve_in_workspace(ws, ".", must_exist=True) == ws.resolve()


def test_symlink_inside_pointing_inside_is_accepted(ws: Path) -> None:
    assert resolve_in_workspace(ws, "alias.py", must_exist=True) == (ws / "src/a.py").resolve()


def test_missing_path_allowed_only_without_must_exist(ws: Path) -> None:
    target = resolve_in_workspace(ws, "new/dir/file.txt", must_exist=False)
    assert target == ws.resolve() / "new" / "dir" / "file.txt"
    with pytest.raises(ToolFailure, match="does not exist"):
        resolve_in_workspace(ws, "new/dir/file.txt", must_exist=True)


@pytest.mark.parametrize(
    ("rel", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("a\x00b", "NUL"),
        ("/etc/passwd", "absolute"),
        ("~/.ssh/id_rsa", "home"),
        ("..", "'..'"),
        ("../outside/secret.txt", "'..'"),
        ("src/../../outside/secret.txt", "'..'"),
        ("src/..", "'..'"),
    ],
)
def test_refused_paths_name_the_path_and_what_is_accepted(ws: Path, rel: str, reason: str) -> None:
    with pytest.raises(ToolFailure) as info:
        resolve_in_workspace(ws, rel, must_exist=False)
    message = str(info.value)
    assert reason in message
    assert ACCEPTED in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("rel", "must_exist"),
    [
        ("leak.txt", True),
        ("leak.txt", False),
        ("leakdir", True),
        ("leakdir/secret.txt", True),
        ("leakdir/secret.txt", False),
        ("leakdir/new.txt", False),
        ("leakdir/deeper/new.txt", False),
    ],
)
def test_symlinks_pointing_out_are_refused(ws: Path, rel: str, must_exist: bool) -> None:
    with pytest.raises(ToolFailure, match="outside the workspace"):
        resolve_in_workspace(ws, rel, must_exist=must_exist)


def test_dangling_symlink_pointing_out_is_refused(ws: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "outside" / "not-yet.txt", ws / "dangling.txt")
    with pytest.raises(ToolFailure, match="outside the workspace"):
        resolve_in_workspace(ws, "dangling.txt", must_exist=False)
    with pytest.raises(ToolFailure, match="outside the workspace"):
        resolve_in_workspace(ws, "dangling.txt/x", must_exist=False)


def test_symlinked_workspace_root_is_resolved(ws: Path, tmp_path: Path) -> None:
    link = tmp_path / "ws-link"
    os.symlink(ws, link)
    assert resolve_in_workspace(link, "src/a.py", must_exist=True) == (ws / "src/a.py").resolve()
    with pytest.raises(ToolFailure):
        resolve_in_workspace(link, "leak.txt", must_exist=True)


def test_symlink_loop_is_a_tool_failure(ws: Path) -> None:
    os.symlink(ws / "loop-b", ws / "loop-a")
    os.symlink(ws / "loop-a", ws / "loop-b")
    with pytest.raises(ToolFailure):
        resolve_in_workspace(ws, "loop-a/x", must_exist=True)


def test_inside_workspace_and_display_helpers(ws: Path) -> None:
    root = ws.resolve()
    assert inside_workspace(root, root / "src" / "a.py")
    assert inside_workspace(root, root / "alias.py")
    assert not inside_workspace(root, root / "leak.txt")
    assert not inside_workspace(root, root / "leakdir")
    assert display_path(root, root) == "."
    assert display_path(root, root / "src" / "a.py") == "src/a.py"
    assert normalize_rel("./src//a.py") == "src/a.py"
    assert normalize_rel(".") == "."
