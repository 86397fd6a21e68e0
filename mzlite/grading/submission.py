"""Reading a submitted notebook without running it: its seed, its answers' check calls, its
function definitions, and what in it tampers with grading.

Nothing here executes the submission. :func:`inspect` compares every ``check(...)`` statement
with the one the chapter's answer cell holds (from ``notebooks/``, the instructor's source) and
reports, as findings, what an honest answer never does: a check call edited, repeated, moved into
a loop or a function; ``check``, a checker or a library function redefined or patched
(``torch.allclose = ...``, ``setattr(module, ...)``); the grader's checkers reached for
(``verdict``, ``get``, a chapter's private ``_checker``: not in the sandbox, but trying is a
finding); code run from text (``exec``, ``eval``); reads of notebooks or of mzlite's own
files; the grader's environment variables; a seed that is not the roster's; and, in a coding
exercise, a function that calls mzlite (the thing it is asked to write). Findings are reported
beside the marks; they never change a mark by themselves (the grader's own evaluation does
that).
"""

from __future__ import annotations

import ast
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# names of the exercise machinery a submission must use, never bind
PROTECTED = {"check", "exercise", "diagnose", "verdict", "call", "same_number", "same_integer"}
# the grader's oracle: what tells whether an answer is right (never in a student's sandbox)
ORACLE = {"verdict", "get", "_REGISTRY", "_load_chapters", "diagnose", "number_exercise"}
SUSPICIOUS_CALLS = {
    "exec": "runs code built from text (exec)",
    "eval": "runs code built from text (eval)",
    "compile": "compiles code from text",
    "__import__": "imports by a computed name",
    "setattr": "sets attributes by name (setattr)",
    "delattr": "deletes attributes by name (delattr)",
    "globals": "edits the global namespace through globals()",
    "addaudithook": "installs an audit hook",
}
SUSPICIOUS_MODULES = {
    "importlib": "imports by a computed name (importlib)",
    "ctypes": "reaches the interpreter's memory (ctypes)",
    "subprocess": "starts other programs (subprocess)",
    "builtins": "edits Python's builtins",
    "inspect": "reads source files (inspect)",
    "shutil": "copies or removes files (shutil)",
}
SUSPICIOUS_TEXT = [
    (re.compile(r"\.ipynb\b"), "reads a notebook file"),
    (re.compile(r"(?:^|[/\\'\"])notebooks(?:[/\\'\"]|$)"), "refers to the notebooks folder"),
    # (a check call with strict=True, the solution cells' own, is found from the tree below:
    # the text would flag zip(..., strict=True) in an honest answer)
    (re.compile(r"hide-cell"), "refers to the solution cells"),
    (re.compile(r"MZLITE_\w+"), "refers to the grader's environment variables"),
    (re.compile(r"checker\.py|grading\.py|site-packages|__file__"), "refers to installed files"),
    (re.compile(r"\bos\.environ\b|\bos\.system\b|\bsys\.modules\b"), "edits the process state"),
]


@dataclass
class Finding:
    cell: int | None
    what: str

    def __str__(self) -> str:
        return f"cell {self.cell}: {self.what}" if self.cell is not None else self.what


@dataclass
class Template:
    """The answer cells of a chapter as the instructor wrote them: the check statement of every
    exercise (``ast.dump``) and, for a coding exercise, the name of the function it passes."""

    checks: dict[str, str] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)
    sources: set[str] = field(default_factory=set)  # every other code cell, as given to students
    display_only: set[str] = field(default_factory=set)  # the cells tagged GRADING_SKIP_TAG


@dataclass
class Inspection:
    seed: int | None  # the seed the notebook claims (parameters cell), None when it has none
    findings: list[Finding]
    functions: dict[str, str]  # coding exercise key -> the name its check call passes
    definitions: str  # the top-level imports, functions, classes and constants of the notebook


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _python(src: str) -> str:
    """IPython magics and shell escapes blanked (keeping line numbers)."""
    return "\n".join("" if ln.lstrip()[:1] in "%!" else ln for ln in src.split("\n"))


# CPython 3.11's AST constructor keeps its recursion depth in interpreter-wide state: two threads
# parsing at once (grade() inspects notebooks in a thread pool) can raise "SystemError: AST
# constructor recursion depth mismatch" (python/cpython#106905). One parse at a time.
_PARSE_LOCK = threading.Lock()


def _parse(src: str) -> ast.Module | None:
    try:
        with _PARSE_LOCK:
            return ast.parse(_python(src))
    except SyntaxError:
        return None


def _check_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name | ast.Attribute)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == "check"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node


def _is_strict(call: ast.Call) -> bool:
    return any(k.arg == "strict" and getattr(k.value, "value", None) is True for k in call.keywords)


def template(chapter_notebook: dict) -> Template:
    """The :class:`Template` of an instructor's chapter notebook (its solution cells skipped)."""
    t = Template()
    for cell in chapter_notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        if GRADING_SKIP_TAG in cell.get("metadata", {}).get("tags", []):
            t.display_only.add(_source(cell))
        tree = _parse(_source(cell))
        if tree is None:
            continue
        calls = list(_check_calls(tree))
        if not calls:
            t.sources.add(_source(cell).strip())
        for call in calls:
            if _is_strict(call):
                continue
            key = call.args[0].value
            t.checks[key] = ast.dump(call)
            if len(call.args) > 1 and isinstance(call.args[1], ast.Name):
                if call.args[1].id != "answer":
                    t.functions[key] = call.args[1].id
    return t


# The tag of a chapter's cell that only shows something (a slider, a figure, a table): no
# exercise, check or later cell reads what it assigns. Grading skips a submitted cell whose source
# is, character for character, such a cell of the instructor's chapter (:func:`cells_to_skip`):
# the instructor's copy decides, never the submission's metadata, and an edited cell runs.
GRADING_SKIP_TAG = "grading-skip"


def cells_to_skip(nb: dict, tmpl: Template | None) -> list[int]:
    """The indices of ``nb``'s code cells the grader need not run: those whose source is that of
    a cell ``tmpl``'s chapter tags :data:`GRADING_SKIP_TAG` (none without a template)."""
    if tmpl is None or not tmpl.display_only:
        return []
    return [
        i
        for i, cell in enumerate(nb.get("cells", []))
        if isinstance(cell, dict)
        and cell.get("cell_type") == "code"
        and _source(cell) in tmpl.display_only
    ]


def chapter_template(chapter: str) -> Template | None:
    """The template of chapter ``"chN"`` from the instructor's ``notebooks/``, if it is there."""
    n = int(chapter.removeprefix("ch"))
    found = sorted((ROOT / "notebooks").glob(f"{n:02d}_*.ipynb"))
    return template(json.loads(found[0].read_text())) if found else None


def claimed_seed(nb: dict) -> int | None:
    for cell in nb.get("cells", []):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            m = re.search(r"(?m)^seed\s*=\s*(\d+)\s*(?:#.*)?$", _source(cell))
            return int(m.group(1)) if m else None
    return None


# The parameter the grader sets True in the notebook it runs: a chapter's cells that train only
# to show training at work (chapter 10's) train at a size that only shows they run. No exercise
# reads it: an answer is the same either way.
GRADING_PARAMETER = "grading"


def with_seed(nb: dict, seed: int, grading: bool = False) -> dict:
    """``nb`` with its parameters cell's seed set to ``seed`` (a line added if it has none, and a
    parameters cell added if it has none): the roster's seed, whatever the notebook says. With
    ``grading``, its ``grading`` parameter is set True the same way (:data:`GRADING_PARAMETER`)."""
    out = json.loads(json.dumps(nb))
    cells = out.setdefault("cells", [])
    params = next((c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if params is None:
        params = {
            "cell_type": "code",
            "metadata": {"tags": ["parameters"]},
            "source": "",
            "outputs": [],
            "execution_count": None,
        }
        cells.insert(0, params)
    settings = {"seed": str(int(seed))}
    if grading:
        settings[GRADING_PARAMETER] = "True"
    src = _source(params)
    for name, value in settings.items():
        src, n = re.subn(rf"(?m)^{name}\s*=.*$", f"{name} = {value}", src)
        src = src if n else src.rstrip("\n") + f"\n{name} = {value}\n"
    params["source"] = src
    return out


def _module_aliases(trees) -> tuple[set[str], set[str]]:
    """Names bound to imported modules, and names bound by imports from mzlite."""
    modules, from_mzlite = {"torch", "np", "numpy", "math", "scipy", "mzlite"}, set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    modules.add((a.asname or a.name).split(".")[0])
                    if a.name.split(".")[0] == "mzlite":
                        from_mzlite.add((a.asname or a.name).split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    if node.module.split(".")[0] == "mzlite" or node.level:
                        from_mzlite.add(a.asname or a.name)
                    if a.name[:1].islower() and node.module.split(".")[0] in ("mzlite", "torch"):
                        modules.add(a.asname or a.name)  # submodules (from mzlite import x)
    return modules, from_mzlite


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _tamper_findings(i: int, tree: ast.AST, modules: set[str]) -> list[Finding]:
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Name) and sub.id in PROTECTED:
                    found.append(Finding(i, f"redefines `{sub.id}`"))
                if isinstance(sub, ast.Attribute) and _root_name(sub) in modules:
                    found.append(Finding(i, f"patches `{ast.unparse(sub)}`"))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name in PROTECTED:
                found.append(Finding(i, f"redefines `{node.name}`"))
        if isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                bound = (a.asname or a.name).split(".")[0]
                if bound in PROTECTED and (
                    not isinstance(node, ast.ImportFrom)
                    or not (node.module or "").startswith("mzlite.exercises")
                    or a.asname
                ):
                    found.append(Finding(i, f"redefines `{bound}` by an import"))
                mod = a.name if isinstance(node, ast.Import) else (node.module or "")
                why = SUSPICIOUS_MODULES.get(mod.split(".")[0])
                if why:
                    found.append(Finding(i, why))
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name in SUSPICIOUS_CALLS:
                found.append(Finding(i, SUSPICIOUS_CALLS[name]))
        if isinstance(node, ast.Attribute) and node.attr in ("__dict__", "__code__", "__globals__"):
            found.append(Finding(i, f"reaches into `{node.attr}`"))
        oracle = []
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mzlite.exercises"):
            oracle = [a.name for a in node.names if a.name in ORACLE or a.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr in ORACLE - {"get", "diagnose"}:
            oracle = [node.attr]
        if oracle:
            found.append(Finding(i, f"reaches for the grader's checkers (`{'`, `'.join(oracle)}`)"))
    return found


def _functions_used(name: str, defs: dict[str, ast.AST], seen: set[str] | None = None) -> set[str]:
    """Every name loaded by function ``name`` and by the notebook's functions it calls."""
    seen = set() if seen is None else seen
    if name in seen or name not in defs:
        return set()
    seen.add(name)
    used = {n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name)}
    for other in list(used):
        used |= _functions_used(other, defs, seen)
    return used


def _definitions(trees) -> str:
    """The statements a function may rely on: imports, functions, classes and assignments of
    values that call nothing (``dtype = torch.float64``), in notebook order."""
    keep = []
    for tree in trees:
        for node in tree.body:
            ok = isinstance(
                node,
                ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
            ) or (
                isinstance(node, ast.Assign | ast.AnnAssign)
                and node.value is not None
                and not any(isinstance(n, ast.Call | ast.Lambda) for n in ast.walk(node.value))
            )
            if ok:
                keep.append(ast.unparse(node))
    return "\n\n".join(keep) + "\n"


def inspect(nb: dict, expected: list[str], tmpl: Template | None, roster_seed: int | None):
    """The :class:`Inspection` of submission ``nb`` for the exercises ``expected``."""
    findings: list[Finding] = []
    cells = [c for c in nb.get("cells", []) if isinstance(c, dict)]
    code = [(i, c) for i, c in enumerate(cells) if c.get("cell_type") == "code"]
    trees: list[tuple[int, ast.Module]] = []
    for i, cell in code:
        tree = _parse(_source(cell))
        if tree is None:
            findings.append(Finding(i, "is not valid Python"))
        else:
            trees.append((i, tree))
    seed = claimed_seed(nb)
    if roster_seed is not None and seed != roster_seed:
        findings.append(Finding(None, f"the notebook's seed is {seed}, the roster's {roster_seed}"))
    modules, from_mzlite = _module_aliases(t for _, t in trees)
    given = tmpl.sources if tmpl else set()
    for i, tree in trees:
        if _source(cells[i]).strip() in given:
            continue  # a cell as the chapter gave it: nothing of the student's
        findings += _tamper_findings(i, tree, modules)
        if "parameters" not in cells[i].get("metadata", {}).get("tags", []) and any(
            isinstance(n, ast.Name) and n.id == "seed" and isinstance(n.ctx, ast.Store)
            for n in ast.walk(tree)
        ):
            findings.append(Finding(i, "sets `seed` outside the parameters cell"))
        text = _source(cells[i])
        for pattern, why in SUSPICIOUS_TEXT:
            if pattern.search(text):
                findings.append(Finding(i, why))
    # every check statement: where it is and what it says
    seen: dict[str, list[tuple[int, ast.Call, bool]]] = {}
    for i, tree in trees:
        top = {id(s.value) for s in tree.body if isinstance(s, ast.Expr)}
        for call in _check_calls(tree):
            seen.setdefault(call.args[0].value, []).append((i, call, id(call) in top))
            if _is_strict(call):
                findings.append(Finding(i, "refers to the solution cells"))
    functions = {}
    for key in expected:
        calls = seen.get(key, [])
        if not calls:
            findings.append(Finding(None, f"{key}: its check call is missing"))
            continue
        if len(calls) > 1:
            findings.append(Finding(calls[1][0], f"{key}: checked {len(calls)} times"))
        i, call, at_top = calls[0]
        if not at_top:
            findings.append(Finding(i, f"{key}: the check call is not a statement of its own"))
        want = tmpl.checks.get(key) if tmpl else None
        if want is not None and ast.dump(call) != want:
            findings.append(Finding(i, f"{key}: the check call was edited: {ast.unparse(call)}"))
        name = tmpl.functions.get(key) if tmpl else None
        if name is None and len(call.args) > 1 and isinstance(call.args[1], ast.Name):
            name = call.args[1].id if call.args[1].id != "answer" else None
        if name:
            functions[key] = name
    for key in seen.keys() - set(expected):
        findings.append(Finding(seen[key][0][0], f"checks {key}, not an exercise of this chapter"))
    defs = {}
    for _, tree in trees:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                defs[node.name] = node
    for key, name in functions.items():
        used = _functions_used(name, defs) & (from_mzlite | {"mzlite"})
        if used:
            findings.append(
                Finding(None, f"{key}: `{name}` uses mzlite's own {', '.join(sorted(used))}")
            )
    unique, out = set(), []
    for f in findings:
        if (f.cell, f.what) not in unique:
            unique.add((f.cell, f.what))
            out.append(f)
    return Inspection(seed, out, functions, _definitions(t for _, t in trees))
