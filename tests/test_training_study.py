"""mzlite.repro.training_study (chapter 4): the profiles of a cell against their jobs, step costs
and FLOPs against models whose work is known, the paper's numbers as parsed, and the sweep and
the test over seeds read from result files written here."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from test_scorecard import _cell
from torch import nn

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


class _SetLinear(nn.Module):
    """Maps every element of a set by one linear layer (no bias) and sums: 2 d_in d_out
    FLOPs per element."""

    def __init__(self, d_in, d_out, repeat=1):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out, bias=False)
        self.repeat = repeat

    def forward(self, x, mask):
        h = x
        for _ in range(self.repeat):
            h = self.lin(h)
        return (h * mask[..., None]).sum(1)


def _batch(b=4, n=6, d=8):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, n, d, generator=g), torch.ones(b, n, dtype=torch.bool), torch.randn(b, d)


def test_forward_flops_count_a_linear_map_per_element():
    x, mask, _ = _batch()
    assert ts.forward_flops(_SetLinear(8, 8), x, mask) == 2 * 4 * 6 * 8 * 8
    assert ts.forward_flops(_SetLinear(8, 8, repeat=3), x, mask) == 3 * 2 * 4 * 6 * 8 * 8


def test_step_costs_time_every_model_and_phase_and_see_more_work():
    x, mask, y = _batch(b=64, n=30, d=128)
    torch.manual_seed(0)
    models = {"light": _SetLinear(128, 128), "heavy": _SetLinear(128, 128, repeat=40)}
    costs = ts.step_costs(models, x, mask, y, rounds=1, min_run_time=0.02)
    assert set(costs) == {"light", "heavy"}  # no bf16 rows on a CPU unless asked
    for phases in costs.values():
        assert set(phases) == set(ts.PHASES) and all(v > 0 for v in phases.values())
    assert costs["heavy"]["forward"] > costs["light"]["forward"]
    assert costs["heavy"]["train step"] > costs["light"]["train step"]
    bf16 = ts.step_costs({"light": models["light"]}, x, mask, y, rounds=1, min_run_time=0.01,
                         bf16=True)  # fmt: skip
    assert set(bf16) == {"light", "light (bf16)"}
    with pytest.raises(ValueError, match="models must be a non-empty dict"):
        ts.step_costs({}, x, mask, y)
    with pytest.raises(ValueError, match="rounds must be an int >= 1"):
        ts.step_costs(models, x, mask, y, rounds=0)


def test_a_train_step_call_moves_the_weights_by_the_optimiser():
    x, mask, y = _batch()
    model = _SetLinear(8, 8)
    before = model.lin.weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ts.train_step_call(model, opt, x, mask, y)()
    assert model.training and not torch.equal(before, model.lin.weight)
    out = ts.forward_call(model, x, mask)()
    assert not model.training and not out.requires_grad


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
