"""Chapter 7 exercises ("Inside a trained layer"): every reference answer is computed from the
shipped checkpoint ``data/checkpoints/mz_tdof8_L8.pt`` and its test split, directly from
``model.inspect`` (not through ``mzlite.analysis``, which the solutions use). The checkpoint is
found beside the package (a checkout) or, for a student copy unzipped from the book's download,
in ``data/checkpoints`` of the working folder, as the chapter itself looks for it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

from .._paths import REPO_ROOT
from ..tasks import derive_seed, make_task
from .checker import exercise, same_integer, same_number

CHECKPOINT_NAME = "mz_tdof8_L8.pt"
CHECKPOINT = REPO_ROOT / "data" / "checkpoints" / CHECKPOINT_NAME


def checkpoint_path() -> Path:
    """The shipped checkpoint: beside the package, else in ``data/checkpoints`` of the working
    folder or of its parent (an unzipped student copy); FileNotFoundError names every place."""
    places = [CHECKPOINT.parent, Path("data") / "checkpoints", Path("..") / "data" / "checkpoints"]
    for folder in places:
        if (folder / CHECKPOINT_NAME).is_file():
            return folder / CHECKPOINT_NAME
    raise FileNotFoundError(
        f"{CHECKPOINT_NAME} is in none of {[str(p) for p in places]}: run the chapter from the "
        "folder the student download unzips to, or from a checkout of the repository"
    )


LAYER = "enc0.inducing"
EX_SETS = (2, 3)  # ch7.relchange / ch7.flips compare test sets 2 and 3
EX_HEAD = 1  # ... at head 1


@lru_cache(maxsize=1)
def exercise_model_and_sets(n_sets: int = 8):
    """``(model, x, mask)``: the shipped L = 8 checkpoint (CPU, eval mode) and the first
    ``n_sets`` sets of the test split it was evaluated on."""
    from ..analysis import load_model_checkpoint

    model, info = load_model_checkpoint(checkpoint_path())
    data = info["data"]
    test = make_task(
        data["task"], data["n_test"], derive_seed(data["split_seed"], 2), **data["options"]
    )
    return model, test.x[:n_sets], test.mask[:n_sets]


def _layer_details():
    model, x, mask = exercise_model_and_sets()
    det = model.inspect(x, mask)
    return model, det.layer(LAYER)


@exercise(
    "ch7.relchange",
    hint="||M(mu_2) - M(mu_3)||_F / ||M_c||_F at head 1 of the first layer, one number.",
)
def _relchange(answer):
    model, entry = _layer_details()
    a, b = EX_SETS
    M = entry.operators[:, EX_HEAD].double()  # (N, dk, dk)
    M_c = model.enc[0].mab0.attn.M_c[EX_HEAD].detach().double()
    ref = float(torch.sqrt(((M[a] - M[b]) ** 2).sum()) / torch.sqrt((M_c**2).sum()))
    ok = same_number(answer, ref, rtol=1e-4)
    return ok, (f"{ref:.4%} of ||M_c||_F" if ok else "not the relative change of those operators")


@exercise("ch7.flips", hint="Compare the signs of the two gate vectors (B, H, L) at head 1.")
def _flips(answer):
    _, entry = _layer_details()
    a, b = EX_SETS
    g = entry.gates[:, EX_HEAD]
    ref = int((g[a] > 0).ne(g[b] > 0).sum())  # no gate is exactly 0 here (tanh of a float)
    ok = same_integer(answer, ref)
    return ok, (f"{ref} of {g.shape[-1]} gates flip sign" if ok else "not the number of flips")


@exercise(
    "ch7.rankbound",
    hint="M(mu) - M_bar = sum_l (gamma_l - gamma_bar_l) M_l: how many matrices span that?",
)
def _rankbound(answer):
    model, _ = _layer_details()
    ref = model.cfg.L
    ok = same_integer(answer, ref)
    return ok, (
        f"at most L = {ref}: every centred operator lies in span(M_1..M_L)"
        if ok
        else "not the largest rank the centred operators can reach"
    )
