"""Which jobs a round places, and the fixed part of the round, shared by greedy, bounds and exact.

Also the helpers every solver of a round uses: the topology's groups as dense ids per tier
(:func:`dense_groups`) and the weighted cost of a placement (:func:`round_cost`).

Two selection modes, defined here once:

- ``prefix``: the *admitted prefix*, the longest queue prefix whose total demand fits the available
  (not busy) GPUs. This is the set the non-sticky heuristics place (they stop at the first job that
  does not fit), so their costs compare directly with the exact optimum.
- ``choose``: the set that is lexicographically best for :func:`palopt.cost.evaluate` (placing an
  earlier job beats placing any number of later ones). Any ``k`` free GPUs are a valid placement
  (the cluster tier holds every set), so a set of jobs can be placed if and only if its total demand
  fits; the lexicographic optimum is then the first-fit set: walk the queue and take each job that
  still fits. Which jobs run therefore never depends on the cost, and every solver minimises the
  cost over that set; ``mode="choose"`` is optimal for the full lexicographic key.

Running jobs (with ``current_gpus``) are ordinary jobs: they may be placed anywhere (non-sticky)
unless ``keep_running=True``, which fixes every selected running job on its current GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from palopt.cost import set_costs
from palopt.errors import InputError, counted
from palopt.instance import Instance

__all__ = [
    "MODES",
    "admitted_prefix",
    "select_positions",
    "Round",
    "make_round",
    "unselected_reasons",
    "dense_groups",
    "round_cost",
    "single_costs",
]

MODES = ("prefix", "choose")


def admitted_prefix(instance: Instance) -> int:
    """Length of the longest queue prefix whose total demand fits the available GPUs.

    Parameters
    ----------
    instance : Instance
        Its queue, in order, and its available (not busy) GPUs.

    Returns
    -------
    int
        The number of jobs in the prefix (0 if the first job does not fit); the prefix is
        ``instance.queue[:n]``.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.ones((1, 4)), np.ones((1, 3)),
    ...                 (Job("a", 2, "A"), Job("b", 3, "A"), Job("c", 1, "A")))
    >>> admitted_prefix(inst)
    1
    """
    demand = np.cumsum([job.num_gpus for job in instance.queue])
    return int(np.searchsorted(demand, instance.n_available, side="right"))


def select_positions(instance: Instance, mode: str = "prefix") -> tuple[int, ...]:
    """Queue positions the round places, by ``mode`` (see the module documentation).

    Parameters
    ----------
    instance : Instance
    mode : {"prefix", "choose"}, default "prefix"
        ``"prefix"``: the admitted prefix (:func:`admitted_prefix`). ``"choose"``: the
        first-fit set, each job in queue order taken if it still fits.

    Returns
    -------
    tuple of int
        The selected queue positions, ascending.

    Raises
    ------
    InputError
        For an unknown mode.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.ones((1, 4)), np.ones((1, 3)),
    ...                 (Job("a", 2, "A"), Job("b", 3, "A"), Job("c", 1, "A")))
    >>> select_positions(inst, "prefix"), select_positions(inst, "choose")
    ((0,), (0, 2))
    """
    if mode == "prefix":
        return tuple(range(admitted_prefix(instance)))
    if mode != "choose":
        raise InputError("mode", mode, f"must be one of {', '.join(MODES)}")
    left, chosen = instance.n_available, []
    for pos, job in enumerate(instance.queue):
        if job.num_gpus <= left:
            chosen.append(pos)
            left -= job.num_gpus
    return tuple(chosen)


@dataclass(frozen=True)
class Round:
    """The jobs to place this round and the GPUs they may use.

    Attributes
    ----------
    instance : Instance
    positions : tuple of int
        Every selected queue position (fixed and open).
    fixed : dict
        Position -> GPU indices of running jobs kept on their GPUs (``keep_running``).
    open_positions : tuple of int
        Selected positions the solver places.
    free : numpy.ndarray
        Boolean mask of GPUs the open jobs may use (not busy, not fixed).
    """

    instance: Instance
    positions: tuple[int, ...]
    fixed: dict[int, np.ndarray]
    open_positions: tuple[int, ...]
    free: np.ndarray

    @property
    def multi(self) -> tuple[int, ...]:
        """Open positions of jobs needing two or more GPUs."""
        q = self.instance.queue
        return tuple(p for p in self.open_positions if q[p].num_gpus > 1)

    def single_groups(
        self, positions: Iterable[int] | None = None
    ) -> dict[tuple[int, float], list[int]]:
        """1-GPU jobs (the open ones by default) grouped into interchangeable commodities.

        Parameters
        ----------
        positions : iterable of int, optional
            The queue positions to group, in this order (default: :attr:`open_positions`);
            those of jobs of more than one GPU are left out.

        Returns
        -------
        dict
            ``(class index, weight)`` -> queue positions, in the order of ``positions``.
        """
        q = self.instance.queue
        out: dict[tuple[int, float], list[int]] = {}
        for p in self.open_positions if positions is None else positions:
            job = q[p]
            if job.num_gpus == 1:
                key = (self.instance.class_index[job.job_class], float(job.weight))
                out.setdefault(key, []).append(p)
        return out


def make_round(instance: Instance, mode: str = "prefix", keep_running: bool = False) -> Round:
    """Select the round's jobs and fix kept running jobs.

    Parameters
    ----------
    instance : Instance
    mode : {"prefix", "choose"}
    keep_running : bool, default False
        Keep every selected running job on its current GPUs.

    Returns
    -------
    Round

    Raises
    ------
    InputError
        For an unknown mode.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.ones((1, 4)), np.ones((1, 3)),
    ...                 (Job("r", 2, "A", current_gpus=(0, 1)), Job("a", 1, "A")))
    >>> rnd = make_round(inst)
    >>> rnd.positions, rnd.fixed, rnd.open_positions, rnd.free.tolist()
    ((0, 1), {}, (0, 1), [True, True, True, True])
    >>> rnd = make_round(inst, keep_running=True)
    >>> {p: g.tolist() for p, g in rnd.fixed.items()}, rnd.open_positions, rnd.free.tolist()
    ({0: [0, 1]}, (1,), [False, False, True, True])
    """
    positions = select_positions(instance, mode)
    fixed: dict[int, np.ndarray] = {}
    free = ~instance.busy
    if keep_running:
        for p in positions:
            job = instance.queue[p]
            if job.is_running:
                fixed[p] = np.asarray(job.current_gpus, dtype=np.int64)
                free[fixed[p]] = False
    open_positions = tuple(p for p in positions if p not in fixed)
    free.setflags(write=False)
    return Round(instance, positions, fixed, open_positions, free)


def unselected_reasons(rnd: Round, mode: str) -> dict[int, str]:
    """Queue position -> why the round does not place it, for every position ``rnd`` leaves out.

    Parameters
    ----------
    rnd : Round
        A round made by :func:`make_round` with ``mode``.
    mode : {"prefix", "choose"}

    Returns
    -------
    dict

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.ones((1, 4)), np.ones((1, 3)),
    ...                 (Job("a", 2, "A"), Job("b", 3, "A"), Job("c", 1, "A")))
    >>> unselected_reasons(make_round(inst, "prefix"), "prefix")[2]
    "not selected: the admitted prefix ends at job 'b'"
    >>> unselected_reasons(make_round(inst, "choose"), "choose")
    {1: 'not selected: needs 3 GPUs; the jobs selected before it leave 2'}
    """
    queue = rnd.instance.queue
    selected = set(rnd.positions)
    left = available = rnd.instance.n_available
    first: str | None = None  # id of the first job left out
    out = {}
    for p, job in enumerate(queue):
        if p in selected:
            left -= job.num_gpus
        elif mode == "prefix" and first is not None:
            out[p] = f"not selected: the admitted prefix ends at job {first!r}"
        else:
            before = "the jobs selected before it leave" if left < available else "free GPUs:"
            out[p] = f"not selected: needs {counted(job.num_gpus, 'GPU')}; {before} {left}"
            first = job.id if first is None else first
    return out


def dense_groups(instance: Instance) -> list[np.ndarray]:
    """Per tier, each GPU's group as a dense id ``0..n_groups-1`` (ascending with the raw id).

    Parameters
    ----------
    instance : Instance
        Its topology's ``groups`` (one row of raw group ids per tier) are renumbered.

    Returns
    -------
    list of numpy.ndarray
        One ``int64`` array of length ``n_gpus`` per tier, lowest tier first.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, build_cluster
    >>> inst = Instance(build_cluster(2, 2, 2), ("A",), np.ones((1, 8)), np.ones((1, 3)), ())
    >>> [g.tolist() for g in dense_groups(inst)]
    [[0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0]]
    """
    return [
        np.unique(row, return_inverse=True)[1].astype(np.int64) for row in instance.topology.groups
    ]


def single_costs(
    instance: Instance, groups: Iterable[tuple[int, float]], gpus: np.ndarray
) -> np.ndarray:
    """Weighted costs of 1-GPU jobs (commodities, see :meth:`Round.single_groups`) on GPUs.

    Parameters
    ----------
    instance : Instance
    groups : iterable of (int, float)
        The commodities' ``(class index, weight)``.
    gpus : numpy.ndarray
        Dense GPU indices.

    Returns
    -------
    numpy.ndarray
        ``cost[m, i]``: weighted cost of a commodity-``m`` job on ``gpus[i]``, its weight times
        its slowdown there times the penalty of the lowest tier (shape
        ``(len(groups), len(gpus))``).

    Examples
    --------
    >>> from palopt import Job, build_cluster
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.1]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 1, "A"),))
    >>> single_costs(inst, [(0, 1.0), (0, 2.0)], np.array([1, 3])).tolist()
    [[1.3, 1.1], [2.6, 2.2]]
    """
    groups = list(groups)
    return np.array(
        [w * instance.slowdown[c, gpus] * instance.penalty[c, 0] for c, w in groups],
        dtype=np.float64,
    ).reshape(len(groups), len(gpus))


def round_cost(instance: Instance, chosen: dict[int, np.ndarray]) -> float:
    """Weighted cost of the jobs placed in ``chosen`` (queue position -> GPU indices).

    Parameters
    ----------
    instance : Instance
    chosen : dict
        Queue position -> GPU indices; jobs not in it are not counted.

    Returns
    -------
    float
        The sum of ``weight * cost`` over the jobs in ``chosen`` (0.0 if it is empty), the cost
        of a job being its slowest GPU's slowdown times the penalty of the lowest tier holding
        its GPUs.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]),
    ...                 (Job("a", 1, "A"), Job("b", 2, "A", weight=3.0)))
    >>> round_cost(inst, {0: np.array([1]), 1: np.array([2, 3])})  # 1.3 + 3 * 1.0
    4.3
    >>> round_cost(inst, {1: np.array([0, 2])})  # across servers: 3 * 1.0 * 2.0
    6.0
    """
    if not chosen:
        return 0.0
    jobs = [instance.queue[p] for p in chosen]
    sets = list(chosen.values())
    starts = np.cumsum([0] + [len(g) for g in sets[:-1]])
    classes = np.array([instance.class_index[job.job_class] for job in jobs])
    cost = set_costs(instance, classes, np.concatenate(sets).astype(np.int64), starts)[0]
    return float(np.dot([job.weight for job in jobs], cost))
