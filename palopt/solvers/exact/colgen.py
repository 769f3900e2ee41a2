"""Column generation: the configuration LP bound and a restricted master of good placements.

The *configuration LP* has one column per (multi-GPU job, GPU set) at the set's true cost, the
1-GPU commodities as a transportation part, and one capacity row per free GPU:

    min  sum cost[j, S] lam[j, S] + sum c[m, g] z[m, g]
    s.t. sum_S lam[j, S] = 1          (dual mu_j)
         sum_g z[m, g] = n_m          (dual nu_m)
         sum_{S ni g} lam + sum_m z[m, g] <= 1   (dual -p_g, p_g >= 0)

Its relaxation does not let a job pay ``1/k`` of a slow GPU or spread for free, so its value is a
strong lower bound. Pricing is exact and cheap: for a job, a group ``G`` of a tier and a threshold
``v``, the best set takes the ``k`` GPUs of ``G`` no slower than ``v`` with the smallest ``p``; its
reduced cost is ``w * v * penalty + sum p - mu_j``. Every solution costs at least the LP value plus
the reduced costs of the job patterns it uses (all terms non-negative at convergence), which gives
*reduced-cost fixing*: a pattern whose reduced cost exceeds ``upper - LP`` cannot be in a better
solution. Before convergence a Lagrangian bound is still valid and is the one reported: for any
prices ``p >= 0`` on the GPUs, ``sum_j min_S (cost[j, S] + p(S)) + sum_m (n_m smallest
c[m, g] + p_g) - sum_g p_g`` bounds the optimum from below; pricing at smoothed duals (a mix of
the best prices so far and the LP's) raises that bound sooner.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from palopt.instance import Instance
from palopt.solvers.bounds import single_gpu_costs
from palopt.solvers.greedy import GreedyPlacer
from palopt.solvers.round import Round, dense_groups
from palopt.solvers.transport import new_highs

__all__ = ["ColumnGeneration", "column_generation", "round_columns", "lagrangian_bound"]


@dataclass
class ColumnGeneration:
    """Outcome of :func:`column_generation`.

    Attributes
    ----------
    bound : float
        A valid lower bound on the open jobs' weighted cost.
    lp_value : float
        The last restricted master LP value.
    converged : bool
        No column with negative reduced cost remains (then ``bound >= lp_value``).
    columns : dict
        Queue position -> list of (GPU indices, cost) columns generated.
    weights : dict
        Queue position -> the last LP's value of each of its columns.
    single_rc : numpy.ndarray
        Reduced cost of ``z[m, g]`` at the final duals (commodities x free GPUs).
    iterations : int
    """

    bound: float
    lp_value: float
    converged: bool
    columns: dict[int, list[tuple[np.ndarray, float]]]
    weights: dict[int, np.ndarray]
    single_rc: np.ndarray
    iterations: int
    _pricer: _Pricer
    _mu: np.ndarray
    _p: np.ndarray

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
        cutoff = upper - self.lp_value + 1e-9 * abs(upper) + 1e-9
        inst = self._pricer.inst
        cls = inst.job_class_indices()
        out = {}
        for j, pos in enumerate(self.columns):
            job = inst.queue[pos]
            _, _, per = self._pricer.price(
                int(cls[pos]), job.num_gpus, job.weight, float(self._mu[j]), self._p, cutoff
            )
            for (t, g), v in per.items():
                out[(pos, t, g)] = v
        return out


class _Pricer:
    """Exact pricing of one job over every (tier, group, threshold) pattern."""

    def __init__(self, rnd: Round) -> None:
        inst = rnd.instance
        self.inst = inst
        self.free = np.flatnonzero(rnd.free)
        self.groups = [g[self.free] for g in dense_groups(inst)]
        self.tiers = range(len(inst.topology.tiers))
        self.cache: dict[tuple[int, int], list[tuple[float, int, int, np.ndarray]]] = {}

    def _groups(self, c: int, k: int) -> list[tuple[float, int, int, np.ndarray]]:
        """Every (tier, group) with ``k`` free GPUs: (least possible cost factor ``v_k * pen``,
        tier, group, free positions by slowdown), cheapest first."""
        key = (c, k)
        if key not in self.cache:
            sf = self.inst.slowdown[c, self.free]
            pen = self.inst.penalty[c]
            out = []
            for t in self.tiers:
                order = np.lexsort((sf, self.groups[t]))
                g = self.groups[t][order]
                cuts = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
                for a, b in zip(cuts[:-1], cuts[1:], strict=True):
                    if b - a >= k:
                        members = order[a:b]
                        out.append((float(sf[members[k - 1]] * pen[t]), t, int(g[a]), members))
            out.sort(key=lambda e: e[0])
            self.cache[key] = out
        return self.cache[key]

    def price(
        self, c: int, k: int, w: float, mu: float, p: np.ndarray, cutoff: float | None = None
    ) -> tuple[
        float, list[tuple[float, np.ndarray]], dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]
    ]:
        """Price one job.

        Returns the least reduced cost, the best (reduced cost, set of free positions) of each
        tier, and, if ``cutoff`` is given, per (tier, group) the thresholds and their least
        reduced costs, leaving out those whose reduced cost is surely above ``cutoff``.
        """
        sf = self.inst.slowdown[c, self.free]
        pen = self.inst.penalty[c]
        best = np.inf
        tier_best: dict[int, tuple[float, np.ndarray]] = {}
        per_pattern = {}
        for low, t, g, members in self._groups(c, k):
            stop = best if cutoff is None else cutoff
            if w * low - mu >= stop:
                break
            heap: list[float] = []  # negated: a max-heap of the k smallest p seen
            total = 0.0
            vals, rcs = [], []
            n = len(members)
            for i in range(n):
                q = members[i]
                base = w * float(sf[q]) * float(pen[t]) - mu
                if base >= (best if cutoff is None else cutoff):
                    break
                pq = float(p[q])
                if len(heap) < k:
                    heapq.heappush(heap, -pq)
                    total += pq
                elif pq < -heap[0]:
                    total += pq + heapq.heapreplace(heap, -pq)
                if len(heap) < k or (i + 1 < n and sf[members[i + 1]] == sf[q]):
                    continue
                rc = base + total
                if cutoff is not None:
                    vals.append(float(sf[q]))
                    rcs.append(rc)
                best = min(best, rc)
                if rc < tier_best.get(t, (np.inf,))[0]:
                    cand = members[: i + 1]
                    tier_best[t] = (rc, cand[np.argsort(p[cand], kind="stable")[:k]])
            if vals:
                per_pattern[(t, g)] = (np.array(vals), np.array(rcs))
        return best, list(tier_best.values()), per_pattern


def _price_all(
    pricer: _Pricer,
    inst: Instance,
    multi: list[int],
    cls: np.ndarray,
    p_sep: np.ndarray,
    p: np.ndarray,
    mu: np.ndarray,
    tolerance: float,
) -> tuple[float, list[tuple[int, np.ndarray]]]:
    """Price every job at ``p_sep``: the sum of their least ``cost + p_sep(S)`` and the sets
    (the best of each tier) whose reduced cost at the LP duals ``(mu, p)`` is negative. Jobs of
    one class, size and weight share one pricing (their duals ``mu`` only shift it)."""
    value = 0.0
    new: list[tuple[int, np.ndarray]] = []
    priced: dict[tuple[int, int, float], tuple[float, list[tuple[float, np.ndarray]]]] = {}
    for j, pos in enumerate(multi):
        job = inst.queue[pos]
        key = (int(cls[pos]), job.num_gpus, float(job.weight))
        if key not in priced:
            least, sets, _ = pricer.price(key[0], key[1], key[2], 0.0, p_sep)
            priced[key] = (least, [(rc - p_sep[s].sum() + p[s].sum(), s) for rc, s in sets])
        least, sets = priced[key]
        value += least
        new.extend((j, s) for rc_lp, s in sets if rc_lp - mu[j] < -tolerance)
    return value, new


def column_generation(
    rnd: Round,
    start: dict[int, np.ndarray],
    time_limit: float,
    max_iterations: int = 500,
    tolerance: float = 1e-7,
    smoothing: float = 0.8,
    seed_columns: dict[int, list[tuple[np.ndarray, float]]] | None = None,
    purge_at: float = 4.0,
) -> ColumnGeneration:
    """Solve the configuration LP of ``rnd``'s open jobs by column generation (HiGHS).

    Parameters
    ----------
    rnd : Round
    start : dict
        A placement of every open position (queue position -> GPUs): the first columns.
    time_limit : float
        Seconds; on time-out the best Lagrangian bound is returned.
    max_iterations : int
    tolerance : float
        Reduced cost below ``-tolerance`` counts as improving.
    smoothing : float
        Weight of the best prices so far in the pricing prices (0 turns smoothing off).
    seed_columns : dict, optional
        More first columns (queue position -> (GPUs, cost)); those on GPUs not free are skipped.
    purge_at : float
        When the master holds more job columns than this many times its rows, the unused half
        with the largest reduced costs leaves the LP (HiGHS's re-solve time grows with the
        columns, not with the few pivots a new column needs). They stay in ``columns``.

    Returns
    -------
    ColumnGeneration
    """
    import highspy

    started = time.perf_counter()
    inst = rnd.instance
    multi = list(rnd.multi)
    counts, free, single_cost = single_gpu_costs(rnd)
    pos_of = {int(g): i for i, g in enumerate(free)}
    n_free, n_jobs, n_comm = len(free), len(multi), len(counts)
    cap_row = n_jobs + n_comm  # capacity rows start here
    h = new_highs()
    h.setOptionValue("simplex_strategy", 4)  # primal simplex: added columns keep feasibility
    inf = highspy.kHighsInf
    row_lo = np.r_[np.ones(n_jobs), np.asarray(counts, dtype=np.float64), np.full(n_free, -inf)]
    row_hi = np.r_[np.ones(n_jobs), np.asarray(counts, dtype=np.float64), np.ones(n_free)]
    h.addRows(
        len(row_lo),
        row_lo,
        row_hi,
        0,
        np.array([], dtype=np.int32),
        np.array([], dtype=np.int32),
        np.array([]),
    )
    for m in range(n_comm):
        for q in range(n_free):
            h.addCol(
                float(single_cost[m, q]),
                0.0,
                inf,
                2,
                np.array([n_jobs + m, cap_row + q], dtype=np.int32),
                np.ones(2),
            )
    columns: dict[int, list[tuple[np.ndarray, float]]] = {p: [] for p in multi}
    # (queue position, index in columns[position]) of each job column in the master, in order
    in_master: list[tuple[int, int]] = []
    n_single = n_comm * n_free
    cls = inst.job_class_indices()

    def add_column(j: int, gpus_pos: np.ndarray) -> None:
        pos = multi[j]
        gpus = free[gpus_pos]
        job = inst.queue[pos]
        c = int(cls[pos])
        cost = (
            job.weight
            * float(inst.slowdown[c, gpus].max())
            * float(inst.penalty[c, inst.topology.tier_index(gpus)])
        )
        rows = np.r_[j, cap_row + np.sort(gpus_pos)].astype(np.int32)
        h.addCol(cost, 0.0, inf, len(rows), rows, np.ones(len(rows)))
        columns[pos].append((np.sort(gpus), cost))
        in_master.append((pos, len(columns[pos]) - 1))

    for j, pos in enumerate(multi):
        add_column(j, np.array([pos_of[int(g)] for g in start[pos]]))
        known = {tuple(columns[pos][0][0])}
        for gpus, _ in (seed_columns or {}).get(pos, []):
            if rnd.free[gpus].all() and tuple(gpus) not in known:
                known.add(tuple(gpus))
                add_column(j, np.array([pos_of[int(g)] for g in gpus]))
    pricer = _Pricer(rnd)
    bound, lp_value, converged, it = -np.inf, 0.0, False, 0
    p_best: np.ndarray | None = None
    while True:
        h.run()
        lp_value = float(h.getInfo().objective_function_value)
        dual = np.asarray(h.getSolution().row_dual)
        mu, nu, p = dual[:n_jobs], dual[n_jobs:cap_row], np.maximum(-dual[cap_row:], 0.0)
        it += 1
        last = it >= max_iterations or time.perf_counter() - started > time_limit
        # Price at smoothed prices (Wentges), then at the LP's if that finds nothing.
        new: list[tuple[int, np.ndarray]] = []
        for alpha in (smoothing, 0.0) if p_best is not None and smoothing > 0 else (0.0,):
            p_sep = p if alpha == 0.0 or p_best is None else alpha * p_best + (1 - alpha) * p
            value, new = _price_all(pricer, inst, multi, cls, p_sep, p, mu, tolerance)
            singles = sum(
                float(np.partition(row, n - 1)[:n].sum())
                for row, n in zip(single_cost + p_sep[None, :], counts, strict=True)
            )
            lagr = value + singles - float(p_sep.sum())
            if lagr > bound:
                bound, p_best = lagr, p_sep
            if new:
                break
        if not new:
            converged = True
            bound = max(bound, lp_value)
            break
        if last:
            break
        if len(in_master) > purge_at * len(row_lo):
            in_master = _purge(h, n_single, in_master, len(row_lo))
        for j, chosen in new:
            add_column(j, chosen)
    single_rc = single_cost - nu[:, None] + p[None, :] if n_comm else np.zeros((0, n_free))
    col_value = np.asarray(h.getSolution().col_value)[n_single:]
    weights = {pos: np.zeros(len(columns[pos])) for pos in multi}
    for (pos, i), v in zip(in_master, col_value, strict=True):
        weights[pos][i] += v
    return ColumnGeneration(
        bound, lp_value, converged, columns, weights, single_rc, it, pricer, mu, p
    )


def _purge(
    h: Any, n_single: int, in_master: list[tuple[int, int]], n_rows: int
) -> list[tuple[int, int]]:
    """Delete from the master the unused job columns beyond ``2 * n_rows`` with the largest
    reduced costs; returns the columns left, in order."""
    sol = h.getSolution()
    value = np.asarray(sol.col_value)[n_single:]
    rc = np.asarray(sol.col_dual)[n_single:]
    unused = np.flatnonzero(value <= 1e-9)
    n_drop = len(in_master) - 2 * n_rows
    if n_drop <= 0 or not len(unused):
        return in_master
    drop = unused[np.argsort(-rc[unused], kind="stable")[:n_drop]]
    h.deleteCols(len(drop), (n_single + np.sort(drop)).astype(np.int32))
    keep = np.ones(len(in_master), dtype=bool)
    keep[drop] = False
    return [c for c, k in zip(in_master, keep, strict=True) if k]


def round_columns(rnd: Round, cg: ColumnGeneration) -> dict[int, np.ndarray]:
    """A placement read off the LP: columns by decreasing LP weight, each taken if its job is
    still open and its GPUs free; the other multi-GPU jobs placed greedily, largest first, and
    the 1-GPU jobs assigned optimally to the GPUs left.

    Returns
    -------
    dict
        Queue position -> GPU indices, for every open position of ``rnd``.
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
    rnd: Round, upper: float, time_limit: float = 10.0, iterations: int = 200
) -> float:
    """A lower bound for large rounds: the Lagrangian bound above, prices by subgradient steps.

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
    iterations : int
        Subgradient steps at most.

    Returns
    -------
    float
        The best bound over the prices tried.
    """
    started = time.perf_counter()
    inst = rnd.instance
    multi = list(rnd.multi)
    counts, free, single_cost = single_gpu_costs(rnd)
    pricer = _Pricer(rnd)
    cls = inst.job_class_indices()
    keys: dict[tuple[int, int, float], int] = {}
    for pos in multi:
        job = inst.queue[pos]
        key = (int(cls[pos]), job.num_gpus, float(job.weight))
        keys[key] = keys.get(key, 0) + 1
    p = np.zeros(len(free))
    best = -np.inf
    theta, stall = 1.0, 0
    for _ in range(iterations):
        use = np.zeros(len(free))
        value = -float(p.sum())
        for key, n_jobs in keys.items():
            least, sets, _ = pricer.price(key[0], key[1], key[2], 0.0, p)
            value += n_jobs * least
            chosen = min(sets, key=lambda e: e[0])[1]
            use[chosen] += n_jobs
        for row, n in zip(single_cost + p[None, :], counts, strict=True):
            pick = np.argpartition(row, n - 1)[:n]
            value += float(row[pick].sum())
            use[pick] += 1
        if value > best + 1e-12:
            best, stall = value, 0
        else:
            stall += 1
            if stall >= 3:
                theta, stall = theta / 2, 0
        grad = use - 1.0
        grad[(p <= 0) & (grad < 0)] = 0.0
        norm = float(grad @ grad)
        if norm == 0 or time.perf_counter() - started > time_limit:
            break
        p = np.maximum(0.0, p + theta * (upper - value) / norm * grad)
    return best
