"""How long does one cell of tab:meb take under the full protocol? (9 models x 5 seeds, d=8)

The full protocol (App. app:impl) trains every model for up to 200 epochs of 10K sets (batch 256)
and evaluates 2K validation sets after each epoch. Timing a whole epoch of every model is too slow
on a small CPU (Mamba + PMA alone takes minutes per epoch), so this script times a few training
steps (forward + backward + clip + AdamW, train mode, dropout on, batch 256, padding trimmed to
the batch's longest set as ``fit`` does) and one evaluation batch of each model of the cell, on
real MEB sets of the full protocol's shape, and extrapolates:

    epoch  = 40 steps (ceil(10000 / 256)) + 8 evaluation batches (2000 / 256)
    cell   = sum over the 9 models of 200 epochs x 5 seeds   (an upper bound: early stopping
             usually ends a run sooner)

Settings compared side by side in one run: ``workers`` processes training at once (each timing
every model, started together at a barrier before each model, so they contend as a real
``mzlite.repro.experiments.run(..., workers=N)`` would) x ``threads`` per worker. With N workers the
cell's wall time is the per-job time divided by N.

    python benchmarks/meb_cell.py                      # CPU: w1 x t1, w1 x t2, w2 x t1
    python benchmarks/meb_cell.py --device cuda --settings 1x4,2x2,4x1 --steps 20

Timings on a shared machine drift; compare settings within one run, not across runs.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from mzlite._checks import resolve_device
from mzlite.nn import model_spec
from mzlite.repro import experiments as ex
from mzlite.tasks import make_task

N_TRAIN, N_VAL, BATCH, EPOCHS, SEEDS = 10_000, 2_000, 256, 200, 5


def _cells():
    return [
        c
        for c in ex.get_table("tab:meb").cells
        if c.part == "main" and c.options == {"d": 8} and model_spec(c.model).trainable
    ]


def _batches(device, n_batches: int):
    data = make_task("meb_radius", BATCH * n_batches, 0, cache=True, d=8)  # real MEB sets
    out = []
    for i in range(n_batches):
        x = data.x[i * BATCH : (i + 1) * BATCH]
        m = data.mask[i * BATCH : (i + 1) * BATCH]
        n_b = int(m.any(0).nonzero().max()) + 1  # trim to the longest set, as fit does
        y = data.y[i * BATCH : (i + 1) * BATCH]
        out.append((x[:, :n_b].to(device), m[:, :n_b].to(device), y.to(device)))
    return out


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_model(cell, device, batches, steps: int) -> dict:
    model = ex.build_cell_model(cell, 8, 1, seed=0, device=device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-5)

    def step(b):
        x, m, y = b
        model.train()
        loss = F.mse_loss(model(x, m), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    @torch.no_grad()
    def evaluate(b):
        model.eval()
        model(b[0], b[1])

    step(batches[0])  # warm-up (allocations, lazy init, cuDNN/cuBLAS heuristics)
    evaluate(batches[0])
    _sync(device)
    ts = []
    for i in range(steps):
        t0 = time.perf_counter()
        step(batches[(i + 1) % len(batches)])
        _sync(device)
        ts.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    evaluate(batches[-1])
    _sync(device)
    te = time.perf_counter() - t0
    return {"step": statistics.median(ts), "eval": te, "params": _params(model)}


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def _worker(rank, threads, device, steps, barrier, queue):
    torch.set_num_threads(threads)
    torch.manual_seed(rank)
    dev = torch.device(device)
    batches = _batches(dev, 3)
    out = {}
    for c in _cells():
        barrier.wait()  # every worker starts the same model together: they contend
        out[c.id] = _time_model(c, dev, batches, steps)
    queue.put((rank, out))


def measure(workers: int, threads: int, device: str, steps: int) -> dict:
    """Per-model median step and eval time of each of ``workers`` concurrent processes."""
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(r, threads, device, steps, barrier, queue))
        for r in range(workers)
    ]
    for p in procs:
        p.start()
    res = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    per = {}
    for cid in res[0][1]:
        per[cid] = {
            "step": statistics.fmean(r[cid]["step"] for _, r in res),
            "eval": statistics.fmean(r[cid]["eval"] for _, r in res),
            "params": res[0][1][cid]["params"],
        }
    return per


def _h(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} min"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--settings", default=None, help="workers x threads, e.g. 1x1,1x2,2x1")
    ap.add_argument("--steps", type=int, default=2, help="timed training steps per model")
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    cores = os.cpu_count() or 1
    if args.settings is None:
        args.settings = "1x1,1x2,2x1" if device.type == "cpu" else f"1x{cores},2x{cores // 2}"
    settings = [tuple(int(v) for v in s.split("x")) for s in args.settings.split(",")]
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    print(f"tab:meb cell d=8 on {gpu or 'CPU'} ({cores} cores), torch {torch.__version__}")
    print(f"timing {args.steps} steps of batch {BATCH} + 1 eval batch per model; settings:")
    _batches(torch.device("cpu"), 3)  # data into the cache before the workers start
    results = {}
    for w, t in settings:
        t0 = time.perf_counter()
        results[(w, t)] = measure(w, t, str(device), args.steps)
        print(f"  {w} worker(s) x {t} thread(s): measured in {time.perf_counter() - t0:.0f} s")
    steps_per_epoch, eval_batches = math.ceil(N_TRAIN / BATCH), math.ceil(N_VAL / BATCH)
    print()
    head = ["model", "params"] + [f"w{w}xt{t} step" for w, t in settings]
    head += [f"w{w}xt{t} epoch" for w, t in settings]
    rows, totals = [], {s: 0.0 for s in settings}
    for c in _cells():
        r0 = results[settings[0]][c.id]
        row = [c.row, f"{r0['params'] / 1e3:.0f}K"]
        row += [f"{results[s][c.id]['step'] * 1e3:.0f} ms" for s in settings]
        for s in settings:
            r = results[s][c.id]
            epoch = steps_per_epoch * r["step"] + eval_batches * r["eval"]
            totals[s] += epoch * EPOCHS * SEEDS / s[0]  # N workers run N jobs at once
            row.append(f"{epoch:.1f} s")
        rows.append(row)
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print("  ".join(v.ljust(w[i]) for i, v in enumerate(r)))
    print()
    print(
        f"EXTRAPOLATED (not measured) wall time of the whole cell, 9 models x {SEEDS} seeds x "
        f"{EPOCHS} epochs (no early stopping):"
    )
    best = min(totals, key=totals.get)
    for s, tot in totals.items():
        mark = "  <- best" if s == best else ""
        print(f"  {s[0]} worker(s) x {s[1]} thread(s): {_h(tot)}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
