"""Pricing of the configuration LP's job columns, and the packing cuts it honours (see
:mod:`palopt.solvers.exact.colgen`).

A *column* of a job is a GPU set with a *label*: the pattern (tier ``t``, group ``G``,
threshold ``v``) it was priced under, at the pattern's cost ``w * v * penalty[t]``, which is at
least the set's true cost. A set's own pattern (its smallest group, its slowest GPU) is among
the labels, so optimising over labelled columns is exact; cuts speak of labels, which keeps
pricing a scan over patterns.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from palopt.instance import Instance
from palopt.solvers.round import Round, dense_groups

__all__ = ["Cut", "Column", "Pricer", "price_all", "prefix_least"]


def prefix_least(q: np.ndarray, k: int) -> np.ndarray:
    """Sums of the ``k`` smallest values of every prefix of ``q`` of ``k`` or more values.

    Parameters
    ----------
    q : numpy.ndarray
        Values (at least ``k``).
    k : int
        How many of each prefix are summed (at least 1).

    Returns
    -------
    numpy.ndarray
        Entry ``i``: the sum of the ``k`` smallest of ``q[:k + i]``.

    Examples
    --------
    >>> prefix_least(np.array([3.0, 1.0, 2.0, 0.5]), 2).tolist()
    [4.0, 3.0, 1.5]
    """
    heap = [-x for x in q[:k].tolist()]  # negated: a max-heap of the k smallest so far
    heapq.heapify(heap)
    total = -sum(heap)
    out = [total]
    for x in q[k:].tolist():
        if x < -heap[0]:
            total += x + heapq.heapreplace(heap, -x)
        out.append(total)
    return np.array(out)


def _cheapest(members: np.ndarray, p: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` of ``members`` with the lowest prices ``p`` (ties by their order)."""
    return members[np.argsort(p[members], kind="stable")[:k]]


@dataclass(frozen=True)
class Cut:
    """A packing cut of the configuration LP.

    ``F`` is the free GPUs of group ``group`` of tier ``tier`` whose class-``c`` slowdown is at
    most ``v``. The columns of class-``c`` jobs whose pattern lies in that group with threshold
    at most ``v`` take GPUs of ``F`` only, and those of one placement are disjoint, so a job of
    ``k`` GPUs counting ``k // d`` gives ``sum (k // d) lam <= rhs = |F| // d``. The LP may
    break it (one and a half 16-GPU jobs in the fast GPUs of a rack with 31 of them); no
    placement does.
    """

    c: int
    tier: int
    group: int
    v: float
    d: int
    rhs: int

    def weight(
        self,
        c: int,
        k: int,
        t: int,
        group_at: list[np.ndarray],
        first: int | np.ndarray,
        v: float | np.ndarray,
    ) -> int | np.ndarray:
        """The coefficient, ``k // d`` or 0, of a class-``c`` pattern of ``k`` GPUs with
        threshold ``v`` in the tier-``t`` group of free position ``first``
        (``group_at[tier][first]``: its group at each tier); per entry, broadcast, if ``first``
        or ``v`` are arrays."""
        if c != self.c or self.tier < t:
            return 0
        return (k // self.d) * ((group_at[self.tier][first] == self.group) & (v <= self.v))


@dataclass(frozen=True)
class Column:
    """A job column as priced: free positions, cost ``w * v * penalty[tier]`` (the pattern's,
    at least the set's true cost), the pattern's tier and threshold, and the reduced cost."""

    gpus: np.ndarray
    cost: float
    tier: int
    v: float
    rc: float


class Pricer:
    """Exact pricing of one job over every (tier, group, threshold) pattern."""

    def __init__(self, rnd: Round) -> None:
        inst = rnd.instance
        self.inst = inst
        self.free = np.flatnonzero(rnd.free)
        self.groups = [g[self.free] for g in dense_groups(inst)]
        self.tiers = range(len(inst.topology.tiers))
        self.cut_prices: dict[int, list[tuple[Cut, float]]] = {}
        self.tables: dict[int, list[tuple[float, np.ndarray, np.ndarray, np.ndarray]]] = {}

    def set_cut_prices(self, cuts: list[Cut], sigma: np.ndarray) -> None:
        """Price the cut rows at ``sigma`` (>= 0, one per cut) from now on."""
        self.cut_prices = {}
        for cut, s in zip(cuts, sigma, strict=True):
            if s > 0:
                self.cut_prices.setdefault(cut.c, []).append((cut, float(s)))

    def _tables(self, c: int) -> list[tuple[float, np.ndarray, np.ndarray, np.ndarray]]:
        """Per tier: its penalty for class ``c``, and per group (one row each, padded) the
        free positions by slowdown (padding: ``len(free)``), their slowdowns (padding: inf)
        and the group's size."""
        if c not in self.tables:
            sf = self.inst.slowdown[c, self.free]
            n = len(self.free)
            out = []
            for t in self.tiers:
                order = np.lexsort((sf, self.groups[t]))
                g = self.groups[t][order]
                starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
                size = np.diff(np.r_[starts, n])
                row = np.repeat(np.arange(len(starts)), size)
                col = np.arange(n) - np.repeat(starts, size)
                idx = np.full((len(starts), int(size.max())), n)
                idx[row, col] = order
                sfm = np.full(idx.shape, np.inf)
                sfm[row, col] = sf[order]
                out.append((float(self.inst.penalty[c, t]), idx, sfm, size))
            self.tables[c] = out
        return self.tables[c]

    def least(self, c: int, k: int, w: float, p: np.ndarray) -> tuple[float, np.ndarray]:
        """The least ``w * cost(S) + p(S)`` over the ``k``-GPU sets ``S`` of free positions
        (plus the cut rows' charges, if :meth:`set_cut_prices` priced any), and a set that
        attains it.

        The search of :meth:`columns`; this is the hot path of :func:`lagrangian_bound
        <palopt.solvers.exact.colgen.lagrangian_bound>`. Parameters as for :meth:`columns`.

        Returns
        -------
        value : float
        gpus : numpy.ndarray
            Free positions of a set that attains ``value``.
        """
        found = self._scan(c, k, w, p)
        if not found:
            return np.inf, np.arange(k)
        *_, members, value = found[-1]
        return value, _cheapest(members, p, k)

    def columns(self, c: int, k: int, w: float, p: np.ndarray) -> list[Column]:
        """Least-priced columns for a ``k``-GPU job of class ``c`` and weight ``w``, tier by
        tier from the lowest: each tier's cheapest column if it beats those of the tiers before
        it, so the last one is the least over all tiers. A column's reduced cost is
        ``w * v * penalty + p(S)`` plus the cut rows' charges (the job's convexity dual left
        out).

        The least over patterns, vectorised over the groups of a tier: per threshold rank one
        numpy step over all groups, each group's ``k`` lowest prices kept in a sorted array;
        the top tier, one group, by a heap over its prefix, cut off where no threshold can beat
        the best found. Groups that cannot beat it (their ``k``-th threshold plus their ``k``
        lowest prices) are skipped.

        Parameters
        ----------
        c, k : int
            The job's class and size.
        w : float
            The job's weight.
        p : numpy.ndarray
            A price (>= 0) per free position.

        Returns
        -------
        list of Column
            At most one per tier, reduced costs decreasing.
        """
        return [
            Column(_cheapest(members, p, k), w * v * pen, t, v, value)
            for t, pen, v, members, value in self._scan(c, k, w, p)
        ]

    def patterns(
        self, c: int, k: int, w: float, p: np.ndarray, stop: float
    ) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
        """Every pattern whose least priced set is below ``stop``, for reduced-cost fixing.

        The search of :meth:`columns` with the bar held at ``stop``. Parameters as there.

        Returns
        -------
        dict
            (tier, dense group) -> (thresholds ascending, per threshold ``v`` the least
            ``w * v * penalty + p(S)`` plus the cut charges over the ``k``-sets ``S`` of the
            group no slower than ``v``). Only values below ``stop`` are listed, and only
            patterns with one.
        """
        out: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._scan(c, k, w, p, stop, out)
        return out

    def _scan(
        self,
        c: int,
        k: int,
        w: float,
        p: np.ndarray,
        stop: float = np.inf,
        every: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> list[tuple[int, float, float, np.ndarray, float]]:
        """The search of :meth:`columns`: per tier that beats the tiers before it, (tier,
        penalty, threshold, the pattern's members, least reduced cost). With ``every``, the
        bar stays at ``stop`` and each pattern below it goes into ``every`` (see
        :meth:`patterns`) instead."""
        padded = np.append(p, np.inf)
        found: list[tuple[int, float, float, np.ndarray, float]] = []
        best = stop
        for t, (pen, idx, sfm, size) in enumerate(self._tables(c)):
            rows = np.flatnonzero(size >= k)
            if not len(rows):
                continue
            base = w * pen * sfm[rows]  # the pattern cost of each threshold
            prices = padded[idx[rows]]
            # No set of a group costs less than its k-th threshold plus its k lowest prices.
            low = np.partition(prices, k - 1, axis=1)[:, :k].sum(axis=1)
            keep = base[:, k - 1] + low < best
            if not keep.any():
                continue
            rows, base, prices, low = rows[keep], base[keep], prices[keep], low[keep]
            charged = base
            if c in self.cut_prices:
                charged = base + self._charges(c, k, t, rows, sfm[rows])
            at: tuple[int, int] | None = None
            if len(rows) == 1:  # one group (the top tier): a heap scan up to where it can help
                end = max(k, int(np.searchsorted(base[0] + low[0], best)))
                value = charged[0, k - 1 : end] + prefix_least(prices[0, :end], k)
                if every is None and value.min() < best:
                    i = int(np.argmin(value))
                    best, at = float(value[i]), (0, k - 1 + i)
            else:
                kept = np.sort(prices[:, :k], axis=1)  # each group's k lowest prices so far
                total = kept.sum(axis=1)
                values = []  # per threshold rank, each group's value (kept only for every)
                for j in range(k - 1, prices.shape[1]):
                    if j >= k:
                        x = prices[:, j]
                        total -= np.maximum(0.0, kept[:, -1] - x)
                        if (x < kept[:, -1]).any():
                            kept = np.sort(np.column_stack([kept, x]), axis=1)[:, :k]
                    if (base[:, j] + low).min() >= best:
                        break
                    value = charged[:, j] + total
                    if every is not None:
                        values.append(value)
                        continue
                    i = int(np.argmin(value))
                    if value[i] < best:
                        best, at = float(value[i]), (i, j)
            if every is not None:
                table = value[None] if len(rows) == 1 else np.array(values).T
                self._record(every, t, k, idx[rows], sfm[rows], table, stop)
            elif at is not None:
                i, j = at
                found.append((t, pen, float(sfm[rows[i], j]), idx[rows[i], : j + 1], best))
        return found

    def _record(
        self,
        every: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]],
        t: int,
        k: int,
        idx: np.ndarray,
        sfm: np.ndarray,
        value: np.ndarray,
        stop: float,
    ) -> None:
        """Put into ``every`` the patterns of tier ``t``'s groups (rows of ``idx``, ``sfm``)
        whose value is below ``stop`` (``value[r, i]``: at threshold ``sfm[r, k - 1 + i]``),
        at the last member of each run of equal thresholds."""
        cols = np.arange(k - 1, k - 1 + value.shape[1])
        nxt = np.column_stack([sfm, np.full(len(sfm), np.inf)])[:, cols + 1]
        ok = (value < stop) & (sfm[:, cols] != nxt)
        for r in np.flatnonzero(ok.any(axis=1)).tolist():
            every[(t, int(self.groups[t][idx[r, 0]]))] = (sfm[r, cols][ok[r]], value[r][ok[r]])

    def _charges(self, c: int, k: int, t: int, rows: np.ndarray, sfm: np.ndarray) -> np.ndarray:
        """What the priced cuts charge the class-``c``, ``k``-GPU patterns of tier ``t``'s
        groups ``rows`` at each threshold ``sfm`` (same shape)."""
        charge = np.zeros(sfm.shape)
        first = self._tables(c)[t][1][rows, :1]  # a member of each group
        for cut, s in self.cut_prices.get(c, ()):
            charge += s * cut.weight(c, k, t, self.groups, first, sfm)
        return charge


def price_all(
    pricer: Pricer,
    inst: Instance,
    multi: list[int],
    cls: np.ndarray,
    p_sep: np.ndarray,
    p: np.ndarray,
    mu: np.ndarray,
    tolerance: float,
) -> tuple[float, list[tuple[int, Column]]]:
    """Price every job at ``p_sep``: the sum of their least ``cost + p_sep(S)`` (cut prices
    included) and the columns (the best of each tier) whose reduced cost at the LP duals
    ``(mu, p)`` is negative. Jobs of one class, size and weight share one pricing (their duals
    ``mu`` only shift it).

    Parameters
    ----------
    pricer : Pricer
        The pricer of the round; its cut prices (:meth:`Pricer.set_cut_prices`) are charged.
    inst : Instance
        The round's instance.
    multi : list of int
        Queue positions of the multi-GPU jobs, in the order of the master's job rows.
    cls : numpy.ndarray
        Class index of each queue position (:meth:`Instance.job_class_indices`).
    p_sep : numpy.ndarray
        The prices to price at (>= 0), one per free position.
    p : numpy.ndarray
        The LP's GPU prices (>= 0), one per free position.
    mu : numpy.ndarray
        The LP's convexity duals, one per job of ``multi``.
    tolerance : float
        A column is returned if its reduced cost at ``(mu, p)`` is below ``-tolerance``.

    Returns
    -------
    value : float
        The sum over the jobs of their least ``cost + p_sep(S)`` (plus cut charges); ``inf``
        if a job has no set.
    new : list of (int, Column)
        Index into ``multi`` and a column of that job, for each column found.

    Examples
    --------
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 2, "A"), Job("b", 2, "A")))
    >>> rnd = make_round(inst)
    >>> pricer, cls = Pricer(rnd), inst.job_class_indices()
    >>> p = np.zeros(4)
    >>> price_all(pricer, inst, [0, 1], cls, p, p, np.zeros(2), 1e-7)  # each job alone
    (2.0, [])
    >>> p = np.array([0.0, 0.0, 0.5, 0.5])  # server 1's GPUs priced: server 0 is cheaper now
    >>> value, new = price_all(pricer, inst, [0, 1], cls, p, p, np.array([2.0, 1.0]), 1e-7)
    >>> value, [(j, col.gpus.tolist(), col.cost) for j, col in new]
    (2.6, [(0, [0, 1], 1.3)])
    """
    value = 0.0
    new: list[tuple[int, Column]] = []
    priced: dict[tuple[int, int, float], tuple[float, list[tuple[float, Column]]]] = {}
    for j, pos in enumerate(multi):
        job = inst.queue[pos]
        key = (int(cls[pos]), job.num_gpus, float(job.weight))
        if key not in priced:
            cols = pricer.columns(key[0], key[1], key[2], p_sep)
            priced[key] = (
                min((col.rc for col in cols), default=np.inf),
                [(col.rc - p_sep[col.gpus].sum() + p[col.gpus].sum(), col) for col in cols],
            )
        least, at_lp = priced[key]
        value += least
        new.extend((j, col) for rc_lp, col in at_lp if rc_lp - mu[j] < -tolerance)
    return value, new
