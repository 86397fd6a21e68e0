"""Chapter 4's study: what a training step costs, the profiles a table runs under, and the
depth-separation test of tab:tdof-verify read from the result files.

Every function returns data (dicts, numbers, series for ``mzlite.viz``); the chapter renders
them. What a training step costs is timed with ``mzlite.timing.median_time``, which hands the
repeating to ``torch.utils.benchmark.Timer`` (warm-up, blocks sized to the clock, the median),
in interleaved rounds so that a slowdown of a shared machine hits every model alike.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from mzlite.timing import median_time

from . import experiments as ex
from .experiments import narrate
from .experiments.protocols import CURRENT, PROTOCOL_STYLES
from .experiments.report import report
from .paper import load_paper_table, paper_value

__all__ = [
    "LABEL", "EXAMPLE_CELL", "CURRENT", "run_by_papermill", "profile_rows", "forward_call",
    "train_step_call", "step_costs", "forward_flops", "paper_cost_ratios", "paper_rows",
    "sweep_series", "main_gaps", "gap_readings",
]  # fmt: skip

LABEL = "tab:tdof-verify"
EXAMPLE_CELL = "L8-mz_1l"  # the cell the chapter trains and whose profiles it tabulates
# One colour per model (by its cells' suffix); one dash and marker per protocol (PROTOCOL_STYLES)
MODEL_COLOURS = {"mz_1l": "#1f77b4", "st_4l": "#d62728", ex.SET_STATS: "#7f7f7f"}


# Set by the book's executor (book/_scripts/execute_notebooks.py) for every chapter's kernel.
BOOK_EXECUTION_ENV = "MZLITE_BOOK_EXECUTION"


def run_by_papermill() -> bool:
    """Whether this process (a notebook's kernel) runs a chapter for the rendered book: the
    book's executor (``book/_scripts/execute_notebooks.py``) sets ``MZLITE_BOOK_EXECUTION=1``
    in its kernels' environment; elsewhere, whether the parent process's command line names
    papermill or that script (read from ``/proc``; where there is none, False). A chapter shows
    progress bars only when this is False, in a live kernel, so the rendered book holds no
    frozen bar."""
    if os.environ.get(BOOK_EXECUTION_ENV) == "1":
        return True
    try:
        cmdline = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
    except OSError:
        return False
    words = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return "papermill" in words or "execute_notebooks" in words


def profile_rows(label=LABEL, cell: str = EXAMPLE_CELL) -> list[dict]:
    """One row per profile for one cell of ``label``: ``profile``, ``sizes`` (train, val,
    test), ``batch``, ``steps_per_epoch`` (the last, smaller batch counts), ``epochs`` (the
    cap), ``warmup`` (epochs), ``patience`` (None: no early stopping), ``lr``, ``seeds`` and
    ``about`` (the profile's description)."""
    rows = []
    for name, prof in ex.PROFILES.items():
        job = ex.job(label, cell, name)  # seed 0 of that cell under the profile
        c = job.train_config()
        rows.append({
            "profile": name, "sizes": tuple(job.sizes), "batch": c.batch_size,
            "steps_per_epoch": math.ceil(job.sizes[0] / c.batch_size), "epochs": c.epochs,
            "warmup": c.warmup_epochs, "patience": c.patience, "lr": c.lr,
            "seeds": len(ex.jobs(label, name, cells=[cell])), "about": prof.description,
        })  # fmt: skip
    return rows


def forward_call(model: nn.Module, x: torch.Tensor, mask: torch.Tensor) -> Callable[[], object]:
    """A call of ``model``'s forward pass on one batch in eval mode, without gradients."""

    def call():
        model.eval()
        with torch.no_grad():
            return model(x, mask)

    return call


def train_step_call(
    model: nn.Module,
    optimiser: torch.optim.Optimizer,
    x: torch.Tensor,
    mask: torch.Tensor,
    y: torch.Tensor,
    amp: bool = False,
) -> Callable[[], object]:
    """A call of one training step as ``fit`` takes it: forward (under bf16 autocast when
    ``amp``), MSE loss in float32, backward, clipping to norm 1, the optimiser's step."""

    def call():
        model.train()
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
            pred = model(x, mask)
        loss = nn.functional.mse_loss(pred.float(), y)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()

    return call


PHASES = ("forward", "train step")


def step_costs(
    models: dict[str, nn.Module],
    x: torch.Tensor,
    mask: torch.Tensor,
    y: torch.Tensor,
    *,
    rounds: int = 3,
    min_run_time: float = 0.05,
    bf16: bool | None = None,
) -> dict[str, dict[str, float]]:
    """Median seconds of a forward pass and of a training step (AdamW at the paper's rate) of
    each model on one batch: ``{name: {"forward": s, "train step": s}}``. Each of ``rounds``
    rounds times every (model, phase) with ``median_time`` (``torch.utils.benchmark.Timer``,
    at least ``min_run_time`` seconds each), models interleaved; the result is the median over
    rounds. ``bf16`` (default: on CUDA) adds a "<name> (bf16)" row per model, its training step
    under bf16 autocast."""
    if not isinstance(models, dict) or not models:
        raise ValueError("models must be a non-empty dict {name: model}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an int >= 1, got {rounds!r}")
    device = x.device
    if bf16 is None:
        bf16 = device.type == "cuda"
    variants = [(k, m, False) for k, m in models.items()]
    if bf16:
        variants += [(f"{k} (bf16)", m, True) for k, m in models.items()]
    calls = {}
    for name, m, amp in variants:
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=1e-5)
        calls[name] = {"forward": forward_call(m, x, mask),
                       "train step": train_step_call(m, opt, x, mask, y, amp)}  # fmt: skip
    times = {name: {p: [] for p in PHASES} for name in calls}
    for _ in range(rounds):
        for name, phases in calls.items():
            for p, fn in phases.items():
                times[name][p].append(median_time(fn, device, min_run_time=min_run_time))
    return {name: {p: statistics.median(v) for p, v in d.items()} for name, d in times.items()}


def forward_flops(model: nn.Module, x: torch.Tensor, mask: torch.Tensor) -> int:
    """Floating-point operations of one forward pass of ``model`` on one batch, counted by
    ``torch.utils.flop_counter`` (matrix products: 2 per multiply-add)."""
    model.eval()  # grad stays on: under no_grad torch's module tracker asserts on these models
    with FlopCounterMode(display=False) as counter:
        model(x, mask)
    return int(counter.get_total_flops())


def paper_cost_ratios(size: str = "Small") -> dict:
    """The paper's cost ratios of MZAttn to the standard model (tab:cost) for the model size
    whose row starts with ``size``: ``{"row": its name, "ratios": {column: value}}``."""
    cost = load_paper_table("tab:cost")
    rows = [r["row"] for r in cost["rows"]]
    row = next((r for r in rows if r.startswith(size)), None)
    if row is None:
        raise ValueError(f"size must start one of tab:cost's rows {rows}, got {size!r}")
    return {"row": row, "ratios": {c: paper_value("tab:cost", row, c) for c in cost["columns"]}}


def paper_rows(label=LABEL) -> list[dict]:
    """The paper's table as printed, one dict per row: ``row`` and, per column, ``{"mean",
    "std", "unit"}`` (std None where the paper prints none, unit "" or its suffix)."""
    paper = load_paper_table(label)
    return [
        {"row": r["row"],
         **{c: {"mean": r["cells"][c]["mean"], "std": r["cells"][c].get("std"),
                "unit": r["cells"][c].get("unit", "")} for c in paper["columns"]}}
        for r in paper["rows"]
    ]  # fmt: skip


def _model_cells(key: str) -> dict[int, str]:
    """{L: cell id} of the main cells ``L{L}-{key}`` (``key``: "mz_1l", "st_4l", "set_stats")."""
    spec = ex.get_table(LABEL)
    return {int(c.options["L"]): c.id for c in spec.cells
            if c.part == "main" and c.id == f"L{c.options['L']}-{key}"}  # fmt: skip


def sweep_series(profiles=CURRENT, results_dir=None) -> dict:
    """Test R^2 against L for the 1-layer MZ, the 4-layer standard model and the set-statistics
    ridge, as ``mzlite.viz.plot_sweep`` takes them: ``{name: (Ls, values, style)}``, the
    paper's (with its std as error bars) and ours under each of ``profiles`` that has results
    (mean, std over seeds as error bars; None where a cell has none). One colour per model,
    one dash and marker per protocol."""
    spec = ex.get_table(LABEL)
    series = {}
    for model, colour in MODEL_COLOURS.items():
        cells = _model_cells(model)
        Ls = sorted(cells)
        row = spec.cell(cells[Ls[0]]).row
        if spec.cell(cells[Ls[0]]).paper:
            ref = spec.cell(cells[Ls[0]]).paper[0]
            by_L = {int(r["row"]): r[ref.column] for r in paper_rows()}
            dash, symbol = PROTOCOL_STYLES["paper"]
            series[f"{row}, paper"] = (
                Ls, [by_L[L]["mean"] for L in Ls],
                {"dash": dash, "symbol": symbol, "color": colour,
                 "error": [by_L[L]["std"] for L in Ls]},
            )  # fmt: skip
        for prof in profiles:
            name = ex.get_profile(prof).name
            rows = report(LABEL, name, results_dir).by_cell(None, "r2")
            got = [rows.get(cells[L]) for L in Ls]
            ran = [r if r and r["seeds"] and not r.get("mixed") else None for r in got]
            if not any(ran):
                continue
            dash, symbol = PROTOCOL_STYLES.get(name, ("dot", "x"))
            series[f"{row}, ours ({name})"] = (
                Ls, [r["ours_mean"] if r else None for r in ran],
                {"dash": dash, "symbol": symbol, "color": colour,
                 "error": [r["ours_std"] if r else None for r in ran]},
            )  # fmt: skip
    return series


def main_gaps(profiles=CURRENT, results_dir=None) -> list[narrate.Gap]:
    """MZ-1L against ST-4L at every L with results of both under one of ``profiles`` (the most
    trusted first; ``narrate.tdof_gaps``), the main cells only: Welch's test over seeds."""
    gaps = narrate.tdof_gaps(profiles=profiles, results_dir=results_dir)
    return [g for g in gaps if g.variant == "MZAttn-1L"]


def gap_readings(gaps: list[narrate.Gap]) -> dict[str, list[int]]:
    """``{reading: [L, ...]}``: which L each reading of the test over seeds ("ST-4L fits
    better", "MZ-1L fits better", "no significant difference", ...) holds at, in L order."""
    out: dict[str, list[int]] = {}
    for g in sorted(gaps, key=lambda g: g.L):
        out.setdefault(g.reading, []).append(g.L)
    return out
