"""Cost of MZSetTransformer vs SetTransformer, side by side in one run (paper Table tab:cost).

For each of the paper's three cost configurations (d=64/n=30, d=128/n=50, d=256/n=100; batch 64;
H=4, d_ff=2d, m=16, n_g=8, L=4, d_in=8) and each device it reports parameters, FLOPs
(``torch.utils.flop_counter.FlopCounterMode``; forward, and forward+backward), the median forward
time (eval, no grad) and the median full training-step time (forward + backward +
``clip_grad_norm_`` + AdamW step, train mode, dropout 0.1), then the ratios MZ/Standard.
Timings interleave the two models repeat by repeat after a warm-up, so drift on a shared machine
hits both alike; compare ratios, not absolute times, across runs.

Precision follows ``fit``'s default (``--amp auto``: bf16 autocast on a CPU with native bf16,
``mzlite.train.resolve_amp``; float32 elsewhere); ``--amp on|off`` forces it. Achieved GFLOP/s =
counted FLOPs / median time, for the forward pass and for the training step (forward+backward
FLOPs; clipping and AdamW are not counted). The peak they are compared with is measured in the
same run: the median of 5 products of two 2048 x 2048 matrices (``torch.mm``) in the precision the
models' matrix products run in, with the same torch threads. That is what this machine's BLAS
achieves on large products, not the datasheet number (Zen 4: 32 fp32 / 64 bf16 FLOP a cycle a core).

    python benchmarks/layer_cost.py --quick            # < 1 min on a 2-core CPU (batch 16)
    python benchmarks/layer_cost.py --device all --repeats 10
    python benchmarks/layer_cost.py --device cuda --amp on --compile

Targets (project issue): on CPU the time ratio should not exceed the FLOP ratio (CPU time follows
arithmetic); on a GPU these models are launch-bound and the training-step ratio should be <= 1.5x
(``--compile`` uses ``torch.compile``).
"""

from __future__ import annotations

import argparse
import os
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
from mzlite.train import resolve_amp

CONFIGS = [("small", 64, 30), ("medium", 128, 50), ("large", 256, 100)]  # tab:cost


def build(kind: str, d: int, device, compile_: bool):
    common = dict(d_in=8, d_out=1, d_model=d, n_heads=4, d_ff=2 * d, n_inducing=16, dropout=0.1)
    if kind == "mz":
        model = MZSetTransformer(MZSetTransformerConfig(**common, n_g=8, L=4))
    else:
        model = SetTransformer(SetTransformerConfig(**common))
    model = model.to(device)
    params = count_parameters(model)
    # as fit: the fused AdamW kernel. fused=False selects the per-parameter loop, not foreach:
    # on an H100 (batch 64, d=64) MZ's step took 74.6 ms so, 57.7 foreach, 53.3 fused
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-5, fused=True)
    run = torch.compile(model) if compile_ else model
    return model, run, opt, params


def make_batch(B: int, n: int, device, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, n, 8, generator=g)
    sizes = torch.randint(n // 3, n + 1, (B,), generator=g)
    mask = torch.arange(n)[None, :] < sizes[:, None]  # variable set sizes, padded
    y = torch.randn(B, 1, generator=g)
    return x.to(device), mask.to(device), y.to(device)


def autocast(device, amp: bool):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp)


def forward(model, run, batch, amp=False):
    model.eval()
    with torch.no_grad(), autocast(batch[0].device, amp):
        return run(batch[0], batch[1])


def train_step(model, run, opt, batch, amp=False):
    model.train()
    with autocast(batch[0].device, amp):
        pred = run(batch[0], batch[1])
    loss = torch.nn.functional.mse_loss(pred.float(), batch[2])  # loss in float32, as fit
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


CLOCK = time.perf_counter  # --clock process: time.process_time


def timed(fn, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = CLOCK()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 1e3 * (CLOCK() - t0)


def matmul_peak(device, dtype, size: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of ``torch.mm`` on two ``size`` x ``size`` matrices: median of ``repeats``."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    times = [timed(lambda: torch.mm(a, b), device) for _ in range(repeats + 1)][1:]  # noqa: B023
    return 2 * size**3 / (statistics.median(times) / 1e3) / 1e9


def bench_config(name, d, n, B, device, repeats, warmup, compile_, amp=False):
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
            tf = timed(lambda: forward(model, run, batch, amp), device)  # noqa: B023
            ts = timed(lambda: train_step(model, run, opt, batch, amp), device)  # noqa: B023
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
    ap.add_argument("--amp", choices=["auto", "on", "off"], default="auto",
                    help="bf16 autocast; auto: fit's default")  # fmt: skip
    ap.add_argument("--clock", choices=["wall", "process"], default="wall",
                    help="process: this process's CPU time (CPU only; use with 1 thread on a "
                         "shared machine, where other jobs' load inflates wall time)")  # fmt: skip
    ap.add_argument("--configs", default="small,medium,large")
    args = ap.parse_args(argv)
    if args.clock == "process":
        if args.device != "cpu":
            sys.exit("--clock process measures CPU time: use it with --device cpu")
        global CLOCK
        CLOCK = time.process_time
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
        f"repeats {repeats} (median), warm-up {warmup}, compile {args.compile}, "
        f"clock {args.clock}, loadavg {tuple(round(x, 2) for x in os.getloadavg())}"
    )
    head = (
        f"{'device':6} {'config':18} {'model':5} {'params':>9} {'GFLOP fwd':>10} "
        f"{'GFLOP f+b':>10} {'fwd ms':>8} {'step ms':>8} {'GF/s fwd':>9} {'GF/s step':>9} "
        f"{'%pk fwd':>7} {'%pk step':>8}"
    )
    for dev_name in devices:
        device = torch.device(dev_name)
        amp = {"on": True, "off": False}.get(args.amp, resolve_amp(None, device))
        dtype = torch.bfloat16 if amp else torch.float32
        peak = matmul_peak(device, dtype)
        print(
            f"\n{dev_name}: {'bf16 autocast' if amp else 'float32'}; peak = 2048^3 torch.mm in "
            f"{str(dtype).split('.')[-1]}, median of 5: {peak:.0f} GFLOP/s"
        )
        print(head + ("  peak MiB" if device.type == "cuda" else ""))
        for name, d, n in CONFIGS:
            if name not in wanted:
                continue
            res = bench_config(name, d, n, B, device, repeats, warmup, args.compile, amp)
            label = f"{name} d={d} n={n}"
            for k in ("st", "mz"):
                r = res[k]
                gf_f = r["gflop_fwd"] / (r["fwd_ms"] / 1e3)
                gf_s = r["gflop_step"] / (r["step_ms"] / 1e3)
                pk_f, pk_s = 100 * gf_f / peak, 100 * gf_s / peak
                line = (
                    f"{dev_name:6} {label:18} {k:5} {r['params']:>9,} {r['gflop_fwd']:>10.2f} "
                    f"{r['gflop_step']:>10.2f} {r['fwd_ms']:>8.1f} {r['step_ms']:>8.1f} "
                    f"{gf_f:>9.1f} {gf_s:>9.1f} {pk_f:>6.1f}% {pk_s:>7.1f}%"
                )
                print(line + (f" {r['peak_mib']:>9.0f}" if "peak_mib" in r else ""))
            s, m = res["st"], res["mz"]
            ratio = lambda key, m=m, s=s: m[key] / s[key]  # noqa: E731
            line = (
                f"{dev_name:6} {label:18} {'MZ/ST':5} {ratio('params'):>8.2f}x "
                f"{ratio('gflop_fwd'):>9.2f}x {ratio('gflop_step'):>9.2f}x "
                f"{ratio('fwd_ms'):>7.2f}x {ratio('step_ms'):>7.2f}x"
            )
            print(line + (f" {ratio('peak_mib'):>8.2f}x" if "peak_mib" in s else ""))
            verdict = "at or under" if ratio("step_ms") <= ratio("gflop_step") else "ABOVE"
            print(
                f"{dev_name:6} {label:18} training-step ratio {ratio('step_ms'):.2f}x is {verdict} "
                f"the FLOP ratio {ratio('gflop_step'):.2f}x",
                flush=True,
            )
    print(f"loadavg {tuple(round(x, 2) for x in os.getloadavg())}")
    print(
        "paper (RTX 5090, batch 64) MZ/ST: params 1.9/1.9/1.7x, inference 2.4/2.5/2.7x, "
        "training 2.2/3.8/5.5x, memory 2.5/2.0/2.5x"
    )


if __name__ == "__main__":
    main()
