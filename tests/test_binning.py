"""Exact 1-D k-means, the k rules, and the artifact-compatible binning."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palopt.binning import artifact_k, bin_values, kmeans_1d
from palopt.errors import InputError


def brute_force_sse(values: list[float], k: int) -> float:
    """Least SSE over every split of the sorted values into k contiguous non-empty runs."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    best = np.inf
    for cuts in combinations(range(1, len(x)), k - 1):
        parts = np.split(x, cuts)
        best = min(best, sum(float(((p - p.mean()) ** 2).sum()) for p in parts))
    return best


values_st = st.lists(
    st.sampled_from([0.9, 0.95, 0.97, 1.0, 1.001, 1.02, 1.1, 1.5, 2.0, 3.25]),
    min_size=1,
    max_size=8,
) | st.lists(st.floats(0.5, 3.0, allow_nan=False), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(values_st, st.integers(1, 8))
def test_dp_matches_brute_force(values: list[float], k: int) -> None:
    k = min(k, len(set(values)))
    labels, centres, sse = kmeans_1d(values, k)
    x = np.asarray(values)
    assert sse == pytest.approx(brute_force_sse(values, k), abs=1e-9)
    # the reported SSE, centres and labels agree with each other
    assert float(((x - centres[labels]) ** 2).sum()) == pytest.approx(sse, abs=1e-9)
    assert np.allclose(centres, [x[labels == c].mean() for c in range(k)])
    assert np.all(np.diff(centres) > 0)
    # clusters are contiguous runs of the sorted values
    order = np.argsort(x, kind="stable")
    assert np.all(np.diff(labels[order]) >= 0)


def reference_dp_sse(values: list[float], k: int) -> float:
    """Plain O(k n^2) dynamic programme over the sorted values (no monotonicity shortcut)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = len(x)

    def sse(i: int, j: int) -> float:
        part = x[i : j + 1]
        return float(((part - part.mean()) ** 2).sum())

    cost = [sse(0, j) for j in range(n)]
    for layer in range(1, k):
        cost = [
            min((cost[i - 1] + sse(i, j) for i in range(max(layer, 1), j + 1)), default=np.inf)
            for j in range(n)
        ]
    return cost[-1]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.floats(0.8, 1.6, allow_nan=False).map(lambda v: round(v, 2)), min_size=10, max_size=40
    ),
    st.integers(2, 8),
)
def test_dp_matches_plain_dp_on_larger_inputs(values: list[float], k: int) -> None:
    k = min(k, len(set(values)))
    _, _, sse = kmeans_1d(values, k)
    assert sse == pytest.approx(reference_dp_sse(values, k), abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(values_st, st.randoms(use_true_random=False))
def test_deterministic_and_order_independent(values: list[float], rnd) -> None:
    a = bin_values(values)
    b = bin_values(values)
    assert np.array_equal(a.levels, b.levels) and a.k == b.k
    shuffled = list(range(len(values)))
    rnd.shuffle(shuffled)
    c = bin_values([values[i] for i in shuffled])
    assert np.allclose(c.levels, a.levels[shuffled])


@settings(max_examples=80, deadline=None)
@given(values_st, st.sampled_from([0.0, 0.005, 0.02, 0.1]), st.integers(1, 8))
def test_kmeans_k_rule(values: list[float], tol: float, k_max: int) -> None:
    b = bin_values(values, tol=tol, k_max=k_max)
    x = np.asarray(values)

    def within(k: int) -> bool:
        labels, centres, _ = kmeans_1d(x, k)
        return bool(np.all(np.abs(x - centres[labels]) <= tol * centres[labels]))

    assert 1 <= b.k <= min(k_max, len(set(values)))
    if within(b.k):
        assert b.k == 1 or not within(b.k - 1)
    else:
        assert b.k == min(k_max, len(set(values)))  # no smaller k meets the tolerance
    assert np.array_equal(b.levels, b.centres[b.labels])


def test_kmeans_rule_examples() -> None:
    assert bin_values([1.0] * 5).k == 1
    equal = bin_values([1.5984923632230372] * 3, tol=0.0)  # centre of equal values is exact
    assert equal.k == 1 and equal.centres.tolist() == [1.5984923632230372]
    b = bin_values([1.0, 1.01, 0.99, 1.5, 1.52])
    assert b.k == 2 and np.allclose(b.distinct_levels, [1.0, 1.51])
    assert bin_values([1.0, 1.01, 0.99, 1.5, 1.52], k=1).k == 1
    assert bin_values([1.0, 1.5], k=5).k == 2  # capped at the distinct values


def test_artifact_k_counts_upper_outliers_only() -> None:
    base = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98] * 5
    assert artifact_k(base) == 2
    assert artifact_k(base + [3.0]) == 3
    assert artifact_k(base + [-3.0]) == 2  # a lower outlier does not count
    assert artifact_k([1.0, 1.0]) == 1  # capped at the distinct values


def test_artifact_levels_are_centres_over_median_centre() -> None:
    x = [1.0, 1.01, 0.99, 1.5, 1.52]
    b = bin_values(x, method="artifact")
    assert b.k == 2
    assert np.allclose(b.levels, b.centres[b.labels] / np.median(b.centres))


def test_artifact_rule_reproduces_sim64_sf(artifact_dir: Path) -> None:
    """Binning PerfVar_classX by the artifact rule gives exactly the artifact's sf_classX."""
    df = pd.read_csv(artifact_dir / "sim-64gpu-cluster.csv")
    for c in "ABCD":
        b = bin_values(df[f"PerfVar_class{c}"].to_numpy(), method="artifact")
        assert np.allclose(b.levels, df[f"sf_class{c}"].to_numpy(), rtol=0, atol=1e-12), c
    assert bin_values(df["PerfVar_classA"].to_numpy(), method="artifact").k == 3


def test_large_input() -> None:
    x = np.random.default_rng(0).normal(1.0, 0.05, 4000)
    b = bin_values(x)
    assert b.k == 8 and np.all(np.diff(b.centres) > 0)
    assert np.all(np.diff(b.labels[np.argsort(x)]) >= 0)


def test_equal_values_share_a_cluster() -> None:
    x = [1.0, 1.0, 1.0, 2.0, 2.0, 3.0]
    labels, centres, sse = kmeans_1d(x, 2)
    assert labels.tolist() == [0, 0, 0, 1, 1, 1] and sse == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"values": [1.0, float("nan")]}, "values"),
        ({"values": []}, "values"),
        ({"values": [1.0], "method": "silhouette"}, "method"),
        ({"values": [1.0], "k": 0}, "k"),
        ({"values": [1.0], "tol": -1.0}, "tol"),
        ({"values": [1.0], "k_max": 0}, "k_max"),
    ],
)
def test_bad_input(kwargs: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        bin_values(**kwargs)
    assert err.value.field == field


def test_kmeans_1d_rejects_too_many_clusters() -> None:
    with pytest.raises(InputError, match="distinct"):
        kmeans_1d([1.0, 1.0, 2.0], 3)


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "2"])
def test_kmeans_1d_rejects_a_k_that_is_not_a_positive_integer(k: object) -> None:
    with pytest.raises(InputError, match="must be a positive integer") as err:
        kmeans_1d([1.0, 2.0, 3.0], k)  # type: ignore[arg-type]
    assert err.value.field == "k"


def test_kmeans_1d_is_exact_far_from_zero() -> None:
    # Sums of squares taken about the mean, not zero: at 1e8 the raw squares (1e16) would
    # swamp the differences of 1e-3 between values.
    x = np.array([0.0, 0.001, 0.002, 0.5, 0.501, 0.502, 1.3, 1.301])
    labels, centres, sse = kmeans_1d(x, 3)
    far, far_centres, far_sse = kmeans_1d(x + 1e8, 3)
    assert labels.tolist() == far.tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
    assert far_centres - 1e8 == pytest.approx(centres, abs=1e-7)
    assert far_sse == pytest.approx(sse, abs=1e-7) and sse == pytest.approx(4.5e-6)


def test_artifact_rule_names_the_first_value_it_cannot_divide_by() -> None:
    with pytest.raises(InputError, match="the artifact rule needs positive values") as err:
        bin_values([0.5, -1.0, 2.0, 0.0], method="artifact")
    assert (err.value.field, err.value.value) == ("values", -1.0)


def test_reported_sse_is_that_of_the_clusters_over_a_wide_range() -> None:
    # Prefix sums over values from 1e-12 to 1e10 cancel to nothing for the small clusters:
    # the SSE reported was 0.0 for clusters whose squared error is about 25.
    x = np.array([6.785e-11, 2.497e-07, 2.785e-12, 235929297.5, 23431487464.5, 7.059])
    for k in range(1, 7):
        labels, centres, sse = kmeans_1d(x, k)
        direct = sum(float(((x[labels == c] - centres[c]) ** 2).sum()) for c in range(k))
        assert sse == pytest.approx(direct, rel=1e-9, abs=1e-300)
        assert bin_values(x, k=k).sse == sse


@pytest.mark.parametrize("method", ["kmeans", "artifact"])
def test_values_of_any_finite_size_are_binned(method: str) -> None:
    # Fault: from about 1e154 the DP's sums of squares overflowed, every cluster cost was NaN
    # and numpy raised an IndexError; an int too large for a float raised an OverflowError.
    x = np.array([1.0, 1.01, 0.99, 1.5, 1.52])
    small = bin_values(x, method=method)
    for scale in (2.0**600, 2.0**-600, 1e300):
        big = bin_values(x * scale, method=method)
        assert big.k == small.k and big.labels.tolist() == small.labels.tolist()
        expected = small.levels if method == "artifact" else small.levels * scale
        assert big.levels == pytest.approx(expected, rel=1e-12)
    assert bin_values([1e200, 1.5e200, 1e-200]).levels.tolist() == [1e200, 1.5e200, 1e-200]
    labels, centres, sse = kmeans_1d([2e160, 1e160, 0.0], 2)
    assert labels.tolist() == [1, 1, 0] and centres.tolist() == [0.0, 1.5e160]
    assert sse == np.inf  # 5e319: beyond the largest float
    with pytest.raises(InputError, match="values must be finite") as err:
        bin_values([10**400, 1.0], method=method)
    assert err.value.field == "values"
