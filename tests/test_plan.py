"""mzlite.repro.experiments.plan: CPU-hour estimates from the per-epoch costs of results on disk."""

from __future__ import annotations

import json
import re

import pytest

from mzlite import nn as _nn
from mzlite.__main__ import main as cli
from mzlite.nn import build_model, count_parameters
from mzlite.repro import experiments as ex
from mzlite.repro.experiments.plan import decide, plan
from mzlite.tasks import make_task


def _write(
    root, table, cell, seed, profile, sizes, wall, epochs, threads=1, device="cpu", cpu=None
):
    spec = ex.get_table(table)
    c = spec.cell(cell)
    path = ex.result_path(spec, cell, seed, profile, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    res = {"format": ex.RESULT_FORMAT, "table": spec.label, "cell": cell, "seed": seed,
           "profile": profile, "task": c.task, "model": c.model, "sizes": list(sizes),
           "task_options": ex.check_task_options(c.task, c.options), "model_kwargs": c.model_kwargs,
           "wall_time_s": wall, "epochs_run": epochs,
           "provenance": {"num_threads": threads, "device": device},
           **({"history": {"cpu_time_s": cpu}} if cpu is not None else {}),
           "metrics": {"test": {"r2": 0.5}}}  # fmt: skip
    path.write_text(json.dumps(res))


def test_a_recorded_cpu_time_prices_a_run_that_a_loaded_machine_slowed(tmp_path):
    # 30 epochs at 2000/500 sets: 600 s of wall time on a loaded machine, 150 CPU s of its own
    _write(tmp_path, "tab:tdof-verify", "L4-mz_1l", 0, "cpu", (2000, 500, 1000), 600.0, 30,
           cpu=150.0)  # fmt: skip
    (row,) = plan("tab:tdof-verify", "cpu-converged", cells=["L4-mz_1l"], results_dir=tmp_path,
                  measure=False).rows  # fmt: skip
    assert row["s_per_epoch"] == pytest.approx(5.0)  # not 20: the wall time's
    # a result without it (written before it was recorded) is priced by wall time x threads
    _write(tmp_path, "tab:tdof-verify", "L4-mz_1l", 0, "cpu", (2000, 500, 1000), 600.0, 30)
    (row,) = plan("tab:tdof-verify", "cpu-converged", cells=["L4-mz_1l"], results_dir=tmp_path,
                  measure=False).rows  # fmt: skip
    assert row["s_per_epoch"] == pytest.approx(20.0)


def test_estimate_is_jobs_times_epochs_times_measured_cost(tmp_path):
    # a 30-epoch cpu result: 10 CPU s per epoch at 2000/500 sets (two threads, 5 s wall each)
    _write(tmp_path, "tab:tdof-verify", "L4-mz_1l", 0, "cpu", (2000, 500, 1000), 150.0, 30, 2)
    p = plan("tab:tdof-verify", "cpu-converged", cells=["L4-mz_1l"], results_dir=tmp_path,
             measure=False)  # fmt: skip
    (row,) = p.rows
    assert row["todo"] == 3 and row["done"] == 0 and row["s_per_epoch"] == pytest.approx(10.0)
    assert row["epochs"] == 80  # prior: 4 x patience 20, no cpu-converged results yet
    assert row["cpu_h"] == pytest.approx(3 * 80 * 10 / 3600)
    assert row["cpu_h_cap"] == pytest.approx(3 * 200 * 10 / 3600)
    # the same model on the same task prices another L; larger data scale the cost
    p2 = plan("tab:tdof-verify", "full", cells=["L32-mz_1l"], results_dir=tmp_path, measure=False)
    (r2,) = p2.rows
    units = lambda s: s[0] + s[1] / 3  # noqa: E731
    # (full trains tab:tdof-verify at 10K/2K/2K, the sizes of paper-sizes)
    assert r2["s_per_epoch"] == pytest.approx(10.0 * units((10_000, 2_000)) / units((2000, 500)))
    # finished results of the profile count as done and give the epoch estimate
    _write(tmp_path, "tab:tdof-verify", "L4-mz_1l", 0, "cpu-converged", (2000, 500, 2000),
           200.0, 40)  # fmt: skip
    (row,) = plan("tab:tdof-verify", "cpu-converged", cells=["L4-mz_1l"], results_dir=tmp_path,
                  measure=False).rows  # fmt: skip
    assert (row["todo"], row["done"], row["epochs"]) == (2, 1, 40)
    # the profile's own results (its precision, its code) price it once it has some
    assert row["s_per_epoch"] == pytest.approx(5.0) and "cpu-converged result" in row["cost_source"]
    assert row["epochs_source"] == "median of 1 cpu-converged result(s) of this cell"
    # another cell of the same model takes that model's epochs; another model the table's
    _write(tmp_path, "tab:tdof-verify", "L8-st_4l", 0, "cpu-converged", (2000, 500, 2000),
           300.0, 100)  # fmt: skip
    rows = {r["cell"]: r for r in plan("tab:tdof-verify", "cpu-converged", results_dir=tmp_path,
                                       measure=False).rows}  # fmt: skip
    assert rows["L16-mz_1l"]["epochs"] == 40 and "mz_full in" in rows["L16-mz_1l"]["epochs_source"]
    assert rows["L16-st_4l"]["epochs"] == 100 and rows["L4-mz_1l"]["epochs"] == 40


def test_a_gpu_result_gives_epochs_but_prices_no_cpu_hour(tmp_path):
    # a GPU run's wall time (15 other jobs beside it on one GPU) says nothing of a CPU's
    _write(tmp_path, "tab:tdof-verify", "L4-mz_1l", 0, "cpu-converged", (2000, 500, 2000), 20.0,
           40, device="cuda:0")  # fmt: skip
    (row,) = plan("tab:tdof-verify", "cpu-converged", cells=["L4-mz_1l"], results_dir=tmp_path,
                  measure=False).rows  # fmt: skip
    assert (row["todo"], row["epochs"]) == (2, 40) and row["s_per_epoch"] is None
    # a CPU result of the same cell prices it
    _write(tmp_path, "tab:tdof-verify", "L4-mz_1l", 1, "cpu-converged", (2000, 500, 2000), 200.0,
           40)  # fmt: skip
    (row,) = plan("tab:tdof-verify", "cpu-converged", cells=["L4-mz_1l"], results_dir=tmp_path,
                  measure=False).rows  # fmt: skip
    assert row["s_per_epoch"] == pytest.approx(5.0)


def test_models_without_results_have_no_estimate_unless_timed(tmp_path):
    p = plan("tab:meb", "cpu-converged", cells=["d8-deepsets"], results_dir=tmp_path,
             measure=False)  # fmt: skip
    assert p.rows[0]["cpu_h"] is None and "measure=False" in p.rows[0]["cost_source"]
    assert "without an estimate" in p.to_text()
    timed = plan("tab:meb", "cpu-converged", cells=["d8-deepsets"], results_dir=tmp_path)
    assert timed.rows[0]["s_per_epoch"] > 0 and "timed now" in timed.rows[0]["cost_source"]


def test_cli_plan(tmp_path, capsys):
    _write(tmp_path, "tab:tdof-verify", "L4-st_4l", 0, "cpu", (2000, 500, 1000), 60.0, 30)
    argv = ["plan", "tab:tdof-verify", "--cells", "L4-*", "--results-dir", str(tmp_path),
            "--no-measure", "--workers", "2"]  # fmt: skip
    assert cli(argv) == 0
    out = capsys.readouterr().out
    assert "tab:tdof-verify L4-st_4l" in out and "CPU h expected" in out and "2 worker" in out
    assert cli(["plan", "tab:nope"]) == 2
    with pytest.raises(ValueError, match="workers"):
        plan("tab:meb", workers=0)


# ---------------------------------------------------------------------------------------------
# The sequential decision rule
# ---------------------------------------------------------------------------------------------

SPREAD = (-0.01, 0.0, 0.01)


def _seeds(root, table, cell, r2, profile="cpu-annealed", seeds=3):
    """``seeds`` converged results of ``cell`` around test R^2 ``r2`` (100 s, 40 epochs)."""
    c = ex.get_table(table).cell(cell)
    for s in range(seeds):
        _write(root, table, cell, s, profile, (2000, 500, 2000), 100.0, 40)
        path = ex.result_path(table, cell, s, profile, root)
        res = json.loads(path.read_text())
        res["metrics"]["test"]["r2"] = r2 + SPREAD[s]
        res["convergence"] = {"converged": True, "stopped": True, "fitted": True, "rule": "t"}
        if not _nn.model_spec(c.model).trainable:
            res["epochs_run"], res["wall_time_s"] = 0, 0.1
        path.write_text(json.dumps(res))


def test_decide_orders_stops_refuted_claims_and_prices_each_step(tmp_path):
    T = "tab:hull"
    # d3: ST-Large significantly better than MZ: refuted, nothing more of d3 runs
    _seeds(tmp_path, T, "d3-mz_full", 0.50)
    _seeds(tmp_path, T, "d3-st_large", 0.80)
    # d6: the first step done (MZ, the yardstick, Standard, ST-Large) and survived
    for cell, v in (("d6-mz_full", 0.9), ("d6-st_large", 0.5), ("d6-st", 0.6)):
        _seeds(tmp_path, T, cell, v)
    _seeds(tmp_path, T, "d6-set_stats", 0.3, seeds=1)
    d = decide(T, "cpu-annealed", results_dir=tmp_path, measure=False)
    # the strength order comes from the results: Standard beat ST-Large in d6
    assert [r["model"] for r in d.strength[:2]] == ["st", "st_large"]
    assert d.strength[0]["score"] == 0.0 and d.strength[1]["score"] == 1.0
    by = {c["claim"]: c for c in d.claims}
    d3, d6, d9 = (by[f"tab-hull-{c}-mz_full-best"] for c in ("d3", "d6", "d9"))
    assert d3["status"] == "decided" and d3["row"]["why"].startswith("refuted by ST-Large")
    assert d6["status"] == "open" and d6["steps"][0]["todo"] == 0
    assert set(d6["steps"][1]["cells"]) == {"d6-hypernet", "d6-perceiver", "d6-la_st"}
    assert d9["steps"][0]["cells"] == ["d9-mz_full", "d9-set_stats", "d9-st", "d9-st_large"]
    nxt = d.next_jobs()
    assert not any(c.startswith("d3-") for _, c in nxt)
    # d9: MZ 0.05 below Standard, no one significantly (wide seeds): the gap already fails the
    # weaker test and another baseline can only lower it, so the rest of d9 is not run
    _seeds(tmp_path, T, "d9-mz_full", 0.40)
    for s, v in ((1, 0.45), (2, 0.80), (0, 0.10)):  # seed 0 last: _seeds writes seed 0
        _seeds(tmp_path, T, "d9-st", v, seeds=1)  # one value per seed: a std of 0.35
        path = ex.result_path(T, "d9-st", 0, "cpu-annealed", tmp_path)
        moved = path.with_name(f"d9-st__seed{s}.json")
        res = json.loads(path.read_text())
        res["seed"], res["metrics"]["test"]["r2"] = s, v
        moved.write_text(json.dumps(res))
    now = next(c for c in decide(T, "cpu-annealed", results_dir=tmp_path, measure=False).claims
               if c["claim"] == "tab-hull-d9-mz_full-best")  # fmt: skip
    # decided for the plan (no further run can make it hold), "not decided" for the scorecard
    assert now["status"] == "decided" and now["row"]["verdict"] == "not decided"
    assert now["row"]["value"].reason == "cannot-hold"  # engine.Reason.CANNOT_HOLD
    assert now["row"]["value"].refutation.value == pytest.approx(-0.05)
    for c in ("d9-mz_full", "d9-st"):
        for s in range(3):
            ex.result_path(T, c, s, "cpu-annealed", tmp_path).unlink()
    assert ("tab:hull", "d6-perceiver") in nxt and ("tab:hull", "d9-mz_full") in nxt
    assert ("tab:hull", "d9-perceiver") not in nxt  # d9's second step waits for its first
    # each step's price is plan's, cell by cell
    rows = {r["cell"]: r for r in plan(T, "cpu-annealed", results_dir=tmp_path,
                                       measure=False).rows}  # fmt: skip
    step = d9["steps"][0]
    assert step["cpu_h"] == pytest.approx(sum(rows[c]["cpu_h"] for c in step["cells"]))
    assert step["todo"] == 3 * 3 + 1
    text = d.to_text()
    assert "refuted by ST-Large" in text and "step 2 (only if no model of step 1" in text
    assert "python -m mzlite run tab:hull --profile cpu-annealed" in text
    assert text.index("tab-hull-d6-mz_full-best") < text.index("decided (")


def test_a_claim_a_more_faithful_profile_decided_runs_nothing_under_a_weaker_one(tmp_path):
    """d3 refuted at the paper's sizes: under cpu-annealed, where nothing of it ran, it is
    decided (the strongest evidence decides), and its cells are no next step there."""
    T = "tab:hull"
    _seeds(tmp_path, T, "d3-mz_full", 0.50, profile="paper-sizes")
    _seeds(tmp_path, T, "d3-st_large", 0.80, profile="paper-sizes")
    d = decide(T, "cpu-annealed", results_dir=tmp_path, measure=False)
    d3 = next(c for c in d.claims if c["claim"] == "tab-hull-d3-mz_full-best")
    assert d3["status"] == "decided" and d3["row"]["verdict"] == "not run"
    assert not any(c.startswith("d3-") for _, c in d.next_jobs())
    # under the paper's protocol, more faithful still, it is open
    full = decide(T, "full", results_dir=tmp_path, measure=False)
    assert next(c for c in full.claims if c["claim"] == d3["claim"])["status"] == "open"


def test_a_claim_not_run_states_its_next_step_and_its_price(tmp_path):
    from mzlite.repro.experiments.coverage import next_steps_html
    from mzlite.repro.experiments.plan import priced, step_words
    from mzlite.repro.experiments.scorecard import scorecard

    T = "tab:hull"
    _seeds(tmp_path, T, "d3-mz_full", 0.50)  # ST-Large better: d3 is decided, not run no more
    _seeds(tmp_path, T, "d3-st_large", 0.80)
    _write(tmp_path, "tab:meb", "d8-st", 0, "cpu", (2000, 500, 2000), 100.0, 10)  # a price
    d = decide(T, "cpu-annealed", results_dir=tmp_path, measure=False)
    steps = {r["claim"]: r for r in d.next_steps()}
    assert "tab-hull-d3-mz_full-best" not in steps  # refuted: no next step
    d9 = steps["tab-hull-d9-mz_full-best"]
    assert d9["cells"] == ["d9-mz_full", "d9-set_stats", "d9-st_large", "d9-st"]  # strongest first
    assert d9["todo"] == 10 and d9["step"] == 1
    assert d9["cells_text"] == "MZAttn-Full, set statistics (ridge), ST-Large and Standard at d = 9"
    assert d9["command"].endswith("--cells d9-mz_full,d9-set_stats,d9-st_large,d9-st")
    # a bare setting as the row is named with its model
    words = step_words("tab:ablation", ["B-ng4-mz_full"])
    assert words == "MZAttn-Full (n_g = 4) at Task B: Set Match."
    # the scorecard's rows not run quote the step; the rows with results keep their reason
    sc = scorecard(T, ("cpu-annealed",), tmp_path)
    out = priced(sc, "cpu-annealed", results_dir=tmp_path)
    by = {r["claim"]: r for r in out.rows}
    assert by["tab-hull-d3-mz_full-best"]["reason"] == next(
        r["reason"] for r in sc.rows if r["claim"] == "tab-hull-d3-mz_full-best"
    )
    reason = by["tab-hull-d9-mz_full-best"]["reason"]
    assert (
        reason.startswith("no result yet: next under the sequential rule") and "10 runs" in reason
    )
    assert d9["cells_text"] in reason and "under cpu-annealed" in reason
    html = out._repr_html_()
    assert "[10 runs, " in html[html.index("<details") :]
    # the chapter's table: one row per open claim, cheapest first, commands as footnotes
    table = next_steps_html("cpu-annealed", tmp_path, [T])._repr_html_()
    assert table.count("<tr>") == len(steps) + 1 and "python -m mzlite run tab:hull" in table
    cpu = [float(x) for x in re.findall(r'<td class="mz-num">([\d.]+)</td></tr>', table)]
    assert cpu == sorted(cpu) and len(cpu) == len(steps)


def test_cli_plan_decide(tmp_path, capsys):
    argv = ["plan", "tab:tdof-verify", "--decide", "--no-measure", "--results-dir", str(tmp_path)]
    assert cli(argv) == 0
    out = capsys.readouterr().out
    assert "tdof-separation" in out and "step 1 (first): L32-mz_1l, L32-set_stats" in out
    assert cli(["plan", "tab:transfer-matrix", "--decide", "--no-measure", "--results-dir",
                str(tmp_path)]) == 0  # fmt: skip
    assert "no cell claims to order" in capsys.readouterr().out
    assert cli([*argv, "--cells", "L4-*"]) == 2
    assert cli(["plan", "tab:meb", "--first", "1"]) == 2
    with pytest.raises(ValueError, match="first must be an int >= 0"):
        decide("tab:meb", first=-1)


def test_a_model_without_results_on_a_task_is_extrapolated_or_scaled(tmp_path):
    units = lambda s: s[0] + s[1] / 3  # noqa: E731
    size = (2000, 500, 2000)
    # st on hull and MEB, perceiver on MEB only: perceiver on hull = st on hull x their MEB ratio
    _write(tmp_path, "tab:hull", "d3-st", 0, "cpu", size, 100.0, 10)
    _write(tmp_path, "tab:meb", "d8-st", 0, "cpu", size, 200.0, 10)
    _write(tmp_path, "tab:meb", "d8-perceiver", 0, "cpu", size, 600.0, 10)
    (row,) = plan("tab:hull", "cpu-annealed", cells=["d3-perceiver"], results_dir=tmp_path,
                  measure=False).rows  # fmt: skip
    expect = 100.0 / 10 / units(size) * (600.0 / 200.0) * units(size)
    assert row["s_per_epoch"] == pytest.approx(expect)
    assert row["cost_source"].startswith("extrapolated: 3.0 x st on hull_volume")
    # a deeper Set Transformer on Task B from the plain one, by parameter count
    _write(tmp_path, "tab:main-results", "B-st", 0, "cpu", size, 50.0, 10)
    (row,) = plan("tab:depth", "cpu-annealed", cells=["B-st_3l"], results_dir=tmp_path,
                  measure=False).rows  # fmt: skip
    d_in = make_task("chamfer_matching", 2, 0).d_in
    n = {k: count_parameters(build_model("st", d_in, n_enc=k)) for k in (2, 3)}  # default: 2
    assert row["s_per_epoch"] == pytest.approx(50.0 / 10 * n[3] / n[2])
    assert row["cost_source"].startswith("scaled:") and "by parameter count" in row["cost_source"]


def test_gpu_hours_come_from_the_measured_throughput_of_the_model_or_its_family(tmp_path):
    from mzlite.repro.experiments.plan import gpu_text

    p = plan("tab:main-results", "cpu-annealed", cells=["F-mz_full", "F-st", "F-st_large",
             "F-set_stats"], results_dir=tmp_path, measure=False)  # fmt: skip
    measured = {"device": "cuda: test", "commit": "x", "batch": 128, "n_max": 30, "rows": [
        {"model": "mz_full", "mode": "eager", "K": 1, "model_steps_per_s": 10.0},
        {"model": "mz_full", "mode": "stacked 2", "K": 2, "model_steps_per_s": 40.0},
        {"model": "mz_full", "mode": "stacked 32", "K": 32, "model_steps_per_s": 400.0},
        {"model": "st", "mode": "eager", "K": 1, "model_steps_per_s": 80.0},
    ]}  # fmt: skip
    rows = {r["cell"]: r for r in p.gpu_hours(measured)}
    assert set(rows) == {"F-mz_full", "F-st", "F-st_large"}  # the closed form trains nothing
    mz = next(r for r in p.rows if r["cell"] == "F-mz_full")
    assert 2 <= mz["todo"] < 32  # its seeds stack to at most their count: 40/s, not 400/s
    steps = mz["todo"] * -(-mz["sizes"][0] // 128)  # one epoch of every job, batch 128
    assert rows["F-mz_full"]["gpu_h"] == pytest.approx(mz["epochs"] * steps / 40.0 / 3600)
    assert rows["F-mz_full"]["gpu_h_cap"] == pytest.approx(mz["epoch_cap"] * steps / 40.0 / 3600)
    # ST-Large was not measured: the Set Transformer, its family's measured model, prices it
    assert rows["F-st_large"]["measured_as"] == "st" and rows["F-st_large"]["gpu_h"] > 0
    text = gpu_text(list(rows.values()), measured)
    assert "cuda: test" in text and "device call(s) of 10 minutes" in text
    only_mz = {**measured, "rows": measured["rows"][:3]}
    assert {r["cell"]: r["gpu_h"] for r in p.gpu_hours(only_mz)}["F-st"] is None


def test_the_sizes_the_paper_does_not_state_are_written_from_one_constant():
    """The profiles at the paper's sizes and tab:tdof-verify's note say the sizes of
    ``UNSTATED_PAPER_SIZES`` in the paper's words, derived, not restated."""
    from mzlite.repro.experiments.specs import PROFILES, UNSTATED_PAPER_SIZES, sizes_text

    assert sizes_text((10_000, 2_000, 500)) == "10K/2K/500"
    words = sizes_text(UNSTATED_PAPER_SIZES["tab:tdof-verify"])
    for name in ("paper-sizes", "full"):
        assert f"tab:tdof-verify {words}" in PROFILES[name].description
        assert PROFILES[name].sizes_by_table == UNSTATED_PAPER_SIZES
    note = ex.get_table("tab:tdof-verify").notes
    assert f"{words} under the profiles at the paper's sizes" in note


# ---------------------------------------------------------------------------------------------
# Priced for this machine
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def fake_epoch_cost(monkeypatch, tmp_path):
    """``_epoch_cost_here`` without a fit: this CPU costs ``ratio[family]`` times what the
    reference cell's result recorded (per set unit); calls are counted. The cache under
    tmp_path."""
    from mzlite.repro.experiments import plan as plan_mod

    monkeypatch.setenv("MZLITE_CACHE", str(tmp_path / "cache"))
    calls, ratio = [], {"mz": 2.0, "baseline": 0.5}

    def fake(job):
        calls.append(job.cell.id)
        (res,) = [r for r in ex.load_results(job.table, job.profile.name, tmp_path / "results")
                  if r["cell"] == job.cell.id]  # fmt: skip
        return plan_mod._cpu_s_per_epoch(res) * ratio[ex.model_family(job.cell.model)]

    monkeypatch.setattr(plan_mod, "_epoch_cost_here", fake)
    return calls


def test_costs_recorded_elsewhere_are_rescaled_to_this_cpu(tmp_path, fake_epoch_cost,
                                                           monkeypatch):  # fmt: skip
    """With ``measure`` every cost that comes from results on disk is multiplied by this CPU's
    factor for the model's family (an epoch of the family's reference cell fitted here over its
    recorded cost); timed once per key, read back after; another CPU times again; without
    ``measure`` the costs are as recorded."""
    from mzlite.repro.experiments import plan as plan_mod

    root = tmp_path / "results"
    _write(root, "tab:tdof-verify", "L4-mz_1l", 0, "cpu", (2000, 500, 1000), 150.0, 30)
    _write(root, "tab:tdof-verify", "L4-st_4l", 0, "cpu", (2000, 500, 1000), 60.0, 30)
    cells = dict(cells=["L4-mz_1l", "L4-st_4l"], results_dir=root)
    recorded = {r["cell"]: r for r in plan("tab:tdof-verify", "cpu", measure=False, **cells).rows}
    assert fake_epoch_cost == []  # measure=False times nothing
    here = plan("tab:tdof-verify", "cpu", **cells)
    rows = {r["cell"]: r for r in here.rows}
    assert sorted(fake_epoch_cost) == ["L4-mz_1l", "L4-st_4l"]  # one reference per family
    for cell, factor in (("L4-mz_1l", 2.0), ("L4-st_4l", 0.5)):  # MZ, and ST (baseline family)
        assert rows[cell]["s_per_epoch"] == pytest.approx(factor * recorded[cell]["s_per_epoch"])
        assert rows[cell]["cpu_h"] == pytest.approx(factor * recorded[cell]["cpu_h"])
        assert rows[cell]["cost_source"].endswith(f"; x{factor:.2f} for this CPU")
    text = here.to_text()
    assert "priced for this CPU" in text and "mz models: 2.00x" in text
    assert "tab:tdof-verify L4-mz_1l (cpu)" in text
    # the timings are stored: another plan reads them back
    plan("tab:tdof-verify", "cpu", **cells)
    assert len(fake_epoch_cost) == 2
    # another CPU (or torch, source, reference): timed again
    monkeypatch.setattr(plan_mod, "cpu_model", lambda: "Another CPU")
    again = plan("tab:tdof-verify", "cpu", **cells)
    assert len(fake_epoch_cost) == 4 and "Another CPU" in again.to_text()


def test_a_family_without_results_takes_the_median_factor():
    from mzlite.repro.experiments.plan import _factor

    machine = {"mz": {"factor": 3.0}, "baseline": {"factor": 1.0}}
    assert _factor(machine, "mz_full") == 3.0 and _factor(machine, "st") == 1.0
    assert _factor(machine, "deepsets") == pytest.approx(2.0)


@pytest.mark.slow
def test_the_epoch_cost_here_is_a_real_fit(monkeypatch):
    """The timing itself (no value asserted: it is this machine's): a short fit of a real cell
    under its profile's config, CPU seconds per set unit of its last epoch, positive."""
    from mzlite.repro.experiments import plan as plan_mod

    monkeypatch.setitem(plan_mod.REFERENCE_FIT, "n_train", 64)
    monkeypatch.setitem(plan_mod.REFERENCE_FIT, "n_val", 32)
    (job,) = ex.jobs("tab:main-results", "cpu-converged", [0], cells=["D-deepsets"])
    cost = plan_mod._epoch_cost_here(job)
    assert 0 < cost < 1  # CPU s per set: DeepSets takes well under a second per set


def test_a_model_with_no_result_is_timed_beside_one_that_has_results_on_its_task(
    tmp_path, monkeypatch
):
    # ST-4L has a result on the task, MZ-1L none anywhere (nothing to extrapolate from) and no
    # sibling of its class: MZ-1L is timed beside ST-4L and priced as ST-4L's recorded cost x the
    # ratio timed here x this CPU's factor (the recorded cost is another machine's)
    monkeypatch.setenv("MZLITE_CACHE", str(tmp_path / "cache"))  # the epoch timed here
    size = (2000, 500, 2000)
    _write(tmp_path, "tab:tdof-verify", "L4-st_4l", 0, "cpu", size, 100.0, 10)
    st_epoch = 100.0 / 10
    p = plan("tab:tdof-verify", "cpu-annealed", cells=["L4-mz_1l"], results_dir=tmp_path)
    (row,) = p.rows
    m = re.match(r"timed now: ([\d.]+) x st,n_enc=4 on quadratic_tdof", row["cost_source"])
    assert m, row["cost_source"]
    ratio = row["s_per_epoch"] / (st_epoch * p.machine["baseline"]["factor"])
    assert ratio > 0 and float(m.group(1)) == pytest.approx(ratio, abs=0.051)


def test_decide_runs_the_cells_a_claim_reads_where_they_run(tmp_path):
    """Task B's claim reads its near-copy cells at 1e-3 plateau (``Claim.read_on``): its steps
    name those and near-copy's yardstick, and under cpu-annealed, whose rates they already are,
    the runs are their aliases' (the near-copy cells at the table's rates), priced and commanded
    there."""
    d = decide("tab:main-results", "cpu-annealed", results_dir=tmp_path, measure=False)
    (b,) = [c for c in d.claims if c["claim"] == "main-results-B-mz-beats-matched"]
    assert b["status"] == "open" and b["next"]["step"] == 1
    # MZ, then the yardstick the engine reads: near-copy's, a cell of the calibration
    assert b["next"]["cells"][:2] == ["B-near-copy-lr1e-3-mz_full", "cal-B-near-copy-set_stats"]
    assert b["next"]["where"]["B-near-copy-lr1e-3-mz_full"] == (
        "tab:main-results", "B-near-copy-mz_full")  # fmt: skip
    assert b["next"]["todo"] == 3 * 3 + 1  # three seeds a model, one of the closed form
    assert ("tab:main-results", "B-near-copy-mz_full") in d.next_jobs()
