"""Local search on a placement: swap GPUs, consolidate spread jobs, exchange equal-size jobs.

Three moves, each made only if the round's weighted cost falls:

- *swap*: a job's slowest GPU for its class (its bottleneck) trades places with another GPU, free
  or another job's, such that both jobs stay within the group of their tier. All candidate GPUs
  are priced at once. When several GPUs are as slow as the slowest (the Longhorn profiles repeat
  64 measured GPUs, so ties are common), all of them trade at once, each with another owner.
- *consolidate*: a job spread over several groups of the tier below its own moves its GPUs
  outside one of its two largest such groups into that group. It trades them with owners that do
  not mind where a GPU is: free GPUs, 1-GPU jobs, and jobs at the same tier or above. The job
  then drops a tier, say from "rack" (penalty 1.7) to "server" (1.0). Single swaps cannot find
  this: each swap alone leaves the tier, and so the cost, as it was.
- *exchange*: two jobs of the same size trade their GPU sets.

Rounds of moves repeat until a round gains less than :data:`MIN_GAIN` of the cost, or
:data:`MAX_ROUNDS` rounds have run, or (if given) a deadline passes, checked before each swap,
each consolidation and each round's trades (one per job size). The search has no randomness, so
without a deadline a placement always polishes to the same result.
"""

from __future__ import annotations

import time

import numpy as np

from palopt.solvers.round import Round, dense_groups, round_cost

__all__ = ["polish", "Incumbent"]

#: Rounds of moves at most.
MAX_ROUNDS = 50

#: Stop after a round that lowers the cost by less than this share: on the 4,096-GPU benchmark
#: rounds the search would otherwise go on for dozens of rounds of swaps gaining 0.005% each.
MIN_GAIN = 1e-4


class Incumbent:
    """A placement being improved: queue position -> GPUs, and each GPU's job (-1 if none).

    Parameters
    ----------
    n_gpus : int
    chosen : dict
        Queue position -> GPU indices.
    """

    def __init__(self, n_gpus: int, chosen: dict[int, np.ndarray]) -> None:
        self.best = dict(chosen)
        self.owner = np.full(n_gpus, -1, dtype=np.int64)
        for p, g in self.best.items():
            self.owner[g] = p

    def jobs_on(self, mask: np.ndarray) -> set[int]:
        """Positions of the jobs with a GPU in ``mask``."""
        return {int(p) for p in np.unique(self.owner[mask]) if p >= 0}

    def move(self, placed: dict[int, np.ndarray]) -> None:
        """Put the jobs of ``placed`` on their new GPUs (the old ones become free)."""
        for p in placed:
            self.owner[self.best[p]] = -1
        for p, g in placed.items():
            self.best[p] = g
            self.owner[g] = p


class _State(Incumbent):
    """The placement being improved, and per queue position (arrays over the whole queue; only
    the placed positions are used) the job's class, weight, size, tier, two largest slowdowns,
    bottleneck GPU and weighted cost."""

    def __init__(self, rnd: Round, chosen: dict[int, np.ndarray]) -> None:
        inst = rnd.instance
        super().__init__(inst.topology.n_gpus, chosen)
        self.instance = inst
        self.topology = inst.topology
        self.sf = inst.slowdown
        self.pen = inst.penalty
        groups = dense_groups(inst)
        self.groups = np.stack(groups)
        usable = np.flatnonzero(rnd.free)
        self.top_tier = len(groups) - 1
        # Per tier: the usable GPUs by group, and where each group starts.
        self.by_group = [usable[np.argsort(g[usable], kind="stable")] for g in groups]
        self.starts = [
            np.searchsorted(g[o], np.arange(int(g.max()) + 2))
            for g, o in zip(groups, self.by_group, strict=True)
        ]
        # Most usable GPUs in one group of each tier.
        self.room = np.array([int(np.diff(st).max()) for st in self.starts])
        # Per class: the usable GPUs, fastest first, and their slowdowns.
        self.by_speed = [usable[np.argsort(row[usable], kind="stable")] for row in self.sf]
        self.sorted_sf = [row[o] for row, o in zip(self.sf, self.by_speed, strict=True)]
        q = inst.queue
        # One more entry than the queue, last: the owner -1 of a free GPU reads it as a job of
        # one GPU with weight and cost 0, so moves price free GPUs and jobs alike.
        n = len(q) + 1
        self.cls = np.append(inst.job_class_indices(), 0)
        self.w = np.array([job.weight for job in q] + [0.0], dtype=np.float64)
        self.k = np.array([job.num_gpus for job in q] + [1], dtype=np.int64)
        self.placed = np.zeros(n, dtype=bool)
        self.placed[list(chosen)] = True
        self.tier = np.zeros(n, dtype=np.int64)
        self.top = np.full(n, -1, dtype=np.int64)  # the bottleneck GPU
        self.m1 = np.zeros(n)  # largest slowdown
        self.m2 = np.zeros(n)  # second largest (0 for a 1-GPU job)
        self.cost = np.zeros(n)
        self.dirty = np.zeros(n, dtype=bool)  # changed since its last swap attempt
        # Per GPU: usable and free or held by a job that may take a GPU anywhere (a 1-GPU job,
        # or one at the top tier). Only such GPUs, and those of x's own group of the tier
        # below the top, can trade with a bottleneck x of a job at the top tier.
        self.loose = np.zeros(inst.topology.n_gpus, dtype=bool)
        self.loose[usable] = True
        for p in chosen:
            self._refresh(p)

    def _refresh(self, j: int) -> None:
        s = self.best[j]
        v = self.sf[self.cls[j], s]
        i = int(np.argmax(v))
        self.top[j], self.m1[j] = s[i], v[i]
        self.m2[j] = np.partition(v, len(v) - 2)[len(v) - 2] if len(v) > 1 else 0.0
        self.tier[j] = self.topology.tier_index(s)
        self.cost[j] = self.w[j] * self.m1[j] * self.pen[self.cls[j], self.tier[j]]
        self.dirty[j] = True
        self.loose[s] = self.k[j] == 1 or self.tier[j] == self.top_tier

    def _apply(self, new_sets: dict[int, np.ndarray]) -> None:
        vacated = np.concatenate([self.best[j] for j in new_sets])
        self.move(new_sets)
        self.loose[vacated] = True  # free now, unless a moved job took it back (set below)
        for j in new_sets:
            self._refresh(j)

    def _members(self, t: int, group: int) -> np.ndarray:
        return self.by_group[t][self.starts[t][group] : self.starts[t][group + 1]]

    def swap(self, a: int) -> None:
        """Trade job ``a``'s bottleneck GPU for the best other GPU, if that is cheaper."""
        c, x, t = self.cls[a], self.top[a], self.tier[a]
        if self.m2[a] >= self.m1[a]:
            self._swap_ties(a)  # another GPU is as slow: no single swap helps
            return
        if self.k[a] > 1:
            if 0 < t == self.top_tier:  # the loose GPUs and x's group below the top, by index
                near = self.loose.copy()
                near[self._members(t - 1, self.groups[t - 1, x])] = True
                ys = np.flatnonzero(near)
            else:
                ys = self._members(t, self.groups[t, x])
            ys = ys[self.sf[c, ys] < self.m1[a]]
        else:
            ys = self.by_speed[c][: np.searchsorted(self.sorted_sf[c], self.m1[a])]
        b = self.owner[ys]  # -1 (free) reads the zero-cost entry
        tb = self.tier[b]
        # y's owner must stay within its group (a 1-GPU job or a free GPU always does)
        keep = (b != a) & ((self.k[b] == 1) | (self.groups[tb, x] == self.groups[tb, ys]))
        ys, b, tb = ys[keep], b[keep], tb[keep]
        if not len(ys):
            return
        # a's cost with y instead of x (its tier cannot rise: y is in its group)
        delta = self.w[a] * np.maximum(self.m2[a], self.sf[c, ys]) * self.pen[c, t] - self.cost[a]
        kept = np.where(ys == self.top[b], self.m2[b], self.m1[b])  # b's max without y
        cb = self.cls[b]
        delta += self.w[b] * np.maximum(kept, self.sf[cb, x]) * self.pen[cb, tb] - self.cost[b]
        i = int(np.argmin(delta))
        if delta[i] >= -1e-12 * float(self.cost[a]):
            return
        y, bj = int(ys[i]), int(b[i])
        moved = {a: np.where(self.best[a] == x, y, self.best[a])}
        if bj >= 0:
            moved[bj] = np.where(self.best[bj] == y, x, self.best[bj])
        self._apply(moved)

    def _swap_ties(self, a: int) -> None:
        """Trade all of job ``a``'s GPUs as slow as its bottleneck at once, each for a GPU of
        its group no slower than its next slowest, from distinct owners, if that is cheaper."""
        c, t, s = self.cls[a], self.tier[a], self.best[a]
        v = self.sf[c, s]
        slow = v >= self.m1[a]
        out = s[slow]
        if slow.all():
            return
        below = float(v[~slow].max())
        ys = self._members(t, self.groups[t, self.top[a]])
        ys = ys[(self.sf[c, ys] <= below) & (self.owner[ys] != a)]
        if len(ys) < len(out):
            return
        b = self.owner[ys]  # -1 (free) reads the zero-cost entry
        cb, tb = self.cls[b], self.tier[b]
        # b's cost with the worst for it of a's slow GPUs instead of y
        kept = np.where(ys == self.top[b], self.m2[b], self.m1[b])
        incoming = self.sf[cb[:, None], out[None, :]].max(axis=1)
        delta_b = self.w[b] * np.maximum(kept, incoming) * self.pen[cb, tb] - self.cost[b]
        stays = (self.k[b] == 1) | (
            self.groups[tb[:, None], out[None, :]] == self.groups[tb, ys][:, None]
        ).all(axis=1)
        delta_b[~stays] = np.inf
        order = np.argsort(delta_b, kind="stable")
        # at most one GPU of each job (free GPUs are all distinct)
        owners = b[order]
        first = owners < 0
        first[np.flatnonzero(~first)[np.unique(owners[~first], return_index=True)[1]]] = True
        pick = order[first][: len(out)]
        gain = self.w[a] * below * self.pen[c, t] - self.cost[a] + delta_b[pick].sum()
        if len(pick) < len(out) or not gain < -1e-12 * float(self.cost[a]):
            return
        moved = {a: np.concatenate([s[~slow], ys[pick]])}
        for y, x in zip(ys[pick].tolist(), out.tolist(), strict=True):
            bj = int(self.owner[y])
            if bj >= 0:
                moved[bj] = np.where(self.best[bj] == y, x, self.best[bj])
        old = float(sum(self.cost[j] for j in moved))
        if round_cost(self.instance, moved) < old - 1e-12 * old:
            self._apply(moved)

    def consolidate(self, a: int) -> None:
        """Move job ``a`` (above the lowest tier, and small enough for a group of the tier
        below) into one group of the tier below its own, if that is cheaper."""
        t = int(self.tier[a])
        c, s = self.cls[a], self.best[a]
        child = self.groups[t - 1, s]
        ids, counts = np.unique(child, return_counts=True)
        for group in ids[np.argsort(-counts, kind="stable")[:2]]:
            outside = s[child != group]
            pool = self._members(t - 1, int(group))
            pool = pool[self.owner[pool] != a]
            b = self.owner[pool]  # -1 (free) reads the entry of a 1-GPU job
            pool = pool[(self.k[b] == 1) | (self.tier[b] >= t)]
            if len(pool) < len(outside):
                continue
            takes = pool[np.argsort(self.sf[c, pool], kind="stable")[: len(outside)]]
            gives = outside[np.argsort(self.sf[c, outside], kind="stable")]
            new_sets = {a: np.concatenate([s[child == group], takes])}
            for y, x in zip(takes.tolist(), gives.tolist(), strict=True):
                bj = int(self.owner[y])
                if bj >= 0:
                    cur = new_sets.get(bj, self.best[bj])
                    new_sets[bj] = np.where(cur == y, x, cur)
            old = float(sum(self.cost[j] for j in new_sets))
            if round_cost(self.instance, new_sets) < old - 1e-12 * old:
                self._apply(new_sets)
                return

    def exchange(self) -> None:
        """Make the best trade of GPU sets between two jobs of one size, for every size."""
        sizes = self.k[self.placed]
        for size in np.unique(sizes[sizes > 1]).tolist():
            js = np.flatnonzero(self.placed & (self.k == size))
            if len(js) < 2:
                continue
            flat = np.concatenate([self.best[j] for j in js.tolist()])
            # slowest GPU of each set, for every class: classes x jobs
            worst = np.maximum.reduceat(self.sf[:, flat], np.arange(len(js)) * size, axis=1)
            c = self.cls[js]
            # cost of job i on job j's set
            on = self.w[js][:, None] * worst[c, :] * self.pen[c[:, None], self.tier[js][None, :]]
            gain = on + on.T - self.cost[js][:, None] - self.cost[js][None, :]
            i = int(np.argmin(gain))
            if gain.flat[i] < -1e-12 * float(self.cost[js].sum()):
                a, b = int(js[i // len(js)]), int(js[i % len(js)])
                self._apply({a: self.best[b], b: self.best[a]})


def polish(
    rnd: Round,
    chosen: dict[int, np.ndarray],
    deadline: float | None = None,
) -> dict[int, np.ndarray]:
    """Improve a placement of ``rnd``'s open jobs by local search (see the module docs).

    Parameters
    ----------
    rnd : Round
    chosen : dict
        Queue position -> GPU indices, for every open position of ``rnd``.
    deadline : float, optional
        A :func:`time.perf_counter` reading after which no move starts (the best placement so
        far is returned); ``None``: none.

    Returns
    -------
    dict
        A placement of the same jobs that costs no more than ``chosen``.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> from palopt.solvers.round import make_round
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.0, 1.3, 1.1]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 1, "A"), Job("b", 2, "A")))
    >>> start = {0: np.array([0]), 1: np.array([1, 2])}  # b spread over both servers
    >>> {p: g.tolist() for p, g in sorted(polish(make_round(inst), start).items())}
    {0: [3], 1: [0, 1]}
    """
    deadline = np.inf if deadline is None else deadline
    if not chosen or time.perf_counter() >= deadline:  # no move would start: no set-up
        return {p: np.sort(g) for p, g in chosen.items()}
    state = _State(rnd, chosen)
    _search(state, deadline)
    return {p: np.sort(g) for p, g in state.best.items()}


def _search(state: _State, deadline: float) -> None:
    """Rounds of moves on ``state`` until one gains little, :data:`MAX_ROUNDS`, or ``deadline``."""
    for _ in range(MAX_ROUNDS):
        before = float(state.cost.sum())
        for a in np.flatnonzero(state.dirty).tolist():
            if time.perf_counter() >= deadline:
                return
            state.dirty[a] = False
            state.swap(a)
        spread = np.flatnonzero(
            state.placed & (state.tier > 0) & (state.k <= state.room[state.tier - 1])
        )
        for a in spread.tolist():
            if time.perf_counter() >= deadline:
                return
            state.consolidate(a)
        if time.perf_counter() >= deadline:
            return
        state.exchange()
        if float(state.cost.sum()) > before * (1 - MIN_GAIN):
            return
