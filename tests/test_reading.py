"""How mzlite reads the paper (mzlite.repro.experiments.reading): the quotes are the paper's, every
switch exists and is recorded in results, and the reading ablation reads its rows honestly."""

import json
import re
from pathlib import Path

import pytest

from mzlite import nn as mznn
from mzlite.repro import experiments as ex
from mzlite.repro.experiments import reading, reading_ablation
from mzlite.repro.paper import paper_tex_path
from mzlite.tasks import task_options
from mzlite.train import TrainConfig


def test_every_quote_is_the_papers_own_words():
    path = paper_tex_path()
    if not Path(path).exists():
        pytest.skip(f"paper source not at {path}")
    assert reading.missing_quotes(Path(path).read_text()) == []
    assert reading.missing_quotes("nothing of the kind") != []  # the check can fail


def _field(obj_name: str) -> tuple[type, str]:
    classes = {
        "MZSetTransformerConfig": mznn.MZSetTransformerConfig,
        "TrainConfig": TrainConfig,
        "Profile": ex.Profile,
        "Cell": ex.Cell,
    }
    cls, field = obj_name.split(".")
    return classes[cls], field


def test_every_switch_is_a_config_field():
    for choice in reading.CHOICES:
        if choice.switch.startswith("fixed"):
            continue
        task = re.fullmatch(r"tasks\.(\w+)\(((?:\w+=\.\.\.(?:, )?)+)\)", choice.switch)
        if task:  # a task generator's options
            for option in re.findall(r"(\w+)=", task[2]):
                assert option in task_options(task[1]), (choice.topic, choice.switch)
            continue
        for part in choice.switch.replace(";", ",").split(","):
            name = part.split("(")[0].strip()
            if "." not in name:  # "decay_patience" after "TrainConfig.schedule"
                name = f"TrainConfig.{name}"
            cls, field = _field(name.split(" ")[0])
            assert field in cls.__dataclass_fields__, (choice.topic, name)


@pytest.fixture(scope="module")
def mz_result(tmp_path_factory):
    root = tmp_path_factory.mktemp("reading")
    out = ex.run("tab:main-results", "smoke", cells=["F-mz_full"], progress=False, threads=1,
                 data_workers=1, results_dir=root / "r", cache_dir=root / "c")  # fmt: skip
    assert not out["failed"]
    return json.loads(Path(out["done"][0]).read_text())


def test_every_switch_is_recorded_in_a_result(mz_result):
    for choice in reading.CHOICES:
        path = choice.recorded.split(",")[0].split(" (")[0].strip()
        node = mz_result
        for key in path.split("."):
            assert key in node, (choice.topic, path)
            node = node[key]
    got = reading_ablation.recorded_reading(mz_result)
    assert got == ("zonotope", "cosine")  # smoke: the default


def test_reading_ablation_rows_name_what_ran(tmp_path):
    rows = reading.ablation(results_dir=tmp_path)
    cells = {r.cell for r in rows}
    assert len(cells) == len(reading.DIAGNOSTIC_CELLS)
    per_cell = [r for r in rows if r.cell == "Task F (rotation matching)"]
    # first reading, 3 x 2 readings, the paper's training-set size
    assert len(per_cell) == 1 + 6 + 1 and all(r.seeds == 0 for r in per_cell)


def test_a_result_under_another_reading_is_refused():
    result = {"model_config": {"gen_norm": "none"}, "train_config": {"schedule": "plateau"},
              "table": "t", "cell": "c", "seed": 0, "metrics": {"test": {"r2": 0.5}}}  # fmt: skip
    with pytest.raises(ValueError, match="trained under generators 'none'"):
        reading_ablation._summary([result], ("zonotope", "plateau"))
    legacy = {"model_config": {}, "train_config": {}}
    assert reading_ablation.recorded_reading(legacy) == ("layernorm", "cosine")


def _write_result(root, cell, seed, r2, *, gen_norm="zonotope", schedule="plateau", fitted=True):
    """A result file of tab:main-results under cpu-annealed, as the runner writes the fields
    the reading ablation reads."""
    spec = ex.get_table("tab:main-results")
    d = root / "cpu-annealed" / spec.dirname
    d.mkdir(parents=True, exist_ok=True)
    mz = "mz_full" in cell
    result = {
        "table": spec.label, "cell": cell, "seed": seed, "profile": "cpu-annealed",
        "model_config": {"gen_norm": gen_norm} if mz else {},
        "train_config": {"schedule": schedule},
        "metrics": {"test": {"r2": r2}},
        "convergence": {"stopped": True, "converged": True, "fitted": fitted},
    }  # fmt: skip
    (d / f"{cell}__seed{seed}.json").write_text(json.dumps(result))


def _task_f(rows):
    return {r.reading: r for r in rows if r.cell == "Task F (rotation matching)"}


def test_mz_against_st_is_decided_by_welch_over_seeds(tmp_path):
    for seed, (mz, st) in enumerate([(0.05, 0.50), (0.08, 0.49), (0.03, 0.51)]):
        _write_result(tmp_path, "F-mz_full", seed, mz)
        _write_result(tmp_path, "F-st", seed, st)
    for seed in range(2):
        _write_result(tmp_path, "rd-F-none-plateau-mz_full", seed, 0.6, gen_norm="none")
    rows = _task_f(reading.ablation(results_dir=tmp_path))
    outcome, p = rows[reading.DEFAULT_READING_ROW].versus_st
    assert outcome == "ST better" and p < 0.001
    assert rows[reading.DEFAULT_READING_ROW].r2 == (0.05, 0.08, 0.03)
    # two seeds decide nothing, however large the gap
    assert rows["generators: none, schedule: plateau"].versus_st == ("too few seeds", None)
    assert rows["the paper's training-set size"].versus_st == ("too few seeds", None)
    # an R² gap of 0.09 that Welch's test does not separate decides nothing either way
    behind = reading.AblationRow("c", "r", 3, 3, (0.41, 0.42, 0.43), (0.45, 0.50, 0.58))
    assert behind.versus_st[0] == "ST ahead, not significant"
    assert behind.claim_verdict == "not decided"
    assert rows[reading.DEFAULT_READING_ROW].claim_verdict == "does not hold here"
    table = reading.ablation_table(list(rows.values()))
    assert "ST better (p = " in table and "too few seeds" in table


def test_a_set_transformer_that_never_fitted_decides_nothing(tmp_path):
    """MZ far ahead of a Set Transformer whose runs never left the mean predictor: the baseline
    failed to optimise, so the ablation reads nothing from the gap, as the scorecard does."""
    for seed, mz in enumerate([0.20, 0.19, 0.11]):
        _write_result(tmp_path, "F-mz_full", seed, mz)
        _write_result(tmp_path, "F-st", seed, 0.0, fitted=seed != 1)
    every = reading.ablation(results_dir=tmp_path)
    rows = _task_f(every)
    default = rows[reading.DEFAULT_READING_ROW]
    assert default.st_failures == 1 and default.optimisation_failures == 0
    assert default.versus_st == ("optimisation failure", None) and default.claim_verdict is None
    summary = reading.ablation_summary(every)
    assert "1 of the Set Transformer's runs stopped without fitting" in summary
    assert "Every run fitted" not in summary
    assert "(1 not fitted)" in reading.ablation_table(list(rows.values()))


def _loses_at_2k_wins_at_5k(root) -> list[float]:
    """Task F results, 3 seeds: MZ well below the Set Transformer at 2K training sets, above it
    at the paper's 5K; returns the Set Transformer's 2K R² per seed."""
    st = [0.50, 0.49, 0.51]
    for seed, (mz, big_mz, big_st) in enumerate([(0.05, 0.61, 0.52), (0.08, 0.62, 0.53),
                                                 (0.03, 0.60, 0.52)]):  # fmt: skip
        _write_result(root, "F-mz_full", seed, mz)
        _write_result(root, "F-st", seed, st[seed])
        _write_result(root, "rd-F-paper-size-mz_full", seed, big_mz)
        _write_result(root, "rd-F-paper-size-st", seed, big_st)
    return st


def test_dependence_names_the_readings_that_reverse_the_default(tmp_path):
    st = _loses_at_2k_wins_at_5k(tmp_path)
    for seed in range(3):
        _write_result(tmp_path, "rd-F-none-plateau-mz_full", seed, st[seed] + 0.001 * seed,
                      gen_norm="none")  # fmt: skip
        # a reading whose runs never fitted decides nothing, however high its R²
        _write_result(tmp_path, "rd-F-layernorm-plateau-mz_full", seed, 0.9, gen_norm="layernorm",
                      fitted=False)  # fmt: skip
    got = reading.dependence("Task F (rotation matching)", results_dir=tmp_path)
    assert len(got) == 2
    assert [g[:2] for g in got] == [("generators: none, schedule: plateau", "tie"),
                                    ("the paper's training-set size", "MZ better")]  # fmt: skip
    assert got[1][2] < 0.05  # Welch's p that made it "better"
    rows = _task_f(reading.ablation(results_dir=tmp_path))
    assert rows["generators: layernorm, schedule: plateau"].versus_st[0] == "optimisation failure"
    # the same runs with the default undecided: nothing is said to depend on a reading
    assert reading.dependence("Task B (Chamfer matching)", results_dir=tmp_path) == []
    with pytest.raises(ValueError, match="diagnostic cells"):
        reading.dependence("Task Z", results_dir=tmp_path)


def test_the_ablation_summary_states_the_comparison_the_fit_and_what_reads_otherwise(tmp_path):
    assert "No diagnostic cell" in reading.ablation_summary(results_dir=tmp_path)
    _loses_at_2k_wins_at_5k(tmp_path)
    text = reading.ablation_summary(results_dir=tmp_path)
    assert "<b>Task F (rotation matching)</b>: under mzlite's reading MZ reaches R² 0.053" in text
    assert "(ST better, p = " in text and "Every run fitted its training set" in text
    assert "It reads otherwise under the paper&#x27;s training-set size: MZ better (p = " in text
    # one run that never fitted: said, and nothing read from it
    _write_result(tmp_path, "F-mz_full", 2, 0.03, fitted=False)
    text = reading.ablation_summary(results_dir=tmp_path)
    assert "1 of its runs stopped without fitting" in text and "(optimisation failure)" in text


def test_the_summary_counts_the_other_readings_that_agree(tmp_path):
    for seed, (mz, st) in enumerate([(0.05, 0.50), (0.08, 0.49), (0.03, 0.51)]):
        _write_result(tmp_path, "F-mz_full", seed, mz)
        _write_result(tmp_path, "F-st", seed, st)

    def task_f():  # Task F's paragraph of the summary
        text = reading.ablation_summary(results_dir=tmp_path)
        return text[text.index("<b>Task F") :].split("</p>")[0]

    n = len([r for r in reading.ablation(results_dir=tmp_path) if r.cell.startswith("Task F")])
    assert f"No other reading is decided yet ({n - 1} still run)." in task_f()
    for seed in range(3):
        _write_result(tmp_path, "rd-F-none-plateau-mz_full", seed, 0.1 + 0.01 * seed,
                      gen_norm="none")  # fmt: skip
    assert f"The one other reading decided so far reads it the same way ({n - 2} still" in task_f()
    for seed in range(3):
        _write_result(tmp_path, "rd-F-none-cosine-mz_full", seed, 0.1 + 0.01 * seed,
                      gen_norm="none", schedule="cosine")  # fmt: skip
    assert "None of the 2 other readings decided so far reads it otherwise" in task_f()
    # a reading whose runs did not all fit reads nothing, and is named
    for seed in range(3):
        _write_result(tmp_path, "rd-F-layernorm-cosine-mz_full", seed, 0.2, gen_norm="layernorm",
                      schedule="cosine", fitted=seed != 0)  # fmt: skip
    assert ("1 more read nothing, a run of each never having fitted its training set: "
            "‘generators: layernorm, schedule: cosine’") in task_f()  # fmt: skip


def test_every_centre_adaptive_cell_sits_beside_its_literal_twin_and_a_set_transformer():
    """The layer's reading (mzlite.nn choice 9): each ``ca-`` cell trains MZ under def:relop's
    reading on exactly the task, options, overrides and sizes of the literal MZ cell it is named
    after, with the same parameter count, beside a Set Transformer cell of the same column."""
    from mzlite.repro.experiments.cells import CENTRE_ADAPTIVE_MODEL

    found = []
    for label in ex.TABLES:
        spec = ex.get_table(label)
        for cell in spec.cells:
            if cell.model != CENTRE_ADAPTIVE_MODEL:
                continue
            twin = spec.cell(cell.id.removeprefix("ca-"))
            assert (twin.model, twin.task, twin.options, twin.model_kwargs, twin.sizes) == (
                "mz_full", cell.task, cell.options, cell.model_kwargs, cell.sizes)  # fmt: skip
            d_in = {**task_options(cell.task), **cell.options}["d"]  # the task's dimension
            built = {
                c.model: mznn.build_model(c.model, d_in, device="meta", **c.model_kwargs)
                for c in (cell, twin)
            }
            assert built[cell.model].cfg.layer_reading == "centre_adaptive"
            assert built[twin.model].cfg.layer_reading == "literal"
            counts = {mznn.count_parameters(m) for m in built.values()}
            assert len(counts) == 1  # the reading adds no parameter
            column = cell.id.removeprefix("ca-").rsplit("-", 1)[0]
            same_sets = [c for c in spec.cells if (c.task, c.options) == (cell.task, cell.options)]
            assert any(c.id.startswith(f"{column}-st") for c in same_sets), cell.id
            found.append((label, cell.id))
    assert sorted(found) == [
        ("tab:egnn-comparison", "ca-qt-L16-mz_full"),
        ("tab:main-results", "ca-F-mz_full"),
        ("tab:main-results", "ca-G-mz_full"),
        ("tab:tdof-verify", "ca-L16-mz_1l"),
        ("tab:tdof-verify", "ca-L32-mz_1l"),
    ]


def test_the_layer_readings_pair_every_centre_adaptive_cell_with_its_literal_twin(tmp_path):
    registered = {(label, c.id) for label in ex.TABLES for c in ex.get_table(label).cells
                  if c.id.startswith("ca-")}  # fmt: skip
    assert {(t, ca) for t, _, ca, _, _ in reading.LAYER_CELLS} == registered
    rows = reading.layer_readings(results_dir=tmp_path)
    assert [r.reading for r in rows] == list(reading.LAYER_ROWS) * len(reading.LAYER_CELLS)
    assert all(r.seeds == 0 for r in rows)
    # the table names the campaign it reads: with no run anywhere, the newest
    assert "<caption>Runs of the paper&#x27;s sizes (profile paper-sizes)</caption>" in (
        reading.layer_table(tmp_path)
    )


def test_the_layer_readings_refuse_seeds_of_two_commits(tmp_path):
    spec = ex.get_table("tab:main-results")
    d = tmp_path / "paper-sizes" / spec.dirname
    d.mkdir(parents=True)
    for seed, commit in enumerate(["a" * 40, "a" * 40, "b" * 40]):
        result = {"table": spec.label, "cell": "ca-F-mz_full", "seed": seed,
                  "profile": "paper-sizes", "model_config": {}, "train_config": {},
                  "provenance": {"git_commit": commit},
                  "metrics": {"test": {"r2": 0.4}}}  # fmt: skip
        (d / f"ca-F-mz_full__seed{seed}.json").write_text(json.dumps(result))
    with pytest.raises(ValueError, match="ca-F-mz_full: seeds ran at 2 commits"):
        reading.layer_readings(results_dir=tmp_path)
