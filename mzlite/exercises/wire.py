"""Answers as plain data: how a value travels between a student's process and the grader's.

The grader never unpickles what a student's process wrote (unpickling runs code). Answers and the
arguments and results of a student's function cross process boundaries as JSON in which tensors
and arrays are tagged objects holding their dtype, shape and raw bytes. :func:`decode` rebuilds
only numbers, strings, booleans, ``None``, ``...``, lists, tuples, dicts with string keys, torch
tensors and numpy arrays of a fixed set of dtypes; anything else is refused with a ``WireError``.

This module imports nothing of mzlite, so the sandboxed function worker can load it on its own.
"""

from __future__ import annotations

import base64
import json
import math
import sys

import numpy as np

# dtypes allowed on the wire (numpy names; torch tensors use the same names)
DTYPES = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")
MAX_ELEMENTS = 10_000_000  # an answer larger than this is not an exercise answer
MAX_DEPTH = 32


class WireError(ValueError):
    """A value that cannot be sent (encode) or a message that is not a valid answer (decode)."""


def _tensor_types():
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency of mzlite
        return None
    return torch


def _imported_torch():
    """torch where this process imported it, else None: a value can only be a tensor once
    torch is imported, and a process that answers with numpy alone (the grader's function
    worker, chapter 10) is spared its import, seconds of CPU."""
    return sys.modules.get("torch")


def _array_payload(arr: np.ndarray) -> dict:
    if arr.dtype.name not in DTYPES:
        raise WireError(f"arrays of dtype {arr.dtype.name} cannot be graded; use one of {DTYPES}")
    if arr.size > MAX_ELEMENTS:
        raise WireError(f"an array of {arr.size} elements is larger than an answer can be")
    arr = np.ascontiguousarray(arr)
    return {
        "dtype": arr.dtype.name,
        "shape": list(arr.shape),
        "data": base64.b64encode(arr.tobytes()).decode("ascii"),
    }


def to_data(value, depth: int = 0):
    """``value`` as JSON-ready data (tensors and arrays tagged); ``WireError`` when it holds
    anything else (an object, a function, a generator)."""
    if depth > MAX_DEPTH:
        raise WireError("the answer is nested too deeply")
    torch = _imported_torch()
    if value is None or isinstance(value, bool | str):
        return value
    if value is ...:
        return {"__ellipsis__": True}
    if isinstance(value, int):
        return value if abs(value) < 2**63 else float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, np.generic):
        return to_data(value.item(), depth + 1)
    if isinstance(value, np.ndarray):
        return {"__ndarray__": _array_payload(value)}
    if torch is not None and isinstance(value, torch.Tensor):
        arr = value.detach().to("cpu")
        if arr.dtype == torch.bfloat16:
            arr = arr.float()
        return {"__tensor__": _array_payload(arr.resolve_conj().resolve_neg().numpy())}
    if isinstance(value, list | tuple):
        items = [to_data(v, depth + 1) for v in value]
        return items if isinstance(value, list) else {"__tuple__": items}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise WireError("a dict answer must have string keys")
        return {"__dict__": {k: to_data(v, depth + 1) for k, v in value.items()}}
    raise WireError(f"an answer of type {type(value).__name__} cannot be graded")


def _array(payload) -> np.ndarray:
    if not isinstance(payload, dict) or set(payload) != {"dtype", "shape", "data"}:
        raise WireError("malformed array")
    dtype, shape = payload["dtype"], payload["shape"]
    if dtype not in DTYPES:
        raise WireError(f"dtype {dtype!r} is not one of {DTYPES}")
    if not isinstance(shape, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and 0 <= s for s in shape
    ):
        raise WireError("malformed array shape")
    if math.prod(shape) > MAX_ELEMENTS:
        raise WireError("array too large")
    raw = base64.b64decode(payload["data"], validate=True)
    arr = np.frombuffer(raw, dtype=np.dtype(dtype))
    if arr.size != math.prod(shape):
        raise WireError("array data does not match its shape")
    return arr.reshape(shape).copy()


def from_data(data, depth: int = 0):
    """The inverse of :func:`to_data`; refuses anything :func:`to_data` does not write."""
    if depth > MAX_DEPTH:
        raise WireError("the message is nested too deeply")
    if data is None or isinstance(data, bool | int | float | str):
        return data
    if isinstance(data, list):
        return [from_data(v, depth + 1) for v in data]
    if isinstance(data, dict) and len(data) == 1:
        tag, body = next(iter(data.items()))
        if tag == "__ellipsis__" and body is True:
            return ...
        if tag == "__float__" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "__tuple__" and isinstance(body, list):
            return tuple(from_data(v, depth + 1) for v in body)
        if tag == "__dict__" and isinstance(body, dict):
            return {str(k): from_data(v, depth + 1) for k, v in body.items()}
        if tag == "__ndarray__":
            return _array(body)
        if tag == "__tensor__" and (torch := _tensor_types()) is not None:
            return torch.from_numpy(_array(body))
    raise WireError("not a valid answer message")


def encode(value) -> str:
    """One line of JSON (no NaN literals) for ``value``."""
    return json.dumps(to_data(value), allow_nan=False, separators=(",", ":"))


def decode(text: str):
    """The value of one line written by :func:`encode`; ``WireError`` for anything else."""
    if not isinstance(text, str) or len(text) > 8 * MAX_ELEMENTS:
        raise WireError("the message is too large")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise WireError(f"not JSON: {e}") from None
    return from_data(data)
