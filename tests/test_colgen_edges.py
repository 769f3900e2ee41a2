"""Column generation and its reduced-cost fixing against enumeration on tiny rounds, and the
budgets it and the subgradient bound keep (from a mutation audit of colgen and pricing)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import assert_feasible_positions, brute_force
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_exact import (
    _checked_greedy,
    _every_pattern,
    _sample,
    _three_pairs_two_racks,
    at_most,
    tiny_instances,
)

from palopt import Instance, Job, build_cluster, solve
from palopt.cost import assert_feasible, job_cost
from palopt.result import Status
from palopt.solvers.exact.colgen import (
    ColumnGeneration,
    column_generation,
    lagrangian_bound,
    price_placement,
    round_columns,
)
from palopt.solvers.round import Round, make_round, round_cost

#: Reduced costs at the final duals are exact only up to HiGHS's tolerances.
RC_TOL = 1e-6


def _placements(rnd: Round, upper: float):
    """Every placement of ``rnd``'s open jobs on its free GPUs that costs less than ``upper``,
    as (queue position -> GPU tuple)."""
    inst = rnd.instance
    free = [int(g) for g in np.flatnonzero(rnd.free)]
    jobs = list(rnd.open_positions)

    def walk(i: int, used: frozenset[int], cost: float, chosen: dict[int, tuple[int, ...]]):
        if cost >= upper:
            return
        if i == len(jobs):
            yield dict(chosen)
            return
        job = inst.queue[jobs[i]]
        for combo in itertools.combinations([g for g in free if g not in used], job.num_gpus):
            chosen[jobs[i]] = combo
            step = job.weight * job_cost(inst, job, combo).cost
            yield from walk(i + 1, used | frozenset(combo), cost + step, chosen)
            del chosen[jobs[i]]

    yield from walk(0, frozenset(), 0.0, {})


def _part_rcs(rnd: Round, cg: ColumnGeneration, placed: dict[int, tuple[int, ...]]):
    """The reduced cost, at ``cg``'s final duals, of each part of ``placed``: per multi-GPU job
    (its own pattern: tier, dense group, threshold; reduced cost) and per 1-GPU job (None; its
    ``z`` reduced cost)."""
    inst = rnd.instance
    master = cg.master
    pricer = master.pricer
    pricer.set_cut_prices(cg.cuts, master.sigma)
    pos_of = {int(g): i for i, g in enumerate(pricer.free)}
    commodity = {pos: m for m, ps in enumerate(rnd.single_groups().values()) for pos in ps}
    out = []
    for pos, gpus in placed.items():
        job = inst.queue[pos]
        if job.num_gpus == 1:
            out.append((pos, None, float(cg.single_rc[commodity[pos], pos_of[gpus[0]]])))
            continue
        c = int(inst.class_index[job.job_class])
        t = inst.topology.tier_index(np.array(gpus))
        v = float(inst.slowdown[c, list(gpus)].max())
        q = np.array([pos_of[g] for g in gpus])
        g = int(pricer.groups[t][q[0]])
        charge = sum(
            s * cut.weight(c, job.num_gpus, t, pricer.groups, q[0], v)
            for cut, s in pricer.cut_prices.get(c, ())
        )
        rc = job.weight * v * float(inst.penalty[c, t]) + master.p[q].sum() + charge
        j = master.multi.index(pos)
        out.append((pos, (t, g, v), float(rc - master.mu[j])))
    return out


def _assert_patterns_enumerated(rnd: Round, cg: ColumnGeneration, kept: dict, cutoff: float):
    """``kept`` (:meth:`ColumnGeneration.pattern_rc`) lists, at its least reduced cost, every
    pattern whose least reduced cost by enumeration (cut charges at the final duals) is under
    ``cutoff``, and no other."""
    inst, master = rnd.instance, cg.master
    pricer = master.pricer
    pricer.set_cut_prices(cg.cuts, master.sigma)
    for j, pos in enumerate(master.multi):
        job = inst.queue[pos]
        c = int(inst.class_index[job.job_class])
        every = _every_pattern(pricer, c, job.num_gpus, job.weight, master.p)
        listed = {
            (t, g, float(v)): float(x)
            for (p, t, g), (vals, values) in kept.items()
            if p == pos
            for v, x in zip(vals, values, strict=True)
        }
        for key, x in every.items():
            rc = x - master.mu[j]
            if rc < cutoff - 1e-9:
                assert key in listed, (pos, key, rc, cutoff)
            if key in listed:
                assert listed[key] == pytest.approx(rc, abs=1e-9), (pos, key)
        assert listed.keys() <= every.keys()


def _small(inst: Instance) -> bool:
    return inst.topology.n_gpus <= 8 and len(inst.queue) <= 4


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances().filter(_small))
def test_converged_lp_leaves_no_improving_column_and_its_bound_meets_it(inst: Instance) -> None:
    # Converged means no labelled column of any job prices below zero at the LP's duals (by
    # enumeration of every pattern, cut charges included), and the bound reported is then the
    # Lagrangian bound at those duals: the LP value, within the tolerances.
    rnd = make_round(inst)
    if not rnd.multi:
        return
    cg = column_generation(rnd, _checked_greedy(rnd), time_limit=60.0, max_work=10**8)
    assert cg.converged
    master = cg.master
    pricer = master.pricer
    pricer.set_cut_prices(cg.cuts, master.sigma)
    assert (master.p >= 0).all() and (master.sigma >= 0).all()
    for j, pos in enumerate(master.multi):
        job = inst.queue[pos]
        c = int(inst.class_index[job.job_class])
        least = min(_every_pattern(pricer, c, job.num_gpus, job.weight, master.p).values())
        assert least - master.mu[j] >= -RC_TOL, (pos, least, master.mu[j])
    assert (cg.single_rc >= -RC_TOL).all()
    scale = max(1.0, abs(cg.lp_value))
    assert cg.lp_value - RC_TOL * scale <= cg.bound <= cg.lp_value + RC_TOL * scale
    optimum = brute_force(inst)
    assert cg.bound + round_cost(inst, rnd.fixed) <= at_most(optimum)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances().filter(_small), slack=st.sampled_from([0.0, 0.2, 1.0]))
def test_reduced_cost_fixing_keeps_every_cheaper_placement(inst: Instance, slack: float) -> None:
    # Every part of every placement cheaper than `upper` must survive fixing: its own pattern
    # listed by pattern_rc at its threshold with a reduced cost within the cutoff, its 1-GPU
    # jobs' reduced costs within the cutoff too.
    rnd = make_round(inst)
    if not rnd.multi:
        return
    start = _checked_greedy(rnd)
    cg = column_generation(rnd, start, time_limit=60.0, max_work=10**8)
    assert cg.converged
    upper = round_cost(inst, start) + slack
    cutoff = cg.fixing_cutoff(upper)
    kept = cg.pattern_rc(upper)
    _assert_patterns_enumerated(rnd, cg, kept, cutoff)
    for placed in _placements(rnd, upper):
        assert_feasible_positions(inst, rnd.fixed | placed)
        for pos, pattern, rc in _part_rcs(rnd, cg, placed):
            assert rc <= cutoff, (pos, pattern, rc, cutoff)
            if pattern is None:
                continue
            t, g, v = pattern
            assert (pos, t, g) in kept, (pos, pattern)
            vals, values = kept[(pos, t, g)]
            assert v in vals.tolist(), (pos, pattern, vals)
            assert values[vals.tolist().index(v)] <= rc + RC_TOL


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=tiny_instances().filter(_small), slack=st.sampled_from([0.0, 0.5]))
def test_fixing_cutoff_is_sound_before_convergence(inst: Instance, slack: float) -> None:
    # After one iteration the duals are far from optimal and some parts price below zero;
    # the cutoff must allow for what they can take away from the others.
    rnd = make_round(inst)
    if not rnd.multi:
        return
    start = _checked_greedy(rnd)
    cg = column_generation(rnd, start, time_limit=0.0)
    upper = round_cost(inst, start) + slack
    cutoff = cg.fixing_cutoff(upper)
    for placed in _placements(rnd, upper):
        for pos, pattern, rc in _part_rcs(rnd, cg, placed):
            assert rc <= cutoff, (pos, pattern, rc, cutoff)


def test_column_generation_stops_at_its_time_limit_and_work() -> None:
    # A 256-GPU round at full load is far from converging: with no time, one iteration; with
    # a budget of work, it stops at the first iteration that reaches it, so a budget of exactly
    # the work done repeats the run.
    rnd = make_round(_sample(256, 1.0, 1))
    start = _checked_greedy(rnd)
    once = column_generation(rnd, start, time_limit=0.0)
    assert once.iterations == 1 and not once.converged
    assert once.bound <= round_cost(rnd.instance, start)
    some = column_generation(rnd, start, time_limit=1e9, max_work=60_000)
    assert not some.converged and some.work >= 60_000
    again = column_generation(rnd, start, time_limit=1e9, max_work=some.work)
    assert (again.iterations, again.work, again.bound) == (some.iterations, some.work, some.bound)


def test_subgradient_bound_keeps_its_time_limit_and_steps() -> None:
    rnd = make_round(_sample(256, 1.0, 1))
    ub = round_cost(rnd.instance, _checked_greedy(rnd))
    assert lagrangian_bound(rnd, ub, time_limit=0.0)[1] == 1
    bound, steps, _ = lagrangian_bound(rnd, ub, time_limit=1e9, iterations=3)
    assert steps == 3 and bound <= ub


def test_packing_cuts_stop_at_max_cuts() -> None:
    # Two racks each break a cut; with room for one, column generation converges with it
    # (it once went on separating the other until the budget ran out).
    inst = _three_pairs_two_racks()
    rnd = make_round(inst)
    start = _checked_greedy(rnd)
    one = column_generation(rnd, start, time_limit=60.0, max_work=10**7, max_cuts=1)
    assert one.converged and len(one.cuts) == 1
    assert one.iterations < 50
    both = column_generation(rnd, start, time_limit=60.0, max_work=10**7)
    assert len(both.cuts) == 2
    assert one.bound <= both.bound <= at_most(brute_force(inst))


def test_jobs_differing_only_in_weight_are_priced_apart() -> None:
    # Two 2-GPU jobs of one class, weights 1 and 3, one fast server and one slow: the heavy
    # job takes the fast server. Priced at one weight the bound misses it.
    inst = Instance(
        build_cluster(1, 2, 2),
        ("A",),
        np.array([[1.0, 1.0, 2.0, 2.0]]),
        np.array([[1.0, 3.0, 3.0]]),
        (Job("a", 2, "A", 1.0), Job("b", 2, "A", 3.0)),
    )
    rnd = make_round(inst)
    optimum = brute_force(inst)
    assert optimum == pytest.approx(1.0 * 2.0 + 3.0 * 1.0)
    cg = column_generation(rnd, _checked_greedy(rnd), time_limit=60.0, max_work=10**8)
    assert cg.converged and cg.bound == pytest.approx(optimum)
    assert lagrangian_bound(rnd, optimum, time_limit=60.0)[0] <= at_most(optimum)
    r = solve(inst, "cpsat")
    assert_feasible(inst, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(optimum)


def test_fixing_charges_the_packing_cuts() -> None:
    # The cut LP of two racks prices both cuts (sigma 0.1 each); pattern_rc must charge them,
    # as enumeration does, and keep every part of the placements cheaper than the bar.
    inst = _three_pairs_two_racks()
    rnd = make_round(inst)
    start = _checked_greedy(rnd)
    cg = column_generation(rnd, start, time_limit=60.0, max_work=10**8)
    assert cg.converged and (cg.master.sigma > 0).any()
    upper = round_cost(inst, start) + 0.3
    cutoff = cg.fixing_cutoff(upper)
    kept = cg.pattern_rc(upper)
    _assert_patterns_enumerated(rnd, cg, kept, cutoff)
    for placed in _placements(rnd, upper):
        for pos, pattern, rc in _part_rcs(rnd, cg, placed):
            assert rc <= cutoff
            if pattern is not None:
                assert (pos, *pattern[:2]) in kept


def test_rounding_takes_every_column_of_lp_weight_above_a_half() -> None:
    # Columns of weight over 1/2 cannot share a GPU, and rounding goes by decreasing weight:
    # each is taken (taken by increasing weight, fractional ones blocked two here).
    inst = _sample(64, 1.0, 1)
    rnd = make_round(inst)
    cg = column_generation(rnd, _checked_greedy(rnd), time_limit=60.0, max_work=300_000)
    placed = round_columns(rnd, cg)
    assert sorted(placed) == sorted(rnd.open_positions)
    assert_feasible_positions(inst, rnd.fixed | placed)
    majority = [
        (pos, cg.columns[pos][i][0])
        for pos, ws in cg.weights.items()
        for i, w in enumerate(ws)
        if w > 0.5
    ]
    assert majority
    for pos, gpus in majority:
        assert placed[pos].tolist() == gpus.tolist(), pos


def test_columns_added_after_a_cut_carry_its_coefficients() -> None:
    # Each job column in the master has, on each cut row, the coefficient of its label, also
    # those priced after the cut joined (dropped, the LP may use them past the cut).
    inst = _three_pairs_two_racks()
    rnd = make_round(inst)
    cg = column_generation(rnd, _checked_greedy(rnd), time_limit=60.0, max_work=10**8)
    master = cg.master
    assert len(master.cuts) == 2
    zero = np.zeros(len(master.free))
    for j, pos in enumerate(master.multi):
        job = inst.queue[pos]
        c = int(inst.class_index[job.job_class])
        master.add_column(j, master.pricer.columns(c, job.num_gpus, job.weight, zero)[-1])
    a = master.h.getLp().a_matrix_
    start, index, value = np.array(a.start_), np.array(a.index_), np.array(a.value_)
    first_cut = master.cap_row + len(master.free)
    on_cuts = 0
    for n, key in enumerate(master.in_master):
        at = slice(start[master.n_fixed + n], start[master.n_fixed + n + 1])
        got = {
            int(r) - first_cut: float(v)
            for r, v in zip(index[at], value[at], strict=True)
            if r >= first_cut
        }
        want = {
            i: float(a)
            for i, cut in enumerate(master.cuts)
            if (a := master.coefficient(cut, key[0], master.label[key]))
        }
        assert got == want, key
        on_cuts += n >= len(master.in_master) - len(master.multi) and bool(want)
    assert on_cuts


def test_a_cut_counts_a_larger_job_once_per_smaller_job_it_could_hold() -> None:
    # Five fast GPUs, a 4-GPU job of weight 2 and a 2-GPU job: the LP packs the large job and
    # half of the small one into them (bound 3.5); no placement does. The packing cut in units
    # of the small job (d = 2) counts the large job twice, is broken, and closes the gap to the
    # optimum 4.0, which the solve then proves without a model. Catches separation counting
    # each column once whatever its size (the cut never found, the bound left at 3.5).
    inst = Instance(
        build_cluster(1, 1, 8),
        ("A",),
        np.array([[1.0] * 5 + [2.0] * 3]),
        np.ones((1, 3)),
        (Job("a", 4, "A", 2.0), Job("b", 2, "A")),
    )
    optimum = brute_force(inst)
    assert optimum == 4.0
    rnd = make_round(inst)
    cg = column_generation(rnd, _checked_greedy(rnd), time_limit=60.0, max_work=10**8)
    assert cg.converged and any(cut.d == 2 for cut in cg.cuts)
    assert cg.bound == pytest.approx(optimum) and cg.bound <= at_most(optimum)
    r = solve(inst, "cpsat")
    assert_feasible(inst, r)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(optimum)
    assert r.settings["proof"] == "configuration-LP bound" and "n_vars" not in r.settings


def test_subgradient_prices_stay_non_negative_so_the_bound_stays_below_the_optimum() -> None:
    # Three 4-GPU servers, two 4-GPU jobs and a 1-GPU job: a GPU the relaxation stops using
    # has its price lowered, and a step past zero (a negative price) makes the Lagrangian bound
    # exceed the optimum (5.55 over 5.5 within 20 steps). Catches the prices' projection onto
    # p >= 0 dropped from the subgradient step.
    inst = Instance(
        build_cluster(1, 3, 4),
        ("A",),
        np.array([[1.5, 1.0, 2.0, 1.5, 1.5, 1.5, 2.0, 1.1, 1.0, 1.1, 1.5, 1.1]]),
        np.array([[1.0, 1.5, 2.0]]),
        (Job("a", 4, "A"), Job("b", 4, "A"), Job("c", 1, "A", 2.0)),
    )
    exact = solve(inst, "cpsat")  # brute force takes 2 s here
    assert_feasible(inst, exact)
    assert exact.status == Status.OPTIMAL and exact.objective == pytest.approx(5.5)
    optimum = exact.objective
    rnd = make_round(inst)
    ub = round_cost(inst, _checked_greedy(rnd))
    for steps in (20, 100):
        bound, made, _ = lagrangian_bound(rnd, ub, time_limit=60.0, iterations=steps)
        assert made <= steps and bound <= at_most(optimum), (steps, bound)
    assert bound > 0.95 * optimum  # the prices did raise it (5.0 at zero prices)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    inst=tiny_instances(),
    keep=st.booleans(),
    seed=st.integers(0, 2**16),
    scale=st.sampled_from([0.0, 1.0, 1e6]),
)
def test_price_placement_places_every_open_job_once(
    inst: Instance, keep: bool, seed: int, scale: float
) -> None:
    # Whatever the prices (none, of the order of the costs, far above them), every open job is
    # placed on free GPUs, none shared, the kept jobs untouched; a GPU once taken is priced out
    # of every later job's choice. At zero prices the first multi-GPU job takes a cheapest set.
    rnd = make_round(inst, "prefix", keep)
    prices = np.random.default_rng(seed).random(int(rnd.free.sum())) * scale
    placed = price_placement(rnd, prices)
    assert sorted(placed) == sorted(rnd.open_positions)
    assert_feasible_positions(inst, rnd.fixed | placed)
    if scale == 0.0 and rnd.multi:
        job = inst.queue[rnd.multi[0]]
        free = np.flatnonzero(rnd.free).tolist()
        least = min(
            job_cost(inst, job, combo).cost for combo in itertools.combinations(free, job.num_gpus)
        )
        taken = tuple(placed[rnd.multi[0]].tolist())
        assert job_cost(inst, job, taken).cost == pytest.approx(least, rel=1e-12)


def test_price_placement_follows_the_prices() -> None:
    # Two 2-GPU jobs and three 2-GPU servers, the third with a slow GPU: the first job in the
    # queue takes the server priced lower, whichever that is; the second the other (a price of
    # 0.1 in all is less than the slow GPU's 0.2 more); the 1-GPU job the fast GPU left.
    inst = Instance(
        build_cluster(1, 3, 2),
        ("A",),
        np.array([[1.0, 1.0, 1.0, 1.0, 1.2, 1.0]]),
        np.array([[1.0, 2.0, 2.0]]),
        (Job("a", 2, "A"), Job("b", 2, "A"), Job("c", 1, "A")),
    )
    rnd = make_round(inst)
    for cheap, dear in (([0, 1], [2, 3]), ([2, 3], [0, 1])):
        prices = np.zeros(6)
        prices[dear] = 0.05
        placed = price_placement(rnd, prices)
        assert_feasible_positions(inst, placed)
        placed = {p: g.tolist() for p, g in placed.items()}
        assert placed == {0: cheap, 1: dear, 2: [5]}
