"""Free-GPU bookkeeping shared by the heuristic solvers.

GPUs of a server have consecutive dense indices, so a server is a slice. Per class, each GPU has
an integer *level*: the rank of its slowdown among the class's distinct values. The pool keeps,
per class, ``cum[l, s]`` = free GPUs of server ``s`` with level <= ``l``, so "which servers have N
free GPUs no slower than v" is one comparison over servers, never a search over GPU subsets.
"""

from __future__ import annotations

import numpy as np

from palopt.instance import Instance

__all__ = ["FreePool"]


class FreePool:
    """Mutable free-GPU state for one solve.

    Parameters
    ----------
    instance : Instance
        Supplies the topology, the busy mask and the slowdowns ranked by.
    """

    def __init__(self, instance: Instance) -> None:
        topo = instance.topology
        self.instance = instance
        self.server = topo.gpu_server
        self.start = topo.server_start
        self.n_servers = topo.n_servers
        self.max_server_size = int(np.diff(self.start).max())
        self.free = ~instance.busy
        self.server_free = np.bincount(self.server[self.free], minlength=self.n_servers)
        self.n_free = int(self.free.sum())
        self.values: list[np.ndarray] = []  # distinct slowdown values per class, ascending
        self.level: list[np.ndarray] = []  # level of each GPU per class
        self.cnt: list[np.ndarray] = []  # (levels, servers) free GPUs at exactly that level
        self.cum: list[np.ndarray] = []  # (levels, servers) free GPUs at level <= l
        self.cum_total: list[np.ndarray] = []  # (levels,) free GPUs at level <= l, all servers
        for row in instance.slowdown:
            values, level = np.unique(row, return_inverse=True)
            cnt = np.zeros((len(values), self.n_servers), dtype=np.int64)
            np.add.at(cnt, (level[self.free], self.server[self.free]), 1)
            cum = np.cumsum(cnt, axis=0)
            self.values.append(values)
            self.level.append(level)
            self.cnt.append(cnt)
            self.cum.append(cum)
            self.cum_total.append(cum.sum(axis=1))

    def _update(self, gpus: np.ndarray, delta: int) -> None:
        for g in gpus:
            s = self.server[g]
            self.server_free[s] += delta
            for c in range(len(self.level)):
                lvl = self.level[c][g]
                self.cnt[c][lvl, s] += delta
                self.cum[c][lvl:, s] += delta
                self.cum_total[c][lvl:] += delta
        self.n_free += delta * len(gpus)

    def take(self, gpus: np.ndarray) -> None:
        """Mark ``gpus`` (free) as used."""
        self.free[gpus] = False
        self._update(gpus, -1)

    def release(self, gpus: np.ndarray) -> None:
        """Mark ``gpus`` (used, not busy) as free again."""
        self.free[gpus] = True
        self._update(gpus, +1)

    def server_gpus(self, s: int) -> np.ndarray:
        """Free GPU indices of server ``s``, ascending."""
        lo, hi = self.start[s], self.start[s + 1]
        return lo + np.flatnonzero(self.free[lo:hi])

    def lowest_on_server(self, c: int, s: int, n: int) -> np.ndarray:
        """The ``n`` free GPUs of server ``s`` with the lowest levels for class ``c`` (ties by
        index)."""
        cand = self.server_gpus(s)
        order = np.argsort(self.level[c][cand], kind="stable")
        return cand[order[:n]]

    def pm_first(self, c: int, n: int, max_level: int | None = None) -> np.ndarray | None:
        """PM-First: ``n`` free GPUs of level <= ``max_level``, or ``None`` if too few.

        GPUs are ordered by (level, |g - n|, GPU index) where ``g`` is the number of eligible GPUs
        sharing the GPU's level and server: the fastest GPUs first, and among equally fast ones
        those in groups closest to the job's size, so jobs fill groups snugly.
        """
        top = len(self.values[c]) - 1 if max_level is None else max_level
        if self.cum_total[c][top] < n:
            return None
        level = self.level[c]
        out: list[np.ndarray] = []
        need = n
        for lvl in range(top + 1):
            row = self.cnt[c][lvl]
            if not row.any():
                continue
            biggest = int(row.max())
            for score in range(max(n - 1, biggest - n) + 1):
                hit = row == n + score
                if 0 < score < n:
                    hit |= row == n - score
                for s in np.flatnonzero(hit):
                    gpus = self.server_gpus(int(s))
                    gpus = gpus[level[gpus] == lvl]
                    out.append(gpus[:need])
                    need -= len(out[-1])
                    if need == 0:
                        return np.concatenate(out)
        raise AssertionError("pm_first: counts out of sync with the free mask")
