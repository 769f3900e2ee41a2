"""Binning per-GPU slowdowns into a few levels: exact 1-D k-means by dynamic programming.

PAL ranks GPUs by a *level* rather than by the raw measurement, so that GPUs whose performance
differs only by noise count as equal and locality can break the tie. This module turns one class's
values into levels, two ways (selected by name in :func:`bin_values`):

``"kmeans"`` (default)
    The optimal partition of the sorted values into ``k`` contiguous clusters (minimum total
    squared error), found exactly by dynamic programming, so the result is deterministic and
    global (no random restarts). ``k`` is the smallest number of clusters, at most ``k_max``
    (default 8), such that every value lies within a relative tolerance ``tol`` (default 2%) of
    its cluster centre: ``|v - centre| <= tol * |centre|``. If no ``k <= k_max`` meets the
    tolerance, ``k_max`` is used. A value's level is its cluster centre, on the scale of the
    input (with profiles normalised to the median GPU, 1.0 is the median GPU).

``"artifact"``
    The rule of the PAL artifact (hal-uw/blox-pal, ``placement/pal.py``): ``k = 2 + u`` where
    ``u`` counts the upper outliers, values above ``mean + 3 sd`` (sample standard deviation);
    the artifact meant to choose the base 2 by silhouette score, but its loop returns after the
    first candidate, so it is always 2. All values (outliers included) are clustered into ``k``
    groups, and a value's level is its cluster centre divided by the median of the ``k``
    centres. The artifact used scikit-learn's Lloyd iterations from a k-means++ start; here the
    clusters are the exact optimum, which gives the same levels whenever Lloyd's method found
    the optimum (it does on the artifact's 64-GPU cluster; see ``tests/test_binning.py``).

Examples
--------
>>> b = bin_values([1.0, 1.01, 0.99, 1.5, 1.52])
>>> b.k, b.centres.round(3).tolist()
(2, [1.0, 1.51])
>>> b = bin_values([1.0, 1.01, 0.99, 1.5, 1.52], method="artifact")
>>> b.levels.round(4).tolist()
[0.7968, 0.7968, 0.7968, 1.2032, 1.2032]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from palopt.errors import InputError, check_count, check_number

__all__ = ["Binning", "METHODS", "bin_values", "kmeans_1d"]

METHODS = ("kmeans", "artifact")


@dataclass(frozen=True, eq=False)
class Binning:
    """Levels of a set of values.

    Attributes
    ----------
    levels : numpy.ndarray
        Level of each input value, in input order.
    labels : numpy.ndarray
        Cluster index of each input value (clusters numbered by increasing centre).
    centres : numpy.ndarray
        Mean of each cluster, ascending.
    k : int
        Number of clusters.
    method : str
        ``"kmeans"`` or ``"artifact"``.
    sse : float
        Total squared distance of the values to their cluster centres.

    Examples
    --------
    >>> b = bin_values([1.0, 1.01, 1.5])
    >>> b.k, b.labels.tolist(), b.levels.round(3).tolist()
    (2, [0, 0, 1], [1.005, 1.005, 1.5])
    """

    levels: np.ndarray
    labels: np.ndarray
    centres: np.ndarray
    k: int
    method: str
    sse: float

    @property
    def distinct_levels(self) -> np.ndarray:
        """The distinct levels, ascending (one per cluster).

        Examples
        --------
        >>> bin_values([1.5, 1.0, 1.01]).distinct_levels.round(3).tolist()
        [1.005, 1.5]
        """
        return np.unique(self.levels)


class _KMeansDP:
    """The dynamic programme of exact 1-D k-means, one layer per number of clusters.

    The values are reduced to their distinct values ``u`` (sorted) with multiplicities, so equal
    values always share a cluster. ``cost[k - 1][j]`` is the least total squared error of
    splitting ``u[: j + 1]`` into ``k`` contiguous clusters and ``start[k - 1][j]`` the first
    index of the last of those clusters (the smallest on ties, so results are deterministic).

    A layer is ``cost[k][j] = min_i cost[k - 1][i - 1] + sse(i, j)``. The squared-error cost
    obeys the quadrangle inequality, so the smallest minimising ``i`` never decreases with
    ``j``; each layer is therefore computed by divide and conquer on ``j`` (solve the middle
    ``j``, then search left and right halves only on their side of its ``i``), all the segments
    of one recursion level at once with numpy: ``O(m log m)`` work per layer for ``m`` distinct
    values.
    """

    def __init__(self, x: np.ndarray) -> None:
        self.u, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
        self.inverse = inverse.ravel()
        w = counts.astype(np.float64)
        # The values scaled by a power of two (exactly) to below 1 in magnitude: the sums of
        # squares overflowed from about 1e154 (inf - inf made every cost NaN), and underflowed
        # to nothing below about 1e-154.
        self.exp = int(np.frexp(np.abs(self.u).max())[1])
        self.scaled = us = np.ldexp(self.u, -self.exp)
        uc = us - float(np.dot(w, us) / w.sum())  # centring keeps differences accurate
        self.s0 = np.concatenate(([0.0], np.cumsum(w)))
        self.s1 = np.concatenate(([0.0], np.cumsum(w * uc)))
        self.s2 = np.concatenate(([0.0], np.cumsum(w * uc * uc)))
        m = len(self.u)
        self.cost = [self._sse(np.zeros(m, dtype=np.int64), np.arange(m))]
        self.start = [np.zeros(m, dtype=np.int64)]

    def _sse(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Squared error of the clusters ``u[i..j]`` (elementwise)."""
        n = self.s0[j + 1] - self.s0[i]
        total = self.s1[j + 1] - self.s1[i]
        return np.maximum(self.s2[j + 1] - self.s2[i] - total * total / n, 0.0)

    def extend(self, k: int) -> None:
        """Compute the layers up to ``k`` clusters (``k`` at most the distinct values)."""
        m = len(self.u)
        while len(self.cost) < k:
            layer = len(self.cost)  # the new layer has layer + 1 clusters
            prev = self.cost[-1]
            cost = np.full(m, np.inf)
            start = np.zeros(m, dtype=np.int64)
            # segments: ends jl..jr, to be searched over starts il..ir
            jl, jr = np.array([layer]), np.array([m - 1])
            il, ir = np.array([layer]), np.array([m - 1])
            while len(jl):
                mid = (jl + jr) // 2
                hi = np.minimum(ir, mid)
                lens = hi - il + 1
                firsts = np.cumsum(lens) - lens
                seg = np.repeat(np.arange(len(mid)), lens)
                i = il[seg] + np.arange(int(lens.sum())) - firsts[seg]
                vals = prev[i - 1] + self._sse(i, mid[seg])
                best = np.minimum.reduceat(vals, firsts)
                arg = np.minimum.reduceat(np.where(vals == best[seg], i, m), firsts)
                cost[mid] = best
                start[mid] = arg
                left, right = jl < mid, mid < jr
                jl, jr, il, ir = (
                    np.concatenate((jl[left], mid[right] + 1)),
                    np.concatenate((mid[left] - 1, jr[right])),
                    np.concatenate((il[left], arg[right])),
                    np.concatenate((arg[left], ir[right])),
                )
            self.cost.append(cost)
            self.start.append(start)

    def solve(self, k: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Labels (input order), ascending centres and SSE of the optimal ``k``-split."""
        self.extend(k)
        m = len(self.u)
        bounds = np.zeros(k, dtype=np.int64)
        j = m - 1
        for layer in range(k - 1, 0, -1):
            bounds[layer] = self.start[layer][j]
            j = bounds[layer] - 1
        unique_labels: np.ndarray = np.zeros(m, dtype=np.int64)
        unique_labels[bounds[1:]] = 1
        unique_labels = np.cumsum(unique_labels)
        # mean of each cluster as its smallest value plus the mean offset from it: exact for a
        # cluster of equal values, and free of the cancellation of a plain weighted sum
        w = np.diff(self.s0)
        first = np.concatenate(([0], bounds[1:]))
        base = self.u[first]
        # (the offsets from the base on the scaled values, then scaled back: the same numbers,
        # as the scale is a power of two, and no overflow between values far apart)
        us = self.scaled
        offsets = np.bincount(unique_labels, weights=w * (us - us[first][unique_labels]))
        centres = base + np.ldexp(offsets / np.bincount(unique_labels, weights=w), self.exp)
        # the squared error of the clusters found, term by term: the DP's cost comes from
        # differences of prefix sums, which lose small clusters' errors to a wide value range
        with np.errstate(over="ignore"):  # (an error beyond the largest float is inf)
            sse = float(np.dot(w, (self.u - centres[unique_labels]) ** 2))
        return unique_labels[self.inverse], centres, sse


def kmeans_1d(values: Sequence[float] | np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Exact 1-D k-means: the partition of the values into ``k`` clusters of least squared error.

    In one dimension an optimal clustering consists of contiguous runs of the sorted values, so
    dynamic programming over the sorted distinct values finds it exactly, in ``O(k m log m)``
    vectorised work for ``m`` distinct values (equal values always share a cluster). Exactly up
    to float rounding: the DP prices a cluster by differences of prefix sums, so where the
    values span many orders of magnitude (``1e-4`` beside ``1e5``) a small cluster's error is
    lost to rounding and the partition may not be the best one; slowdowns around 1 are far from
    that. The ``sse`` returned is that of the clusters found, summed term by term.

    Parameters
    ----------
    values : sequence of float
        Finite values, at least ``k`` distinct.
    k : int
        Number of clusters, at least 1.

    Returns
    -------
    labels : numpy.ndarray
        Cluster of each value (input order), clusters numbered by increasing centre.
    centres : numpy.ndarray
        Cluster means, ascending.
    sse : float
        Total squared error.

    Raises
    ------
    InputError
        For non-finite values, ``k < 1`` or fewer than ``k`` distinct values.

    Examples
    --------
    >>> labels, centres, sse = kmeans_1d([5.0, 1.0, 1.2, 5.4], 2)
    >>> labels.tolist(), centres.round(2).tolist()
    ([1, 0, 0, 1], [1.1, 5.2])
    """
    x = _check_values(values)
    k = check_count(k, "k")
    if k > len(np.unique(x)):
        raise InputError("k", k, f"more clusters than distinct values ({len(np.unique(x))})")
    return _KMeansDP(x).solve(k)


def _check_values(values: Sequence[float] | np.ndarray) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype.kind not in "iuf":
        raise InputError("values", values.dtype.name, "expected a sequence of numbers")
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError("values", values, "expected a sequence of numbers") from None
    except OverflowError:  # an int beyond the largest float
        raise InputError("values", values, "values must be finite") from None
    if x.ndim != 1:
        raise InputError("values", x.shape, "expected a flat sequence of numbers")
    if x.size == 0:
        raise InputError("values", [], "need at least one value")
    if not np.isfinite(x).all():
        raise InputError("values", float(x[~np.isfinite(x)][0]), "values must be finite")
    return x


def artifact_k(values: Sequence[float] | np.ndarray) -> int:
    """The artifact's number of clusters: 2 plus the upper outliers beyond mean + 3 sd.

    The standard deviation is the sample one (``ddof=1``), as pandas computes it. The result
    is capped at the number of distinct values.

    Parameters
    ----------
    values : sequence of float
        Finite values, e.g. one class's slowdowns over a cluster's GPUs.

    Returns
    -------
    int

    Raises
    ------
    InputError
        For values that are not a non-empty, flat sequence of finite numbers.

    Examples
    --------
    >>> artifact_k([1.0] * 20 + [1.01] * 20 + [3.0])
    3
    """
    x = _check_values(values)
    # (on the values scaled by a power of two: the same comparisons, and no overflow)
    xs = np.ldexp(x, -int(np.frexp(np.abs(x).max())[1]))
    sd = float(np.std(xs, ddof=1)) if x.size > 1 else 0.0
    outliers = int(np.count_nonzero(xs > xs.mean() + 3.0 * sd))
    return min(2 + outliers, len(np.unique(x)))


def bin_values(
    values: Sequence[float] | np.ndarray,
    method: str = "kmeans",
    k: int | None = None,
    tol: float = 0.02,
    k_max: int = 8,
) -> Binning:
    """Bin values into levels (see the module docstring for the two rules).

    Parameters
    ----------
    values : sequence of float
        Finite values, e.g. one class's slowdowns over a cluster's GPUs.
    method : {"kmeans", "artifact"}
        ``"kmeans"``: level = cluster centre, ``k`` by the tolerance rule. ``"artifact"``: level =
        centre / median of the centres, ``k`` = 2 + upper outliers.
    k : int, optional
        Force the number of clusters (capped at the number of distinct values) instead of the
        method's rule.
    tol : float, default 0.02
        Relative tolerance of the ``"kmeans"`` rule.
    k_max : int, default 8
        Largest ``k`` the ``"kmeans"`` rule tries.

    Returns
    -------
    Binning

    Raises
    ------
    InputError
        For an unknown method, values that are not a flat sequence of finite numbers (positive
        ones for ``"artifact"``), or a bad ``k``, ``tol`` or ``k_max``.

    Examples
    --------
    >>> bin_values([1.0, 1.0, 1.3], method="kmeans").levels.tolist()
    [1.0, 1.0, 1.3]
    >>> bin_values([1.0, 1.0, 1.3], method="kmeans", k=1).k
    1
    """
    if method not in METHODS:
        raise InputError("method", method, f"must be one of {', '.join(METHODS)}")
    x = _check_values(values)
    if method == "artifact" and (x <= 0).any():  # its levels are divided by the median centre
        raise InputError("values", float(x[x <= 0][0]), "the artifact rule needs positive values")
    distinct = len(np.unique(x))
    if k is not None:
        check_count(k, "k")
    check_number(tol, "tol", inclusive=True)
    check_count(k_max, "k_max")
    if k is not None:
        k_rule = min(int(k), distinct)
    elif method == "artifact":
        k_rule = artifact_k(x)
    else:
        k_rule = None
    dp = _KMeansDP(x)
    if k_rule is None:
        for kk in range(1, min(k_max, distinct) + 1):
            labels, centres, sse = dp.solve(kk)
            if np.all(np.abs(x - centres[labels]) <= tol * np.abs(centres[labels])):
                break
    else:
        kk = k_rule
        labels, centres, sse = dp.solve(kk)
    levels = centres[labels]
    if method == "artifact":
        levels = levels / np.median(centres)
    levels.setflags(write=False)
    labels.setflags(write=False)
    centres.setflags(write=False)
    return Binning(levels, labels, centres, kk, method, sse)
