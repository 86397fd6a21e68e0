"""mzlite.repro.transfer: the Tier-1 cells of tab:transfer-matrix, ranks from result files, and the
exact no-advantage null, against brute-force enumeration."""

from __future__ import annotations

import itertools
import json

import pytest

from mzlite.repro import experiments as ex
from mzlite.repro import transfer
from mzlite.repro.experiments import transfer_ranks
from mzlite.repro.paper import paper_value


def test_every_tier1_setting_is_a_paper_cell_with_seven_models_and_a_yardstick():
    spec = ex.get_table(transfer.LABEL)
    for (variant, target), (row, col) in ex.TRANSFER_TIER1.items():
        assert paper_value(transfer.LABEL, row, col) is not None
        ids = {c.id for c in spec.cells if c.id.startswith(f"{variant}-{target}-")}
        want = {f"{variant}-{target}-{m}" for m in (*transfer.RANKED, ex.SET_STATS)}
        assert ids == want
        for c in spec.cells:
            if c.id in ids:
                assert c.task == "digits_geometry" and c.options == {
                    "variant": variant,
                    "target": target,
                }
                assert not c.paper  # the paper prints ranks, not R^2


def _write(root, cell, seed, r2, profile="smoke"):
    d = root / profile / "tab-transfer-matrix"
    d.mkdir(parents=True, exist_ok=True)
    res = {"format": ex.RESULT_FORMAT, "table": transfer.LABEL, "profile": profile, "cell": cell,
           "seed": seed, "metrics": {"test": {"r2": r2}}}  # fmt: skip
    (d / f"{cell}__seed{seed}.json").write_text(json.dumps(res))


def test_ranks_follow_the_seed_means(tmp_path):
    r2 = {"st": 0.5, "st_large": 0.7, "hypernet": 0.1, "perceiver": 0.65, "la_st": 0.2,
          "mz_large": 0.3}  # fmt: skip
    for m, v in r2.items():
        _write(tmp_path, f"raw-meb-{m}", 0, v)
    _write(tmp_path, "raw-meb-mz_full", 0, 0.60)
    _write(tmp_path, "raw-meb-mz_full", 1, 0.64)  # mean 0.62: behind 0.7 and 0.65
    _write(tmp_path, "raw-meb-set_stats", 0, 0.4)
    rows = {r["setting"]: r for r in transfer.ranks("smoke", results_dir=tmp_path)}
    raw = rows["raw-meb"]
    assert raw["rank"] == 3 and raw["n_models"] == 7 and raw["seeds"] == 2
    assert raw["r2"][0] == pytest.approx(0.62) and raw["best_other"] == ("st_large", 0.7)
    assert raw["set_stats"] == 0.4 and raw["paper_rank"] == 4.0
    assert raw["complete"] and raw["missing_jobs"] == 0  # smoke: one seed a model
    assert rows["mixture-mst"]["rank"] is None and rows["mixture-mst"]["n_models"] == 0
    assert not rows["mixture-mst"]["complete"] and rows["mixture-mst"]["missing_jobs"] == 8
    (tmp_path / "smoke" / "tab-transfer-matrix" / "raw-meb-set_stats__seed0.json").unlink()
    raw = transfer.ranks("smoke", results_dir=tmp_path)[0]
    assert raw["rank"] == 3 and not raw["complete"] and raw["missing_jobs"] == 1
    assert transfer.ranks("smoke", model="st_large", results_dir=tmp_path)[0]["rank"] == 1
    with pytest.raises(ValueError, match="model must be one of"):
        transfer.ranks("smoke", model="egnn", results_dir=tmp_path)


def test_median_ranks_ignore_one_failed_seed_and_per_seed_lists_every_run(tmp_path):
    for m, v in {"st": 0.8, "st_large": 0.85, "hypernet": 0.5, "perceiver": 0.6, "la_st": 0.4,
                 "mz_large": 0.3}.items():  # fmt: skip
        _write(tmp_path, f"raw-meb-{m}", 0, v)
    for seed, v in enumerate([0.95, 0.1, 0.9]):  # mean 0.65: 3rd; median 0.9: 1st
        _write(tmp_path, "raw-meb-mz_full", seed, v)
    by_mean, by_median = (
        transfer.ranks("smoke", results_dir=tmp_path, statistic=s)[0] for s in ("mean", "median")
    )
    assert by_mean["rank"] == 3 and by_mean["best_other"] == ("st_large", 0.85)
    assert by_median["rank"] == 1 and by_median["best_other"] == ("st_large", 0.85)
    assert by_median["r2"] == by_mean["r2"]  # the row still reports mean and std
    with pytest.raises(ValueError, match="statistic must be one of mean, median"):
        transfer.ranks("smoke", results_dir=tmp_path, statistic="max")
    rows = transfer.per_seed("smoke", results_dir=tmp_path)
    assert [(r["model"], r["seed"]) for r in rows][:3] == [
        ("st", 0),
        ("st_large", 0),
        ("hypernet", 0),
    ]
    mz = [r for r in rows if r["model"] == "mz_full"]
    assert [(r["seed"], r["r2"]) for r in mz] == [(0, 0.95), (1, 0.1), (2, 0.9)]
    assert {r["setting"] for r in rows} == {"raw-meb"} and len(rows) == 9


def test_ablations_compare_seeds_and_rank_with_the_ablated_mean(tmp_path):
    conv = "cpu-converged"
    assert transfer.ablations(conv, results_dir=tmp_path) == []  # nothing ran
    for m, v in {"st": 0.9, "st_large": 0.95, "hypernet": 0.8, "perceiver": 0.85, "la_st": 0.7,
                 "mz_large": 0.75}.items():  # fmt: skip
        _write(tmp_path, f"raw-hull-{m}", 0, v, conv)
    for seed, v in enumerate([0.6, 0.7, 0.8]):  # mean 0.7: behind every model but la_st (tie)
        _write(tmp_path, "raw-hull-mz_full", seed, v, conv)
    (cell,) = [c for c in ex.get_table(transfer.LABEL).cells if c.train == {"lr": 1e-3}]
    for seed, v in enumerate([0.93, 0.91, 0.92]):  # mean 0.92: second, behind st_large
        _write(tmp_path, cell.id, seed, v, conv)
    # under smoke (lr 1e-3 for every model) the cell is its main cell: no ablation to show
    assert ex.aliases(transfer.LABEL, "smoke")[cell.id] == "raw-hull-mz_full"
    for seed in range(3):
        _write(tmp_path, "raw-hull-mz_full", seed, 0.5)
    assert transfer.ablations("smoke", results_dir=tmp_path) == []
    (row,) = transfer.ablations(conv, results_dir=tmp_path)
    assert row["setting"] == "raw-hull" and row["model"] == "mz_full"
    assert row["change"] == {"lr": 0.001}
    assert row["main"] == {0: 0.6, 1: 0.7, 2: 0.8} and row["ablated"] == {0: 0.93, 1: 0.91, 2: 0.92}
    assert row["rank"] == 6 and row["rank_ablated"] == 2
    assert transfer.ranks(conv, results_dir=tmp_path)[1]["rank"] == 6  # ranks never mix them


@pytest.mark.parametrize("observed", [[4], [1, 2], [3, 4, 5], [7, 7, 1], [2, 3, 4, 4]])
def test_null_test_matches_enumeration(observed):
    out = transfer.null_test(observed)
    all_sums = [sum(c) for c in itertools.product(range(1, 8), repeat=len(observed))]
    s = sum(observed)
    assert out["p_advantage"] == pytest.approx(sum(x <= s for x in all_sums) / len(all_sums))
    assert out["p_disadvantage"] == pytest.approx(sum(x >= s for x in all_sums) / len(all_sums))
    assert out["mean_rank"] == pytest.approx(s / len(observed)) and out["null_mean"] == 4
    best = transfer.null_test([1] * len(observed))["p_advantage"]
    assert out["p_floor"] == pytest.approx(best) == pytest.approx(7.0 ** -len(observed))


def test_null_test_rejects_impossible_ranks():
    with pytest.raises(ValueError, match="ranks in 1..7"):
        transfer.null_test([0, 3])
    with pytest.raises(ValueError, match="ranks in 1..7"):
        transfer.null_test([])


def test_prediction_never_judges_smoke_numbers(tmp_path):
    assert transfer.prediction("smoke", results_dir=tmp_path)["test"] is None
    for i, m in enumerate(transfer.RANKED):  # mz_full 6th of 7
        _write(tmp_path, f"raw-meb-{m}", 0, 0.9 - 0.1 * i)
    _write(tmp_path, f"raw-meb-{ex.SET_STATS}", 0, 0.5)
    out = transfer.prediction("smoke", results_dir=tmp_path)
    assert out["observed"] == (6,) and out["settings"] == ("raw-meb",) and out["mid_field"] == 0
    assert (out["outcome"], out["label"]) == ("smoke", "pipeline only") == ("smoke", out["verdict"])
    assert out["paper"]["n_cells"] == 6 and out["paper"]["mean_rank"] == pytest.approx(
        sum(transfer_ranks.paper_ranks()) / 6
    )


def _field(root, profile, mz_seeds, others=None):
    """raw-meb under ``profile``: the six other ranked models (one seed each unless ``others``
    gives their seeds), MZAttn-Full's ``mz_seeds`` and the yardstick."""
    others = others or {"st": [0.8], "st_large": [0.85], "hypernet": [0.5], "perceiver": [0.6],
                        "la_st": [0.4], "mz_large": [0.3]}  # fmt: skip
    for m, vs in others.items():
        for seed, v in enumerate(vs):
            _write(root, f"raw-meb-{m}", seed, v, profile)
    for seed, v in enumerate(mz_seeds):
        _write(root, "raw-meb-mz_full", seed, v, profile)
    _write(root, f"raw-meb-{ex.SET_STATS}", 0, 0.45, profile)


def test_progress_and_seed_spreads_read_the_complete_settings(tmp_path):
    _field(tmp_path, "smoke", [0.95, 0.1, 0.9])  # mean 0.65: 3rd; median 0.9: 1st
    rows = transfer.ranks("smoke", results_dir=tmp_path)
    done = transfer.progress(rows)
    assert done["complete"] == ["raw-meb"] and len(done["incomplete"]) == len(rows) - 1
    assert done["missing_jobs"] == sum(r["missing_jobs"] for r in rows[1:]) > 0
    (s,) = transfer.seed_spreads("smoke", results_dir=tmp_path)
    assert s["setting"] == "raw-meb" and [v for v, _ in s["seeds"]] == [0.1, 0.9, 0.95]
    assert s["spread"] == pytest.approx(0.85) and s["others"] == 0.0 and s["wider"]
    assert (s["rank"], s["rank_median"]) == (3, 1)


def test_rate_ablation_says_whether_the_rate_explains_the_rank(tmp_path):
    conv = "cpu-converged"
    others = {"st": [0.9, 0.7], "st_large": [0.95, 0.93], "hypernet": [0.8, 0.8],
              "perceiver": [0.85, 0.85], "la_st": [0.7, 0.7], "mz_large": [0.75, 0.75]}  # fmt: skip
    (cell,) = [c for c in ex.get_table(transfer.LABEL).cells if c.train == {"lr": 1e-3}]
    setting = f"{cell.options['variant']}-{cell.options['target']}"
    for m, vs in others.items():
        for seed, v in enumerate(vs):
            _write(tmp_path, f"{setting}-{m}", seed, v, conv)
    for seed, v in enumerate([0.6, 0.7, 0.8]):  # mean 0.7: 6th
        _write(tmp_path, f"{setting}-mz_full", seed, v, conv)
    outcomes = {}
    for name, ablated in {"the rate": [0.93, 0.91, 0.92], "part of it": [0.99, 0.6, 0.99],
                          "not the rate": [0.5, 0.5, 0.5]}.items():  # fmt: skip
        for seed, v in enumerate(ablated):
            _write(tmp_path, cell.id, seed, v, conv)
        (row,) = transfer.rate_ablation(conv, results_dir=tmp_path)
        outcomes[name] = row["outcome"]
        assert row["rank"] == 6 and row["mean"] == pytest.approx(0.7)
        assert row["mean_ablated"] == pytest.approx(sum(ablated) / 3)
        assert row["widest_other"] == pytest.approx(0.2) and row["lowest_other"] == 0.7
        assert row["worst_ablated"] == min(ablated)
        said = transfer.rate_ablation_words(conv, results_dir=tmp_path)
        assert len(said) == 2 and said[1] == transfer.OUTCOME_WORDS[row["outcome"]]
        assert f"(rank 6 -> {row['rank_ablated']} of 7)" in said[0]
        assert "for the other 5 models" in said[0] and transfer.setting_words(setting) in said[0]
    assert outcomes == {k: k for k in outcomes}
    assert transfer.rate_ablation_words(conv, results_dir=tmp_path / "none") == []


def test_cap_outcome_compares_the_verdicts_then_the_ranks():
    table = {"verdict": "insufficient evidence", "observed": [6, 7]}
    assert transfer.cap_outcome(
        table, {"verdict": "insufficient evidence", "observed": [1, 1]}
    ) == ("same verdict")
    assert transfer.cap_outcome(table, {"verdict": "holds", "observed": [6, 7]}) == "same ranks"
    assert transfer.cap_outcome(table, {"verdict": "holds", "observed": [5, 7]}) == "depends"


def test_plot_seeds_draws_every_seed_and_rank_table_marks_provisional_ranks(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    _field(tmp_path, "smoke", [0.95, 0.1, 0.9])
    fig = transfer.plot_seeds("smoke", results_dir=tmp_path)
    (ax,) = fig.axes
    drawn = sum(len(line.get_xdata()) for line in ax.get_lines())
    assert drawn == len(transfer.per_seed("smoke", results_dir=tmp_path))  # 6 + 3 seeds
    rows = transfer.ranks("smoke", results_dir=tmp_path)
    html = str(transfer.rank_table(rows, "smoke"))
    assert html.count("<tr>") == len(rows) + 1  # a header and a row per setting
    assert "3 of 7" in html and "*" not in html.split("3 of 7")[0].rsplit("<tr>", 1)[1]


def test_converged_profile_reads_our_reading_before_the_first(tmp_path):
    assert transfer.converged_profile(tmp_path) is None
    _write(tmp_path, "raw-meb-st", 0, 0.5, "cpu-converged")
    assert transfer.converged_profile(tmp_path) == "cpu-converged"
    _write(tmp_path, "raw-meb-st", 0, 0.5, "cpu-annealed")
    assert transfer.converged_profile(tmp_path) == "cpu-annealed"
    assert set(transfer.READS) == set(transfer_ranks.CONVERGED)
