"""File tools through the ToolManager: read_file, list_dir, search_text, write_file, edit_file."""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

import pytest

from amos.messages import ToolCallPart
from amos.tools import ToolContext, ToolManager, ToolOutcome, builtin_tools
from amos.tools import files as files_module
from amos.tools import search as search_module

SECRET = "TOP-SECRET-OUTSIDE-CONTENT"
_ids = itertools.count()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n")
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "core.py").write_text("import os\nVALUE = 42\n")
    (root / "src" / "notes.md").write_text("VALUE is documented here\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("VALUE = from git\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\nVALUE = {SECRET}\n")
    os.symlink(outside / "secret.txt", root / "leak.txt")
    os.symlink(outside, root / "leakdir")
    return root


@pytest.fixture
def manager(ws: Path) -> ToolManager:
    return ToolManager(builtin_tools(), context=ToolContext(workspace=ws.resolve()))


async def run(manager: ToolManager, tool: str, **arguments: object) -> ToolOutcome:
    call = ToolCallPart(call_id=f"c{next(_ids)}", tool_name=tool, arguments=arguments)
    return await manager.execute(call, "exec-1")


# ---------------------------------------------------------------- confinement


EVIL_CALLS = [
    ("read_file", {"path": "../outside/secret.txt"}),
    ("read_file", {"path": "leak.txt"}),
    ("read_file", {"path": "leakdir/secret.txt"}),
    ("list_dir", {"path": "leakdir"}),
    ("list_dir", {"path": ".."}),
    ("search_text", {"pattern": "SECRET", "path": "leakdir"}),
    ("search_text", {"pattern": "SECRET", "path": "leak.txt"}),
    ("search_text", {"pattern": "SECRET", "path": "/"}),
    ("write_file", {"path": "leak.txt", "content": "pwned"}),
    ("write_file", {"path": "leakdir/new.txt", "content": "pwned"}),
    ("write_file", {"path": "../escape.txt", "content": "pwned"}),
    ("edit_file", {"path": "leak.txt", "old_text": SECRET, "new_text": "pwned"}),
    ("edit_file", {"path": "leakdir/secret.txt", "old_text": SECRET, "new_text": "pwned"}),
]


@pytest.mark.parametrize(("tool", "arguments"), EVIL_CALLS)
async def test_nothing_outside_the_workspace_is_touched(
    manager: ToolManager, tmp_path: Path, tool: str, arguments: dict[str, object]
) -> None:
    outcome = await run(manager, tool, **arguments)
    assert outcome.status == "failed"
    assert SECRET not in outcome.content
    assert "workspace" in outcome.content
    assert (tmp_path / "outside" / "secret.txt").read_text().startswith(SECRET)
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["secret.txt"]
    assert not (tmp_path / "escape.txt").exists()


async def test_walking_tools_skip_symlinks_that_point_out(manager: ToolManager) -> None:
    listing = await run(manager, "list_dir", path=".", depth=3)
    assert listing.status == "succeeded"
    assert "leak" not in listing.content
    found = await run(manager, "search_text", pattern="SECRET|VALUE")
    assert found.status == "succeeded"
    assert SECRET not in found.content
    assert "leak" not in found.content


# ---------------------------------------------------------------- read_file


async def test_read_file_whole_file_has_header(manager: ToolManager) -> None:
    outcome = await run(manager, "read_file", path="calc.py")
    assert outcome.status == "succeeded"
    assert outcome.content.splitlines()[0] == "calc.py (lines 1-4 of 4)"
    assert outcome.content.endswith("print(add(1, 2))\n")


async def test_read_file_offset_and_limit(manager: ToolManager) -> None:
    outcome = await run(manager, "read_file", path="./calc.py", offset=2, limit=2)
    assert outcome.content == "calc.py (lines 2-3 of 4)\n    return a + b\n\n"
    tail = await run(manager, "read_file", path="calc.py", offset=4, limit=50)
    assert tail.content == "calc.py (lines 4-4 of 4)\nprint(add(1, 2))\n"


async def test_read_file_offset_past_end_and_bad_offset(manager: ToolManager) -> None:
    past = await run(manager, "read_file", path="calc.py", offset=9)
    assert past.status == "failed"
    assert "offset 9" in past.error and "4 lines" in past.error
    zero = await run(manager, "read_file", path="calc.py", offset=0)
    assert zero.status == "failed"
    assert "offset" in zero.error


async def test_read_file_rejects_binary_undecodable_folders_and_missing(
    manager: ToolManager, ws: Path
) -> None:
    (ws / "image.bin").write_bytes(b"\x89PNG\x00\x00\x01")
    (ws / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    for path, phrase in [
        ("image.bin", "binary"),
        ("latin1.txt", "UTF-8"),
        ("src", "folder"),
        ("nope.py", "does not exist"),
    ]:
        outcome = await run(manager, "read_file", path=path)
        assert outcome.status == "failed", path
        assert phrase in outcome.error
        assert path in outcome.error


async def test_read_file_empty_and_crlf(manager: ToolManager, ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    (ws / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    empty = await run(manager, "read_file", path="empty.txt")
    assert empty.status == "succeeded" and "empty" in empty.content
    dos = await run(manager, "read_file", path="dos.txt", offset=2)
    assert dos.content == "dos.txt (lines 2-2 of 2)\ntwo\r\n"


# ---------------------------------------------------------------- list_dir


async def test_list_dir_depth_one(manager: ToolManager) -> None:
    outcome = await run(manager, "list_dir")
    lines = outcome.content.splitlines()
    assert lines[0].startswith("./")
    assert lines[1:] == ["calc.py", "src/"]


async def test_list_dir_deeper_and_subfolder(manager: ToolManager) -> None:
    outcome = await run(manager, "list_dir", path=".", depth=3)
    lines = outcome.content.splitlines()[1:]
    assert lines == ["calc.py", "src/", "src/notes.md", "src/pkg/", "src/pkg/core.py"]
    assert ".git" not in outcome.content
    sub = await run(manager, "list_dir", path="src", depth=1)
    assert sub.content.splitlines()[0].startswith("src/")
    assert sub.content.splitlines()[1:] == ["notes.md", "pkg/"]


async def test_list_dir_depth_is_bounded_and_path_must_be_folder(manager: ToolManager) -> None:
    too_deep = await run(manager, "list_dir", depth=99)
    assert too_deep.status == "failed" and "depth" in too_deep.error
    a_file = await run(manager, "list_dir", path="calc.py")
    assert a_file.status == "failed" and "not a folder" in a_file.error


async def test_list_dir_entry_cap_adds_note(
    manager: ToolManager, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files_module, "MAX_LIST_ENTRIES", 3)
    for i in range(10):
        (ws / f"f{i}.txt").write_text("x")
    outcome = await run(manager, "list_dir")
    entries = [line for line in outcome.content.splitlines()[1:] if not line.startswith("[")]
    assert len(entries) == 3
    assert "listing stopped at 3 entries" in outcome.content


# ---------------------------------------------------------------- search_text


async def test_search_text_results_and_skips_git(manager: ToolManager) -> None:
    outcome = await run(manager, "search_text", pattern=r"VALUE\b")
    assert outcome.status == "succeeded"
    lines = outcome.content.splitlines()
    assert "src/notes.md:1: VALUE is documented here" in lines
    assert "src/pkg/core.py:2: VALUE = 42" in lines
    assert ".git" not in outcome.content
    assert "2 matches in 2 files" in outcome.content


async def test_search_text_respects_gitignore_root_and_nested(
    manager: ToolManager, ws: Path
) -> None:
    (ws / ".gitignore").write_text("build/\n*.log\n!keep.log\n")
    (ws / "build").mkdir()
    (ws / "build" / "out.py").write_text("VALUE = 'built'\n")
    (ws / "debug.log").write_text("VALUE in a log\n")
    (ws / "keep.log").write_text("VALUE kept\n")
    (ws / "src" / ".gitignore").write_text("notes.md\n")
    outcome = await run(manager, "search_text", pattern="VALUE")
    assert "build/out.py" not in outcome.content
    assert "debug.log" not in outcome.content
    assert "keep.log:1: VALUE kept" in outcome.content
    assert "notes.md" not in outcome.content
    assert "src/pkg/core.py:2: VALUE = 42" in outcome.content


async def test_search_text_glob_and_path(manager: ToolManager) -> None:
    only_md = await run(manager, "search_text", pattern="VALUE", glob="*.md")
    assert only_md.content.splitlines()[0] == "src/notes.md:1: VALUE is documented here"
    assert "core.py" not in only_md.content
    under_pkg = await run(manager, "search_text", pattern="import", path="src/pkg")
    assert under_pkg.content.splitlines()[0] == "src/pkg/core.py:1: import os"
    one_file = await run(manager, "search_text", pattern="add", path="calc.py")
    assert one_file.content.splitlines()[:2] == [
        "calc.py:1: def add(a, b):",
        "calc.py:4: print(add(1, 2))",
    ]


async def test_search_text_no_match_binary_and_bad_regex(manager: ToolManager, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"VALUE\x00\x01\x02")
    none = await run(manager, "search_text", pattern="nothing-like-this")
    assert none.status == "succeeded" and none.content.startswith("no matches")
    binary = await run(manager, "search_text", pattern="VALUE")
    assert "blob.bin" not in binary.content
    bad = await run(manager, "search_text", pattern="(unclosed")
    assert bad.status == "failed"
    assert "invalid regex '(unclosed'" in bad.error
    assert "missing )" in bad.error


async def test_search_text_match_cap_adds_note(
    manager: ToolManager, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_module, "MAX_MATCHES", 5)
    (ws / "many.txt").write_text("hit\n" * 50)
    outcome = await run(manager, "search_text", pattern="hit")
    assert sum(1 for line in outcome.content.splitlines() if ": hit" in line) == 5
    assert "stopped after 5 matches" in outcome.content


# ---------------------------------------------------------------- write_file


async def test_write_file_creates_parents_and_reports_bytes(manager: ToolManager, ws: Path) -> None:
    outcome = await run(manager, "write_file", path="new/deep/hello.txt", content="héllo\n")
    assert outcome.status == "succeeded"
    assert outcome.result == {"path": "new/deep/hello.txt", "bytes_written": 7, "created": True}
    assert "7 bytes" in outcome.content
    assert (ws / "new" / "deep" / "hello.txt").read_text() == "héllo\n"
    assert [p.name for p in (ws / "new" / "deep").iterdir()] == ["hello.txt"]


async def test_write_file_of_the_same_bytes_writes_nothing_and_says_so(manager: ToolManager, ws: Path) -> None:
    (ws / "same.txt").write_text("héllo\n")
    before = (ws / "same.txt").stat().st_mtime_ns
    outcome = await run(manager, "write_file", path="same.txt", content="héllo\n")
    assert outcome.status == "succeeded"
    assert outcome.result == {"path": "same.txt", "bytes_written": 0, "created": False, "unchanged": True}
    assert outcome.content == "same.txt already held this content; nothing was written"
    assert (ws / "same.txt").stat().st_mtime_ns == before


async def test_write_file_overwrite_keeps_mode(manager: ToolManager, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("old\n")
    script.chmod(0o750)
    outcome = await run(manager, "write_file", path="run.sh", content="new\n")
    assert outcome.result["created"] is False
    assert script.read_text() == "new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750


async def test_write_file_refuses_folder_and_file_in_the_way(manager: ToolManager) -> None:
    folder = await run(manager, "write_file", path="src", content="x")
    assert folder.status == "failed" and "folder" in folder.error
    blocked = await run(manager, "write_file", path="calc.py/inner.txt", content="x")
    assert blocked.status == "failed" and "calc.py/inner.txt" in blocked.error


# ---------------------------------------------------------------- edit_file


async def test_edit_file_unique_match(manager: ToolManager, ws: Path) -> None:
    outcome = await run(
        manager, "edit_file", path="calc.py", old_text="return a + b", new_text="return a - b"
    )
    assert outcome.status == "succeeded"
    assert outcome.result == {"path": "calc.py", "replacements": 1}
    assert "return a - b" in (ws / "calc.py").read_text()


async def test_edit_file_non_unique_needs_replace_all(manager: ToolManager, ws: Path) -> None:
    (ws / "dup.txt").write_text("x = 1\nx = 1\nx = 1\n")
    refused = await run(manager, "edit_file", path="dup.txt", old_text="x = 1", new_text="x = 2")
    assert refused.status == "failed"
    assert "3 places" in refused.error and "replace_all" in refused.error
    assert (ws / "dup.txt").read_text() == "x = 1\nx = 1\nx = 1\n"
    done = await run(
        manager, "edit_file", path="dup.txt", old_text="x = 1", new_text="x = 2", replace_all=True
    )
    assert done.result == {"path": "dup.txt", "replacements": 3}
    assert (ws / "dup.txt").read_text() == "x = 2\nx = 2\nx = 2\n"


async def test_edit_file_missing_text_and_bad_inputs(manager: ToolManager, ws: Path) -> None:
    missing = await run(manager, "edit_file", path="calc.py", old_text="nope", new_text="x")
    assert missing.status == "failed" and "not found" in missing.error
    empty = await run(manager, "edit_file", path="calc.py", old_text="", new_text="x")
    assert empty.status == "failed" and "empty" in empty.error
    no_file = await run(manager, "edit_file", path="ghost.py", old_text="a", new_text="b")
    assert no_file.status == "failed" and "does not exist" in no_file.error
    (ws / "dos.txt").write_bytes(b"a\r\nb\r\n")
    crlf = await run(manager, "edit_file", path="dos.txt", old_text="a\nb", new_text="c")
    assert "CRLF" in crlf.error


async def test_search_with_catastrophic_regex_stops_within_budget(tmp_path, monkeypatch):
    import time

    from amos.messages import ToolCallPart
    from amos.tools import ToolContext, ToolManager, builtin_tools
    from amos.tools import search as search_module

    monkeypatch.setattr(search_module, "MAX_SEARCH_SECONDS", 0.5)
    (tmp_path / "evil.txt").write_text("x" * 5000 + "\n")
    manager = ToolManager(builtin_tools(), context=ToolContext(workspace=tmp_path))
    call = ToolCallPart(call_id="s", tool_name="search_text", arguments={"pattern": r"(x+x+)+y"})
    started = time.monotonic()
    outcome = await manager.execute(call, "e")
    assert time.monotonic() - started < 5
    assert outcome.status == "failed" and "ran out of time" in outcome.content


async def test_search_does_not_report_a_line_after_the_final_newline(tmp_path):
    from amos.messages import ToolCallPart
    from amos.tools import ToolContext, ToolManager, builtin_tools

    (tmp_path / "one.txt").write_text("only line\n")
    manager = ToolManager(builtin_tools(), context=ToolContext(workspace=tmp_path))
    call = ToolCallPart(call_id="s", tool_name="search_text", arguments={"pattern": ""})
    outcome = await manager.execute(call, "e")
    assert "one.txt:1: only line" in outcome.content and "one.txt:2" not in outcome.content
