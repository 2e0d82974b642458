"""The layering rules of docs/architecture.md, checked on the source (issue 15).

Front ends (the TUI, the CLI modules, the slash commands) talk to the engine only
through its host API: they import no provider, store, journal, checkpoint, evidence or
policy module (not even for type hints) and read none of the host's engine-side
attributes. No class is built from mixins.
"""

from __future__ import annotations

import ast
from pathlib import Path

import amos

ROOT = Path(amos.__file__).parent

FRONT_ENDS = sorted([*ROOT.glob("cli*.py"), *(ROOT / "tui").rglob("*.py"), *(ROOT / "slash").rglob("*.py")])

FORBIDDEN_IMPORTS = (
    "amos.providers", "amos.evidence", "amos.session_store", "amos.sessions", "amos.journal", "amos.checkpoints",
    "amos.session_recovery", "amos.session_export", "amos.policy", "amos.runner", "amos.execution",
    "amos.loop_guard", "amos.doom_guard", "amos.approvals", "amos.receipts", "amos.compaction", "amos.context",
    "amos.tools", "amos.host", "amos.mcp.hub", "amos.mcp.connection", "amos.mcp.launch", "amos.mcp.tools",
    "amos.snapshots", "amos.store_pg", "amos.session_replay",
)
"""Engine-side modules (``amos.engine`` re-exports the types front ends render)."""

ENGINE_SIDE_ATTRIBUTES = {"session", "store", "config", "tasks", "settings", "tools", "provider", "evidence",
                          "engine", "estimator"}
"""Host attributes for engine code and tests only."""


def _modules(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [node.module]
    return []


def test_front_ends_import_only_the_host_api():
    assert FRONT_ENDS, "no front-end modules found"
    offences = []
    for path in FRONT_ENDS:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            for module in _modules(node):
                if any(module == f or module.startswith(f + ".") for f in FORBIDDEN_IMPORTS):
                    offences.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module}")
    assert not offences, "\n".join(offences)


def _host_expression(node: ast.AST) -> bool:
    """``runner`` / ``host`` / ``self.runner`` / ``self.app.runner`` / ``app.runner``."""
    if isinstance(node, ast.Name):
        return node.id in ("runner", "host")
    if isinstance(node, ast.Attribute):
        return node.attr in ("runner", "host")
    return False


def test_front_ends_read_no_engine_side_attribute_of_the_host():
    offences = []
    for path in FRONT_ENDS:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ENGINE_SIDE_ATTRIBUTES \
                    and _host_expression(node.value):
                offences.append(f"{path.relative_to(ROOT)}:{node.lineno} reads .{node.attr} of the host")
    assert not offences, "\n".join(offences)


def _classes() -> dict[str, tuple[Path, ast.ClassDef]]:
    found = {}
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, (path, node))
    return found


def test_no_class_is_built_from_mixins():
    """No amos class has more than one base class, and none inherits a ``*Duties`` mixin."""
    allowed_pairs = {("str", "Enum")}
    offences = []
    for name, (path, node) in _classes().items():
        bases = [ast.unparse(b).split("[")[0] for b in node.bases]
        if len(bases) > 1 and tuple(bases) not in allowed_pairs:
            offences.append(f"{path.relative_to(ROOT)}: class {name}({', '.join(bases)})")
        if any(b.endswith("Duties") or b.endswith("Mixin") for b in bases):
            offences.append(f"{path.relative_to(ROOT)}: class {name} inherits a mixin ({', '.join(bases)})")
    assert not offences, "\n".join(offences)


def test_engine_modules_stay_small():
    big = [f"{p.relative_to(ROOT)} ({n} lines)" for p in (ROOT / "engine").glob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 620]
    assert not big, big
