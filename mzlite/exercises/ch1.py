"""Chapter 1 exercises ("Zonotopes you can touch"): the checkers compute every reference answer
with :mod:`mzlite.zonotope`; only the exercise's inputs are typed here (the same ones the
notebook states in the question)."""

from __future__ import annotations

import math

import torch

from ..zonotope import MatrixZonotope, Zonotope
from .checker import call, diagnose, exercise, rng, same_integer

# The 2-D zonotope of exercises ch1.area and ch1.inside: centre 0, generators e1, e2, e1 + e2.
EX_CENTER = [0.0, 0.0]
EX_GENERATORS = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
EX_POINT = [1.5, -1.0]
# Exercise ch1.generators: a matrix zonotope with L generators times a zonotope with h generators.
EX_L, EX_H = 2, 3


def _example() -> Zonotope:
    return Zonotope(
        torch.tensor(EX_CENTER, dtype=torch.float64),
        torch.tensor(EX_GENERATORS, dtype=torch.float64),
    )


def _as_number(answer) -> float:
    if isinstance(answer, torch.Tensor):
        if answer.numel() != 1:
            raise ValueError(f"expected one number, got a tensor of shape {tuple(answer.shape)}")
        answer = answer.item()
    if isinstance(answer, bool):
        raise TypeError("expected a number, got a bool")
    return float(answer)


@exercise("ch1.generators", hint="Count M_c g_k (h of them), M_l c (L) and M_l g_k (L times h).")
def _generators(answer):
    g = torch.Generator().manual_seed(0)
    mz = MatrixZonotope(torch.randn(2, 2, generator=g), torch.randn(EX_L, 2, 2, generator=g))
    z = Zonotope(torch.randn(2, generator=g), torch.randn(EX_H, 2, generator=g))
    ref = (mz @ z).num_generators
    ok = same_integer(answer, ref)
    # A wrong answer gets the hint, not the reference value.
    return ok, f"MZ Z with L = {EX_L}, h = {EX_H} has h + L + L h = {ref} generators" if ok else (
        f"{answer!r} is not the generator count of MZ Z"
    )


@exercise("ch1.area", hint="Sum |det| over every pair of generators, times 2^2 = 4.")
def _area(answer):
    ref = _example().volume().item()
    ok = math.isclose(_as_number(answer), ref, rel_tol=1e-6, abs_tol=1e-9)
    return ok, f"the area is 4 * (sum of |det(g_i, g_j)| over pairs) = {ref:g}" if ok else (
        f"{answer!r} is not the area"
    )


@exercise(
    "ch1.inside", hint="Being inside the interval hull is necessary, not sufficient: draw it."
)
def _inside(answer):
    if isinstance(answer, torch.Tensor) and answer.dtype == torch.bool and answer.numel() == 1:
        answer = bool(answer.item())
    if type(answer).__name__ not in ("bool", "bool_"):
        return False, "answer with True or False"
    ref = bool(_example().contains(torch.tensor(EX_POINT, dtype=torch.float64)))
    where = "inside" if ref else "outside (though inside the interval hull)"
    ok = bool(answer) == ref
    return ok, f"the point {tuple(EX_POINT)} is {where}" if ok else "not quite"


# Coding exercises: the learner writes the function, the checker runs it on random inputs.
def _canonical(generators: torch.Tensor) -> torch.Tensor:
    """Generators as a set: each row's sign fixed (a zonotope is unchanged when a generator flips),
    rows sorted (their order does not matter either)."""
    G = generators.to(torch.float64).reshape(-1, generators.shape[-1])
    G = G * torch.where(G[:, :1] < 0, -1.0, 1.0)
    key = G @ torch.linspace(1.0, 1.7, G.shape[-1], dtype=torch.float64)
    return G[key.argsort()]


def product_inputs(seed: int = 0) -> tuple[torch.Tensor, ...]:
    """``(M_c (3, 3), M_l (L=2, 3, 3), c (3,), G (h=4, 3))`` of exercise ch1.mz_product, float64."""
    g = rng("ch1.mz_product", seed)
    return (
        torch.randn(3, 3, generator=g, dtype=torch.float64),
        0.5 * torch.randn(2, 3, 3, generator=g, dtype=torch.float64),
        torch.randn(3, generator=g, dtype=torch.float64),
        torch.randn(4, 3, generator=g, dtype=torch.float64),
    )


@exercise(
    "ch1.mz_product",
    hint="Three kinds of generator: M_c g_k, M_l c and M_l g_k; a matrix acts on a column vector.",
    per_seed=True,
)
def _mz_product(function, seed):
    for trial in range(3):  # the notebook's inputs first, then two more draws
        M_c, M_l, c, G = product_inputs(seed + 7919 * trial)
        ref = MatrixZonotope(M_c, M_l) @ Zonotope(c, G)
        got_c, got_G = call(function, M_c, M_l, c, G)
        got_c, got_G = torch.as_tensor(got_c), torch.as_tensor(got_G)
        wrong = {
            "a transposed operator (x @ M, which is M^T x)": MatrixZonotope(M_c.mT, M_l.mT)
            @ Zonotope(c, G),
        }
        h, L = G.shape[0], M_l.shape[0]
        if got_G.ndim != 2 or got_G.shape[-1] != ref.dim:
            return False, f"generators must have shape (m, {ref.dim}), got {tuple(got_G.shape)}"
        if got_G.shape[0] == h + L:
            return False, (
                f"{h + L} = h + L generators: the L h cross terms M_l g_k are missing, so the "
                "result does not contain every M x"
            )
        candidates = [(z.center, _canonical(z.generators), name) for name, z in wrong.items()]
        if got_G.shape[0] != ref.num_generators:
            return False, (
                f"{got_G.shape[0]} generators; MZ Z has h + L + L h = {ref.num_generators} here"
            )
        ok, why = diagnose(
            (got_c, _canonical(got_G)),
            (ref.center, _canonical(ref.generators)),
            [((c_, G_), name) for c_, G_, name in candidates],
            what="the product zonotope",
        )
        if not ok:
            return False, why + f" (inputs: product_inputs({seed + 7919 * trial}))"
    return True, f"centre and all h + L + L h = {ref.num_generators} generators agree with mzlite"


def half_width_inputs(seed: int = 0) -> torch.Tensor:
    """Generators ``G`` (B=4, m=5, d=3) of exercise ch1.half_widths: four zonotopes in R^3."""
    return torch.randn(4, 5, 3, generator=rng("ch1.half_widths", seed), dtype=torch.float64)


@exercise(
    "ch1.half_widths",
    hint="Coordinate i of c + sum_g alpha_g G_g is largest with alpha_g = sign(G_g,i).",
    per_seed=True,
)
def _half_widths(function, seed):
    for trial in range(3):
        G = half_width_inputs(seed + 7919 * trial)
        lower, upper = Zonotope(
            torch.zeros(G.shape[0], G.shape[-1], dtype=G.dtype), G
        ).interval_hull()
        ref = (upper - lower) / 2  # (B, d)
        ok, why = diagnose(
            call(function, G),
            ref,
            [
                (G.norm(dim=-2), "the L2 norm over the generators, where the L1 norm is meant"),
                (G.sum(dim=-2), "a signed sum: the absolute values are missing"),
                (G.abs().amax(dim=-2), "the largest |G_g,i| alone: every generator adds width"),
                (G.abs().sum(dim=-1), "a sum over coordinates: delta has one entry per coordinate"),
            ],
            what="delta",
        )
        if not ok:
            return False, why
    return True, "delta_i = sum_g |G_g,i| (an L1 norm over the generators), as in mzlite"
