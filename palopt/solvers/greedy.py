"""A cost-aware greedy placement: every job takes the cheapest placement by the true cost.

For each job, in turn, the candidates are, at every tier of the topology, the best group of that
tier: the group whose ``k``-th fastest free GPU (for the job's class) is fastest, charged with the
tier's penalty. So a job sees its best server, its best rack and its best anywhere placement, and
takes the cheapest (the lowest tier on ties), on the ``k`` fastest free GPUs of that group. Three
passes are made: queue order, each job on its cheapest placement; and, *with packing* (a job may
cost up to 5% more if that fills a server or a rack instead of scattering over several; see
:meth:`GreedyPlacer.best`), largest jobs first and queue order with the jobs of a rack or more
last. The largest-first pass assigns the 1-GPU jobs optimally to what is left (a transportation
problem, when ``highspy`` is installed). A job of a rack or more pays the rack or cluster
penalty wherever it goes, and spread over racks it pays no more than any smaller job forced
across racks; placed last it takes the GPUs the other jobs leave scattered, and racks stay whole
for the jobs that fit in one. At half load the first pass usually wins; with the cluster full,
packing matters more than a few percent of slowdown. The two cheapest passes are then improved by
local search (:mod:`palopt.solvers.local`: GPU swaps, moves that pull a spread job into one
group, trades between jobs of one size), and the cheaper result is kept: which pass polishes
best is not always the one that starts cheapest. On the full-load 4,096-GPU benchmark rounds
local search takes 0.7-5.4% off a pass's cost; the whole greedy takes 0.1-0.5 s there. Given a
time limit, no move of local search is made after it and the later passes stop there (a pass
cut short is dropped); the first pass runs to its end, as it must place every job.

The greedy places exactly the jobs of :func:`palopt.solvers.round.make_round` (the admitted prefix,
or the first-fit set), so its cost compares directly with the exact solvers' optimum; it is also
their warm start and their fallback.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from palopt.errors import InputError, check_flag, check_time_limit
from palopt.instance import Instance
from palopt.result import PlacementResult
from palopt.solvers.base import build_result, check_arguments, register
from palopt.solvers.local import polish
from palopt.solvers.round import (
    MODES,
    Round,
    dense_groups,
    make_round,
    round_cost,
    single_costs,
    unselected_reasons,
)
from palopt.solvers.transport import transport

__all__ = [
    "GreedySolver",
    "GreedyPlacer",
    "greedy_assignment",
    "PACKING",
]

#: Cost slack of the packing passes: measured on the benchmark families (``palopt bench``), 5%
#: more than halves the full-load gap of the largest-first pass; 2% or 10% do no better.
PACKING = 0.05

#: How many of the cheapest passes local search improves (the cheapest result is kept). On the
#: full-load 1,024- and 4,096-GPU benchmark rounds the pass that starts cheapest polishes best
#: in 15 of 24, one of the two cheapest in 22 of 24. Polishing the third too takes the greedy
#: from 0.25-0.38 s to 0.39-0.61 s at 4,096 GPUs and gains on 3 of 36 full-load rounds.
POLISHED = 2


class GreedyPlacer:
    """The cost-aware greedy over one round: precomputed orders and groups, then passes.

    Parameters
    ----------
    rnd : Round
        The round whose open jobs are placed.
    packing : float, optional
        Place with an eye to packing: a job may cost up to ``1 + packing`` times its cheapest
        placement (on the same tier) when that leaves fewer free GPUs scattered; see
        :meth:`best`. ``None`` (default): always the cheapest placement.
    """

    def __init__(self, rnd: Round, packing: float | None = None) -> None:
        inst = rnd.instance
        self.rnd = rnd
        self.inst = inst
        self.packing = packing
        self.cls = inst.job_class_indices()
        self.groups = dense_groups(inst)
        self.n_groups = [int(g.max()) + 1 for g in self.groups]
        self.room = [int(np.bincount(g).max()) for g in self.groups]  # GPUs in a group, at most
        self.order = [np.argsort(row, kind="stable") for row in inst.slowdown]
        # Per tier and class: GPUs by (group, slowdown), ties by index.
        self.by_group = [[np.lexsort((row, gid)) for row in inst.slowdown] for gid in self.groups]

    def best(self, free: np.ndarray, c: int, k: int) -> tuple[float, np.ndarray]:
        """Cheapest placement of a ``k``-GPU job of class ``c`` on ``free``: (cost, GPUs).

        With ``packing``, the job keeps the cheapest placement's tier but, among the groups of
        that tier it can use for at most ``1 + packing`` times the least cost, takes the one with
        the fewest free GPUs (best fit); across child groups (servers of a rack, say) it takes
        whole child groups first and the rest from the child group it fills best.
        """
        sf = self.inst.slowdown[c]
        pen = self.inst.penalty[c]
        avail = self.order[c][free[self.order[c]]]  # free GPUs, fastest first
        if k == 1 and self.packing is None:
            g = avail[:1]
            return float(sf[g[0]] * pen[0]), g
        best_cost, best_gpus, chosen = np.inf, avail[:k], None
        # The k-th fastest free GPU anywhere: no group of any tier has a faster k-th.
        floor = sf[avail[k - 1]] if len(avail) >= k else np.inf
        for t, gid in enumerate(self.groups):
            if k > self.room[t] or floor * pen[t] >= best_cost:
                continue  # no group of this tier holds k GPUs, or none can beat the best
            if self.n_groups[t] == 1:
                cost = float(floor * pen[t])
                if cost < best_cost:
                    best_cost, best_gpus = cost, avail[:k]
                    chosen = (t, avail, np.array([0]), np.array([len(avail)]), sf[avail[k - 1 : k]])
                continue
            srt = self.by_group[t][c]
            srt = srt[free[srt]]  # free GPUs by (group, slowdown)
            size = np.bincount(gid[srt], minlength=self.n_groups[t])
            fits = size >= k
            ok = (np.cumsum(size) - size)[fits]  # where each group with room starts
            if not len(ok):
                continue
            kth = sf[srt[ok + k - 1]]
            i = int(np.argmin(kth))
            cost = float(kth[i] * pen[t])
            if cost < best_cost:
                best_cost = cost
                best_gpus = srt[ok[i] : ok[i] + k]
                chosen = (t, srt, ok, size[fits], kth)
        if self.packing is None or chosen is None:
            return best_cost, best_gpus
        return self._packed(free, c, k, best_cost * (1 + self.packing), chosen)

    def _packed(
        self, free: np.ndarray, c: int, k: int, cap: float, chosen: tuple[Any, ...]
    ) -> tuple[float, np.ndarray]:
        """The packing choice of :meth:`best` on tier ``chosen[0]`` at cost at most ``cap``."""
        sf = self.inst.slowdown[c]
        # The tier's free GPUs by (group, slowdown), where each usable group starts, its size
        # and its k-th slowdown.
        t, srt, ok, sizes, kth = chosen
        pen = float(self.inst.penalty[c, t])
        usable = np.flatnonzero(kth * pen <= cap)
        i = usable[np.lexsort((kth[usable], sizes[usable]))[0]]  # best fit, then fastest
        members = srt[ok[i] : ok[i] + sizes[i]]
        eligible = members[sf[members] * pen <= cap]  # fastest first
        if t == 0:
            gpus = eligible[:k]
        else:
            child = self.groups[t - 1]
            ch = child[eligible]
            ids, counts = np.unique(ch, return_counts=True)
            room = np.bincount(child[free], minlength=self.n_groups[t - 1])[ids]
            need, parts, rest = k, [], []
            for j in np.lexsort((room - counts, -counts)):
                if counts[j] <= need:
                    parts.append(eligible[ch == ids[j]])
                    need -= int(counts[j])
                else:
                    rest.append(j)
            if need:
                j = min(rest, key=lambda r: (room[r] - need, int(r)))
                parts.append(eligible[ch == ids[j]][:need])
            gpus = np.concatenate(parts)
        tier = self.inst.topology.tier_index(gpus)
        return float(sf[gpus].max() * self.inst.penalty[c, tier]), gpus

    def place(
        self, order: list[int], free: np.ndarray | None = None, deadline: float = np.inf
    ) -> tuple[float, dict[int, np.ndarray]]:
        """One greedy pass over positions in ``order`` on ``free`` (default: the round's free
        GPUs): (total weighted cost, placement). Raises ``TimeoutError`` if the
        :func:`time.perf_counter` reading ``deadline`` passes before the pass ends."""
        free = (self.rnd.free if free is None else free).copy()
        chosen: dict[int, np.ndarray] = {}
        total = 0.0
        q = self.inst.queue
        for pos in order:
            if time.perf_counter() > deadline:
                raise TimeoutError("the greedy pass did not end before its deadline")
            job = q[pos]
            cost, gpus = self.best(free, int(self.cls[pos]), job.num_gpus)
            free[gpus] = False
            chosen[pos] = np.sort(gpus)
            total += job.weight * cost
        return total, chosen

    def place_singles(
        self, free: np.ndarray, positions: list[int]
    ) -> tuple[float, dict[int, np.ndarray]] | None:
        """1-GPU jobs at ``positions`` assigned optimally to ``free`` (a transportation problem);
        ``None`` without ``highspy``."""
        groups = self.rnd.single_groups(positions)
        gpus = np.flatnonzero(free)
        cost = single_costs(self.inst, groups, gpus)
        x = transport([len(v) for v in groups.values()], cost)
        if x is None:
            return None
        chosen = {}
        for row, members in zip(x, groups.values(), strict=True):
            for p, g in zip(members, gpus[row], strict=True):
                chosen[p] = np.array([g], dtype=np.int64)
        return float(cost[x].sum()), chosen

    def place_split(
        self, order: list[int], free: np.ndarray | None = None, deadline: float = np.inf
    ) -> tuple[float, dict[int, np.ndarray]]:
        """Multi-GPU jobs greedily in ``order`` (``TimeoutError`` past ``deadline``, as in
        :meth:`place`), then the 1-GPU jobs optimally (if ``highspy`` is installed, else
        greedily)."""
        q = self.inst.queue
        multi = [p for p in order if q[p].num_gpus > 1]
        singles = [p for p in order if q[p].num_gpus == 1]
        total, chosen = self.place(multi, free, deadline)
        rest = (self.rnd.free if free is None else free).copy()
        for gpus in chosen.values():
            rest[gpus] = False
        placed = self.place_singles(rest, singles) if singles else (0.0, {})
        if placed is None:
            placed = self.place(singles, rest)
        return total + placed[0], {**chosen, **placed[1]}


def greedy_assignment(rnd: Round, deadline: float | None = None) -> dict[int, np.ndarray]:
    """Three greedy passes over ``rnd``'s open jobs; the two cheapest are improved by local
    search (:func:`palopt.solvers.local.polish`) and the cheaper result is returned. The passes:
    queue order, cheapest placement each; largest first with packing (:data:`PACKING`), the 1-GPU
    jobs then placed optimally; and queue order with packing, jobs of at least a rack's GPUs
    (a group of the tier below the top) last.

    Parameters
    ----------
    rnd : Round
        The round whose open jobs are placed, on its free GPUs (fixed jobs are left out).
    deadline : float, optional
        A :func:`time.perf_counter` reading after which the passes under way are dropped, no
        further pass starts and local search stops (the first pass always runs to the end: it
        places every open job); ``None``: none, and the result depends on ``rnd`` alone.

    Returns
    -------
    dict
        Queue position -> GPU indices, for every open position of ``rnd``.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 1, "A"), Job("b", 2, "A")))
    >>> {p: g.tolist() for p, g in sorted(greedy_assignment(make_round(inst)).items())}
    {0: [0], 1: [2, 3]}
    """
    q = rnd.instance.queue
    queue_order = list(rnd.open_positions)
    big_first = sorted(queue_order, key=lambda p: -q[p].num_gpus)
    packer = GreedyPlacer(rnd, packing=PACKING)
    groups = packer.groups
    rack = int(np.bincount(groups[-2]).max()) if len(groups) > 1 else np.inf
    big_last = sorted(queue_order, key=lambda p: q[p].num_gpus >= rack)
    late = np.inf if deadline is None else deadline
    passes = [GreedyPlacer(rnd).place(queue_order)]
    try:
        passes.append(packer.place_split(big_first, deadline=late))
        passes.append(packer.place(big_last, deadline=late))
    except TimeoutError:
        pass  # the passes that ended are kept
    cheapest = sorted(passes, key=lambda o: o[0])[:POLISHED]
    polished = [polish(rnd, chosen, deadline=deadline) for _, chosen in cheapest]
    return min(polished, key=lambda chosen: round_cost(rnd.instance, chosen))


class GreedySolver:
    """Cost-aware greedy placement (see the module documentation).

    Parameters
    ----------
    mode : {"prefix", "choose"}, default "prefix"
        Which jobs run: the admitted queue prefix, or the first-fit set
        (see :mod:`palopt.solvers.round`).
    keep_running : bool, default False
        Keep selected running jobs on their current GPUs.
    time_limit : float, optional
        Seconds for each solve that is given none (see :meth:`solve`); ``None``: no limit.
    """

    name = "greedy"

    def __init__(
        self, mode: str = "prefix", keep_running: bool = False, time_limit: float | None = None
    ) -> None:
        if mode not in MODES:
            raise InputError("greedy.mode", mode, f"must be one of {', '.join(MODES)}")
        self.mode = mode
        self.keep_running = check_flag(keep_running, "greedy.keep_running")
        self.time_limit = (
            None if time_limit is None else check_time_limit(time_limit, "greedy.time_limit")
        )

    def solve(
        self, instance: Instance, *, time_limit: float | None = None, seed: int | None = None
    ) -> PlacementResult:
        """Place the round's jobs; ``seed`` is checked, then ignored.

        Without a time limit (``time_limit``, else the solver's) the result depends on
        ``instance`` alone. With one, local search stops at the limit and the best placement so
        far is returned, so the result may depend on the machine's speed. The later passes stop
        at the limit (a pass cut short is dropped), but the first always runs to its end, as it
        places every job: a solve can take longer than a very small limit.
        ``settings["stopped_at_time_limit"]`` says whether the limit was reached.
        """
        started = time.perf_counter()
        check_arguments(instance, time_limit, seed)
        time_limit = self.time_limit if time_limit is None else time_limit
        deadline = None if time_limit is None else started + time_limit
        rnd = make_round(instance, self.mode, self.keep_running)
        chosen = {**rnd.fixed, **greedy_assignment(rnd, deadline)}
        settings: dict[str, Any] = {"mode": self.mode, "keep_running": self.keep_running}
        if deadline is not None:
            settings["time_limit"] = time_limit
            settings["stopped_at_time_limit"] = time.perf_counter() >= deadline
        reasons = unselected_reasons(rnd, self.mode)
        return build_result(instance, self.name, chosen, reasons, started, settings=settings)


register(
    "greedy",
    GreedySolver,
    "Cost-aware greedy: cheapest server/rack/anywhere per job; three passes (queue order, and "
    "with packing largest first and queue order with rack-sized jobs last), the two cheapest "
    "improved by local search",
    options=("mode", "keep_running", "time_limit"),
)
