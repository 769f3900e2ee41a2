"""The exact model as a MILP (registered as ``milp``): CBC through PuLP, or HiGHS through highspy.

``backend="cbc"`` (default) builds a PuLP problem and runs the bundled CBC with the best
placement so far as a warm start. CBC's best bound is not reported through PuLP, so a
time-limited CBC answer carries the best bound found before it (the cheap bound of
:mod:`palopt.solvers.bounds`, or column generation's or the subgradient's). CBC's first LP does
not stop at the time limit, so models of more than :data:`CBC_MAX_NONZEROS` nonzeros are not
given to it (the answer is ``no solution``; the flow keeps its best placement): use ``cpsat``
or ``backend="highs"`` for large rounds.

``backend="highs"`` passes the sparse model to HiGHS directly. A started model is solved with
presolve off: HiGHS 1.16 with a starting solution and presolve on has been seen to report
"optimal" at a value below the true optimum (a regression test keeps this guarded). Its
presolve, its feasibility-jump heuristic and its symmetry detection do not stop at the time
limit, so models of more than :data:`HIGHS_LARGE_NONZEROS` nonzeros are solved without them.
"""

from __future__ import annotations

import importlib.util
import logging
import tempfile
import time
from typing import Any

import numpy as np

from palopt.errors import InputError
from palopt.result import Status
from palopt.solvers.base import register
from palopt.solvers.exact.model import SparseModel
from palopt.solvers.exact.runner import BackendAnswer, ExactSolver, seconds_left
from palopt.solvers.transport import new_highs

__all__ = ["MilpSolver", "BACKENDS", "HIGHS_LARGE_NONZEROS", "CBC_MAX_NONZEROS"]

log = logging.getLogger(__name__)

BACKENDS = ("cbc", "highs")

#: Largest model (nonzeros) given to CBC. CBC 2.10 does not check its time limit while it solves
#: the first LP: with limits of 1-2 s, compact models of 37,000 / 136,000 / 374,000 / 871,000
#: nonzeros (a 96-GPU, a 128-GPU and two 256-GPU rounds at full load) took 2.2 / 8.8 / 59 /
#: 486 s. The region models of the exact flow have at most 26,000 nonzeros, the 64-GPU compact
#: models 8,000.
CBC_MAX_NONZEROS = 50_000

#: CBC is given the objective divided by a power of two that brings its largest coefficient to
#: at most this (exact: only the exponents change). Rounds whose weighted costs span a wide range
#: (weights 1e-3 and 1e3, slowdowns 0.01 to 100) have integer coefficients up to 8e12; with them
#: CBC lost the optimum and returned its warm start as "Optimal", 0.16% above the optimum that
#: CP-SAT and HiGHS proved, on 3 of 40 solver seeds (a 32-GPU round found by a randomised
#: campaign, `tests/test_exact.py`); divided down to 2^24, on none of 120 (to 2^20: none of 40).
#: The 16- and 64-GPU benchmark rounds' coefficients are at most 2^21 (costs are scaled by 1e6),
#: so they reach CBC as before. HiGHS is given the objective as it is: on 1,355 rounds of up to
#: 32 GPUs with weights 1e-3 and 1e3 (0.2 s each) it proved 1,251 optimal, and 1,254 with the
#: objective divided this way; neither called optimal a placement dearer than CP-SAT's optimum.
CBC_MAX_COEFFICIENT = 2.0**24

#: Models with more nonzeros than this are solved by HiGHS without presolve, the feasibility-jump
#: heuristic and symmetry detection, none of which stops at the time limit in HiGHS 1.16. On the
#: compact models of full-load 256-GPU rounds (150,000-1,000,000 nonzeros) presolve took 1.1-2.8 s
#: under limits of 0.9-2.0 s, and feasibility jump 2.9 s under 1.5 s (with presolve off), each
#: for no solution; with both off, a 2 s compact solve of such a round takes 2.05 s (3.7 s with
#: them), building the model included; with symmetry detection too, HiGHS given 0.23-0.37 s
#: returned 0.13-0.19 s late on two of them, instead of 0.28-0.51 s (given 1.1-1.2 s, 0.05 s late
#: either way). The region models of the exact flow (at most 26,000 nonzeros) and the 64-GPU
#: compact models (8,000) keep all three (presolve when they are not started): without a start or
#: presolve, the region models of ``256g-8ps-100%-synthetic`` seed 1 ended 0.8% dearer.
HIGHS_LARGE_NONZEROS = 100_000


class MilpSolver(ExactSolver):
    """Exact placement as a MILP.

    Parameters
    ----------
    backend : {"cbc", "highs"}, default "cbc"
    **options
        As :class:`~palopt.solvers.exact.runner.ExactSolver` (HiGHS solves a started model
        without presolve, see the module documentation); ``deterministic=True`` is refused
        (only CP-SAT has a deterministic time limit).

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster, solve
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 1, "A"), Job("b", 2, "A")))
    >>> [solve(inst, "milp", backend=b).objective for b in ("cbc", "highs")]
    [2.0, 2.0]
    """

    name = "milp"

    OPTIONS = (*ExactSolver.OPTIONS, "backend")

    def __init__(self, backend: str = "cbc", **options: Any) -> None:
        if backend not in BACKENDS:
            raise InputError("milp.backend", backend, f"must be one of {', '.join(BACKENDS)}")
        if backend == "highs" and importlib.util.find_spec("highspy") is None:
            raise ImportError("milp backend 'highs' needs highspy: pip install 'palopt[exact]'")
        super().__init__(**options)  # checks the options (deterministic is a flag)
        if self.deterministic:
            raise InputError(
                "milp.deterministic",
                True,
                "CBC and HiGHS have no deterministic work limit (a node limit does not bound "
                "their root node); use the cpsat solver",
            )
        self.backend = backend

    def settings(self) -> dict[str, Any]:
        """The configuration, with the back end."""
        return {**super().settings(), "backend": self.backend}

    def run(
        self, sp: SparseModel, start: np.ndarray | None, time_limit: float, seed: int
    ) -> BackendAnswer:
        """Solve ``sp`` with the configured back end within ``time_limit`` seconds, building the
        model included (the back end gets what is left)."""
        deadline = time.perf_counter() + time_limit
        if self.backend == "highs":
            return self._highs(sp, start, deadline, seed)
        return self._cbc(sp, start, deadline, seed)

    def _cbc(
        self, sp: SparseModel, start: np.ndarray | None, deadline: float, seed: int
    ) -> BackendAnswer:
        import pulp

        if sp.n_nonzeros > CBC_MAX_NONZEROS:
            log.warning(
                "milp (cbc): a model of %d nonzeros is not solved: CBC's first LP does not stop "
                "at the time limit (models up to %d are); use cpsat or backend=highs",
                sp.n_nonzeros,
                CBC_MAX_NONZEROS,
            )
            return BackendAnswer(Status.NO_SOLUTION, None, None)

        prob = pulp.LpProblem("placement", pulp.LpMinimize)
        make = getattr(prob, "add_variable", None)  # PuLP >= 3.3; older: the constructor
        if make is None:

            def make(name: str, lo: int, hi: int, cat: str) -> Any:
                return pulp.LpVariable(name, lo, hi, cat=cat)

        xs = [
            make(f"v{i}", lo, hi, cat=pulp.LpInteger)
            for i, (lo, hi) in enumerate(zip(sp.lower, sp.upper, strict=True))
        ]
        # A power of two, so that the coefficients stay exact (see CBC_MAX_COEFFICIENT).
        top = max((abs(c) for c in sp.objective), default=0)
        unit = 2.0 ** max(0, int(np.ceil(np.log2(top / CBC_MAX_COEFFICIENT)))) if top else 1.0
        prob += pulp.LpAffineExpression(
            [(xs[i], c / unit) for i, c in enumerate(sp.objective) if c]
        )
        for r, (idx, coef, lo, hi) in enumerate(sp.rows):
            expr = pulp.LpAffineExpression([(xs[i], c) for i, c in zip(idx, coef, strict=True)])
            if lo == hi:
                prob += pulp.LpConstraint(expr, pulp.LpConstraintEQ, f"r{r}", lo)
                continue
            if lo > -np.inf:
                prob += pulp.LpConstraint(expr, pulp.LpConstraintGE, f"l{r}", lo)
            if hi < np.inf:
                prob += pulp.LpConstraint(expr, pulp.LpConstraintLE, f"u{r}", hi)
        if start is not None:
            for var, value in zip(xs, start, strict=True):
                var.setInitialValue(int(value))
        # PuLP 3.3 deprecates PULP_CBC_CMD for COIN_CMD; the CBC binary bundled with PuLP 2.7-3.x
        # (pinned below 4 in pyproject.toml) is the one given.
        solver = pulp.COIN_CMD(
            path=pulp.PULP_CBC_CMD.pulp_cbc_path,
            msg=False,
            timeLimit=seconds_left(deadline),
            # One worker: no -threads option. "-threads 1" runs CBC 2.10's parallel code with one
            # thread, which now and then waits 10 s for that thread to start, whatever the time
            # limit (1 in about 150 solves of a 12-GPU model, seen here: "waiting to start 10").
            threads=self.workers if self.workers > 1 else None,
            gapRel=self.gap,
            # The objective is integral: a gap under one unit is a proof. Without it CBC was
            # seen to spend the whole limit on a 12-GPU model 5 units from its bound, with the
            # optimum in hand (2 solves in 150).
            gapAbs=(1 - 1e-6) / unit,
            warmStart=start is not None,
            options=[f"randomSeed {seed + 1}", f"randomCbcSeed {seed + 1}"],
        )
        # CBC's files go to a folder of our own, removed even when CBC fails (PuLP leaves them).
        with tempfile.TemporaryDirectory(prefix="palopt-cbc-") as tmp:
            solver.tmpDir = tmp
            try:
                prob.solve(solver)
            except pulp.PulpSolverError as exc:
                # Seen here: the bundled CBC binary segfaults on some models when its time limit
                # is about 0.1 s (2 to 4 runs in 6 on a sub-model of `64g-4ps-100%-synthetic`
                # seed 2; 1 to 2 milp:cbc solves in 10 of that round at 1 s end so).
                log.warning("milp (cbc): CBC failed, no solution from it: %s", exc)
                return BackendAnswer(Status.NO_SOLUTION, None, None)
        if prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
            values = np.array([v.value() or 0 for v in xs], dtype=np.float64)
            if prob.sol_status == pulp.LpSolutionOptimal:
                # Optimal within gapRel: CBC's own bound (not reported) is no lower than this
                # (within gapAbs, under one unit of an integral objective, the value itself).
                bound = float(sp.value(values)) * (1 - self.gap)
                return BackendAnswer(Status.OPTIMAL, values, bound)
            return BackendAnswer(Status.FEASIBLE, values, None)
        if prob.sol_status == pulp.LpSolutionInfeasible:
            return BackendAnswer(Status.INFEASIBLE, None, None)
        return BackendAnswer(Status.NO_SOLUTION, None, None)

    def _highs(
        self, sp: SparseModel, start: np.ndarray | None, deadline: float, seed: int
    ) -> BackendAnswer:
        import highspy

        n = sp.n_vars
        h = new_highs()
        h.setOptionValue("threads", self.workers)
        h.setOptionValue("random_seed", seed)
        h.setOptionValue("mip_rel_gap", self.gap)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n, len(sp.rows)
        lp.col_cost_ = np.asarray(sp.objective, dtype=np.float64)
        lp.col_lower_ = np.asarray(sp.lower, dtype=np.float64)
        lp.col_upper_ = np.asarray(sp.upper, dtype=np.float64)
        inf = highspy.kHighsInf
        lengths, idx, coef, lo, hi = sp.matrix()
        lp.row_lower_ = np.maximum(lo, -inf)
        lp.row_upper_ = np.minimum(hi, inf)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.r_[0, np.cumsum(lengths)].astype(np.int32)
        lp.a_matrix_.index_ = idx.astype(np.int32)
        lp.a_matrix_.value_ = coef.astype(np.float64)
        lp.integrality_ = [highspy.HighsVarType.kInteger] * n
        large = len(idx) > HIGHS_LARGE_NONZEROS
        if start is not None or large:
            h.setOptionValue("presolve", "off")
        if large:
            h.setOptionValue("mip_heuristic_run_feasibility_jump", False)
            h.setOptionValue("mip_detect_symmetry", False)
        h.passModel(lp)
        if start is not None:
            given = highspy.HighsSolution()
            given.col_value = np.asarray(start, dtype=np.float64)
            given.value_valid = True
            h.setSolution(given)
        h.setOptionValue("time_limit", seconds_left(deadline))
        h.run()
        code = h.getModelStatus()
        info = h.getInfo()
        has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
        values = np.asarray(h.getSolution().col_value, dtype=np.float64) if has_solution else None
        bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else None
        if code == highspy.HighsModelStatus.kOptimal and values is not None:
            return BackendAnswer(Status.OPTIMAL, values, bound)
        if code == highspy.HighsModelStatus.kInfeasible:
            return BackendAnswer(Status.INFEASIBLE, None, None)
        if values is not None:
            return BackendAnswer(Status.FEASIBLE, values, bound)
        return BackendAnswer(Status.NO_SOLUTION, None, bound)


register(
    "milp",
    MilpSolver,
    "Exact (MILP): pattern model via PuLP/CBC or HiGHS (backend=cbc|highs)",
    requires=("pulp",),
    options=MilpSolver.OPTIONS,
)
