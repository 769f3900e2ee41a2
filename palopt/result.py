"""Placement results: per-job decisions and the solve summary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from palopt._frozen import FrozenDict
from palopt.errors import InputError, check_fields, check_number, is_finite_number
from palopt.instance import Instance, require_instance
from palopt.io import read_json, require_field

__all__ = [
    "JobPlacement",
    "PlacementResult",
    "Status",
    "Action",
    "RESULT_FORMAT",
    "load_result",
    "result_schema",
]

#: The JSON form of a result (:meth:`PlacementResult.to_dict`).
RESULT_FORMAT = "palopt.result/1"
RESULT_FIELDS = (
    "format",
    "solver",
    "status",
    "objective",
    "bound",
    "gap",
    "n_placed",
    "n_jobs",
    "wall_time",
    "settings",
    "jobs",
)
PLACED_FIELDS = ("job", "action", "gpus", "servers", "cost", "slowdown", "tier", "penalty")


class Status:
    """Solve status values.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster, solve
    >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
    ...                 (Job("a", 1, "A"),))
    >>> solve(inst, "pal").status == Status.HEURISTIC
    True
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no solution"
    HEURISTIC = "heuristic"


STATUSES = (
    Status.OPTIMAL,
    Status.FEASIBLE,
    Status.INFEASIBLE,
    Status.NO_SOLUTION,
    Status.HEURISTIC,
)


class Action:
    """What happens to a job this round.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster, solve
    >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
    ...                 (Job("a", 1, "A", current_gpus=(1,)), Job("b", 2, "A")))
    >>> [p.action for p in solve(inst, "packed-sticky").placements]
    ['keep', 'wait']
    >>> [p.action for p in solve(inst, "pal").placements]  # PAL is not sticky
    ['migrate', 'wait']
    """

    START = "start"  # was waiting, now placed
    KEEP = "keep"  # was running, keeps exactly its GPUs
    MIGRATE = "migrate"  # was running, placed on other GPUs
    PREEMPT = "preempt"  # was running, not placed
    WAIT = "wait"  # was waiting, not placed


ACTIONS = (Action.START, Action.KEEP, Action.MIGRATE, Action.PREEMPT, Action.WAIT)


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
        """Whether the job got GPUs.

        Examples
        --------
        >>> JobPlacement("k", (), Action.WAIT, reason="no room").placed
        False
        """
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

        Parameters
        ----------
        job_id, gpus, action, cost, slowdown, tier, penalty, reason
            The fields, as for :class:`JobPlacement`; none is checked.

        Returns
        -------
        JobPlacement

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
        them (random and exact solvers). Read-only, and left out of the result's hash (a
        setting may be a list), not out of its equality.
    gap : float or None
        ``(objective - bound) / objective`` when there is a bound (a property: :attr:`gap`).

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
    settings: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", FrozenDict(self.settings))

    @property
    def gap(self) -> float | None:
        """Relative gap ``(objective - bound) / |objective|``, at least 0 (a bound within the
        back end's tolerance above the objective gives 0), and 0 for an objective of 0 (no job
        placed); ``None`` without a bound.

        Examples
        --------
        >>> PlacementResult((), "milp", "feasible", 2.0, 0, 0.1, bound=1.5).gap
        0.25
        >>> PlacementResult((), "pal", "heuristic", 2.0, 0, 0.1).gap is None
        True
        """
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

        Examples
        --------
        >>> import numpy as np
        >>> from palopt import Instance, Job, build_cluster, solve
        >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
        ...                 (Job("a", 1, "A"), Job("b", 2, "A")))
        >>> solve(inst, "pal").assignment()
        {'a': (0,)}
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
        _check_queue_ids([p.job_id for p in self.placements], instance)
        n = instance.topology.n_gpus
        for p in self.placements:
            # (a negative index named a GPU from the end: -1 was written as the last GPU's id)
            if any(
                isinstance(g, (bool, np.bool_))
                or not isinstance(g, (int, np.integer))
                or not 0 <= g < n
                for g in p.gpus
            ):
                raise InputError(
                    "instance.topology",
                    f"{instance.topology.n_gpus} GPUs",
                    f"the result places job {p.job_id!r} on GPUs {list(p.gpus)}",
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

        Examples
        --------
        >>> import numpy as np
        >>> from palopt import Instance, Job, build_cluster, solve
        >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
        ...                 (Job("a", 1, "A"), Job("b", 2, "A")))
        >>> solve(inst, "pal").to_frame(inst)[["job", "action", "gpus"]].values.tolist()
        [['a', 'start', ('gpu0',)], ['b', 'wait', ()]]
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

        Examples
        --------
        >>> import numpy as np
        >>> from palopt import Instance, Job, build_cluster, solve
        >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
        ...                 (Job("a", 1, "A"), Job("b", 2, "A")))
        >>> data = solve(inst, "pal").to_dict(inst)
        >>> data["format"], data["n_placed"], data["jobs"][0]["gpus"]
        ('palopt.result/1', 1, ['gpu0'])
        """
        self.check_instance(instance)
        topo = instance.topology
        server_of = [topo.server_ids[s] for s in topo.gpu_server.tolist()]  # (checked GPUs)
        jobs = []
        for p in self.placements:
            row: dict[str, Any] = {"job": p.job_id, "action": p.action}
            if p.gpus:
                row.update(
                    gpus=[topo.gpu_ids[g] for g in p.gpus],
                    servers=sorted({server_of[g] for g in p.gpus}),
                    cost=p.cost,
                    slowdown=p.slowdown,
                    tier=p.tier,
                    penalty=p.penalty,
                )
            else:
                row["reason"] = p.reason
            jobs.append(row)
        return {
            "format": RESULT_FORMAT,
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

    @classmethod
    def from_dict(cls, data: Any, instance: Instance) -> PlacementResult:
        """Read the JSON form :meth:`to_dict` writes (``palopt.result/1``) back into a result.

        The fields that follow from the others (``gap``, ``n_jobs``, each job's ``servers``)
        must agree with them. Whether the placement keeps the rules, and its costs are those
        of its GPUs, is the checker's question: :func:`palopt.cost.check_feasible`.

        Parameters
        ----------
        data : dict
            The parsed JSON.
        instance : Instance
            The instance solved: GPU names are read as its topology's.

        Returns
        -------
        PlacementResult

        Raises
        ------
        InputError
            Naming the first bad field and value, or if the result is not of ``instance``
            (:meth:`check_instance`).

        Examples
        --------
        >>> import numpy as np
        >>> from palopt import Instance, Job, build_cluster, solve
        >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.ones((1, 4)), np.ones((1, 3)),
        ...                 (Job("a", 2, "A"), Job("b", 4, "A")))
        >>> r = solve(inst, "greedy")
        >>> PlacementResult.from_dict(r.to_dict(inst), inst) == r
        True
        >>> PlacementResult.from_dict({**r.to_dict(inst), "status": "great"}, inst)
        Traceback (most recent call last):
        ...
        palopt.errors.InputError: status = 'great': must be one of optimal, feasible, ...
        """
        require_instance(instance)
        if not isinstance(data, Mapping):
            raise InputError("result", type(data).__name__, "expected a JSON object")
        if data.get("format") != RESULT_FORMAT:
            raise InputError("format", data.get("format"), f"expected {RESULT_FORMAT!r}")
        check_fields(data, RESULT_FIELDS)
        status = require_field(data, "status", str, "")
        if status not in STATUSES:
            raise InputError("status", status, f"must be one of {', '.join(STATUSES)}")
        bound = data.get("bound")
        if bound is not None and not is_finite_number(bound):
            raise InputError("bound", bound, "must be a finite number or null")
        n_placed = require_field(data, "n_placed", int, "")
        if n_placed < 0:
            raise InputError("n_placed", n_placed, "must not be negative")
        rows = require_field(data, "jobs", list, "")
        if all(isinstance(r, Mapping) and isinstance(r.get("job"), str) for r in rows):
            # the queue before the GPUs, so a result of another instance is named as such (a
            # row with no job id is named below)
            _check_queue_ids([r.get("job") for r in rows], instance)
        result = cls(
            tuple(_placement_from_dict(instance, i, row) for i, row in enumerate(rows)),
            require_field(data, "solver", str, ""),
            status,
            check_number(require_field(data, "objective", (int, float), ""), "objective", 0, True),
            n_placed,
            check_number(require_field(data, "wall_time", (int, float), ""), "wall_time", 0, True),
            None if bound is None else float(bound),
            dict(require_field(data, "settings", dict, "")),
        )
        result.check_instance(instance)
        if data.get("n_jobs", len(rows)) != len(rows):
            raise InputError("n_jobs", data["n_jobs"], f"the result lists {len(rows)} jobs")
        gap, derived = data.get("gap", result.gap), result.gap  # optional, as n_jobs is
        if gap is None or derived is None:
            agrees = gap is None and derived is None
        else:
            agrees = is_finite_number(gap) and abs(gap - derived) <= 1e-9
        if not agrees:
            raise InputError("gap", gap, f"objective and bound give {derived}")
        return result


def _check_queue_ids(ids: list[Any], instance: Instance) -> None:
    """Refuse a result whose jobs are not ``instance``'s queue, in its order, naming the first
    that differs."""
    queue = [j.id for j in instance.queue]
    for i, job_id in enumerate(ids):
        if i >= len(queue) or queue[i] != job_id:
            raise InputError(
                f"instance.queue[{i}].id",
                queue[i] if i < len(queue) else None,
                f"the result is of another queue (job {job_id!r} there)",
            )
    if len(queue) != len(ids):
        raise InputError(
            f"instance.queue[{len(ids)}].id", queue[len(ids)], "the result is of a shorter queue"
        )


def _placement_from_dict(instance: Instance, i: int, row: Any) -> JobPlacement:
    """One entry of a result's ``jobs`` (see :meth:`PlacementResult.from_dict`)."""
    where = f"jobs[{i}]."
    if not isinstance(row, Mapping):
        raise InputError(f"jobs[{i}]", row, "expected an object")
    job_id = require_field(row, "job", str, where)
    action = require_field(row, "action", str, where)
    if action not in ACTIONS:
        raise InputError(f"{where}action", action, f"must be one of {', '.join(ACTIONS)}")
    if "gpus" not in row:
        check_fields(row, ("job", "action", "reason"), where)
        reason = row.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise InputError(f"{where}reason", reason, "expected a string or null")
        return JobPlacement(job_id, (), action, reason=reason)
    check_fields(row, PLACED_FIELDS, where)
    topo = instance.topology
    names = require_field(row, "gpus", list, where)
    if not names:
        raise InputError(f"{where}gpus", names, "empty: an unplaced job has no 'gpus' field")
    gpus = tuple(sorted(int(g) for g in topo.indices(names, f"{where}gpus")))
    servers = require_field(row, "servers", list, where)
    if servers != sorted({topo.server_of(g) for g in gpus}):
        raise InputError(f"{where}servers", servers, "not the servers of the job's GPUs")
    tier = require_field(row, "tier", str, where)
    if tier not in topo.tiers:
        raise InputError(f"{where}tier", tier, f"unknown tier; tiers: {', '.join(topo.tiers)}")
    cost, slowdown, penalty = (
        check_number(require_field(row, key, (int, float), where), f"{where}{key}")
        for key in ("cost", "slowdown", "penalty")
    )
    return JobPlacement(job_id, gpus, action, cost, slowdown, tier, penalty)


def load_result(path: str | Path, instance: Instance) -> PlacementResult:
    """Read a result file (``palopt.result/1``, as ``palopt solve --out`` writes it).

    Parameters
    ----------
    path : str or Path
    instance : Instance
        The instance solved.

    Returns
    -------
    PlacementResult

    Raises
    ------
    InputError
        For invalid JSON or a result :meth:`PlacementResult.from_dict` refuses.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import json, tempfile
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster, solve
    >>> from palopt.io import write_text
    >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
    ...                 (Job("a", 1, "A"),))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/r.json", json.dumps(solve(inst, "pal").to_dict(inst)))
    ...     load_result(f"{folder}/r.json", inst).assignment()
    {'a': (0,)}
    """
    return PlacementResult.from_dict(read_json(path), instance)


def result_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the result format ``palopt.result/1``.

    Returns
    -------
    dict
        The schema as plain JSON data (a new dict on every call). It checks the fields, their
        types and ranges; :meth:`PlacementResult.from_dict` also checks what depends on the
        instance (GPU ids, servers, tiers, the queue) and that the derived fields agree.

    Examples
    --------
    >>> result_schema()["properties"]["status"]["enum"]
    ['optimal', 'feasible', 'infeasible', 'no solution', 'heuristic']
    """
    positive = {"type": "number", "exclusiveMinimum": 0}
    at_least_0 = {"type": "number", "minimum": 0}
    placed = {
        "type": "object",
        "required": list(PLACED_FIELDS),
        "additionalProperties": False,
        "properties": {
            "job": {"type": "string"},
            "action": {"enum": list(ACTIONS)},
            "gpus": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "servers": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "cost": positive,
            "slowdown": positive,
            "tier": {"type": "string"},
            "penalty": positive,
        },
    }
    waiting = {
        "type": "object",
        "required": ["job", "action"],
        "additionalProperties": False,
        "properties": {
            "job": {"type": "string"},
            "action": {"enum": list(ACTIONS)},
            "reason": {"type": ["string", "null"]},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://palopt.invalid/schema/result-1.json",
        "title": "palopt placement result",
        "type": "object",
        "required": [
            "format",
            "solver",
            "status",
            "objective",
            "n_placed",
            "wall_time",
            "settings",
            "jobs",
        ],
        "additionalProperties": False,
        "properties": {
            "format": {"const": RESULT_FORMAT},
            "solver": {"type": "string"},
            "status": {"enum": list(STATUSES)},
            "objective": at_least_0,
            "bound": {"type": ["number", "null"]},
            "gap": {"type": ["number", "null"], "minimum": 0},
            "n_placed": {"type": "integer", "minimum": 0},
            "n_jobs": {"type": "integer", "minimum": 0},
            "wall_time": at_least_0,
            "settings": {"type": "object"},
            "jobs": {"type": "array", "items": {"oneOf": [placed, waiting]}},
        },
    }
