"""The exact model solved by OR-Tools CP-SAT (registered as ``cpsat``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from palopt.result import Status
from palopt.solvers.base import register
from palopt.solvers.exact.model import SparseModel
from palopt.solvers.exact.runner import BackendAnswer, ExactSolver, seconds_left

__all__ = ["CpSatSolver"]

#: Row bounds beyond this are open (CP-SAT domains are 64-bit integers).
LIMIT = 2**62


class CpSatSolver(ExactSolver):
    """Exact placement with CP-SAT; options as :class:`~palopt.solvers.exact.runner.ExactSolver`.

    The best placement so far (the greedy's, or a better one of the flow) is a solution hint.
    With ``workers > 1`` the portfolio is interleaved (``interleave_search``), which keeps the
    search deterministic. With ``deterministic=True`` the time limit is CP-SAT's deterministic
    time.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster, solve
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 1, "A"), Job("b", 2, "A")))
    >>> r = solve(inst, "cpsat")
    >>> r.status, round(r.objective, 6), r.assignment()["b"]
    ('optimal', 2.0, (2, 3))
    """

    name = "cpsat"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # OR-Tools' first import (0.6 s; 1.5-2.3 s on a loaded 2-core machine) is made here, not
        # inside the first solve's time limit, where it left an 8-GPU round given 2 s no time.
        import ortools.sat.python.cp_model  # noqa: F401

    def run(
        self, sp: SparseModel, start: np.ndarray | None, time_limit: float, seed: int
    ) -> BackendAnswer:
        """Solve ``sp`` with CP-SAT within ``time_limit`` seconds, building the model included."""
        deadline = time.perf_counter() + time_limit
        from ortools.sat.python import cp_model

        m = cp_model.CpModel()
        # Written into the model's proto directly: the expression API takes twice as long on
        # models of 10,000 rows, time the solve would not get.
        proto = m.proto
        for low, high in zip(sp.lower, sp.upper, strict=True):
            proto.variables.add().domain.extend((low, high))
        for idx, coef, lo, hi in sp.rows:
            row = proto.constraints.add().linear
            row.vars.extend(idx)
            row.coeffs.extend(coef)
            row.domain.extend((int(max(lo, -LIMIT)), int(min(hi, LIMIT))))
        every = range(sp.n_vars)
        proto.objective.vars.extend(every)
        proto.objective.coeffs.extend(sp.objective)
        if start is not None:
            proto.solution_hint.vars.extend(every)
            proto.solution_hint.values.extend(int(v) for v in start)
        solver = cp_model.CpSolver()
        if self.deterministic:
            solver.parameters.max_deterministic_time = time_limit
        else:
            solver.parameters.max_time_in_seconds = seconds_left(deadline)
        solver.parameters.num_workers = self.workers
        solver.parameters.random_seed = seed
        solver.parameters.relative_gap_limit = self.gap
        if self.workers > 1:
            solver.parameters.interleave_search = True
        code = solver.solve(m)
        work = float(solver.response_proto.deterministic_time)
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            values = np.array(solver.response_proto.solution, dtype=np.int64)
            status = Status.OPTIMAL if code == cp_model.OPTIMAL else Status.FEASIBLE
            return BackendAnswer(status, values, float(solver.best_objective_bound), work)
        if code == cp_model.INFEASIBLE:
            return BackendAnswer(Status.INFEASIBLE, None, None, work)
        return BackendAnswer(Status.NO_SOLUTION, None, None, work)


register(
    "cpsat",
    CpSatSolver,
    "Exact (CP-SAT): pattern model of the cost objective, warm-started",
    requires=("ortools",),
    options=CpSatSolver.OPTIONS,
)
