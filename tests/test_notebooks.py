"""The chapter sources follow the book's pattern, and the executor skips only unchanged chapters."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TOC = (ROOT / "book" / "_toc.yml").read_text()


def _load_executor():
    spec = importlib.util.spec_from_file_location(
        "execute_notebooks", ROOT / "book/_scripts/execute_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_chapters():
    assert NOTEBOOKS, "notebooks/ holds no numbered chapter"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_source_is_clean_and_parameterised(path):
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c["outputs"] and c["execution_count"] is None for c in code), (
        "stored with outputs"
    )
    first = code[0]
    assert "parameters" in first["metadata"].get("tags", []), (
        "the first code cell must be tagged parameters"
    )
    src = "".join(first["source"])
    for name in ("profile", "seed", "device"):
        assert f"{name} =" in src, f"parameters cell lacks {name}"
    assert nb["cells"][0]["cell_type"] == "markdown" and "".join(
        nb["cells"][0]["source"]
    ).startswith("# ")
    assert f"chapters/{path.stem}" in TOC, f"{path.name} is not in book/_toc.yml"
    # nbformat 4.5: a cell without an id warns on every execution and will be an error
    ids = [c.get("id") for c in nb["cells"]]
    assert None not in ids and len(set(ids)) == len(ids), "every cell needs its own id"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_solution_is_checked_strictly_and_hidden(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and re.search(r"check\([^)]*strict=True", src):
            assert "hide-cell" in cell["metadata"].get("tags", []), (
                f"solution cell not hidden:\n{src}"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapters_use_only_public_api(path):
    """No code cell names a private module or name of mzlite (mzlite._x, mzlite.y._z)."""
    nb = json.loads(path.read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    private = sorted(set(re.findall(r"\bmzlite(?:\.[A-Za-z]\w*)*\._\w+", code)))
    assert not private, f"{path.name} uses private mzlite names: {private}"


def test_inputs_hash_tracks_sources_and_parameters(tmp_path, monkeypatch):
    ex = _load_executor()
    nb = tmp_path / "01_x.ipynb"
    cells = [
        {
            "cell_type": "code",
            "source": ["x = 1"],
            "metadata": {},
            "outputs": [],
            "execution_count": None,
        }
    ]
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    base = ex.inputs_hash(nb, {})
    assert ex.inputs_hash(nb, {}) == base
    assert ex.inputs_hash(nb, {"profile": "full"}) != base
    cells[0]["source"] = ["x = 2"]
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert ex.inputs_hash(nb, {}) != base
    # A change in the package is a change of every chapter's inputs.
    monkeypatch.setattr(ex, "ROOT", tmp_path)
    monkeypatch.setattr(ex, "DEPENDENCY_GLOBS", ["pkg/*.py"])
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("A = 1")
    h1 = ex.inputs_hash(nb, {})
    (tmp_path / "pkg" / "a.py").write_text("A = 2")
    assert ex.inputs_hash(nb, {}) != h1


def test_plotly_cdn_mathjax_tag_is_dropped():
    ex = _load_executor()
    tag = '<script src="https://cdnjs.cloudflare.com/ajax/libs/mathjax/3.2.2/es5/tex-svg.min.js"></script>'
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "outputs": [{"data": {"text/html": ["<div>", tag, "plot</div>"]}}],
            }
        ]
    }
    ex.drop_plotly_mathjax_cdn(nb)
    assert nb["cells"][0]["outputs"][0]["data"]["text/html"] == "<div>plot</div>"


def test_parameter_values_are_parsed_like_papermill():
    ex = _load_executor()
    assert (
        ex.parse_value("3") == 3
        and ex.parse_value("full") == "full"
        and ex.parse_value("0.5") == 0.5
    )


def test_kernel_channels_poll_in_slices():
    """The executor's guard against lost wake-ups: get_msg still returns a message sent while it
    waits, honours its timeout, and the patch is applied once."""
    import asyncio
    import time
    from queue import Empty

    import zmq
    import zmq.asyncio
    from jupyter_client.channels import AsyncZMQSocketChannel
    from jupyter_client.session import Session

    ex = _load_executor()
    ex.poll_channels_in_slices(slice_s=0.05)
    patched = AsyncZMQSocketChannel.get_msg
    ex.poll_channels_in_slices(slice_s=0.05)
    assert AsyncZMQSocketChannel.get_msg is patched and patched._sliced

    async def scenario():
        ctx = zmq.asyncio.Context()
        a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
        a.bind("inproc://mzlite-test")
        b.connect("inproc://mzlite-test")
        session = Session()
        chan = AsyncZMQSocketChannel(a, session)
        t0 = time.monotonic()
        with pytest.raises(Empty):
            await chan.get_msg(timeout=0.2)
        waited = time.monotonic() - t0

        async def send_later():
            await asyncio.sleep(0.15)
            session.send(b, "execute_reply", {"status": "ok"})

        sender = asyncio.ensure_future(send_later())
        msg = await chan.get_msg(timeout=None)
        await sender
        a.close(0)
        b.close(0)
        ctx.term()
        return waited, msg

    waited, msg = asyncio.run(scenario())
    assert 0.2 <= waited < 1.0
    assert msg["header"]["msg_type"] == "execute_reply" and msg["content"] == {"status": "ok"}
