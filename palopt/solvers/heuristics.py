"""PAL, PM-First, Packed and Random placement, sticky and non-sticky.

Each policy is a *chooser*: given the free pool and a job, it returns GPUs or ``None``. A *frame*
decides the order jobs are offered in and what happens to running jobs:

- non-sticky: every running job gives up its GPUs; the queue is placed in order (PAL and PM-First
  first stable-sort the admitted window by class) and placement stops at the first job that does
  not fit (no backfill). A job placed on exactly its old GPUs keeps running.
- sticky: running jobs keep their GPUs; waiting jobs are placed in queue order; a job that does not
  fit preempts running jobs ranked below it, lowest first, one at a time, until it fits; if it still
  does not fit, placement stops for the round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from palopt.errors import InputError
from palopt.instance import Instance, Job
from palopt.result import PlacementResult
from palopt.solvers.base import build_result, register
from palopt.solvers.pool import FreePool

__all__ = ["HeuristicSolver", "choose_pal", "choose_pmfirst", "choose_packed", "choose_random"]

Chooser = Callable[[FreePool, int, Job, np.random.Generator], "np.ndarray | None"]


def choose_pmfirst(pool: FreePool, c: int, job: Job, rng: np.random.Generator) -> np.ndarray | None:
    """PM-First over all free GPUs (see :meth:`FreePool.pm_first`)."""
    return pool.pm_first(c, job.num_gpus)


def choose_pal(pool: FreePool, c: int, job: Job, rng: np.random.Generator) -> np.ndarray | None:
    """PAL: walk (slowdown level, within one server | across servers) options by expected cost.

    For each distinct slowdown level ``v`` of the class there are two options: one server with
    ``N`` free GPUs no slower than ``v`` (expected cost ``v`` times the server-tier penalty), and
    any ``N`` free GPUs no slower than ``v`` picked by PM-First (expected cost ``v`` times the
    penalty of the first tier above the server). Options are tried cheapest first (stable: within
    before across on ties). Jobs of one GPU, or larger than a server, use PM-First directly.
    """
    n = job.num_gpus
    per_server = pool.max_server_size
    if n == 1 or n > per_server:
        return pool.pm_first(c, n)
    values = pool.values[c]
    pen = pool.instance.penalty[c]
    st = pool.instance.topology.server_tier
    within_pen = pen[st]
    across_pen = pen[st + 1] if len(pen) > st + 1 else None
    keys = [(v * within_pen, lvl, 0) for lvl, v in enumerate(values)]
    if across_pen is not None:
        keys += [(v * across_pen, lvl, 1) for lvl, v in enumerate(values)]
    keys.sort(key=lambda k: (k[0], k[1], k[2]))
    cum = pool.cum[c]
    for _, lvl, across in keys:
        if across:
            if pool.cum_total[c][lvl] >= n:
                return pool.pm_first(c, n, lvl)
        else:
            row = cum[lvl]
            s = int(np.argmax(row))
            if row[s] >= n:
                return pool.lowest_on_server(c, s, n)
    return None


def choose_packed(pool: FreePool, c: int, job: Job, rng: np.random.Generator) -> np.ndarray | None:
    """Packed: a server with exactly N free GPUs, else the tightest server with enough, else
    the emptiest servers first."""
    n = job.num_gpus
    if pool.n_free < n:
        return None
    free = pool.server_free
    exact = np.flatnonzero(free == n)
    if len(exact):
        return pool.server_gpus(int(exact[0]))
    enough = free >= n
    if enough.any():
        s = int(np.argmin(np.where(enough, free, np.iinfo(np.int64).max)))
        return pool.server_gpus(s)[:n]
    order = np.argsort(-free, kind="stable")
    out, need = [], n
    for s in order:
        gpus = pool.server_gpus(int(s))[:need]
        out.append(gpus)
        need -= len(gpus)
        if need == 0:
            break
    return np.concatenate(out)


def choose_random(pool: FreePool, c: int, job: Job, rng: np.random.Generator) -> np.ndarray | None:
    """Random: N GPUs drawn uniformly from all free GPUs."""
    if pool.n_free < job.num_gpus:
        return None
    return np.sort(rng.choice(np.flatnonzero(pool.free), job.num_gpus, replace=False))


CHOOSERS: dict[str, Chooser] = {
    "pal": choose_pal,
    "pmfirst": choose_pmfirst,
    "packed": choose_packed,
    "random": choose_random,
}


def _class_sorted_order(instance: Instance, cls: np.ndarray) -> list[int]:
    """The admitted window (queue prefix that fits the cluster) stable-sorted by class, then
    the rest of the queue."""
    capacity = instance.n_available
    used, end = 0, 0
    for job in instance.queue:
        if used + job.num_gpus > capacity:
            break
        used += job.num_gpus
        end += 1
    window = sorted(range(end), key=lambda i: cls[i])
    return window + list(range(end, len(instance.queue)))


def _blocked(at: Job) -> str:
    return f"blocked: placement stopped at job {at.id!r} (no backfill)"


def _too_few(pool: FreePool, job: Job) -> str:
    return f"needs {job.num_gpus} GPUs, {pool.n_free} free"


def place_nonsticky(instance: Instance, chooser: Chooser, rng: np.random.Generator,
                    class_sort: bool) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    """Non-sticky frame; returns queue position -> GPUs and -> reason."""
    pool = FreePool(instance)
    cls = instance.job_class_indices()
    order = _class_sorted_order(instance, cls) if class_sort else range(len(instance.queue))
    chosen: dict[int, np.ndarray] = {}
    reasons: dict[int, str] = {}
    stopped: Job | None = None
    for pos in order:
        job = instance.queue[pos]
        if stopped is not None:
            reasons[pos] = _blocked(stopped)
            continue
        gpus = chooser(pool, int(cls[pos]), job, rng)
        if gpus is None:
            reasons[pos] = _too_few(pool, job)
            stopped = job
            continue
        pool.take(gpus)
        chosen[pos] = gpus
    return chosen, reasons


def place_sticky(instance: Instance, chooser: Chooser, rng: np.random.Generator
                 ) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    """Sticky frame; returns queue position -> GPUs and -> reason."""
    pool = FreePool(instance)
    cls = instance.job_class_indices()
    queue = instance.queue
    chosen: dict[int, np.ndarray] = {}
    reasons: dict[int, str] = {}
    for pos, job in enumerate(queue):
        if job.is_running:
            held = np.asarray(job.current_gpus, dtype=np.int64)
            pool.take(held)
            chosen[pos] = held
    stopped: Job | None = None
    for pos, job in enumerate(queue):
        if job.is_running:
            continue
        if stopped is not None:
            reasons[pos] = _blocked(stopped)
            continue
        gpus = chooser(pool, int(cls[pos]), job, rng)
        victims = [p for p in chosen if p > pos]
        while gpus is None and victims:
            victim = max(victims)
            victims.remove(victim)
            pool.release(chosen.pop(victim))
            reasons[victim] = f"preempted for job {job.id!r}"
            gpus = chooser(pool, int(cls[pos]), job, rng)
        if gpus is None:
            reasons[pos] = _too_few(pool, job)
            stopped = job
            continue
        pool.take(gpus)
        chosen[pos] = gpus
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
        Stable-sort the admitted window by class before placing (PAL and PM-First).
    """

    def __init__(self, name: str, policy: str, sticky: bool, class_sort: bool) -> None:
        if policy not in CHOOSERS:
            raise InputError("policy", policy, f"must be one of {', '.join(CHOOSERS)}")
        self.name = name
        self.policy = policy
        self.sticky = sticky
        self.class_sort = class_sort

    def solve(self, instance: Instance, *, time_limit: float | None = None,
              seed: int | None = None) -> PlacementResult:
        """Place the queue. ``time_limit`` is ignored (heuristics take milliseconds)."""
        started = time.perf_counter()
        rng = np.random.default_rng(seed)
        chooser = CHOOSERS[self.policy]
        if self.sticky:
            chosen, reasons = place_sticky(instance, chooser, rng)
        else:
            chosen, reasons = place_nonsticky(instance, chooser, rng, self.class_sort)
        settings: dict[str, Any] = {"policy": self.policy, "sticky": self.sticky,
                                    "class_sort": self.class_sort}
        if self.policy == "random":
            settings["seed"] = seed
        return build_result(instance, self.name, chosen, reasons, started, settings=settings)


def _factory(name: str, policy: str, sticky: bool, class_sort: bool) -> Callable[..., Any]:
    def make(**config: Any) -> HeuristicSolver:
        if config:
            key = next(iter(config))
            raise InputError(f"{name}.{key}", config[key], "unknown option for this solver")
        return HeuristicSolver(name, policy, sticky, class_sort)

    return make


for _name, _policy, _sticky, _sort, _desc in (
    ("pal", "pal", False, True, "PAL (SC24): variability levels x locality penalty, non-sticky"),
    ("pmfirst", "pmfirst", False, True, "PM-First: fastest GPUs first, snug groups, non-sticky"),
    ("packed-sticky", "packed", True, False, "Packed by server; running jobs keep their GPUs"),
    ("packed-nonsticky", "packed", False, False, "Packed by server; all jobs re-placed each round"),
    ("random-sticky", "random", True, False, "Uniformly random GPUs; running jobs keep theirs"),
    ("random-nonsticky", "random", False, False, "Uniformly random GPUs each round"),
):
    register(_name, _factory(_name, _policy, _sticky, _sort), _desc)
