"""The solve flow shared by the exact back ends.

1. Select the round's jobs (:func:`palopt.solvers.round.make_round`, ``mode`` prefix or choose).
2. Place them with the cost-aware greedy: the upper bound, the warm start and the fallback.
3. Build the model (:func:`palopt.solvers.exact.model.build_model`) and hand it to a back end
   with a time limit, a seed and a worker count.
4. Check the back end's answer (every row satisfied, the placement feasible) and report:
   ``optimal`` only when the back end proved it; ``feasible`` with a bound (the back end's, or
   the cheap bound of :mod:`palopt.solvers.bounds`, whichever is higher); ``no solution`` or
   ``infeasible`` with the greedy placement, said so in the settings.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from palopt.cost import check_feasible
from palopt.errors import InputError
from palopt.instance import Instance
from palopt.result import PlacementResult, Status
from palopt.solvers.base import build_result
from palopt.solvers.bounds import lower_bound
from palopt.solvers.exact.model import PlacementModel, SparseModel, build_model
from palopt.solvers.greedy import greedy_assignment, round_cost
from palopt.solvers.round import MODES, make_round

__all__ = ["ExactSolver", "BackendAnswer", "DEFAULT_TIME_LIMIT", "DEFAULT_SCALE"]

log = logging.getLogger(__name__)

DEFAULT_TIME_LIMIT = 10.0
DEFAULT_SCALE = 1e6


@dataclass(frozen=True)
class BackendAnswer:
    """What a back end returns: a status of :class:`~palopt.result.Status`, the solution vector
    (``None`` if none), and a lower bound on the scaled objective (``None`` if unknown)."""

    status: str
    solution: np.ndarray | None
    bound: float | None


def rows_satisfied(model: SparseModel, solution: np.ndarray) -> bool:
    """Whether an integer solution satisfies every bound and row of ``model``."""
    sol = np.rint(solution).astype(np.int64)
    if (sol < np.asarray(model.lower)).any() or (sol > np.asarray(model.upper)).any():
        return False
    for idx, coef, lo, hi in model.rows:
        value = int(np.dot(sol[idx], coef))
        if value < lo or value > hi:
            return False
    return True


class ExactSolver:
    """Base of the exact solvers; a back end implements :meth:`run`.

    Parameters
    ----------
    mode : {"prefix", "choose"}, default "prefix"
        Which jobs run (see :mod:`palopt.solvers.round`).
    keep_running : bool, default False
        Keep selected running jobs on their current GPUs (otherwise they may move).
    time_limit : float, default 10
        Seconds for the back end, unless ``solve`` is given one.
    workers : int, default 1
        Threads for the back end. Results are deterministic for a given seed and worker count
        whenever the solve ends before the time limit.
    scale : float, default 1e6
        Cost scaling to integers (costs are rounded down after scaling).
    warm_start : bool, default True
        Give the greedy placement to the back end as a start (when it accepts one).
    """

    name = "exact"
    accepts_start = True

    def __init__(self, mode: str = "prefix", keep_running: bool = False,
                 time_limit: float = DEFAULT_TIME_LIMIT, workers: int = 1,
                 scale: float = DEFAULT_SCALE, warm_start: bool = True) -> None:
        if mode not in MODES:
            raise InputError(f"{self.name}.mode", mode, f"must be one of {', '.join(MODES)}")
        if not (isinstance(time_limit, (int, float)) and time_limit > 0):
            raise InputError(f"{self.name}.time_limit", time_limit, "must be a positive number")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InputError(f"{self.name}.workers", workers, "must be a positive integer")
        if not (isinstance(scale, (int, float)) and scale >= 1):
            raise InputError(f"{self.name}.scale", scale, "must be a number >= 1")
        self.mode = mode
        self.keep_running = bool(keep_running)
        self.time_limit = float(time_limit)
        self.workers = workers
        self.scale = float(scale)
        self.warm_start = bool(warm_start) and self.accepts_start

    def settings(self) -> dict[str, Any]:
        """The solver's configuration, as reported in results."""
        return {"mode": self.mode, "keep_running": self.keep_running, "workers": self.workers,
                "scale": self.scale, "warm_start": self.warm_start}

    def run(self, model: PlacementModel, start: np.ndarray | None, time_limit: float,
            seed: int) -> BackendAnswer:
        """Solve ``model`` (implemented by each back end)."""
        raise NotImplementedError

    def solve(self, instance: Instance, *, time_limit: float | None = None,
              seed: int | None = None) -> PlacementResult:
        """Place the round's jobs at minimum weighted cost (see the module documentation)."""
        started = time.perf_counter()
        limit = self.time_limit if time_limit is None else float(time_limit)
        if limit <= 0:
            raise InputError("time_limit", time_limit, "must be a positive number")
        seed = 0 if seed is None else int(seed)
        rnd = make_round(instance, self.mode, self.keep_running)
        settings = {**self.settings(), "time_limit": limit, "seed": seed}
        reasons = {p: "not selected: the round's GPUs are taken by earlier jobs"
                   for p in range(len(instance.queue)) if p not in set(rnd.positions)}
        if not rnd.open_positions:
            result = build_result(instance, self.name, dict(rnd.fixed), reasons, started,
                                  status=Status.OPTIMAL, settings=settings)
            return _with_bound(result, result.objective)
        greedy = greedy_assignment(rnd)
        ub = round_cost(instance, greedy)
        model = build_model(rnd, self.scale, ub)
        start = model.start(greedy, rnd) if self.warm_start else None
        settings.update(n_vars=model.sparse.n_vars, n_rows=len(model.sparse.rows),
                        n_patterns=model.n_patterns, n_gpu_types=len(model.type_gpus),
                        greedy_cost=ub)
        remaining = max(limit - (time.perf_counter() - started), 0.01)
        answer = self.run(model, start, remaining, seed)
        chosen = greedy
        status = answer.status
        if answer.solution is not None:
            decoded = model.decode(answer.solution)
            ok = rows_satisfied(model.sparse, answer.solution) and set(decoded) == set(
                rnd.open_positions) and not check_feasible(
                instance, {instance.queue[p].id: g for p, g in {**rnd.fixed, **decoded}.items()})
            if not ok:
                log.error("%s: the back end's solution violates the model; using the greedy",
                          self.name)
                status, answer = Status.NO_SOLUTION, BackendAnswer(Status.NO_SOLUTION, None, None)
            elif round_cost(instance, decoded) <= ub:
                chosen = decoded
            elif status == Status.OPTIMAL:
                status = Status.FEASIBLE  # the greedy beats it: the proof was about rounding
        if status in (Status.NO_SOLUTION, Status.INFEASIBLE):
            settings["fallback"] = "greedy placement returned: the back end found no solution"
        fixed_cost = round_cost(instance, rnd.fixed)
        bounds = [lower_bound(rnd)]
        if answer.bound is not None and status != Status.INFEASIBLE:
            bounds.append(answer.bound / self.scale)
        result = build_result(instance, self.name, {**rnd.fixed, **chosen}, reasons, started,
                              status=status, settings=settings)
        return _with_bound(result, min(max(bounds) + fixed_cost, result.objective))


def _with_bound(result: PlacementResult, bound: float) -> PlacementResult:
    return replace(result, bound=bound)
