"""The five journeys of CONTRIBUTING.md, each walked once with a throwaway example: a baseline, a
task, a paper table, a scorecard claim and a chapter with exercises. Each example is registered
for the length of one test (``Registry.registered``) and goes through what a real one would: it
builds, runs under the smoke profile, reports beside the paper and scores. When a journey needs
a step that CONTRIBUTING.md does not name, one of these tests fails first."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import test_book_conventions as book_conventions
import test_notebooks as notebook_conventions
import torch
import torch.nn as nn
from book_scripts import load

from mzlite import nn as mznn
from mzlite import tasks as T
from mzlite.exercises import checker
from mzlite.repro import experiments as ex
from mzlite.repro.experiments.present import claim_text
from mzlite.repro.experiments.report import report
from mzlite.repro.experiments.scorecard import Claim, Kind, evaluate
from mzlite.repro.experiments.tables import table_registry
from mzlite.repro.paper import load_paper_table

ROOT = Path(__file__).resolve().parents[1]
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
SMALL_ST = {"d_model": 16, "n_heads": 2, "d_ff": 32, "n_inducing": 4}


def _journey(title: str) -> str:
    """The section of CONTRIBUTING.md that walks journey ``title``."""
    start = CONTRIBUTING.index(f"## {title}")
    end = CONTRIBUTING.find("\n## ", start + 1)
    return CONTRIBUTING[start : end if end > 0 else None]


def _run(table, tmp_path, **kw):
    dirs = {"results_dir": tmp_path / "results", "cache_dir": tmp_path / "cache"}
    out = ex.run(table, "smoke", threads=1, data_workers=1, progress=False, **dirs, **kw)
    assert not out["failed"], out["failed"]
    return dirs


# ---------------------------------------------------------------------------------------------
# 1. A baseline
# ---------------------------------------------------------------------------------------------


@dataclass
class MeanMLPConfig:
    d_in: int
    d_out: int = 1
    d_hidden: int = 32


class MeanMLP(nn.Module):
    """A throwaway baseline: an MLP on the masked mean of the elements."""

    def __init__(self, cfg: MeanMLPConfig):
        super().__init__()
        self.cfg = cfg
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_in, cfg.d_hidden), nn.ReLU(), nn.Linear(cfg.d_hidden, cfg.d_out)
        )

    def forward(self, x, mask=None):
        if mask is None:
            mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        m = mask.unsqueeze(-1).to(x.dtype)
        return self.mlp((x.nan_to_num() * m).sum(1) / m.sum(1).clamp(min=1))


MEAN_MLP = mznn.ModelSpec(
    "Mean MLP", "deepsets", MeanMLP, MeanMLPConfig, width="d_hidden", paper_params="n/a"
)


def test_the_map_of_the_house_names_each_layer_and_the_contract_it_keeps():
    """CONTRIBUTING's map names where each layer lives; the contract it cites is the one
    ``make lint`` runs (pyproject.toml's [tool.importlinter], forbidding the library both)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    section = _journey("The map of the house")
    for named in ("mzlite/repro/", "mzlite/grading/", "the teaching library", "make lint",
                  "[tool.importlinter]", "lint-imports", "mzlite/repro/exercises.py"):  # fmt: skip
        assert named in section, named
    linter = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    forbidden = [c for c in linter["contracts"] if c["type"] == "forbidden"]
    assert {"mzlite.repro", "mzlite.grading"} <= set(forbidden[0]["forbidden_modules"])
    library = set(forbidden[0]["source_modules"])
    package = {p.stem if p.is_file() else p.name for p in (ROOT / "mzlite").iterdir()}
    package -= {"__init__", "__main__", "__pycache__", "repro", "grading"}
    assert {f"mzlite.{m}" for m in package if not m.startswith(".")} == library, (
        "every module of mzlite outside repro/ and grading/ is teaching library"
    )
    assert "lint-imports" in (ROOT / "Makefile").read_text()


def test_journey_add_a_baseline(tmp_path):
    section = _journey("Add a baseline")
    for named in ("Layer: the teaching library", "mzlite/nn/baselines.py", "mzlite/nn/registry.py",
                  "ModelSpec", "make test-fast"):  # fmt: skip
        assert named in section, named
    with mznn.MODELS.registered("mean_mlp", MEAN_MLP):
        # it builds, counts and widens like every registered model
        model = mznn.build_model("mean_mlp", 3, 1, device="cpu", seed=0)
        assert model(torch.randn(2, 5, 3)).shape == (2, 1)
        kw, params = mznn.match_width("mean_mlp", 3, 1, 2_000)
        assert set(kw) == {"d_hidden"} and abs(params - 2_000) < 200
        assert "mean_mlp" in [r["model"] for r in mznn.param_table(3)]
        # its spec decides its learning-rate family: no name rule elsewhere
        assert ex.model_family("mean_mlp") == "deepsets"
        cell = ex.Cell("A-mean_mlp", "set_regression", {"d": 3}, "mean_mlp", "Mean MLP", "A",
                       sizes=(128, 64, 64))  # fmt: skip
        conv = ex.Job("t", cell, 0, ex.get_profile("cpu-converged"), *[Path()] * 3, "cpu")
        assert conv.train_config().lr == ex.PROFILES["cpu-converged"].lr_by_family["deepsets"]
        table = ex.TableSpec("tab:journey", "a throwaway table", (cell,), chapter="06_x")
        dirs = _run(table, tmp_path)
        (res,) = ex.load_results(table, "smoke", dirs["results_dir"])
        assert res["model"] == "mean_mlp" and res["model_config"]["d_hidden"] == 32
        assert res["protocol"]["family"] == "deepsets"
    assert "mean_mlp" not in mznn.MODELS  # the example is gone again


# ---------------------------------------------------------------------------------------------
# 2. A task
# ---------------------------------------------------------------------------------------------


def centroid_norm_dataset(
    n_sets: int, *, d: int = 3, n_min: int = 4, n_max: int = 9, seed: int = 0
) -> T.SetData:
    """A throwaway task: the norm of each set's centroid, elements N(1, I_d)."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n_sets, n_max, d), np.float32)
    mask = np.zeros((n_sets, n_max), bool)
    y = np.zeros((n_sets, 1), np.float32)
    for i, n in enumerate(rng.integers(n_min, n_max + 1, size=n_sets)):
        x[i, :n] = rng.normal(1.0, 1.0, size=(n, d))
        mask[i, :n] = True
        y[i, 0] = np.linalg.norm(x[i, :n].astype(np.float64).mean(0))
    opts = {"d": d, "n_min": n_min, "n_max": n_max}
    return T.SetData(torch.from_numpy(x), torch.from_numpy(mask), torch.from_numpy(y),
                     "centroid_norm", opts, seed)  # fmt: skip


def test_journey_add_a_task(tmp_path):
    section = _journey("Add a task")
    for named in ("Layer: the teaching library", "mzlite/tasks/", "mzlite/tasks/registry.py",
                  "task_digests", "make test-fast"):  # fmt: skip
        assert named in section, named
    with T.TASKS.registered("centroid_norm", centroid_norm_dataset):
        assert T.task_options("centroid_norm") == {"d": 3, "n_min": 4, "n_max": 9}
        data = T.make_task("centroid_norm", 16, seed=1)
        assert data.d_in == 3 and len(data) == 16
        with pytest.raises(ValueError, match="unknown option"):
            ex.check_task_options("centroid_norm", {"dim": 3})
        with pytest.raises(ValueError, match="n_min must be <= n_max"):
            ex.check_task_options("centroid_norm", {"n_min": 9, "n_max": 4})
        # a cell on it trains a model and fits the yardstick, and the datasets are cached
        cells = (
            ex.Cell("c-st", "centroid_norm", {}, "st", "Set Transformer", "centroid",
                    model_kwargs=SMALL_ST, sizes=(128, 64, 64)),
            ex.Cell("c-set_stats", "centroid_norm", {}, ex.SET_STATS, "yardstick", "centroid",
                    sizes=(128, 64, 64), full_seeds=1),
        )  # fmt: skip
        table = ex.TableSpec("tab:journey", "a throwaway table", cells, chapter="06_x")
        dirs = _run(table, tmp_path)
        results = {r["cell"]: r for r in ex.load_results(table, "smoke", dirs["results_dir"])}
        assert set(results) == {"c-st", "c-set_stats"}
        # the centroid's norm is nearly a function of the per-dimension means: the ridge on set
        # statistics (which include them) must find most of it
        assert results["c-set_stats"]["metrics"]["test"]["r2"] > 0.5
        assert list((dirs["cache_dir"] / "datasets").glob("centroid_norm*"))
    assert "centroid_norm" not in T.TASKS


# ---------------------------------------------------------------------------------------------
# 3. A paper table, and 4. a scorecard claim about it
# ---------------------------------------------------------------------------------------------


def _rank_table() -> ex.TableSpec:
    """A throwaway registration of the paper's tab:hypernet-rank (not registered in mzlite): the
    HyperNet baseline at rank 8 and 16, and the yardstick, on Task A."""
    cells = [
        ex.Cell(f"A-hypernet_r{r}", "set_regression", {"d": 4}, "hypernet", f"HyperNet (r={r})",
                "Task A", model_kwargs={**SMALL_ST, "n_enc": 1, "rank": r}, sizes=(128, 64, 64),
                full_seeds=3,
                paper=(ex.PaperRef(f"HyperNet (r={r})", "Task A: Set Regr. / R^2"),
                       ex.PaperRef(f"HyperNet (r={r})", "Task A: Set Regr. / MSE", "mse")))
        for r in (8, 16)
    ]  # fmt: skip
    cells.append(
        ex.Cell("A-set_stats", "set_regression", {"d": 4}, ex.SET_STATS, "yardstick", "Task A",
                sizes=(128, 64, 64), full_seeds=1)
    )  # fmt: skip
    return ex.TableSpec(
        "tab:hypernet-rank", "HyperNet rank (R^2)", tuple(cells), chapter="06_relational_benchmarks"
    )


@pytest.fixture
def rank_table(monkeypatch):
    spec = _rank_table()
    with table_registry().registered(spec.label, spec):
        monkeypatch.setattr(ex, "TABLES", (*ex.TABLES, spec.label))
        yield spec
    assert "tab:hypernet-rank" not in table_registry()


def test_journey_add_a_paper_table(rank_table, tmp_path):
    section = _journey("Add a paper table")
    for named in ("Layer: the reproduction layer", "mzlite/repro/experiments/tables.py",
                  "data/paper", "chapter=", "PaperRef"):  # fmt: skip
        assert named in section, named
    assert ex.get_table("hypernet-rank") is rank_table and rank_table.chapter in {
        p.stem for p in (ROOT / "notebooks").glob("*.ipynb")
    }
    dirs = _run("tab:hypernet-rank", tmp_path)
    rows = report("tab:hypernet-rank", "smoke", dirs["results_dir"]).by_cell(metric="r2")
    one = rows["A-hypernet_r8"]  # the paper's number beside ours, from data/paper
    paper = load_paper_table("tab:hypernet-rank")["rows"][0]["cells"]["Task A: Set Regr. / R^2"]
    assert one["paper_mean"] == pytest.approx(paper["mean"]) and one["n_seeds"] == 1
    assert one["params"] > 0 and rows["A-set_stats"]["params"] is None  # a closed form has none
    assert ex.aliases("tab:hypernet-rank", "smoke") == {}


def test_journey_add_a_scorecard_claim(rank_table, tmp_path):
    section = _journey("Add a scorecard claim")
    for named in ("Layer: the reproduction layer", "mzlite.analysis.verdicts", "Claim",
                  "mzlite/repro/experiments/claims.py", "claims()", "CellKey"):  # fmt: skip
        assert named in section, named
    claim = Claim("rank-flat", "tab:hypernet-rank", Kind.ON_PAR,
                  "Doubling HyperNet's rank leaves its R^2 as it was",
                  ("A-hypernet_r8", "A-hypernet_r16"), holds_at=0.05, partly_at=0.10)  # fmt: skip
    assert ex.get_table(claim.table).chapter == "06_relational_benchmarks"
    assert claim_text(claim).endswith("they differ by at most 0.05 (partly: 0.10).")
    with pytest.raises(ValueError, match="no cell 'A-hypernet_r32' in tab:hypernet-rank"):
        Claim("rank-typo", "tab:hypernet-rank", Kind.AT_LEAST, "a renamed cell",
              ("A-hypernet_r32",), holds_at=0.9, partly_at=0.7)  # fmt: skip
    empty = evaluate(claim, results_dir=tmp_path / "none")
    paper = {r["row"]: r["cells"]["Task A: Set Regr. / R^2"]["mean"]
             for r in load_paper_table("tab:hypernet-rank")["rows"]}  # fmt: skip
    expect = abs(paper["HyperNet (r=16)"] - paper["HyperNet (r=8)"])
    assert empty["verdict"] == "not run" and empty["paper"] == pytest.approx(expect)
    dirs = _run("tab:hypernet-rank", tmp_path)
    smoke = evaluate(claim, profiles=("smoke",), results_dir=dirs["results_dir"])
    assert smoke["verdict"] == "pipeline only" and smoke["ours"] is not None


# ---------------------------------------------------------------------------------------------
# 5. A chapter with exercises
# ---------------------------------------------------------------------------------------------


def _throwaway_chapter(path: Path) -> Path:
    """A new chapter written as CONTRIBUTING.md says, from a copy of chapter 1's notebook
    metadata: title, header block, parameters cell, an exercise and its hidden solution."""
    meta = json.loads((ROOT / "notebooks" / "01_zonotopes.ipynb").read_text())["metadata"]

    def md(i, text):
        return {"cell_type": "markdown", "id": f"cell-{i:02d}", "metadata": {}, "source": text}

    def code(i, text, tags=()):
        return {"cell_type": "code", "id": f"cell-{i:02d}", "metadata": {"tags": list(tags)},
                "execution_count": None, "outputs": [], "source": text}  # fmt: skip

    cells = [
        md(0, "# A throwaway chapter\n\nWhat the chapter is about."),
        md(1, "> **Objectives.** After this chapter you can compute a set's centroid and say "
              "why the mean is permutation invariant.\n>\n"
              "> **Prerequisites.** Chapter 1.\n>\n"
              "> **Time.** About 10 min reading and 5 min exercises. "
              "[Teaching with this book](../teaching.md)"),
        code(2, 'profile = "smoke"\nseed = 0\ndevice = "auto"', ["parameters"]),
        code(3, "from mzlite.exercises import check", ["hide-input"]),
        md(4, "**Exercise.** How many elements does the set `{1, 2, 3}` have?"),
        code(5, 'answer = ...\ncheck("ch99.count", answer)'),
        code(6, 'check("ch99.count", 3, strict=True)', ["hide-cell"]),
    ]  # fmt: skip
    nb = {"cells": cells, "metadata": copy.deepcopy(meta), "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=1) + "\n")
    return path


def test_journey_add_a_chapter_with_exercises(tmp_path, monkeypatch):
    section = _journey("Add a chapter with exercises")
    for named in ("notebooks/", "book/_toc.yml", "mzlite/exercises/ch", "parameters",
                  "mzlite/repro/exercises.py",
                  "Objectives", "hide-cell", "strict=True", "hide-input"):  # fmt: skip
        assert named in section, named
    nb = _throwaway_chapter(tmp_path / "99_throwaway.ipynb")
    # the checks every chapter meets (tests/test_notebooks.py, test_book_conventions.py,
    # test_teaching.py), run on the new one; the table of contents lists it
    monkeypatch.setattr(notebook_conventions, "TOC", "chapters/99_throwaway\n")
    notebook_conventions.test_chapter_source_is_clean_and_parameterised(nb)
    notebook_conventions.test_every_solution_is_checked_strictly_and_hidden(nb)
    notebook_conventions.test_chapters_use_only_public_api(nb)
    book_conventions.test_plumbing_is_hidden_and_run_logs_collapsed(nb)
    book_conventions.test_visible_code_fits_the_page(nb)
    info = load("teaching").chapter_info(nb)
    assert info["exercises"] == 1 and info["exercise_min"] == 5
    # its checker, registered as mzlite/exercises/ch99.py would with @exercise
    ex99 = checker.Exercise("ch99.count", lambda a: (a == 3, "three elements"), "Count them.")
    with checker._REGISTRY.registered("ch99.count", ex99):
        assert checker.check("ch99.count", ...).status == "unanswered"
        assert checker.check("ch99.count", 3).status == "correct"
        with pytest.raises(AssertionError):
            checker.check("ch99.count", 4, strict=True)
    # the student copy keeps the exercise and drops its solution
    load("make_student").make([nb], tmp_path / "student", seed=None)
    student = json.loads((tmp_path / "student" / nb.name).read_text())
    kept = "\n".join("".join(c["source"]) for c in student["cells"])
    assert 'check("ch99.count", answer)' in kept and "strict=True" not in kept
    # a chapter without its parameters cell is caught
    broken = json.loads(nb.read_text())
    broken["cells"][2]["metadata"]["tags"] = []
    nb.write_text(json.dumps(broken))
    with pytest.raises(AssertionError, match="tagged parameters"):
        notebook_conventions.test_chapter_source_is_clean_and_parameterised(nb)
