"""``palopt bench``: every solver against the optimum (or a bound) over instance families."""

from __future__ import annotations

import argparse
import csv
import math
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from palopt.bench.families import PROFILES, Family, check_load, check_shape, read_data
from palopt.bench.report import format_table, plot_gaps, summarise, write_csv
from palopt.bench.runner import EXACT, HEURISTICS, Row, SolverSpec, run_bench
from palopt.commands import check_folder, file_path, require_plotting, writing
from palopt.errors import InputError, check_time_limit
from palopt.solvers.base import get_solver

#: Defaults of the full run, and of ``--quick``; an option given on the command line wins over both.
FULL = {
    "sizes": "16,64,256,1024,4096",
    "gpus_per_server": "4,8",
    "loads": "0.5,1.0",
    "profiles": ",".join(PROFILES),
    "seeds": 5,
    "time_limit": 10.0,
    "solvers": ",".join((*HEURISTICS, *EXACT)),
}
QUICK = {
    **FULL,
    "sizes": "16,64",
    "gpus_per_server": "4",
    "profiles": "longhorn",
    "seeds": 2,
    "time_limit": 3.0,
    "solvers": ",".join((*HEURISTICS, "cpsat", "milp:highs")),
}


def _ints(text: str, field: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise InputError(field, text, "expected comma-separated integers") from None
    if not values or min(values) < 1:
        raise InputError(field, text, "expected positive integers")
    return _distinct(values, field, values)


def _floats(text: str, field: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v]
    except ValueError:
        values = []
    if not values:
        raise InputError(field, text, "expected comma-separated numbers")
    return values


def _distinct(values: list[Any], field: str, keys: list[Any]) -> list[Any]:
    """``values``, or an InputError naming the first one whose key repeats an earlier one's
    (a family or a solver would be run, and summarised, twice)."""
    seen: set[Any] = set()
    for value, key in zip(values, keys, strict=True):
        if key in seen:
            raise InputError(field, value, "given twice")
        seen.add(key)
    return values


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``bench`` command."""
    p = sub.add_parser("bench", help="benchmark solvers against the optimum or a bound")
    p.add_argument(
        "--quick",
        action="store_true",
        help="small smoke run, under 2 minutes: the defaults below become "
        + ", ".join(f"{k.replace('_', '-')} {QUICK[k]}" for k in QUICK if QUICK[k] != FULL[k]),
    )
    p.add_argument("--sizes", help=f"cluster sizes in GPUs (default {FULL['sizes']})")
    p.add_argument("--gpus-per-server", help=f"server sizes (default {FULL['gpus_per_server']})")
    p.add_argument(
        "--loads",
        help="queue demands as shares of the cluster, each a whole percent such as 0.5 "
        f"(default {FULL['loads']})",
    )
    p.add_argument("--profiles", help=f"slowdown profiles (default {FULL['profiles']})")
    p.add_argument("--seeds", type=int, help=f"instances per family (default {FULL['seeds']})")
    p.add_argument(
        "--solvers",
        help=f"solvers; milp:cbc / milp:highs pick the MILP back end (default {FULL['solvers']})",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        help=f"seconds per exact solve (default {FULL['time_limit']:g})",
    )
    p.add_argument(
        "--exact-max-gpus",
        type=int,
        default=256,
        help="run exact solvers only up to this size; larger rounds use bounds "
        "(default %(default)s)",
    )
    p.add_argument(
        "--bound-time",
        type=float,
        default=5.0,
        help="seconds for the Lagrangian bound on rounds no exact solver runs on "
        "(default %(default)g)",
    )
    p.add_argument(
        "--out",
        type=file_path,
        default=Path("bench-results"),
        help="folder for bench.csv, summary.csv and gaps.png (default %(default)s)",
    )
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark and write the table, the CSVs and the plot."""
    if not args.no_plot:
        require_plotting("--no-plot")
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    sizes = _ints(args.sizes, "--sizes")
    per_server = _ints(args.gpus_per_server, "--gpus-per-server")
    loads = _floats(args.loads, "--loads")
    for load in loads:
        check_load(load, "--loads")
    _distinct(loads, "--loads", [round(100 * x) for x in loads])
    profiles = [p for p in args.profiles.split(",") if p]
    if not profiles:
        raise InputError("--profiles", args.profiles, "expected comma-separated names")
    for prof in profiles:
        if prof not in PROFILES:
            raise InputError("--profiles", prof, f"must be one of {', '.join(PROFILES)}")
    _distinct(profiles, "--profiles", profiles)
    if args.seeds < 1:
        raise InputError("--seeds", args.seeds, "must be at least 1")
    check_time_limit(args.time_limit, "--time-limit")
    if args.exact_max_gpus < 0:
        raise InputError("--exact-max-gpus", args.exact_max_gpus, "must be at least 0")
    if not 0 <= args.bound_time < math.inf:
        raise InputError("--bound-time", args.bound_time, "must be a finite number >= 0")
    for n in sizes:
        for g in per_server:
            check_shape(n, g, ("--sizes", "--gpus-per-server"))
    solvers = [SolverSpec.parse(s) for s in args.solvers.split(",") if s]
    if not solvers:
        raise InputError("--solvers", args.solvers, "expected comma-separated solver names")
    # Keyed by the solver as built, so "milp" and "milp:cbc" (its default back end) are one.
    built = [get_solver(s.name, **dict(s.options)) for s in solvers]
    keys = [(s.name, getattr(b, "backend", None)) for s, b in zip(solvers, built, strict=True)]
    _distinct([s.label for s in solvers], "--solvers", keys)
    if all(s.exact for s in solvers) and max(sizes) > args.exact_max_gpus:
        raise InputError(
            "--solvers",
            args.solvers,
            f"only exact solvers, which skip the {max(sizes)}-GPU rounds (above --exact-max-gpus "
            f"{args.exact_max_gpus}): add a heuristic, or raise --exact-max-gpus",
        )
    check_folder(args.out, "--out")
    read_data(profiles)  # a missing file found before an earlier run's results are replaced
    families = [
        Family(n, g, load, prof)
        for n in sizes
        for g in per_server
        for load in loads
        for prof in profiles
    ]
    with writing(args.out, "--out"):
        args.out.mkdir(parents=True, exist_ok=True)
        # an earlier run's, which this run may not replace
        for stale in ("summary.csv", "gaps.png"):
            (args.out / stale).unlink(missing_ok=True)
    with (args.out / "bench.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=[f.name for f in fields(Row)])
        writer.writeheader()

        def keep(got: list[Row]) -> None:
            # Each instance's rows as it ends, so an interrupted or failed run keeps them.
            writer.writerows(r.as_dict() for r in got)
            fh.flush()

        rows = run_bench(
            families,
            args.seeds,
            solvers,
            args.time_limit,
            args.exact_max_gpus,
            args.bound_time,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
            sink=keep,
        )
    summary = summarise(rows)
    write_csv(args.out / "summary.csv", summary)
    print(format_table(summary))
    exact = [s.label for s in solvers if s.exact]
    if exact and max(sizes) > args.exact_max_gpus:
        print(
            f"{', '.join(exact)}: run up to {args.exact_max_gpus} GPUs (--exact-max-gpus); "
            "larger rounds are measured against bounds only"
        )
    if not args.no_plot:
        plot_gaps(args.out / "gaps.png", summary)
    print(
        f"wrote {args.out / 'bench.csv'}, {args.out / 'summary.csv'}"
        + ("" if args.no_plot else f", {args.out / 'gaps.png'}")
    )
    return 0
