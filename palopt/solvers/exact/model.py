"""The exact placement model, built once as sparse integer rows for every back end.

Notation: the round's open jobs (see :mod:`palopt.solvers.round`); *types* are classes of
interchangeable free GPUs (same lowest-tier group, same slowdown for every class in the queue).

Jobs of two or more GPUs choose a *pattern*: a group ``G`` of some tier ``t`` and a threshold
``v`` (one of the class's slowdowns inside ``G``); the job then takes ``k`` GPUs of ``G`` no slower
than ``v`` and is charged ``w * v * penalty[class, t]``. The cheapest pattern of a GPU set is its
own tier and its slowest GPU, so the model's optimum is the true optimum. Thresholds are written
incrementally, ``b[j, G, l] = 1`` iff the job is in ``G`` with threshold at least ``v_l``
(``b`` non-increasing in ``l``), which keeps the linking rows short:

- ``sum_G b[j, G, 0] = 1``; ``b[j, G, l] <= b[j, G, l - 1]``;
- ``sum_tau x[j, tau] = k_j``; ``x[j, tau] <= n_tau * sum_{G contains tau} b[j, G, l(tau, G)]``
  where ``l(tau, G)`` is the first threshold of ``G`` no faster than ``tau``;
- ``sum_{tau in G, sf <= v_l} x[j, tau] >= k_j * (b[j, G, 0] - b[j, G, l + 1])`` for every
  threshold (valid cuts: a job in ``G`` with threshold at most ``v_l`` has all its GPUs there;
  they tighten the relaxation);
- 1-GPU jobs of one class and weight are one commodity ``m`` with ``sum_tau z[m, tau] = n_m``;
- ``sum_j x[j, tau] + sum_m z[m, tau] <= n_tau``;
- interchangeable jobs (same class, size and weight) in one order: a job's key, its pattern's
  (tier, group) then its threshold's rank, does not decrease along the queue
  (:func:`_order_jobs`); without it a solver proves each bound once per permutation.

Costs are floats; models need integers. Every cost is scaled by ``scale`` and rounded *down*, so
the scaled optimum divided by ``scale`` is a valid lower bound on the true optimum, and a proven
scaled optimum is within ``(number of jobs) / scale`` of the true one.

Patterns that cannot be in a solution better than a known upper bound ``ub`` are left out:
a job's cost is at most ``ub`` minus the other jobs' best costs alone.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from palopt.solvers.bounds import single_gpu_costs
from palopt.solvers.exact.colgen import ColumnGeneration
from palopt.solvers.greedy import GreedyPlacer
from palopt.solvers.round import Round, dense_groups

__all__ = ["SparseModel", "PlacementModel", "build_model", "OutOfTime"]

#: :meth:`SparseModel.matrix`: row lengths, variables, coefficients, lower and upper bounds.
Matrix = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass
class SparseModel:
    """Integer variables, linear rows and an integer objective, back-end neutral."""

    lower: list[int] = field(default_factory=list)
    upper: list[int] = field(default_factory=list)
    objective: list[int] = field(default_factory=list)
    rows: list[tuple[list[int], list[int], float, float]] = field(default_factory=list)
    _matrix: Matrix | None = field(default=None, init=False, repr=False, compare=False)

    def var(self, upper: int, cost: int = 0) -> int:
        """Add an integer variable in ``[0, upper]``; returns its index."""
        self.lower.append(0)
        self.upper.append(int(upper))
        self.objective.append(int(cost))
        return len(self.upper) - 1

    def row(self, idx: list[int], coef: list[int], lo: float, hi: float) -> None:
        """Add ``lo <= sum coef * var[idx] <= hi`` (use +-inf for a one-sided row)."""
        self.rows.append((idx, coef, lo, hi))
        self._matrix = None

    @property
    def n_vars(self) -> int:
        """Number of variables."""
        return len(self.upper)

    @property
    def n_nonzeros(self) -> int:
        """Number of nonzero coefficients in the rows."""
        return sum(len(idx) for idx, *_ in self.rows)

    def matrix(self) -> Matrix:
        """The rows as arrays: each row's length, then all rows' variables and coefficients in
        row order (integers), and the rows' lower and upper bounds (floats, possibly infinite).
        Read-only, and kept until the next :meth:`row` (a back end and the check of its answer
        share them).
        """
        if self._matrix is None:
            rows = self.rows
            lengths = np.fromiter((len(r[0]) for r in rows), np.int64, len(rows))
            nnz = int(lengths.sum())
            chain = itertools.chain.from_iterable
            idx = np.fromiter(chain(r[0] for r in rows), np.int64, nnz)
            coef = np.fromiter(chain(r[1] for r in rows), np.int64, nnz)
            lo = np.fromiter((r[2] for r in rows), np.float64, len(rows))
            hi = np.fromiter((r[3] for r in rows), np.float64, len(rows))
            for array in (lengths, idx, coef, lo, hi):
                array.setflags(write=False)
            self._matrix = (lengths, idx, coef, lo, hi)
        return self._matrix

    def satisfied(self, solution: np.ndarray) -> bool:
        """Whether an integer solution satisfies every bound and row."""
        sol = np.rint(solution).astype(np.int64)
        if (sol < np.asarray(self.lower)).any() or (sol > np.asarray(self.upper)).any():
            return False
        lengths, idx, coef, lo, hi = self.matrix()
        ends = np.cumsum(lengths)
        total = np.r_[0, np.cumsum(sol[idx] * coef)]  # integers: exact
        value = total[ends] - total[ends - lengths]
        return bool(((value >= lo) & (value <= hi)).all())

    def value(self, solution: np.ndarray) -> int:
        """Objective of an integer solution vector."""
        return int(
            np.dot(np.asarray(self.objective, dtype=np.int64), np.rint(solution).astype(np.int64))
        )


@dataclass
class PlacementModel:
    """A :class:`SparseModel` with the maps needed to write a start and read a solution."""

    sparse: SparseModel
    scale: float
    type_gpus: list[np.ndarray]
    x: dict[tuple[int, int], int]  # (queue position, type) -> var
    z: dict[tuple[int, int], int]  # (commodity, type) -> var
    patterns: dict[int, list[tuple[int, int, np.ndarray, list[int]]]]  # pos -> (t, G, v, b vars)
    commodities: list[list[int]]
    gpu_type: np.ndarray  # type of each GPU, -1 if not free
    dgroups: list[np.ndarray]  # dense group of each GPU per tier
    n_patterns: int = 0
    kinds: list[list[int]] = field(default_factory=list)  # interchangeable jobs, in order
    order_key: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)

    def start(self, chosen: dict[int, np.ndarray], rnd: Round) -> np.ndarray | None:
        """The solution vector of a placement of ``rnd``'s open jobs, or ``None`` if the model
        cannot express it (a pattern left out by the bound). Interchangeable jobs trade GPU
        sets first, if need be, to follow the model's order (if the traded placement cannot be
        expressed, the vector is the placement as given: a hint that breaks the order rows)."""
        sol = self._vector(chosen, rnd)
        if sol is None:
            return None
        swapped = dict(chosen)
        for positions in self.kinds:
            keys = [int(np.dot(sol[self.order_key[p][0]], self.order_key[p][1])) for p in positions]
            order = np.argsort(keys, kind="stable")
            swapped.update(zip(positions, [chosen[positions[i]] for i in order], strict=True))
        if all(swapped[p] is chosen[p] for p in chosen):
            return sol
        ordered = self._vector(swapped, rnd)
        return sol if ordered is None else ordered

    def _vector(self, chosen: dict[int, np.ndarray], rnd: Round) -> np.ndarray | None:
        inst = rnd.instance
        sol = np.zeros(self.sparse.n_vars, dtype=np.int64)
        for pos, pats in self.patterns.items():
            gpus = chosen[pos]
            c = inst.class_index[inst.queue[pos].job_class]
            worst = float(inst.slowdown[c, gpus].max())
            t0 = inst.topology.tier_index(gpus)
            best = None
            for t, g, values, bvars in pats:
                if t < t0 or self.dgroups[t][gpus[0]] != g:
                    continue
                n_on = int(np.searchsorted(values, worst, side="left")) + 1
                if n_on > len(values):
                    continue
                cost = sum(self.sparse.objective[v] for v in bvars[:n_on])
                if best is None or cost < best[0]:
                    best = (cost, bvars[:n_on])
            if best is None:
                return None
            sol[best[1]] = 1
            for tau, n in zip(*np.unique(self.gpu_type[gpus], return_counts=True), strict=True):
                key = (pos, int(tau))
                if key not in self.x:
                    return None
                sol[self.x[key]] = n
        for m, positions in enumerate(self.commodities):
            taus = self.gpu_type[np.concatenate([chosen[p] for p in positions])]
            for tau, n in zip(*np.unique(taus, return_counts=True), strict=True):
                key = (m, int(tau))
                if key not in self.z:
                    return None
                sol[self.z[key]] = n
        return sol

    def decode(self, solution: np.ndarray) -> dict[int, np.ndarray]:
        """Queue position -> GPU indices from an integer solution vector."""
        pools = [list(g) for g in self.type_gpus]
        sol = np.rint(solution).astype(np.int64)
        chosen: dict[int, list[int]] = {}
        for (pos, tau), var in self.x.items():
            for _ in range(sol[var]):
                chosen.setdefault(pos, []).append(pools[tau].pop())
        for (m, tau), var in self.z.items():
            for _ in range(sol[var]):
                positions = self.commodities[m]
                pos = next(p for p in positions if p not in chosen)
                chosen[pos] = [pools[tau].pop()]
        return {p: np.sort(np.asarray(g, dtype=np.int64)) for p, g in chosen.items()}


def _types(rnd: Round) -> tuple[np.ndarray, list[np.ndarray]]:
    """GPU -> type (-1 if not free) and the GPUs of each type (needs at least one open job)."""
    inst = rnd.instance
    free = np.flatnonzero(rnd.free)
    used = sorted({inst.class_index[inst.queue[p].job_class] for p in rnd.open_positions})
    keys = np.vstack(
        [inst.topology.groups[0, free].astype(np.float64), inst.slowdown[used][:, free]]
    )
    _, inverse = np.unique(keys, axis=1, return_inverse=True)
    inverse = inverse.ravel()
    gpu_type = np.full(inst.topology.n_gpus, -1, dtype=np.int64)
    gpu_type[free] = inverse
    order = np.argsort(inverse, kind="stable")
    cuts = np.searchsorted(inverse[order], np.arange(1, int(inverse.max()) + 1))
    return gpu_type, np.split(free[order], cuts)


class OutOfTime(Exception):
    """:func:`build_model` passed its deadline."""


def build_model(
    rnd: Round,
    scale: float,
    upper_bound: float | None = None,
    fixing: ColumnGeneration | None = None,
    deadline: float = np.inf,
) -> PlacementModel:
    """Build the model of ``rnd``'s open jobs (see the module documentation).

    Parameters
    ----------
    rnd : Round
    scale : float
        Costs are multiplied by ``scale`` and rounded down to integers.
    upper_bound : float, optional
        The weighted cost of a known placement of the open jobs; patterns that cannot beat it
        are left out (that placement stays expressible).
    fixing : ColumnGeneration, optional
        A converged column generation: with ``upper_bound``, patterns and 1-GPU choices whose
        reduced cost shows they cannot beat it are left out too.
    deadline : float, default inf
        A :func:`time.perf_counter` reading: building stops once it passes (checked at the
        start, per multi-GPU job and per group cover). A full-load round of 1,024 GPUs takes
        seconds.

    Returns
    -------
    PlacementModel

    Raises
    ------
    OutOfTime
        When ``deadline`` passes before the model is built.

    Examples
    --------
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.greedy import greedy_assignment
    >>> from palopt.solvers.round import make_round, round_cost
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 1, "A"), Job("b", 2, "A")))
    >>> rnd = make_round(inst)
    >>> chosen = greedy_assignment(rnd)
    >>> model = build_model(rnd, 1e6, upper_bound=round_cost(inst, chosen))
    >>> build_model(rnd, 1e6).n_patterns, model.n_patterns  # the bound leaves out three
    (4, 1)
    >>> start = model.start(chosen, rnd)
    >>> model.sparse.satisfied(start), model.sparse.value(start) / model.scale
    (True, 2.0)
    >>> {p: g.tolist() for p, g in sorted(model.decode(start).items())}
    {0: [0], 1: [2, 3]}
    """
    if time.perf_counter() > deadline:
        raise OutOfTime
    inst = rnd.instance
    topo = inst.topology
    gpu_type, type_gpus = _types(rnd)
    n_types = len(type_gpus)
    rep = np.array([g[0] for g in type_gpus], dtype=np.int64)
    cnt = np.array([len(g) for g in type_gpus], dtype=np.int64)
    dgroups = dense_groups(inst)
    tgroup = [dg[rep] for dg in dgroups]  # group of each type per tier
    n_tiers = len(topo.tiers)
    # Per tier: types of each group, and whether the group has two or more child groups.
    members: list[dict[int, np.ndarray]] = []
    split: list[dict[int, bool]] = []
    for t in range(n_tiers):
        by_group = {int(g): np.flatnonzero(tgroup[t] == g) for g in np.unique(tgroup[t])}
        members.append(by_group)
        split.append(
            {g: t == 0 or len(np.unique(tgroup[t - 1][tau])) > 1 for g, tau in by_group.items()}
        )
    parent_split = [
        {
            int(tgroup[t][tau[0]]): split[t + 1][int(tgroup[t + 1][tau[0]])]
            for tau in members[t].values()
        }
        if t + 1 < n_tiers
        else {}
        for t in range(n_tiers)
    ]

    greedy = GreedyPlacer(rnd)
    alone: dict[int, float] = {}
    for pos in rnd.multi:
        job = inst.queue[pos]
        alone[pos] = job.weight * greedy.best(rnd.free, int(greedy.cls[pos]), job.num_gpus)[0]
    counts, _, single_cost = single_gpu_costs(rnd)
    single_alone = [
        float(np.partition(row, n - 1)[:n].sum())
        for row, n in zip(single_cost, counts, strict=True)
    ]
    lb_total = sum(alone.values()) + sum(single_alone)
    slack = np.inf if upper_bound is None else upper_bound - lb_total + 1e-9 * abs(upper_bound)
    pattern_rc = None
    if fixing is not None and upper_bound is not None:
        pattern_rc = fixing.pattern_rc(upper_bound)
        rc_cut = fixing.fixing_cutoff(upper_bound)

    sp = SparseModel()
    x: dict[tuple[int, int], int] = {}
    patterns: dict[int, list[tuple[int, int, np.ndarray, list[int]]]] = {}
    usable: dict[tuple[int, int], list[int]] = {}  # (pos, type) -> b vars that allow it
    covers: list[tuple[int, int, np.ndarray, list[int], np.ndarray]] = []
    n_patterns = 0
    for pos in rnd.multi:
        if time.perf_counter() > deadline:
            raise OutOfTime
        job = inst.queue[pos]
        c, k, w = inst.class_index[job.job_class], job.num_gpus, job.weight
        cap = alone[pos] + slack
        sf_t = inst.slowdown[c, rep]
        pats = []
        for t in range(n_tiers):
            pen = float(inst.penalty[c, t])
            for g, gtypes in members[t].items():
                if not split[t][g]:
                    continue
                if t + 1 < n_tiers and parent_split[t][g] and inst.penalty[c, t + 1] <= pen:
                    continue
                if cnt[gtypes].sum() < k:
                    continue
                order = np.argsort(sf_t[gtypes], kind="stable")
                vals, first = np.unique(sf_t[gtypes][order], return_index=True)
                cum = np.cumsum(cnt[gtypes][order])
                reach = cum[np.r_[first[1:], len(order)] - 1]  # GPUs no slower than each value
                keep = (reach >= k) & (w * vals * pen <= cap)
                if pattern_rc is not None:
                    fixed = pattern_rc.get((pos, t, g))
                    if fixed is None:
                        continue
                    keep &= np.isin(vals, fixed[0][fixed[1] <= rc_cut])
                vals = vals[keep]
                if not len(vals):
                    continue
                costs = np.floor(w * vals * pen * scale).astype(np.int64)
                incr = np.diff(np.r_[0, costs])
                bvars = [sp.var(1, int(d)) for d in incr]
                for a, b in zip(bvars[1:], bvars[:-1], strict=True):
                    sp.row([a, b], [1, -1], -np.inf, 0)
                level = np.searchsorted(vals, sf_t[gtypes], side="left")
                for tt, lv in zip(gtypes, level, strict=True):
                    if lv < len(vals):
                        usable.setdefault((pos, int(tt)), []).append(bvars[lv])
                pats.append((t, g, vals, bvars))
                covers.append((pos, k, gtypes, bvars, level))
                n_patterns += len(vals)
        patterns[pos] = pats
        sp.row([p[3][0] for p in pats], [1] * len(pats), 1, 1)
    for (pos, tau), bvars in usable.items():
        k = inst.queue[pos].num_gpus
        x[(pos, tau)] = v = sp.var(min(int(cnt[tau]), k))
        sp.row([v, *bvars], [1] + [-int(cnt[tau])] * len(bvars), -np.inf, 0)
    for pos in rnd.multi:
        idx = [x[(pos, tau)] for tau in range(n_types) if (pos, tau) in x]
        sp.row(idx, [1] * len(idx), inst.queue[pos].num_gpus, inst.queue[pos].num_gpus)
    for pos, k, gtypes, bvars, level in covers:
        if time.perf_counter() > deadline:
            raise OutOfTime
        # In G with threshold at most v_l: all k GPUs are in G and no slower than v_l.
        held = np.array([(pos, int(tt)) in x for tt in gtypes], dtype=bool)
        xs = np.array([x[(pos, int(tt))] for tt in gtypes[held]], dtype=np.int64)
        at = level[held]
        for last in range(len(bvars)):
            idx = xs[at <= last].tolist()
            nxt = [bvars[last + 1]] if last + 1 < len(bvars) else []
            sp.row([*idx, bvars[0], *nxt], [1] * len(idx) + [-k] + [k] * len(nxt), 0, np.inf)

    kinds, order_key = _order_jobs(rnd, sp, patterns, rep, [len(np.unique(d)) for d in dgroups])
    z: dict[tuple[int, int], int] = {}
    commodities = list(rnd.single_groups().values())
    free_idx = np.flatnonzero(rnd.free)
    for m, positions in enumerate(commodities):
        cost_g = single_cost[m]
        cap = float(np.partition(cost_g, len(positions) - 1)[len(positions) - 1]) + slack
        per_type = np.full(n_types, np.inf)
        np.minimum.at(per_type, gpu_type[free_idx], cost_g)
        allowed = per_type <= cap
        if pattern_rc is not None and fixing is not None:
            rc_type = np.full(n_types, np.inf)
            np.minimum.at(rc_type, gpu_type[free_idx], fixing.single_rc[m])
            allowed &= rc_type <= rc_cut
        zs = []
        for ty in np.flatnonzero(allowed):
            z[(m, int(ty))] = v = sp.var(
                min(int(cnt[ty]), len(positions)), int(np.floor(per_type[ty] * scale))
            )
            zs.append(v)
        sp.row(zs, [1] * len(zs), len(positions), len(positions))
    by_type: dict[int, list[int]] = {}
    for (_, kind), v in list(x.items()) + list(z.items()):
        by_type.setdefault(kind, []).append(v)
    for kind, users in by_type.items():
        if len(users) > 1:
            sp.row(users, [1] * len(users), -np.inf, int(cnt[kind]))
    return PlacementModel(
        sp,
        scale,
        type_gpus,
        x,
        z,
        patterns,
        commodities,
        gpu_type,
        dgroups,
        n_patterns,
        kinds,
        order_key,
    )


def _order_jobs(
    rnd: Round,
    sp: SparseModel,
    patterns: dict[int, list[tuple[int, int, np.ndarray, list[int]]]],
    rep: np.ndarray,
    n_groups: list[int],
) -> tuple[list[list[int]], dict[int, tuple[list[int], list[int]]]]:
    """Rows that order interchangeable jobs (same class, size and weight).

    Any placement's interchangeable jobs can trade GPU sets without changing its cost, so the
    model keeps one order: a job's key is its pattern's (tier, group) then its threshold's rank,
    ``key = id(t, G) * span + rank(v)``, written on the ``b`` like the cost, and keys do not
    decrease along the queue. Without the rows a solver proves each bound once per permutation
    (four 12-GPU jobs of one class: 24 times).

    Returns
    -------
    kinds : list of list of int
        Queue positions of each set of two or more interchangeable jobs.
    order_key : dict
        Queue position -> (variables, coefficients) of its key.
    """
    inst = rnd.instance
    by_kind: dict[tuple[str, int, float], list[int]] = {}
    for pos in rnd.multi:
        job = inst.queue[pos]
        by_kind.setdefault((job.job_class, job.num_gpus, job.weight), []).append(pos)
    kinds = [positions for positions in by_kind.values() if len(positions) > 1]
    order_key: dict[int, tuple[list[int], list[int]]] = {}
    first_id = np.cumsum([0, *n_groups])
    for positions in kinds:
        levels = np.unique(inst.slowdown[inst.class_index[inst.queue[positions[0]].job_class], rep])
        span = len(levels) + 1
        for pos in positions:
            idx: list[int] = []
            coef: list[int] = []
            for t, g, vals, bvars in patterns[pos]:
                step = np.diff(np.r_[0, np.searchsorted(levels, vals) + 1])
                step[0] += int(first_id[t] + g) * span
                idx += bvars
                coef += [int(c) for c in step]
            order_key[pos] = (idx, coef)
        for a, b in itertools.pairwise(positions):
            (ia, ca), (ib, cb) = order_key[a], order_key[b]
            sp.row(ia + ib, ca + [-c for c in cb], -np.inf, 0)
    return kinds, order_key
