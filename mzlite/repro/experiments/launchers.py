"""Where a table's (cell, seed) jobs run: this machine (``launcher="local"``, the default: the
process pool of :func:`mzlite.repro.experiments.run`) or a Ray cluster (``launcher="ray"`` or a
:class:`RayLauncher`; ``pip install "mzlite[ray]"``).

    from mzlite.repro import experiments as ex
    from mzlite.repro.experiments.launchers import RayLauncher
    ex.run("tab:meb", profile="full", launcher="ray")                  # a local Ray instance
    ex.run("tab:meb", profile="full", device="cuda",
           launcher=RayLauncher(address="auto", gpus_per_job=0.25,     # four jobs per GPU
                                checkpoint_dir="/shared/mzlite-checkpoints"))

    python -m mzlite run tab:meb --profile full --device cuda --launcher ray --address auto \\
        --gpus-per-job 0.25 --checkpoint-dir /shared/mzlite-checkpoints

What a cluster needs that the local pool did not, and how it is done here:

- Every (cell, seed) job is one Ray task asking for ``cpus_per_job`` CPUs (default: the run's
  torch threads per job) and ``gpus_per_job`` GPUs (fractions let several small jobs share one).
- Results come back to the driver, which writes them atomically exactly where the local launcher
  does (``<results>/<profile>/<table>/<cell>__seed<k>.json``): workers need no shared disk and
  never write a result themselves.
- Datasets are shipped through the object store, not regenerated on the workers: the driver
  generates (or loads from its cache) each (task, options, sizes) dataset once, as it does for
  the local launcher, and ``ray.put`` s it once; every job of that dataset gets a reference, and
  Ray copies it to a node at most once. Why: generation with exact geometric targets can take
  minutes, would be paid again on every node, and regenerating on machines with other library
  builds could change low bits of the data; shipped, every job trains on the driver's bytes,
  which is what makes a cluster run equal to a local one.
- Per-epoch checkpoints (``mzlite.train.fit`` resumes from them exactly) go to
  ``checkpoint_dir`` when one is configured: a path every node can reach (NFS, a mounted
  bucket). A job whose worker dies is retried by Ray (``max_retries``, system failures only)
  and resumes from its last epoch on whichever node runs it; the driver removes the checkpoint
  once it has written the result. Without ``checkpoint_dir`` a checkpoint lives in the worker's
  own cache directory (``$MZLITE_CACHE`` or the repository's ``data/cache`` on that node): a
  retry on the same node resumes, one elsewhere starts the job again.
- A job that raises (a bug, bad options) is not retried: its traceback is printed and it is
  reported in ``failed``; the other jobs go on. Ctrl-C cancels every pending task (their
  workers are killed, their checkpoints stay for the next run) and re-raises.
- Every result records where it ran (``provenance.launcher``: ``ray``, the node, and the epoch
  a retried job resumed from).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from mzlite._io import atomic_write_json, json_safe
from mzlite.train import load_checkpoint

from .execute import job_dataset_keys, job_splits, progress_line, result_summary, run_job
from .specs import default_cache_dir

__all__ = ["RayLauncher", "get_launcher"]

LAUNCHERS = ("local", "ray")


def get_launcher(launcher):
    """``"ray"`` -> ``RayLauncher()``; a launcher object is returned as it is. (``"local"`` is
    :func:`mzlite.repro.experiments.run`'s own pool and has no object.)"""
    if isinstance(launcher, RayLauncher):
        return launcher
    if launcher == "ray":
        return RayLauncher()
    raise ValueError(
        f"launcher must be one of {', '.join(LAUNCHERS)} or a RayLauncher, got {launcher!r}"
    )


def _ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            "launcher='ray' needs Ray: pip install \"mzlite[ray]\" (on the driver and every node)"
        ) from e
    return ray


def _resume_epoch(path: Path) -> int:
    """The last finished epoch of the checkpoint at ``path`` (0 when there is none)."""
    if not path.exists():
        return 0
    try:
        return int(load_checkpoint(path, map_location="cpu")["epoch"])
    except Exception:  # an unreadable checkpoint is fit's to report; this is only provenance
        return 0


def _run_remote(job, git: dict, splits, threads: int, local_checkpoint: bool) -> dict:
    """The body of one Ray task: train and evaluate ``job`` on ``splits``, return its result."""
    torch.set_num_threads(threads)
    if local_checkpoint:  # no shared path: this node's own cache
        job = replace(job, checkpoint_path=default_cache_dir() / job.checkpoint_path)
    resumed = _resume_epoch(job.checkpoint_path)
    out = run_job(job, git, splits=splits, write=False)
    out["provenance"]["launcher"] = {
        "name": "ray",
        "node": socket.gethostname(),
        "resumed_from_epoch": resumed,
    }
    if local_checkpoint:  # the driver cannot see it: the worker cleans up
        job.checkpoint_path.unlink(missing_ok=True)
    return out


@dataclass(frozen=True)
class RayLauncher:
    """Run jobs as Ray tasks (see the module docstring for what that involves).

    ``address``: None starts a local Ray instance (this machine's cores) unless Ray is already
    initialised in this process; "auto" joins the cluster started with ``ray start`` on this
    machine; "ray://HOST:10001" a remote one through Ray Client. ``cpus_per_job``: None uses the
    run's ``threads`` (1 unless given: Ray then packs one job per core). ``gpus_per_job``: None
    means 1 when ``device`` is "cuda", and for "auto" 1 when the cluster has GPUs, else 0;
    fractions (0.25) share a GPU. ``checkpoint_dir``: a path every node can reach, for per-epoch
    checkpoints that outlive a worker. ``max_retries``: how often Ray re-runs a job whose worker
    or node died. ``runtime_env``: passed to ``ray.init``
    (e.g. ``{"working_dir": "."}`` to ship this checkout to nodes that lack mzlite)."""

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
        if (
            isinstance(self.max_retries, bool)
            or not isinstance(self.max_retries, int)
            or (self.max_retries < 0)
        ):
            raise ValueError(f"max_retries must be an int >= 0, got {self.max_retries!r}")

    # -- the cluster ---------------------------------------------------------------------------
    def _connect(self, ray) -> bool:
        """Initialise Ray unless this process already has; True when we did (and shut down)."""
        if ray.is_initialized():
            return False
        if self.address is None:
            # Under load a raylet can wait longer than its default 30 s for its agents to start
            # (measured: 35 s on a busy 2-core machine); give a local instance time.
            os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")
        ray.init(address=self.address, runtime_env=self.runtime_env, include_dashboard=False)
        return True

    def _gpus(self, ray, device: str) -> float:
        if self.gpus_per_job is not None:
            gpus = float(self.gpus_per_job)
        elif device == "cuda":
            gpus = 1.0
        elif device == "auto":
            gpus = 1.0 if ray.cluster_resources().get("GPU", 0) > 0 else 0.0
        else:
            gpus = 0.0
        if device == "cuda" and gpus == 0:
            raise ValueError(
                "device='cuda' with gpus_per_job=0: Ray hides the GPUs from a task that asks for "
                "none; give gpus_per_job > 0 (e.g. 0.25 to share a GPU between four jobs)"
            )
        return gpus

    # -- running -------------------------------------------------------------------------------
    def run(self, todo, git, threads, done, failed, say) -> None:
        """Run ``todo`` (``mzlite.repro.experiments.Job`` s), appending finished result paths to
        ``done`` and ``(path, error)`` to ``failed``; ``say`` prints progress."""
        if not todo:
            return
        ray = _ray()
        started = self._connect(ray)
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
        gpus = self._gpus(ray, devices.pop())
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
                num_cpus=cpus,
                num_gpus=gpus,
                max_retries=self.max_retries,
                retry_exceptions=False,  # a Python error is a bug to report, not to repeat
                name=f"mzlite:{job.cell.id}__seed{job.seed}",
            ).remote(job, git, data_refs[key], max(1, int(cpus)), not shared)
            pending[ref] = job
        where = f"in {self.checkpoint_dir}" if shared else "on each worker"
        say(f"  ray: {len(pending)} tasks, {cpus:g} CPU + {gpus:g} GPU each; checkpoints {where}")
        return pending

    def _collect(self, ray, ref, job, done, failed, say) -> str:
        """Write a finished task's result where the local launcher would (or record its
        failure); returns the progress line."""
        try:
            out = ray.get(ref)
        except ray.exceptions.RayError as e:  # the task raised, or its retries ran out
            cause = getattr(e, "cause", None) or e
            err = f"{type(cause).__name__}: {cause}".strip().splitlines()[0]
            say(f"  {job.cell.id} seed {job.seed} failed, traceback from the worker:\n{e}")
            failed.append((str(job.result_path), err))
            return progress_line(job, {"error": err})
        atomic_write_json(job.result_path, json_safe(out))
        if self.checkpoint_dir is not None:
            job.checkpoint_path.unlink(missing_ok=True)
        done.append(str(job.result_path))
        return progress_line(job, result_summary(out))
