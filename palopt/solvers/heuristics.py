"""PAL, PM-First, Packed and Random placement, sticky and non-sticky, as the PAL artifact does it.

Each policy is a *chooser*: given the free pool, a class index and a GPU count, it returns GPUs
or ``None``. A *frame* decides the order jobs are offered in and what happens to running jobs:

- non-sticky: every running job gives up its GPUs first; the queue is placed in order (PAL and
  PM-First first stable-sort the *window*, the longest queue prefix whose demands fit the
  available GPUs, by class priority) and placement stops at the first job that does not fit (no
  backfill). A job placed on exactly its old GPUs keeps running (action ``keep``).
- sticky: running jobs keep their GPUs; the others are offered in queue order. A job that does
  not fit preempts the running jobs ranked below it, lowest-ranked first, one at a time,
  retrying after each; if it still does not fit, placement stops for the round (the jobs
  preempted on the way stay stopped). A preempted job is offered again when the walk reaches
  its own queue position, like any waiting job. Running jobs ranked above are never moved.

Two variants of PAL, PM-First and the sticky solvers (``get_solver("pal", variant=...)``):

- ``"artifact"`` (default): the artifact's choices, quirks included.
- ``"fixed"``: the same with its plain bugs fixed:

  1. PAL's walk over (level, within | across) options is sorted by expected cost only, so on
     a cost tie (a value ``v`` equal to ``P x v'``) the artifact's order depends on which of the
     two values first appears in its GPU table. Fixed: on a tie, within one server comes first
     (then the faster level).
  2. PM-First's locality score ``|group size - N|`` rates a group too small to hold the job as
     good as a larger one, so an N-GPU job that fits on one server at its best level can be
     split across servers and pay the locality penalty; it also scores against the job's full
     size even when faster levels already supplied part of it. Fixed: groups able to hold all
     the GPUs still needed come first, tightest first; then the others, largest first.
  3. (Sticky solvers.) A job's preemptions that free no GPU it then takes leave those jobs
     stopped for nothing: all of them when the job still does not fit, and the lower-ranked
     ones when a later victim alone made room. Fixed: those preemptions are undone (the jobs
     keep running).

Tiers: like the artifact, the choosers see two of them, within one server and across servers
(PAL prices across at the penalty of the tier just above a server); they do not look at NVLink
islands or racks. The cost model charges the tier a placement actually spans, so on a topology
with more tiers PAL's expected cost can be below what it is charged (a job it expects across
servers may land across racks). ``greedy`` scores every tier by the true cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from palopt.errors import InputError, counted
from palopt.instance import Instance, Job
from palopt.result import PlacementResult
from palopt.solvers.base import build_result, check_arguments, register
from palopt.solvers.pool import FreePool
from palopt.solvers.round import admitted_prefix

__all__ = [
    "HeuristicSolver",
    "RoundContext",
    "VARIANTS",
    "pal_walk_ranks",
    "choose_pal",
    "choose_pmfirst",
    "choose_packed",
    "choose_random",
]

VARIANTS = ("artifact", "fixed")
Ranks = tuple[int, ...]


@dataclass(frozen=True)
class RoundContext:
    """What a chooser may use besides the pool: the seeded generator, the variant, and PAL's
    walk order per class (``walk[c]`` = ranks of the within and across options per level)."""

    rng: np.random.Generator
    fixed: bool = False
    walk: tuple[tuple[Ranks, Ranks], ...] = ()


Chooser = Callable[[FreePool, int, int, RoundContext], "np.ndarray | None"]


def pal_walk_ranks(
    values: np.ndarray,
    first_seen: np.ndarray,
    within_pen: float,
    across_pen: float | None,
    fixed: bool,
) -> tuple[Ranks, Ranks]:
    """Position of each (level, within) and (level, across) option in PAL's walk.

    The options are sorted by expected cost, ``v x within_pen`` and ``v x across_pen``. Ties
    follow the artifact's list order (values in order of first appearance in the GPU table,
    within before across for one value) or, if ``fixed``, within first, then the faster level.

    Parameters
    ----------
    values : numpy.ndarray
        Distinct slowdown values of the class, ascending (index = level).
    first_seen : numpy.ndarray
        Lowest GPU index having each level.
    within_pen, across_pen : float
        Penalties of the server tier and of the tier above it (``None``: no tier above, so no
        across option).
    fixed : bool
        Use the fixed tie-break.

    Returns
    -------
    (tuple of int, tuple of int)
        Ranks of the within options and of the across options, by level (with no across
        option, every across rank is larger than any within rank).

    Examples
    --------
    >>> import numpy as np
    >>> pal_walk_ranks(np.array([1.0, 1.2, 2.0]), np.array([0, 1, 2]), 1.0, 1.7, False)
    ((0, 1, 3), (2, 4, 5))
    """
    n_levels = len(values)
    pens = [within_pen] if across_pen is None else [within_pen, across_pen]
    # The options, kind-major: cost, kind (0 within, 1 across) and level of each.
    cost = np.concatenate([values * pen for pen in pens])
    kind = np.repeat(np.arange(len(pens)), n_levels)
    lvl = np.tile(np.arange(n_levels), len(pens))
    if fixed:
        order = np.lexsort((lvl, kind, cost))
    else:  # ties by the level's first appearance (distinct GPU indices), then the kind
        order = np.lexsort((kind, np.asarray(first_seen)[lvl], cost))
    ranks = np.full((2, n_levels), len(order), dtype=np.int64)
    ranks[kind[order], lvl[order]] = np.arange(len(order))
    return tuple(ranks[0].tolist()), tuple(ranks[1].tolist())


def _round_context(
    pool: FreePool, policy: str, fixed: bool, rng: np.random.Generator
) -> RoundContext:
    if policy != "pal":
        return RoundContext(rng, fixed)
    inst = pool.instance
    st = inst.topology.server_tier
    has_across = inst.penalty.shape[1] > st + 1
    walk = tuple(
        pal_walk_ranks(
            pool.values[c],
            pool.first_seen[c],
            float(inst.penalty[c, st]),
            float(inst.penalty[c, st + 1]) if has_across else None,
            fixed,
        )
        for c in range(len(inst.classes))
    )
    return RoundContext(rng, fixed, walk)


def choose_pmfirst(pool: FreePool, c: int, n: int, ctx: RoundContext) -> np.ndarray | None:
    """PM-First over all free GPUs (see :meth:`FreePool.pm_first`).

    Parameters
    ----------
    pool : FreePool
        The free GPUs (not modified).
    c : int
        Class index of the job.
    n : int
        Number of GPUs the job needs.
    ctx : RoundContext
        Generator, variant and PAL's walk order.

    Returns
    -------
    numpy.ndarray or None
        ``n`` distinct free GPU indices, or ``None`` if the policy finds no placement.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, build_cluster
    >>> topo = build_cluster(1, 2, 2)
    >>> inst = Instance(topo, ("A",), np.array([[1.0, 1.2, 1.0, 1.0]]),
    ...                 np.array([[1.0, 1.7, 1.7]]), ())
    >>> choose_pmfirst(FreePool(inst), 0, 2, RoundContext(np.random.default_rng(0))).tolist()
    [2, 3]
    """
    return pool.pm_first(c, n, best_fit=ctx.fixed)


def choose_pal(pool: FreePool, c: int, n: int, ctx: RoundContext) -> np.ndarray | None:
    """PAL: the first feasible option of the walk (see :func:`pal_walk_ranks`).

    A (level ``l``, within) option is feasible if a server has ``n`` free GPUs of level
    ``<= l``; it takes the server with the most such GPUs (the first on ties) and its first
    ``n`` such GPUs by index (the artifact's first minimal combination). A (level ``l``, across)
    option is feasible if ``n`` free GPUs have level ``<= l``; it takes PM-First over them.
    Jobs of one GPU, or larger than a server, use PM-First over all free GPUs.

    Both kinds of option are monotone in the level, so the walk reduces to comparing the rank
    of the first feasible within option with that of the first feasible across option.

    Parameters
    ----------
    pool : FreePool
        The free GPUs (not modified).
    c : int
        Class index of the job.
    n : int
        Number of GPUs the job needs.
    ctx : RoundContext
        Generator, variant and PAL's walk order.

    Returns
    -------
    numpy.ndarray or None
        ``n`` distinct free GPU indices, or ``None`` if the policy finds no placement.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, build_cluster
    >>> topo = build_cluster(1, 2, 2)
    >>> inst = Instance(topo, ("A",), np.array([[1.0, 1.2, 1.0, 1.0]]),
    ...                 np.array([[1.0, 1.7, 1.7]]), ())
    >>> pool = FreePool(inst)
    >>> walk = (pal_walk_ranks(pool.values[0], pool.first_seen[0], 1.0, 1.7, False),)
    >>> ctx = RoundContext(np.random.default_rng(0), False, walk)
    >>> choose_pal(pool, 0, 2, ctx).tolist()
    [2, 3]
    >>> pool.take(np.array([3]))  # now a slower GPU within one server beats two servers
    >>> choose_pal(pool, 0, 2, ctx).tolist(), choose_pmfirst(pool, 0, 2, ctx).tolist()
    ([0, 1], [0, 2])
    """
    if n == 1 or n > pool.max_server_size:
        return pool.pm_first(c, n, best_fit=ctx.fixed)
    top = pool.level_for(c, n)
    if top is None:
        return None
    within, across = ctx.walk[c]
    free = pool.server_free
    if len(within) > _MANY_LEVELS and pool.n_servers * pool.max_server_size == len(pool.free):
        return _pal_many_levels(pool, c, n, within, across[top], best_fit=ctx.fixed)
    if free[free.argmax()] >= n:  # (argmax and a lookup: cheaper than max)
        limit = across[top]
        run = np.zeros(pool.n_servers, dtype=np.int64)  # free GPUs of level <= lvl per server
        for lvl in range(len(within)):
            if within[lvl] > limit:
                break
            servers, counts = pool.groups[c][lvl]
            run[servers] += counts
            # Only servers of this level gained, and none had n before: a plain argmax suffices.
            best = int(run.argmax())
            if run[best] >= n:
                return pool.server_gpus_at(c, best, lvl)[:n]
    return pool.pm_first(c, n, best_fit=ctx.fixed)


#: Above this many distinct slowdowns in a class (an unbinned profile), PAL finds the first
#: feasible within-server level directly instead of walking the levels one by one.
_MANY_LEVELS = 64


def _pal_many_levels(
    pool: FreePool, c: int, n: int, within: Ranks, limit: int, best_fit: bool
) -> np.ndarray | None:
    """:func:`choose_pal`'s walk for servers of equal size, by array operations: the first
    level at which some server has ``n`` free GPUs of that level or below is the smallest
    ``n``-th lowest free level over the servers; the walk takes it if its rank is within
    ``limit``, on the first server with the most such GPUs."""
    levels = pool.avail[c].reshape(pool.n_servers, pool.max_server_size)
    first = int(np.partition(levels, n - 1, axis=1)[:, n - 1].min())
    if first < len(within) and within[first] <= limit:
        best = int((levels <= first).sum(axis=1).argmax())
        return pool.server_gpus_at(c, best, first)[:n]
    return pool.pm_first(c, n, best_fit=best_fit)


def choose_packed(pool: FreePool, c: int, n: int, ctx: RoundContext) -> np.ndarray | None:
    """Packed: the first server with exactly ``n`` free GPUs; else the server with the fewest
    free GPUs that are still enough (the first on ties), its first ``n``; else, if enough are
    free in total, whole servers, most free GPUs first (the first on ties).

    Parameters
    ----------
    pool : FreePool
        The free GPUs (not modified).
    c : int
        Class index of the job.
    n : int
        Number of GPUs the job needs.
    ctx : RoundContext
        Generator, variant and PAL's walk order.

    Returns
    -------
    numpy.ndarray or None
        ``n`` distinct free GPU indices, or ``None`` if the policy finds no placement.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, build_cluster
    >>> topo = build_cluster(1, 2, 2)
    >>> inst = Instance(topo, ("A",), np.ones((1, 4)), np.array([[1.0, 1.7, 1.7]]), ())
    >>> pool = FreePool(inst)
    >>> pool.take(np.array([0]))  # server 0 has one free GPU, server 1 two
    >>> ctx = RoundContext(np.random.default_rng(0))
    >>> [choose_packed(pool, 0, n, ctx).tolist() for n in (1, 2, 3)]
    [[1], [2, 3], [2, 3, 1]]
    >>> choose_packed(pool, 0, 4, ctx) is None
    True
    """
    if pool.n_free < n:
        return None
    free = pool.server_free
    exact = (free == n).nonzero()[0]
    if len(exact):
        return pool.server_gpus(int(exact[0]))
    if free[free.argmax()] >= n:
        s = int(np.where(free >= n, free, pool.max_server_size + 1).argmin())
        return pool.server_gpus(s)[:n]
    order = np.argsort(-free, kind="stable")
    parts, need = [], n
    for s in order:
        gpus = pool.server_gpus(int(s))[:need]
        parts.append(gpus)
        need -= len(gpus)
        if need == 0:
            break
    return np.concatenate(parts)


def choose_random(pool: FreePool, c: int, n: int, ctx: RoundContext) -> np.ndarray | None:
    """Random: ``n`` GPUs drawn uniformly from all free GPUs (servers ignored), with
    ``ctx.rng``.

    Parameters
    ----------
    pool : FreePool
        The free GPUs (not modified).
    c : int
        Class index of the job.
    n : int
        Number of GPUs the job needs.
    ctx : RoundContext
        Generator, variant and PAL's walk order.

    Returns
    -------
    numpy.ndarray or None
        ``n`` distinct free GPU indices, or ``None`` if the policy finds no placement.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, build_cluster
    >>> topo = build_cluster(1, 2, 2)
    >>> inst = Instance(topo, ("A",), np.ones((1, 4)), np.array([[1.0, 1.7, 1.7]]), ())
    >>> pool = FreePool(inst)
    >>> pool.take(np.array([0]))
    >>> gpus = choose_random(pool, 0, 2, RoundContext(np.random.default_rng(0)))
    >>> len(set(gpus.tolist())), bool(pool.free[gpus].all())
    (2, True)
    >>> again = choose_random(pool, 0, 2, RoundContext(np.random.default_rng(0)))
    >>> again.tolist() == gpus.tolist()  # the same seed, the same draw
    True
    >>> choose_random(pool, 0, 4, RoundContext(np.random.default_rng(0))) is None
    True
    """
    if pool.n_free < n:
        return None
    return ctx.rng.choice(pool.free.nonzero()[0], n, replace=False)


CHOOSERS: dict[str, Chooser] = {
    "pal": choose_pal,
    "pmfirst": choose_pmfirst,
    "packed": choose_packed,
    "random": choose_random,
}


def _class_sorted_order(instance: Instance, cls: np.ndarray) -> list[int]:
    """The window (longest queue prefix whose demands fit the available GPUs) stable-sorted by
    class priority (the order of ``instance.classes``), then the rest of the queue."""
    end = admitted_prefix(instance)
    window = np.argsort(cls[:end], kind="stable")
    return window.tolist() + list(range(end, len(instance.queue)))


def _blocked(at: Job) -> str:
    return f"blocked: placement stopped at job {at.id!r} (no backfill)"


def _too_few(pool: FreePool, job: Job) -> str:
    return f"needs {counted(job.num_gpus, 'GPU')}, {pool.n_free} free"


Placed = tuple[dict[int, np.ndarray], dict[int, str]]


def _place_nonsticky(
    instance: Instance, policy: str, ctx_rng: np.random.Generator, fixed: bool, class_sort: bool
) -> Placed:
    """Non-sticky frame; returns queue position -> GPUs and -> reason."""
    pool = FreePool(instance)
    ctx = _round_context(pool, policy, fixed, ctx_rng)
    chooser = CHOOSERS[policy]
    cls = instance.job_class_indices()
    queue = instance.queue
    order = _class_sorted_order(instance, cls) if class_sort else range(len(queue))
    classes = cls.tolist()
    chosen: dict[int, np.ndarray] = {}
    reasons: dict[int, str] = {}
    stopped: Job | None = None
    for pos in order:
        job = queue[pos]
        if stopped is not None:
            reasons[pos] = _blocked(stopped)
            continue
        gpus = chooser(pool, classes[pos], job.num_gpus, ctx)
        if gpus is None:
            reasons[pos] = _too_few(pool, job)
            stopped = job
            continue
        pool.take(gpus)
        chosen[pos] = gpus
    return chosen, reasons


def _place_sticky(
    instance: Instance, policy: str, ctx_rng: np.random.Generator, fixed: bool
) -> Placed:
    """Sticky frame; returns queue position -> GPUs and -> reason."""
    pool = FreePool(instance)
    ctx = _round_context(pool, policy, fixed, ctx_rng)
    chooser = CHOOSERS[policy]
    classes = instance.job_class_indices().tolist()
    queue = instance.queue
    chosen: dict[int, np.ndarray] = {}
    reasons: dict[int, str] = {}
    holders = [pos for pos, job in enumerate(queue) if job.is_running]  # ascending
    if holders:
        sets = [np.asarray(queue[p].current_gpus, dtype=np.int64) for p in holders]
        pool.take(np.concatenate(sets))
        chosen.update(zip(holders, sets, strict=True))
    stopped: Job | None = None
    for pos, job in enumerate(queue):
        if pos in chosen:
            continue
        if stopped is not None:
            reasons.setdefault(pos, _blocked(stopped))
            continue
        c = classes[pos]
        gpus = chooser(pool, c, job.num_gpus, ctx)
        victims = []
        while gpus is None and holders and holders[-1] > pos:
            victims.append(holders.pop())
            pool.release(chosen.pop(victims[-1]))
            reasons[victims[-1]] = f"preempted for job {job.id!r}"
            gpus = chooser(pool, c, job.num_gpus, ctx)
        if gpus is not None:
            pool.take(gpus)
        if fixed:  # undo the preemptions that freed none of the GPUs the job takes
            taken = () if gpus is None else gpus.tolist()
            for victim in reversed(victims):
                held = np.asarray(queue[victim].current_gpus, dtype=np.int64)
                if not np.isin(held, taken).any():
                    chosen[victim] = held
                    pool.take(held)
                    holders.append(victim)
                    del reasons[victim]
        if gpus is None:
            reasons.setdefault(pos, _too_few(pool, job))  # a preempted job keeps that reason
            stopped = job
            continue
        chosen[pos] = gpus
        reasons.pop(pos, None)
    return chosen, reasons


class HeuristicSolver:
    """A chooser in a frame, behind the :class:`~palopt.solvers.base.Solver` protocol.

    Parameters
    ----------
    name : str
        Registry name.
    policy : {"pal", "pmfirst", "packed", "random"}
    sticky : bool
        Keep running jobs on their GPUs (see the module documentation).
    class_sort : bool
        Stable-sort the window by class before placing (PAL and PM-First).
    variant : {"artifact", "fixed"}, default "artifact"
        PAL, PM-First and the sticky frame only: the artifact's choices, or with its plain bugs
        fixed (listed in the module documentation).

    Raises
    ------
    InputError
        For an unknown policy or variant.

    Examples
    --------
    >>> from palopt.solvers.base import get_solver
    >>> get_solver("pal", variant="fixed").variant
    'fixed'
    """

    def __init__(
        self, name: str, policy: str, sticky: bool, class_sort: bool, variant: str = "artifact"
    ) -> None:
        if policy not in CHOOSERS:
            raise InputError("policy", policy, f"must be one of {', '.join(CHOOSERS)}")
        if variant not in VARIANTS:
            raise InputError(f"{name}.variant", variant, f"must be one of {', '.join(VARIANTS)}")
        self.name = name
        self.policy = policy
        self.sticky = sticky
        self.class_sort = class_sort
        self.variant = variant

    @property
    def repeatable(self) -> bool:
        """Whether a round whose input equals the last one's, after a decision that changed
        nothing, gets that decision again: true of the deterministic policies, and of the random
        sticky frame (its chooser draws only when a job fits, which would have changed
        something). The simulator skips such rounds."""
        return self.policy != "random" or self.sticky

    def solve(
        self, instance: Instance, *, time_limit: float | None = None, seed: int | None = None
    ) -> PlacementResult:
        """Place the queue. ``time_limit`` is checked, then ignored (heuristics take
        milliseconds). The random solvers without a ``seed`` draw one from the operating system
        and record it in ``settings["seed"]``, so the placement can be made again."""
        started = time.perf_counter()
        seed = check_arguments(instance, time_limit, seed)
        if seed is None and self.policy == "random":  # drawn here, so the result records it
            seed = int(np.random.default_rng().integers(2**63))
        rng = np.random.default_rng(seed)
        fixed = self.variant == "fixed"
        if self.sticky:
            chosen, reasons = _place_sticky(instance, self.policy, rng, fixed)
        else:
            chosen, reasons = _place_nonsticky(instance, self.policy, rng, fixed, self.class_sort)
        settings: dict[str, Any] = {
            "policy": self.policy,
            "sticky": self.sticky,
            "class_sort": self.class_sort,
        }
        if self.policy in ("pal", "pmfirst") or self.sticky:
            settings["variant"] = self.variant
        if self.policy == "random":
            settings["seed"] = seed
        return build_result(instance, self.name, chosen, reasons, started, settings=settings)


def _factory(name: str, policy: str, sticky: bool, class_sort: bool) -> Callable[..., Any]:
    def make(**config: Any) -> HeuristicSolver:
        return HeuristicSolver(name, policy, sticky, class_sort, **config)

    return make


for _name, _policy, _sticky, _sort, _desc in (
    ("pal", "pal", False, True, "PAL (SC24): variability levels x locality penalty, non-sticky"),
    ("pmfirst", "pmfirst", False, True, "PM-First: fastest GPUs first, snug groups, non-sticky"),
    ("packed-sticky", "packed", True, False, "Packed by server; running jobs keep their GPUs"),
    ("packed-nonsticky", "packed", False, False, "Packed by server; all jobs re-placed each round"),
    ("random-sticky", "random", True, False, "Uniformly random GPUs; running jobs keep theirs"),
    ("random-nonsticky", "random", False, False, "Uniformly random GPUs each round"),
):
    _options = ("variant",) if _policy in ("pal", "pmfirst") or _sticky else ()
    register(_name, _factory(_name, _policy, _sticky, _sort), _desc, options=_options)
