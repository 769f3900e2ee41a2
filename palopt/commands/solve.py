"""``palopt solve``, ``validate``, ``schema`` and ``solvers``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from palopt.commands import (
    check_output,
    file_path,
    input_file,
    option_dict,
    parse_option,
    writing,
)
from palopt.cost import assert_feasible, check_feasible, evaluate
from palopt.errors import InfeasiblePlacementError, InputError, counted, refuse_differing
from palopt.export import format_slurm
from palopt.instance import Instance
from palopt.io import instance_schema, load_instance, read_json, write_text
from palopt.result import PlacementResult, result_schema
from palopt.solvers import get_solver, list_solvers
from palopt.solvers.exact.runner import DEFAULT_TIME_LIMIT


def register(sub: argparse._SubParsersAction) -> None:
    """Add the commands of this module."""
    p = sub.add_parser("solve", help="place an instance's queue and print the placement")
    p.add_argument("instance", type=input_file, help="instance JSON file (see `palopt schema`)")
    p.add_argument(
        "--solver",
        default="pal",
        help="solver name, or NAME:BACKEND (milp:highs) (see `palopt solvers`; default "
        "%(default)s)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed, a non-negative integer (random solvers, exact back ends)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help=f"seconds (exact solvers, default {DEFAULT_TIME_LIMIT:g}; the greedy's local search "
        "stops at it)",
    )
    p.add_argument(
        "--option",
        "-o",
        action="append",
        type=parse_option,
        default=[],
        metavar="KEY=VALUE",
        help="solver option (repeatable), e.g. -o backend=highs",
    )
    p.add_argument(
        "--backend",
        help="the milp solver's back end, cbc or highs (the same as -o backend=...)",
    )
    p.add_argument("--out", type=file_path, help="also write the result as JSON to this file")
    p.add_argument(
        "--format",
        choices=["json", "table", "slurm"],
        default="json",
        help="what to print: the result as JSON (default), a table, or per placed "
        "job its Slurm node list and CUDA_VISIBLE_DEVICES per node",
    )
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser(
        "validate",
        help="check an instance file, and a placement of it; exit 2 with the reason if bad",
    )
    p.add_argument("instance", type=input_file, help="instance JSON file (see `palopt schema`)")
    p.add_argument(
        "--placement",
        type=input_file,
        help="also check this placement of the instance's queue: a result file of `palopt solve "
        "--out`, or a JSON object job id -> list of GPU ids (jobs left out wait)",
    )
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "schema", help="print the JSON Schema of the instance format (or of the result format)"
    )
    p.add_argument(
        "--result",
        action="store_true",
        help="the schema of the result format (palopt.result/1) instead",
    )
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("solvers", help="list the registered solvers and their options")
    p.add_argument("--all", action="store_true", help="include solvers missing dependencies")
    p.set_defaults(func=cmd_solvers)


def _number(x: float) -> str:
    """``x`` to four decimals, or to six digits when that would be long (weights reach 1e305)."""
    return f"{x:.4f}" if abs(x) < 1e9 else f"{x:.6g}"


def format_result(instance: Instance, result: PlacementResult) -> str:
    """A human-readable table of a placement result, its columns as wide as their cells."""
    topo = instance.topology
    head = (
        f"solver {result.solver}: status {result.status}, "
        f"{result.n_placed}/{len(result.placements)} jobs placed, "
        f"objective {_number(result.objective)}"
        + (
            f", bound {_number(result.bound)}, gap {100 * (result.gap or 0):.2f}%"
            if result.bound is not None
            else ""
        )
        + f", {1000 * result.wall_time:.1f} ms"
    )
    rows = [["job", "gpus", "action", "cost", "slowdown", "tier", "penalty", "placement"]]
    jobs = {j.id: j for j in instance.queue}
    for p in result.placements:
        n = str(jobs[p.job_id].num_gpus)
        if p.gpus and p.cost is not None:
            where = ",".join(topo.gpu_ids[g] for g in p.gpus)
            numbers = [_number(p.cost), f"{p.slowdown:.4f}", f"{p.tier}", f"{p.penalty:.3f}"]
            rows.append([p.job_id, n, p.action, *numbers, where])
        else:
            rows.append([p.job_id, n, p.action, "-", "-", "-", "-", f"not placed: {p.reason}"])
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    right = (False, True, False, True, True, False, True)  # the last column is not padded
    lines = [head]
    for row in rows:
        cells = [
            cell.rjust(w) if r else cell.ljust(w)
            for cell, w, r in zip(row, widths, right, strict=False)
        ]
        lines.append(" ".join(cells) + "  " + row[-1])
    return "\n".join(lines)


def cmd_solve(args: argparse.Namespace) -> int:
    """Solve an instance file."""
    check_output(args.out, [args.instance], "--out")
    instance = load_instance(args.instance)
    options = option_dict(args.option, "-o")
    refuse_differing("--backend", args.backend, options, "backend", "-o")
    # (the time limit is passed to solve, not as an option)
    refuse_differing("--time-limit", args.time_limit, options, "time_limit", "-o")
    if args.backend is not None:
        options["backend"] = args.backend
    solver = get_solver(args.solver, **options)
    result = solver.solve(instance, time_limit=args.time_limit, seed=args.seed)
    assert_feasible(instance, result)
    as_json = json.dumps(result.to_dict(instance), indent=1)
    if args.format == "json":
        text = as_json
    elif args.format == "slurm":
        text = format_slurm(result, instance)  # may refuse names Slurm cannot take
    else:
        text = format_result(instance, result)
    if args.out:
        with writing(args.out, "--out"):
            write_text(args.out, as_json + "\n")
    print(text)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate an instance file, and a placement of it."""
    inst = load_instance(args.instance)
    print(
        f"{args.instance}: valid ({counted(inst.topology.n_gpus, 'GPU')}, "
        f"{counted(inst.topology.n_servers, 'server')}, tiers {'/'.join(inst.topology.tiers)}, "
        f"{counted(len(inst.classes), 'class')}, {counted(len(inst.queue), 'queued job')})"
    )
    if args.placement is not None:
        data = read_json(args.placement)
        try:
            placement = _read_placement(data, inst)
        except InputError as exc:  # the file named: several are in play
            raise exc.prefixed(f"{args.placement}: ") from None
        problems = check_feasible(inst, placement)
        if problems:
            raise InfeasiblePlacementError(f"{args.placement}: infeasible: {'; '.join(problems)}")
        found = evaluate(inst, placement if isinstance(placement, dict) else placement.assignment())
        print(
            f"{args.placement}: feasible ({found.n_placed}/{len(inst.queue)} jobs placed, "
            f"objective {_number(found.total_cost)})"
        )
    return 0


def _read_placement(data: Any, instance: Instance) -> PlacementResult | dict[str, tuple[int, ...]]:
    """A result, or an object job id -> GPU ids as dense indices (see ``--placement``)."""
    if isinstance(data, dict) and isinstance(data.get("format"), str):  # not a job "format"
        return PlacementResult.from_dict(data, instance)
    if not isinstance(data, dict):
        raise InputError("placement", type(data).__name__, "expected a JSON object")
    out = {}
    for job_id, names in data.items():
        if not isinstance(names, list):
            raise InputError(f"placement.{job_id}", names, "expected a list of GPU ids")
        out[job_id] = tuple(int(g) for g in instance.topology.indices(names, f"placement.{job_id}"))
    return out


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of the instance format, or of the result format."""
    json.dump(result_schema() if args.result else instance_schema(), sys.stdout, indent=1)
    print()
    return 0


def cmd_solvers(args: argparse.Namespace) -> int:
    """List solvers."""
    for info in list_solvers(available_only=not args.all):
        mark = "" if info.available else "  (not installed: pip install 'palopt[exact]')"
        print(f"{info.name:<18} {info.description}{mark}")
        if info.options:
            print(f"{'':<18} options: {', '.join(info.options)}")
    return 0
