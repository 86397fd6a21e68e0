"""mzlite.repro.training_study (chapter 4): the profiles of a cell against their jobs, the paper's
numbers as parsed, and the sweep and the test over seeds read from result files written here."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_scorecard import _cell

from mzlite.repro import experiments as ex
from mzlite.repro import training_study as ts
from mzlite.repro.paper import load_paper_table, paper_value


def test_profile_rows_are_each_profiles_job():
    rows = ts.profile_rows()
    assert [r["profile"] for r in rows] == list(ex.PROFILES)
    for r in rows:
        job = ex.job(ts.LABEL, ts.EXAMPLE_CELL, r["profile"])
        cfg = job.train_config()
        assert r["sizes"] == tuple(job.sizes) and r["batch"] == cfg.batch_size
        n, b, steps = r["sizes"][0], r["batch"], r["steps_per_epoch"]
        assert (steps - 1) * b < n <= steps * b  # the last, smaller batch is a step too
        assert (r["lr"], r["epochs"], r["patience"]) == (cfg.lr, cfg.epochs, cfg.patience)
        assert r["seeds"] == len(ex.jobs(ts.LABEL, r["profile"], cells=[ts.EXAMPLE_CELL]))


def test_the_papers_numbers_are_parsed_not_typed():
    cost = ts.paper_cost_ratios("Small")
    assert cost["row"].startswith("Small")
    assert cost["ratios"] == {c: paper_value("tab:cost", cost["row"], c)
                              for c in load_paper_table("tab:cost")["columns"]}  # fmt: skip
    with pytest.raises(ValueError, match="size must start one of tab:cost's rows"):
        ts.paper_cost_ratios("Huge")
    rows = ts.paper_rows()
    paper = load_paper_table(ts.LABEL)
    assert [r["row"] for r in rows] == [r["row"] for r in paper["rows"]]
    for r in rows:
        for c in paper["columns"]:
            assert r[c]["mean"] == paper_value(ts.LABEL, r["row"], c)


def test_sweep_series_put_each_protocols_mean_at_its_L(tmp_path):
    _cell(tmp_path, ts.LABEL, "L4-mz_1l", 0.9, "cpu-annealed")
    _cell(tmp_path, ts.LABEL, "L32-mz_1l", 0.7, "cpu-annealed")
    _cell(tmp_path, ts.LABEL, "L32-st_4l", 0.5, "cpu-converged")  # not a current protocol
    series = ts.sweep_series(results_dir=tmp_path)
    assert set(series) == {"MZAttn-1L, paper", "ST-4L, paper", "MZAttn-1L, ours (cpu-annealed)"}
    Ls, means, style = series["MZAttn-1L, ours (cpu-annealed)"]
    assert Ls == [4, 8, 16, 24, 32]
    assert means[0] == pytest.approx(0.9) and means[4] == pytest.approx(0.7)
    assert means[1:4] == [None, None, None] and style["error"][0] == pytest.approx(0.01)
    paper = series["MZAttn-1L, paper"]
    assert paper[1] == [paper_value(ts.LABEL, str(L), "MZAttn-1L R^2") for L in Ls]
    assert (paper[2]["dash"], paper[2]["symbol"]) != (style["dash"], style["symbol"])
    assert paper[2]["color"] == style["color"] != series["ST-4L, paper"][2]["color"]
    assert "ST-4L, ours (cpu-converged)" in ts.sweep_series(("cpu-converged",), tmp_path)


def test_the_same_runs_under_two_profiles_draw_one_line(tmp_path):
    """search --retire copies the runs two campaigns share: the first profile that reads them
    draws them; a profile whose runs differ draws its own line."""
    for profile in ("paper-sizes", "paper-sizes-censored"):
        _cell(tmp_path, ts.LABEL, "L16-st_4l", 0.98, profile)
    _cell(tmp_path, ts.LABEL, "L16-mz_1l", 0.95, "paper-sizes")
    _cell(tmp_path, ts.LABEL, "L16-mz_1l", 0.90, "paper-sizes-censored")
    profiles = ("paper-sizes", "paper-sizes-censored")
    lines = {k for k in ts.sweep_series(profiles, tmp_path) if ", ours" in k}
    assert lines == {"ST-4L, ours (paper-sizes)", "MZAttn-1L, ours (paper-sizes)",
                     "MZAttn-1L, ours (paper-sizes-censored)"}  # fmt: skip


def test_main_gaps_and_their_readings_per_L(tmp_path):
    for L, mz, st in ((4, 0.9, 0.5), (8, 0.5, 0.9), (16, 0.7, 0.7)):
        _cell(tmp_path, ts.LABEL, f"L{L}-mz_1l", mz, "cpu-annealed")
        _cell(tmp_path, ts.LABEL, f"L{L}-st_4l", st, "cpu-annealed")
    gaps = ts.main_gaps(results_dir=tmp_path)
    assert [g.L for g in gaps] == [4, 8, 16]
    assert gaps[0].diff == pytest.approx(0.4) and gaps[0].p < 0.05
    assert [g.reading for g in gaps] == ["MZ-1L fits better", "ST-4L fits better",
                                         "no significant difference"]  # fmt: skip


def test_progress_is_off_only_under_the_books_executor(tmp_path):
    """``run_by_papermill`` reads the parent's command line: a parent that names papermill (or
    the book's executor) turns it on, any other parent leaves it off."""
    child = tmp_path / "child.py"
    child.write_text("from mzlite.repro import training_study\n"
                     "print(training_study.run_by_papermill())\n")  # fmt: skip
    parent = f"import subprocess, sys; subprocess.run([sys.executable, {str(child)!r}])"
    env = {k: v for k, v in os.environ.items() if k != ts.BOOK_EXECUTION_ENV}
    for marker, expected in (("papermill", "True"), ("execute_notebooks.py", "True"),
                             ("jupyter-lab", "False")):  # fmt: skip
        out = subprocess.run([sys.executable, "-c", parent, marker], capture_output=True,
                             text=True, check=True, env=env)  # fmt: skip
        assert out.stdout.strip() == expected, out.stderr
    # the book's executor says so in the kernel's environment, whatever the parent is called
    book_env = {**env, ts.BOOK_EXECUTION_ENV: "1"}
    out = subprocess.run([sys.executable, "-c", parent, "jupyter-lab"], capture_output=True,
                         text=True, check=True, env=book_env)  # fmt: skip
    assert out.stdout.strip() == "True", out.stderr
