"""Train the small MZ checkpoints shipped in data/checkpoints/ (read by chapter 7).

    python benchmarks/train_checkpoints.py                 # L = 2, 4, 8 (TDOF-8 task)
    python benchmarks/train_checkpoints.py --L 8 --epochs 40

Each run: a small MZ-Set Transformer (d_model 32, 2 heads, n_g 4, L matrix generators, 1 encoder
ISAB with 8 inducing points) on the quadratic-TDOF task with TDOF 8 in d = 8
(``mzlite.tasks.quadratic_tdof_dataset``, eq:quadratic-tdof), trained by ``mzlite.train.fit`` on
CPU.
This is NOT the paper's protocol (d_model 64, 200 epochs, lr 1e-4): it is a CPU-sized run so the
checkpoints are small (< 1 MB) and each training takes a few minutes. Beside every ``.pt`` a
``.json`` says how it was trained: command, configs, seed, epochs, data, metrics, git commit,
device, versions and wall time.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from mzlite.analysis import save_model_checkpoint
from mzlite.nn.models import MZSetTransformer, MZSetTransformerConfig, count_parameters
from mzlite.tasks import make_splits
from mzlite.train import TrainConfig, evaluate, fit, seed_everything

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "checkpoints"
TDOF, D = 8, 8  # the task: TDOF 8 in d = 8
MODEL = dict(d_model=32, n_heads=2, d_ff=64, n_inducing=8, n_enc=1, n_g=4, dropout=0.0)


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def train_one(L: int, args) -> dict:
    data_opts = dict(L=TDOF, d=D, function_seed=0)
    splits = make_splits(
        "quadratic_tdof", args.n_train, args.n_val, args.n_test, seed=args.seed, **data_opts
    )
    seed_everything(args.seed)
    cfg = MZSetTransformerConfig(d_in=D, d_out=1, L=L, **MODEL)
    model = MZSetTransformer(cfg)
    tcfg = TrainConfig(
        epochs=args.epochs,
        batch_size=64,
        lr=args.lr,
        warmup_epochs=2,
        patience=None,
        seed=args.seed,
        device="cpu",
        num_threads=args.threads,
    )
    t0 = time.perf_counter()
    hist = fit(model, splits.train, splits.val, tcfg, progress=False)
    wall = time.perf_counter() - t0
    metrics = {k: evaluate(model, getattr(splits, k), tcfg) for k in ("train", "val", "test")}
    name = f"mz_tdof{TDOF}_L{L}"
    info = {
        "name": name,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "model": "MZSetTransformer",
        "model_config": cfg.__dict__ | {},
        "parameters": count_parameters(model),
        "train_config": tcfg.to_dict(),
        "seed": args.seed,
        "epochs": hist.epochs_run,
        "data": {
            "task": "quadratic_tdof",
            "options": data_opts,
            "n_train": args.n_train,
            "n_val": args.n_val,
            "n_test": args.n_test,
            "split_seed": args.seed,
            "how": "mzlite.tasks.make_splits('quadratic_tdof', n_train, n_val, n_test, seed, "
            "**options)",
        },
        "metrics": {k: {m: v for m, v in d.items()} for k, d in metrics.items()},
        "val_loss_per_epoch": [float(v) for v in hist.val_loss],
        "git_commit": git_commit(),
        "device": f"cpu ({platform.processor() or platform.machine()}), {args.threads} threads",
        "versions": {
            "python": platform.python_version(),
            "torch": str(torch.__version__),
            "numpy": str(np.__version__),
        },
        "wall_time_s": round(wall, 1),
        "protocol_note": "CPU-sized run, not the paper's protocol "
        "(see benchmarks/train_checkpoints.py)",
    }
    OUT.mkdir(parents=True, exist_ok=True)
    save_model_checkpoint(OUT / f"{name}.pt", model, info)
    (OUT / f"{name}.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"{name}: test R2 {metrics['test']['r2']:.3f}, {wall:.0f} s", flush=True)
    return info


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--L", type=int, nargs="+", default=[8, 4, 2])
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--n-train", type=int, default=4000)
    p.add_argument("--n-val", type=int, default=500)
    p.add_argument("--n-test", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    for L in args.L:
        train_one(L, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
