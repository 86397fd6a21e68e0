"""``fit_stacked``: K models of one architecture trained as one vectorised model, each as its own
``fit`` would train it.

Small set models leave a GPU idle: a training step of MZ-Full is thousands of kernel launches on a
few hundred kilobytes each, so launches, not arithmetic, bound it. Stacking K models' parameters
(``torch.func.stack_module_state``) and running them with ``vmap`` over ``functional_call`` makes
each launch do K models' work. On a CPU arithmetic already bounds the step, and stacking saves
little or nothing (``benchmarks/gpu_throughput.py`` measures both).

Each model keeps what makes its result its own: its data order (the generator rule of ``fit``,
``seed * 1_000_003 + epoch``), its learning rate (configs may differ in ``seed`` and ``lr``), its
early-stopping counters, its kept (best) weights and its ``History``. A model whose patience ran
out is frozen (its rows of the stack no longer change) while the others go on. The optimiser is
AdamW written over the stacked tensors with a per-model rate (the update rule of
``torch.optim.AdamW``), and gradients are clipped per model, never across models. With dropout
off, a stacked run equals K ``fit`` runs to float rounding (``tests/test_stacked.py``); with
dropout on, the draws come from one generator for the stack (``vmap(randomness="different")``),
so they are other draws from the same distribution.

The step is written in tensors only (the rates and the active models are tensors, no branch
reads a value), so that on CUDA ``graph=True`` captures it as a CUDA graph per batch shape and
replays it; batches are then padded to the data's full set size (padding never changes an
output) so that every full batch has one shape.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from mzlite._checks import resolve_device
from mzlite.nn import baselines, fused, models

from .checkpoints import (
    CHECKPOINT_FORMAT,
    check_resume,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from .config import TrainConfig, lr_at
from .data import SetTensors, param_dtype, to_device
from .history import History
from .loop import RunClock, check_output, checked_splits, num_threads_during, record_epoch
from .metrics import classification_metrics, regression_metrics
from .precision import autocast, resolve_amp
from .scaling import remove_target_scaling, set_target_scaling

STACKED_FORMAT = "mzlite.train.stacked/1"

# Config fields the K models may differ in: they change what a model computes, not the shapes or
# the schedule's length that the stack shares.
PER_MODEL_FIELDS = ("seed", "lr")

ADAM_EPS = 1e-8  # torch.optim.AdamW's default, which fit uses


def _check_inputs(models, configs) -> tuple[list[nn.Module], list[TrainConfig]]:
    models, configs = list(models), list(configs)
    if not models:
        raise ValueError("models must hold at least one model, got none")
    for i, m in enumerate(models):
        if not isinstance(m, nn.Module):
            raise TypeError(f"models[{i}] must be a torch.nn.Module, got {type(m).__name__}")
    if len(configs) != len(models):
        raise ValueError(
            f"configs must hold one TrainConfig per model ({len(models)}), got {len(configs)}"
        )
    for i, c in enumerate(configs):
        if not isinstance(c, TrainConfig):
            raise TypeError(f"configs[{i}] must be a TrainConfig, got {type(c).__name__}")
    shapes0 = {k: tuple(v.shape) for k, v in models[0].state_dict().items()}
    for i, m in enumerate(models[1:], 1):
        if type(m) is not type(models[0]):
            raise ValueError(
                f"models must share one architecture: models[{i}] is {type(m).__name__}, "
                f"models[0] is {type(models[0]).__name__}"
            )
        if {k: tuple(v.shape) for k, v in m.state_dict().items()} != shapes0:
            raise ValueError(f"models[{i}] has other parameter names or shapes than models[0]")
    ref = {k: v for k, v in configs[0].to_dict().items() if k not in PER_MODEL_FIELDS}
    for i, c in enumerate(configs[1:], 1):
        d = c.to_dict()
        diff = sorted(k for k in ref if d[k] != ref[k])
        if diff:
            raise ValueError(
                f"configs[{i}] differs from configs[0] in {diff}; stacked models may differ only "
                f"in {PER_MODEL_FIELDS}"
            )
    return models, configs


class _Slot:
    """Model ``k`` of the stack as ``loop.record_epoch`` sees a model (it has a state_dict)."""

    def __init__(self, stack: _Stack, k: int):
        self.stack, self.k = stack, k

    def state_dict(self) -> dict:
        return {name: self.stack.tensor(name)[self.k] for name in self.stack.state_keys}


@dataclass
class _Member:
    """One model's own training state (the fields ``loop.record_epoch`` reads and writes)."""

    config: TrainConfig
    hist: History
    model: _Slot
    bad_epochs: int = 0
    decay: float = 1.0
    decay_wait: int = 0
    best_state: dict | None = None

    @property
    def running(self) -> bool:
        return self.hist.stop_reason == "running"


@dataclass
class _Stack:
    """One ``fit_stacked``: the stacked weights and optimiser state, and every member's state."""

    base: nn.Module  # the architecture functional_call runs (its own tensors are never used)
    params: dict  # name -> (K, ...) leaf tensors
    buffers: dict  # name -> (K, ...)
    exp_avg: dict  # name -> (K, ...) AdamW's first moment
    exp_avg_sq: dict  # name -> (K, ...) AdamW's second moment
    state_keys: list  # the names of a model's state_dict, in its order
    configs: list
    device: torch.device
    train: SetTensors  # targets in training units
    val: SetTensors  # targets in original units
    y_val: torch.Tensor  # (N_val, ...) in training units
    stats: tuple | None
    steps_per_epoch: int
    run_configs: list
    checkpoint_path: Path | None
    members: list = field(default_factory=list)
    epoch: int = 0
    step: int = 0

    @property
    def K(self) -> int:
        return len(self.configs)

    @property
    def amp(self) -> bool:
        return self.run_configs[0]["amp"]

    def tensor(self, name: str) -> torch.Tensor:
        return self.params[name] if name in self.params else self.buffers[name]

    def active(self) -> torch.Tensor:
        return torch.tensor([m.running for m in self.members], device=self.device)  # (K,) bool


@contextlib.contextmanager
def _vmappable(base: nn.Module):
    """Run the models' forward under ``vmap``: the padded layout instead of the packed one
    (packing reads the mask's values), eager ops instead of the fused CPU kernels (autograd
    Functions without vmap rules), and ``check_set`` without the checks that read values
    (``as_set_tensors`` checked the whole data set once, before training)."""

    def check_set_shapes(x, mask, d_in, like):
        return x.masked_fill(~mask.unsqueeze(-1), 0.0), mask

    old_pack = getattr(base, "pack_sets", None)
    saved = [(mod, mod.check_set) for mod in (models, baselines) if hasattr(mod, "check_set")]
    if hasattr(base, "pack_sets"):
        base.pack_sets = False
    for mod, _ in saved:
        mod.check_set = check_set_shapes
    try:
        with fused.disabled():
            yield
    finally:
        for mod, fn in saved:
            mod.check_set = fn
        if hasattr(base, "pack_sets"):
            base.pack_sets = old_pack


def _forward(stack: _Stack, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(K, B, n, d), (K, B, n) -> (K, B, d_out): every model on its own batch."""

    def one(p, b, xk, mk):
        return functional_call(stack.base, (p, b), (xk, mk))

    with _vmappable(stack.base), autocast(stack.device, stack.amp):
        out = vmap(one, randomness="different")(stack.params, stack.buffers, x, mask)
    return out.float() if out.dtype == torch.bfloat16 else out


def _losses(stack: _Stack, pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-model mean loss (K,), each what F.mse_loss / F.cross_entropy gives its batch."""
    if stack.configs[0].task == "regression":
        return (pred - y.to(pred.dtype)).pow(2).flatten(1).mean(1)
    K, B, C = pred.shape
    return (
        F.cross_entropy(pred.reshape(K * B, C), y.reshape(K * B), reduction="none")
        .view(K, B)
        .mean(1)
    )


def _bcast(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return v.view(-1, *([1] * (like.ndim - 1)))  # (K,) -> (K, 1, ..., 1)


def train_step(stack: _Stack, x, mask, y, lr, active, t) -> torch.Tensor:
    """One optimiser step of every active model; returns the per-model losses (K,).

    ``lr`` (K,), ``active`` (K,) bool and the step number ``t`` (a float64 scalar, from 1) are
    tensors and nothing here reads a tensor's value, so the step can be captured as a CUDA graph
    and replayed with new values. Inactive models are computed but left unchanged."""
    cfg = stack.configs[0]
    names = [n for n, p in stack.params.items() if p.requires_grad]
    pred = _forward(stack, x, mask)  # (K, B, d_out) or (K, B, C)
    losses = _losses(stack, pred, y)  # (K,)
    grads = torch.autograd.grad(losses.sum(), [stack.params[n] for n in names])
    if cfg.grad_clip is not None:
        # per model, as clip_grad_norm_ over one model's parameters would clip
        sq = sum(g.float().pow(2).flatten(1).sum(1) for g in grads)  # (K,)
        coef = (cfg.grad_clip / (sq.sqrt() + 1e-6)).clamp(max=1.0)  # (K,)
        grads = [g * _bcast(coef, g).to(g.dtype) for g in grads]
    _adamw_update(stack, names, grads, lr, active, t)
    return losses.detach()


@torch.no_grad()
def _adamw_update(stack: _Stack, names, grads, lr, active, t) -> None:
    """torch.optim.AdamW's update, with a rate per model; rows of inactive models unchanged.

    Every active model has taken the same number of steps (a model leaves the stack for good
    when it stops), so the bias corrections are one scalar."""
    cfg = stack.configs[0]
    b1, b2 = cfg.betas
    bc1, bc2_sqrt = 1 - torch.pow(b1, t), torch.sqrt(1 - torch.pow(b2, t))  # float64 scalars
    step_size = lr / bc1  # (K,) float64, as the fused kernel forms it
    for n, g in zip(names, grads, strict=True):
        p, m, v = stack.params[n], stack.exp_avg[n], stack.exp_avg_sq[n]
        on = _bcast(active, p)
        lr_k = _bcast(lr, p).to(p.dtype)
        step_k = _bcast(step_size, p).to(p.dtype)
        m_new = torch.lerp(m, g, 1 - b1)
        v_new = v * b2 + (1 - b2) * g * g
        p_new = p * (1 - lr_k * cfg.weight_decay)
        p_new = p_new - step_k * m_new / (v_new.sqrt() / bc2_sqrt.to(p.dtype) + ADAM_EPS)
        m.copy_(torch.where(on, m_new, m))
        v.copy_(torch.where(on, v_new, v))
        p.copy_(torch.where(on, p_new, p))


def _prepare(models, train, val, configs, checkpoint_path) -> _Stack:
    models, configs = _check_inputs(models, configs)
    cfg = configs[0]
    device = resolve_device(cfg.device)
    tr, va, stats = checked_splits(train, val, cfg)
    for m in models:
        remove_target_scaling(m)
        m.to(device)
    dtype = param_dtype(models[0])
    tr, va = to_device(tr, device, dtype), to_device(va, device, dtype)
    y_train, y_val = tr.y, va.y
    if stats is not None:
        mean, std = (t.to(device, dtype) for t in stats)
        y_train, y_val = (tr.y - mean) / std, (va.y - mean) / std  # (N, d_out)
    params, buffers = stack_module_state(models)  # name -> (K, ...)
    params = {n: p.detach().clone().requires_grad_(p.requires_grad) for n, p in params.items()}
    base = copy.deepcopy(models[0])
    amp = resolve_amp(cfg.amp, device, dtype)
    run_configs = [{**c.to_dict(), "amp": amp} for c in configs]
    stack = _Stack(
        base=base,
        params=params,
        buffers=buffers,
        exp_avg={n: torch.zeros_like(p) for n, p in params.items()},
        exp_avg_sq={n: torch.zeros_like(p) for n, p in params.items()},
        state_keys=list(models[0].state_dict()),
        configs=configs,
        device=device,
        train=SetTensors(tr.x, tr.mask, y_train, tr.lengths),
        val=va,
        y_val=y_val,
        stats=stats,
        steps_per_epoch=math.ceil(len(tr) / cfg.batch_size),
        run_configs=run_configs,
        checkpoint_path=Path(checkpoint_path) if checkpoint_path is not None else None,
    )
    for k, rc in enumerate(run_configs):
        hist = History(config=rc)
        if stats is not None:
            hist.target_mean, hist.target_std = stats[0].tolist(), stats[1].tolist()
        if cfg.task == "regression":
            hist.train_target_var = float(y_train.double().var(0, unbiased=False).mean())
        stack.members.append(_Member(configs[k], hist, _Slot(stack, k)))
    return stack


def _save(stack: _Stack, finished: bool) -> None:
    if stack.checkpoint_path is None:
        return
    save_checkpoint(
        stack.checkpoint_path,
        {
            "format": STACKED_FORMAT,
            "configs": stack.run_configs,
            "params": {n: p.detach() for n, p in stack.params.items()},
            "buffers": stack.buffers,
            "exp_avg": stack.exp_avg,
            "exp_avg_sq": stack.exp_avg_sq,
            "members": [
                {
                    "history": asdict(m.hist),
                    "bad_epochs": m.bad_epochs,
                    "decay": m.decay,
                    "decay_wait": m.decay_wait,
                    "best_model": m.best_state,
                }
                for m in stack.members
            ],
            "epoch": stack.epoch,
            "step": stack.step,
            "steps_per_epoch": stack.steps_per_epoch,
            "rng": rng_state(),
            "target_stats": list(stack.stats) if stack.stats is not None else None,
            "finished": finished,
        },
    )


def _resume(stack: _Stack) -> bool:
    """Continue from the checkpoint if there is one (True if that run had finished)."""
    path = stack.checkpoint_path
    if path is None or not path.exists():
        torch.manual_seed(stack.configs[0].seed)  # dropout: one generator for the whole stack
        return False
    ckpt = load_checkpoint(path, map_location=stack.device)
    if ckpt.get("format") != STACKED_FORMAT:
        raise ValueError(
            f"checkpoint_path holds format {ckpt.get('format')!r}, not a stacked run "
            f"({STACKED_FORMAT!r}); use a new path"
        )
    if len(ckpt["configs"]) != stack.K:
        raise ValueError(
            f"checkpoint_path holds a stack of {len(ckpt['configs'])} models, not {stack.K}"
        )
    for k, old in enumerate(ckpt["configs"]):
        if stack.configs[k].amp is None:  # auto keeps the precision the run started with
            stack.run_configs[k]["amp"] = bool(old.get("amp"))
        as_fit = {"format": CHECKPOINT_FORMAT, "config": old, "target_stats": ckpt["target_stats"]}
        check_resume(as_fit, stack.run_configs[k], stack.stats)
    with torch.no_grad():
        for group in ("params", "buffers", "exp_avg", "exp_avg_sq"):
            for n, t in getattr(stack, group).items():
                t.copy_(ckpt[group][n])
    for m, saved in zip(stack.members, ckpt["members"], strict=True):
        m.hist = History.from_dict(saved["history"])
        m.bad_epochs, m.decay, m.decay_wait = (
            saved["bad_epochs"],
            saved["decay"],
            saved["decay_wait"],
        )
        m.best_state = saved["best_model"]
    stack.epoch, stack.step = ckpt["epoch"], ckpt["step"]
    set_rng_state(ckpt["rng"])
    return bool(ckpt["finished"])


def _epoch_order(stack: _Stack, epoch: int) -> torch.Tensor:
    """(K, N) CPU: each model's data order of this epoch, drawn as ``fit`` draws it."""
    N = len(stack.train)
    perms = []
    for c in stack.configs:
        gen = torch.Generator().manual_seed(c.seed * 1_000_003 + epoch)
        perms.append(torch.randperm(N, generator=gen))
    return torch.stack(perms)


def stacked_batch(d: SetTensors, idx: torch.Tensor, idx_cpu: torch.Tensor, n_to: int | None):
    """Rows ``idx`` (K, B) of ``d`` for K models: ``(x (K, B, n, d), mask (K, B, n), y)``.

    ``n_to=None`` cuts the set axis to the longest real set among all K batches (the stack
    shares one shape); an int pads or cuts it to exactly ``n_to`` columns (static shapes for a
    captured step), which must hold every real element."""
    x, mask, y = d.x[idx], d.mask[idx], d.y[idx]
    longest = int(d.lengths[idx_cpu].max())
    n = longest if n_to is None else n_to
    if n < longest:
        raise ValueError(f"n_to must be >= the longest set of the batch ({longest}), got {n_to}")
    if n <= x.shape[2]:
        return x[:, :, :n], mask[:, :, :n], y
    pad = n - x.shape[2]
    return F.pad(x, (0, 0, 0, pad)), F.pad(mask, (0, pad), value=False), y


class _Stepper:
    """Runs ``train_step`` eagerly, or on CUDA as one CUDA graph per batch shape."""

    def __init__(self, stack: _Stack, graph: bool):
        if graph and stack.device.type != "cuda":
            raise ValueError(f"graph=True needs a CUDA device, the run is on {stack.device}")
        self.stack, self.graph, self.graphs = stack, graph, {}

    def __call__(self, x, mask, y, lr, active) -> torch.Tensor:
        t = torch.tensor(float(self.stack.step + 1), dtype=torch.float64, device=x.device)
        if not self.graph:
            return train_step(self.stack, x, mask, y, lr, active, t)
        key = (tuple(x.shape), tuple(y.shape))
        if key not in self.graphs:
            self.graphs[key] = self._capture(x, mask, y, lr, active, t)
        g, static, out = self.graphs[key]
        for s, v in zip(static, (x, mask, y, lr, active, t), strict=True):
            s.copy_(v)
        g.replay()
        return out.clone()

    def _capture(self, x, mask, y, lr, active, t):
        """Warm up on a side stream (then undo the warm-up's updates), capture, return."""
        stack = self.stack
        static = [v.clone() for v in (x, mask, y, lr, active, t)]
        keep = {
            g: {n: v.detach().clone() for n, v in getattr(stack, g).items()}
            for g in ("params", "exp_avg", "exp_avg_sq")
        }
        rng = torch.cuda.get_rng_state()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                train_step(stack, *static)
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():
            for g, saved in keep.items():
                for n, v in getattr(stack, g).items():
                    v.copy_(saved[n])
        torch.cuda.set_rng_state(rng)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = train_step(stack, *static)
        return graph, static, out


def _train_one_epoch(stack: _Stack, epoch: int, stepper: _Stepper, n_to) -> tuple[list, list]:
    """One pass of every running model over the training set; (train losses, last rates)."""
    cfg, tr, dev = stack.configs[0], stack.train, stack.device
    stack.base.train()
    perm_cpu = _epoch_order(stack, epoch)  # (K, N)
    perm = perm_cpu.to(dev)
    active = stack.active()
    loss_sum = torch.zeros(stack.K, device=dev, dtype=torch.float64)
    lrs = [0.0] * stack.K
    for i in range(0, len(tr), cfg.batch_size):
        lrs = [lr_at(stack.step, stack.steps_per_epoch, m.config, m.decay) for m in stack.members]
        idx_cpu = perm_cpu[:, i : i + cfg.batch_size]  # (K, B)
        x, mask, y = stacked_batch(tr, perm[:, i : i + cfg.batch_size], idx_cpu, n_to)
        if i == 0 and epoch == stack.epoch + 1:
            with torch.no_grad():
                pred0 = _forward(stack, x[:, :2], mask[:, :2])  # (K, 2, d_out)
            check_output(pred0[0], y[0, :2], cfg.task)
        lr = torch.tensor(lrs, device=dev, dtype=torch.float64)
        losses = stepper(x, mask, y, lr, active)  # (K,)
        stack.step += 1
        loss_sum += losses.double() * x.shape[1]
    return (loss_sum / len(tr)).tolist(), lrs


@torch.no_grad()
def _predict_val(stack: _Stack) -> torch.Tensor:
    """(K, N_val, d_out): every model's outputs on the validation set, in training units."""
    cfg, d, dev = stack.configs[0], stack.val, stack.device
    bs = cfg.eval_batch_size or cfg.batch_size
    stack.base.eval()
    order = torch.argsort(d.lengths, stable=True) if cfg.trim_padding else torch.arange(len(d))
    outs = []
    for i in range(0, len(d), bs):
        idx_cpu = order[i : i + bs].expand(stack.K, -1)  # (K, B): the same rows for every model
        x, mask, _ = stacked_batch(
            d, idx_cpu.to(dev), idx_cpu, None if cfg.trim_padding else d.x.shape[1]
        )
        outs.append(_forward(stack, x, mask))
    cat = torch.cat(outs, dim=1)  # (K, N, d_out) in visiting order
    out = torch.empty_like(cat)
    out[:, order.to(dev)] = cat
    return out


def _validate(stack: _Stack, vpred: torch.Tensor) -> tuple[float, dict]:
    """As ``loop._validate`` for one model's outputs ``vpred`` (N_val, d_out)."""
    va, stats = stack.val, stack.stats
    if stack.configs[0].task == "regression":
        val_loss = float(F.mse_loss(vpred.double(), stack.y_val.double()))
        if stats is not None:
            vpred = vpred.double() * stats[1].to(stack.device) + stats[0].to(stack.device)
        return val_loss, regression_metrics(vpred, va.y)
    return float(F.cross_entropy(vpred.double(), va.y)), classification_metrics(vpred, va.y)


def _finish(stack: _Stack, models: list) -> None:
    """Each model gets its kept (best) weights, or its last ones, and its target scaling."""
    for m, model in zip(stack.members, models, strict=True):
        if m.hist.stop_reason == "running":
            m.hist.stop_reason = "completed"
        state = m.best_state if m.config.restore_best and m.best_state is not None else None
        state = (
            state
            if state is not None
            else {k: v.detach().clone() for k, v in m.model.state_dict().items()}
        )
        model.load_state_dict(state)
        if stack.stats is not None:
            set_target_scaling(model, *stack.stats)
        model.eval()


def fit_stacked(
    models: Sequence[nn.Module],
    train,
    val,
    configs: Sequence[TrainConfig],
    *,
    checkpoint_path=None,
    progress: bool = True,
    graph: bool = False,
    pad_to: int | None = None,
    on_epoch=None,
) -> list[History]:
    """Train ``models[k]`` with ``configs[k]`` for every k, as one stacked model; one ``History``
    per model, as ``fit`` would return it.

    The models must share one architecture (class and parameter shapes); the configs may differ
    only in ``seed`` and ``lr`` (``PER_MODEL_FIELDS``). Each model is trained in place and ends
    holding its best epoch's weights (``restore_best``), in eval mode, with its target scaling.

    ``checkpoint_path``: one file for the whole stack, written atomically after every epoch; if
    it exists the run resumes exactly from it (configs must match as for ``fit``).

    ``graph`` (CUDA only): capture the step as a CUDA graph per batch shape; batches are padded
    to ``pad_to`` columns (default: the data's full set size) so full batches share one shape.
    ``pad_to`` alone pads without capturing (what the CPU tests check: padding changes no loss).

    ``on_epoch(epoch, histories)``: called after every epoch with the K ``History`` s, None for a
    model that had already stopped (what a runner prints about a running stack); it cannot stop
    training, unlike ``fit``'s callbacks.

    Differences from K ``fit`` calls: with dropout, draws come from one generator seeded with
    ``configs[0].seed`` (same distribution, other numbers); ``epoch_time_s`` and
    ``wall_time_s`` are the stack's; the set axis of a batch is cut to the longest set among
    the K models' batches (padding changes no output); ``on_epoch`` in place of callbacks.
    """
    from tqdm.auto import tqdm

    models = list(models)
    stack = _prepare(models, train, val, configs, checkpoint_path)
    cfg = stack.configs[0]
    if pad_to is not None and (
        isinstance(pad_to, bool) or not isinstance(pad_to, int) or pad_to < 1
    ):
        raise ValueError(f"pad_to must be None or an int >= 1, got {pad_to!r}")
    n_to = pad_to if pad_to is not None else (stack.train.x.shape[1] if graph else None)
    if n_to is None and not cfg.trim_padding:
        n_to = stack.train.x.shape[1]
    stepper = _Stepper(stack, graph)
    if _resume(stack):
        _finish(stack, models)
        return [m.hist for m in stack.members]
    with (
        num_threads_during(cfg.num_threads),
        tqdm(
            total=cfg.epochs,
            initial=stack.epoch,
            disable=not progress,
            unit="epoch",
            desc=f"fit x{stack.K}",
        ) as bar,
    ):
        clock = RunClock()
        for epoch in range(stack.epoch + 1, cfg.epochs + 1):
            t0 = time.perf_counter()
            running = [m.running for m in stack.members]
            train_losses, lrs = _train_one_epoch(stack, epoch, stepper, n_to)
            vpred = _predict_val(stack)  # (K, N_val, d_out)
            seconds = time.perf_counter() - t0
            for k, m in enumerate(stack.members):
                if running[k]:
                    val_loss, metrics = _validate(stack, vpred[k])
                    record_epoch(m, epoch, train_losses[k], val_loss, metrics, lrs[k], seconds)
            bar.update(1)
            if on_epoch is not None:
                hists = [m.hist if r else None for r, m in zip(running, stack.members, strict=True)]
                on_epoch(epoch, hists)
            clock.add_to(*(m.hist for r, m in zip(running, stack.members, strict=True) if r))
            stack.epoch = epoch
            if not any(m.running for m in stack.members):
                break
            _save(stack, finished=False)
        _finish(stack, models)
        _save(stack, finished=True)
    return [m.hist for m in stack.members]
