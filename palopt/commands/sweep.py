"""``palopt sweep``: run a grid of simulations (local process pool or Ray) and summarise it."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from palopt.commands import check_folder, check_not_input, input_file, writing
from palopt.errors import InputError
from palopt.io import write_text
from palopt.sim.experiments import (
    BASELINES,
    CELL_KEYS,
    PATH_KEYS,
    format_tables,
    improvement_table,
    input_files,
    prepare,
    simulate_cell,
)
from palopt.sweep import load_grid, run_sweep


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` command."""
    p = sub.add_parser(
        "sweep",
        help="run a grid of simulations (traces x placements x schedulers x ...) resumably",
        description="Expand a grid TOML file into independent simulations (the keys of "
        "palopt.sim.experiments.CELL_KEYS), run the unfinished ones, and write one results "
        "table and the paper-style summary. Relative paths (out, data, trace, profile) are "
        "taken from the grid file's folder. See palopt/sweep.py for the file format.",
    )
    p.add_argument("grid", type=input_file, help="grid TOML file")
    p.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="local process pool (default) or Ray tasks",
    )
    p.add_argument("--workers", type=int, default=None, help="local processes (default: CPU count)")
    p.add_argument(
        "--address", default=None, help="Ray cluster address (default: start a local Ray instance)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="rerun every cell (finished ones, in the results folder's cells/, are otherwise "
        "reused)",
    )
    p.set_defaults(func=cmd_sweep)


def simulate_from(base: Path, cell: dict[str, Any]) -> dict[str, Any]:
    """:func:`~palopt.sim.experiments.simulate_cell` with the cell's relative file parameters
    (:data:`~palopt.sim.experiments.PATH_KEYS`) read from ``base``, the grid file's folder. The
    cells keep the paths as the grid writes them, so a cell's id, and whether it is done, do not
    depend on the folder the sweep runs from (the grid file's folder, seen from the results
    folder, is in the id: see :func:`~palopt.sim.experiments.prepare`)."""
    return simulate_cell(
        {k: str(base / v) if k in PATH_KEYS and isinstance(v, str) else v for k, v in cell.items()}
    )


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run a sweep and print its summary."""
    if args.address is not None and args.engine != "ray":
        raise InputError("--address", args.address, "is for --engine ray")
    if args.workers is not None and args.engine == "ray":  # Ray places the cells itself
        raise InputError("--workers", args.workers, "is for --engine local")
    grid = load_grid(args.grid)
    check_folder(grid.out, f"{args.grid}: sweep.out")
    try:
        spec = prepare(grid, args.grid.parent)
    except InputError as exc:  # named as the grid file names it
        table = "grid" if exc.field in grid.grid else "fixed"
        field = exc.field if "." in exc.field else f"{table}.{exc.field}"
        raise InputError(f"{args.grid}: {field}", exc.value, exc.problem) from None
    inputs = [args.grid, *input_files(spec, args.grid.parent)]
    for name in (f"results.{spec.format}", "summary.txt"):
        check_not_input(spec.out / name, inputs, f"{args.grid}: sweep.out")
    placements = spec.grid.get("placement", (spec.fixed.get("placement", CELL_KEYS["placement"]),))
    if spec.baseline is not None and spec.baseline not in placements:  # found out after the runs
        raise InputError(
            f"{args.grid}: sweep.baseline",
            spec.baseline,
            f"not a placement of the grid ({', '.join(map(str, placements))})",
        )
    with writing(spec.out, f"{args.grid}: sweep.out"):  # found before the runs, not after them
        spec.out.mkdir(parents=True, exist_ok=True)
    table = run_sweep(
        spec,
        partial(simulate_from, args.grid.parent.resolve()),
        engine=args.engine,
        workers=args.workers,
        address=args.address,
        progress=not args.no_progress,
        fresh=args.fresh,
    )
    print(f"{len(table)} runs; results in {spec.out / ('results.' + spec.format)}")
    short = int((table["unfinished"] > 0).sum())
    if short:
        print(
            f"{short} runs left tracked jobs unfinished at the horizon (max_time): no "
            "improvement table, as their average JCTs are over fewer jobs"
        )
        return 0
    axes = [k for k in spec.grid if k != "placement"]
    table["cell"] = table[axes].astype(str).agg("/".join, axis=1) if axes else "all"
    ran = set(table["placement"])
    baselines = [b for b in ((spec.baseline,) if spec.baseline else BASELINES) if b in ran]
    if not baselines:
        print("no baseline placement in the grid (sweep.baseline): no improvement table")
        return 0
    jct, gains = improvement_table(table.to_dict("records"), "cell", baselines)
    label = "/".join(axes) if axes else "cell"
    text = format_tables(jct, gains, "cell").replace("by cell", f"by {label}")
    write_text(spec.out / "summary.txt", text + "\n")
    print(text)
    return 0
