"""Chapter 2 exercises ("The relational bottleneck"): every reference answer is computed with
mzlite (``mzlite.nn``, ``mzlite.analysis.tdof``); only the exercise's inputs are typed here, and the
notebook builds the same inputs with the functions below."""

from __future__ import annotations

import numpy as np
import torch

from ..analysis.tdof import mahalanobis_operator, random_sets, span_tdof, zscore_operator
from ..nn import MultiheadAttention, theorem3_layer
from .checker import call, diagnose, exercise, named_mistake, same_integer

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


def tdof_dimension(seed: int = 0) -> int:
    """The dimension ``d`` of exercise ch2.tdof for the notebook's ``seed`` (5 for seed 0)."""
    return EX_TDOF_D if seed == 0 else int(np.random.default_rng([2, 1, seed]).integers(3, 9))


def theorem3_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A (2, 2), S (3, 2))`` of exercise ch2.theorem3, float64, for the notebook's ``seed``
    (the typed ones for seed 0; else small numbers with one decimal)."""
    d = torch.float64
    if seed == 0:
        return torch.tensor(EX_A, dtype=d), torch.tensor(EX_SET, dtype=d)
    g = np.random.default_rng([2, 2, seed])
    A = np.round(g.uniform(-1.5, 1.5, (2, 2)), 1)
    S = np.round(g.uniform(-2.0, 3.0, (3, 2)) * 2) / 2
    return torch.tensor(A, dtype=d), torch.tensor(S, dtype=d)


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
    got = _vector(answer, EX_D)
    if torch.allclose(got, ref, rtol=1e-6, atol=1e-8):
        return True, f"o(S_{EX_T}) = {[round(v, 4) for v in ref.tolist()]}: a straight line in t"
    with torch.no_grad():
        o1, o2 = (layer(query, constant_set(t))[0].flatten() for t in (1.0, 2.0))
    slips = [
        (
            o1 + EX_T * (o2 - o1),
            f"o(S_1) + t (o(S_2) - o(S_1)): the line at t = {EX_T} is "
            "a + t b with a = 2 o(S_1) - o(S_2)",
        ),  # fmt: skip
        (EX_T * o1, "t o(S_1): the output is a + t b, with an intercept a"),
        (2 * o1 - o2 - EX_T * (o2 - o1), "a - t b: the slope's sign flipped"),
    ]
    for wrong, name in slips:
        if torch.allclose(got, wrong, rtol=1e-6, atol=1e-8):
            return False, f"that is {name}"
    return False, "not the layer's output on that set"


@exercise("ch2.tdof", hint="The Mahalanobis operator is a symmetric d x d matrix.", per_seed=True)
def _tdof(answer, seed):
    d = tdof_dimension(seed)
    x = random_sets(4 * d**2, d + 3, d, seed=0)
    ref = span_tdof(mahalanobis_operator, x).rank
    if same_integer(answer, ref):
        return True, f"TDOF = {ref}: the symmetric {d} x {d} matrices"
    return False, named_mistake(
        answer,
        [
            (d * d, "d^2, every d x d matrix: the Mahalanobis operator is symmetric"),
            (d * (d - 1) // 2, "d(d - 1)/2, the antisymmetric part: symmetric has a diagonal too"),
            (ref + 1, "one too many: a constant part of the operator is no degree of freedom"),
            (d, "d, one per coordinate: that would be a diagonal scaling"),
        ],
        f"{answer!r} is not the TDOF of the Mahalanobis operator in d = {d}",
        integer=True,
    )


@exercise(
    "ch2.theorem3",
    hint="mu first, then gamma = tanh(mu_1), then (I + gamma A) mu.",
    per_seed=True,
)
def _theorem3(answer, seed):
    A, S = theorem3_inputs(seed)
    with torch.no_grad():
        ref = theorem3_layer(A)(S[None])[0]
    got = _vector(answer, A.shape[0])
    if torch.allclose(got, ref, rtol=1e-6, atol=1e-8):
        return True, f"f_A(S) = {[round(v, 4) for v in ref.tolist()]}"
    mu = S.mean(0)
    slips = [
        (mu + torch.tanh(mu[0]) * (A.T @ mu), "A transposed: A acts on the column mu"),
        (mu + mu[0] * (A @ mu), "no tanh: gamma = tanh(mu_1)"),
        (mu + torch.tanh(mu[1]) * (A @ mu), "gamma from the second coordinate: mu_1 is the first"),
        (torch.tanh(mu[0]) * (A @ mu), "gamma A mu without the identity: (I + gamma A) mu"),
    ]
    for wrong, name in slips:
        if torch.allclose(got, wrong, rtol=1e-6, atol=1e-8):
            return False, f"that is {name}"
    return False, "not f_A(S) for that set"


# Coding exercise: a TDOF estimate from a target's operators on generic sets.
TDOF_D = 4


def _shifted_scaling(x, mask=None):
    """``T(S) = J + diag(mu(S))``, J the all-ones matrix: a set-dependent diagonal around a
    constant part outside the diagonal (TDOF d; the operators themselves span d + 1)."""
    mu = x.mean(1) if mask is None else (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    return torch.ones(x.shape[-1], x.shape[-1], dtype=x.dtype) + torch.diag_embed(mu)


TDOF_TARGETS = {
    "J + diag(mu)": _shifted_scaling,
    "z-score": zscore_operator,
    "Mahalanobis": mahalanobis_operator,
}


def _tdof_sets(seed: int) -> torch.Tensor:
    """The generic sets in ``R^4`` of ch2.tdof_function for the notebook's ``seed``."""
    return random_sets(3 * TDOF_D**2, TDOF_D + 3, TDOF_D, seed=10_007 + seed)


def tdof_inputs(seed: int = 0) -> dict[str, torch.Tensor]:
    """Operators ``T(S_b)`` (n_sets, d, d) of three targets on the same generic sets in
    ``R^4`` (from the notebook's ``seed``), by target name: the inputs of ch2.tdof_function."""
    x = _tdof_sets(seed)
    return {name: T(x, None) for name, T in TDOF_TARGETS.items()}


@exercise(
    "ch2.tdof_function",
    hint="Subtract one operator from all the others, flatten each difference, and count the "
    "singular values above 1e-8 times the largest.",
    per_seed=True,
    kind="coding",
)
def _tdof_function(function, seed):
    x = _tdof_sets(seed)
    for name, T in TDOF_TARGETS.items():
        ops = T(x, None)
        ref = span_tdof(T, x).rank
        flat = ops.flatten(1)
        s = torch.linalg.svdvals(flat[1:] - flat[:1])
        got = call(function, ops.clone())
        if isinstance(got, bool) or int(got) != got:
            return False, f"return the TDOF as an int, got {got!r}"
        ok, why = diagnose(
            int(got),
            ref,
            [
                (
                    torch.linalg.matrix_rank(flat).item(),
                    "the rank of the operators themselves: a constant part M_0 is not a degree of "
                    "freedom, subtract one operator first",
                ),
                (int((s > 0).sum()), "every nonzero singular value: round-off is not a direction"),
                (torch.linalg.matrix_rank(ops[0]).item(), "the rank of one operator"),
            ],
            what=f"your TDOF of {name}",
        )
        if not ok:
            return False, why
    return True, f"{', '.join(TDOF_TARGETS)}: the span TDOF of mzlite.analysis.tdof, every one"
