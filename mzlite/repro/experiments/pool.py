"""The worker pool of a table run and of a learning-rate search: spawned processes (no fork of a
process that already runs torch threads), each with its own number of torch threads, that end
when the process that started them dies, so that a killed ``run`` or ``search`` leaves nothing
training behind it (an unfinished job resumes from its checkpoint on the next run)."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import torch

PARENT_POLL_S = 1.0  # how soon a worker notices that its driver is gone


def spawn_pool(workers: int, threads: int) -> ProcessPoolExecutor:
    """``workers`` spawned processes with ``threads`` torch threads each, bound to this process."""
    ctx = mp.get_context("spawn")
    return ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(threads, os.getpid()))  # fmt: skip


def _init_worker(threads: int, driver: int) -> None:
    torch.set_num_threads(threads)
    threading.Thread(target=_exit_with, args=(driver,), name="mzlite-driver-watch",
                     daemon=True).start()  # fmt: skip


def _exit_with(driver: int) -> None:
    # A killed driver (SIGKILL, SIGTERM) cannot shut its pool down, and a spawned worker outlives
    # it: it would train on, unseen, for as long as its job lasts. Results and checkpoints are
    # written atomically, so ending here at once loses at most the current epoch.
    while os.getppid() == driver:
        time.sleep(PARENT_POLL_S)
    os._exit(1)
