"""Issue 37's "done when": the honest student gets full marks, with no finding, on the chapters the
class was graded on, under the Teaching page's settings (cell timeout 120 s, hidden trials from a
secret, the isolation the machine allows). Chapter 1's honest student is one of the generated
class in tests/test_grading.py; every other chapter is here, handed in by one student and
graded in one run (two notebooks at a time). The honest submission is the
student copy with each answer cell doing what the instructor's solution does: the solution's
code typed into the answer cell, the cell's own ``check(...)`` line left as it was."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from book_scripts import load

from mzlite.exercises.checker import get
from mzlite.grading.grader import grade

ROOT = Path(__file__).resolve().parents[1]
ms = load("make_student")
KEY = re.compile(r'check\("([\w.]+)"')
SECRET = "an-honest-secret-of-32-chars!!!!"


def _checked_expression(solution: str) -> str:
    """The expression the solution's ``check(key, EXPR, ...)`` passes: the answer it gives."""
    call = next(
        n.value
        for n in ast.parse(solution).body
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
        and getattr(n.value.func, "id", None) == "check"
    )  # fmt: skip
    return ast.unparse(call.args[1])


def honest_copy(nb: dict, seed: int) -> dict:
    """The student copy for ``seed`` with every answer cell answered as its solution answers it:
    the placeholder function replaced by the solution's, ``answer = ...`` by the solution's
    working and ``answer = <what the solution checks>`` (``solution``, ``steps_per_epoch``);
    the check line stays the student copy's."""
    solutions = {}
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if ms.is_solution(cell) and KEY.search(src):
            solutions[KEY.search(src)[1]] = src
    copy = ms.student_copy(nb, seed)
    for cell in copy["cells"]:
        if not ms.is_answer(cell):
            continue
        src = "".join(cell["source"])
        key = KEY.search(src)[1]
        working = [s for s in solutions[key].splitlines() if not s.startswith("check(")]
        out, in_placeholder = [], False
        for line in src.splitlines():
            if line.startswith("def "):
                in_placeholder = True  # the solution's function replaces it
            elif in_placeholder:
                in_placeholder = "...  # your code here" not in line
            elif line.startswith("check("):
                out += working
                if get(key).kind == "value":
                    out.append(f"answer = {_checked_expression(solutions[key])}")
                out.append(line)
            elif not line.startswith("answer = ..."):
                out.append(line)
        cell["source"] = "\n".join(out) + "\n"
    return copy


# every chapter but the first (tests/test_grading.py grades chapter 1's honest student)
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))[1:]
SKIP = "grading-skip"  # mzlite.grading.submission.GRADING_SKIP_TAG
# chapter 11's student also edits a display cell the grader skips (a comment added) and tags one
# that makes the data every later cell reads: the grader must run both
EDITED = "\n# ada's note\n"
FORGED = "A_true = "


def _notebook(chapter: str) -> dict:
    return json.loads((ROOT / "notebooks" / f"{chapter}.ipynb").read_text())


def tagged(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if SKIP in c.get("metadata", {}).get("tags", [])]


def edited_and_forged(nb: dict) -> dict:
    """``nb`` with its first tagged cell edited and :data:`FORGED`'s cell tagged."""
    first = tagged(nb)[0]
    first["source"] = "".join(first["source"]) + EDITED
    forged = next(c for c in nb["cells"] if "".join(c["source"]).startswith(FORGED))
    forged["metadata"].setdefault("tags", []).append(SKIP)
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One student handing in every chapter above, graded once (two notebooks at a time, as
    the Teaching page's command does): one grading run's setup for all of them."""
    tmp_path = tmp_path_factory.mktemp("honest")
    seed = 41
    subs = tmp_path / "submissions" / "ada"
    subs.mkdir(parents=True)
    for chapter in CHAPTERS:
        path = ROOT / "notebooks" / f"{chapter}.ipynb"
        copy = honest_copy(json.loads(path.read_text()), seed)
        if chapter.startswith("11_"):
            copy = edited_and_forged(copy)
        (subs / path.name).write_text(json.dumps(copy))
    roster = tmp_path / "class.csv"
    roster.write_text(f"ada,{seed}\n")
    page = (ROOT / "book" / "teaching.md").read_text()  # the grading command's limits
    limits = {k: int(re.search(rf"--{k} (\d+)", page)[1]) for k in ("timeout", "cell-timeout")}
    graded = grade(tmp_path / "submissions", tmp_path / "grades", roster=roster, secret=SECRET,
                   trials=3, timeout=limits["timeout"], cell_timeout=limits["cell-timeout"],
                   progress=False, chapters=[int(c[:2]) for c in CHAPTERS], jobs=2)  # fmt: skip
    return {g.notebook: g for g in graded}, tmp_path / "grades" / "executed" / "ada"


@pytest.mark.integration
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_honest_student_gets_full_marks(chapter, graded):
    g = graded[0][f"{chapter}.ipynb"]
    assert g.outcome == "ran", g.detail
    assert g.findings == []
    wrong = {k: r.get("message") for k, r in g.results.items() if r.get("score") != 1.0}
    assert not wrong, wrong
    assert set(g.results) >= set(g.expected)


def test_the_honest_copy_answers_every_exercise_and_keeps_every_check_line():
    """The builder itself: no placeholder is left, every check line is the student copy's."""
    path = ROOT / "notebooks" / "03_mzattn_from_scratch.ipynb"
    nb = json.loads(path.read_text())
    student, honest = ms.student_copy(nb, 5), honest_copy(nb, 5)
    answers = [c for c in honest["cells"] if ms.is_answer(c)]
    assert len(answers) == len([c for c in student["cells"] if ms.is_answer(c)]) == 5
    for cell in answers:
        src = "".join(cell["source"])
        assert "...  # your" not in src and not re.search(r"(?m)^answer = \.\.\.", src), src
        assert "strict=True" not in src
    checks = sorted(s for c in student["cells"] for s in "".join(c["source"]).splitlines()
                    if s.startswith("check("))  # fmt: skip
    assert checks == sorted(
        s for c in answers for s in "".join(c["source"]).splitlines() if s.startswith("check(")
    )


@pytest.mark.integration
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if tagged(_notebook(c))])
def test_grading_skips_the_display_cells_left_as_written_and_runs_the_rest(chapter, graded):
    """In the executed copy, the chapter's tagged cells the student left as they were have their
    source and no output; every other code cell ran, the edited tagged cell and the cell the
    student tagged among them (chapter 11)."""
    executed = json.loads((graded[1] / f"{chapter}.ipynb").read_text())
    instructor = json.loads((ROOT / "notebooks" / f"{chapter}.ipynb").read_text())
    skippable = {"".join(c["source"]) for c in tagged(instructor)}
    assert skippable, "the chapter tags at least one display cell"
    ran, skipped = [], []
    for cell in executed["cells"]:
        if cell["cell_type"] == "code":
            src = "".join(cell["source"])
            (skipped if src in skippable else ran).append((src, cell))
    assert skipped and all(c["outputs"] == [] and c["execution_count"] is None for _, c in skipped)
    assert all(c["execution_count"] is not None for _, c in ran)
    if chapter.startswith("11_"):
        assert len(skipped) == len(skippable) - 1  # the edited one ran
        assert any(s.endswith(EDITED) for s, _ in ran)
        assert any(s.startswith(FORGED) for s, _ in ran)
