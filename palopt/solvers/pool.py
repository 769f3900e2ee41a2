"""Free-GPU bookkeeping shared by the heuristic solvers.

GPUs of a server have consecutive dense indices, so a server is a slice. Per class, each GPU has
an integer *level*: the rank of its slowdown among the class's distinct values (0 = fastest).
The GPUs of one class sharing a level and a server form a *group*. The pool keeps three kinds
of counters, all views of one flat integer buffer:

- per class, the free GPUs of each group, groups sorted by (level, server), so the groups of
  one level are a contiguous run (``FreePool.groups``);
- ``tot[c, l]``: free GPUs at level ``l`` for class ``c``, all servers;
- ``server_free[s]``: free GPUs of server ``s``.

Every GPU owns one counter of each kind, precomputed, so taking or releasing a set of GPUs is a
single ``numpy.subtract.at`` / ``numpy.add.at`` over their counters: no loop over GPUs or
classes. "Which servers have N free GPUs no slower than level l" is a running sum over the
groups of levels ``0..l``, never a search over GPU subsets. Memory is linear in GPUs x classes,
whatever the number of distinct slowdown values.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from palopt.instance import Instance

__all__ = ["FreePool"]

_NEVER = np.iinfo(np.int64).max  # score of an empty group


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
        ``level[c, g]``: level of GPU ``g`` for class ``c``. This, ``values`` and
        ``first_seen`` are read-only: they are computed once per topology and slowdown array
        and shared by every pool built from them (a simulation builds one per round).
    avail : numpy.ndarray
        ``level`` for free GPUs, and a level above all others for the rest.
    values : list of numpy.ndarray
        Distinct slowdown values of each class, ascending (``values[c][l]`` is level ``l``).
    first_seen : list of numpy.ndarray
        ``first_seen[c][l]``: lowest GPU index having level ``l`` (the order in which the
        artifact's GPU table first shows each value).
    groups : list of list of (numpy.ndarray, numpy.ndarray)
        ``groups[c][l]``: the groups of level ``l`` for class ``c``, as their servers
        (ascending) and their free GPU counts (a live view of the counters; a count may be 0).
    tot, server_free : numpy.ndarray
        Free GPUs per (class, level) and per server.
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
    >>> servers, counts = pool.groups[0][0]
    >>> servers.tolist(), counts.tolist()
    ([0, 1], [0, 1])
    """

    def __init__(self, instance: Instance) -> None:
        topo = instance.topology
        layout = _layout(instance)
        self.instance = instance
        self.server = topo.gpu_server
        self.start = topo.server_start
        self.n_servers = topo.n_servers
        self.max_server_size = layout.max_server_size
        self.free = ~instance.busy
        self.level = layout.level
        self.values = layout.values
        self.first_seen = layout.first_seen
        self._cells = layout.cells
        n_classes, n_levels, offset = len(layout.values), layout.n_levels, layout.offset
        self._counts = np.bincount(self._cells[self.free].ravel(), minlength=layout.n_counters)
        self.tot = self._counts[offset : offset + n_classes * n_levels].reshape(n_classes, n_levels)
        self.server_free = self._counts[offset + n_classes * n_levels :]
        self.n_free = int(self.free.sum())
        self._taken = n_levels  # the level ``avail`` shows for a GPU that is not free
        # ``avail`` is a view of a GPU-major array: updating a few GPUs then writes whole rows
        # (numpy is much slower at writing a few columns).
        self._avail_rows = np.where(self.free[:, None], self.level.T, self._taken)
        self.avail = self._avail_rows.T
        self._bounds = layout.bounds
        self._index = np.arange(len(self.free))
        self._scratch = np.empty(self.n_servers, dtype=np.int64)  # room for one level's groups
        self._layout_groups = layout.groups

    @cached_property
    def groups(self) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Per class and level, the groups' servers and live free counts (built on first use:
        one view per class and level, thousands for an unbinned profile, which the Packed and
        Random policies never read)."""
        counts = self._counts
        return [
            [(servers, counts[lo:hi]) for servers, lo, hi in levels]
            for levels in self._layout_groups
        ]

    def take(self, gpus: np.ndarray) -> None:
        """Mark ``gpus`` (free, distinct dense GPU indices) as used, updating every counter."""
        self._update(gpus, False, -1)

    def release(self, gpus: np.ndarray) -> None:
        """Mark ``gpus`` (taken, not busy, distinct dense GPU indices) as free again."""
        self._update(gpus, True, 1)

    def _update(self, gpus: np.ndarray, free: bool, delta: int) -> None:
        g: np.ndarray | np.integer = gpus
        if len(gpus) == 1:  # the common case: one GPU owns distinct counters, so no ufunc.at
            g = gpus[0]
            self._counts[self._cells[g]] += delta
        else:  # (take: cheaper than fancy indexing for whole rows)
            np.add.at(self._counts, self._cells.take(gpus, axis=0).ravel(), delta)
        self.free[g] = free
        self._avail_rows[g] = self.level.T[g] if free else self._taken
        self.n_free += delta * len(gpus)

    def server_gpus(self, s: int) -> np.ndarray:
        """Free GPU indices of server ``s``, ascending."""
        lo, hi = self._bounds[s], self._bounds[s + 1]
        return self._index[lo:hi][self.free[lo:hi]]

    def server_gpus_at(self, c: int, s: int, max_level: int, exact: bool = False) -> np.ndarray:
        """Free GPUs of server ``s`` with level ``<= max_level`` (``== max_level`` if ``exact``)
        for class ``c``, ascending."""
        lo, hi = self._bounds[s], self._bounds[s + 1]
        avail = self.avail[c, lo:hi]
        return self._index[lo:hi][(avail == max_level) if exact else (avail <= max_level)]

    def level_for(self, c: int, n: int) -> int | None:
        """The lowest level ``l`` with at least ``n`` free GPUs of level ``<= l`` for class
        ``c``, or ``None`` if fewer than ``n`` GPUs are free."""
        if self.n_free < n:
            return None
        if len(self.values[c]) > 16:
            return int(self.tot[c].cumsum().searchsorted(n))
        total = 0
        for lvl, count in enumerate(self.tot[c].tolist()):
            total += count
            if total >= n:
                return lvl
        raise AssertionError("level counts out of sync with the free mask")

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
            first, so the job spans as few servers as the level allows. (The two agree for
            one GPU.)

        Returns
        -------
        numpy.ndarray or None
            GPU indices (unordered).
        """
        top = self.level_for(c, n)
        if top is None:
            return None
        servers, row = self.groups[c][top]
        if n == 1:
            # The group with the fewest (but some) free GPUs: as unsigned, count - 1 wraps
            # around to the largest value for an empty group.
            less = np.subtract(row, 1, out=self._scratch[: len(row)])  # (no new array: cheaper)
            s = int(servers[less.view(np.uint64).argmin()])
            lo = self._bounds[s]
            # Its first GPU of level ``top``; list.index beats numpy on a server's few GPUs.
            g = lo + self.avail[c, lo : self._bounds[s + 1]].tolist().index(top)
            return self._index[g : g + 1]
        parts: list[np.ndarray] = []
        need = n
        if top > 0:
            lower = (self.avail[c] < top).nonzero()[0]
            parts.append(lower)
            need -= len(lower)
        if best_fit:
            score = np.where(row >= need, row - need, self.max_server_size + need - row)
        else:
            score = abs(row - n)
        score[row == 0] = _NEVER
        while need > 0:
            hit = (score == score[score.argmin()]).nonzero()[0]  # (argmin: cheaper than min)
            score[hit] = _NEVER
            for s in servers[hit].tolist():
                gpus = self.server_gpus_at(c, s, top, exact=True)[:need]
                parts.append(gpus)
                need -= len(gpus)
                if need == 0:
                    break
        return np.concatenate(parts) if len(parts) > 1 else parts[0]


@dataclass(frozen=True)
class _Layout:
    """What a :class:`FreePool` derives from the topology and the slowdowns alone (not from the
    busy mask or the queue): the levels, the groups and each GPU's counters. Its arrays are
    read-only, as it is shared by every pool of instances with the same slowdown array."""

    max_server_size: int
    level: np.ndarray
    values: list[np.ndarray]
    first_seen: list[np.ndarray]
    n_levels: int
    offset: int  # counters before ``tot``: one per group
    n_counters: int
    cells: np.ndarray  # cells[g]: the counters GPU ``g`` owns (its groups, tot, server)
    groups: list[list[tuple[np.ndarray, int, int]]]  # per class and level: servers, counter slice
    bounds: list[int]


#: Layouts of the last few (topology, slowdown array) pairs seen, by identity: a simulation
#: solves every round an instance made by ``Instance.replace_queue``, which keeps both objects.
#: The entries hold the objects, so an identity cannot be taken by another object meanwhile.
_LAYOUTS: list[tuple[object, np.ndarray, _Layout]] = []
_MAX_LAYOUTS = 4
_LAYOUTS_LOCK = threading.Lock()


def _layout(instance: Instance) -> _Layout:
    """The instance's :class:`_Layout`, reused for the same (read-only) slowdown array and
    topology."""
    topo, sd = instance.topology, instance.slowdown
    if sd.flags.writeable:  # not an Instance's array (those cannot be made writeable)
        return _build_layout(instance)
    cached = tuple(_LAYOUTS)  # (a snapshot: other threads add)
    for cached_topo, cached_sd, layout in cached:
        if cached_sd is sd and cached_topo is topo:
            return layout
    # A scheduler builds a new Instance every round (its busy GPUs change), and an Instance
    # copies its slowdowns: equal values on the same topology have the same layout (a
    # comparison takes microseconds, building a layout milliseconds at 1,024 GPUs).
    for cached_topo, cached_sd, layout in cached:
        if cached_topo is topo and cached_sd.shape == sd.shape and np.array_equal(cached_sd, sd):
            return layout
    layout = _build_layout(instance)
    with _LAYOUTS_LOCK:
        _LAYOUTS.insert(0, (topo, sd, layout))
        del _LAYOUTS[_MAX_LAYOUTS:]
    return layout


def _build_layout(instance: Instance) -> _Layout:
    topo = instance.topology
    server = topo.gpu_server
    sd = instance.slowdown
    n_classes, n = sd.shape
    s = topo.n_servers
    # Per class, GPUs sorted by (slowdown, index), i.e. by (level, server, index): levels and
    # groups are runs of that order.
    order = np.argsort(sd, axis=1, kind="stable")
    rows = np.arange(n_classes)[:, None]
    sorted_sd = sd[rows, order]
    new_level = np.ones((n_classes, n), dtype=bool)
    new_level[:, 1:] = sorted_sd[:, 1:] != sorted_sd[:, :-1]
    sorted_server = server[order]
    new_group = new_level.copy()
    new_group[:, 1:] |= sorted_server[:, 1:] != sorted_server[:, :-1]
    level_rank = np.cumsum(new_level, axis=1) - 1
    level = np.empty((n_classes, n), dtype=np.int64)
    level[rows, order] = level_rank
    group_of = np.empty((n_classes, n), dtype=np.int64)
    # group ids numbered across classes, class 0's first
    group_of[rows, order] = (np.cumsum(new_group) - 1).reshape(n_classes, n)
    values = [sorted_sd[c, new_level[c]] for c in range(n_classes)]
    first_seen = [order[c, new_level[c]] for c in range(n_classes)]
    n_levels = max(len(v) for v in values)
    # Each group's (class, level) key ascends with its id, so one search finds where the
    # groups of every (class, level) start.
    group_key = (rows * n_levels + level_rank)[new_group]
    level_start = np.searchsorted(group_key, np.arange(n_classes * n_levels + 1)).tolist()
    group_server = sorted_server[new_group]
    offset = len(group_server)
    tot_at = offset + rows * n_levels + level
    server_at = offset + n_classes * n_levels + server[None, :]
    cells = np.ascontiguousarray(np.concatenate([group_of, tot_at, server_at]).T)
    groups = []
    for c, vals in enumerate(values):
        starts = level_start[c * n_levels : c * n_levels + len(vals) + 1]
        groups.append(
            [(group_server[lo:hi], lo, hi) for lo, hi in zip(starts[:-1], starts[1:], strict=True)]
        )
    for arr in (level, cells, group_server, *values, *first_seen):
        arr.setflags(write=False)
    return _Layout(
        int(np.diff(topo.server_start).max()),
        level,
        values,
        first_seen,
        n_levels,
        offset,
        offset + n_classes * n_levels + s,
        cells,
        groups,
        topo.server_start.tolist(),
    )
