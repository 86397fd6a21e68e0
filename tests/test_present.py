"""The presenter's own sentence tests: the few places where the words themselves are the
guarantee (a bound says what bounds it, parts say where each was read, cells are named in words
and profiles by the glossary's names). Verdicts are tested as values in tests/test_engine.py."""

from __future__ import annotations

import re

from test_scorecard import _cell, _write

from mzlite.repro import experiments as ex
from mzlite.repro.experiments import present
from mzlite.repro.experiments.claims import claims
from mzlite.repro.experiments.engine import judge


def _claim(claim_id: str):
    (c,) = [c for c in claims() if c.id == claim_id]
    return c


def _no_ids(text: str, table: str) -> bool:
    ids = {c.id for c in ex.get_table(table).cells}
    return not set(re.findall(r"[\w-]+", text)) & ids


def test_a_bound_is_worded_with_the_cell_and_the_number_that_bound_it(tmp_path):
    drop = _claim("tdof-st-4l-drop")
    _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.98, "full")
    row = present.row(drop, judge(drop, results_dir=tmp_path))
    assert row["why"].startswith("refuted by a bound: L = 32, ST-4L scores 0.980, so with R² <= 1")
    assert "at most 0.020" in row["why"]
    assert row["regime"].endswith("K training sets, the paper's protocol")  # the sizes _write gives
    assert row["reason_code"] == "refuted-by-bound" and _no_ids(row["why"], drop.table)
    # no number of ours to give (one of its two cells ran): the line says the paper's alone
    assert "Does not hold here: the paper's 0.574 (read at" in present.verdict_line(row)


def test_parts_read_at_different_regimes_each_say_where(tmp_path):
    fits = _claim("tdof-mz-1l")
    for L in (4, 8, 16, 24):
        _cell(tmp_path, "tab:tdof-verify", f"L{L}-mz_1l", 0.95, "cpu-annealed")
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.93, "full")
    row = present.row(fits, judge(fits, results_dir=tmp_path))
    assert row["verdict"] == "holds"
    at_32 = r"L = 32: holds \(0\.930, \d+K training sets, the paper's protocol\)"
    assert re.search(at_32, row["why"])
    assert "L = 4: holds (0.950, 2K training sets, the reduced CPU protocol)" in row["why"]
    assert row["protocol"] == "per part: L=4, L=8, L=16, L=24 under cpu-annealed; L=32 under full"
    assert re.fullmatch(r"2K training sets, the reduced CPU protocol; \d+K training sets, "
                        r"the paper's protocol", row["regime"])  # fmt: skip


def test_rows_name_cells_in_words_and_profiles_by_the_glossary(tmp_path):
    sep = _claim("tdof-separation")
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.60, "cpu-annealed")
    _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.98, "cpu-annealed")
    row = present.row(sep, judge(sep, results_dir=tmp_path))
    # the refuting model, its column once and the model it beats: no cell named twice
    assert row["why"].startswith("refuted by ST-4L (L = 32): R² +0.380 above MZAttn")
    # its clauses as written, the line a page shows first (no page splits the sentence)
    assert row["why_parts"][0].startswith("refuted by ST-4L (L = 32)")
    assert row["why_parts"][1] == "the rest of the column need not run"
    assert "; ".join(row["why_parts"]) == row["why"]
    for field in ("why", "statistics", "reason", "text"):
        assert _no_ids(row[field], sep.table), field
    assert row["regime"] == "2K training sets, the reduced CPU protocol"
    assert row["readings"] == "layer reading literal, task reading v1"
    assert row["read_at"] == row["regime"]  # below the paper's sizes: no readings beside it
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.60, "full")
    _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.98, "full")
    row = present.row(sep, judge(sep, results_dir=tmp_path))
    assert row["profile"] == "full"
    assert row["read_at"].endswith("the paper's protocol; layer reading literal, task reading v1")


def test_a_failed_comparison_names_the_significantly_better_model(tmp_path):
    nll = _claim("ece-nll-ihw-nll-below-ensemble")  # lower is better
    _cell(tmp_path, "tab:ece-nll", "B-ihw-mz_full", 1.50, "cpu-annealed", metric="nll")
    _cell(tmp_path, "tab:ece-nll", "B-ensemble-st", 1.00, "cpu-annealed", metric="nll")
    v = judge(nll, results_dir=tmp_path)
    assert v.label == "does not hold here" and v.better == ("B-ensemble-st",)
    why = present.row(nll, v)["why"]
    # one cell (or cells of one column): the model by its row, the column named once
    assert why.startswith("fails even the weaker test, and Deep Ensemble at Task B: Set Match. is")
    assert "no single model significantly better" not in why


def test_a_rank_claims_problem_names_its_runs_in_words(tmp_path):
    """The transfer study names the runs that did not converge as the page does, and the
    presenter's reason quotes it."""
    from test_scorecard import SETTINGS, _tier1

    _tier1(tmp_path, dict(zip(SETTINGS, (2, 7, 7, 6, 6, 7), strict=True)),
           unconverged=("raw-hull-perceiver",))  # fmt: skip
    (claim, *_) = [c for c in claims("tab:transfer-matrix")]
    row = present.row(claim, judge(claim, results_dir=tmp_path))
    assert row["verdict"] == "insufficient evidence"
    assert "Hull, Perceiver seed 1" in row["why"] and _no_ids(row["why"], claim.table)


def test_unfitted_cells_with_one_count_share_a_clause_named_as_the_cells_read(tmp_path):
    """Task B's claim reads near-copy's cells: the presenter names them (their column), not the
    claim's own, and names the column once for the cells that failed alike."""
    task_b = _claim("main-results-B-mz-beats-matched")
    unfitted = {"convergence": {"converged": False, "stopped": True, "fitted": False}}
    for m, failed in (("mz_full", 0), ("st_large", 2), ("perceiver", 2), ("hypernet", 1)):
        for seed in range(3):
            _write(tmp_path, "tab:main-results", f"{task_b.read_on}-{m}", 0.3, "paper-sizes",
                   seed=seed, **(unfitted if seed < failed else {}))  # fmt: skip
    row = present.row(task_b, judge(task_b, results_dir=tmp_path))
    assert list(row["why_parts"]) == [
        "ST-Large, Perceiver at Task B, task reading near-copy, lr 1e-3 plateau: 2 of 3 runs "
        "each stopped without fitting the training set",
        "HyperNet at Task B, task reading near-copy, lr 1e-3 plateau: 1 of 3 runs stopped "
        "without fitting the training set",
    ]  # fmt: skip
    assert _no_ids(row["reason"], task_b.table)


def test_the_statistics_give_the_yardstick_and_whether_it_beats_every_model_compared(tmp_path):
    task_g = _claim("tab-main-results-G-mz_full-best")
    for cell, r2 in (("G-mz_full", 0.60), ("G-st", 0.70), ("G-set_stats", 0.65)):
        _cell(tmp_path, "tab:main-results", cell, r2, "paper-sizes")
    text = present.statistics_text(task_g, judge(task_g, results_dir=tmp_path))
    assert text.endswith("the yardstick (set statistics) on the same data reaches R² 0.65")
    _cell(tmp_path, "tab:main-results", "G-set_stats", 0.90, "paper-sizes")
    text = present.statistics_text(task_g, judge(task_g, results_dir=tmp_path))
    assert text.endswith("reaches R² 0.90, above every model compared")


def test_a_beats_claim_whose_weaker_test_is_no_tie_about_zero_is_worded_as_its_thresholds(tmp_path):
    """MC-Dropout's NLL claim holds above 0 and partly down to 0.1 behind: its words say so (not
    "a tie within 0.10", which a gap of +0.03 is), as does a gap above 0 that no test backs."""
    nll = _claim("ece-nll-mc-dropout-best-nll")
    assert present.claim_text(nll).endswith(
        "(NLL gap > 0, significantly; partly: at most 0.10 behind)."
    )
    assert present.claim_text(_claim("genqk-hurts-task-b")).endswith("partly: a tie within 0.01).")
    runs = {
        "B-mcdropout-st": (0.9, 1.0, 1.1),
        "B-ensemble-st": (0.93, 1.03, 1.13),
        "B-ihw-mz_full": (1.5, 1.6, 1.7),
    }  # MC-Dropout lowest by 0.03, far from significant
    for cell, values in runs.items():
        for seed, v in enumerate(values):
            _write(tmp_path, "tab:ece-nll", cell, v, "cpu-annealed", seed=seed, metric="nll")
    row = present.row(nll, judge(nll, ("cpu-annealed",), tmp_path))
    assert row["reason_code"] == "not-significant" and "beyond a tie" not in row["why"]
    assert row["why"].startswith("the gap is beyond the claim's threshold of 0, but no Welch test")


def test_runs_stopped_at_the_mean_that_a_failure_pattern_rests_on_are_not_called_converged(
    tmp_path,
):
    stopped = {"converged": False, "stopped": True, "fitted": False, "rule": "test"}
    _cell(tmp_path, "tab:meb", "abl-d8-scale-st", 0.0, "full", convergence=stopped)
    _cell(tmp_path, "tab:meb", "abl-d8-scale-mz_full", 0.30, "full")
    fails = _claim("meb-d8-pma-fail")
    row = present.row(fails, judge(fails, results_dir=tmp_path))
    assert row["verdict"] == "reproduced"
    assert row["statistics"].startswith(
        "n = 3 seed(s) per cell, 3/6 runs converged, 3 stopped without fitting (the failure"
    )
