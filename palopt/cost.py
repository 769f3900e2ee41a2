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

from palopt.errors import InfeasiblePlacementError, InputError, counted
from palopt.instance import Instance, Job, require_instance
from palopt.result import Action, JobPlacement, PlacementResult, Status

__all__ = [
    "CostBreakdown",
    "job_cost",
    "set_costs",
    "Evaluation",
    "evaluate",
    "check_feasible",
    "assert_feasible",
    "job_placements",
]


@dataclass(frozen=True)
class CostBreakdown:
    """A job's cost on a GPU set and the parts it is made of.

    Parameters
    ----------
    cost : float
        ``slowdown * penalty`` (unweighted).
    slowdown : float
        The largest slowdown of the GPUs for the job's class.
    tier : str
        The lowest tier holding all the GPUs.
    penalty : float
        The locality penalty of that tier for the job's class.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt.topology import build_cluster
    >>> from palopt.instance import Instance, Job
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.2, 0.9, 1.0]]),
    ...                 np.array([[1.0, 1.5, 1.5]]), (Job("a", 2, "A"), Job("b", 1, "A")))
    >>> job_cost(inst, inst.queue[0], [2, 3])
    CostBreakdown(cost=1.0, slowdown=1.0, tier='server', penalty=1.0)
    """

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

    Raises
    ------
    InputError
        If ``instance`` is not an :class:`~palopt.instance.Instance` or ``job`` not a
        :class:`~palopt.instance.Job`, ``gpus`` is empty or holds a GPU index outside the
        topology, or ``job``'s class is not one of the instance's.

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
    require_instance(instance)
    if not isinstance(job, Job):
        raise InputError("job", job, "must be a Job")
    if job.job_class not in instance.class_index:
        raise InputError(f"job {job.id!r}.class", job.job_class, "not a class of the instance")
    index = instance.topology.check_indices(gpus, f"job {job.id!r}.gpus")
    c = np.array([instance.class_index[job.job_class]])
    cost, sf, tier, pen = set_costs(instance, c, index, np.zeros(1, dtype=np.int64))
    return CostBreakdown(
        float(cost[0]), float(sf[0]), instance.topology.tiers[int(tier[0])], float(pen[0])
    )


def set_costs(
    instance: Instance, classes: np.ndarray, gpus: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The cost formula for many GPU sets at once.

    Parameters
    ----------
    instance : Instance
    classes : numpy.ndarray
        Class index of each set.
    gpus : numpy.ndarray
        The sets' dense GPU indices, one set after another.
    starts : numpy.ndarray
        Where each set starts in ``gpus``: set ``k`` is ``gpus[starts[k]:starts[k+1]]``
        (non-empty).

    Returns
    -------
    cost, slowdown, tier, penalty : numpy.ndarray
        Per set: the unweighted cost, the largest slowdown, the tier index and the penalty.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt.topology import build_cluster
    >>> from palopt.instance import Instance, Job
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.2, 0.9, 1.0]]),
    ...                 np.array([[1.0, 1.5, 1.5]]), (Job("j", 2, "A"),))
    >>> set_costs(inst, np.array([0, 0]), np.array([0, 1, 1, 2]), np.array([0, 2]))[0]
    array([1.2, 1.8])
    """
    sizes = np.diff(np.append(starts, len(gpus)))
    sf = np.maximum.reduceat(instance.slowdown[np.repeat(classes, sizes), gpus], starts)
    groups = instance.topology.groups[:, gpus]
    same = np.minimum.reduceat(groups, starts, axis=1) == np.maximum.reduceat(
        groups, starts, axis=1
    )
    tier = np.argmax(same, axis=0)
    pen = instance.penalty[classes, tier]
    return sf * pen, sf, tier, pen


@dataclass(frozen=True)
class Evaluation:
    """A placement's objective value: which queue positions are placed, and the weighted cost.

    Compare two evaluations by :attr:`key` (smaller is better).

    Parameters
    ----------
    placed : tuple of bool
        Whether each queued job is placed, in queue order.
    total_cost : float
        The weighted sum of the placed jobs' costs.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt.topology import build_cluster
    >>> from palopt.instance import Instance, Job
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.2, 0.9, 1.0]]),
    ...                 np.array([[1.0, 1.5, 1.5]]), (Job("a", 2, "A"), Job("b", 1, "A")))
    >>> evaluate(inst, {"a": [2, 3]})
    Evaluation(placed=(True, False), total_cost=1.0)
    """

    placed: tuple[bool, ...]
    total_cost: float

    @property
    def n_placed(self) -> int:
        """Number of placed jobs.

        Examples
        --------
        >>> Evaluation((True, False, True), 2.5).n_placed
        2
        """
        return sum(self.placed)

    @property
    def key(self) -> tuple[tuple[bool, ...], float]:
        """Sort key: the first queue position placed in one and not the other wins (placing a
        job beats placing any number of later ones), then the lower cost.

        Examples
        --------
        >>> a, b = Evaluation((True, False, False), 1.0), Evaluation((False, True, True), 0.5)
        >>> min([a, b], key=lambda e: e.key) is a
        True
        """
        return tuple(not p for p in self.placed), self.total_cost


def evaluate(instance: Instance, assignment: Mapping[str, Sequence[int]]) -> Evaluation:
    """Objective value of an assignment (job id -> GPU indices; absent or empty = unplaced).

    It does not check the rules (see :func:`check_feasible`): GPUs shared by two jobs are
    charged to both.

    Parameters
    ----------
    instance : Instance
    assignment : mapping
        Job id -> dense GPU indices. Ids not in the queue are ignored.

    Returns
    -------
    Evaluation
        Which queue positions are placed and the weighted sum of their costs.

    Raises
    ------
    InputError
        If ``instance`` is not an :class:`~palopt.instance.Instance`, or for a job's entry that
        is not a list of GPU indices of the topology.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.2, 0.9, 1.0]]),
    ...                 np.array([[1.0, 1.5, 1.5]]), (Job("a", 1, "A"), Job("b", 2, "A")))
    >>> e = evaluate(inst, {"b": [2, 3]})
    >>> e.placed, e.total_cost
    ((False, True), 1.0)
    """
    require_instance(instance)
    if not isinstance(assignment, Mapping):
        raise InputError("assignment", type(assignment).__name__, "expected job id -> GPUs")
    placed, total = [], 0.0
    for job in instance.queue:
        gpus = assignment.get(job.id, ())
        if (
            isinstance(gpus, (str, bytes))
            or not hasattr(gpus, "__len__")
            or np.ndim(gpus) == 0  # a 0-d array has __len__ but no length
        ):
            raise InputError(f"assignment[{job.id!r}]", gpus, "expected a list of GPU indices")
        placed.append(bool(len(gpus)))
        if len(gpus):
            total += job.weight * job_cost(instance, job, gpus).cost
    return Evaluation(tuple(placed), total)


def check_feasible(
    instance: Instance, assignment: Mapping[str, Sequence[int]] | PlacementResult
) -> list[str]:
    """Every violation of the placement rules, as readable strings (empty if feasible).

    Rules: each placed job is a queued job and gets exactly ``num_gpus`` distinct GPUs of the
    topology, none busy, none given to another job. A solver's result must also hold one
    placement per queued job, in queue order, each with the action its GPUs and the job's
    current GPUs call for, costs (each job's, with its slowdown, tier and penalty, and the
    objective) and a count of placed jobs that are those of its GPUs, recomputed here from the
    definition, and no bound above its objective (nor ``optimal`` without one). The checker
    shares no code with the solvers, nor with the cost functions of this module.

    Parameters
    ----------
    instance : Instance
    assignment : mapping or PlacementResult
        Job id -> dense GPU indices (an empty list means not placed), or a solver's result.

    Returns
    -------
    list of str
        One message per violation; empty if the assignment is feasible.

    Raises
    ------
    InputError
        If ``instance`` is not an :class:`~palopt.instance.Instance`, or ``assignment`` is
        neither a mapping nor a result.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
    ...                 (Job("a", 1, "A"), Job("b", 1, "A")))
    >>> check_feasible(inst, {"a": [0], "b": [1]})
    []
    >>> check_feasible(inst, {"a": [0], "b": [0]})
    ["GPU gpu0 given to both 'a' and 'b'"]
    >>> from palopt import solve
    >>> check_feasible(inst, solve(inst, "pal"))
    []
    """
    require_instance(instance)
    if isinstance(assignment, PlacementResult):
        return _check_result(instance, assignment)
    if not isinstance(assignment, Mapping):
        raise InputError("assignment", type(assignment).__name__, "expected job id -> GPUs")
    n = instance.topology.n_gpus
    busy = {int(g) for g in np.flatnonzero(instance.busy)}
    jobs = {j.id: j for j in instance.queue}
    owner: dict[int, str] = {}
    problems = []
    for job_id, gpus in assignment.items():
        if (
            isinstance(gpus, (str, bytes))
            or not hasattr(gpus, "__len__")
            or np.ndim(gpus) == 0  # a 0-d array has __len__ but no length
        ):
            problems.append(f"job {job_id!r} got {gpus!r}, not a list of GPU indices")
            continue
        if len(gpus) == 0:
            continue
        job = jobs.get(job_id)
        if job is None:
            problems.append(f"job {job_id!r} is not in the queue")
            continue
        odd = [
            g
            for g in gpus
            if isinstance(g, (bool, np.bool_)) or not isinstance(g, (int, np.integer))
        ]
        if odd:
            problems.append(f"job {job_id!r} got {odd[0]!r}, not a GPU index")
            continue
        as_list = [int(g) for g in gpus]
        if len(as_list) != job.num_gpus:
            problems.append(
                f"job {job_id!r} needs {counted(job.num_gpus, 'GPU')}, got {len(as_list)}"
            )
        if len(set(as_list)) != len(as_list):
            values, counts = np.unique(as_list, return_counts=True)
            ids = instance.topology.gpu_ids
            names = [ids[g] if 0 <= g < n else f"index {g}" for g in values[counts > 1]]
            problems.append(f"job {job_id!r} got GPU {', '.join(names)} more than once")
        for g in as_list:
            if not 0 <= g < n:
                problems.append(f"job {job_id!r} got GPU index {g}, not in the topology")
            elif g in busy:
                problems.append(f"job {job_id!r} got busy GPU {instance.topology.gpu_ids[g]}")
            elif g in owner and owner[g] != job_id:
                problems.append(
                    f"GPU {instance.topology.gpu_ids[g]} given to both {owner[g]!r} and {job_id!r}"
                )
            else:
                owner[g] = job_id
    return problems


def _check_result(instance: Instance, result: PlacementResult) -> list[str]:
    """The violations of a result (see :func:`check_feasible`)."""
    ids = [p.job_id for p in result.placements]
    if ids != [j.id for j in instance.queue]:
        return [f"the result places jobs {ids[:5]}..., not the queue's one by one in its order"]
    problems = check_feasible(instance, result.assignment())
    if problems:
        return problems
    topo, total = instance.topology, 0.0
    for job, p in zip(instance.queue, result.placements, strict=True):
        current = tuple(sorted(job.current_gpus))
        if not p.gpus:
            action = Action.PREEMPT if current else Action.WAIT
        elif not current:
            action = Action.START
        elif current == tuple(sorted(p.gpus)):
            action = Action.KEEP
        else:
            action = Action.MIGRATE
        if p.action != action:
            problems.append(f"job {job.id!r}: action {p.action!r}, its GPUs call for {action!r}")
        if not p.gpus:
            continue
        c = instance.classes.index(job.job_class)
        tier = next(
            t for t in range(len(topo.tiers)) if len({int(topo.groups[t][g]) for g in p.gpus}) == 1
        )
        slowdown = max(float(instance.slowdown[c][g]) for g in p.gpus)
        penalty = float(instance.penalty[c][tier])
        cost = slowdown * penalty
        # (written so that NaN fails: every comparison with NaN is false)
        if p.cost is None or not abs(p.cost - cost) <= 1e-9 * cost or p.tier != topo.tiers[tier]:
            problems.append(
                f"job {job.id!r}: cost {p.cost} on tier {p.tier}, its GPUs cost {cost} "
                f"on tier {topo.tiers[tier]}"
            )
        elif (p.slowdown, p.penalty) != (slowdown, penalty):
            problems.append(
                f"job {job.id!r}: slowdown {p.slowdown} and penalty {p.penalty}, its GPUs have "
                f"{slowdown} and {penalty}"
            )
        total += job.weight * cost
    placed = sum(1 for p in result.placements if p.gpus)
    if result.n_placed != placed:
        problems.append(f"n_placed {result.n_placed}, {placed} jobs placed")
    if not abs(result.objective - total) <= 1e-9 * max(total, 1e-300):
        problems.append(f"objective {result.objective}, its placements cost {total}")
    if result.bound is not None and not (
        result.bound <= result.objective + 1e-9 * abs(result.objective)
    ):
        problems.append(f"bound {result.bound} not at or below the objective {result.objective}")
    if result.status == Status.OPTIMAL and result.bound is None:
        problems.append("status 'optimal' without a bound")
    return problems


def assert_feasible(
    instance: Instance, assignment: Mapping[str, Sequence[int]] | PlacementResult
) -> None:
    """Raise if the assignment breaks a placement rule (see :func:`check_feasible`, which takes
    the same parameters).

    Parameters
    ----------
    instance : Instance
    assignment : mapping or PlacementResult
        Job id -> dense GPU indices (an empty list means not placed), or a solver's result.

    Raises
    ------
    InfeasiblePlacementError
        Listing every violation.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
    ...                 (Job("a", 2, "A"),))
    >>> assert_feasible(inst, {"a": [0, 1]})
    >>> assert_feasible(inst, {"a": [0]})
    Traceback (most recent call last):
    ...
    palopt.errors.InfeasiblePlacementError: job 'a' needs 2 GPUs, got 1
    """
    problems = check_feasible(instance, assignment)
    if problems:
        raise InfeasiblePlacementError("; ".join(problems))


def job_placements(
    instance: Instance,
    jobs: Sequence[Job],
    gpu_sets: Sequence[Sequence[int] | np.ndarray | None],
    reasons: Sequence[str | None],
) -> list[JobPlacement]:
    """The :class:`JobPlacement` records of ``jobs`` placed on ``gpu_sets`` (or not placed),
    with the costs computed in one vectorised pass.

    Parameters
    ----------
    instance : Instance
    jobs : sequence of Job
        Jobs of ``instance``'s classes.
    gpu_sets : sequence
        Per job, its dense GPU indices, in any order, or ``None`` / empty if not placed.
    reasons : sequence of str or None
        Per job, why it is not placed (``None``: ``"not placed"``; ignored for placed jobs).

    Returns
    -------
    list of JobPlacement
        One per job, in order. If placed: the GPUs sorted, action ``start`` (``keep`` for a
        running job on exactly its current GPUs, else ``migrate``), and the cost with its parts
        (see :func:`job_cost`). If not: no GPUs, action ``wait`` (``preempt`` for a running
        job) and the reason.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]),
    ...                 (Job("a", 2, "A"), Job("b", 1, "A", current_gpus=(1,))))
    >>> out = job_placements(inst, inst.queue, [[3, 2], None], [None, "no room"])
    >>> [(p.job_id, p.gpus, p.action, p.cost, p.reason) for p in out]
    [('a', (2, 3), 'start', 1.0, None), ('b', (), 'preempt', None, 'no room')]
    """
    placed: list[int] = []
    sets: list[Sequence[int] | np.ndarray] = []
    for k, g in enumerate(gpu_sets):
        if g is not None and len(g):
            placed.append(k)
            sets.append(g)
    parts: dict[int, tuple[int, int, float, float, int, float]] = {}
    if placed:
        sizes = [len(g) for g in sets]
        bounds = np.cumsum([0, *sizes]).tolist()
        gpus = np.concatenate(sets).astype(np.int64, copy=False)
        gpus = gpus[np.lexsort((gpus, np.repeat(np.arange(len(placed)), sizes)))]
        class_index = instance.class_index
        classes = np.array([class_index[jobs[k].job_class] for k in placed])
        cost, sf, tier, pen = set_costs(instance, classes, gpus, np.array(bounds[:-1]))
        tiers = instance.topology.tiers
        flat = gpus.tolist()
        parts = dict(
            zip(
                placed,
                zip(
                    bounds[:-1],
                    bounds[1:],
                    cost.tolist(),
                    sf.tolist(),
                    tier.tolist(),
                    pen.tolist(),
                    strict=True,
                ),
                strict=True,
            )
        )
    out = []
    for k, job in enumerate(jobs):
        part = parts.get(k)
        if part is None:
            action = Action.PREEMPT if job.is_running else Action.WAIT
            out.append(JobPlacement.record(job.id, (), action, reason=reasons[k] or "not placed"))
            continue
        lo, hi, co, s, t, p = part
        chosen = tuple(flat[lo:hi])
        if job.is_running:
            action = Action.KEEP if chosen == tuple(sorted(job.current_gpus)) else Action.MIGRATE
        else:
            action = Action.START
        out.append(JobPlacement.record(job.id, chosen, action, co, s, tiers[t], p))
    return out
