"""How mzlite reads the paper (mzlite.experiments.reading): the quotes are the paper's, every
switch exists and is recorded in results, and the reading ablation reads its rows honestly."""

import json
from pathlib import Path

import pytest

from mzlite import experiments as ex
from mzlite import nn as mznn
from mzlite.experiments import reading
from mzlite.paper import paper_tex_path
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
    assert reading.recorded_reading(mz_result) == ("zonotope", "cosine")  # smoke: the default


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
        reading._summary([result], ("zonotope", "plateau"))
    legacy = {"model_config": {}, "train_config": {}}
    assert reading.recorded_reading(legacy) == ("layernorm", "cosine")
