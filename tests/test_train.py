"""mzlite.train: schedule, clipping, early stopping, determinism, resume, normalisation, trimming.

Every check compares against something computed independently of the trainer (hand formulas,
sklearn, a plain forward pass, weights recorded by a callback), so a trainer bug fails a test.
The model is a tiny masked DeepSets defined here: training knows no specific model.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import r2_score
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from mzlite import train as T
from mzlite.train import (
    History,
    TrainConfig,
    evaluate,
    fit,
    load_checkpoint,
    lr_at,
    predict,
    regression_metrics,
    remove_target_scaling,
    standardised_outputs,
    target_scaling,
)


class TinyDeepSets(nn.Module):
    """phi per element, masked mean, dropout, rho. Records the widest set it was given."""

    def __init__(self, d_in: int = 3, h: int = 16, d_out: int = 1, p: float = 0.1):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(d_in, h), nn.Tanh(), nn.Linear(h, h))
        self.drop = nn.Dropout(p)
        self.rho = nn.Sequential(nn.Tanh(), nn.Linear(h, d_out))
        self.max_width = 0

    def forward(self, x, mask):  # (B, n, d), (B, n) -> (B, d_out)
        self.max_width = max(self.max_width, x.shape[1])
        m = mask[..., None].to(x.dtype)  # (B, n, 1)
        pooled = (self.phi(x) * m).sum(1) / m.sum(1)  # (B, h)
        return self.rho(self.drop(pooled))


def make_data(
    N: int, seed: int, n_max: int = 12, n_lo: int = 2, n_hi: int | None = None, scale=1.0
):
    """Sets of 3-d points, n ~ U{n_lo..n_hi}, zero padded at the end; y = mean of x0 + max of x1."""
    g = torch.Generator().manual_seed(seed)
    n_hi = n_max if n_hi is None else n_hi
    n = torch.randint(n_lo, n_hi + 1, (N,), generator=g)
    mask = torch.arange(n_max)[None, :] < n[:, None]  # (N, n_max)
    x = torch.randn(N, n_max, 3, generator=g) * mask[..., None]
    x0 = (x[..., 0] * mask).sum(1) / n
    x1 = x[..., 1].masked_fill(~mask, -1e9).amax(1)
    y = (x0 + x1)[:, None] * scale + 3.0 * scale  # (N, 1)
    return x, mask, y


def small_cfg(**kw) -> TrainConfig:
    base = dict(epochs=6, batch_size=32, lr=3e-3, warmup_epochs=1, patience=None, device="cpu")
    base.update(kw)
    return TrainConfig(**base)


def build(seed: int = 0, **kw) -> TinyDeepSets:
    T.seed_everything(seed)
    return TinyDeepSets(**kw)


def same_precision(cfg: TrainConfig):
    """The autocast ``fit``/``evaluate`` use for ``cfg`` on the CPU, for hand-made references."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=T.resolve_amp(cfg.amp, "cpu"))


def states_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


TRAIN, VAL = make_data(192, 1), make_data(64, 2)


# --------------------------------------------------------------------------------------------


def test_lr_schedule_known_steps():
    cfg = TrainConfig(lr=1e-3, epochs=10, warmup_epochs=2)
    spe = 5  # W = 10 warm-up steps, T = 50 steps
    assert lr_at(0, spe, cfg) == pytest.approx(1e-4)  # lr * 1/10
    assert lr_at(4, spe, cfg) == pytest.approx(5e-4)
    assert lr_at(9, spe, cfg) == pytest.approx(1e-3)  # warm-up ends at the full rate
    assert lr_at(10, spe, cfg) == pytest.approx(1e-3)  # cosine starts at the full rate
    assert lr_at(30, spe, cfg) == pytest.approx(5e-4)  # half way through the cosine (20 / 40)
    assert lr_at(20, spe, cfg) == pytest.approx(1e-3 * (1 + math.cos(math.pi / 4)) / 2)
    assert lr_at(49, spe, cfg) == pytest.approx(1e-3 * (1 - math.cos(math.pi / 40)) / 2)
    assert lr_at(49, spe, cfg) < 2e-6
    no_warm = TrainConfig(lr=1e-3, epochs=10, warmup_epochs=0)
    assert lr_at(0, spe, no_warm) == pytest.approx(1e-3)


def test_fit_follows_the_schedule():
    # 192 samples / 32 = 6 steps per epoch; History.lr is the rate of each epoch's last step.
    cfg = small_cfg(epochs=4, warmup_epochs=2, lr=1e-3)
    hist = fit(build(), TRAIN, VAL, cfg, progress=False)
    W, Tt = 12, 24
    expected = [1e-3 * 6 / W, 1e-3 * 12 / W]
    expected += [1e-3 * (1 + math.cos(math.pi * (s - W) / (Tt - W))) / 2 for s in (17, 23)]
    assert hist.lr == pytest.approx(expected)


def _grad_norms_at_step(cfg) -> list[float]:
    norms = []

    def hook(opt, args, kwargs):
        grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
        norms.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))

    handle = register_optimizer_step_pre_hook(hook)
    try:
        x, m, y = TRAIN
        fit(build(), (x, m, y * 100), (VAL[0], VAL[1], VAL[2] * 100), cfg, progress=False)
    finally:
        handle.remove()
    return norms


def test_gradient_clipping_applied():
    unclipped = _grad_norms_at_step(small_cfg(epochs=1, grad_clip=None))
    assert max(unclipped) > 5.0  # large targets: clipping has work to do
    clipped = _grad_norms_at_step(small_cfg(epochs=1, grad_clip=1.0))
    assert len(clipped) == 6
    assert max(clipped) <= 1.0 + 1e-5
    assert min(clipped) > 0.99  # every step was clipped to the norm, not zeroed


def test_early_stopping_restores_best_weights():
    # Validation targets are the negated function: fitting the train set makes val worse.
    vx, vm, vy = VAL
    snapshots = {}

    def record(epoch, hist, model):
        snapshots[epoch] = {k: v.clone() for k, v in model.state_dict().items()}

    model = build()
    cfg = small_cfg(epochs=60, patience=3, lr=1e-2, warmup_epochs=0)
    hist = fit(model, TRAIN, (vx, vm, -vy), cfg, progress=False, callbacks=[record])
    assert hist.stopped_early and hist.stop_reason == "early_stopping"
    best = int(np.nanargmin(hist.val_loss)) + 1
    assert hist.best_epoch == best
    assert hist.epochs_run == best + 3 < 60
    assert hist.best_val_loss == min(hist.val_loss)
    assert max(snapshots) == hist.epochs_run  # the callback saw every epoch, the last included
    assert states_equal(model.state_dict(), snapshots[best])
    assert not states_equal(model.state_dict(), snapshots[hist.epochs_run])


def test_deterministic_on_cpu():
    h1 = fit(m1 := build(0), TRAIN, VAL, small_cfg(seed=5), progress=False)
    h2 = fit(m2 := build(0), TRAIN, VAL, small_cfg(seed=5), progress=False)
    assert h1.train_loss == h2.train_loss and h1.val_loss == h2.val_loss
    assert states_equal(m1.state_dict(), m2.state_dict())
    h3 = fit(build(0), TRAIN, VAL, small_cfg(seed=6), progress=False)  # data order and dropout
    assert h3.train_loss != h1.train_loss


class Interrupt(KeyboardInterrupt):
    pass


def test_resume_after_interrupt_matches_uninterrupted(tmp_path):
    cfg = small_cfg(epochs=7, patience=50)
    ref_model = build(0)
    ref = fit(ref_model, TRAIN, VAL, cfg, progress=False)

    path = tmp_path / "run.pt"

    def stop_after_3(epoch, hist, model):
        if epoch == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        fit(
            build(0),
            TRAIN,
            VAL,
            cfg,
            checkpoint_path=path,
            progress=False,
            callbacks=[stop_after_3],
        )
    ckpt = torch.load(path, weights_only=True)
    assert ckpt["epoch"] == 3 and not ckpt["finished"]

    seen = []
    model = build(123)  # a different init: the checkpoint's weights must replace it
    hist = fit(
        model, TRAIN, VAL, cfg, checkpoint_path=path, progress=False,
        callbacks=[lambda e, h, m: seen.append(e)],
    )  # fmt: skip
    assert seen[0] == 4
    assert hist.epoch == list(range(1, 8))
    assert hist.train_loss == ref.train_loss and hist.val_loss == ref.val_loss
    assert hist.best_epoch == ref.best_epoch
    assert states_equal(model.state_dict(), ref_model.state_dict())

    # A finished run is only loaded.
    again = build(7)
    h_again = fit(again, TRAIN, VAL, cfg, checkpoint_path=path, progress=False)
    assert h_again.epoch == hist.epoch
    assert states_equal(again.state_dict(), ref_model.state_dict())


def test_checkpoint_weights_only_and_contents(tmp_path):
    path = tmp_path / "c.pt"
    cfg = small_cfg(epochs=2, normalize_targets=True)
    fit(build(), TRAIN, VAL, cfg, checkpoint_path=path, progress=False)
    ckpt = torch.load(path, weights_only=True)
    for key in ("model", "best_model", "optimizer", "scheduler", "epoch", "history", "rng"):
        assert key in ckpt
    assert ckpt["finished"] and ckpt["epoch"] == 2 and ckpt["scheduler"]["step"] == 12
    assert isinstance(ckpt["rng"]["torch"], torch.Tensor)
    assert list(tmp_path.iterdir()) == [path]  # no stray temp files
    with pytest.raises(ValueError, match="batch_size"):
        fit(build(), TRAIN, VAL, small_cfg(epochs=2, batch_size=16, normalize_targets=True),
            checkpoint_path=path, progress=False)  # fmt: skip


def test_target_normalisation_metrics_in_original_units():
    scale = 500.0
    tr, va, te = (
        make_data(192, 1, scale=scale),
        make_data(64, 2, scale=scale),
        make_data(96, 3, scale=scale),
    )
    cfg = small_cfg(epochs=20, lr=1e-2, normalize_targets=True)
    model = build()
    hist = fit(model, tr, va, cfg, progress=False)

    # by hand: standardise with the train mean / population std, predict, map back
    y_tr = tr[2].double().numpy()
    mean, std = y_tr.mean(0), y_tr.std(0)
    assert hist.target_mean == pytest.approx(mean.tolist()) and hist.target_std == pytest.approx(
        std.tolist()
    )
    with torch.no_grad(), same_precision(cfg), standardised_outputs(model):  # training units
        model.eval()
        pred = model(te[0], te[1]).double().numpy() * std + mean
    y_te = te[2].double().numpy()
    m = evaluate(model, te, cfg, target_stats=hist)
    assert m["r2"] == pytest.approx(r2_score(y_te, pred), abs=1e-6)
    assert m["mse"] == pytest.approx(float(((pred - y_te) ** 2).mean()), rel=1e-5)
    assert m["mae"] == pytest.approx(float(np.abs(pred - y_te).mean()), rel=1e-5)
    assert m["r2"] > 0.3  # it learnt something, in original units
    # the confound of Appendix app:opt-confound in miniature: raw targets of size ~1e3 train worse
    raw = build()
    fit(raw, tr, va, small_cfg(epochs=20, lr=1e-2), progress=False)
    assert evaluate(raw, te, 64)["r2"] < m["r2"]
    # the training loss is in standardised units (O(1)), not in units of scale^2
    assert hist.train_loss[-1] < 5.0
    # for a model that does not carry its statistics, forgetting them is an error, not a silently
    # wrong number
    remove_target_scaling(model)
    with pytest.raises(ValueError, match="target_stats"):
        evaluate(model, te, cfg)


def test_a_trained_model_answers_in_target_units(tmp_path):
    tr, va, te = (make_data(128, s, scale=300.0) for s in (1, 2, 3))
    cfg = small_cfg(epochs=3, normalize_targets=True)
    model = build()
    hist = fit(model, tr, va, cfg, checkpoint_path=tmp_path / "run.pt", progress=False)
    scaling = target_scaling(model)
    assert scaling.mean.tolist() == hist.target_mean and scaling.std.tolist() == hist.target_std
    with torch.no_grad():
        raw = model.eval()(te[0], te[1])
        with standardised_outputs(model):
            std_units = model(te[0], te[1])
    want = (std_units.double() * scaling.std + scaling.mean).float()
    torch.testing.assert_close(raw, want)
    # predict and evaluate need no History, and agree with the History-based call
    torch.testing.assert_close(predict(model, te, cfg), predict(model, te, cfg, target_stats=hist))
    assert evaluate(model, te, cfg) == evaluate(model, te, cfg, target_stats=hist)
    with pytest.raises(ValueError, match="differ from the target scaling"):
        predict(model, te, cfg, target_stats=([0.0], [1.0]))
    # the checkpoint keeps it: a fresh model resumed from the finished run answers the same
    assert "target_scaling.mean" in load_checkpoint(tmp_path / "run.pt")["model"]
    again = build()
    fit(again, tr, va, cfg, checkpoint_path=tmp_path / "run.pt", progress=False)
    with torch.no_grad():
        torch.testing.assert_close(again.eval()(te[0], te[1]), raw)
    # training again starts from standardised outputs and ends with the new statistics
    hist2 = fit(model, va, tr, small_cfg(epochs=1, normalize_targets=True), progress=False)
    assert target_scaling(model).mean.tolist() == hist2.target_mean
    fit(model, tr, va, small_cfg(epochs=1), progress=False)  # raw targets: no scaling
    assert target_scaling(model) is None


def test_padding_trimming_gives_same_results():
    # sets of 2..8 elements padded to 30: trimming cuts every batch to <= 8 columns
    tr, va = make_data(192, 1, n_max=30, n_hi=8), make_data(64, 2, n_max=30, n_hi=8)
    m_trim, m_full = build(0), build(0)
    h_trim = fit(m_trim, tr, va, small_cfg(trim_padding=True), progress=False)
    h_full = fit(m_full, tr, va, small_cfg(trim_padding=False), progress=False)
    assert m_trim.max_width <= 8 and m_full.max_width == 30
    np.testing.assert_allclose(h_trim.train_loss, h_full.train_loss, rtol=1e-5)
    np.testing.assert_allclose(h_trim.val_loss, h_full.val_loss, rtol=1e-5)
    for k, v in m_trim.state_dict().items():
        torch.testing.assert_close(v, m_full.state_dict()[k], rtol=1e-4, atol=1e-6)


def test_regression_metrics_match_sklearn_multioutput():
    g = torch.Generator().manual_seed(0)
    y = torch.randn(50, 3, generator=g) * torch.tensor([1.0, 10.0, 0.1])
    p = y + 0.3 * torch.randn(50, 3, generator=g)
    m = regression_metrics(p, y)
    assert m["r2"] == pytest.approx(r2_score(y.numpy(), p.numpy()), abs=1e-6)
    assert m["r2_per_output"] == pytest.approx(
        r2_score(y.numpy(), p.numpy(), multioutput="raw_values").tolist(), abs=1e-6
    )
    assert m["mse"] == pytest.approx(float(((p - y) ** 2).mean()), rel=1e-6)


def test_classification_fit_and_evaluate():
    x, m, y = TRAIN
    labels = (y[:, 0] > y[:, 0].median()).long()
    vx, vm, vy = VAL
    vlab = (vy[:, 0] > y[:, 0].median()).long()
    model = build(d_out=2)
    cfg = small_cfg(task="classification", epochs=5)
    hist = fit(model, (x, m, labels), (vx, vm, vlab), cfg, progress=False)
    res = evaluate(model, (vx, vm, vlab), cfg)
    with torch.no_grad(), same_precision(cfg):
        logits = model(vx, vm).float()
    assert res["accuracy"] == pytest.approx(float((logits.argmax(1) == vlab).float().mean()))
    expected_ce = float(nn.functional.cross_entropy(logits.double(), vlab))
    assert res["cross_entropy"] == pytest.approx(expected_ce, rel=1e-5)
    assert hist.val_metrics[-1].keys() >= {"accuracy", "cross_entropy"}


def test_history_to_dict_is_strict_json(tmp_path):
    import json

    hist = fit(build(), TRAIN, VAL, small_cfg(epochs=2), progress=False)
    d = hist.to_dict()
    text = json.dumps(d, allow_nan=False)
    back = History.from_dict(json.loads(text))
    assert back.epochs_run == 2 and back.val_loss == hist.val_loss
    assert d["stopped_early"] is False and d["stop_reason"] == "completed"
    import matplotlib

    matplotlib.use("Agg")
    ax = hist.plot(metric="r2")
    assert len(ax.lines) == 3  # train, val, best-epoch marker


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"lr": 0.0}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"epochs": 0}, "epochs"),
        ({"batch_size": -1}, "batch_size"),
        ({"task": "ranking"}, "task"),
        ({"warmup_epochs": 300}, "warmup_epochs"),
        ({"patience": 0}, "patience"),
        ({"grad_clip": -1.0}, "grad_clip"),
        ({"weight_decay": -1e-5}, "weight_decay"),
        ({"betas": (0.9, 1.5)}, "betas"),
        ({"num_threads": 0}, "num_threads"),
        ({"task": "classification", "normalize_targets": True}, "normalize_targets"),
        ({"amp": "yes"}, "amp"),
        ({"epochs": 1, "warmup_epochs": 5}, r"warmup_epochs must be <= epochs \(1\)"),
        (
            {"device": "gpu"},
            "device must be 'auto', 'cpu', 'cuda', 'cuda:N', 'mps' or 'meta', got 'gpu'",
        ),
        ({"device": "cuda:x"}, "device must be"),
    ],
)
def test_bad_config_names_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        TrainConfig(**kw)


def test_an_unset_warm_up_fits_a_short_run():
    """The paper's 5 warm-up epochs are a default: a shorter run warms up over all its epochs,
    and the config holds the number that ran (so a saved config reads back the same)."""
    assert TrainConfig().warmup_epochs == 5
    assert [TrainConfig(epochs=e).warmup_epochs for e in (1, 3, 5, 200)] == [1, 3, 5, 5]
    cfg = TrainConfig(epochs=1)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    assert TrainConfig(epochs=1, warmup_epochs=0).warmup_epochs == 0  # set: kept as given


def test_bad_data_and_model_errors():
    x, m, y = TRAIN
    with pytest.raises(ValueError, match=r"train\.y"):
        fit(build(), (x, m, y[:10]), VAL, small_cfg(), progress=False)
    with pytest.raises(ValueError, match=r"train\.x"):
        fit(build(), (x[0], m, y), VAL, small_cfg(), progress=False)
    with pytest.raises(TypeError, match=r"train\.mask"):
        fit(build(), (x, m.float(), y), VAL, small_cfg(), progress=False)
    with pytest.raises(ValueError, match="model output"):
        fit(build(d_out=2), TRAIN, VAL, small_cfg(), progress=False)  # (B, 2) vs (B, 1)
    with pytest.raises(TypeError, match="train"):
        fit(build(), object(), VAL, small_cfg(), progress=False)


def test_callback_can_stop_training():
    hist = fit(build(), TRAIN, VAL, small_cfg(epochs=6), progress=False,
               callbacks=[lambda e, h, m: e == 2])  # fmt: skip
    assert hist.epochs_run == 2 and hist.stop_reason == "callback" and hist.stopped_early


class DtypeProbe(TinyDeepSets):
    """TinyDeepSets that records the dtype its first linear layer computes in."""

    def forward(self, x, mask):
        self.seen = self.phi[0](x[:1]).dtype
        return super().forward(x, mask)


def test_amp_auto_resolves_per_device_and_dtype(monkeypatch):
    assert T.resolve_amp(True, "cpu") and not T.resolve_amp(False, "cpu")
    assert T.resolve_amp(None, "cpu") == T.cpu_has_bf16()
    assert not T.resolve_amp(None, "cpu", torch.float64)  # autocast never touches float64
    assert not T.resolve_amp(None, "cuda")  # on CUDA bf16 stays opt-in (amp=True)
    monkeypatch.setattr(T.precision, "cpu_has_bf16", lambda: False)  # emulated bf16: slower
    assert not T.resolve_amp(None, "cpu")


@pytest.mark.parametrize("amp", [True, False])
def test_cpu_amp_trains_in_bf16_with_float32_master_state(amp):
    T.seed_everything(0)
    model = DtypeProbe()
    hist = fit(model, TRAIN, VAL, small_cfg(epochs=2, amp=amp), progress=False)
    assert model.seen == (torch.bfloat16 if amp else torch.float32)
    assert hist.config["amp"] is amp
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(math.isfinite(v) for v in hist.train_loss + hist.val_loss)


def test_evaluate_without_a_config_runs_where_the_model_is(monkeypatch):
    """Found on a GPU machine: ``evaluate(model, data, 64)`` sent the data to "auto" (CUDA) while
    the model had been trained on the CPU. Without a TrainConfig the model's device is used."""
    model = build()
    fit(model, TRAIN, VAL, small_cfg(epochs=1), progress=False)  # device="cpu"
    want = evaluate(model, VAL, 64)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # "auto" would now mean CUDA
    assert evaluate(model, VAL, 64) == want
    assert torch.equal(predict(model, VAL, None), predict(model, VAL, 64, device="cpu"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("amp", [True, False])
def test_cuda_fit_trains_in_bf16_when_asked_with_float32_master_state(amp, tmp_path):
    """The GPU path: amp=True is bf16 autocast on CUDA (opt-in there), master weights and
    optimiser state stay float32, and a resumed run lands on the same device."""
    T.seed_everything(0)
    model = DtypeProbe()
    cfg = small_cfg(epochs=3, amp=amp, device="cuda")
    hist = fit(model, TRAIN, VAL, cfg, checkpoint_path=tmp_path / "run.pt", progress=False)
    assert model.seen == (torch.bfloat16 if amp else torch.float32)
    assert hist.config["amp"] is amp
    assert all(p.device.type == "cuda" and p.dtype == torch.float32 for p in model.parameters())
    assert all(math.isfinite(v) for v in hist.train_loss + hist.val_loss)
    assert hist.val_loss[-1] < hist.val_loss[0]
    assert evaluate(model, VAL, cfg)["mse"] == pytest.approx(min(hist.val_loss), rel=1e-3)


def test_history_records_resolved_amp_and_resume_keeps_it(tmp_path, monkeypatch):
    path = tmp_path / "run.pt"

    def stop_after_1(epoch, hist, model):
        raise Interrupt

    with pytest.raises(Interrupt):
        fit(build(), TRAIN, VAL, small_cfg(epochs=3, amp=False), checkpoint_path=path,
            progress=False, callbacks=[stop_after_1])  # fmt: skip
    # an fp32 run resumed with amp=None (auto) continues in fp32, even where auto means bf16
    # patch the name resolve_amp reads (mzlite.train.precision), not the package's re-export
    monkeypatch.setattr(T.precision, "cpu_has_bf16", lambda: True)
    with pytest.raises(ValueError, match="amp: False -> True"):
        fit(build(), TRAIN, VAL, small_cfg(epochs=3, amp=True), checkpoint_path=path,
            progress=False)  # fmt: skip
    hist = fit(build(), TRAIN, VAL, small_cfg(epochs=3), checkpoint_path=path, progress=False)
    assert hist.config["amp"] is False and hist.epochs_run == 3
    assert fit(build(), TRAIN, VAL, small_cfg(epochs=2), progress=False).config["amp"] is True


def test_history_records_the_process_cpu_time_across_a_resume(tmp_path):
    """``cpu_time_s`` adds up the process's CPU seconds over every fit call of a run; a run
    resumed from a checkpoint that did not record it has None (a sum that misses a part would
    under-price it), and ``plan`` then falls back to its wall time."""
    path = tmp_path / "run.pt"

    def stop_after_2(epoch, hist, model):
        if epoch == 2:
            raise Interrupt

    cfg = small_cfg(epochs=4, patience=50)
    with pytest.raises(Interrupt):
        fit(build(0), TRAIN, VAL, cfg, checkpoint_path=path, progress=False,
            callbacks=[stop_after_2])  # fmt: skip
    first = torch.load(path, weights_only=True)["history"]["cpu_time_s"]
    hist = fit(build(0), TRAIN, VAL, cfg, checkpoint_path=path, progress=False)
    assert 0 < first < hist.cpu_time_s
    assert hist.to_dict()["cpu_time_s"] == hist.cpu_time_s

    with pytest.raises(Interrupt):
        fit(build(0), TRAIN, VAL, cfg, checkpoint_path=tmp_path / "old.pt", progress=False,
            callbacks=[stop_after_2])  # fmt: skip
    old = torch.load(tmp_path / "old.pt", weights_only=True)
    del old["history"]["cpu_time_s"]  # as a checkpoint written before it was recorded
    torch.save(old, tmp_path / "old.pt")
    hist = fit(build(0), TRAIN, VAL, cfg, checkpoint_path=tmp_path / "old.pt", progress=False)
    assert hist.epochs_run == 4 and hist.cpu_time_s is None and hist.wall_time_s > 0


# ----------------------------------------------------------------------------- plateau schedule


def test_plateau_schedule_lr_at():
    cfg = small_cfg(lr=1e-3, warmup_epochs=1, schedule="plateau")
    spe = 4
    assert lr_at(0, spe, cfg) == pytest.approx(2.5e-4)  # the warm-up is the cosine's
    assert lr_at(4, spe, cfg) == pytest.approx(1e-3)
    assert lr_at(400, spe, cfg) == pytest.approx(1e-3)  # no decay without a plateau
    assert lr_at(400, spe, cfg, decay=0.25) == pytest.approx(2.5e-4)
    with pytest.raises(ValueError, match="schedule must be one of"):
        small_cfg(schedule="step")
    with pytest.raises(ValueError, match="decay_factor must be a float in"):
        small_cfg(decay_factor=1.0)


def test_plateau_schedule_halves_the_rate_after_each_plateau():
    """A run that cannot improve (lr ~ 0): one decay every ``decay_patience`` epochs without a new
    best, the first epoch being the best; patience then stops it at the decayed rate."""
    cfg = small_cfg(
        lr=1e-12, warmup_epochs=0, schedule="plateau", decay_patience=2, patience=6, epochs=50
    )
    hist = fit(build(0), TRAIN, VAL, cfg, progress=False)
    assert hist.stop_reason == "early_stopping" and hist.epochs_run == 7
    assert [v / 1e-12 for v in hist.lr] == pytest.approx([1, 1, 1, 0.5, 0.5, 0.25, 0.25])


def test_plateau_run_resumes_exactly(tmp_path):
    cfg = small_cfg(epochs=9, schedule="plateau", decay_patience=1, lr=3e-2, patience=50)
    ref_model = build(0)
    ref = fit(ref_model, TRAIN, VAL, cfg, progress=False)
    assert min(ref.lr[1:]) < cfg.lr  # the run decayed at least once

    path = tmp_path / "run.pt"

    def stop_after_4(epoch, hist, model):
        if epoch == 4:
            raise Interrupt

    with pytest.raises(Interrupt):
        fit(build(0), TRAIN, VAL, cfg, checkpoint_path=path, progress=False,
            callbacks=[stop_after_4])  # fmt: skip
    model = build(5)
    hist = fit(model, TRAIN, VAL, cfg, checkpoint_path=path, progress=False)
    assert hist.lr == ref.lr and hist.val_loss == ref.val_loss
    assert states_equal(model.state_dict(), ref_model.state_dict())


def test_history_records_the_training_target_variance():
    hist = fit(build(0), TRAIN, VAL, small_cfg(epochs=2), progress=False)
    assert hist.train_target_var == pytest.approx(float(TRAIN[2].double().var(0, unbiased=False)))
    hist = fit(build(0), TRAIN, VAL, small_cfg(epochs=2, normalize_targets=True), progress=False)
    assert hist.train_target_var == pytest.approx(1.0)
