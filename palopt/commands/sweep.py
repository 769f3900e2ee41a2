"""``palopt sweep``: run a grid of simulations (local process pool or Ray) and summarise it."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from palopt.errors import InputError
from palopt.sim.experiments import BASELINES, format_tables, improvement_table, simulate_cell
from palopt.sweep import SweepSpec, load_grid, run_sweep

#: Cell parameters that name files; relative ones are taken from the grid file's folder.
PATH_KEYS = ("data", "trace", "profile")


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
    p.add_argument("grid", type=Path, help="grid TOML file")
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
    p.set_defaults(func=cmd_sweep)


def _resolve(value: Any, base: Path) -> Any:
    if isinstance(value, str) and not Path(value).is_absolute():
        return str(base / value)
    return value


def resolve_paths(spec: SweepSpec, base: Path) -> SweepSpec:
    """The spec with relative file parameters (:data:`PATH_KEYS`) made relative to ``base``."""
    grid = {
        k: tuple(_resolve(v, base) for v in vs) if k in PATH_KEYS else vs
        for k, vs in spec.grid.items()
    }
    fixed = {k: _resolve(v, base) if k in PATH_KEYS else v for k, v in spec.fixed.items()}
    return replace(spec, grid=grid, fixed=fixed)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run a sweep and print its summary."""
    if args.address is not None and args.engine != "ray":
        raise InputError("--address", args.address, "is for --engine ray")
    spec = resolve_paths(load_grid(args.grid), args.grid.parent)
    table = run_sweep(
        spec,
        simulate_cell,
        engine=args.engine,
        workers=args.workers,
        address=args.address,
        progress=not args.no_progress,
    )
    print(f"{len(table)} runs; results in {spec.out / ('results.' + spec.format)}")
    if "placement" not in table.columns or "avg_jct_h" not in table.columns:
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
    (spec.out / "summary.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0
