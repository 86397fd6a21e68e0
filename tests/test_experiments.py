"""The experiment registry, runner, CLI and report (mzlite.repro.experiments,
mzlite.repro.experiments.report).

Everything writes to temporary directories (results and dataset cache); training uses the smoke
profile restricted to a few cells so the whole file runs in a couple of minutes on a CPU."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from mzlite import nn
from mzlite.__main__ import main as cli
from mzlite.repro import experiments as ex
from mzlite.repro.experiments.cells import grid_cells
from mzlite.repro.experiments.plan import plan
from mzlite.repro.experiments.protocols import CURRENT, PROTOCOL_STYLES
from mzlite.repro.experiments.report import report
from mzlite.repro.experiments.results import OtherTrainingWarning
from mzlite.repro.experiments.runner import PARENT_POLL_S
from mzlite.repro.paper import load_paper_table, paper_cell
from mzlite.tasks import make_splits, make_task
from mzlite.train import fit

REPO = Path(__file__).resolve().parents[1]
TDOF_CELLS = ["L4-*", "L32-*"]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """One results and one cache directory for the module (datasets are generated once)."""
    root = tmp_path_factory.mktemp("exp")
    return {"results_dir": root / "results", "cache_dir": root / "cache"}


def _run(table, dirs, **kw):
    kw.setdefault("progress", False)
    return ex.run(table, "smoke", threads=1, data_workers=1, **dirs, **kw)


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


def test_registry_has_the_required_tables():
    for label in ("tab:meb", "tab:tdof-verify", "tab:main-results"):
        assert label in ex.TABLES
    # a property, not an inventory: a new profile is an addition, not a failure
    assert {"smoke", "cpu", "cpu-converged", "full"} <= set(ex.PROFILES)
    for name, prof in ex.PROFILES.items():
        assert prof.name == name and prof.description.startswith(name), name


@pytest.mark.parametrize("label", ex.TABLES)
def test_every_table_names_its_chapter_and_valid_cells(label):
    spec = ex.get_table(label)
    assert (REPO / "notebooks" / f"{spec.chapter}.ipynb").exists(), spec.chapter
    for c in spec.cells:
        assert ex.CellKey(label, c.id).cell == c.id and spec.cell(c.id) is c
        assert ex.model_family(c.model) in nn.registry.FAMILIES


def test_cell_keys_fail_loudly_and_tables_need_a_chapter():
    assert ex.CellKey("meb", "d8-st").table == "tab:meb"
    with pytest.raises(ValueError, match="no cell 'd8-renamed' in tab:meb; cells: "):
        ex.CellKey("tab:meb", "d8-renamed")
    with pytest.raises(ValueError, match="unknown table name 'tab:nope'"):
        ex.CellKey("tab:nope", "d8-st")
    cell = ex.get_table("tab:meb").cells[0]
    with pytest.raises(ValueError, match="chapter must be a notebook name"):
        ex.TableSpec("tab:x", "a table", (cell,))


def test_a_grid_column_overrides_the_grids_fields_and_its_yardstick_follows_it():
    """``grid_cells``: a column's own fields (task, sizes, batch, model overrides) win over the
    grid's for its cells and its yardstick; the other columns keep the grid's."""
    own = {
        "task": "set_regression",
        "sizes": (50, 20, 20),
        "batch_size": 16,
        "model_kwargs": {"n_enc": 1},
    }
    cols = [("a", "A", {}, "A R^2", own), ("b", "B", {"d": 8}, "")]
    models = [("mz", "mz_full", "MZ", {"n_g": 2}, 123)]
    cells = grid_cells(cols, models, "meb_radius", full_seeds=2, train={"lr": 1e-3})
    assert [c.id for c in cells] == ["a-mz", "a-set_stats", "b-mz", "b-set_stats"]
    a, a_stats, b, b_stats = cells
    assert (a.task, a.sizes, a.batch_size, a.model_kwargs) == (
        "set_regression",
        (50, 20, 20),
        16,
        {"n_g": 2, "n_enc": 1},
    )
    assert a.match_params == 123 and a.full_seeds == 2 and a.train == {"lr": 1e-3}
    assert a.paper == (ex.PaperRef("MZ", "A R^2", "r2"),) and b.paper == ()
    assert (a_stats.task, a_stats.sizes, a_stats.batch_size) == ("set_regression", (50, 20, 20), 16)
    assert (b.task, b.sizes, b.batch_size, b.model_kwargs) == (
        "meb_radius",
        (10_000, 2_000, 2_000),
        128,
        {"n_g": 2},
    )
    assert b_stats.full_seeds == 1 and b_stats.options == {"d": 8}


@pytest.mark.parametrize("label", ex.TABLES)
def test_every_paper_reference_exists(label):
    spec = ex.get_table(label)
    table = load_paper_table(label)  # raises if data/paper lacks the table
    assert table["label"] == label
    for c in spec.cells:
        for ref in c.paper:
            cell = paper_cell(label, ref.row, ref.column)  # KeyError if row/column is wrong
            assert "mean" in cell
        if c.part == "ablation" or c.model == ex.SET_STATS:
            assert not c.paper  # extra cells never claim a paper number
    for d in spec.derived:
        assert paper_cell(label, d.row, d.column)["mean"] is not None
    # every task setting shows how hard it is: one set-statistics row per (task, options)
    settings = {(c.task, json.dumps(c.options, sort_keys=True)) for c in spec.cells}
    stats = {
        (c.task, json.dumps(c.options, sort_keys=True))
        for c in spec.cells
        if c.model == ex.SET_STATS
    }
    assert stats == settings


@pytest.mark.parametrize("label", ["tab:meb", "tab:tdof-verify", "tab:main-results"])
def test_core_tables_cover_every_paper_number(label):
    """Independent of the spec: walk data/paper and check each R^2/MSE number has a cell."""
    spec = ex.get_table(label)
    covered = {(r.row, r.column) for c in spec.cells for r in c.paper}
    covered |= {(d.row, d.column) for d in spec.derived}
    missing = []
    for row in load_paper_table(label)["rows"]:
        for col, cell in row["cells"].items():
            if col == "Params" or cell["mean"] is None:
                continue
            if label == "tab:main-results" and col.startswith(("Task C", "Task E")):
                continue  # ModelNet40 / ScanObjectNN: no offline data (stated in the notes)
            if (row["row"], col) not in covered:
                missing.append((row["row"], col))
    assert not missing


def test_full_profile_follows_the_paper_protocol():
    j = next(j for j in ex.jobs("tab:meb", "full") if j.cell.id == "d8-mz_full")
    cfg = j.train_config()
    # app:impl hyperparameter table
    assert (cfg.epochs, cfg.lr, cfg.weight_decay, cfg.warmup_epochs) == (200, 1e-4, 1e-5, 5)
    assert (cfg.patience, cfg.grad_clip, cfg.batch_size) == (20, 1.0, 256)
    assert not cfg.normalize_targets
    assert len([x for x in ex.jobs("tab:meb", "full") if x.cell.id == "d8-mz_full"]) == 5
    # tab:main-results Task A: 5 seeds, 3 for the parameter-matched models; Task B: 5K/1K/1K
    full = ex.jobs("tab:main-results", "full")
    assert sum(x.cell.id == "A-st" for x in full) == 5
    assert sum(x.cell.id == "A-st_large" for x in full) == 3
    assert next(x for x in full if x.cell.id == "B-st").sizes == (5_000, 1_000, 1_000)
    # normed tables standardise targets, raw ones do not
    jn = next(iter(ex.jobs("tab:mst-normed", "full", models=["st"])))
    assert jn.train_config().normalize_targets
    smoke = ex.jobs("tab:meb", "smoke")
    assert all(x.sizes == (128, 64, 64) and x.train_config().epochs == 3 for x in smoke)
    cpu = {x.cell.id: x for x in ex.jobs("tab:main-results", "cpu")}
    assert cpu["B-st"].sizes == (2_000, 500, 1_000) and cpu["B-st"].seed == 0
    assert cpu["D-st"].sizes == (2_000, 500, 1_000) and cpu["D-st"].train_config().epochs == 30


def test_converged_cpu_profile_standardises_targets_and_stops_by_patience():
    conv = {j.cell.id: j for j in ex.jobs("tab:meb", "cpu-converged")}
    cfg = conv["d8-mz_full"].train_config()
    assert cfg.normalize_targets and cfg.patience == 20 and cfg.epochs == 200
    assert cfg.epochs >= 10 * cfg.patience  # the cap bounds a runaway run; patience stops runs
    prof = ex.get_profile("cpu-converged")
    assert cfg.lr == prof.lr_by_family["mz"]
    assert conv["d8-st"].train_config().lr == prof.lr_by_family["baseline"]
    assert conv["d8-deepsets"].train_config().lr == prof.lr_by_family["deepsets"]
    # three seeds per cell, one per set-statistics row; training capped at 2K/500, test not
    assert sum(j.cell.id == "d8-mz_full" for j in ex.jobs("tab:meb", "cpu-converged")) == 3
    assert conv["d8-st"].sizes == (2_000, 500, 2_000)
    tdof = {j.cell.id: j for j in ex.jobs("tab:tdof-verify", "cpu-converged")}
    assert tdof["L4-mz_1l"].sizes == (2_000, 500, 2_000)
    # at the paper's sizes, its protocol trains the sizes it states none of as paper-sizes does
    for paper in ("paper-sizes", "full"):
        assert ex.job("tab:tdof-verify", "L32-mz_1l", paper, 0).sizes == (10_000, 2_000, 2_000)
    # the tdof learning-rate ablation: MZ-1L at the Set Transformer's rate, nothing else changed
    abl, main = tdof["abl-L16-lr0.001-mz_1l"], tdof["L16-mz_1l"]
    assert abl.train_config().lr == 1e-3 != main.train_config().lr
    assert dataclasses.replace(abl.train_config(), lr=main.train_config().lr) == main.train_config()
    assert (abl.cell.options, abl.cell.model, abl.cell.model_kwargs, abl.sizes) == (
        main.cell.options,
        main.cell.model,
        main.cell.model_kwargs,
        main.sizes,
    )
    # the raw-target ablation keeps raw targets under this profile (the cell's setting wins)
    assert not conv["abl-d8-raw-st"].train_config().normalize_targets
    assert not conv["abl-d8-scale-st"].train_config().normalize_targets
    assert conv["abl-d8-scale-ynorm-st"].train_config().normalize_targets
    # each result says where its learning rate came from, and the probe's output is quoted
    proto = ex.protocol(conv["d8-mz_full"])
    assert proto["family"] == "mz" and "lr_probe.py" in proto["lr_source"]
    assert ex.protocol(conv["abl-d8-lr0.0003-st"])["lr_source"] == "cell abl-d8-lr0.0003-st"
    assert prof.lr_by_family["mz"] == 3e-3
    # each rate per family is the one its probe's printed output chose (kept beside the probe)
    for name in ("cpu-converged", "cpu-annealed"):
        printed = (REPO / "benchmarks" / f"lr_probe-{name}.txt").read_text()
        chosen = dict(
            re.findall(r"^(\w+): mean relative excess .* -> lr ([\d.e-]+)$", printed, re.M)
        )
        assert {f: float(lr) for f, lr in chosen.items()} == ex.get_profile(name).lr_by_family
    assert ex.model_family("mz_large") == "mz" and ex.model_family("perceiver") == "baseline"
    with pytest.raises(ValueError, match="unknown model"):
        ex.model_family("nope")


def test_epoch_cap_ablation_is_longer_only_where_the_profile_lets_cells_set_epochs():
    """A cell's own epoch cap (tab:transfer-matrix's cap-400 ablation) holds under the converged
    and full protocols; the smoke check and the 30-epoch profile keep their own epochs."""
    cap, main = "abl-raw-hull-cap400-mz_large", "raw-hull-mz_large"
    for profile in ("cpu-converged", "full"):
        jobs = {j.cell.id: j for j in ex.jobs("tab:transfer-matrix", profile)}
        cfg, base = jobs[cap].train_config(), jobs[main].train_config()
        assert cfg.epochs == 400 and base.epochs == 200, profile
        assert dataclasses.replace(cfg, epochs=base.epochs) == base  # nothing else differs
    for profile in ("smoke", "cpu"):  # there the ablation is its main cell: not run twice
        assert ex.aliases("tab:transfer-matrix", profile)[cap] == main
        assert cap not in {j.cell.id for j in ex.jobs("tab:transfer-matrix", profile)}
    with pytest.raises(ValueError, match="fixed_train names fields"):
        dataclasses.replace(ex.get_profile("smoke"), fixed_train=("patience", "amp"))


def test_an_ablation_variant_equal_to_the_profile_is_not_run_twice():
    # standardised targets are the converged profile's own protocol; raw targets the paper's
    conv, full = ex.aliases("tab:meb", "cpu-converged"), ex.aliases("tab:meb", "full")
    assert conv["abl-d8-ynorm-st"] == "d8-st" and "abl-d8-raw-st" not in conv
    assert full["abl-d8-raw-mz_full"] == "d8-mz_full" and "abl-d8-ynorm-mz_full" not in full
    ids = {j.cell.id for j in ex.jobs("tab:meb", "cpu-converged")}
    assert "abl-d8-ynorm-st" not in ids and "abl-d8-raw-st" in ids
    assert "abl-d8-ynorm-st" in {j.cell.id for j in ex.jobs("tab:meb", "full")}
    # an alias is the same experiment: same resolved protocol, sizes and data
    spec, prof = ex.get_table("tab:meb"), ex.get_profile("full")
    raw, main = (ex.Job(spec.label, spec.cell(c), 0, prof, Path(), Path(), Path(), "cpu")
                 for c in ("abl-d8-raw-st", "d8-st"))  # fmt: skip
    assert raw.train_config() == main.train_config() and raw.sizes == main.sizes


def test_a_cell_that_is_an_earlier_tables_experiment_reads_its_runs(tmp_path):
    """Under cpu-annealed (every target standardised) tab:hull-normed is tab:hull, and
    tab:mz-efficient's rotation-matching cells are tab:main-results' Task F: run once, there."""
    lent = ex.shared("tab:mz-efficient", "cpu-annealed")
    assert lent["rotmatch-st"] == ("tab:main-results", "F-st")
    assert lent["rotmatch-mz_full"] == ("tab:main-results", "F-mz_full")
    hull = ex.shared("tab:hull-normed", "cpu-annealed")
    assert hull["d6-st"] == ("tab:hull", "d6-st") and len(hull) == len(
        ex.get_table("tab:hull-normed").cells)  # fmt: skip
    # under full raw against standardised targets: only the closed-form yardstick is shared
    assert set(ex.shared("tab:hull-normed", "full")) == {"d3-set_stats", "d6-set_stats",
                                                         "d9-set_stats"}  # fmt: skip
    assert ex.shared("tab:main-results", "cpu-annealed") == {}  # registered first: lends only
    # the shared experiment is the same job: protocol, sizes and data
    a = ex.jobs("tab:main-results", "cpu-annealed", [0], cells=["F-st"])[0]
    spec, prof = ex.get_table("tab:mz-efficient"), ex.get_profile("cpu-annealed")
    b = ex.Job(spec.label, spec.cell("rotmatch-st"), 0, prof, Path(), Path(), Path(), a.device)
    assert (a.train_config(), a.sizes, a.cell.task, a.cell.options) == (
        b.train_config(), b.sizes, b.cell.task, b.cell.options)  # fmt: skip
    # not run again: no job, and asking for one names where it runs
    assert not {j.cell.id for j in ex.jobs(spec, "cpu-annealed")} & set(lent)
    with pytest.raises(ValueError, match="is run as tab:main-results F-st under cpu-annealed"):
        ex.job(spec, "rotmatch-st", "cpu-annealed")
    # its results are the lender's, as they are on disk (their table field says who ran them)
    path = ex.result_path("tab:main-results", "F-st", 0, "cpu-annealed", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"table": "tab:main-results", "profile": "cpu-annealed",
                                "cell": "F-st", "seed": 0}))  # fmt: skip
    got = ex.results_by_cell(spec, "cpu-annealed", tmp_path)
    assert [r["table"] for r in got["rotmatch-st"]] == ["tab:main-results"]
    assert "rotmatch-mz_full" not in got  # its lender has no result yet
    # a table whose jobs compute more (the uncertainty study) never reads another's runs
    assert ex.shared("tab:ece-nll", "cpu-annealed") == {}
    # a model's defaults written out are the same model: n_g = 8 is MZAttn-Full, two blocks
    # the Set Transformer, one MZ block with L = 4 tab:tdof-verify's MZ-1L
    assert ex.shared("tab:ablation", "cpu-annealed")["B-ng8-mz_full"] == (
        "tab:main-results", "B-mz_full")  # fmt: skip
    assert ex.shared("tab:depth", "cpu-annealed")["B-st_2l"] == ("tab:main-results", "B-st")
    assert ex.shared("tab:gen-ablation", "cpu-annealed")["L16-nmz4"] == (
        "tab:tdof-verify", "L16-mz_1l")  # fmt: skip
    # ... but within a table a reading cell that names today's default is not the main cell,
    # whose cpu-converged results were trained under the first reading's
    assert "rd-B-zonotope-cosine-mz_full" not in ex.aliases("tab:main-results", "cpu-converged")


def _build_args():
    """One (cell, d_in, d_out) per distinct model configuration of the registry."""
    seen = {}
    for label in ex.TABLES:
        for c in ex.get_table(label).cells:
            if c.model == ex.SET_STATS:
                continue
            key = (c.model, json.dumps(c.model_kwargs, sort_keys=True), c.match_params)
            if key not in seen or c.options.get("d", 99) < seen[key].options.get("d", 99):
                seen[key] = c
    return list(seen.values())


@functools.cache
def _tiny(task, opts):
    return make_task(task, 4, 0, **json.loads(opts))


def test_every_model_builds_and_runs():
    for c in _build_args():
        opts = dict(c.options)
        if c.task == "rotation_matching":
            opts["d"] = min(opts.get("d", 8), 64)  # d=512 is the same model, only wider
        tr = _tiny(c.task, json.dumps(opts, sort_keys=True))
        model = ex.build_cell_model(c, tr.d_in, tr.d_out, seed=0, device="cpu").eval()
        with torch.no_grad():
            out = model(tr.x, tr.mask)
        assert out.shape == (4, tr.d_out), c.id


def test_parameter_counts_match_the_paper():
    """Counts computed from the specs against the paper's printed counts (independent numbers)."""

    def params(label, cell_id, d_in):
        c = ex.get_table(label).cell(cell_id)
        m = ex.build_cell_model(c, d_in, 1, seed=0, device="cpu")
        return sum(p.numel() for p in m.parameters())

    # quadratic TDOF: d_in = 32
    assert abs(params("tab:tdof-verify", "L4-st_4l", 32) - 344_000) / 344_000 < 0.01  # tab:depth
    assert abs(params("tab:gen-ablation", "L16-nmz1", 32) - 247_000) / 247_000 < 0.01
    assert abs(params("tab:meb", "d8-hypernet_r8", 8) - 360_000) / 360_000 < 0.01
    assert abs(params("tab:meb", "d8-la_st", 8) - 359_000) / 359_000 < 0.01
    assert abs(params("tab:meb", "d8-st", 8) - 208_000) / 208_000 < 0.01
    assert abs(params("tab:meb", "d8-hypernet_r64", 8) - 1.3e6) / 1.3e6 < 0.01


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


def test_bad_inputs_raise_with_the_valid_choices():
    with pytest.raises(ValueError, match="valid tables: tab:meb"):
        ex.get_table("tab:nope")
    with pytest.raises(ValueError, match="valid profiles"):
        ex.jobs("tab:meb", "medium")
    with pytest.raises(ValueError, match="valid: .*mz_full"):
        ex.jobs("tab:meb", models=["mz_huge"])
    for bad in ("4-0", "a", "1-", "-1", ""):
        with pytest.raises(ValueError, match="seed"):
            ex.parse_seeds(bad)
    assert ex.parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert ex.parse_seeds("0,2,5") == [0, 2, 5]
    assert ex.parse_seeds("3") == [3]
    with pytest.raises(ValueError, match="d must be an int >= 1"):
        ex.Cell("x", "meb_radius", {"d": 0}, "st", "r", "c")
    with pytest.raises(ValueError, match="n_min must be <= n_max"):
        ex.Cell("x", "meb_radius", {"n_min": 30, "n_max": 10}, "st", "r", "c")
    with pytest.raises(ValueError, match=r"unknown option.*valid: \['d'"):
        ex.Cell("x", "meb_radius", {"dim": 8}, "st", "r", "c")
    with pytest.raises(ValueError, match="valid models: .*mz_full"):
        ex.Cell("x", "meb_radius", {}, "transformer", "r", "c")
    with pytest.raises(ValueError, match="workers"):
        ex.run("tab:meb", workers=0, progress=False)


@pytest.mark.slow  # fresh interpreters
def test_cli_bad_input_exits_2(capsys):
    assert cli(["run", "tab:nope"]) == 2
    assert "valid tables" in capsys.readouterr().err
    assert cli(["run", "tab:meb", "--seeds", "4-0"]) == 2
    assert "seed" in capsys.readouterr().err
    assert cli(["run", "tab:meb", "--models", "nope"]) == 2
    assert "valid" in capsys.readouterr().err
    assert cli(["report", "tab:meb", "--profile", "medium"]) == 2
    r = subprocess.run(
        [sys.executable, "-m", "mzlite", "run", "tab:meb", "--seeds", "a"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert r.returncode == 2 and "invalid seeds" in r.stderr


def test_cli_list(capsys, dirs):
    assert cli(["list", "--results-dir", str(dirs["results_dir"])]) == 0
    out = capsys.readouterr().out
    assert "tab:meb" in out and "smoke" in out and "full" in out
    assert cli(["list", "tab:tdof-verify"]) == 0
    assert "L4-mz_1l" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------

PROVENANCE = {
    "device", "gpu_name", "torch", "mzlite", "python", "git_commit", "git_dirty", "hostname",
    "timestamp", "fused_cpu_kernels",
}  # fmt: skip
TOP = {
    "format", "table", "cell", "seed", "profile", "task", "task_options", "model",
    "model_config", "model_kwargs", "params", "train_config", "metrics", "epochs_run",
    "stop_reason", "wall_time_s", "history", "dataset_keys", "provenance", "sizes",
}  # fmt: skip


def test_result_json_has_metrics_and_provenance(dirs, capfd):
    out = _run("tab:tdof-verify", dirs, cells=["L4-st_4l", "L4-set_stats"], progress=True)
    assert len(out["done"]) == 2 and not out["failed"]
    # while it trains a job says where it is (first and last epoch of a short one), on stderr
    err = capfd.readouterr().err
    assert "L4-st_4l seed 0: epoch 1/3, train loss " in err and "L4-st_4l seed 0: epoch 3/3" in err
    assert "epoch 2/3" not in err and "L4-set_stats" not in err  # closed form: no epochs
    res = json.loads(Path(out["done"][0]).read_text())
    assert TOP <= set(res) and PROVENANCE <= set(res["provenance"])
    assert res["profile"] == "smoke" and res["table"] == "tab:tdof-verify"
    assert res["epochs_run"] == 3 == len(res["history"]["train_loss"])
    assert res["train_config"]["epochs"] == 3 and res["model_config"]["n_enc"] == 4
    assert res["params"] == sum(
        p.numel()
        for p in ex.build_cell_model(ex.get_table("tab:tdof-verify").cell("L4-st_4l"), 32, 1, 0)
        .cpu()
        .parameters()
    )
    # test R^2 and MSE agree with the test targets' own variance (regenerated independently)
    te = make_splits("quadratic_tdof", 128, 64, 64, 0, L=4).test
    var = te.y.double().var(unbiased=False).item()
    m = res["metrics"]["test"]
    assert m["r2"] == pytest.approx(1 - m["mse"] / var, rel=1e-6, abs=1e-9)
    if shutil.which("git") and (REPO / ".git").exists():
        assert isinstance(res["provenance"]["git_commit"], str)
        assert len(res["provenance"]["git_commit"]) == 40
    # the CPU is named as the kernel names it (the project's CPU changes between sessions)
    if Path("/proc/cpuinfo").exists():
        info = Path("/proc/cpuinfo").read_text().splitlines()
        names = [ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")]
        got = res["provenance"]["cpu_name"]
        assert got == names[0] if names else got  # no model name (ARM): the machine's, not empty
    assert res["provenance"]["cpu_count"] == os.cpu_count()
    # no checkpoint is left behind by a finished job
    assert not list(Path(dirs["cache_dir"], "checkpoints").rglob("*.pt"))
    # an MZ model's result records whether the fused CPU kernels ran (mzlite.nn.fused: where
    # they build and are selected, AVX-512 CPUs by default)
    from mzlite.nn import fused

    (mz,) = _run("tab:tdof-verify", dirs, cells=["L4-mz_1l"])["done"]
    ran = fused.build() and fused.loaded()
    assert json.loads(Path(mz).read_text())["provenance"]["fused_cpu_kernels"] is ran
    stats = json.loads(Path(out["done"][1]).read_text())
    assert stats["model"] == ex.SET_STATS and -1.0 < stats["metrics"]["test"]["r2"] <= 1.0
    # convergence is recorded with the numbers that decided it; 3 smoke epochs cannot converge
    conv = res["convergence"]
    assert res["converged"] is False is conv["converged"] and "too short" in conv["rule"]
    assert conv["epochs_run"] == 3 and conv["stop_reason"] == res["stop_reason"]
    assert res["protocol"]["profile"] == "smoke" and res["protocol"]["family"] == "baseline"
    assert "smoke" in res["protocol"]["lr_source"]
    assert stats["converged"] is True and stats["convergence"]["stop_reason"] == "closed_form"


def test_smoke_and_full_never_mix(dirs):
    _run("tab:tdof-verify", dirs, cells=["L4-set_stats"])
    smoke = ex.result_path("tab:tdof-verify", "L4-set_stats", 0, "smoke", dirs["results_dir"])
    full = ex.result_path("tab:tdof-verify", "L4-set_stats", 0, "full", dirs["results_dir"])
    assert smoke.exists() and smoke != full and "smoke" in smoke.parts and "full" in full.parts
    assert ex.load_results("tab:tdof-verify", "full", dirs["results_dir"]) == []
    full.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(smoke, full)  # a smoke result where a full one belongs
    try:
        with pytest.raises(ValueError, match="refusing to mix"):
            ex.load_results("tab:tdof-verify", "full", dirs["results_dir"])
        with pytest.raises(ValueError, match="refusing to mix"):
            report("tab:tdof-verify", "full", dirs["results_dir"])
        with pytest.raises(ValueError, match="different experiment"):
            ex.run("tab:tdof-verify", "full", cells=["L4-set_stats"], progress=False, **dirs)
    finally:
        full.unlink()


def _cli_run(dirs, *extra):
    return [
        sys.executable, "-m", "mzlite", "run", "tab:tdof-verify", "--profile", "smoke",
        "--cells", "L8-*", "--threads", "1",
        "--results-dir", str(dirs["results_dir"]), "--cache-dir", str(dirs["cache_dir"]), *extra,
    ]  # fmt: skip


def test_a_result_of_another_training_config_is_never_skipped_as_done(dirs):
    _run("tab:tdof-verify", dirs, cells=["L4-st_4l"])
    (job,) = ex.jobs("tab:tdof-verify", "smoke", cells=["L4-st_4l"], **dirs)
    assert ex.is_done(job)
    text = job.result_path.read_text()
    res = json.loads(text)
    res["train_config"]["lr"] = 0.5  # e.g. the profile's learning rate changed since
    job.result_path.write_text(json.dumps(res))
    try:
        with pytest.raises(ValueError, match="train_config.lr"):
            ex.is_done(job)
        # and no reader counts it as the cell's: the verdicts never read it as today's protocol
        with pytest.warns(OtherTrainingWarning, match=r"train_config.lr.*\(0.5, "):
            by_cell = ex.results_by_cell("tab:tdof-verify", "smoke", dirs["results_dir"])
        assert "L4-st_4l" not in by_cell
        # nor as done: plan prices it as a run to make
        assert not ex.has_result(job)
        (row,) = plan("tab:tdof-verify", "smoke", seeds=[job.seed], cells=["L4-st_4l"],
                      results_dir=dirs["results_dir"], measure=False).rows  # fmt: skip
        assert (row["todo"], row["done"]) == (1, 0)
        # precision counts as the run resolved it (amp=None means bf16 on some CPUs only)
        res = json.loads(text)
        used = ex.result_amp(res)
        assert used is not None and res["history"]["config"]["amp"] == used
        res["history"]["config"]["amp"] = not used
        job.result_path.write_text(json.dumps(res))
        with pytest.raises(ValueError, match="train_config.amp"):
            ex.is_done(job)
        # a reader keeps it: precision is resolved per machine, and the engine keeps runs of two
        # precisions apart (protocol_key), where a rerun here would not be the same run
        by_cell = ex.results_by_cell("tab:tdof-verify", "smoke", dirs["results_dir"])
        assert [r["seed"] for r in by_cell["L4-st_4l"]] == [job.seed] and ex.has_result(job)
    finally:
        job.result_path.write_text(text)
    # the committed cpu results (float32, before bf16 autocast became the CPU default) still
    # count as done under their profile, which now names their precision
    assert ex.get_profile("cpu").train["amp"] is False


def test_a_gpu_run_asks_for_the_precision_of_the_cpu_runs_beside_it(dirs, monkeypatch):
    _run("tab:tdof-verify", dirs, cells=["L4-st_4l"])
    (auto,) = ex.jobs("tab:tdof-verify", "smoke", cells=["L4-st_4l"], **dirs)
    assert auto.precision == "auto" and auto.train_config().amp is None
    bf16, fp32 = (
        ex.jobs("tab:tdof-verify", "smoke", cells=["L4-st_4l"], device="cuda", precision=p,
                **dirs)[0]
        for p in ("bf16", "float32")
    )  # fmt: skip
    assert bf16.train_config().amp is True and fp32.train_config().amp is False
    # the result trained here in the machine's precision is done for a job that asks for the
    # same precision by name, and another experiment for one that asks for the other
    used = ex.result_amp(json.loads(auto.result_path.read_text()))
    same, other = (bf16, fp32) if used else (fp32, bf16)
    assert ex.is_done(same)
    with pytest.raises(ValueError, match="train_config.amp"):
        ex.is_done(other)
    with pytest.raises(ValueError, match=r"precision must be one of \('auto', 'bf16'"):
        ex.jobs("tab:tdof-verify", "smoke", cells=["L4-st_4l"], precision="fp16", **dirs)
    # a copy of the tree sent to a GPU machine records the commit its caller names, also where
    # a .git came along (it can be older than the files sent)
    monkeypatch.setenv("MZLITE_GIT_COMMIT", "a33d1e0")
    assert ex.git_info() == {"commit": "a33d1e0", "dirty": None}
    monkeypatch.setattr(ex.execute, "_git", lambda *a: None)
    assert ex.git_info() == {"commit": "a33d1e0", "dirty": None}
    monkeypatch.delenv("MZLITE_GIT_COMMIT")
    assert ex.git_info() == {"commit": None, "dirty": None}


_DRIVER = """
import os, time
from mzlite.repro.experiments.runner import spawn_pool
pool = spawn_pool(1, 1)
print(pool.submit(os.getpid).result(), flush=True)
pool.submit(time.sleep, 600)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:  # a zombie (exited, not yet reaped) is not alive
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow  # a fresh interpreter and a spawned worker
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_killed_driver_leaves_no_worker_training():
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER], cwd=REPO, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        worker = int(driver.stdout.readline())
        time.sleep(2 * PARENT_POLL_S)
        assert _alive(worker)  # busy with its 600-s job while its driver lives
    finally:
        driver.send_signal(signal.SIGKILL)  # no chance to shut its pool down
        driver.wait()
    t0 = time.time()
    while _alive(worker) and time.time() - t0 < 30:
        time.sleep(0.1)
    assert not _alive(worker), "the worker trained on after its driver was killed"


@pytest.mark.integration  # a real CLI run, SIGKILLed, polled for up to 120 s
@pytest.mark.timeout(600)
def test_killed_run_resumes_and_skips_finished_results(dirs):
    expected = {j.result_path for j in ex.jobs("tab:tdof-verify", "smoke", cells=["L8-*"],
                                                results_dir=dirs["results_dir"])}  # fmt: skip
    assert len(expected) == 3 and not any(p.exists() for p in expected)
    proc = subprocess.Popen(_cli_run(dirs), cwd=REPO, stdout=subprocess.PIPE, text=True)
    t0 = time.time()
    try:
        while not any(p.exists() for p in expected):
            assert proc.poll() is None, "the run ended before its first result"
            assert time.time() - t0 < 120
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)  # the hardest interruption: no cleanup at all
        proc.wait()
    first = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in expected if p.exists()}
    assert 1 <= len(first) < len(expected)
    r = subprocess.run(_cli_run(dirs), cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"skipped {len(first)}" in r.stdout
    assert all(p.exists() for p in expected)
    for p, (mtime, content) in first.items():
        assert p.stat().st_mtime_ns == mtime and p.read_bytes() == content
    for p in expected:
        json.loads(p.read_text())  # every file complete (atomic writes)
    # a third run does nothing
    r = subprocess.run(_cli_run(dirs), cwd=REPO, capture_output=True, text=True)
    assert "done 0, skipped 3" in r.stdout


def test_interrupted_cell_resumes_from_its_checkpoint(dirs):
    """A job killed after its first epoch continues from the checkpoint, not from scratch."""
    (job,) = ex.jobs("tab:tdof-verify", "smoke", cells=["L24-st_4l"], **dirs)
    cfg = replace(job.train_config(), num_threads=1)  # num_threads may differ on resume
    tr, va, _ = ex.job_splits(job)
    model = ex.build_cell_model(job.cell, tr.d_in, tr.d_out, job.seed, "cpu")

    class Killed(Exception):
        pass

    def kill(epoch, hist, model):  # called after the epoch's checkpoint is written
        raise Killed

    with pytest.raises(Killed):
        fit(model, tr, va, cfg, checkpoint_path=job.checkpoint_path, progress=False,
            callbacks=[kill])  # fmt: skip
    ckpt = torch.load(job.checkpoint_path, weights_only=True)
    assert ckpt["epoch"] == 1 and not ckpt["finished"]
    _run("tab:tdof-verify", dirs, cells=["L24-st_4l"])
    res = json.loads(job.result_path.read_text())
    hist = res["history"]
    assert res["epochs_run"] == 3 and hist["epoch"] == [1, 2, 3]
    assert hist["train_loss"][0] == ckpt["history"]["train_loss"][0]  # epoch 1 was not redone
    assert not job.checkpoint_path.exists()
    # and the resumed run equals an uninterrupted one (fit's exact-resume guarantee)
    alt = {"results_dir": Path(dirs["results_dir"]).parent / "results-once",
           "cache_dir": dirs["cache_dir"]}  # fmt: skip
    _run("tab:tdof-verify", alt, cells=["L24-st_4l"])
    once = json.loads(ex.result_path("tab:tdof-verify", "L24-st_4l", 0, "smoke",
                                     alt["results_dir"]).read_text())  # fmt: skip
    assert once["history"]["train_loss"] == hist["train_loss"]
    assert once["metrics"]["test"] == res["metrics"]["test"]


# ---------------------------------------------------------------------------------------------
# Two tables end to end, and the report
# ---------------------------------------------------------------------------------------------


@pytest.mark.integration  # two tables trained, written and reported end to end
def test_two_tables_smoke_end_to_end_and_report(dirs, capsys):
    out = _run("tab:tdof-verify", dirs, cells=TDOF_CELLS)
    assert not out["failed"]
    out = _run("tab:meb", dirs, models=["st", "mz_full"], cells=["d8-*"])
    assert not out["failed"] and len(out["done"]) == 3  # st, mz_full, set statistics

    r = report("tab:tdof-verify", "smoke", dirs["results_dir"])
    rows = {(x["row"], x["column"]): x for x in r.rows}
    mz = rows[("MZAttn-1L", "L=4")]
    assert mz["paper_mean"] == 0.995 and mz["paper_std"] == 0.002  # tab:tdof-verify, L=4
    assert mz["seeds"] == [0] and mz["epochs"] == "3" and mz["ours_mean"] is not None
    ratio = rows[("4", "MSE ratio")]
    st = json.loads(
        ex.result_path("tab:tdof-verify", "L4-st_4l", 0, "smoke", dirs["results_dir"]).read_text()
    )
    mzr = json.loads(
        ex.result_path("tab:tdof-verify", "L4-mz_1l", 0, "smoke", dirs["results_dir"]).read_text()
    )
    assert ratio["ours_mean"] == pytest.approx(
        st["metrics"]["test"]["mse"] / mzr["metrics"]["test"]["mse"]
    )
    assert ratio["paper_mean"] == 6.6
    md = r.to_markdown()
    assert "0.995 ± 0.002" in md and "set statistics (ridge)" in md and "smoke" in md
    assert "<table" in r._repr_html_() and "MSE ratio" in r.to_text()

    m = report("tab:meb", "smoke", dirs["results_dir"])
    got = {(x["row"], x["column"]): x for x in m.rows}
    assert got[("MZAttn-Full", "d=8")]["paper_text"] == "0.691 ± 0.012"
    assert got[("MZAttn-Full", "d=8")]["ours_mean"] is not None
    assert got[("MZAttn-Full", "d=8")]["paper_params"] == 368_000
    assert got[("Perceiver", "d=8")]["seeds"] == []  # not run: shown as such
    assert got[("set statistics (ridge)", "d=8")]["paper_text"] == "--"
    assert cli(["report", "tab:meb", "--results-dir", str(dirs["results_dir"])]) == 0
    text = capsys.readouterr().out
    assert "not run" in text and "0.691 ± 0.012" in text and "Ablation" in text
    # the curves moved: the training loss of MZ fell over the 3 smoke epochs
    mzres = json.loads(
        ex.result_path("tab:meb", "d8-mz_full", 0, "smoke", dirs["results_dir"]).read_text()
    )
    losses = mzres["history"]["train_loss"]
    assert len(losses) == 3 and losses[-1] < losses[0]


@pytest.mark.integration  # a real pool of spawned worker processes
def test_workers_run_jobs_in_parallel_processes(dirs):
    """workers=2 trains in spawned processes and gives the same results as in-process."""
    root = Path(dirs["results_dir"]).parent
    one = {"results_dir": root / "results-w1", "cache_dir": dirs["cache_dir"]}
    two = {"results_dir": root / "results-w2", "cache_dir": dirs["cache_dir"]}
    cells = ["L4-st_4l", "L32-st_4l"]
    assert len(_run("tab:tdof-verify", one, cells=cells)["done"]) == 2
    out = _run("tab:tdof-verify", two, cells=cells, workers=2)
    assert len(out["done"]) == 2 and not out["failed"]
    for cid in ("L4-st_4l", "L32-st_4l"):
        a, b = (
            json.loads(ex.result_path("tab:tdof-verify", cid, 0, "smoke", d["results_dir"])
                       .read_text())
            for d in (one, two)
        )  # fmt: skip
        # same seed, same data, one thread each on the CPU: the same training, bit for bit
        assert a["history"]["train_loss"] == b["history"]["train_loss"]
        assert a["metrics"]["test"] == b["metrics"]["test"]


@pytest.mark.parametrize("profile,expected", [("cpu", (2, 1)), ("smoke", (1, 1))])
def test_default_cpu_layout_is_one_single_thread_worker_per_core(
    dirs, monkeypatch, capsys, profile, expected
):
    """workers=None on a 2-core CPU: two 1-thread processes (smoke: one, in-process), said in the
    run's output; the jobs themselves are replaced by a recorder."""
    seen = {}
    monkeypatch.setattr(ex.runner.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(ex.runner, "job_splits", lambda job, workers=1: None)
    monkeypatch.setattr(ex.runner, "_run_groups", lambda g, git, w, t, *a: seen.update(w=w, t=t))
    ex.run("tab:tdof-verify", profile, device="cpu", cells=["L4-*", "L8-*"], **dirs)
    assert (seen["w"], seen["t"]) == expected
    w, t = expected
    assert f"{w} worker process(es) x {t} torch thread(s)" in capsys.readouterr().out


def test_best_profile_is_the_first_with_results(tmp_path):
    assert ex.best_profile("tab:meb", ("full", "cpu"), results_dir=tmp_path) is None
    # the scorecard's order too: mzlite's reading before its first reading
    assert ex.PROFILE_ORDER == ("full", "paper-sizes", "paper-sizes-fg", "paper-sizes-censored",
                                "cpu-annealed", "cpu-converged", "cpu")  # fmt: skip
    # the protocols the results pages read are the most trusted of that order, each with a style
    assert CURRENT == ex.PROFILE_ORDER[: len(CURRENT)]
    assert set(CURRENT) | {"paper"} == set(PROTOCOL_STYLES)
    job = ex.jobs("tab:meb", "cpu")[0]

    def write(profile):
        path = ex.result_path("tab:meb", job.cell.id, job.seed, profile, tmp_path)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"profile": profile, "table": "tab:meb", "cell": job.cell.id}))

    write("cpu")
    assert ex.best_profile("tab:meb", ("full", "cpu"), results_dir=tmp_path) == "cpu"
    assert ex.best_profile("tab:meb", ("full",), results_dir=tmp_path) is None
    assert ex.best_profile("tab:meb", results_dir=tmp_path) == "cpu"
    write("cpu-converged")  # by default the converged protocol comes before the 30-epoch one
    assert ex.best_profile("tab:meb", results_dir=tmp_path) == "cpu-converged"
    assert ex.best_profile("tab:meb", ("cpu", "cpu-converged"), results_dir=tmp_path) == "cpu"


def test_run_docstring_lists_every_profile_with_its_seeds():
    doc = ex.run.__doc__
    for name, prof in ex.PROFILES.items():
        line = next(x for x in doc.splitlines() if x.strip().startswith(f"- ``{name}``"))
        seeds = "each cell's paper count" if prof.seeds is None else str(prof.seeds)
        assert line.endswith(f"[seeds: {seeds}]"), line


def test_tab_depth_layers_are_encoder_blocks_with_the_papers_parameter_counts():
    """tab:depth's 'Layers' read as ISAB encoder blocks (n_enc) give the paper's Params column:
    140K for one block, +68K per block, 244K for the 1-layer MZAttn (within 1%)."""
    spec = ex.get_table("tab:depth")
    d_in = make_task("chamfer_matching", 2, 0).d_in
    for c in spec.cells:
        if c.model == ex.SET_STATS:
            continue
        model = ex.build_cell_model(c, d_in, 1, 0)
        n = sum(p.numel() for p in model.parameters())
        assert model.cfg.n_enc == int(c.row.rsplit("/ ", 1)[1])
        paper = paper_cell("tab:depth", c.row, "Params")["mean"]
        assert n == pytest.approx(paper, rel=0.01), (c.id, n, paper)


def test_epoch_lines_report_at_most_every_interval_and_the_last_epoch():
    import io
    from types import SimpleNamespace

    from mzlite.repro.experiments.execute import epoch_lines

    job = ex.jobs("tab:tdof-verify", "smoke", cells=["L4-st_4l"])[0]  # a 3-epoch cap
    now, out = [0.0], io.StringIO()
    cb = epoch_lines(job, every_s=10.0, file=out, clock=lambda: now[0])
    hist = SimpleNamespace(train_loss=[], val_loss=[], val_metrics=[])
    for epoch, t in ((1, 0.0), (2, 4.0), (3, 9.0)):
        now[0] = t
        hist.train_loss.append(1.0 / epoch), hist.val_loss.append(2.0 / epoch)
        hist.val_metrics.append({"r2": 0.1 * epoch})
        assert cb(epoch, hist, None) is False  # reporting never stops a run
    lines = out.getvalue().splitlines()
    assert [ln.split(": ")[1].split(",")[0] for ln in lines] == ["epoch 1/3", "epoch 3/3"]
    assert lines[0].strip() == (
        "L4-st_4l seed 0: epoch 1/3, train loss 1, val loss 2, val R^2 0.100"
    )
