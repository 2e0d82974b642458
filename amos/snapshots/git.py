"""Running the real ``git`` program against the shadow repository, isolated from the user's git.

Every command gets a clean environment built from scratch (no ``GIT_*`` variable of the
user's reaches git; ``HOME`` and ``XDG_CONFIG_HOME`` point inside the shadow repository so
no ``~/.gitconfig`` or ``~/.config/git/*`` is read even by a git older than 2.32), plus
``GIT_CONFIG_GLOBAL=/dev/null`` and ``GIT_CONFIG_NOSYSTEM=1``, and ``-c`` flags that turn
off hooks, fsmonitor, line-ending conversion, signing and automatic gc (issue 20, "Use the
git program ... isolated from the user's git setup"). ``GIT_DIR`` is the shadow repository
and ``GIT_WORK_TREE`` the workspace, so the user's own ``.git`` is never opened.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from amos.errors import SnapshotError

MIN_GIT = (2, 25)
"""Oldest git accepted (``ls-files``/``update-index`` behaviour relied on)."""

AUTHOR = ("amos", "amos@localhost")
"""Name and e-mail of every snapshot commit."""

SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.symlinks", "true"),
    ("core.filemode", "true"),
    ("core.quotePath", "false"),
    ("core.attributesFile", "/dev/null"),
    ("core.excludesFile", "/dev/null"),
    ("core.splitIndex", "false"),
    ("core.untrackedCache", "true"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("safe.directory", "*"),
    ("advice.addEmbeddedRepo", "false"),
)
"""Settings passed with ``-c`` on every command (command-line config wins over any file)."""


def find_git() -> str:
    """The absolute path of ``git`` on ``PATH``.

    Raises:
        SnapshotError: ``git_missing`` when there is none.
    """
    found = shutil.which("git")
    if not found:
        raise SnapshotError(
            "git_missing",
            "file checkpoints need the git program, which is not on PATH "
            "(install git, or set checkpoints.files to false)",
        )
    return found


def clean_env(git_dir: Path, work_tree: Path) -> dict[str, str]:
    """The complete environment of a shadow-repository git command (nothing inherited but PATH)."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(git_dir),
        "XDG_CONFIG_HOME": str(git_dir / "no-xdg"),
        "LC_ALL": "C",
        "LANG": "C",
        "GIT_DIR": str(git_dir),
        "GIT_WORK_TREE": str(work_tree),
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_PAGER": "cat",
        "GIT_AUTHOR_NAME": AUTHOR[0],
        "GIT_AUTHOR_EMAIL": AUTHOR[1],
        "GIT_COMMITTER_NAME": AUTHOR[0],
        "GIT_COMMITTER_EMAIL": AUTHOR[1],
        # glibc: keep freed memory instead of shrinking the heap after every file (git
        # allocates and frees a zlib stream per blob): a first snapshot of 10,000 files
        # spent more system time in brk() than in reading them. Ignored elsewhere.
        "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
        "MALLOC_TOP_PAD_": str(16 << 20),
    }
    if "SYSTEMROOT" in os.environ:  # Windows needs it to start any process
        env["SYSTEMROOT"] = os.environ["SYSTEMROOT"]
    return env


def parse_version(text: str) -> tuple[int, int]:
    """``(major, minor)`` from ``git version 2.39.5`` (``(0, 0)`` when unreadable)."""
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


class Git:
    """Runs git commands on one shadow repository with one work tree.

    Args:
        git_dir: the shadow repository (``GIT_DIR``), outside the workspace.
        work_tree: the workspace (``GIT_WORK_TREE``).
        pass_fds: file descriptors every child inherits (the repository lock, so a git
            process that outlives a killed amos keeps the repository locked).

    Raises:
        SnapshotError: ``git_missing`` (no git on PATH).
    """

    def __init__(self, git_dir: Path, work_tree: Path, *, pass_fds: Sequence[int] = ()):
        self.exe = find_git()
        self.git_dir = git_dir
        self.work_tree = work_tree
        self.env = clean_env(git_dir, work_tree)
        self.pass_fds = tuple(pass_fds)
        self._flags: list[str] = []
        for key, value in SAFE_CONFIG:
            self._flags += ["-c", f"{key}={value}"]

    def check_version(self) -> tuple[int, int]:
        """The git version; raises ``SnapshotError('git_too_old')`` below :data:`MIN_GIT`."""
        version = parse_version(self.run(["version"]).decode(errors="replace"))
        if version < MIN_GIT:
            raise SnapshotError(
                "git_too_old",
                f"file checkpoints need git {MIN_GIT[0]}.{MIN_GIT[1]} or newer "
                f"(found {version[0]}.{version[1]}); upgrade git or set checkpoints.files to false",
            )
        return version

    def argv(self, args: Sequence[str], extra_config: Sequence[tuple[str, str]] = ()) -> list[str]:
        """The full command line of ``git args`` with the isolation flags."""
        flags = list(self._flags)
        for key, value in extra_config:
            flags += ["-c", f"{key}={value}"]
        return [self.exe, *flags, *args]

    def run(self, args: Sequence[str], *, input: bytes | None = None, ok: Sequence[int] = (0,),
            extra_config: Sequence[tuple[str, str]] = (), literal: bool = True) -> bytes:
        """Run ``git args`` in the work tree; return its stdout.

        Args:
            args: the git subcommand and its arguments.
            input: bytes for stdin (None: no stdin).
            ok: exit codes that count as success.
            extra_config: more ``-c key=value`` settings for this command only.
            literal: pathspecs are literal paths (``GIT_LITERAL_PATHSPECS=1``).

        Raises:
            SnapshotError: ``git_failed`` with git's first error line.
        """
        env = self.env if literal else {k: v for k, v in self.env.items() if k != "GIT_LITERAL_PATHSPECS"}
        proc = subprocess.run(
            self.argv(args, extra_config), input=input, capture_output=True, env=env,
            cwd=self.work_tree, pass_fds=self.pass_fds,
            stdin=subprocess.DEVNULL if input is None else None,
        )
        if proc.returncode not in ok:
            raise git_failed(args, proc.returncode, proc.stderr)
        return proc.stdout

    def start(self, args: Sequence[str]) -> subprocess.Popen[bytes]:
        """Start ``git args`` (no stdin) to collect with :meth:`finish` after other work."""
        return subprocess.Popen(
            self.argv(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=self.env, cwd=self.work_tree, pass_fds=self.pass_fds,
        )

    def finish(self, proc: subprocess.Popen[bytes], args: Sequence[str]) -> bytes:
        """The stdout of a command from :meth:`start`; raises ``SnapshotError`` like :meth:`run`."""
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise git_failed(args, proc.returncode, err)
        return out

    def popen(self, args: Sequence[str]) -> subprocess.Popen[bytes]:
        """Start ``git args`` with pipes on stdin and stdout (for ``cat-file --batch``)."""
        return subprocess.Popen(
            self.argv(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=self.env, cwd=self.work_tree, pass_fds=self.pass_fds,
        )


def read_blobs(git: Git, oids: Sequence[str]) -> dict[str, bytes]:
    """The content of each blob in ``oids`` (one ``git cat-file --batch``).

    Raises:
        SnapshotError: ``git_failed``, or an object is missing.
    """
    wanted = list(dict.fromkeys(oids))
    if not wanted:
        return {}
    proc = git.popen(["cat-file", "--batch"])
    out, err = proc.communicate("".join(o + "\n" for o in wanted).encode())
    if proc.returncode != 0:
        raise git_failed(["cat-file"], proc.returncode, err)
    blobs: dict[str, bytes] = {}
    pos = 0
    for oid in wanted:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        if len(header) != 3:
            raise SnapshotError("git_failed", f"git cat-file: object {oid} is missing from the snapshot repository")
        size = int(header[2])
        blobs[oid] = out[end + 1:end + 1 + size]
        pos = end + 1 + size + 1
    return blobs


def _quote(path: bytes) -> bytes:
    """A path as a C-style quoted string for ``git fast-import``."""
    out = bytearray(b'"')
    for byte in path:
        if byte in (0x22, 0x5C):
            out += b"\\" + bytes([byte])
        elif 0x20 <= byte < 0x7F:
            out.append(byte)
        else:
            out += b"\\%03o" % byte
    return bytes(out + b'"')


def commit_packed(git: Git, message: bytes, parent: str | None, stamp: int) -> str:
    """Commit the index's content with ``git fast-import``: trees and commit in one pack.

    Used for a snapshot with many new files, where ``git write-tree`` would write one
    loose object file per folder. ``--done`` makes a cut-off stream change nothing.

    Returns:
        The new commit id (``refs/heads/snapshots`` now points to it).
    """
    listing = git.run(["ls-files", "-s", "-z"])
    parts = [b"commit refs/heads/snapshots\n",
             b"committer %s <%s> %d +0000\n" % (AUTHOR[0].encode(), AUTHOR[1].encode(), stamp),
             b"data %d\n" % len(message), message, b"\n"]
    if parent:
        parts.append(b"from %s\n" % parent.encode())
    parts.append(b"deleteall\n")
    for entry in split_z(listing):
        meta, _, path = entry.partition(b"\t")
        mode, oid, _ = meta.split(b" ")
        parts.append(b"M %s %s %s\n" % (mode, oid, _quote(path)))
    parts.append(b"done\n")
    git.run(["fast-import", "--quiet", "--done"], input=b"".join(parts))
    return git.run(["rev-parse", "--verify", "refs/heads/snapshots"]).decode().strip()


def git_failed(args: Sequence[str], code: int, stderr: bytes) -> SnapshotError:
    """The one-line error of a failed git command."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    first = next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[0] if lines else "")
    return SnapshotError("git_failed", f"git {args[0] if args else ''} failed (exit {code}): {first or 'no message'}")


def split_z(data: bytes) -> list[bytes]:
    """NUL-separated git output as a list of byte strings (no empty tail)."""
    items = data.split(b"\0")
    if items and items[-1] == b"":
        items.pop()
    return items
