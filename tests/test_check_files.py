"""Which files a completion check runs, so the run cannot rewrite them to pass (issue 16).

Second-round break-it findings: ``bash -c 'sh check.sh'`` and ``sh c*.sh`` slipped past
the pin, while ``grep -q z a.txt`` pinned the data file the model was asked to change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from amos.engine.check_files import check_files


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    for name in ("check.sh", "a.txt", "Makefile", "lib.sh"):
        (tmp_path / name).write_text("x\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "check.py").write_text("x\n")
    return tmp_path


@pytest.mark.parametrize("command, pinned", [
    ("sh check.sh", ["check.sh"]),
    ("./check.sh", ["check.sh"]),
    ("bash -eu check.sh arg", ["check.sh"]),
    ("python3 -u tests/check.py", ["tests/check.py"]),
    ("python3 -W ignore tests/check.py", ["tests/check.py"]),
    ("bash -c 'sh check.sh'", ["check.sh"]),
    ("sh -c \"bash -c 'sh check.sh'\"", ["check.sh"]),
    ("sh -ec 'cd . && sh check.sh'", ["check.sh"]),
    ("sh c*.sh", ["check.sh"]),
    ("sh < check.sh", ["check.sh"]),
    ("env FOO=1 timeout 30 sh check.sh", ["check.sh"]),
    ("(sh check.sh) && python3 tests/check.py", ["check.sh", "tests/check.py"]),
    (". ./lib.sh && true", ["lib.sh"]),
    ("make check", ["Makefile"]),
    ("grep -q z a.txt", []),
    ("test -f a.txt", []),
    ("python3 -m pytest -q", []),
    ("python3 -c 'print(1)' check.sh", []),
    ("sh check.sh > a.txt", ["check.sh"]),
    ("sh /etc/profile", []),
    ("sh 'unterminated", []),
])
def test_the_files_a_check_runs(ws, command, pinned):
    assert check_files(command, ws) == pinned
