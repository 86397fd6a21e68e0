"""What a layer and a model computed on the way, returned by ``forward(..., need_details=True)``
(one ``MZAttention``), ``model(x, mask, return_details=True)`` and ``model.inspect(x, mask)``.

Plain dataclasses with attribute access (``details.layer("pool").gates``): each field is named
and documented with its shape once, here. Fields that only one kind of layer has are ``None`` on
the other (a standard attention has no gates)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ..zonotope import Zonotope


@dataclass
class AttentionDetails:
    """The internals of one attention layer, with ``B`` sets, ``H`` heads, ``nq`` queries,
    ``nkv`` keys, ``d_k = d / H`` and ``L`` matrix generators per head.

    - ``attention`` (B, H, nq, nkv): softmax weights, each row sums to 1 over the real keys and
      is exactly 0 on padded ones; ``None`` for linear attention (it forms no weight matrix).
    - ``gates`` (B, H, L): the per-set gates ``gamma = tanh(W_gamma cbar_kv)`` (MZ only).
    - ``operators`` (B, H, d_k, d_k): the value map ``M(mu) = M_c + sum_l gamma_l M_l`` each
      head applies (MZ only).
    - ``name``: the block in the model, in execution order (``"enc0.inducing"``,
      ``"enc0.elements"``, ``"pool"``, ``"dec0"``); ``""`` for a layer called on its own.
    - ``output``: the block's output tokens, ``(B, nq, d)`` for a standard block, a ``Zonotope``
      with centres (B, nq, d) and generators (B, nq, n_g, d) for an MZ block; ``None`` for a
      layer called on its own (its outputs are returned beside the details).
    """

    attention: torch.Tensor | None
    gates: torch.Tensor | None = None
    operators: torch.Tensor | None = None
    name: str = ""
    output: torch.Tensor | Zonotope | None = None


@dataclass
class SetModelDetails:
    """The internals of a set model (``SetTransformer``, ``MZSetTransformer`` and their variants)
    for ``B`` sets of ``n`` slots, ``k`` seeds, width ``d``.

    - ``layers``: one ``AttentionDetails`` per attention block, in execution order.
    - ``pooled``: the ``k`` pooled tokens the head reads, (B, k, d), or for the MZ model a
      ``Zonotope`` with centres (B, k, d) and generators (B, k, n_g, d).
    - ``input_tokens``: the embedded set before the first block, (B, n, d), or a ``Zonotope``
      (centres (B, n, d), generators (B, n, n_g, d)); padded rows are zero.
    - ``features``: the head's input, (B, k d) (standard) or (B, 2 k d) (MZ: pooled centres and
      the ``readout`` of the generators).
    """

    layers: list[AttentionDetails] = field(default_factory=list)
    pooled: torch.Tensor | Zonotope | None = None
    input_tokens: torch.Tensor | Zonotope | None = None
    features: torch.Tensor | None = None

    @property
    def names(self) -> list[str]:
        """The layers' names, in execution order."""
        return [layer.name for layer in self.layers]

    def layer(self, name: str) -> AttentionDetails:
        """The details of the layer called ``name`` (ValueError listing the valid names)."""
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise ValueError(f"layer must be one of {self.names}, got {name!r}")
