"""Every baseline of the paper, masked, parameter-matchable (Sec. sec:experiments, App. app:impl).

``build_model(name, d_in, d_out)`` builds any model of the paper by name: the baselines below and
the standard / MZ Set Transformers of ``mzlite.nn``. ``match_width`` finds the width that gives a
target parameter count (the paper matches ST-Large, Perceiver, HyperNet, LA-ST to MZ's ~360-368K),
``param_table`` lists every count beside the paper's.

=============  ==========================================================  =========  ==========
name           model                                                       paper      ours (d_in=8)
=============  ==========================================================  =========  ==========
deepsets       DeepSets: phi MLP -> masked sum -> rho MLP (Zaheer 2017)     36K        34,305
st             Set Transformer (``mzlite.nn``, Lee et al. 2019)             208K       207,745
st_large       ST-Large, d=80, d_ff=200 (``mzlite.nn`` variant)             362K       361,041
st_film        ST + FiLM on the encoder blocks (Perez et al. 2018)         225K       224,385
hypernet       ST, encoder W_V(S) = W_V + U(mu) V^T, rank r=8              360K       342,913
perceiver      Perceiver: 16 latents, 1 cross + 8 self blocks, PMA          341K       340,609
la_st          ST with linear attention (elu+1) in the encoder              359K       207,745
slot           Slot Attention, 4 slots, 3 iterations (Locatello 2020)       59K        59,265
egnn           EGNN, h=140, 4 layers (Satorras et al. 2021)                 303K       552,861
mamba_pma      Mamba (mambapy) encoder + PMA, d=128, 3 layers               645K       632,705
st_meanpool    ST with masked mean pooling instead of PMA                   140K       140,737
mz_slim ...    MZ-Set Transformer variants (``mzlite.nn``)                  333K-417K  see table
=============  ==========================================================  =========  ==========

Defaults are the paper's base configuration (``d=64, H=4, d_ff=128``, two ISABs, dropout 0.1);
the parameter-matched rows of the paper are ``match_width(name, d_in, d_out, 365_000)``.

Conventions (as ``mzlite.nn``): ``model(x (B, n, d_in), mask (B, n) bool | None) -> (B, d_out)``,
``mask`` True for a real element. Padded rows of ``x`` are zeroed on entry, attention gives them
``-inf`` scores, every pooling is masked: appending padded rows never changes an output (tested).
Every model except ``mamba_pma`` is permutation invariant (``ModelSpec.invariant`` of
``mzlite.nn.MODELS`` says which; tested).

Choices the paper leaves open (each also named in the class that makes it)
--------------------------------------------------------------------------
1. Where the extra machinery sits. FiLM, the HyperNet update and linear attention act on the
   encoder's attention blocks (the two ISABs = four MABs); PMA, the SAB after it and the head
   are the standard ones, so every "PMA baseline" of tab:meb pools exactly as the Set
   Transformer does. This placement reproduces the paper's counts: FiLM on two blocks gives
   224,385 (225K at Task A's d_in=16: 224,897), HyperNet at r=64 gives 1,289,089 ("1.3M").
2. Identity at initialisation. FiLM's and HyperNet's generators are zero-initialised, so both start
   as the standard Set Transformer exactly (as MZ does, Prop. prop:perm), and learn a departure.
3. The context summary ``mu`` (FiLM, HyperNet) is the masked mean of the block's (key/value) input,
   as MZ's gates read ``cbar_kv`` (``mzlite.nn`` choice 3).
4. Non-attention baselines (DeepSets, Slot, EGNN) have no dropout, as in their papers; ReLU/SiLU as
   in their papers; heads are ``Linear(d, d) -> act -> Linear(d, d_out)`` everywhere.
5. Paper counts we could not reproduce with a natural design: EGNN's 303K at h=140, 4 layers (a
   standard Satorras layer at h=140 has 138K parameters; ``match_width("egnn", ..., 303_000)``
   gives h=104); LA-ST's 359K and HyperNet's 360K are matched widths (``match_width``); Mamba's 645K
   (ours 632,705 is the closest plain configuration we found: d=128, d_ff=2d, 3 Mamba layers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from .._checks import check_config_fields
from .attention import (
    MAB,
    PMA,
    SAB,
    MultiheadAttention,
    init_linear,
    masked_mean,
    masked_sum,
    merge_heads,
    split_heads,
    zero_pad,
)
from .models import (
    SetTransformer,
    SetTransformerConfig,
    check_set,
)

__all__ = [
    "DeepSets",
    "DeepSetsConfig",
    "FiLMSetTransformer",
    "HyperNetSetTransformer",
    "HyperNetConfig",
    "HyperAttention",
    "LinearAttention",
    "LinearAttentionSetTransformer",
    "Perceiver",
    "PerceiverConfig",
    "SlotAttention",
    "SlotAttentionConfig",
    "EGNN",
    "EGNNConfig",
    "EGNNLayer",
    "MambaPMA",
    "MambaPMAConfig",
    "MeanPoolSetTransformer",
]

# ----------------------------------------------------------------------------- helpers


def _pool(x: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    return masked_sum(x, mask) if how == "sum" else masked_mean(x, mask)


def _mlp(d_in: int, d_hidden: int, d_out: int, n_layers: int, act=nn.ReLU) -> nn.Sequential:
    """``n_layers`` Linear layers with ``act`` between them (none after the last)."""
    dims = [d_in] + [d_hidden] * (n_layers - 1) + [d_out]
    layers: list[nn.Module] = []
    for i in range(n_layers):
        layers += [nn.Linear(dims[i], dims[i + 1]), act()]
    return nn.Sequential(*layers[:-1])


def _head(d: int, d_out: int, act=nn.GELU) -> nn.Sequential:
    """The output head shared by every model: ``Linear(d, d) -> act -> Linear(d, d_out)``."""
    return nn.Sequential(nn.Linear(d, d), act(), nn.Linear(d, d_out))


def _encoder_mabs(model: SetTransformer):
    """The four MABs of the two ISABs (choice 1: where FiLM/HyperNet/linear attention act)."""
    for isab in model.enc:
        yield isab.mab0
        yield isab.mab1


def _st_config(cfg, default, overrides) -> SetTransformerConfig:
    return replace(cfg or default, **overrides)


# ----------------------------------------------------------------------------- Deep Sets


@dataclass
class DeepSetsConfig:
    """Deep Sets (Zaheer et al. 2017): ``rho(pool_i phi(x_i))``. Paper: 35-36K parameters.

    ``n_phi``/``n_rho``: Linear layers of each MLP (ReLU between, none after the last);
    ``pool``: ``"sum"`` (Zaheer et al.'s choice, default) or ``"mean"``. 34,305 + 128 (d_in - 8)
    parameters at the defaults (the paper does not give its layout)."""

    d_in: int = 8
    d_out: int = 1
    d_hidden: int = 128
    n_phi: int = 2
    n_rho: int = 2
    pool: str = "sum"

    def __post_init__(self):
        check_config_fields(
            self, ("d_in", "d_out", "d_hidden", "n_phi", "n_rho"), (), {"pool": ("sum", "mean")}
        )


class DeepSets(nn.Module):
    """``forward(x (B, n, d_in), mask (B, n) | None) -> (B, d_out)``; see ``DeepSetsConfig``."""

    def __init__(self, cfg: DeepSetsConfig | None = None, **overrides):
        super().__init__()
        self.cfg = cfg = replace(cfg or DeepSetsConfig(), **overrides)
        h = cfg.d_hidden
        self.phi = _mlp(cfg.d_in, h, h, cfg.n_phi)
        self.rho = _mlp(h, h, cfg.d_out, cfg.n_rho)

    def forward(self, x, mask=None):
        x, mask = check_set(x, mask, self.cfg.d_in, self.phi[0].weight)
        return self.rho(_pool(self.phi(x), mask, self.cfg.pool))  # (B, d_out)


# ----------------------------------------------------------------------------- ST + FiLM


class FiLMSetTransformer(SetTransformer):
    """ST + FiLM (Perez et al. 2018): each encoder block's output is modulated per set,
    ``h <- (1 + gamma(mu)) * h + beta(mu)`` with ``[gamma, beta] = Linear(d, 2d)(mu)`` and ``mu``
    the masked mean of the block's input. Diagonal context-conditioning: the paper's contrast to
    MZ's full operator ``M(mu)`` (App. task F: FiLM "provably cannot express rotation").

    Open choices: FiLM after each of the two ISABs (choice 1; 224,385 parameters at d_in=8, the
    paper's 225K), ``1 + gamma`` with a zero-initialised FiLM layer so that the model starts as
    the standard Set Transformer (choice 2). Config: ``SetTransformerConfig``."""

    def __init__(self, cfg: SetTransformerConfig | None = None, **overrides):
        super().__init__(_st_config(cfg, SetTransformerConfig(), overrides))
        d = self.cfg.d_model
        self.film = nn.ModuleList(nn.Linear(d, 2 * d) for _ in self.enc)
        for lin in self.film:
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)

    def encoder_block(self, i: int, h, mask, details):
        gamma, beta = self.film[i](masked_mean(h, mask)).unsqueeze(1).chunk(2, dim=-1)  # (B, 1, d)
        return zero_pad((1 + gamma) * self.enc[i](h, mask, details) + beta, mask)


# ----------------------------------------------------------------------------- HyperNet


class HyperAttention(MultiheadAttention):
    """Masked multi-head attention whose value projection depends on the set (HyperNet baseline):

        W_V(S) = W_V + U(mu) V^T,   U(mu) = reshape(Linear(d, d r)(mu)) in R^{d x r},

    ``mu`` the masked mean of the key/value input (choice 3), rank ``r``. ``v_factor="static"``:
    ``V`` in R^{d x r} is a learned matrix (the paper's ``U(mu) V_hyper``,
    App. app:hypernet-rank-ext; it reproduces the paper's 1.3M at r=64); ``"dynamic"``:
    ``V(mu)`` is generated like ``U``.
    The update acts on the full ``d x d`` value map, so ``r = 64 = d`` is the paper's "full
    key-dimension rank". ``U``'s generator is zero-initialised: ``W_V(S) = W_V`` at init.
    ``forward`` as ``MultiheadAttention``."""

    def __init__(self, d: int, *, n_heads: int, rank: int, v_factor: str = "static"):
        super().__init__(d, n_heads=n_heads)
        self.rank, self.v_factor = rank, v_factor
        self.U = nn.Linear(d, d * rank)
        nn.init.zeros_(self.U.weight)
        nn.init.zeros_(self.U.bias)
        if v_factor == "static":
            self.V = nn.Parameter(nn.init.xavier_uniform_(torch.empty(d, rank)))  # (d, r)
        else:
            self.V = nn.Linear(d, d * rank)  # Xavier, so U receives gradient at init

    def forward(self, xq, xkv, mask=None):
        B, d, r = xq.shape[0], xq.shape[-1], self.rank
        mu = masked_mean(xkv, mask)  # (B, d)
        U = self.U(mu).view(B, d, r)  # (B, d_out, r)
        V = self.V.expand(B, d, r) if self.v_factor == "static" else self.V(mu).view(B, d, r)
        dv = (xkv @ V) @ U.transpose(1, 2)  # x (U V^T)^T = (x V) U^T: (B, nkv, d), never d x d
        return self.attend_values(xq, xkv, self.v(xkv) + dv, mask)


@dataclass
class HyperNetConfig(SetTransformerConfig):
    """``SetTransformerConfig`` plus the HyperNet rank ``r`` (paper: 8 in tab:main-results, 8-32
    in tab:hypernet-rank, 16-64 in tab:hypernet-rank-ext) and ``v_factor`` (``HyperAttention``)."""

    rank: int = 8
    v_factor: str = "static"

    def __post_init__(self):
        super().__post_init__()
        check_config_fields(self, ("rank",), (), {"v_factor": ("static", "dynamic")})


class HyperNetSetTransformer(SetTransformer):
    """HyperNet baseline: the Set Transformer with ``HyperAttention`` (a low-rank input-dependent
    value update) in the four encoder MABs (choice 1). 342,913 parameters at the defaults
    (r=8, d=64); the paper's 360K (r=8), 370K (r=16), 359K (r=32) are matched widths
    (``match_width("hypernet", ..., rank=r)``), 1.3M is r=64 at d=64 (ours 1,289,089)."""

    def __init__(self, cfg: HyperNetConfig | None = None, **overrides):
        super().__init__(_st_config(cfg, HyperNetConfig(), overrides))
        c = self.cfg
        for mab in _encoder_mabs(self):
            mab.attn = HyperAttention(
                c.d_model, n_heads=c.n_heads, rank=c.rank, v_factor=c.v_factor
            )
            for lin in (mab.attn.q, mab.attn.k, mab.attn.v, mab.attn.o):
                init_linear(lin)
            if isinstance(mab.attn.V, nn.Linear):
                init_linear(mab.attn.V)


# ----------------------------------------------------------------------------- LA-ST


class LinearAttention(MultiheadAttention):
    """Masked linear attention (Katharopoulos et al. 2020), the kernel ``phi(x) = elu(x) + 1``:

        out_i = phi(q_i)^T sum_j phi(k_j) v_j^T / (phi(q_i)^T sum_j phi(k_j)),

    per head, sums over real keys only (``phi(k_j)`` of a padded key is zeroed; ``phi > 0`` keeps
    the denominator positive). No ``1/sqrt(d_k)`` (the kernel has none). Same parameters as
    ``MultiheadAttention``; ``forward`` returns ``(out, None)``: no weight matrix is formed."""

    def forward(self, xq, xkv, mask=None):
        H = self.n_heads
        q = F.elu(split_heads(self.q(xq), H)) + 1  # (B, H, nq, dk)
        k = F.elu(split_heads(self.k(xkv), H)) + 1  # (B, H, nkv, dk)
        v = split_heads(self.v(xkv), H)  # (B, H, nkv, dk)
        if mask is not None:
            k = k * mask[:, None, :, None].to(k.dtype)  # padded keys contribute nothing
        kv = k.transpose(-2, -1) @ v  # (B, H, dk, dk): sum_j phi(k_j) v_j^T
        den = q @ k.sum(dim=2).unsqueeze(-1)  # (B, H, nq, 1)
        out = (q @ kv) / den  # (B, H, nq, dk)
        return self.o(merge_heads(out)), None


class LinearAttentionSetTransformer(SetTransformer):
    """LA-ST: the Set Transformer with ``LinearAttention`` in the four encoder MABs; PMA keeps
    softmax attention ("every parameter-matched baseline using the standard PMA pooling,
    including LA-ST", Sec. sec:experiments). Open choice: the ISAB skeleton is kept, so LA-ST
    differs from ST only in the kernel (same parameter count, 207,745 at the defaults; the
    paper's 359K is a matched width). Config: ``SetTransformerConfig``."""

    def __init__(self, cfg: SetTransformerConfig | None = None, **overrides):
        super().__init__(_st_config(cfg, SetTransformerConfig(), overrides))
        for mab in _encoder_mabs(self):
            old = mab.attn
            mab.attn = LinearAttention(self.cfg.d_model, n_heads=self.cfg.n_heads)
            mab.attn.load_state_dict(old.state_dict())  # same shapes, already initialised


# ----------------------------------------------------------------------------- mean-pool ST


class MeanPoolSetTransformer(SetTransformer):
    """Set Transformer with PMA replaced by masked mean pooling ("Standard (mean-pool head)",
    tab:meb): ``InputProj -> ISAB x 2 -> masked mean -> head``. Open choice: no SAB after the
    pooling by default (``n_dec=0``; a SAB on one token is only an MLP), which reproduces the
    paper's 140K (ours 140,737). Config: ``SetTransformerConfig`` (``n_seeds`` must be 1)."""

    def __init__(self, cfg: SetTransformerConfig | None = None, **overrides):
        cfg = _st_config(cfg, SetTransformerConfig(n_dec=0), overrides)
        if cfg.n_seeds != 1:
            raise ValueError(f"n_seeds must be 1 for mean pooling, got {cfg.n_seeds}")
        super().__init__(cfg)
        self.pool = None  # no PMA

    def pool_set(self, h, mask, details):
        return masked_mean(h, mask).unsqueeze(1)  # (B, 1, d)


# ----------------------------------------------------------------------------- Perceiver


@dataclass
class PerceiverConfig:
    """Perceiver (Jaegle et al. 2021) for sets: ``n_latents`` learned latents; ``n_cross`` rounds
    of [latents cross-attend to the set (a masked MAB), ``n_self`` SABs on the latents] (weights
    not shared); then PMA over the latents (``pool="pma"``, the paper's "PMA-pool baselines") or
    their mean (``"mean"``); head. The paper's 341K fits 16 latents, 1 cross + 8 self blocks and
    PMA at d=64 (ours 340,609 at d_in=8); it does not state the layout."""

    d_in: int = 8
    d_out: int = 1
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    n_latents: int = 16
    n_cross: int = 1
    n_self: int = 8
    n_seeds: int = 1
    pool: str = "pma"
    dropout: float = 0.1

    def __post_init__(self):
        pos = ("d_in", "d_out", "d_model", "n_heads", "d_ff", "n_latents", "n_cross", "n_seeds")
        check_config_fields(self, pos, ("n_self",), {"pool": ("pma", "mean")})


class Perceiver(nn.Module):
    """``forward(x (B, n, d_in), mask (B, n) | None) -> (B, d_out)``; see ``PerceiverConfig``."""

    def __init__(self, cfg: PerceiverConfig | None = None, **overrides):
        super().__init__()
        self.cfg = c = replace(cfg or PerceiverConfig(), **overrides)
        d, mab = c.d_model, dict(n_heads=c.n_heads, d_ff=c.d_ff, dropout=c.dropout)
        self.embed = nn.Linear(c.d_in, d)
        self.latents = nn.Parameter(nn.init.xavier_uniform_(torch.empty(c.n_latents, d)))
        self.cross = nn.ModuleList(MAB(d, **mab, name=f"cross{i}") for i in range(c.n_cross))
        self.latent_blocks = nn.ModuleList(
            nn.ModuleList(SAB(d, **mab, name=f"latent{i}.{j}") for j in range(c.n_self))
            for i in range(c.n_cross)
        )
        k = c.n_seeds if c.pool == "pma" else 1
        self.pool = PMA(d, **mab, k=c.n_seeds, name="pool") if c.pool == "pma" else None
        self.head = _head(k * d, c.d_out)
        for mod in self.modules():
            init_linear(mod)

    def forward(self, x, mask=None):
        x, mask = check_set(x, mask, self.cfg.d_in, self.embed.weight)
        h = zero_pad(self.embed(x), mask)  # (B, n, d)
        z = self.latents.expand(x.shape[0], -1, -1)  # (B, m, d)
        for cross, blocks in zip(self.cross, self.latent_blocks, strict=True):
            z = cross(z, h, mask)  # latents read the real elements only
            for blk in blocks:
                z = blk(z)  # every latent is real
        z = self.pool(z) if self.pool is not None else z.mean(dim=1, keepdim=True)  # (B, k, d)
        return self.head(z.flatten(1))


# ----------------------------------------------------------------------------- Slot Attention


@dataclass
class SlotAttentionConfig:
    """Slot Attention (Locatello et al. 2020) as a set regressor: ``n_slots`` slots, ``n_iters``
    iterations (Locatello's 3), ``d_mlp`` the slot MLP's hidden width, ``eps`` Locatello's 1e-8.
    59,265 parameters at the defaults (the paper's 59K; it gives no layout).

    Open choices: inputs ``LN(Linear(x))`` (Locatello's CNN encoder has no set analogue); slots
    start from **learned per-slot vectors** instead of Locatello's sampled ``N(mu, sigma)``, so the
    output is a deterministic, permutation-invariant function of the set (sampled slots would make
    predictions random); the slots are mean-pooled into the head."""

    d_in: int = 8
    d_out: int = 1
    d_model: int = 64
    n_slots: int = 4
    n_iters: int = 3
    d_mlp: int = 128
    eps: float = 1e-8

    def __post_init__(self):
        check_config_fields(self, ("d_in", "d_out", "d_model", "n_slots", "n_iters", "d_mlp"))


class SlotAttention(nn.Module):
    """``forward(x (B, n, d_in), mask (B, n) | None) -> (B, d_out)``. Per iteration: softmax over
    **slots** (slots compete for each element), ``+ eps``, zero for padded elements, renormalise
    over elements (a weighted mean), GRU update, residual MLP. See ``SlotAttentionConfig``."""

    def __init__(self, cfg: SlotAttentionConfig | None = None, **overrides):
        super().__init__()
        self.cfg = c = replace(cfg or SlotAttentionConfig(), **overrides)
        d = c.d_model
        self.embed, self.ln_in = nn.Linear(c.d_in, d), nn.LayerNorm(d)
        self.slots = nn.Parameter(nn.init.xavier_uniform_(torch.empty(c.n_slots, d)))  # (K, d)
        self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.gru = nn.GRUCell(d, d)
        self.ln_slots, self.ln_mlp = nn.LayerNorm(d), nn.LayerNorm(d)
        self.mlp = _mlp(d, c.d_mlp, d, 2)
        self.head = _head(d, c.d_out, nn.ReLU)

    def forward(self, x, mask=None):
        c = self.cfg
        x, mask = check_set(x, mask, c.d_in, self.embed.weight)
        B, d = x.shape[0], c.d_model
        h = self.ln_in(self.embed(zero_pad(x, mask)))  # (B, n, d)
        k, v = self.k(h), self.v(h)  # (B, n, d)
        m = mask.unsqueeze(-1).to(h.dtype)  # (B, n, 1)
        slots = self.slots.expand(B, -1, -1)  # (B, K, d)
        for _ in range(c.n_iters):
            q = self.q(self.ln_slots(slots))  # (B, K, d)
            attn = (k @ q.transpose(1, 2) / math.sqrt(d)).softmax(dim=-1)  # (B, n, K)
            attn = (attn + c.eps) * m  # padded elements give nothing
            w = attn / attn.sum(dim=1, keepdim=True)  # (B, n, K): weighted mean over elements
            upd = w.transpose(1, 2) @ v  # (B, K, d)
            slots = self.gru(upd.reshape(-1, d), slots.reshape(-1, d)).view(B, -1, d)
            slots = slots + self.mlp(self.ln_mlp(slots))
        return self.head(slots.mean(dim=1))  # (B, d_out)


# ----------------------------------------------------------------------------- EGNN


@dataclass
class EGNNConfig:
    """EGNN (Satorras et al. 2021) on the fully connected graph of the real elements.

    ``n_coord``: how many **leading** features of ``x`` are coordinates (they rotate with the
    frame); default ``None`` = all ``d_in`` (geometric tasks). The remaining ``d_in - n_coord``
    trailing features (e.g. the type indicator of packed tasks B, D, F, Mahalanobis) are
    invariant node attributes embedded into ``h_0`` by a Linear; with none, ``h_0`` is one
    learned vector. ``d_hidden``, ``n_layers``: the paper's h=140, 4 layers (App.
    app:egnn-comparison). ``pool``: ``"sum"`` (Satorras' QM9 readout, default) or ``"mean"``.
    ``update_coords``: Satorras' coordinate update (eq. 4); the last layer never updates them
    (it could not reach an invariant readout, so its ``phi_x`` would be dead parameters)."""

    d_in: int = 8
    d_out: int = 1
    d_hidden: int = 140
    n_layers: int = 4
    n_coord: int | None = None
    pool: str = "sum"
    update_coords: bool = True

    def __post_init__(self):
        check_config_fields(
            self, ("d_in", "d_out", "d_hidden", "n_layers"), (), {"pool": ("sum", "mean")}
        )
        if self.n_coord is not None and (
            not isinstance(self.n_coord, int) or not 1 <= self.n_coord <= self.d_in
        ):
            raise ValueError(
                f"n_coord must be None or an int in [1, d_in={self.d_in}], got {self.n_coord!r}"
            )


class EGNNLayer(nn.Module):
    """One E(n)-equivariant layer (Satorras et al. 2021, eqs. 3-6), masked:

        m_ij = phi_e(h_i, h_j, |x_i - x_j|^2)                      (real i != j only)
        x_i <- x_i + sum_j (x_i - x_j) phi_x(m_ij) / (n_real - 1)
        h_i <- h_i + phi_h(h_i, sum_j m_ij)

    ``phi_e``'s first Linear is applied to ``(h_i, h_j, dist)`` without forming the
    ``(B, n, n, 2h+1)`` concatenation (its weight split into the three parts: same parameters,
    less memory)."""

    def __init__(self, h: int, *, update_coords: bool = True):
        super().__init__()
        self.h = h
        self.edge_in = nn.Linear(2 * h + 1, h)
        self.edge_out = nn.Sequential(nn.SiLU(), nn.Linear(h, h), nn.SiLU())
        self.phi_x = (
            nn.Sequential(nn.Linear(h, h), nn.SiLU(), nn.Linear(h, 1, bias=False))
            if update_coords
            else None
        )
        self.phi_h = nn.Sequential(nn.Linear(2 * h, h), nn.SiLU(), nn.Linear(h, h))

    def forward(self, h, x, mask):
        n, H = h.shape[1], self.h
        diff = x.unsqueeze(2) - x.unsqueeze(1)  # (B, n, n, c): x_i - x_j
        dist = (diff * diff).sum(-1, keepdim=True)  # (B, n, n, 1)
        W = self.edge_in.weight  # (h, 2h+1) = [W_i | W_j | w_dist]
        e = (h @ W[:, :H].T).unsqueeze(2) + (h @ W[:, H : 2 * H].T).unsqueeze(1)  # (B, n, n, h)
        e = e + dist * W[:, 2 * H] + self.edge_in.bias
        eye = torch.eye(n, dtype=torch.bool, device=h.device)
        edge = (mask.unsqueeze(2) & mask.unsqueeze(1) & ~eye).unsqueeze(-1).to(h.dtype)
        m = self.edge_out(e) * edge  # (B, n, n, h): messages along real edges only
        if self.phi_x is not None:
            n_nb = (mask.sum(1) - 1).clamp_min(1).to(h.dtype)[:, None, None]  # (B, 1, 1): M - 1
            x = x + (diff * self.phi_x(m) * edge).sum(2) / n_nb
        h = h + self.phi_h(torch.cat([h, m.sum(2)], dim=-1))  # (B, n, h)
        return zero_pad(h, mask), zero_pad(x, mask)


class EGNN(nn.Module):
    """``forward(x (B, n, d_in), mask (B, n) | None) -> (B, d_out)``, invariant to rotations,
    reflections and translations of the coordinate features (``x[..., :n_coord]``) and to
    permutations. Readout: masked pooling of ``h`` -> ``Linear -> SiLU -> Linear``. 552,861
    parameters at h=140, 4 layers, d_in=8 (the paper reports 303K; see ``EGNNConfig``)."""

    def __init__(self, cfg: EGNNConfig | None = None, **overrides):
        super().__init__()
        self.cfg = c = replace(cfg or EGNNConfig(), **overrides)
        h = c.d_hidden
        self.n_coord = c.d_in if c.n_coord is None else c.n_coord
        n_attr = c.d_in - self.n_coord
        self.embed = nn.Linear(n_attr, h) if n_attr else None
        self.h0 = None if n_attr else nn.Parameter(torch.randn(h) / math.sqrt(h))
        self.layers = nn.ModuleList(
            EGNNLayer(h, update_coords=c.update_coords and i < c.n_layers - 1)
            for i in range(c.n_layers)
        )
        self.head = _head(h, c.d_out, nn.SiLU)

    def forward(self, x, mask=None):
        like = self.head[0].weight
        x, mask = check_set(x, mask, self.cfg.d_in, like)
        x = zero_pad(x, mask)
        pos, attr = x[..., : self.n_coord], x[..., self.n_coord :]  # (B, n, c), (B, n, a)
        h = self.embed(attr) if self.embed is not None else self.h0.expand(*x.shape[:2], -1)
        h = zero_pad(h, mask)  # (B, n, h)
        for layer in self.layers:
            h, pos = layer(h, pos, mask)
        return self.head(_pool(h, mask, self.cfg.pool))


# ----------------------------------------------------------------------------- Mamba + PMA


@dataclass
class MambaPMAConfig:
    """Mamba + PMA (tab:meb): ``Linear -> Mamba (S6, mambapy 1.2.0) x n_layers -> PMA -> SAB x
    n_dec -> head``, the Set Transformer with its ISAB encoder replaced by Mamba.

    Open choices: ``d_model=128, d_ff=256, n_layers=3`` (632,705 parameters at d_in=8; the closest
    plain configuration we found to the paper's 645K); mambapy defaults ``d_state=16``,
    ``expand=2``, ``d_conv=4`` and its own initialisation (Xavier is not applied to Mamba)."""

    d_in: int = 8
    d_out: int = 1
    d_model: int = 128
    n_layers: int = 3
    d_state: int = 16
    expand: int = 2
    d_conv: int = 4
    n_heads: int = 4
    d_ff: int = 256
    n_seeds: int = 1
    n_dec: int = 1
    dropout: float = 0.1

    def __post_init__(self):
        pos = ("d_in", "d_out", "d_model", "n_layers", "d_state", "expand", "d_conv", "n_heads")
        check_config_fields(self, (*pos, "d_ff", "n_seeds"), ("n_dec",))


class MambaPMA(nn.Module):
    """Mamba + PMA. **Not permutation invariant**: Mamba reads the set as a sequence in the given
    order. Masking: the real elements are moved to the front (their order kept, a stable sort),
    padded steps are zeroed and sit at the end; since Mamba is causal, real steps never see them,
    and PMA ignores them. So padding changes nothing wherever it is in ``x``, but the output
    depends on the order of the real elements. ``forward(x (B, n, d_in), mask) -> (B, d_out)``."""

    def __init__(self, cfg: MambaPMAConfig | None = None, **overrides):
        super().__init__()
        from mambapy.mamba import Mamba, MambaConfig

        self.cfg = c = replace(cfg or MambaPMAConfig(), **overrides)
        d, mab = c.d_model, dict(n_heads=c.n_heads, d_ff=c.d_ff, dropout=c.dropout)
        self.embed = nn.Linear(c.d_in, d)
        self.pool = PMA(d, **mab, k=c.n_seeds, name="pool")
        self.dec = nn.ModuleList(SAB(d, **mab, name=f"dec{i}") for i in range(c.n_dec))
        self.head = _head(c.n_seeds * d, c.d_out)
        for mod in (self.embed, self.pool, self.dec, self.head):
            mod.apply(init_linear)
        mcfg = MambaConfig(
            d_model=d,
            n_layers=c.n_layers,
            d_state=c.d_state,
            expand_factor=c.expand,
            d_conv=c.d_conv,
        )
        self.mamba = Mamba(mcfg)

    def forward(self, x, mask=None):
        x, mask = check_set(x, mask, self.cfg.d_in, self.embed.weight)
        order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # real elements first
        x = x.gather(1, order.unsqueeze(-1).expand_as(x))
        mask = mask.gather(1, order)  # (B, n): True then False
        h = zero_pad(self.embed(zero_pad(x, mask)), mask)  # (B, n, d)
        h = zero_pad(self.mamba(h), mask)  # causal: a real step reads earlier (real) steps only
        z = self.pool(h, mask)  # (B, k, d)
        for blk in self.dec:
            z = blk(z)
        return self.head(z.flatten(1))
