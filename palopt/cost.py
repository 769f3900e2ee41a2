"""The objective, stated once, and the feasibility checker: the oracle for solvers and tests.

A job's cost on GPU set ``S`` is ``max_{g in S} slowdown[class, g] * penalty[class, tier(S)]``.
A placement is judged lexicographically: first the queue positions it places (placing an earlier
job beats placing any number of later ones), then the weighted sum of the placed jobs' costs.
The checker is written independently of every solver, with plain Python sets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from palopt.errors import InfeasiblePlacementError
from palopt.instance import Instance, Job
from palopt.result import Action, JobPlacement

__all__ = [
    "CostBreakdown",
    "job_cost",
    "Evaluation",
    "evaluate",
    "check_feasible",
    "assert_feasible",
    "job_placement",
]


@dataclass(frozen=True)
class CostBreakdown:
    """A job's cost on a GPU set and the parts it is made of."""

    cost: float
    slowdown: float
    tier: str
    penalty: float


def job_cost(instance: Instance, job: Job, gpus: Sequence[int] | np.ndarray) -> CostBreakdown:
    """Cost of running ``job`` on ``gpus``.

    Parameters
    ----------
    instance : Instance
    job : Job
    gpus : sequence of int
        Dense GPU indices (at least one).

    Returns
    -------
    CostBreakdown

    Examples
    --------
    >>> import numpy as np
    >>> from palopt.topology import build_cluster
    >>> from palopt.instance import Instance, Job
    >>> topo = build_cluster(1, 2, 2)
    >>> inst = Instance(topo, ("A",), np.array([[1.0, 1.2, 0.9, 1.0]]),
    ...                 np.array([[1.0, 1.5, 1.5]]), (Job("j", 2, "A"),))
    >>> job_cost(inst, inst.queue[0], [1, 2])
    CostBreakdown(cost=1.7999999999999998, slowdown=1.2, tier='rack', penalty=1.5)
    """
    c = instance.class_index[job.job_class]
    idx = np.asarray(gpus, dtype=np.int64)
    sf = float(instance.slowdown[c, idx].max())
    t = instance.topology.tier_index(idx)
    pen = float(instance.penalty[c, t])
    return CostBreakdown(sf * pen, sf, instance.topology.tiers[t], pen)


@dataclass(frozen=True)
class Evaluation:
    """A placement's objective value: which queue positions are placed, and the weighted cost.

    Compare two evaluations by :attr:`key` (smaller is better).
    """

    placed: tuple[bool, ...]
    total_cost: float

    @property
    def n_placed(self) -> int:
        """Number of placed jobs."""
        return sum(self.placed)

    @property
    def key(self) -> tuple[tuple[bool, ...], float]:
        """Sort key: more of the queue placed (earlier first) wins, then lower cost."""
        return tuple(not p for p in self.placed), self.total_cost


def evaluate(instance: Instance, assignment: Mapping[str, Sequence[int]]) -> Evaluation:
    """Objective value of an assignment (job id -> GPU indices; absent or empty = unplaced).

    Returns
    -------
    Evaluation
        Which queue positions are placed and the weighted sum of their costs.
    """
    placed, total = [], 0.0
    for job in instance.queue:
        gpus = assignment.get(job.id, ())
        placed.append(bool(len(gpus)))
        if len(gpus):
            total += job.weight * job_cost(instance, job, gpus).cost
    return Evaluation(tuple(placed), total)


def check_feasible(instance: Instance, assignment: Mapping[str, Sequence[int]]) -> list[str]:
    """Every violation of the placement rules, as readable strings (empty if feasible).

    Rules: each placed job is a queued job and gets exactly ``num_gpus`` distinct GPUs of the
    topology, none busy, none given to another job.
    """
    n = instance.topology.n_gpus
    busy = {int(g) for g in np.flatnonzero(instance.busy)}
    jobs = {j.id: j for j in instance.queue}
    owner: dict[int, str] = {}
    problems = []
    for job_id, gpus in assignment.items():
        if len(gpus) == 0:
            continue
        job = jobs.get(job_id)
        if job is None:
            problems.append(f"job {job_id!r} is not in the queue")
            continue
        as_list = [int(g) for g in gpus]
        if len(as_list) != job.num_gpus:
            problems.append(f"job {job_id!r} needs {job.num_gpus} GPUs, got {len(as_list)}")
        if len(set(as_list)) != len(as_list):
            problems.append(f"job {job_id!r} got a GPU twice: {sorted(as_list)}")
        for g in as_list:
            if not 0 <= g < n:
                problems.append(f"job {job_id!r} got GPU index {g}, not in the topology")
            elif g in busy:
                problems.append(f"job {job_id!r} got busy GPU {instance.topology.gpu_ids[g]}")
            elif g in owner and owner[g] != job_id:
                problems.append(f"GPU {instance.topology.gpu_ids[g]} given to both "
                                f"{owner[g]!r} and {job_id!r}")
            else:
                owner[g] = job_id
    return problems


def assert_feasible(instance: Instance, assignment: Mapping[str, Sequence[int]]) -> None:
    """Raise :class:`InfeasiblePlacementError` listing the violations, if any."""
    problems = check_feasible(instance, assignment)
    if problems:
        raise InfeasiblePlacementError("; ".join(problems))


def job_placement(instance: Instance, job: Job, gpus: Sequence[int] | np.ndarray | None,
                  reason: str | None = None) -> JobPlacement:
    """The :class:`JobPlacement` record for ``job`` placed on ``gpus`` (or not placed)."""
    if gpus is None or len(gpus) == 0:
        action = Action.PREEMPT if job.is_running else Action.WAIT
        return JobPlacement(job.id, (), action, reason=reason or "not placed")
    chosen = tuple(sorted(int(g) for g in gpus))
    if job.is_running:
        action = Action.KEEP if chosen == tuple(sorted(job.current_gpus)) else Action.MIGRATE
    else:
        action = Action.START
    parts = job_cost(instance, job, chosen)
    return JobPlacement(job.id, chosen, action, parts.cost, parts.slowdown, parts.tier,
                        parts.penalty)
