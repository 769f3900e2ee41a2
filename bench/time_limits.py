"""How long does a solve given a time limit take, by the wall clock, on large rounds?

A scheduler that calls an exact solver with a limit expects the answer about then. The exact
flow runs the greedy first and starts no step after the limit, but the greedy's first pass (it
places every job) and a few steps under way run to their ends: with a limit below the first
pass's time the solve takes that time and returns the greedy's placement (``no solution``). This
script solves rounds of a benchmark family with each solver and limit, a few times each, and
prints the wall time, its ratio to the limit and the status.

Usage::

    python bench/time_limits.py --gpus 4096 --per-server 8 --seeds 0,1
    python bench/time_limits.py --gpus 16384 --limits 0.1,1 --solvers cpsat,milp:cbc
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

from palopt import solve
from palopt.bench.families import Family, make_instance
from palopt.errors import PaloptError


def main(argv: list[str] | None = None) -> int:
    """Time the solves (see the module documentation); returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=4096)
    ap.add_argument("--per-server", type=int, default=8)
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--profile", default="synthetic", choices=("synthetic", "longhorn"))
    ap.add_argument("--seeds", default="0", help="comma-separated round seeds")
    ap.add_argument("--limits", default="0.1,1", help="comma-separated seconds")
    ap.add_argument("--solvers", default="cpsat,milp:highs,milp:cbc,greedy")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    family = Family(args.gpus, args.per_server, args.load, args.profile)
    solve(make_instance(Family(64, 4, 1.0, "synthetic"), 0), "cpsat", time_limit=0.5)  # imports
    print(f"{'round':>28} {'solver':>12} {'limit':>6} {'median s':>9} {'max s':>7} "
          f"{'max/limit':>9}  status")  # fmt: skip
    for seed in (int(s) for s in args.seeds.split(",")):
        inst = make_instance(family, seed)
        for name in args.solvers.split(","):
            for limit in (float(x) for x in args.limits.split(",")):
                times, status = [], ""
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    status = solve(inst, name, time_limit=limit).status
                    times.append(time.perf_counter() - started)
                print(f"{family.name + ' s' + str(seed):>28} {name:>12} {limit:>6g} "
                      f"{statistics.median(times):>9.2f} {max(times):>7.2f} "
                      f"{max(times) / limit:>9.1f}  {status}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    logging.disable(logging.WARNING)  # CBC's skip of large models is expected here
    try:
        raise SystemExit(main())
    except PaloptError as exc:
        raise SystemExit(f"time_limits.py: error: {exc}") from None
