"""The import graph of mzlite: no cycles between its modules, and no module imports another
module's private (underscore) names. Read statically with ``ast``, so an import inside a function
counts too: such an import only hides a cycle until someone moves it to the top of the file."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mzlite"

# Underscore names that modules still share (none left; add one only with the issue that removes it)
PENDING_PRIVATE: set[tuple[str, str, str]] = set()


def module_files(package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """``{dotted module name: (file, is_package)}`` for every module under ``package``."""
    out = {}
    for f in sorted(package.rglob("*.py")):
        parts = list(f.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (f, is_package)
    return out


def imports(modules: dict[str, tuple[Path, bool]]) -> list[tuple[str, str, str | None, int]]:
    """Every import of an mzlite module as ``(importer, imported module, imported name or None,
    line)``. ``from P import S`` of a submodule S is an import of P.S (not of P's __init__)."""
    found = []
    for name, (path, is_package) in modules.items():
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = alias.name
                    while target and target not in modules:
                        target = target.rpartition(".")[0]
                    if target:
                        found.append((name, target, None, node.lineno))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source not in modules:
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if sub in modules:
                        found.append((name, sub, None, node.lineno))
                    else:
                        found.append((name, source, alias.name, node.lineno))
    return found


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph ``edges`` as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_find_cycle_finds_one_and_only_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def test_the_graph_sees_relative_local_and_submodule_imports(tmp_path):
    pkg = tmp_path / "mzlite"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import sub\n")
    (pkg / "sub" / "__init__.py").write_text("from .a import x\n")
    (pkg / "sub" / "a.py").write_text("def f():\n    from mzlite.sub import b\nx = 1\n")
    (pkg / "sub" / "b.py").write_text("from mzlite import sub\nfrom ..sub.a import _y\n")
    edges = {(src, dst, name) for src, dst, name, _ in imports(module_files(pkg))}
    assert edges == {
        ("mzlite", "mzlite.sub", None),
        ("mzlite.sub", "mzlite.sub.a", "x"),
        ("mzlite.sub.a", "mzlite.sub.b", None),
        ("mzlite.sub.b", "mzlite.sub", None),
        ("mzlite.sub.b", "mzlite.sub.a", "_y"),
    }


def test_no_import_cycle_between_mzlite_modules():
    edges: dict[str, set[str]] = {}
    for src, dst, _, _ in imports(module_files()):
        if src != dst:
            edges.setdefault(src, set()).add(dst)
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_imports_another_modules_private_names():
    """A private module (``tasks/_build.py``) serves its own package: its names may be
    underscored and imported there. Anything else shared is public under a proper name."""
    found = []
    for src, dst, name, line in imports(module_files()):
        if not name or not name.startswith("_") or name.startswith("__"):
            continue
        private_helper = dst.rpartition(".")[2].startswith("_")
        if private_helper and src.rpartition(".")[0] == dst.rpartition(".")[0]:
            continue
        if (src, dst, name) not in PENDING_PRIVATE:
            found.append(f"{src}:{line} imports {dst}.{name}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "first", ["mzlite.repro.launchers", "mzlite.repro.render", "mzlite.exercises.checker"]
)
@pytest.mark.slow  # fresh interpreters
def test_a_module_imports_first_in_a_fresh_interpreter(first):
    """The modules that closed the old cycles, each imported before anything else of mzlite."""
    code = (
        f"import {first}, mzlite.repro.experiments, mzlite.repro.experiments.report, "
        "mzlite.exercises"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
