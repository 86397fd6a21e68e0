"""Checkpoint files: written atomically, read with ``weights_only=True``; the RNG state a resumed
run continues from, and the check that a checkpoint belongs to the run resuming it."""

from __future__ import annotations

import io
from pathlib import Path

import torch

from mzlite._io import atomic_write_bytes

CHECKPOINT_FORMAT = "mzlite.train/1"


# Fields that may differ when a run is resumed: they change where it runs, not what it computes.
_RESUME_FREE = ("device", "num_threads")


def save_checkpoint(path, state: dict) -> Path:
    """``torch.save`` into memory, then an atomic write (temp file + rename): an interrupted save
    leaves the previous checkpoint intact. ``state`` must hold only tensors, dicts, lists,
    numbers and strings, so it loads with ``weights_only=True``."""
    buf = io.BytesIO()
    torch.save(state, buf)
    return atomic_write_bytes(path, buf.getvalue())


def load_checkpoint(path, map_location=None) -> dict:
    """Load a checkpoint written by ``fit`` with ``torch.load(..., weights_only=True)``."""
    return torch.load(path, map_location=map_location, weights_only=True)


def rng_state() -> dict:
    s = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        s["cuda"] = torch.cuda.get_rng_state_all()
    return s


def set_rng_state(s: dict) -> None:
    torch.set_rng_state(s["torch"].cpu())
    if "cuda" in s and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([t.cpu() for t in s["cuda"]])


# what a checkpoint written before these fields existed was trained with
_LEGACY_CONFIG = {"schedule": "cosine", "decay_patience": 5, "decay_factor": 0.5}


def check_resume(ckpt: dict, run_config: dict, stats) -> None:
    if ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint format {ckpt.get('format')!r} is not {CHECKPOINT_FORMAT!r}")
    old, new = {**_LEGACY_CONFIG, **ckpt["config"]}, run_config
    diff = sorted(k for k in new if k not in _RESUME_FREE and old.get(k) != new[k])
    if diff:
        detail = ", ".join(f"{k}: {old.get(k)!r} -> {new[k]!r}" for k in diff)
        raise ValueError(
            f"checkpoint_path holds a run with a different config ({detail}); use a new path "
            "or delete the old checkpoint"
        )
    old_stats = ckpt.get("target_stats")
    same = (old_stats is None) == (stats is None) and (
        stats is None
        or all(
            a.shape == b.shape and torch.allclose(a.cpu(), b.cpu())
            for a, b in zip(old_stats, stats, strict=True)
        )
    )
    if not same:
        raise ValueError(
            "checkpoint_path holds a run trained on different targets (train.y mean/std differ)"
        )
