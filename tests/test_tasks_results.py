"""A result records the task reading its data were made under, results of two readings are
never one experiment, and the yardstick records the set-size-only ridge beside it."""

import json
import os
import time

import pytest

from mzlite import tasks as T
from mzlite.repro import experiments as ex
from mzlite.repro.experiments.cells import calibration_cells
from mzlite.repro.experiments.results import OtherReadingWarning, file_identity, results_state
from mzlite.repro.experiments.specs import task_options_diff


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("readings")
    return {"results_dir": root / "results", "cache_dir": root / "cache"}


def _run(dirs, cells):
    return ex.run("tab:main-results", "smoke", threads=1, data_workers=1, progress=False,
                  cells=cells, **dirs)  # fmt: skip


def test_a_result_records_its_reading_and_the_set_size_ridge(dirs):
    (path,) = _run(dirs, ["cal-B-near-copy-same-size-set_stats"])["done"]
    res = json.loads(open(path).read())
    assert res["task_reading"] == "near-copy-same-size"
    opts = res["task_options"]
    assert (opts["rotation"], opts["max_angle"], opts["independent_size"]) == ("small", 0.3, "same")
    # the set-size-only ridge, recomputed on the same splits
    (job,) = ex.jobs("tab:main-results", "smoke", cells=["cal-B-near-copy-same-size-set_stats"],
                     **dirs)  # fmt: skip
    tr, _, te = ex.execute.job_splits(job)
    size = T.baseline_r2(tr, te, features="size")["r2"]
    assert res["metrics"]["test"]["set_size_r2"] == pytest.approx(size, abs=1e-12)
    assert res["metrics"]["test"]["r2"] == pytest.approx(T.baseline_r2(tr, te)["r2"], abs=1e-12)


def test_a_result_of_another_reading_is_never_skipped_as_done(dirs):
    _run(dirs, ["cal-B-near-copy-set_stats"])
    (job,) = ex.jobs("tab:main-results", "smoke", cells=["cal-B-near-copy-set_stats"], **dirs)
    assert ex.is_done(job)
    text = job.result_path.read_text()
    res = json.loads(text)
    res["task_options"]["rotation"] = "haar"  # the v1 generator's data under this cell's name
    job.result_path.write_text(json.dumps(res))
    try:
        with pytest.raises(ValueError, match="task_options.rotation.*task_reading"):
            ex.is_done(job)
    finally:
        job.result_path.write_text(text)


def test_a_result_written_before_the_reading_options_existed_reads_v1(dirs):
    _run(dirs, ["B-set_stats"])
    (job,) = ex.jobs("tab:main-results", "smoke", cells=["B-set_stats"], **dirs)
    res = json.loads(job.result_path.read_text())
    assert res["task_reading"] == "v1"
    for k in ("rotation", "max_angle", "independent_size"):
        del res["task_options"][k]  # as every result before readings had them
    del res["task_reading"]
    assert task_options_diff(res, job.cell) == {}
    res["task_options"]["point_std"] = 4.0
    assert task_options_diff(res, job.cell) == {"task_options.point_std": (4.0, 8.0)}


def test_calibration_cells_are_the_set_transformer_and_the_yardstick_on_each_reading():
    table = ex.get_table("tab:main-results")
    cal = [c for c in table.cells if c.id.startswith("cal-")]
    assert cal and all(c.model in ("st", ex.SET_STATS) and c.part == "ablation" for c in cal)
    for c in cal:
        reading = T.task_reading(c.task, c.options)
        assert reading not in ("v1", "custom") and f"-{reading}-" in c.id
    tdof = [c for c in ex.get_table("tab:tdof-verify").cells if c.id.startswith("cal-")]
    assert {T.task_reading(c.task, c.options) for c in tdof} == {"m0-zero", "witness-d64"}
    assert {c.options["L"] for c in tdof} == {16, 32}
    with pytest.raises(ValueError, match="main cells"):
        calibration_cells("B", "chamfer_matching", ["v1"], "B", ("st", "st", "ST", {}),
                          (10, 10, 10), 8)  # fmt: skip


def test_a_result_of_another_reading_is_left_out_of_its_cell(dirs):
    _run(dirs, ["B-set_stats"])
    (job,) = ex.jobs("tab:main-results", "smoke", cells=["B-set_stats"], **dirs)
    text = job.result_path.read_text()
    assert (
        len(ex.results_by_cell("tab:main-results", "smoke", dirs["results_dir"])["B-set_stats"])
        == 1
    )
    res = json.loads(text)
    res["task_options"]["independent_size"] = "same"  # the same-size reading's data
    job.result_path.write_text(json.dumps(res))
    try:
        with pytest.warns(OtherReadingWarning, match="task_reading"):
            by_cell = ex.results_by_cell("tab:main-results", "smoke", dirs["results_dir"])
        assert "B-set_stats" not in by_cell
    finally:
        job.result_path.write_text(text)


def test_a_result_file_has_an_identity_once_it_has_settled(tmp_path):
    """A file rewritten within the file system's timestamp granularity could keep its (inode,
    size, mtime): until it is 2 s old it has no identity, and the state of the results it lies
    among equals no other, so neither the parse cache nor ``findings.once`` keeps a stale read."""
    path = tmp_path / "full" / "r.json"
    path.parent.mkdir()
    path.write_text("{}")
    assert file_identity(path) is None
    assert results_state(tmp_path) != results_state(tmp_path)
    old = time.time() - 10
    os.utime(path, (old, old))
    st = path.stat()
    assert file_identity(path) == (st.st_ino, st.st_size, st.st_mtime_ns)
    assert results_state(tmp_path) == results_state(tmp_path)
    path.write_text("{ }")  # rewritten: another size, and no identity until it settles
    os.utime(path, (old, old))
    assert file_identity(path) == (st.st_ino, st.st_size + 1, st.st_mtime_ns)
