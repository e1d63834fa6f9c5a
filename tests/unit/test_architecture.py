"""The layout's rules, checked on the code itself: packages by concern, imports one way, small modules.

``lint-imports`` (pyproject's contracts) checks the layers in CI; these tests say the same rules in a form
that names the offending module and line when one breaks.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nccl_doctor"
TESTS = ROOT / "tests"
MAX_MODULE_LINES = 600
COMMAND_PACKAGES = ("logs", "node", "bench", "preflight", "cluster")


@functools.cache
def _modules() -> tuple[Path, ...]:
    return tuple(sorted(PACKAGE.rglob("*.py")))


@functools.cache
def _tree(path: Path) -> ast.Module:
    """Each module parsed once per session (the checks below walk every module once per module)."""
    return ast.parse(path.read_text())


@functools.cache
def _graph() -> grimp.ImportGraph:
    """The package's import graph, built once per session; the checks only read it."""
    return grimp.build_graph("nccl_doctor")  # counts imports inside functions too


def _dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST) -> Iterator[tuple[ast.stmt, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node, node.module


def _top_level_imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@functools.cache
def _torch_modules() -> frozenset[str]:
    """Our modules that import torch at their top: the only ones another module may import lazily."""
    return frozenset(_dotted(p) for p in _modules()
                     if any(n == "torch" or n.startswith("torch.") for n in _top_level_imports(_tree(p))))


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every strongly connected group of modules (Tarjan), as sorted lists: each is an import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles_anywhere_in_the_package():
    graph = _graph()
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for name in ("a", "b", "c"):
        graph.add_module(name)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    assert _cycles(graph) == []
    graph.add_import(importer="c", imported="a")
    assert _cycles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_the_size_limit(path: Path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)} has {lines} lines (limit {MAX_MODULE_LINES})"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_are_absolute_at_the_top_except_lazy_torch(path: Path):
    """A function-level import of our own code only ever hid a cycle; only torch's side may load late."""
    tree = _tree(path)
    top = set(map(id, tree.body))
    lazy_ok = _torch_modules()
    for node, name in _imports(tree):
        assert not (isinstance(node, ast.ImportFrom) and node.level), f"{path.name}:{node.lineno}: relative import"
        if id(node) in top or not name.startswith("nccl_doctor"):
            continue
        assert name in lazy_ok or any(f"{name}.{a.name}" in lazy_ok for a in getattr(node, "names", ())), (
            f"{path.relative_to(ROOT)}:{node.lineno} imports {name} inside a function")


@pytest.mark.parametrize("package", COMMAND_PACKAGES)
def test_no_command_package_imports_the_cli(package: str):
    graph = _graph()
    for module in graph.find_descendants(f"nccl_doctor.{package}") | {f"nccl_doctor.{package}"}:
        assert not graph.direct_import_exists(importer=module, imported="nccl_doctor.cli"), module


def test_test_files_are_named_for_what_they_test():
    named_after_a_review = [p.relative_to(ROOT) for p in TESTS.rglob("test_*.py") if "review" in p.name]
    assert named_after_a_review == []
    fixtures_after_a_review = [p.relative_to(ROOT) for p in (ROOT / "fixtures").rglob("*") if "review" in p.name]
    assert fixtures_after_a_review == []
