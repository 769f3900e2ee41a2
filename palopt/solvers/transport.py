"""Optimal assignment of interchangeable 1-GPU jobs to GPUs: a transportation problem.

Commodities (1-GPU jobs of one class and weight) send ``counts[m]`` units to distinct GPUs at
``cost[m, g]``. The LP is totally unimodular, so HiGHS's simplex vertex is an integral optimum.
Without ``highspy`` each commodity takes its cheapest GPUs alone: a lower bound, no assignment.

:func:`transport_bound` gives a lower bound that holds whatever the solver's tolerances: for any GPU
prices ``pi >= 0``, ``sum over m of the counts[m] least (cost[m, g] + pi[g]) - sum(pi)`` is at
most the optimum (the GPU capacities relaxed at those prices), and the LP's duals give prices
that make it the optimum up to those tolerances. HiGHS's own objective value can be above the
optimum by its tolerances (seen at 2e-6 relative with weights 1 and 1e6 in one round). The
bound is the better of the duals' and zero prices', each lowered by the most float rounding can
have raised it (:func:`rounded_down`): with a dual of 3e6 beside costs of 1e-9, the sum and the
difference lost the costs and came out 7% above the optimum.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from typing import Any

import numpy as np

__all__ = ["transport", "transport_bound", "HAVE_HIGHS", "new_highs", "rounded_down"]

HAVE_HIGHS = importlib.util.find_spec("highspy") is not None

#: Whether a ``highspy.Highs`` has been made in this process (HiGHS prints its banner for the
#: first only), and the lock that lets one thread alone silence standard output for it.
_BANNER_SHOWN = False
_BANNER_LOCK = threading.Lock()


def new_highs() -> Any:
    """A silent ``highspy.Highs`` (single thread, no log).

    HiGHS prints a banner on the process's standard output when the first instance is made,
    which would corrupt a caller's output (``palopt solve --format json``); the file descriptor
    is pointed at the null device for that moment, once per process and by one thread at a
    time (later instances leave it alone).

    Returns
    -------
    highspy.Highs
        An empty model with ``output_flag`` off and ``threads`` set to 1.

    Examples
    --------
    >>> import numpy as np
    >>> h = new_highs()
    >>> _ = h.addCol(2.0, 1.0, 3.0, 0, np.array([], dtype=np.int32), np.array([]))  # 1 <= x <= 3
    >>> _ = h.run()  # minimise 2 x, printing nothing
    >>> h.getInfo().objective_function_value
    2.0
    """
    import highspy

    if not _BANNER_SHOWN:  # after the first, fd 1 is left alone (other threads write it)
        _make_the_first_highs_silently()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    return h


def _make_the_first_highs_silently() -> None:
    """Make (and drop) the process's first ``highspy.Highs``, the one that prints the banner,
    with fd 1 on the null device. Once, under a lock: two threads each saving and restoring
    fd 1 could restore the null device (one saves it while the other has it in place) and
    silence the process."""
    import highspy

    global _BANNER_SHOWN
    with _BANNER_LOCK:
        if _BANNER_SHOWN:
            return
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "w", encoding="utf-8") as null:
                os.dup2(null.fileno(), 1)
                highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        _BANNER_SHOWN = True


def transport(counts: list[int], cost: np.ndarray) -> np.ndarray | None:
    """An assignment of least cost sending ``counts[m]`` units from each row to distinct columns.

    Parameters
    ----------
    counts : list of int
        Units per row (commodity); their sum must not exceed the number of columns.
    cost : numpy.ndarray
        ``(rows, columns)`` costs.

    Returns
    -------
    numpy.ndarray or None
        Boolean ``(rows, columns)`` assignment, optimal up to the LP's tolerances, or ``None``
        without ``highspy`` (for two rows or more).

    Examples
    --------
    >>> import numpy as np
    >>> transport([1, 1], np.array([[1.0, 2.0], [1.0, 5.0]])).astype(int).tolist()
    [[0, 1], [1, 0]]
    """
    m, n = cost.shape
    if not counts or sum(counts) == 0:
        return np.zeros((m, n), dtype=bool)
    if m == 1:
        x = np.zeros((1, n), dtype=bool)
        x[0, np.argsort(cost[0], kind="stable")[: counts[0]]] = True
        return x
    if not HAVE_HIGHS:
        return None
    return np.asarray(_solve(counts, cost)[0].col_value).reshape(m, n) > 0.5


def transport_bound(counts: list[int], cost: np.ndarray) -> float:
    """A lower bound on the least cost of :func:`transport`, equal to it up to the LP's
    tolerances (see the module documentation; exact for a single row, and without ``highspy``
    the independent per-row bound).

    Parameters
    ----------
    counts : list of int
        Units per row (commodity); their sum must not exceed the number of columns.
    cost : numpy.ndarray
        ``(rows, columns)`` costs.

    Returns
    -------
    float
        The bound; 0.0 if ``counts`` is empty or all zero.

    Examples
    --------
    >>> import numpy as np
    >>> round(transport_bound([1, 1], np.array([[1.0, 2.0], [1.0, 5.0]])), 9)  # a hair under 3
    3.0
    """
    m, n = cost.shape
    if not counts or sum(counts) == 0:
        return 0.0
    alone = _priced_bound(counts, cost, np.zeros(n))
    if m == 1 or not HAVE_HIGHS:
        return alone
    solution, unit = _solve(counts, cost)
    # A GPU row at its upper bound has a dual <= 0 in a minimisation: its price is minus that.
    prices = unit * np.maximum(-np.asarray(solution.row_dual)[m:], 0.0)
    return max(_priced_bound(counts, cost, prices), alone)


def _solve(counts: list[int], cost: np.ndarray) -> tuple[Any, float]:
    """HiGHS's solution of the transportation LP, and the unit its costs were divided by."""
    import highspy

    m, n = cost.shape
    h = new_highs()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = m * n, m + n
    # HiGHS's tolerances are absolute: costs of 1e-9 would all look alike. Dividing by a power of
    # two brings the largest to [1, 2) without changing a digit of any cost.
    top = float(np.abs(cost).max())
    unit = float(2.0 ** np.floor(np.log2(top))) if top > 0 else 1.0
    lp.col_cost_ = (cost / unit).ravel().astype(np.float64)
    lp.col_lower_ = np.zeros(m * n)
    lp.col_upper_ = np.ones(m * n)
    lp.row_lower_ = np.r_[np.asarray(counts, dtype=np.float64), np.zeros(n)]
    lp.row_upper_ = np.r_[np.asarray(counts, dtype=np.float64), np.ones(n)]
    col = np.arange(m * n)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.arange(0, 2 * m * n + 1, 2, dtype=np.int32)
    lp.a_matrix_.index_ = np.stack([col // n, m + col % n], axis=1).ravel().astype(np.int32)
    lp.a_matrix_.value_ = np.ones(2 * m * n)
    h.passModel(lp)
    h.run()
    return h.getSolution(), unit


def _priced_bound(counts: list[int], cost: np.ndarray, prices: np.ndarray) -> float:
    """The Lagrangian bound of the module documentation at GPU prices ``prices >= 0``."""
    priced = cost + prices
    least = float(
        sum(np.partition(row, k - 1)[:k].sum() for row, k in zip(priced, counts, strict=True) if k)
    )
    total = float(prices.sum())
    return rounded_down(least - total, least + total, sum(counts) + len(prices))


def rounded_down(value: float, magnitude: float, terms: int) -> float:
    """A Lagrangian bound computed in floats, lowered by the most rounding can have raised it.

    Parameters
    ----------
    value : float
        The bound as computed: sums and differences of ``terms`` floats or fewer, including
        least sums chosen by their rounded values.
    magnitude : float
        The sum of the absolute values of those floats.
    terms : int

    Returns
    -------
    float
        ``value - (2 terms + 3) eps magnitude``: each addition errs by at most ``eps`` times
        the magnitude, and a least sum chosen by rounded values by at most ``3 eps`` times it.

    Examples
    --------
    >>> rounded_down(1.0, 1.0, 10) < 1.0 < rounded_down(1.0, 1.0, 10) + 1e-13
    True
    """
    return value - (2 * terms + 3) * float(np.finfo(np.float64).eps) * magnitude
