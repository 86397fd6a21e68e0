"""The paper's initialisation claims, measured on an untrained MZ-Set Transformer.

The paper says of its layer at initialisation (Sec. eq:zono-proj and eq:mz-main):

1. the generators "start as small perturbations, so the initial representation is close to a
   standard vector embedding";
2. with ``M_c = I`` and ``M_l ~ 0`` "the block reduces to standard attention".

``initial_state(mz, x, mask)`` measures both on one batch of sets: the RMS ratio of generators to
centres after the input projection and after every block, the largest difference between the MZ
centre stream and a Set Transformer with the same weights run on the same input tokens, and the
mean squared untrained prediction beside that of a Set Transformer built with the same seed.
Which of mzlite's readings of the generator normalisation (``gen_norm``) keeps these claims is
what chapter 3 shows and ``tests/test_initialisation.py`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._torch import eval_mode
from ..nn.models import MZSetTransformer, SetTransformer, SetTransformerConfig

__all__ = ["InitialState", "initial_state", "matching_set_transformer"]


@dataclass(frozen=True)
class InitialState:
    """What ``initial_state`` measured on one batch (untrained model, eval mode).

    - ``gen_norm``: the model's generator normalisation.
    - ``blocks``: block names, ``"input"`` first, then every MZ-MAB in execution order.
    - ``generator_ratio``: per entry of ``blocks``, RMS(generators) / RMS(centres) over the real
      tokens (the paper's "small perturbations": well below 1).
    - ``centre_gap``: max |MZ centre - Set Transformer output| over every block's real tokens,
      the Set Transformer holding the MZ model's centre weights (0 up to rounding when the block
      "reduces to standard attention").
    - ``prediction_ms`` / ``set_transformer_ms``: mean of y^2 of the untrained MZ model and of a
      Set Transformer of the same shape initialised with the same seed.
    """

    gen_norm: str
    blocks: tuple[str, ...]
    generator_ratio: tuple[float, ...]
    centre_gap: float
    prediction_ms: float
    set_transformer_ms: float

    @property
    def largest_ratio_after_input(self) -> float:
        """The largest generator/centre RMS ratio after any block."""
        return max(self.generator_ratio[1:])

    @property
    def prediction_scale(self) -> float:
        """``prediction_ms / set_transformer_ms``: how far the untrained output's scale is from
        standard attention's."""
        return self.prediction_ms / self.set_transformer_ms


def _rms(x: torch.Tensor) -> float:
    return float(x.double().pow(2).mean().sqrt())


def matching_set_transformer(mz: MZSetTransformer) -> SetTransformer:
    """A ``SetTransformer`` whose attention blocks hold ``mz``'s centre-stream weights (Q, K, V,
    O, LayerNorms, FFNs, inducing points and seeds as the learned tokens' centres). With
    ``M_c = I`` its blocks compute the MZ centre stream exactly; its input projection and head
    are its own (the MZ model's differ in shape)."""
    cfg = mz.cfg
    shared = {f: getattr(cfg, f) for f in SetTransformerConfig.__dataclass_fields__}
    st = SetTransformer(SetTransformerConfig(**shared))
    mz_state = mz.state_dict()
    state = st.state_dict()
    for key in state:
        if key.startswith(("embed.", "head.")):
            continue
        source = key
        if key.endswith(".inducing") or key.endswith(".seeds"):
            source = key + ".c"  # the learned zonotope's centre
        state[key] = mz_state[source].clone()
    st.load_state_dict(state)
    return st.to(next(mz.parameters()).device)


def _st_block_outputs(st: SetTransformer, h: torch.Tensor, mask: torch.Tensor) -> list:
    """Every block output of ``st`` run on the input tokens ``h`` (its projection skipped)."""
    details: list = []
    for i in range(len(st.enc)):
        h = st.encoder_block(i, h, mask, details)
    z = st.pool_set(h, mask, details)
    for blk in st.dec:
        z = blk(z, None, details)
    return [d.output for d in details]


@torch.no_grad()
def initial_state(mz: MZSetTransformer, x: torch.Tensor, mask: torch.Tensor | None = None,
                  seed: int = 0) -> InitialState:  # fmt: skip
    """Measure the initialisation claims on sets ``x`` (B, n, d_in) with ``mask`` (B, n) (True =
    real). ``mz`` should be untrained; ``seed`` initialises the comparison Set Transformer."""
    if not isinstance(mz, MZSetTransformer):
        raise TypeError(f"mz must be an MZSetTransformer, got {type(mz).__name__}")
    if mask is None:
        mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
    with eval_mode(mz):
        y, details = mz(x, mask, return_details=True)
    tokens = [details.input_tokens, *(layer.output for layer in details.layers)]
    names = ("input", *(layer.name for layer in details.layers))
    ratios = []
    for name, z in zip(names, tokens, strict=True):
        c, G = z.center, z.generators  # (B, n, d), (B, n, n_g, d)
        if _per_element(name):
            c, G = c[mask], G[mask]  # the real tokens only
        ratios.append(_rms(G) / _rms(c))
    st = matching_set_transformer(mz)
    with eval_mode(st):
        st_outputs = _st_block_outputs(st, details.input_tokens.center, mask)
    gap = 0.0
    for name, layer, out in zip(names[1:], details.layers, st_outputs, strict=True):
        diff = (layer.output.center - out).abs()
        gap = max(gap, float((diff[mask] if _per_element(name) else diff).max()))
    torch.manual_seed(seed)
    shared = {f: getattr(mz.cfg, f) for f in SetTransformerConfig.__dataclass_fields__}
    fresh = SetTransformer(SetTransformerConfig(**shared)).to(x.device)
    with eval_mode(fresh):
        y_st = fresh(x, mask)
    return InitialState(
        gen_norm=mz.cfg.gen_norm,
        blocks=names,
        generator_ratio=tuple(ratios),
        centre_gap=gap,
        prediction_ms=float(y.double().pow(2).mean()),
        set_transformer_ms=float(y_st.double().pow(2).mean()),
    )


def _per_element(block: str) -> bool:
    """Whether a block's output has one token per set element (the input projection and the
    encoders' element MABs) rather than learned tokens (inducing points, seeds)."""
    return block == "input" or block.endswith(".elements")
