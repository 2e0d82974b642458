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
    ("sh c*.sh", ["glob:c*.sh", "check.sh"]),
    ("sh < check.sh", ["check.sh"]),
    ("env FOO=1 timeout 30 sh check.sh", ["check.sh"]),
    ("(sh check.sh) && python3 tests/check.py", ["check.sh", "tests/check.py"]),
    (". ./lib.sh && true", ["lib.sh"]),
    ("make check", ["GNUmakefile", "makefile", "Makefile"]),
    ("make -C sub check", ["sub/GNUmakefile", "sub/makefile", "sub/Makefile"]),
    ("sh -e check.sh", ["check.sh"]),
    ("bash -o pipefail check.sh", ["check.sh"]),
    ("cd tests && python3 check.py", ["tests/check.py"]),
    ("sh -c 'cd tests; sh ../check.sh'", ["check.sh"]),
    ("{ sh check.sh; }", ["check.sh"]),
    ("if sh check.sh; then true; else false; fi", ["check.sh"]),
    ('sh "$(pwd)/check.sh"', ["check.sh"]),
    ("sh $PWD/check.sh", ["check.sh"]),
    ("eval sh check.sh", ["check.sh"]),
    ("sh -c 'sh \"$0\"' check.sh", ["check.sh"]),
    ("cat check.sh | sh", ["check.sh"]),
    ("python3 -m tests.check", ["tests/check.py"]),
    ("python3 -m unittest tests/check.py", ["tests/check.py"]),
    ("python3 new_check.py", ["new_check.py"]),
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


def test_pins_see_a_retargeted_link_a_new_glob_match_and_a_new_makefile(ws):
    from amos.engine.check_files import changed_files, pin_files

    (ws / "real.sh").write_text("exit 1\n")
    (ws / "ok.sh").write_text("exit 0\n")
    (ws / "run.sh").symlink_to("real.sh")
    for command, change, seen in (
            ("sh run.sh", lambda: ((ws / "run.sh").unlink(), (ws / "run.sh").symlink_to("ok.sh")), "run.sh"),
            ("sh c*.sh", lambda: (ws / "c0.sh").write_text("exit 0\n"), "glob:c*.sh"),
            ("make check", lambda: (ws / "GNUmakefile").write_text("check:\n\ttrue\n"), "GNUmakefile"),
            ("python3 tests/check.py", lambda: (ws / "tests" / "check.py").write_text("pass\n"), "tests/check.py")):
        pins = pin_files(check_files(command, ws), ws)
        assert changed_files(pins, ws) == [], command
        change()
        assert seen in changed_files(pins, ws), command
