"""Attention blocks of mzlite: masked multi-head attention, MAB/SAB/ISAB/PMA (Lee et al. 2019)
and their MZ counterparts (paper Eq. eq:zono-proj, eq:mz-main). Models, configs and the
documented conventions and choices are in ``mzlite.nn`` (read its docstring first).

Everything here is the math in eager PyTorch. A function marked ``@fused.fast_path(...)`` (six:
head layouts, and the residual + LayerNorm of the ``"zonotope"`` and ``"layernorm"`` readings)
may run as a C++ kernel on CPU instead, the same math; ``mzlite.nn.fused.fast_path`` decides
where, and nothing else here does."""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..zonotope import Zonotope
from . import fused
from .details import AttentionDetails

# ----------------------------------------------------------------------------- attention math
# Written once and used by every attention of the package (standard, MZ and the baselines):
# heads are split off the feature axis, scores are scaled dot products, padded keys get -inf, and
# pooling and zero-padding read only real elements (mask True = real).


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``(B, n, H d_k)`` -> ``(B, H, n, d_k)`` (a view): head ``h`` owns features
    ``h d_k .. (h+1) d_k - 1``."""
    B, n, d = x.shape
    return x.view(B, n, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, H, n, d_k)`` -> ``(B, n, H d_k)``: the heads concatenated, inverse of
    ``split_heads``."""
    B, H, n, dk = x.shape
    return x.transpose(1, 2).reshape(B, n, H * dk)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax over keys; ``scores`` (B, H, nq, nkv), ``mask`` (B, nkv) True = real key.

    Computed in float32 and returned in the scores' dtype: under bf16 autocast the weights are
    then rounded once, not accumulated in bf16 (a no-op for float32 and float64 scores)."""
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
    if scores.dtype in (torch.bfloat16, torch.float16):
        return scores.softmax(dim=-1, dtype=torch.float32).to(scores.dtype)
    return scores.softmax(dim=-1)


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked scaled dot-product attention, heads batched.

    ``q`` (B, H, nq, d_k), ``k`` (B, H, nkv, d_k), ``v`` (B, H, nkv, d_v), ``mask`` (B, nkv)
    True = real key (None: all real) -> ``(out (B, H, nq, d_v), weights (B, H, nq, nkv))`` with
    ``weights = softmax(q k^T / sqrt(d_k))`` over the real keys (padded keys get exactly 0)."""
    weights = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), mask)
    return weights @ v, weights


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean over real elements: ``x`` (B, n, d) -> (B, d)."""
    if mask is None:
        return x.mean(dim=1)
    m = mask.unsqueeze(-1).to(x.dtype)  # (B, n, 1)
    return (x * m).sum(dim=1) / m.sum(dim=1)


def masked_sum(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Sum over real elements: ``x`` (B, n, d) -> (B, d)."""
    if mask is None:
        return x.sum(dim=1)
    return (x * mask.unsqueeze(-1).to(x.dtype)).sum(dim=1)


def zero_pad(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Zero the padded positions of ``x`` (B, n, ...) so that nothing can read them by mistake."""
    if mask is None:
        return x
    return x * mask.reshape(*mask.shape, *([1] * (x.ndim - 2))).to(x.dtype)


class Packing:
    """Where the real elements of a padded batch are, to run per-element work on them only.

    ``Packing(mask)`` for ``mask`` (B, n), True = real. A *packed* tensor ``(R, ...)`` holds the
    ``N`` real elements of a padded ``(B, n, ...)`` one, set by set in order, in its first ``N``
    rows; ``pack`` and ``unpack`` convert (``unpack`` puts zeros at the padding). Per-element
    operations (linear maps, LayerNorm, FFN, dropout) give the same values on either layout, so
    a packed stream skips the padding (a third of a batch of sets of 10-30) and never reads it,
    NaN included.

    ``R`` is ``N`` rounded up to a multiple of ``rows_multiple``; the ``R - N`` spare rows repeat
    the first real element and are dropped by ``unpack`` (so they get no gradient). Why: oneDNN
    builds a bf16 matmul kernel per shape, ~1 ms each (measured); with ``N`` varying from batch
    to batch every linear map would build new ones each step, with ``R`` few shapes recur."""

    def __init__(self, mask: torch.Tensor, rows_multiple: int = 64):
        self.mask = mask  # (B, n)
        self.B, self.n = mask.shape
        self.batch, self.pos = mask.nonzero(as_tuple=True)  # (N,), (N,): row-major order
        self.flat = self.batch * self.n + self.pos  # (N,) index into the flattened (B n)
        self.N = len(self.flat)
        spare = -self.N % rows_multiple
        self.rows = torch.cat([self.flat, self.flat[:1].expand(spare)])  # (R,)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, n, ...)`` -> ``(R, ...)``: the real elements (then the spare rows)."""
        return x.flatten(0, 1).index_select(0, self.rows)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """``(R, ...)`` -> ``(B, n, ...)`` with zeros at the padding."""
        out = x.new_zeros(self.B * self.n, *x.shape[1:])
        return out.index_copy(0, self.flat, x[: self.N]).view(self.B, self.n, *x.shape[1:])

    @classmethod
    def full(cls, B: int, n: int, device=None) -> Packing:
        """The packing of a batch without padding: packed rows are the ``B n`` slots in order."""
        return cls(torch.ones(B, n, dtype=torch.bool, device=device), rows_multiple=1)

    @property
    def slot_row(self) -> torch.Tensor:
        """``(B n,)`` int64: the packed row of each slot of the padded batch, -1 at padding."""
        if not hasattr(self, "_slot_row"):
            slot_row = torch.full((self.B * self.n,), -1, dtype=torch.long, device=self.flat.device)
            self._slot_row = slot_row.index_copy_(
                0, self.flat, torch.arange(self.N, device=self.flat.device)
            )
        return self._slot_row

    @fused.fast_path(fused.UNPACK_HEADS)
    def unpack_heads(self, x: torch.Tensor, n_heads: int) -> torch.Tensor:
        """Packed generator rows ``(R, n_g, H d_k)`` -> head-major ``(B, H, n, n_g, d_k)`` with
        zeros at the padding (what attention over the set's elements reads)."""
        # row copies, then one permuting copy: faster (forward and backward) than one
        # advanced-index write into the permuted layout (measured, 2.5 vs 3.9 ms at batch 128)
        ng, d = x.shape[1:]
        x = self.unpack(x).view(self.B, self.n, ng, n_heads, d // n_heads)
        return x.permute(0, 3, 1, 2, 4).contiguous()

    @fused.fast_path(fused.PACK_HEADS)
    def pack_heads(self, x: torch.Tensor) -> torch.Tensor:
        """Head-major ``(B, H, n, n_g, d_k)`` -> packed ``(R, n_g, H d_k)``."""
        B, H, n, ng, dk = x.shape
        return self.pack(x.permute(0, 2, 3, 1, 4).reshape(B, n, ng, H * dk))


# ----------------------------------------------------------------------------- helpers


@fused.fast_path(fused.HEADS_FIRST)
def _heads_first(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Generator rows ``(B, n, n_g, H d_k)`` -> head-major ``(B, H, n, n_g, d_k)``."""
    B, n, ng, d = x.shape
    return x.view(B, n, ng, n_heads, d // n_heads).permute(0, 3, 1, 2, 4)


@fused.fast_path(fused.HEADS_LAST)
def _heads_last(x: torch.Tensor) -> torch.Tensor:
    """Head-major ``(B, H, n, n_g, d_k)`` -> ``(B, n, n_g, H d_k)``, inverse of ``_heads_first``."""
    B, H, n, ng, dk = x.shape
    return x.permute(0, 2, 3, 1, 4).reshape(B, n, ng, H * dk)


def _block_diag(M: torch.Tensor) -> torch.Tensor:
    """Per-head matrices ``(H, k, k)`` -> block-diagonal ``(H k, H k)``, without a loop."""
    H, k, _ = M.shape
    eye = torch.eye(H, dtype=M.dtype, device=M.device)
    return torch.einsum("hij,hg->higj", M, eye).reshape(H * k, H * k)


def init_linear(module: nn.Module) -> None:
    """Xavier-uniform weight and zero bias for a ``Linear`` (other modules: unchanged)."""
    if isinstance(module, nn.Linear):  # App. app:impl: "All other linear layers use Xavier"
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


# ----------------------------------------------------------------------------- standard blocks


class MultiheadAttention(nn.Module):
    """Masked multi-head scaled dot-product attention (heads batched, explicit weights).

    ``forward(xq (B, nq, d), xkv (B, nkv, d), mask (B, nkv) | None) -> (out (B, nq, d),
    attn (B, H, nq, nkv))``; ``mask`` True = real key. Equals ``torch.nn.MultiheadAttention``
    with ``key_padding_mask=~mask`` and the same weights (tested)."""

    def __init__(self, d: int, *, n_heads: int):
        super().__init__()
        self.n_heads, self.d_k = n_heads, d // n_heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, xq, xkv, mask=None):
        return self.attend_values(xq, xkv, self.v(xkv), mask)

    def attend_values(self, xq, xkv, v, mask=None):
        """``forward`` with the values ``v`` (B, nkv, d) given in place of ``W_V x_kv + b_V``:
        the hook for a variant's own value map (``HyperAttention``)."""
        H = self.n_heads
        q, k = split_heads(self.q(xq), H), split_heads(self.k(xkv), H)  # (B, H, n, dk)
        out, attn = attend(q, k, split_heads(v, H), mask)  # (B, H, nq, dk)
        return self.o(merge_heads(out)), attn  # attn: (B, H, nq, nkv)


class MAB(nn.Module):
    """Multihead Attention Block, post-LN: ``h = LN(x_q + Attn)``, ``out = LN(h + FFN(h))``."""

    def __init__(self, d: int, *, n_heads: int, d_ff: int, dropout: float, name: str = "mab"):
        super().__init__()
        self.name = name
        self.attn = MultiheadAttention(d, n_heads=n_heads)
        self.ln0, self.ln1 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Linear(d_ff, d))
        self.drop = nn.Dropout(dropout)

    def forward(self, xq, xkv, mask=None, details: list | None = None):
        a, attn = self.attn(xq, xkv, mask)
        h = self.ln0(xq + self.drop(a))
        out = self.ln1(h + self.drop(self.ffn(h)))
        if details is not None:
            details.append(AttentionDetails(attn, name=self.name, output=out))
        return out


class SAB(nn.Module):
    """Set Attention Block ``MAB(X, X)``; permutation-equivariant; padded rows are zeroed."""

    def __init__(self, d: int, *, n_heads: int, d_ff: int, dropout: float, name: str = "sab"):
        super().__init__()
        self.mab = MAB(d, n_heads=n_heads, d_ff=d_ff, dropout=dropout, name=name)

    def forward(self, x, mask=None, details=None):
        return zero_pad(self.mab(x, x, mask, details), mask)


class ISAB(nn.Module):
    """Induced SAB: ``H = MAB(I, X)`` over ``m`` learned inducing points, then ``MAB(X, H)``."""

    def __init__(
        self, d: int, *, n_heads: int, d_ff: int, dropout: float, m: int, name: str = "isab"
    ):
        super().__init__()
        self.inducing = nn.Parameter(nn.init.xavier_uniform_(torch.empty(m, d)))  # (m, d)
        mab = dict(n_heads=n_heads, d_ff=d_ff, dropout=dropout)
        self.mab0 = MAB(d, **mab, name=name + ".inducing")
        self.mab1 = MAB(d, **mab, name=name + ".elements")

    def forward(self, x, mask=None, details=None):
        ind = self.inducing.expand(x.shape[0], -1, -1)  # (B, m, d)
        h = self.mab0(ind, x, mask, details)  # (B, m, d): attends to real elements only
        return zero_pad(self.mab1(x, h, None, details), mask)  # every inducing row is real


class PMA(nn.Module):
    """Pooling by Multihead Attention: ``k`` learned seeds attend to the real elements."""

    def __init__(
        self, d: int, *, n_heads: int, d_ff: int, dropout: float, k: int, name: str = "pma"
    ):
        super().__init__()
        self.seeds = nn.Parameter(nn.init.xavier_uniform_(torch.empty(k, d)))  # (k, d)
        self.mab = MAB(d, n_heads=n_heads, d_ff=d_ff, dropout=dropout, name=name)

    def forward(self, x, mask=None, details=None):
        return self.mab(self.seeds.expand(x.shape[0], -1, -1), x, mask, details)  # (B, k, d)


# ----------------------------------------------------------------------------- MZ blocks

# where the matrix zonotope acts on the centres (MZAttention, choice 9 of mzlite.nn)
LAYER_READINGS = ("literal", "centre_adaptive")


class ZonotopeProjection(nn.Module):
    """Eq. eq:zono-proj: ``c = LN(GELU(W_c x + b_c))``, ``G = (W_g x + b_g) / sqrt(n_g d)``.

    ``x`` (B, n, d_in) -> ``c`` (B, n, d), ``G`` (B, n, n_g, d)."""

    def __init__(self, d_in: int, d: int, *, n_g: int):
        super().__init__()
        self.n_g, self.d = n_g, d
        self.W_c, self.ln, self.W_g = nn.Linear(d_in, d), nn.LayerNorm(d), nn.Linear(d_in, n_g * d)

    def forward(self, x):
        c = self.ln(F.gelu(self.W_c(x)))  # (B, n, d)
        G = self.W_g(x).view(*x.shape[:-1], self.n_g, self.d) / math.sqrt(self.n_g * self.d)
        return c, G  # G: (B, n, n_g, d), small at init so tokens start near plain vectors


class MZAttention(nn.Module):
    """Matrix Zonotopic Attention, Eq. eq:mz-main; heads batched, no loop over heads or generators.

    Per head ``h``: scores on centres (masked softmax), centre and generators aggregated with the
    same weights ``(c_hat, G_hat) = sum_j alpha_ij (v_j^c, v_j^G)``, then

        o_c = M_c c_hat,   o_G = G_hat M_c^T + W_mix stack_l[gamma_l M_l c_hat],
        gamma = tanh(W_gamma cbar_kv),  cbar_kv = masked mean of the key/value input centres,

    heads concatenated and projected by ``W_o`` (centres) and bias-free ``W_og`` (generators).
    ``mz_attention_reference`` (below) writes exactly this with one einsum a line; ``forward``
    computes the same with the heads batched, ``M_c`` folded into the weights and packed sets.
    Parameters: ``M_c`` (H, d_k, d_k) = I, ``M_l`` (H, L, d_k, d_k) ~ N(0, 0.02^2), ``W_mix``
    (H, n_g, L) ~ N(0, 0.1^2), ``gate = Linear(d, H L)`` (choice 3), ``q, k, v, o``, ``v_g, o_g``.

    With ``M_c = I`` the centre stream is exactly standard masked multi-head attention
    (Prop. prop:perm); it never depends on the generators, ``M_l`` or ``W_mix``, unless
    ``gen_qk`` (tab:genqk's MZ-GenQK, choice 8): then queries and keys also read the tokens'
    interval-hull half-widths, ``q = W_q c_q + W_q^gen sum_g |G_q,g|`` (keys alike), and
    ``forward`` needs the queries' generators ``Gq``.

    ``layer_reading`` (choice 9 of ``mzlite.nn``, ``LAYER_READINGS``) says where the matrix
    zonotope acts on the centres. ``"literal"`` (default) is Eq. eq:mz-main as printed, above:
    ``o_c = M_c c_hat``, and the gated ``M_l`` reach only the generator stream.
    ``"centre_adaptive"`` is def:relop's ``T(v_hat; S) = M(mu(S)) v_hat`` (and Fig. fig:money's
    "replaces W_V with M(mu(S))"): ``o_c = M(mu) c_hat`` with ``M(mu) = M_c + sum_l gamma_l M_l``,
    the operator of ``details.operators``, evaluated at the set's gate summary; the generator
    stream is the literal one. At initialisation (``M_c = I``, ``M_l ~ N(0, 0.02^2)``) the
    literal centre stream is standard attention whatever ``M_l`` is; the centre-adaptive one
    differs from it by ``W_o blockdiag(sum_l gamma_l M_l) c_hat``, first order in ``M_l``, and
    is standard attention exactly where ``M_l = 0``. The centre-adaptive reading never runs the
    fused CPU kernels (``fused.disabled()``).

    ``forward(cq (B, nq, d), ckv (B, nkv, d), Gkv (B, nkv, n_g, d), mask (B, nkv) | None,
    need_details=False) -> (o_c (B, nq, d), o_G (B, nq, n_g, d), details | None)``, ``details``
    an ``AttentionDetails`` with ``attention`` (B, H, nq, nkv), ``gates`` (B, H, L) and
    ``operators`` ``M(mu)`` (B, H, d_k, d_k).

    The model's fast path on CPU passes the set's ``Packing`` as ``mask``: then the side that
    comes packed, centres ``(R, d)`` and generators ``(R, n_g, d)`` (queries, keys and values, or
    both), is the set, and the other side holds learned tokens, all real; packed queries give
    packed outputs. Same values as the padded layout (``_layouts``).
    """

    def __init__(
        self,
        d: int,
        *,
        n_heads: int,
        n_g: int,
        L: int,
        gen_own_weights: bool = True,
        gen_qk: bool = False,
        layer_reading: str = "literal",
    ):
        super().__init__()
        if layer_reading not in LAYER_READINGS:
            raise ValueError(
                f"layer_reading must be one of {LAYER_READINGS}, got {layer_reading!r}"
            )
        self.layer_reading = layer_reading
        fused.prepare()  # where the CPU kernels would run, build them now, not in a forward pass
        self.n_heads, self.d_k, self.n_g, self.L = n_heads, d // n_heads, n_g, L
        dk = self.d_k
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        # choice 2: own bias-free generator value/output weights (None: share v/o without bias)
        self.v_g = nn.Linear(d, d, bias=False) if gen_own_weights else None
        self.o_g = nn.Linear(d, d, bias=False) if gen_own_weights else None
        self.M_c = nn.Parameter(torch.eye(dk).repeat(n_heads, 1, 1))  # (H, dk, dk)
        self.M_l = nn.Parameter(0.02 * torch.randn(n_heads, L, dk, dk))  # (H, L, dk, dk)
        self.W_mix = nn.Parameter(0.1 * torch.randn(n_heads, n_g, L))  # (H, n_g, L)
        self.gate = nn.Linear(d, n_heads * L) if L > 0 else None  # W_gamma, choice 3
        # choice 8 (tab:genqk's MZ-GenQK): W_q^gen, W_k^gen add each token's interval-hull
        # half-width sum_g |G_g| to its query and key. Zero at init, so the model starts as
        # MZ-Full (and as standard attention); Parameters, not Linear, so init_linear keeps them 0
        self.gen_qk = gen_qk
        self.W_q_gen = nn.Parameter(torch.zeros(d, d)) if gen_qk else None
        self.W_k_gen = nn.Parameter(torch.zeros(d, d)) if gen_qk else None

    def forward(self, cq, ckv, Gkv, mask=None, need_details: bool = False, Gq=None):
        with _kernels_for(self.layer_reading):
            return self._forward(cq, ckv, Gkv, mask, need_details, Gq)

    def _forward(self, cq, ckv, Gkv, mask, need_details, Gq):
        q_packing, kv_packing, mask = _layouts(cq, ckv, mask)
        if self.gen_qk:  # half-widths before unpacking: (R, d) packed or (B, n, d)
            if Gq is None:
                raise ValueError("an MZAttention with gen_qk needs Gq, the queries' generators")
            wq = Gq.abs().sum(-2)
            wkv = Gkv.abs().sum(-2)
            wq = q_packing.unpack(wq) if q_packing is not None else wq  # (B, nq, d)
            wkv = kv_packing.unpack(wkv) if kv_packing is not None else wkv  # (B, nkv, d)
        if q_packing is not None:
            cq = q_packing.unpack(cq)  # (B, nq, d): centres are small, attention reads sets
        if kv_packing is not None:
            ckv = kv_packing.unpack(ckv)  # (B, nkv, d), zeros at padding
        B, nq, d = cq.shape
        nkv, H, dk, ng, L = ckv.shape[1], self.n_heads, self.d_k, self.n_g, self.L
        q, k = self.q(cq), self.k(ckv)  # (B, nq, d), (B, nkv, d)
        if self.gen_qk:
            q, k = q + F.linear(wq, self.W_q_gen), k + F.linear(wkv, self.W_k_gen)
        q, k = split_heads(q, H), split_heads(k, H)  # (B, H, n, dk)
        vc = split_heads(self.v(ckv), H)  # (B, H, nkv, dk)
        # M_c folded into the weights next to it (aggregation and the projections are linear):
        # o_c = W_o blockdiag(M_c) c_hat and G_hat M_c^T = aggregate(G W_vg^T blockdiag(M_c)^T),
        # so no pass over an activation applies M_c, and the largest tensor (B, n, n_g, d) is
        # projected once
        Mc = _block_diag(self.M_c)  # (d, d)
        W_vg = Mc @ (self.v if self.v_g is None else self.v_g).weight  # (d, d), no bias
        if kv_packing is not None:  # projected on real elements only, then laid out head-major
            vG = kv_packing.unpack_heads(F.linear(Gkv, W_vg), H)  # (B, H, nkv, ng, dk)
        else:
            vG = _heads_first(F.linear(Gkv, W_vg), H)  # (B, H, nkv, ng, dk)
        vG = vG.reshape(B * H, nkv, ng * dk)  # head-major, one bmm for all generators
        c_hat, attn = attend(q, k, vc, mask)  # (B, H, nq, dk), (B, H, nq, nkv)
        a = attn.reshape(B * H, nq, nkv)  # the generators are aggregated with the same weights

        if self.gate is None:  # L = 0: no matrix generators, no gates
            gamma = cq.new_zeros(B, H, 0)
            o_G = torch.bmm(a, vG)  # (B H, nq, ng dk): G_hat M_c^T
        else:
            gamma = torch.tanh(self.gate(masked_mean(ckv, mask))).view(B, H, L)  # (B, H, L)
            # W_mix stack_l[gamma_l M_l c_hat] = c_hat N^T with the per-set, per-head operator
            # N[e, (g, d)] = sum_l W_mix[g, l] gamma_l M_l[d, e]: one bmm of (nq, dk) x (dk, ng dk)
            # fused with the aggregation G_hat M_c^T (baddbmm), no tiny per-token matmuls
            coef = self.W_mix * gamma[:, :, None, :]  # (B, H, ng, L)
            Nt = torch.einsum("bhgl,hlde->bhegd", coef, self.M_l)
            Nt = Nt.reshape(B * H, dk, ng * dk).to(c_hat.dtype)  # (B H, dk, ng dk)
            o_G = torch.baddbmm(torch.bmm(c_hat.reshape(B * H, nq, dk), Nt), a, vG)

        adaptive = self.layer_reading == "centre_adaptive" and self.gate is not None
        ops = None
        if adaptive or need_details:  # M(mu) = M_c + sum_l gamma_l M_l per set and head
            ops = self.M_c + torch.einsum("bhl,hlde->bhde", gamma, self.M_l)  # (B, H, dk, dk)
        if adaptive:  # def:relop: o_c = M(mu) c_hat, applied before W_o
            o_c = merge_heads(c_hat @ ops.transpose(-1, -2).to(c_hat.dtype))  # (B, nq, d)
            W_oc = self.o.weight
        else:  # Eq. eq:mz-main: o_c = M_c c_hat, M_c folded into W_o
            o_c = merge_heads(c_hat)  # (B, nq, d)
            W_oc = self.o.weight @ Mc
        if q_packing is not None:  # back to the real queries before the output projections
            o_c, o_G = q_packing.pack(o_c), q_packing.pack_heads(o_G.view(B, H, nq, ng, dk))
        else:
            o_G = _heads_last(o_G.view(B, H, nq, ng, dk))  # (B, nq, ng, d)
        o_c = F.linear(o_c, W_oc, self.o.bias)  # (B, nq, d) or (R, d)
        o_G = F.linear(o_G, (self.o if self.o_g is None else self.o_g).weight)  # bias-free
        info = AttentionDetails(attn, gamma, ops) if need_details else None
        return o_c, o_G, info


def _kernels_for(layer_reading: str):
    """The context an MZ layer of ``layer_reading`` runs in: the fused CPU kernels serve the
    literal reading only (they were written and tested for it), so any other reading runs the
    eager path inside ``fused.disabled()``."""
    return contextlib.nullcontext() if layer_reading == "literal" else fused.disabled()


def _layouts(cq, ckv, mask):
    """``(q_packing, kv_packing, key mask)`` of an attention call: with the set's ``Packing`` as
    ``mask``, each side that comes packed (2-D centres ``(R, d)``) is unpacked with it, and the
    key mask is the packing's where the keys are the set, None where they are learned tokens."""
    if not isinstance(mask, Packing):
        return None, None, mask
    q_packing = mask if cq.ndim == 2 else None
    kv_packing = mask if ckv.ndim == 2 else None
    if q_packing is None and kv_packing is None:
        raise ValueError("a Packing as mask needs packed queries or keys: (R, d) centres")
    return q_packing, kv_packing, None if kv_packing is None else mask.mask


def mz_attention_reference(att: MZAttention, cq, ckv, Gkv, mask=None, Gq=None):
    """Eq. eq:mz-main as the paper writes it (for ``att.layer_reading == "centre_adaptive"``
    with def:relop's ``o_c = M(mu) c_hat``), with the parameters of ``att``: the readable
    reference ``MZAttention.forward`` is tested against (tests/test_nn.py). Padded layout only,
    no packing, nothing folded into the weights; one einsum per line of the equation.

    ``cq`` (B, nq, d), ``ckv`` (B, nkv, d), ``Gkv`` (B, nkv, n_g, d), ``mask`` (B, nkv) True =
    real key (None: all real; every set needs one), ``Gq`` (B, nq, n_g, d) for ``gen_qk`` ->
    ``(o_c (B, nq, d), o_G (B, nq, n_g, d))``. Index names: b set, i query, j key, h head,
    g generator, l matrix generator, d and e the head's coordinates."""
    B, nkv = ckv.shape[:2]
    H, dk = att.n_heads, att.d_k
    if mask is None:
        mask = torch.ones(B, nkv, dtype=torch.bool, device=ckv.device)

    def heads(x):  # (..., H d_k) -> (..., H, d_k)
        return x.unflatten(-1, (H, dk))

    q, k = att.q(cq), att.k(ckv)
    if att.gen_qk:  # choice 8: queries and keys also read the interval-hull half-widths
        q = q + Gq.abs().sum(-2) @ att.W_q_gen.T
        k = k + Gkv.abs().sum(-2) @ att.W_k_gen.T
    W_vg = (att.v if att.v_g is None else att.v_g).weight  # choice 2: bias-free
    q, k, v_c, v_G = heads(q), heads(k), heads(att.v(ckv)), heads(Gkv @ W_vg.T)

    # alpha_ij = softmax_j(q_i^T k_j / sqrt(d_k)) over the real keys
    scores = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(dk)
    alpha = scores.masked_fill(~mask[:, None, None, :], float("-inf")).softmax(-1)
    # (c_hat_i, G_hat_i) = sum_j alpha_ij (v_j^c, v_j^G)
    c_hat = torch.einsum("bhij,bjhd->bihd", alpha, v_c)
    G_hat = torch.einsum("bhij,bjghd->bighd", alpha, v_G)
    # o_c = M_c c_hat;  o_G = G_hat M_c^T (M_c on each generator row) + W_mix stack_l[...]
    o_c = torch.einsum("hde,bihe->bihd", att.M_c, c_hat)
    o_G = torch.einsum("hde,bighe->bighd", att.M_c, G_hat)
    if att.L > 0:
        # gamma = tanh(W_gamma cbar_kv), cbar_kv the mean of the real key/value input centres
        cbar = (ckv * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        gamma = torch.tanh(att.gate(cbar)).view(B, H, att.L)
        stack = torch.einsum("bhl,hlde,bihe->bihld", gamma, att.M_l, c_hat)  # gamma_l M_l c_hat
        o_G = o_G + torch.einsum("hgl,bihld->bighd", att.W_mix, stack)
        if att.layer_reading == "centre_adaptive":  # def:relop: o_c = M(mu) c_hat
            o_c = o_c + stack.sum(-2)  # M(mu) c_hat = M_c c_hat + sum_l gamma_l M_l c_hat
    # heads concatenated, then W_o (centres) and the bias-free W_og (generators)
    W_og = (att.o if att.o_g is None else att.o_g).weight
    return att.o(o_c.flatten(-2)), o_G.flatten(-2) @ W_og.T


GEN_NORMS = ("zonotope", "none", "layernorm")


def zonotope_layer_norm(
    c: torch.Tensor, G: torch.Tensor, ln: nn.LayerNorm
) -> tuple[torch.Tensor, torch.Tensor]:
    """LayerNorm of a token zonotope: ``ln`` on the centre, its affine map on the generators.

    ``ln(c) = w * (c - mean(c)) / sigma(c) + b`` is, for the centre's own ``mean`` and
    ``sigma``, the affine map ``x -> A x + t`` with ``A = diag(w) (I - 11^T / d) / sigma(c)``.
    Applied to the whole zonotope ``{c + G^T alpha}``, that map gives the zonotope with centre
    ``ln(c)`` and generators ``A G_g = w * (G_g - mean(G_g)) / sigma(c)``: the exact image of the
    token under the map the block applies to its centre (no bias: a translation moves the centre
    only). ``c`` (..., d), ``G`` (..., n_g, d) -> the same shapes."""
    # at least float32 (a bf16 stream under autocast is normalised in float32, as LayerNorm is)
    acc = torch.promote_types(c.dtype, torch.float32)
    w, b = ln.weight, ln.bias
    if w is not None:
        w, b = w.to(acc), (None if b is None else b.to(acc))
    c_acc, G_acc = c.to(acc), G.to(acc)
    var = torch.var(c_acc, dim=-1, unbiased=False, keepdim=True)  # (..., 1)
    scale = torch.rsqrt(var + ln.eps).unsqueeze(-2)  # (..., 1, 1)
    if w is not None:
        scale = scale * w  # (..., 1, d)
    G_out = (G_acc - G_acc.mean(dim=-1, keepdim=True)) * scale  # (..., n_g, d)
    c_out = F.layer_norm(c_acc, ln.normalized_shape, w, b, ln.eps)  # (..., d)
    return c_out.to(c.dtype), G_out.to(G.dtype)


def add_dropped(c, G, a_c, a_G, p: float):
    """``(c + drop(a_c), G + drop(a_G))``, dropout with probability ``p`` (0: none). Choice 4: one
    mask per token, shared by its centre ``(..., d)`` and all its generators ``(..., n_g, d)``;
    ``addcmul`` fuses mask and residual into one pass."""
    if p == 0.0:
        return c + a_c, G + a_G
    keep = torch.empty_like(a_c).bernoulli_(1 - p).div_(1 - p)  # (..., d): a row per token
    return torch.addcmul(c, a_c, keep), torch.addcmul(G, a_G, keep.unsqueeze(-2))


@fused.fast_path(fused.ADD_ZONOTOPE_NORM)
def add_zonotope_norm(c, G, a_c, a_G, ln: nn.LayerNorm, p: float):
    """The post-LN of choice 7's ``"zonotope"`` reading (the default): residual, dropout (one
    mask per token, ``add_dropped``) and ``zonotope_layer_norm`` with the centre's ``ln``."""
    hc, hG = add_dropped(c, G, a_c, a_G, p)
    return zonotope_layer_norm(hc, hG, ln)


@fused.fast_path(fused.ADD_NORM_ROWS)
def add_norm_rows(c, G, a_c, a_G, ln_c, ln_G, p: float):
    """The post-LN of choice 7's ``"layernorm"`` reading: ``(ln_c(c + drop(a_c)),
    ln_G(G + drop(a_G)))``, ``ln_G`` a LayerNorm of its own on every generator row, one dropout
    mask per token (``add_dropped``)."""
    hc, hG = add_dropped(c, G, a_c, a_G, p)
    return ln_c(hc), ln_G(hG)


class MZMAB(nn.Module):
    """MZ Multihead Attention Block: ``MZAttention`` + post-LN + FFN, for both streams.

    Centres: ``h = LN(c_q + o_c)``, ``c = LN(h + FFN(h))`` (the standard block). Generators get
    the residuals ``G_q + o_G`` and ``H + FFN_g(H)`` with the lighter FFN ``d -> d_ff/2 -> d``
    (choice 2), and at each LayerNorm ``gen_norm`` (choice 7, ``GEN_NORMS``):

    - ``"zonotope"`` (default): the centre LayerNorm's affine map applied to the generators
      (``zonotope_layer_norm``), the exact image of the token zonotope under what the block does
      to its centre; generators stay small perturbations (paper Sec. eq:zono-proj).
    - ``"none"``: residual only; the paper writes no normalisation of the generators.
    - ``"layernorm"``: a LayerNorm of their own on every generator row (``ln0_g``, ``ln1_g``),
      mzlite's first reading, kept as an ablation: it rescales each generator to unit RMS after
      the first block, so the untrained model is far from standard attention.
    """

    def __init__(
        self,
        d: int,
        *,
        n_heads: int,
        d_ff: int,
        dropout: float,
        n_g: int,
        L: int,
        gen_own_weights: bool = True,
        gen_norm: str = "zonotope",
        gen_qk: bool = False,
        layer_reading: str = "literal",
        name: str = "mzmab",
    ):
        super().__init__()
        if gen_norm not in GEN_NORMS:
            raise ValueError(f"gen_norm must be one of {GEN_NORMS}, got {gen_norm!r}")
        self.name, self.p, self.gen_norm = name, dropout, gen_norm
        self.attn = MZAttention(
            d,
            n_heads=n_heads,
            n_g=n_g,
            L=L,
            gen_own_weights=gen_own_weights,
            gen_qk=gen_qk,
            layer_reading=layer_reading,
        )
        self.ln0, self.ln1 = nn.LayerNorm(d), nn.LayerNorm(d)
        if gen_norm == "layernorm":
            self.ln0_g, self.ln1_g = nn.LayerNorm(d), nn.LayerNorm(d)
        else:
            self.ln0_g = self.ln1_g = None
        self.ffn = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Linear(d_ff, d))
        f_g = max(1, d_ff // 2)
        self.ffn_g = nn.Sequential(nn.Linear(d, f_g), nn.GELU(), nn.Linear(f_g, d))

    def _add_norm(self, c, G, a_c, a_G, ln_c, ln_G):
        """Residual, dropout (one mask per token, choice 4) and the block's LayerNorm of both
        streams (choice 7)."""
        p = self.p if self.training else 0.0
        if self.gen_norm == "layernorm":
            return add_norm_rows(c, G, a_c, a_G, ln_c, ln_G, p)
        if self.gen_norm == "zonotope":
            return add_zonotope_norm(c, G, a_c, a_G, ln_c, p)
        hc, hG = add_dropped(c, G, a_c, a_G, p)
        return ln_c(hc), hG  # "none"

    def forward(self, cq, Gq, ckv, Gkv, mask=None, details: list | None = None):
        """``mask``: the keys' (B, nkv) mask, or the set's ``Packing`` (``MZAttention``)."""
        with _kernels_for(self.attn.layer_reading):  # the whole block: its norms too
            # with packed queries every step after the attention is per token, on real tokens
            a_c, a_G, info = self.attn(cq, ckv, Gkv, mask, details is not None, Gq=Gq)
            # (B, nq, d), (B, nq, n_g, d), or (R, d), (R, n_g, d) for packed queries
            hc, hG = self._add_norm(cq, Gq, a_c, a_G, self.ln0, self.ln0_g)
            c, G = self._add_norm(hc, hG, self.ffn(hc), self.ffn_g(hG), self.ln1, self.ln1_g)
        if details is not None:
            details.append(replace(info, name=self.name, output=token_zonotopes(c, G)))
        return c, G


class _LearnedZonotopes(nn.Module):
    """``k`` learned zonotope tokens (inducing points, PMA seeds): centres and generators."""

    def __init__(self, d: int, *, k: int, n_g: int):
        super().__init__()
        self.c = nn.Parameter(nn.init.xavier_uniform_(torch.empty(k, d)))
        self.G = nn.Parameter(0.02 * torch.randn(k, n_g, d))

    def forward(self, B):
        return self.c.expand(B, -1, -1), self.G.expand(B, -1, -1, -1)


class MZSAB(nn.Module):
    """MZ Set Attention Block ``MZMAB(Z, Z)``; permutation-equivariant; padded rows zeroed.

    ``forward(c (B, n, d), G (B, n, n_g, d), mask (B, n) | None, details=None)``; the model's
    fast path passes packed tokens and the set's ``Packing`` as ``mask`` (``MZAttention``)."""

    def __init__(self, d: int, *, name: str = "mzsab", **mab):
        """``mab``: the keyword arguments of ``MZMAB`` (``n_heads, d_ff, dropout, n_g, L`` and
        optionally ``gen_own_weights``)."""
        super().__init__()
        self.mab = MZMAB(d, **mab, name=name)

    def forward(self, c, G, mask=None, details=None):
        c, G = self.mab(c, G, c, G, mask, details)
        if isinstance(mask, Packing):  # packed tokens (R, d), (R, n_g, d): no padding to zero
            return c, G
        return zero_pad(c, mask), zero_pad(G, mask)


class MZISAB(nn.Module):
    """MZ Induced SAB: ``m`` learned inducing zonotopes attend to the set, the set attends back."""

    def __init__(self, d: int, *, m: int, n_g: int, name: str = "mzisab", **mab):
        """``m`` inducing zonotopes of ``n_g`` generators; ``mab``: the other keyword arguments
        of ``MZMAB`` (``n_heads, d_ff, dropout, L`` and optionally ``gen_own_weights``)."""
        super().__init__()
        self.inducing = _LearnedZonotopes(d, k=m, n_g=n_g)
        mab = dict(mab, n_g=n_g)
        self.mab0 = MZMAB(d, **mab, name=name + ".inducing")
        self.mab1 = MZMAB(d, **mab, name=name + ".elements")

    def forward(self, c, G, mask=None, details=None):
        packed = isinstance(mask, Packing)  # tokens (R, d), (R, n_g, d): no padding to zero
        ic, iG = self.inducing(mask.B if packed else c.shape[0])  # (B, m, d), (B, m, n_g, d)
        hc, hG = self.mab0(ic, iG, c, G, mask, details)  # attends to real elements only
        # every inducing token is real: no key mask (packed: the packing unpacks the queries)
        c, G = self.mab1(c, G, hc, hG, mask if packed else None, details)
        return (c, G) if packed else (zero_pad(c, mask), zero_pad(G, mask))


class MZPMA(nn.Module):
    """MZ Pooling by Multihead Attention: ``k`` learned seed zonotopes attend to the set."""

    def __init__(self, d: int, *, k: int, n_g: int, name: str = "mzpma", **mab):
        """``k`` seed zonotopes of ``n_g`` generators; ``mab``: the other keyword arguments of
        ``MZMAB`` (``n_heads, d_ff, dropout, L`` and optionally ``gen_own_weights``)."""
        super().__init__()
        self.seeds = _LearnedZonotopes(d, k=k, n_g=n_g)
        self.mab = MZMAB(d, **mab, n_g=n_g, name=name)

    def forward(self, c, G, mask=None, details=None):
        sc, sG = self.seeds(mask.B if isinstance(mask, Packing) else c.shape[0])
        return self.mab(sc, sG, c, G, mask, details)  # (B, k, d), (B, k, n_g, d)


def token_zonotopes(c, G):
    """Token zonotopes ``(c, G)`` as one batched ``mzlite.zonotope.Zonotope``."""
    return Zonotope(c, G)


def _fused_measurement_cases():
    """``(kernel name, dtype, kernel step, eager step)`` for every kernel and dtype, on fit's
    shapes (``MEASURED_SHAPE``): a packed batch of sets of 10-30 elements, its padded twin, and
    its generator stream. Random inputs from a private generator (the global RNG untouched)."""
    shape = fused.MEASURED_SHAPE
    B, ng, d, H = shape["sets"], shape["n_g"], shape["d"], shape["heads"]
    g = torch.Generator().manual_seed(0)
    mask = torch.arange(30)[None] < torch.randint(10, 31, (B,), generator=g)[:, None]
    pk = Packing(mask)
    T, p = len(pk.rows), 0.1
    with torch.no_grad():
        ln_c, ln_G = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
    for dtype in (torch.float32, torch.bfloat16):

        def leaf(*size, dtype=dtype):
            return torch.randn(*size, generator=g).to(dtype).requires_grad_()

        c, a_c, G, a_G = leaf(T, d), leaf(T, d), leaf(T, ng, d), leaf(T, ng, d)
        heads = leaf(B, H, pk.n, ng, d // H)
        cases = {
            add_zonotope_norm: (c, G, a_c, a_G, ln_c, p),
            add_norm_rows: (c, G, a_c, a_G, ln_c, ln_G, p),
            Packing.unpack_heads: (pk, G, H),
            Packing.pack_heads: (pk, heads),
            _heads_first: (leaf(B, pk.n, ng, d), H),
            _heads_last: (heads,),
        }
        for f, args in cases.items():
            yield (
                f.kernel.name,
                dtype,
                fused.fwd_bwd(f.kernel.run, *args),
                fused.fwd_bwd(f.eager, *args),
            )


fused.register_cases(_fused_measurement_cases)
