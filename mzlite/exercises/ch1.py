"""Chapter 1 exercises ("Zonotopes you can touch"): the checkers compute every reference answer
with :mod:`mzlite.zonotope`; the exercises' inputs come from the notebook's ``seed`` (seed 0
gives the numbers typed here, which the reading version of the book shows)."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..zonotope import MatrixZonotope, Zonotope
from .checker import call, diagnose, exercise, named_mistake, rng, same_integer

# The 2-D zonotope of exercises ch1.area and ch1.inside for seed 0 (the reading version's
# numbers): centre 0, generators e1, e2, e1 + e2, and the point (1.5, -1).
EX_CENTER = [0.0, 0.0]
EX_GENERATORS = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
EX_POINT = [1.5, -1.0]
# Exercise ch1.generators for seed 0: L generator matrices times a zonotope with h generators.
EX_L, EX_H = 2, 3


def generator_sizes(seed: int = 0) -> tuple[int, int]:
    """``(L, h)`` of exercise ch1.generators for the notebook's ``seed`` ((2, 3) for seed 0)."""
    if seed == 0:
        return EX_L, EX_H
    g = np.random.default_rng([1, 1, seed])
    return int(g.integers(2, 6)), int(g.integers(2, 8))


def exercise_zonotope(seed: int = 0) -> tuple[Zonotope, torch.Tensor]:
    """The zonotope (float64, centre 0, three generators in the plane with small integer
    entries) and the point of exercises ch1.area and ch1.inside, for the notebook's ``seed``.
    The point always lies inside the zonotope's interval hull, so the hull alone does not
    decide whether it is inside; it is inside on half of the seeds, and at least
    :data:`MIN_MARGIN` from the boundary on every one."""
    d = torch.float64
    if seed == 0:
        return Zonotope(torch.tensor(EX_CENTER, dtype=d), torch.tensor(EX_GENERATORS, dtype=d)), (
            torch.tensor(EX_POINT, dtype=d)
        )
    g = np.random.default_rng([1, 2, seed])
    while True:
        G = g.integers(-2, 3, size=(3, 2)).astype(np.float64)
        dets = [abs(np.linalg.det(G[[i, j]])) for i, j in ((0, 1), (0, 2), (1, 2))]
        if min(dets) > 0:  # no generator zero or parallel to another: three distinct sides
            break
    half = np.abs(G).sum(0)
    # inside or outside with even odds (the interval-hull slip, "inside", is right on half of
    # the seeds, no more), and never within MIN_MARGIN of the boundary, where a point "on" it
    # would hang on a tolerance
    inside = bool(g.integers(0, 2))
    while True:
        point = np.round(g.uniform(-half, half) * 2) / 2
        margin = boundary_margin(G, point)
        if abs(margin) >= MIN_MARGIN and (margin > 0) == inside:
            break
    return Zonotope(torch.zeros(2, dtype=d), torch.tensor(G, dtype=d)), torch.tensor(point, dtype=d)


MIN_MARGIN = 0.2  # the least distance between the exercise's point and its zonotope's boundary


def boundary_margin(G: np.ndarray, point: np.ndarray) -> float:
    """Signed distance from ``point`` to the boundary of the planar zonotope with centre 0 and
    generators ``G`` (rows): positive inside. Each side of a planar zonotope is parallel to a
    generator, with normal ``n`` and support ``h(n) = sum_j |n . g_j|``."""
    normals = np.stack([-G[:, 1], G[:, 0]], axis=1)
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    support = np.abs(normals @ G.T).sum(axis=1)
    return float(np.min(support - np.abs(normals @ point)))


def _as_number(answer) -> float:
    if isinstance(answer, torch.Tensor):
        if answer.numel() != 1:
            raise ValueError(f"expected one number, got a tensor of shape {tuple(answer.shape)}")
        answer = answer.item()
    if isinstance(answer, bool):
        raise TypeError("expected a number, got a bool")
    return float(answer)


@exercise(
    "ch1.generators",
    hint="Count M_c g_k (h of them), M_l c (L) and M_l g_k (L times h).",
    per_seed=True,
)
def _generators(answer, seed):
    L, h = generator_sizes(seed)
    g = torch.Generator().manual_seed(seed)
    mz = MatrixZonotope(torch.randn(2, 2, generator=g), torch.randn(L, 2, 2, generator=g))
    z = Zonotope(torch.randn(2, generator=g), torch.randn(h, 2, generator=g))
    ref = (mz @ z).num_generators
    if same_integer(answer, ref):
        return True, f"MZ Z with L = {L}, h = {h} has h + L + L h = {ref} generators"
    # A wrong answer is told which count it is, never the reference value.
    return False, named_mistake(
        answer,
        [
            (h + L, "h + L: the L h cross terms M_l g_k are missing"),
            (L * h, "L h: only the cross terms; M_c g_k and M_l c are generators too"),
            (h + L * h, "h + L h: the L generators M_l c are missing"),
            (L + L * h, "L + L h: the h generators M_c g_k are missing"),
            ((L + 1) * (h + 1), "(L + 1)(h + 1): M_c c is the centre, not a generator"),
            (h, "h: the matrix generators add generators of their own"),
        ],
        f"{answer!r} is not the generator count of MZ Z",
        integer=True,
    )


@exercise("ch1.area", hint="Sum |det| over every pair of generators, times 2^2 = 4.", per_seed=True)
def _area(answer, seed):
    z, _ = exercise_zonotope(seed)
    ref = z.volume().item()
    G = z.generators
    pairs = [torch.linalg.det(G[[i, j]]).item() for i, j in ((0, 1), (0, 2), (1, 2))]
    half = G.abs().sum(0)
    if math.isclose(_as_number(answer), ref, rel_tol=1e-6, abs_tol=1e-9):
        return True, f"the area is 4 * (sum of |det(g_i, g_j)| over pairs) = {ref:g}"
    return False, named_mistake(
        answer,
        [
            (ref / 4, "the |det| sum without the factor 2^2 = 4 (the generators span [-1, 1])"),
            (4 * abs(sum(pairs)), "signed determinants: take |det| of every pair"),
            (float(4 * half.prod()), "the area of the interval hull, a box around the zonotope"),
            (4 * abs(pairs[0]), "one parallelogram (g_1, g_2): every pair of generators adds"),
            (2 * sum(abs(x) for x in pairs), "a factor 2 where the area needs 2^2 = 4"),
        ],
        f"{answer!r} is not the area",
    )


@exercise(
    "ch1.inside",
    hint="Being inside the interval hull is necessary, not sufficient: draw it.",
    per_seed=True,
)
def _inside(answer, seed):
    if isinstance(answer, torch.Tensor) and answer.dtype == torch.bool and answer.numel() == 1:
        answer = bool(answer.item())
    if type(answer).__name__ not in ("bool", "bool_"):
        return False, "answer with True or False"
    z, point = exercise_zonotope(seed)
    ref = bool(z.contains(point))
    where = "inside" if ref else "outside (though inside the interval hull)"
    if bool(answer) == ref:
        return True, f"the point {tuple(point.tolist())} is {where}"
    if answer:  # the usual slip: the point is inside the hull, so it is taken to be inside
        return False, "inside the interval hull is not inside the zonotope: its corners are cut"
    return False, "the point is inside: find the alpha in [-1, 1]^3 that reaches it"


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
    kind="coding",
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
    kind="coding",
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
