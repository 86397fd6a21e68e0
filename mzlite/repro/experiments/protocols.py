"""How each protocol that decided a verdict differs from the paper's, read from the result files
and the registered cells (never typed): training sets, optimiser steps, rate and schedule, seeds
and hardware (``protocol_rows``: the landing page's protocol box and chapter 9), and the
glossary's names for the profiles (``READER_NAMES``)."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import asdict

from mzlite import nn as _nn
from mzlite.repro.paper import name_labels
from mzlite.train import TrainConfig

from .results import load_results
from .tables import table_registry

# where a result that records no GPU ran: the project's 2-core machines, whose CPU changed between
# sessions (results from 2026-11-30 on record it: provenance's cpu_name)
CPU = "2-core CPUs"

# The glossary's names for the profiles (book/glossary.md defines each term)
READER_NAMES = {
    "full": "the paper's protocol",
    "paper-sizes": "the paper's sizes",
    "paper-sizes-fg": "the paper's sizes, searched without Task B",
    "paper-sizes-censored": "the paper's sizes, censored search",
    "cpu-annealed": "the reduced CPU protocol",
    "cpu-converged": "the first converged CPU protocol (superseded)",
    "cpu": "the 30-epoch CPU protocol (superseded)",
    "smoke": "a pipeline check",
}
# The protocols a results page reads, the most trusted first (``results.PROFILE_ORDER``); the
# first reading (cpu-converged) and the 30-epoch cpu profile are ablations, shown only in toggles
CURRENT = ("full", "paper-sizes", "paper-sizes-fg", "paper-sizes-censored", "cpu-annealed")
# One dash and marker per protocol in the results chapters' figures (the paper's: dashed diamonds)
PROTOCOL_STYLES = {"paper": ("dash", "diamond"), "full": ("longdash", "star"),
                   "paper-sizes": ("dashdot", "triangle-up"),
                   "paper-sizes-fg": ("longdashdot", "square"),
                   "paper-sizes-censored": ("dot", "triangle-down"),
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


def _row(protocol, profile, sizes, steps: str, schedule: str, seeds, hardware: str, runs) -> dict:
    return {"protocol": protocol, "profile": profile, "training_sets": _span(sizes),
            "optimiser_steps": steps, "schedule": schedule, "hardware": hardware, "runs": runs,
            "seeds": _span(seeds, fmt=lambda n: f"{n:g}")}  # fmt: skip


def paper_row() -> dict:
    """The paper's protocol as registered: its trainable main cells' training sets
    (app:task-descriptions) and seeds, optimiser steps at the epoch cap and ``TrainConfig``'s
    defaults (app:impl's hyperparameter table)."""
    cfg = TrainConfig()
    cells = [c for spec in table_registry().values() for c in spec.cells
             if _nn.model_spec(c.model).trainable and c.part == "main"]  # fmt: skip
    steps = [cfg.epochs * math.ceil(c.sizes[0] / c.batch_size) for c in cells]
    schedule = _schedule_words([asdict(cfg)], f"cosine to 0 over {cfg.epochs} epochs")
    return _row("the paper", None, [c.sizes[0] for c in cells], f"up to {_span(steps)}", schedule,
                [c.full_seeds for c in cells], name_labels(PAPER_HARDWARE), None)  # fmt: skip


def _schedule_words(cfgs: list[dict], cosine: str = "cosine to 0 over the cap") -> str:
    kinds = " or ".join("halved after 5 epochs without a new best" if s == "plateau" else cosine
                        for s in sorted({c.get("schedule", "cosine") for c in cfgs}))  # fmt: skip
    warmups = "/".join(str(w) for w in sorted({c.get("warmup_epochs") for c in cfgs} - {None}))
    pats = "/".join(str(p) for p in sorted({c.get("patience") for c in cfgs} - {None}))
    rate = _span([c["lr"] for c in cfgs], fmt=rate_text)
    return f"AdamW {rate}, {warmups} warm-up epochs, {kinds}, patience {pats}"


def profile_row(profile: str, results_dir=None, read=None) -> dict | None:
    """What the trained results of ``profile`` ran under: those of the (table, cell) experiments
    ``read`` (the runs its verdicts read), else its main cells' (ablations vary the protocol on
    purpose) where it has any; None without any."""
    results = [r for spec in table_registry().values()
               for r in load_results(spec, profile, results_dir)
               if _nn.model_spec(r["model"]).trainable and r.get("train_config")]  # fmt: skip
    main = [r for r in results if r.get("part") == "main"] or results
    results = [r for r in results if (r["table"], r["cell"]) in read] if read else main
    if not results:
        return None
    steps = [r["epochs_run"] * math.ceil(r["sizes"][0] / r["train_config"]["batch_size"])
             for r in results]  # fmt: skip
    per_cell = Counter((r["table"], r["cell"]) for r in results)
    hardware = Counter((r.get("provenance") or {}).get("gpu_name") or CPU for r in results)
    return _row(reader_name(profile), profile, [r["sizes"][0] for r in results],
                f"median {_thousands(statistics.median(steps))} ({_span(steps)})",
                _schedule_words([r["train_config"] for r in results]), list(per_cell.values()),
                ", ".join(f"{name} ({n} runs)" for name, n in hardware.most_common()),
                len(results))  # fmt: skip


def protocol_rows(profiles, results_dir=None, read=None) -> list[dict]:
    """The paper's row, then a row per profile of ``profiles`` with trained results (``read``:
    {profile: the experiments its verdicts read}, ``profile_row``)."""
    rows = [profile_row(p, results_dir, (read or {}).get(p)) for p in profiles]  # unknown: raises
    return [paper_row(), *(row for row in rows if row is not None)]


COLUMNS = (("protocol", "Protocol"), ("training_sets", "Training sets"),
           ("optimiser_steps", "Optimiser steps"), ("schedule", "Learning rate and schedule"),
           ("seeds", "Seeds per cell"), ("hardware", "Hardware"))  # fmt: skip
