"""``fit`` on this CPU: the current code against a baseline commit, side by side in one run.

Measurements (issues 10 and 36), each printed with ``os.getloadavg()`` because the machine is
shared:

``speed``   ``fit`` with its CPU defaults on MZ-Full (paper default size, d_in=8), sets of 10-30
            elements, batch 128, by default 3 epochs of 1,024 sets on one thread: the baseline
            commit's package (default 81b182d, issue 36's yardstick; exported with ``git
            archive`` into a temporary folder, no worktree needed) and today's (this checkout, or
            ``--current COMMIT`` exported the same way), each fit in a fresh subprocess importing
            its own tree, interleaved repeat by repeat in alternating order; the ratio of median
            times is the speedup, in wall time and in CPU time (the robust one on a shared
            machine with ``--threads 1``), held to ``--goal`` (1.35x). Both see the same data and
            the same torch threads; the one-off import of ``torch._dynamo`` by the first AdamW of
            a process (~1.5 s) and the fused kernels' build and measured choice (once per
            machine, ``mzlite.nn.fused.choose``) are paid before the clock starts. Beside
            today's default (``MZLITE_FUSED`` unset: the kernels measured faster here) it fits
            today's code forced either way, ``MZLITE_FUSED=0`` (eager) and ``=1`` (every
            kernel), and says whether the default is the faster of the two on this CPU
            (``--no-forced``: the two arms left out). The CPU's model and the flags that
            matter here (AVX-512, AVX2, FMA, bf16, AMX) head the output.
``precision`` ``fit`` of MZ-Full and the Set Transformer in float32 against bf16 autocast, fresh
            processes interleaved, one thread: the measurement behind ``resolve_amp``'s CPU rule.
``equal``   the same real cell (default tab:tdof-verify L=8, MZ-1L, ``cpu`` profile) trained with
            the fast path (``TrainConfig(amp=None)``: bf16 autocast on this CPU, the set stream
            packed, the fused CPU kernels) and the plain path (``amp=False``, float32, padded
            layout ``pack_sets=False``, eager PyTorch: the layout, precision and code path of
            abea232), several seeds: test R^2 per
            seed, mean and std, and the difference of the means in units of the seed std.
``layout``  throughput of the experiment runner's two CPU layouts for one table's jobs:
            2 processes x 1 thread against 1 process x 2 threads (jobs per minute).
``levers``  one training step under each lever (precision, the baseline's attention code, fused
            AdamW, packed or padded set stream) and the cost of each part of the generator
            stream, in one process.
``compile`` ``torch.compile`` of the whole model against eager, in one process: compile cost
            from a cold cache, median steps interleaved on varying batches, break-even steps.

    python benchmarks/fit_speed.py speed                 # today's default vs 81b182d's, and
                                                         # vs today's eager and every kernel
    python benchmarks/fit_speed.py precision             # float32 vs bf16, MZ-Full and ST
    python benchmarks/fit_speed.py speed --train 2000 --val 500 --epochs 6  # cpu-converged sizes
    python benchmarks/fit_speed.py equal --seeds 0-2 --epochs 15
    python benchmarks/fit_speed.py layout
    python benchmarks/fit_speed.py levers                # one process, ~2 min CPU
    python benchmarks/fit_speed.py compile               # one process, ~4 min CPU compiling
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# One fit in a fresh interpreter: synthetic sets (the targets only need to be learnable), the
# package under test first on sys.path. Uses only API that exists at the baseline commit.
DRIVER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
from mzlite.nn import build_model
from mzlite.train import TrainConfig, fit
n_train, n_val, epochs, batch, threads = (int(a) for a in sys.argv[2:7])
name = sys.argv[7] if len(sys.argv) > 7 else "mz_full"
amp = {"auto": None, "bf16": True, "fp32": False}[sys.argv[8] if len(sys.argv) > 8 else "auto"]
if threads:
    torch.set_num_threads(threads)
g = torch.Generator().manual_seed(0)
def sets(N):
    x = torch.randn(N, 30, 8, generator=g)
    size = torch.randint(10, 31, (N,), generator=g)
    mask = torch.arange(30)[None, :] < size[:, None]  # (N, 30), True = real
    m = mask[..., None].float()
    y = ((x * m).sum(1) / m.sum(1)).norm(dim=-1, keepdim=True)  # (N, 1): norm of the mean
    return x, mask, y
train, val = sets(n_train), sets(n_val)
torch.manual_seed(0)
model = build_model(name, 8, device="cpu")
torch.optim.AdamW([torch.zeros(1, requires_grad=True)])  # its first call imports torch._dynamo
cfg = TrainConfig(epochs=epochs, batch_size=batch, warmup_epochs=1, patience=None, device="cpu",
                  lr=1e-3, amp=amp)
t, cpu = time.perf_counter(), time.process_time()
hist = fit(model, train, val, cfg, progress=False)
wall, cpu = time.perf_counter() - t, time.process_time() - cpu
try:
    from mzlite.nn import fused
    kernels = fused.loaded()
except ImportError:  # a commit before the fused kernels
    kernels = False
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "threads": torch.get_num_threads(),
                  "val_loss": hist.val_loss, "amp": hist.config.get("amp"), "kernels": kernels}))
"""


def export_commit(commit: str, dest: Path) -> Path:
    """The ``mzlite`` package as it was at ``commit``, unpacked under ``dest``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "mzlite"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def one_fit(
    src: Path, *sizes: int, model: str = "mz_full", amp: str = "auto", fused: str | None = None
) -> dict:
    """One ``fit`` of ``model`` in a fresh interpreter importing the package at ``src``; ``amp``
    is ``auto`` (``TrainConfig(amp=None)``, fit's default), ``bf16`` or ``fp32``; ``fused``:
    ``MZLITE_FUSED`` for it (None: unset, the default policy)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MZLITE_FUSED")}
    if fused is not None:
        env["MZLITE_FUSED"] = fused
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, str(src), *(str(s) for s in sizes), model, amp],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def cpu_name() -> str:
    """This CPU's model name (``platform.processor()`` is empty on Linux)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


# the flags that decide the speed of these kernels and of torch's bf16 and matmul paths
FLAGS = ("avx512f", "avx512_bf16", "amx_bf16", "avx2", "fma")


def cpu_flags() -> list[str]:
    """Which of ``FLAGS`` this CPU has (``/proc/cpuinfo``; empty elsewhere)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return [f for f in FLAGS if f in have]
    return []


def _describe(commit: str | None) -> str:
    ref = commit or "HEAD"
    out = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", ref], capture_output=True, text=True
    )
    name = out.stdout.strip() or ref
    if commit is None:
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "mzlite"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        return f"this checkout ({name}{', mzlite/ edited' if dirty else ''})"
    return name


def speed(args) -> None:
    """``fit``'s defaults on MZ-Full, the baseline commit's against today's (this checkout, or
    ``--current``), and today's forced to eager and to every kernel, each fit in a fresh process
    importing its own tree, interleaved; medians."""
    threads = args.threads or 0  # 0: fit's default (torch's, one per core)
    with tempfile.TemporaryDirectory() as tmp:
        base_dir, cur_dir = Path(tmp, "baseline"), Path(tmp, "current")
        base_dir.mkdir()
        current = REPO
        if args.current:
            cur_dir.mkdir()
            current = export_commit(args.current, cur_dir)
        # arm: (package, MZLITE_FUSED); "current" is today's default (the measured choice)
        arms = {"baseline": (export_commit(args.baseline, base_dir), None),
                "current": (current, None)}  # fmt: skip
        if args.forced:
            arms |= {"eager": (current, "0"), "kernels": (current, "1")}
        names = {"baseline": _describe(args.baseline), "current": _describe(args.current)}
        print(
            f"fit speed: MZ-Full d_in=8, sets of 10-30, batch {args.batch}, {args.train} train / "
            f"{args.val} val sets, {args.epochs} epochs per fit, fit's CPU defaults, torch threads "
            f"{threads or 'default'} ({os.cpu_count()} cores, {cpu_name()}, flags "
            f"{' '.join(cpu_flags()) or 'none of ' + ' '.join(FLAGS)}); baseline "
            f"{names['baseline']} vs current {names['current']}"
            + (" (default; eager: MZLITE_FUSED=0; kernels: MZLITE_FUSED=1)" if args.forced else "")
            + f"; {args.repeats} interleaved repeats after 1 warm-up round; "
            f"{time.strftime('%Y-%m-%d %H:%M %Z')}"
        )
        times = {k: {"wall_s": [], "cpu_s": []} for k in arms}
        for r in range(args.repeats + 1):
            order = list(arms) if r % 2 == 0 else list(arms)[::-1]
            for k in order:
                src, fused = arms[k]
                sizes = (args.train, args.val, args.epochs, args.batch, threads)
                res = one_fit(src, *sizes, fused=fused)
                if r > 0:
                    for key in ("wall_s", "cpu_s"):
                        times[k][key].append(res[key])
                print(
                    f"  repeat {r}{' (warm-up)' if r == 0 else ''} {k:8} wall {res['wall_s']:7.1f} "
                    f"s, CPU {res['cpu_s']:7.1f} s  amp={res['amp']} kernels={res['kernels']} "
                    f"threads={res['threads']} final val loss {res['val_loss'][-1]:.4f}  load "
                    f"{os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    for key, what in (("wall_s", "wall time"), ("cpu_s", "CPU time (all threads)")):
        base, cur = (statistics.median(times[k][key]) for k in ("baseline", "current"))
        ratios = [b / c for b, c in zip(times["baseline"][key], times["current"][key], strict=True)]
        print(
            f"median fit {what}: baseline {base:.1f} s, current {cur:.1f} s -> speedup "
            f"{base / cur:.2f}x (per repeat {', '.join(f'{x:.2f}' for x in ratios)})"
        )
    med = {k: statistics.median(v["cpu_s"]) for k, v in times.items()}
    base, cur = med["baseline"], med["current"]
    verdict = "met" if base / cur >= args.goal else "NOT met"
    print(
        f"goal: current >= {args.goal:.2f}x baseline {args.baseline} in median CPU time: "
        f"{base / cur:.2f}x, {verdict}"
    )
    if args.forced:
        best = min(med["eager"], med["kernels"])
        which = "eager" if med["eager"] < med["kernels"] else "kernels"
        faster = cur <= best * (1 + args.tolerance)
        print(
            f"median fit CPU time of today's code: default {cur:.1f} s, eager {med['eager']:.1f} "
            f"s, every kernel {med['kernels']:.1f} s -> the default is "
            f"{'' if faster else 'NOT '}the faster path here (the faster forced one: {which}, "
            f"{best:.1f} s; tolerance {args.tolerance:.0%})"
        )
    print(f"loadavg {tuple(round(x, 2) for x in os.getloadavg())}")


def precision(args) -> None:
    """``fit`` of each model in float32 against bf16 autocast, this checkout, fresh processes
    interleaved in alternating order, one thread: the measurement behind ``resolve_amp``'s CPU
    rule (``mzlite.train.precision``)."""
    print(
        f"precision: fit of {', '.join(args.models)}, d_in=8, sets of 10-30, batch {args.batch}, "
        f"{args.train} train / {args.val} val sets, {args.epochs} epochs, {args.threads} "
        f"thread(s), float32 vs bf16 autocast; {args.repeats} interleaved repeats after 1 warm-up;"
        f" {cpu_name()}; {time.strftime('%Y-%m-%d %H:%M %Z')}"
    )
    sizes = (args.train, args.val, args.epochs, args.batch, args.threads)
    for model in args.models:
        cpu = {"fp32": [], "bf16": []}
        for r in range(args.repeats + 1):
            for amp in list(cpu) if r % 2 == 0 else list(cpu)[::-1]:
                res = one_fit(REPO, *sizes, model=model, amp=amp)
                if r > 0:
                    cpu[amp].append(res["cpu_s"])
                print(
                    f"  {model:8} repeat {r}{' (warm-up)' if r == 0 else ''} {amp}: CPU "
                    f"{res['cpu_s']:6.2f} s  load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        f32, b16 = (statistics.median(v) for v in cpu.values())
        print(
            f"{model}: median fit CPU time float32 {f32:.2f} s, bf16 {b16:.2f} s -> bf16 is "
            f"{f32 / b16:.2f}x float32's speed"
        )
    print(f"loadavg {tuple(round(x, 2) for x in os.getloadavg())}")


def equal(args) -> None:
    import torch

    from mzlite.nn import fused
    from mzlite.repro import experiments as ex
    from mzlite.train import evaluate, fit

    (job,) = [j for j in ex.jobs(args.table, args.profile, 0, cells=args.cell, device="cpu")
              if j.cell.id == args.cell]  # fmt: skip
    tr, va, te = ex.job_splits(job)
    seeds = ex.parse_seeds(args.seeds)
    torch.set_num_threads(args.threads)
    print(
        f"equal results: {args.table} {args.cell}, profile {args.profile} (sizes {job.sizes}), "
        f"epochs {args.epochs or 'profile'}; seeds {list(seeds)}; {args.threads} thread(s)"
    )
    # plain: abea232's precision and layout, and the eager PyTorch path (no fused CPU kernels)
    modes = {"fast (bf16, packed)": (None, None), "plain (fp32, padded)": (False, False)}
    r2 = {label: [] for label in modes}
    for seed in seeds:
        for label, (amp, pack_sets) in modes.items():
            plain = amp is False
            cfg = job.train_config()
            kw = {"seed": seed, "amp": amp}
            if args.epochs:
                kw |= {"epochs": args.epochs, "warmup_epochs": min(cfg.warmup_epochs, args.epochs)}
            cfg = type(cfg)(**{**cfg.to_dict(), **kw, "betas": tuple(cfg.betas)})
            model = ex.build_cell_model(job.cell, tr.d_in, tr.d_out, seed, "cpu")
            model.pack_sets = pack_sets
            t = time.perf_counter()
            with fused.disabled() if plain else contextlib.nullcontext():
                hist = fit(model, tr, va, cfg, progress=False)
                stats = hist if cfg.normalize_targets else None
                test = evaluate(model, te, hist.config_obj(), target_stats=stats)["r2"]
            r2[label].append(test)
            print(
                f"  seed {seed} {label:21} test R^2 {test:.4f}  ({hist.epochs_run} epochs, "
                f"{time.perf_counter() - t:.0f} s, amp={hist.config['amp']})  "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    if len(seeds) < 2:  # one seed reproduces a recorded line; a comparison needs a seed std
        print("one seed: no seed std to compare the two paths in (use --seeds 0-4)")
        return
    (fa, fs), (pa, ps) = ((statistics.mean(v), statistics.stdev(v)) for v in r2.values())
    noise = max(fs, ps)
    print(
        f"fast R^2 {fa:.4f} +/- {fs:.4f}, plain R^2 {pa:.4f} +/- {ps:.4f} (mean +/- seed std); "
        f"difference {fa - pa:+.4f} = {(fa - pa) / noise:+.2f} seed std; "
        f"loadavg {tuple(round(x, 2) for x in os.getloadavg())}"
    )


LAYOUT_DRIVER = r"""
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
from mzlite.nn import build_model
from mzlite.train import TrainConfig, fit
g = torch.Generator().manual_seed(0)
x = torch.randn(512, 30, 8, generator=g)
mask = torch.arange(30)[None] < torch.randint(10, 31, (512,), generator=g)[:, None]
y = x.mean(1).norm(dim=-1, keepdim=True)
torch.manual_seed(0)
model = build_model(sys.argv[2], 8, device="cpu")
t = time.perf_counter()
fit(model, (x, mask, y), (x[:128], mask[:128], y[:128]),
    TrainConfig(epochs=2, batch_size=128, warmup_epochs=1, device="cpu"), progress=False)
print(time.perf_counter() - t)
"""


def layout(args) -> None:
    """Jobs per minute: two 1-thread jobs at once vs the same two jobs one after the other on
    2 threads each (what ``workers`` x ``threads`` choose in ``mzlite.repro.experiments.run``)."""

    def batch_of_jobs(workers: int, threads: int) -> float:
        t = time.perf_counter()
        procs = []
        for _ in range(2):
            cmd = [sys.executable, "-c", LAYOUT_DRIVER, str(threads), args.model]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=REPO))
            if workers == 1:
                procs[-1].wait()
        for p in procs:
            p.wait()
        return time.perf_counter() - t

    print(f"runner layout: 2 jobs ({args.model}, 512 sets, 2 epochs, batch 128) per measurement")
    times = {"2 workers x 1 thread": [], "1 worker x 2 threads": []}
    for r in range(args.repeats):
        keys = list(times) if r % 2 == 0 else list(times)[::-1]
        for k in keys:
            w = 2 if k.startswith("2") else 1
            times[k].append(batch_of_jobs(w, 1 if w == 2 else 2))
            print(f"  repeat {r} {k}: {times[k][-1]:.1f} s  load {os.getloadavg()[0]:.1f}",
                  flush=True)  # fmt: skip
    med = {k: statistics.median(v) for k, v in times.items()}
    a, b = med.values()
    print(
        f"median: {', '.join(f'{k} {v:.1f} s' for k, v in med.items())}; 2x1 is {b / a:.2f}x the "
        f"throughput of 1x2; loadavg {tuple(round(x, 2) for x in os.getloadavg())}"
    )


def step_batches(count: int) -> list:
    """``count`` training batches of the step benchmarks: 128 sets of 10-30 elements (d_in=8)
    padded to 30, targets (128, 1); the same ones in every run (seed 0)."""
    import torch

    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(count):
        x = torch.randn(128, 30, 8, generator=g)
        mask = torch.arange(30)[None] < torch.randint(10, 31, (128,), generator=g)[:, None]
        out.append((x, mask, torch.randn(128, 1, generator=g)))
    return out


def train_step(model, opt, batch, amp: bool = True) -> None:
    """One training step as ``fit`` takes it on CPU: bf16 autocast (``amp``), MSE in float32,
    gradient clipping at 1, the optimiser step."""
    import torch
    import torch.nn.functional as F

    x, mask, y = batch
    model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        pred = model(x, mask)
    loss = F.mse_loss(pred.float(), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def levers(args) -> None:
    """Training-step CPU time of MZ-Full (batch 128, sets of 10-30) under each lever, all models
    in one process, interleaved, one thread: precision, the baseline commit's attention code,
    and what the generator stream, its LayerNorms, its FFN and dropout cost."""
    import importlib.util

    import torch

    import mzlite.nn.attention as attention
    import mzlite.nn.models as models
    from mzlite.nn import build_model
    from mzlite.nn import fused as fused_kernel

    torch.set_num_threads(1)
    fixed, *varying = step_batches(1 + args.repeats + 2)
    # varying: a new batch every repeat, as in fit: the packed row count changes, and a bf16
    # matmul kernel is built for every new shape (the fixed batch never pays that after warm-up)
    blocks = ("ISAB", "PMA", "SAB", "MZISAB", "MZPMA", "MZSAB", "ZonotopeProjection")

    def build(code=attention, strip=(), pack_sets=None, **kw):
        saved = {b: getattr(models, b) for b in blocks}
        for b in blocks:  # build with another version of the attention blocks
            setattr(models, b, getattr(code, b))
        try:
            torch.manual_seed(0)
            m = build_model("mz_full", 8, device="cpu", **kw)
            m.pack_sets = pack_sets  # a class attribute at the baseline: harmless there
        finally:
            for b, v in saved.items():
                setattr(models, b, v)
        for mod in m.modules():
            if isinstance(mod, code.MZMAB):
                for name in strip:  # cost of a part: replace it by the identity
                    setattr(mod, name, torch.nn.Identity())
        return m

    with tempfile.TemporaryDirectory() as tmp:
        export_commit(args.baseline, Path(tmp))
        spec = importlib.util.spec_from_file_location(
            "mzlite._baseline_attention", Path(tmp) / "mzlite" / "attention.py"
        )
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
    cases = {  # name: (model, amp, fused AdamW)
        f"{args.baseline} attention, float32": (build(old, pack_sets=False), False, False),
        "float32, padded set stream": (build(pack_sets=False), False, True),
        "float32": (build(), False, True),
        f"{args.baseline} attention, bf16": (build(old, pack_sets=False), True, True),
        "bf16, padded set stream": (build(pack_sets=False), True, True),
        "bf16 (fit's default here)": (build(), True, True),
        "bf16, varying batches": (build(), True, True),
        "bf16, padded set stream, varying batches": (build(pack_sets=False), True, True),
        "bf16, foreach AdamW": (build(), True, False),
        "bf16, eager (no fused CPU kernels)": (build(), True, True),
        "bf16, dropout 0": (build(dropout=0.0), True, True),
        "bf16, no generator LayerNorms": (build(strip=("ln0_g", "ln1_g")), True, True),
        "bf16, no generator FFN": (build(strip=("ffn_g",)), True, True),
        "bf16, n_g=1": (build(n_g=1), True, True),
    }
    opts = {
        k: torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=1e-5, fused=fused or None)
        for k, (m, _, fused) in cases.items()
    }

    def step(k, r):
        m, amp, _ = cases[k]
        # "eager": without mzlite.nn.fused's kernel (the code before it, same math)
        with fused_kernel.disabled() if "eager" in k else contextlib.nullcontext():
            train_step(m, opts[k], varying[r] if "varying" in k else fixed, amp)

    times = {k: [] for k in cases}
    keys = list(cases)
    for r in range(args.repeats + 2):
        for k in keys if r % 2 == 0 else keys[::-1]:
            t = time.process_time()
            step(k, r)
            if r >= 2:
                times[k].append(1e3 * (time.process_time() - t))
    med = {k: statistics.median(v) for k, v in times.items()}
    ref = med["bf16 (fit's default here)"]
    print(f"training step, CPU time of one thread, median of {args.repeats} interleaved repeats")
    for k, v in med.items():
        print(f"  {k:41} {v:7.1f} ms   {v - ref:+7.1f} ms vs fit's default")
    print(f"loadavg {tuple(round(x, 2) for x in os.getloadavg())}")


def compile_lever(args) -> None:
    """``torch.compile`` of the whole MZ-Full model (``dynamic=True``, bf16 autocast, as ``fit``
    trains on CPU) against the same model eager, in one process: the compile cost from a cold
    inductor cache (CPU time of this process and of any compile workers, and wall time), then
    the median training step of each, interleaved, on a new batch every step (as in ``fit``:
    set sizes, and so the packed row count, change from batch to batch), and the number of steps
    after which compiling would pay for itself."""
    import resource

    # a cold cache, so that the compile cost is what a fresh machine pays
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-")
    import torch
    import torch._inductor.config as inductor_config

    from mzlite.nn import build_model

    inductor_config.compile_threads = 1  # compile in this process: its CPU time is measurable
    torch.set_num_threads(1)
    batches = step_batches(args.warmup + args.repeats)
    models = {}
    for name in ("eager", "compiled"):
        torch.manual_seed(0)
        m = build_model("mz_full", 8, device="cpu")
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=1e-5, fused=True)
        models[name] = (torch.compile(m, dynamic=True) if name == "compiled" else m, opt)

    def step(name, b):
        train_step(*models[name], b)

    def cpu_all():  # this process and its finished children (compile workers, if any)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + kids.ru_utime + kids.ru_stime

    warm = {}
    for name in models:  # the first steps: tracing and compiling for the compiled model
        c, w = cpu_all(), time.perf_counter()
        for b in batches[: args.warmup]:
            step(name, b)
        warm[name] = (cpu_all() - c, time.perf_counter() - w)
    times = {k: [] for k in models}
    for r, b in enumerate(batches[args.warmup :]):
        for name in list(models) if r % 2 == 0 else list(models)[::-1]:
            t = time.process_time()
            step(name, b)
            times[name].append(1e3 * (time.process_time() - t))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"torch.compile(model, dynamic=True), MZ-Full, batch 128, sets of 10-30, bf16, one "
        f"thread; {args.warmup} warm-up steps, then {args.repeats} interleaved steps, a new "
        f"batch each"
    )
    for name in models:
        print(
            f"  {name:9} first {args.warmup} steps: CPU {warm[name][0]:7.1f} s, wall "
            f"{warm[name][1]:7.1f} s; median step {med[name]:6.1f} ms (CPU)"
        )
    extra = warm["compiled"][0] - warm["eager"][0]
    saving = med["eager"] - med["compiled"]
    if saving > 0:
        print(
            f"compile cost {extra:.1f} s CPU; saves {saving:.1f} ms a step -> pays off after "
            f"{1e3 * extra / saving:,.0f} steps"
        )
    else:
        print(
            f"compile cost {extra:.1f} s CPU; a compiled step is not faster "
            f"({-saving:+.1f} ms): it never pays off"
        )
    print(f"loadavg {tuple(round(x, 2) for x in os.getloadavg())}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("speed", help="fit CPU time, baseline commit vs this checkout")
    s.add_argument("--baseline", default="81b182d", help="default: issue 36's yardstick")
    s.add_argument("--train", type=int, default=1024)
    s.add_argument("--val", type=int, default=256)
    s.add_argument("--epochs", type=int, default=3)
    s.add_argument("--batch", type=int, default=128)
    s.add_argument("--repeats", type=int, default=3)
    s.add_argument("--threads", type=int, default=1, help="torch threads (0: fit's default)")
    s.add_argument("--current", default=None, help="a commit (default: this checkout as is)")
    s.add_argument("--goal", type=float, default=1.35, help="the speedup the run is held to")
    s.add_argument(
        "--no-forced",
        dest="forced",
        action="store_false",
        help="leave out today's code forced to eager (MZLITE_FUSED=0) and every kernel (=1)",
    )
    s.add_argument(
        "--tolerance",
        type=float,
        default=0.03,
        help="the default counts as the faster path within this fraction (default 0.03)",
    )
    pr = sub.add_parser("precision", help="fit CPU time, float32 vs bf16 autocast, per model")
    pr.add_argument("--models", type=lambda v: v.split(","), default=["mz_full", "st"])
    pr.add_argument("--train", type=int, default=1024)
    pr.add_argument("--val", type=int, default=256)
    pr.add_argument("--epochs", type=int, default=3)
    pr.add_argument("--batch", type=int, default=128)
    pr.add_argument("--repeats", type=int, default=3)
    pr.add_argument("--threads", type=int, default=1)
    e = sub.add_parser("equal", help="R^2 of one real cell, fast vs plain path, several seeds")
    e.add_argument("--table", default="tab:tdof-verify")
    e.add_argument("--cell", default="L8-mz_1l")
    e.add_argument("--profile", default="cpu")
    e.add_argument("--seeds", default="0-2")
    e.add_argument("--epochs", type=int, default=None, help="default: the profile's")
    e.add_argument("--threads", type=int, default=1)
    lay = sub.add_parser("layout", help="runner throughput, 2 procs x 1 thread vs 1 x 2")
    lay.add_argument("--model", default="mz_full")
    lay.add_argument("--repeats", type=int, default=3)
    lev = sub.add_parser("levers", help="training-step CPU time under each lever, one process")
    lev.add_argument("--baseline", default="abea232")
    lev.add_argument("--repeats", type=int, default=7)
    com = sub.add_parser("compile", help="torch.compile'd training step vs eager, one process")
    com.add_argument("--warmup", type=int, default=3)
    com.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args(argv)
    run = {"speed": speed, "precision": precision, "equal": equal, "layout": layout,
           "levers": levers, "compile": compile_lever}  # fmt: skip
    run[args.what](args)


if __name__ == "__main__":
    main()
