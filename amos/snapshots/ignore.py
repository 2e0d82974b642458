"""The user's own ignore rules, copied into the shadow repository's ``info/exclude``.

The shadow git reads the workspace's ``.gitignore`` files itself (they are in its work
tree), but global and system config are off, and the user's ``.git`` is never used as the
git directory, so two sources of ignore rules would be lost. They are read explicitly and
written, in git's order of precedence, into the shadow repository's ``info/exclude``
(issue 20, "respects .gitignore and the user's own ignore rules"):

1. ``core.excludesFile``: asked of the user's own git with ``git config --path --get
   core.excludesFile`` run in the workspace (the user's environment, minus ``GIT_*``
   variables that would point git at another repository), else git's default
   ``$XDG_CONFIG_HOME/git/ignore`` or ``~/.config/git/ignore``;
2. the user's ``.git/info/exclude`` (for a linked worktree or submodule, the one in the
   common git directory);
3. ``.gitignore`` files of the folders above the workspace up to the top of the user's
   repository, when the workspace is a subfolder of it.

Rules from files above the workspace are rewritten to be relative to it (anchored
patterns lose the workspace's prefix; ones that cannot match inside it are dropped).
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from pathlib import Path

_KEEP_ENV = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM")


def find_user_repo(workspace: Path) -> tuple[Path, Path] | None:
    """``(top, common_git_dir)`` of the user's repository holding ``workspace``, or None.

    ``top`` is the folder that has the ``.git`` entry (the workspace or a parent).
    """
    for folder in (workspace, *workspace.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return folder, dot_git
        if dot_git.is_file():
            try:
                line = dot_git.read_text(errors="replace").strip()
            except OSError:
                return None
            if not line.startswith("gitdir:"):
                return None
            git_dir = (folder / line.removeprefix("gitdir:").strip()).resolve()
            common = git_dir
            commondir = git_dir / "commondir"
            if commondir.is_file():
                try:
                    common = (git_dir / commondir.read_text().strip()).resolve()
                except OSError:
                    pass
            return folder, common
    return None


def user_excludes_file(workspace: Path, git_exe: str) -> Path | None:
    """The user's ``core.excludesFile`` as their git would use it in ``workspace``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _KEEP_ENV}
    try:
        proc = subprocess.run(
            [git_exe, "config", "--path", "--get", "core.excludesFile"], cwd=workspace, env=env,
            capture_output=True, stdin=subprocess.DEVNULL, timeout=10,
        )
        value = os.fsdecode(proc.stdout.strip()) if proc.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        value = ""
    if value:
        path = Path(value).expanduser()
        return path if path.is_absolute() else workspace / path
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(xdg) / "git" / "ignore"


def _read_lines(path: Path) -> list[str]:
    try:
        if not path.is_file():
            return []
        data = path.read_bytes()[: 1 << 20]
    except OSError:
        return []
    return os.fsdecode(data).splitlines()


def rebase_pattern(line: str, prefix: str) -> str | None:
    """One gitignore line from a folder above the workspace, made relative to the workspace.

    Args:
        line: the raw line.
        prefix: the workspace's path relative to the rules' folder (``sub/dir``; ``""``
            means the same folder).

    Returns:
        The rewritten line, or None when it can never match inside the workspace (or
        would ignore the workspace itself).
    """
    if not prefix or not line.strip() or line.startswith("#"):
        return line
    negate = line.startswith("!")
    body = line[1:] if negate else line
    dir_only = body.endswith("/")
    core = body[:-1] if dir_only else body
    if "/" not in core:
        return line  # matches at any depth, inside the workspace too
    core = core.removeprefix("/")
    parts = core.split("/")
    if parts[0] == "**":
        return line
    wanted = prefix.split("/")
    for i, name in enumerate(wanted):
        if i >= len(parts):
            return None  # matches the workspace or a folder above it
        if parts[i] == "**":
            rest = "/".join(parts[i:])
            return ("!" if negate else "") + rest + ("/" if dir_only else "")
        if not fnmatch.fnmatchcase(name, parts[i]):
            return None
    rest = parts[len(wanted):]
    if not rest:
        return None
    return ("!" if negate else "") + "/" + "/".join(rest) + ("/" if dir_only else "")


def escape_path(rel: str) -> str:
    """A literal path as an anchored gitignore pattern."""
    out = "".join("\\" + c if c in "*?[]\\" else c for c in rel)
    return "/" + out


def user_rules(workspace: Path, excludes: Path | None) -> list[str]:
    """The user's ignore rules that apply inside ``workspace``, lowest precedence first.

    Args:
        workspace: the workspace (resolved).
        excludes: the user's ``core.excludesFile`` (:func:`user_excludes_file`).
    """
    repo = find_user_repo(workspace)
    top = repo[0] if repo else workspace
    prefix = workspace.relative_to(top).as_posix() if top != workspace else ""
    lines: list[str] = []
    sources: list[tuple[Path | None, str]] = [(excludes, prefix)]
    if repo:
        sources.append((repo[1] / "info" / "exclude", prefix))
        parent = top
        for part in (prefix.split("/") if prefix else []):
            sources.append((parent / ".gitignore", workspace.relative_to(parent).as_posix()))
            parent = parent / part
    for path, rel in sources:
        if path is None:
            continue
        kept = [rebased for raw in _read_lines(path) if (rebased := rebase_pattern(raw, rel)) is not None]
        if any(line.strip() and not line.startswith("#") for line in kept):
            lines.append(f"# from {path}")
            lines += kept
    return lines
