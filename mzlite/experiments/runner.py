"""Running jobs: data, model, training, the result JSON with its provenance."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
import traceback
from datetime import datetime, timezone
from functools import cache
from pathlib import Path

import torch

import mzlite
from mzlite import nn as _nn
from mzlite import tasks as _tasks
from mzlite._checks import resolve_device
from mzlite._io import atomic_write_json, json_safe
from mzlite._paths import REPO_ROOT
from mzlite.experiments import stats as _stats
from mzlite.train import evaluate, fit, resolve_amp, seed_everything

from .jobs import Job, jobs, protocol
from .specs import RESULT_FORMAT, SET_STATS, Cell, check_task_options
from .tables import get_profile, get_table

# ---------------------------------------------------------------------------------------------
# Provenance
# ---------------------------------------------------------------------------------------------


def _git(*args) -> str | None:
    try:
        r = subprocess.run(
            ["git", *args],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=20,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},  # read only: never touch the index
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def git_info() -> dict:
    """``{"commit": HEAD or None, "dirty": bool or None}`` (None when not a git checkout)."""
    head = _git("rev-parse", "HEAD")
    if head is None:
        return {"commit": None, "dirty": None}
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": head.strip(), "dirty": None if status is None else bool(status.strip())}


def provenance(device: torch.device, git: dict | None = None) -> dict:
    """Where and with what a result was computed."""
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    return {
        "device": str(device),
        "gpu_name": gpu,
        "num_threads": torch.get_num_threads(),
        # results since the fused CPU kernels differ from earlier ones in dropout masks and the
        # learned tokens' precision (mzlite.nn.fused); records whether they ran. loaded(), not
        # available(): a job without MZ blocks must not compile the kernel to fill this in
        "fused_cpu_kernels": device.type == "cpu" and _nn.fused.loaded(),
        "torch": torch.__version__,
        "mzlite": mzlite.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git_commit": (git or {}).get("commit"),
        "git_dirty": (git or {}).get("dirty"),
        "hostname": socket.gethostname(),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


# ---------------------------------------------------------------------------------------------
# Running one job
# ---------------------------------------------------------------------------------------------


def _splits(job: Job, workers: int | None = 1):
    n_tr, n_va, n_te = job.sizes
    return _tasks.make_splits(
        job.cell.task,
        n_tr,
        n_va,
        n_te,
        job.profile.data_seed,
        cache=True,
        cache_dir=job.cache_dir / "datasets",
        workers=workers,
        **job.cell.options,
    )


def _dataset_keys(job: Job) -> list[str]:
    from mzlite.tasks import derive_seed

    return [
        _tasks.cache_path(
            job.cell.task, n, derive_seed(job.profile.data_seed, i), job.cache_dir / "datasets",
            **job.cell.options,
        ).stem
        for i, n in enumerate(job.sizes)
    ]  # fmt: skip


@cache
def _matched_kwargs(name: str, d_in: int, d_out: int, target: int, fixed: tuple) -> dict:
    from mzlite.nn import match_width

    return match_width(name, d_in, d_out, target, **dict(fixed))[0]


def build_cell_model(cell: Cell, d_in: int, d_out: int, seed: int, device="cpu"):
    """The cell's model for data of width ``d_in``/``d_out``, initialised from ``seed``."""
    kw = dict(cell.model_kwargs)
    if cell.match_params is not None:
        kw.update(_matched_kwargs(cell.model, d_in, d_out, cell.match_params, tuple(kw.items())))
    seed_everything(seed)
    return _nn.build_model(cell.model, d_in, d_out, device=device, **kw)


def _expected(job: Job) -> dict:
    """The fields a finished result must agree on to be skipped by a rerun."""
    return {
        "table": job.table,
        "cell": job.cell.id,
        "seed": job.seed,
        "profile": job.profile.name,
        "task": job.cell.task,
        "model": job.cell.model,
        "sizes": list(job.sizes),
    }


def load_result(path) -> dict | None:
    """A result JSON, or None when missing or unreadable (a rerun then recomputes it)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_done(job: Job) -> bool:
    """True when ``job`` has a readable result; a result from another setup (other sizes,
    model, profile, or training configuration: e.g. a profile whose learning rate changed since)
    at the same path raises, so results never silently mix."""
    res = load_result(job.result_path)
    if res is None or res.get("format") != RESULT_FORMAT:
        return False
    exp = _expected(job)
    diff = {k: (res.get(k), v) for k, v in exp.items() if res.get(k) != v}
    old_cfg = res.get("train_config")
    if old_cfg and job.cell.model != SET_STATS:
        cfg = job.train_config()
        new_cfg = cfg.to_dict()
        # precision: what the run used (amp=None is resolved per machine and recorded in the
        # history) against what this job would use here
        old_cfg = {**old_cfg, "amp": result_amp(res)}
        # an explicit device needs no CUDA here: a cluster driver judges GPU workers' results
        where = resolve_device("auto") if job.device == "auto" else torch.device(job.device)
        new_cfg["amp"] = resolve_amp(cfg.amp, where)
        free = ("seed", "device", "num_threads", "eval_batch_size")  # where, not what
        for k in sorted(old_cfg.keys() & new_cfg.keys()):
            if k not in free and old_cfg[k] != new_cfg[k]:
                diff[f"train_config.{k}"] = (old_cfg[k], new_cfg[k])
    if diff:
        raise ValueError(
            f"{job.result_path} holds a different experiment ({diff}); use another results_dir "
            "or delete it"
        )
    return True


def result_amp(result: dict) -> bool | None:
    """The precision a result was trained in: bf16 autocast (True) or float32 (False), as its
    history recorded it (``amp=None`` resolved on the machine that ran it), else as its
    ``train_config`` says; None when neither says (a closed-form result)."""
    hist_cfg = (result.get("history") or {}).get("config") or {}
    if hist_cfg.get("amp") is not None:
        return bool(hist_cfg["amp"])
    amp = (result.get("train_config") or {}).get("amp")
    return None if amp is None else bool(amp)


def run_job(
    job: Job, git: dict | None = None, progress: bool = False, *, splits=None, write: bool = True
) -> dict:
    """Train and evaluate one (cell, seed) and write its result JSON (atomically). Resumes from
    the job's checkpoint; removes it once the result is written. ``splits``: the job's (train,
    val, test) data when the caller has them (a cluster worker gets them from the driver);
    ``write=False`` returns the result without writing it or removing the checkpoint."""
    cell = job.cell
    device = resolve_device(job.device)
    tr, va, te = splits if splits is not None else _splits(job)
    t0 = time.perf_counter()
    out = {"format": RESULT_FORMAT, **_expected(job)}
    out.update(
        {
            "row": cell.row,
            "column": cell.column,
            "part": cell.part,
            "task_options": check_task_options(cell.task, cell.options),
            "data_seed": job.profile.data_seed,
            "dataset_keys": _dataset_keys(job),
            "data_code_version": _tasks.CODE_VERSION,
            "model_kwargs": dict(cell.model_kwargs),
        }
    )
    if cell.model == SET_STATS:
        b = _tasks.baseline_r2(tr, te)
        out.update(
            {
                "metrics": {"test": {"r2": b["r2"], "n": b["n_test"]}, "best_epoch": None},
                "model_config": {"ridge_alpha": b["alpha"], "features": b["features"]},
                "params": len(b["features"]) + 1,
                "train_config": None,
                "epochs_run": 0,
                "stop_reason": "closed_form",
                "history": None,
            }
        )
    else:
        cfg = job.train_config()
        model = build_cell_model(cell, tr.d_in, tr.d_out, job.seed, device)
        job.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
        hist = fit(model, tr, va, cfg, checkpoint_path=job.checkpoint_path, progress=progress)
        stats = hist if cfg.normalize_targets else None
        test = evaluate(model, te, cfg, target_stats=stats)
        best = hist.best_epoch
        from mzlite.nn import config_dict

        out.update(
            {
                "metrics": {
                    "test": test,
                    "val_best": hist.val_metrics[best - 1] if best else None,
                    "best_epoch": best,
                },
                "model_config": config_dict(model),
                "params": sum(p.numel() for p in model.parameters()),
                "train_config": cfg.to_dict(),
                "epochs_run": hist.epochs_run,
                "stop_reason": hist.stop_reason,
                "history": hist.to_dict(),
            }
        )
    out["convergence"] = _stats.convergence(out["history"])
    out["converged"] = out["convergence"]["converged"]
    out["protocol"] = protocol(job)
    out["wall_time_s"] = (
        out["history"]["wall_time_s"] if out["history"] else time.perf_counter() - t0
    )
    out["provenance"] = provenance(device, git)
    if not write:
        return out
    atomic_write_json(job.result_path, json_safe(out))
    if job.checkpoint_path.exists():
        job.checkpoint_path.unlink()
    return out


def _worker_init(threads: int) -> None:
    torch.set_num_threads(threads)


def _worker(job: Job, git: dict) -> dict:
    # returns a summary only: the result itself is on disk
    try:
        res = run_job(job, git)
    except Exception as e:  # reported by the parent; other jobs go on
        return {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
    return _summary(res)


def _summary(res: dict) -> dict:
    m = res["metrics"]["test"]
    return {
        "r2": m.get("r2"),
        "mse": m.get("mse"),
        "epochs": res["epochs_run"],
        "wall": res["wall_time_s"],
    }


def _fmt(job: Job, s: dict) -> str:
    if "error" in s:
        return f"{job.cell.id} seed {job.seed}: FAILED {s['error']}"
    r2 = "nan" if s["r2"] is None else f"{s['r2']:.3f}"
    return f"{job.cell.id} seed {job.seed}: R^2 {r2}, {s['epochs']} epochs, {s['wall']:.1f} s"


def run(
    table,
    profile: str = "smoke",
    seeds=None,
    device: str = "auto",
    workers: int | None = None,
    models=None,
    results_dir=None,
    progress: bool = True,
    *,
    cells=None,
    cache_dir=None,
    data_workers: int | None = None,
    threads: int | None = None,
    launcher="local",
) -> dict:
    """Run every missing (cell, seed) of ``table`` under ``profile`` ("smoke", "cpu" or "full").

    ``seeds``: None (the profile's: 1 for smoke and cpu, each cell's paper count for full), "0-4",
    "0,2,5" or ints. ``device``: "auto" (CUDA when available), "cpu", "cuda". ``workers``: jobs
    trained in parallel processes, each with ``torch.set_num_threads(max(1, cores // workers))``
    (they share the GPU when there is one); None: on CPU one 1-thread process per core (at most
    one per job; 1 for smoke, whose jobs are shorter than a process start), the faster layout on
    a 2-core CPU (``benchmarks/fit_speed.py layout``), else 1. ``models``: model names or ids to
    keep (the set-statistics rows always stay); ``cells``: cell-id glob patterns. Datasets are
    generated first, in this process, with ``data_workers`` processes (default: all cores; 1 for
    smoke), and cached.
    ``threads``: torch CPU threads per job; default ``max(1, cores // workers)``, but 1 for the
    smoke profile (its batches of 32 gain nothing from threads, and on a shared CPU two
    oversubscribed threads made a smoke job 15x slower: 59 s vs 3.8 s, measured).

    ``launcher``: "local" (this machine: ``workers`` processes) or "ray" / a
    ``mzlite.launchers.RayLauncher`` (each job a Ray task; results written here all the same).

    Returns ``{"done": [...], "skipped": [...], "failed": [...]}`` (result paths; failures as
    ``(path, error)``). A failed job does not stop the others; Ctrl-C stops the run and loses at
    most the epochs in flight (the next run resumes from the checkpoints)."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):  # fmt: skip
        raise ValueError(f"workers must be an int >= 1 or None, got {workers!r}")
    if launcher == "local":
        resolve_device(device)  # "cuda" without CUDA fails here, before any work
    else:  # the cluster's workers resolve the device; concurrency follows its resources
        from mzlite.launchers import get_launcher

        launcher = get_launcher(launcher)
        if workers not in (None, 1):
            raise ValueError("workers is the local launcher's; Ray runs as many jobs as fit")
        workers = 1
        if threads is None:  # one CPU per task: Ray packs tasks onto the cluster's cores
            threads = 1
    todo = jobs(table, profile, seeds, models, cells, results_dir, cache_dir, device)
    say = print if progress else (lambda *a, **k: None)
    skipped = [j for j in todo if is_done(j)]
    todo = [j for j in todo if j not in skipped]
    spec = get_table(table)
    say(f"{spec.label} [{get_profile(profile).name}]: {len(todo)} to run, {len(skipped)} done")
    # Data first, once per (task, options, sizes): workers then only load the cache.
    if data_workers is None:  # a process pool costs more than it saves on tiny data
        data_workers = 1 if get_profile(profile).name == "smoke" else None
    seen = set()
    for j in todo:
        key = (j.cell.task, json.dumps(j.cell.options, sort_keys=True), j.sizes)
        if key not in seen:
            seen.add(key)
            t = time.perf_counter()
            _splits(j, workers=data_workers)
            say(f"  data {j.cell.task} {j.cell.options} {j.sizes}: {time.perf_counter() - t:.1f} s")
    git = git_info()
    done, failed = [], []
    if workers is None:
        per_core = resolve_device(device).type == "cpu" and get_profile(profile).name != "smoke"
        workers = max(1, min(os.cpu_count() or 1, len(todo))) if per_core else 1
    if threads is None:
        smoke = get_profile(profile).name == "smoke"
        threads = 1 if smoke else max(1, (os.cpu_count() or 1) // workers)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    if launcher == "local":
        say(f"  {workers} worker process(es) x {threads} torch thread(s)")
    old_threads = torch.get_num_threads()
    if workers == 1:
        torch.set_num_threads(threads)
    try:
        if launcher == "local":
            _run_jobs(todo, git, workers, threads, done, failed, say)
        else:
            launcher.run(todo, git, threads, done, failed, say)
    finally:
        torch.set_num_threads(old_threads)
    return {"done": done, "skipped": [str(j.result_path) for j in skipped], "failed": failed}


def _run_jobs(todo, git, workers, threads, done, failed, say) -> None:
    n = len(todo)
    if workers == 1:
        for i, j in enumerate(todo, 1):
            try:
                s = _summary(run_job(j, git, progress=False))
            except KeyboardInterrupt:
                raise
            except Exception as e:
                s = {"error": f"{type(e).__name__}: {e}"}
                traceback.print_exc()
            (failed.append((str(j.result_path), s["error"])) if "error" in s else done.append(
                str(j.result_path)))  # fmt: skip
            say(f"  [{i}/{n}] {_fmt(j, s)}")
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        ctx = mp.get_context("spawn")  # no fork of a process that already runs torch threads
        ex = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init,
                                 initargs=(threads,))  # fmt: skip
        try:
            futs = {ex.submit(_worker, j, git): j for j in todo}
            for i, f in enumerate(as_completed(futs), 1):
                j, s = futs[f], f.result()
                if "error" in s:
                    failed.append((str(j.result_path), s["error"]))
                    say(s.get("trace", ""), file=sys.stderr)
                else:
                    done.append(str(j.result_path))
                say(f"  [{i}/{n}] {_fmt(j, s)}")
        except KeyboardInterrupt:
            ex.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            ex.shutdown(wait=True, cancel_futures=True)
