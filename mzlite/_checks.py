"""Input checks shared by every module: one place that turns bad input into a clear error.

Every public function of mzlite validates what it is given and raises ``ValueError`` (wrong
shape, range or value) or ``TypeError`` (wrong kind of object, dtype or device mix) with a
message that names the argument and says what was expected. Nothing is silently broadcast.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch


def as_float_tensor(name: str, x, *, like: torch.Tensor | None = None) -> torch.Tensor:
    """Return ``x`` as a floating tensor; a Python or NumPy value is converted (float32 default,
    or the dtype/device of ``like``). Integer or bool tensors are rejected: they hide mistakes."""
    if isinstance(x, torch.Tensor):
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
        return x
    try:
        if like is not None:
            return torch.as_tensor(x, dtype=like.dtype, device=like.device)
        t = torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(
            f"{name} must be a tensor or array-like of numbers, got {type(x).__name__}"
        ) from e
    return t if t.is_floating_point() else t.to(torch.get_default_dtype())


def check_ndim(name: str, x: torch.Tensor, min_ndim: int, shape_doc: str) -> None:
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have shape {shape_doc}, got shape {tuple(x.shape)}")


def check_finite(name: str, x: torch.Tensor) -> None:
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or inf values")


def check_finite_real(name: str, x: torch.Tensor, mask: torch.Tensor) -> None:
    """``x`` (B, n, ...) is finite at every real element (``mask`` (B, n) True); padding may hold
    anything, NaN included, since it never reaches an output. The error names the first bad
    element."""
    finite = torch.isfinite(x).reshape(*x.shape[:2], -1).all(-1)  # (B, n)
    bad = mask & ~finite
    if bool(bad.any()):
        b, i = (int(v) for v in bad.nonzero()[0])
        raise ValueError(
            f"{name} contains NaN or inf values in a real element (mask=True): set {b}, "
            f"element {i} ({int(bad.sum())} such elements in all)"
        )


def check_config_fields(cfg, positive=(), nonneg=(), choices: dict | None = None) -> None:
    """The one validator of model configs: ValueError naming the field for an int field that is
    not an int, or below 1 (``positive``) or 0 (``nonneg``), a value outside its ``choices``, a
    ``dropout`` outside [0, 1), or a ``d_model`` not divisible by ``n_heads``."""
    for name in (*positive, *nonneg):
        v = getattr(cfg, name)
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"{name} must be an int, got {v!r}")
        if name in positive and v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
        if v < 0:
            raise ValueError(f"{name} must be >= 0, got {v}")
    for name, allowed in (choices or {}).items():
        if getattr(cfg, name) not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {getattr(cfg, name)!r}")
    if hasattr(cfg, "dropout") and not (
        isinstance(cfg.dropout, (int, float)) and 0.0 <= cfg.dropout < 1.0
    ):
        raise ValueError(f"dropout must be a float in [0, 1), got {cfg.dropout!r}")
    if hasattr(cfg, "n_heads") and cfg.d_model % cfg.n_heads:
        raise ValueError(f"d_model={cfg.d_model} must be divisible by n_heads={cfg.n_heads}")


def check_same(names: Sequence[str], tensors: Sequence[torch.Tensor]) -> None:
    """All tensors share one device and one dtype (no silent casts or transfers)."""
    first = tensors[0]
    for n, t in zip(names[1:], tensors[1:], strict=False):
        if t.device != first.device:
            raise TypeError(
                f"{n} is on {t.device} but {names[0]} is on {first.device}; move them to one device"
            )
        if t.dtype != first.dtype:
            raise TypeError(
                f"{n} has dtype {t.dtype} but {names[0]} has dtype {first.dtype}; "
                "cast them to one dtype"
            )


def check_mask(mask: torch.Tensor | None, batch: int, n: int, device: torch.device) -> torch.Tensor:
    """Validate a set mask: bool ``(B, n)``, True for a real element, at least one True per row.

    ``None`` means every element is real. Returns the mask (a new all-True one for ``None``)."""
    if mask is None:
        return torch.ones(batch, n, dtype=torch.bool, device=device)
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(
            f"mask must be a bool tensor of shape (B, n) = ({batch}, {n}), True for a real "
            f"element; got {got}"
        )
    if tuple(mask.shape) != (batch, n):
        raise ValueError(f"mask must have shape (B, n) = ({batch}, {n}), got {tuple(mask.shape)}")
    if mask.device != device:
        raise TypeError(f"mask is on {mask.device} but the set is on {device}")
    empty = ~mask.any(dim=1)
    if bool(empty.any()):
        rows = empty.nonzero().flatten().tolist()[:10]
        raise ValueError(
            f"mask has rows with no real element (all False) at batch index {rows}; every set "
            "needs at least one element"
        )
    return mask


# The device strings mzlite runs on ("meta" builds a model without memory, to count its
# parameters); torch.device itself accepts twenty-odd types ("xla", ...) and its error lists
# them all, none of which fit or train here
DEVICES = "'auto', 'cpu', 'cuda', 'cuda:N', 'mps' or 'meta'"
_DEVICE = re.compile(r"(cpu|cuda|mps|meta)(:\d+)?")


def check_device(device: str | torch.device) -> None:
    """Raise unless ``device`` is a ``torch.device`` or one of ``DEVICES`` (not resolved: a
    config written on a CPU machine may name the CUDA device it will run on)."""
    if isinstance(device, torch.device):
        return
    if not isinstance(device, str):
        raise TypeError(f"device must be {DEVICES} or a torch.device, got {device!r}")
    if device != "auto" and not _DEVICE.fullmatch(device):
        raise ValueError(f"device must be {DEVICES}, got {device!r}")


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` means CUDA when available, else CPU; else one of ``DEVICES``, which must be
    available here."""
    check_device(device)
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} was asked for but CUDA is not available; use device='auto' or 'cpu'"
        )
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            f"device={device!r} was asked for but MPS is not available; use device='auto' or 'cpu'"
        )
    return dev
