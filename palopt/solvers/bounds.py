"""A cheap lower bound on a round's optimal cost, for instances too large to solve exactly.

The bound adds two valid parts over the open jobs of a :class:`~palopt.solvers.round.Round`:

- each job of two or more GPUs at its best cost alone (every free GPU available to it);
- the 1-GPU jobs at an optimal assignment to the free GPUs, ignoring the multi-GPU jobs: a
  transportation problem solved as an LP with HiGHS (integral, so exact) when ``highspy`` is
  installed, otherwise each commodity alone on its cheapest GPUs (weaker, still valid).

Each job's cost in any placement is at least its part, so the sum bounds the optimum from below.
"""

from __future__ import annotations

import numpy as np

from palopt.solvers.greedy import GreedyPlacer
from palopt.solvers.round import Round, single_costs
from palopt.solvers.transport import transport_bound

__all__ = ["lower_bound", "single_gpu_costs"]


def single_gpu_costs(rnd: Round) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Commodities of 1-GPU jobs and their per-GPU costs on the free GPUs.

    Parameters
    ----------
    rnd : Round
        The round whose open 1-GPU jobs are grouped; its ``free`` mask gives the GPUs.

    Returns
    -------
    counts : list of int
        Jobs per commodity (see :meth:`Round.single_groups`).
    gpus : numpy.ndarray
        The free GPU indices.
    cost : numpy.ndarray
        ``cost[m, i]``: weighted cost of a commodity-``m`` job on ``gpus[i]``: its weight
        times its slowdown there times the penalty of the lowest tier (a float array of shape
        ``(len(counts), len(gpus))``).

    Examples
    --------
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.1]]),
    ...                 np.array([[1.0, 2.0, 2.0]]),
    ...                 (Job("a", 1, "A"), Job("b", 2, "A"), Job("c", 1, "A", weight=2.0)))
    >>> counts, gpus, cost = single_gpu_costs(make_round(inst))
    >>> counts, gpus.tolist(), cost.tolist()
    ([1, 1], [0, 1, 2, 3], [[1.0, 1.3, 1.0, 1.1], [2.0, 2.6, 2.0, 2.2]])
    """
    inst = rnd.instance
    gpus = np.flatnonzero(rnd.free)
    groups = rnd.single_groups()
    return [len(v) for v in groups.values()], gpus, single_costs(inst, groups, gpus)


def lower_bound(rnd: Round) -> float:
    """A lower bound on the weighted cost of the open jobs of ``rnd`` (see the module docs).

    Parameters
    ----------
    rnd : Round
        The round whose open jobs are bounded (fixed jobs are not counted).

    Returns
    -------
    float
        At most the least total ``weight * cost`` of any placement of the open jobs on the
        round's free GPUs; 0.0 when there are no open jobs.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.1]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 1, "A"), Job("b", 2, "A")))
    >>> round(lower_bound(make_round(inst)), 6)
    2.1
    """
    greedy = GreedyPlacer(rnd)
    inst = rnd.instance
    alone: dict[tuple[int, int], float] = {}  # (class, GPUs) -> best cost alone
    total = 0.0
    for pos in rnd.multi:
        key = (int(greedy.cls[pos]), inst.queue[pos].num_gpus)
        if key not in alone:
            alone[key] = greedy.best(rnd.free, *key)[0]
        total += inst.queue[pos].weight * alone[key]
    counts, _, single_cost = single_gpu_costs(rnd)
    return total + transport_bound(counts, single_cost)
