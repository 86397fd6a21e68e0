"""Where a table's (cell, seed) jobs run: this machine (``launcher="local"``, the default: the
process pool of :func:`mzlite.repro.experiments.run`) or a Ray cluster (``launcher="ray"`` or a
:class:`RayLauncher`; ``pip install "mzlite[ray]"``).

    ex.run("tab:meb", profile="full", device="cuda",
           launcher=RayLauncher(address="auto", gpus_per_job=0.25,     # four jobs per GPU
                                checkpoint_dir="/shared/mzlite-checkpoints"))
    python -m mzlite run tab:meb --profile full --device cuda --launcher ray --address auto \\
        --gpus-per-job 0.25 --checkpoint-dir /shared/mzlite-checkpoints

Every job is one Ray task; its result comes back to the driver, which writes it where the local
launcher does (workers need no shared disk). Each dataset is made once by the driver and
``ray.put`` once: generation with exact geometric targets can take minutes, and other library
builds could change low bits of the data, so every job trains on the driver's bytes and a
cluster run equals a local one. With ``checkpoint_dir`` (a path every node reaches) a job whose
worker dies is retried by Ray (``max_retries``, system failures only) and resumes anywhere;
without it only a retry on the same node resumes. A job that raises is reported in ``failed``
with its traceback, not retried. Ctrl-C cancels every pending task (checkpoints stay). Every
result records ``provenance.launcher``: ``ray``, the node, the epoch a retry resumed from.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from mzlite._io import atomic_write_json, json_safe
from mzlite.train import load_checkpoint
from mzlite.train.config import check_int_field

from .execute import job_dataset_keys, job_splits, progress_line, run_jobs
from .specs import default_cache_dir


def get_launcher(launcher):
    """``"ray"`` -> ``RayLauncher()``; a ``RayLauncher`` as it is ("local" has no object)."""
    if isinstance(launcher, RayLauncher) or launcher == "ray":
        return RayLauncher() if launcher == "ray" else launcher
    raise ValueError(f"launcher must be one of local, ray or a RayLauncher, got {launcher!r}")


def _run_remote(job, git: dict, splits, threads: int, local_checkpoint: bool) -> dict:
    """The body of one Ray task: train and evaluate ``job`` on ``splits``, return its result."""
    torch.set_num_threads(threads)
    if local_checkpoint:  # no shared path: this node's own cache
        job = replace(job, checkpoint_path=default_cache_dir() / job.checkpoint_path)
    resumed = 0  # the checkpoint's last finished epoch (provenance only: fit reports bad ones)
    with contextlib.suppress(Exception):
        resumed = int(load_checkpoint(job.checkpoint_path, map_location="cpu")["epoch"])
    (out,) = run_jobs([job], git, splits=splits, write=False)
    out["provenance"]["launcher"] = {"name": "ray", "node": socket.gethostname(),
                                     "resumed_from_epoch": resumed}  # fmt: skip
    if local_checkpoint:  # the driver cannot see it: the worker cleans up
        job.checkpoint_path.unlink(missing_ok=True)
    return out


@dataclass(frozen=True)
class RayLauncher:
    """Run jobs as Ray tasks (see the module docstring). ``address``: None starts a local Ray
    instance unless Ray is already initialised in this process; "auto" joins the cluster of
    ``ray start`` on this machine; "ray://HOST:10001" a remote one. ``cpus_per_job``: None uses
    the run's ``threads`` (1 unless given: one job per core). ``gpus_per_job``: None means 1 for
    device "cuda", for "auto" 1 when the cluster has GPUs, else 0; fractions (0.25) share a GPU.
    ``checkpoint_dir``: a path every node reaches. ``max_retries``: how often Ray re-runs a job
    whose worker or node died. ``runtime_env``: for ``ray.init`` (``{"working_dir": "."}`` ships
    this checkout to nodes that lack mzlite)."""

    address: str | None = None
    cpus_per_job: float | None = None
    gpus_per_job: float | None = None
    checkpoint_dir: str | Path | None = None
    max_retries: int = 3
    runtime_env: dict | None = None

    def __post_init__(self):
        for name in ("cpus_per_job", "gpus_per_job"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or v < 0):
                raise ValueError(f"{name} must be a number >= 0 or None, got {v!r}")
        if self.cpus_per_job == 0:
            raise ValueError("cpus_per_job must be > 0: a training job needs a CPU")
        check_int_field("max_retries", self.max_retries, 0)

    def run(self, todo, git, threads, done, failed, say) -> None:
        """Run ``todo``, filling ``done`` and ``failed`` and saying progress as the pool does."""
        if not todo:
            return
        try:
            import ray
        except ImportError as e:
            raise ImportError("launcher='ray' needs Ray: pip install \"mzlite[ray]\" (on the "
                              "driver and every node)") from e  # fmt: skip
        started = not ray.is_initialized()  # then this run starts it, and shuts it down
        if started:
            if self.address is None:  # a busy raylet can wait over its default 30 s (35 s seen)
                os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")
            ray.init(address=self.address, runtime_env=self.runtime_env, include_dashboard=False)
        try:
            pending = self._submit(ray, todo, git, threads, say)
            n = len(pending)
            try:
                while pending:
                    (ref,), _ = ray.wait(list(pending), num_returns=1)
                    job = pending.pop(ref)
                    line = self._collect(ray, ref, job, done, failed, say)
                    say(f"  [{n - len(pending)}/{n}] {line}")
            except KeyboardInterrupt:
                for ref in pending:
                    ray.cancel(ref, force=True)
                say(f"  ray: interrupted, {len(pending)} tasks cancelled; a rerun resumes them")
                raise
        finally:
            if started:
                ray.shutdown()

    def _submit(self, ray, todo, git, threads, say) -> dict:
        """One task per job, each dataset ``ray.put`` once; returns ``{task ref: job}``."""
        devices = {j.device for j in todo}
        if len(devices) != 1:
            raise ValueError(f"one device per run, got {sorted(devices)}")
        device, gpus = devices.pop(), self.gpus_per_job
        if gpus is None:
            has_gpus = device == "auto" and ray.cluster_resources().get("GPU", 0) > 0
            gpus = 1.0 if device == "cuda" or has_gpus else 0.0
        gpus = float(gpus)
        if device == "cuda" and gpus == 0:
            raise ValueError("device='cuda' with gpus_per_job=0: Ray hides the GPUs from a task "
                             "that asks for none; give gpus_per_job > 0 (e.g. 0.25 to share a GPU "
                             "between four jobs)")  # fmt: skip
        cpus = float(self.cpus_per_job if self.cpus_per_job is not None else threads)
        shared = self.checkpoint_dir is not None
        remote = ray.remote(_run_remote)
        data_refs, pending = {}, {}
        for job in todo:
            key = tuple(job_dataset_keys(job))
            if key not in data_refs:  # generated (or cached) by run() already: a load
                data_refs[key] = ray.put(job_splits(job))
            rel = job.checkpoint_path.relative_to(job.cache_dir)  # checkpoints/<profile>/...
            job = replace(job, checkpoint_path=Path(self.checkpoint_dir) / rel if shared else rel)
            ref = remote.options(
                num_cpus=cpus, num_gpus=gpus, max_retries=self.max_retries,
                retry_exceptions=False,  # a Python error is a bug to report, not to repeat
                name=f"mzlite:{job.cell.id}__seed{job.seed}",
            ).remote(job, git, data_refs[key], max(1, int(cpus)), not shared)  # fmt: skip
            pending[ref] = job
        where = f"in {self.checkpoint_dir}" if shared else "on each worker"
        say(f"  ray: {len(pending)} tasks, {cpus:g} CPU + {gpus:g} GPU each; checkpoints {where}")
        return pending

    def _collect(self, ray, ref, job, done, failed, say) -> str:
        """Write a finished task's result (or record its failure); returns its progress line."""
        try:
            out = ray.get(ref)
        except ray.exceptions.RayError as e:  # the task raised, or its retries ran out
            cause = getattr(e, "cause", None) or e
            err = f"{type(cause).__name__}: {cause}".strip().splitlines()[0]
            say(f"  {job.cell.id} seed {job.seed} failed, traceback from the worker:\n{e}")
            failed.append((str(job.result_path), err))
            return progress_line(job, error=err)
        atomic_write_json(job.result_path, json_safe(out))
        if self.checkpoint_dir is not None:
            job.checkpoint_path.unlink(missing_ok=True)
        done.append(str(job.result_path))
        return progress_line(job, out)
