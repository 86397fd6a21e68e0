"""The public face: ``import mzlite`` gives the names a reader needs, cheaply, and ``mzlite.nn``
lists what a user builds with, not the blocks' internals or the paper's metadata."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import mzlite

PUBLIC = {
    "Zonotope": "mzlite.zonotope", "MatrixZonotope": "mzlite.zonotope",
    "SetTransformer": "mzlite.nn", "MZSetTransformer": "mzlite.nn", "build_model": "mzlite.nn",
    "make_task": "mzlite.tasks", "make_splits": "mzlite.tasks",
    "fit": "mzlite.train", "TrainConfig": "mzlite.train", "seed_everything": "mzlite.train",
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_the_public_names_are_the_subpackages_objects(name):
    assert name in mzlite.__all__ and name in dir(mzlite)
    assert getattr(mzlite, name) is getattr(importlib.import_module(PUBLIC[name]), name)


def test_an_unknown_name_names_itself():
    with pytest.raises(AttributeError, match="'nonesuch'"):
        mzlite.nonesuch  # noqa: B018


def test_import_mzlite_does_not_import_torch():
    """``python -m mzlite`` and the grader's judge import the package: torch waits for a name."""
    code = "import sys, mzlite; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_mzlite_nn_lists_what_a_user_builds_with():
    import mzlite.nn as nn

    assert {"SetTransformer", "MZSetTransformer", "MZAttention", "build_model"} <= set(nn.__all__)
    assert all(hasattr(nn, n) for n in nn.__all__)
    internal = {"Packing", "split_heads", "merge_heads", "zero_pad", "FAMILIES",
                "PAPER_COUNT_TOLERANCE"}  # fmt: skip
    assert not internal & set(nn.__all__) and not any(hasattr(nn, n) for n in internal)
    from mzlite.nn.attention import Packing, merge_heads, split_heads, zero_pad  # noqa: F401
    from mzlite.nn.registry import FAMILIES, PAPER_COUNT_TOLERANCE  # noqa: F401
