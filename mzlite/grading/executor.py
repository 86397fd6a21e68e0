"""The sandboxed program that executes one submitted notebook (never imported by the grader's
own process for that: :func:`mzlite.grading.grader._run` passes this file's text to
``python -I -c``, read from the grader's snapshot).

    python -I -c "$(cat executor.py)" SRC.ipynb DST.ipynb WORKDIR CELL_TIMEOUT [SKIP]

``SKIP``: the indices of cells not to run, comma-separated (the grader's choice:
:func:`mzlite.grading.submission.cells_to_skip`); they stay in ``DST`` with no outputs.

It needs nbformat and nbclient, not mzlite: the jail's copy of mzlite holds no grader, and the
kernel it starts imports the students' copy (``PYTHONPATH`` is the box)."""

from __future__ import annotations

import sys
from pathlib import Path


def execute_one(
    src: Path, dst: Path, cwd: Path, cell_timeout: int | None, skip: frozenset[int] = frozenset()
) -> None:
    """Execute ``src`` into ``dst``, errors recorded, the cells at the indices ``skip`` not run
    (kept in place, outputs cleared). A cell that runs past ``cell_timeout`` seconds is
    interrupted and recorded as an error, and the next cell runs: an endless loop costs one
    cell's limit, not the notebook's."""
    # nbformat validates with jsonschema, whose optional IRI format checker (rfc3987_syntax)
    # builds a parser from its grammar on import: 2 s of CPU per notebook, for a format the
    # notebook schema never uses. Unimportable here, jsonschema leaves that one checker out.
    sys.modules.setdefault("rfc3987_syntax", None)
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(src, as_version=4)
    skipped = {i: nb.cells[i] for i in sorted(skip) if 0 <= i < len(nb.cells)}
    for cell in skipped.values():
        cell.outputs, cell.execution_count = [], None
    # the kernel never sees a skipped cell: it is out of the notebook while it runs
    nb.cells = [c for i, c in enumerate(nb.cells) if i not in skipped]
    client = NotebookClient(
        nb,
        timeout=cell_timeout,
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=True,
        error_on_timeout={
            "ename": "CellTimeout",
            "evalue": f"the cell did not finish in {cell_timeout} s and was interrupted",
            "traceback": [],
        },
        resources={"metadata": {"path": str(cwd)}},
    )
    try:
        client.execute()
    finally:
        for i, cell in skipped.items():
            nb.cells.insert(i, cell)
        nbformat.write(nb, dst)


if __name__ == "__main__":
    source, target, workdir, limit = sys.argv[1:5]
    not_run = (
        frozenset(int(i) for i in sys.argv[5].split(",") if i) if sys.argv[5:] else frozenset()
    )
    execute_one(Path(source), Path(target), Path(workdir), int(limit), not_run)
