"""How each protocol that decided a verdict differs from the paper's, in numbers read from the
result files and the registered cells (never typed): training sets, optimiser steps, learning
rate and schedule, seeds and the hardware the runs actually used. The landing page's protocol
box (``findings.Findings.protocol_html``) and chapter 9 print it.

    from mzlite.repro.experiments.protocols import protocol_rows
    rows = protocol_rows(["cpu-annealed", "full"])   # the paper's row first, then each profile

Reader-facing names (``READER_NAMES``) are the glossary's terms for the profiles."""

from __future__ import annotations

import math
import statistics
from collections import Counter

from mzlite import nn as _nn
from mzlite.repro.paper import name_labels
from mzlite.train import TrainConfig

from .results import load_results
from .specs import PROFILES
from .tables import table_registry

# The glossary's names for the profiles (book/glossary.md defines each term)
READER_NAMES = {
    "full": "the paper's protocol",
    "paper-sizes": "the paper's sizes",
    "cpu-annealed": "the reduced CPU protocol",
    "cpu-converged": "the first converged CPU protocol (superseded)",
    "cpu": "the 30-epoch CPU protocol (superseded)",
    "smoke": "a pipeline check",
}
# The protocols a results page reads, the most trusted first: the paper's, its sizes, and our
# reading on a CPU. The first reading (cpu-converged) and the 30-epoch cpu profile are
# ablations, shown only in toggles.
CURRENT = ("full", "paper-sizes", "cpu-annealed")
# One dash and marker per protocol in the results chapters' figures (the paper's: dashed diamonds)
PROTOCOL_STYLES = {"paper": ("dash", "diamond"), "full": ("longdash", "star"),
                   "paper-sizes": ("dashdot", "triangle-up"),
                   "cpu-annealed": ("solid", "circle")}  # fmt: skip
# The paper's own words on its hardware (app:compute), quoted, not a number of ours
PAPER_HARDWARE = "a mix of consumer and datacentre GPUs (app:compute)"


def reader_name(profile: str) -> str:
    """The glossary's name of ``profile`` ("the reduced CPU protocol" for cpu-annealed)."""
    if profile not in READER_NAMES:
        raise ValueError(f"profile must be one of {sorted(READER_NAMES)}, got {profile!r}")
    return READER_NAMES[profile]


def _thousands(n: float) -> str:
    return f"{n / 1000:.3g}K" if n >= 1000 else f"{n:g}"


def rate_text(lr: float) -> str:
    """A learning rate as people write it: 1e-4, 3e-3."""
    mantissa, exp = f"{lr:.0e}".split("e")
    return f"{mantissa}e{int(exp)}"


def _span(values, fmt=_thousands) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if lo == hi else f"{fmt(lo)}-{fmt(hi)}"


def paper_row() -> dict:
    """The paper's protocol as mzlite registers it: the training-set sizes of every registered
    trainable cell (``Cell.sizes``, app:task-descriptions), its optimiser steps at the epoch cap,
    ``TrainConfig``'s defaults (app:impl's hyperparameter table) and the seeds it states."""
    cfg = TrainConfig()
    cells = [c for spec in table_registry().values() for c in spec.cells
             if _nn.model_spec(c.model).trainable and c.part == "main"]  # fmt: skip
    steps = [cfg.epochs * math.ceil(c.sizes[0] / c.batch_size) for c in cells]
    return {
        "protocol": "the paper",
        "profile": None,
        "training_sets": _span([c.sizes[0] for c in cells]),
        "optimiser_steps": f"up to {_span(steps)}",
        "schedule": f"AdamW {rate_text(cfg.lr)}, {cfg.warmup_epochs} warm-up epochs, cosine to 0 "
        f"over {cfg.epochs} epochs, patience {cfg.patience}",
        "seeds": _span([c.full_seeds for c in cells], fmt=lambda n: f"{n:g}"),
        "hardware": name_labels(PAPER_HARDWARE),  # "app:compute" as the paper prints it
        "runs": None,
    }


def _schedule_words(results: list[dict]) -> str:
    cfgs = [r["train_config"] for r in results]
    kinds = " or ".join(
        "halved after 5 epochs without a new best" if s == "plateau" else "cosine to 0 over the cap"
        for s in sorted({c.get("schedule", "cosine") for c in cfgs})
    )
    warmups = "/".join(str(w) for w in sorted({c.get("warmup_epochs") for c in cfgs} - {None}))
    pats = "/".join(str(p) for p in sorted({c.get("patience") for c in cfgs} - {None}))
    rate = _span([c["lr"] for c in cfgs], fmt=rate_text)
    return f"AdamW {rate}, {warmups} warm-up epochs, {kinds}, patience {pats}"


def profile_row(profile: str, results_dir=None) -> dict | None:
    """What the trained results of ``profile`` on disk ran under (its main cells', where it has
    any: the ablation cells vary the protocol on purpose), or None without any."""
    results = [r for spec in table_registry().values()
               for r in load_results(spec, profile, results_dir)
               if _nn.model_spec(r["model"]).trainable and r.get("train_config")]  # fmt: skip
    results = [r for r in results if r.get("part") == "main"] or results
    if not results:
        return None
    steps = [r["epochs_run"] * math.ceil(r["sizes"][0] / r["train_config"]["batch_size"])
             for r in results]  # fmt: skip
    per_cell = Counter((r["table"], r["cell"]) for r in results)
    hardware = Counter(
        (r.get("provenance") or {}).get("gpu_name") or "this 2-core CPU" for r in results
    )
    return {
        "protocol": reader_name(profile),
        "profile": profile,
        "training_sets": _span([r["sizes"][0] for r in results]),
        "optimiser_steps": f"median {_thousands(statistics.median(steps))} ({_span(steps)})",
        "schedule": _schedule_words(results),
        "seeds": _span(list(per_cell.values()), fmt=lambda n: f"{n:g}"),
        "hardware": ", ".join(f"{name} ({n} runs)" for name, n in hardware.most_common()),
        "runs": len(results),
    }


def protocol_rows(profiles, results_dir=None) -> list[dict]:
    """The paper's row, then one row per profile of ``profiles`` with trained results on disk
    (unknown profiles raise, listing the valid ones)."""
    unknown = [p for p in profiles if p not in PROFILES]
    if unknown:
        raise ValueError(f"unknown profile {unknown[0]!r}; valid profiles: {', '.join(PROFILES)}")
    rows = [profile_row(p, results_dir) for p in profiles]
    return [paper_row(), *(row for row in rows if row is not None)]


COLUMNS = (
    ("protocol", "Protocol"),
    ("training_sets", "Training sets"),
    ("optimiser_steps", "Optimiser steps"),
    ("schedule", "Learning rate and schedule"),
    ("seeds", "Seeds per cell"),
    ("hardware", "Hardware"),
)
