"""``python -m mzlite grade``: generated submissions (all correct, all blank, one raising, one that
never ends, one unreadable) are graded, and none of them stops the run."""

from __future__ import annotations

import csv
import json

import pytest

from mzlite.__main__ import main
from mzlite.exercises import keys
from mzlite.exercises.grading import chapter_of, find_submissions, grade

pytest.importorskip("nbclient")

SETUP = "from mzlite.exercises import check\nimport torch\n"
CORRECT = {
    "ch1.generators": "answer = 2 + 3 + 2 * 3",
    "ch1.area": "answer = 12.0",
    "ch1.inside": "answer = False",
    "ch1.half_widths": "def answer(G):\n    return G.abs().sum(dim=-2)",
    "ch1.mz_product": (
        "def answer(M_c, M_l, c, G):\n"
        "    cross = torch.einsum('lpq,kq->lkp', M_l, G).reshape(-1, M_c.shape[0])\n"
        "    return M_c @ c, torch.cat([G @ M_c.T, M_l @ c, cross])"
    ),
}


def _cell(src, tags=()):
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": f"c{abs(hash(src)) % 10**8}",
        "metadata": {"tags": list(tags)},
        "outputs": [],
        "source": src,
    }


def _notebook(path, bodies, seed=3):
    cells = [_cell(f'profile = "smoke"\nseed = {seed}\ndevice = "auto"', ["parameters"])]
    cells.append(_cell(SETUP))
    cells += [_cell(b) for b in bodies]
    nb = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))


def _answers(values):
    return [f'{v}\ncheck("{k}", answer, seed=seed)' for k, v in values.items()]


# five kernels, one of them runs into its 60 s time limit: the tests that read it are integration
@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class") / "submissions"
    name = "01_zonotopes.ipynb"
    _notebook(root / "ace" / name, _answers(CORRECT))
    _notebook(root / "blank" / name, _answers({k: "answer = ..." for k in CORRECT}))
    raising = _answers(CORRECT)
    raising.insert(1, "1 / 0  # a broken cell: the run goes on")
    _notebook(root / "raiser" / name, raising)
    endless = _answers(CORRECT)
    endless.insert(
        2,
        # never ends; it sleeps, so that CI's two cores stay free
        "import time\n\nwhile True:\n    time.sleep(0.5)",
    )
    _notebook(root / "looper" / name, endless)
    (root / "garbled.ipynb").write_text("{ this is not json")
    out = root.parent / "grades"
    runs = grade(root, out, timeout=60, progress=False)
    return runs, out


def _by(runs, student):
    return next(r for r in runs if r.student == student)


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_every_submission_is_reported(graded):
    runs, _ = graded
    assert sorted(r.student for r in runs) == ["ace", "blank", "garbled", "looper", "raiser"]
    ch1 = set(keys("ch1."))
    assert set(CORRECT) == ch1, "the generated submission covers every chapter 1 exercise"
    ace = _by(runs, "ace")
    assert ace.outcome == "ran" and ace.seed == 3
    assert {k: r["status"] for k, r in ace.results.items()} == dict.fromkeys(ch1, "correct")
    blank = _by(runs, "blank")
    assert blank.outcome == "ran"
    assert {r["status"] for r in blank.results.values()} == {"unanswered"}


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_a_raising_cell_is_reported_and_later_checks_still_count(graded):
    raiser = _by(graded[0], "raiser")
    assert raiser.outcome == "cell errors" and "ZeroDivisionError" in raiser.detail
    assert len(raiser.results) == len(CORRECT)
    assert all(r["status"] == "correct" for r in raiser.results.values())


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_an_endless_notebook_is_killed_with_the_checks_it_reached(graded):
    looper = _by(graded[0], "looper")
    assert looper.outcome == "timed out" and "60" in looper.detail
    assert set(looper.results) == set(list(CORRECT)[:2])  # the two checks before the loop
    garbled = _by(graded[0], "garbled")
    assert garbled.outcome == "unreadable"


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_reports_per_student_and_per_exercise(graded):
    runs, out = graded
    rows = list(csv.DictReader((out / "grades.csv").open()))
    looper = {r["exercise"]: r["status"] for r in rows if r["student"] == "looper"}
    assert list(looper.values()).count("missing") == len(CORRECT) - 2
    assert all(r["seed"] == "3" for r in rows if r["student"] == "ace")
    md = (out / "summary.md").read_text()
    assert "| ace | 1 | 5 | 0 | 0 | 0 | 5/5 |" in md
    assert "| blank | 1 | 0 | 0 | 5 | 0 | 0/5 |" in md
    assert "| ch1.inside | 2 | 0 | 1 | 1 |" in md  # ace and raiser right, blank, looper cut off
    assert "looper / 01_zonotopes.ipynb: timed out" in md
    assert (out / "executed" / "ace" / "01_zonotopes.ipynb").exists()


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nope")]) == 2
    assert "SUBMISSIONS must be a folder" in capsys.readouterr().err
    assert main(["grade", str(tmp_path)]) == 2
    assert "no .ipynb files" in capsys.readouterr().err
    with pytest.raises(ValueError, match="timeout"):
        grade(tmp_path, timeout=0)
    assert chapter_of(tmp_path / "03_mzattn.ipynb") == "ch3"
    assert chapter_of(tmp_path / "ada_07_inside.ipynb") == "ch7"
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "01_a.ipynb").write_text("{}")
    assert find_submissions(tmp_path) == [("x", tmp_path / "x" / "01_a.ipynb")]
