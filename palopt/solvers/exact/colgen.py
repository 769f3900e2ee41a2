"""Column generation: the configuration LP bound and a restricted master of good placements.

The *configuration LP* has one column per (multi-GPU job, GPU set) at its cost, the 1-GPU
commodities as a transportation part, one capacity row per free GPU, and packing cuts
(:class:`~palopt.solvers.exact.pricing.Cut`):

    min  sum cost[j, S] lam[j, S] + sum c[m, g] z[m, g]
    s.t. sum_S lam[j, S] = 1          (dual mu_j)
         sum_g z[m, g] = n_m          (dual nu_m)
         sum_{S ni g} lam + sum_m z[m, g] <= 1   (dual -p_g, p_g >= 0)
         sum_{S in cut} (k_j // d) lam[j, S] <= rhs   (dual -sigma, sigma >= 0)

Its relaxation does not let a job pay ``1/k`` of a slow GPU or spread for free, so its value is a
strong lower bound; the cuts also stop it packing one and a half jobs into a rack's fast GPUs.
Pricing is exact and cheap (:mod:`palopt.solvers.exact.pricing`): for a job, a group ``G`` of a
tier and a threshold ``v``, the best set takes the ``k`` GPUs of ``G`` no slower than ``v`` with
the smallest ``p``; its reduced cost is ``w * v * penalty + sum p + (cuts' sigma) - mu_j``.
For any duals with ``p, sigma >= 0``, every solution costs at least the dual objective
``D = sum mu + sum n_m nu_m - sum p - sigma . rhs`` plus the reduced costs of the parts it uses
(an identity, then the capacity and cut rows), which gives *reduced-cost fixing*: a part whose
reduced cost exceeds ``upper - D`` plus the most the other parts' reduced costs can take away
(nothing at exact convergence) cannot be in a better solution
(:meth:`ColumnGeneration.fixing_cutoff`). The LP's value is not used there: within the
solver's tolerances it can lie above the optimum, and fixing at it then fixed every part
out. Before convergence a
Lagrangian bound is still valid and is the one reported: for any prices ``p, sigma >= 0``,
``sum_j min_S (cost[j, S] + p(S) + sigma(S)) + sum_m (n_m smallest c[m, g] + p_g) - sum_g p_g
- sigma . rhs`` bounds the optimum from below; pricing at smoothed duals (a mix of the best
prices so far and the LP's) raises that bound sooner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from palopt.solvers.bounds import single_gpu_costs
from palopt.solvers.exact.pricing import Column, Cut, Pricer, price_all
from palopt.solvers.greedy import GreedyPlacer
from palopt.solvers.round import Round
from palopt.solvers.transport import new_highs, rounded_down

__all__ = [
    "ColumnGeneration",
    "Master",
    "column_generation",
    "round_columns",
    "lagrangian_bound",
    "price_placement",
]

#: The subgradient step of :func:`lagrangian_bound` halves after this many steps that do not
#: raise the bound. Measured on full-load 1,024- and 4,096-GPU benchmark rounds with 5 s: 20
#: gives 0.1-0.9% more than 3 (which shrinks the step to nothing within a few hundred steps),
#: and 10 or 30 about as much as 20.
STALL = 20

#: A cut joins the LP when the LP's columns break it by more than this.
CUT_VIOLATION = 1e-3

#: The work of a column-generation iteration, in microseconds of the 2-core benchmark machine:
#: ``ITERATION_WORK`` plus ``GPU_WORK`` per free GPU (pricing) plus ``PIVOT_WORK`` per simplex
#: pivot of the master's re-solve and nonzero of the master. Deterministic (HiGHS counts the
#: pivots), and it follows the wall clock where a count of iterations does not: an iteration takes
#: 5-8 ms at 256 GPUs and 70-100 ms at 1,024, where the master has four times the rows and needs
#: six times the pivots. Fitted to 28 full-load rounds of 64-4,096 GPUs (5 s of column generation
#: each, 40 s at 4,096 GPUs: 3,000 / 5 / 0.003) and raised a fifth: the time they took is
#: 0.45-1.22 times the work counted so (0.75-1.22 from 256 GPUs; the first ten iterations at
#: 4,096 GPUs 0.59-0.87). Pivots times rows instead fit as well up to 1,024 GPUs but count the
#: cheap first iterations at 4,096 GPUs ten times over.
ITERATION_WORK = 3600.0
GPU_WORK = 6.0
PIVOT_WORK = 0.0036


@dataclass
class ColumnGeneration:
    """Outcome of :func:`column_generation`.

    Attributes
    ----------
    bound : float
        A valid lower bound on the open jobs' weighted cost: the best Lagrangian bound.
    lp_value : float
        The last restricted master LP value. Not a bound: the LP solver's tolerances and the
        pricing tolerance can leave it above the configuration LP's optimum.
    converged : bool
        No column prices below ``-tolerance`` (then ``bound`` is the Lagrangian bound at the
        LP's duals, within the tolerances of ``lp_value``).
    columns : dict
        Queue position -> list of (GPU indices, cost) columns generated.
    weights : dict
        Queue position -> the last LP's value of each of its columns.
    single_rc : numpy.ndarray
        Reduced cost of ``z[m, g]`` at the final duals (commodities x free GPUs).
    iterations : int
    work : int
        The work done, in microseconds (see :data:`ITERATION_WORK`).
    cuts : list of Cut
        The packing cuts in the LP.
    master : Master
        The master LP and its pricer.
    """

    bound: float
    lp_value: float
    converged: bool
    columns: dict[int, list[tuple[np.ndarray, float]]]
    weights: dict[int, np.ndarray]
    single_rc: np.ndarray
    iterations: int
    work: int
    cuts: list[Cut]
    master: Master
    _mu: np.ndarray
    _p: np.ndarray
    _sigma: np.ndarray

    def fixing_cutoff(self, upper: float) -> float:
        """The largest reduced cost a part (a job's pattern, a 1-GPU commodity's GPU) of a
        solution cheaper than ``upper`` can have, at the final duals (module documentation):
        ``upper - D`` plus what the other parts' reduced costs can take away (each job's
        least, each commodity's ``n_m`` least, where negative) and the float error of those
        sums (:func:`~palopt.solvers.transport.rounded_down`)."""
        return upper - self._fixing_floor + 1e-9 * abs(upper)

    @cached_property
    def _fixing_floor(self) -> float:
        """What :meth:`fixing_cutoff` subtracts from ``upper`` (one pricing per job)."""
        master = self.master
        pricer = master.pricer
        pricer.set_cut_prices(self.cuts, self._sigma)
        cls = pricer.inst.job_class_indices()
        rhs = np.array([c.rhs for c in self.cuts], dtype=np.float64)
        counts = np.asarray(master.counts, dtype=np.float64)
        charges = float(self._p.sum()) + float(self._sigma @ rhs)
        dual = float(self._mu.sum()) + float(counts @ master.nu) - charges
        queue = pricer.inst.queue
        least = [
            pricer.least(int(cls[pos]), queue[pos].num_gpus, queue[pos].weight, self._p)[0] - mu
            for mu, pos in zip(self._mu.tolist(), self.columns, strict=True)
        ]
        least += [  # the negative among a commodity's n_m least: its other units' least
            float(np.minimum(np.partition(row, n - 1)[:n], 0.0).sum())
            for row, n in zip(self.single_rc, master.counts, strict=True)
        ]
        give = float(-np.minimum(least, 0.0).sum()) if least else 0.0
        magnitude = float(np.abs(self._mu).sum()) + float(counts @ np.abs(master.nu)) + charges
        terms = len(self._mu) + len(counts) + len(self._p) + len(self.cuts)
        return rounded_down(dual - give, magnitude + give, terms)

    def pattern_rc(self, upper: float) -> dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]]:
        """Least reduced cost of each pattern that may beat ``upper`` (converged runs only).

        Returns
        -------
        dict
            ``(position, tier, dense group)`` -> (thresholds ascending, least reduced cost of a
            set of that pattern and threshold); a pattern or threshold absent here cannot be in
            a solution cheaper than ``upper``.
        """
        if not self.converged:
            raise ValueError("reduced-cost fixing needs a converged column generation")
        cutoff = self.fixing_cutoff(upper)
        pricer = self.master.pricer
        inst = pricer.inst
        cls = inst.job_class_indices()
        pricer.set_cut_prices(self.cuts, self._sigma)
        out = {}
        for j, pos in enumerate(self.columns):
            job = inst.queue[pos]
            mu = float(self._mu[j])
            per = pricer.patterns(int(cls[pos]), job.num_gpus, job.weight, self._p, cutoff + mu)
            for (t, g), (vals, values) in per.items():
                out[(pos, t, g)] = (vals, values - mu)
        return out


class Master:
    """The restricted master LP (HiGHS) of a round's configuration LP, its columns and cuts.

    Built with a placement of every open job as the first columns; :meth:`solve` runs column
    generation and cut separation. The master keeps one artificial column per job row, dearer
    than any placement: it keeps the LP feasible when a new cut removes every column a job has
    there, and a master with it still relaxes the configuration LP.

    Parameters
    ----------
    rnd : Round
    start : dict
        A placement of every open position (queue position -> GPUs).
    seed_columns : dict, optional
        More first columns (queue position -> (GPUs, cost)); those on GPUs not free are skipped.
    """

    def __init__(
        self,
        rnd: Round,
        start: dict[int, np.ndarray],
        seed_columns: dict[int, list[tuple[np.ndarray, float]]] | None = None,
    ) -> None:
        import highspy

        self.rnd = rnd
        self.cuts: list[Cut] = []
        inst = rnd.instance
        self.multi = list(rnd.multi)
        self.counts, self.free, self.single_cost = single_gpu_costs(rnd)
        self.pricer = Pricer(rnd)
        self.cls = inst.job_class_indices()
        n_free, n_jobs, n_comm = len(self.free), len(self.multi), len(self.counts)
        self.cap_row = n_jobs + n_comm  # capacity rows start here, then the cut rows
        # 1-GPU columns, then one artificial per job row, then the job columns
        self.n_fixed = n_comm * n_free + n_jobs
        self.h = h = new_highs()
        h.setOptionValue("simplex_strategy", 4)  # primal simplex: added columns keep feasibility
        self.inf = inf = highspy.kHighsInf
        demand = np.r_[np.ones(n_jobs), np.asarray(self.counts, dtype=np.float64)]
        lo, hi = np.r_[demand, np.full(n_free, -inf)], np.r_[demand, np.ones(n_free)]
        self.n_base_rows = len(lo)
        none = np.array([], dtype=np.int32)
        h.addRows(len(lo), lo, hi, 0, none, none, np.array([]))
        for m in range(n_comm):
            for q in range(n_free):
                rows = np.array([n_jobs + m, self.cap_row + q], dtype=np.int32)
                h.addCol(float(self.single_cost[m, q]), 0.0, inf, 2, rows, np.ones(2))
        self.columns: dict[int, list[tuple[np.ndarray, float]]] = {p: [] for p in self.multi}
        # Each job column in the master, in order: (queue position, index in columns[position]).
        self.in_master: list[tuple[int, int]] = []
        self.label: dict[tuple[int, int], tuple[int, float, int]] = {}  # (tier, v, a position)
        pos_of = {int(g): i for i, g in enumerate(self.free)}

        def own(pos: int, gpus: np.ndarray) -> Column:
            c = int(self.cls[pos])
            tier = inst.topology.tier_index(gpus)
            v = float(inst.slowdown[c, gpus].max())
            cost = inst.queue[pos].weight * v * float(inst.penalty[c, tier])
            return Column(np.array([pos_of[int(g)] for g in gpus]), cost, tier, v, 0.0)

        first = [own(pos, np.asarray(start[pos])) for pos in self.multi]
        artificial = 2.0 * (sum(col.cost for col in first) + float(self.single_cost.sum())) + 1.0
        for j in range(n_jobs):
            h.addCol(artificial, 0.0, inf, 1, np.array([j], dtype=np.int32), np.ones(1))
        for j, pos in enumerate(self.multi):
            self.add_column(j, first[j])
            known = {tuple(self.columns[pos][0][0])}
            for gpus, _ in (seed_columns or {}).get(pos, []):
                if rnd.free[gpus].all() and tuple(gpus) not in known:
                    known.add(tuple(gpus))
                    self.add_column(j, own(pos, gpus))
        self.mu: np.ndarray = np.zeros(n_jobs)
        self.nu: np.ndarray = np.zeros(n_comm)
        self.p: np.ndarray = np.zeros(n_free)
        self.sigma = np.zeros(0)

    def coefficient(self, cut: Cut, pos: int, label: tuple[int, float, int]) -> int:
        """The coefficient in ``cut`` of a column of ``pos`` with ``label``."""
        tier, v, first = label
        k = self.rnd.instance.queue[pos].num_gpus
        return int(cut.weight(int(self.cls[pos]), k, tier, self.pricer.groups, first, v))

    def add_column(self, j: int, col: Column) -> None:
        """Add ``col`` as a column of the ``j``-th multi-GPU job."""
        pos = self.multi[j]
        label = (col.tier, col.v, int(col.gpus[0]))
        first_cut = self.cap_row + len(self.free)
        on_cuts = [
            (first_cut + i, a)
            for i, cut in enumerate(self.cuts)
            if (a := self.coefficient(cut, pos, label))
        ]
        rows = np.r_[j, self.cap_row + np.sort(col.gpus), [r for r, _ in on_cuts]]
        values = np.r_[np.ones(1 + len(col.gpus)), [float(a) for _, a in on_cuts]]
        self.h.addCol(col.cost, 0.0, self.inf, len(rows), rows.astype(np.int32), values)
        self.columns[pos].append((np.sort(self.free[col.gpus]), col.cost))
        self.label[(pos, len(self.columns[pos]) - 1)] = label
        self.in_master.append((pos, len(self.columns[pos]) - 1))

    def add_cut(self, cut: Cut) -> None:
        """Add ``cut`` as a row, with its coefficients on the columns in the master."""
        on = [
            (self.n_fixed + i, a)
            for i, key in enumerate(self.in_master)
            if (a := self.coefficient(cut, key[0], self.label[key]))
        ]
        idx = np.array([i for i, _ in on], dtype=np.int32)
        self.h.addRow(-self.inf, float(cut.rhs), len(on), idx, np.array([float(a) for _, a in on]))
        self.cuts.append(cut)

    def values(self) -> np.ndarray:
        """The last LP's value of each job column in the master (order of ``in_master``)."""
        return np.asarray(self.h.getSolution().col_value)[self.n_fixed :]

    def solve(
        self,
        time_limit: float,
        max_work: int | None = None,
        tolerance: float = 1e-7,
        smoothing: float = 0.8,
        purge_at: float = 4.0,
        max_cuts: int = 200,
        give_up: tuple[float, float] | None = None,
    ) -> tuple[float, float, bool, int, int]:
        """Column generation from the master as it stands (see :func:`column_generation`).

        Returns
        -------
        bound, lp_value, converged, iterations, work
        """
        started = time.perf_counter()
        inst, h = self.rnd.instance, self.h
        n_jobs, n_free = len(self.multi), len(self.free)
        bound, lp_value, converged, it, work = -np.inf, 0.0, False, 0, 0.0
        p_best: np.ndarray | None = None

        def reached(share: float) -> bool:
            """Whether ``share`` of the work or of the time limit is used."""
            return (max_work is not None and work >= share * max_work) or (
                time.perf_counter() - started > share * time_limit
            )

        while True:
            h.run()
            info = h.getInfo()
            lp_value = float(info.objective_function_value)
            work += (
                ITERATION_WORK
                + GPU_WORK * n_free
                + PIVOT_WORK * info.simplex_iteration_count * h.getNumNz()
            )
            dual = np.asarray(h.getSolution().row_dual)
            self.mu, self.nu = dual[:n_jobs], dual[n_jobs : self.cap_row]
            self.p = p = np.maximum(-dual[self.cap_row : self.cap_row + n_free], 0.0)
            self.sigma = np.maximum(-dual[self.cap_row + n_free :], 0.0)
            self.pricer.set_cut_prices(self.cuts, self.sigma)
            cut_charge = float(self.sigma @ np.array([c.rhs for c in self.cuts], dtype=np.float64))
            it += 1
            last = reached(1.0) or (
                give_up is not None
                and reached(give_up[0])
                and bound < lp_value - give_up[1] * abs(lp_value)
            )
            # Price at smoothed prices (Wentges), then at the LP's if that finds nothing.
            new: list[tuple[int, Column]] = []
            for alpha in (smoothing, 0.0) if p_best is not None and smoothing > 0 else (0.0,):
                p_sep = p if alpha == 0.0 or p_best is None else alpha * p_best + (1 - alpha) * p
                value, new = price_all(
                    self.pricer,
                    inst,
                    self.multi,
                    self.cls,
                    p_sep,
                    p,
                    self.mu,
                    tolerance,
                )
                singles = sum(
                    float(np.partition(row, n - 1)[:n].sum())
                    for row, n in zip(self.single_cost + p_sep[None, :], self.counts, strict=True)
                )
                charges = float(p_sep.sum())
                lagr = rounded_down(
                    value + singles - charges - cut_charge,
                    value + singles + charges + cut_charge,
                    3 * len(p_sep) + len(self.multi) + len(self.cuts),
                )
                if lagr > bound:
                    bound, p_best = lagr, p_sep
                if new:
                    break
            if not new:
                # Converged for these rows; cuts the LP breaks, if any, raise the bound.
                found = [] if last or len(self.cuts) >= max_cuts else self.separate()
                if not found:
                    converged = True
                    break
                for cut in found[: max_cuts - len(self.cuts)]:
                    self.add_cut(cut)
                continue
            if last:
                break
            n_rows = self.n_base_rows + len(self.cuts)
            if len(self.in_master) > purge_at * n_rows:
                self.purge(n_rows)
            for j, col in new:
                self.add_column(j, col)
        return bound, lp_value, converged, it, int(work)

    def separate(self) -> list[Cut]:
        """The most violated :class:`Cut` of each (class, group, ``d``), if any, at the last LP
        (``d`` runs over the sizes of the class's jobs in use)."""
        inst, pricer = self.rnd.instance, self.pricer
        used = [
            (int(self.cls[pos]), inst.queue[pos].num_gpus, *self.label[(pos, i)], float(x))
            for (pos, i), x in zip(self.in_master, self.values(), strict=True)
            if x > 1e-9
        ]
        sizes: dict[int, set[int]] = {}
        for c, k, *_ in used:
            sizes.setdefault(c, set()).add(k)
        load: dict[tuple[int, int, int, int], list[tuple[float, float]]] = {}
        for c, k, tier, v, first, x in used:
            for top in range(tier, len(pricer.tiers)):
                group = int(pricer.groups[top][first])
                for d in sizes[c]:
                    if d <= k:
                        load.setdefault((c, top, group, d), []).append((v, (k // d) * x))
        known = set(self.cuts)
        found = []
        for (c, top, group, d), entries in sorted(load.items()):
            entries.sort()
            vs = np.array([e[0] for e in entries])
            lhs = np.cumsum([e[1] for e in entries])
            last = np.r_[vs[1:] != vs[:-1], True]
            vs, lhs = vs[last], lhs[last]
            members = np.sort(inst.slowdown[c, pricer.free[pricer.groups[top] == group]])
            rhs = np.searchsorted(members, vs, side="right") // d
            i = int(np.argmax(lhs - rhs))
            cut = Cut(c, top, group, float(vs[i]), d, int(rhs[i]))
            if lhs[i] - rhs[i] > CUT_VIOLATION and cut not in known:
                found.append(cut)
        return found

    def purge(self, n_rows: int) -> None:
        """Delete the unused job columns beyond ``2 * n_rows`` with the largest reduced costs
        (HiGHS's re-solve time grows with the columns, not with the few pivots a new column
        needs). They stay in ``columns``."""
        sol = self.h.getSolution()
        value = np.asarray(sol.col_value)[self.n_fixed :]
        rc = np.asarray(sol.col_dual)[self.n_fixed :]
        unused = np.flatnonzero(value <= 1e-9)
        n_drop = len(self.in_master) - 2 * n_rows
        if n_drop <= 0 or not len(unused):
            return
        drop = unused[np.argsort(-rc[unused], kind="stable")[:n_drop]]
        self.h.deleteCols(len(drop), (self.n_fixed + np.sort(drop)).astype(np.int32))
        keep = np.ones(len(self.in_master), dtype=bool)
        keep[drop] = False
        self.in_master = [c for c, k in zip(self.in_master, keep, strict=True) if k]


def column_generation(
    rnd: Round,
    start: dict[int, np.ndarray],
    time_limit: float,
    max_work: int | None = None,
    tolerance: float = 1e-7,
    smoothing: float = 0.8,
    seed_columns: dict[int, list[tuple[np.ndarray, float]]] | None = None,
    purge_at: float = 4.0,
    max_cuts: int = 200,
    give_up: tuple[float, float] | None = None,
) -> ColumnGeneration:
    """Solve the configuration LP of ``rnd``'s open jobs by column generation (HiGHS).

    Parameters
    ----------
    rnd : Round
    start : dict
        A placement of every open position (queue position -> GPUs): the first columns.
    time_limit : float
        Seconds; on time-out the best Lagrangian bound is returned.
    max_work : int, optional
        Work at most, in microseconds as counted by :data:`ITERATION_WORK` (the deterministic
        mode's budget): no iteration starts once it is reached. ``None`` (default): the time
        limit alone ends column generation.
    tolerance : float
        Reduced cost below ``-tolerance`` counts as improving.
    smoothing : float
        Weight of the best prices so far in the pricing prices (0 turns smoothing off).
    seed_columns : dict, optional
        More first columns (queue position -> (GPUs, cost)); those on GPUs not free are skipped.
    purge_at : float
        When the master holds more job columns than this many times its rows, the unused half
        with the largest reduced costs leaves the LP (see :meth:`Master.purge`).
    max_cuts : int
        Packing cuts (:class:`~palopt.solvers.exact.pricing.Cut`) added at most; each time the
        LP converges, the violated ones join it and column generation goes on (0: the plain
        configuration LP).
    give_up : (float, float), optional
        ``(share, gap)``: stop once ``share`` of the time limit (or of ``max_work``) is
        used if the Lagrangian bound is then more than ``gap`` (relative) under the LP value,
        a sign that the LP is far from converging in the time (large rounds at full load).

    Returns
    -------
    ColumnGeneration

    Examples
    --------
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 2, "A"), Job("b", 2, "A")))
    >>> rnd = make_round(inst)
    >>> start = {0: np.array([0, 2]), 1: np.array([1, 3])}  # both jobs across servers
    >>> cg = column_generation(rnd, start, time_limit=1.0)
    >>> cg.converged, round(cg.bound, 6), round(cg.lp_value, 6)  # one job on the slow GPU
    (True, 2.3, 2.3)
    """
    master = Master(rnd, start, seed_columns)
    bound, lp_value, converged, it, work = master.solve(
        time_limit, max_work, tolerance, smoothing, purge_at, max_cuts, give_up
    )
    n_free = len(master.free)
    single_rc = (
        master.single_cost - master.nu[:, None] + master.p[None, :]
        if len(master.counts)
        else np.zeros((0, n_free))
    )
    weights = {pos: np.zeros(len(cols)) for pos, cols in master.columns.items()}
    for (pos, i), v in zip(master.in_master, master.values(), strict=True):
        weights[pos][i] += v
    return ColumnGeneration(
        bound,
        lp_value,
        converged,
        master.columns,
        weights,
        single_rc,
        it,
        work,
        list(master.cuts),
        master,
        master.mu.copy(),
        master.p.copy(),
        master.sigma.copy(),
    )


def round_columns(rnd: Round, cg: ColumnGeneration) -> dict[int, np.ndarray]:
    """A placement read off the LP: columns by decreasing LP weight, each taken if its job is
    still open and its GPUs free; the other multi-GPU jobs placed greedily, largest first, and
    the 1-GPU jobs assigned optimally to the GPUs left.

    Parameters
    ----------
    rnd : Round
        The round ``cg`` was run on.
    cg : ColumnGeneration
        Its column generation (:func:`column_generation`): columns and their LP weights.

    Returns
    -------
    dict
        Queue position -> GPU indices, for every open position of ``rnd``.

    Examples
    --------
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 2, "A"), Job("b", 2, "A")))
    >>> rnd = make_round(inst)
    >>> cg = column_generation(rnd, {0: np.array([0, 2]), 1: np.array([1, 3])}, 1.0)
    >>> placed = round_columns(rnd, cg)
    >>> sorted(g.tolist() for g in placed.values())
    [[0, 1], [2, 3]]
    """
    items = sorted(
        (
            (float(w), pos, i)
            for pos, ws in cg.weights.items()
            for i, w in enumerate(ws)
            if w > 1e-6
        ),
        key=lambda e: (-e[0], e[1], e[2]),
    )
    free = rnd.free.copy()
    taken: dict[int, np.ndarray] = {}
    for _, pos, i in items:
        gpus = cg.columns[pos][i][0]
        if pos not in taken and free[gpus].all():
            taken[pos] = gpus
            free[gpus] = False
    rest = [p for p in rnd.open_positions if p not in taken]
    big_first = sorted(rest, key=lambda p: -rnd.instance.queue[p].num_gpus)
    return {**taken, **GreedyPlacer(rnd).place_split(big_first, free)[1]}


def lagrangian_bound(
    rnd: Round, upper: float, time_limit: float = 10.0, iterations: int | None = None
) -> tuple[float, int, np.ndarray]:
    """A lower bound for large rounds: the Lagrangian bound above, prices by subgradient steps
    (Polyak's step length, halved after :data:`STALL` steps that do not raise the bound; each
    step prices every kind of job with :meth:`Pricer.least
    <palopt.solvers.exact.pricing.Pricer.least>`).

    With all prices zero it is the cheap bound of :mod:`palopt.solvers.bounds` (each multi-GPU
    job alone, the 1-GPU commodities alone); prices on contended GPUs raise it. No LP is solved,
    so it scales to thousands of GPUs.

    Parameters
    ----------
    rnd : Round
    upper : float
        The cost of a known placement (sets the step length, Polyak's rule).
    time_limit : float
        Seconds.
    iterations : int, optional
        Subgradient steps at most (default: until ``time_limit``, or until the step length
        vanishes).

    Returns
    -------
    bound : float
        The best bound over the prices tried.
    steps : int
        Subgradient steps made.
    prices : numpy.ndarray
        The prices of that bound, one per free GPU of ``rnd`` (``np.flatnonzero(rnd.free)``);
        :func:`price_placement` places the round by them.

    Examples
    --------
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 2, "A"), Job("b", 2, "A")))
    >>> rnd = make_round(inst)
    >>> round(lagrangian_bound(rnd, 2.3, iterations=1)[0], 6)  # zero prices: each job alone
    2.0
    >>> bound, steps, prices = lagrangian_bound(rnd, 2.3, time_limit=1.0)
    >>> round(bound, 6)  # the optimum here
    2.3
    """
    started = time.perf_counter()
    inst = rnd.instance
    multi = list(rnd.multi)
    counts, free, single_cost = single_gpu_costs(rnd)
    pricer = Pricer(rnd)
    cls = inst.job_class_indices()
    keys: dict[tuple[int, int, float], int] = {}
    for pos in multi:
        job = inst.queue[pos]
        key = (int(cls[pos]), job.num_gpus, float(job.weight))
        keys[key] = keys.get(key, 0) + 1
    p: np.ndarray = np.zeros(len(free))
    best, best_p = -np.inf, p
    theta, stall = 1.0, 0
    steps = 0
    while iterations is None or steps < iterations:
        steps += 1
        use = np.zeros(len(free))
        charges = float(p.sum())
        value = -charges
        for key, n_jobs in keys.items():
            least, gpus = pricer.least(key[0], key[1], key[2], p)
            value += n_jobs * least
            use[gpus] += n_jobs
        for row, n in zip(single_cost + p[None, :], counts, strict=True):
            pick = np.argpartition(row, n - 1)[:n]
            value += float(row[pick].sum())
            use[pick] += 1
        bound = rounded_down(value, value + 2 * charges, 3 * len(free) + len(keys))
        if bound > best + 1e-12:
            best, best_p, stall = bound, p, 0
        else:
            stall += 1
            if stall >= STALL:
                theta, stall = theta / 2, 0
        grad = use - 1.0
        grad[(p <= 0) & (grad < 0)] = 0.0
        norm = float(grad @ grad)
        if norm == 0 or theta < 1e-9 or time.perf_counter() - started > time_limit:
            break
        p = np.maximum(0.0, p + theta * (upper - value) / norm * grad)
    return best, steps, best_p


def price_placement(
    rnd: Round, prices: np.ndarray, deadline: float = np.inf
) -> dict[int, np.ndarray] | None:
    """A placement guided by prices on the free GPUs (those of :func:`lagrangian_bound`): the
    multi-GPU jobs in queue order, each on its set of least ``weight * cost + prices`` among the
    GPUs still free (:meth:`Pricer.least <palopt.solvers.exact.pricing.Pricer.least>`), then
    the 1-GPU jobs assigned optimally to the GPUs left.

    The prices are those of the LP's fractional solution, so jobs placed one by one on them
    collide: the placement is a start for local search, not an answer. Polished, it was 0.3-0.9%
    cheaper than the greedy's on the six full-load synthetic 4,096-GPU benchmark rounds, with 5 s
    of subgradient prices (bench/README.md).

    Parameters
    ----------
    rnd : Round
    prices : numpy.ndarray
        A price (>= 0) per free GPU of ``rnd`` (``np.flatnonzero(rnd.free)``).
    deadline : float, optional
        A :func:`time.perf_counter` reading: no job is placed after it (default: none). Each
        multi-GPU job takes about half a millisecond at 4,096 GPUs.

    Returns
    -------
    dict or None
        Queue position -> GPU indices, for every open position of ``rnd``; ``None`` if the
        deadline passed first.

    Examples
    --------
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 2, "A"), Job("b", 2, "A")))
    >>> rnd = make_round(inst)
    >>> {p: g.tolist() for p, g in price_placement(rnd, np.zeros(4)).items()}
    {0: [2, 3], 1: [0, 1]}
    >>> {p: g.tolist() for p, g in price_placement(rnd, np.array([0, 0, 1, 1])).items()}
    {0: [0, 1], 1: [2, 3]}
    >>> price_placement(rnd, np.zeros(4), deadline=0.0) is None
    True
    """
    inst = rnd.instance
    pricer = Pricer(rnd)
    cls = inst.job_class_indices()
    multi = rnd.multi
    p = np.array(prices, dtype=np.float64)
    if multi:
        # A taken GPU is priced above any set of GPUs still free, so no job takes it again.
        most = max(inst.queue[pos].weight for pos in multi) * inst.slowdown.max()
        k = max(inst.queue[pos].num_gpus for pos in multi)
        taken = 2.0 * (most * inst.penalty.max() + k * float(p.max())) + 1.0
    free = rnd.free.copy()
    chosen: dict[int, np.ndarray] = {}
    for pos in multi:
        if time.perf_counter() > deadline:
            return None
        job = inst.queue[pos]
        _, at = pricer.least(int(cls[pos]), job.num_gpus, float(job.weight), p)
        p[at] = taken
        gpus = np.sort(pricer.free[at])
        free[gpus] = False
        chosen[pos] = gpus
    singles = [pos for pos in rnd.open_positions if inst.queue[pos].num_gpus == 1]
    return {**chosen, **GreedyPlacer(rnd).place_split(singles, free)[1]}
