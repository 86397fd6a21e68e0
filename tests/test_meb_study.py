"""mzlite.repro.meb_study (chapter 5): the ablation's cells, what each switch changes under one
protocol only, the current protocols before the superseded ones, and what a verdict shows."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from test_scorecard import _cell

from mzlite.repro import experiments as ex
from mzlite.repro import meb_study as ms
from mzlite.repro.experiments.scorecard import claims, evaluate
from mzlite.repro.paper import paper_ref, paper_value


def test_every_ablation_cell_is_registered_and_the_ridge_ignores_the_targets():
    ids = {c.id for c in ex.get_table(ms.LABEL).cells}
    for m in ms.MODELS:
        for data, targets in ms.AXES:
            assert ms.ablation_cell(m, data, targets) in ids
    for data in ("raw", "per-set normalised"):
        assert ms.ablation_cell(ex.SET_STATS, data, "raw") == ms.ablation_cell(
            ex.SET_STATS, data, "standardised"
        )
    assert ms.ablation_cell("mz_full", "per-set normalised", "raw") == "abl-d8-scale-mz_full"
    with pytest.raises(ValueError, match="model must be one of"):
        ms.ablation_cell("egnn", "raw", "raw")
    with pytest.raises(ValueError, match=r"\(data, targets\) must be one of"):
        ms.ablation_cell("st", "raw", "log")


def test_switches_compare_two_conditions_under_one_protocol_only(tmp_path):
    # cpu-annealed standardises the targets: its raw/standardised variant is the main cell
    _cell(tmp_path, ms.LABEL, "d8-mz_full", 0.8, "cpu-annealed")
    _cell(tmp_path, ms.LABEL, "abl-d8-scale-ynorm-mz_full", 0.2, "cpu-annealed")
    _cell(tmp_path, ms.LABEL, "abl-d8-raw-mz_full", 0.5, "cpu-converged")  # the first reading
    grid = {(g["model"], g["data"], g["targets"]): g["row"] for g in
            ms.ablation_grid(results_dir=tmp_path)}  # fmt: skip
    assert len(grid) == len(ms.MODELS) * len(ms.AXES)
    assert grid["mz_full", "raw", "standardised"].ours_mean == pytest.approx(0.8)
    assert grid["mz_full", "raw", "standardised"].profile == "cpu-annealed"
    assert grid["mz_full", "raw", "raw"].profile is None  # cpu-converged is not current
    assert ms.axes_with_results(ms.ablation_grid(results_dir=tmp_path)) == [
        ("raw", "standardised"), ("per-set normalised", "standardised")]  # fmt: skip
    by = {(s["model"], s["switch"]): s for s in ms.switches(results_dir=tmp_path)}
    norm = by["mz_full", "each set normalised, standardised targets"]
    assert norm["comparable"] and norm["profile"] == "cpu-annealed"
    assert norm["diff"] == pytest.approx(-0.6) and norm["p"] < 0.05
    assert not by["mz_full", "targets standardised, raw data"]["comparable"]
    assert not by["st", "each set normalised, standardised targets"]["comparable"]
    # with the first reading asked as well, its raw-target run is found, but of another protocol
    both = {(s["model"], s["switch"]): s for s in
            ms.switches(("cpu-annealed", "cpu-converged"), tmp_path)}  # fmt: skip
    raw = both["mz_full", "targets standardised, raw data"]
    assert raw["before"].profile == "cpu-converged" and not raw["comparable"]
    assert raw["diff"] is None and raw["p"] is None


def test_money_rows_and_bars_put_ours_beside_the_papers(tmp_path):
    _cell(tmp_path, ms.LABEL, "d8-st", 0.9, "cpu-annealed")
    _cell(tmp_path, ms.LABEL, "abl-d8-scale-ynorm-st", 0.0, "cpu-annealed")
    _cell(tmp_path, ms.LABEL, "d8-mz_full", 0.6, "cpu")  # the 30-epoch ablation only
    rows = {r["cell"]: r for r in ms.money_rows(results_dir=tmp_path)}
    assert rows["d8-st"]["row"].ours_mean == pytest.approx(0.9)
    assert rows["d8-st"]["paper"] == paper_value(ms.LABEL, "Standard", "d=8 R^2")
    assert rows["d8-mz_full"]["row"].profile is None
    models, series = ms.bar_series(results_dir=tmp_path)
    i = models.index("Standard")
    assert series[f"paper ({paper_ref(ms.LABEL)})"][i] == rows["d8-st"]["paper"]
    assert series["ours, raw data"][0][i] == pytest.approx(0.9)
    assert series["ours, per-set normalised"][0][i] == pytest.approx(0.0, abs=1e-9)
    assert series["ours, raw data"][0][models.index("MZAttn-Full")] is None
    dims = ms.dimension_series(results_dir=tmp_path)
    assert dims["Standard, ours (cpu-annealed)"][1][0] == pytest.approx(0.9)
    assert "MZAttn-Full, ours (cpu)" not in dims and "MZAttn-Full, paper" in dims


@pytest.mark.parametrize(
    ("verdict", "mz_beats", "shows"),
    [("holds", True, ms.SHOWS_MZ), ("holds partly", False, ms.SHOWS_FAILURE),
     ("holds", False, ms.SHOWS_FAILURE), ("does not hold here", True, ""),
     ("optimisation failure", False, "")],
)  # fmt: skip
def test_a_holding_verdict_says_whether_it_is_evidence_for_mz(verdict, mz_beats, shows):
    assert ms.what_it_shows(verdict, mz_beats) == shows


def test_condition_verdicts_carry_each_claims_label(tmp_path):
    d8 = [c for c in claims(ms.LABEL) if c.id.startswith("meb-d8-")]
    got = ms.condition_verdicts(results_dir=tmp_path)
    reads = ("chapter 9", "raw", "per-set normalised")  # not run: chapter 9's read no data
    assert [(v["condition"], v["claim"]) for v in got] == [(r, c.id) for c in d8 for r in reads]
    for v in got:
        assert v["verdict"] == "not run" and v["shows"] == ""  # nothing on disk
        mz = evaluate(next(c for c in d8 if c.id == v["claim"]), results_dir=tmp_path)["mz_beats"]
        assert v["shows"] == ms.what_it_shows(v["verdict"], mz)


def test_chapter_9s_verdict_is_named_by_the_data_it_read_and_raw_rows_read_raw_cells(tmp_path):
    """The paper's pattern on per-set normalised sets decides chapter 9's verdict; the raw row
    is the claim's own test on its raw cells, so no row calls the pattern's numbers raw."""
    stopped = {"converged": False, "stopped": True, "fitted": False, "rule": "test"}
    _cell(tmp_path, ms.LABEL, "abl-d8-scale-st", 0.0, "full", convergence=stopped)
    _cell(tmp_path, ms.LABEL, "abl-d8-scale-mz_full", 0.30, "full")
    _cell(tmp_path, ms.LABEL, "d8-st", 0.95, "paper-sizes")
    rows = {(v["claim"], v["condition"]): v for v in ms.condition_verdicts(results_dir=tmp_path)}
    ch9 = rows["meb-d8-pma-fail", "chapter 9 (the paper's pattern): per-set normalised"]
    assert (ch9["verdict"], ch9["profile"], ch9["ours_text"]) == ("reproduced", "full", "0.000")
    raw = rows["meb-d8-pma-fail", "raw"]
    assert (raw["verdict"], raw["profile"], raw["ours_text"]) == (
        "does not hold here", "paper-sizes", "0.950")  # fmt: skip


def _d8_run(results_dir, model, target_var):
    """Three seeds of a d = 8 cell on raw targets under the cpu profile, with a history that
    records the variance of the training targets (``target_var``; None: an older run's)."""
    history = {"epoch": [1, 2], "train_loss": [1.0, 0.5], "val_loss": [1.1, 0.6]}
    if target_var is not None:
        history["train_target_var"] = target_var
    _cell(results_dir, ms.LABEL, f"d8-{model}", 0.5, "cpu",
          train_config={"normalize_targets": False}, history=history)  # fmt: skip


def test_learning_curves_take_the_mean_predictor_from_the_recorded_variance(tmp_path, monkeypatch):
    def rebuild(*args, **options):  # the runner's dataset, its training targets' variance 0.5
        rebuilt.append((args, options.get("d")))
        return SimpleNamespace(train=SimpleNamespace(y=torch.tensor([[0.0], [2**0.5]])))

    rebuilt = []
    monkeypatch.setattr(ms, "make_splits", rebuild)
    for model in ("st", "mz_full"):
        _d8_run(tmp_path / "recorded", model, 0.25)
        _d8_run(tmp_path / "older", model, None)
    run = ms.learning_curves("raw", profiles=("cpu",), results_dir=tmp_path / "recorded")
    assert run["profile"] == "cpu" and run["mean_mse"] == 0.25 and not rebuilt
    assert run["curves"]["Standard train"] == ([1, 2], [1.0, 0.5])
    # a run from before the record: the dataset is rebuilt to compute it
    run = ms.learning_curves("raw", profiles=("cpu",), results_dir=tmp_path / "older")
    job = ex.job(ms.LABEL, "d8-st", "cpu")
    assert run["mean_mse"] == pytest.approx(0.5)
    assert rebuilt == [((job.cell.task, *job.sizes, job.profile.data_seed), 8)]


def test_the_fit_table_leaves_out_a_ridge_its_protocol_did_not_fit(tmp_path):
    """Per-set normalised sets read under full, where no ridge was fitted on full's sets: no
    "not run" row for it (another profile's ridge would mix protocols); once fitted, it shows."""
    cfg = {"train_config": {"lr": 1e-4, "normalize_targets": False}}  # as full trains them
    _cell(tmp_path, ms.LABEL, "abl-d8-scale-st", 0.0, "full", **cfg)
    _cell(tmp_path, ms.LABEL, "abl-d8-scale-mz_full", 0.3, "full", **cfg)
    rows = [r for r in ms.fit_rows(results_dir=tmp_path) if r["condition"] == "per-set normalised"]
    assert {r["profile"] for r in rows} == {"full"}
    assert "set statistics (ridge)" not in [r["name"] for r in rows]
    _cell(tmp_path, ms.LABEL, "abl-d8-scale-set_stats", 0.76, "full", seeds=1)
    rows = [r for r in ms.fit_rows(results_dir=tmp_path) if r["condition"] == "per-set normalised"]
    assert [r["row"].ours_mean for r in rows if r["model"] == ex.SET_STATS] == [0.75]
