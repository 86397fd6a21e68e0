"""``fit_stacked``: K models trained as one stacked model report what K ``fit`` runs report."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mzlite.nn import build_model
from mzlite.train import TrainConfig, fit, fit_stacked, seed_everything
from mzlite.train.data import as_set_tensors
from mzlite.train.stacked import stacked_batch


class TinySets(nn.Module):
    """phi per element, masked mean, dropout, rho."""

    def __init__(self, p: float = 0.0, h: int = 16):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(3, h), nn.Tanh(), nn.Linear(h, h))
        self.drop = nn.Dropout(p)
        self.rho = nn.Sequential(nn.Tanh(), nn.Linear(h, 1))

    def forward(self, x, mask):  # (B, n, 3), (B, n) -> (B, 1)
        m = mask[..., None].to(x.dtype)  # (B, n, 1)
        return self.rho(self.drop((self.phi(x) * m).sum(1) / m.sum(1)))


def make_data(N: int, seed: int, n_max: int = 10):
    g = torch.Generator().manual_seed(seed)
    n = torch.randint(2, n_max + 1, (N,), generator=g)
    mask = torch.arange(n_max)[None, :] < n[:, None]  # (N, n_max)
    x = torch.randn(N, n_max, 3, generator=g) * mask[..., None]
    y = ((x[..., 0] * mask).sum(1) / n + x[..., 1].amax(1))[:, None] + 2.0  # (N, 1)
    return x, mask, y


TRAIN, VAL = make_data(96, 1), make_data(40, 2)


def cfg(**kw) -> TrainConfig:
    base = dict(
        epochs=3, batch_size=32, lr=3e-3, warmup_epochs=1, patience=None, device="cpu", amp=False
    )
    return TrainConfig(**{**base, **kw})


def tiny(seed: int, p: float = 0.0) -> TinySets:
    seed_everything(seed)
    return TinySets(p)


def mz(seed: int) -> nn.Module:
    return build_model(
        "mz_full", d_in=3, d_out=1, device="cpu", seed=seed,
        d_model=8, n_heads=2, d_ff=16, n_inducing=4, n_g=2, L=2, dropout=0.0,
    )  # fmt: skip


def assert_same_run(separate, stacked, models_sep, models_stk, rtol=1e-4):
    for hs, hk, ms, mk in zip(separate, stacked, models_sep, models_stk, strict=True):
        assert hk.epoch == hs.epoch
        assert hk.stop_reason == hs.stop_reason
        assert hk.best_epoch == hs.best_epoch
        assert hk.lr == pytest.approx(hs.lr, rel=1e-12)
        assert hk.train_loss == pytest.approx(hs.train_loss, rel=rtol)
        assert hk.val_loss == pytest.approx(hs.val_loss, rel=rtol)
        bad = []
        for (n, a), (_, b) in zip(ms.state_dict().items(), mk.state_dict().items(), strict=True):
            # a key bias shifts every score of a query alike and cancels in the softmax: its
            # gradient is rounding noise, which Adam scales up to full steps
            if not n.endswith(".k.bias") and not torch.allclose(b, a, rtol=rtol, atol=1e-5):
                bad.append((n, float((b - a).abs().max())))
        assert not bad, bad


@pytest.mark.parametrize("make", [tiny, mz], ids=["tiny", "mz_full"])
def test_stacked_equals_separate_runs(make):
    configs = [cfg(seed=s, lr=lr) for s, lr in [(0, 3e-3), (1, 1e-3), (2, 5e-3)]]
    sep = [make(10 + k) for k in range(3)]
    hs = [fit(m, TRAIN, VAL, c, progress=False) for m, c in zip(sep, configs, strict=True)]
    stk = [make(10 + k) for k in range(3)]
    hk = fit_stacked(stk, TRAIN, VAL, configs, progress=False)
    assert_same_run(hs, hk, sep, stk)
    # the models learned different things: each kept its own order, init and rate
    assert len({round(h.val_loss[-1], 6) for h in hk}) == 3


def test_early_stopping_and_restore_best_per_model():
    # a high rate for model 1 makes it stop early; the others go on to the cap
    configs = [
        cfg(seed=0, lr=3e-3, epochs=8, patience=2),
        cfg(seed=1, lr=0.2, epochs=8, patience=2),
        cfg(seed=2, lr=1e-3, epochs=8, patience=2),
    ]
    sep = [tiny(k) for k in range(3)]
    hs = [fit(m, TRAIN, VAL, c, progress=False) for m, c in zip(sep, configs, strict=True)]
    stk = [tiny(k) for k in range(3)]
    hk = fit_stacked(stk, TRAIN, VAL, configs, progress=False)
    # the case is tested: model 1 stops early, the others go on to the cap
    assert hs[1].stop_reason == "early_stopping" and len(hs[1].epoch) < 8
    assert len(hs[0].epoch) == len(hs[2].epoch) == 8
    assert_same_run(hs, hk, sep, stk)
    # each member's times are the stack's while it ran: one that stopped early ran less
    assert 0 < hk[1].cpu_time_s < hk[0].cpu_time_s == hk[2].cpu_time_s
    assert hk[1].wall_time_s < hk[0].wall_time_s == hk[2].wall_time_s


def test_resume_is_exact(tmp_path):
    configs = [cfg(seed=s, epochs=8, patience=2, lr=lr) for s, lr in [(0, 3e-3), (1, 0.2)]]
    ref = [tiny(k) for k in range(2)]
    h_ref = fit_stacked(ref, TRAIN, VAL, configs, progress=False)
    # the interruption falls after model 1 stopped and before model 0 did
    assert h_ref[1].stop_reason == "early_stopping" and len(h_ref[1].epoch) <= 6
    assert len(h_ref[0].epoch) == 8

    path = tmp_path / "stack.pt"
    first = [tiny(k) for k in range(2)]
    # interrupt after epoch 6: a stop from inside the loop, as a kill would leave the file
    import mzlite.train.stacked as S

    real = S._train_one_epoch

    def stop_after_six(stack, epoch, *a):
        if epoch == 7:
            raise KeyboardInterrupt
        return real(stack, epoch, *a)

    S._train_one_epoch = stop_after_six
    try:
        with pytest.raises(KeyboardInterrupt):
            fit_stacked(first, TRAIN, VAL, configs, checkpoint_path=path, progress=False)
    finally:
        S._train_one_epoch = real
    again = [tiny(99 + k) for k in range(2)]  # other init: everything must come from the file
    h_again = fit_stacked(again, TRAIN, VAL, configs, checkpoint_path=path, progress=False)
    for a, b, ma, mb in zip(h_ref, h_again, ref, again, strict=True):
        assert b.train_loss == a.train_loss and b.val_loss == a.val_loss
        assert b.stop_reason == a.stop_reason and b.best_epoch == a.best_epoch
        for n, t in ma.state_dict().items():
            assert torch.equal(mb.state_dict()[n], t), n
    # a finished run is just loaded
    loaded = [tiny(5), tiny(6)]
    h3 = fit_stacked(loaded, TRAIN, VAL, configs, checkpoint_path=path, progress=False)
    assert [h.val_loss for h in h3] == [h.val_loss for h in h_ref]
    assert torch.equal(loaded[0].rho[1].weight, ref[0].rho[1].weight)


def test_dropout_runs_match_the_separate_distribution():
    # with dropout the stacked draws are other numbers from the same distribution: the final
    # validation losses of 6 stacked and 6 separate runs agree in mean within their spread
    configs = [cfg(seed=s, epochs=3) for s in range(6)]
    sep = [
        fit(tiny(s, p=0.3), TRAIN, VAL, c, progress=False).val_loss[-1]
        for s, c in enumerate(configs)
    ]
    stk = [
        h.val_loss[-1]
        for h in fit_stacked(
            [tiny(s, p=0.3) for s in range(6)], TRAIN, VAL, configs, progress=False
        )
    ]
    a, b = torch.tensor(sep), torch.tensor(stk)
    spread = torch.cat([a, b]).std()
    assert abs(float(a.mean() - b.mean())) < 2 * float(spread)
    assert not torch.allclose(a, b)  # dropout really drew other masks (the check can fail)
    # and the dropout masks differ between the stacked models (randomness="different")
    nodrop = fit_stacked(
        [tiny(0, p=0.3), tiny(0, p=0.3)], TRAIN, VAL, [cfg(seed=0), cfg(seed=0)], progress=False
    )
    assert nodrop[0].train_loss != nodrop[1].train_loss


def test_padding_to_a_static_size_changes_no_loss():
    configs = [cfg(seed=s) for s in range(2)]
    trimmed = fit_stacked([tiny(k) for k in range(2)], TRAIN, VAL, configs, progress=False)
    padded = fit_stacked(
        [tiny(k) for k in range(2)], TRAIN, VAL, configs, progress=False, pad_to=16
    )
    for a, b in zip(trimmed, padded, strict=True):
        assert b.train_loss == pytest.approx(a.train_loss, rel=1e-5)
        assert b.val_loss == pytest.approx(a.val_loss, rel=1e-5)
    d = as_set_tensors("train", TRAIN, "regression")
    idx = torch.arange(6).view(2, 3)  # (K, B)
    x, mask, _ = stacked_batch(d, idx, idx, 16)
    assert x.shape == (2, 3, 16, 3) and mask.shape == (2, 3, 16) and not mask[..., 10:].any()
    with pytest.raises(ValueError, match="n_to must be >="):
        stacked_batch(d, idx, idx, 1)


def test_graph_needs_cuda():
    if torch.cuda.is_available():
        pytest.skip("the CUDA path is exercised by benchmarks/gpu_throughput.py on a GPU")
    with pytest.raises(ValueError, match="graph=True needs a CUDA device"):
        fit_stacked([tiny(0)], TRAIN, VAL, [cfg()], progress=False, graph=True)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="one TrainConfig per model"):
        fit_stacked([tiny(0), tiny(1)], TRAIN, VAL, [cfg()], progress=False)
    with pytest.raises(ValueError, match=r"differs from configs\[0\] in \['batch_size'\]"):
        fit_stacked([tiny(0), tiny(1)], TRAIN, VAL, [cfg(), cfg(batch_size=16)], progress=False)
    with pytest.raises(ValueError, match="share one architecture"):
        fit_stacked([tiny(0), mz(0)], TRAIN, VAL, [cfg(), cfg()], progress=False)
    with pytest.raises(ValueError, match="models must hold at least one"):
        fit_stacked([], TRAIN, VAL, [], progress=False)
    with pytest.raises(ValueError, match="pad_to must be"):
        fit_stacked([tiny(0)], TRAIN, VAL, [cfg()], progress=False, pad_to=0)


def test_runner_stacks_a_cells_seeds(tmp_path):
    import json
    from pathlib import Path

    from mzlite.repro import experiments as ex

    dirs = {"results_dir": tmp_path / "results", "cache_dir": tmp_path / "cache"}
    kw = dict(cells=["L4-st_4l"], seeds="0-1", threads=1, data_workers=1, progress=False)
    out = ex.run("tab:tdof-verify", "smoke", stack=True, precision="float32", **kw, **dirs)
    assert len(out["done"]) == 2 and not out["failed"]
    res = [json.loads(Path(p).read_text()) for p in sorted(out["done"])]
    assert [r["seed"] for r in res] == [0, 1]
    for r in res:
        assert r["protocol"]["trained_stacked"] == 2
        assert r["epochs_run"] == len(r["history"]["train_loss"]) == 3
        assert r["train_config"]["seed"] == r["seed"] and r["history"]["config"]["amp"] is False
    assert res[0]["history"]["train_loss"] != res[1]["history"]["train_loss"]
    # the stack's checkpoint was written beside the jobs' own, and is removed with the results
    ckpts = Path(dirs["cache_dir"], "checkpoints")
    assert ckpts.is_dir() and not list(ckpts.rglob("*.pt"))
    # a rerun finds both results done, stacked or not
    again = ex.run("tab:tdof-verify", "smoke", stack=False, precision="float32", **kw, **dirs)
    assert len(again["skipped"]) == 2 and not again["done"]
    with pytest.raises(ValueError, match="stack must be True, False or None"):
        ex.run("tab:tdof-verify", "smoke", stack="yes", **kw, **dirs)
    with pytest.raises(ValueError, match="graph must be True, False or None"):
        ex.run("tab:tdof-verify", "smoke", graph="yes", **kw, **dirs)
    with pytest.raises(ValueError, match="graph=True needs stacked training on a CUDA device"):
        ex.run("tab:tdof-verify", "smoke", stack=True, graph=True, device="cpu", **kw, **dirs)


def test_the_stacks_of_a_tables_cells_keep_checkpoints_of_their_own(tmp_path):
    """Two cells of one table stacked side by side (``run --workers``) must not resume each
    other's stack: their checkpoints are named by cell, in the folder of the jobs' own."""
    from mzlite.repro import experiments as ex
    from mzlite.repro.experiments.execute import stack_checkpoint_path

    kw = {"results_dir": tmp_path / "results", "cache_dir": tmp_path / "cache"}
    raw = ex.jobs("tab:meb", "smoke", "0-1", cells=["abl-d8-scale-mz_full"], **kw)
    std = ex.jobs("tab:meb", "smoke", "0-1", cells=["abl-d8-scale-ynorm-mz_full"], **kw)
    a, b = stack_checkpoint_path(raw), stack_checkpoint_path(std)
    assert a != b and a.parent == b.parent == raw[0].checkpoint_path.parent
    assert a.name.startswith("abl-d8-scale-mz_full__")


def test_the_graph_path_takes_lone_seeds_to_fit_stacked_and_leaves_jobs_alone(tmp_path):
    """On the graph path (CUDA) a lone trainable seed trains as a stack of one, since the graph
    lives in ``fit_stacked``; a closed-form job, or one resuming its own unstacked checkpoint,
    runs as itself. On this CPU the first reaches ``fit_stacked(graph=True)``, which refuses."""
    from mzlite.repro import experiments as ex
    from mzlite.repro.experiments.runner import _worker

    dirs = {"results_dir": tmp_path / "results", "cache_dir": tmp_path / "cache"}
    trained, closed = ex.jobs("tab:tdof-verify", "smoke", "0", cells=["L4-st_4l", "L4-set_stats"],
                              precision="float32", **dirs)  # fmt: skip
    [got] = _worker([trained], None, None, graph=True)
    assert "graph=True needs a CUDA device" in got["error"]
    [got] = _worker([closed], None, None, graph=True)
    assert "error" not in got and closed.result_path.exists()
    trained.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
    trained.checkpoint_path.write_bytes(b"")  # its own (empty) checkpoint: fit tries to resume it
    [got] = _worker([trained], None, None, graph=True)
    assert "in run_jobs" in got["trace"] and "in _resume" in got["trace"]


def test_a_running_stack_says_each_seeds_epoch_and_losses(tmp_path, capsys):
    """``python -m mzlite run`` on a stacked cell (the default on CUDA) prints where each seed
    is, as an unstacked job does (``execute.epoch_lines``: every epoch at an interval of 0)."""
    from mzlite.repro import experiments as ex
    from mzlite.repro.experiments.execute import run_jobs

    group = ex.jobs("tab:tdof-verify", "smoke", "0-1", cells=["L4-st_4l"],
                    results_dir=tmp_path / "results", cache_dir=tmp_path / "cache",
                    precision="float32")  # fmt: skip
    run_jobs(group, epoch_every_s=0.0)
    err = capsys.readouterr().err
    for seed in (0, 1):
        for epoch in (1, 2, 3):
            assert f"L4-st_4l seed {seed}: epoch {epoch}/3, train loss " in err
    run_jobs(group, epoch_every_s=None)  # no interval: silent
    assert "epoch" not in capsys.readouterr().err


def test_standardised_targets_and_classification_equal_separate_runs():
    # normalize_targets: every model answers in target units at the end, as after fit
    x, mask, y = TRAIN
    big = (x, mask, y * 50 + 100)
    vbig = (VAL[0], VAL[1], VAL[2] * 50 + 100)
    configs = [cfg(seed=s, normalize_targets=True) for s in range(2)]
    sep = [tiny(k) for k in range(2)]
    hs = [fit(m, big, vbig, c, progress=False) for m, c in zip(sep, configs, strict=True)]
    stk = [tiny(k) for k in range(2)]
    hk = fit_stacked(stk, big, vbig, configs, progress=False)
    assert_same_run(hs, hk, sep, stk)
    for ms, mk, a, b in zip(sep, stk, hs, hk, strict=True):
        assert b.target_mean == a.target_mean
        torch.testing.assert_close(mk(VAL[0], VAL[1]), ms(VAL[0], VAL[1]), rtol=1e-4, atol=1e-3)

    # classification: logits (B, C), integer labels
    def labels(d):
        return d[0], d[1], (d[2][:, 0] > d[2].median()).long()

    configs = [cfg(seed=s, task="classification") for s in range(2)]

    def two_class(seed):
        m = tiny(seed)
        m.rho[1] = nn.Linear(16, 2)
        return m

    sep = [two_class(k) for k in range(2)]
    tr, va = labels(TRAIN), labels(VAL)
    hs = [fit(m, tr, va, c, progress=False) for m, c in zip(sep, configs, strict=True)]
    stk = [two_class(k) for k in range(2)]
    hk = fit_stacked(stk, tr, va, configs, progress=False)
    assert_same_run(hs, hk, sep, stk)
    assert hk[0].val_metrics[-1]["accuracy"] == hs[0].val_metrics[-1]["accuracy"]


def test_stack_groups_keep_an_interrupted_run_alone(tmp_path):
    from mzlite.repro.experiments import jobs
    from mzlite.repro.experiments.runner import _stack_groups

    todo = jobs(
        "tab:tdof-verify", "smoke", "0-2", None, ["L4-st_4l", "L4-set_stats"],
        tmp_path / "r", tmp_path / "c", "cpu",
    )  # fmt: skip
    groups = _stack_groups(todo)
    sizes = sorted((g[0].cell.id, len(g)) for g in groups)
    n_closed = sum(j.cell.id == "L4-set_stats" for j in todo)  # closed form: each alone
    assert n_closed >= 1 and ("L4-st_4l", 3) in sizes
    assert sizes.count(("L4-set_stats", 1)) == n_closed
    st = [j for j in todo if j.cell.id == "L4-st_4l"]
    st[1].checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
    st[1].checkpoint_path.write_bytes(b"")  # an unstacked fit was interrupted here
    groups = [[j.seed for j in g] for g in _stack_groups(st)]
    assert groups == [[0, 2], [1]]
