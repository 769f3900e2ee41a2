"""The batched cost pass (used by ``build_result``) agrees with the formula job by job."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from palopt import Instance, Job, build_cluster
from palopt.cost import job_placements
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
