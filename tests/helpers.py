"""Helpers shared by the solver tests: a placement checked by queue position, the optima of a
tiny round and of a small transportation problem by enumeration, and a result edited to leave
out its last placed job."""

from __future__ import annotations

import itertools
from dataclasses import replace
from functools import cache

import numpy as np

from palopt import Instance
from palopt.cost import assert_feasible, job_cost
from palopt.result import Action, JobPlacement, PlacementResult
from palopt.solvers.round import make_round


def assert_feasible_positions(inst: Instance, chosen: dict[int, np.ndarray]) -> None:
    """Check a placement given as queue position -> GPUs."""
    assert_feasible(inst, {inst.queue[p].id: g for p, g in chosen.items()})


def brute_force(inst: Instance, mode: str = "prefix", keep_running: bool = False) -> float:
    """Least weighted cost of the selected jobs over every assignment (DP over used-GPU masks),
    the kept running jobs' cost included."""
    rnd = make_round(inst, mode, keep_running)
    free = [int(g) for g in np.flatnonzero(rnd.free)]
    jobs = [inst.queue[p] for p in rnd.open_positions]
    fixed = sum(
        job_cost(inst, inst.queue[p], g).cost * inst.queue[p].weight for p, g in rnd.fixed.items()
    )

    @cache
    def best(i: int, used: frozenset[int]) -> float:
        if i == len(jobs):
            return 0.0
        job = jobs[i]
        out = np.inf
        for combo in itertools.combinations([g for g in free if g not in used], job.num_gpus):
            cost = job.weight * job_cost(inst, job, combo).cost
            out = min(out, cost + best(i + 1, used | frozenset(combo)))
        return out

    return fixed + best(0, frozenset())


def transport_by_enumeration(counts: list[int], cost: np.ndarray) -> float:
    """Least cost of sending ``counts[m]`` units from row ``m`` to distinct columns (0 for no
    units), over every assignment."""
    rows = [m for m, k in enumerate(counts) for _ in range(k)]
    return min(
        (
            sum(cost[m, g] for m, g in zip(rows, cols, strict=True))
            for cols in itertools.permutations(range(cost.shape[1]), len(rows))
        ),
        default=0.0,
    )


def drop_last_placed_job(result: PlacementResult) -> PlacementResult:
    """The result without its last placed job (the admitted prefix's last): one job fewer,
    cheaper by that job's cost, the job waiting."""
    placements = list(result.placements)
    last = max(k for k, p in enumerate(placements) if p.gpus)
    dropped = placements[last]
    assert dropped.cost is not None
    placements[last] = JobPlacement.record(dropped.job_id, (), Action.WAIT, reason="drop")
    return replace(
        result,
        placements=tuple(placements),
        n_placed=result.n_placed - 1,
        objective=result.objective - dropped.cost,
    )
