"""Local search on a placement (palopt.solvers.local): each move, and invariants."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palopt import Instance, Job, build_cluster
from palopt.cost import assert_feasible
from palopt.errors import InputError
from palopt.solvers.greedy import PACKING, GreedyPlacer, GreedySolver, greedy_assignment
from palopt.solvers.local import _search, _State, polish
from palopt.solvers.round import make_round, round_cost

PENALTY = np.array([[1.0, 1.7, 2.0]] * 2)


def _assignment(inst: Instance, chosen: dict[int, np.ndarray]) -> dict[str, list[int]]:
    return {inst.queue[p].id: g.tolist() for p, g in chosen.items()}


def test_swap_gives_the_bottleneck_gpu_to_a_job_it_does_not_slow() -> None:
    # One 4-GPU server. GPU 1 is slow for class A only; the 2-GPU job of class A starts on it.
    sd = np.array([[1.0, 1.5, 1.0, 1.1], [1.0, 1.0, 1.0, 1.0]])
    queue = (Job("pair", 2, "A"), Job("s1", 1, "B"), Job("s2", 1, "B"))
    inst = Instance(build_cluster(1, 1, 4), ("A", "B"), sd, PENALTY, queue)
    rnd = make_round(inst)
    start = {0: np.array([0, 1]), 1: np.array([2]), 2: np.array([3])}
    out = polish(rnd, start)
    assert_feasible(inst, _assignment(inst, out))
    assert out[0].tolist() == [0, 2]
    assert round_cost(inst, out) == pytest.approx(3.0)


def test_tied_bottleneck_gpus_are_traded_together() -> None:
    # One 8-GPU server. The 4-GPU job of class A has two GPUs at 1.3: swapping either alone
    # leaves its cost at 1.3. GPUs 4 and 5 are fast for A and held by 1-GPU jobs of class B,
    # for which GPUs 2 and 3 are fast; GPU 6 is free but slow for A.
    sd = np.array([[1.0, 1.0, 1.3, 1.3, 1.0, 1.0, 1.4, 1.0], [1.0] * 8])
    queue = (Job("quad", 4, "A"), Job("s1", 1, "B"), Job("s2", 1, "B"), Job("s3", 1, "B"))
    inst = Instance(build_cluster(1, 1, 8), ("A", "B"), sd, PENALTY, queue)
    rnd = make_round(inst)
    start = {0: np.array([0, 1, 2, 3]), 1: np.array([4]), 2: np.array([5]), 3: np.array([7])}
    out = polish(rnd, start)
    assert_feasible(inst, _assignment(inst, out))
    assert len(out[0]) == 4 and sd[0, out[0]].max() == 1.0
    assert round_cost(inst, out) == pytest.approx(4.0)


def test_tied_bottleneck_gpus_go_to_fast_gpus_of_any_job_not_to_a_slow_free_one() -> None:
    """Trading tied bottleneck GPUs moves every job that gives a GPU, the first job in the
    queue too (else two jobs would share a GPU), and takes only GPUs no slower than the job's
    next slowest: a slow free GPU listed first is passed over for fast GPUs held by jobs."""
    # One 8-GPU server. The 4-GPU job of class A (queue position 1) is on GPUs 1-4, two of them
    # at 1.3. GPU 0 is free but at 1.4 for A; GPUs 5-7 are fast for A and held by 1-GPU jobs of
    # class B (position 0 first), for which every GPU is alike.
    sd = np.array([[1.4, 1.0, 1.0, 1.3, 1.3, 1.0, 1.0, 1.0], [1.0] * 8])
    queue = (Job("s1", 1, "B"), Job("quad", 4, "A"), Job("s2", 1, "B"), Job("s3", 1, "B"))
    inst = Instance(build_cluster(1, 1, 8), ("A", "B"), sd, PENALTY, queue)
    rnd = make_round(inst)
    start = {0: np.array([5]), 1: np.array([1, 2, 3, 4]), 2: np.array([6]), 3: np.array([7])}
    out = polish(rnd, start)
    assert_feasible(inst, _assignment(inst, out))
    assert out[1].tolist() == [1, 2, 5, 6]
    assert sorted(out[0].tolist() + out[2].tolist()) == [3, 4]
    assert round_cost(inst, out) == pytest.approx(4.0)


_SPREAD = (Job("x", 4, "A"), Job("y", 4, "B"))


def test_consolidation_pulls_two_spread_jobs_into_one_rack_each() -> None:
    # Two racks of two 2-GPU servers, all GPUs alike. Both 4-GPU jobs start spread over both
    # racks (penalty 2.0). Swapping one GPU at a time leaves both spread, so only the
    # consolidation move finds the placement with each job in a rack (1.7).
    inst = Instance(build_cluster(2, 2, 2), ("A", "B"), np.ones((2, 8)), PENALTY, _SPREAD)
    rnd = make_round(inst)
    start = {0: np.array([0, 1, 4, 5]), 1: np.array([2, 3, 6, 7])}
    out = polish(rnd, start)
    assert_feasible(inst, _assignment(inst, out))
    tiers = {inst.topology.tier_of(g) for g in out.values()}
    assert tiers == {"rack"}
    assert round_cost(inst, out) == pytest.approx(3.4)


def test_exchange_trades_the_servers_of_two_jobs() -> None:
    # Server 0 is slow for class A, server 1 for class B; each job starts on its slow server.
    # No swap inside a server helps; trading the two GPU sets does.
    sd = np.array([[1.3, 1.3, 1.0, 1.0], [1.0, 1.0, 1.3, 1.3]])
    queue = (Job("a", 2, "A"), Job("b", 2, "B"))
    inst = Instance(build_cluster(1, 2, 2), ("A", "B"), sd, PENALTY, queue)
    rnd = make_round(inst)
    out = polish(rnd, {0: np.array([0, 1]), 1: np.array([2, 3])})
    assert_feasible(inst, _assignment(inst, out))
    assert out[0].tolist() == [2, 3] and out[1].tolist() == [0, 1]
    assert round_cost(inst, out) == pytest.approx(2.0)


def _random_instance(
    shape: tuple[int, int, int],
    seed: int,
    busy_share: float,
    fill: float = 1.0,
    penalty: np.ndarray = PENALTY,
    weights: tuple[float, ...] = (1.0,),
) -> Instance:
    """A random two-class round: jobs of Philly-like sizes asking ``fill`` of the free GPUs."""
    topo = build_cluster(*shape)
    rng = np.random.default_rng(seed)
    n = topo.n_gpus
    sd = rng.choice([0.95, 1.0, 1.02, 1.05, 1.4], size=(2, n))
    busy = rng.random(n) < busy_share
    room = int(fill * (~busy).sum())
    queue = []
    while room > 0:
        k = min(room, int(rng.choice([1, 1, 2, 3, 4, 6, 8])))
        weight = float(rng.choice(weights))
        queue.append(Job(f"j{len(queue)}", k, "AB"[int(rng.integers(2))], weight))
        room -= k
    return Instance(topo, ("A", "B"), sd, penalty, tuple(queue), busy)


@settings(max_examples=60, deadline=None)
@given(
    shape=st.sampled_from([(1, 2, 4), (2, 2, 4), (2, 4, 2), (3, 2, 8)]),
    seed=st.integers(0, 10**6),
    busy_share=st.sampled_from([0.0, 0.25]),
    fill=st.sampled_from([0.5, 1.0]),
)
def test_polish_keeps_the_jobs_and_never_costs_more(
    shape: tuple[int, int, int], seed: int, busy_share: float, fill: float
) -> None:
    inst = _random_instance(shape, seed, busy_share, fill)
    rnd = make_round(inst)
    order = list(rnd.open_positions)
    for placer in (GreedyPlacer(rnd), GreedyPlacer(rnd, packing=PACKING)):
        cost, start = placer.place(order)
        assert_feasible(inst, _assignment(inst, start))
        out = polish(rnd, start)
        assert_feasible(inst, _assignment(inst, out))
        assert {p: len(g) for p, g in out.items()} == {p: len(g) for p, g in start.items()}
        assert round_cost(inst, out) <= cost + 1e-9
        again = polish(rnd, start)
        assert all(np.array_equal(again[p], out[p]) for p in out)


@settings(max_examples=40, deadline=None)
@given(
    shape=st.sampled_from([(2, 2, 4), (3, 2, 4), (3, 2, 8), (4, 2, 2)]),
    seed=st.integers(0, 10**6),
    busy_share=st.sampled_from([0.0, 0.25]),
    fill=st.sampled_from([0.5, 0.8, 1.0]),
)
def test_local_search_keeps_its_loose_gpus_in_step_with_the_placement(
    shape: tuple[int, int, int], seed: int, busy_share: float, fill: float
) -> None:
    """A job at the top tier swaps its bottleneck only with GPUs marked loose (usable, and free
    or held by a 1-GPU or top-tier job) or in its bottleneck's rack: every move keeps the mark,
    so after a search it matches the placement (else such swaps would miss GPUs or take bad
    ones)."""
    inst = _random_instance(shape, seed, busy_share, fill)
    rnd = make_round(inst)
    _, start = GreedyPlacer(rnd).place(list(rnd.open_positions))
    state = _State(rnd, start)
    _search(state, np.inf)
    assert_feasible(inst, _assignment(inst, state.best))
    owner = state.owner
    anywhere = (owner < 0) | (state.k[owner] == 1) | (state.tier[owner] == state.top_tier)
    assert np.array_equal(state.loose, rnd.free & anywhere)


def test_a_gpu_left_free_by_a_move_is_loose() -> None:
    """A rack-wide job consolidating into one server frees the GPU it left in the other: that
    GPU is then open to the swaps of jobs at the top tier."""
    inst = Instance(
        build_cluster(2, 2, 2), ("A",), np.ones((1, 8)), PENALTY[:1], (Job("a", 2, "A"),)
    )
    rnd = make_round(inst)
    state = _State(rnd, {0: np.array([0, 2])})  # a over the rack's two servers, GPU 1 free
    state.consolidate(0)
    assert state.best[0].tolist() == [0, 1]
    assert state.loose.tolist() == [False, False] + [True] * 6


@settings(max_examples=40, deadline=None)
@given(
    shape=st.sampled_from([(1, 4, 2), (2, 2, 4), (2, 4, 4), (3, 2, 8)]),
    seed=st.integers(0, 10**6),
    busy_share=st.sampled_from([0.0, 0.3]),
    pen=st.sampled_from([(1.0, 1.7, 2.0), (1.0, 1.02, 1.5), (1.0, 1.0, 1.3)]),
)
def test_each_greedy_pass_reports_the_weighted_cost_of_its_placement(
    shape: tuple[int, int, int], seed: int, busy_share: float, pen: tuple[float, ...]
) -> None:
    # The greedy polishes the passes that report the least cost: a pass must report the true
    # weighted cost of what it placed, with packing too (a packed job may end on a lower tier
    # than the one it was priced at).
    inst = _random_instance(shape, seed, busy_share, 1.0, np.array([pen, pen]), (0.5, 1.0, 3.0))
    rnd = make_round(inst)
    order = list(rnd.open_positions)
    big_first = sorted(order, key=lambda p: -inst.queue[p].num_gpus)
    for placer in (GreedyPlacer(rnd), GreedyPlacer(rnd, packing=PACKING)):
        for cost, chosen in (placer.place(order), placer.place_split(big_first)):
            assert_feasible(inst, _assignment(inst, chosen))
            assert sorted(chosen) == order
            assert cost == pytest.approx(round_cost(inst, chosen), rel=1e-9)


def test_polish_starts_no_move_after_its_deadline() -> None:
    # The consolidation round of the test above, with a deadline already past: nothing moves.
    # A deadline far ahead changes nothing against none.
    inst = Instance(build_cluster(2, 2, 2), ("A", "B"), np.ones((2, 8)), PENALTY, _SPREAD)
    rnd = make_round(inst)
    start = {0: np.array([0, 1, 4, 5]), 1: np.array([2, 3, 6, 7])}
    late = polish(rnd, start, deadline=time.perf_counter())
    assert_feasible(inst, _assignment(inst, late))
    assert {p: g.tolist() for p, g in late.items()} == {0: [0, 1, 4, 5], 1: [2, 3, 6, 7]}
    ahead = polish(rnd, start, deadline=time.perf_counter() + 3600)
    assert_feasible(inst, _assignment(inst, ahead))
    assert {p: g.tolist() for p, g in ahead.items()} == {
        p: g.tolist() for p, g in polish(rnd, start).items()
    }


def test_polish_past_its_deadline_builds_no_search(monkeypatch: pytest.MonkeyPatch) -> None:
    # The search's set-up alone takes 0.1-0.2 s at 16,384 GPUs: after the deadline it is not
    # built, and the placement comes back as given, each job's GPUs sorted.
    import palopt.solvers.local as local

    def refuse(*_: object) -> None:
        raise AssertionError("the search was set up after its deadline")

    inst = Instance(build_cluster(2, 2, 2), ("A", "B"), np.ones((2, 8)), PENALTY, _SPREAD)
    monkeypatch.setattr(local, "_State", refuse)
    late = polish(make_round(inst), {0: np.array([5, 4, 1, 0]), 1: np.array([2, 3, 6, 7])}, 0.0)
    assert {p: g.tolist() for p, g in late.items()} == {0: [0, 1, 4, 5], 1: [2, 3, 6, 7]}
    assert_feasible(inst, _assignment(inst, late))


def test_greedy_starts_no_pass_after_its_deadline() -> None:
    # The largest-first pass is cheaper than the queue-order pass here (14.46 against 16.48),
    # so returning the first pass shows that the later ones did not run.
    inst = _random_instance((3, 2, 8), 5, 0.0, 1.0)
    rnd = make_round(inst)
    order = list(rnd.open_positions)
    first_cost, first = GreedyPlacer(rnd).place(order)
    big_first = sorted(order, key=lambda p: -inst.queue[p].num_gpus)
    assert GreedyPlacer(rnd, packing=PACKING).place_split(big_first)[0] < first_cost - 1
    late = greedy_assignment(rnd, deadline=time.perf_counter())
    assert_feasible(inst, _assignment(inst, late))
    assert _assignment(inst, late) == _assignment(inst, first)
    assert round_cost(inst, late) == pytest.approx(first_cost)
    ahead = greedy_assignment(rnd, deadline=time.perf_counter() + 3600)
    assert_feasible(inst, _assignment(inst, ahead))
    assert _assignment(inst, ahead) == _assignment(inst, greedy_assignment(rnd))


def test_greedy_drops_a_pass_its_deadline_cuts(monkeypatch: pytest.MonkeyPatch) -> None:
    # A clock that ticks once per reading: the first pass reads it once per job, the second
    # passes its deadline after its first job, and the first pass comes back unpolished.
    inst = _random_instance((3, 2, 8), 5, 0.0, 1.0)
    rnd = make_round(inst)
    order = list(rnd.open_positions)
    _, first = GreedyPlacer(rnd).place(order)
    with pytest.raises(TimeoutError):
        GreedyPlacer(rnd).place(order, deadline=time.perf_counter() - 1)
    with pytest.raises(TimeoutError):
        GreedyPlacer(rnd, packing=PACKING).place_split(order, deadline=time.perf_counter() - 1)
    assert GreedyPlacer(rnd).place([], deadline=time.perf_counter() - 1) == (0.0, {})
    ticks = iter(range(10**6))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(ticks)))
    cut = greedy_assignment(rnd, deadline=len(order) + 0.5)
    assert next(ticks) < 2 * len(order)  # the second pass stopped early, the third never ran
    assert_feasible(inst, _assignment(inst, cut))
    assert _assignment(inst, cut) == _assignment(inst, first)


def test_greedy_local_search_stops_at_the_time_limit() -> None:
    inst = _random_instance((3, 2, 8), 5, 0.0, 1.0)
    solver = GreedySolver()
    free = solver.solve(inst)
    assert_feasible(inst, free)
    assert "stopped_at_time_limit" not in free.settings
    # A limit too small for any move: the passes as they were, no cheaper than after the search
    cut = solver.solve(inst, time_limit=1e-9)
    assert_feasible(inst, cut)
    assert cut.settings["stopped_at_time_limit"] is True
    assert cut.settings["time_limit"] == 1e-9
    assert cut.objective > free.objective  # local search gains on this round
    # A limit never reached: the same placement as without one
    roomy = solver.solve(inst, time_limit=3600)
    assert_feasible(inst, roomy)
    assert roomy.settings["stopped_at_time_limit"] is False
    assert roomy.assignment() == free.assignment()
    # The solver's own limit, as the exact solvers take it (-o time_limit=...); solve's wins
    own = GreedySolver(time_limit=1e-9)
    stopped = own.solve(inst)
    assert_feasible(inst, stopped)
    assert stopped.settings["stopped_at_time_limit"] is True
    assert own.solve(inst, time_limit=3600).assignment() == free.assignment()
    with pytest.raises(InputError, match="greedy.time_limit = 0"):
        GreedySolver(time_limit=0)
