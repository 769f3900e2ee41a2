"""The compact pattern model, the transportation problem, the region re-optimisation and the
improvement search against enumeration on tiny rounds (from a mutation audit of
``palopt.solvers.transport`` and ``palopt.solvers.exact.{model,refine,search}``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import assert_feasible_positions, brute_force, transport_by_enumeration
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_exact import _checked_greedy, tiny_instances

from palopt import Instance, Job, build_cluster
from palopt.result import Status
from palopt.solvers.exact.colgen import column_generation
from palopt.solvers.exact.cpsat import CpSatSolver
from palopt.solvers.exact.model import build_model
from palopt.solvers.round import make_round, round_cost

#: A scale at which every distinct placement cost of the tiny rounds stays distinct: their costs
#: are multiples of 1e-4, and rounding each job's cost down loses less than 1 / SCALE.
SCALE = 1e6


def _model_optimum(model, start=None):
    """The model solved to optimality by CP-SAT in deterministic mode."""
    answer = CpSatSolver(deterministic=True, gap=0.0).run(model.sparse, start, 20.0, 0)
    assert answer.status == Status.OPTIMAL
    assert model.sparse.satisfied(answer.solution)
    return answer.solution


@settings(max_examples=60, deadline=None)
@given(
    shape=st.sampled_from([(1, 3), (1, 5), (2, 3), (2, 4), (3, 4), (3, 5)]),
    data=st.data(),
)
def test_transport_assignment_is_optimal_and_its_bound_meets_it(shape, data) -> None:
    """The 1-GPU jobs' assignment sends every row its units, one unit per column at most, at
    the enumerated least cost (ties and zero counts included), and its bound meets that cost
    from below."""
    from palopt.solvers.transport import transport, transport_bound

    m, n = shape
    values = st.sampled_from([0.0, 0.5, 1.0, 1.0, 1.3, 2.0, 7.0])
    cost = np.array([[data.draw(values) for _ in range(n)] for _ in range(m)])
    counts = [data.draw(st.integers(0, 2)) for _ in range(m)]
    while sum(counts) > n:
        counts[int(np.argmax(counts))] -= 1
    optimum = transport_by_enumeration(counts, cost)
    x = transport(counts, cost)
    assert x is not None and x.shape == cost.shape and x.dtype == bool
    assert x.sum(axis=1).tolist() == counts and x.sum(axis=0).max(initial=0) <= 1
    assert float(cost[x].sum()) == pytest.approx(optimum, abs=1e-9)
    bound = transport_bound(counts, cost)
    assert bound <= optimum and bound == pytest.approx(optimum, abs=1e-9)  # never above it


def test_without_highs_one_gpu_jobs_are_still_placed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``highspy`` the transportation problem has no assignment (``None``), the
    1-GPU jobs are placed one by one instead, and the bound is the rows' independent bound."""
    import palopt.solvers.transport as transport_module
    from palopt.solvers.greedy import GreedyPlacer

    monkeypatch.setattr(transport_module, "HAVE_HIGHS", False)
    cost = np.array([[1.0, 2.0], [1.0, 5.0]])
    assert transport_module.transport([1, 1], cost) is None
    assert transport_module.transport_bound([1, 1], cost) == pytest.approx(2.0)
    queue = (Job("a", 1, "A"), Job("b", 1, "B"), Job("c", 2, "A"))
    sd = np.array([[1.0, 2.0, 1.0, 1.0], [1.0, 5.0, 1.0, 1.0]])
    inst = Instance(build_cluster(1, 2, 2), ("A", "B"), sd, np.ones((2, 3)), queue)
    rnd = make_round(inst)
    total, placed = GreedyPlacer(rnd).place_split([2, 0, 1])
    assert set(placed) == {0, 1, 2}
    assert_feasible_positions(inst, placed)
    assert total == pytest.approx(round_cost(inst, placed))


def test_the_bound_keeps_the_dear_gpus_the_one_gpu_jobs_need() -> None:
    """Two 1-GPU jobs on a server with a fast and a slow GPU must take both, and the 2-GPU job
    takes the other server: held under that placement's own cost (every job at its cheapest
    alone, so no slack), the model still holds it, values it at its cost rounded down, and its
    optimum is that placement."""
    queue = (Job("a", 1, "B"), Job("b", 1, "B"), Job("c", 2, "A"))
    sd = np.array([[1.0, 1.0, 1.0, 1.0], [1.1, 1.3, 3.0, 3.0]])
    pen = np.array([[1.0, 2.0, 2.0], [1.0, 2.0, 2.0]])
    inst = Instance(build_cluster(1, 2, 2), ("A", "B"), sd, pen, queue)
    rnd = make_round(inst)
    chosen = {0: np.array([0]), 1: np.array([1]), 2: np.array([2, 3])}
    ub = round_cost(inst, chosen)
    assert ub == pytest.approx(brute_force(inst)) == pytest.approx(3.4)
    model = build_model(rnd, SCALE, ub)
    start = model.start(chosen, rnd)
    assert start is not None and model.sparse.satisfied(start)
    assert ub * SCALE - 3 <= model.sparse.value(start) <= ub * SCALE
    placed = model.decode(_model_optimum(model, start))
    assert_feasible_positions(inst, placed)
    assert round_cost(inst, placed) == pytest.approx(3.4)


def test_interchangeable_jobs_may_share_a_group_and_threshold() -> None:
    """Two jobs of one class, size and weight that fit one server together, at the same
    slowest GPU: the order the model keeps among them allows them equal keys, so the optimum,
    both on the fast server, stays in the model."""
    queue = (Job("a", 2, "A"), Job("b", 2, "A"))
    sd = np.array([[1.0] * 4 + [1.5] * 4])
    inst = Instance(build_cluster(1, 2, 4), ("A",), sd, np.array([[1.0, 2.0, 2.0]]), queue)
    rnd = make_round(inst)
    chosen = {0: np.array([0, 1]), 1: np.array([2, 3])}
    assert round_cost(inst, chosen) == brute_force(inst) == 2.0
    model = build_model(rnd, SCALE)
    assert model.kinds == [[0, 1]]
    start = model.start(chosen, rnd)
    assert start is not None and model.sparse.satisfied(start)
    placed = model.decode(_model_optimum(model))
    assert_feasible_positions(inst, placed)
    assert round_cost(inst, placed) == 2.0


def _two_pairs_per_rack_half() -> tuple[Instance, dict[int, np.ndarray]]:
    """Four 2-GPU jobs on four 2-GPU servers of one rack, each pair of jobs split across a pair
    of servers (cost 8); the optimum, every job on a server of its own, costs 4."""
    topo = build_cluster(1, 4, 2)
    queue = tuple(Job(f"j{i}", 2, "A") for i in range(4))
    inst = Instance(topo, ("A",), np.ones((1, 8)), np.array([[1.0, 2.0, 2.0]]), queue)
    start = {0: np.array([0, 2]), 1: np.array([1, 3]), 2: np.array([4, 6]), 3: np.array([5, 7])}
    return inst, start


class _Recording:
    """A deterministic CP-SAT back end that counts its calls (and refuses to run forever)."""

    def __init__(self, limit: int = 50, answer=None) -> None:
        self.calls: list[int] = []
        self.given: list[tuple[object, object, float]] = []  # (model, start, seconds) per call
        self.limit = limit
        self.answer = answer
        self.solver = CpSatSolver(deterministic=True)

    def __call__(self, sp, start, seconds, seed):
        self.calls.append(sp.n_vars)
        self.given.append((sp, start, seconds))
        assert len(self.calls) <= self.limit, "the region search does not end"
        if self.answer is not None:
            return self.answer(sp)
        return self.solver.run(sp, start, seconds, seed)


def test_region_reoptimisation_ends_by_itself_and_stops_at_the_target() -> None:
    """Without a time or work limit the regions grow until one would be the whole round, and
    the search ends; with a target it stops as soon as the placement reaches it."""
    from palopt.solvers.exact.refine import reoptimise_regions

    inst, start = _two_pairs_per_rack_half()
    rnd = make_round(inst)
    assert round_cost(inst, start) == 8.0 and brute_force(inst) == 4.0
    run = _Recording()
    best, _ = reoptimise_regions(rnd, start, run, SCALE, time_limit=np.inf, region_gpus=4)
    assert_feasible_positions(inst, best)
    assert round_cost(inst, best) == 4.0
    assert 2 <= len(run.calls) <= 10
    run = _Recording()
    best, _ = reoptimise_regions(
        rnd, start, run, SCALE, time_limit=np.inf, target=4.0, region_gpus=4
    )
    assert_feasible_positions(inst, best)
    assert round_cost(inst, best) == 4.0
    assert len(run.calls) == 2  # one region each, then the target is met


def test_region_answers_that_break_the_model_are_ignored() -> None:
    """A back end whose answer breaks the sub-model's rows (every variable at its upper bound,
    GPUs handed out twice) leaves the placement as it was instead of failing."""
    from palopt.solvers.exact.refine import reoptimise_regions
    from palopt.solvers.exact.runner import BackendAnswer

    inst, start = _two_pairs_per_rack_half()
    rnd = make_round(inst)

    def everything(sp):
        return BackendAnswer(Status.FEASIBLE, np.asarray(sp.upper, dtype=np.int64), None)

    run = _Recording(answer=everything)
    best, _ = reoptimise_regions(rnd, start, run, SCALE, time_limit=np.inf, region_gpus=4)
    assert run.calls
    assert_feasible_positions(inst, best)
    assert {p: g.tolist() for p, g in best.items()} == {p: g.tolist() for p, g in start.items()}


def test_search_stops_once_it_reaches_the_target() -> None:
    """The improvement search returns as soon as the placement costs no more than the target
    (a lower bound that proves it), not after its patience runs out."""
    from palopt.solvers.exact.search import MULTI_WORK, SINGLE_WORK, STEP_WORK, improve

    inst, start = _two_pairs_per_rack_half()
    rnd = make_round(inst)
    n = inst.topology.n_gpus
    step = STEP_WORK[0] + STEP_WORK[1] * n + 4 * max(MULTI_WORK[0] + MULTI_WORK[1] * n, SINGLE_WORK)
    best, work = improve(rnd, start, np.inf, seed=0, target=4.0, patience=5_000)
    assert_feasible_positions(inst, best)
    assert round_cost(inst, best) == 4.0
    assert work < 500 * step


@pytest.mark.parametrize("size", [1, 2])
def test_a_placement_the_bound_leaves_out_has_no_start(size: int) -> None:
    """A placement dearer than the model's upper bound may not be expressible: the model then
    gives no start (``None``) rather than a vector that breaks its rows, and a placement within
    the bound still starts it."""
    topo = build_cluster(1, 1, 4)
    sd = np.array([[1.0, 1.0, 1.0, 3.0]])
    queue = tuple(Job(f"j{i}", size, "A") for i in range(4 // size // 2))
    inst = Instance(topo, ("A",), sd, np.ones((1, 3)), queue)
    rnd = make_round(inst)
    cheap = {p: np.arange(p * size, (p + 1) * size) for p in range(len(queue))}
    dear = dict(cheap)
    dear[len(queue) - 1] = np.r_[np.arange(size - 1) + size * (len(queue) - 1), 3]
    assert round_cost(inst, dear) > round_cost(inst, cheap)
    model = build_model(rnd, SCALE, round_cost(inst, cheap))
    start = model.start(cheap, rnd)
    assert start is not None and model.sparse.satisfied(start)
    assert model.start(dear, rnd) is None
    unbounded = build_model(rnd, SCALE)
    assert unbounded.sparse.satisfied(unbounded.start(dear, rnd))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    inst=tiny_instances(),
    mode=st.sampled_from(["prefix", "choose"]),
    keep=st.booleans(),
    shrink=st.sampled_from(["none", "bound", "fixing"]),
)
def test_compact_model_optimum_is_the_brute_force_optimum(
    inst: Instance, mode: str, keep: bool, shrink: str
) -> None:
    """The model the back ends solve, with or without the upper-bound shrinking and the
    reduced-cost fixing, keeps an optimal placement: decoded, it is feasible and costs the
    enumerated optimum, its scaled value is that optimum rounded down, and the greedy start is a
    solution of the model whose value is the greedy placement's cost rounded down."""
    rnd = make_round(inst, mode, keep)
    if not rnd.open_positions:
        return
    optimum = brute_force(inst, mode, keep) - round_cost(inst, rnd.fixed)
    greedy = _checked_greedy(rnd)
    ub = round_cost(inst, greedy)
    fixing = None
    if shrink == "fixing" and rnd.multi:
        cg = column_generation(rnd, greedy, time_limit=60.0, max_work=10**8)
        assert cg.converged
        fixing = cg
    model = build_model(rnd, SCALE, None if shrink == "none" else ub, fixing)
    n_jobs = len(rnd.open_positions)
    start = model.start(greedy, rnd)
    assert start is not None and model.sparse.satisfied(start)
    assert ub * SCALE - n_jobs - 1e-6 <= model.sparse.value(start) <= ub * SCALE + 1e-6
    assert round_cost(inst, model.decode(start)) == pytest.approx(ub, rel=1e-12)
    solution = _model_optimum(model, start)
    placed = model.decode(solution)
    assert set(placed) == set(rnd.open_positions)
    assert_feasible_positions(inst, rnd.fixed | placed)
    assert round_cost(inst, placed) == pytest.approx(optimum, rel=1e-9, abs=1e-12)
    value = model.sparse.value(solution)
    assert optimum * SCALE - n_jobs - 1e-6 <= value <= optimum * SCALE + 1e-6


def test_regions_never_split_a_group_that_fits() -> None:
    """Regions are made of whole groups of the highest tier whose groups fit ``region_gpus``:
    a rack of four GPUs (one busy) is never split between two regions of about four."""
    from palopt.solvers.exact.refine import regions

    busy = np.zeros(8, dtype=bool)
    busy[0] = True
    inst = Instance(build_cluster(2, 2, 2), ("A",), np.ones((1, 8)), np.ones((1, 3)), (), busy)
    rnd = make_round(inst)
    areas = regions(rnd, 4)
    assert (np.logical_or.reduce(areas) == rnd.free).all()
    racks = inst.topology.groups[1]
    for rack in np.unique(racks):
        holding = [a for a in areas if a[(racks == rack) & rnd.free].any()]
        assert len(holding) == 1 and holding[0][(racks == rack) & rnd.free].all()


def test_search_keeps_a_placement_without_multi_gpu_jobs_and_honours_patience() -> None:
    """A round of 1-GPU jobs alone comes back as given (nothing to search), and the search ends
    after ``patience`` steps without gain: one step from an optimal placement."""
    from palopt.solvers.exact.search import MULTI_WORK, SINGLE_WORK, STEP_WORK, improve

    inst, start = _two_pairs_per_rack_half()
    singles = replace(inst, queue=tuple(replace(j, num_gpus=1) for j in inst.queue))
    chosen = {p: g[:1] for p, g in start.items()}
    kept, work = improve(make_round(singles), chosen, np.inf, seed=0)
    assert work == 0 and {p: g.tolist() for p, g in kept.items()} == {
        p: g.tolist() for p, g in chosen.items()
    }
    rnd = make_round(inst)
    best = {p: np.array([2 * p, 2 * p + 1]) for p in range(4)}
    assert round_cost(inst, best) == brute_force(inst)
    n = inst.topology.n_gpus
    one_step = STEP_WORK[0] + STEP_WORK[1] * n + 4 * (MULTI_WORK[0] + MULTI_WORK[1] * n)
    out, work = improve(rnd, best, np.inf, seed=0, patience=1)
    assert_feasible_positions(inst, out)
    assert round_cost(inst, out) == round_cost(inst, best)
    assert 0 < work <= one_step + 4 * SINGLE_WORK


@pytest.mark.parametrize("seed", range(4))
def test_a_region_of_one_gpu_jobs_is_passed_over_not_the_end(seed: int) -> None:
    """A region holding only 1-GPU jobs has nothing to re-optimise: the search goes on to the
    next region (here the other rack, whose two 2-GPU jobs are each split over servers), in
    whatever order the seed visits them."""
    from palopt.solvers.exact.refine import reoptimise_regions

    queue = (Job("a", 1, "A"), Job("b", 1, "A"), Job("c", 2, "A"), Job("d", 2, "A"))
    inst = Instance(
        build_cluster(2, 2, 2), ("A",), np.ones((1, 8)), np.array([[1.0, 2.0, 2.0]]), queue
    )
    start = {0: np.array([0]), 1: np.array([1]), 2: np.array([4, 6]), 3: np.array([5, 7])}
    assert round_cost(inst, start) == 6.0 and brute_force(inst) == 4.0
    best, _ = reoptimise_regions(
        make_round(inst), start, _Recording(), SCALE, time_limit=np.inf, seed=seed, region_gpus=4
    )
    assert_feasible_positions(inst, best)
    assert round_cost(inst, best) == 4.0


def test_each_region_is_started_from_the_placement_and_held_to_its_step_limit() -> None:
    """Every region sub-model is given the current placement of its jobs as a start (a solution
    of the sub-model, so the back end never returns worse), and at most ``step_limit`` seconds
    for a region of ``region_gpus`` GPUs: one region cannot take the whole time limit."""
    from palopt.solvers.exact.refine import reoptimise_regions

    inst, start = _two_pairs_per_rack_half()
    run = _Recording()
    best, _ = reoptimise_regions(
        make_round(inst), start, run, SCALE, time_limit=30.0, region_gpus=4, step_limit=0.25
    )
    assert_feasible_positions(inst, best)
    assert round_cost(inst, best) == 4.0
    assert run.given
    for sp, begin, seconds in run.given:
        assert begin is not None and sp.satisfied(begin)
        assert 0 < seconds <= 0.25


def test_regions_grow_only_after_a_whole_pass_without_gain() -> None:
    """A gain in a region starts the pass over: both racks are improved, then visited once more
    without gain, and only then would the regions double (to the whole round, which ends the
    search): four sub-models, not two."""
    from palopt.solvers.exact.refine import reoptimise_regions

    inst, start = _two_pairs_per_rack_half()
    run = _Recording()
    best, _ = reoptimise_regions(
        make_round(inst), start, run, SCALE, time_limit=np.inf, region_gpus=4
    )
    assert_feasible_positions(inst, best)
    assert round_cost(inst, best) == 4.0
    assert len(run.calls) == 4


def test_region_work_counts_each_sub_model_and_never_overruns_its_limit() -> None:
    """Deterministic mode: each sub-model costs ``SUBMODEL_WORK`` on top of the back end's own
    work, and no sub-model is started that the work left cannot pay for (the back end would get
    a negative limit): under one sub-model's work no back end runs and the placement comes back
    as given; with one and a half, exactly one runs."""
    from palopt.solvers.exact.refine import SUBMODEL_WORK, reoptimise_regions
    from palopt.solvers.exact.runner import BackendAnswer

    inst, start = _two_pairs_per_rack_half()
    rnd = make_round(inst)

    def nothing(sp):
        return BackendAnswer(Status.NO_SOLUTION, None, None)

    run = _Recording(answer=nothing)
    best, work = reoptimise_regions(
        rnd, start, run, SCALE, np.inf, region_gpus=4, max_work=int(SUBMODEL_WORK) // 2
    )
    assert not run.calls and work == 0
    assert_feasible_positions(inst, best)
    assert {p: g.tolist() for p, g in best.items()} == {p: g.tolist() for p, g in start.items()}
    run = _Recording(answer=nothing)
    _, work = reoptimise_regions(
        rnd, start, run, SCALE, np.inf, region_gpus=4, max_work=int(1.5 * SUBMODEL_WORK)
    )
    assert len(run.calls) == 1 and work == SUBMODEL_WORK
    assert all(seconds > 0 for _, _, seconds in run.given)


def test_an_improving_step_resets_the_search_s_patience() -> None:
    """``patience`` counts steps in a row without gain: with a patience of one, the search goes
    on after its first step improves the placement (to the optimum here) and stops after the
    next step, which brings nothing; it does not stop at the first step."""
    from palopt.solvers.exact.search import MULTI_WORK, STEP_WORK, improve

    inst, start = _two_pairs_per_rack_half()
    n = inst.topology.n_gpus
    largest_step = STEP_WORK[0] + STEP_WORK[1] * n + 4 * (MULTI_WORK[0] + MULTI_WORK[1] * n)
    best, work = improve(make_round(inst), start, np.inf, seed=0, patience=1)
    assert_feasible_positions(inst, best)
    assert round_cost(inst, best) == 4.0
    assert largest_step < work <= 2 * largest_step


def test_a_search_step_counts_the_work_of_each_job_it_replaces() -> None:
    """Deterministic mode: a step costs ``STEP_WORK`` for the cluster, ``MULTI_WORK`` for each
    multi-GPU job and ``SINGLE_WORK`` for each 1-GPU job it re-places. On one 4-GPU server every
    step re-places every job, and from an optimal placement the search (patience 1) takes one."""
    from palopt.solvers.exact.search import MULTI_WORK, SINGLE_WORK, STEP_WORK, improve

    queue = (Job("a", 2, "A"), Job("b", 1, "A"), Job("c", 1, "A"))
    inst = Instance(build_cluster(1, 1, 4), ("A",), np.ones((1, 4)), np.ones((1, 3)), queue)
    start = {0: np.array([0, 1]), 1: np.array([2]), 2: np.array([3])}
    best, work = improve(make_round(inst), start, np.inf, seed=0, patience=1)
    assert_feasible_positions(inst, best)
    assert round_cost(inst, best) == round_cost(inst, start) == brute_force(inst)
    n = inst.topology.n_gpus
    one_step = STEP_WORK[0] + STEP_WORK[1] * n + MULTI_WORK[0] + MULTI_WORK[1] * n
    assert work == int(one_step + 2 * SINGLE_WORK)
