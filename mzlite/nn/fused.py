"""Fused CPU kernels: residual, dropout and LayerNorm of a post-LN block in one pass.

``add_norm(x, a, norm, p=p, seed=seed)`` is ``norm(x + dropout(a))`` with one dropout mask per
token (shared by a token's centre and generator rows, choice 4 of ``mzlite.nn``), computed in
float32 from float32 or bfloat16 inputs, in one pass over memory forward and one backward. In
eager PyTorch the same step is six passes with autocast's float32 <-> bfloat16 casts between
them, and on the generator stream ``(B, n, n_g, d)`` these passes cost more than its matrix
products (``benchmarks/fit_speed.py levers``). The MZ blocks use it on CPU
(``mzlite.nn.attention.MZMAB``); ``reference_add_norm`` is the same computation in PyTorch, and
the tests hold the two equal, gradients included.

``unpack_heads`` / ``pack_heads`` move the generator values between the packed (or token-major)
layout ``(R, n_g, H d_k)`` and the head-major one attention reads, ``(B, H, n, n_g, d_k)``, in
one pass of ``d_k``-element copies (``Packing.unpack_heads`` / ``pack_heads`` use them on CPU).

The kernels are C++ (``_fused_cpu.cpp``), compiled on first use by ``torch.utils.cpp_extension``
(once per machine and source, ~30 s on 2 cores, cached in torch's extension folder,
``TORCH_EXTENSIONS_DIR``). Where they cannot be built (no C++ compiler) mzlite warns once and
runs the eager path, the same math with torch's own dropout masks; ``MZLITE_FUSED=0`` turns them
off, ``disabled()`` for a block of code.

The dropout mask is not drawn by torch's RNG but hashed from a 64-bit seed that is drawn from
torch's default generator (``draw_seed``): ``keep[t, j] = hash(seed, t d + j) >= p``, so runs
stay reproducible under ``torch.manual_seed`` and a resumed run's RNG state, and the backward
pass recomputes the mask instead of storing it. ``keep_mask`` returns it, for tests and
teaching."""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import sys
import warnings
from pathlib import Path

import torch
import torch.nn as nn

_SOURCE = Path(__file__).with_name("_fused_cpu.cpp")
_DTYPES = (torch.float32, torch.bfloat16)
_state: dict = {}  # "ext": the loaded module or None, once loading was tried
_off = [0]  # depth of nested ``disabled()`` blocks


def _build_tag() -> str:
    """A short tag of the kernel's source and this CPU's instruction set, part of the
    extension's name: the kernel is built with ``-march=native``, so a cache shared by two kinds
    of machine must not hand one the other's build, and two checkouts with other sources (a run
    in a worktree beside an edited main) must not rebuild each other's in place."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line
                break
    except OSError:
        pass
    key = platform.machine().encode() + flags.encode() + _SOURCE.read_bytes()
    return hashlib.sha1(key).hexdigest()[:12]


def _load():
    """The compiled extension, or None (turned off, or it could not be built: warned once)."""
    if "ext" in _state:
        return _state["ext"]
    _state["ext"] = None
    if os.environ.get("MZLITE_FUSED", "1") == "0":
        return None
    from torch.utils import cpp_extension

    # a venv's ninja (pip package) is on PATH only when the venv is activated
    bin_dir = os.path.dirname(sys.executable)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    try:
        _state["ext"] = cpp_extension.load(
            name=f"mzlite_fused_cpu_{_build_tag()}",
            sources=[str(_SOURCE)],
            extra_cflags=["-O3", "-march=native", "-fopenmp-simd"],
            verbose=False,
        )
    except Exception as e:  # no compiler, no ninja, a read-only cache: the eager path still works
        warnings.warn(
            f"mzlite's fused CPU kernel could not be built ({type(e).__name__}: "
            f"{str(e).strip().splitlines()[-1] if str(e).strip() else ''}); using the eager "
            "PyTorch path (same math, slower). Set MZLITE_FUSED=0 to silence this.",
            RuntimeWarning,
            stacklevel=3,
        )
    return _state["ext"]


def available() -> bool:
    """Whether the fused kernel is built and on (compiles it on the first call)."""
    return _load() is not None


def loaded() -> bool:
    """Whether the kernel is loaded in this process (an MZ block ran on CPU here), without
    building it: what result provenance records."""
    return _state.get("ext") is not None


@contextlib.contextmanager
def disabled():
    """Within the block the MZ blocks run the eager PyTorch path (for side-by-side
    comparisons: ``benchmarks/fit_speed.py levers``, the tests)."""
    _off[0] += 1
    try:
        yield
    finally:
        _off[0] -= 1


def usable(norm: nn.LayerNorm, *tensors: torch.Tensor) -> bool:
    """Whether ``add_norm`` can run these: CPU tensors of float32 or bfloat16, a LayerNorm over
    the last axis with weight and bias, the kernel built and not ``disabled()``. Otherwise
    (CUDA, float64) the caller runs the eager path."""
    if _off[0]:
        return False
    if not all(t.device.type == "cpu" and t.dtype in _DTYPES for t in tensors):
        return False
    if not isinstance(norm, nn.LayerNorm) or norm.weight is None or norm.bias is None:
        return False
    if len(norm.normalized_shape) != 1:
        return False
    if norm.weight.dtype != torch.float32 or norm.weight.device.type != "cpu":
        return False
    return available()


def layout_usable(x: torch.Tensor) -> bool:
    """Whether ``unpack_heads``/``pack_heads`` can run on ``x``: a CPU tensor (any dtype: they
    move bytes) and the kernel built and not ``disabled()``."""
    return not _off[0] and x.device.type == "cpu" and available()


def draw_seed() -> int:
    """A 64-bit dropout seed from torch's default CPU generator (reproducible under
    ``torch.manual_seed``)."""
    return int(torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64))


def keep_mask(tokens: int, d: int, p: float, seed: int) -> torch.Tensor:
    """The dropout mask ``(tokens, d)`` that ``add_norm`` uses for ``p`` and ``seed``:
    ``1 / (1 - p)`` where kept, 0 where dropped (all ones for ``p = 0``)."""
    _check_p(p)
    return _require().keep_mask(tokens, d, float(p), int(seed))


def _require():
    ext = _load()
    if ext is None:
        raise RuntimeError(
            "mzlite's fused CPU kernel is off (MZLITE_FUSED=0) or could not be built (see the "
            "warning); check fused.usable(...) before calling it"
        )
    return ext


def _check_p(p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1), got {p!r}")


class _AddNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, a, weight, bias, p, seed, eps, out_bf16):
        y, mean, rstd = _state["ext"].add_norm_forward(x, a, weight, bias, p, seed, eps, out_bf16)
        ctx.save_for_backward(x, a, weight, mean, rstd)
        ctx.p, ctx.seed = p, seed
        return y

    @staticmethod
    def backward(ctx, gy):
        x, a, weight, mean, rstd = ctx.saved_tensors
        gx, ga, gw, gb = _state["ext"].add_norm_backward(
            gy.contiguous(), x, a, weight, mean, rstd, ctx.p, ctx.seed
        )
        return gx, ga, gw, gb, None, None, None, None


def add_norm(
    x: torch.Tensor,
    a: torch.Tensor,
    norm: nn.LayerNorm,
    *,
    p: float = 0.0,
    seed: int = 0,
    rows_per_token: int = 1,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``norm(x + a * keep)``: residual ``x``, branch ``a`` (same shape ``(..., d)``), dropout
    with probability ``p`` (0: none) and one mask row per token: the leading axes, read as
    ``(tokens, rows_per_token, d)``, give the token of each row (``rows_per_token = n_g`` for
    generators ``(..., n_g, d)``, 1 for centres). ``out_dtype`` (float32 or bfloat16): None
    gives bfloat16 when ``x`` and ``a`` both are, else float32 (as eager ``norm(x + a)`` under
    autocast). Needs ``usable``."""
    if x.shape != a.shape:
        raise ValueError(f"x and a must have one shape, got {tuple(x.shape)} and {tuple(a.shape)}")
    _check_p(p)
    _require()
    d = x.shape[-1]
    if x.numel() % (rows_per_token * d):
        raise ValueError(
            f"x {tuple(x.shape)} is not a whole number of tokens of {rows_per_token} rows of {d}"
        )
    if out_dtype is None:
        out_dtype = torch.promote_types(x.dtype, a.dtype)
    if out_dtype not in _DTYPES:
        raise ValueError(f"out_dtype must be torch.float32 or torch.bfloat16, got {out_dtype}")
    out_bf16 = out_dtype == torch.bfloat16
    shape = x.shape
    y = _AddNorm.apply(
        x.contiguous().view(-1, rows_per_token, d),
        a.contiguous().view(-1, rows_per_token, d),
        norm.weight,
        norm.bias,
        float(p),
        int(seed),
        float(norm.eps),
        out_bf16,
    )
    return y.view(shape)


def reference_add_norm(
    x: torch.Tensor,
    a: torch.Tensor,
    norm: nn.LayerNorm,
    keep: torch.Tensor,
    rows_per_token: int = 1,
) -> torch.Tensor:
    """``add_norm`` in PyTorch with a given mask ``keep`` ``(tokens, d)`` (from ``keep_mask``),
    in the dtype of ``x``: the computation the kernel is tested against."""
    d = x.shape[-1]
    k = keep.to(x.dtype).view(-1, 1, d)  # (T, 1, d): one row per token, shared by its rows
    s = x.reshape(-1, rows_per_token, d) + a.reshape(-1, rows_per_token, d).to(x.dtype) * k
    return norm(s).view(x.shape)


class _UnpackHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, packing, n_heads):
        ctx.packing = packing
        return _state["ext"].unpack_heads(x, packing.slot_row, packing.B, packing.n, n_heads)

    @staticmethod
    def backward(ctx, g):  # the adjoint: real rows gathered back, spare rows get no gradient
        pk = ctx.packing
        return _state["ext"].pack_heads(g.contiguous(), pk.rows, pk.N), None, None


class _PackHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, packing):
        ctx.packing, ctx.n_heads = packing, x.shape[1]
        return _state["ext"].pack_heads(x, packing.rows, len(packing.rows))

    @staticmethod
    def backward(ctx, g):  # the adjoint: scattered back, spare rows added to the slot they copy
        pk, H = ctx.packing, ctx.n_heads
        g = g.contiguous()
        gx = _state["ext"].unpack_heads(g, pk.slot_row, pk.B, pk.n, H)
        if len(pk.rows) > pk.N:
            spare = g[pk.N :].sum(0).view(g.shape[1], H, -1).transpose(0, 1)  # (H, n_g, dk)
            b0, i0 = divmod(int(pk.flat[0]), pk.n)
            gx[b0, :, i0] += spare
        return gx, None


def unpack_heads(x: torch.Tensor, packing, n_heads: int) -> torch.Tensor:
    """``Packing.unpack_heads`` in one pass: packed ``(R, n_g, H d_k)`` -> head-major
    ``(B, H, n, n_g, d_k)``, zeros at the padding. Needs ``layout_usable``."""
    _require()
    return _UnpackHeads.apply(x.contiguous(), packing, n_heads)


def pack_heads(x: torch.Tensor, packing) -> torch.Tensor:
    """``Packing.pack_heads`` in one pass: head-major ``(B, H, n, n_g, d_k)`` -> packed
    ``(R, n_g, H d_k)``. Needs ``layout_usable``."""
    _require()
    return _PackHeads.apply(x.contiguous(), packing)
