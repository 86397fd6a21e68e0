"""Zonotopes and matrix zonotopes as plain, batched tensor algebra (no nn.Module).

A zonotope (paper, Definition ``def:zonotope``; Kuhn 1998, Althoff 2010) is

    Z = { c + sum_g alpha_g G_g : alpha_g in [-1, 1] },

a centre swept along a few generator directions. A matrix zonotope (``eq:mz``) is the same idea
for matrices: ``{ M_c + sum_l xi_l M_l : xi_l in [-1, 1] }``. The operations follow CORA's
``@zonotope`` / ``@matZonotope`` and the paper's appendix ``app:zonotope``.

Layout (a choice the paper leaves open; the paper writes generators as the COLUMNS of G):

    Zonotope.center       (..., d)       Zonotope.generators       (..., m, d)   one per ROW
    MatrixZonotope.center (..., p, q)    MatrixZonotope.generators (..., L, p, q)

Rows match the model's token layout ``(B, n, n_g, d)``. Leading batch dimensions are free; the
batch shapes of centre and generators must be broadcast-compatible and are broadcast (as views) at
construction, so ``z.center`` and ``z.generators`` always share ``z.batch_shape``. Every operation
is differentiable except the boolean ``contains`` and the 3-D ``vertices`` hull selection.
"""

from __future__ import annotations

import itertools
import math
from numbers import Real

import torch

from ._checks import as_float_tensor, check_finite, check_ndim, check_same
from ._zonotope_base import (
    _as_scalar,
    _broadcast,
    _CenterAndGenerators,
    _make_generator,
    _uniform_signed,
)

__all__ = ["Zonotope", "MatrixZonotope"]


# ---------------------------------------------------------------------------------------------
# Zonotope
# ---------------------------------------------------------------------------------------------


class Zonotope(_CenterAndGenerators):
    """A (batch of) zonotope(s) ``{c + sum_g alpha_g G_g : alpha in [-1, 1]^m}`` (``def:zonotope``).

    Args:
        center: ``(..., d)`` float tensor (or array-like).
        generators: ``(..., m, d)``: one generator per row; ``m = 0`` is allowed (a point).
            Batch shapes of ``center`` and ``generators`` must be broadcast-compatible.

    Centre and generators must share dtype and device and be finite. Operators: ``A @ z`` (linear
    map), ``z1 + z2`` (Minkowski sum), ``z + v`` (translation), ``s * z`` (scaling), ``-z``.
    """

    __array_priority__ = 1000  # make `ndarray @ z` defer to __rmatmul__
    _event_ndim, _noun = 1, "zonotope"

    def __init__(self, center, generators):
        c_like = generators if isinstance(generators, torch.Tensor) else None
        c = as_float_tensor("center", center, like=c_like)
        G = as_float_tensor("generators", generators, like=c)
        check_ndim("center", c, 1, "(..., d)")
        check_ndim("generators", G, 2, "(..., m, d)")
        if G.shape[-1] != c.shape[-1]:
            raise ValueError(
                f"generators must have shape (..., m, d) with d = {c.shape[-1]} (from center), "
                f"got {tuple(G.shape)}"
            )
        if c.shape[-1] < 1:
            raise ValueError(f"center must have shape (..., d) with d >= 1, got {tuple(c.shape)}")
        check_same(("center", "generators"), (c, G))
        check_finite("center", c)
        check_finite("generators", G)
        batch = _broadcast(("center", "generators"), c.shape[:-1], G.shape[:-2])
        self.center = c.expand(*batch, c.shape[-1])  # (..., d)
        self.generators = G.expand(*batch, *G.shape[-2:])  # (..., m, d)

    # -- properties ---------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self.center.shape[-1]

    def __repr__(self) -> str:
        return (
            f"Zonotope(dim={self.dim}, num_generators={self.num_generators}, "
            f"batch_shape={tuple(self.batch_shape)}, dtype={self.dtype}, device={self.device})"
        )

    # -- set operations -----------------------------------------------------------------------
    def linear_map(self, A) -> Zonotope:
        """``A Z = <A c, A G>`` (exact: zonotopes are closed under linear maps, ``app:zonotope``).

        ``A``: ``(..., k, d)``; its batch dimensions broadcast with the zonotope's. Returns a
        zonotope in ``R^k`` with the same number of generators."""
        A = as_float_tensor("A", A, like=self.center)
        check_ndim("A", A, 2, f"(..., k, d) with d = {self.dim}")
        if A.shape[-1] != self.dim:
            raise ValueError(
                f"A must have shape (..., k, d) with d = {self.dim}, got {tuple(A.shape)}"
            )
        check_same(("zonotope", "A"), (self.center, A))
        _broadcast(("zonotope", "A"), self.batch_shape, A.shape[:-2])
        c = (A @ self.center.unsqueeze(-1)).squeeze(-1)  # (..., k)
        G = self.generators @ A.transpose(-1, -2)  # (..., m, k): rows g -> (A g)^T
        return Zonotope._new(c, G)

    def __rmatmul__(self, A) -> Zonotope:
        return self.linear_map(A)

    def __add__(self, other) -> Zonotope:
        if isinstance(other, Zonotope):
            # Minkowski sum: centres add, generator lists concatenate (count grows additively).
            if other.dim != self.dim:
                raise ValueError(
                    f"Minkowski sum needs equal dims: got d = {self.dim} and other d = {other.dim}"
                )
            check_same(("zonotope", "other"), (self.center, other.center))
            batch = _broadcast(("zonotope", "other"), self.batch_shape, other.batch_shape)
            G = torch.cat(
                [self.generators.expand(*batch, -1, -1), other.generators.expand(*batch, -1, -1)],
                dim=-2,
            )  # (..., m1 + m2, d)
            return Zonotope._new(self.center + other.center, G)
        if isinstance(other, MatrixZonotope):
            return NotImplemented
        v = as_float_tensor("vector", other, like=self.center)
        if v.ndim == 0 or v.shape[-1] != self.dim:
            raise ValueError(
                f"a translation vector must have shape (..., d) with d = {self.dim}, "
                f"got {tuple(v.shape)}"
            )
        check_same(("zonotope", "vector"), (self.center, v))
        _broadcast(("zonotope", "vector"), self.batch_shape, v.shape[:-1])
        return Zonotope._new(self.center + v, self.generators)

    __radd__ = __add__

    def __neg__(self) -> Zonotope:
        return Zonotope._new(-self.center, -self.generators)

    def __sub__(self, other) -> Zonotope:
        """``z - v`` translates; ``z1 - z2`` is ``z1 + (-z2)`` = {a - b} (NOT the Pontryagin
        difference)."""
        if not isinstance(other, Zonotope):
            other = as_float_tensor("vector", other, like=self.center)
        return self + (-other)

    def __rsub__(self, other) -> Zonotope:
        return (-self) + other

    def __mul__(self, s) -> Zonotope:
        s = _as_scalar("scale", s)
        return Zonotope._new(self.center * s, self.generators * s)

    __rmul__ = __mul__

    # -- bounds ---------------------------------------------------------------------------------
    def interval_hull(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Tightest axis-aligned box ``[c - delta, c + delta]`` with ``delta = sum_g |G_g|``
        (``def:zonotope``). Returns ``(lower, upper)``, each ``(..., d)``."""
        delta = self.generators.abs().sum(dim=-2)  # (..., d)
        return self.center - delta, self.center + delta

    def ihw(self) -> torch.Tensor:
        """The paper's interval-hull width ``IHW = sum_g ||G_g||_1`` (``thm:ihw-calibration``),
        shape ``(...)``: the sum of the interval hull's half-widths."""
        return self.generators.abs().sum(dim=(-2, -1))

    def support(self, direction) -> torch.Tensor:
        """Support function ``h(l) = <l, c> + sum_g |<l, G_g>|`` = max of ``<l, x>`` over the set.

        ``direction``: ``(..., d)``, broadcast against the batch (so ``(k, d)`` gives ``k`` values
        for one zonotope, and ``(k, 1, d)`` gives ``(k, B)`` for a batch of ``B``).
        Directions are not normalised."""
        l = as_float_tensor("direction", direction, like=self.center)
        if l.ndim == 0 or l.shape[-1] != self.dim:
            raise ValueError(
                f"direction must have shape (..., d) with d = {self.dim}, got {tuple(l.shape)}"
            )
        check_same(("zonotope", "direction"), (self.center, l))
        _broadcast(("zonotope", "direction"), self.batch_shape, l.shape[:-1])
        lc = (l * self.center).sum(-1)  # (...)
        lg = (self.generators * l.unsqueeze(-2)).sum(-1)  # (..., m)
        return lc + lg.abs().sum(-1)

    # -- membership ---------------------------------------------------------------------------
    def contains(self, points, tol: float | None = None) -> torch.Tensor:
        """Exact membership test ``p in Z``; returns a bool tensor of the broadcast batch shape.

        ``points``: ``(..., d)``, broadcast against the batch (``(n, d)`` tests ``n`` points in one
        zonotope; ``(n, 1, d)`` tests them in each of ``B`` zonotopes -> ``(n, B)``).

        Method (exact up to ``tol``):
        - d = 1: ``|p - c| <= sum_g |G_g| + tol``.
        - d = 2: the halfspace representation. The facet normals of a 2-D zonotope are the
          perpendiculars of its generators; we also test the generator directions and the axes,
          which are valid (support-function) inequalities and make the test exact for degenerate
          zonotopes (segments, points). With unit normals n:
          ``|<n, p - c>| <= sum_g |<n, G_g>| + tol``.
        - d >= 3: a linear program per point (``scipy.optimize.linprog``, HiGHS) minimising the
          max-norm residual ``t = ||c + G^T a - p||_inf`` over ``a in [-1, 1]^m``; inside iff
          ``t <= tol``. Points outside the interval hull are rejected without an LP. Runs on the
          CPU in float64, one LP per (point, zonotope) pair: fine for hundreds, slow for 1e5.
        ``tol=None`` uses ``sqrt(eps(dtype)) * max(1, max|c| + max delta)``.
        """
        p = as_float_tensor("points", points, like=self.center)
        if p.ndim == 0 or p.shape[-1] != self.dim:
            raise ValueError(
                f"points must have shape (..., d) with d = {self.dim}, got {tuple(p.shape)}"
            )
        check_same(("zonotope", "points"), (self.center, p))
        check_finite("points", p)
        batch = _broadcast(("zonotope", "points"), self.batch_shape, p.shape[:-1])
        c, G = self.center.detach(), self.generators.detach()
        p = p.detach()
        delta = G.abs().sum(-2)  # (..., d)
        if tol is None:
            scale = max(1.0, float(c.abs().max()) + float(delta.max()))
            tol = math.sqrt(torch.finfo(c.dtype).eps) * scale
        if tol < 0:
            raise ValueError(f"tol must be >= 0, got {tol}")
        if self.dim == 1:
            return ((p - c).abs() <= delta + tol).squeeze(-1).expand(batch)
        if self.dim == 2:
            return self._contains_2d(c, G, p, tol).expand(batch)
        return self._contains_lp(c, G, p, tol, batch)

    @staticmethod
    def _contains_2d(c, G, p, tol) -> torch.Tensor:
        perp = torch.stack([-G[..., 1], G[..., 0]], dim=-1)  # (..., m, 2) facet normals
        eye = torch.eye(2, dtype=c.dtype, device=c.device).expand(*G.shape[:-2], 2, 2)
        N = torch.cat([perp, G, eye], dim=-2)  # (..., 2m + 2, 2)
        norm = N.norm(dim=-1, keepdim=True)  # (..., K, 1)
        valid = norm.squeeze(-1) > 0
        N = N / norm.clamp_min(torch.finfo(c.dtype).tiny)
        h = (N.unsqueeze(-2) * G.unsqueeze(-3)).sum(-1).abs().sum(-1)  # (..., K) support of Z - c
        q = (p - c).unsqueeze(-2)  # (..., 1, 2)
        viol = (N * q).sum(-1).abs() - h  # (..., K)
        return ((viol <= tol) | ~valid).all(-1)

    @staticmethod
    def _contains_lp(c, G, p, tol, batch) -> torch.Tensor:
        import numpy as np
        from scipy.optimize import linprog

        d, m = c.shape[-1], G.shape[-2]
        n = batch.numel()
        cb = c.expand(*batch, d).reshape(n, d).cpu().double().numpy()
        Gb = G.expand(*batch, m, d).reshape(n, m, d).cpu().double().numpy()
        pb = p.expand(*batch, d).reshape(n, d).cpu().double().numpy()
        delta = np.abs(Gb).sum(1)
        inside = np.abs(pb - cb) <= delta + tol  # interval-hull prefilter (necessary condition)
        out = inside.all(1)
        # LP variables x = [a (m), t]: minimise t s.t. -t <= (G^T a - (p - c))_i <= t, |a| <= 1.
        cost = np.zeros(m + 1)
        cost[-1] = 1.0
        ones = np.ones((d, 1))
        bounds = [(-1.0, 1.0)] * m + [(0.0, None)]
        for i in np.flatnonzero(out):
            if m == 0:
                out[i] = np.abs(pb[i] - cb[i]).max() <= tol
                continue
            GT = Gb[i].T  # (d, m)
            A_ub = np.block([[GT, -ones], [-GT, -ones]])
            r = pb[i] - cb[i]
            res = linprog(
                cost, A_ub=A_ub, b_ub=np.concatenate([r, -r]), bounds=bounds, method="highs"
            )
            out[i] = res.status == 0 and res.fun <= tol
        return torch.as_tensor(out, device=c.device).reshape(batch)

    # -- vertices and volume ------------------------------------------------------------------
    def vertices(self) -> torch.Tensor:
        """Vertices of the polytope.

        d = 2 (batched, differentiable): the standard construction. Flip every generator into the
        upper half-plane, sort by angle, start at the lowest point ``c - sum_g g`` and walk ``+2g``
        in angle order, then ``-2g`` in the same order. Returns ``(..., 2m, 2)`` counter-clockwise;
        zero or parallel generators give repeated or collinear points (the polygon is still exact,
        and the count stays ``2m`` so batches stack). ``m = 0`` returns the centre, ``(..., 1, 2)``.

        d = 3 (one zonotope, ``batch_shape == ()``): candidates are, for every pair of non-parallel
        generators (i, j) and normal ``n = g_i x g_j``, the facet corners
        ``c + sum_{k: <n,g_k> != 0} sign(<n,g_k>) g_k`` plus every sign pattern of the tied
        generators (those with ``<n,g_k> = 0``)
        and their mirror images; ``scipy.spatial.ConvexHull`` keeps the extreme ones. Cost
        ``O(m^2 2^t)`` candidates for at most ``t`` generators in one plane (``t = 2`` in general
        position). Needs a full-dimensional zonotope (generator rank 3). Returns ``(k, 3)``,
        differentiable in ``c`` and ``G`` (the selection itself is not).
        """
        if self.dim == 2:
            return self._vertices_2d()
        if self.dim == 3:
            return self._vertices_3d()
        raise ValueError(f"vertices() needs a zonotope of dim d = 2 or 3, got d = {self.dim}")

    def _vertices_2d(self) -> torch.Tensor:
        c, G = self.center, self.generators
        if self.num_generators == 0:
            return c.unsqueeze(-2)
        flip = (G[..., 1] < 0) | ((G[..., 1] == 0) & (G[..., 0] < 0))  # (..., m)
        G = torch.where(flip.unsqueeze(-1), -G, G)  # all in the upper half-plane
        angle = torch.atan2(G[..., 1], G[..., 0])  # (..., m) in [0, pi)
        order = angle.argsort(dim=-1)
        Gs = G.gather(-2, order.unsqueeze(-1).expand_as(G))  # (..., m, 2) sorted by angle
        start = c - G.sum(-2)  # lowest point
        steps = torch.cat([2 * Gs, -2 * Gs], dim=-2)  # (..., 2m, 2) edge vectors, CCW
        walk = torch.cumsum(steps, dim=-2)[..., :-1, :]  # the last step returns to start
        walk = torch.cat([torch.zeros_like(walk[..., :1, :]), walk], dim=-2)
        return start.unsqueeze(-2) + walk  # (..., 2m, 2)

    def _vertices_3d(self) -> torch.Tensor:
        import numpy as np
        from scipy.spatial import ConvexHull

        if self.batch_shape != ():
            raise ValueError(
                f"vertices() for d = 3 takes one zonotope (batch_shape ()), got batch_shape "
                f"{tuple(self.batch_shape)}; index it first, e.g. z[0]"
            )
        G = self.generators.detach().cpu().double().numpy()  # (m, 3)
        m = G.shape[0]
        if m < 3 or np.linalg.matrix_rank(G) < 3:
            raise ValueError(
                "vertices() for d = 3 needs generators of rank 3 (a full-dimensional zonotope)"
            )
        scale = np.abs(G).max()
        eps = 1e-12 * scale**3 * max(m, 1)
        signs = []  # sign vectors S with vertex = c + S @ G
        for i, j in itertools.combinations(range(m), 2):
            n = np.cross(G[i], G[j])
            if np.linalg.norm(n) <= 1e-12 * scale**2:
                continue  # parallel pair: no facet of its own
            proj = G @ n  # (m,)
            s = np.sign(proj)
            tied = np.flatnonzero(np.abs(proj) <= eps)  # generators lying in this facet's plane
            if tied.size > 16:
                raise ValueError(
                    f"vertices(): {tied.size} coplanar generators; reduce() them first"
                )
            combos = np.array(list(itertools.product((-1.0, 1.0), repeat=tied.size)))  # (2^t, t)
            S = np.repeat(s[None], len(combos), axis=0)
            S[:, tied] = combos
            signs.extend([S, -S])
        S = np.unique(np.concatenate(signs), axis=0)  # (K, m)
        hull = ConvexHull(S @ G)
        S = torch.as_tensor(S[hull.vertices], dtype=self.dtype, device=self.device)
        return self.center + S @ self.generators  # (k, 3)

    def volume(self, limit: int = 100_000) -> torch.Tensor:
        """Exact d-dimensional volume ``2^d sum_{|S| = d} |det G_S|`` over all d-subsets S of the
        generators (the zonotope tiles into parallelotopes; McMullen 1971). In 2-D this is the area
        of the polygon from :meth:`vertices`. ``(...)``, differentiable. Fewer than d generators: 0.

        Cost ``C(m, d)`` determinants; raises ``ValueError`` when ``C(m, d) > limit`` (then
        :meth:`reduce` first, which gives an upper bound)."""
        d, m = self.dim, self.num_generators
        n_sub = math.comb(m, d)
        if n_sub > limit:
            raise ValueError(
                f"volume() needs C(m, d) = C({m}, {d}) = {n_sub} determinants > limit = {limit}"
            )
        if n_sub == 0:
            return self.center.new_zeros(self.batch_shape)
        idx = torch.tensor(list(itertools.combinations(range(m), d)), device=self.device)  # (C, d)
        sub = self.generators[..., idx, :]  # (..., C, d, d)
        return (2.0**d) * torch.linalg.det(sub).abs().sum(-1)

    # -- reduction and sampling ---------------------------------------------------------------
    def reduce(self, order: float) -> Zonotope:
        """Girard's order reduction (Girard 2005; CORA ``reduce(Z, 'girard', order)``).

        Zero generators go first, as in zonopy and CORA (``deleteZerosGenerators``): a zonotope
        with at most ``order * d`` nonzero generators is returned exactly, without its zero
        generators. Otherwise keeps the ``floor(d (order - 1))`` generators with the largest
        ``||g||_1 - ||g||_inf`` and boxes the rest into ``d`` axis-aligned generators (their
        interval hull). In a batch each zonotope is decided on its own nonzero generators (the
        exact ones padded with zero generators to the batch's count). The result has at most
        ``order * d`` generators and CONTAINS the original. A zonotope already within the budget,
        zero generators counted, is returned unchanged. ``order`` is a real number >= 1 (1 gives
        the interval hull)."""
        if isinstance(order, bool) or not isinstance(order, Real) or not order >= 1:
            raise ValueError(f"order must be a real number >= 1, got {order!r}")
        d, m = self.dim, self.num_generators
        if m <= order * d:
            return self
        G = self.generators
        n_out = int(math.floor(d * order + 1e-9))  # the budget in generators
        nonzero = (G != 0).any(-1)  # (..., m)
        n_nonzero = nonzero.sum(-1)  # (...,)
        # each zonotope's nonzero generators first, in their order (a stable sort of 0/1 keys)
        first = torch.sort((~nonzero).to(torch.uint8), dim=-1, stable=True).indices
        compact = G.gather(-2, first.unsqueeze(-1).expand(*first.shape, d))  # (..., m, d)
        most = int(n_nonzero.max()) if n_nonzero.numel() else 0
        if most <= n_out:
            return Zonotope._new(self.center, compact[..., :most, :])
        n_keep = n_out - d
        score = G.abs().sum(-1) - G.abs().amax(-1)  # (..., m)
        keep_idx = score.topk(n_keep, dim=-1).indices  # (..., n_keep)
        keep = torch.zeros_like(score, dtype=torch.bool).scatter(-1, keep_idx, True)
        kept = G.gather(-2, keep_idx.unsqueeze(-1).expand(*keep_idx.shape, d))  # (..., n_keep, d)
        box = (G.abs() * (~keep).unsqueeze(-1)).sum(-2)  # (..., d) half-widths of the rest
        girard = torch.cat([kept, torch.diag_embed(box)], dim=-2)  # (..., n_out, d)
        exact = (n_nonzero <= n_out)[..., None, None]
        return Zonotope._new(self.center, torch.where(exact, compact[..., :n_out, :], girard))

    def sample(
        self, n: int, generator: torch.Generator | None = None, seed: int | None = None
    ) -> torch.Tensor:
        """``n`` points ``c + G^T alpha`` with ``alpha ~ U[-1, 1]^m`` (uniform in the coefficients,
        NOT uniform in the set). Returns ``(n, *batch_shape, d)``."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0, got {n!r}")
        gen = _make_generator(generator, seed)
        alpha = _uniform_signed((n, *self.batch_shape, self.num_generators), gen, self.center)
        return self.center + (alpha.unsqueeze(-1) * self.generators).sum(-2)  # (n, ..., d)


# ---------------------------------------------------------------------------------------------
# Matrix zonotope
# ---------------------------------------------------------------------------------------------


class MatrixZonotope(_CenterAndGenerators):
    """A (batch of) matrix zonotope(s) ``{M_c + sum_l xi_l M_l : xi in [-1, 1]^L}`` (``eq:mz``).

    Args:
        center: ``(..., p, q)``; generators: ``(..., L, p, q)`` (batch shapes broadcast-compatible).

    ``mz @ z`` (z a :class:`Zonotope` in ``R^q``) is the over-approximating product (see
    :meth:`matmul_zonotope`); ``mz @ x`` for a tensor ``x`` ``(..., q)`` is the exact zonotope
    ``{M x}``; ``mz @ mz2`` the over-approximating matrix product; ``A @ mz`` an exact left map.
    """

    __array_priority__ = 1000
    _event_ndim, _noun = 2, "matrix zonotope"

    def __init__(self, center, generators):
        c_like = generators if isinstance(generators, torch.Tensor) else None
        c = as_float_tensor("center", center, like=c_like)
        G = as_float_tensor("generators", generators, like=c)
        check_ndim("center", c, 2, "(..., p, q)")
        check_ndim("generators", G, 3, "(..., L, p, q)")
        if G.shape[-2:] != c.shape[-2:]:
            raise ValueError(
                f"generators must have shape (..., L, p, q) with (p, q) = {tuple(c.shape[-2:])} "
                f"(from center), got {tuple(G.shape)}"
            )
        check_same(("center", "generators"), (c, G))
        check_finite("center", c)
        check_finite("generators", G)
        batch = _broadcast(("center", "generators"), c.shape[:-2], G.shape[:-3])
        self.center = c.expand(*batch, *c.shape[-2:])  # (..., p, q)
        self.generators = G.expand(*batch, *G.shape[-3:])  # (..., L, p, q)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.center.shape[-2:])

    def __repr__(self) -> str:
        return (
            f"MatrixZonotope(shape={self.shape}, num_generators={self.num_generators}, "
            f"batch_shape={tuple(self.batch_shape)}, dtype={self.dtype}, device={self.device})"
        )

    def sample(
        self, k: int, generator: torch.Generator | None = None, seed: int | None = None
    ) -> torch.Tensor:
        """``k`` matrices ``M_c + sum_l xi_l M_l`` with ``xi ~ U[-1, 1]^L``, shape
        ``(k, *batch_shape, p, q)``."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"k must be an int >= 0, got {k!r}")
        gen = _make_generator(generator, seed)
        xi = _uniform_signed((k, *self.batch_shape, self.num_generators), gen, self.center)
        return self.center + (xi[..., None, None] * self.generators).sum(-3)

    def vec(self) -> Zonotope:
        """The same set as a zonotope in ``R^{p q}`` (row-major ``vec``): centre ``(..., p q)``,
        generators ``(..., L, p q)``. Membership, bounds and volume of a matrix zonotope are
        those of this zonotope."""
        return Zonotope._new(self.center.flatten(-2), self.generators.flatten(-2))

    def interval_hull(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Entry-wise bounds ``(lower, upper)``, each ``(..., p, q)``: ``M_c -/+ sum_l |M_l|``."""
        radius = self.generators.abs().sum(-3)  # (..., p, q)
        return self.center - radius, self.center + radius

    def contains(self, matrices, tol: float | None = None) -> torch.Tensor:
        """Exact membership ``M in MZ`` (:meth:`Zonotope.contains` of :meth:`vec`: a linear
        program per matrix). ``matrices``: ``(..., p, q)``, broadcast against the batch; returns
        a bool tensor of the broadcast batch shape."""
        M = as_float_tensor("matrices", matrices, like=self.center)
        if M.ndim < 2 or tuple(M.shape[-2:]) != self.shape:
            raise ValueError(
                f"matrices must have shape (..., p, q) = (..., {self.shape[0]}, {self.shape[1]}), "
                f"got {tuple(M.shape)}"
            )
        return self.vec().contains(M.flatten(-2), tol=tol)

    def __add__(self, other) -> MatrixZonotope:
        """Minkowski sum of matrix zonotopes (exact): centres add, generators concatenate."""
        if not isinstance(other, MatrixZonotope):
            return NotImplemented
        if other.shape != self.shape:
            raise ValueError(
                f"matrix zonotope sum needs equal shapes, got {self.shape} and other {other.shape}"
            )
        check_same(("mz", "other"), (self.center, other.center))
        batch = _broadcast(("mz", "other"), self.batch_shape, other.batch_shape)
        G = torch.cat(
            [
                self.generators.expand(*batch, -1, -1, -1),
                other.generators.expand(*batch, -1, -1, -1),
            ],
            dim=-3,
        )
        return MatrixZonotope._new(self.center + other.center, G)

    def linear_map(self, A) -> MatrixZonotope:
        """Exact left map ``A MZ = <A M_c, A M_l>``; ``A``: ``(..., k, p)``."""
        A = as_float_tensor("A", A, like=self.center)
        check_ndim("A", A, 2, f"(..., k, p) with p = {self.shape[0]}")
        if A.shape[-1] != self.shape[0]:
            raise ValueError(
                f"A must have shape (..., k, p) with p = {self.shape[0]}, got {tuple(A.shape)}"
            )
        check_same(("mz", "A"), (self.center, A))
        _broadcast(("mz", "A"), self.batch_shape, A.shape[:-2])
        return MatrixZonotope._new(A @ self.center, A.unsqueeze(-3) @ self.generators)

    def __rmatmul__(self, A) -> MatrixZonotope:
        return self.linear_map(A)

    def __matmul__(self, other):
        if isinstance(other, Zonotope):
            return self.matmul_zonotope(other)
        if isinstance(other, MatrixZonotope):
            return self.matmul_matrix_zonotope(other)
        return self.apply(other)

    def apply(self, x) -> Zonotope:
        """``{M x : M in MZ}`` for a fixed vector ``x`` ``(..., q)``: exactly the zonotope
        ``<M_c x, {M_l x}>`` (``L`` generators). This is how MZ-attention maps a value point."""
        x = as_float_tensor("x", x, like=self.center)
        if x.ndim == 0 or x.shape[-1] != self.shape[1]:
            raise ValueError(
                f"x must have shape (..., q) with q = {self.shape[1]}, got {tuple(x.shape)}"
            )
        check_same(("mz", "x"), (self.center, x))
        check_finite("x", x)
        _broadcast(("mz", "x"), self.batch_shape, x.shape[:-1])
        c = (self.center @ x.unsqueeze(-1)).squeeze(-1)  # (..., p)
        G = (self.generators @ x[..., None, :, None]).squeeze(-1)  # (..., L, p)
        return Zonotope._new(c, G)

    def matmul_zonotope(self, z: Zonotope) -> Zonotope:
        """The product ``MZ Z`` (paper, ``def:zonotope`` and ``app:zonotope``; CORA ``mtimes``).

        With ``M = M_c + sum_l xi_l M_l`` and ``x = c + sum_k alpha_k g_k``,
        ``M x = M_c c + sum_k alpha_k M_c g_k + sum_l xi_l M_l c + sum_{l,k} xi_l alpha_k M_l g_k``.
        The exact set ``{M x}`` is NOT in general a zonotope: the bilinear coefficients
        ``xi_l alpha_k`` are tied to ``xi`` and ``alpha``. Replacing each product by an independent
        ``beta_lk in [-1, 1]`` (valid since ``|xi_l alpha_k| <= 1``) gives the zonotope returned
        here, centre ``M_c c`` and the ``h + L + L h`` generators, in this order,
        ``{M_c g_k}_k  u  {M_l c}_l  u  {M_l g_k}_{l,k}`` (l-major). It CONTAINS the exact set and
        is the standard tight over-approximation; no generator is merged or dropped (zero ones
        stay)."""
        if z.dim != self.shape[1]:
            raise ValueError(
                f"mz @ z needs z of dim q = {self.shape[1]} (mz shape {self.shape}), "
                f"got d = {z.dim}"
            )
        check_same(("mz", "z"), (self.center, z.center))
        batch = _broadcast(("mz", "z"), self.batch_shape, z.batch_shape)
        Mc, Ml = self.center, self.generators  # (..., p, q), (..., L, p, q)
        c, G = z.center, z.generators  # (..., q), (..., h, q)
        center = (Mc @ c.unsqueeze(-1)).squeeze(-1)  # (..., p)
        g_center = G @ Mc.transpose(-1, -2)  # (..., h, p): M_c g_k
        g_mat = (Ml @ c[..., None, :, None]).squeeze(-1)  # (..., L, p): M_l c
        g_cross = G.unsqueeze(-3) @ Ml.transpose(-1, -2)  # (..., L, h, p): M_l g_k
        L, h, p = self.num_generators, z.num_generators, self.shape[0]
        gens = torch.cat(
            [
                g_center.expand(*batch, h, p),
                g_mat.expand(*batch, L, p),
                g_cross.expand(*batch, L, h, p).reshape(*batch, L * h, p),
            ],
            dim=-2,
        )  # (..., h + L + L h, p)
        return Zonotope._new(center, gens)

    def matmul_matrix_zonotope(self, other: MatrixZonotope) -> MatrixZonotope:
        """``MZ1 MZ2`` with the same over-approximation as :meth:`matmul_zonotope`: centre
        ``A_c B_c`` and generators ``{A_c B_j} u {A_l B_c} u {A_l B_j}`` (``L2 + L1 + L1 L2``)."""
        if other.shape[0] != self.shape[1]:
            raise ValueError(
                f"mz @ other needs other of shape ({self.shape[1]}, r), got {other.shape}"
            )
        check_same(("mz", "other"), (self.center, other.center))
        batch = _broadcast(("mz", "other"), self.batch_shape, other.batch_shape)
        Ac, Al, Bc, Bl = self.center, self.generators, other.center, other.generators
        p, r = self.shape[0], other.shape[1]
        L1, L2 = self.num_generators, other.num_generators
        cross = Al.unsqueeze(-3) @ Bl.unsqueeze(-4)  # (..., L1, L2, p, r)
        gens = torch.cat(
            [
                (Ac.unsqueeze(-3) @ Bl).expand(*batch, L2, p, r),
                (Al @ Bc.unsqueeze(-3)).expand(*batch, L1, p, r),
                cross.expand(*batch, L1, L2, p, r).reshape(*batch, L1 * L2, p, r),
            ],
            dim=-3,
        )
        return MatrixZonotope._new(Ac @ Bc, gens)
