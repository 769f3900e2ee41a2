"""``palopt simulate`` and ``palopt reproduce fig10|fig12|fig13``."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from palopt.commands import (
    check_folder,
    check_not_input,
    file_path,
    input_file,
    option_dict,
    parse_option,
    penalties_arg,
    require_plotting,
    writing,
)
from palopt.errors import InputError, refuse_differing
from palopt.io import shared_path, write_text
from palopt.sim.engine import SimConfig, Simulator
from palopt.sim.experiments import (
    CELL_KEYS,
    fig10_sweep,
    fig12_sweep,
    fig13_sweep,
    format_tables,
    improvement_table,
    plot_normalised,
    prepare,
    simulate_cell,
)
from palopt.sim.metrics import OUTPUT_FILES, format_summary, summary, write_outputs
from palopt.sim.policies import get_policy
from palopt.sim.profile import correlated_profile, load_profile
from palopt.sim.trace import load_trace
from palopt.solvers import get_solver
from palopt.sweep import progress_bar, run_sweep
from palopt.topology import parse_shape


def _add_model_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (defaults: the artifact's compat mode)")
    g.add_argument(
        "--completion",
        choices=["round", "exact"],
        default="round",
        help="a job completes at the end of its last round (compat) or exactly",
    )
    g.add_argument(
        "--restart-cost",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds lost when a job resumes or migrates (default 0)",
    )
    g.add_argument(
        "--backfill",
        action="store_true",
        help="later waiting jobs may use GPUs a blocked job cannot use",
    )
    g.add_argument(
        "--extra-jobs",
        action="store_true",
        help="feed the artifact's untracked extra jobs after the trace",
    )
    g.add_argument(
        "--fixed-charge",
        action="store_true",
        help="charge the ranked (binned) slowdown instead of the raw one",
    )


def _config(args: argparse.Namespace, **over: Any) -> SimConfig:
    return SimConfig(
        completion=args.completion,
        restart_cost_s=args.restart_cost,
        backfill=args.backfill,
        extra_jobs=args.extra_jobs,
        **over,
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Add the commands of this module."""
    p = sub.add_parser("simulate", help="simulate a job trace round by round")
    p.add_argument(
        "--trace",
        type=input_file,
        required=True,
        help="CSV: job_id,num_gpus,submit_time,duration(iterations),model",
    )
    p.add_argument(
        "--cluster", default="16x4", help="SERVERSxGPUS or RACKSxSERVERSxGPUS (default %(default)s)"
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--profile",
        type=input_file,
        help="per-GPU CSV with PerfVar_<class> (charged) and sf_<class> (ranked), "
        "or a palopt.profile/1 JSON file from `palopt profile import` "
        "(assigned to the cluster with --seed, ranked by k-means levels)",
    )
    src.add_argument(
        "--correlated",
        type=float,
        metavar="RHO",
        help="synthetic profile, classes A-D correlated with RHO (seeded by --seed)",
    )
    p.add_argument(
        "--placement",
        default="pal",
        help="placement solver, or NAME:BACKEND (milp:highs) (see `palopt solvers`; default "
        "%(default)s)",
    )
    p.add_argument(
        "--placement-option",
        action="append",
        type=parse_option,
        default=[],
        metavar="KEY=VALUE",
        help="placement solver option (repeatable; as `palopt solve -o`), e.g. gap=0.01",
    )
    p.add_argument(
        "--scheduler", default="fifo", help="fifo, las, srtf or tiresias (default %(default)s)"
    )
    p.add_argument(
        "--scheduler-option",
        action="append",
        type=parse_option,
        default=[],
        metavar="KEY=VALUE",
        help="scheduler option (repeatable): tiresias takes thresholds=[S,S,...] (GPU-seconds; "
        "default [3600,36000]) and promote_knob=K",
    )
    p.add_argument(
        "--locality-penalty",
        type=penalties_arg,
        default=1.7,
        metavar="P",
        help="P beyond a server, or JSON {tier: p} / {class: {tier: p}} (default %(default)s)",
    )
    p.add_argument(
        "--round",
        type=float,
        default=360.0,
        metavar="S",
        help="round length (s, 0.001 to 1e12; default %(default)g)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed (random solvers, synthetic data; default %(default)s)",
    )
    p.add_argument("--time-limit", type=float, default=None, help="per-round solver limit (s)")
    p.add_argument(
        "--max-time",
        type=float,
        default=None,
        metavar="S",
        help="stop before the first round at or after S seconds; tracked jobs not completed "
        "by then are reported as unfinished (default: run until every tracked job completes)",
    )
    p.add_argument("--check", action="store_true", help="check every placement's feasibility")
    p.add_argument(
        "--out", type=file_path, help="directory for jobs.csv, rounds.csv, summary.json, plots"
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bar (jobs completed, on stderr)"
    )
    _add_model_options(p)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("reproduce", help="rerun the PAL paper's simulation experiments")
    p.add_argument("figure", choices=["fig10", "fig12", "fig13"])
    p.add_argument(
        "--data",
        type=file_path,
        help="the pal-artifact data directory (default: $PALOPT_DATA/pal-artifact, else "
        "../shared/data/pal-artifact beside the checkout)",
    )
    p.add_argument(
        "--out",
        type=file_path,
        default=Path("runs"),
        help="directory for the table (CSV, text) and plot (default %(default)s)",
    )
    p.add_argument("--workers", type=int, default=None, help="processes (default: CPUs)")
    p.add_argument("--workloads", help="fig10: e.g. 1-8 or 1,3,6 (default 1-8)")
    p.add_argument(
        "--jobs",
        type=int,
        help="fig13: tracked jobs per trace (as many again before and after; default 400)",
    )
    p.add_argument("--seeds", type=int, help="fig13: traces per load (default 1)")
    p.add_argument("--loads", help="fig13: jobs per hour (default 8,10,12,14)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="rerun every simulation (finished ones are otherwise reused)",
    )
    _add_model_options(p)
    p.set_defaults(func=cmd_reproduce)


def cmd_simulate(args: argparse.Namespace) -> int:
    """Run one simulation and write its outputs."""
    check_folder(args.out, "--out")
    if args.out:
        for name in OUTPUT_FILES:
            check_not_input(args.out / name, (args.trace, args.profile), "--out")
        if not args.no_plots:
            require_plotting("--no-plots")
    cfg = _config(
        args,
        round_s=args.round,
        penalties=args.locality_penalty,
        seed=args.seed,
        time_limit=args.time_limit,
        check=args.check,
        max_time_s=args.max_time,
    )
    topo = parse_shape(args.cluster)
    if args.profile is not None:
        profile = load_profile(args.profile, topo, args.seed)
    else:
        profile = correlated_profile(
            topo.n_gpus, ("classA", "classB", "classC", "classD"), 0.05, args.correlated, args.seed
        )
    if args.fixed_charge:
        profile = profile.fixed()
    trace = load_trace(args.trace)
    placement_options = option_dict(args.placement_option, "--placement-option")
    # The simulator passes the time limit to each solve, where it wins over an option.
    refuse_differing(
        "--time-limit", args.time_limit, placement_options, "time_limit", "--placement-option"
    )
    scheduler_options = option_dict(args.scheduler_option, "--scheduler-option")
    policy = get_policy(args.scheduler, **scheduler_options)
    solver = get_solver(args.placement, **placement_options)  # fails early, if unknown
    sim = Simulator(topo, profile, trace, solver, policy, cfg)
    if args.out:  # a folder that cannot be made is found before the run, not after it
        with writing(args.out, "--out"):
            args.out.mkdir(parents=True, exist_ok=True)
    bar = None if args.no_progress else progress_bar(len(trace), "job")
    res = sim.run(None if bar is None else lambda done: bar.update(done - bar.n))
    if bar is not None:
        bar.close()
    settings = {
        "trace": str(args.trace),
        "cluster": args.cluster,
        "profile": str(args.profile) if args.profile else f"correlated:{args.correlated}",
        "placement": args.placement,
        "placement_options": placement_options,
        "scheduler": policy.name,
        "scheduler_options": scheduler_options,
        "locality_penalty": args.locality_penalty,
        "round_s": args.round,
        "completion": args.completion,
        "restart_cost_s": args.restart_cost,
        "backfill": args.backfill,
        "extra_jobs": args.extra_jobs,
        "fixed_charge": args.fixed_charge,
        "seed": args.seed,
        "max_time_s": args.max_time,
        "time_limit": args.time_limit,
        "check": args.check,
    }
    if args.out:
        with writing(args.out, "--out"):
            s = write_outputs(res, args.out, plots=not args.no_plots, meta=settings)
    else:
        s = summary(res)
    print(format_summary(s))
    if args.out:
        print(
            f"wrote {args.out}/jobs.csv, rounds.csv, summary.json"
            + ("" if args.no_plots else ", jct_cdf.png, busy_gpus.png")
        )
    return 0


#: The options of one figure each: flag -> (figure, default).
FIGURE_OPTIONS = {
    "--workloads": ("fig10", "1-8"),
    "--jobs": ("fig13", CELL_KEYS["n_jobs"]),
    "--seeds": ("fig13", 1),
    "--loads": ("fig13", "8,10,12,14"),
}


def _int_list(text: str, field: str, allowed: range) -> list[int]:
    """Numbers written like ``1-8`` or ``1,3,6``, each in ``allowed`` (checked before a range is
    expanded)."""
    out: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi if dash else lo)
        except ValueError:
            raise InputError(field, text, "expected numbers like 1-8 or 1,3,6") from None
        if first not in allowed or last not in allowed:
            raise InputError(field, text, f"{field} are {allowed[0]} to {allowed[-1]}")
        if first > last:
            raise InputError(field, text, f"the range {part} runs backwards")
        for k in range(first, last + 1):
            if k in out:
                raise InputError(field, text, f"{k} is given twice")
            out.append(k)
    return out


def _model_name(args: argparse.Namespace) -> str:
    """The simulation model in output names: ``compat``, or the options that depart from it.

    Runs with different options write different files (``fig10-exact-restart60-backfill-runs.csv``).
    """
    parts = (
        "exact" if args.completion == "exact" else "",
        f"restart{args.restart_cost:g}" if args.restart_cost else "",
        "backfill" if args.backfill else "",
        "extra-jobs" if args.extra_jobs else "",
        "fixed-charge" if args.fixed_charge else "",
    )
    return "-".join(p for p in parts if p) or "compat"


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Run a paper experiment (resumably, see :mod:`palopt.sweep`) and print its table."""
    check_folder(args.out, "--out")
    if not args.no_plots:
        require_plotting("--no-plots")
    if args.data is None:
        args.data = shared_path("pal-artifact")
    if not (args.data / "sim-64gpu-cluster.csv").is_file():
        raise InputError("data", str(args.data), "no sim-64gpu-cluster.csv in this directory")
    for flag, value in FIGURE_OPTIONS.items():
        given = getattr(args, flag[2:])
        if given is None:
            setattr(args, flag[2:], value[1])
        elif args.figure != value[0]:
            raise InputError(flag, given, f"is an option of {value[0]}, not {args.figure}")
    for flag, value in (("--seeds", args.seeds), ("--jobs", args.jobs)):
        if value < 1:
            raise InputError(flag, value, "must be at least 1")
    model = _model_name(args)
    stem = f"{args.figure}-{model}"
    cells = args.out / f"{stem}-cells"
    options = {
        "completion": args.completion,
        "restart_cost": args.restart_cost,
        "backfill": args.backfill,
        "extra_jobs": args.extra_jobs,
        "fixed_charge": args.fixed_charge,
    }
    if args.figure == "fig10":
        workloads = _int_list(args.workloads, "workloads", range(1, 9))
        spec = fig10_sweep(args.data, cells, workloads, **options)
        by, group = "workload", None
    elif args.figure == "fig12":
        spec = fig12_sweep(args.data, cells, **options)
        by, group = "locality_penalty", None
    else:
        try:
            loads = [float(x) for x in args.loads.split(",")]
        except ValueError:
            raise InputError("loads", args.loads, "expected numbers like 8,10,12") from None
        if not all(0 < x < math.inf for x in loads):
            raise InputError("loads", args.loads, "jobs per hour must be positive")
        if len(set(loads)) < len(loads):
            raise InputError("loads", args.loads, "a load is given twice")
        spec = fig13_sweep(
            args.data, cells, loads, seeds=range(args.seeds), n_jobs=args.jobs, **options
        )
        by, group = "load", "scheduler"
    spec = prepare(spec)
    with writing(args.out, "--out"):  # found before the runs, not after them
        args.out.mkdir(parents=True, exist_ok=True)
    table = run_sweep(  # --fresh deletes the runs only once the input is known to be good
        spec,
        simulate_cell,
        workers=args.workers,
        progress=not args.no_progress,
        fresh=args.fresh,
    )
    write_text(args.out / f"{stem}-runs.csv", table.to_csv(index=False))
    texts = []
    groups = [(None, table)] if group is None else list(table.groupby(group, sort=False))
    for name, part in groups:
        jct, gains = improvement_table(part.to_dict("records"), by)
        head = f"{args.figure} ({model} model)" + (f", scheduler {name}" if name else "")
        texts.append(head + "\n" + format_tables(jct, gains, by))
        suffix = f"-{name}" if name else ""
        for base in () if args.no_plots else ("packed-sticky", "packed-nonsticky"):
            plot_normalised(
                jct,
                base,
                args.out / f"{stem}{suffix}-vs-{base}.png",
                f"{head}: avg JCT normalised to {base}",
            )
    text = "\n\n".join(texts)
    write_text(args.out / f"{stem}.txt", text + "\n")
    print(text)
    print(
        f"\nwrote {args.out}/{stem}-runs.csv, {stem}.txt{'' if args.no_plots else ' and plots'} "
        f"({len(table)} runs; "
        f"finished runs are kept in {cells} and reused: --fresh reruns them)"
    )
    return 0
