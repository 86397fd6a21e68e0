"""Chapter 7 exercises ("Inside a trained layer"): every reference answer is computed from the
shipped checkpoint ``data/checkpoints/mz_tdof8_L8.pt`` and its test split, directly from
``model.inspect`` (not through ``mzlite.analysis``, which the solutions use). The checkpoint is
found beside the package (a checkout) or, for a student copy unzipped from the book's download,
in ``data/checkpoints`` of the working folder, as the chapter itself looks for it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from .._paths import data_root
from ..analysis import load_model_checkpoint
from ..tasks import derive_seed, make_task
from .checker import exercise, named_mistake, same_integer, same_number

CHECKPOINT_NAME = "mz_tdof8_L8.pt"


def checkpoint_path() -> Path:
    """The shipped checkpoint: in ``data_root()/checkpoints`` (the checkout's, or the unzipped
    student download's), else in ``data/checkpoints`` of the working folder or of its parent;
    FileNotFoundError names every place."""
    places = [data_root(), Path("data"), Path("..") / "data"]
    places = [folder / "checkpoints" for folder in places]
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
    model, info = load_model_checkpoint(checkpoint_path())
    data = info["data"]
    test = make_task(
        data["task"], data["n_test"], derive_seed(data["split_seed"], 2), **data["options"]
    )
    return model, test.x[:n_sets], test.mask[:n_sets]


def exercise_sets(seed: int = 0) -> tuple[tuple[int, int], int]:
    """``((a, b), head)`` of exercises ch7.relchange and ch7.flips for the notebook's ``seed``:
    the two test sets (of the first eight) and the head compared ((2, 3) at head 1 for seed
    0)."""
    if seed == 0:
        return EX_SETS, EX_HEAD
    g = np.random.default_rng([7, 1, seed])
    a, b = (int(i) for i in g.choice(8, size=2, replace=False))
    return (min(a, b), max(a, b)), int(g.integers(0, 2))


def _layer_details():
    model, x, mask = exercise_model_and_sets()
    det = model.inspect(x, mask)
    return model, det.layer(LAYER)


@exercise(
    "ch7.relchange",
    hint="||M(mu_a) - M(mu_b)||_F / ||M_c||_F at your head of the first layer, one number.",
    per_seed=True,
)
def _relchange(answer, seed):
    model, entry = _layer_details()
    (a, b), head = exercise_sets(seed)
    M = entry.operators[:, head].double()  # (N, dk, dk)
    M_c = model.enc[0].mab0.attn.M_c[head].detach().double()
    change = float(torch.sqrt(((M[a] - M[b]) ** 2).sum()))
    ref = change / float(torch.sqrt((M_c**2).sum()))
    if same_number(answer, ref, rtol=1e-4):
        return True, f"{ref:.4%} of ||M_c||_F"
    return False, named_mistake(
        answer,
        [
            (100 * ref, "a percentage: the fraction is asked for"),
            (change, "the change without dividing by ||M_c||_F"),
            (
                change / float(torch.sqrt((M[a] ** 2).sum())),
                "relative to ||M(mu_a)||_F: the question divides by ||M_c||_F",
            ),  # fmt: skip
        ],
        "not the relative change of those operators",
        rtol=1e-4,
    )


@exercise(
    "ch7.flips",
    hint="Compare the signs of the two gate vectors (B, H, L) at your head.",
    per_seed=True,
)
def _flips(answer, seed):
    _, entry = _layer_details()
    (a, b), head = exercise_sets(seed)
    g = entry.gates[:, head]
    ref = int((g[a] > 0).ne(g[b] > 0).sum())  # no gate is exactly 0 here (tanh of a float)
    if same_integer(answer, ref):
        return True, f"{ref} of {g.shape[-1]} gates flip sign"
    slips = [(g.shape[-1] - ref, "the gates that keep their sign: count those that change it")]
    return False, named_mistake(answer, slips, "not the number of flips", integer=True)


def rankbound_inputs(seed: int = 0) -> dict:
    """The head of exercise ch7.rankbound for the notebook's ``seed``: ``L`` generators, head
    dimension ``d_k`` and ``n_sets`` probe sets (``None``: as many as you like). Seed 0: the
    exercise model's head, probed without limit; else a head and a probe of the student's own."""
    if seed == 0:
        model, _ = _layer_details()
        return {"L": model.cfg.L, "d_k": model.cfg.d_model // model.cfg.n_heads, "n_sets": None}
    g = np.random.default_rng([7, 2, seed])
    n_sets = None if g.random() < 0.4 else int(g.integers(3, 41))
    return {"L": int(g.integers(2, 41)), "d_k": int(g.choice([2, 3, 4, 8, 16])), "n_sets": n_sets}


@exercise(
    "ch7.rankbound",
    hint="M(mu) - M_bar = sum_l (gamma_l - gamma_bar_l) M_l: how many matrices span that? In how "
    "many dimensions do the flattened d_k x d_k operators live? And what do n centred vectors sum "
    "to?",
    per_seed=True,
)
def _rankbound(answer, seed):
    head = rankbound_inputs(seed)
    L, d_k, n = head["L"], head["d_k"], head["n_sets"]
    # n centred operators sum to zero: at most n - 1 of them are independent
    bounds = {"L": L, "d_k^2": d_k * d_k, **({"n_sets - 1": n - 1} if n else {})}
    ref = min(bounds.values())
    if same_integer(answer, ref):
        return True, f"at most {ref}: the smallest of " + ", ".join(
            f"{k} = {v}" for k, v in bounds.items()
        )
    slips = [(v, f"{k}: a bound, but {k} is not the smallest") for k, v in bounds.items()]
    slips.append((d_k, "d_k: the rank of one operator; the stacked, flattened operators live in "
                  "d_k^2 dimensions"))  # fmt: skip
    slips.append((L + 1, "L + 1: centring removes M_c, leaving the span of M_1..M_L"))
    if n:
        slips.append(
            (n, "n_sets: the centred operators sum to zero, so one of them depends on the rest")
        )
    return False, named_mistake(
        answer,
        [(v, why) for v, why in slips if v != ref],
        "not the largest rank the centred operators can reach",
        integer=True,
    )
