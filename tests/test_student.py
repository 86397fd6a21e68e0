"""Student copies (book/_scripts/make_student.py): no solution survives, the exercises do, and
nothing a student keeps needs what a solution defined."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from book_scripts import load

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


ms = load("make_student")


def _src(cell):
    return "".join(cell["source"])


def _code(src: str) -> str:
    # IPython magics and shell escapes are not Python
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in src.split("\n")
    )


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    ms.make(NOTEBOOKS, out, seed=None)
    return {p.name: json.loads((out / p.name).read_text()) for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_solution_text_survives(path, copies):
    source = json.loads(path.read_text())
    student = copies[path.name]
    kept_text = "\n".join(_src(c) for c in student["cells"])
    solutions = [c for c in source["cells"] if ms.is_solution(c)]
    others = "\n".join(_src(c) for c in source["cells"] if not ms.is_solution(c))
    assert not any(ms.calls_strict_check(_src(c)) for c in student["cells"]), "a solution survived"
    for cell in solutions:
        for line in _src(cell).splitlines():
            line = line.strip()
            # every line of a solution that is not also written outside the solutions
            if len(line) > 3 and line not in others:
                assert line not in kept_text, f"solution line survived in {path.name}: {line!r}"
    for cell in student["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None
    assert "hidden cell" not in kept_text.lower(), "the reading version's 'hidden solution' text"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_stays_with_its_placeholder(path, copies):
    source = json.loads(path.read_text())
    keys = {k for c in source["cells"] for k in re.findall(r'check\("([\w.]+)"', _src(c))}
    answer_cells = [_src(c) for c in copies[path.name]["cells"] if ms.is_answer(c)]
    asked = {k for src in answer_cells for k in re.findall(r'check\("([\w.]+)"', src)}
    assert asked == keys, f"exercises without an answer cell: {sorted(keys - asked)}"
    for src in answer_cells:
        assert "..." in src, f"answer cell without a ... placeholder:\n{src}"


# Paths of the repository a download does not hold: the zip has the chapters, data/ and README.txt
_REPO_PATH = re.compile(r"\b(?:tests|benchmarks|book|notebooks)/[\w./-]+")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_text_of_a_copy_says_where_a_file_outside_the_download_is(path, copies):
    """A student copy that names a test, a benchmark or a script of the book says that it is in
    the repository (the unzipped folder has none of them); a copy names no chapter by a
    notebooks/ path it does not have."""
    for cell in copies[path.name]["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = _src(cell)
        for m in _REPO_PATH.finditer(text):
            near = text[max(0, m.start() - 300) : m.end() + 60]
            assert "repository" in near, f"{path.name}: {m[0]} named as if in the download"


@pytest.mark.parametrize("prefix", ["01_"])
def test_a_figure_the_book_shows_once_shows_once_in_the_copy(prefix, copies):
    """Chapter 1 draws a slider figure twice: a kernel-drawn twin (the book drops it) and the
    plotly form. JupyterLab would show both; the copy keeps the book's form only. (Chapter 3
    had one too; it now draws its gate explorer once, in the notebook itself.)"""
    path = next(p for p in NOTEBOOKS if p.name.startswith(prefix))
    twins = [_src(c) for c in json.loads(path.read_text())["cells"] if ms.is_book_twin(c)]
    assert twins, f"{path.name} has no kernel-drawn twin any more: update this test"
    kept = {_src(c) for c in copies[path.name]["cells"]}
    assert not kept & set(twins)


def test_a_file_of_the_repository_is_named_as_one():
    nb = {"cells": [{"cell_type": "markdown", "source": "see `benchmarks/lr_probe.py` here"}]}
    assert ms.without_book_links(nb)["cells"][0]["source"].startswith(
        "see `benchmarks/lr_probe.py` of the mzlite repository here"
    )


def _defined(tree) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _loaded(tree) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_kept_cells_never_read_what_only_a_solution_defined(path):
    """The student copy is the chapter minus its solutions (and the kernel-drawn twins of the
    book's figures): if no kept cell reads a name that only a left-out cell defines, every kept
    cell sees the same names as in the book's run."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    trees = [ast.parse(_code(_src(c))) for c in cells]
    kept_defs: set[str] = set()
    for cell, tree in zip(cells, trees, strict=True):
        if not ms.is_left_out(cell):
            kept_defs |= _defined(tree)
    only_in_solutions: set[str] = set()
    for cell, tree in zip(cells, trees, strict=True):
        if ms.is_left_out(cell):
            only_in_solutions |= _defined(tree) - kept_defs
        else:
            used = _loaded(tree) & only_in_solutions
            assert not used, (
                f"{path.name}: a kept cell reads {sorted(used)}, set only by a solution"
            )


def test_a_placeholder_cell_of_each_kind_is_reported_unanswered():
    from mzlite.exercises import check

    def todo(*args): ...  # a student's function whose body is not written yet

    assert check("ch1.area", ...).status == "unanswered"
    assert check("ch3.minkowski_mean", todo, seed=3).status == "unanswered"


def test_seed_and_roster(tmp_path):
    nb = json.loads(NOTEBOOKS[0].read_text())
    copy = ms.student_copy(nb, seed=42)
    params = next(c for c in copy["cells"] if "parameters" in c["metadata"].get("tags", []))
    assert re.search(r"(?m)^seed = 42$", _src(params))
    assert copy["metadata"]["mzlite_student"]["seed"] == 42
    roster = tmp_path / "class.csv"
    roster.write_text("# name[,seed]\nada,7\ngrace\n")
    assert ms.read_roster(roster) == [("ada", 7), ("grace", ms.seed_for("grace"))]
    assert ms.seed_for("grace") == ms.seed_for("grace") != ms.seed_for("ada")
    roster.write_text("bad name\n")
    with pytest.raises(ValueError, match="a name may hold"):
        ms.read_roster(roster)
    assert ms.main([NOTEBOOKS[0].stem, "--out", str(tmp_path / "out"), "--roster", "nope.csv"]) == 2


def test_the_download_stands_alone_and_holds_no_solution(tmp_path):
    files = ms.make(NOTEBOOKS, tmp_path / "copies", seed=None)
    zip_path = tmp_path / "download.zip"
    ms.make_zip(files, zip_path)
    import zipfile

    with zipfile.ZipFile(zip_path) as z:
        names = set(z.namelist())
        copies = [json.loads(z.read(n)) for n in names if n.endswith(".ipynb")]
        text = json.dumps(copies)
    top = "mzattn-student-notebooks/"
    assert f"{top}data/checkpoints/mz_tdof8_L8.pt" in names  # chapters 7 and 11 read it
    # chapters 4-10 read the paper's numbers and the committed results
    assert f"{top}data/paper/tab-main-results.json" in names
    results = {n for n in names if n.startswith(f"{top}data/results/") and n.endswith(".json")}
    assert len(results) >= 100 and not any(n.endswith(".partial") for n in names)
    assert {f"{top}{p.name}" for p in NOTEBOOKS} <= names and f"{top}README.txt" in names
    assert not any(ms.is_solution(c) for nb in copies for c in nb["cells"])
    assert "sample-answer" not in text
    sample = (ROOT / "book" / "instructor" / "sample_answers.md").read_text()
    assert sample.splitlines()[2][:40] not in text


def test_answer_text_cells_stay_and_sample_answers_go():
    nb = json.loads(NOTEBOOKS[0].read_text())
    nb["cells"] += [
        {"cell_type": "markdown", "metadata": {"tags": ["answer-text"]}, "source": "*...*"},
        {"cell_type": "markdown", "metadata": {"tags": ["sample-answer"]}, "source": "42"},
    ]
    kept = ms.student_copy(nb)["cells"]
    assert _src(kept[-1]) == "*...*" and all(_src(c) != "42" for c in kept)
    predicted = [
        p.name
        for p in NOTEBOOKS
        if "Predict, then run" in p.read_text() and "answer-text" not in p.read_text()
    ]
    assert predicted == [], f"predict-then-run questions without an answer cell: {predicted}"


def test_student_edition_and_instructor_pack(tmp_path):
    executed = tmp_path / "chapters"
    executed.mkdir()
    nb = json.loads(NOTEBOOKS[0].read_text())
    for cell in nb["cells"]:  # as if executed: every code cell has an output
        if cell["cell_type"] == "code":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "out\n"}]
    (executed / NOTEBOOKS[0].name).write_text(json.dumps(nb))
    src = ms.make_book_source(tmp_path / "student-book", executed)
    edition = json.loads((src / "chapters" / NOTEBOOKS[0].name).read_text())
    assert not any(ms.is_solution(c) for c in edition["cells"])
    for cell in edition["cells"]:
        if cell["cell_type"] == "code":
            assert bool(cell["outputs"]) != ms.is_answer(cell)  # chapter outputs stay, answers not
    assert (src / "_toc.yml").exists() and (src / "teaching.md").exists()
    assert not (src / "instructor").exists()
    with pytest.raises(FileNotFoundError, match="make notebooks"):
        ms.make_book_source(tmp_path / "none", tmp_path / "empty")
    import zipfile

    pack = ms.make_instructor_pack(tmp_path / "pack")
    with zipfile.ZipFile(pack) as z:
        names = z.namelist()
        assert "mzattn-instructor-pack/sample_answers.md" in names
        solutions = z.read(f"mzattn-instructor-pack/notebooks-with-solutions/{NOTEBOOKS[0].name}")
    assert b"strict=True" in solutions


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_a_copy_runs_whole_from_the_unzipped_download(tmp_path):
    """Chapter 7 reads the shipped checkpoint: run its copy from an unzipped download, whole."""
    chapter = next(p for p in NOTEBOOKS if p.name.startswith("07_"))
    files = ms.make([chapter], tmp_path / "copies", seed=None)
    ms.make_zip(files, tmp_path / "download.zip")
    assert ms.execute_download(tmp_path / "download.zip", timeout=600) == []


@pytest.mark.slow
def test_the_download_runs_with_mzlite_installed_outside_any_checkout(tmp_path):
    """execute_download's kernels import a copy of the package that sees no checkout, and find
    data/ in the unzipped folder: a copy that needed the repository would fail there."""
    import zipfile

    probe = (
        "import mzlite, mzlite._paths as p\n"
        "assert not p.in_checkout(), mzlite.__file__\n"
        "assert p.data_root().parent.name == 'mzattn-student-notebooks', p.data_root()\n"
    )
    nb = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": "probe", "metadata": {},
                   "outputs": [], "source": probe}],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                    "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }  # fmt: skip
    with zipfile.ZipFile(tmp_path / "download.zip", "w") as z:
        z.writestr("mzattn-student-notebooks/00_probe.ipynb", json.dumps(nb))
        z.writestr("mzattn-student-notebooks/data/paper/labels.json", "{}")
    assert ms.execute_download(tmp_path / "download.zip", timeout=120) == []
    failing = nb | {"cells": [nb["cells"][0] | {"source": "import mzlite._paths as p\n"
                                                "assert p.in_checkout()\n"}]}  # fmt: skip
    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as z:
        z.writestr("mzattn-student-notebooks/00_probe.ipynb", json.dumps(failing))
        z.writestr("mzattn-student-notebooks/data/paper/labels.json", "{}")
    assert ms.execute_download(tmp_path / "bad.zip", timeout=120)  # a failing copy is reported
