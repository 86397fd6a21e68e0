"""The scorecard is computed from result JSONs and data/paper, never typed; committed results carry
their provenance; every table the book shows names its paper label."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
import types
import warnings
from pathlib import Path

import pytest

from mzlite._io import atomic_write_json
from mzlite.analysis.verdicts import Label
from mzlite.repro import experiments as ex
from mzlite.repro.experiments import present
from mzlite.repro.experiments.engine import Reason
from mzlite.repro.experiments.report import report
from mzlite.repro.experiments.results import OtherTrainingWarning
from mzlite.repro.experiments.scorecard import (
    NORMALISED,
    VERDICTS,
    Kind,
    RankClaim,
    claims,
    evaluate,
    per_set_normalised,
    scorecard,
)
from mzlite.repro.paper import load_paper_table

ROOT = Path(__file__).resolve().parents[1]


def _write(results_dir, table, cell_id, value, profile="cpu", seed=0, metric="r2",
           converged=True, **extra):  # fmt: skip
    """A minimal result as ``run_job`` writes it (only what the scorecard reads)."""
    cell = ex.get_table(table).cell(cell_id)
    path = ex.result_path(table, cell_id, seed, profile, results_dir)
    atomic_write_json(
        path,
        {
            "format": ex.RESULT_FORMAT,
            "table": ex.get_table(table).label,
            "cell": cell_id,
            "seed": seed,
            "profile": profile,
            "task": cell.task,
            "model": cell.model,
            "sizes": [2000, 500, 1000],
            "metrics": {"test": {metric: value}},
            "epochs_run": 30,
            "convergence": {"converged": converged, "rule": "test"},
            "provenance": {"device": "cpu", "gpu_name": None},
            **extra,
        },
    )
    return path


SPREAD = (-0.01, 0.0, 0.01)  # three seeds around each value: a small, non-zero std


def _cell(results_dir, table, cell_id, value, profile="cpu", seeds=3, **kw):
    for s in range(seeds):
        _write(results_dir, table, cell_id, value + SPREAD[s % 3], profile, seed=s, **kw)


def _tdof(results_dir, mz: float, st4: float, st32: float, profile="cpu", seeds=3):
    for L in (4, 8, 16, 24, 32):
        _cell(results_dir, "tab:tdof-verify", f"L{L}-mz_1l", mz, profile, seeds)
    for L, v in ((4, st4), (8, st4), (16, st4), (24, st32), (32, st32)):
        _cell(results_dir, "tab:tdof-verify", f"L{L}-st_4l", v, profile, seeds)


def test_every_claim_has_a_paper_value_and_a_chapter():
    cs = claims()
    assert len(cs) >= 20 and len({c.id for c in cs}) == len(cs)
    chapters = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    for c in cs:
        row = evaluate(c, results_dir=ROOT / "does-not-exist")
        assert isinstance(row["paper"], float), c.id
        assert row["verdict"] == "not run" and row["ours"] is None
        assert c.table in ex.TABLES and load_paper_table(c.table)
        assert row["chapter"] in chapters, f"{c.id} links to a missing chapter {row['chapter']}"


def test_a_claim_naming_a_missing_cell_fails_when_made():
    """A renamed cell id breaks the claim at once, not later as a silent "not run"."""
    (beats,) = [c for c in claims("tab:meb") if c.id == "meb-d8-mz-beats-pma"]
    with pytest.raises(ValueError, match="no cell 'd8-mz_fool' in tab:meb"):
        dataclasses.replace(beats, cells=("d8-mz_fool", *beats.cells[1:]))
    with pytest.raises(ValueError, match="no cell 'd8-gone' in tab:meb"):
        dataclasses.replace(beats, cells=(beats.cells[0], "d8-gone"))


def test_a_claims_test_and_its_sentence_come_from_its_thresholds():
    """Each claim's thresholds are typed once: its sentence prints them and its test flips at
    them (the stricter "holds" inside the weaker "partly")."""
    for c in claims():
        if isinstance(c, RankClaim):
            continue
        text = present.claim_text(c)  # the paper's words, then the test
        assert text.startswith(c.says) and len(text) > len(c.says), c.id
        h, p = c.holds_at, c.partly_at
        shown = {c.kind.BEATS: (h, -p), c.kind.NEAR_BEST: (-h, -p)}.get(c.kind, (h, p))
        for x in shown:
            assert (f"{x:g}" if x == int(x) else f"{x:.2f}") in text[len(c.says) :], (c.id, x)
        up = c.kind in (Kind.AT_MOST, Kind.NO_GAIN, Kind.ON_PAR)  # holds at or below
        step = -1e-9 if up else 1e-9
        assert c.holds(h + step) and c.partly(h + step) and c.partly(p + step), c.id
        assert not c.holds(p - step) and not c.partly(p - step), c.id


def test_a_claims_number_comes_from_its_kind():
    make = lambda kind, cells, **kw: dataclasses.replace(  # noqa: E731
        _meb_beats(), kind=kind, cells=tuple(cells), **kw
    )
    assert make(Kind.BEATS, ["d8-mz_full", "d8-st", "d8-st_large"]).expr(
        {"d8-mz_full": 0.9, "d8-st": 0.5, "d8-st_large": 0.7}.__getitem__
    ) == pytest.approx(0.2)
    lower = make(Kind.BEATS, ["d8-mz_full", "d8-st"], metric="nll", holds_at=0, partly_at=-0.1)
    assert lower.expr({"d8-mz_full": 0.5, "d8-st": 0.9}.__getitem__) == pytest.approx(0.4)
    assert make(Kind.DROP, ["d8-st", "d8-st_large"]).expr(
        {"d8-st": 0.9, "d8-st_large": 0.5}.__getitem__
    ) == pytest.approx(0.4)
    drop = make(Kind.DROP, ["d8-st", "d8-st_large"], holds_at=0.3, partly_at=0.1)
    assert drop.bound_cells == ("d8-st_large",) and drop.compare == ("d8-st", ("d8-st_large",))
    assert drop.bound({"d8-st_large": 0.95}.__getitem__) == pytest.approx(0.05)  # R^2 <= 1
    on_par = make(Kind.ON_PAR, ["d8-st", "d8-st_large"], holds_at=0.05, partly_at=0.1)
    assert on_par.expr({"d8-st": 0.5, "d8-st_large": 0.9}.__getitem__) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="kind must be one of"):
        make("exceeds", ["d8-st"])
    with pytest.raises(ValueError, match="cannot read"):
        make(Kind.DROP, ["d8-st"])
    with pytest.raises(ValueError, match="holds_at must pass"):
        make(Kind.AT_LEAST, ["d8-st"], holds_at=0.5, partly_at=0.7)


def _meb_beats():
    (beats,) = [c for c in claims("tab:meb") if c.id == "meb-d8-mz-beats-pma"]
    return beats


def test_the_paper_side_is_computed_from_data_paper():
    (st_mz,) = [c for c in claims("tab:tdof-verify") if c.id == "tdof-mz-1l"]
    row = evaluate(st_mz, results_dir=ROOT / "does-not-exist")
    paper = load_paper_table("tab:tdof-verify")
    col = next(k for k in paper["columns"] if "MZ" in k and "R^2" in k)
    expect = min(r["cells"][col]["mean"] for r in paper["rows"])
    assert row["paper"] == pytest.approx(expect)


def test_changing_a_result_json_changes_the_page(tmp_path):
    _tdof(tmp_path, mz=0.95, st4=0.97, st32=0.40)
    sc = scorecard(tables=["tab:tdof-verify"], results_dir=tmp_path)
    before = present.scorecard_markdown(sc)
    by_id = {r["claim"]: r for r in sc.rows}
    assert by_id["tdof-mz-1l"]["verdict"] == "holds"
    assert by_id["tdof-mz-1l"]["ours"] == pytest.approx(0.95)
    assert by_id["tdof-st-4l-drop"]["ours"] == pytest.approx(0.57)
    assert by_id["tdof-separation"]["verdict"] == "holds"
    regime = by_id["tdof-mz-1l"]["value"].regime
    assert (regime.profile, regime.seeds, regime.epochs) == ("cpu", (0, 1, 2), (30, 30))
    sep = by_id["tdof-separation"]["value"]
    assert {c.n for c in sep.cells} == {3} and sum(c.converged for c in sep.cells) == 6
    assert sep.reason == Reason.SIGNIFICANT and sep.p_max < 1e-4

    for seed in range(3):  # one L fails
        _write(tmp_path, "tab:tdof-verify", "L16-mz_1l", 0.30 + SPREAD[seed], seed=seed)
    sc2 = scorecard(tables=["tab:tdof-verify"], results_dir=tmp_path)
    after = present.scorecard_markdown(sc2)
    assert after != before and "0.300" in after and "0.300" not in before
    assert {r["claim"]: r for r in sc2.rows}["tdof-mz-1l"]["verdict"] == "does not hold here"
    assert "<table" in sc2._repr_html_() and "04_training_on_gpu.html" in sc2._repr_html_()
    # one result file of the separation claim's cells changes: the verdict follows it
    _write(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.99, seed=2)  # now 0.39, 0.40, 0.99
    sep2 = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}
    assert sep2["tdof-separation"]["verdict"] == "not decided"  # a gap, not significant
    assert sep2["tdof-separation"]["value"].p_max > 0.05
    assert sep2["tdof-separation"]["value"].reason == Reason.NOT_SIGNIFICANT


def test_a_more_trusted_profile_with_too_few_runs_is_said_beside_the_verdict(tmp_path):
    """The paper's protocol under way (one seed a cell) does not hide a decided reading of a
    less trusted profile: the verdict is read where the evidence suffices, and the row says
    the paper's protocol has too few runs so far."""
    _tdof(tmp_path, mz=0.95, st4=0.97, st32=0.40, profile="cpu-annealed")
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.93, "full", seeds=1)
    _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.98, "full", seeds=1)
    sep = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}[
        "tdof-separation"
    ]
    assert (sep["profile"], sep["verdict"]) == ("cpu-annealed", "holds")
    assert [(b.profile, b.label) for b in sep["value"].beside] == [("full", Label.INSUFFICIENT)]
    assert sep["value"].beside[0].problems == (Reason.TOO_FEW_SEEDS,)
    # where no profile has enough, the most trusted one is read, as before
    only_full = tmp_path / "only-full"
    _cell(only_full, "tab:tdof-verify", "L32-mz_1l", 0.93, "full", seeds=1)
    _cell(only_full, "tab:tdof-verify", "L32-st_4l", 0.98, "full", seeds=1)
    sep = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=only_full).rows}[
        "tdof-separation"
    ]
    assert (sep["profile"], sep["verdict"]) == ("full", "insufficient evidence")
    assert sep["value"].beside == ()


def test_cli_scorecard_prints_each_claim_with_its_statistics_and_verdict(tmp_path, capsys):
    from mzlite.__main__ import main

    _tdof(tmp_path, mz=0.95, st4=0.97, st32=0.40, profile="cpu-converged")
    args = ["scorecard", "tab:tdof-verify", "--results-dir", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("3 claims: 3 hold.") and "== tab:tdof-verify" in out
    assert out.count("verdict: holds") == 3 and "Welch p = " in out
    assert "cpu-converged: 3 seed" in out
    assert main(args + ["--profiles", "cpu", "--format", "markdown"]) == 0  # nothing under cpu
    md = capsys.readouterr().out
    assert "| table | claim |" in md and md.startswith("3 claims: 3 were not run.")
    assert main(["scorecard", "tab:nope"]) == 2
    assert "valid tables" in capsys.readouterr().err


def test_one_seed_or_unconverged_runs_give_no_verdict(tmp_path):
    _tdof(tmp_path, mz=0.95, st4=0.97, st32=0.40, seeds=1)  # values that would "hold"
    rows = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}
    assert {r["verdict"] for r in rows.values()} == {"insufficient evidence"}
    assert rows["tdof-mz-1l"]["value"].problems == (Reason.TOO_FEW_SEEDS,)
    assert {c.n for c in rows["tdof-mz-1l"]["value"].cells} == {1}
    # three seeds, but one run stopped at the cap still improving: still no verdict
    _tdof(tmp_path, mz=0.95, st4=0.97, st32=0.40, seeds=3)
    _write(tmp_path, "tab:tdof-verify", "L8-mz_1l", 0.95, seed=1, converged=False)
    rows = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}
    assert rows["tdof-mz-1l"]["verdict"] == "insufficient evidence"
    v = rows["tdof-mz-1l"]["value"]
    assert v.problems == (Reason.UNCONVERGED,)
    assert sum(c.runs - c.converged for c in v.cells) == 1
    assert rows["tdof-separation"]["verdict"] == "holds"  # its cells all converged
    # results without a stored "convergence" (older files) are judged from their history
    improving = {"val_loss": [1.0 / (1 + e) for e in range(30)], "stop_reason": "completed",
                 "best_epoch": 30, "config": {"patience": 10, "epochs": 30}}  # fmt: skip
    path = _write(tmp_path, "tab:tdof-verify", "L8-mz_1l", 0.95, seed=1, history=improving)
    res = json.loads(path.read_text())
    del res["convergence"]
    atomic_write_json(path, res)
    rows = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}
    assert rows["tdof-mz-1l"]["verdict"] == "insufficient evidence"
    # a seed trained otherwise than its cell trains today is another experiment: left out
    _write(tmp_path, "tab:tdof-verify", "L8-mz_1l", 0.95, seed=1, train_config={"lr": 3e-3})
    with pytest.warns(OtherTrainingWarning, match="L8-mz_1l seed 1"):
        rows = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}
    v = rows["tdof-mz-1l"]["value"]
    assert v.problems == (Reason.TOO_FEW_SEEDS,) and Reason.MIXED_PROTOCOLS not in v.problems
    # a cell whose seeds were trained under different protocols (here precisions) is never
    # averaged
    _write(tmp_path, "tab:tdof-verify", "L8-mz_1l", 0.95, seed=1, train_config={"amp": True})
    rows = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}
    v = rows["tdof-mz-1l"]["value"]
    assert Reason.MIXED_PROTOCOLS in v.problems
    assert [c.cell for c in v.cells if c.mixed] == ["L8-mz_1l"]
    rep = {r["cells"][0]: r for r in report("tab:tdof-verify", "cpu", tmp_path).rows}
    assert rep["L8-mz_1l"]["mixed"] and rep["L8-mz_1l"]["ours_mean"] is None
    # ... and so is a cell whose seeds come from different code versions
    _write(tmp_path, "tab:tdof-verify", "L8-mz_1l", 0.95, seed=1)
    _write(tmp_path, "tab:tdof-verify", "L4-mz_1l", 0.95, seed=1,
           provenance={"device": "cpu", "git_commit": "1" * 40})  # fmt: skip
    rep = {r["cells"][0]: r for r in report("tab:tdof-verify", "cpu", tmp_path).rows}
    assert rep["L4-mz_1l"]["mixed"] and not rep["L8-mz_1l"]["mixed"]
    assert "mixed protocols" in report("tab:tdof-verify", "cpu", tmp_path).to_text()


def test_report_rows_by_cell(tmp_path):
    """``Report.by_cell``: rows keyed by cell id, by part; a cell with a row per metric needs
    ``metric``; derived rows (two cells) are never keyed."""
    _write(tmp_path, "tab:tdof-verify", "L8-mz_1l", 0.7)
    rep = report("tab:tdof-verify", "cpu", tmp_path)
    main = rep.by_cell()
    assert main["L8-mz_1l"]["ours_mean"] == 0.7 and main["L4-mz_1l"]["n_seeds"] == 0
    assert {r["part"] for r in main.values()} == {"main"}
    assert set(main) == {c.id for c in ex.get_table("tab:tdof-verify").cells if c.part == "main"}
    both = rep.by_cell(part=None)
    assert set(main) < set(both) and {r["part"] for r in both.values()} == {"main", "ablation"}
    with pytest.raises(ValueError, match="part must be"):
        rep.by_cell(part="derived")
    results = report("tab:main-results", "cpu", tmp_path)  # cells with an MSE and an R^2 row
    with pytest.raises(ValueError, match=r"cell A-\w+ has a row for each metric \['mse', 'r2'\]"):
        results.by_cell()
    r2 = results.by_cell(metric="r2")
    assert r2["A-st"]["metric"] == "r2" and results.by_cell(metric="mse")["A-st"]["metric"] == "mse"


def test_one_job_by_cell_and_seed():
    job = ex.job("tab:tdof-verify", "L8-mz_1l", "full")
    (same,) = [j for j in ex.jobs("tab:tdof-verify", "full", cells=["L8-mz_1l"]) if j.seed == 0]
    assert job == same and job.train_config() == same.train_config()
    assert ex.job("tab:tdof-verify", "L8-mz_1l", "cpu-converged", seed=2).seed == 2
    with pytest.raises(ValueError, match="no cell 'L9-mz_1l' in tab:tdof-verify; cells: "):
        ex.job("tab:tdof-verify", "L9-mz_1l")
    with pytest.raises(ValueError, match="abl-d8-ynorm-st is run as d8-st under cpu-converged"):
        ex.job("tab:meb", "abl-d8-ynorm-st", "cpu-converged")
    with pytest.raises(ValueError, match="runs seed 0 only, got seed=1"):
        ex.job("tab:meb", "d8-set_stats", "full", seed=1)


def test_verdict_thresholds_and_partial_coverage(tmp_path):
    _tdof(tmp_path, mz=0.80, st4=0.50, st32=0.45)
    rows = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}
    assert rows["tdof-mz-1l"]["verdict"] == "holds partly"  # 0.80: >= 0.70, < 0.90
    assert rows["tdof-st-4l-drop"]["verdict"] == "does not hold here"  # drop 0.05
    (c,) = [c for c in claims("tab:tdof-verify") if c.id == "tdof-mz-1l"]
    # the claim's rule on its numbers (Claim.label): thresholds, then Welch's test
    assert [c.label(v) for v in (0.95, 0.75, 0.5)] == [
        "holds", "holds partly", "does not hold here"]  # fmt: skip
    assert c.label(0.95, complete=False) == "holds partly"
    # a "beats" claim holds only when Welch's test says so
    (sep,) = [c for c in claims("tab:tdof-verify") if c.id == "tdof-separation"]
    assert sep.label(0.2, True, 0.01) == "holds"
    # a gap that no test backs is not decided, either way
    assert sep.label(0.2, True, 0.2) == "not decided"
    assert sep.label(-0.2, True, 0.01) == "not decided"
    # "does not hold" needs a model of the comparison significantly better
    assert sep.label(-0.2, True, 0.01, ["L32-st_4l"]) == "does not hold here"
    assert sep.label(0.005, True, 0.01, ["L32-st_4l"]) == "holds partly"  # a tie
    # MEB: one of six PMA baselines ran; the row says so
    _cell(tmp_path, "tab:meb", "d8-st", 0.02)
    _cell(tmp_path, "tab:meb", "d8-mz_full", 0.60)
    meb = {r["claim"]: r for r in scorecard("tab:meb", results_dir=tmp_path).rows}
    # it passes, but five of the six baselines did not run: only "holds partly"
    assert meb["meb-d8-pma-fail"]["verdict"] == "holds partly"
    fails = meb["meb-d8-pma-fail"]["value"]
    assert (fails.ran, fails.n_cells, fails.reason) == (1, 6, Reason.INCOMPLETE)
    assert meb["meb-d8-mz-beats-pma"]["ours"] == pytest.approx(0.58)
    assert meb["meb-d8-mz-beats-pma"]["verdict"] == "holds partly"
    assert meb["meb-d16-mz-beats-pma"]["verdict"] == "not run"


def test_full_results_win_and_smoke_never_gives_a_verdict(tmp_path):
    _tdof(tmp_path, mz=0.50, st4=0.97, st32=0.40, profile="cpu")
    _tdof(tmp_path, mz=0.99, st4=0.97, st32=0.40, profile="full")
    _tdof(tmp_path, mz=0.10, st4=0.10, st32=0.10, profile="smoke")
    rows = scorecard("tab:tdof-verify", results_dir=tmp_path).rows
    assert all(r["profile"] == "full" for r in rows)
    rows = scorecard("tab:tdof-verify", profiles=("smoke",), results_dir=tmp_path).rows
    assert {r["verdict"] for r in rows} == {"pipeline only"}
    with pytest.raises(ValueError, match="profile"):
        scorecard(profiles=("fast",))
    assert set(scorecard(results_dir=tmp_path).counts()) == set(VERDICTS)


def test_report_can_leave_out_what_did_not_run(tmp_path):
    _tdof(tmp_path, mz=0.9, st4=0.9, st32=0.5)
    full = report("tab:tdof-verify", "cpu", results_dir=tmp_path)
    ran = report("tab:tdof-verify", "cpu", results_dir=tmp_path, ran_only=True)
    assert len(ran) == len([r for r in full.rows if r["seeds"]]) < len(full)
    assert f"{len(full) - len(ran)} of {len(full)} rows not run" in ran.notes


def test_report_prints_mean_std_seeds_and_convergence(tmp_path):
    _tdof(tmp_path, mz=0.9, st4=0.9, st32=0.5)
    _write(tmp_path, "tab:tdof-verify", "L4-mz_1l", 0.9, seed=2, converged=False)
    rep = report("tab:tdof-verify", "cpu", results_dir=tmp_path, ran_only=True)
    row = next(r for r in rep.rows if r["cells"] == ["L4-mz_1l"])
    assert (row["n_seeds"], row["converged"], row["n_runs"]) == (3, 2, 3)
    assert rep._cells(row)["converged"] == "2/3"
    # seeds 0.89, 0.90, 0.90: mean 0.8967, sample std 0.0058
    assert row["ours_mean"] == pytest.approx(0.8967, abs=1e-4)
    assert row["ours_std"] == pytest.approx(0.005774, abs=1e-5)
    line = next(x for x in rep.to_text().splitlines() if x.startswith("MZAttn-1L") and "L=4 " in x)
    assert "0.897 ± 0.006" in line and " 3 " in line and "2/3" in line
    assert "| converged |" in rep.to_markdown() and "converged 2/3" in rep._repr_html_()


def test_every_table_the_book_shows_names_its_paper_label():
    # the report and scorecard print the label with every table ...
    md = report("tab:meb", "cpu", results_dir=ROOT / "does-not-exist").to_markdown()
    assert md.startswith("**tab:meb:")
    # ... and every report/run/scorecard call in a chapter names a registered, transcribed label
    pat = re.compile(r"""(?:report|ex\.run|load_results|scorecard)\([^)]*?["'](tab:[\w-]+)["']""")
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        src = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"])
        for label in pat.findall(src):
            assert label in ex.TABLES, f"{nb.name} shows {label}, which is not registered"
            assert (ROOT / "data/paper" / f"{label.replace(':', '-')}.json").exists()


COMMITTED = sorted(
    p for prof in ("cpu", "full") for p in (ROOT / "data/results" / prof).rglob("*.json")
)


@pytest.mark.skipif(not COMMITTED, reason="no committed cpu/full results")
@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_committed_result_lacks_provenance(path):
    res = json.loads(path.read_text())
    assert res["format"] == ex.RESULT_FORMAT
    assert path.parent.parent.name == res["profile"]
    for key in ("table", "cell", "seed", "task", "model", "sizes", "metrics", "epochs_run",
                "wall_time_s", "dataset_keys", "params"):  # fmt: skip
        assert key in res, f"{path.name} lacks {key}"
    if res["model"] != ex.SET_STATS:
        assert res["train_config"] and res["model_config"]
    prov = res["provenance"]
    for key in ("device", "torch", "mzlite", "python", "git_commit", "timestamp"):
        assert prov.get(key), f"{path.name}: provenance lacks {key}"
    assert re.fullmatch(r"[0-9a-f]{40}", prov["git_commit"])


@pytest.mark.parametrize("seeds, converged", [(1, True), (2, True), (3, False)])
def test_no_claim_gets_a_verdict_from_one_seed_or_unconverged_runs(tmp_path, seeds, converged):
    """Whatever the values, too few seeds or an unconverged run per cell never decide a claim."""
    rng = __import__("random").Random(seeds)
    for table in ("tab:tdof-verify", "tab:meb", "tab:main-results"):
        for c in ex.get_table(table).cells:
            for s in range(seeds):
                v = rng.uniform(-0.5, 1.0)
                # an unconverged profile: one run per cell that did not converge
                _write(tmp_path, table, c.id, v, seed=s, converged=converged or s > 0)
    rows = scorecard(["tab:tdof-verify", "tab:meb", "tab:main-results"], results_dir=tmp_path).rows
    assert rows and {r["verdict"] for r in rows} <= {"insufficient evidence", "not run"}
    assert all(r["why"] for r in rows if r["verdict"] == "insufficient evidence")


def test_best_rows_read_each_cell_from_its_most_trusted_profile(tmp_path):
    """Results land cell by cell: a chapter shows a cell's converged result as soon as it is on
    disk, the 30-epoch one (labelled) until then, and never a mean over both."""
    from mzlite.repro.experiments.report import best_rows, evidence_note, ours_text

    _write(tmp_path, "tab:meb", "d8-st", 0.9)  # cpu: one seed
    _write(tmp_path, "tab:meb", "d8-mz_full", 0.7)
    _cell(tmp_path, "tab:meb", "d8-st", 0.3, profile="cpu-converged")
    rows = best_rows("tab:meb", results_dir=tmp_path)
    assert list(rows)[:3] == ["d8-st", "d8-st_large", "d8-hypernet_r8"]  # the table's order
    st, mz, perceiver = rows["d8-st"], rows["d8-mz_full"], rows["d8-perceiver"]
    assert (st["profile"], st["n_seeds"]) == ("cpu-converged", 3)
    assert st["ours_mean"] == pytest.approx(0.3) and st["ours_std"] == pytest.approx(0.01)
    assert (mz["profile"], mz["n_seeds"], mz["ours_mean"]) == ("cpu", 1, 0.7)
    assert perceiver["profile"] is None and not perceiver["seeds"]
    assert ours_text(st) == "0.300 ± 0.010" and ours_text(mz) == "0.700"
    assert ours_text(perceiver) == ours_text(None) == "not run"
    assert evidence_note(st).startswith("cpu-converged: 3 seeds, 30 epochs, converged 3/3")
    assert evidence_note(mz).startswith("cpu (the 30-epoch ablation): 1 seed,")
    assert evidence_note(perceiver) == "not run under any profile yet"
    # one profile only: the cpu result of d8-st is not there; remove the converged ones and it is
    assert best_rows("tab:meb", ("cpu",), results_dir=tmp_path)["d8-st"]["ours_mean"] == 0.9
    for s in range(3):
        ex.result_path("tab:meb", "d8-st", s, "cpu-converged", tmp_path).unlink()
    assert best_rows("tab:meb", results_dir=tmp_path)["d8-st"]["profile"] == "cpu"
    with pytest.raises(ValueError, match="unknown profile"):
        best_rows("tab:meb", ("cpu", "gpu"), results_dir=tmp_path)


def test_what_ran_is_read_from_the_result_files(tmp_path):
    from mzlite.repro.experiments.report import what_ran

    assert what_ran("tab:meb", "cpu-converged", results_dir=tmp_path) == ""
    cfg = {"epochs": 200, "patience": 20, "lr": 3e-3, "normalize_targets": True, "amp": True}
    prov = {"device": "cpu", "num_threads": 1, "git_commit": "917d63a6b9f3"}
    for s in range(3):
        _write(tmp_path, "tab:meb", "d8-mz_full", 0.6 + s / 100, "cpu-converged", seed=s,
               train_config=cfg, stop_reason="early_stopping", epochs_run=40 + s,
               provenance=prov)  # fmt: skip
    _write(tmp_path, "tab:meb", "d8-st", 0.3, "cpu-converged", seed=0, converged=False,
           train_config={**cfg, "lr": 1e-3}, stop_reason="max_epochs", epochs_run=200,
           provenance=prov)  # fmt: skip
    text = what_ran("tab:meb", "cpu-converged", results_dir=tmp_path)
    n_cells = len(ex.get_table("tab:meb").cells) - len(ex.aliases("tab:meb", "cpu-converged"))
    for part in (
        f"cpu-converged: 2 of {n_cells} cells have results",
        "1/3 seed(s) per trained cell (4 runs)",
        "2,000/500/1,000 train/val/test sets",
        "40-200 epochs run (cap 200, patience 20)",
        "3 of 4 runs converged (3 stopped by patience)",
        "lr 0.001 (baseline), 0.003 (mz)",
        "targets standardised on the training split",
        "bf16 autocast",
        "on a CPU (1 thread(s) per run)",
        "code 917d63a",
    ):
        assert part in text, (part, text)


def _tier1(results_dir, mz_ranks: dict, unconverged=()):
    """Complete cpu-converged settings of tab:transfer-matrix (3 seeds a model, the yardstick)
    where MZAttn-Full takes rank ``mz_ranks[setting]`` among the 7 models by mean R^2."""
    from mzlite.repro import transfer

    others = [m for m in transfer.RANKED if m != "mz_full"]
    for setting, k in mz_ranks.items():
        for i, m in enumerate(others):  # 0.95, 0.85, ..., 0.45
            conv = f"{setting}-{m}" not in unconverged
            _cell(results_dir, transfer.LABEL, f"{setting}-{m}", 0.95 - 0.1 * i, "cpu-converged",
                  converged=conv)  # fmt: skip
        _cell(results_dir, transfer.LABEL, f"{setting}-mz_full", 1.0 - 0.1 * (k - 1),
              "cpu-converged", converged=f"{setting}-mz_full" not in unconverged)  # fmt: skip
        _cell(results_dir, transfer.LABEL, f"{setting}-{ex.SET_STATS}", 0.5, "cpu-converged", 1)


def _rank_rows(results_dir):
    sc = scorecard(tables=["tab:transfer-matrix"], results_dir=results_dir)
    return {r["claim"]: r for r in sc.rows}


SETTINGS = ("raw-meb", "raw-hull", "affine-meb", "mixture-meb", "mixture-hull", "mixture-mst")


def test_transfer_rank_claims_paper_side_and_not_run(tmp_path):
    rows = _rank_rows(tmp_path)
    no_adv, mid = rows["transfer-tier1-no-advantage"], rows["transfer-tier1-mid-field"]
    paper = load_paper_table("tab:transfer-matrix")
    cells = [paper_row["cells"][col]["mean"] for (prow, col) in ex.TRANSFER_TIER1.values()
             for paper_row in paper["rows"] if paper_row["row"] == prow]  # fmt: skip
    assert len(cells) == 6 and no_adv["paper"] == pytest.approx(sum(cells) / 6)
    assert mid["paper"] == pytest.approx(sum(3 <= c <= 5 for c in cells) / 6)
    assert no_adv["verdict"] == mid["verdict"] == "not run" and no_adv["ours"] is None
    assert no_adv["chapter"] == "10_real_data_digits"
    with pytest.raises(ValueError, match="twin applies to cell claims"):
        evaluate(claims("tab:transfer-matrix")[0], twin=lambda c, _: c)


def test_transfer_rank_claims_hold_fail_and_refuse(tmp_path):
    _tier1(tmp_path, dict.fromkeys(SETTINGS, 4))
    rows = _rank_rows(tmp_path)
    no_adv, mid = rows["transfer-tier1-no-advantage"], rows["transfer-tier1-mid-field"]
    assert no_adv["verdict"] == "holds" and no_adv["ours"] == pytest.approx(4.0)
    assert mid["verdict"] == "holds" and mid["ours"] == 1.0
    test = no_adv["value"].rank.test
    assert test.test["p_advantage"] > 0.05 and test.test["p_disadvantage"] > 0.05
    assert len(test.settings) == test.n_settings == 6

    _tier1(tmp_path, dict.fromkeys(SETTINGS, 1))  # first everywhere: an advantage after all
    rows = _rank_rows(tmp_path)
    no_adv, mid = rows["transfer-tier1-no-advantage"], rows["transfer-tier1-mid-field"]
    assert no_adv["verdict"] == mid["verdict"] == "does not hold here"
    assert no_adv["value"].rank.test.test["p_advantage"] <= 0.05 and mid["ours"] == 0

    _tier1(tmp_path, dict.fromkeys(SETTINGS, 4), unconverged=("raw-hull-perceiver",))
    rows = _rank_rows(tmp_path)
    for r in rows.values():
        assert r["verdict"] == "insufficient evidence"
        assert (r["reason_code"], r["value"].rank.test.outcome) == ("unconverged", "unconverged")
        assert r["value"].rank.test.unconverged == tuple(
            ("raw-hull-perceiver", s) for s in range(3)
        )
        assert "MNIST raw pixel / Hull, Perceiver seed 0" in r["why"]  # the presenter names it


def test_transfer_prediction_with_longer_cap_reruns_in_place_of_capped_runs(tmp_path):
    """The epoch-cap ablation as a sensitivity analysis: a capped run's converged rerun at the
    longer cap stands in for it (ranks and convergence both), once the rerun has every seed."""
    from mzlite.repro import transfer

    _tier1(tmp_path, dict.fromkeys(SETTINGS, 4), unconverged=("raw-hull-perceiver",))
    cap = "abl-raw-hull-cap400-perceiver"
    assert transfer.longer_cap("cpu-converged", results_dir=tmp_path) == {}
    _write(tmp_path, transfer.LABEL, cap, 0.99, "cpu-converged", seed=0)  # 1 of 3 seeds
    assert transfer.longer_cap("cpu-converged", results_dir=tmp_path) == {}
    for s in (1, 2):
        _write(tmp_path, transfer.LABEL, cap, 0.99, "cpu-converged", seed=s)
    sub = transfer.longer_cap("cpu-converged", results_dir=tmp_path)
    assert sub == {"raw-hull-perceiver": cap}
    main = transfer.prediction("cpu-converged", results_dir=tmp_path)
    assert main["verdict"] == "insufficient evidence" and main["substituted"] == {}
    out = transfer.prediction("cpu-converged", results_dir=tmp_path, substitute=sub)
    assert out["unconverged"] == () and out["substituted"] == sub
    # the rerun (0.99) now leads raw-hull and pushes MZAttn-Full from 4th to 5th there only
    assert out["observed"] == (4, 5, 4, 4, 4, 4) and out["verdict"] == "holds"
    raw_hull = transfer.ranks("cpu-converged", results_dir=tmp_path, substitute=sub)[1]
    assert raw_hull["best_other"] == ("perceiver", pytest.approx(0.99, abs=0.02))
    # the scorecard keeps the protocol's verdict and says what the reruns give
    rows = _rank_rows(tmp_path)
    no_adv, mid = rows["transfer-tier1-no-advantage"], rows["transfer-tier1-mid-field"]
    assert no_adv["verdict"] == mid["verdict"] == "insufficient evidence"
    longer = mid["value"].rank.longer_cap
    assert longer.observed == (4, 5, 4, 4, 4, 4) and longer.mid_field == 6
    assert no_adv["value"].rank.longer_cap.label == "holds"
    with pytest.raises(ValueError, match="substitute names cells"):
        transfer.ranks("cpu-converged", results_dir=tmp_path, substitute={"raw-hull-x": cap})


def test_transfer_rank_claims_with_one_complete_setting(tmp_path):
    _tier1(tmp_path, {"raw-meb": 4})
    rows = _rank_rows(tmp_path)
    no_adv, mid = rows["transfer-tier1-no-advantage"], rows["transfer-tier1-mid-field"]
    # one cell can never contradict the null at 5 %: rank 1 would have P = 1/7
    assert no_adv["verdict"] == "insufficient evidence"
    assert no_adv["value"].rank.test.test["p_floor"] == pytest.approx(1 / 7, abs=1e-3)
    assert mid["verdict"] == "holds partly"
    assert (len(mid["value"].rank.observed), mid["value"].rank.test.n_settings) == (1, 6)


def _reading(gen_norm: str) -> dict:
    return {"model_config": {"gen_norm": gen_norm}}


def test_a_run_that_never_fitted_is_an_optimisation_failure_not_a_refutation(tmp_path):
    _tdof(tmp_path, mz=0.10, st4=0.97, st32=0.40, profile="cpu-annealed")  # "does not hold"
    rows = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}
    assert rows["tdof-mz-1l"]["verdict"] == "does not hold here"
    # one MZ seed stopped without leaving the mean predictor
    unfitted = {"converged": False, "stopped": True, "fitted": False, "rule": "test"}
    _write(tmp_path, "tab:tdof-verify", "L8-mz_1l", 0.10, "cpu-annealed", seed=1,
           convergence=unfitted)  # fmt: skip
    rows = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}
    row = rows["tdof-mz-1l"]
    assert row["verdict"] == "optimisation failure"
    assert row["value"].reason == Reason.OPTIMISATION_FAILURE
    assert [(c.cell, c.failed, c.runs) for c in row["value"].cells if c.failed] == [
        ("L8-mz_1l", 1, 3)
    ]


def test_the_reason_names_the_reading_and_a_reading_that_reads_otherwise(tmp_path):
    # first reading (results without gen_norm: the per-row LayerNorm) under cpu-converged
    for L in (4, 8, 16, 24, 32):
        _cell(tmp_path, "tab:tdof-verify", f"L{L}-mz_1l", 0.10, "cpu-converged")
        _cell(tmp_path, "tab:tdof-verify", f"L{L}-st_4l", 0.97 if L < 24 else 0.4,
              "cpu-converged")  # fmt: skip
    row = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}[
        "tdof-mz-1l"
    ]
    assert row["verdict"] == "does not hold here"
    assert (row["value"].reading, row["value"].reading_conflict) == ("layernorm", None)
    # the default reading, rerun under cpu-annealed, reads otherwise
    for L in (4, 8, 16, 24, 32):
        _cell(tmp_path, "tab:tdof-verify", f"L{L}-mz_1l", 0.95, "cpu-annealed",
              **_reading("zonotope"))  # fmt: skip
        _cell(tmp_path, "tab:tdof-verify", f"L{L}-st_4l", 0.97 if L < 24 else 0.4,
              "cpu-annealed")  # fmt: skip
    row = {r["claim"]: r for r in scorecard("tab:tdof-verify", results_dir=tmp_path).rows}[
        "tdof-mz-1l"
    ]
    assert row["profile"] == "cpu-annealed" and row["verdict"] in ("holds", "holds partly")
    other = row["value"].reading_conflict
    assert row["value"].reading == "zonotope" and other.reading == "layernorm"
    assert (other.profile, other.label) == ("cpu-converged", Label.FAILS)


def test_a_reading_of_the_ablation_that_reads_otherwise_is_named_in_the_reason(tmp_path):
    fitted = {"converged": True, "stopped": True, "fitted": True, "rule": "test"}
    default = {"model_config": {"gen_norm": "zonotope"}, "train_config": {"schedule": "plateau"},
               "convergence": fitted}  # fmt: skip
    baseline = {"train_config": {"schedule": "plateau"}, "convergence": fitted}
    _cell(tmp_path, "tab:main-results", "F-mz_full", 0.05, "cpu-annealed", **default)
    _cell(tmp_path, "tab:main-results", "F-st", 0.50, "cpu-annealed", **baseline)
    row = {r["claim"]: r for r in scorecard("tab:main-results", results_dir=tmp_path).rows}[
        "tab-main-results-F-mz_full-best"
    ]
    assert row["verdict"] == "does not hold here"
    assert (row["value"].reading, row["value"].depends_on) == ("zonotope", ())
    # at the paper's training-set size MZ beats the Set Transformer: the verdict turns on it
    _cell(tmp_path, "tab:main-results", "rd-F-paper-size-mz_full", 0.62, "cpu-annealed", **default)
    _cell(tmp_path, "tab:main-results", "rd-F-paper-size-st", 0.52, "cpu-annealed", **baseline)
    row = {r["claim"]: r for r in scorecard("tab:main-results", results_dir=tmp_path).rows}[
        "tab-main-results-F-mz_full-best"
    ]
    assert row["verdict"] == "does not hold here"  # the verdict stays the main cells'
    (depends,) = row["value"].depends_on  # the reading ablation's row that reads otherwise
    assert depends[:2] == ("the paper's training-set size", "MZ better")
    assert "MZ better (p = " in row["reason"]  # worded by the presenter


def _spoil(path: Path, how: str) -> None:
    text = path.read_text()
    if how == "truncated":  # a write cut short (not by mzlite, whose writes are atomic)
        path.write_text(text[: len(text) // 2])
    else:  # a merge that left its markers in the file
        path.write_text(f"<<<<<<< HEAD\n{text}=======\n{text}>>>>>>> other\n")


@pytest.mark.parametrize("how", ["truncated", "merge-conflict"])
def test_report_warns_of_an_unreadable_result_naming_it(tmp_path, how):
    _tdof(tmp_path, mz=0.9, st4=0.9, st32=0.5)
    bad = ex.result_path("tab:tdof-verify", "L4-mz_1l", 1, "cpu", tmp_path)
    _spoil(bad, how)
    with pytest.warns(ex.UnreadableResultWarning, match=re.escape(str(bad))):
        rep = report("tab:tdof-verify", "cpu", results_dir=tmp_path, ran_only=True)
    row = next(r for r in rep.rows if r["cells"] == ["L4-mz_1l"])
    assert row["n_seeds"] == 2  # the other two seeds, and a warning that says why


@pytest.mark.parametrize("how", ["truncated", "merge-conflict"])
def test_scorecard_warns_of_an_unreadable_result_naming_it(tmp_path, how):
    _tdof(tmp_path, mz=0.95, st4=0.97, st32=0.40)
    bad = ex.result_path("tab:tdof-verify", "L32-st_4l", 2, "cpu", tmp_path)
    _spoil(bad, how)
    with pytest.warns(ex.UnreadableResultWarning, match=re.escape(str(bad))) as caught:
        sc = scorecard(tables=["tab:tdof-verify"], results_dir=tmp_path)
    assert all(str(bad) in str(w.message) for w in caught)
    sep = {r["claim"]: r for r in sc.rows}["tdof-separation"]
    cells = sep["value"].cells  # the spoiled one left out
    assert sorted(c.n for c in cells) == [2, 3] and sum(c.converged for c in cells) == 5


def test_a_readable_result_raises_no_warning(tmp_path):
    _tdof(tmp_path, mz=0.95, st4=0.97, st32=0.40)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ex.UnreadableResultWarning)
        scorecard(tables=["tab:tdof-verify"], results_dir=tmp_path)


def test_task_bs_row_reads_its_chosen_reading_with_its_twins_beside(tmp_path):
    """Near-copy at the families' overall rate decides (its cells' task reading is the row's);
    v1 at the table's rates is worded beside it with its own verdict; a twin that did not run
    (near-copy at the table's rates) is left out."""
    (claim,) = [c for c in claims("tab:main-results") if c.id == "main-results-B-mz-beats-matched"]
    for m, r in (("mz_full", 0.6), ("st_large", 0.3), ("perceiver", 0.3), ("hypernet", 0.3)):
        _cell(tmp_path, "tab:main-results", f"{claim.read_on}-{m}", r, "paper-sizes",
              task_reading="near-copy")  # fmt: skip
        _cell(tmp_path, "tab:main-results", f"B-{m}", 0.3, "paper-sizes", task_reading="v1")
    rows = scorecard("tab:main-results", results_dir=tmp_path).rows
    (row,) = [r for r in rows if r["claim"] == claim.id]
    assert row["verdict"] == "holds"
    assert row["readings"].endswith("task reading near-copy")
    v1_words = dict(claim.twins)["B"]
    assert list(row["twins"]) == [v1_words]
    v1 = row["twins"][v1_words]
    assert (v1["value"].label, v1["value"].reason) == (Label.PARTLY, Reason.TIE)  # a tie on v1
    assert v1["readings"].endswith("task reading v1")
    assert f"; on {v1_words} (read in " in row["reason"]


def test_meb_rows_show_the_per_set_normalised_result_beside_the_raw_one(tmp_path):
    pma = [c.id for c in ex.get_table("tab:meb").cells if c.id.startswith("d8-")]
    # as the runner records them: the MZ cells' reading (the reading ablation checks it)
    annealed = {"model_config": {"gen_norm": "zonotope"}, "train_config": {"schedule": "plateau"}}
    for cid in pma:
        mz = "mz" in cid
        _cell(
            tmp_path,
            "tab:meb",
            cid,
            0.7 if mz else 0.05,
            "cpu-annealed",
            **(annealed if mz else {}),
        )
    rows = {r["claim"]: r for r in scorecard("tab:meb", results_dir=tmp_path).rows}
    assert "twins" not in rows["meb-d8-mz-beats-pma"]  # the twins did not run
    _cell(tmp_path, "tab:meb", "abl-d8-scale-ynorm-mz_full", 0.2, "cpu-annealed", **annealed)
    _cell(tmp_path, "tab:meb", "abl-d8-scale-ynorm-st", 0.6, "cpu-annealed")
    row = {r["claim"]: r for r in scorecard("tab:meb", results_dir=tmp_path).rows}[
        "meb-d8-mz-beats-pma"
    ]
    assert row["verdict"] == "holds"  # raw: MZ beats every PMA baseline
    normalised = row["twins"][NORMALISED]
    assert normalised["verdict"] == "does not hold here"  # normalised: ST wins
    assert normalised["value"].reason == Reason.REFUTED_BY_MODEL
    # the paper's protocol trains on raw targets: its standardised twins are an ablation there,
    # and its per-set reading needs the raw-target twins (as chapter 5's meb_study reads them)
    for m, v in (("mz_full", 0.6), ("st", 0.2)):
        _cell(tmp_path, "tab:meb", f"abl-d8-scale-ynorm-{m}", v, "full")
    rows = {r["claim"]: r for r in scorecard("tab:meb", results_dir=tmp_path).rows}
    assert rows["meb-d8-mz-beats-pma"]["twins"][NORMALISED]["profile"] == "cpu-annealed"
    for m, v in (("mz_full", 0.6), ("st", 0.2)):
        _cell(tmp_path, "tab:meb", f"abl-d8-scale-{m}", v, "full")
    (claim,) = [c for c in claims("tab:meb") if c.id == "meb-d8-mz-beats-pma"]
    normalised = per_set_normalised(claim, results_dir=tmp_path)
    assert normalised["profile"] == "full" and normalised["verdict"].startswith("holds")
    assert normalised["regime"].endswith("the paper's protocol")
    # the paper's pattern, reproduced under its protocol, reads those cells already: no line
    # beside it repeats them
    row = {r["claim"]: r for r in scorecard("tab:meb", results_dir=tmp_path).rows}[claim.id]
    assert row["verdict"] == "reproduced" and "twins" not in row
    assert "on per-set normalised sets" not in row["reason"]


def test_a_reproduced_pattern_is_a_row_of_its_own_label_naming_what_removes_it(tmp_path):
    stopped = {"converged": False, "stopped": True, "fitted": False, "rule": "test"}
    _cell(tmp_path, "tab:meb", "abl-d8-scale-st", 0.0, "full", convergence=stopped)
    _cell(tmp_path, "tab:meb", "abl-d8-scale-mz_full", 0.30, "full", seeds=1)
    rows = {r["claim"]: r for r in scorecard("tab:meb", results_dir=tmp_path).rows}
    assert rows["meb-d8-pma-fail"]["verdict"] == "not run"
    assert rows["meb-d8-pma-fail"]["value"].pattern.label == Label.INSUFFICIENT
    _cell(tmp_path, "tab:meb", "abl-d8-scale-mz_full", 0.30, "full")
    _cell(tmp_path, "tab:meb", "abl-d8-scale-ynorm-st", 0.55, "full")
    rows = {r["claim"]: r for r in scorecard("tab:meb", results_dir=tmp_path).rows}
    fails = rows["meb-d8-pma-fail"]
    assert (fails["verdict"], fails["reason_code"]) == ("reproduced", Reason.PATTERN.value)
    assert fails["profile"] == "full" and fails["regime"].endswith("the paper's protocol")
    (gone,) = fails["value"].removed_by
    assert gone.cells[0].read_as == "abl-d8-scale-ynorm-st" and gone.label == Label.FAILS
    assert scorecard("tab:meb", results_dir=tmp_path).counts()["reproduced"] == 2
    # every page that counts verdicts words and colours the new label
    from mzlite.repro.experiments.formatting import count_phrase
    from mzlite.repro.render import VERDICT_COLOURS

    assert count_phrase("reproduced", 2) == "2 reproduce the paper's pattern"
    assert "reproduced" in VERDICT_COLOURS


# ---------------------------------------------------------------------------------------------
# The sequential decision rule (plan --decide): refutation by one model, survival, retirement
# ---------------------------------------------------------------------------------------------


def _hull_claim(col: str = "d3"):
    (claim,) = [c for c in claims("tab:hull") if c.id == f"tab-hull-{col}-mz_full-best"]
    return claim


def test_one_significantly_better_model_refutes_a_claim_whatever_the_rest(tmp_path):
    claim = _hull_claim()
    _cell(tmp_path, "tab:hull", "d3-mz_full", 0.50, "cpu-annealed")
    _cell(tmp_path, "tab:hull", "d3-st_large", 0.80, "cpu-annealed")
    _write(tmp_path, "tab:hull", "d3-st", 0.20, "cpu-annealed")  # one seed: no verdict alone
    row = evaluate(claim, profiles=("cpu-annealed",), results_dir=tmp_path)
    assert row["verdict"] == "does not hold here"
    w = ex.stats.welch([0.79, 0.80, 0.81], [0.49, 0.50, 0.51])  # the pair's own test
    assert row["refuted_by"]["cell"] == "d3-st_large"
    assert row["refuted_by"]["p"] == pytest.approx(w["p"])
    assert row["value"].reason == Reason.REFUTED_BY_MODEL
    assert row["refuted_by"]["diff"] == pytest.approx(0.30)
    # the same pair with two seeds of the better model: the rule does not lean on it
    for path in (tmp_path / "cpu-annealed" / "tab-hull").glob("d3-st_large__seed2.json"):
        path.unlink()
    row = evaluate(claim, profiles=("cpu-annealed",), results_dir=tmp_path)
    assert row["verdict"] == "insufficient evidence" and row["refuted_by"] is None


def test_a_better_model_without_significance_refutes_nothing(tmp_path):
    claim = _hull_claim()
    for s, (mz, st) in enumerate(((0.5, 0.9), (0.7, 0.3), (0.6, 0.95))):
        _write(tmp_path, "tab:hull", "d3-mz_full", mz, "cpu-annealed", seed=s)
        _write(tmp_path, "tab:hull", "d3-st_large", st, "cpu-annealed", seed=s)
    _write(tmp_path, "tab:hull", "d3-st", 0.2, "cpu-annealed")
    p = ex.stats.welch([0.9, 0.3, 0.95], [0.5, 0.7, 0.6])["p"]
    assert p > 0.05
    row = evaluate(claim, profiles=("cpu-annealed",), results_dir=tmp_path)
    assert row["refuted_by"] is None and row["verdict"] == "insufficient evidence"


def test_a_claim_that_survives_its_first_step_says_how_many_models_it_survived(tmp_path):
    claim = _hull_claim("d6")
    _cell(tmp_path, "tab:hull", "d6-mz_full", 0.90, "cpu-annealed")
    _cell(tmp_path, "tab:hull", "d6-st_large", 0.50, "cpu-annealed")
    _cell(tmp_path, "tab:hull", "d6-st", 0.60, "cpu-annealed")
    row = evaluate(claim, profiles=("cpu-annealed",), results_dir=tmp_path)
    n_models = len(claim.compare[1])
    assert n_models == 5  # Standard, ST-Large, HyperNet, Perceiver, LA-ST
    assert row["verdict"] == "holds partly" and row["refuted_by"] is None
    assert row["value"].reason == Reason.INCOMPLETE and len(row["value"].tests) == 2
    for cid in claim.compare[1]:  # the rest of the column: all beaten, significantly
        _cell(tmp_path, "tab:hull", cid, 0.40, "cpu-annealed")
    row = evaluate(claim, profiles=("cpu-annealed",), results_dir=tmp_path)
    assert row["verdict"] == "holds"
    v = row["value"]
    assert v.reason == Reason.SIGNIFICANT and len(v.tests) == n_models and v.p_max < 0.05


def test_a_monotone_claim_stops_once_the_cells_run_fail_it(tmp_path):
    (claim,) = [c for c in claims("tab:meb") if c.id == "meb-d16-pma-fail"]
    assert claim.monotone
    _cell(tmp_path, "tab:meb", "d16-st_large", 0.80, "cpu-annealed")
    row = evaluate(claim, profiles=("cpu-annealed",), results_dir=tmp_path)
    assert row["verdict"] == "does not hold here"
    ref = row["value"].refutation
    assert (ref.reason, ref.cells, ref.value) == (Reason.REFUTED_SO_FAR, ("d16-st_large",),
                                                   pytest.approx(0.80))  # fmt: skip
    # cells that run and pass leave it open: the rest may still fail it
    _cell(tmp_path, "tab:meb", "d16-st_large", 0.05, "cpu-annealed")
    row = evaluate(claim, profiles=("cpu-annealed",), results_dir=tmp_path)
    assert row["refuted_by"] is None and row["verdict"] == "holds partly"


def test_one_seed_cpu_results_retire_once_a_converged_cell_exists(tmp_path):
    claim = _hull_claim()
    _write(tmp_path, "tab:hull", "d3-mz_full", 0.5, "cpu")
    _write(tmp_path, "tab:hull", "d3-st", 0.9, "cpu")
    row = evaluate(claim, results_dir=tmp_path)
    assert row["profile"] == "cpu" and row["verdict"] == "insufficient evidence"
    _cell(tmp_path, "tab:hull", "d3-st", 0.6, "cpu-annealed", converged=False)
    assert evaluate(claim, results_dir=tmp_path)["profile"] == "cpu"  # unconverged: not yet
    _cell(tmp_path, "tab:hull", "d3-st", 0.6, "cpu-annealed")
    row = evaluate(claim, results_dir=tmp_path)
    assert row["verdict"] == "not run" and row["profile"] is None
    assert row["value"].retired == (("cpu", "cpu-annealed"),)
    # asked for the cpu profile alone, its results still read (the labelled ablation)
    assert evaluate(claim, profiles=("cpu",), results_dir=tmp_path)["profile"] == "cpu"


def test_the_why_it_works_ablations_hold_partly_and_fail(tmp_path):
    """tab:depth, tab:ablation and tab:gen-ablation claims on constructed results."""

    def row(claim_id, root):
        (c,) = [c for c in claims() if c.id == claim_id]
        return evaluate(c, profiles=("cpu-annealed",), results_dir=root)

    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for k in range(1, 7):
        _cell(a, "tab:depth", f"B-st_{k}l", 0.90 + 0.005 * k, "cpu-annealed")
    _cell(a, "tab:depth", "B-mz_1l", 0.97, "cpu-annealed")
    assert row("depth-mz-1l-beats-every-depth", a)["verdict"] == "holds"
    for k, v in ((2, 0.90), (4, 0.95), (8, 0.92), (16, 0.88)):
        _cell(a, "tab:ablation", f"B-ng{k}-mz_full", v, "cpu-annealed")
        _cell(b, "tab:ablation", f"B-ng{k}-mz_full", 1.9 - v, "cpu-annealed")  # reversed order
    assert row("ablation-ng4-peaks", a)["verdict"] == "holds"  # +0.03, significant
    assert row("ablation-ng16-overfits", a)["verdict"] == "holds"
    r = row("ablation-ng16-overfits", b)  # n_g = 16 now best: refuted by it
    assert r["verdict"] == "does not hold here" and r["refuted_by"]["cell"] == "B-ng16-mz_full"
    for L in (16, 32):
        for k, (v_a, v_c) in {1: (0.95, 0.60), 4: (0.96, 0.70), 32: (0.955, 0.80)}.items():
            _cell(a, "tab:gen-ablation", f"L{L}-nmz{k}", v_a, "cpu-annealed")
            _cell(c, "tab:gen-ablation", f"L{L}-nmz{k}", v_c, "cpu-annealed")
    assert row("gen-ablation-nmz1-fits", a)["verdict"] == "holds"
    assert row("gen-ablation-diminishing", a)["verdict"] == "holds"
    assert row("gen-ablation-nmz1-fits", c)["verdict"] == "does not hold here"  # 0.60 < 0.70
    assert row("gen-ablation-diminishing", c)["verdict"] == "does not hold here"  # +0.10
    assert row("gen-ablation-diminishing", c)["value"].reason == Reason.THRESHOLDS


def test_uncertainty_claims_read_their_own_metric_and_paper_table(tmp_path):
    by = {c.id: c for c in claims("tab:ece-nll")}
    nll = by["ece-nll-ihw-nll-below-ensemble"]
    for cell, v in (("B-ihw-mz_full", 4.0), ("B-ensemble-st", 4.5), ("B-mcdropout-st", 3.0)):
        _cell(tmp_path, "tab:ece-nll", cell, v, "cpu-annealed", metric="nll")
    row = evaluate(nll, profiles=("cpu-annealed",), results_dir=tmp_path)
    assert row["ours"] == pytest.approx(0.5) and row["verdict"] == "holds"
    mc = evaluate(by["ece-nll-mc-dropout-best-nll"], ("cpu-annealed",), tmp_path)
    assert mc["ours"] == pytest.approx(1.0) and mc["verdict"] == "holds"
    spear = by["unc-comparison-ihw-ranks-errors"]
    paper = load_paper_table("tab:unc-comparison")
    s = {r["row"]: r["cells"]["Spearman"]["mean"] for r in paper["rows"]}
    row = evaluate(spear, results_dir=tmp_path)
    assert row["paper"] == pytest.approx(
        s["MZAttn (IHW)"] - max(s["MC-Dropout"], s["Deep Ensemble"])
    )
    assert row["paper_table"] == "tab:unc-comparison" and row["verdict"] == "not run"


def test_ambiguity_claims_one_per_noise_level(tmp_path):
    cs = {c.id: c for c in claims("tab:ambiguity")}
    assert len(cs) == 5 and all(c.compare for c in cs.values())
    _cell(tmp_path, "tab:ambiguity", "s0.3-mz_full", 0.95, "cpu-annealed")
    _cell(tmp_path, "tab:ambiguity", "s0.3-st", 0.90, "cpu-annealed")
    _cell(tmp_path, "tab:ambiguity", "s1.0-mz_full", 0.80, "cpu-annealed")
    _cell(tmp_path, "tab:ambiguity", "s1.0-st", 0.90, "cpu-annealed")
    ok = evaluate(cs["ambiguity-s0.3-mz-beats-st"], ("cpu-annealed",), tmp_path)
    bad = evaluate(cs["ambiguity-s1.0-mz-beats-st"], ("cpu-annealed",), tmp_path)
    assert ok["verdict"] == "holds" and ok["ours"] == pytest.approx(0.05)
    assert bad["verdict"] == "does not hold here" and bad["refuted_by"]["cell"] == "s1.0-st"
    paper = {r["row"]: r["cells"] for r in load_paper_table("tab:ambiguity")["rows"]}
    expect = paper["0.3"]["MZ R^2"]["mean"] - paper["0.3"]["ST R^2"]["mean"]
    assert ok["paper"] == pytest.approx(expect)


def test_a_claim_without_results_points_to_its_price(tmp_path):
    """'not run' is never silent: the row says where its table's price and turn are."""
    from mzlite.repro.experiments.scorecard import NOT_RUN_REASON

    rows = scorecard(tables=["tab:tdof-verify"], results_dir=tmp_path).rows
    assert rows and all(r["verdict"] == "not run" for r in rows)
    assert {r["reason"] for r in rows} == {NOT_RUN_REASON} and "coverage page" in NOT_RUN_REASON


def test_claims_about_pma_baselines_take_their_models_from_the_specs():
    from mzlite import nn as mznn
    from mzlite.repro.experiments.claims import pma_attention_baselines

    spec = ex.get_table("tab:meb")
    for d in (8, 16, 32):
        (fail,) = [c for c in claims("tab:meb") if c.id == f"meb-d{d}-pma-fail"]
        assert list(fail.cells) == pma_attention_baselines("tab:meb", f"d={d}")
        column = [c for c in spec.cells if c.column == f"d={d}" and c.part == "main"]
        for c in column:  # in the claim exactly when its spec says PMA-pooled attention baseline
            s = mznn.model_spec(c.model)
            kind = (s.family, s.encoder, c.model_kwargs.get("pool", s.pooling))
            assert (c.id in fail.cells) == (kind == ("baseline", "attention", "pma")), c.id
        # the mean-pool head, the state-space encoder and Deep Sets are not PMA attention
        assert not {f"d{d}-st_meanpool", f"d{d}-mamba_pma", f"d{d}-deepsets"} & set(fail.cells)
    with pytest.raises(ValueError, match="pooling must be one of"):
        mznn.registry.ModelSpec("x", "baseline", mznn.SetTransformer, mznn.SetTransformerConfig,
                                pooling="max")  # fmt: skip


def test_a_holds_that_is_evidence_against_the_change_says_so(tmp_path):
    """ "More matrix generators than 4 add nothing" holds on a loss as on a plateau: on a loss the
    row says it is evidence against them, with the best row of every column, from the data."""

    def row(root):
        (c,) = [c for c in claims() if c.id == "gen-ablation-diminishing"]
        return evaluate(c, profiles=("cpu-annealed",), results_dir=root)

    plateau, loss = tmp_path / "plateau", tmp_path / "loss"
    for L in (16, 32):
        for k, (v_p, v_l) in {1: (0.95, 0.80), 4: (0.96, 0.70), 32: (0.955, 0.60)}.items():
            _cell(plateau, "tab:gen-ablation", f"L{L}-nmz{k}", v_p, "cpu-annealed")
            _cell(loss, "tab:gen-ablation", f"L{L}-nmz{k}", v_l - 0.01 * (L == 32), "cpu-annealed")
    flat = row(plateau)
    assert flat["verdict"] == "holds" and flat["shows"] is None
    r = row(loss)
    assert r["verdict"] == "holds" and r["ours"] == pytest.approx(-0.10)
    shows = r["shows"]
    assert shows.kind == "against" and shows.gain == pytest.approx(-0.10)
    assert [c for c, _ in shows.best] == ["L16-nmz1", "L32-nmz1"]  # the best of each column
    assert [v for _, v in shows.best] == pytest.approx([0.80, 0.79])
    assert shows.one_row is not None
    assert shows.change == "more matrix generators than 4"


def test_a_holds_on_a_model_that_predicts_worse_than_its_neighbours_says_nothing_for_mz(tmp_path):
    """IHW's ECE on par with the ensemble's: evidence for MZAttn only where the MZ model it reads
    predicts at least as well as the models beside it (its Set Transformers, the yardstick)."""
    (claim,) = [c for c in claims("tab:ece-nll") if c.id == "ece-nll-ihw-ece-on-par"]

    def write(root, mz_r2):
        for cell, ece, r2 in (("B-ihw-mz_full", 0.03, mz_r2), ("B-ensemble-st", 0.02, 0.30),
                              ("B-mcdropout-st", 0.01, 0.30)):  # fmt: skip
            for s in range(3):
                test = {"ece": ece + 0.001 * s, "r2": r2 + SPREAD[s]}
                _write(root, "tab:ece-nll", cell, 0, "cpu-annealed", seed=s,
                       metrics={"test": test})  # fmt: skip
        _write(root, "tab:ece-nll", "B-set_stats", 0, "cpu-annealed",
               metrics={"test": {"r2": 0.60}})  # fmt: skip

    write(tmp_path / "weak", 0.08)
    write(tmp_path / "strong", 0.70)
    weak = evaluate(claim, ("cpu-annealed",), tmp_path / "weak")
    strong = evaluate(claim, ("cpu-annealed",), tmp_path / "strong")
    assert weak["verdict"] == strong["verdict"] == "holds"
    assert strong["shows"] is None
    shows = weak["shows"]
    assert shows.kind == "says nothing" and shows.model == "B-ihw-mz_full"
    assert shows.r2 == pytest.approx(0.08)
    assert dict(shows.beside) == pytest.approx({"B-ensemble-st": 0.30, "B-set_stats": 0.60})
    assert weak["why"].startswith("says nothing for MZAttn")


def test_a_result_is_parsed_once_and_each_reader_gets_its_own_copy(tmp_path, monkeypatch):
    from mzlite.repro.experiments import results

    def settle(path, age_s):  # as a committed file: modified a while ago
        then = time.time() - age_s
        os.utime(path, (then, then))

    def no_parse(text):
        raise AssertionError("parsed again")

    path = _write(tmp_path, "tab:tdof-verify", "L4-mz_1l", 0.5)
    settle(path, 60)
    (first,) = ex.load_results("tab:tdof-verify", "cpu", tmp_path)
    first["metrics"]["test"]["r2"] = -1.0  # a reader's change stays its own
    with monkeypatch.context() as m:
        m.setattr(results, "json", types.SimpleNamespace(loads=no_parse))
        (again,) = ex.load_results("tab:tdof-verify", "cpu", tmp_path)
    assert again["metrics"]["test"]["r2"] == 0.5 and again is not first

    def r2():
        return ex.load_results("tab:tdof-verify", "cpu", tmp_path)[0]["metrics"]["test"]["r2"]

    _write(tmp_path, "tab:tdof-verify", "L4-mz_1l", 0.75)  # rewritten: read again
    assert r2() == 0.75
    # a rewrite within the file system's timestamp granularity keeps the file's identity (same
    # inode, size and mtime): a file modified a moment ago is parsed every time
    stamp = path.stat().st_mtime_ns
    path.write_text(path.read_text().replace("0.75", "0.25"))
    os.utime(path, ns=(stamp, stamp))
    assert r2() == 0.25
    settle(path, 30)
    assert r2() == 0.25
