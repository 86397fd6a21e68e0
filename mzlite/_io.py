"""Atomic file writes: a reader sees either the old file or the complete new one, never a part.

Every file mzlite writes (dataset cache, checkpoints, result JSON) goes through here. The bytes are
written to a temporary file in the *same directory* (so the final rename never crosses a file
system), flushed and fsync'ed, then moved over the target with ``os.replace``, which is atomic on
POSIX and Windows. If anything fails before the rename, the temporary file is removed and the old
target (if any) is untouched; a crash can at worst leave a stray ``.tmp-*`` file, never a truncated
target.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same directory + ``os.replace``).

    Parent directories are created. Returns the final path."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # why BaseException: a KeyboardInterrupt mid-write must not leave the temp file behind
        # either
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write_bytes`)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return atomic_write_bytes(path, text.encode(encoding))


def atomic_write_json(
    path: str | os.PathLike, obj, *, indent: int | None = 2, **dumps_kwargs
) -> Path:
    """Serialise ``obj`` with ``json.dumps`` first (so a non-serialisable object raises before any
    file is touched), then write it atomically. ``allow_nan`` defaults to False: NaN/inf are not
    valid JSON and would break strict readers."""
    dumps_kwargs.setdefault("allow_nan", False)
    text = json.dumps(obj, indent=indent, **dumps_kwargs)
    return atomic_write_text(path, text + "\n")


def json_safe(v):
    """``v`` with every non-finite float (NaN, inf) replaced by None, through dicts, lists and
    tuples (tuples become lists): what strict JSON can hold (``atomic_write_json`` refuses NaN)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    return v
