"""Moved to :mod:`mzlite.repro.experiments.launchers` (the launchers and the runner that calls
them now live in one package, so that neither has to import the other inside a function).
This alias keeps ``from mzlite.repro.launchers import RayLauncher`` working for one release,
with a ``DeprecationWarning``."""

from __future__ import annotations

import warnings

from mzlite.repro.experiments.launchers import LAUNCHERS, RayLauncher, get_launcher

__all__ = ["LAUNCHERS", "RayLauncher", "get_launcher"]

warnings.warn(
    "mzlite.repro.launchers moved to mzlite.repro.experiments.launchers; import RayLauncher "
    "from there (this alias goes away in the next release)",
    DeprecationWarning,
    stacklevel=2,
)
