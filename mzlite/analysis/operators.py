"""Looking inside a trained MZ layer: the computations behind the paper's Figures fig:attn-viz and
fig:mz-analysis (Appendix app:architecture-ablations), plus loading the shipped checkpoints.

Everything here works on plain tensors, so a chapter can apply it to any head of any layer:

- ``relative_frobenius_change(M_a, M_b, ref)``: ``||M_a - M_b||_F / ||ref||_F`` (fig:attn-viz uses
  ``ref = M_c``).
- ``cosine_matrix(mats)``: cosine similarity of ``vec(M_c), vec(M_1), ...`` (fig:mz-analysis, left).
- ``frobenius_norms(mats)``: per-generator norms (fig:mz-analysis, second panel).
- ``effective_rank(X)``: the soft (entropy) or 99 %-energy rank of a set of centred operators
  (fig:mz-analysis, effective-rank panel).
- ``sign_flips(g_a, g_b)``: gates that change sign between two contexts.
- ``mz_heads(model)`` / ``probe(model, x, mask, layer)``: the MZ attention modules by name and the
  realised operators and gates of one layer over many sets, batched.
- ``save_model_checkpoint`` / ``load_model_checkpoint``: a model with its config, loadable with
  ``weights_only=True`` (what ``data/checkpoints/`` holds).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from .._checks import as_float_tensor, check_finite
from .._torch import map_batches
from ..nn.attention import MZMAB, MZAttention
from ..nn.details import AttentionDetails
from ..nn.models import MZSetTransformer, MZSetTransformerConfig, config_dict
from ..train import load_checkpoint, load_model_state, save_checkpoint

__all__ = [
    "relative_frobenius_change",
    "cosine_matrix",
    "frobenius_norms",
    "effective_rank",
    "sign_flips",
    "mz_heads",
    "layer_words",
    "probe",
    "save_model_checkpoint",
    "load_model_checkpoint",
]

CHECKPOINT_FORMAT = "mzlite.analysis/1"


def _mats(name: str, x, min_ndim: int, doc: str) -> torch.Tensor:
    x = as_float_tensor(name, x)
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have shape {doc}, got shape {tuple(x.shape)}")
    check_finite(name, x)
    return x


def relative_frobenius_change(M_a, M_b, ref=None) -> torch.Tensor:
    """``||M_a - M_b||_F / ||ref||_F`` over the last two dimensions (fig:attn-viz: ref = ``M_c``).

    ``M_a``, ``M_b``: (..., p, q) of one shape; ``ref``: (..., p, q) or None (then ``ref = M_a``).
    Returns a tensor of shape (...). ``ref`` with zero norm raises ValueError."""
    M_a = _mats("M_a", M_a, 2, "(..., p, q)")
    M_b = _mats("M_b", M_b, 2, "(..., p, q)")
    if M_a.shape != M_b.shape:
        raise ValueError(
            f"M_a and M_b must have one shape, got {tuple(M_a.shape)} and {tuple(M_b.shape)}"
        )
    ref = M_a if ref is None else _mats("ref", ref, 2, "(..., p, q)")
    if ref.shape[-2:] != M_a.shape[-2:]:
        raise ValueError(
            f"ref must have shape (..., {M_a.shape[-2]}, {M_a.shape[-1]}), got {tuple(ref.shape)}"
        )
    den = torch.linalg.matrix_norm(ref)  # Frobenius by default
    if bool((den == 0).any()):
        raise ValueError("ref has zero Frobenius norm; the relative change is undefined")
    return torch.linalg.matrix_norm(M_a - M_b) / den


def cosine_matrix(mats) -> torch.Tensor:
    """Cosine similarity ``<vec A_i, vec A_j> / (||A_i||_F ||A_j||_F)`` of ``k`` matrices (k, p, q)
    (or ``k`` vectors (k, p)): a symmetric (k, k) matrix with ones on the diagonal. A zero matrix
    raises ValueError (its direction is undefined)."""
    mats = _mats("mats", mats, 2, "(k, p, q) or (k, p)")
    if mats.ndim > 3:
        raise ValueError(f"mats must have shape (k, p, q) or (k, p), got {tuple(mats.shape)}")
    v = mats.reshape(mats.shape[0], -1)  # (k, p q)
    n = v.norm(dim=1)
    if bool((n == 0).any()):
        raise ValueError(f"mats[{int((n == 0).nonzero()[0])}] is zero; its cosine is undefined")
    u = v / n[:, None]
    return u @ u.T


def frobenius_norms(mats) -> torch.Tensor:
    """``||A_i||_F`` of each of ``k`` matrices (k, p, q): shape (k,)."""
    mats = _mats("mats", mats, 3, "(k, p, q)")
    return torch.linalg.matrix_norm(mats)


def effective_rank(X, method: str = "entropy", energy: float = 0.99, center: bool = True) -> float:
    """Effective rank of ``N`` samples ``X`` (N, ...) (each sample flattened, e.g. ``M(mu_i)``).

    With ``center`` the mean sample is subtracted first, as in fig:mz-analysis's
    ``{M(mu_i) - M_bar}``. From the singular values ``s`` of the (N, D) matrix:

    - ``"entropy"`` (the "soft" effective rank, Roy and Vetterli 2007): ``exp(H(p))`` with
      ``p_i = s_i / sum_j s_j`` and ``H`` the Shannon entropy in nats. It is ``r`` for ``r`` equal
      non-zero singular values and between 1 and ``r`` otherwise; it is not an integer.
    - ``"energy"``: the smallest ``k`` with ``sum_{i<=k} s_i^2 >= energy * sum_i s_i^2``.

    The paper says "soft effective rank" and does not define it further; ``"entropy"`` is our
    reading of it. All-zero samples (no variation at all) give 0."""
    X = _mats("X", X, 2, "(N, ...) with N >= 2")
    if X.shape[0] < 2:
        raise ValueError(f"X must hold at least 2 samples (N, ...), got shape {tuple(X.shape)}")
    if method not in ("entropy", "energy"):
        raise ValueError(f"method must be 'entropy' or 'energy', got {method!r}")
    if not (isinstance(energy, (int, float)) and 0.0 < energy <= 1.0):
        raise ValueError(f"energy must be a float in (0, 1], got {energy!r}")
    A = X.reshape(X.shape[0], -1).double()  # (N, D)
    if center:
        A = A - A.mean(0, keepdim=True)
    s = torch.linalg.svdvals(A)  # (min(N, D),) descending
    if float(s.sum()) == 0.0:
        return 0.0
    if method == "entropy":
        p = s / s.sum()
        p = p[p > 0]
        return float(math.exp(float(-(p * p.log()).sum())))
    cum = (s**2).cumsum(0) / (s**2).sum()
    return int((cum < energy - 1e-12).sum()) + 1


def sign_flips(g_a, g_b) -> torch.Tensor:
    """Number of gates whose sign differs between two contexts: ``g_a``, ``g_b`` (..., L) -> (...).
    A gate of exactly 0 has no sign and is counted as a flip only against a non-zero gate."""
    g_a = _mats("g_a", g_a, 1, "(..., L)")
    g_b = _mats("g_b", g_b, 1, "(..., L)")
    if g_a.shape != g_b.shape:
        raise ValueError(
            f"g_a and g_b must have one shape, got {tuple(g_a.shape)} and {tuple(g_b.shape)}"
        )
    return (torch.sign(g_a) != torch.sign(g_b)).sum(-1)


def mz_heads(model: torch.nn.Module) -> dict[str, MZAttention]:
    """The ``MZAttention`` of every MZ-MAB of ``model``, keyed by the block name used in
    ``details.layers`` (e.g. ``"enc0.inducing"``, ``"pool"``), in execution order."""
    out = {mab.name: mab.attn for mab in model.modules() if isinstance(mab, MZMAB)}
    if not out:
        raise ValueError("model has no MZ attention block (is it an MZSetTransformer?)")
    return out


def layer_words(name: str) -> str:
    """A block name of ``mz_heads`` in a reader's words: ``"enc0.inducing"`` is "encoder block
    1, inducing points", ``"enc1.elements"`` "encoder block 2, elements", ``"pool"`` "pooling",
    ``"dec0"`` "decoder block 1"; an unknown name is returned as it is."""
    parts = name.split(".")
    head = parts[0]
    for prefix, words in (("enc", "encoder block"), ("dec", "decoder block")):
        if head.startswith(prefix) and head[len(prefix) :].isdigit():
            head = f"{words} {int(head[len(prefix) :]) + 1}"
            break
    else:
        head = {"pool": "pooling"}.get(head, head)
    rest = {"inducing": "inducing points", "elements": "elements"}
    return ", ".join([head] + [rest.get(p, p) for p in parts[1:]])


@torch.no_grad()
def probe(
    model: MZSetTransformer, x, mask=None, layer: str | None = None, batch_size: int = 256
) -> AttentionDetails:
    """Realised operators and gates of one MZ layer over many sets, in eval mode.

    ``x`` (N, n, d_in), ``mask`` (N, n) | None; ``layer`` a name from ``mz_heads`` (default: the
    first MZ layer, the one whose gates read the embedded input set). Returns the layer's
    ``AttentionDetails`` with ``operators`` (N, H, d_k, d_k) and ``gates`` (N, H, L) on CPU,
    float64, and ``name``; the attention weights and outputs are not kept (``attention`` and
    ``output`` are None)."""
    names = list(mz_heads(model))
    layer = names[0] if layer is None else layer
    if layer not in names:
        raise ValueError(f"layer must be one of {names}, got {layer!r}")

    def one_batch(xb, mb):
        entry = model.inspect(xb, mb).layer(layer)
        return entry.operators.double().cpu(), entry.gates.double().cpu()

    ops, gates = zip(*map_batches(one_batch, x, mask, batch_size), strict=True)
    return AttentionDetails(None, torch.cat(gates), torch.cat(ops), name=layer)


def save_model_checkpoint(path, model: MZSetTransformer, info: dict | None = None) -> Path:
    """Write ``{"format", "config", "model" (state dict), "info"}`` atomically; ``info`` holds
    only numbers, strings, lists and dicts, so the file loads with ``weights_only=True``."""
    if not isinstance(model, MZSetTransformer):
        raise TypeError(f"model must be an MZSetTransformer, got {type(model).__name__}")
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return save_checkpoint(
        path,
        {
            "format": CHECKPOINT_FORMAT,
            "config": config_dict(model),
            "model": state,
            "info": info or {},
        },
    )


def load_model_checkpoint(path, device="cpu") -> tuple[MZSetTransformer, dict]:
    """``(model in eval mode, info)`` from a file written by ``save_model_checkpoint``."""
    ckpt = load_checkpoint(path, map_location="cpu")
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not an {CHECKPOINT_FORMAT!r} checkpoint")
    model = MZSetTransformer(MZSetTransformerConfig.from_dict(ckpt["config"]))
    load_model_state(model, ckpt["model"])  # with its target scaling, if it was trained with one
    return model.to(device).eval(), ckpt["info"]
