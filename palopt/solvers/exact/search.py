"""Large-neighbourhood search on a placement: ruin a region, re-place its jobs, keep if cheaper.

A step frees every job that touches a random group (a server, a rack, ...) plus a few random
multi-GPU jobs, re-places the freed multi-GPU jobs with the cost-aware greedy (largest first,
ties in random order) and the freed 1-GPU jobs optimally on what is left, and keeps the result
if the round's cost falls. Deterministic for a given seed and work limit (:data:`STEP_WORK`).
"""

from __future__ import annotations

import time

import numpy as np

from palopt.solvers.greedy import GreedyPlacer
from palopt.solvers.local import Incumbent
from palopt.solvers.round import Round, dense_groups, round_cost

__all__ = ["improve"]

#: The work of a step, counted in microseconds of the 2-core benchmark machine for the
#: deterministic mode: ``STEP_WORK[0] + STEP_WORK[1]`` per GPU of the cluster, plus
#: ``MULTI_WORK[0] + MULTI_WORK[1]`` per GPU for each multi-GPU job re-placed (a greedy scan of
#: the free GPUs), plus ``SINGLE_WORK`` for each 1-GPU job re-placed. Fitted (least relative
#: error) to 5,600 timed steps from the greedy placements of 20 full-load rounds of 256, 1,024
#: and 4,096 GPUs, then raised by a fifth: per size the steps took 0.98-1.21 times the fit, so
#: 0.82-1.01 times the work counted. A step takes from 0.2 ms (a server's jobs) to 27 ms (every
#: job of a 4,096-GPU round), so a fixed number of steps per second did not fit.
STEP_WORK = (175.0, 0.05)
MULTI_WORK = (26.0, 0.008)
SINGLE_WORK = 18.0


def improve(
    rnd: Round,
    chosen: dict[int, np.ndarray],
    time_limit: float,
    seed: int = 0,
    target: float = -np.inf,
    patience: int | None = None,
    max_work: int | None = None,
) -> tuple[dict[int, np.ndarray], int]:
    """Improve ``chosen`` (open position -> GPUs) for at most ``time_limit`` seconds.

    Parameters
    ----------
    rnd : Round
    chosen : dict
        A placement of every open position.
    time_limit : float
        Seconds.
    seed : int
    target : float
        Stop once the cost is at most this (e.g. a lower bound).
    patience : int, optional
        Stop after this many steps in a row without improvement (default: 20 per multi-GPU
        job, at least 100).
    max_work : int, optional
        Stop once this much work is done, in microseconds as counted by :data:`STEP_WORK` (a
        limit that does not depend on the machine's speed).

    Returns
    -------
    dict
        A placement of the same jobs costing no more than ``chosen``.
    int
        The work done (as counted for ``max_work``).

    Examples
    --------
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.ones((1, 4)),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 2, "A"), Job("b", 2, "A")))
    >>> rnd = make_round(inst)
    >>> start = {0: np.array([0, 2]), 1: np.array([1, 3])}  # both jobs across servers
    >>> round_cost(inst, start)
    4.0
    >>> best, work = improve(rnd, start, time_limit=1.0, seed=0)
    >>> sorted(g.tolist() for g in best.values()), round_cost(inst, best)
    ([[0, 1], [2, 3]], 2.0)
    """
    started = time.perf_counter()
    inst = rnd.instance
    if not rnd.multi:
        return chosen, 0
    rng = np.random.default_rng(seed)
    greedy = GreedyPlacer(rnd)
    groups = dense_groups(inst)
    q = inst.queue
    multi = list(rnd.multi)
    inc = Incumbent(inst.topology.n_gpus, chosen)
    best = inc.best
    cost = {p: round_cost(inst, {p: g}) for p, g in best.items()}
    patience = max(100, 20 * len(multi)) if patience is None else patience
    total = sum(cost.values())
    n = inst.topology.n_gpus
    step_work = STEP_WORK[0] + STEP_WORK[1] * n
    multi_work = MULTI_WORK[0] + MULTI_WORK[1] * n
    stall = 0
    work = 0.0
    while (
        stall < patience
        and total > target
        and (max_work is None or work < max_work)
        and time.perf_counter() - started < time_limit
    ):
        stall += 1
        t = int(rng.integers(len(groups)))
        anchor = int(rng.choice(np.flatnonzero(rnd.free)))
        region = groups[t] == groups[t][anchor]
        ruined = inc.jobs_on(region)
        ruined.update(int(p) for p in rng.choice(multi, size=min(2, len(multi)), replace=False))
        free = rnd.free.copy()
        for p, g in best.items():
            if p not in ruined:
                free[g] = False
        order = sorted(ruined, key=lambda p: (-q[p].num_gpus, rng.random()))
        new_cost, placed = greedy.place_split(order, free)
        n_multi = sum(q[p].num_gpus > 1 for p in ruined)
        work += step_work + n_multi * multi_work + (len(ruined) - n_multi) * SINGLE_WORK
        old_cost = sum(cost[p] for p in ruined)
        if new_cost <= old_cost - 1e-12:
            total += new_cost - old_cost
            stall = 0
            inc.move(placed)
            cost.update((p, round_cost(inst, {p: g})) for p, g in placed.items())
    return best, int(work)
