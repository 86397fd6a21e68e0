"""Dump what the reproduction layer says, to check that a refactor of it changes nothing.

Every CLI output (``list``, ``report`` per table and profile, ``plan`` without measuring this CPU,
``plan --decide``, ``scorecard``, the search's dry run) and the verdict engine's values (every
claim's ``Verdict``, the landing page's findings) as one JSON file; deterministic, so two dumps of
the same results compare byte for byte (``make book`` writes smoke results, which change the
smoke reports: dump both sides on the same ``data/results``). About 30 s on 2 cores::

    python tools/dump_repro.py before.json     # on the commit before the change
    python tools/dump_repro.py after.json      # on the change
    python tools/dump_repro.py --diff before.json after.json   # exit 1 naming what differs
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import io
import json
import sys

from mzlite._io import atomic_write_json


def cli(*args: str) -> str:
    """What ``python -m mzlite ARGS`` prints (stdout and stderr), with its exit code if any."""
    from mzlite.__main__ import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            main(list(args))
        except SystemExit as e:
            buf.write(f"[exit {e.code}]")
    return buf.getvalue()


def plain(x):
    """``x`` as JSON values: dataclasses as dicts, enums as their values, floats to 10 places
    (so that a sum taken in another order does not count as a change)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, enum.Enum):
        return str(x.value)
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [plain(v) for v in x]
    if isinstance(x, float):
        return round(x, 10)
    return x if isinstance(x, int | str | bool | None) else repr(x)


def dump() -> dict:
    from mzlite.repro import experiments as ex
    from mzlite.repro.experiments import engine, findings
    from mzlite.repro.experiments.claims import claims

    out = {"list": cli("list")}
    for t in ex.TABLES:
        out[f"list {t}"] = cli("list", t)
        for p in ex.PROFILES:
            out[f"report {t} {p}"] = cli("report", t, "--profile", p)
            out[f"report {t} {p} text"] = cli("report", t, "--profile", p, "--format", "text")
        for p in ("cpu-annealed", "paper-sizes", "full"):
            out[f"plan {t} {p}"] = cli("plan", t, "--profile", p, "--no-measure")
    decide = ("--profile", "paper-sizes", "--decide", "--no-measure")
    out["plan decide"] = cli("plan", *ex.TABLES, *decide)
    out["scorecard"] = cli("scorecard")
    out["scorecard md"] = cli("scorecard", "--format", "markdown")
    families = ("--families", "baseline,mz,deepsets")
    out["search dry"] = cli("search", "paper-sizes", *families, "--dry-run",
                            "--cache-dir", "data/in-flight")  # fmt: skip
    every = claims()
    verdicts = zip(every, engine.judge_all(every), strict=True)
    out["verdicts"] = {f"{c.table}:{c.id}": plain(v) for c, v in verdicts}
    out["findings"] = plain(findings.findings(price=False))
    return out


def differences(before: dict, after: dict) -> list[str]:
    """The keys whose values differ, or that only one dump has."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", help="where to write the dump (JSON)")
    parser.add_argument("--diff", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two dumps")
    args = parser.parse_args(argv)
    if args.diff:
        before, after = (json.load(open(p)) for p in args.diff)
        changed = differences(before, after)
        print("\n".join(changed) or "identical", f"({len(changed)} of {len(before)} differ)")
        return int(bool(changed))
    if not args.out:
        parser.error("give OUT (where to write the dump) or --diff BEFORE AFTER")
    out = dump()
    atomic_write_json(args.out, out, indent=1, sort_keys=True, allow_nan=True)
    print(f"{len(out)} entries -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
