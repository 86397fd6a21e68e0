"""Which learning rate does a CPU profile use? A short probe on the validation split.

The paper's lr 1e-4 is tuned for 10K training sets and 200 epochs; the ``cpu-converged`` profile
(``mzlite.repro.experiments.PROFILES``) trains on at most 2K sets, i.e. 8-16 optimiser steps per
epoch, so its rate has to be chosen again. This script trains each model family's representative
cells (three per family) under the ``--profile``'s exact protocol (same data, batch, warm-up,
schedule, standardised targets) for the first ``--epochs`` epochs at each rate of ``--grid``,
for each of ``--seeds``, and prints the best validation loss (standardised units: comparable
across cells) and the validation R^2 at that epoch. The family's rate is the one with the lowest
mean *relative excess* validation loss over its cells and seeds (``val_loss / best val_loss of
that cell and seed - 1``).

    python benchmarks/lr_probe.py                  # cpu-annealed, seeds 0,1: ~1 CPU-hour
    python benchmarks/lr_probe.py --families mz --epochs 6 --grid 1e-3,3e-3
    python benchmarks/lr_probe.py --profile cpu-converged --seeds 0   # how cpu-converged's
                                                    # rates were chosen (then with two cells)

What a short probe cannot see: a rate that wins the first epochs can lose later (short-horizon
bias favours large rates), so a rate is only taken over a smaller one when it wins clearly
(``--margin``, relative); the full runs then record whether they converged.
Test sets are never used.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch

from mzlite.repro import experiments as ex
from mzlite.tasks import make_splits
from mzlite.train import TrainConfig, fit

# (table, cell): three cells per family, from the tables the converged runs start with
CELLS = {
    "mz": [
        ("tab:meb", "d8-mz_full"),
        ("tab:tdof-verify", "L16-mz_1l"),
        ("tab:main-results", "F-mz_full"),
    ],
    "baseline": [
        ("tab:meb", "d8-st"),
        ("tab:tdof-verify", "L16-st_4l"),
        ("tab:main-results", "F-st"),
    ],
    "deepsets": [
        ("tab:meb", "d8-deepsets"),
        ("tab:main-results", "A-deepsets"),
        ("tab:main-results", "F-deepsets"),
    ],
}


def probe(profile: str, table: str, cell_id: str, lr: float, epochs: int, seed: int) -> dict:
    (job,) = ex.jobs(table, profile, seeds=[seed], cells=[cell_id])
    n_tr, n_va, n_te = job.sizes
    tr, va, _ = make_splits(job.cell.task, n_tr, n_va, n_te, job.profile.data_seed, cache=True,
                            cache_dir=job.cache_dir / "datasets", **job.cell.options)  # fmt: skip
    cfg = TrainConfig.from_dict({**job.train_config().to_dict(), "lr": lr, "device": "cpu"})
    model = ex.build_cell_model(job.cell, tr.d_in, tr.d_out, job.seed)
    t0 = time.perf_counter()
    hist = fit(model, tr, va, cfg, progress=False, callbacks=[lambda e, h, m: e >= epochs])
    best = hist.best_epoch
    return {
        "val_loss": hist.best_val_loss if best else math.inf,
        "val_r2": hist.val_metrics[best - 1].get("r2") if best else None,
        "best_epoch": best,
        "s": time.perf_counter() - t0,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--grid", default="3e-4,1e-3,3e-3")
    ap.add_argument("--families", default=",".join(CELLS))
    ap.add_argument("--margin", type=float, default=0.02)
    ap.add_argument("--profile", default="cpu-annealed")
    ap.add_argument("--seeds", default="0,1", help="comma-separated seeds")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    grid = [float(x) for x in args.grid.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"profile {args.profile}: first {args.epochs} epochs, lr grid {grid}, seeds {seeds}, "
          "1 thread")  # fmt: skip
    chosen = {}
    for fam in args.families.split(","):
        excess = {lr: [] for lr in grid}
        for (table, cid), seed in ((c, s) for c in CELLS[fam] for s in seeds):
            rows = {lr: probe(args.profile, table, cid, lr, args.epochs, seed) for lr in grid}
            best = min(r["val_loss"] for r in rows.values())
            for lr, r in rows.items():
                excess[lr].append(r["val_loss"] / best - 1)
                r2 = "--" if r["val_r2"] is None else f"{r['val_r2']:.3f}"
                print(f"  {fam:9s} {table:17s} {cid:12s} seed {seed} lr {lr:<7g} best val loss "
                      f"{r['val_loss']:.4f} (epoch {r['best_epoch']}), val R^2 {r2}, "
                      f"{r['s']:.0f} s", flush=True)  # fmt: skip
        mean_excess = {lr: statistics.fmean(v) for lr, v in excess.items()}
        # the smallest rate within `margin` of the best mean excess (short-horizon bias)
        floor = min(mean_excess.values())
        pick = min(lr for lr, v in mean_excess.items() if v <= floor + args.margin)
        chosen[fam] = pick
        detail = ", ".join(f"{lr:g}: +{v:.1%}" for lr, v in mean_excess.items())
        print(f"{fam}: mean relative excess val loss {detail} -> lr {pick:g}")
    print(f"chosen: {chosen}")


if __name__ == "__main__":
    main()
