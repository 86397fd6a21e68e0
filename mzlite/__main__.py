"""``python -m mzlite``: list, run and report the paper's tables (see ``mzlite.repro.experiments``).

    python -m mzlite list
    python -m mzlite run tab:meb --profile smoke
    python -m mzlite run tab:meb --profile full --seeds 0-4 --device cuda --workers 4 \\
        --models mz_full,st
    python -m mzlite run tab:meb --profile full --device cuda --launcher ray --address auto \\
        --gpus-per-job 0.25 --checkpoint-dir /shared/checkpoints
    python -m mzlite report tab:meb --profile smoke [--format text]
    python -m mzlite plan tab:tdof-verify tab:meb --profile cpu-annealed --cells 'd8-*'
    python -m mzlite plan tab:hull tab:meb --decide --no-measure   # the sequential decision rule
    python -m mzlite scorecard [tab:tdof-verify ...] [--profiles cpu-annealed] [--format markdown]
    python -m mzlite search paper-sizes --dry-run     # the learning-rate search: its trials, price
    python -m mzlite search paper-sizes --families mz --workers 2
    python -m mzlite grade SUBMISSIONS/ --chapters 1,3 [--roster CSV] [--points FILE] [--jobs N] ...

Bad input (unknown table, profile or model, an invalid seed range) prints what is valid and
exits with status 2.

Each subcommand imports its own module inside ``main`` (``list`` and ``run`` never load the
scorecard, the planner or the page renderers; ``grade`` hands over to the grader before this
parser is built): the one module where function-level mzlite imports are the rule.
"""

from __future__ import annotations

import argparse
import sys


def _profiles() -> list[str]:
    from mzlite.repro.experiments.specs import PROFILES

    return list(PROFILES)


def _profile_order() -> tuple[str, ...]:
    from mzlite.repro.experiments.results import PROFILE_ORDER

    return PROFILE_ORDER


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m mzlite", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("list", help="tables, their cells and profiles, results on disk")
    p.add_argument("table", nargs="?", help="show this table's cells")
    p.add_argument("--results-dir", default=None)

    p = sub.add_parser("run", help="run the missing (cell, seed) jobs of a table")
    p.add_argument("table")
    p.add_argument(
        "--profile",
        default="smoke",
        help="one of " + ", ".join(_profiles()) + " (default: smoke)",
    )
    p.add_argument("--seeds", default=None, help="e.g. 0-4 or 0,2,5 (default: the profile's)")
    p.add_argument("--device", default="auto", help="auto (default), cpu or cuda")
    p.add_argument(
        "--precision",
        choices=("auto", "bf16", "float32"),
        default="auto",
        help="auto (default: bf16 autocast on a CPU with native bf16, float32 else); a GPU run "
        "asks for bf16 to train the same experiment as bf16 CPU runs",
    )
    p.add_argument("--workers", type=int, default=None, help="training processes (CPU: 1 a core)")
    p.add_argument(
        "--stack",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="train each cell's seeds as one stacked model (default: on CUDA only)",
    )
    p.add_argument(
        "--graph",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a stack's training step as a CUDA graph (default: where seeds stack on CUDA)",
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads per job")
    p.add_argument("--models", default=None, help="comma-separated model names or ids")
    p.add_argument("--cells", default=None, help="comma-separated cell-id glob patterns")
    p.add_argument("--results-dir", default=None)
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--quiet", action="store_true")
    p.add_argument(
        "--launcher",
        choices=("local", "ray"),
        default="local",
        help="local (default: this machine) or ray (each job a Ray task)",
    )
    p.add_argument(
        "--address",
        default=None,
        help="ray: auto, ray://HOST:10001 (default: start a local Ray instance)",
    )
    p.add_argument("--gpus-per-job", type=float, default=None, help="ray: e.g. 0.25")
    p.add_argument(
        "--checkpoint-dir",
        default=None,
        help="ray: a path every node reaches, for checkpoints that outlive a worker",
    )

    p = sub.add_parser("plan", help="estimated CPU hours of the jobs still to run")
    p.add_argument("tables", nargs="+")
    p.add_argument("--profile", default="cpu-annealed")
    p.add_argument("--seeds", default=None, help="e.g. 0-2 (default: the profile's)")
    p.add_argument("--models", default=None, help="comma-separated model names or ids")
    p.add_argument("--cells", default=None, help="comma-separated cell-id glob patterns")
    p.add_argument("--workers", type=int, default=1, help="divides the wall-time estimate")
    p.add_argument(
        "--no-measure", action="store_true", help="do not time models that have no result on disk"
    )
    p.add_argument(
        "--decide",
        action="store_true",
        help="the sequential decision rule: each claim's state, its steps in order and their "
        "price, the next steps' commands (mzlite.repro.experiments.plan.decide)",
    )
    p.add_argument(
        "--first", type=int, default=None, help="--decide: baselines in a claim's first step (2)"
    )
    p.add_argument(
        "--gpu-throughput",
        default=None,
        help="a JSON of benchmarks/gpu_throughput.py --json: also price the jobs in GPU hours",
    )
    p.add_argument("--results-dir", default=None)

    p = sub.add_parser("report", help="our results beside the paper's numbers")
    p.add_argument("table")
    p.add_argument("--profile", default="smoke")
    p.add_argument("--format", choices=("markdown", "text"), default="markdown")
    p.add_argument("--results-dir", default=None)

    p = sub.add_parser("scorecard", help="the paper's claims, ours beside them, and verdicts")
    p.add_argument("tables", nargs="*", help="table labels (default: every table with claims)")
    p.add_argument(
        "--profiles", default=None, help="comma-separated, best evidence first "
        "(default: " + ",".join(_profile_order()) + ")"
    )  # fmt: skip
    p.add_argument("--format", choices=("text", "markdown"), default="text")
    p.add_argument("--results-dir", default=None)

    p = sub.add_parser("search", help="choose each family's lr and schedule for a profile")
    p.add_argument("profile", help="a profile whose rates are searched (paper-sizes)")
    p.add_argument("--families", default=None, help="comma-separated: mz, baseline, deepsets")
    p.add_argument("--seeds", default=None, help="e.g. 0-1 (default: 0,1)")
    p.add_argument("--workers", type=int, default=1, help="studies trained side by side")
    p.add_argument("--threads", type=int, default=1, help="torch threads per study")
    p.add_argument("--dry-run", action="store_true", help="list the studies and their price")
    p.add_argument(
        "--write-only", action="store_true",
        help="write the search file from the journals so far; train nothing",
    )  # fmt: skip
    p.add_argument(
        "--retire", action="store_true",
        help="once every family trains with this search's final choices: keep the profile's "
        "campaign at its former choices in its newest superseded profile (moves the results the "
        "new choices make another experiment, copies the rest; with --dry-run: lists them)",
    )  # fmt: skip
    p.add_argument("--results-dir", default=None)
    p.add_argument("--cache-dir", default=None)

    # listed for --help only: main() hands `grade` and all its options to the grader's own CLI
    sub.add_parser(
        "grade", help="grade student notebooks without trusting them (options: grade --help)"
    )
    return ap


def _split(s):
    return None if s is None else [x.strip() for x in s.split(",") if x.strip()]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["grade"]:  # one CLI for the grader: roster, points, jobs, secret, isolation
        from mzlite.grading import grader as grading

        return grading.main(argv[1:])
    args = _parser().parse_args(argv)
    from mzlite.repro import experiments as ex

    try:
        if args.cmd == "list":
            if args.table:
                spec = ex.get_table(args.table)
                print(f"{spec.label}: {spec.title}")
                for c in spec.cells:
                    refs = "; ".join(f"{r.row} x {r.column} ({r.metric})" for r in c.paper)
                    print(
                        f"  {c.id:32s} {c.part:8s} {c.task} {c.options} {c.model} "
                        f"{c.model_kwargs or ''} -> {refs or 'no paper number'}"
                    )
                return 0
            print(f"profiles: {', '.join(ex.PROFILES)}")
            for r in ex.list_tables(args.results_dir):
                done = "  ".join(f"{p} {r[f'{p}_results']}/{r[f'{p}_jobs']}" for p in ex.PROFILES)
                print(
                    f"{r['label']:22s} {r['cells']:3d} cells ({r['ablation_cells']} ablation)  "
                    f"{done}  {r['title']}"
                )
            return 0
        if args.cmd == "run":
            seeds = None if args.seeds is None else ex.parse_seeds(args.seeds)
            launcher = args.launcher
            if launcher == "ray":
                from mzlite.repro.experiments.launchers import RayLauncher

                launcher = RayLauncher(address=args.address, gpus_per_job=args.gpus_per_job,
                                       checkpoint_dir=args.checkpoint_dir)  # fmt: skip
            elif args.address or args.gpus_per_job is not None or args.checkpoint_dir:
                raise ValueError("--address, --gpus-per-job, --checkpoint-dir need --launcher ray")
            out = ex.run(
                args.table,
                args.profile,
                seeds=seeds,
                device=args.device,
                workers=args.workers,
                models=_split(args.models),
                results_dir=args.results_dir,
                progress=not args.quiet,
                cells=_split(args.cells),
                cache_dir=args.cache_dir,
                threads=args.threads,
                launcher=launcher,
                precision=args.precision,
                stack=args.stack,
                graph=args.graph,
            )
            print(
                f"done {len(out['done'])}, skipped {len(out['skipped'])}, "
                f"failed {len(out['failed'])}"
            )
            return 1 if out["failed"] else 0
        if args.cmd == "plan":
            from mzlite.repro.experiments.plan import FIRST_STEP_BASELINES, decide, plan

            seeds = None if args.seeds is None else ex.parse_seeds(args.seeds)
            if args.decide:
                if args.models or args.cells or args.workers != 1:
                    raise ValueError("--decide chooses the cells itself: drop --models, --cells "
                                     "and --workers")  # fmt: skip
                first = FIRST_STEP_BASELINES if args.first is None else args.first
                print(decide(args.tables, args.profile, seeds, args.results_dir,
                             measure=not args.no_measure, first=first).to_text())  # fmt: skip
                return 0
            if args.first is not None:
                raise ValueError("--first applies to --decide only")
            p = plan(
                args.tables,
                args.profile,
                seeds,
                _split(args.models),
                _split(args.cells),
                args.results_dir,
                args.workers,
                measure=not args.no_measure,
            )
            print(p.to_text())
            if args.gpu_throughput:
                import json
                from pathlib import Path

                from mzlite.repro.experiments.plan import gpu_text

                path = Path(args.gpu_throughput)
                if not path.exists():
                    raise ValueError(f"--gpu-throughput: no such file {path}")
                measured = json.loads(path.read_text())
                print("\n" + gpu_text(p.gpu_hours(measured), measured))
            return 0
        if args.cmd == "report":
            from mzlite.repro.experiments.report import report

            r = report(args.table, args.profile, args.results_dir)
            print(r.to_markdown() if args.format == "markdown" else r.to_text())
            return 0
        if args.cmd == "search":
            from mzlite.repro.experiments import search as se

            fams = _split(args.families)
            seeds = se.SEEDS if args.seeds is None else ex.parse_seeds(args.seeds)
            if args.retire:
                done = se.retire_superseded(args.profile, args.results_dir, args.dry_run)
                to = se.SUPERSEDED[args.profile][0]
                for action in ("move", "copy"):
                    mine = [(a, b) for act, a, b in done if act == action]
                    past = {"move": "moved", "copy": "copied"}[action]
                    verb = f"would {action}" if args.dry_run else past
                    print(f"{verb} {len(mine)} result(s) to {to}")
                    print("".join(f"  {a.parent.name}/{a.name}\n" for a, _ in mine), end="")
                return 0
            if args.dry_run:
                print(se.price(args.profile, fams, seeds, args.results_dir, args.cache_dir))
                return 0
            if args.write_only:
                studies = se.plan_search(args.profile, fams, seeds)
                out = se.write_search(args.profile, studies, cache_dir=args.cache_dir,
                                      results_dir=args.results_dir)  # fmt: skip
                print(out["printed"])
                return 0
            out = se.search(args.profile, fams, seeds, cache_dir=args.cache_dir,
                            results_dir=args.results_dir, workers=args.workers,
                            threads=args.threads)  # fmt: skip
            print(out["printed"])
            return 0
        if args.cmd == "scorecard":
            from mzlite.repro.experiments import present
            from mzlite.repro.experiments.scorecard import PROFILE_ORDER, scorecard

            sc = scorecard(
                args.tables or None,
                tuple(_split(args.profiles) or PROFILE_ORDER),
                args.results_dir,
            )
            text = present.scorecard_text if args.format == "text" else present.scorecard_markdown
            print(text(sc))
            return 0
    except (ValueError, ImportError) as e:  # ImportError: --launcher ray without Ray
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished results are kept; a rerun resumes", file=sys.stderr)
        return 130
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
