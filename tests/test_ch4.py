"""Chapter 4 ("Training MZAttn for real"): its exercises and its plot helper ``viz.plot_sweep``."""

from __future__ import annotations

import math

import pytest

from mzlite import experiments as ex
from mzlite.exercises import check
from mzlite.exercises.ch4 import EX_CELL, EX_STEP, TABLE, full_protocol
from mzlite.nn import build_model, count_parameters
from mzlite.train import TrainConfig, lr_at
from mzlite.viz import plot_sweep


def test_full_protocol_is_the_papers():
    n_train, spe, cfg = full_protocol()
    job = ex.jobs(TABLE, "full", cells=[EX_CELL])[0]
    assert n_train == job.sizes[0] and spe == math.ceil(n_train / cfg.batch_size)
    paper = TrainConfig()
    for f in ("lr", "weight_decay", "warmup_epochs", "epochs", "patience", "grad_clip"):
        assert getattr(cfg, f) == getattr(paper, f), f


def test_solutions_pass_and_wrong_answers_fail():
    _, spe, cfg = full_protocol()
    check("ch4.steps", spe, strict=True)
    assert check("ch4.steps", spe + 1).status == "wrong"
    assert check("ch4.steps", True).status == "wrong"
    check("ch4.warmup_lr", lr_at(EX_STEP, spe, cfg), strict=True)
    assert check("ch4.warmup_lr", lr_at(EX_STEP + 1, spe, cfg)).status == "wrong"
    assert check("ch4.warmup_lr", cfg.lr).status == "wrong"
    one_block = count_parameters(
        build_model("st", 32, 1, device="cpu", n_enc=4)
    ) - count_parameters(build_model("st", 32, 1, device="cpu", n_enc=3))
    check("ch4.layer_params", one_block, strict=True)
    assert check("ch4.layer_params", one_block + 1).status == "wrong"
    assert check("ch4.layer_params", ...).status == "unanswered"


def test_plot_sweep_traces_gaps_and_styles():
    fig = plot_sweep(
        {
            "paper": ([4, 8, 16], [0.9, 0.8, 0.7], {"dash": "dash", "error": [0.1, None, 0.0]}),
            "ours": ([4, 8, 16], [0.5, None, 0.4]),
        },
        xlabel="L",
        ylabel="R^2",
        title="t",
        hline=0.9,
        hline_label="claim",
    )
    assert [t.name for t in fig.data] == ["paper", "ours"]
    assert fig.data[0].line.dash == "dash" and list(fig.data[0].error_y.array) == [0.1, 0.0, 0.0]
    assert fig.data[1].y[1] is None and fig.data[1].error_y.array is None
    assert fig.layout.xaxis.title.text == "L" and len(fig.layout.shapes) == 1


@pytest.mark.parametrize(
    ("series", "match"),
    [
        ({}, "non-empty"),
        ({"a": [1, 2]}, "must be"),
        ({"a": ([1, 2], [1])}, "equal lengths"),
        ({"a": ([1], [1], {"colour": "red"})}, "unknown style"),
        ({"a": ([1, 2], [1, 2], {"error": [0.1]})}, "one entry per point"),
    ],
)
def test_plot_sweep_rejects_bad_input(series, match):
    with pytest.raises(ValueError, match=match):
        plot_sweep(series)
