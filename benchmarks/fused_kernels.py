"""The fused CPU kernels (``mzlite.nn.fused``) against eager PyTorch on this CPU, side by side.

Every row times the same computation twice in one process, the kernel and the eager path
(``fused.disabled()``), interleaved repeat by repeat in alternating order, CPU time of one
thread (``time.process_time``: what a shared machine's load touches least), medians after
warm-up; the ratio is eager / kernel (above 1: the kernel is faster). Printed with the load.

``add_norm``  the residual + dropout + LayerNorm of both readings that have kernels, forward +
              backward, on a packed batch's streams: ``"zonotope"`` (the default,
              ``attention.add_zonotope_norm``: the centre's LayerNorm and its affine map on the
              generators) and ``"layernorm"`` (``attention.add_norm_rows``); 128 sets of ~20
              tokens, 8 generators, widths 32, 64, 128, 256 (AVX-512 code) and 48, 80 (the
              generic loops), float32 and bf16 streams, p = 0.1. Every width is timed, selected
              or not.
``layout``    the head-major (un)packing of the generator stream (``Packing.unpack_heads`` /
              ``pack_heads``, the padded layout's permutes), forward + backward, bf16.
``choice``    ``fused.measure()`` (what the default policy measured, d = 64) beside the stored
              choice this process runs (``fused.choice()``).
``builds``    this build's norm kernels against another build's (``--other-build``), the same
              calls interleaved: the vector code against the loops it replaced.
``model``     one training step as ``fit`` takes it on CPU (AdamW; the precision ``fit``'s
              default resolves to here, ``resolve_amp``, or ``--amp``) of MZ-Full, batch 128,
              sets of 10-30, each reading of choice 7 that has kernels.

It ends by comparing each measurement with what the policy selects on this CPU
(``MZLITE_FUSED`` unset: what ``fused.choose`` measured faster here at d = 64, per kernel and
dtype; add_norm only at the widths with vector code). ``MZLITE_FUSED=1`` selects every kernel
(``0`` would time eager twice).

    OMP_NUM_THREADS=1 python benchmarks/fused_kernels.py              # ~3 min CPU
    OMP_NUM_THREADS=1 python benchmarks/fused_kernels.py --repeats 5 --parts add_norm,layout
    # this build's kernels against another commit's build (the vector code against the loops):
    OMP_NUM_THREADS=1 python benchmarks/fused_kernels.py --parts builds --widths 32,48,64,128 \
        --other-build ~/.cache/torch_extensions/mzlite_fused_cpu_TAG/mzlite_fused_cpu_TAG.so
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_speed import step_batches, train_step  # noqa: E402

from mzlite.nn import build_model, fused  # noqa: E402
from mzlite.nn.attention import (  # noqa: E402
    Packing,
    _heads_first,
    _heads_last,
    add_norm_rows,
    add_zonotope_norm,
)
from mzlite.train import resolve_amp  # noqa: E402

PARTS = ("choice", "add_norm", "layout", "model", "builds")


def side_by_side(kernel, eager, repeats: int, warmup: int = 2) -> tuple[float, float]:
    """Median CPU seconds of ``kernel()`` and ``eager()``, interleaved in alternating order."""
    times = {kernel: [], eager: []}
    for r in range(warmup + repeats):
        for f in (kernel, eager) if r % 2 == 0 else (eager, kernel):
            t = time.process_time()
            f()
            if r >= warmup:
                times[f].append(time.process_time() - t)
    return statistics.median(times[kernel]), statistics.median(times[eager])


def row(label: str, kernel_s: float, eager_s: float, selected: bool) -> float:
    ratio = eager_s / kernel_s
    verdict = "kernel faster" if ratio > 1 else "eager faster"
    print(
        f"  {label:38} kernel {kernel_s * 1e3:8.2f} ms  eager {eager_s * 1e3:8.2f} ms  "
        f"eager/kernel {ratio:5.2f}x  {verdict:13}  policy: {'kernel' if selected else 'eager'}",
        flush=True,
    )
    return ratio


def selected(stand_in, *args) -> bool:
    """Whether ``fused.fast_path`` runs the kernel for these arguments on this CPU."""
    kernel = stand_in.kernel
    return fused.loaded() and kernel.accepts(*args) and fused.selects(kernel, args)


T, NG, P = 2560, 8, 0.1  # the norm rows' streams: (T, d) centres, (T, NG, d) generators
READINGS = (("zonotope", add_zonotope_norm), ("layernorm", add_norm_rows))


def norm_inputs(reading: str, d: int, dtype: torch.dtype) -> tuple:
    """The arguments of the reading's residual + LayerNorm function (same ones every call)."""
    g = torch.Generator().manual_seed(0)
    ln_c, ln_G = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
    c, a_c = (torch.randn(T, d, generator=g).to(dtype).requires_grad_() for _ in "ca")
    G, a_G = (torch.randn(T, NG, d, generator=g).to(dtype).requires_grad_() for _ in "Ga")
    return (c, G, a_c, a_G, ln_c, P) if reading == "zonotope" else (c, G, a_c, a_G, ln_c, ln_G, P)


def bench_add_norm(args) -> dict:
    """-> {(reading, d, dtype): (eager / kernel, selected)}"""
    print("residual + dropout + LayerNorm of both streams, forward + backward:")
    ratios = {}
    for reading, f in READINGS:
        for d in args.widths:
            for dtype in (torch.float32, torch.bfloat16):
                xs = norm_inputs(reading, d, dtype)
                kernel, eager = fused.fwd_bwd(f.kernel.run, *xs), fused.fwd_bwd(f.eager, *xs)
                k, e = side_by_side(kernel, eager, args.repeats)
                dt = str(dtype).removeprefix("torch.")
                label = f"{f.kernel.name:17} d={d:3} {dt:8} ({T}, {NG}, {d})"
                on = selected(f, *xs)
                ratios[reading, d, dtype] = (row(label, k, e, on), on)
    return ratios


def bench_choice(args) -> None:
    """``fused.measure()`` now (the measurement behind the default policy: every kernel against
    eager on fit's MZ-Full shapes, d = 64) beside what this process chose (``fused.choice()``,
    the stored measurement while its key holds)."""
    shape = ", ".join(f"{k} {v}" for k, v in fused.MEASURED_SHAPE.items())
    print(f"the measured choice (fused.measure, {shape}; median of {args.repeats} repeats):")
    chosen = fused.choice()
    for key, m in fused.measure(args.repeats).items():
        stored = "kernel" if chosen.get(key) else "eager"
        print(
            f"  {key:27} kernel {m['kernel_s'] * 1e3:7.2f} ms  eager {m['eager_s'] * 1e3:7.2f} ms"
            f"  eager/kernel {m['eager_s'] / m['kernel_s']:5.2f}x  now: "
            f"{'kernel' if m['kernel'] else 'eager':6}  stored choice: {stored}",
            flush=True,
        )


def bench_builds(args) -> None:
    """This build's norm kernels against another build's (``--other-build``: the library that
    ``fused.build()`` wrote for another commit, e.g. one before the vector code for this CPU),
    the same calls on the same inputs, interleaved: what the vector code gains over the loops
    it replaced."""
    if not args.other_build:
        sys.exit("--parts builds needs --other-build PATH (an mzlite_fused_cpu_*.so)")
    path = Path(args.other_build)
    other, mine = fused._import(path.stem, path.parent), fused._state["ext"]
    theirs = other.simd() if hasattr(other, "simd") else "AVX-512 only"
    print(f"this build ({fused.simd()}) against {path.name} (vector code: {theirs}), fwd + bwd:")

    def on(ext, step):
        def run():
            fused._state["ext"] = ext  # the kernels' autograd Functions read it, backward too
            try:
                step()
            finally:
                fused._state["ext"] = mine

        return run

    for reading, f in READINGS:
        for d in args.widths:
            for dtype in (torch.float32, torch.bfloat16):
                step = fused.fwd_bwd(f.kernel.run, *norm_inputs(reading, d, dtype))
                a, b = side_by_side(on(mine, step), on(other, step), args.repeats)
                dt = str(dtype).removeprefix("torch.")
                print(
                    f"  {f.kernel.name:17} d={d:3} {dt:8} this build {a * 1e3:7.2f} ms  other "
                    f"{b * 1e3:7.2f} ms  other/this {b / a:5.2f}x",
                    flush=True,
                )


def bench_layout(args) -> None:
    print("head-major layouts of the generator stream (H=4, n_g=8, d=64), fwd + bwd:")
    g = torch.Generator().manual_seed(0)
    mask = torch.arange(30)[None] < torch.randint(10, 31, (128,), generator=g)[:, None]
    pk, H, ng, d = Packing(mask), 4, 8, 64
    for dtype in (torch.bfloat16, torch.float32):
        packed = torch.randn(len(pk.rows), ng, d, generator=g).to(dtype).requires_grad_()
        heads = torch.randn(pk.B, H, pk.n, ng, d // H, generator=g).to(dtype).requires_grad_()
        padded = torch.randn(pk.B, pk.n, ng, d, generator=g).to(dtype).requires_grad_()
        cases = {
            "packed -> head-major": (Packing.unpack_heads, pk, packed, H),
            "head-major -> packed": (Packing.pack_heads, pk, heads),
            "padded -> head-major": (_heads_first, padded, H),
            "head-major -> padded": (_heads_last, heads),
        }
        for label, (f, *xs) in cases.items():
            # fwd_bwd makes the outputs contiguous, as attention reads them (eager's
            # heads_first returns a permuted view)
            kernel, eager = fused.fwd_bwd(f.kernel.run, *xs), fused.fwd_bwd(f.eager, *xs)
            k, e = side_by_side(kernel, eager, args.repeats * 3)
            name = f"{f.kernel.name} {str(dtype).removeprefix('torch.')}"
            row(f"{name:21} ({label})", k, e, selected(f, *xs))


def bench_model(args) -> None:
    amp = resolve_amp(None, "cpu") if args.amp == "auto" else args.amp == "bf16"
    precision = "bf16 autocast" if amp else "float32"
    print(f"one training step of MZ-Full (d=64, batch 128, sets of 10-30, {precision}, AdamW):")
    batch = step_batches(1)[0]
    for gen_norm in ("layernorm", "zonotope"):
        torch.manual_seed(0)
        model = build_model("mz_full", 8, device="cpu", gen_norm=gen_norm)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-5, fused=True)

        def kernel(m=model, o=opt):
            train_step(m, o, batch, amp)

        def eager(m=model, o=opt):
            with fused.disabled():
                train_step(m, o, batch, amp)

        before = sum(fused.calls.values())
        kernel()
        ran = sum(fused.calls.values()) > before  # through fast_path: what fit runs here
        k, e = side_by_side(kernel, eager, args.repeats)
        what = "add_norm_rows" if gen_norm == "layernorm" else "add_zonotope_norm"
        row(f'gen_norm="{gen_norm}" ({what} + layouts)', k, e, ran)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7, help="timed repeats per path and row")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument(
        "--widths",
        type=lambda v: [int(w) for w in v.split(",")],
        default=[32, 48, 64, 80, 128, 256],
        help="add_norm widths d, comma-separated (default 32,48,64,80,128,256)",
    )
    ap.add_argument(
        "--parts", default="choice,add_norm,layout,model", help=f"comma-separated, of {PARTS}"
    )
    ap.add_argument("--other-build", default=None, help="for --parts builds: another build's .so")
    ap.add_argument(
        "--amp",
        choices=("auto", "bf16", "fp32"),
        default="auto",
        help="precision of the model rows (default: what fit's amp=None resolves to here)",
    )
    args = ap.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        ap.error(f"--parts: unknown {unknown}; valid: {', '.join(PARTS)}")
    torch.set_num_threads(args.threads)
    if not fused.build():
        sys.exit(f"the fused kernels cannot be built here: {fused.build_error()}")
    if fused.policy() == "auto":
        fused.choose()  # what a model's constructor does: the stored choice, or measured now
    print(
        f"fused kernels vs eager: {fused.cpu_model()}, torch "
        f"{torch.__version__} (CPU capability {torch.backends.cpu.get_cpu_capability()}), kernel "
        f"build's vector code {fused.simd()} (widths {sorted(fused.simd_widths())}), "
        f"MZLITE_FUSED={fused.policy()}, {args.threads} thread(s), median of {args.repeats} "
        f"repeats, CPU time; "
        f"loadavg {tuple(round(x, 2) for x in os.getloadavg())}",
        flush=True,
    )
    if not fused.loaded():
        print("  (not selected by the policy here: the model rows time eager twice)")
    ratios = bench_add_norm(args) if "add_norm" in parts else {}
    if "choice" in parts:
        bench_choice(args)
    if "builds" in parts:
        bench_builds(args)
    if "layout" in parts:
        bench_layout(args)
    if "model" in parts:
        bench_model(args)
    if ratios:
        print("policy on this CPU against these measurements:")
        for reading, d in sorted({key[:2] for key in ratios}):
            mine = [v for key, v in ratios.items() if key[:2] == (reading, d)]
            faster = all(r > 1 for r, _ in mine)
            chosen = all(on for _, on in mine)
            if chosen and not faster:
                verdict = "DISAGREES: the policy runs a kernel not measured faster"
            elif faster and not chosen:
                verdict = "policy conservative: eager here (no vector code at this width, or not"
                verdict += " measured faster at d = 64); MZLITE_FUSED=1 runs the kernel"
            else:
                verdict = "agrees"
            print(
                f"  {reading:9} d={d:3}: policy {'kernel' if chosen else 'eager':6}; measured "
                f"kernel {'faster' if faster else 'not faster'} in both dtypes: {verdict}"
            )
    print(f"loadavg {tuple(round(x, 2) for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
