"""Execute the chapters in notebooks/ with papermill into book/chapters/ (what the book renders).

    python book/_scripts/execute_notebooks.py                 # every chapter, smoke profile
    python book/_scripts/execute_notebooks.py 01_zonotopes -p profile full -p device cuda

Why a script and not `jupyter-book build --execute`: papermill injects parameters, names the
failing cell, and keeps widget state; and this script skips a chapter whose inputs (the notebook,
the mzlite sources, shipped results, parameters) are unchanged since its last execution, saying so.
An executed copy is written atomically: an interrupted run never leaves a half-executed page.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "notebooks"
TARGET = ROOT / "book" / "chapters"
# Every executed chapter's recorded wall time, for the teaching page (book/_scripts/teaching.py)
TIMES = TARGET / "execution_times.json"
# Everything a chapter's output can depend on besides its own source: every committed profile's
# results (a new profile's folder counts without a change here). Smoke results are not an input:
# the chapters write them while they execute (they are not committed either).
SMOKE_RESULTS = "smoke"
DEPENDENCY_GLOBS = [
    "mzlite/**/*.py",
    "mzlite/**/*.yaml",  # the prose kept as data (reading_choices.yaml, ...)
    *(
        f"data/results/{d.name}/**/*.json"
        for d in sorted((ROOT / "data" / "results").glob("*"))
        if d.is_dir() and d.name != SMOKE_RESULTS
    ),
    "data/paper/**/*.json",
    "data/checkpoints/**/*",
]
# The renderer that embeds plotly.js in the output, so figures render offline (see
# book-toolchain notes); and a mark that the kernel renders the book, so a chapter shows no
# progress bar that would stay frozen on the page (mzlite.repro.training_study.run_by_papermill).
KERNEL_ENV = {"PLOTLY_RENDERER": "notebook", "MZLITE_BOOK_EXECUTION": "1"}
# plotly's notebook renderer hard-codes a MathJax CDN <script> into every figure. The book page
# already typesets with its own local MathJax, so the executed copy drops that one tag.
PLOTLY_MATHJAX_CDN = re.compile(
    r'<script src="https://cdnjs\.cloudflare\.com/ajax/libs/mathjax/[^"]*"></script>'
)


def parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def inputs_hash(notebook: Path, parameters: dict) -> str:
    h = hashlib.sha256()
    nb = json.loads(notebook.read_text())
    # Only what changes the result: cell sources and tags, not editor metadata.
    for cell in nb["cells"]:
        h.update(cell["cell_type"].encode())
        h.update("".join(cell["source"]).encode())
        h.update(json.dumps(cell.get("metadata", {}).get("tags", [])).encode())
    h.update(json.dumps(parameters, sort_keys=True).encode())
    h.update(json.dumps(KERNEL_ENV, sort_keys=True).encode())
    for pattern in DEPENDENCY_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(ROOT)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def recorded_hash(executed: Path) -> str | None:
    try:
        return json.loads(executed.read_text())["metadata"]["mzlite_execution"]["inputs_hash"]
    except (OSError, KeyError, json.JSONDecodeError):
        return None


def drop_plotly_mathjax_cdn(nb: dict) -> None:
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/html" in data:
                html = (
                    "".join(data["text/html"])
                    if isinstance(data["text/html"], list)
                    else data["text/html"]
                )
                data["text/html"] = PLOTLY_MATHJAX_CDN.sub("", html)


def describe_failure(notebook: Path, err) -> str:
    source = getattr(err, "source", "") or ""
    first = "\n".join("    | " + line for line in source.splitlines()[:8])
    return (
        f"FAILED {notebook.relative_to(ROOT)}: cell {err.cell_index} "
        f"(execution count {err.exec_count}) raised {err.ename}: {err.evalue}\n{first}"
    )


def ipc_kernel_manager():
    """A kernel manager that talks to its kernel over Unix sockets named after the kernel's
    connection file. The default (TCP on localhost) picks free ports and releases them before
    the kernel binds them, so kernels started at the same moment (two builds, a build beside
    JupyterLab) can take each other's ports, and an execution then waits forever for a reply."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import CaselessStrEnum

    class IPCKernelManager(AsyncKernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

    return IPCKernelManager


def poll_channels_in_slices(slice_s: float = 1.0) -> None:
    """Make the kernel client re-poll its sockets every ``slice_s`` seconds.

    ``AsyncZMQSocketChannel.get_msg`` awaits one ``socket.poll(timeout)``; with cells that open
    ipywidgets comms, a reply that arrives during that wait is sometimes not signalled (a lost
    wake-up, nbclient issue #312), and the execution then hangs until the cell timeout although
    the kernel is idle. Polling in short slices re-checks the socket and picks the reply up."""
    from queue import Empty

    from jupyter_client.channels import AsyncZMQSocketChannel

    if getattr(AsyncZMQSocketChannel.get_msg, "_sliced", False):
        return
    original = AsyncZMQSocketChannel.get_msg

    async def get_msg(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = slice_s if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await original(self, timeout=min(slice_s, left))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    get_msg._sliced = True
    AsyncZMQSocketChannel.get_msg = get_msg


def run_papermill(source: Path, target: Path, timeout: int, parameters: dict | None = None):
    """Execute ``source`` into ``target`` with papermill as the book does: the python3 kernel over
    IPC sockets, run in ``notebooks/`` (the chapters' working directory), ``timeout`` seconds a
    cell. A failing cell raises ``papermill.PapermillExecutionError``. On a terminal a bar shows
    the chapter's cells as they run (where people wait); in a log (CI) the one line per chapter
    that ``execute`` prints is enough."""
    import papermill as pm

    poll_channels_in_slices()
    pm.execute_notebook(
        str(source),
        str(target),
        parameters=parameters,
        kernel_name="python3",
        cwd=str(SOURCE),
        execution_timeout=timeout,
        progress_bar={"desc": source.stem, "unit": "cell"} if sys.stderr.isatty() else False,
        kernel_manager_class=ipc_kernel_manager(),
    )


def chapters(names: list[str]) -> list[Path] | None:
    """The chapter notebooks named (stems, e.g. ``05_minimum_enclosing_ball``), every chapter
    when none is named; None, after printing the unknown names and the valid ones, otherwise."""
    available = {p.stem: p for p in sorted(SOURCE.glob("[0-9][0-9]_*.ipynb"))}
    unknown = [c for c in names if c not in available]
    if unknown:
        print(f"unknown chapter(s) {unknown}; available: {sorted(available)}", file=sys.stderr)
        return None
    return [available[c] for c in names] if names else list(available.values())


def execute(notebook: Path, parameters: dict, force: bool, timeout: int) -> bool:
    import papermill as pm

    executed = TARGET / notebook.name
    digest = inputs_hash(notebook, parameters)
    if not force and executed.exists() and recorded_hash(executed) == digest:
        print(f"up to date, not re-executed: {notebook.name} (inputs unchanged)", flush=True)
        return True
    TARGET.mkdir(parents=True, exist_ok=True)
    partial = executed.with_suffix(".partial.ipynb")
    os.environ.update(KERNEL_ENV)
    # One intra-op thread unless the caller says otherwise: the smoke models are small, and on a
    # busy 2-core machine two torch threads ran a training epoch ~20x slower than one.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    start = time.perf_counter()
    print(f"executing {notebook.name} with {parameters} ...", flush=True)
    try:
        run_papermill(notebook, partial, timeout, parameters)
    except pm.PapermillExecutionError as err:
        print(describe_failure(notebook, err), file=sys.stderr, flush=True)
        partial.unlink(missing_ok=True)
        return False
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    wall = time.perf_counter() - start
    nb = json.loads(partial.read_text())
    drop_plotly_mathjax_cdn(nb)
    nb["metadata"]["mzlite_execution"] = {
        "inputs_hash": digest,
        "parameters": parameters,
        "wall_time_s": round(wall, 1),
        "executed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu_count": os.cpu_count(),
        "torch_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    partial.write_text(json.dumps(nb, indent=1))
    os.replace(partial, executed)
    print(f"executed {notebook.name} in {wall:.1f} s", flush=True)
    return True


def record_times() -> dict:
    """Write the recorded wall time of every executed chapter (re-executed now or not) to TIMES."""
    times = {}
    for executed in sorted(TARGET.glob("[0-9][0-9]_*.ipynb")):
        if executed.name.endswith(".partial.ipynb"):
            continue
        meta = json.loads(executed.read_text())["metadata"].get("mzlite_execution", {})
        if "wall_time_s" in meta:
            times[executed.stem] = meta
    if TARGET.exists():
        partial = TIMES.with_suffix(".partial")
        partial.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
        os.replace(partial, TIMES)
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("chapters", nargs="*", help="notebook names (without .ipynb); default: all")
    ap.add_argument(
        "-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE")
    )
    ap.add_argument("--force", action="store_true", help="re-execute even when up to date")
    ap.add_argument("--timeout", type=int, default=900, help="seconds allowed per cell")
    args = ap.parse_args(argv)
    parameters = {name: parse_value(value) for name, value in args.parameter}
    chosen = chapters(args.chapters)
    if chosen is None:
        return 2
    failed = [nb.name for nb in chosen if not execute(nb, parameters, args.force, args.timeout)]
    record_times()
    if failed:
        print(f"{len(failed)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
