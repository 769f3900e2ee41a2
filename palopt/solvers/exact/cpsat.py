"""The exact model solved by OR-Tools CP-SAT (registered as ``cpsat``)."""

from __future__ import annotations

import numpy as np

from palopt.result import Status
from palopt.solvers.base import register
from palopt.solvers.exact.model import SparseModel
from palopt.solvers.exact.runner import BackendAnswer, ExactSolver

__all__ = ["CpSatSolver"]


class CpSatSolver(ExactSolver):
    """Exact placement with CP-SAT; options as :class:`~palopt.solvers.exact.runner.ExactSolver`.

    The greedy placement is given as a solution hint. With ``workers > 1`` the portfolio is
    interleaved (``interleave_search``), which keeps the search deterministic. With
    ``deterministic=True`` the time limit is CP-SAT's deterministic time.

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

    def run(
        self, sp: SparseModel, start: np.ndarray | None, time_limit: float, seed: int
    ) -> BackendAnswer:
        """Solve ``sp`` with CP-SAT."""
        from ortools.sat.python import cp_model

        m = cp_model.CpModel()
        xs = [m.new_int_var(lo, hi, "") for lo, hi in zip(sp.lower, sp.upper, strict=True)]
        for idx, coef, lo, hi in sp.rows:
            expr = cp_model.LinearExpr.weighted_sum([xs[i] for i in idx], coef)
            m.add_linear_constraint(expr, int(max(lo, -(2**62))), int(min(hi, 2**62)))
        m.minimize(cp_model.LinearExpr.weighted_sum(xs, sp.objective))
        if start is not None:
            for var, value in zip(xs, start, strict=True):
                m.add_hint(var, int(value))
        solver = cp_model.CpSolver()
        if self.deterministic:
            solver.parameters.max_deterministic_time = time_limit
        else:
            solver.parameters.max_time_in_seconds = time_limit
        solver.parameters.num_workers = self.workers
        solver.parameters.random_seed = seed
        solver.parameters.relative_gap_limit = self.gap
        if self.workers > 1:
            solver.parameters.interleave_search = True
        code = solver.solve(m)
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            values = np.array([solver.value(v) for v in xs], dtype=np.int64)
            status = Status.OPTIMAL if code == cp_model.OPTIMAL else Status.FEASIBLE
            return BackendAnswer(status, values, float(solver.best_objective_bound))
        if code == cp_model.INFEASIBLE:
            return BackendAnswer(Status.INFEASIBLE, None, None)
        return BackendAnswer(Status.NO_SOLUTION, None, None)


register(
    "cpsat",
    CpSatSolver.from_config,
    "Exact (CP-SAT): pattern model of the cost objective, warm-started",
    requires=("ortools",),
)
