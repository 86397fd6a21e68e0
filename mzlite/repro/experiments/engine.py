"""The verdict engine."""

from __future__ import annotations

import json

from mzlite.repro.experiments.execute import result_amp

_FREE = ("seed", "device", "num_threads", "eval_batch_size")  # where and how fast, not what


def protocol_key(result: dict) -> str:
    """What a result computed, apart from its seed: training configuration (without seed,
    device and threads; precision as the run resolved it), data (dataset keys and generator
    version), model configuration, and the code (git commit). Two results of a cell with
    different keys are never averaged: a campaign runs every seed of a cell at one commit."""
    cfg = {k: v for k, v in (result.get("train_config") or {}).items() if k not in _FREE}
    cfg["amp"] = result_amp(result)
    key = {
        "train": cfg,
        "data": result.get("dataset_keys"),
        "data_code": result.get("data_code_version"),
        "model": result.get("model_config"),
        "sizes": result.get("sizes"),
        "code": (result.get("provenance") or {}).get("git_commit"),
    }
    return json.dumps(key, sort_keys=True, default=str)
