"""The grader (mzlite.grading.grader) trusts no submission.

A generated class of chapter-1 notebooks (student copies with their answer cells filled in):
one honest student, one absent, the cheats of issue 25 (a forged check log, a patched
``torch.allclose``, a patched ``diagnose``, answers tried in a loop, the instructor's solution
read and executed, mzlite's own product returned, the book's answer copied, a classmate's value
checked with the classmate's seed, the installed checker rewritten, ``check`` replaced by a fake
tick), a raising notebook and an endless one. Every cheat must be flagged or graded wrong, the
next student's wrong answer must stay wrong, and the instructor's files must be unchanged. The
unit tests below hold the pieces (the wire format, the static inspection, the audit hook, the
judge, points and the gradebook) without kernels.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from book_scripts import load

from mzlite.__main__ import main
from mzlite.exercises import wire
from mzlite.exercises.ch1 import exercise_zonotope, generator_sizes
from mzlite.exercises.checker import get, keys
from mzlite.grading import gradebook, judge, sandbox, submission
from mzlite.grading.grader import (
    NotebookGrade,
    chapter_of,
    find_submissions,
    grade,
    read_points,
    resolve_secret,
)
from mzlite.grading.roster import read_roster

ROOT = Path(__file__).resolve().parents[1]
CH1 = ROOT / "notebooks" / "01_zonotopes.ipynb"
ms = load("make_student")

SECRET = "a-test-secret-of-32-characters!!"
# The roster of the generated class: name, seed
ROSTER = {
    "ace": 7,
    "bob": 8,  # absent: his seed is what the classmate cheat copies
    "forger": 11,
    "patcher": 12,
    "diagnoser": 13,
    "looper": 14,
    "reader": 15,
    "library": 16,
    "copier": 24,  # not 17: seed 17 happens to have the book's 11 generators
    "classmate": 18,
    "vandal": 19,
    "next": 20,
    "faker": 21,
    "raiser": 22,
    "sleeper": 23,
    "oracle": 25,
}

SIZES = (
    "from mzlite.exercises.ch1 import exercise_zonotope, generator_sizes\n\n"
    "L_ex, h_ex = generator_sizes(seed)\n"
)
ZONOTOPE = "z_ex, p_ex = exercise_zonotope(seed)\n"
HALF_WIDTHS = "def half_widths(G):\n    return G.abs().sum(dim=-2)\n\n\n"
MZ_TIMES_Z = (
    "def mz_times_z(M_c, M_l, c, G):\n"
    "    cross = torch.einsum('lpq,kq->lkp', M_l, G).reshape(-1, M_c.shape[0])\n"
    "    return M_c @ c, torch.cat([G @ M_c.T, M_l @ c, cross])\n\n\n"
)
HONEST = {
    "ch1.generators": SIZES
    + 'answer = h_ex + L_ex + L_ex * h_ex\ncheck("ch1.generators", answer, seed=seed)',
    "ch1.area": ZONOTOPE + 'answer = z_ex.volume().item()\ncheck("ch1.area", answer, seed=seed)',
    "ch1.inside": 'answer = bool(z_ex.contains(p_ex))\ncheck("ch1.inside", answer, seed=seed)',
    "ch1.half_widths": HALF_WIDTHS + 'check("ch1.half_widths", half_widths, seed=seed)',
    "ch1.mz_product": MZ_TIMES_Z + 'check("ch1.mz_product", mz_times_z, seed=seed)',
}


def _values(seed: int) -> dict:
    L, h = generator_sizes(seed)
    z, p = exercise_zonotope(seed)
    return {"generators": h + L + L * h, "area": z.volume().item(), "inside": bool(z.contains(p))}


def _with(**cells) -> dict:
    """The honest answers with some cells replaced (keyword: the key's part after 'ch1.')."""
    out = dict(HONEST)
    for name, src in cells.items():
        out[f"ch1.{name}"] = src
    return out


def _notebook(seed: int, answers: dict, extra: list[str] = ()) -> dict:
    nb = ms.student_copy(json.loads(CH1.read_text()), seed)
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        for key, new in answers.items():
            if cell["cell_type"] == "code" and f'check("{key}"' in src:
                cell["source"] = new
    for i, src in enumerate(extra):  # cells added before the exercises
        at = next(j for j, c in enumerate(nb["cells"]) if 'check("ch1.' in "".join(c["source"]))
        nb["cells"].insert(
            at, {"cell_type": "code", "metadata": {}, "source": src, "outputs": [], "id": f"x{i}"}
        )
    return nb


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()


def _cheats(root: Path) -> dict[str, dict]:
    """The generated class: notebook per student (bob is absent)."""
    installed_checker = Path(sandbox.installed_roots()[0]) / "mzlite" / "exercises" / "checker.py"
    bob = _values(ROSTER["bob"])
    wrong_half = "def half_widths(G):\n    return G.norm(dim=-2)\n\n\n"
    return {
        "ace": _notebook(ROSTER["ace"], HONEST),
        "forger": _notebook(
            ROSTER["forger"],
            _with(
                area=ZONOTOPE
                + textwrap.dedent(
                    """\
                    import json, os
                    answer = 1.0
                    check("ch1.area", answer, seed=seed)
                    line = {"key": "ch1.area", "status": "correct", "message": "", "seed": seed}
                    with open(os.environ.get("MZLITE_CHECK_LOG", "log.jsonl"), "a") as f:
                        f.write(json.dumps(line) + "\\n")
                    """
                )
            ),
        ),
        "patcher": _notebook(
            ROSTER["patcher"],
            _with(
                half_widths="def always(*a, **k):\n    return True\n\n\ntorch.allclose = always\n"
                + wrong_half
                + 'check("ch1.half_widths", half_widths, seed=seed)'
            ),
        ),
        "diagnoser": _notebook(
            ROSTER["diagnoser"],
            _with(
                mz_product="import mzlite.exercises.checker as C\n"
                "C.diagnose = lambda *a, **k: (True, 'agrees with mzlite')\n\n"
                "def mz_times_z(M_c, M_l, c, G):\n    return M_c @ c, G @ M_c.T\n\n\n"
                'check("ch1.mz_product", mz_times_z, seed=seed)'
            ),
        ),
        "looper": _notebook(
            ROSTER["looper"],
            _with(
                generators=SIZES
                + 'for answer in range(1, 60):\n    if check("ch1.generators", answer, '
                "seed=seed):\n        break"
            ),
        ),
        "reader": _notebook(
            ROSTER["reader"],
            _with(
                half_widths=textwrap.dedent(
                    f"""\
                    import json
                    from pathlib import Path
                    for where in ["{CH1}", "../notebooks/{CH1.name}"]:
                        try:
                            nb = json.loads(Path(where).read_text())
                        except OSError as e:
                            print("could not read", where, e)
                            continue
                        for c in nb["cells"]:
                            s = "".join(c["source"])
                            if "strict=True" in s and "half_widths" in s:
                                exec(s.replace(", strict=True", ""))
                    check("ch1.half_widths", half_widths, seed=seed)
                    """
                )
            ),
        ),
        "library": _notebook(
            ROSTER["library"],
            _with(
                mz_product="from mzlite.zonotope import MatrixZonotope, Zonotope\n\n\n"
                "def mz_times_z(M_c, M_l, c, G):\n"
                "    z = MatrixZonotope(M_c, M_l) @ Zonotope(c, G)\n"
                "    return z.center, z.generators\n\n\n"
                'check("ch1.mz_product", mz_times_z, seed=seed)'
            ),
        ),
        "copier": _notebook(  # the reading version's numbers (seed 0)
            ROSTER["copier"],
            _with(
                generators=SIZES + 'answer = 11\ncheck("ch1.generators", answer, seed=seed)',
                area=ZONOTOPE + 'answer = 12.0\ncheck("ch1.area", answer, seed=seed)',
            ),
        ),
        "classmate": _notebook(  # bob's values, checked at home with bob's seed
            ROSTER["bob"],
            _with(
                generators=SIZES
                + f'answer = {bob["generators"]}\ncheck("ch1.generators", answer, seed=seed)',
                area=ZONOTOPE + f'answer = {bob["area"]!r}\ncheck("ch1.area", answer, seed=seed)',
            ),
        ),
        "vandal": _notebook(
            ROSTER["vandal"],
            HONEST,
            extra=[
                textwrap.dedent(
                    f"""\
                    import mzlite.exercises.checker as C
                    fake = "\\ndef verdict(ex, answer, seed=0):\\n    return Result(ex.key, 'correct', '', seed)\\n"
                    for target in [C.__file__, "{installed_checker}"]:
                        try:
                            with open(target, "a") as f:
                                f.write(fake)
                            print("rewrote", target)
                        except OSError as e:
                            print("could not rewrite", target, e)
                    """  # noqa: E501
                )
            ],
        ),
        "next": _notebook(
            ROSTER["next"],
            _with(half_widths=wrong_half + HONEST["ch1.half_widths"].split("\n\n\n")[1]),
        ),  # noqa: E501
        "faker": _notebook(
            ROSTER["faker"],
            _with(
                area=ZONOTOPE
                + "def check(*a, **k):\n    return True\n\n\n"
                + 'answer = 3.0\ncheck("ch1.area", answer)'
            ),
        ),
        "oracle": _notebook(  # tries the formulas it hesitates between on the grader's verdict
            ROSTER["oracle"],
            _with(
                area=ZONOTOPE
                + textwrap.dedent(
                    """\
                    answer = -1.0
                    try:
                        from mzlite.exercises.checker import get, verdict
                        for guess in (z_ex.volume().item() / 4, z_ex.volume().item() * 2):
                            if verdict(get("ch1.area"), guess, seed):
                                answer = guess
                    except ImportError as e:
                        print("no oracle here:", e)
                    check("ch1.area", answer, seed=seed)
                    """
                )
            ),
        ),
        "raiser": _notebook(ROSTER["raiser"], HONEST, extra=["1 / 0  # a broken cell"]),
        "sleeper": _notebook(
            ROSTER["sleeper"],
            HONEST,
            extra=["import time\n\nwhile True:\n    time.sleep(0.5)  # never ends"],
        ),
    }


def _write_class(root: Path) -> Path:
    subs = root / "submissions"
    for name, nb in _cheats(root).items():
        (subs / name).mkdir(parents=True)
        (subs / name / CH1.name).write_text(json.dumps(nb))
    (subs / "garbled").mkdir()
    (subs / "garbled" / CH1.name).write_text("{ this is not json")
    return subs


@pytest.fixture(scope="module")
def graded(the_class):
    """The generated class as graded (below, with the attackers of issue 37 where the jail can
    be made): the graded notebooks by student, and the report folder."""
    return the_class["by"], the_class["out"]


def _status(g, key):
    return g.results[key]["status"]


def _flagged(g, *words):
    text = " | ".join(g.findings)
    return all(w in text for w in words), text


@pytest.mark.integration
@pytest.mark.timeout(1800)
def test_the_honest_student_gets_every_point_and_no_finding(graded):
    ace = graded[0]["ace"]
    assert ace.outcome == "ran" and ace.seed == 7 and ace.findings == [], (ace.detail, ace.findings)
    assert {k: r["status"] for k, r in ace.results.items()} == dict.fromkeys(
        keys("ch1."), "correct"
    )
    assert ace.results["ch1.half_widths"]["trials"] == 3


CHEATS = {
    # student: (the exercise the cheat targets, words every finding list must hold)
    "forger": ("ch1.area", ["grader's environment variables"]),
    "patcher": ("ch1.half_widths", ["patches `torch.allclose`"]),
    "diagnoser": ("ch1.mz_product", ["patches `C.diagnose`"]),
    "looper": ("ch1.generators", ["not a statement of its own"]),
    "reader": ("ch1.half_widths", ["reads a notebook file", "exec"]),
    "library": ("ch1.mz_product", ["uses mzlite's own MatrixZonotope"]),
    "copier": ("ch1.area", []),
    "classmate": ("ch1.area", ["the notebook's seed is 8, the roster's 18"]),
    "faker": ("ch1.area", ["redefines `check`"]),
    "oracle": ("ch1.area", ["reaches for the grader's checkers (`get`, `verdict`)"]),
}


@pytest.mark.integration
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("student", sorted(CHEATS))
def test_every_cheat_is_flagged_or_graded_wrong(graded, student):
    key, words = CHEATS[student]
    g = graded[0][student]
    assert _status(g, key) != "correct", g.results[key]
    ok, text = _flagged(g, *words)
    assert ok, f"{student}: expected {words} in the findings: {text}"


@pytest.mark.integration
@pytest.mark.timeout(1800)
def test_cheats_earn_nothing_on_their_target(graded):
    by, _ = graded
    assert "different answers were checked" in by["looper"].results["ch1.generators"]["message"]
    assert by["looper"].results["ch1.generators"]["attempts"] == 59
    assert by["ace"].results["ch1.generators"]["attempts"] == 1
    assert "L2 norm" in by["patcher"].results["ch1.half_widths"]["message"]
    assert by["copier"].results["ch1.generators"]["status"] == "wrong"
    assert by["classmate"].results["ch1.generators"]["status"] == "wrong"
    assert by["faker"].results["ch1.area"]["status"] == "missing"
    assert by["reader"].results["ch1.half_widths"]["status"] == "missing"
    assert "MatrixZonotope" in by["library"].results["ch1.mz_product"]["message"]


@pytest.mark.integration
@pytest.mark.timeout(1800)
def test_the_oracle_is_not_in_the_box_and_reaching_for_it_is_a_finding(graded):
    """Issue 52: the box's mzlite has no verdict; the notebook that tries its formulas on it
    gets an ImportError, keeps its wrong answer, and its run is reported as reaching for it."""
    by, out = graded
    oracle = by["oracle"]
    ok, text = _flagged(oracle, "reached for the grader's checkers while graded", "verdict")
    assert ok, text
    assert _status(oracle, "ch1.area") == "wrong"
    executed = (out / "executed" / "oracle" / CH1.name).read_text()
    assert "no oracle here" in executed and "cannot import name" in executed
    assert all(_status(oracle, k) == "correct" for k in keys("ch1.") if k != "ch1.area")


@pytest.mark.integration
@pytest.mark.timeout(1800)
def test_a_rewritten_checker_changes_nothing_for_anyone(graded):
    by, out = graded
    vandal, nxt = by["vandal"], by["next"]
    ok, text = _flagged(vandal, "refers to installed files")
    assert ok, text
    executed = (out / "executed" / "vandal" / CH1.name).read_text()
    assert "could not rewrite" in executed  # the instructor's checker: refused
    assert _status(nxt, "ch1.half_widths") == "wrong"  # the next student's wrong answer
    assert all(_status(vandal, k) == "correct" for k in keys("ch1."))  # its honest answers


@pytest.mark.integration
@pytest.mark.timeout(1800)
def test_a_raising_cell_and_an_endless_loop_cost_one_cell(graded):
    by, _ = graded
    raiser, sleeper = by["raiser"], by["sleeper"]
    assert raiser.outcome == "cell errors" and "ZeroDivisionError" in raiser.detail
    assert sleeper.outcome == "cell errors" and "cell's time limit" in sleeper.detail
    for g in (raiser, sleeper):  # every later exercise still counts
        assert all(r["status"] == "correct" for r in g.results.values()), g.results
    assert by["garbled"].outcome == "unreadable"


@pytest.mark.integration
@pytest.mark.timeout(1800)
def test_gradebook_one_row_per_student_with_the_absent_one(graded, the_class):
    _, out = graded
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    names = [r["student"] for r in rows]
    roster = list(the_class["roster"])
    assert names[: len(roster)] == roster and len(names) == len(set(names))
    assert names[len(roster) :] == ["garbled"]  # submitted without being on the roster
    bob = rows[names.index("bob")]
    assert bob["status"] == "absent" and float(bob["total"]) == 0 and bob["notebooks"] == "0"
    ace = rows[names.index("ace")]
    full = sum(get(k).points for k in keys("ch1."))
    assert float(ace["total"]) == float(ace["max"]) == full and ace["percent"] == "100.0"
    assert rows[names.index("forger")]["status"] == "flagged"
    stats = {r["exercise"]: r for r in csv.DictReader((out / "statistics.csv").open())}
    assert set(stats) == set(keys("ch1.")) and int(stats["ch1.area"]["students"]) == len(rows)
    assert "L2 norm" in stats["ch1.half_widths"]["most_common_mistake"]
    md = (out / "summary.md").read_text()
    assert "## Findings" in md and "patches `torch.allclose`" in md


# ---- unit tests: no kernels


def test_wire_round_trip_and_refusals():
    value = (
        torch.arange(6, dtype=torch.float64).reshape(2, 3),
        np.array([True, False]),
        [1, 2.5, "x", None, ..., float("nan")],
        {"a": torch.tensor(3)},
    )
    back = wire.decode(wire.encode(value))
    assert torch.equal(back[0], value[0]) and back[0].dtype == torch.float64
    assert np.array_equal(back[1], value[1]) and back[1].dtype == np.bool_
    assert back[2][:5] == [1, 2.5, "x", None, ...] and np.isnan(back[2][5])
    assert isinstance(back, tuple) and int(back[3]["a"]) == 3
    with pytest.raises(wire.WireError, match="type object"):
        wire.encode(object())
    with pytest.raises(wire.WireError, match="dtype"):
        wire.encode(np.array(["a"]))
    bad_array = '{"__ndarray__": {"dtype": "object", "shape": [1], "data": ""}}'
    for bad in ['{"__reduce__": 1}', bad_array, "not json"]:
        with pytest.raises(wire.WireError):
            wire.decode(bad)


def test_wire_answers_in_numpy_without_importing_torch():
    """A process that never imported torch (the function worker of a numpy chapter) encodes
    and decodes arrays without importing it; a tensor on the wire still comes back a tensor."""
    script = textwrap.dedent(
        """\
        import importlib.util, sys
        import numpy as np
        # as the worker has it: wire.py's own text, without the mzlite package (which imports torch)
        spec = importlib.util.spec_from_file_location("wire", sys.argv[1])
        wire = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(wire)
        text = wire.encode((np.arange(4.0), [1, 2], {"p": np.float64(0.5)}))
        back = wire.decode(text)
        assert np.array_equal(back[0], np.arange(4.0)) and back[2]["p"] == 0.5
        print("torch" in sys.modules)
        tensor = wire.decode(wire.encode(np.array([1, 2])).replace("__ndarray__", "__tensor__"))
        print(type(tensor).__module__, tensor.tolist(), wire.encode(tensor) == wire.encode(
            sys.modules["torch"].tensor([1, 2])))
        """
    )
    wire_py = str(ROOT / "mzlite" / "exercises" / "wire.py")
    cmd = [sys.executable, "-I", "-c", script, wire_py]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.stdout.split() == ["False", "torch", "[1,", "2]", "True"], out.stderr


def test_a_clean_student_copy_has_no_findings_and_every_cheat_is_seen():
    tmpl = submission.chapter_template("ch1")
    for student, nb in _cheats(Path("/nonexistent")).items():
        found = submission.inspect(nb, keys("ch1."), tmpl, ROSTER[student])
        words = CHEATS.get(student, (None, []))[1]
        text = " | ".join(map(str, found.findings))
        if student in ("ace", "next", "copier", "raiser", "sleeper"):
            assert found.findings == [], (student, text)
        assert all(w in text for w in words), (student, text)
    assert found.functions == {"ch1.half_widths": "half_widths", "ch1.mz_product": "mz_times_z"}
    assert "def half_widths" in found.definitions and "check(" not in found.definitions


def test_strict_true_is_a_finding_in_a_check_call_not_in_a_zip():
    """The solution cells' ``check(..., strict=True)`` in an answer is a finding; an honest
    answer's ``zip(..., strict=True)`` (chapter 5's solution working has one) is none."""
    tmpl = submission.chapter_template("ch1")
    zipped = "answer = [a + b for a, b in zip([h_ex], [L_ex + L_ex * h_ex], strict=True)][0]\n"
    honest = _with(generators=SIZES + zipped + 'check("ch1.generators", answer, seed=seed)')
    found = submission.inspect(_notebook(ROSTER["ace"], honest), keys("ch1."), tmpl, ROSTER["ace"])
    assert found.findings == []
    strict = _with(
        generators=SIZES + 'answer = 3\ncheck("ch1.generators", answer, seed=seed, strict=True)'
    )
    found = submission.inspect(_notebook(ROSTER["ace"], strict), keys("ch1."), tmpl, ROSTER["ace"])
    assert "refers to the solution cells" in " | ".join(map(str, found.findings))


def test_a_student_copy_names_the_teaching_page_without_a_dead_link(tmp_path):
    """In JupyterLab a copy has no ../teaching.md beside it (a page of the built book)."""
    assert ms.TEACHING_LINK in CH1.read_text()  # the book's chapters keep their link
    (copy,) = ms.make([CH1], tmp_path, 3)
    text = copy.read_text()
    assert "../teaching.md" not in text and "Teaching with this book" in text


def test_the_roster_seed_replaces_the_notebooks():
    nb = _notebook(3, HONEST)
    assert submission.claimed_seed(nb) == 3
    assert submission.claimed_seed(submission.with_seed(nb, 42)) == 42
    assert submission.claimed_seed(nb) == 3  # a copy
    bare = {"cells": [{"cell_type": "code", "source": "x = 1", "metadata": {}}]}
    assert submission.claimed_seed(submission.with_seed(bare, 5)) == 5


def _parameters_source(nb: dict) -> str:
    cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
    return "".join(cell["source"])


def _parameters(nb: dict) -> dict:
    """The names a notebook's parameters cell binds, as running it binds them."""
    bound: dict = {}
    exec(_parameters_source(nb), {}, bound)
    return bound


def test_the_grader_runs_a_chapter_at_its_grading_size():
    """The book runs chapter 10 as written (``grading = False``); the grader's copy sets it
    True once, in place (not a second line after it), with the roster's seed, and the cells
    that train read it; a notebook that never declared it gets the line too."""
    nb = json.loads((ROOT / "notebooks" / "10_real_data_digits.ipynb").read_text())
    assert _parameters(nb)["grading"] is False
    graded = submission.with_seed(nb, 42, grading=True)
    assert _parameters(graded) == {**_parameters(nb), "seed": 42, "grading": True}
    assert _parameters_source(graded).count("grading =") == 1, _parameters_source(graded)
    assert _parameters(submission.with_seed(nb, 42))["grading"] is False  # not graded
    reading = [c for c in nb["cells"] if "if grading else" in "".join(c["source"])]
    assert len(reading) == 2, "the pixel-units demonstration and the smoke run read it"
    # the teaching page says what the grading size is, as the chapter sets it
    sizes = re.search(r"= \((\d+), (\d+), (\d+)\) if grading else \((\d+), (\d+), (\d+)\)",
                      "".join(reading[0]["source"]))  # fmt: skip
    page = " ".join((ROOT / "book" / "teaching.md").read_text().split())
    graded_size, book_size = sizes.groups()[:3], sizes.groups()[3:]
    assert "on {} training and {} validation sets for {} epochs".format(*graded_size) in page
    assert "({}, {} and {} otherwise)".format(*book_size) in page
    assert "`grading = True`" in page and "`grading = False`" in page
    ch1 = json.loads(CH1.read_text())
    assert "grading" not in _parameters(ch1)
    assert _parameters(submission.with_seed(ch1, 5, grading=True))["grading"] is True
    bare = {"cells": [{"cell_type": "code", "source": "x = 1", "metadata": {}}]}
    assert _parameters(submission.with_seed(bare, 5, grading=True)) == {"seed": 5, "grading": True}


# the chapters besides 10 that train at a grading size: (the cell's branch, the page's words)
GRADING_SIZES = {
    "02_relational_bottleneck": (
        r"steps = (\d+) if grading else (\d+) if",
        "Chapter 2 trains its two networks for {} steps ({} otherwise)",
    ),
    "04_training_on_gpu": (
        r"rounds = (\d+) if grading else (\d+) if .*epochs=(\d+) if grading else (\d+),"
        r".*epochs=(\d+) if grading else (\d+),.*k_stop = (\d+) if grading else (\d+)",
        "chapter 4 times a training step over {} round ({} otherwise), trains its run for {} "
        "epochs ({} otherwise) and its interrupted and resumed runs for {} ({} otherwise), "
        "interrupted after epoch {} ({} otherwise)",
    ),
    "08_uncertainty": (
        r"sizes, epochs = \(\((\d+), \d+, \d+\), (\d+)\) if grading else "
        r"\(\((\d+), \d+, \d+\), (\d+)\)",
        "chapter 8 trains its three uncertainty methods on {:,} training sets for {} epoch "
        "({:,} for {} otherwise)",
    ),
}


@pytest.mark.parametrize("chapter", sorted(GRADING_SIZES))
def test_a_chapter_trains_its_demonstration_at_the_grading_size_the_teaching_page_names(chapter):
    nb = json.loads((ROOT / "notebooks" / f"{chapter}.ipynb").read_text())
    assert _parameters(nb)["grading"] is False  # the book runs it as written
    pattern, words = GRADING_SIZES[chapter]
    cells = "\n".join("".join(c["source"]) for c in nb["cells"])
    numbers = [int(n) for n in re.search(pattern, cells, re.S).groups()]
    page = " ".join((ROOT / "book" / "teaching.md").read_text().split())
    assert words.format(*numbers) in page


def _tagged(nb: dict) -> list[int]:
    return [
        i
        for i, c in enumerate(nb["cells"])
        if submission.GRADING_SKIP_TAG in c.get("metadata", {}).get("tags", [])
    ]


def _bound_and_read(src: str) -> tuple[set[str], set[str]]:
    """What a cell surely binds (its top-level statements that always bind: assignments,
    imports, definitions) and the names it reads before binding them itself, statement by
    statement (a comprehension's own variables are its own, not reads)."""
    tree = ast.parse(re.sub(r"(?m)^\s*[%!].*$", "", src))
    comps = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    local = set()
    for node in ast.walk(tree):
        if isinstance(node, comps):
            own = {
                n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)
            }
            local |= {id(n) for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in own}
    seen, read, surely = set(), set(), set()

    def names(node, kind):
        return {
            n.id
            for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, kind) and id(n) not in local
        }

    def reads(*nodes):
        for node in nodes:
            if node is not None:
                read.update(names(node, ast.Load) - seen)

    def visit(statements, top):
        for st in statements:
            binds = set()
            if isinstance(st, (ast.For, ast.AsyncFor)):
                reads(st.iter)
                seen.update(names(st.target, ast.Store))
                visit(st.body + st.orelse, False)
            elif isinstance(st, (ast.If, ast.While)):
                reads(st.test)
                visit(st.body + st.orelse, False)
            elif isinstance(st, (ast.With, ast.AsyncWith)):
                reads(*(item.context_expr for item in st.items))
                seen.update(
                    *(names(i.optional_vars, ast.Store) for i in st.items if i.optional_vars)
                )
                visit(st.body, False)
            elif isinstance(st, ast.Try):
                visit(st.body + [s for h in st.handlers for s in h.body] + st.orelse, False)
                visit(st.finalbody, top)
            elif isinstance(st, (ast.Import, ast.ImportFrom)):
                binds = {(a.asname or a.name).split(".")[0] for a in st.names}
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                reads(st)  # its body may read any global (its own arguments too: conservative)
                binds = {st.name}
            else:
                reads(*(n for n in ast.iter_child_nodes(st) if not isinstance(n, ast.Store)))
                target = getattr(st, "target", None)  # x += 1 reads x
                if isinstance(st, ast.AugAssign) and isinstance(target, ast.Name):
                    read.update({target.id} - seen)
                binds = names(st, ast.Store)
            seen.update(binds)
            if top:
                surely.update(binds)

    visit(tree.body, True)
    return surely, read


@pytest.mark.parametrize(
    "chapter", sorted(p.name for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
)
def test_a_cell_grading_skips_only_displays(chapter):
    """Every cell tagged ``grading-skip`` is a code cell with no check, and no later cell of its
    chapter reads a name it binds (until a later cell binds it again without reading it): not
    running it changes no answer and no later cell."""
    cells = json.loads((ROOT / "notebooks" / chapter).read_text())["cells"]
    for i in _tagged({"cells": cells}):
        src = "".join(cells[i]["source"])
        assert cells[i]["cell_type"] == "code" and "check(" not in src, (chapter, i)
        assert "parameters" not in cells[i]["metadata"]["tags"], (chapter, i)
        live = _bound_and_read(src)[0]
        for j in range(i + 1, len(cells)):
            if cells[j]["cell_type"] != "code":
                continue
            bound, read = _bound_and_read("".join(cells[j]["source"]))
            assert not live & read, f"{chapter}: cell {j} reads {live & read} of cell {i}"
            live -= bound


def test_the_grader_skips_only_the_instructors_display_cells_left_as_written():
    """What the grader does not run is decided by the instructor's chapter: a student copy's
    cells whose source is a tagged cell's; the submission's own tags count for nothing, and an
    edited cell runs."""
    nb = json.loads(CH1.read_text())
    tmpl = submission.chapter_template("ch1")
    tagged = _tagged(nb)
    assert len(tagged) >= 1  # the slider at least

    def sources(notebook, indices):
        return ["".join(notebook["cells"][i]["source"]) for i in indices]

    copy = submission.with_seed(ms.student_copy(nb, 3), 3, grading=True)
    skip = submission.cells_to_skip(copy, tmpl)
    assert sources(copy, skip) == sources(nb, tagged)
    assert all(i not in skip for i in range(len(copy["cells"])) if ms.is_answer(copy["cells"][i]))
    # its metadata decides nothing: every cell tagged, or no tag at all
    for tags in ([submission.GRADING_SKIP_TAG], []):
        forged = json.loads(json.dumps(copy))
        for cell in forged["cells"]:
            cell["metadata"] = {"tags": tags}
        assert submission.cells_to_skip(forged, tmpl) == skip
    # an edited display cell runs; a cell moved elsewhere is still found by its source
    copy["cells"][skip[0]]["source"] = "".join(copy["cells"][skip[0]]["source"]) + "\n# mine\n"
    assert submission.cells_to_skip(copy, tmpl) == skip[1:]
    copy["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "source": "moved"})
    assert submission.cells_to_skip(copy, tmpl) == [i + 1 for i in skip[1:]]
    assert submission.cells_to_skip(copy, None) == []  # no chapter: everything runs


@pytest.mark.timeout(300)
def test_the_executor_runs_every_cell_but_those_it_is_told_to_skip(tmp_path):
    """The program that runs a submission in its box: a skipped cell keeps its source and has no
    output, and what it would have done is not done (the kernel never saw it); the others run."""
    cells = [
        "x = 1",
        "x = 2\nprint('the skipped cell ran')",
        "print('x is', x)",
    ]
    nb = {
        "cells": [
            {"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "id": f"c{i}",
             "execution_count": None}
            for i, s in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                    "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }  # fmt: skip
    # a stale output the student saved is not left in the graded copy either
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "old\n"}]
    src, dst = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    src.write_text(json.dumps(nb))
    executor = (ROOT / "mzlite" / "grading" / "executor.py").read_text()
    subprocess.run(
        [sys.executable, "-I", "-c", executor, str(src), str(dst), str(tmp_path), "60", "1"],
        check=True, timeout=240, env={**os.environ, "MPLBACKEND": "Agg"},
    )  # fmt: skip
    out = json.loads(dst.read_text())["cells"]
    assert ["".join(c["source"]) for c in out] == cells
    assert out[1]["outputs"] == [] and out[1]["execution_count"] is None
    text = lambda c: "".join("".join(o.get("text", "")) for o in c["outputs"])  # noqa: E731
    assert text(out[2]) == "x is 1\n"
    assert out[0]["execution_count"] is not None


def test_the_audit_hook_keeps_a_process_in_its_sandbox(tmp_path):
    box, secret, outside = tmp_path / "box", tmp_path / "secret", tmp_path / "outside"
    for d in (box, secret, outside):
        d.mkdir()
    (secret / "solution.txt").write_text("42")
    policy = {
        "deny_read": [str(secret)],
        "deny_write": [str(outside), str(secret)],
        "allow_write": [str(box)],
    }
    code = sandbox.SITECUSTOMIZE + textwrap.dedent(
        f"""
        import os
        def attempt(f):
            try:
                f()
                return "ok"
            except PermissionError:
                return "denied"
        print(attempt(lambda: open("{secret}/solution.txt").read()),
              attempt(lambda: open("{outside}/x", "w").write("x")),
              attempt(lambda: os.remove("{secret}/solution.txt")),
              attempt(lambda: open("{box}/y", "w").write("y")),
              attempt(lambda: open("{outside}/../box/z", "w").write("z")))
        """
    )
    env = {"PATH": "/usr/bin:/bin", sandbox.POLICY_ENV: json.dumps(policy)}
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["denied", "denied", "denied", "ok", "ok"], out.stderr


@pytest.mark.slow
def _running_in(folder: Path) -> list[int]:
    """The processes whose working folder is in ``folder`` (deleted or not)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(str(folder)):
                found.append(int(pid))
        except OSError:
            continue
    return found


def test_the_worker_drops_only_the_imports_nothing_uses():
    from mzlite.grading.worker import imported_modules, used_definitions

    definitions = textwrap.dedent(
        """\
        from __future__ import annotations
        import math
        import ipywidgets as widgets
        import matplotlib.pyplot as plt
        import collections.abc
        import os.path, json
        from IPython.display import HTML, display
        from itertools import *
        from mzlite import Zonotope
        import torch
        dtype = torch.float64
        scale = math.pi
        def half_widths(G):
            return G.abs().sum(dim=-2) * scale / math.pi
        def kinds(x):
            return isinstance(x, collections.abc.Sequence), json.dumps(list(chain([1], [2])))
        class Box:
            def show(self):
                return display
        """
    )
    pruned = used_definitions(definitions)
    # dropped: what no function, class or constant names (widgets, plt, Zonotope)
    assert imported_modules(pruned) == [
        "__future__", "math", "collections.abc", "os.path", "json", "IPython.display",
        "itertools", "torch",
    ]  # fmt: skip
    assert "plt" not in pruned and "widgets" not in pruned and "Zonotope" not in pruned
    # what is kept behaves as the whole: every function gives what it gave
    whole, kept = {}, {}
    without_mzlite = definitions.replace("from mzlite import Zonotope", "")
    exec(compile(without_mzlite, "<w>", "exec"), whole)  # noqa: S102
    exec(compile(pruned, "<k>", "exec"), kept)  # noqa: S102
    G = torch.randn(3, 4, 2)
    assert torch.equal(kept["half_widths"](G), whole["half_widths"](G))
    assert kept["kinds"]([1]) == whole["kinds"]([1]) == (True, "[1, 2]")
    assert kept["Box"]().show() is whole["Box"]().show()
    # nothing to drop, or not Python: the text as it came (the child reports a syntax error)
    assert used_definitions("import torch\nx = torch.pi\n") == "import torch\nx = torch.pi\n"
    assert used_definitions("def f(:\n") == "def f(:\n"


def test_the_judge_runs_functions_elsewhere_with_partial_credit(tmp_path):
    from mzlite.grading.grader import _worker_boot

    box = tmp_path / "box"
    (box / "work").mkdir(parents=True)
    definitions = textwrap.dedent(
        """\
        import torch
        def _true(*a, **k):
            return True
        torch.allclose = _true  # patches the worker's torch, never the judge's
        def wrong(G):
            return G.sum(dim=-2)
        def sometimes(G):
            return G.abs().sum(dim=-2) if abs(float(G[0, 0, 0])) < 1.2 else G.sum(dim=-2)
        def loops(G):
            while True:
                pass
        def dies(G):
            import os
            os._exit(3)
        def plants(G):  # right, and leaves a file, a locked folder and a broken torch.cat
            import os
            with open("planted.txt", "w") as f:
                f.write("x")
            os.makedirs("../home/locked/in", exist_ok=True)
            os.chmod("../home/locked", 0)
            torch.cat = None
            return G.abs().sum(dim=-2)
        def finds(M_c, M_l, c, G):  # right only where nothing of plants is left
            import os
            if os.path.exists("planted.txt") or os.path.exists("../home/locked"):
                return None
            cross = torch.einsum('lpq,kq->lkp', M_l, G).reshape(-1, M_c.shape[0])
            return M_c @ c, torch.cat([G @ M_c.T, M_l @ c, cross])
        """
    )
    request = {
        "roster_seed": 5,
        "secret": SECRET,
        "trials": 6,
        "call_timeout": 5.0,
        "definitions": definitions,
        "worker": {
            "cmd": [sys.executable, "-I", "-c", _worker_boot(ROOT)],
            "env": {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
            "cwd": str(box / "work"),
            "box": str(box),
        },
        "exercises": {"ch1.half_widths": {"function": "wrong"}},
    }
    assert judge.judge(request)["ch1.half_widths"]["status"] == "wrong"
    request["exercises"] = {"ch1.half_widths": {"function": "sometimes"}}
    part = judge.judge(request)["ch1.half_widths"]
    assert part["status"] == "partial" and 0 < part["passed"] < 6 == part["trials"]
    assert part["score"] == pytest.approx(part["passed"] / 6)
    request["exercises"] = {
        "ch1.half_widths": {"function": "loops"},
        "ch1.area": {"answers": [{"answer": wire.encode(_values(5)["area"])}]},
        "ch1.inside": {"answers": []},
    }
    request["trials"] = 1
    out = judge.judge(request)
    assert "did not return within 5 s" in out["ch1.half_widths"]["message"]
    # the endless function's process went with its worker: nothing left running in the box
    deadline = time.monotonic() + 10
    while _running_in(box) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running_in(box), _running_in(box)
    assert out["ch1.area"]["status"] == "correct" and out["ch1.inside"]["status"] == "missing"
    # each exercise in a child that starts from none of the student's code, in an emptied box:
    # the next exercise finds neither the file, nor the locked folder, nor the patched torch
    request["trials"] = 2
    request["exercises"] = {
        "ch1.half_widths": {"function": "plants"},
        "ch1.mz_product": {"function": "finds"},
    }
    out = judge.judge(request)
    assert out["ch1.half_widths"]["status"] == "correct", out["ch1.half_widths"]
    assert out["ch1.mz_product"]["status"] == "correct", out["ch1.mz_product"]
    # a function that ends its process is that exercise's failure, and the next one still runs
    request["exercises"] = {
        "ch1.half_widths": {"function": "dies"},
        "ch1.mz_product": {"function": "finds"},
    }
    out = judge.judge(request)
    assert "ended (status 3)" in out["ch1.half_widths"]["message"], out["ch1.half_widths"]
    assert out["ch1.mz_product"]["status"] == "correct", out["ch1.mz_product"]
    seeds = {judge.hidden_seed(SECRET, 5, "ch1.half_widths", t) for t in range(6)}
    assert len(seeds) == 6 and 5 not in seeds
    assert judge.hidden_seed("other", 5, "ch1.half_widths", 0) not in seeds


def test_one_judge_judges_each_submission_in_a_child_of_its_own(tmp_path):
    """The run's judge (judge.serve) imports mzlite once and answers each request from a child
    forked for it: a request that breaks its child, and one that hangs and is killed at its
    limit, leave the judge serving, and the requests after them, two at once, are judged."""
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from mzlite.grading.grader import _Judges, judge_environment

    def job(name, request):
        jbox = sandbox.make_box(tmp_path / "judges", name)
        (jbox / "request.json").write_text(json.dumps(request))
        files = {k: str(jbox / f) for k, f in (("request", "request.json"), ("result",
                 "result.json"), ("log", "judge.log"), ("cwd", "work"))}  # fmt: skip
        return {**files, "env": judge_environment(jbox)}, jbox

    area = {
        "roster_seed": 5,
        "secret": SECRET,
        "trials": 1,
        "call_timeout": 5.0,
        "definitions": "",
        "exercises": {"ch1.area": {"answers": [{"answer": wire.encode(_values(5)["area"])}]}},
    }
    worker = {"cmd": ["sleep", "20"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": str(tmp_path)}
    hangs = {**area, "exercises": {"ch1.half_widths": {"function": "f"}}, "worker": worker}
    live = {**area, "exercises": {"ch9.not_run": {"answers": [{"answer": wire.encode(
        _not_run_count(5))}]}}}  # fmt: skip
    assignment = ("ch1.area", "ch9.not_run")  # loaded, the scorecard evaluated, before any fork
    judges = _Judges(SimpleNamespace(snapshot=ROOT, base=tmp_path, exercises=assignment))
    try:
        first, box = job("first", area)
        assert judges.judge(first, 300) == 0, (box / "judge.log").read_text()
        assert json.loads((box / "result.json").read_text())["ch1.area"]["status"] == "correct"
        scorecard, box = job("scorecard", live)
        assert judges.judge(scorecard, 300) == 0, (box / "judge.log").read_text()
        assert json.loads((box / "result.json").read_text())["ch9.not_run"]["status"] == "correct"
        server = judges.proc.pid
        broken, box = job("broken", {"roster_seed": 5})
        assert judges.judge(broken, 300) == 1
        assert "KeyError" in (box / "judge.log").read_text()
        with pytest.raises(RuntimeError, match="did not finish in 3 s"):
            judges.judge(job("hangs", hangs)[0], 3)
        pair = [job(name, area) for name in ("after1", "after2")]
        with ThreadPoolExecutor(2) as pool:
            assert list(pool.map(lambda j: judges.judge(j[0], 300), pair)) == [0, 0]
        for _, box in pair:
            assert json.loads((box / "result.json").read_text())["ch1.area"]["score"] == 1.0
        assert judges.proc.pid == server  # one judge, imported once
    finally:
        judges.close()
    assert judges.proc is None


def _not_run_count(seed: int) -> int:
    """The answer to ch9.not_run for ``seed``, counted from the scorecard's rows."""
    from mzlite.repro.exercises import not_run_table
    from mzlite.repro.experiments.scorecard import scorecard

    table = not_run_table(seed)
    rows = [r for r in scorecard().rows if table is None or r["table"] == table]
    return sum(r["verdict"] == "not run" for r in rows)


def test_the_judge_evaluates_the_scorecard_once_for_every_child(monkeypatch):
    """judge.preload evaluates what chapter 9's live exercise reads before the judge forks: a
    child judging ch9.not_run afterwards never evaluates the scorecard again."""
    import functools

    from mzlite.repro import exercises as live
    from mzlite.repro.experiments import findings

    monkeypatch.setattr(findings, "_ONCE", {})  # nothing evaluated by an earlier test
    judge.preload(["ch1.area", "ch9.not_run"])

    @functools.wraps(live.scorecard)  # the same name: ``once`` would find its value
    def evaluated_again(*args, **kwargs):
        raise AssertionError("the scorecard was evaluated again after preload")

    monkeypatch.setattr(live, "scorecard", evaluated_again)
    correct, why = get("ch9.not_run").checker(-1, 3)  # judged against the preloaded rows
    assert not correct and "not the number" in why


def test_a_scorecard_that_fails_to_evaluate_does_not_stop_the_judge(monkeypatch, capsys):
    from mzlite.repro import exercises as live

    def broken():
        raise FileNotFoundError("a result file went missing")

    monkeypatch.setattr(live, "prepare", broken)
    judge.preload(["ch1.area", "ch9.not_run"])  # logs why, and returns
    assert "a result file went missing" in capsys.readouterr().err


def _grade(student, results, expected=None, findings=()):
    return NotebookGrade(
        student, CH1.name, "ch1", ROSTER.get(student), None, "ran", "", 1.0,
        results, expected or keys("ch1."), list(findings),
    )  # fmt: skip


def test_points_partial_credit_and_the_roster_join(tmp_path):
    assignment = keys("ch1.")
    points = read_points(None, assignment)
    assert points["ch1.area"] == 1 and points["ch1.half_widths"] == 2
    override = tmp_path / "points.csv"
    override.write_text("exercise,points\nch1.area,3\n")
    points = read_points(override, assignment)
    assert points["ch1.area"] == 3 and points["ch1.inside"] == 1
    override.write_text("ch1.nope,3\n")
    with pytest.raises(ValueError, match="'ch1.nope' is not an exercise being graded"):
        read_points(override, assignment)
    (tmp_path / "p.json").write_text('{"ch1.area": -1}')
    with pytest.raises(ValueError, match=">= 0"):
        read_points(tmp_path / "p.json", assignment)

    graded = [
        _grade("ace", {"ch1.area": {"status": "correct", "score": 1.0},
                       "ch1.half_widths": {"status": "partial", "score": 0.5, "passed": 1,
                                           "trials": 2, "message": "1 of 2 hidden trials passed; "
                                           "delta is what you get with the L2 norm"}}),
        _grade("zed", {"ch1.area": {"status": "wrong", "score": 0.0, "message": "no"}},
               findings=["cell 3: patches `torch.allclose`"]),
    ]  # fmt: skip
    roster = [("bob", 8), ("ace", 7)]
    rows = gradebook.gradebook_rows(graded, assignment, points, roster)
    assert [r["student"] for r in rows] == ["bob", "ace", "zed"]
    bob, ace, zed = rows
    assert bob["status"] == "absent" and bob["total"] == 0 and bob["max"] == ace["max"]
    assert ace["ch1.area"] == 3 and ace["ch1.half_widths"] == 1.0 and ace["total"] == 4.0
    assert ace["percent"] == round(100 * 4 / sum(points.values()), 2)
    assert zed["status"] == "off roster" and zed["findings"] == 1
    gradebook.write_reports(graded, tmp_path / "out", assignment, points, roster)
    lines = (tmp_path / "out" / "gradebook.csv").read_text().splitlines()
    assert len(lines) == 1 + 3 and lines[0].split(",")[:3] == ["student", "seed", "status"]
    assert lines[0].split(",")[8:] == assignment
    stats = {r["exercise"]: r for r in gradebook.statistics(graded, assignment, points, roster)}
    assert stats["ch1.area"]["correct"] == 1 and stats["ch1.area"]["missing"] == 1
    assert stats["ch1.half_widths"]["partial"] == 1
    assert "L2 norm" in stats["ch1.half_widths"]["most_common_mistake"]


def test_the_summary_says_what_audit_only_isolation_cannot_stop(tmp_path):
    """Graded without the jail, the summary's first lines say so, and what that leaves open (a
    program the notebook starts gets past the audit hook); the Teaching page quotes it."""
    assignment = keys("ch1.")
    points = read_points(None, assignment)
    graded = [_grade("ace", {"ch1.area": {"status": "correct", "score": 1.0}})]
    for isolation in ("audit", "jail"):
        gradebook.write_reports(graded, tmp_path / isolation, assignment, points, None, isolation)
    audit = (tmp_path / "audit" / "summary.md").read_text()
    head = audit.split("## Per student")[0]
    assert "Isolation: audit." in head and gradebook.ISOLATION_NOTES["audit"] in head
    assert "program a notebook starts" in head and "make the jail for marks" in head
    jail = (tmp_path / "jail" / "summary.md").read_text()
    assert "Isolation: jail." in jail and "not protected" not in jail
    page = " ".join((ROOT / "book" / "teaching.md").read_text().split())
    assert "Audit hook only: these marks are not protected against a program a notebook" in page


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nope")]) == 2
    assert "SUBMISSIONS must be a folder" in capsys.readouterr().err
    assert main(["grade", str(tmp_path)]) == 2
    assert "no .ipynb files" in capsys.readouterr().err
    # python -m mzlite grade takes every option of the grader's own command line
    assert main(["grade", str(tmp_path), "--jobs", "0", "--roster", "r.csv"]) == 2
    assert "jobs must be a positive integer" in capsys.readouterr().err
    with pytest.raises(ValueError, match="timeout"):
        grade(tmp_path, timeout=0)
    with pytest.raises(ValueError, match="jobs must be"):
        grade(tmp_path, jobs=0)
    with pytest.raises(ValueError, match="isolation must be one of"):
        grade(tmp_path, isolation="docker")
    assert chapter_of(tmp_path / "03_mzattn.ipynb") == "ch3"
    assert chapter_of(tmp_path / "ada_07_inside.ipynb") == "ch7"
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "01_a.ipynb").write_text("{}")
    assert find_submissions(tmp_path) == [("x", tmp_path / "x" / "01_a.ipynb")]
    with pytest.raises(ValueError, match="chapters"):
        grade(tmp_path, chapters=[99])
    with pytest.raises(ValueError, match="numbers like 1 or ch3"):
        grade(tmp_path, chapters=["one"])
    roster = tmp_path / "class.csv"
    roster.write_text("ada,1\nada,2\n")
    with pytest.raises(ValueError, match="listed twice"):
        read_roster(roster)
    for bad, word in [({"memory": 0}, "memory"), ({"processes": 10}, "processes"),
                      ({"file_size": -1}, "file_size"), ({"cpu": 1.5}, "cpu")]:  # fmt: skip
        with pytest.raises(ValueError, match=f"limits.{word} must be"):
            sandbox.Limits(**bad)
    with pytest.raises(ValueError, match="limits must be a mzlite.grading.sandbox.Limits"):
        grade(tmp_path, limits={"memory": 2**30}, secret=SECRET)
    assert main(["grade", str(tmp_path), "--processes", "10"]) == 2
    assert "limits.processes must be at least 300" in capsys.readouterr().err


def test_a_limit_reached_is_named_with_its_value():
    limits = sandbox.Limits(memory=2 * 2**30, processes=300, file_size=2**20, cpu=60)
    assert sandbox.limit_hits("MemoryError: ", limits) == ["memory (2 GiB of address space)"]
    assert sandbox.limit_hits("BlockingIOError: [Errno 11] Resource temporarily unavailable",
                              limits) == ["processes (300 processes and threads)"]  # fmt: skip
    assert sandbox.limit_hits("OSError: [Errno 27] File too large", limits) == [
        "file size (1 MiB per file)"
    ]
    assert sandbox.limit_hits("the judge was killed by SIGXCPU", limits) == [
        "CPU time (60 s of CPU per process)"
    ]
    assert sandbox.limit_hits("ZeroDivisionError: division by zero", limits) == []
    cmd = sandbox.limited_command(["true"], limits)
    done = subprocess.run(
        [*cmd[:-1], "sh", "-c", "ulimit -v; ulimit -f; ulimit -t"], capture_output=True, text=True
    )
    assert done.stdout.split() == [str(2 * 2**20), str(2**20 // 512), "60"], done.stderr


def test_a_secret_is_never_public(tmp_path, monkeypatch):
    monkeypatch.delenv("MZLITE_GRADING_SECRET", raising=False)
    first, generated = resolve_secret(None)
    assert generated and len(first) >= 32 and resolve_secret(None)[0] != first
    assert resolve_secret(SECRET) == (SECRET, False)
    for bad in ("", "   ", "short"):
        with pytest.raises(ValueError, match="secret is .*at least 16 characters"):
            resolve_secret(bad)
    monkeypatch.setenv("MZLITE_GRADING_SECRET", "")  # --secret "$GRADING_SECRET", unset
    with pytest.raises(ValueError, match=r"\$MZLITE_GRADING_SECRET is empty"):
        resolve_secret(None)
    (tmp_path / "ada").mkdir()
    (tmp_path / "ada" / CH1.name).write_text("{}")
    with pytest.raises(ValueError, match="secret is empty"):
        grade(tmp_path, secret="")
    assert main(["grade", str(tmp_path), "--secret", ""]) == 2
    with pytest.raises(ValueError, match="non-empty"):
        judge.hidden_seed("", 5, "ch1.half_widths", 0)
    # the package holds no secret: the old default is no longer what grading uses
    assert "mzlite-grading" not in (ROOT / "mzlite" / "grading" / "grader.py").read_text()


def test_a_failure_is_a_row_and_the_gradebook_is_always_written(tmp_path, monkeypatch):
    """A judge that dies (SIGBUS, say) marks its notebook "could not be graded: why"; every
    other notebook is graded, and the gradebook holds every student of the roster, also when
    grading is interrupted."""
    subs = tmp_path / "subs"
    for name in ("ace", "doomed", "next"):
        (subs / name).mkdir(parents=True)
        (subs / name / CH1.name).write_text(json.dumps(_notebook(ROSTER.get(name, 1), HONEST)))
    roster = tmp_path / "class.csv"
    roster.write_text("ace,7\nbob,8\ndoomed,9\nnext,20\n")
    full = {k: {"status": "correct", "score": 1.0, "message": ""} for k in keys("ch1.")}

    def fake(ctx, index, student, path, raw=None):
        assert raw is not None and json.loads(raw)  # read before any student code ran
        if student == "doomed":
            raise RuntimeError("the judge was killed by SIGBUS: Bus error")
        return _grade(student, dict(full))

    from mzlite.grading import grader

    monkeypatch.setattr(grader, "grade_notebook", fake)
    monkeypatch.setattr(grader.sandbox, "make_snapshot", lambda dest: Path(dest))
    monkeypatch.setattr(grader.student_view, "make_student_view", lambda *a: None)
    monkeypatch.setattr(grader.sandbox, "tree_digest", lambda *a, **k: {})
    monkeypatch.setattr(grader.sandbox, "make_home", lambda dest: None)
    out = tmp_path / "grades"
    graded = grade(subs, out, roster=roster, secret=SECRET, progress=False, isolation="audit",
                   chapters=[1])  # fmt: skip
    by = {g.student: g for g in graded}
    assert by["doomed"].outcome == "could not be graded"
    assert "killed by SIGBUS" in by["doomed"].detail
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert list(rows) == ["ace", "bob", "doomed", "next"]
    assert rows["doomed"]["status"] == "could not be graded" and float(rows["doomed"]["total"]) == 0
    assert rows["ace"]["percent"] == rows["next"]["percent"] == "100.0"
    assert rows["bob"]["status"] == "absent"
    longs = [r for r in csv.DictReader((out / "grades.csv").open()) if r["student"] == "doomed"]
    assert longs and all("could not be graded: " in r["message"] for r in longs)
    assert "killed by SIGBUS" in (out / "summary.md").read_text()

    def interrupted(ctx, index, student, path, raw=None):
        if student == "doomed":
            raise KeyboardInterrupt
        return _grade(student, dict(full))

    monkeypatch.setattr(grader, "grade_notebook", interrupted)
    (out / "gradebook.csv").unlink()
    with pytest.raises(KeyboardInterrupt):
        grade(subs, out, roster=roster, secret=SECRET, progress=False, isolation="audit", jobs=1,
              chapters=[1])  # fmt: skip
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert list(rows) == ["ace", "bob", "doomed", "next"]
    assert rows["ace"]["percent"] == "100.0"
    assert rows["doomed"]["status"] == "could not be graded"  # next: graded or not started
    doomed = [r for r in csv.DictReader((out / "grades.csv").open()) if r["student"] == "doomed"]
    assert "grading was interrupted" in doomed[0]["message"]


def test_the_assignment_is_the_instructors_never_the_submissions(tmp_path, monkeypatch):
    """Issue 52: a student who hands in chapter 2 as well leaves the honest student at 100 %;
    the extra notebook is reported "not assigned", never run, and counts in no total or
    maximum; the assignment comes from --chapters, an assignment file or the roster, and
    without any of them grading refuses to guess it from what was handed in."""
    from mzlite.grading import grader

    subs = tmp_path / "subs"
    handed_in = {"ace": ["01_zonotopes.ipynb"], "eve": ["01_zonotopes.ipynb", "02_extra.ipynb"]}
    for student, names in handed_in.items():
        (subs / student).mkdir(parents=True)
        for name in names:
            (subs / student / name).write_text("{}")
    ran = []

    def fake(ctx, index, student, path, raw=None):
        ran.append((student, path.name))
        chapter = chapter_of(path)
        full = {k: {"status": "correct", "score": 1.0, "message": ""} for k in keys(chapter + ".")}
        return NotebookGrade(student, path.name, chapter, 7, 7, "ran", "", 1.0, full,
                             keys(chapter + "."), [])  # fmt: skip

    monkeypatch.setattr(grader, "grade_notebook", fake)
    monkeypatch.setattr(grader.sandbox, "make_snapshot", lambda dest: Path(dest))
    monkeypatch.setattr(grader.student_view, "make_student_view", lambda *a: None)
    monkeypatch.setattr(grader.sandbox, "tree_digest", lambda *a, **k: {})
    monkeypatch.setattr(grader.sandbox, "make_home", lambda dest: None)
    plain = tmp_path / "class.csv"
    plain.write_text("ace,7\neve,9\n")
    with_line = tmp_path / "class-with-assignment.csv"
    with_line.write_text("# chapters: 1\nace,7\neve,9\n")
    assignment = tmp_path / "assignment.txt"
    assignment.write_text("# this term\n1\n")
    full = sum(get(k).points for k in keys("ch1."))
    for how in ({"roster": with_line}, {"roster": plain, "chapters": ["1"]},
                {"roster": plain, "assignment": assignment}):  # fmt: skip
        ran.clear()
        out = tmp_path / f"grades-{len(list(tmp_path.glob('grades-*')))}"
        graded = grade(subs, out, secret=SECRET, progress=False, isolation="audit", **how)
        assert ("eve", "02_extra.ipynb") not in ran and len(ran) == 2, (how, ran)
        extra = next(g for g in graded if g.notebook == "02_extra.ipynb")
        assert extra.outcome == "not assigned" and extra.results == {} and extra.expected == []
        assert "chapter 2 is not in the assignment (ch1)" in extra.detail
        rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
        assert rows["ace"]["percent"] == rows["eve"]["percent"] == "100.0", (how, rows)
        assert float(rows["ace"]["max"]) == float(rows["eve"]["max"]) == full
        assert not any(c.startswith("ch2.") for c in rows["ace"])
        assert "chapter 2 is not in the assignment" in (out / "summary.md").read_text()
    with pytest.raises(ValueError, match="the assignment is the instructor's"):
        grade(subs, tmp_path / "none", roster=plain, secret=SECRET, progress=False,
              isolation="audit")  # fmt: skip
    assert main(["grade", str(subs), "--secret", SECRET, "--isolation", "audit"]) == 2
    bad = tmp_path / "bad.txt"
    bad.write_text("1, 99\n")
    with pytest.raises(ValueError, match=r"bad.txt: chapters \['ch99'\] have no exercises"):
        grade(subs, tmp_path / "bad", assignment=bad, secret=SECRET, isolation="audit")


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_without_namespaces_the_audit_hook_still_protects(tmp_path):
    """isolation='audit' (a machine without unprivileged namespaces): the vandal and the
    solution reader are refused by the audit hook, and the next student is still graded right."""
    everyone = _cheats(tmp_path)
    subs = tmp_path / "submissions"
    for name in ("vandal", "reader", "next"):
        (subs / name).mkdir(parents=True)
        (subs / name / CH1.name).write_text(json.dumps(everyone[name]))
    roster = tmp_path / "class.csv"
    roster.write_text("".join(f"{n},{ROSTER[n]}\n" for n in ("vandal", "reader", "next")))
    watched = [p for p in [CH1, ROOT / "mzlite" / "exercises" / "checker.py"] if p.exists()]
    before = {p: p.read_bytes() for p in watched}
    try:
        graded = grade(subs, tmp_path / "grades", timeout=240, cell_timeout=60, roster=roster,
                       trials=2, isolation="audit", progress=False, chapters=[1])  # fmt: skip
    finally:
        changed = [p for p, b in before.items() if p.read_bytes() != b]
        for p in changed:
            p.write_bytes(before[p])
    assert not changed, f"a submission rewrote the instructor's files: {changed}"
    by = {g.student: g for g in graded}
    executed = (tmp_path / "grades" / "executed" / "vandal" / CH1.name).read_text()
    assert "could not rewrite" in executed and "not allowed while grading" in executed
    reader = (tmp_path / "grades" / "executed" / "reader" / CH1.name).read_text()
    assert "not allowed while grading" in reader  # reading notebooks/ refused
    assert by["reader"].results["ch1.half_widths"]["status"] == "missing"
    assert by["next"].results["ch1.half_widths"]["status"] == "wrong"
    assert by["vandal"].results["ch1.area"]["status"] == "correct"


# ---- issue 37: a class that attacks the grader's design, not its checks

# graded in the same run as the class above (ace, the honest student, is the snoop's victim)
ATTACKERS = {"doomed": 30, "hog": 31, "leftovers": 32, "lookup": 33, "planter": 34, "snoop": 35}
PUBLIC_SECRET = "mzlite-grading"  # the default secret the package used to ship
LEFTOVER = "def hw(G):\n    return G.abs().sum(dim=-2)\n"


def _public_inputs(seed: int) -> list[float]:
    """What a lookup table over the public secret knows: a fingerprint of every input the
    checker would draw for ``seed`` at home and in each hidden trial under PUBLIC_SECRET."""
    from mzlite.exercises.ch1 import half_width_inputs

    seeds = [seed] + [
        judge.hidden_seed(PUBLIC_SECRET, seed, "ch1.half_widths", t) for t in range(3)
    ]
    return [
        round(float(half_width_inputs(s + 7919 * trial).sum()), 9)
        for s in seeds
        for trial in range(3)
    ]


def _lookup_source(seed: int) -> str:
    # right on the inputs it knows, the L2 slip elsewhere: full marks only where inputs are public
    return (
        f"KNOWN = {_public_inputs(seed)!r}\n\n\n"
        "def half_widths(G):\n"
        "    if round(float(G.sum()), 9) in KNOWN:\n"
        "        return G.abs().sum(dim=-2)\n"
        "    return G.norm(dim=-2)\n\n\n"
    )


def _attack_class(root: Path, subs: Path, home: Path, marker: Path, probe: Path) -> None:
    victim_file = subs / "ace" / CH1.name
    leftover_dir = marker.parent / "leftover-lib"
    plant = home / ".cache" / "torch_extensions" / "mzlite_fused_cpu_0" / "planted.py"
    shell = (
        f"mkdir -p {plant.parent} && echo 'raise SystemExit(99)' > {plant}; "
        f"echo planted > {marker}; echo x > {probe}; "
        f"mkdir -p {leftover_dir} && printf '{LEFTOVER}' > {leftover_dir}/hw_helper.py"
    ).replace("\n", "\\n")
    leftovers = textwrap.dedent(
        f"""\
        import os, sys
        from pathlib import Path
        Path("hw_helper.py").write_text({LEFTOVER!r})


        def half_widths(G):
            for where in (os.getcwd(), {str(leftover_dir)!r}):
                sys.path.insert(0, where)
            import hw_helper
            return hw_helper.hw(G)


        check("ch1.half_widths", half_widths, seed=seed)
        """
    )
    nbs = {
        "doomed": _notebook(ATTACKERS["doomed"], HONEST),
        "planter": _notebook(
            ATTACKERS["planter"],
            HONEST,
            extra=[
                "import subprocess\n\n"
                f"done = subprocess.run(['sh', '-c', {shell!r}], capture_output=True, text=True)\n"
                "print('planting:', done.returncode, done.stderr)"
            ],
        ),
        "leftovers": _notebook(ATTACKERS["leftovers"], _with(half_widths=leftovers)),
        "lookup": _notebook(
            ATTACKERS["lookup"],
            _with(
                half_widths=_lookup_source(ATTACKERS["lookup"])
                + 'check("ch1.half_widths", half_widths, seed=seed)'
            ),
        ),
        "snoop": _notebook(
            ATTACKERS["snoop"],
            HONEST,
            extra=[
                "import subprocess\n\n"
                "cmd = f'cat {victim_file!s}; printf garbage > {victim_file!s}'\n".replace(
                    "{victim_file!s}", str(victim_file)
                )
                + "done = subprocess.run(['sh', '-c', cmd], capture_output=True, text=True)\n"
                "print('STOLEN', len(done.stdout), 'bytes', done.stderr[:300])"
            ],
        ),
        "hog": _notebook(
            ATTACKERS["hog"],
            HONEST,
            extra=[
                "hoard = bytearray(16 * 2**30)  # far past the memory limit",
                "import os, time\n\nkids = []\ntry:\n    for _ in range(400):\n"
                "        pid = os.fork()\n        if pid == 0:\n            time.sleep(3)\n"
                "            os._exit(0)\n        kids.append(pid)\nfinally:\n"
                "    print('forked', len(kids))\n    for k in kids:\n        os.waitpid(k, 0)",
                "with open('big.bin', 'wb') as f:\n    for _ in range(80):\n"
                "        f.write(bytes(2**20))  # past the file-size limit",
            ],
        ),
    }
    for name, nb in nbs.items():
        (subs / name).mkdir(parents=True)
        (subs / name / CH1.name).write_text(json.dumps(nb))


@pytest.fixture(scope="module")
def the_class(tmp_path_factory):
    """The generated class and, where the jail can be made, the attackers of issue 37, graded
    in one run: without a secret (one is drawn for the run), with a fake grader's home (so a
    planted kernel cache could never reach the real one) and small limits; the judge of
    "doomed" dies with SIGBUS, every other judge records its environment. The instructor's
    files are checked unchanged afterwards (and put back before failing)."""
    from mzlite.grading import grader

    root = tmp_path_factory.mktemp("class")
    subs, home = _write_class(root), root / "grader-home"
    (home / ".cache" / "torch_extensions").mkdir(parents=True)
    marker = Path(tempfile.mkdtemp(prefix="mzlite-attack-")) / "planted-in-host-tmp"
    probe = Path(sys.base_prefix).resolve() / f"mzlite-probe-{root.name}.py"
    roster = dict(ROSTER)
    # the audit hook alone cannot stop a shell: outside namespaces host /tmp stays writable
    jailed = sandbox.jail_available()
    if jailed:
        _attack_class(root, subs, home, marker, probe)
        roster.update(ATTACKERS)
    (root / "class.csv").write_text(
        "# name,seed\n" + "".join(f"{n},{s}\n" for n, s in roster.items())
    )
    names = sorted(p.name for p in subs.iterdir())  # the grader's order: its judges' names
    envs = root / "judge-env"
    envs.mkdir()
    real, real_judge = grader.judge_command, grader._Judges.judge

    def spied(ctx):  # the run's judge, and the environment it runs in
        return ["sh", "-c", 'env > "$0"; exec "$@"', str(envs / "server.env"), *real(ctx)]

    def judged(self, job, timeout):  # each submission's judge: a child, in its box's environment
        student = names[int(Path(job["cwd"]).parent.name)]
        (envs / f"{student}.env").write_text("".join(f"{k}={v}\n" for k, v in job["env"].items()))
        if student == "doomed":  # a judge that dies, as one did on a shared library overwritten
            return real_judge(self, {**job, "request": job["request"] + ".gone"}, timeout)
        return real_judge(self, job, timeout)

    watched = [ROOT / "mzlite" / "exercises" / "checker.py", CH1]
    watched += [Path(r) / "mzlite" / "exercises" / "checker.py" for r in sandbox.installed_roots()]
    instructors = {p: p.read_bytes() for p in watched if p.exists()}
    mp = pytest.MonkeyPatch()
    mp.setenv("HOME", str(home))
    mp.delenv("MZLITE_GRADING_SECRET", raising=False)
    mp.setattr(grader, "judge_command", spied)
    mp.setattr(grader._Judges, "judge", judged)
    before = (subs / "ace" / CH1.name).read_bytes()
    try:
        graded = grade(
            subs,
            root / "grades",
            chapters=[1],
            timeout=300,
            cell_timeout=30,
            roster=root / "class.csv",
            jobs=2,
            trials=3,
            progress=False,
            limits=sandbox.Limits(memory=4 * 2**30, processes=300, file_size=64 * 2**20),
        )
    finally:
        mp.undo()
        planted = [p for p in (marker, probe, marker.parent / "leftover-lib") if p.exists()]
        probe.unlink(missing_ok=True)  # never leave a probe behind, also when the test fails
        shutil.rmtree(marker.parent, ignore_errors=True)
        changed = [p for p, b in instructors.items() if p.read_bytes() != b]
        for p in changed:  # put the instructor's file back before failing
            p.write_bytes(instructors[p])
    assert not changed, f"a submission rewrote the instructor's files: {changed}"
    return {
        "by": {g.student: g for g in graded},
        "out": root / "grades",
        "roster": roster,
        "jailed": jailed,
        "home": home,
        "planted": planted,
        "envs": envs,
        "victim_before": before,
        "victim_after": (subs / "ace" / CH1.name).read_bytes(),
    }


@pytest.fixture(scope="module")
def attacked(the_class):
    """The attackers' part of the class: graded only in the jail."""
    if not the_class["jailed"]:
        pytest.skip("needs the jail (bubblewrap and user namespaces)")
    return the_class


def _all_correct(g):
    return {k: r["status"] for k, r in g.results.items()} == dict.fromkeys(keys("ch1."), "correct")


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_attackers_leave_every_other_student_graded_as_if_alone(attacked):
    by = attacked["by"]
    ace = by["ace"]  # the honest student, graded beside every attacker (and the snoop's victim)
    assert ace.outcome == "ran" and ace.findings == [], ace.findings
    assert _all_correct(ace), ace.results
    rows = {r["student"]: r for r in csv.DictReader((attacked["out"] / "gradebook.csv").open())}
    assert set(ATTACKERS) <= set(rows)
    assert rows["ace"]["percent"] == "100.0"
    # a judge that dies is that notebook's row, not the end of grading
    doomed = by["doomed"]
    assert doomed.outcome == "could not be graded" and "FileNotFoundError" in doomed.detail
    assert rows["doomed"]["status"] == "could not be graded"


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_no_planted_file_reaches_the_judge(attacked):
    """The planter writes, from a shell (past the audit hook), a kernel into the grader's
    torch extension cache, a file into host /tmp and one beside the interpreter's standard
    library; the judge runs with its own home and caches and no compiled kernels at all."""
    by, home = attacked["by"], attacked["home"]
    if sandbox.jail_available():  # read-only outside its box: nothing planted anywhere
        assert attacked["planted"] == []
        assert not list((home / ".cache" / "torch_extensions").rglob("planted.py"))
        assert (
            "Read-only file system"
            in (attacked["out"] / "executed" / "planter" / CH1.name).read_text()
        )
    assert _all_correct(by["planter"])
    for student in ("server", "ace", "planter", "lookup"):
        env = dict(
            line.split("=", 1)
            for line in (attacked["envs"] / f"{student}.env").read_text().splitlines()
            if "=" in line
        )
        assert env["MZLITE_FUSED"] == "0"
        for var in ("HOME", "TORCH_EXTENSIONS_DIR", "TMPDIR", "XDG_CACHE_HOME"):
            assert not Path(env[var]).resolve().is_relative_to(home), (var, env[var])
            assert "/judges/" in env[var], (var, env[var])


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_leftovers_and_a_public_secret_table_earn_nothing(attacked):
    from mzlite.exercises.checker import verdict

    by, out = attacked["by"], attacked["out"]
    # the leftover helper is right: imported beside the notebook it would pass every trial
    helper = {}
    exec(LEFTOVER, helper)  # noqa: S102
    assert verdict(get("ch1.half_widths"), helper["hw"], 5).status == "correct"
    left = by["leftovers"].results["ch1.half_widths"]
    assert left["status"] == "wrong" and "hw_helper" in left["message"], left
    # the table passes every hidden trial that derives from the public secret ...
    table = {"torch": torch}
    exec(_lookup_source(ATTACKERS["lookup"]), table)  # noqa: S102
    seed = ATTACKERS["lookup"]
    public = [judge.hidden_seed(PUBLIC_SECRET, seed, "ch1.half_widths", t) for t in range(3)]
    ex = get("ch1.half_widths")
    assert all(verdict(ex, table["half_widths"], s).status == "correct" for s in public)
    assert verdict(ex, table["half_widths"], seed).status == "correct"  # and the home check
    # ... and none under the secret drawn for this run, which only the report folder holds
    looked = by["lookup"].results["ch1.half_widths"]
    assert looked["status"] == "wrong" and looked["passed"] == 0, looked
    drawn = (out / "grading-secret.txt").read_text().splitlines()[0]
    assert len(drawn) >= 32 and drawn != PUBLIC_SECRET
    for g in by.values():  # in none of the executed notebooks
        executed = out / "executed" / g.student / CH1.name
        assert not executed.exists() or drawn not in executed.read_text()


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_classmates_submission_can_be_neither_read_nor_changed(attacked):
    by, out = attacked["by"], attacked["out"]
    snoop = (out / "executed" / "snoop" / CH1.name).read_text()
    assert "STOLEN 0 bytes" in snoop, snoop[-2000:]
    assert _all_correct(by["ace"])  # the victim, graded from what it submitted
    if sandbox.jail_available():
        assert attacked["victim_after"] == attacked["victim_before"]


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_memory_processes_and_file_size_are_limited_and_reported(attacked):
    hog = attacked["by"]["hog"]
    text = " | ".join(hog.findings)
    assert "memory (4 GiB" in text and "file size (64 MiB" in text, text
    executed = (attacked["out"] / "executed" / "hog" / CH1.name).read_text()
    forked = int(executed.split("forked ")[1].split("\\n")[0])
    assert forked < 400, forked  # stopped by the limit, not by the loop's end
    assert "processes (300" in text, text
    assert _all_correct(hog)  # the answers after the hoarding still count


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_value_reruns_tell_a_typed_answer_from_a_computed_one(tmp_path):
    """A value typed in after the home check ticked (or its hint gave the formula) is right for
    one seed; with ``value_reruns`` the grader runs the notebook for a hidden seed too, and only
    an answer the notebook computes is right there as well."""
    typed = _values(41)
    typist = _with(
        generators=SIZES
        + f'answer = {typed["generators"]}\ncheck("ch1.generators", answer, seed=seed)',
        area=ZONOTOPE + f'answer = {typed["area"]!r}\ncheck("ch1.area", answer, seed=seed)',
    )
    for key in ("ch1.generators", "ch1.area"):  # right at home: without reruns, full marks
        assert check_value(key, typed[key.split(".")[1]], 41)
    subs = tmp_path / "subs"
    for name, nb in {"typist": _notebook(41, typist), "worker": _notebook(42, HONEST)}.items():
        (subs / name).mkdir(parents=True)
        (subs / name / CH1.name).write_text(json.dumps(nb))
    roster = tmp_path / "class.csv"
    roster.write_text("typist,41\nworker,42\n")
    graded = grade(subs, tmp_path / "grades", timeout=300, cell_timeout=60, roster=roster,
                   trials=2, secret=SECRET, progress=False, value_reruns=1,
                   chapters=[1])  # fmt: skip
    by = {g.student: g for g in graded}
    assert _all_correct(by["worker"]), by["worker"].results
    assert by["worker"].results["ch1.area"]["reruns"] == 1
    for key in ("ch1.generators", "ch1.area"):
        res = by["typist"].results[key]
        assert res["status"] == "partial" and res["score"] == 0.5, res
        assert "not typed in" in res["message"]
    assert by["typist"].results["ch1.half_widths"]["status"] == "correct"  # coding: untouched
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "grades" / "gradebook.csv").open())}
    assert rows["worker"]["percent"] == "100.0" and float(rows["typist"]["ch1.area"]) == 0.5


def check_value(key, answer, seed) -> bool:
    from mzlite.exercises.checker import verdict

    return verdict(get(key), answer, seed).status == "correct"
