"""Benchmark of PAL and the baselines (PM-First, Packed, Random): one placement round, median wall
time of repeated runs (the greedy's time is in the benchmark of ``palopt bench``).

Instances: servers of 4 GPUs, racks of 32 servers, cross-server penalty 1.7 (the artifact's);
4 workload classes with binned slowdowns (3 to 6 distinct levels per class, most GPUs at the
median level); a queue of Philly-like jobs (mostly 1 GPU; 2, 4, 8 and 16 GPUs less often) in
4 classes, the first half of it running on disjoint GPUs. Everything is seeded.

Usage::

    python bench/bench_solvers.py              # 1,024 GPUs / 256 jobs and 16,384 / 2,000
    python bench/bench_solvers.py --profile pal --size 16384 --jobs 2000
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import numpy as np

from palopt import Instance, Job, build_cluster
from palopt.instance import penalty_matrix
from palopt.solvers.base import get_solver, list_solvers

CLASSES = ("classA", "classB", "classC", "classD")
SIZES = np.array([1, 2, 4, 8, 16])
SIZE_SHARE = np.array([0.70, 0.10, 0.10, 0.07, 0.03])
TARGETS = {(1024, 256): 0.010, (16384, 2000): 0.300}  # PAL, seconds (median)


def binned_slowdowns(rng: np.random.Generator, n_gpus: int) -> np.ndarray:
    """Per class, 3 to 6 levels around 1.0; most GPUs at the median level."""
    rows = []
    for _ in CLASSES:
        k = int(rng.integers(3, 7))
        levels = np.sort(np.concatenate([[1.0], rng.uniform(0.85, 1.4, k - 1)]))
        share = np.full(k, 0.3 / (k - 1))
        share[np.searchsorted(levels, 1.0)] = 0.7
        rows.append(rng.choice(levels, size=n_gpus, p=share))
    return np.array(rows)


def make_instance(n_gpus: int, n_jobs: int, seed: int = 0, unbinned: bool = False) -> Instance:
    """A seeded benchmark instance (see the module documentation); ``unbinned`` adds 3%
    lognormal noise to every slowdown, so every GPU has its own value (a raw profile)."""
    rng = np.random.default_rng(seed)
    servers = n_gpus // 4
    racks = max(1, servers // 32)
    topo = build_cluster(racks, servers // racks, 4)
    sizes = rng.choice(SIZES, size=n_jobs, p=SIZE_SHARE)
    classes = rng.choice(len(CLASSES), size=n_jobs)
    spare = rng.permutation(topo.n_gpus)
    queue = []
    for i, (k, c) in enumerate(zip(sizes.tolist(), classes.tolist(), strict=True)):
        current: tuple[int, ...] = ()
        if i < n_jobs // 2 and len(spare) >= k:
            current, spare = tuple(sorted(spare[:k].tolist())), spare[k:]
        queue.append(Job(f"j{i}", k, CLASSES[c], current_gpus=current))
    slowdown = binned_slowdowns(rng, topo.n_gpus)
    if unbinned:
        slowdown = slowdown * rng.lognormal(0.0, 0.03, slowdown.shape)
    return Instance(topo, CLASSES, slowdown, penalty_matrix(topo, CLASSES, 1.7), tuple(queue))


def median_times(name: str, inst: Instance, repeats: int) -> tuple[float, float]:
    """Median wall time and median CPU time of this thread (seconds) of ``repeats`` solves,
    after one warm-up solve. CPU time is the steadier figure on a shared machine."""
    solver = get_solver(name)
    solver.solve(inst, seed=0)
    wall, cpu = [], []
    for r in range(repeats):
        started, started_cpu = time.perf_counter(), time.thread_time()
        solver.solve(inst, seed=r)
        wall.append(time.perf_counter() - started)
        cpu.append(time.thread_time() - started_cpu)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, nargs="*", help="GPU counts (with --jobs)")
    parser.add_argument("--jobs", type=int, nargs="*", help="queue lengths (with --size)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--profile", metavar="SOLVER", help="cProfile one solver instead")
    parser.add_argument(
        "--unbinned",
        action="store_true",
        help="raw slowdowns (every GPU its own value) instead of 3-6 levels",
    )
    args = parser.parse_args()
    cases = list(zip(args.size, args.jobs, strict=True)) if args.size else list(TARGETS)
    if args.profile:
        for n_gpus, n_jobs in cases:
            inst = make_instance(n_gpus, n_jobs, unbinned=args.unbinned)
            solver = get_solver(args.profile)
            with cProfile.Profile() as prof:
                for r in range(args.repeats):
                    solver.solve(inst, seed=r)
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        return
    names = [
        s.name
        for s in list_solvers()
        if s.name
        in (
            "pal",
            "pmfirst",
            "packed-sticky",
            "packed-nonsticky",
            "random-sticky",
            "random-nonsticky",
        )
    ]
    print(
        f"{'solver':<18}{'GPUs':>7}{'jobs':>6}{'placed':>8}{'wall ms':>9}{'cpu ms':>8}"
        "  target (median wall)"
    )
    for n_gpus, n_jobs in cases:
        inst = make_instance(n_gpus, n_jobs, unbinned=args.unbinned)
        for name in names:
            wall, cpu = median_times(name, inst, args.repeats)
            placed = get_solver(name).solve(inst, seed=0).n_placed
            target = TARGETS.get((n_gpus, n_jobs)) if name == "pal" else None
            verdict = (
                ""
                if target is None
                else (f"< {target * 1e3:.0f} ms {'ok' if wall < target else 'MISSED'}")
            )
            print(
                f"{name:<18}{n_gpus:>7}{n_jobs:>6}{placed:>8}{wall * 1e3:>9.2f}"
                f"{cpu * 1e3:>8.2f}  {verdict}"
            )


if __name__ == "__main__":
    main()
