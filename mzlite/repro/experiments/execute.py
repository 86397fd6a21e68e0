"""One job of a table run: its data, its model, training it with provenance, its result JSON
(written atomically), whether a rerun may skip it, and its progress lines. Every launcher
(``runner.run``'s local pool, ``launchers.RayLauncher``) runs jobs through these functions."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
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
from mzlite.nn import config_dict, match_width
from mzlite.repro.experiments import stats as _stats
from mzlite.tasks import derive_seed
from mzlite.train import evaluate, fit, fit_stacked, resolve_amp, seed_everything

from .jobs import Job, protocol
from .specs import RESULT_FORMAT, Cell, check_task_options, task_options_diff, train_config_diff
from .uncertainty_study import job_metrics


def _git(*args) -> str | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # read only: never touch the index
    try:
        r = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=20, env=env)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def git_info() -> dict:
    """``{"commit": HEAD, "dirty": bool}`` (None when not a git checkout). A copy sent to another
    machine records ``MZLITE_GIT_COMMIT``, ``dirty`` None: a ``.git`` that travelled with the copy
    can be older than the files sent (seen on the device machine)."""
    named = os.environ.get("MZLITE_GIT_COMMIT")
    head = None if named else _git("rev-parse", "HEAD")
    if head is None:
        return {"commit": named or None, "dirty": None}
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": head.strip(), "dirty": None if status is None else bool(status.strip())}


def provenance(device: torch.device, git: dict | None = None) -> dict:
    """Where and with what a result was computed."""
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    git = git or {}
    return {
        "device": str(device), "gpu_name": gpu, "cpu_name": _nn.fused.cpu_model(),
        "cpu_count": os.cpu_count(), "num_threads": torch.get_num_threads(),
        # the fused CPU kernels change dropout masks and the learned tokens' precision; loaded(),
        # not available(): a job without MZ blocks must not compile the kernel to fill this in
        "fused_cpu_kernels": device.type == "cpu" and _nn.fused.loaded(),
        "torch": torch.__version__, "mzlite": mzlite.__version__,
        "python": platform.python_version(), "platform": platform.platform(),
        "git_commit": git.get("commit"), "git_dirty": git.get("dirty"),
        "hostname": socket.gethostname(),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }  # fmt: skip


def job_splits(job: Job, workers: int | None = 1):
    """The job's (train, val, test) ``SetData``, generated once, then read from the dataset cache
    (every model and seed of a table setting trains on the same sets)."""
    cache, cell, seed = job.cache_dir / "datasets", job.cell, job.profile.data_seed
    return _tasks.make_splits(cell.task, *job.sizes, seed, cache=True, cache_dir=cache,
                              **cell.options, workers=workers)  # fmt: skip


def job_dataset_keys(job: Job) -> list[str]:
    """The dataset-cache keys of the job's three splits: the same keys mean the same sets."""
    seeds = [derive_seed(job.profile.data_seed, i) for i in range(3)]
    cache_dir, cell = job.cache_dir / "datasets", job.cell
    return [_tasks.cache_path(cell.task, n, seed, cache_dir, **cell.options).stem
            for n, seed in zip(job.sizes, seeds, strict=True)]  # fmt: skip


@cache
def _matched_kwargs(name: str, d_in: int, d_out: int, target: int, fixed: tuple) -> dict:
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
    return {"table": job.table, "cell": job.cell.id, "seed": job.seed, "profile": job.profile.name,
            "task": job.cell.task, "model": job.cell.model, "sizes": list(job.sizes)}  # fmt: skip


def is_done(job: Job) -> bool:
    """True when ``job`` has a readable result (a missing or unreadable one a rerun recomputes); a
    result of another setup (sizes, model, profile, training: a rate changed since) at its path
    raises, so results never silently mix."""
    try:
        res = json.loads(job.result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if res.get("format") != RESULT_FORMAT:
        return False
    diff = {k: (res.get(k), v) for k, v in _expected(job).items() if res.get(k) != v}
    if res.get("task") == job.cell.task:  # a result of another reading is another experiment
        diff.update(task_options_diff(res, job.cell))
    old_cfg = res.get("train_config")
    if old_cfg and _nn.model_spec(job.cell.model).trainable:
        cfg = job.train_config()
        # precision: what the run used (amp=None resolved per machine, in the history) against
        # what this job would use here; an explicit device needs no CUDA (a cluster's driver)
        where = resolve_device("auto") if job.device == "auto" else torch.device(job.device)
        today = {**cfg.to_dict(), "amp": resolve_amp(cfg.amp, where)}
        diff.update(train_config_diff({**old_cfg, "amp": result_amp(res)}, today))
    if diff:
        raise ValueError(f"{job.result_path} holds a different experiment ({diff}); use another "
                         "results_dir or delete it")  # fmt: skip
    return True


def result_amp(result: dict) -> bool | None:
    """A result's precision, bf16 autocast (True) or float32 (False), as its history (``amp=None``
    resolved where it ran), else its ``train_config``, says; None for neither (closed form)."""
    for cfg in ((result.get("history") or {}).get("config"), result.get("train_config")):
        if (cfg or {}).get("amp") is not None:
            return bool(cfg["amp"])
    return None


EPOCH_LINE_EVERY_S = 30.0  # a long job says where it is about twice a minute, a short one once


def epoch_lines(job: Job, every_s: float = EPOCH_LINE_EVERY_S, file=None, clock=time.monotonic):
    """A ``fit`` callback that prints ``"<cell> seed <s>: epoch e/E, train loss ..., val loss ..."``
    to ``file`` (stderr: the parent's stdout carries the finished jobs' lines) after the first
    epoch, the first that ends ``every_s`` seconds or more after the last line, and the last."""
    last, cap = [None], job.train_config().epochs

    def line(epoch: int, hist, model) -> bool:
        now = clock()
        if last[0] is None or now - last[0] >= every_s or epoch == cap:
            last[0] = now
            r2 = (hist.val_metrics[-1] or {}).get("r2") if hist.val_metrics else None
            print(f"    {job.cell.id} seed {job.seed}: epoch {epoch}/{cap}, train loss "
                  f"{hist.train_loss[-1]:.4g}, val loss {hist.val_loss[-1]:.4g}"
                  + ("" if r2 is None else f", val R^2 {r2:.3f}"),
                  file=sys.stderr if file is None else file, flush=True)  # fmt: skip
        return False  # it only reports: never stops training

    return line


def run_jobs(group: list[Job], git: dict | None = None, *, splits=None, write: bool = True,
             epoch_every_s: float | None = EPOCH_LINE_EVERY_S,
             graph: bool = False) -> list[dict]:  # fmt: skip
    """Train and evaluate the jobs of ``group`` and write each result JSON, resuming from the
    checkpoint and removing it once written (``write=False``: neither). A group is one job, or one
    cell's seeds trained as one stacked model (``fit_stacked``; results record ``trained_stacked:
    K``). ``graph``: the stack's step as a CUDA graph (``cuda_graph: true``); a lone trainable seed
    then trains as a stack of one unless it resumes an unstacked checkpoint of its own.
    ``splits``: the jobs' data when the caller has them (a cluster worker gets the driver's)."""
    if not group:
        raise ValueError("group must hold at least one job, got none")
    first = group[0]
    for j in group[1:]:
        if _setting(j) != _setting(first):
            raise ValueError(f"a stack holds the seeds of one cell: {j.cell.id} seed {j.seed} is "
                             f"not {first.cell.id} under {first.profile.name}")  # fmt: skip
    device = resolve_device(first.device)
    tr, va, te = splits = splits if splits is not None else job_splits(first)
    t0 = time.perf_counter()
    spec = _nn.model_spec(first.cell.model)
    if not spec.trainable and len(group) > 1:
        raise ValueError(f"model {first.cell.model!r} is fitted in closed form: nothing to stack")
    if not spec.trainable:
        return [_result(first, git, device, t0, splits, fitted=spec.fit(tr, te), write=write)]
    stacked = len(group) > 1 or (graph and not first.checkpoint_path.exists())
    models = [build_cell_model(j.cell, tr.d_in, tr.d_out, j.seed, device) for j in group]
    configs = [j.train_config() for j in group]
    path = stack_checkpoint_path(group) if stacked else first.checkpoint_path
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [] if epoch_every_s is None else [epoch_lines(j, epoch_every_s) for j in group]
    if stacked:

        def on_epoch(epoch, histories):
            for line, hist, model in zip(lines, histories, models, strict=False):
                if hist is not None:  # a seed that stopped early says nothing more
                    line(epoch, hist, model)

        hists = fit_stacked(models, tr, va, configs, checkpoint_path=path, progress=False,
                            on_epoch=on_epoch, graph=graph)  # fmt: skip
    else:
        hists = [fit(models[0], tr, va, configs[0], checkpoint_path=path, progress=False,
                     callbacks=lines)]  # fmt: skip
    out = [
        _result(j, git, device, t0, splits, trained=(m, h, cfg), stack=stacked and len(group),
                graph=stacked and graph, write=write)
        for j, m, h, cfg in zip(group, models, hists, configs, strict=True)
    ]  # fmt: skip
    if write and stacked:
        path.unlink(missing_ok=True)
    return out


def _setting(job: Job) -> tuple:  # what the jobs of one stack share
    return job.table, job.cell.id, job.profile.name, job.sizes


def _result(job, git, device, t0, splits, *, fitted=None, trained=None, stack=0, graph=False,
            write=True) -> dict:  # fmt: skip
    """The result of ``job`` from its closed-form ``fitted`` or its ``trained`` (model, history,
    config), written to its path unless ``write`` is False."""
    cell = job.cell
    out = {"format": RESULT_FORMAT, **_expected(job), "row": cell.row, "column": cell.column,
           "part": cell.part, "task_options": check_task_options(cell.task, cell.options),
           "task_reading": _tasks.task_reading(cell.task, cell.options),
           "data_seed": job.profile.data_seed, "dataset_keys": job_dataset_keys(job),
           "data_code_version": _tasks.CODE_VERSION,
           "model_kwargs": dict(cell.model_kwargs)}  # fmt: skip
    if fitted is not None:
        metrics = {"test": fitted["test"], "best_epoch": None}
        out.update(metrics=metrics, model_config=fitted["model_config"], params=fitted["params"])
        out.update(train_config=None, epochs_run=0, stop_reason="closed_form", history=None)
    else:
        model, hist, cfg = trained
        test = evaluate(model, splits[2], cfg, target_stats=hist if cfg.normalize_targets else None)
        unc = job_metrics(job, model, splits, cfg, build_cell_model)
        if unc:
            test, out["uncertainty"] = {**test, **unc["metrics"]}, unc["detail"]
        best = hist.best_epoch
        val_best = hist.val_metrics[best - 1] if best else None
        out.update(metrics={"test": test, "val_best": val_best, "best_epoch": best})
        params = sum(p.numel() for p in model.parameters())
        out.update(model_config=config_dict(model), params=params)
        out.update(train_config=cfg.to_dict(), epochs_run=hist.epochs_run)
        out.update(stop_reason=hist.stop_reason, history=hist.to_dict())
    out["convergence"] = _stats.convergence(out["history"])
    out["converged"] = out["convergence"]["converged"]
    out["protocol"] = protocol(job)
    if stack:  # one vectorised run of K models (mzlite.train.fit_stacked)
        out["protocol"]["trained_stacked"] = stack
        if graph:
            out["protocol"]["cuda_graph"] = True
    hist_dict = out["history"]
    out["wall_time_s"] = hist_dict["wall_time_s"] if hist_dict else time.perf_counter() - t0
    out["provenance"] = provenance(device, git)
    if write:
        atomic_write_json(job.result_path, json_safe(out))
        job.checkpoint_path.unlink(missing_ok=True)
    return out


def stack_checkpoint_path(group: list[Job]) -> Path:
    """One checkpoint for a stack of one cell's seeds, beside the jobs' own and named by the cell
    as theirs are: the stacks of a table's cells train side by side in one folder."""
    seeds = "-".join(str(j.seed) for j in group)
    return group[0].checkpoint_path.with_name(f"{group[0].cell.id}__stack-s{seeds}.pt")


def progress_line(job: Job, res: dict | None = None, error: str | None = None) -> str:
    """One line for a finished job from its result, or for its ``error``."""
    if error is not None:
        return f"{job.cell.id} seed {job.seed}: FAILED {error}"
    r2 = res["metrics"]["test"].get("r2")
    r2, wall = "nan" if r2 is None else f"{r2:.3f}", res["wall_time_s"]
    return f"{job.cell.id} seed {job.seed}: R^2 {r2}, {res['epochs_run']} epochs, {wall:.1f} s"
