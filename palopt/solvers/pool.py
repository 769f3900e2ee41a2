"""Free-GPU bookkeeping shared by the heuristic solvers.

GPUs of a server have consecutive dense indices, so a server is a slice. Per class, each GPU has
an integer *level*: the rank of its slowdown among the class's distinct values (0 = fastest).
The pool keeps three kinds of counters, all views of one flat integer buffer:

- ``cnt[c, l, s]``: free GPUs of server ``s`` at level ``l`` for class ``c``;
- ``tot[c, l]``: free GPUs at level ``l`` for class ``c``, all servers;
- ``server_free[s]``: free GPUs of server ``s``.

Every GPU owns one cell of each counter, precomputed, so taking or releasing a set of GPUs is a
single ``numpy.subtract.at`` / ``numpy.add.at`` over their cells: no loop over GPUs or classes.
"Which servers have N free GPUs no slower than level l" is a running sum of ``cnt`` rows, never
a search over GPU subsets. Memory is ``classes x levels x servers`` counters, which is small
for binned slowdowns (a handful of levels per class).
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

    Attributes
    ----------
    free : numpy.ndarray
        Boolean mask of free GPUs (neither busy nor taken).
    level : numpy.ndarray
        ``level[c, g]``: level of GPU ``g`` for class ``c``.
    values : list of numpy.ndarray
        Distinct slowdown values of each class, ascending (``values[c][l]`` is level ``l``).
    first_seen : list of numpy.ndarray
        ``first_seen[c][l]``: lowest GPU index having level ``l`` (the order in which the
        artifact's GPU table first shows each value).
    cnt, tot, server_free : numpy.ndarray
        The counters described in the module documentation.
    n_free : int
        Number of free GPUs.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, build_cluster
    >>> topo = build_cluster(1, 2, 2)
    >>> inst = Instance(topo, ("A",), np.array([[1.0, 2.0, 1.0, 1.0]]),
    ...                 np.array([[1.0, 1.7, 1.7]]), ())
    >>> pool = FreePool(inst)
    >>> pool.take(np.array([0, 2]))
    >>> pool.server_free.tolist(), pool.tot[0].tolist()
    ([1, 1], [1, 1])
    """

    def __init__(self, instance: Instance) -> None:
        topo = instance.topology
        self.instance = instance
        self.server = topo.gpu_server
        self.start = topo.server_start
        self.n_servers = topo.n_servers
        self.max_server_size = int(np.diff(self.start).max())
        self.free = ~instance.busy
        n_classes, n = instance.slowdown.shape
        self.values: list[np.ndarray] = []
        self.first_seen: list[np.ndarray] = []
        self.level = np.empty((n_classes, n), dtype=np.int64)
        for c, row in enumerate(instance.slowdown):
            values, first, level = np.unique(row, return_index=True, return_inverse=True)
            self.values.append(values)
            self.first_seen.append(first)
            self.level[c] = level
        n_levels = max(len(v) for v in self.values)
        s = self.n_servers
        cnt_size, tot_size = n_classes * n_levels * s, n_classes * n_levels
        classes = np.arange(n_classes)[:, None]
        cells = np.concatenate([
            (classes * n_levels + self.level) * s + self.server,
            cnt_size + classes * n_levels + self.level,
            cnt_size + tot_size + self.server[None, :],
        ])
        self._cells = np.ascontiguousarray(cells.T)  # (gpus, 2 * classes + 1)
        self._counts = np.bincount(self._cells[self.free].ravel(),
                                   minlength=cnt_size + tot_size + s)
        self.cnt = self._counts[:cnt_size].reshape(n_classes, n_levels, s)
        self.tot = self._counts[cnt_size:cnt_size + tot_size].reshape(n_classes, n_levels)
        self.server_free = self._counts[cnt_size + tot_size:]
        self.n_free = int(self.free.sum())

    def take(self, gpus: np.ndarray) -> None:
        """Mark ``gpus`` (free, distinct) as used."""
        self.free[gpus] = False
        np.subtract.at(self._counts, self._cells[gpus].ravel(), 1)
        self.n_free -= len(gpus)

    def release(self, gpus: np.ndarray) -> None:
        """Mark ``gpus`` (used, not busy, distinct) as free again."""
        self.free[gpus] = True
        np.add.at(self._counts, self._cells[gpus].ravel(), 1)
        self.n_free += len(gpus)

    def server_gpus(self, s: int) -> np.ndarray:
        """Free GPU indices of server ``s``, ascending."""
        lo, hi = self.start[s], self.start[s + 1]
        return lo + np.flatnonzero(self.free[lo:hi])

    def server_gpus_at(self, c: int, s: int, max_level: int, exact: bool = False) -> np.ndarray:
        """Free GPUs of server ``s`` with level ``<= max_level`` (``== max_level`` if ``exact``)
        for class ``c``, ascending."""
        lo, hi = self.start[s], self.start[s + 1]
        lev = self.level[c, lo:hi]
        ok = lev == max_level if exact else lev <= max_level
        return lo + np.flatnonzero(self.free[lo:hi] & ok)

    def cum_total(self, c: int) -> np.ndarray:
        """``cum_total(c)[l]``: free GPUs of level ``<= l`` for class ``c``."""
        return np.cumsum(self.tot[c])

    def level_for(self, c: int, n: int) -> int | None:
        """The lowest level ``l`` with at least ``n`` free GPUs of level ``<= l``, or ``None``."""
        if self.n_free < n:
            return None
        return int(np.searchsorted(self.cum_total(c), n))

    def pm_first(self, c: int, n: int, best_fit: bool = False) -> np.ndarray | None:
        """PM-First: the ``n`` best free GPUs for class ``c``, or ``None`` if too few are free.

        GPUs are ranked by level, then by a locality score of their *group* (the free GPUs
        sharing their level and server), then by GPU index; the first ``n`` are taken. So all
        free GPUs of the levels below the lowest level ``L`` that completes the job are taken,
        and the rest comes from level ``L``, best-scored groups first.

        Parameters
        ----------
        c : int
            Class index.
        n : int
            Number of GPUs.
        best_fit : bool, default False
            ``False``: the artifact's score ``|group size - n|``, where a group too small to
            hold the job ties with a larger one. ``True``: groups that can hold all GPUs still
            needed from level ``L`` come first, smallest first; then the others, largest
            first, so the job spans as few servers as the level allows.

        Returns
        -------
        numpy.ndarray or None
            GPU indices (unordered).
        """
        top = self.level_for(c, n)
        if top is None:
            return None
        parts: list[np.ndarray] = []
        need = n
        if top > 0:
            lower = np.flatnonzero(self.free & (self.level[c] < top))
            parts.append(lower)
            need -= len(lower)
        row = self.cnt[c, top]
        big = np.iinfo(np.int64).max
        if best_fit:
            score = np.where(row >= need, row - need, self.max_server_size + need - row)
        else:
            score = np.abs(row - n)
        score = np.where(row > 0, score, big)
        while need > 0:
            best = score.min()
            hit = np.flatnonzero(score == best)
            score[hit] = big
            for s in hit:
                gpus = self.server_gpus_at(c, int(s), top, exact=True)[:need]
                parts.append(gpus)
                need -= len(gpus)
                if need == 0:
                    break
        return np.concatenate(parts) if len(parts) > 1 else parts[0]
