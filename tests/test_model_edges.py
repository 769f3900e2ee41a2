"""The data model at the edges its other tests left open (found by mutation testing): each
test names the fault it catches."""

from __future__ import annotations

import numpy as np
import pytest

from palopt import InputError, Instance, Job, Topology, build_cluster
from palopt.binning import artifact_k, bin_values, kmeans_1d
from palopt.instance import penalty_matrix
from palopt.variability import VariabilityProfile, assign_profile, build_instance

TOPO = build_cluster(1, 2, 2)  # 4 GPUs, tiers server < rack < cluster


def _instance(*jobs: Job, classes: tuple[str, ...] = ("A",), **kwargs: object) -> Instance:
    n = len(classes)
    return Instance(TOPO, classes, np.ones((n, 4)), np.ones((n, 3)), jobs, **kwargs)


# --- topology ---------------------------------------------------------------------------------


def test_an_nvlink_island_that_does_not_divide_the_server_is_refused():
    # Fault: the divisor check dropped; 4 GPUs in islands of 3 became islands {0, 1, 2}, {3}.
    with pytest.raises(InputError, match="positive divisor of gpus_per_server"):
        build_cluster(1, 1, 4, nvlink_island=3)


@pytest.mark.parametrize("flag", ["directed", "multigraph"])
@pytest.mark.parametrize("value", [0, None, ""])
def test_node_link_flags_other_than_false_are_refused_even_when_falsy(flag, value):
    # Fault: the flags tested for truth instead of `is not False`; the schema's `const: false`
    # refuses 0 and null, so the loader accepting them would disagree with it.
    data = build_cluster(1, 1, 2).to_node_link()
    data[flag] = value
    with pytest.raises(InputError) as err:
        Topology.from_node_link(data)
    assert err.value.field == f"topology.{flag}"


# --- instance ---------------------------------------------------------------------------------


def test_a_job_one_gpu_larger_than_the_cluster_is_refused():
    # Fault: an off-by-one let a job of n + 1 GPUs into an n-GPU cluster.
    _instance(Job("whole", 4, "A"))
    with pytest.raises(InputError, match=r"num_gpus = 5: exceeds the cluster's 4 GPUs"):
        _instance(Job("big", 5, "A"))


def test_a_negative_current_gpu_is_refused_not_read_from_the_end():
    # Fault: only the upper bound of current_gpus was checked; -1 then read busy[-1] (the last
    # GPU) and a running job sat on "GPU -1".
    with pytest.raises(InputError, match=r"current_gpus = -1: not a GPU index"):
        _instance(Job("r", 1, "A", current_gpus=(-1,)))


def test_an_empty_job_id_is_refused_by_the_instance_itself():
    # Fault: only the type of a job id was checked; "" passed (the file loader refuses it on
    # its own, so only the Python API showed it).
    with pytest.raises(InputError, match=r"queue\[0\]\.id = '': must be a non-empty string"):
        _instance(Job("", 1, "A"))


def test_duplicate_classes_are_refused_by_the_instance_itself():
    # Fault: the duplicate check dropped; class_index kept the last "A", so a job of class A
    # was charged the second row's slowdowns.
    with pytest.raises(InputError, match="distinct names"):
        _instance(classes=("A", "A"))


def test_replace_queue_refuses_weights_whose_costs_leave_the_float_range():
    # Fault: replace_queue checked the jobs but not the cost range the constructor checks.
    inst = _instance(Job("a", 1, "A"))
    with pytest.raises(InputError, match=r"queue\[0\]\.weight = 1e-306"):
        _instance(Job("tiny", 1, "A", weight=1e-306))
    with pytest.raises(InputError, match=r"queue\[0\]\.weight = 1e-306"):
        inst.replace_queue([Job("tiny", 1, "A", weight=1e-306)])
    assert [j.id for j in inst.queue] == ["a"]


def test_the_callers_arrays_are_copied_not_frozen_or_shared():
    # Fault: the float64 arrays were taken without a copy: the caller's slowdown became
    # read-only, and a later change through another view of it changed the instance.
    base = np.ones((2, 4))
    slowdown = base[:1]  # a view: freezing it leaves `base` writeable
    penalty = np.ones((1, 3))
    inst = Instance(TOPO, ("A",), slowdown, penalty, (Job("a", 1, "A"),))
    assert slowdown.flags.writeable and penalty.flags.writeable
    base[0, 0] = 50.0
    penalty[0, 2] = 9.0
    assert inst.slowdown[0, 0] == 1.0 and inst.penalty[0, 2] == 1.0


def test_a_number_penalty_leaves_the_nvlink_tier_at_one():
    # Fault: only the 'server' tier was kept at 1.0; with NVLink islands, GPUs of one island
    # were charged the penalty meant for crossing servers.
    topo = build_cluster(1, 2, 4, nvlink_island=2)
    assert topo.tiers == ("nvlink", "server", "rack", "cluster")
    assert penalty_matrix(topo, ["A", "B"], 1.7).tolist() == [[1.0, 1.0, 1.7, 1.7]] * 2


# --- binning ----------------------------------------------------------------------------------


def test_the_kmeans_tolerance_is_inclusive():
    # Fault: `<` for `<=`; a value exactly tol * |centre| from its centre opened a new cluster.
    # (0.75, 1.25, 0.25 and 1.0 are exact in binary, so the distance is exactly the bound.)
    assert bin_values([0.75, 1.25], tol=0.25).k == 1
    assert bin_values([0.75, 1.25], tol=0.125).k == 2


def test_the_kmeans_tolerance_is_relative_to_the_absolute_centre():
    # Fault: tol * centre without abs(): every negative cluster failed the rule, so k ran up.
    b = bin_values([-1.0, -1.01, -0.99])
    assert b.k == 1 and b.levels.tolist() == pytest.approx([-1.0] * 3)


def test_kmeans_ties_take_the_smallest_start_of_the_last_cluster():
    # Fault: ties broken towards the largest start; {0}, {1, 2} and {0, 1}, {2} have the same
    # squared error (0.5), and the documented rule keeps the first.
    labels, centres, sse = kmeans_1d([2.0, 0.0, 1.0], 2)
    assert labels.tolist() == [1, 0, 1]
    assert centres.tolist() == [0.0, 1.5] and sse == 0.5


def test_artifact_k_uses_the_sample_standard_deviation():
    # Fault: ddof=0; 2.0 is above mean + 3 sd with the population sd (1.978) but not with the
    # sample one (2.022), as pandas computes it in the artifact.
    values = [1.0] * 9 + [0.75, 2.0]
    assert artifact_k(values) == 2
    assert bin_values(values, method="artifact").k == 2


def test_the_artifact_rule_refuses_a_zero_value():
    # Fault: `x < 0` for `x <= 0`; a zero slowdown passed, although the artifact's levels are
    # divided by the median centre and the rule is documented to need positive values.
    with pytest.raises(InputError, match="needs positive values"):
        bin_values([0.0, 1.0, 1.1], method="artifact")


# --- variability ------------------------------------------------------------------------------


def test_drawing_with_replacement_from_no_eligible_gpu_is_an_input_error():
    # Fault: the "no eligible GPU at all" check dropped; with replace=True numpy's choice of an
    # empty array raised a raw ValueError instead of an InputError naming the profile.
    profile = VariabilityProfile(("A", "B"), ("x", "y"), np.array([[1.0, np.nan], [np.nan, 1.1]]))
    with pytest.raises(InputError, match="0 eligible GPUs"):
        assign_profile(profile, TOPO, seed=1, replace=True)


def test_build_instance_refuses_a_profile_of_the_topologys_gpus_in_another_order():
    # Fault: the GPU ids compared as sets; a profile listing them in another order was taken
    # column by column, so each GPU got another GPU's slowdowns.
    ids = TOPO.gpu_ids[::-1]
    profile = VariabilityProfile(("A",), ids, np.array([[1.0, 1.0, 1.0, 1.6]]))
    with pytest.raises(InputError, match="must be the topology's GPU ids in order"):
        build_instance(profile, TOPO, 1.7, [Job("j", 1, "A")])
    ordered = VariabilityProfile(("A",), TOPO.gpu_ids, np.array([[1.6, 1.0, 1.0, 1.0]]))
    inst = build_instance(ordered, TOPO, 1.7, [Job("j", 1, "A")])
    assert inst.slowdown.tolist() == [[1.6, 1.0, 1.0, 1.0]]
