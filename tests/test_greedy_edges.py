"""The cost-aware greedy and its local search on small hand-built rounds: tier ties, kept
running jobs, per-job weights (the 1-GPU assignment, exchanges), the no-``highspy`` fallback,
reasons in ``choose`` mode, packing's remainder and consolidation."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_feasible_positions, brute_force

import palopt.solvers.greedy as greedy_module
from palopt import Instance, Job, build_cluster, solve
from palopt.cost import assert_feasible
from palopt.solvers.greedy import PACKING, GreedyPlacer
from palopt.solvers.local import polish
from palopt.solvers.round import make_round, round_cost


def test_greedy_takes_the_lowest_tier_on_a_tie() -> None:
    # Two racks of two 2-GPU servers. The 2-GPU job costs 1.1 on server 0 (its slow GPU 1 at
    # penalty 1.0) and 1.1 on GPUs 0 and 2 of rack 0 (1.0 at penalty 1.1): a tie, which goes
    # to the lower tier, the server. Local search keeps it: nothing is cheaper.
    sd = np.array([[1.0, 1.1, 1.0, 1.5, 1.5, 1.5, 1.5, 1.5]])
    inst = Instance(
        build_cluster(2, 2, 2), ("A",), sd, np.array([[1.0, 1.1, 2.0]]), (Job("j", 2, "A"),)
    )
    rnd = make_round(inst)
    for placer in (GreedyPlacer(rnd), GreedyPlacer(rnd, packing=PACKING)):
        cost, gpus = placer.best(rnd.free.copy(), 0, 2)
        assert cost == pytest.approx(1.1)
        assert sorted(gpus.tolist()) == [0, 1]
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert r.assignment()["j"] == (0, 1)
    assert inst.topology.tier_of(r.assignment()["j"]) == "server"


def _running_instance() -> Instance:
    # One rack of two 4-GPU servers. Job r runs on GPUs 0 and 1, the fastest; GPUs 2 and 3 are
    # a little slower, server 1 slower still. Job a, ahead of r in the queue, would take r's
    # GPUs if r could move.
    return Instance(
        build_cluster(1, 2, 4),
        ("A",),
        np.array([[1.0, 1.0, 1.2, 1.2, 1.5, 1.5, 1.5, 1.5]]),
        np.array([[1.0, 1.7, 2.0]]),
        (Job("a", 2, "A"), Job("r", 2, "A", current_gpus=(0, 1)), Job("c", 1, "A")),
    )


def test_greedy_keeps_running_jobs_and_places_the_rest_around_them() -> None:
    inst = _running_instance()
    kept = solve(inst, "greedy", keep_running=True)
    assert_feasible(inst, kept)
    got = kept.assignment()
    assert got["r"] == (0, 1)
    assert got["a"] == (2, 3)
    assert len(got["c"]) == 1 and got["c"][0] >= 4
    assert kept.objective == pytest.approx(1.0 + 1.2 + 1.5)
    assert kept.objective == pytest.approx(brute_force(inst, keep_running=True))
    # Without keep_running, r is an ordinary job and a, first in the queue, takes GPUs 0, 1.
    moved = solve(inst, "greedy")
    assert_feasible(inst, moved)
    assert moved.assignment()["a"] == (0, 1) and moved.assignment()["r"] == (2, 3)


def test_local_search_never_moves_onto_a_kept_running_job() -> None:
    # Job c on a slow GPU sees GPUs 0 and 1 (job r's, kept) unowned by any open job: they are
    # not free for it all the same.
    inst = _running_instance()
    rnd = make_round(inst, keep_running=True)
    assert set(rnd.fixed) == {1}
    start = {0: np.array([2, 3]), 2: np.array([7])}
    out = polish(rnd, start)
    assert_feasible_positions(inst, rnd.fixed | out)
    assert out[0].tolist() == [2, 3]
    assert out[2][0] >= 4


def test_the_one_gpu_assignment_puts_heavy_jobs_on_fast_gpus() -> None:
    # Three 1-GPU jobs of weights 1, 5 and 2 (two classes) on four GPUs of different speeds:
    # the largest-first pass assigns them by a transportation problem, which must weigh them.
    pytest.importorskip("highspy")
    sd = np.array([[1.0, 1.2, 1.4, 1.8], [1.3, 1.0, 1.1, 1.6]])
    queue = (Job("x", 1, "A", 1.0), Job("y", 1, "A", 5.0), Job("z", 1, "B", 2.0))
    inst = Instance(build_cluster(1, 1, 4), ("A", "B"), sd, np.array([[1.0, 1.7, 2.0]] * 2), queue)
    rnd = make_round(inst)
    cost, chosen = GreedyPlacer(rnd, packing=PACKING).place_split(list(rnd.open_positions))
    assert_feasible_positions(inst, chosen)
    assert cost == pytest.approx(round_cost(inst, chosen))
    assert cost == pytest.approx(brute_force(inst))
    assert chosen[1].tolist() == [0]  # the heaviest job on the fastest GPU for its class
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert r.objective == pytest.approx(brute_force(inst))


def test_greedy_without_highspy_places_one_gpu_jobs_on_the_gpus_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # transport() returns None without highspy: the 1-GPU jobs are then placed greedily, on
    # the GPUs the multi-GPU jobs leave.
    monkeypatch.setattr(greedy_module, "transport", lambda supply, cost: None)
    sd = np.array([[1.0, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6]])
    queue = (Job("s1", 1, "A"), Job("big", 4, "A"), Job("s2", 1, "A", 3.0), Job("p", 2, "A"))
    inst = Instance(build_cluster(1, 2, 4), ("A",), sd, np.array([[1.0, 1.7, 2.0]]), queue)
    rnd = make_round(inst)
    _, chosen = GreedyPlacer(rnd, packing=PACKING).place_split(list(rnd.open_positions))
    assert_feasible_positions(inst, chosen)
    assert sorted(chosen) == [0, 1, 2, 3]
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert all(p.placed for p in r.placements)


def test_greedy_in_choose_mode_says_why_each_job_is_left_out() -> None:
    # Four GPUs: a takes three; b and c (four each) cannot fit, d (one) takes the last GPU.
    queue = (Job("a", 3, "A"), Job("b", 4, "A"), Job("c", 4, "A"), Job("d", 1, "A"))
    inst = Instance(build_cluster(1, 1, 4), ("A",), np.ones((1, 4)), np.ones((1, 3)), queue)
    r = solve(inst, "greedy", mode="choose")
    assert_feasible(inst, r)
    assert [p.placed for p in r.placements] == [True, False, False, True]
    assert [p.reason for p in r.placements] == [
        None,
        "not selected: needs 4 GPUs; the jobs selected before it leave 1",
        "not selected: needs 4 GPUs; the jobs selected before it leave 1",
        None,
    ]
    prefix = solve(inst, "greedy")
    assert_feasible(inst, prefix)
    assert [p.placed for p in prefix.placements] == [True, False, False, False]


def test_exchange_weighs_the_two_jobs() -> None:
    # Server 0 is slow for both jobs of class A; the heavy job (weight 10) starts on it, the
    # light one on the fast server 1. No swap within a full server helps; trading the two GPU
    # sets saves 10 * 0.3 - 0.3.
    sd = np.array([[1.3, 1.3, 1.0, 1.0]])
    queue = (Job("heavy", 2, "A", 10.0), Job("light", 2, "A", 1.0))
    inst = Instance(build_cluster(1, 2, 2), ("A",), sd, np.array([[1.0, 1.7, 2.0]]), queue)
    rnd = make_round(inst)
    out = polish(rnd, {0: np.array([0, 1]), 1: np.array([2, 3])})
    assert_feasible_positions(inst, out)
    assert out[0].tolist() == [2, 3] and out[1].tolist() == [0, 1]
    assert round_cost(inst, out) == pytest.approx(10.0 + 1.3)
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert r.assignment()["heavy"] == (2, 3)


def test_exchange_prices_each_job_at_the_tier_of_the_set_it_takes() -> None:
    # Three 2-GPU servers in one rack, GPUs 3 and 5 busy, all GPUs alike. Job a (class A,
    # rack penalty 1.2) starts on server 0 and job b (class B, rack penalty 2.0) spread over
    # servers 1 and 2. Neither can consolidate; trading sets puts the job that minds being
    # spread less on the spread set: 1.2 + 1.0 instead of 1.0 + 2.0.
    busy = np.array([False, False, False, True, False, True])
    queue = (Job("a", 2, "A"), Job("b", 2, "B"))
    pen = np.array([[1.0, 1.2, 2.0], [1.0, 2.0, 2.0]])
    inst = Instance(build_cluster(1, 3, 2), ("A", "B"), np.ones((2, 6)), pen, queue, busy)
    rnd = make_round(inst)
    out = polish(rnd, {0: np.array([0, 1]), 1: np.array([2, 4])})
    assert_feasible_positions(inst, out)
    assert out[0].tolist() == [2, 4] and out[1].tolist() == [0, 1]
    assert round_cost(inst, out) == pytest.approx(2.2)
    assert round_cost(inst, out) == pytest.approx(brute_force(inst))
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert r.objective == pytest.approx(2.2)


def test_packing_finishes_a_job_on_the_fullest_server() -> None:
    # One rack of three 4-GPU servers, GPU 4 busy: servers with 4, 3 and 4 free GPUs, all
    # alike. The 5-GPU job takes a whole server and its last GPU from server 1, the fullest,
    # which leaves server 2 whole for the 4-GPU job after it.
    busy = np.zeros(12, dtype=bool)
    busy[4] = True
    queue = (Job("five", 5, "A"), Job("four", 4, "A"))
    inst = Instance(
        build_cluster(1, 3, 4), ("A",), np.ones((1, 12)), np.array([[1.0, 1.7, 2.0]]), queue, busy
    )
    rnd = make_round(inst)
    cost, chosen = GreedyPlacer(rnd, packing=PACKING).place([0, 1])
    assert_feasible_positions(inst, chosen)
    servers = inst.topology.groups[inst.topology.server_tier]
    assert sorted(set(servers[chosen[0]].tolist())) == sorted(set(servers[[0, 5]].tolist()))
    assert chosen[1].tolist() == [8, 9, 10, 11]
    assert cost == pytest.approx(1.7 + 1.0)
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert r.objective == pytest.approx(1.7 + 1.0)


def test_consolidation_falls_back_to_the_second_largest_group() -> None:
    # Two 4-GPU servers, all GPUs alike. Job a (3 GPUs) is spread: two GPUs on server 0, one
    # on server 1. Server 0's other GPUs are job b's, which is on one server and must not be
    # spread for a; server 1 has three free GPUs, so a moves there.
    queue = (Job("a", 3, "A"), Job("b", 2, "A"))
    inst = Instance(
        build_cluster(1, 2, 4), ("A",), np.ones((1, 8)), np.array([[1.0, 1.7, 2.0]]), queue
    )
    rnd = make_round(inst)
    out = polish(rnd, {0: np.array([0, 1, 4]), 1: np.array([2, 3])})
    assert_feasible_positions(inst, out)
    assert out[0].tolist() == [4, 5, 6] and out[1].tolist() == [2, 3]
    assert round_cost(inst, out) == pytest.approx(2.0)
