"""The package's imports form no cycle (the layers import downwards only), counting every
import statement wherever it stands (module level, inside functions, under TYPE_CHECKING)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "padconv_cli"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_names(module: str, is_package: bool, node: ast.AST) -> list[str]:
    """Every module name an import statement makes Python load (``a.b.c`` loads ``a.b``)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([node.module] if node.module else []))
        names = [base] + [f"{base}.{alias.name}" for alias in node.names]
    else:
        return []
    loaded = []
    for name in names:
        parts = name.split(".")
        for end in range(2, len(parts) + 1):
            prefix = ".".join(parts[:end])
            if end < len(parts) and (module + ".").startswith(prefix + "."):
                continue  # the importer's own package is already loading
            loaded.append(prefix)
    return loaded


@functools.cache
def _imports() -> dict[str, frozenset[str]]:
    """Module -> the package modules it imports, at any depth of its code (read once)."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, frozenset[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = set()
        for node in ast.walk(tree):
            loaded = _imported_names(name, path.name == "__init__.py", node)
            targets.update(t for t in loaded if t in paths and t != name)
        graph[name] = frozenset(targets)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return groups


def test_no_import_cycle_at_any_depth():
    assert [sorted(group) for group in _cycles(_imports())] == []


def test_function_level_imports_are_counted():
    """An import inside a function is an edge like any other (the check can fail)."""
    tree = ast.parse("def f():\n    from padconv_cli.models import x\n")
    loaded = [n for node in ast.walk(tree)
              for n in _imported_names("padconv_cli.tensorio", True, node)]
    assert "padconv_cli.models" in loaded


def test_finder_sees_a_cycle():
    """The check itself can fail: a two-module loop is found."""
    assert _cycles({"a": {"b"}, "b": {"a"}}) == [{"a", "b"}]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_tensor_io_imports_nothing_above_it():
    """Data flows one way: the tensor readers know nothing of models, the pipeline or the
    source dispatch above them."""
    above = ("padconv_cli.models", "padconv_cli.pipeline",
             "padconv_cli.tensor_sources", "padconv_cli.ops")
    graph = _imports()
    offenders = {module: sorted(t for t in targets if t.startswith(above))
                 for module, targets in graph.items() if module.startswith("padconv_cli.tensorio")}
    assert {module: found for module, found in offenders.items() if found} == {}


def _upward_imports(layer: tuple[str, ...], above: tuple[str, ...]) -> dict[str, list[str]]:
    """The modules of ``layer`` that import one of ``above``, with what they import."""
    offenders = {module: sorted(t for t in targets if t.startswith(above))
                 for module, targets in _imports().items() if module.startswith(layer)}
    return {module: found for module, found in offenders.items() if found}


def test_the_operators_import_nothing_above_them():
    """ops/ sits below every user of an operator: a model node reaches it as an object."""
    above = ("padconv_cli.models", "padconv_cli.onnx_nodes", "padconv_cli.pipeline",
             "padconv_cli.explain", "padconv_cli.emit", "padconv_cli.audit",
             "padconv_cli.verification", "padconv_cli.crosscheck", "padconv_cli.cli")
    assert _upward_imports(("padconv_cli.ops",), above) == {}


def test_the_model_layer_imports_nothing_above_it():
    """Model nodes become kernel calls without explain, emit, audit, verify or the pipeline."""
    above = ("padconv_cli.pipeline", "padconv_cli.explain", "padconv_cli.emit",
             "padconv_cli.audit", "padconv_cli.verification", "padconv_cli.crosscheck",
             "padconv_cli.cli")
    layer = ("padconv_cli.models", "padconv_cli.onnx_nodes")
    assert _upward_imports(layer, above) == {}
