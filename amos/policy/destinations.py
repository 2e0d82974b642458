"""Destination checks: the cheapest deterministic check of the real result (issue 16).

A completion check on a file or folder of the workspace: it exists with the right
type, and optionally has a minimum size, an exact SHA-256, valid JSON matching a JSON
Schema (the ``jsonschema`` library), or content matching a regular expression. Each
failing requirement is named in the feedback the model gets. A path that cannot be
read for another reason than not existing (a permission error, a FIFO, a device) is a
checker error: the host cannot give a verdict, which is never the model's fault.

Pure apart from reading the files it names; reads are bounded and never block.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amos.policy.stop import CompletionResult

MAX_CONTENT_BYTES = 16 * 1024 * 1024
"""Most bytes of one file read for ``json_schema`` or ``contains`` (larger: a failure)."""

REGEX_TIMEOUT_S = 2.0
"""Limit of one ``contains`` search (seconds): a pattern that backtracks on model-written
content must not hang the host."""

_FEEDBACK_CHARS = 2000


class DestinationError(Exception):
    """A destination check could not give a verdict (the message is one line)."""


@dataclass(frozen=True, eq=False)
class FileCheck:
    """One destination check.

    Attributes:
        path: workspace-relative path (validated by the config: no ``..``, not absolute).
        type: ``file`` or ``dir``.
        min_bytes: the file holds at least this many bytes.
        sha256: the file's exact SHA-256 (64 lowercase hex digits).
        json_schema: the file is JSON valid against this JSON Schema (inline, host-owned).
        contains: a regular expression the file's text must contain a match for (``regex``
            syntax, multi-line: ``^`` and ``$`` match at every line).
    """

    path: str
    type: str = "file"
    min_bytes: int | None = None
    sha256: str | None = None
    json_schema: Mapping[str, Any] | None = field(default=None)
    contains: str | None = None

    @classmethod
    def of(cls, value: Any) -> FileCheck:
        """A check from a config entry: a path string, or an object with the fields above."""
        if isinstance(value, FileCheck):
            return value
        if isinstance(value, str):
            return cls(path=value)
        data = value.model_dump() if hasattr(value, "model_dump") else dict(value)
        return cls(**{k: v for k, v in data.items() if v is not None})

    def describe(self) -> str:
        """The check in a few words (``report.json: JSON schema, ≥ 10 bytes``)."""
        parts = [] if self.type == "file" else ["a folder"]
        if self.min_bytes is not None:
            parts.append(f"≥ {self.min_bytes} bytes")
        if self.sha256:
            parts.append(f"sha256 {self.sha256[:12]}…")
        if self.json_schema is not None:
            parts.append("JSON schema")
        if self.contains:
            parts.append(f"contains /{self.contains}/")
        return self.path + (f" ({', '.join(parts)})" if parts else "")

    def to_dict(self) -> dict[str, Any]:
        """The config form (only the requirements set)."""
        data: dict[str, Any] = {"path": self.path}
        for name in ("min_bytes", "sha256", "json_schema", "contains"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        if self.type != "file":
            data["type"] = self.type
        return data


def check_schema(schema: Any) -> None:
    """Raise ``ValueError`` naming the problem when ``schema`` is not a valid JSON Schema."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, Mapping):
        raise ValueError("json_schema must be a JSON Schema object")
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"json_schema is not a valid JSON Schema: {exc.message}") from None


def check_pattern(pattern: str) -> None:
    """Raise ``ValueError`` when ``pattern`` is not a valid regular expression."""
    import regex

    try:
        regex.compile(pattern)
    except regex.error as exc:
        raise ValueError(f"contains is not a valid regular expression: {exc}") from None


def _open_regular(path: Path) -> tuple[int, os.stat_result] | None:
    """An fd of the regular file at ``path`` and its stat; None when it does not exist.

    Raises:
        DestinationError: it is not a regular file, or cannot be opened.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as exc:
        raise DestinationError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(str(path))
        raise DestinationError(f"{path.name} is not a regular file (a FIFO, socket or device); it cannot be "
                               "checked")
    return fd, info


def _read_all(fd: int, limit: int) -> bytes | None:
    chunks, total = [], 0
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            return None
        chunks.append(chunk)


def _sha256(fd: int) -> str:
    digest = hashlib.sha256()
    while chunk := os.read(fd, 1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


def evaluate(check: FileCheck, workspace: Path) -> list[str]:
    """What ``check`` finds wrong with the workspace now ([] when it passes).

    Raises:
        DestinationError: the path cannot be examined (not a verdict).
    """
    path = workspace / check.path
    if check.type == "dir":
        if path.is_dir():
            return []
        return [f"{check.path} is not a folder" if path.exists() else f"{check.path} does not exist"]
    try:
        opened = _open_regular(path)
    except IsADirectoryError:
        return [f"{check.path} is a folder, not a file"]
    if opened is None:
        return [f"{check.path} does not exist"]
    fd, info = opened
    problems: list[str] = []
    try:
        if check.min_bytes is not None and info.st_size < check.min_bytes:
            problems.append(f"{check.path} holds {info.st_size} bytes; at least {check.min_bytes} are required")
        if check.sha256:
            actual = _sha256(fd)
            if actual != check.sha256.lower():
                problems.append(f"{check.path} has SHA-256 {actual}, not the required {check.sha256.lower()}")
        if check.json_schema is not None or check.contains:
            os.lseek(fd, 0, os.SEEK_SET)
            data = _read_all(fd, MAX_CONTENT_BYTES)
            if data is None:
                problems.append(f"{check.path} is larger than {MAX_CONTENT_BYTES} bytes; its content cannot be checked")
                return problems
            text = data.decode("utf-8", errors="replace")
            if check.json_schema is not None:
                problems.extend(_schema_problems(check, text))
            if check.contains:
                problems.extend(_pattern_problems(check, text))
    except OSError as exc:
        raise DestinationError(f"cannot read {check.path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return problems


def _schema_problems(check: FileCheck, text: str) -> list[str]:
    from jsonschema.validators import validator_for

    try:
        document = json.loads(text)
    except ValueError as exc:
        return [f"{check.path} is not valid JSON ({exc})"]
    assert check.json_schema is not None
    validator = validator_for(check.json_schema)(check.json_schema)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    found = []
    for error in errors[:5]:
        where = "/".join(str(p) for p in error.absolute_path) or "(the document)"
        found.append(f"{check.path} does not match its JSON schema at {where}: {error.message}")
    if len(errors) > 5:
        found.append(f"{check.path}: {len(errors) - 5} more schema errors")
    return found


def _pattern_problems(check: FileCheck, text: str) -> list[str]:
    import regex

    assert check.contains is not None
    try:
        found = regex.search(check.contains, text, flags=regex.MULTILINE, timeout=REGEX_TIMEOUT_S)
    except TimeoutError:
        raise DestinationError(f"the pattern /{check.contains}/ for {check.path} took longer than "
                               f"{REGEX_TIMEOUT_S:g} s") from None
    return [] if found else [f"{check.path} does not contain a match for /{check.contains}/"]


def check_destinations(checks: Sequence[FileCheck], workspace: Path) -> CompletionResult:
    """Every destination check must pass.

    Returns:
        ``complete`` True, or False with feedback naming each failing requirement.

    Raises:
        DestinationError: some path could not be examined.
    """
    found = [(check, evaluate(check, workspace)) for check in checks]
    problems = [problem for _, items in found for problem in items]
    if not problems:
        return CompletionResult(complete=True, reason="files exist")
    missing = [c.path for c, items in found if items == [f"{c.path} does not exist"]]
    if len(missing) == len(problems):
        names = ", ".join(missing)
        return CompletionResult(complete=False, reason=f"missing file(s): {names}"[:400],
                                feedback=f"These required files do not exist yet: {names}"[:_FEEDBACK_CHARS])
    feedback = "The host's checks of the result files failed:\n- " + "\n- ".join(problems)
    return CompletionResult(complete=False, reason=_cut(f"{len(problems)} destination check(s) failed: " + "; ".join(problems), 400),
                            feedback=feedback[:_FEEDBACK_CHARS])


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one ``…`` when cut."""
    return text if len(text) <= limit else text[:limit - 1] + "…"
