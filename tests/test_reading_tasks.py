"""The reading page's task review (mzlite.repro.experiments.task_review): the quotes are the
paper's, every task reading it names exists and has its calibration cells, and the calibration
reads its rows honestly from result files, the paper's numbers from data/paper."""

import json
from pathlib import Path

import pytest

from mzlite import tasks as T
from mzlite.repro import experiments as ex
from mzlite.repro.experiments import task_review as tr
from mzlite.repro.experiments.reading import missing_quotes
from mzlite.repro.paper import paper_tex_path, paper_value


def test_every_task_quote_is_the_papers_own_words():
    path = paper_tex_path()
    if not Path(path).exists():
        pytest.skip(f"paper source not at {path}")
    quotes = [t.words for t in tr.TASK_REVIEW]
    assert missing_quotes(Path(path).read_text(), quotes) == []
    assert missing_quotes("nothing of the kind", quotes) != []  # the check can fail


def test_the_review_covers_the_headline_tasks_and_names_every_reading():
    tasks = {t.task for t in tr.TASK_REVIEW}
    assert {"set_regression", "chamfer_matching", "few_shot_retrieval", "rotation_matching",
            "mst_weight", "meb_radius", "quadratic_tdof"} <= tasks  # fmt: skip
    for t in tr.TASK_REVIEW:
        for name in T.readings_of(t.task):
            assert name == "v1" or name in t.alternatives, (t.task, name)
    html = tr.review_table()
    assert all(f"mzlite.tasks.{t.task}" in html for t in tr.TASK_REVIEW)


def test_every_calibrated_reading_has_its_cells():
    for c in tr.CALIBRATED:
        table = ex.get_table(c.table)
        v1_st, v1_stats = (table.cell(cid) for cid in c.cells("v1"))
        task = v1_st.task
        assert c.readings[0] == "v1" and v1_stats.model == ex.SET_STATS
        for reading in c.readings[1:]:
            st = table.cell(ex.cells.calibration_cell_id(c.col, reading, c.st))
            stats = table.cell(ex.cells.calibration_cell_id(c.col, reading, ex.SET_STATS))
            assert st.model == "st" and stats.model == ex.SET_STATS  # never MZ
            assert (
                T.task_reading(task, st.options) == reading == T.task_reading(task, stats.options)
            )
            assert st.model_kwargs == v1_st.model_kwargs  # the same ST as v1's


def _write(root, table, cell, seed, *, reading, r2=None, mse=None, size_r2=None, task=None):
    spec = ex.get_table(table)
    c = spec.cell(cell)
    d = root / "paper-sizes" / spec.dirname
    d.mkdir(parents=True, exist_ok=True)
    test = {"r2": r2, "mse": mse} if size_r2 is None else {"r2": r2, "set_size_r2": size_r2}
    res = {"table": spec.label, "cell": cell, "seed": seed, "profile": "paper-sizes",
           "task": task or c.task, "task_options": dict(c.options), "task_reading": reading,
           "metrics": {"test": test}}  # fmt: skip
    (d / f"{cell}__seed{seed}.json").write_text(json.dumps(res))


def test_calibration_reads_the_results_beside_the_papers_numbers(tmp_path):
    t = "tab:main-results"
    for seed, r2 in enumerate((0.30, 0.34)):
        _write(tmp_path, t, "B-st", seed, reading="v1", r2=r2, mse=1000.0)
    _write(tmp_path, t, "cal-B-near-copy-same-size-st", 0, reading="near-copy-same-size",
           r2=0.85, mse=500.0)  # fmt: skip
    _write(tmp_path, t, "cal-B-near-copy-same-size-set_stats", 0, reading="near-copy-same-size",
           r2=0.5, size_r2=0.04)  # fmt: skip
    rows = {(r.what, r.reading): r for r in tr.calibration(tmp_path)}
    paper = paper_value(t, "Set Transformer", "Task B: Set Match. / R^2")
    paper_mse = paper_value(t, "Set Transformer", "Task B: Set Match. / MSE")
    v1, near = rows["Task B", "v1"], rows["Task B", "near-copy-same-size"]
    assert v1.seeds == 2 and v1.mean == pytest.approx(0.32) and v1.paper_r2 == paper
    assert v1.gap == pytest.approx(0.32 - paper)
    assert v1.target_var == pytest.approx(1000 / 0.7)  # MSE / (1 - R^2) of the first seed
    assert v1.paper_var == pytest.approx(paper_mse / (1 - paper))
    assert (near.stats_r2, near.size_r2, near.target_var) == (0.5, 0.04, pytest.approx(500 / 0.15))
    assert rows["Task B", "same-size"].seeds == 0 and rows["Task B", "same-size"].gap is None
    best = tr.closest_readings(list(rows.values()))
    assert best["Task B"]["reading"] == "near-copy-same-size" and best["Task B"]["needed"]
    assert "Task F" not in best  # nothing of it ran
    html = tr.calibration_table(list(rows.values()))
    assert "near-copy-same-size (nearest the paper, 1 seed)" in html and "not run" in html
    assert "(profile paper-sizes)</caption>" in html


def test_a_reading_a_tie_nearer_than_v1_chooses_nothing(tmp_path):
    """A reading whose Set Transformer lands less than a tie (0.01 R^2) nearer the paper's number
    than v1's is within one seed's noise: v1 stays the nearest."""
    t = "tab:main-results"
    paper = paper_value(t, "Set Transformer", "Task B: Set Match. / R^2")
    for seed in range(3):
        _write(tmp_path, t, "B-st", seed, reading="v1", r2=paper - 0.500, mse=1000.0)
    _write(tmp_path, t, "cal-B-near-copy-st", 0, reading="near-copy", r2=paper - 0.495, mse=1.0)
    _write(tmp_path, t, "cal-B-same-size-st", 0, reading="same-size", r2=paper - 0.480, mse=1.0)
    best = tr.closest_readings(tr.calibration(tmp_path))["Task B"]
    assert best["reading"] == "same-size"  # 0.02 nearer: more than a tie
    _write(tmp_path, t, "cal-B-same-size-st", 0, reading="same-size", r2=paper - 0.505, mse=1.0)
    best = tr.closest_readings(tr.calibration(tmp_path))["Task B"]
    assert (best["reading"], best["seeds"]) == ("v1", 3)  # near-copy: 0.005 nearer, a tie


def test_a_result_of_another_reading_is_refused(tmp_path):
    _write(tmp_path, "tab:main-results", "cal-B-near-copy-st", 0, reading="v1", r2=0.5, mse=1.0)
    with pytest.raises(ValueError, match="made under task reading 'v1'"):
        tr.calibration(tmp_path)


def test_a_result_without_a_recorded_reading_reads_its_options(tmp_path):
    _write(tmp_path, "tab:main-results", "F-st", 0, reading=None, r2=0.5, mse=10.0)
    row = next(r for r in tr.calibration(tmp_path) if r.what == "Task F" and r.reading == "v1")
    assert row.r2 == (0.5,)


def test_the_review_shows_the_size_ridge_beside_the_yardstick(tmp_path):
    _write(tmp_path, "tab:main-results", "B-set_stats", 0, reading="v1", r2=0.6, size_r2=0.3125)
    ridges = tr.yardsticks(tmp_path)
    assert ridges["chamfer_matching"] == (0.6, 0.3125)
    assert ridges["mst_weight"] == (None, None)
    html = tr.review_table(tmp_path)
    assert "set size alone 0.312, set statistics 0.600" in html and "set size alone –" in html


def test_task_bs_claim_reads_the_reading_its_committed_calibration_chose():
    """Task B's claim names its chosen task reading once (``Claim.read_on``); the calibration of
    the committed results must choose the same one, or the claim reads a stale choice."""
    from mzlite.repro.experiments.claims import claims

    (claim,) = [c for c in claims("tab:main-results") if c.id == "main-results-B-mz-beats-matched"]
    chosen = tr.closest_readings(tr.calibration())["Task B"]
    cell = ex.get_table(claim.table).cell(claim.on(claim.read_on)(claim.cells[0], None))
    assert T.task_reading(cell.task, cell.options) == chosen["reading"]
    assert chosen["seeds"] == 3
