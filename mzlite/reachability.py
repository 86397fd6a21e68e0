"""Data-driven reachability with matrix zonotopes: where MZAttn's matrix zonotopes come from.

A linear system with bounded process noise,

    x_{k+1} = A x_k + B u_k + w_k,      w_k in Z_w = <c_w, G_w>  (a zonotope),

is observed along a few trajectories. Alanwar et al. (L4DC 2021, Theorem 1) turn those data into
the matrix zonotope ``M_Sigma`` of every ``[A B]`` consistent with them, and propagate reachable
sets through the whole family (their Algorithm 1):

    H        = [X_-; U_-]                    (n + m, T): the regressors, full row rank
    M_w      = <[c_w ... c_w], {g_i e_j^T}>  every noise sequence [w_0 ... w_{T-1}], w_j in Z_w
    M_Sigma  = (X_+ - M_w) H^+,   H^+ = H^T (H H^T)^{-1}
    R_{k+1}  = reduce( M_Sigma (R_k x U) + Z_w )

If ``[A B]`` is consistent, ``X_+ - [A B] H = W`` for a noise sequence ``W`` in ``M_w``, so
``[A B] = (X_+ - W) H^+`` is in ``M_Sigma``: the true system is inside whatever the noise was.
``M_Sigma`` is a closed form, not the exact consistent set (:func:`consistent_set_bounds` computes
that set's bounds with linear programs): it also holds ``(X_+ - W) H^+`` for noise sequences no
system could have produced, and its size levels off as data grow (the worst-case noise may be
correlated with the regressors) instead of shrinking to a point.

Layout: data matrices hold one sample per COLUMN (``[A B] H = X_+``, the control convention),
while :mod:`mzlite.zonotope` stores one generator per ROW; trajectories are ``(N, K + 1, n)``
state tensors and ``(N, K, m)`` input tensors. Everything runs in the dtype it is given (use
float64: ``H H^T`` is inverted).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._checks import as_float_tensor, check_finite, check_same
from .zonotope import MatrixZonotope, Zonotope

__all__ = [
    "Trajectories",
    "simulate",
    "sample_trajectories",
    "noise_matrix_zonotope",
    "consistent_systems",
    "consistent_set_bounds",
    "box_matrix_zonotope",
    "cartesian_product",
    "reachable_sets",
]


def _same_and_finite(names: tuple[str, str], a: torch.Tensor, b: torch.Tensor) -> None:
    check_same(names, (a, b))
    check_finite(names[0], a)
    check_finite(names[1], b)


def _system(A, B) -> tuple[torch.Tensor, torch.Tensor]:
    A = as_float_tensor("A", A)
    B = as_float_tensor("B", B, like=A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must have shape (n, n), got {tuple(A.shape)}")
    if B.ndim != 2 or B.shape[0] != A.shape[0]:
        raise ValueError(f"B must have shape (n, m) with n = {A.shape[0]}, got {tuple(B.shape)}")
    _same_and_finite(("A", "B"), A, B)
    return A, B


def simulate(A, B, x0, inputs, noise) -> torch.Tensor:
    """States of ``x_{k+1} = A x_k + B u_k + w_k`` for given inputs and noise.

    ``A`` (n, n), ``B`` (n, m); ``x0`` (..., n); ``inputs`` (..., K, m); ``noise`` (..., K, n)
    (leading dimensions broadcast). Returns the states ``(..., K + 1, n)``, ``x0`` first."""
    A, B = _system(A, B)
    n, m = B.shape
    x0 = as_float_tensor("x0", x0, like=A)
    u = as_float_tensor("inputs", inputs, like=A)
    w = as_float_tensor("noise", noise, like=A)
    if x0.ndim < 1 or x0.shape[-1] != n:
        raise ValueError(f"x0 must have shape (..., n) with n = {n}, got {tuple(x0.shape)}")
    if u.ndim < 2 or u.shape[-1] != m:
        raise ValueError(f"inputs must have shape (..., K, m) with m = {m}, got {tuple(u.shape)}")
    if w.ndim < 2 or w.shape[-1] != n or w.shape[-2] != u.shape[-2]:
        raise ValueError(
            f"noise must have shape (..., K, n) = (..., {u.shape[-2]}, {n}) like inputs, "
            f"got {tuple(w.shape)}"
        )
    for name, t in (("x0", x0), ("inputs", u), ("noise", w)):
        check_same(("A", name), (A, t))
        check_finite(name, t)
    x, states = x0, [x0]
    for k in range(u.shape[-2]):
        x = x @ A.T + u[..., k, :] @ B.T + w[..., k, :]  # (..., n)
        states.append(x)
    batch = torch.broadcast_shapes(*(s.shape for s in states))
    return torch.stack([s.expand(batch) for s in states], dim=-2)  # (..., K + 1, n)


@dataclass(frozen=True)
class Trajectories:
    """Observed trajectories: ``states`` (N, K + 1, n) and the ``inputs`` (N, K, m) applied."""

    states: torch.Tensor
    inputs: torch.Tensor

    def __post_init__(self):
        x = as_float_tensor("states", self.states)
        u = as_float_tensor("inputs", self.inputs, like=x)
        if x.ndim != 3 or x.shape[1] < 2:
            raise ValueError(f"states must have shape (N, K + 1, n) with K >= 1, got {x.shape}")
        if u.ndim != 3 or u.shape[:2] != (x.shape[0], x.shape[1] - 1):
            raise ValueError(
                f"inputs must have shape (N, K, m) = ({x.shape[0]}, {x.shape[1] - 1}, m), "
                f"got {tuple(u.shape)}"
            )
        _same_and_finite(("states", "inputs"), x, u)
        object.__setattr__(self, "states", x)
        object.__setattr__(self, "inputs", u)

    @property
    def num_samples(self) -> int:
        """T = N K transitions (x_k, u_k) -> x_{k+1}."""
        return self.inputs.shape[0] * self.inputs.shape[1]

    def matrices(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(X_-, U_-, X_+)``, shapes (n, T), (m, T), (n, T): every transition of every
        trajectory as a column, trajectory by trajectory."""
        n, m = self.states.shape[-1], self.inputs.shape[-1]
        X_minus = self.states[:, :-1].reshape(-1, n).T
        X_plus = self.states[:, 1:].reshape(-1, n).T
        U_minus = self.inputs.reshape(-1, m).T
        return X_minus, U_minus, X_plus

    def first(self, n_trajectories: int) -> Trajectories:
        """The first ``n_trajectories`` trajectories (less data, for "more data" comparisons)."""
        if not 1 <= n_trajectories <= self.states.shape[0]:
            raise ValueError(
                f"n_trajectories must be in [1, {self.states.shape[0]}], got {n_trajectories}"
            )
        return Trajectories(self.states[:n_trajectories], self.inputs[:n_trajectories])


def sample_trajectories(
    A,
    B,
    initial: Zonotope,
    input_set: Zonotope,
    noise: Zonotope,
    n_trajectories: int,
    steps: int,
    seed: int = 0,
) -> Trajectories:
    """``n_trajectories`` runs of ``steps`` steps of the system: ``x_0`` drawn from ``initial``,
    each ``u_k`` from ``input_set`` and each ``w_k`` from ``noise`` (``Zonotope.sample``: uniform
    coefficients). Deterministic in ``seed``."""
    for name, v in (("n_trajectories", n_trajectories), ("steps", steps)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    A, B = _system(A, B)
    n, m = B.shape
    for name, z, d in (("initial", initial, n), ("input_set", input_set, m), ("noise", noise, n)):
        if not isinstance(z, Zonotope) or z.batch_shape != () or z.dim != d:
            raise ValueError(f"{name} must be one Zonotope of dim {d}, got {z!r}")
    g = torch.Generator().manual_seed(int(seed))
    x0 = initial.sample(n_trajectories, generator=g).to(A)  # (N, n)
    u = input_set.sample(n_trajectories * steps, generator=g).to(A)
    w = noise.sample(n_trajectories * steps, generator=g).to(A)
    u, w = u.reshape(n_trajectories, steps, m), w.reshape(n_trajectories, steps, n)
    return Trajectories(simulate(A, B, x0, u, w), u)


def noise_matrix_zonotope(noise: Zonotope, num_samples: int) -> MatrixZonotope:
    """``M_w``: every noise sequence ``[w_0 ... w_{T-1}]`` (n, T) with each ``w_j`` in ``noise``.

    Centre ``[c_w ... c_w]``; one generator per (noise generator ``i``, sample ``j``): ``g_i`` in
    column ``j``, zeros elsewhere, ordered ``i * T + j`` as in Alanwar et al. (2021). Shape
    ``(n, T)`` with ``q T`` generators (``q`` = ``noise.num_generators``): memory ``q n T^2``."""
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples must be an int >= 1, got {num_samples!r}")
    if not isinstance(noise, Zonotope) or noise.batch_shape != ():
        raise ValueError(f"noise must be one Zonotope (batch_shape ()), got {noise!r}")
    T, G = num_samples, noise.generators  # (q, n)
    q, n = G.shape
    center = noise.center.unsqueeze(-1).expand(n, T)  # (n, T)
    eye = torch.eye(T, dtype=G.dtype, device=G.device)
    gens = G[:, None, :, None] * eye[None, :, None, :]  # (q, T, n, T): g_i in column j
    return MatrixZonotope(center, gens.reshape(q * T, n, T))


def _regressors(data: Trajectories) -> tuple[torch.Tensor, torch.Tensor]:
    """``H`` (n + m, T) and ``H^+`` (T, n + m); a rank-deficient ``H`` raises."""
    X_minus, U_minus, _ = data.matrices()
    H = torch.cat([X_minus, U_minus])  # (n + m, T)
    rank = int(torch.linalg.matrix_rank(H))
    if rank < H.shape[0]:
        raise ValueError(
            f"the data do not determine [A B]: [X_-; U_-] of shape {tuple(H.shape)} has rank "
            f"{rank} < n + m = {H.shape[0]}; collect more transitions or more varied inputs"
        )
    return H, torch.linalg.solve(H @ H.T, H).T  # H^+ = H^T (H H^T)^{-1}


def consistent_systems(data: Trajectories, noise: Zonotope) -> MatrixZonotope:
    """``M_Sigma = (X_+ - M_w) H^+``: a matrix zonotope (n, n + m) holding every ``[A B]``
    that explains ``data`` with noise in ``noise`` (Alanwar et al. 2021, Theorem 1).

    Computed without forming ``M_w`` (whose generators are mostly zeros): the generator of
    ``(i, j)`` is ``-g_i (H^+)_{j,:}``, so ``M_Sigma`` has ``q T`` rank-one generators, in the
    order of :func:`noise_matrix_zonotope`."""
    if not isinstance(noise, Zonotope) or noise.batch_shape != ():
        raise ValueError(f"noise must be one Zonotope (batch_shape ()), got {noise!r}")
    _, _, X_plus = data.matrices()
    if noise.dim != X_plus.shape[0]:
        raise ValueError(f"noise must have dim n = {X_plus.shape[0]}, got {noise.dim}")
    check_same(("data", "noise"), (X_plus, noise.center))
    _, H_pinv = _regressors(data)  # (T, n + m)
    center = (X_plus - noise.center[:, None]) @ H_pinv  # (n, n + m)
    gens = -noise.generators[:, None, :, None] * H_pinv[None, :, None, :]  # (q, T, n, n + m)
    return MatrixZonotope(center, gens.reshape(-1, *center.shape))


def consistent_set_bounds(data: Trajectories, noise: Zonotope) -> tuple[torch.Tensor, torch.Tensor]:
    """Entry-wise bounds ``(lower, upper)`` (n, n + m) of the EXACT set of consistent systems
    ``{[A B] : x_+^j - [A B] h_j in Z_w for every sample j}``, one linear program per bound
    (HiGHS; variables ``vec [A B]`` and the noise coefficients of every sample). This is the set
    ``M_Sigma`` over-approximates; it costs ``2 n (n + m)`` LPs with ``n T`` equality constraints
    each, so keep ``T`` in the hundreds."""
    import numpy as np
    from scipy.optimize import linprog

    if not isinstance(noise, Zonotope) or noise.batch_shape != ():
        raise ValueError(f"noise must be one Zonotope (batch_shape ()), got {noise!r}")
    X_minus, U_minus, X_plus = (t.detach().cpu().double().numpy() for t in data.matrices())
    H = np.concatenate([X_minus, U_minus])  # (p, T)
    n, T = X_plus.shape
    if noise.dim != n:
        raise ValueError(f"noise must have dim n = {n}, got {noise.dim}")
    p = H.shape[0]
    c_w = noise.center.detach().cpu().double().numpy()
    G_w = noise.generators.detach().cpu().double().numpy()  # (q, n)
    q = G_w.shape[0]
    # Unknowns z = [vec M (row-major, n p), alpha (T q)]: M h_j + G_w^T alpha_j = x_+^j - c_w.
    A_eq = np.zeros((n * T, n * p + T * q))
    for j in range(T):
        rows = slice(j * n, (j + 1) * n)
        A_eq[rows, : n * p] = np.kron(np.eye(n), H[:, j])  # (n, n p): row r picks M[r] . h_j
        A_eq[rows, n * p + j * q : n * p + (j + 1) * q] = G_w.T
    b_eq = (X_plus - c_w[:, None]).T.reshape(-1)
    bounds = [(None, None)] * (n * p) + [(-1.0, 1.0)] * (T * q)
    lo, hi = np.empty(n * p), np.empty(n * p)
    for e in range(n * p):
        cost = np.zeros(n * p + T * q)
        for sign, out in ((1.0, lo), (-1.0, hi)):
            cost[e] = sign
            res = linprog(cost, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs")
            if res.status != 0:
                raise ValueError(
                    f"no system explains the data with this noise zonotope (linprog: "
                    f"{res.message}); is the noise bound too small?"
                )
            out[e] = sign * res.fun
    like = noise.center
    return (
        torch.as_tensor(lo.reshape(n, p), dtype=like.dtype, device=like.device),
        torch.as_tensor(hi.reshape(n, p), dtype=like.dtype, device=like.device),
    )


def box_matrix_zonotope(lower, upper) -> MatrixZonotope:
    """The interval matrix ``{M : lower <= M <= upper}`` (entry-wise) as a matrix zonotope:
    centre the midpoint, one single-entry generator per entry with ``lower < upper``. With the
    bounds of :func:`consistent_set_bounds` it is a second family of consistent systems, one that
    keeps shrinking as data grow (``M_Sigma`` levels off)."""
    lo = as_float_tensor("lower", lower)
    hi = as_float_tensor("upper", upper, like=lo)
    if lo.ndim != 2 or hi.shape != lo.shape:
        raise ValueError(
            f"lower and upper must be matrices (p, q) of one shape, got {tuple(lo.shape)} and "
            f"{tuple(hi.shape)}"
        )
    _same_and_finite(("lower", "upper"), lo, hi)
    if bool((lo > hi).any()):
        raise ValueError("box_matrix_zonotope needs lower <= upper in every entry")
    radius = ((hi - lo) / 2).flatten()  # (p q,)
    idx = torch.nonzero(radius > 0).flatten()
    gens = torch.zeros(len(idx), lo.numel(), dtype=lo.dtype, device=lo.device)
    gens[torch.arange(len(idx)), idx] = radius[idx]
    return MatrixZonotope((lo + hi) / 2, gens.reshape(len(idx), *lo.shape))


def cartesian_product(first: Zonotope, second: Zonotope) -> Zonotope:
    """``first x second = {(a, b)}``: centres stacked, generators block-diagonal
    (``(m1 + m2, d1 + d2)``). Exact; batch shapes broadcast."""
    if not isinstance(first, Zonotope) or not isinstance(second, Zonotope):
        raise TypeError("cartesian_product takes two Zonotopes")
    check_same(("first", "second"), (first.center, second.center))
    batch = torch.broadcast_shapes(first.batch_shape, second.batch_shape)
    (m1, d1), (m2, d2) = first.generators.shape[-2:], second.generators.shape[-2:]
    G1 = torch.cat([first.generators, first.generators.new_zeros(*first.batch_shape, m1, d2)], -1)
    G2 = torch.cat(
        [second.generators.new_zeros(*second.batch_shape, m2, d1), second.generators], -1
    )
    G = torch.cat([G1.expand(*batch, m1, d1 + d2), G2.expand(*batch, m2, d1 + d2)], -2)
    c = torch.cat([first.center.expand(*batch, d1), second.center.expand(*batch, d2)], -1)
    return Zonotope(c, G)


def reachable_sets(
    system,
    initial: Zonotope,
    input_set: Zonotope,
    noise: Zonotope,
    steps: int,
    order: float | None = 10,
) -> list[Zonotope]:
    """``[R_0, ..., R_steps]``: ``R_0 = initial``, ``R_{k+1} = system (R_k x U) + Z_w``.

    ``system``: a matrix zonotope (n, n + m) of possible ``[A B]`` (e.g. :func:`consistent_systems`)
    or one matrix (n, n + m). For a matrix the step is an exact linear map; for a matrix zonotope
    it is the over-approximating product ``MZ Z`` (:meth:`MatrixZonotope.matmul_zonotope`), which
    multiplies the generator count, so each ``R_{k+1}`` is reduced to ``order`` (Girard;
    ``order * n`` generators at most). ``order=None`` keeps every generator: exact for a matrix,
    an explosion for a matrix zonotope. Every ``R_k`` CONTAINS every state any system of the
    family can reach in ``k`` steps with inputs in ``input_set`` and noise in ``noise``."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    if order is not None and (isinstance(order, bool) or not order >= 1):
        raise ValueError(f"order must be a real number >= 1 or None, got {order!r}")
    if not isinstance(system, MatrixZonotope):
        system = as_float_tensor("system", system, like=initial.center)
        if system.ndim != 2:
            raise ValueError(f"system must be [A B] (n, n + m), got shape {tuple(system.shape)}")
    shape = tuple(system.shape[-2:]) if isinstance(system, torch.Tensor) else system.shape
    n, m = initial.dim, input_set.dim
    if shape != (n, n + m):
        raise ValueError(
            f"system must be [A B] of shape (n, n + m) = ({n}, {n + m}) for an initial set of dim "
            f"{n} and inputs of dim {m}, got {shape}"
        )
    if noise.dim != n:
        raise ValueError(f"noise must have dim n = {n}, got {noise.dim}")
    sets = [initial]
    for _ in range(steps):
        joint = cartesian_product(sets[-1], input_set)  # (x, u) in R^{n + m}
        nxt = (system @ joint) + noise
        sets.append(nxt if order is None else nxt.reduce(order))
    return sets
