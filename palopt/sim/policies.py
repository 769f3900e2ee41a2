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

    Attributes
    ----------
    name : str
        The policy's name in results.
    static : bool

    Examples
    --------
    Any object with these attributes and an ``order`` method will do:

    >>> class Reverse:
    ...     name, static = "reverse", True
    ...     def order(self, queue, state):
    ...         return queue[::-1]
    >>> get_policy(Reverse()).name
    'reverse'
    """

    name: str
    static: bool

    def order(self, queue: np.ndarray, state: JobTable) -> np.ndarray:
        """Job indices of ``queue`` in priority order.

        Parameters
        ----------
        queue : numpy.ndarray
            Job indices (into ``state``), in admission order.
        state : JobTable
            The simulator's per-job arrays.

        Returns
        -------
        numpy.ndarray
            Each index of ``queue`` once, the first job first.
        """
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
        """By submit time.

        Parameters
        ----------
        queue : numpy.ndarray
            Job indices (into ``state``), in admission order.
        state : JobTable
            The simulator's per-job arrays.

        Returns
        -------
        numpy.ndarray
            The indices of ``queue``, in priority order (ties keep admission order).

        Examples
        --------
        >>> import numpy as np
        >>> from palopt.sim.engine import JobTable
        >>> from palopt.sim.trace import TraceJob
        >>> state = JobTable([TraceJob(f"j{i}", 2, 10.0 * (2 - i), 1000.0, "m", "A", 1.0)
        ...                   for i in range(3)], {"A": 0})  # submitted at 20, 10 and 0 s
        >>> Fifo().order(np.arange(3), state).tolist()
        [2, 1, 0]
        """
        return _stable(queue, state.submit[queue])


class Las:
    """Least attained service: by seconds run so far (not GPU-weighted, as the artifact).

    Examples
    --------
    >>> Las().name, Las().static
    ('las', False)
    """

    name = "las"
    static = False

    def order(self, queue: np.ndarray, state: JobTable) -> np.ndarray:
        """By attained seconds.

        Parameters
        ----------
        queue : numpy.ndarray
            Job indices (into ``state``), in admission order.
        state : JobTable
            The simulator's per-job arrays.

        Returns
        -------
        numpy.ndarray
            The indices of ``queue``, in priority order (ties keep admission order).

        Examples
        --------
        >>> import numpy as np
        >>> from palopt.sim.engine import JobTable
        >>> from palopt.sim.trace import TraceJob
        >>> state = JobTable([TraceJob(f"j{i}", 2, 10.0 * (2 - i), 1000.0, "m", "A", 1.0)
        ...                   for i in range(3)], {"A": 0})  # submitted at 20, 10 and 0 s
        >>> state.attained_s[:] = [600.0, 0.0, 60.0]
        >>> Las().order(np.arange(3), state).tolist()
        [1, 2, 0]
        """
        return _stable(queue, state.attained_s[queue])


class Srtf:
    """Shortest remaining time first: by ``base_iter_time * iterations - attained seconds``
    (the artifact's estimate, which ignores slowdowns).

    Examples
    --------
    >>> Srtf().name, Srtf().static
    ('srtf', False)
    """

    name = "srtf"
    static = False

    def order(self, queue: np.ndarray, state: JobTable) -> np.ndarray:
        """By estimated remaining seconds.

        Parameters
        ----------
        queue : numpy.ndarray
            Job indices (into ``state``), in admission order.
        state : JobTable
            The simulator's per-job arrays.

        Returns
        -------
        numpy.ndarray
            The indices of ``queue``, in priority order (ties keep admission order).

        Examples
        --------
        >>> import numpy as np
        >>> from palopt.sim.engine import JobTable
        >>> from palopt.sim.trace import TraceJob
        >>> state = JobTable([TraceJob(f"j{i}", 2, 10.0 * (2 - i), 1000.0, "m", "A", 1.0)
        ...                   for i in range(3)], {"A": 0})  # submitted at 20, 10 and 0 s
        >>> state.attained_s[:] = [600.0, 0.0, 60.0]  # 1000 s each, on a median GPU
        >>> Srtf().order(np.arange(3), state).tolist()
        [0, 2, 1]
        """
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
        """Queue level of each job (0 = highest priority).

        Parameters
        ----------
        queue : numpy.ndarray
            Job indices (into ``state``).
        state : JobTable
            The simulator's per-job arrays.

        Returns
        -------
        numpy.ndarray
            The level of each job of ``queue``: the number of thresholds at or below its
            GPU-seconds, or 0 for a job promoted (one that has run and waited at least
            ``promote_knob`` times its run time).

        Examples
        --------
        >>> import numpy as np
        >>> from palopt.sim.engine import JobTable
        >>> from palopt.sim.trace import TraceJob
        >>> state = JobTable([TraceJob(f"j{i}", 2, 10.0 * (2 - i), 1000.0, "m", "A", 1.0)
        ...                   for i in range(3)], {"A": 0})  # submitted at 20, 10 and 0 s
        >>> state.attained_s[:] = [600.0, 0.0, 60.0]
        >>> state.attained_gpu_s[:] = 2 * state.attained_s
        >>> state.waited_s[:] = [0.0, 660.0, 600.0]
        >>> Tiresias([100, 1000]).levels(np.arange(3), state).tolist()
        [2, 0, 1]
        >>> Tiresias([100, 1000], promote_knob=2).levels(np.arange(3), state).tolist()
        [2, 0, 0]
        """
        level = np.searchsorted(self.thresholds, state.attained_gpu_s[queue], side="right")
        if self.promote_knob is not None:
            starving = state.waited_s[queue] >= self.promote_knob * state.attained_s[queue]
            level = np.where(starving & (state.attained_s[queue] > 0), 0, level)
        return level

    def order(self, queue: np.ndarray, state: JobTable) -> np.ndarray:
        """By queue level, then submit time.

        Parameters
        ----------
        queue : numpy.ndarray
            Job indices (into ``state``), in admission order.
        state : JobTable
            The simulator's per-job arrays.

        Returns
        -------
        numpy.ndarray
            The indices of ``queue``, in priority order (ties keep admission order).

        Examples
        --------
        >>> import numpy as np
        >>> from palopt.sim.engine import JobTable
        >>> from palopt.sim.trace import TraceJob
        >>> state = JobTable([TraceJob(f"j{i}", 2, 10.0 * (2 - i), 1000.0, "m", "A", 1.0)
        ...                   for i in range(3)], {"A": 0})  # submitted at 20, 10 and 0 s
        >>> state.attained_gpu_s[:] = [1200.0, 0.0, 120.0]
        >>> Tiresias([100, 1000]).order(np.arange(3), state).tolist()
        [1, 2, 0]
        """
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
