"""Region re-optimisation: solve small parts of a placement exactly with the back end.

A step picks a *region*, groups of the highest tier whose groups hold at most ``region_gpus``
GPUs (racks of 32, say), frees every job with a GPU in it, and solves the exact model of
:mod:`palopt.solvers.exact.model` for those jobs on their GPUs and the region's free ones, started
from their current placement. The sub-model is small (a rack and the jobs touching it), so the
back end often solves it within its half second, and the step moves multi-GPU jobs between
servers and racks in ways a greedy re-placement does not find. The placement is kept
when the back end's solution is valid and cheaper. Regions are visited in a seeded random order;
after a whole pass without gain the regions double in size, and the search stops when one
region would hold the whole round (that is the exact model of the whole round), or at the time
limit (or the work limit of the deterministic mode, :data:`SUBMODEL_WORK`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from palopt.solvers.exact.model import SparseModel, build_model
from palopt.solvers.local import Incumbent
from palopt.solvers.round import Round, dense_groups, round_cost

__all__ = ["reoptimise_regions", "regions"]

#: A back end: (model, start or None, seconds, seed) -> an answer with ``.solution`` and
#: ``.work`` (the deterministic time it used).
Backend = Callable[[SparseModel, "np.ndarray | None", float, int], Any]

#: The work of a sub-model, counted in microseconds of the 2-core benchmark machine for the
#: deterministic mode: ``SUBMODEL_WORK`` plus ``DETERMINISTIC_WORK`` per unit of the back end's
#: deterministic time (CP-SAT's), which is also given each sub-model as its limit. Measured on
#: the region sub-models of the 12 full-load 256-GPU benchmark rounds (cpsat, 10 s): a sub-model
#: took ~10 ms plus 1.8-2.8 s per unit of CP-SAT's deterministic time, from 1 ms to 1.4 s each;
#: counted as one third of a second each, they took 2.3-82 per second.
SUBMODEL_WORK = 10_000.0
DETERMINISTIC_WORK = 2.5e6


def regions(rnd: Round, region_gpus: int = 32) -> list[np.ndarray]:
    """Cover the round's free GPUs with regions of about ``region_gpus`` GPUs.

    Groups of the highest tier below the cluster whose groups hold at most ``region_gpus`` GPUs
    are taken in order and merged, neighbours together, until a region reaches that size.

    Parameters
    ----------
    rnd : Round
        Its ``free`` mask gives the GPUs to cover.
    region_gpus : int, default 32
        About how many GPUs a region holds: a region is closed once it holds at least this
        many, so it can hold more (the last one fewer).

    Returns
    -------
    list of numpy.ndarray
        Boolean masks over the topology's GPUs, each holding free GPUs.

    Examples
    --------
    >>> from palopt import Instance, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(2, 2, 2), ("A",), np.ones((1, 8)), np.ones((1, 3)), ())
    >>> rnd = make_round(inst)
    >>> [np.flatnonzero(r).tolist() for r in regions(rnd, 2)]  # servers
    [[0, 1], [2, 3], [4, 5], [6, 7]]
    >>> [np.flatnonzero(r).tolist() for r in regions(rnd, 3)]  # two servers reach 3
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    """
    groups = dense_groups(rnd.instance)
    free = np.flatnonzero(rnd.free)
    tier = 0
    for t in range(len(groups) - 1):
        if np.bincount(groups[t][free]).max() <= region_gpus:
            tier = t
    out: list[np.ndarray] = []
    current = np.zeros_like(rnd.free)
    for g in np.unique(groups[tier][free]):
        current |= rnd.free & (groups[tier] == g)
        if current.sum() >= region_gpus:
            out.append(current)
            current = np.zeros_like(rnd.free)
    if current.any():
        out.append(current)
    return out


def reoptimise_regions(
    rnd: Round,
    chosen: dict[int, np.ndarray],
    run: Backend,
    scale: float,
    time_limit: float,
    seed: int = 0,
    target: float = -np.inf,
    region_gpus: int = 32,
    step_limit: float = 0.5,
    max_work: int | None = None,
) -> tuple[dict[int, np.ndarray], int]:
    """Improve ``chosen`` by solving regions exactly (see the module documentation).

    Parameters
    ----------
    rnd : Round
    chosen : dict
        A placement of every open position (queue position -> GPUs).
    run : callable
        The back end, ``run(model, start, seconds, seed)`` returning an answer whose
        ``solution`` is an integer vector or ``None``.
    scale : float
        Cost scaling of the sub-models.
    time_limit : float
        Seconds in all.
    seed : int
        Order of the regions.
    target : float
        Stop once the round's cost is at most this (e.g. a lower bound).
    region_gpus : int
        About how many GPUs a region holds.
    step_limit : float
        Seconds at most per sub-model of ``region_gpus`` GPUs (in proportion for larger ones).
    max_work : int, optional
        Work at most, in microseconds as counted by :data:`SUBMODEL_WORK` (a limit that does not
        depend on the machine's speed): ``run`` is then given deterministic time, the seconds of
        a sub-model over :data:`DETERMINISTIC_WORK`.

    Returns
    -------
    dict
        A placement of the same jobs costing no more than ``chosen``.
    int
        The work done (as counted for ``max_work``).

    Examples
    --------
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.exact.milp import MilpSolver
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.ones((1, 4)),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 2, "A"), Job("b", 2, "A")))
    >>> rnd = make_round(inst)
    >>> start = {0: np.array([0, 2]), 1: np.array([1, 3])}  # both jobs across servers
    >>> run = MilpSolver(backend="highs").run  # the back end: a MILP solved by HiGHS
    >>> best, work = reoptimise_regions(rnd, start, run, 1e6, time_limit=2.0, region_gpus=2)
    >>> sorted(g.tolist() for g in best.values()), round_cost(inst, best)
    ([[0, 1], [2, 3]], 2.0)
    """
    started = time.perf_counter()
    inst = rnd.instance
    inc = Incumbent(inst.topology.n_gpus, chosen)
    best = inc.best
    total = round_cost(inst, best)
    rng = np.random.default_rng(seed)
    size = region_gpus
    areas = _shuffled(regions(rnd, size), rng)
    visits = stale = 0  # stale: regions visited since the last improvement
    work = 0.0
    while (
        total > target
        and (max_work is None or work < max_work)
        and time_limit - (time.perf_counter() - started) > 0.05
    ):
        if stale >= len(areas):  # a whole pass without gain: larger regions
            size *= 2
            areas = _shuffled(regions(rnd, size), rng)
            visits = stale = 0
        if len(areas) == 1:  # the whole round: the caller's exact model, not a region
            break
        area = areas[visits % len(areas)]
        visits += 1
        stale += 1
        jobs = tuple(sorted(inc.jobs_on(area)))
        if not any(inst.queue[p].num_gpus > 1 for p in jobs):
            continue
        free = area.copy()
        for p in jobs:
            free[best[p]] = True
        free.setflags(write=False)
        sub = Round(inst, jobs, {}, jobs, free)
        old = round_cost(inst, {p: best[p] for p in jobs})
        model = build_model(sub, scale, old)
        start = model.start({p: best[p] for p in jobs}, sub)
        left = time_limit - (time.perf_counter() - started)  # the sub-model's building counted
        if left <= 0.05:
            break
        seconds = min(step_limit * size / region_gpus, left)
        if max_work is not None:  # the back end's deterministic time, within the work left
            seconds = min(seconds * 1e6, max_work - work - SUBMODEL_WORK) / DETERMINISTIC_WORK
            if seconds <= 0:
                break
        answer = run(model.sparse, start, seconds, seed)
        work += SUBMODEL_WORK + DETERMINISTIC_WORK * answer.work
        if answer.solution is None or not model.sparse.satisfied(answer.solution):
            continue
        placed = model.decode(answer.solution)
        if set(placed) != set(jobs) or not _disjoint_within(placed, free):
            continue
        new = round_cost(inst, placed)
        if new < old - 1e-12:
            inc.move(placed)
            total += new - old
            stale = 0
    return best, int(work)


def _disjoint_within(placed: dict[int, np.ndarray], free: np.ndarray) -> bool:
    """Whether the GPU sets are pairwise disjoint and all inside ``free``."""
    gpus = np.concatenate(list(placed.values()))
    return bool(free[gpus].all()) and len(np.unique(gpus)) == len(gpus)


def _shuffled(areas: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
    return [areas[i] for i in rng.permutation(len(areas))]
