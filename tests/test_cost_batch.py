"""The batched cost pass (used by ``build_result``) agrees with the formula job by job."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palopt import Instance, Job, build_cluster
from palopt.cost import evaluate, job_cost, job_placements
from palopt.errors import InputError
from palopt.instance import penalty_matrix
from palopt.result import Action


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_job_placements_match_the_formula(data: st.DataObject) -> None:
    topo = build_cluster(
        data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4))
    )
    n = topo.n_gpus
    classes = ("a", "b")
    slowdown = np.array(
        [data.draw(st.lists(st.floats(0.5, 3.0), min_size=n, max_size=n)) for _ in classes]
    )
    penalty = penalty_matrix(
        topo, classes, {"a": {"rack": 1.3, "cluster": 2.0}, "b": {"rack": 1.1, "cluster": 1.5}}
    )
    free = data.draw(st.permutations(list(range(n))))
    jobs, sets = [], []
    for i in range(data.draw(st.integers(0, 5))):
        k = data.draw(st.integers(1, n))
        gpus = free[:k] if len(free) >= k and data.draw(st.booleans()) else []
        free = free[len(gpus) :]
        current = tuple(sorted(gpus)) if gpus and data.draw(st.booleans()) else ()
        jobs.append(Job(f"j{i}", k, data.draw(st.sampled_from(classes)), current_gpus=current))
        sets.append(gpus or None)
    inst = Instance(topo, classes, slowdown, penalty, tuple(jobs))
    out = job_placements(inst, jobs, sets, ["why"] * len(jobs))
    for job, gpus, p in zip(jobs, sets, out, strict=True):
        if gpus is None:
            assert (p.gpus, p.reason, p.cost) == ((), "why", None)
            continue
        c = classes.index(job.job_class)
        tier = topo.tier_index(gpus)
        sf = max(slowdown[c, g] for g in gpus)
        assert p.gpus == tuple(sorted(gpus))
        assert (p.slowdown, p.tier, p.penalty) == (sf, topo.tiers[tier], penalty[c, tier])
        assert p.cost == sf * penalty[c, tier]
        assert p.action == (Action.KEEP if job.is_running else Action.START)


def test_job_cost_names_a_class_the_instance_does_not_have() -> None:
    """A job of a class the instance has no slowdowns for is an input error naming the job and
    its class, not a bare KeyError."""
    inst = Instance(build_cluster(1, 1, 2), ("a",), np.ones((1, 2)), np.ones((1, 3)), ())
    with pytest.raises(InputError, match=r"job 'x'\.class = 'b': not a class of the instance"):
        job_cost(inst, Job("x", 1, "b"), [0])


def test_for_the_same_jobs_placed_the_cheaper_evaluation_wins() -> None:
    """Two placements of the same jobs compare by weighted cost, the lower first; placing an
    earlier job still beats any cost."""
    inst = Instance(
        build_cluster(1, 2, 2),
        ("a",),
        np.array([[1.0, 1.2, 1.0, 1.0]]),
        np.array([[1.0, 1.5, 1.5]]),
        (Job("j", 2, "a"), Job("k", 1, "a")),
    )
    cheap, dear = evaluate(inst, {"j": [2, 3]}), evaluate(inst, {"j": [1, 2]})
    assert (cheap.total_cost, dear.total_cost) == (1.0, 1.2 * 1.5)
    assert min([dear, cheap], key=lambda e: e.key) is cheap
    assert sorted([cheap, dear], key=lambda e: e.key) == [cheap, dear]
    later = evaluate(inst, {"k": [0]})
    assert min([later, dear], key=lambda e: e.key) is dear


def test_an_empty_gpu_list_is_a_job_not_placed() -> None:
    """``job_placements`` reads an empty GPU list, like ``None``, as a job not placed: it waits
    (a running job is preempted) with its reason and no cost, and the other jobs' records are
    those of their own GPUs."""
    inst = Instance(
        build_cluster(1, 2, 2),
        ("a",),
        np.array([[1.0, 1.3, 1.0, 1.0]]),
        np.array([[1.0, 2.0, 2.0]]),
        (Job("j", 2, "a"), Job("k", 1, "a", current_gpus=(1,)), Job("m", 1, "a")),
    )
    out = job_placements(inst, inst.queue, [[], np.array([], dtype=np.int64), [3]], ["x"] * 3)
    assert [(p.gpus, p.action, p.cost, p.reason) for p in out] == [
        ((), Action.WAIT, None, "x"),
        ((), Action.PREEMPT, None, "x"),
        ((3,), Action.START, 1.0, None),
    ]
