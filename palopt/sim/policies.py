"""Scheduling policies: each orders the active jobs (running and waiting) for the placement
solver, with one method ``order(queue, state)``.

``queue`` holds job indices in admission order; ``state`` is the simulator's
:class:`~palopt.sim.engine.JobTable` (per-job numpy arrays). Every policy sorts by ascending
keys with a stable sort, so ties keep admission order, as the artifact's ``sorted`` does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from palopt.errors import InputError, check_number

if TYPE_CHECKING:
    from palopt.sim.engine import JobTable

__all__ = ["SchedulingPolicy", "Fifo", "Las", "Srtf", "Tiresias", "get_policy", "POLICIES"]


class SchedulingPolicy(Protocol):
    """Orders the queue; the first job has the highest priority.

    ``static`` is true when the order depends only on which jobs are queued (not on their
    progress), so the simulator may skip rounds in which nothing arrives or completes.
    """

    name: str
    static: bool

    def order(self, queue: np.ndarray, state: JobTable) -> np.ndarray:
        """Job indices of ``queue`` in priority order."""
        ...


def _stable(queue: np.ndarray, *keys: np.ndarray) -> np.ndarray:
    """``queue`` sorted by ``keys`` (primary first), stable."""
    if len(queue) == 0:
        return queue
    return queue[np.lexsort(tuple(reversed(keys)))]


class Fifo:
    """First in, first out: by submit time.

    Examples
    --------
    >>> Fifo().name
    'fifo'
    """

    name = "fifo"
    static = True

    def order(self, queue: np.ndarray, state: JobTable) -> np.ndarray:
        """By submit time."""
        return _stable(queue, state.submit[queue])


class Las:
    """Least attained service: by seconds run so far (not GPU-weighted, as the artifact)."""

    name = "las"
    static = False

    def order(self, queue: np.ndarray, state: JobTable) -> np.ndarray:
        """By attained seconds."""
        return _stable(queue, state.attained_s[queue])


class Srtf:
    """Shortest remaining time first: by ``base_iter_time * iterations - attained seconds``
    (the artifact's estimate, which ignores slowdowns)."""

    name = "srtf"
    static = False

    def order(self, queue: np.ndarray, state: JobTable) -> np.ndarray:
        """By estimated remaining seconds."""
        remaining = state.base[queue] * state.iters_total[queue] - state.attained_s[queue]
        return _stable(queue, remaining)


class Tiresias:
    """Tiresias' discretised two-dimensional LAS (Gu et al., NSDI 2019).

    A job's attained service is GPUs x seconds run. Jobs sit in priority queues split at
    ``thresholds`` (GPU-seconds): queue ``k`` holds jobs with ``thresholds[k-1] <= service <
    thresholds[k]``. Higher queues go first; within a queue, jobs go in arrival order (FIFO).
    With ``promote_knob`` set, a job that has waited at least ``promote_knob`` times its run
    time is promoted to the top queue (Tiresias' starvation guard).

    Parameters
    ----------
    thresholds : sequence of float, default (3600, 36000)
        Ascending queue limits in GPU-seconds (none: one queue, FIFO).
    promote_knob : float, optional
        Positive; default: no promotion.

    Raises
    ------
    InputError
        For thresholds that are not positive numbers in strictly ascending order, or a knob
        that is not a positive number.

    Examples
    --------
    >>> Tiresias([1800, 18000], promote_knob=2).thresholds.tolist()
    [1800.0, 18000.0]
    """

    name = "tiresias"
    static = False

    def __init__(
        self, thresholds: Sequence[float] = (3600.0, 36000.0), promote_knob: float | None = None
    ) -> None:
        if isinstance(thresholds, str) or not isinstance(thresholds, (Sequence, np.ndarray)):
            raise InputError("tiresias.thresholds", thresholds, "expected a list of GPU-seconds")
        th = np.array(
            [check_number(t, f"tiresias.thresholds[{i}]") for i, t in enumerate(thresholds)]
        )
        if (np.diff(th) <= 0).any():
            raise InputError("tiresias.thresholds", list(thresholds), "must be strictly ascending")
        if promote_knob is not None:
            check_number(promote_knob, "tiresias.promote_knob")
        self.thresholds = th
        self.promote_knob = promote_knob

    def levels(self, queue: np.ndarray, state: JobTable) -> np.ndarray:
        """Queue level of each job (0 = highest priority)."""
        level = np.searchsorted(self.thresholds, state.attained_gpu_s[queue], side="right")
        if self.promote_knob is not None:
            starving = state.waited_s[queue] >= self.promote_knob * state.attained_s[queue]
            level = np.where(starving & (state.attained_s[queue] > 0), 0, level)
        return level

    def order(self, queue: np.ndarray, state: JobTable) -> np.ndarray:
        """By queue level, then submit time."""
        return _stable(queue, self.levels(queue, state), state.submit[queue])


POLICIES: dict[str, Callable[..., Any]] = {
    "fifo": Fifo,
    "las": Las,
    "srtf": Srtf,
    "tiresias": Tiresias,
}


def get_policy(name: str | SchedulingPolicy, /, **options: Any) -> SchedulingPolicy:
    """A scheduling policy by name (case-insensitive), or the object itself.

    Parameters
    ----------
    name : str or SchedulingPolicy
        ``fifo``, ``las``, ``srtf`` or ``tiresias`` (see :data:`POLICIES`), or a policy object,
        returned as it is.
    **options
        The policy's settings (Tiresias: ``thresholds``, ``promote_knob``); the others have
        none.

    Returns
    -------
    SchedulingPolicy
        A new policy with these settings and defaults for the rest (Tiresias: thresholds 3,600
        and 36,000 GPU-seconds, no promotion), or ``name`` itself if it is not a string.

    Raises
    ------
    InputError
        For an unknown name (the message lists the valid ones), an option the policy does not
        have, options given with a policy object, or a bad value.

    Examples
    --------
    >>> get_policy("FIFO").name
    'fifo'
    >>> get_policy("tiresias", promote_knob=2.0).promote_knob
    2.0
    """
    if not isinstance(name, str):
        if options:
            raise InputError("scheduler", name, "a policy object takes no options")
        return name
    factory = POLICIES.get(name.lower())
    if factory is None:
        raise InputError("scheduler", name, f"unknown policy; known: {', '.join(POLICIES)}")
    known = inspect.signature(factory).parameters
    for key, value in options.items():
        if key not in known:
            raise InputError(
                f"{name.lower()}.{key}",
                value,
                f"unknown option for this policy; options: {', '.join(known) or 'none'}",
            )
    policy: SchedulingPolicy = factory(**options)
    return policy
