"""Set Transformer and MZ-Set Transformer models, configs, factories, parameter counts and the
Theorem thm:separation construction. Conventions and choices: see the ``mzlite.nn`` docstring."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

import torch
import torch.nn as nn

from .._checks import (
    as_float_tensor,
    check_config_fields,
    check_finite,
    check_finite_real,
    check_mask,
    check_same,
)
from .._torch import eval_mode
from .attention import (
    GEN_NORMS,
    ISAB,
    LAYER_READINGS,
    MZISAB,
    MZPMA,
    MZSAB,
    PMA,
    SAB,
    MZAttention,
    Packing,
    ZonotopeProjection,
    init_linear,
    token_zonotopes,
    zero_pad,
)
from .details import SetModelDetails

# ----------------------------------------------------------------------------- configs


def _validate(cfg) -> None:
    """ValueError naming the field for any config value out of range."""
    positive = ["d_in", "d_out", "d_model", "n_heads", "d_ff", "n_inducing", "n_seeds"]
    nonneg = ["n_enc", "n_dec"]
    choices = {}
    if hasattr(cfg, "n_g"):
        positive.append("n_g")
        nonneg.append("L")
        choices["readout"] = ("ihw", "signed")
        choices["gen_norm"] = GEN_NORMS
        choices["gen_qk"] = (False, True)
        choices["layer_reading"] = LAYER_READINGS
    check_config_fields(cfg, positive, nonneg, choices)


@dataclass
class SetTransformerConfig:
    """Standard Set Transformer (Lee et al. 2019) with the paper's defaults (App. app:impl)."""

    d_in: int = 8
    d_out: int = 1
    d_model: int = 64  # d
    n_heads: int = 4  # H
    d_ff: int = 128
    n_inducing: int = 16  # m, per ISAB
    n_enc: int = 2  # ISAB blocks
    n_seeds: int = 1  # PMA k
    n_dec: int = 1  # SAB blocks after PMA
    dropout: float = 0.1

    def __post_init__(self):
        _validate(self)

    VARIANTS = {"standard": {}, "st_large": {"d_model": 80, "d_ff": 200}}

    @classmethod
    def variant(cls, name: str, **overrides) -> SetTransformerConfig:
        """``"standard"`` (paper default) or ``"st_large"`` (d=80, d_ff=200), then overrides."""
        if name not in cls.VARIANTS:
            raise ValueError(f"name must be one of {sorted(cls.VARIANTS)}, got {name!r}")
        return cls(**{**cls.VARIANTS[name], **overrides})


@dataclass
class MZSetTransformerConfig(SetTransformerConfig):
    """MZ-Set Transformer: the standard fields plus the zonotope budget (App. app:impl).

    ``n_g``: generators per token (Eq. eq:zono-proj); ``L``: matrix-zonotope generators per head
    (Eq. eq:mz-main); ``readout``: ``"ihw"`` (pooled centre + interval-hull half-width
    ``sum_g |G_g|``, the paper's default head) or ``"signed"`` (pooled centre + ``sum_g G_g``, the
    readout of Theorems thm:tdof-depth and thm:separation); ``gen_own_weights``: see choice 2;
    ``gen_norm``: what the blocks' LayerNorms do to the generators (choice 7, ``GEN_NORMS``:
    ``"zonotope"``, ``"none"``, ``"layernorm"``; see ``MZMAB``); ``gen_qk``: queries and keys
    also read the tokens' interval-hull half-widths (choice 8, tab:genqk's MZ-GenQK);
    ``layer_reading``: where the matrix zonotope acts on the centres (choice 9,
    ``LAYER_READINGS``: ``"literal"``, Eq. eq:mz-main's ``o_c = M_c c_hat``, or
    ``"centre_adaptive"``, def:relop's ``o_c = M(mu) c_hat``; see ``MZAttention``). A saved
    config without it was trained under the literal reading, the default.

    ``from_dict`` reads a config saved in a result or checkpoint; one saved before ``gen_norm``
    existed was trained with the per-row LayerNorm and is read as ``gen_norm="layernorm"``."""

    n_g: int = 8
    L: int = 4
    readout: str = "ihw"
    gen_own_weights: bool = True
    gen_norm: str = "zonotope"
    gen_qk: bool = False
    layer_reading: str = "literal"

    # what a saved config without the field was trained with (mzlite before the field existed)
    LEGACY = {"gen_norm": "layernorm"}

    @classmethod
    def from_dict(cls, d: dict) -> MZSetTransformerConfig:
        """A saved config (result JSON, checkpoint); absent fields take their ``LEGACY`` value,
        then the default; unknown keys raise ValueError naming them."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown MZSetTransformerConfig field(s) {unknown}")
        return cls(**{**cls.LEGACY, **d})

    VARIANTS = {
        "slim": {"n_g": 2, "L": 1},
        "med": {"n_g": 4, "L": 2},
        "full": {"n_g": 8, "L": 4},
        "large": {"n_g": 16, "L": 8},
    }


def check_set(x, mask, d_in: int, like: torch.Tensor):
    """Validate a padded set batch for a model with ``d_in`` features; return ``(x, mask)``."""
    x = as_float_tensor("x", x, like=like)
    if x.ndim != 3 or x.shape[-1] != d_in or x.shape[1] == 0:
        raise ValueError(
            f"x must have shape (B, n, d_in) = (B, n>=1, {d_in}), got {tuple(x.shape)}"
        )
    check_same(["model parameters", "x"], [like, x])
    mask = check_mask(mask, x.shape[0], x.shape[1], x.device)
    check_finite_real("x", x, mask)
    # padding content never matters (NaN included): the model sees zeros there
    return x.masked_fill(~mask.unsqueeze(-1), 0.0), mask


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


class SetTransformer(nn.Module):
    """Masked Set Transformer (Lee et al. 2019), the paper's "Standard" baseline.

    ``SetTransformer(cfg=None, **overrides)``; ``forward(x (B, n, d_in), mask (B, n) | None,
    return_details=False) -> y (B, d_out)`` (or ``(y, details)``, a ``SetModelDetails`` whose
    ``layers`` hold each block's ``attention`` (B, H, nq, nkv) and ``output``). 207,745
    parameters at the defaults."""

    def __init__(self, cfg: SetTransformerConfig | None = None, **overrides):
        super().__init__()
        cfg = replace(cfg or SetTransformerConfig(), **overrides)
        self.cfg = cfg
        d = cfg.d_model
        mab = dict(n_heads=cfg.n_heads, d_ff=cfg.d_ff, dropout=cfg.dropout)
        self.embed = nn.Linear(cfg.d_in, d)
        self.enc = nn.ModuleList(
            ISAB(d, **mab, m=cfg.n_inducing, name=f"enc{i}") for i in range(cfg.n_enc)
        )
        self.pool = PMA(d, **mab, k=cfg.n_seeds, name="pool")
        self.dec = nn.ModuleList(SAB(d, **mab, name=f"dec{i}") for i in range(cfg.n_dec))
        self.head = nn.Sequential(nn.Linear(cfg.n_seeds * d, d), nn.GELU(), nn.Linear(d, cfg.d_out))
        for mod in self.modules():
            init_linear(mod)

    def forward(self, x, mask=None, return_details: bool = False):
        x, mask = check_set(x, mask, self.cfg.d_in, self.embed.weight)
        details = [] if return_details else None
        h = h_in = zero_pad(self.embed(x), mask)  # (B, n, d)
        for i in range(len(self.enc)):
            h = self.encoder_block(i, h, mask, details)
        z = self.pool_set(h, mask, details)  # (B, k, d)
        for blk in self.dec:
            z = blk(z, None, details)
        feats = z.flatten(1)  # (B, k d)
        y = self.head(feats)  # (B, d_out)
        if not return_details:
            return y
        return y, SetModelDetails(details, pooled=z, input_tokens=h_in, features=feats)

    # The two hooks a variant overrides (FiLM, mean pooling) instead of copying ``forward``.
    def encoder_block(self, i: int, h, mask, details):
        """Encoder block ``i`` on the tokens ``h`` (B, n, d)."""
        return self.enc[i](h, mask, details)

    def pool_set(self, h, mask, details):
        """The encoded set ``h`` (B, n, d) -> ``n_seeds`` pooled tokens (B, k, d)."""
        return self.pool(h, mask, details)

    @torch.no_grad()
    def inspect(self, x, mask=None) -> SetModelDetails:
        """``details`` of ``forward(..., return_details=True)``, in eval mode, without grad."""
        return _inspect(self, x, mask)


def _inspect(model, x, mask):
    with eval_mode(model):
        return model(x, mask, return_details=True)[1]


class MZSetTransformer(nn.Module):
    """MZ-Set Transformer (paper Sec. sec:architecture): ZonotopeProjection -> MZ-ISAB x n_enc ->
    MZ-PMA_k -> MZ-SAB x n_dec -> head on ``concat(pooled centre, sum_g |G_g|)`` (readout "ihw")
    or ``concat(pooled centre, sum_g G_g)`` (readout "signed"), a 2-layer MLP.

    ``MZSetTransformer(cfg=None, **overrides)``; ``forward(x (B, n, d_in), mask (B, n) | None,
    return_details=False) -> y (B, d_out)``, or ``(y, details)``, a ``SetModelDetails`` with
    ``layers``: one ``AttentionDetails`` per MZ-MAB in execution order with ``name`` (e.g.
    ``"enc0.inducing"``), ``attention`` (B, H, nq, nkv), ``gates`` (B, H, L), ``operators``
    ``M(mu) = M_c + sum_l gamma_l M_l`` (B, H, d_k, d_k) and ``output`` (the block's output
    zonotopes); ``input_tokens``, ``pooled`` (zonotopes) and ``features`` (the head's input,
    (B, 2 k d)). 371,809 parameters at the defaults.

    ``pack_sets``: run the per-element work of the set's tokens (projection, the encoder blocks'
    LayerNorms, FFNs, dropout, the generators' value and output maps) on the real elements only,
    packed as ``(R, d)`` and ``(R, n_g, d)`` (``Packing``), instead of on the padded
    ``(B, n, n_g, d)`` tensors: the same outputs (float64: equal to rounding, tested), ~1/3 less
    work for sets of 10-30. ``None`` (default): on CPU when the batch has padding and no
    ``details`` are asked for (``details`` come from the padded layout, the reference); on CUDA
    the padded layout is kept (not measured there). Dropout draws masks of another shape, so a
    packed training run draws other (equally distributed) random numbers.
    """

    pack_sets: bool | None = None

    def __init__(self, cfg: MZSetTransformerConfig | None = None, **overrides):
        super().__init__()
        cfg = replace(cfg or MZSetTransformerConfig(), **overrides)
        self.cfg = cfg
        d, k = cfg.d_model, cfg.n_seeds
        mab = dict(
            n_heads=cfg.n_heads,
            d_ff=cfg.d_ff,
            dropout=cfg.dropout,
            n_g=cfg.n_g,
            L=cfg.L,
            gen_own_weights=cfg.gen_own_weights,
            gen_norm=cfg.gen_norm,
            gen_qk=cfg.gen_qk,
            layer_reading=cfg.layer_reading,
        )
        self.embed = ZonotopeProjection(cfg.d_in, d, n_g=cfg.n_g)
        self.enc = nn.ModuleList(
            MZISAB(d, **mab, m=cfg.n_inducing, name=f"enc{i}") for i in range(cfg.n_enc)
        )
        self.pool = MZPMA(d, **mab, k=k, name="pool")
        self.dec = nn.ModuleList(MZSAB(d, **mab, name=f"dec{i}") for i in range(cfg.n_dec))
        self.head = nn.Sequential(nn.Linear(2 * k * d, d), nn.GELU(), nn.Linear(d, cfg.d_out))
        for mod in self.modules():
            init_linear(mod)  # MZ matrices and learned tokens are Parameters, not Linear

    def forward(self, x, mask=None, return_details: bool = False):
        x, mask = check_set(x, mask, self.cfg.d_in, self.embed.W_c.weight)
        details = [] if return_details else None
        if self._packs(x, mask, return_details):
            packing = Packing(mask)
            c, G = self.embed(packing.pack(x))  # (R, d), (R, n_g, d): real elements only
            for blk in self.enc:  # the packing in place of the mask: the blocks stay packed
                c, G = blk(c, G, packing)
            c, G = self.pool(c, G, packing)  # (B, k, d), (B, k, n_g, d)
        else:
            c, G = self.embed(x)
            c, G = zero_pad(c, mask), zero_pad(G, mask)  # (B, n, d), (B, n, n_g, d)
            c_in, G_in = c, G
            for blk in self.enc:
                c, G = blk(c, G, mask, details)
            c, G = self.pool(c, G, mask, details)  # (B, k, d), (B, k, n_g, d)
        for blk in self.dec:
            c, G = blk(c, G, None, details)
        spread = G.abs().sum(-2) if self.cfg.readout == "ihw" else G.sum(-2)  # (B, k, d)
        feats = torch.cat([c.flatten(1), spread.flatten(1)], dim=-1)  # (B, 2 k d)
        y = self.head(feats)  # (B, d_out)
        if not return_details:
            return y
        pooled, inputs = token_zonotopes(c, G), token_zonotopes(c_in, G_in)
        return y, SetModelDetails(details, pooled=pooled, input_tokens=inputs, features=feats)

    def _packs(self, x, mask, return_details: bool) -> bool:
        """Whether this forward runs the set's tokens packed (see ``pack_sets``)."""
        if return_details or self.pack_sets is False:
            return False
        if not isinstance(self.pool, MZPMA) or not all(
            isinstance(b, (MZISAB, MZSAB)) for b in self.enc
        ):  # a variant with other blocks keeps the padded layout
            return False
        return (self.pack_sets or x.device.type == "cpu") and not bool(mask.all())

    @torch.no_grad()
    def inspect(self, x, mask=None) -> SetModelDetails:
        """``details`` of ``forward(..., return_details=True)``, in eval mode, without grad."""
        return _inspect(self, x, mask)


# ---------------------------------------------------------------------------- theorem constructions


class Theorem3Net(nn.Module):
    """The explicit construction of Theorem thm:separation (a): ``f_A(S) = (I + tanh(mu_1) A) mu``.

    One MZ-attention head (``H = 1``, ``L = 1``, ``d_k = d``) over input tokens ``(c, G) = (x, 0)``,
    with ``W_Q = 0`` (uniform attention, so ``c_hat = mu(S)``), ``W_V = W_O = I`` (all biases 0),
    ``M_c = I``, ``M_1 = A``, ``w_gamma = e_1`` (so ``gamma_1 = tanh(mu_1)``) and
    ``W_mix = e_1`` (only generator slot 1 is used): token outputs ``o_c = mu``,
    ``o_G[1] = tanh(mu_1) A mu``. Then PMA pooling by a second head with ``W_Q = 0``, identity
    value maps and ``M_l = 0``, ``W_mix = 0`` (a uniform masked mean of the tokens), and the
    fixed signed readout ``(c, g_1) -> c + g_1``. No LayerNorm, residual or FFN is involved.

    ``forward(x (B, n, d), mask (B, n) | None) -> (B, d)``; ``.attn`` and ``.pool`` are the two
    ``MZAttention`` heads, exposed so that a reader can inspect or rebuild them."""

    def __init__(self, A: torch.Tensor, *, n_g: int = 1):
        super().__init__()
        A = as_float_tensor("A", A)
        if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
            raise ValueError(f"A must be a square matrix (d, d), got shape {tuple(A.shape)}")
        check_finite("A", A)
        d = A.shape[0]
        self.d = d
        self.attn = MZAttention(d, n_heads=1, n_g=n_g, L=1).to(A.dtype)
        self.pool = MZAttention(d, n_heads=1, n_g=n_g, L=1).to(A.dtype)
        eye = torch.eye(d, dtype=A.dtype)
        with torch.no_grad():
            for head in (self.attn, self.pool):
                for lin in (head.q, head.k, head.v, head.o, head.gate):
                    lin.weight.zero_()
                    lin.bias.zero_()
                head.v.weight.copy_(eye)
                head.o.weight.copy_(eye)
                head.v_g.weight.copy_(eye)
                head.o_g.weight.copy_(eye)
                head.M_c.copy_(eye.unsqueeze(0))
                head.M_l.zero_()
                head.W_mix.zero_()
            self.attn.M_l[0, 0].copy_(A)  # M_1 = A
            self.attn.gate.weight[0, 0] = 1.0  # w_gamma = e_1
            self.attn.W_mix[0, 0, 0] = 1.0  # W_mix = e_1
        self.register_buffer("seed", torch.zeros(1, 1, d, dtype=A.dtype))

    def forward(self, x, mask=None):
        x = as_float_tensor("x", x, like=self.seed)
        if x.ndim != 3 or x.shape[-1] != self.d:
            raise ValueError(
                f"x must have shape (B, n, d) = (B, n, {self.d}), got {tuple(x.shape)}"
            )
        mask = check_mask(mask, x.shape[0], x.shape[1], x.device)
        check_finite_real("x", x, mask)
        x = x.masked_fill(~mask.unsqueeze(-1), 0.0)  # padding content never matters
        G = x.new_zeros(*x.shape[:2], self.attn.n_g, self.d)  # input tokens are points
        c, G, _ = self.attn(x, x, G, mask)  # (B, n, d), (B, n, n_g, d)
        seed = self.seed.expand(x.shape[0], -1, -1)  # (B, 1, d); irrelevant since W_Q = 0
        c, G, _ = self.pool(seed, c, G, mask)  # uniform masked mean over real elements
        return c[:, 0] + G[:, 0, 0]  # signed readout (c, g_1) -> c + g_1: (B, d)


def theorem3_layer(A: torch.Tensor, n_g: int = 1) -> Theorem3Net:
    """The Theorem thm:separation (a) construction for a square ``A`` (see ``Theorem3Net``)."""
    return Theorem3Net(A, n_g=n_g)


def config_dict(model: nn.Module) -> dict:
    """The model's config as a plain dict (for result JSON files)."""
    return asdict(model.cfg)
