"""Cost of MZSetTransformer vs SetTransformer, side by side in one run (paper Table tab:cost).

For each of the paper's three cost configurations (d=64/n=30, d=128/n=50, d=256/n=100; batch 64;
H=4, d_ff=2d, m=16, n_g=8, L=4, d_in=8) and each device it reports parameters, FLOPs
(``torch.utils.flop_counter.FlopCounterMode``; forward, and forward+backward), the median forward
time (eval, no grad) and the median full training-step time (forward + backward +
``clip_grad_norm_`` + AdamW step, train mode, dropout 0.1), then the ratios MZ/Standard.
Timings interleave the two models repeat by repeat after a warm-up, so drift on a shared machine
hits both alike; compare ratios, not absolute times, across runs.

    python benchmarks/layer_cost.py --quick            # < 1 min on a 2-core CPU (batch 16)
    python benchmarks/layer_cost.py --device all --repeats 10
    python benchmarks/layer_cost.py --device cuda --compile

Targets (project issue): on CPU the time ratio should not exceed the FLOP ratio (CPU time follows
arithmetic); on a GPU these models are launch-bound and the training-step ratio should be <= 1.5x
(``--compile`` uses ``torch.compile``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from mzlite.nn import (
    MZSetTransformer,
    MZSetTransformerConfig,
    SetTransformer,
    SetTransformerConfig,
    count_parameters,
)

CONFIGS = [("small", 64, 30), ("medium", 128, 50), ("large", 256, 100)]  # tab:cost


def build(kind: str, d: int, device, compile_: bool):
    common = dict(d_in=8, d_out=1, d_model=d, n_heads=4, d_ff=2 * d, n_inducing=16, dropout=0.1)
    if kind == "mz":
        model = MZSetTransformer(MZSetTransformerConfig(**common, n_g=8, L=4))
    else:
        model = SetTransformer(SetTransformerConfig(**common))
    model = model.to(device)
    params = count_parameters(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-5)
    run = torch.compile(model) if compile_ else model
    return model, run, opt, params


def make_batch(B: int, n: int, device, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, n, 8, generator=g)
    sizes = torch.randint(n // 3, n + 1, (B,), generator=g)
    mask = torch.arange(n)[None, :] < sizes[:, None]  # variable set sizes, padded
    y = torch.randn(B, 1, generator=g)
    return x.to(device), mask.to(device), y.to(device)


def forward(model, run, batch):
    model.eval()
    with torch.no_grad():
        return run(batch[0], batch[1])


def train_step(model, run, opt, batch):
    model.train()
    loss = torch.nn.functional.mse_loss(run(batch[0], batch[1]), batch[2])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def count_flops(model, batch) -> tuple[float, float]:
    """(forward GFLOP, forward+backward GFLOP), counted on the eager model.

    Both passes run with grad enabled (the forward FLOPs are the same without it): under
    ``no_grad`` torch 2.13's module tracker asserts on our expanded parameter views."""
    model.train()
    with FlopCounterMode(display=False) as fc:
        torch.nn.functional.mse_loss(model(batch[0], batch[1]), batch[2]).backward()
    model.zero_grad(set_to_none=True)
    step = fc.get_total_flops()
    model.eval()
    with FlopCounterMode(display=False) as fc:
        model(batch[0], batch[1])
    return fc.get_total_flops() / 1e9, step / 1e9


def timed(fn, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - t0)


def bench_config(name, d, n, B, device, repeats, warmup, compile_):
    batch = make_batch(B, n, device)
    torch.manual_seed(0)
    models = {k: build(k, d, device, compile_) for k in ("st", "mz")}
    res = {k: {"params": m[3]} for k, m in models.items()}
    for k, (model, _run, _opt, _p) in models.items():
        res[k]["gflop_fwd"], res[k]["gflop_step"] = count_flops(model, batch)
    times = {k: {"fwd": [], "step": []} for k in models}
    for r in range(warmup + repeats):
        order = ("st", "mz") if r % 2 == 0 else ("mz", "st")  # interleave, alternate order
        for k in order:
            model, run, opt, _ = models[k]
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            tf = timed(lambda: forward(model, run, batch), device)  # noqa: B023
            ts = timed(lambda: train_step(model, run, opt, batch), device)  # noqa: B023
            if r >= warmup:
                times[k]["fwd"].append(tf)
                times[k]["step"].append(ts)
            if device.type == "cuda":
                res[k]["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    for k in models:
        res[k]["fwd_ms"] = statistics.median(times[k]["fwd"])
        res[k]["step_ms"] = statistics.median(times[k]["step"])
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda", "all"], default="cpu")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5, quick 3)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=None, help="default 64 (paper), quick 16")
    ap.add_argument("--quick", action="store_true", help="batch 16, 3 repeats, 1 warm-up")
    ap.add_argument("--compile", action="store_true", help="torch.compile both models")
    ap.add_argument("--configs", default="small,medium,large")
    args = ap.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 5)
    warmup = 1 if args.quick and args.warmup == 2 else args.warmup
    B = args.batch or (16 if args.quick else 64)
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        if args.device == "cuda":
            sys.exit("--device cuda: CUDA is not available")
        devices.remove("cuda")
    wanted = args.configs.split(",")
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, batch {B}, "
        f"repeats {repeats} (median), warm-up {warmup}, compile {args.compile}"
    )
    head = (
        f"{'device':6} {'config':18} {'model':4} {'params':>9} {'GFLOP fwd':>10} "
        f"{'GFLOP f+b':>10} {'fwd ms':>9} {'step ms':>9}"
    )
    for dev_name in devices:
        device = torch.device(dev_name)
        print()
        print(head + ("  peak MiB" if device.type == "cuda" else ""))
        for name, d, n in CONFIGS:
            if name not in wanted:
                continue
            res = bench_config(name, d, n, B, device, repeats, warmup, args.compile)
            label = f"{name} d={d} n={n}"
            for k in ("st", "mz"):
                r = res[k]
                line = (
                    f"{dev_name:6} {label:18} {k:4} {r['params']:>9,} {r['gflop_fwd']:>10.2f} "
                    f"{r['gflop_step']:>10.2f} {r['fwd_ms']:>9.1f} {r['step_ms']:>9.1f}"
                )
                print(line + (f" {r['peak_mib']:>9.0f}" if "peak_mib" in r else ""))
            s, m = res["st"], res["mz"]
            ratio = lambda key, m=m, s=s: m[key] / s[key]  # noqa: E731
            line = (
                f"{dev_name:6} {label:18} {'MZ/ST':5} {ratio('params'):>7.2f}x "
                f"{ratio('gflop_fwd'):>9.2f}x {ratio('gflop_step'):>9.2f}x "
                f"{ratio('fwd_ms'):>8.2f}x {ratio('step_ms'):>8.2f}x"
            )
            print(line + (f" {ratio('peak_mib'):>8.2f}x" if "peak_mib" in s else ""), flush=True)
    print(
        "\npaper (RTX 5090, batch 64) MZ/ST: params 1.9/1.9/1.7x, inference 2.4/2.5/2.7x, "
        "training 2.2/3.8/5.5x, memory 2.5/2.0/2.5x"
    )


if __name__ == "__main__":
    main()
