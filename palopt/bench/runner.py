"""Run solvers over benchmark families and measure each one's gap to the optimum or a bound.

For every instance all solvers place the admitted queue prefix (the heuristics stop at the first
job that does not fit, which is the same set), so costs compare directly. The *reference* of an
instance is the proven optimum when an exact solver proved one, else the best lower bound known
(exact solvers' bounds, the cheap bound, and on rounds no exact solver ran on the Lagrangian
bound). A solver's
gap is ``(objective - reference) / reference``; it is NaN for a solver that placed another number
of jobs than the admitted prefix (its cost does not compare, and its bound and proof are not
taken for the reference).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from palopt.bench.families import Family, make_instance
from palopt.cost import assert_feasible
from palopt.result import Status
from palopt.solvers.base import get_solver, split_solver_name
from palopt.solvers.bounds import lower_bound
from palopt.solvers.exact.colgen import lagrangian_bound
from palopt.solvers.round import make_round

__all__ = ["Row", "SolverSpec", "run_instance", "run_bench", "EXACT", "HEURISTICS"]

log = logging.getLogger(__name__)

HEURISTICS = ("pal", "pmfirst", "packed-nonsticky", "random-nonsticky", "greedy")
EXACT = ("cpsat", "milp:cbc", "milp:highs")


@dataclass(frozen=True)
class SolverSpec:
    """A solver to benchmark: a label, its registry name and options, and whether it is exact.

    Parameters
    ----------
    label : str
        The name the rows give the solver.
    name : str
        Its registry name (see :func:`palopt.solvers.base.get_solver`).
    options : tuple of (str, str), default ()
        The options :func:`~palopt.solvers.base.get_solver` gets, as ``(key, value)`` pairs.

    Examples
    --------
    >>> SolverSpec.parse("milp:highs")
    SolverSpec(label='milp:highs', name='milp', options=(('backend', 'highs'),))
    """

    label: str
    name: str
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> SolverSpec:
        """``name`` or ``milp:BACKEND`` (the MILP back end).

        Parameters
        ----------
        text : str
            A registry name, optionally followed by ``:`` and a back end (see
            :func:`palopt.solvers.base.split_solver_name`); also the spec's label.

        Returns
        -------
        SolverSpec
            Checked by building the solver once with its options.

        Raises
        ------
        UnknownSolverError, InputError
            For a name not in the registry, or a back end the solver does not have.

        Examples
        --------
        >>> SolverSpec.parse("pal")
        SolverSpec(label='pal', name='pal', options=())
        >>> SolverSpec.parse("milp:foo")
        Traceback (most recent call last):
        ...
        palopt.errors.InputError: milp.backend = 'foo': must be one of cbc, highs
        """
        name, options = split_solver_name(text)
        spec = cls(text, name, tuple(options.items()))
        get_solver(spec.name, **dict(spec.options))
        return spec

    @property
    def exact(self) -> bool:
        """Whether the solver proves optimality or bounds.

        Examples
        --------
        >>> SolverSpec.parse("milp:highs").exact, SolverSpec.parse("pal").exact
        (True, False)
        """
        return self.name in ("cpsat", "milp")


@dataclass(frozen=True)
class Row:
    """One solver on one instance.

    Parameters
    ----------
    family : str
        The family's :attr:`~palopt.bench.families.Family.name`.
    n_gpus, gpus_per_server : int
    load : float
    profile : str
        The family's shape, load and profile.
    seed : int
        Which instance of the family.
    n_jobs : int
        The jobs of the admitted queue prefix.
    n_placed : int
        The jobs the solver placed.
    solver : str
        The solver's label.
    status : str
        The result's status (see :class:`palopt.result.Status`).
    objective : float
    bound : float or None
        The result's objective and proven lower bound.
    wall_time : float
        Seconds spent in the solver.
    reference : float, default NaN
        The instance's optimum or best lower bound.
    reference_kind : str, default ""
        ``"optimum"`` or ``"bound"``.
    gap : float, default NaN
        ``(objective - reference) / reference``.

    Examples
    --------
    >>> from palopt.bench.families import Family
    >>> row = run_instance(Family(8, 4, 0.5, "synthetic"), 0, [SolverSpec.parse("pal")],
    ...                    5.0, 64, 1.0)[0]
    >>> row.family, row.solver, row.n_placed == row.n_jobs
    ('8g-4ps-50%-synthetic', 'pal', True)
    """

    family: str
    n_gpus: int
    gpus_per_server: int
    load: float
    profile: str
    seed: int
    n_jobs: int
    n_placed: int
    solver: str
    status: str
    objective: float
    bound: float | None
    wall_time: float
    reference: float = float("nan")
    reference_kind: str = ""
    gap: float = float("nan")

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict (CSV).

        Returns
        -------
        dict
            Field name -> value, in the order of the fields.

        Examples
        --------
        >>> from palopt.bench.families import Family
        >>> row = run_instance(Family(8, 4, 0.5, "synthetic"), 0, [SolverSpec.parse("pal")],
        ...                    5.0, 64, 1.0)[0]
        >>> list(row.as_dict())[:3], row.as_dict()["solver"]
        (['family', 'n_gpus', 'gpus_per_server'], 'pal')
        """
        return asdict(self)


def run_instance(
    family: Family,
    seed: int,
    solvers: list[SolverSpec],
    time_limit: float,
    exact_max_gpus: int,
    bound_time: float,
) -> list[Row]:
    """Solve one instance with every solver (exact ones only up to ``exact_max_gpus``); no rows
    if no solver runs at its size.

    Parameters
    ----------
    family : Family
    seed : int
        Which instance of the family (:func:`palopt.bench.families.make_instance`); also passed
        to every solver.
    solvers : list of SolverSpec
        The solvers to run, in this order.
    time_limit : float
        Seconds for each exact solver; heuristics run without a limit.
    exact_max_gpus : int
        Exact solvers are left out on clusters of more GPUs.
    bound_time : float
        Seconds for the Lagrangian bound, computed when no exact solver ran on the round (none
        is in ``solvers``, or the cluster has more than ``exact_max_gpus`` GPUs) and the round
        has a job of two or more GPUs.

    Returns
    -------
    list of Row
        One row per solver that ran, in the order of ``solvers``. All rows share the reference:
        the least proven optimum, else the largest lower bound known (of the solvers that placed
        the admitted prefix, and the cheap and Lagrangian bounds of that prefix). ``gap`` is
        ``(objective - reference) / reference`` (0.0 if the reference is not positive), or NaN
        for a solver that placed another number of jobs than the admitted prefix.

    Raises
    ------
    InputError
        If ``seed`` is not a non-negative integer, or ``time_limit`` is not a positive, finite
        number and an exact solver runs.

    Examples
    --------
    An 8-GPU instance; CP-SAT is left out above 4 GPUs:

    >>> from palopt.bench.families import Family
    >>> specs = [SolverSpec.parse("pal"), SolverSpec.parse("cpsat")]
    >>> rows = run_instance(Family(8, 4, 0.5, "synthetic"), 0, specs, 5.0, 4, 1.0)
    >>> [(r.solver, r.n_jobs, r.n_placed, r.reference_kind) for r in rows]
    [('pal', 4, 4, 'bound')]
    """
    inst = make_instance(family, seed)
    rnd = make_round(inst)
    rows: list[Row] = []
    bounds = [lower_bound(rnd)]
    optimum = None
    exact_ran = False
    for spec in solvers:
        if spec.exact and family.n_gpus > exact_max_gpus:
            continue
        exact_ran |= spec.exact
        solver = get_solver(spec.name, **dict(spec.options))
        result = solver.solve(inst, time_limit=time_limit if spec.exact else None, seed=seed)
        assert_feasible(inst, result)
        if result.n_placed != len(rnd.positions):
            # Its objective, bound and proof are of another set of jobs: no reference.
            log.warning(
                "%s placed %d jobs, not the admitted %d; its gap is not comparable",
                spec.label,
                result.n_placed,
                len(rnd.positions),
            )
        else:
            if result.bound is not None:
                bounds.append(result.bound)
            if result.status == Status.OPTIMAL:
                optimum = result.objective if optimum is None else min(optimum, result.objective)
        rows.append(
            Row(
                family.name,
                family.n_gpus,
                family.gpus_per_server,
                family.load,
                family.profile,
                seed,
                len(rnd.positions),
                result.n_placed,
                spec.label,
                result.status,
                result.objective,
                result.bound,
                result.wall_time,
            )
        )
    if not rows:
        return []
    best = min((r.objective for r in rows if r.n_placed == r.n_jobs), default=None)
    if optimum is None and not exact_ran and best is not None and rnd.multi:
        bounds.append(lagrangian_bound(rnd, best, time_limit=bound_time)[0])
    if optimum is not None:
        reference, kind = optimum, "optimum"
    else:
        reference, kind = max(bounds), "bound"
    out = []
    for r in rows:
        if r.n_placed != r.n_jobs:
            gap = float("nan")
        else:
            gap = (r.objective - reference) / reference if reference > 0 else 0.0
        out.append(
            Row(**{**r.as_dict(), "reference": reference, "reference_kind": kind, "gap": gap})
        )
    return out


def run_bench(
    families: Iterable[Family],
    seeds: int,
    solvers: list[SolverSpec],
    time_limit: float,
    exact_max_gpus: int,
    bound_time: float,
    progress: Callable[[str], None] | None = None,
    sink: Callable[[list[Row]], None] | None = None,
) -> list[Row]:
    """Every family x seed; ``progress`` gets one line per instance, ``sink`` its rows.

    Parameters
    ----------
    families : iterable of Family
    seeds : int
        Instances per family: seeds ``0 .. seeds - 1``.
    solvers : list of SolverSpec
    time_limit, exact_max_gpus, bound_time
        As for :func:`run_instance`.
    progress : callable, optional
        Called with one line of text after each instance: its number, the seconds since the
        start, the family and seed, and the reference and the best solver's gap (or why no gap
        compares).
    sink : callable, optional
        Called with each instance's rows as soon as they are known (an empty list if no solver
        ran at its size).

    Returns
    -------
    list of Row
        The rows of :func:`run_instance` for every family and seed, family by family, seed by
        seed.

    Examples
    --------
    >>> from palopt.bench.families import Family
    >>> rows = run_bench([Family(8, 4, 0.5, "synthetic")], 2, [SolverSpec.parse("pal")],
    ...                  5.0, 64, 1.0, progress=lambda line: print(line.split("] ")[1]))
    8g-4ps-50%-synthetic seed 0: bound 3.892, best pal gap 0.00%
    8g-4ps-50%-synthetic seed 1: bound 3.905, best pal gap 0.00%
    >>> [(r.seed, r.solver) for r in rows]
    [(0, 'pal'), (1, 'pal')]
    """
    rows: list[Row] = []
    todo = [(f, s) for f in families for s in range(seeds)]
    started = time.perf_counter()
    for i, (family, seed) in enumerate(todo, 1):
        got = run_instance(family, seed, solvers, time_limit, exact_max_gpus, bound_time)
        rows.extend(got)
        if sink is not None:
            sink(got)
        if progress is not None:
            head = (
                f"[{i}/{len(todo)} {time.perf_counter() - started:6.1f}s] {family.name} seed {seed}"
            )
            compared = [r for r in got if r.n_placed == r.n_jobs]
            if compared:
                best = min(compared, key=lambda r: r.gap)
                progress(
                    f"{head}: {best.reference_kind} {best.reference:.3f}, best {best.solver} "
                    f"gap {100 * best.gap:.2f}%"
                )
            elif got:
                progress(f"{head}: no solver placed the admitted jobs")
            else:
                progress(f"{head}: no solver runs at {family.n_gpus} GPUs")
    return rows
