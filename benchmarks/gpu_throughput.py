"""Model-steps per second of MZ-Full and the Set Transformer at the paper's batch of 128 sets,
per way of running the training step, side by side in one run on one device (issue 36).

Rows, per model:

``eager``          one model, ``fit``'s step (forward, MSE, backward, clipping, fused AdamW): what
                   one process per model runs today.
``stacked K``      K models as one vectorised model (``mzlite.train.fit_stacked``'s step:
                   ``vmap`` over ``functional_call``, per-model AdamW and clipping); K model-steps
                   per step.
``graph``          the stacked step with K = 1 captured as a CUDA graph and replayed.
``stacked+graph K``  both.

The graph rows run on CUDA only (a CPU prints "n/a on cpu"). Times are wall times of ``--steps``
steps after ``--warmup`` steps (CUDA synchronised), each row's median of ``--repeats``. A
model-step is one optimiser step of one model; the speedup column is against ``eager``.

    python benchmarks/gpu_throughput.py                           # on a GPU
    OMP_NUM_THREADS=1 python benchmarks/gpu_throughput.py --threads 1 --steps 2 --ks 1,8
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

from mzlite.nn import build_model
from mzlite.train import TrainConfig
from mzlite.train import stacked as S

MODELS = ("mz_full", "st")
HEADER = f"{'model':8} {'mode':18} {'K':>3} {'ms/step':>10} {'model-steps/s':>14} {'vs eager':>9}"


def device_name(dev: torch.device) -> str:
    if dev.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(dev)}"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu: {cpu}, {torch.get_num_threads()} torch thread(s)"


def make_sets(N: int, n_max: int, d_in: int, seed: int = 0):
    """Sets of 10..n_max elements, zero padded to n_max; a learnable target."""
    g = torch.Generator().manual_seed(seed)
    n = torch.randint(10, n_max + 1, (N,), generator=g)
    mask = torch.arange(n_max)[None, :] < n[:, None]  # (N, n_max)
    x = torch.randn(N, n_max, d_in, generator=g) * mask[..., None]  # (N, n_max, d_in)
    y = (x[..., 0].sum(1) / n)[:, None]  # (N, 1)
    return x, mask, y


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def time_steps(step, dev, warmup: int, steps: int) -> float:
    """Seconds per step after the warm-up."""
    for _ in range(warmup):
        step()
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync(dev)
    return (time.perf_counter() - t0) / steps


def eager_step(name: str, data, args, dev):
    """fit's inner step, on one model."""
    x, mask, y = (t[: args.batch].to(dev) for t in data)
    model = build_model(name, d_in=args.d_in, d_out=1, device=dev, seed=0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-5, fused=True)

    def step():
        loss = F.mse_loss(model(x, mask), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return step


def stacked_step(name: str, data, args, dev, K: int, graph: bool):
    """fit_stacked's step on K models; batches padded to n_max (static shape)."""
    models = [build_model(name, d_in=args.d_in, d_out=1, device=dev, seed=k) for k in range(K)]
    cfgs = [
        TrainConfig(seed=k, device=str(dev), amp=False, epochs=1, warmup_epochs=0) for k in range(K)
    ]
    x, mask, y = data
    small = (x[: args.batch], mask[: args.batch], y[: args.batch])
    stack = S._prepare(models, small, small, cfgs, None)
    stepper = S._Stepper(stack, graph)
    idx = torch.arange(args.batch).expand(K, -1)  # (K, B): the same rows, shapes are what count
    xb, mb, yb = S.stacked_batch(stack.train, idx.to(dev), idx, x.shape[1])
    lr = torch.full((K,), 1e-4, dtype=torch.float64, device=dev)
    active = stack.active()

    def step():
        stepper(xb, mb, yb, lr, active)
        stack.step += 1

    return step


def time_row(make, args, dev):
    """(seconds per step, model-steps per second) of the step ``make`` builds, or the reason
    there is no number: None (no CUDA), "out of memory" or "failed: <error>"."""
    if make is None:
        return None
    try:
        step, K = make()
        secs = statistics.median(
            time_steps(step, dev, args.warmup, args.steps) for _ in range(args.repeats)
        )
    except torch.OutOfMemoryError:
        return "out of memory"
    except Exception as e:  # a path that fails on this device: its row says so, the rest run
        traceback.print_exc()
        return f"failed: {type(e).__name__}"
    finally:
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return secs, K / secs


def measure(args, dev) -> list[tuple]:
    """Rows ``(model, mode, K, seconds per step or a reason, model-steps/s, eager's rate)``."""
    data = make_sets(args.batch, args.n_max, args.d_in)
    cuda = dev.type == "cuda"
    rows = []
    for name in args.models:
        plan = [("eager", 1, lambda n=name: (eager_step(n, data, args, dev), 1))]
        for K in args.ks:
            plan.append((f"stacked {K}", K, lambda n=name, K=K: (
                stacked_step(n, data, args, dev, K, False), K)))  # fmt: skip
        plan.append(("graph", 1, (lambda n=name: (stacked_step(n, data, args, dev, 1, True), 1))
                     if cuda else None))  # fmt: skip
        for K in args.ks:
            plan.append((f"stacked+graph {K}", K, (lambda n=name, K=K: (
                stacked_step(n, data, args, dev, K, True), K)) if cuda else None))  # fmt: skip
        eager = None
        for label, K, make in plan:
            got = time_row(make, args, dev)
            if isinstance(got, tuple):
                eager = got[1] if label == "eager" else eager
                rows.append((name, label, K, got[0], got[1], eager))
            else:
                rows.append((name, label, K, got, None, eager))
    return rows


def fit_loop_against_stacked(args, dev) -> list[dict]:
    """``fit_stacked`` of K models against a Python loop of K ``fit`` calls, whole runs (float32,
    dropout off, one device), with the largest difference of their validation losses; on CUDA
    also ``fit_stacked(graph=True)``, the runner's path there (this is its check on a GPU)."""
    from mzlite.train import fit, fit_stacked

    x, mask, y = make_sets(args.train + args.train // 4, args.n_max, args.d_in, seed=1)
    n = args.train
    tr, va = (x[:n], mask[:n], y[:n]), (x[n:], mask[n:], y[n:])
    one = dict(device=str(dev), amp=False, epochs=args.epochs, warmup_epochs=1, patience=None)
    cfgs = [TrainConfig(seed=k, **one) for k in range(args.fit_k)]

    def build(name, k):  # dropout off: the two ways then train the same models
        return build_model(name, d_in=args.d_in, d_out=1, device=dev, seed=k, dropout=0.0)

    def timed(train):
        sync(dev)
        t0 = time.perf_counter()
        hists = train()
        sync(dev)
        return hists, time.perf_counter() - t0

    def largest_difference(h1s, h2s):
        return max(
            abs(a - b) / abs(a) for h1, h2 in zip(h1s, h2s, strict=True)
            for a, b in zip(h1.val_loss, h2.val_loss, strict=True)
        )  # fmt: skip

    out = []
    for name in args.models:
        ways = [("fit_stacked", False)] + (
            [("fit_stacked+graph", True)] if dev.type == "cuda" else []
        )
        pairs = list(zip([build(name, k) for k in range(args.fit_k)], cfgs, strict=True))
        loop, t_loop = timed(lambda: [fit(m, tr, va, c, progress=False) for m, c in pairs])  # noqa: B023
        for label, graph in ways:
            models = [build(name, k) for k in range(args.fit_k)]
            try:
                stk, t_stk = timed(
                    lambda: fit_stacked(models, tr, va, cfgs, progress=False, graph=graph)  # noqa: B023
                )
            except Exception as e:  # the runner then trains without this path
                traceback.print_exc()
                print(f"{name:8} K={args.fit_k}: {label} failed: {type(e).__name__}: {e}")
                continue
            diff = largest_difference(loop, stk)
            print(
                f"{name:8} K={args.fit_k}, {args.epochs} epochs of {args.train} sets: loop of fit "
                f"{t_loop:.1f} s, {label} {t_stk:.1f} s -> loop/{label} {t_loop / t_stk:.2f}x; "
                f"largest relative val-loss difference {diff:.1e}"
            )
            out.append({
                "model": name, "mode": label, "K": args.fit_k, "epochs": args.epochs,
                "train": args.train, "loop_s": t_loop, "stacked_s": t_stk,
                "largest_relative_val_loss_difference": diff,
            })  # fmt: skip
    return out


def commit() -> str:
    """The commit of the code measured, as results record it (``execute.git_info``: the one a
    caller names in ``MZLITE_GIT_COMMIT`` on a copy sent to a GPU machine, else HEAD)."""
    from mzlite.repro.experiments.execute import git_info

    return (git_info()["commit"] or "unknown")[:7]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--device", default="auto", help="auto (default: CUDA when available), cpu, cuda"
    )
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated model names")
    p.add_argument("--ks", default="1,8,32", help="stack sizes (default 1,8,32)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--n-max", type=int, default=30, help="set size sets are padded to")
    p.add_argument("--d-in", type=int, default=8)
    p.add_argument("--steps", type=int, default=10, help="timed steps per repeat (0: no table)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument(
        "--fit-k",
        type=int,
        default=0,
        help="also time whole runs: fit_stacked of this many models against a loop of fit",
    )
    p.add_argument("--train", type=int, default=256, help="--fit-k: training sets")
    p.add_argument("--epochs", type=int, default=2, help="--fit-k: epochs")
    p.add_argument(
        "--json",
        default=None,
        help="also write the rows here, for `python -m mzlite plan --gpu-throughput`",
    )
    args = p.parse_args(argv)
    try:
        args.ks = [int(k) for k in args.ks.split(",")]
    except ValueError:
        p.error(f"--ks must be comma-separated ints, got {args.ks!r}")
    if any(k < 1 for k in args.ks):
        p.error(f"--ks must be ints >= 1, got {args.ks}")
    args.models = args.models.split(",")
    for name in args.models:
        if name not in MODELS:
            p.error(f"--models must name some of {MODELS}, got {name!r}")
    if args.steps < 0:
        p.error(f"--steps must be >= 0, got {args.steps}")
    for name in ("batch", "n_max", "d_in", "repeats", "train", "epochs"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    from mzlite._checks import resolve_device

    dev = resolve_device(args.device)
    print(f"device {device_name(dev)}; torch {torch.__version__}; commit {commit()}")
    print(
        f"batch {args.batch} sets of 10-{args.n_max} elements (padded to {args.n_max}), "
        f"d_in {args.d_in}, float32; {args.warmup} warm-up + {args.steps} timed steps, "
        f"median of {args.repeats}; loadavg {tuple(round(v, 2) for v in os.getloadavg())}"
    )
    if args.steps:
        print(HEADER)
    if args.fit_k < 0:
        p.error(f"--fit-k must be >= 0, got {args.fit_k}")
    rows = []
    for name, label, K, secs, rate, eager in measure(args, dev) if args.steps else []:
        if isinstance(secs, float):
            rows.append({"model": name, "mode": label, "K": K, "model_steps_per_s": rate})
        if secs is None:
            print(f"{name:8} {label:18} {K:>3} {'n/a on cpu':>10}")
        elif isinstance(secs, str):
            print(f"{name:8} {label:18} {K:>3} {secs:>10}")
        else:
            vs = f"{rate / eager:.2f}x" if eager else ""
            print(f"{name:8} {label:18} {K:>3} {secs * 1e3:>10.1f} {rate:>14.2f} {vs:>9}")
    whole_runs = fit_loop_against_stacked(args, dev) if args.fit_k else []
    if args.json:
        from mzlite._io import atomic_write_json

        atomic_write_json(Path(args.json), {
            "format": "mzlite.gpu-throughput/1", "device": device_name(dev),
            "commit": commit(), "torch": torch.__version__, "batch": args.batch,
            "n_max": args.n_max, "d_in": args.d_in, "rows": rows, "whole_runs": whole_runs,
        })  # fmt: skip


if __name__ == "__main__":
    main()
