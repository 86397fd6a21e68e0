"""Chapter 2 exercises ("The relational bottleneck"): every reference answer is computed with
mzlite (``mzlite.nn``, ``mzlite.analysis.tdof``); only the exercise's inputs are typed here, and the
notebook builds the same inputs with the functions below."""

from __future__ import annotations

import torch

from ..analysis.tdof import mahalanobis_operator, random_sets, span_tdof
from ..nn import MultiheadAttention, theorem3_layer
from .checker import exercise

# ch2.extrapolate: a standard attention pooling layer (d = 3, one head, seed 7) on constant sets.
EX_D, EX_LAYER_SEED, EX_T = 3, 7, -1.5
EX_X = [1.0, -0.5, 2.0]  # S_t = {t x, t x, t x, t x}
# ch2.tdof: the Mahalanobis operator in this dimension.
EX_TDOF_D = 5
# ch2.theorem3: f_A on this set for this A.
EX_A = [[0.0, 1.0], [-1.0, 0.5]]
EX_SET = [[0.5, 1.0], [1.5, -1.0], [1.0, 3.0]]


def exercise_layer(seed: int = 0) -> tuple[MultiheadAttention, torch.Tensor]:
    """The layer and its query (PMA seed) of ch2.extrapolate, float64, the same weights for the
    same notebook ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(EX_LAYER_SEED + 1_000_003 * seed)
        layer = MultiheadAttention(EX_D, n_heads=1).double()
        query = torch.randn(1, 1, EX_D, dtype=torch.float64)
    return layer, query


def constant_set(t: float, n: int = 4) -> torch.Tensor:
    """``S_t = {t x, ..., t x}`` as a batch of one set (1, n, d)."""
    return (t * torch.tensor(EX_X, dtype=torch.float64)).expand(1, n, EX_D)


def _vector(answer, d: int) -> torch.Tensor:
    a = torch.as_tensor(answer, dtype=torch.float64).flatten()
    if a.numel() != d:
        raise ValueError(f"expected {d} numbers, got {a.numel()}")
    return a


@exercise(
    "ch2.extrapolate",
    hint="On constant sets the output is a + t b: two outputs give a and b.",
    per_seed=True,
)
def _extrapolate(answer, seed):
    layer, query = exercise_layer(seed)
    with torch.no_grad():
        ref = layer(query, constant_set(EX_T))[0].flatten()
    ok = torch.allclose(_vector(answer, EX_D), ref, rtol=1e-6, atol=1e-8)
    return ok, (
        f"o(S_{EX_T}) = {[round(v, 4) for v in ref.tolist()]}: a straight line in t"
        if ok
        else "not the layer's output on that set"
    )


@exercise("ch2.tdof", hint="The Mahalanobis operator is a symmetric d x d matrix.")
def _tdof(answer):
    x = random_sets(4 * EX_TDOF_D**2, EX_TDOF_D + 3, EX_TDOF_D, seed=0)
    ref = span_tdof(mahalanobis_operator, x).rank
    ok = not isinstance(answer, bool) and int(answer) == answer == ref
    return ok, (
        f"TDOF = {ref}: the symmetric {EX_TDOF_D} x {EX_TDOF_D} matrices"
        if ok
        else f"{answer!r} is not the TDOF of the Mahalanobis operator in d = {EX_TDOF_D}"
    )


@exercise("ch2.theorem3", hint="mu first, then gamma = tanh(mu_1), then (I + gamma A) mu.")
def _theorem3(answer):
    A = torch.tensor(EX_A, dtype=torch.float64)
    with torch.no_grad():
        ref = theorem3_layer(A)(torch.tensor([EX_SET], dtype=torch.float64))[0]
    ok = torch.allclose(_vector(answer, A.shape[0]), ref, rtol=1e-6, atol=1e-8)
    return ok, (
        f"f_A(S) = {[round(v, 4) for v in ref.tolist()]}" if ok else "not f_A(S) for that set"
    )
