"""Placement results: per-job decisions and the solve summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from palopt.errors import InputError
from palopt.instance import Instance, require_instance

__all__ = ["JobPlacement", "PlacementResult", "Status", "Action"]


class Status:
    """Solve status values."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no solution"
    HEURISTIC = "heuristic"


class Action:
    """What happens to a job this round."""

    START = "start"  # was waiting, now placed
    KEEP = "keep"  # was running, keeps exactly its GPUs
    MIGRATE = "migrate"  # was running, placed on other GPUs
    PREEMPT = "preempt"  # was running, not placed
    WAIT = "wait"  # was waiting, not placed


@dataclass(frozen=True)
class JobPlacement:
    """The decision for one queued job.

    Attributes
    ----------
    job_id : str
    gpus : tuple of int
        Dense GPU indices, sorted; empty if not placed.
    action : str
        One of :class:`Action`.
    cost : float or None
        ``slowdown * penalty`` if placed.
    slowdown : float or None
        Maximum slowdown over the job's GPUs for its class.
    tier : str or None
        Lowest tier holding all its GPUs.
    penalty : float or None
        Locality penalty of that tier for the job's class.
    reason : str or None
        Why the job is not placed.

    Examples
    --------
    >>> p = JobPlacement("j", (4, 5), Action.START, 1.7, 1.0, "rack", 1.7)
    >>> p.placed, JobPlacement("k", (), Action.WAIT, reason="no room").placed
    (True, False)
    """

    job_id: str
    gpus: tuple[int, ...]
    action: str
    cost: float | None = None
    slowdown: float | None = None
    tier: str | None = None
    penalty: float | None = None
    reason: str | None = None

    @property
    def placed(self) -> bool:
        """Whether the job got GPUs."""
        return bool(self.gpus)

    @classmethod
    def record(
        cls,
        job_id: str,
        gpus: tuple[int, ...],
        action: str,
        cost: float | None = None,
        slowdown: float | None = None,
        tier: str | None = None,
        penalty: float | None = None,
        reason: str | None = None,
    ) -> JobPlacement:
        """The same as ``JobPlacement(...)``, about twice as fast (one is built per queued job).

        The frozen dataclass ``__init__`` sets each field through ``object.__setattr__``; this
        fills the instance dictionary in one call instead (there is no ``__post_init__``).

        Examples
        --------
        >>> JobPlacement.record("j", (0, 1), Action.START, 1.7, 1.0, "rack", 1.7) == (
        ...     JobPlacement("j", (0, 1), Action.START, 1.7, 1.0, "rack", 1.7))
        True
        """
        placement = object.__new__(cls)
        placement.__dict__.update(
            job_id=job_id,
            gpus=gpus,
            action=action,
            cost=cost,
            slowdown=slowdown,
            tier=tier,
            penalty=penalty,
            reason=reason,
        )
        return placement


@dataclass(frozen=True)
class PlacementResult:
    """The outcome of one solve.

    Attributes
    ----------
    placements : tuple of JobPlacement
        One per queued job, in queue order.
    solver : str
        Registry name of the solver.
    status : str
        One of :class:`Status`: ``heuristic`` for heuristics; exact solvers report
        ``optimal``, ``feasible``, ``infeasible`` or ``no solution``.
    objective : float
        Weighted sum of the placed jobs' costs (see :func:`palopt.cost.evaluate`).
    n_placed : int
        Number of placed jobs.
    bound : float or None
        Proven lower bound on the objective (exact solvers).
    wall_time : float
        Seconds spent in the solver.
    settings : dict
        The solver's configuration: its options, and the seed and time limit where it uses
        them (random and exact solvers).
    gap : float or None
        ``(objective - bound) / objective`` when there is a bound (a property).

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster, solve
    >>> topo = build_cluster(1, 1, 4)
    >>> inst = Instance(topo, ("A",), np.array([[1.2, 1.0, 1.1, 1.0]]), np.ones((1, 3)),
    ...                 (Job("x", 2, "A"), Job("y", 1, "A")))
    >>> r = solve(inst, "cpsat", time_limit=5)
    >>> r.status, r.n_placed, r.gap < 1e-12, r.assignment()   # bounds err on the low side
    ('optimal', 2, True, {'x': (1, 3), 'y': (2,)})
    >>> r.to_dict(inst)["jobs"][0]["gpus"]
    ['gpu1', 'gpu3']
    """

    placements: tuple[JobPlacement, ...]
    solver: str
    status: str
    objective: float
    n_placed: int
    wall_time: float
    bound: float | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        """Relative gap ``(objective - bound) / objective`` (0 when both are 0)."""
        if self.bound is None:
            return None
        if self.objective == 0:
            return 0.0
        return max(0.0, (self.objective - self.bound) / abs(self.objective))

    def assignment(self) -> dict[str, tuple[int, ...]]:
        """The placed jobs' GPUs.

        Returns
        -------
        dict
            Job id -> dense GPU indices, for placed jobs only (what
            :func:`palopt.cost.check_feasible` takes).
        """
        return {p.job_id: p.gpus for p in self.placements if p.gpus}

    def check_instance(self, instance: Instance) -> None:
        """Refuse an instance this result cannot be of: its queue must hold the result's jobs,
        in order, and its topology every GPU the result uses.

        Parameters
        ----------
        instance : Instance

        Raises
        ------
        InputError
            If ``instance`` is not an :class:`~palopt.instance.Instance`, naming its first job
            that differs, or the GPU it lacks.

        Examples
        --------
        >>> import numpy as np
        >>> from palopt import Instance, Job, build_cluster, solve
        >>> one = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
        ...                (Job("a", 1, "A"),))
        >>> other = Instance(one.topology, ("A",), np.ones((1, 2)), np.ones((1, 3)),
        ...                  (Job("b", 1, "A"),))
        >>> solve(one, "pal").check_instance(other)
        Traceback (most recent call last):
        ...
        palopt.errors.InputError: instance.queue[0].id = 'b': the result is of another queue ...
        """
        require_instance(instance)
        ids = [j.id for j in instance.queue]
        for i, p in enumerate(self.placements):
            if i >= len(ids) or ids[i] != p.job_id:
                raise InputError(
                    f"instance.queue[{i}].id",
                    ids[i] if i < len(ids) else None,
                    f"the result is of another queue (job {p.job_id!r} there)",
                )
            if any(g >= instance.topology.n_gpus for g in p.gpus):
                raise InputError(
                    "instance.topology",
                    f"{instance.topology.n_gpus} GPUs",
                    f"the result places job {p.job_id!r} on GPUs {list(p.gpus)}",
                )
        if len(ids) != len(self.placements):
            raise InputError(
                f"instance.queue[{len(self.placements)}].id",
                ids[len(self.placements)],
                "the result is of a shorter queue",
            )

    def to_frame(self, instance: Instance) -> Any:
        """One row per job as a pandas DataFrame (see :func:`palopt.export.to_frame`).

        Parameters
        ----------
        instance : Instance
            The instance solved (for GPU and server names and job classes).

        Returns
        -------
        pandas.DataFrame
        """
        from palopt.export import to_frame

        return to_frame(self, instance)

    def to_dict(self, instance: Instance) -> dict[str, Any]:
        """JSON-ready form (``palopt.result/1``), as ``palopt solve`` prints it.

        Parameters
        ----------
        instance : Instance
            The instance solved: GPUs and servers are named by its topology's ids.

        Returns
        -------
        dict
            The solver, status, objective, bound, gap, counts, time and settings, and per job
            its action and either its GPUs, servers, cost, slowdown, tier and penalty, or the
            reason it is not placed.

        Raises
        ------
        InputError
            If the result is not of ``instance`` (:meth:`check_instance`).
        """
        self.check_instance(instance)
        topo = instance.topology
        jobs = []
        for p in self.placements:
            row: dict[str, Any] = {"job": p.job_id, "action": p.action}
            if p.gpus:
                row.update(
                    gpus=[topo.gpu_ids[g] for g in p.gpus],
                    servers=sorted({topo.server_of(g) for g in p.gpus}),
                    cost=p.cost,
                    slowdown=p.slowdown,
                    tier=p.tier,
                    penalty=p.penalty,
                )
            else:
                row["reason"] = p.reason
            jobs.append(row)
        return {
            "format": "palopt.result/1",
            "solver": self.solver,
            "status": self.status,
            "objective": self.objective,
            "bound": self.bound,
            "gap": self.gap,
            "n_placed": self.n_placed,
            "n_jobs": len(self.placements),
            "wall_time": self.wall_time,
            "settings": self.settings,
            "jobs": jobs,
        }
