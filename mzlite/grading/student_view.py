"""The copy of mzlite a submission runs with: the library and the exercises' inputs, no oracle.

A notebook being graded imports mzlite (the library it is taught with, and its chapter's
``exercise_zonotope(seed)`` and the like), but nothing that could tell it whether an answer is
right: no checker, no reference, no ``verdict``, no registry, no grader. :func:`make_student_view`
builds that copy once per grading run from the grader's snapshot, and every sandbox gets it:

- ``mzlite/grading/`` is left out;
- each chapter module ``mzlite/exercises/chN.py`` keeps its public names (the inputs the chapter
  hands out: the book's convention is that checkers and references are private, ``_name``) and
  whatever they need, found by reachability over the module's top-level statements
  (:func:`prune`); a checker (decorated with ``exercise``) or a registration call
  (``number_exercise(...)``) never survives, and a public input that needs one is an error here,
  not a leak;
- ``mzlite/exercises/checker.py`` becomes a recording ``check`` (the answer written down for the
  grader as plain data, :mod:`mzlite.exercises.wire`) with the helpers the inputs use
  (``rng``, ``student_inputs``) and the list of exercise keys;
- ``mzlite/repro/exercises.py`` keeps its ``__all__`` (chapter 9's ``not_run_table``).

A name that was pruned (``verdict``, ``get``, a chapter's ``_area``) is not there: reaching for
it raises ``AttributeError`` (``ImportError`` for an import) and is written to the capture file
as ``{"reached": "module.name"}``, which the grader reports as a finding.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from .sandbox import compile_tree

# names of mzlite/exercises/checker.py the recording copy keeps (with what they need)
CHECKER_KEEPS = ("CAPTURE_ENV", "Result", "rng", "student_inputs", "_record", "os")
# names whose presence in a pruned module means an oracle got through
ORACLE = frozenset({"exercise", "number_exercise", "verdict", "diagnose", "get", "_REGISTRY"})
_SKIP = ("__pycache__", "*.pyc", ".tmp-*", "cache")

CHECKER_DOC = (
    "The grader's copy of ``check``: while a notebook is graded it records each answer for the "
    "grader, which judges it in its own process; the checkers are not here."
)
RECORDING_CHECK = '''

# ---- the grading copy's own: a check that records, and nothing that judges

import types as _types

KEYS = {keys!r}


def check(key: str, answer: object = ..., *, seed: int = 0, strict: bool = False) -> Result:
    """Record ``answer`` (a value, or a function by its name) for exercise ``key`` for the grader,
    which judges it in its own process: no verdict is given here, and none could be (the
    checkers are not in this copy of mzlite). ``strict`` is ignored."""
    if key not in KEYS:
        raise KeyError(f"unknown exercise {{key!r}}; known: {{', '.join(sorted(KEYS))}}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int (the notebook's seed parameter), got {{seed!r}}")
    capture = os.environ.get(CAPTURE_ENV)
    if not capture:
        raise RuntimeError(
            "this is the grader's copy of mzlite, whose check only records an answer while a "
            f"notebook is graded, and ${{CAPTURE_ENV}} is not set"
        )
    return _record(capture, _types.SimpleNamespace(key=key), answer, seed)


def keys(prefix: str = "") -> list[str]:
    """The exercise keys starting with ``prefix``."""
    return sorted(k for k in KEYS if k.startswith(prefix))
'''

# every pruned module ends with this: a name it lost is reported, never silently missing
REACHED = """

def _reached(name: str) -> None:
    import json as _json
    import os as _os

    capture = _os.environ.get("MZLITE_GRADING_CAPTURE")
    if capture:
        with open(capture, "a", encoding="utf-8") as f:
            f.write(_json.dumps({{"reached": f"{{__name__}}.{{name}}"}}) + "\\n")


def __getattr__(name: str):
    if name in {pruned!r}:
        _reached(name)
        raise AttributeError(
            f"{{__name__}}.{{name}} belongs to the grader and is not available while a notebook "
            "is graded (this copy of mzlite holds no checker, reference or verdict)"
        )
    raise AttributeError(f"module {{__name__!r}} has no attribute {{name!r}}")
"""


def _bound(node: ast.stmt) -> set[str]:
    """Names a top-level statement binds."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _imports(node: ast.stmt) -> bool:
    return isinstance(node, ast.Import | ast.ImportFrom)


def _used(node: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _registers(node: ast.stmt) -> bool:
    """A checker (decorated with ``exercise``) or a registration call at the top level."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return any(ORACLE & _used(d) for d in node.decorator_list)
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)


def prune(
    source: str, roots, where: str = "module", doc: str | None = None
) -> tuple[str, set[str]]:
    """``source`` reduced to the top-level statements that define ``roots`` and what those
    need (imports kept name by name), in their order, under ``doc`` (default: its own
    docstring); and the names of everything dropped. ValueError when what is kept needs a
    checker or a registration (an oracle)."""
    tree = ast.parse(source)
    body = [n for n in tree.body if not _registers(n)]
    defines: dict[str, list[int]] = {}
    for i, node in enumerate(body):
        for name in _bound(node):
            defines.setdefault(name, []).append(i)
    wanted, todo, keep = set(), list(roots), set()
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        for i in defines.get(name, []):
            if i not in keep:
                keep.add(i)
                node = body[i]
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    todo += sorted(_used(node))
    leaks = sorted(wanted & ORACLE)
    if leaks:
        raise ValueError(f"{where}: the inputs handed to students need {leaks}, an oracle")
    out = []
    doc = ast.get_docstring(tree, clean=False) if doc is None else doc
    if doc is not None:
        out.append(repr(doc))
    out.append("from __future__ import annotations")
    for i, node in enumerate(body):
        if i not in keep:
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            node.names = [a for a in node.names if (a.asname or a.name).split(".")[0] in wanted]
        out.append(ast.unparse(node))
    # what was defined here and dropped (an import dropped is no one's secret)
    every = {n for node in tree.body if not _imports(node) for n in _bound(node)}
    kept = {name for i in keep for name in _bound(body[i])}
    return "\n\n".join(out) + "\n", every - kept


def _public(source: str) -> list[str]:
    """A module's ``__all__`` if it has one, else its public top-level names."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    names = set()
    for node in tree.body:
        if not isinstance(node, ast.Import | ast.ImportFrom) and not _registers(node):
            names |= {n for n in _bound(node) if not n.startswith("_")}
    return sorted(names)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_student_view(snapshot: Path, dest: Path, exercise_keys: list[str]) -> Path:
    """The students' copy of ``snapshot``'s mzlite (and ``data/``) under ``dest``, byte-compiled:
    see the module docstring. ``exercise_keys`` are the keys ``check`` accepts."""
    snapshot, dest = Path(snapshot), Path(dest)
    src = snapshot / "mzlite"
    shutil.copytree(src, dest / "mzlite", ignore=shutil.ignore_patterns("grading", *_SKIP))
    if (snapshot / "data").is_dir():
        shutil.copytree(snapshot / "data", dest / "data", ignore=shutil.ignore_patterns(*_SKIP))
    ex_src, ex_dest = src / "exercises", dest / "mzlite" / "exercises"
    shutil.rmtree(ex_dest)
    _write(ex_dest / "wire.py", (ex_src / "wire.py").read_text())
    checker = (ex_src / "checker.py").read_text()
    text, pruned = prune(checker, CHECKER_KEEPS, "mzlite/exercises/checker.py", CHECKER_DOC)
    pruned -= {"check", "keys"}
    text += RECORDING_CHECK.format(keys=sorted(exercise_keys))
    _write(ex_dest / "checker.py", text + REACHED.format(pruned=sorted(pruned)))
    _write(
        ex_dest / "__init__.py",
        '"""The exercises\' inputs and a recording ``check`` (the grader\'s copy of mzlite)."""'
        "\n\nfrom .checker import Result, check, keys\n\n"
        '__all__ = ["Result", "check", "keys"]\n',
    )
    modules = [p for p in ex_src.glob("ch*.py") if re.fullmatch(r"ch\d+", p.stem)]
    modules.append(src / "repro" / "exercises.py")
    for path in modules:
        source = path.read_text()
        rel = path.relative_to(src)
        text, pruned = prune(source, _public(source), f"mzlite/{rel}")
        _write(dest / "mzlite" / rel, text + REACHED.format(pruned=sorted(pruned)))
    # compiled once here, by the grader: each box copies the bytecode instead of compiling the
    # library again in every kernel (the box's copy is the student's own)
    compile_tree(dest / "mzlite")
    return dest
