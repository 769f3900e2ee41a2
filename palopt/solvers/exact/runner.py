"""The solve flow shared by the exact back ends.

1. Select the round's jobs (:func:`palopt.solvers.round.make_round`, ``mode`` prefix or choose).
2. Place them with the cost-aware greedy (local search included): the first upper bound, warm
   start and fallback. By the wall clock no local-search move or step below starts after the
   limit, and the greedy's later passes, the steps given a share of the limit and the placement
   by prices stop at it, but the greedy's first pass (it places every job) and a step under way
   run to their ends: at 4,096 GPUs and full load a solve given 0.1 s took 0.13-0.21 s and
   returned the greedy's placement (``no solution``), at 16,384 GPUs 0.5-0.6 s.
3. ``formulation="columns"`` (default, needs ``highspy``): column generation gives the
   configuration-LP bound and a pool of good GPU sets (up to half the limit). If it stops short
   of the LP value (large rounds at full load), the subgradient Lagrangian bound of
   :func:`~palopt.solvers.exact.colgen.lagrangian_bound` runs until a quarter of the limit is
   left (see :data:`LAGRANGIAN_GAP`); column generation gives up early when its bound shows it
   far from converging (:data:`GIVE_UP`, rounds of thousands of GPUs at full load). A placement
   is read off the LP (rounding) and, after a subgradient run, another is placed by its prices
   (:func:`~palopt.solvers.exact.colgen.price_placement`); the best so far is improved by
   large-neighbourhood search
   (:mod:`palopt.solvers.exact.search`, 10% of the limit), then by solving regions of the
   cluster exactly with the back end
   (:mod:`palopt.solvers.exact.refine`: until regions would cover the whole round, or for the
   rest of the time). Every step's placement is polished by local search
   (:func:`palopt.solvers.local.polish`, milliseconds at 256 GPUs) and kept if cheaper. Each
   step stops early once the cost meets the bound, which proves it optimal.
4. Otherwise, after a converged column generation with a tenth of the limit left (and always with
   ``formulation="compact"``), the back end solves the exact pattern model of
   :mod:`palopt.solvers.exact.model` for the whole round, shrunk by the upper bound and by
   reduced-cost fixing, started from the best placement so far, in the time that remains (by
   the wall clock, building the model stops at the limit, as that of a full-load 1,024-GPU
   round takes seconds, and the back end is not called when building left it less time than
   it needs to take the model: :data:`BACKEND_SECONDS_PER_NONZERO`).
5. The back end's answer is checked (every row satisfied, the placement feasible). The status is
   ``optimal`` only when proven (the back end proved the exact model, or the placement's cost
   meets a lower bound: the configuration LP's, the back end's or the cheap one; then
   ``settings["proof"]`` names it), within the relative tolerance ``gap`` (default ``1e-6``)
   and the scaling resolution (``2 / scale`` relative, on costs brought to 1/2 or more by
   :func:`normalised`), and a back end's proof outside them is not taken; ``feasible`` carries
   the best valid bound found (the back end's, the column generation's, the subgradient's or
   the cheap bound of :mod:`palopt.solvers.bounds`); ``no solution`` returns the greedy
   placement when nothing beat it (no model answer, or no step after an unconverged column
   generation), as ``settings["fallback"]`` says. A round always has placements (every
   selected set of jobs fits), so a back end's ``infeasible`` means that the model, held under
   the best cost so far, has nothing cheaper: the best placement so far is returned,
   ``feasible`` (``no solution`` if it is the greedy's).
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from palopt.cost import check_feasible
from palopt.errors import InputError, check_count, check_flag, check_number, check_time_limit
from palopt.instance import Instance
from palopt.result import PlacementResult, Status
from palopt.solvers.base import build_result, check_arguments
from palopt.solvers.bounds import lower_bound
from palopt.solvers.exact.model import OutOfTime, SparseModel, build_model
from palopt.solvers.exact.refine import reoptimise_regions
from palopt.solvers.exact.search import improve
from palopt.solvers.greedy import greedy_assignment
from palopt.solvers.local import polish
from palopt.solvers.round import MODES, Round, make_round, round_cost, unselected_reasons

__all__ = [
    "ExactSolver",
    "BackendAnswer",
    "DEFAULT_TIME_LIMIT",
    "DEFAULT_SCALE",
    "DEFAULT_GAP",
    "FORMULATIONS",
    "seconds_left",
]

log = logging.getLogger(__name__)

#: A step of the flow's improvement phase: (best placement so far, seconds given) -> (its
#: placement, or ``None`` if it ran out of time, and the work it did, for deterministic mode).
Step = Callable[[dict[int, np.ndarray], float], tuple[dict[int, np.ndarray] | None, int]]

DEFAULT_TIME_LIMIT = 10.0
DEFAULT_SCALE = 1e6
FORMULATIONS = ("columns", "compact")
DEFAULT_GAP = 1e-6

#: Largest scaled cost of a round's placements (:func:`normalised`): integers up to 2^53 are
#: exact in the doubles HiGHS and CBC compute with, and CP-SAT's sums stay far from overflowing
#: 64 bits.
MAX_SCALED = 2.0**52
#: The coarsest cost scale: ``optimal`` means within ``gap + 2 / scale`` of the optimum.
MIN_SCALE = 1e3
#: :func:`normalised` brings the costs of a round whose cheapest job costs this much or more
#: down to about 1 (the exact flow's tolerances are absolute); below it they are kept as they
#: are (a weight factor of 1 for the usual rounds).
LARGE_COST = 2.0**10


def normalised(rnd: Round, scale: float, upper_bound: float) -> tuple[Round, float]:
    """``rnd`` on its instance with every job's weight times a power of two ``f``, and ``f``.

    ``f`` is 1 if the cheapest cost an open job can have (on the round's free GPUs) is at least
    1/2 and under :data:`LARGE_COST`, and ``upper_bound`` (the cost of a placement of the open
    jobs, which bounds every cost the models keep) times the number of open jobs fits
    :data:`MAX_SCALED` units of ``1 / scale``; otherwise the power of two that brings the
    cheapest cost to 1/2 or more, and under 1 when it was :data:`LARGE_COST` or more, if that
    keeps the sum within :data:`MAX_SCALED` units. A power of two changes no cost's digits, only
    its exponent, so every placement keeps its rank and each cost divides back exactly. The exact
    flow then works on costs of about 1 whatever the weights: its tolerances (the LP's, the
    pricing's, the rounding of costs to ``1 / scale``) are absolute, and with weights of ``1e-9``
    column generation stopped at once and "proved" the greedy placement optimal, 1-3% above the
    optimum; with weights of ``1e-4`` the rounding alone left proofs 0.06% off. With every
    weight ``1e9`` the costs used to be left at about ``1e9 / jobs`` (only as far down as the
    integer range needs): a reduced cost's float error there exceeds the pricing tolerance
    (``1e-7``), column generation priced the master's own columns again and again without
    converging, and rounds of 8 GPUs that weights of 1 prove at once ended ``feasible``, up to
    10% from their bound. A slowdown of a busy GPU, or of one kept by a running job, is no
    cost an open job can have: counted, it refused rounds whose costs lie close together.

    Parameters
    ----------
    rnd : Round
        A round with open jobs.
    scale : float
        The model's cost scale.
    upper_bound : float
        The weighted cost of a placement of ``rnd``'s open jobs.

    Returns
    -------
    (Round, float)

    Raises
    ------
    InputError
        If no power of two makes both true: the costs span too wide a range for the integer
        model.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 1, 4), ("A",), np.ones((1, 4)),
    ...                 np.array([[1.0, 1.7, 1.7]]), (Job("a", 2, "A", weight=1e-4),))
    >>> weighted, f = normalised(make_round(inst), 1e6, 1e-4)
    >>> f, weighted.instance.queue[0].weight
    (8192.0, 0.8192)
    """
    inst = rnd.instance
    open_ = np.array(rnd.open_positions, dtype=np.int64)
    cls = inst.job_class_indices()[open_]
    # Exponents (base 2), free of overflow, of the cheapest cost each open job can have: on the
    # GPUs the open jobs may use (a busy or kept GPU's slowdown is none of their costs).
    # A job of k GPUs pays at least the k-th smallest free slowdown of its class (the max over
    # its k GPUs), not the smallest: a 1e-12 GPU it must share does not make its cost 1e-12.
    free_sd = np.sort(inst.slowdown[:, rnd.free], axis=1)
    sizes = np.array([inst.queue[p].num_gpus for p in open_], dtype=np.int64)
    kth = np.clip(sizes, 1, max(free_sd.shape[1], 1)) - 1
    low = (
        np.log2([inst.queue[p].weight for p in open_])
        + np.log2(free_sd[cls, kth])
        + np.log2(inst.penalty[cls, 0])
    )
    need = int(np.ceil(-1 - low.min()))  # the cheapest job at 1/2 or more (under 1 at need)
    room = int(np.floor(np.log2(MAX_SCALED / scale / len(open_)) - np.log2(upper_bound)))
    large = low.min() >= np.log2(LARGE_COST)  # costs far above 1: down to about 1
    k = min(need if large else max(need, 0), room)
    if k < need:
        raise InputError(
            "costs",
            f"{2 ** low.min():.3g} per job to {upper_bound:.3g} per round",
            f"span too wide a range for the exact solvers' integer model at scale {scale:g}: "
            "bring the weights, slowdowns or penalties closer together"
            + (f", or lower the scale (to {MIN_SCALE:g} at least)" if scale > MIN_SCALE else ""),
        )
    if k == 0:
        return rnd, 1.0
    f = 2.0**k
    queue = tuple(replace(j, weight=j.weight * f) for j in inst.queue)
    return replace(rnd, instance=replace(inst, queue=queue)), f


@dataclass(frozen=True)
class BackendAnswer:
    """What a back end returns: a status of :class:`~palopt.result.Status`, the solution vector
    (``None`` if none), a lower bound on the scaled objective (``None`` if unknown), and the
    deterministic time the back end used (CP-SAT's; 0 for back ends that do not count it)."""

    status: str
    solution: np.ndarray | None
    bound: float | None
    work: float = 0.0


#: Work per second of the limit in deterministic mode: column-generation, search and region
#: work in microseconds of the 2-core benchmark machine, as counted by
#: :data:`~palopt.solvers.exact.colgen.ITERATION_WORK` (pivots, nonzeros and GPUs),
#: :data:`~palopt.solvers.exact.search.STEP_WORK` (GPUs and jobs re-placed) and
#: :data:`~palopt.solvers.exact.refine.SUBMODEL_WORK` (CP-SAT's deterministic time). The
#: subgradient steps of the Lagrangian bound run on large rounds only (below): 135 per second at
#: 4,096 GPUs (283 at 1,024). Counting iterations, steps and sub-models at fixed rates (scaled
#: by the round's GPUs) instead, a deterministic 10 s solve took 7.9-25.5 s on the 12 full-load
#: 1,024-GPU rounds: the master's re-solves grow with its rows and with their pivots, a region
#: sub-model takes from 1 ms to 1.4 s, and a search step from 0.2 to 27 ms.
WORK_RATES = {"cg": 1e6, "search": 1e6, "regions": 1e6, "lagrangian": 135.0}

#: When column generation stops with its bound more than ``LAGRANGIAN_GAP`` (relative) under its
#: LP value, the subgradient bound of :func:`~palopt.solvers.exact.colgen.lagrangian_bound` runs
#: until ``LAGRANGIAN_REST`` of the limit is left (a quarter of the limit after column
#: generation's full half). Measured after 5 s of column generation on full-load synthetic
#: rounds: at 256 GPUs the bound is within 0.02% of the LP value whether converged or not, and 2 s
#: of subgradient do not raise it; at 512 GPUs it lies 2.6-5.4% under the LP value and 2 s of
#: subgradient raise it 1.6-4.1%; at 1,024 GPUs 13% under, +11%; at 4,096 GPUs (29 iterations)
#: it is negative. The threshold was 1%: on the 12 full-load 512-GPU rounds (cpsat, 10 s) that
#: left out three rounds with the bound 0.2-0.3% under the LP value, where the subgradient now
#: raises it by 0.06-0.21%; at 256 GPUs 0.1% still fires on none of the 12 full-load rounds.
LAGRANGIAN_GAP = 0.001
LAGRANGIAN_REST = 0.25

#: Column generation gives up once ``GIVE_UP[0]`` of its share is used if its bound is then more
#: than ``GIVE_UP[1]`` (relative) under its LP value, that is, still below zero: the subgradient
#: then has the rest of that share too. Measured after 2 s (40% of the share of a 10 s limit) on
#: full-load rounds, the bound lies 0-0.17% under the LP value at 256 GPUs (12 rounds), 0.1-9.5%
#: at 512 GPUs (12), 4.5-68% at 1,024 GPUs (12) and 227-2,041% at 4,096 GPUs (4); at half load
#: 0.09-9.6% at 4,096 GPUs. The subgradient bound needs its time at 4,096 GPUs only (full-load
#: synthetic seed 0: 686.13 after 2.5 s, 687.28 after 5 s; at 1,024 GPUs it is within 0.01% of
#: its 5 s value after 2.5 s); a lower threshold, 5%, also fired at 512 GPUs, where it raised no
#: bound and gave placements up to 0.21% dearer.
GIVE_UP = (0.4, 1.0)

#: By the wall clock the back end is not given the whole-round model when the time left is less
#: than this many seconds per nonzero of it: what handing the model over and getting an answer
#: back take even under the shortest limit. On the compact models of full-load 256-GPU rounds
#: (130,000-910,000 nonzeros) CP-SAT and HiGHS given 0.05 s took 0.06-0.51 s, 0.04-0.28 s of it
#: before the back end's solve started (0.22-0.55 microseconds per nonzero); on 64-GPU models
#: of 4,000-23,000 nonzeros, 0.05-0.10 s in all.
BACKEND_SECONDS_PER_NONZERO = 5e-7

#: By the wall clock the back end's limit ends this many seconds per nonzero of the whole-round
#: model before the solve's: the back end returns after its limit, and its answer is checked
#: against the rows. On the compact models of six full-load 256-GPU rounds (about a million
#: nonzeros, 2 s limit) HiGHS returned 0.05-0.07 s late and CP-SAT up to 0.12 s; with the
#: check and the result the solves took 1.97-2.13 s, and take 1.78-2.03 s with this margin.
RETURN_SECONDS_PER_NONZERO = 1e-7

#: The back ends take 31-bit seeds (CBC is given ``seed + 1``): a solve's seed is used modulo this.
BACKEND_SEEDS = 2**31 - 1


def seconds_left(deadline: float) -> float:
    """Seconds until ``deadline`` (a :func:`time.perf_counter` value), at least 10 ms: what a
    back end may give its solver after building the model.

    Parameters
    ----------
    deadline : float
        A :func:`time.perf_counter` value.

    Returns
    -------
    float
        Seconds from now to ``deadline``, or 0.01 if that is less (the deadline passed).

    Examples
    --------
    >>> import time
    >>> seconds_left(time.perf_counter() - 1.0)
    0.01
    >>> 4.0 < seconds_left(time.perf_counter() + 5.0) <= 5.0
    True
    """
    return max(deadline - time.perf_counter(), 0.01)


class Budget:
    """The solve's time limit, handed out in shares to the steps of the flow.

    By the wall clock, a share is at most the seconds left. In deterministic mode a share is
    charged when handed out and each step turns it into a count of its own work
    (:data:`WORK_RATES`), so no decision depends on the machine's speed; a step that ends before
    its count gives back the part of its share it did not use (:meth:`settle`), for the steps
    after it, as the wall clock would.

    Parameters
    ----------
    limit : float
        Seconds.
    deterministic : bool
    """

    def __init__(self, limit: float, deterministic: bool) -> None:
        self.limit = limit
        self.deterministic = deterministic
        self.started = time.perf_counter()
        self.spent = 0.0

    def left(self) -> float:
        """Seconds of the limit not yet used (or, deterministic, not yet handed out)."""
        used = self.spent if self.deterministic else time.perf_counter() - self.started
        return max(self.limit - used, 0.0)

    def take(self, seconds: float) -> float:
        """A share of at most ``seconds`` (none if ``seconds`` is negative)."""
        share = max(min(seconds, self.left()), 0.0)
        if self.deterministic:
            self.spent += share
        return share

    def deadline(self) -> float:
        """The :func:`time.perf_counter` reading at which the limit ends (inf when
        deterministic: no step is cut short by the wall clock)."""
        return np.inf if self.deterministic else self.started + self.limit

    def wall(self, share: float) -> float:
        """The wall-clock limit of a step given ``share`` (none when deterministic)."""
        return np.inf if self.deterministic else share

    def count(self, share: float, kind: str) -> int | None:
        """The step's work limit for ``share`` (``None``, no limit, by the wall clock)."""
        return max(1, int(WORK_RATES[kind] * share)) if self.deterministic else None

    def settle(self, share: float, kind: str, work: int) -> None:
        """Deterministic: give back what of ``share`` a step of ``kind`` that did ``work`` left."""
        if self.deterministic and share > 0:
            self.spent -= max(share - work / WORK_RATES[kind], 0.0)


class ExactSolver:
    """Base of the exact solvers; a back end implements :meth:`run`.

    Parameters
    ----------
    mode : {"prefix", "choose"}, default "prefix"
        Which jobs run (see :mod:`palopt.solvers.round`).
    keep_running : bool, default False
        Keep selected running jobs on their current GPUs (otherwise they may move).
    time_limit : float, default 10
        Seconds for the whole solve, unless ``solve`` is given one.
    workers : int, default 1
        Threads for the back end. With ``deterministic=True`` a result repeats for a given seed
        and worker count. By the wall clock each step of the flow has a share of the limit, so
        a result repeats only when no step reached its share (a round proved optimal early),
        even if the whole solve ends before the limit.
    scale : float, default 1e6
        Cost scaling to integers (costs are rounded down after scaling), for costs of about 1:
        extreme weights are brought there first by a power of two (:func:`normalised`;
        ``settings["weight_factor"]``), so every job costs 1/2 or more and the rounding moves
        a round's cost by less than ``2 / scale`` (relative). At least :data:`MIN_SCALE`.
    warm_start : bool, default True
        Give the best placement so far to the back end as a start.
    formulation : {"columns", "compact"}, default "columns"
        Column generation first (needs ``highspy``; falls back to compact without it), or the
        compact pattern model alone.
    gap : float, default 1e-6
        Relative optimality tolerance: a placement is reported ``optimal`` when its cost is
        proven within ``gap`` of the optimum (``gap + 2 / scale`` for the proof of the compact
        model, whose costs are rounded; costs are floats measured to a few digits, and this
        keeps back ends from spending their time separating near-equal placements).
    deterministic : bool, default False
        Spend the time limit as a *work* budget, counted in simplex pivots, search steps and
        CP-SAT's deterministic time instead of seconds (see :class:`Budget`), and give the back
        end a deterministic time limit (CP-SAT only): the result is then the same for a given
        seed and worker count however busy the machine, and the solve may take more or less
        than the limit.
    """

    name = "exact"
    #: The options the registry accepts (the constructor's keyword arguments).
    OPTIONS: tuple[str, ...] = (
        "mode",
        "keep_running",
        "time_limit",
        "workers",
        "scale",
        "warm_start",
        "formulation",
        "gap",
        "deterministic",
    )

    def __init__(
        self,
        mode: str = "prefix",
        keep_running: bool = False,
        time_limit: float = DEFAULT_TIME_LIMIT,
        workers: int = 1,
        scale: float = DEFAULT_SCALE,
        warm_start: bool = True,
        formulation: str = "columns",
        gap: float = DEFAULT_GAP,
        deterministic: bool = False,
    ) -> None:
        if mode not in MODES:
            raise InputError(f"{self.name}.mode", mode, f"must be one of {', '.join(MODES)}")
        check_time_limit(time_limit, f"{self.name}.time_limit")
        if formulation not in FORMULATIONS:
            raise InputError(
                f"{self.name}.formulation", formulation, f"must be one of {', '.join(FORMULATIONS)}"
            )
        self.mode = mode
        self.keep_running = check_flag(keep_running, f"{self.name}.keep_running")
        self.time_limit = float(time_limit)
        self.workers = check_count(workers, f"{self.name}.workers")
        self.scale = check_number(scale, f"{self.name}.scale", low=MIN_SCALE, inclusive=True)
        self.warm_start = check_flag(warm_start, f"{self.name}.warm_start")
        self.formulation = formulation
        self.gap = check_number(gap, f"{self.name}.gap", inclusive=True)
        if self.gap >= 1:
            raise InputError(f"{self.name}.gap", gap, "must be a number in [0, 1)")
        self.deterministic = check_flag(deterministic, f"{self.name}.deterministic")

    def settings(self) -> dict[str, Any]:
        """The solver's configuration, as reported in results."""
        return {
            "mode": self.mode,
            "keep_running": self.keep_running,
            "workers": self.workers,
            "scale": self.scale,
            "warm_start": self.warm_start,
            "formulation": self.formulation,
            "gap": self.gap,
            "deterministic": self.deterministic,
        }

    def run(
        self, sp: SparseModel, start: np.ndarray | None, time_limit: float, seed: int
    ) -> BackendAnswer:
        """Solve ``sp`` (implemented by each back end)."""
        raise NotImplementedError

    def _run_cold(
        self, sp: SparseModel, start: np.ndarray | None, time_limit: float, seed: int
    ) -> BackendAnswer:
        """:meth:`run` without a start (``warm_start=False``)."""
        return self.run(sp, None, time_limit, seed)

    def _checked(
        self, rnd: Round, sp: SparseModel, answer: BackendAnswer, decode: Any
    ) -> dict[int, np.ndarray] | None:
        """The decoded placement of a back end's solution, or ``None`` if it is not valid."""
        if answer.solution is None:
            return None
        inst = rnd.instance
        if sp.satisfied(answer.solution):
            chosen = decode(answer.solution)
            full = {inst.queue[p].id: g for p, g in {**rnd.fixed, **chosen}.items()}
            if set(chosen) == set(rnd.open_positions) and not check_feasible(inst, full):
                return chosen
        log.error("%s: the back end's solution violates the model; ignored", self.name)
        return None

    def solve(
        self, instance: Instance, *, time_limit: float | None = None, seed: int | None = None
    ) -> PlacementResult:
        """Place the round's jobs at minimum weighted cost (see the module documentation)."""
        started = time.perf_counter()
        limit = self.time_limit if time_limit is None else time_limit
        seed = check_arguments(instance, limit, seed) or 0
        settings = {**self.settings(), "time_limit": float(limit), "seed": seed}
        seed %= BACKEND_SEEDS
        rnd = make_round(instance, self.mode, self.keep_running)
        reasons = unselected_reasons(rnd, self.mode)

        budget = Budget(float(limit), self.deterministic)

        factor = 1.0  # the weights' factor (normalised): bounds are found in its units

        def finish(chosen: dict[int, np.ndarray], status: str, bound: float) -> PlacementResult:
            result = build_result(
                instance,
                self.name,
                {**rnd.fixed, **chosen},
                reasons,
                started,
                status=status,
                settings=settings,
            )
            fixed_cost = round_cost(instance, rnd.fixed)
            result = replace(result, bound=min(bound / factor + fixed_cost, result.objective))
            # Every proof holds within the gap and the rounding (each job's cost is 1/2 or more
            # after normalised, and rounded down by less than 1/scale): a back end's claim that
            # does not is not taken.
            if status == Status.OPTIMAL and (result.gap or 0.0) > self.gap + 2 / self.scale:
                log.warning("%s: a proof %.3g from its bound is not taken", self.name, result.gap)
                result = replace(result, status=Status.FEASIBLE)
            return result

        def without_model(
            chosen: dict[int, np.ndarray], source: str, bound: float, why: str
        ) -> PlacementResult:
            """The best placement so far when the exact model gave none: ``feasible``, or ``no
            solution`` if it is the greedy's (``settings["fallback"]`` says why)."""
            if source != "greedy":
                return finish(chosen, Status.FEASIBLE, bound)
            settings["fallback"] = f"greedy placement returned: {why}"
            return finish(chosen, Status.NO_SOLUTION, bound)

        if not rnd.open_positions:
            return finish({}, Status.OPTIMAL, 0.0)
        best = greedy_assignment(rnd, budget.deadline())
        greedy_cost = round_cost(instance, best)
        rnd, factor = normalised(rnd, self.scale, greedy_cost)
        settings.update(greedy_cost=greedy_cost, weight_factor=factor)
        weighted = rnd.instance
        ub = greedy_cost * factor  # exact: a power of two scales every cost and sum exactly
        bound = lower_bound(rnd)
        source = "greedy"
        cg = None
        prices: np.ndarray | None = None
        columns = self.formulation == "columns" and importlib.util.find_spec("highspy") is not None
        if columns and budget.left():
            from palopt.solvers.exact.colgen import (
                column_generation,
                lagrangian_bound,
                price_placement,
                round_columns,
            )

            share = budget.take(0.5 * limit)
            cg = column_generation(
                rnd,
                best,
                budget.wall(share),
                max_work=budget.count(share, "cg"),
                give_up=GIVE_UP,
            )
            budget.settle(share, "cg", cg.work)
            bound = max(bound, cg.bound)
            settings.update(
                cg_iterations=cg.iterations,
                cg_converged=cg.converged,
                cg_columns=sum(len(c) for c in cg.columns.values()),
                cg_cuts=len(cg.cuts),
            )
            if cg.bound < cg.lp_value - LAGRANGIAN_GAP * abs(cg.lp_value):
                share = budget.take(budget.left() - LAGRANGIAN_REST * limit)
                lagrangian, work, prices = lagrangian_bound(
                    rnd, ub, budget.wall(share), iterations=budget.count(share, "lagrangian")
                )
                budget.settle(share, "lagrangian", work)
                bound = max(bound, lagrangian)
                settings["lagrangian_steps"] = work
            if rnd.multi:
                target = bound + self.gap * abs(bound)
                steps: list[tuple[str, Step, float]] = [
                    ("rounding", lambda b, t: (round_columns(rnd, cg), 0), 0.0)
                ]
                if prices is not None:
                    guide = prices
                    steps.append(
                        (
                            "prices",
                            lambda b, t: (price_placement(rnd, guide, budget.deadline()), 0),
                            0.0,
                        )
                    )
                steps += [
                    (
                        "search",
                        lambda b, t: improve(
                            rnd,
                            b,
                            budget.wall(t),
                            seed,
                            target,
                            max_work=budget.count(t, "search"),
                        ),
                        0.1 * limit,
                    ),
                    (
                        "regions",
                        lambda b, t: reoptimise_regions(
                            rnd,
                            b,
                            self.run if self.warm_start else self._run_cold,
                            self.scale,
                            budget.wall(t),
                            seed,
                            target,
                            max_work=budget.count(t, "regions"),
                        ),
                        # The rest of the time: the regions stop by themselves once one would
                        # be the whole round (quickly at 64 GPUs), leaving the compact model
                        # its time; at 256 GPUs and full load it never gave the best placement
                        # in the second or so half the limit used to leave it (0 of 24 solves).
                        limit,
                    ),
                ]
                for label, step, share in steps:
                    if ub <= target or not budget.left():
                        break
                    share = budget.take(share)
                    placed, work = step(best, share)
                    budget.settle(share, label, work)
                    if placed is None:  # the limit passed while the prices placed the round
                        break
                    chosen = polish(rnd, placed, deadline=budget.deadline())
                    cost = round_cost(weighted, chosen)
                    if cost < ub:
                        best, ub = chosen, cost
                        source = f"{label}+{source}"
        settings["best_from"] = source
        if ub - bound <= self.gap * abs(ub):
            settings["proof"] = "lower bound" if cg is None else "configuration-LP bound"
            return finish(best, Status.OPTIMAL, bound)
        if cg is not None and (not cg.converged or budget.left() < 0.1 * limit):
            # Without a converged bound the compact model is too large to help in time.
            why = "column generation did not converge" if not cg.converged else "no time left"
            return without_model(best, source, bound, f"{why} for the exact model")
        fixing = cg if cg is not None and cg.converged else None
        try:  # by the wall clock: a large round's model can take longer to build than the limit
            model = build_model(rnd, self.scale, ub, fixing, budget.deadline())
        except OutOfTime:
            why = "the time limit passed before the exact model was built"
            log.info("%s: %s", self.name, why)
            return without_model(best, source, bound, why)
        start = model.start(best, rnd) if self.warm_start else None
        settings.update(
            n_vars=model.sparse.n_vars,
            n_rows=len(model.sparse.rows),
            n_patterns=model.n_patterns,
            n_gpu_types=len(model.type_gpus),
        )
        given = max(budget.take(budget.left()), 0.05)
        nonzeros = model.sparse.n_nonzeros
        if not self.deterministic:
            given -= RETURN_SECONDS_PER_NONZERO * nonzeros
        why = "the back end found no solution"
        if self.deterministic or given >= BACKEND_SECONDS_PER_NONZERO * nonzeros:
            answer = self.run(model.sparse, start, given, seed)
        else:
            why = (
                f"no time left for the back end ({max(given, 0.0):.2f} s) after building the model"
            )
            log.info("%s: %s", self.name, why)
            answer = BackendAnswer(Status.NO_SOLUTION, None, None)
        decoded = self._checked(rnd, model.sparse, answer, model.decode)
        status = answer.status
        if status == Status.INFEASIBLE:
            # Every selected set of jobs fits: the model, held under the incumbent's cost, has
            # nothing cheaper (up to its rounding and fixing tolerances). Not taken as a proof.
            status, why = Status.NO_SOLUTION, "the back end found nothing cheaper than it"
        if decoded is None and status in (Status.OPTIMAL, Status.FEASIBLE):
            status = Status.NO_SOLUTION
        if decoded is not None and round_cost(weighted, decoded) <= ub:
            best, source = decoded, "model"
        if answer.bound is not None and decoded is not None:
            bound = max(bound, answer.bound / self.scale)
        settings["best_from"] = source
        cost = round_cost(weighted, best)
        if status != Status.OPTIMAL and cost - bound <= self.gap * abs(cost):
            # The bound proves the placement the back end could not better (CBC has called
            # models with weights 1e9 apart infeasible under the incumbent's cost).
            status = Status.OPTIMAL
            settings["proof"] = "lower bound"
        # A proof covers the incumbent too when it is cheaper than the model's optimum (the
        # model sees costs rounded down, to within (jobs / scale) of the true costs).
        if status == Status.NO_SOLUTION:
            return without_model(best, source, bound, why)
        return finish(best, status, bound)
