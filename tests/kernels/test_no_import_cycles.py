"""The package's module-level imports form no cycle: the layers import downwards only."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "padconv_cli"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Module -> the package modules it imports at module level (not inside functions)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                candidates = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            targets.update(c for c in candidates if c in modules and c != name)
        graph[name] = targets
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return path[path.index(target):] + [module, target] if target in path else [
                    module, target]
            if not state.get(target):
                found = visit(target, path + [module])
                if found:
                    return found
        state[module] = 2
        return None

    for module in sorted(graph):
        if not state.get(module):
            found = visit(module, [])
            if found:
                return found
    return None


def test_no_module_level_import_cycle():
    assert _cycle(_imports()) is None


def test_conv_plan_imports_no_compute_path():
    assert "padconv_cli.kernels.conv_paths" not in _imports()["padconv_cli.kernels.conv_plan"]
    assert "padconv_cli.kernels.conv" not in _imports()["padconv_cli.kernels.conv_paths"]


def test_finder_sees_a_cycle():
    """The check itself can fail: a two-module loop is found."""
    assert _cycle({"a": {"b"}, "b": {"a"}}) is not None
    assert _cycle({"a": {"b"}, "b": set()}) is None
