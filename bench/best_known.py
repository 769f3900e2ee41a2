"""How close to the lower bound can a placement get at 1,024-4,096 GPUs, given minutes?

The benchmark measures the greedy at 4,096 GPUs against the Lagrangian bound; the exact solvers
are not run there. This script puts a number on what more time buys, for one round of a
benchmark family: the greedy, then a *block decomposition*, where the cluster is cut into blocks
of whole racks (256 GPUs by default), the round's jobs are dealt to the blocks (largest first,
each to the block with the most room; within a size by class, so every block gets a similar
mix), and each block is solved as its own round by an exact solver with its time limit. The
blocks' placements together are a placement of the whole round (checked), and their bounds
show what the split itself costs. A last table compares the two placements by job size: the
cost, how many jobs span a higher tier than the smallest group that could hold them, and the
mean slowdown they run at.

Usage::

    python bench/best_known.py --gpus 4096 --per-server 8 --seed 0
    python bench/best_known.py --gpus 1024 --per-server 4 --seed 1 --solver milp:highs
    python bench/best_known.py --gpus 4096 --seed 0 -o deterministic=true   # repeatable blocks
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from palopt import Instance, build_cluster, solve
from palopt.bench.families import Family, make_instance
from palopt.commands import option_dict, parse_option
from palopt.cost import assert_feasible, evaluate, job_cost
from palopt.errors import PaloptError
from palopt.solvers import get_solver
from palopt.solvers.exact.colgen import lagrangian_bound
from palopt.solvers.greedy import greedy_assignment
from palopt.solvers.round import make_round, round_cost


def deal(inst: Instance, positions: tuple[int, ...], blocks: int, room: int) -> list[list[int]]:
    """Queue positions per block: largest first, then by class, each to the roomiest block."""
    left = np.full(blocks, room)
    cls = inst.job_class_indices()
    out: list[list[int]] = [[] for _ in range(blocks)]
    for p in sorted(positions, key=lambda p: (-inst.queue[p].num_gpus, int(cls[p]), p)):
        b = int(np.argmax(left))
        if left[b] < inst.queue[p].num_gpus:
            raise SystemExit(f"job {inst.queue[p].id} does not fit any block; use fewer blocks")
        out[b].append(p)
        left[b] -= inst.queue[p].num_gpus
    return out


def by_size(inst: Instance, assignments: dict[str, dict[str, tuple[int, ...]]]) -> list[str]:
    """Lines of a table comparing placements of the same jobs (label -> job id -> GPUs) by job
    size: per size, the jobs' weighted cost, how many span a higher tier than the smallest group
    that could hold them, and their mean slowdown."""
    topo = inst.topology
    room = [np.bincount(np.unique(row, return_inverse=True)[1]).max() for row in topo.groups]
    placed = [j for j in inst.queue if j.id in next(iter(assignments.values()))]
    lines = [f"{'size':>5} {'jobs':>5}" + "".join(f" | {a:>26}" for a in assignments)]
    lines.append(
        " " * 11 + " | {:>10} {:>7} {:>7}".format("cost", "spread", "slow") * len(assignments)
    )
    for k in sorted({j.num_gpus for j in placed}):
        jobs = [j for j in placed if j.num_gpus == k]
        fits = next(t for t, r in enumerate(room) if r >= k)
        line = f"{k:5d} {len(jobs):5d}"
        for assignment in assignments.values():
            parts = [job_cost(inst, j, assignment[j.id]) for j in jobs]
            cost = sum(j.weight * p.cost for j, p in zip(jobs, parts, strict=True))
            spread = sum(topo.tiers.index(p.tier) > fits for p in parts)
            line += f" | {cost:10.3f} {spread:7d} {np.mean([p.slowdown for p in parts]):7.3f}"
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the comparison for the round the arguments name; 0 on success."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--gpus", type=int, default=4096)
    ap.add_argument("--per-server", type=int, default=8)
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--profile", default="synthetic")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--block-gpus", type=int, default=256)
    ap.add_argument("--solver", default="cpsat")
    ap.add_argument(
        "-o",
        dest="option",
        action="append",
        default=[],
        type=parse_option,
        metavar="KEY=VALUE",
        help="an option of the blocks' solver (repeatable), e.g. deterministic=true",
    )
    ap.add_argument("--block-time", type=float, default=10.0, help="seconds per block")
    ap.add_argument("--bound-time", type=float, default=5.0, help="seconds of the bound")
    args = ap.parse_args(argv)

    family = Family(args.gpus, args.per_server, args.load, args.profile)
    racks, per_rack, per_server = family.shape
    size = min(args.block_gpus, family.n_gpus)
    if size < 1 or family.n_gpus % size or size % (per_rack * per_server):
        raise SystemExit(f"--block-gpus {args.block_gpus}: not whole racks that split the round")
    blocks = family.n_gpus // size
    options = option_dict(args.option, "-o")
    get_solver(args.solver, **options)  # an unknown name, back end or option fails here
    inst = make_instance(family, args.seed)
    rnd = make_round(inst)
    started = time.perf_counter()
    greedy_placement = greedy_assignment(rnd)
    greedy = round_cost(inst, greedy_placement)
    greedy_time = time.perf_counter() - started
    bound = lagrangian_bound(rnd, greedy, time_limit=args.bound_time)[0]
    print(f"{family.name} seed {args.seed}: bound {bound:.3f}")
    report = "{:<24} {:10.3f} {:6.2f}% above the bound {:7.1f} s"
    print(report.format("greedy", greedy, 100 * (greedy / bound - 1), greedy_time))

    started = time.perf_counter()
    assignment: dict[str, tuple[int, ...]] = {}
    block_bounds = block_costs = 0.0
    for b, members in enumerate(deal(inst, rnd.open_positions, blocks, size)):
        gpus = np.arange(b * size, (b + 1) * size)
        sub = Instance(
            build_cluster(racks // blocks, per_rack, per_server),
            inst.classes,
            inst.slowdown[:, gpus],
            inst.penalty,
            tuple(inst.queue[p] for p in sorted(members)),
        )
        result = solve(sub, args.solver, time_limit=args.block_time, seed=args.seed, **options)
        if result.n_placed != len(members):
            raise SystemExit(f"block {b}: {result.n_placed} of {len(members)} jobs placed")
        assignment.update(
            {j: tuple(int(g) + b * size for g in s) for j, s in result.assignment().items()}
        )
        if result.bound is None:
            raise SystemExit(f"block {b}: {args.solver} gave no bound")
        block_bounds += result.bound
        block_costs += result.objective
    assert_feasible(inst, assignment)
    cost = evaluate(inst, assignment).total_cost
    if abs(cost - block_costs) > 1e-9 * cost:
        raise SystemExit("the blocks' GPUs were mapped back wrongly")
    took = time.perf_counter() - started
    label = f"{blocks} blocks, {args.solver}"
    print(report.format(label, cost, 100 * (cost / bound - 1), took))
    print(
        f"  sum of the blocks' bounds {block_bounds:.3f} ({100 * (block_bounds / bound - 1):+.2f}%)"
    )
    greedy_ids = {inst.queue[p].id: tuple(g.tolist()) for p, g in greedy_placement.items()}
    print("\n".join(by_size(inst, {"greedy": greedy_ids, "blocks": assignment})))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except PaloptError as exc:
        raise SystemExit(f"best_known.py: error: {exc}") from None
