"""Small hand-checked rounds that pin down single decisions of the cost-aware greedy
(:mod:`palopt.solvers.greedy`), its local search (:mod:`palopt.solvers.local`) and the round
(:mod:`palopt.solvers.round`); each test names the fault it catches."""

from __future__ import annotations

import time

import numpy as np
import pytest
from helpers import assert_feasible_positions, brute_force

from palopt import Instance, Job, build_cluster, solve
from palopt.cost import assert_feasible
from palopt.solvers.greedy import PACKING, GreedyPlacer
from palopt.solvers.local import polish
from palopt.solvers.round import make_round, round_cost

PEN = np.array([[1.0, 1.7, 2.0]])


def _best_for_one_job(
    sd: np.ndarray,
    servers: int,
    per_server: int,
    k: int,
    busy: np.ndarray | None = None,
    packing: float | None = PACKING,
) -> tuple[float, list[int]]:
    """The greedy's best placement (cost, sorted GPUs) of one ``k``-GPU job of class A on one
    rack of ``servers`` x ``per_server`` GPUs, checked feasible."""
    if busy is None:
        busy = np.zeros(servers * per_server, dtype=bool)
    inst = Instance(
        build_cluster(1, servers, per_server), ("A",), sd, PEN, (Job("j", k, "A"),), busy
    )
    rnd = make_round(inst)
    cost, gpus = GreedyPlacer(rnd, packing=packing).best(rnd.free.copy(), 0, k)
    assert_feasible_positions(inst, {0: gpus})
    return cost, sorted(gpus.tolist())


def _assert_one_job_tie_goes_to(
    sd: np.ndarray, pen: np.ndarray, k: int, cost: float, gpus: list[int], tier: str
) -> None:
    """On two racks of two 2-GPU servers, one ``k``-GPU job of class A: both placers' best
    placement and the greedy solver's take ``gpus`` at ``tier`` for exactly ``cost``."""
    inst = Instance(build_cluster(2, 2, 2), ("A",), sd, pen, (Job("j", k, "A"),))
    rnd = make_round(inst)
    for placer in (GreedyPlacer(rnd), GreedyPlacer(rnd, packing=PACKING)):
        got, chosen = placer.best(rnd.free.copy(), 0, k)
        assert_feasible_positions(inst, {0: chosen})
        assert got == cost
        assert sorted(chosen.tolist()) == gpus
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert r.assignment()["j"] == tuple(gpus)
    assert inst.topology.tier_of(r.assignment()["j"]) == tier
    assert r.objective == cost


def test_a_tie_between_a_rack_and_the_whole_cluster_goes_to_the_rack() -> None:
    # The top tier (a single group) must not win a tie: its floor cannot beat the rack, so it
    # is skipped before it is priced (and priced, ``<`` would keep the rack too).
    # Two racks of two 2-GPU servers. The 3-GPU job costs 1.25 * 1.5 = 1.875 in rack 0 (GPUs
    # 0, 1, 2) and 1.0 * 1.875 = 1.875 on its three fastest GPUs 0, 1, 4 across racks (all
    # binary-exact). On a tie the lower tier, the rack, wins; nothing is cheaper afterwards.
    sd = np.array([[1.0, 1.0, 1.25, 1.25, 1.0, 1.25, 1.25, 1.25]])
    pen = np.array([[1.0, 1.5, 1.875]])
    _assert_one_job_tie_goes_to(sd, pen, 3, 1.875, [0, 1, 2], "rack")


def test_a_rack_cheaper_than_every_server_by_a_hair_is_taken() -> None:
    # The greedy skips a tier only when its floor (the k-th fastest free GPU anywhere times the
    # tier's penalty) cannot beat the best so far. Each server's second GPU runs at 1.71, so the
    # best server costs 1.71; the two fast GPUs across the rack cost 1.0 * 1.7 = 1.70, cheaper.
    sd = np.array([[1.0, 1.71, 1.0, 1.71]])
    assert _best_for_one_job(sd, 2, 2, 2, packing=None) == (1.7, [0, 2])


def test_packing_may_use_a_group_that_costs_exactly_its_slack_more() -> None:
    # Catches: the packing cap taken as strict (``< cap`` instead of ``<= cap``): a job may
    # cost *up to* 1 + PACKING times its cheapest placement.
    # One 4-GPU and one 2-GPU server (GPUs 2, 3 busy) in one rack. Server 0 is fast (1.0);
    # server 1 costs 1.05 = 1.0 * (1 + PACKING) exactly, and with 2 free GPUs it is the best
    # fit for a 2-GPU job.
    busy = np.array([False, False, False, False, False, False, True, True])
    sd = np.array([[1.0, 1.0, 1.0, 1.0, 1.05, 1.05, 1.05, 1.05]])
    assert 1.0 * (1 + PACKING) == 1.05
    assert _best_for_one_job(sd, 2, 4, 2, busy, packing=None) == (1.0, [0, 1])
    assert _best_for_one_job(sd, 2, 4, 2, busy) == (1.05, [4, 5])


def test_packing_breaks_a_best_fit_tie_by_speed() -> None:
    # Catches: dropping (or reversing) the "then fastest" key of the best-fit choice.
    # Two 2-GPU servers with both GPUs free: equally good fits for a 2-GPU job. Server 0
    # costs 1.02, within the slack, but server 1 costs 1.0 and must win.
    assert _best_for_one_job(np.array([[1.02, 1.02, 1.0, 1.0]]), 2, 2, 2) == (1.0, [2, 3])


def test_packing_takes_the_child_group_with_most_room_whole_first() -> None:
    # Catches: taking whole child groups smallest first (``counts`` instead of ``-counts``).
    # One rack of three 4-GPU servers with 4, 1 and 1 free GPUs (all alike). A 5-GPU job
    # takes server 0 whole and one more GPU: two servers, not three.
    busy = np.array([False] * 4 + [False, True, True, True] + [False, True, True, True])
    assert _best_for_one_job(np.ones((1, 12)), 3, 4, 5, busy) == (1.7, [0, 1, 2, 3, 4])
    inst = Instance(
        build_cluster(1, 3, 4), ("A",), np.ones((1, 12)), PEN, (Job("j", 5, "A"),), busy
    )
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert r.assignment()["j"] == (0, 1, 2, 3, 4)


def test_packing_empties_the_servers_without_slow_free_gpus_first() -> None:
    # Catches: dropping the ``room - counts`` key, which among child groups with as many
    # eligible GPUs prefers those left empty by taking them.
    # One rack of three 4-GPU servers. Servers 0 and 2 have two fast free GPUs each (the rest
    # busy); server 1 has two fast and two slow (1.3, above the slack) free GPUs. The 5-GPU
    # job takes servers 0 and 2 whole and one fast GPU of server 1, which leaves server 1 three
    # free GPUs for the 3-GPU job after it (1.3 on one server; else 1.3 * 1.7 over two).
    busy = np.zeros(12, dtype=bool)
    busy[[2, 3, 10, 11]] = True
    sd = np.array([[1.0] * 6 + [1.3, 1.3] + [1.0] * 4])
    queue = (Job("five", 5, "A"), Job("three", 3, "A"))
    inst = Instance(build_cluster(1, 3, 4), ("A",), sd, PEN, queue, busy)
    rnd = make_round(inst)
    cost, chosen = GreedyPlacer(rnd, packing=PACKING).place([0, 1])
    assert_feasible_positions(inst, chosen)
    assert chosen[0].tolist() == [0, 1, 4, 8, 9]
    assert chosen[1].tolist() == [5, 6, 7]
    assert cost == pytest.approx(1.7 + 1.3)


def test_the_largest_first_pass_assigns_one_gpu_jobs_optimally() -> None:
    # Catches: the largest-first pass placing its 1-GPU jobs greedily (``place`` instead of
    # ``place_split``). Three 1-GPU jobs of three classes on one 3-GPU server. In queue order
    # each takes its fastest GPU left: 1.0 + 1.0 + 1.5. The optimum is a three-way rotation
    # (1.01 + 1.01 + 1.0) that no swap of two GPUs reaches (every such swap costs more), so only
    # the transportation problem finds it.
    pytest.importorskip("highspy")
    sd = np.array([[1.0, 1.01, 2.0], [2.0, 1.0, 1.01], [1.0, 2.0, 1.5]])
    queue = (Job("a", 1, "A"), Job("b", 1, "B"), Job("c", 1, "C"))
    pen = np.array([[1.0, 1.7, 2.0]] * 3)
    inst = Instance(build_cluster(1, 1, 3), ("A", "B", "C"), sd, pen, queue)
    rnd = make_round(inst)
    plain_cost, plain = GreedyPlacer(rnd).place([0, 1, 2])
    assert_feasible_positions(inst, plain)
    assert plain_cost == pytest.approx(3.5)
    polished = polish(rnd, plain)
    assert_feasible_positions(inst, polished)
    assert round_cost(inst, polished) == pytest.approx(3.5)
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert r.assignment() == {"a": (1,), "b": (2,), "c": (0,)}
    assert r.objective == pytest.approx(3.02)
    assert r.objective == pytest.approx(brute_force(inst))


def test_swap_counts_the_gain_of_the_job_giving_up_its_bottleneck() -> None:
    # Catches: pricing the other job b of a swap at its old maximum even when the GPU it gives
    # is its bottleneck (``m1`` instead of ``m2``), which hides b's gain.
    # One 5-GPU server. Job a (class A) is on GPUs 0 (slow for A) and 1, job b (class B) on 2
    # (slow for B) and 3, job e (class C) on 4. Trading GPUs 0 and 2 helps both a and b (3.0,
    # the optimum). Counting a's gain alone, GPU 4 (e's) looks better for a; e then holds GPU 0,
    # which b would need, and b is stuck at 1.5 (3.49).
    sd = np.array(
        [
            [1.5, 0.9, 1.0, 1.5, 0.99],
            [1.0, 2.0, 1.5, 1.0, 2.0],
            [1.0, 3.0, 3.0, 3.0, 1.0],
        ]
    )
    queue = (Job("a", 2, "A"), Job("b", 2, "B"), Job("e", 1, "C"))
    pen = np.array([[1.0, 1.7, 2.0]] * 3)
    inst = Instance(build_cluster(1, 1, 5), ("A", "B", "C"), sd, pen, queue)
    rnd = make_round(inst)
    start = {0: np.array([0, 1]), 1: np.array([2, 3]), 2: np.array([4])}
    out = polish(rnd, start)
    assert_feasible_positions(inst, out)
    assert {p: g.tolist() for p, g in out.items()} == {0: [1, 2], 1: [0, 3], 2: [4]}
    assert round_cost(inst, out) == pytest.approx(3.0)
    assert round_cost(inst, out) == pytest.approx(brute_force(inst))


def test_a_cluster_wide_job_swaps_with_a_rack_wide_job_in_its_bottlenecks_rack() -> None:
    # Catches: a job at the top tier pricing only the GPUs whose owners may move anywhere (free,
    # 1-GPU and top-tier jobs) and not those of its bottleneck's rack, whose rack-wide owners
    # stay in their rack when they take the bottleneck.
    # Two racks of two 2-GPU servers, GPUs 5-7 busy. Job a (class A) is on GPUs 0 (1.5 for A)
    # and 4, across racks (2.0); job b (class B, 1.0 everywhere) on GPUs 1-3 in rack 0 (1.7).
    # GPU 2 is the only GPU faster for A than 1.5: trading GPUs 0 and 2 keeps b in rack 0 and
    # takes a from 3.0 to 2.0.
    busy = np.array([False] * 5 + [True] * 3)
    sd = np.array([[1.5, 1.5, 1.0, 1.5, 1.0, 1.0, 1.0, 1.0], [1.0] * 8])
    queue = (Job("a", 2, "A"), Job("b", 3, "B"))
    pen = np.array([[1.0, 1.7, 2.0]] * 2)
    inst = Instance(build_cluster(2, 2, 2), ("A", "B"), sd, pen, queue, busy)
    rnd = make_round(inst)
    out = polish(rnd, {0: np.array([0, 4]), 1: np.array([1, 2, 3])})
    assert_feasible_positions(inst, out)
    assert {p: g.tolist() for p, g in out.items()} == {0: [2, 4], 1: [0, 1, 3]}
    assert round_cost(inst, out) == pytest.approx(3.7)


def test_swap_making_no_gain_is_not_made() -> None:
    # Catches: accepting a swap that leaves the cost as it was (``delta > 0`` instead of
    # ``delta >= -eps``); every move must lower the round's cost.
    # Two GPUs; GPU 1 is faster than GPU 0 for both classes. Job b (first) holds GPU 1; job a
    # on GPU 0 would gain 0.5 by trading, and b would lose exactly 0.5 (binary-exact).
    sd = np.array([[1.5, 1.0], [1.5, 1.0]])
    queue = (Job("b", 1, "B"), Job("a", 1, "A"))
    pen = np.array([[1.0, 1.7, 2.0]] * 2)
    inst = Instance(build_cluster(1, 1, 2), ("A", "B"), sd, pen, queue)
    rnd = make_round(inst)
    out = polish(rnd, {0: np.array([1]), 1: np.array([0])})
    assert_feasible_positions(inst, out)
    assert {p: g.tolist() for p, g in out.items()} == {0: [1], 1: [0]}
    assert round_cost(inst, out) == 2.5


def test_consolidation_takes_the_fastest_gpus_of_the_group() -> None:
    # Catches: consolidation taking the slowest GPUs of the target group instead of the
    # fastest; no later swap repairs it here.
    # One rack of two 4-GPU servers, GPUs 3, 5, 6, 7 busy. Job a (2 GPUs, class A) starts
    # spread on GPUs 0 and 4 (rack, 1.7); job e (1 GPU, class B) holds GPU 1. Server 0 still
    # has GPU 1 (1.0 for A) and the free GPU 2 (1.4 for A, 2.0 for B). Pulled into server 0
    # on GPUs 0 and 1, with e moved to GPU 4, the round costs 2.0 (the optimum); on GPU 2
    # instead, a costs 1.4 and e cannot take GPU 2 from it.
    busy = np.array([False, False, False, True, False, True, True, True])
    sd = np.array(
        [[1.0, 1.0, 1.4, 1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0]]
    )
    queue = (Job("a", 2, "A"), Job("e", 1, "B"))
    pen = np.array([[1.0, 1.7, 2.0]] * 2)
    inst = Instance(build_cluster(1, 2, 4), ("A", "B"), sd, pen, queue, busy)
    rnd = make_round(inst)
    out = polish(rnd, {0: np.array([0, 4]), 1: np.array([1])})
    assert_feasible_positions(inst, out)
    assert {p: g.tolist() for p, g in out.items()} == {0: [0, 1], 1: [4]}
    assert round_cost(inst, out) == pytest.approx(2.0)
    assert round_cost(inst, out) == pytest.approx(brute_force(inst))


def _one_slow_gpu() -> Instance:
    # One 3-GPU server: a 2-GPU job on GPUs 0 (1.0) and 1 (1.5); GPU 2 (1.2) is free.
    sd = np.array([[1.0, 1.5, 1.2]])
    return Instance(build_cluster(1, 1, 3), ("A",), sd, PEN, (Job("j", 2, "A"),))


def test_swap_trades_a_bottleneck_for_a_gpu_slower_than_the_next_slowest() -> None:
    # Catches: a wrong second-largest slowdown (``m2`` = the largest), which sends every job to
    # the tied-bottleneck move; that one only takes GPUs as fast as the job's next slowest
    # (1.0 here), so the partial gain of GPU 2 (1.5 -> 1.2) would be missed.
    inst = _one_slow_gpu()
    out = polish(make_round(inst), {0: np.array([0, 1])})
    assert_feasible_positions(inst, out)
    assert out[0].tolist() == [0, 2]
    assert round_cost(inst, out) == pytest.approx(1.2)


def test_polish_starts_no_swap_after_its_deadline() -> None:
    # Catches: a missing deadline check before each swap (the consolidation loop and the
    # exchange check theirs): with a deadline already past, the swap above is not made.
    inst = _one_slow_gpu()
    out = polish(make_round(inst), {0: np.array([0, 1])}, deadline=time.perf_counter())
    assert_feasible_positions(inst, out)
    assert out[0].tolist() == [0, 1]


def test_consolidation_making_no_gain_is_not_made() -> None:
    # Catches: accepting a consolidation that leaves the cost as it was (``<=`` instead of
    # ``<``). One rack of two 2-GPU servers, GPU 3 busy. The 2-GPU job on GPUs 0 and 2 costs
    # 1.0 * 1.5 (rack); pulled into server 0 it would take GPU 1 and cost 1.5 * 1.0: the same.
    busy = np.array([False, False, False, True])
    sd = np.array([[1.0, 1.5, 1.0, 1.0]])
    pen = np.array([[1.0, 1.5, 2.0]])
    inst = Instance(build_cluster(1, 2, 2), ("A",), sd, pen, (Job("j", 2, "A"),), busy)
    out = polish(make_round(inst), {0: np.array([0, 2])})
    assert_feasible_positions(inst, out)
    assert out[0].tolist() == [0, 2]
    assert round_cost(inst, out) == 1.5


def test_packing_on_a_server_takes_its_fastest_gpus() -> None:
    # Catches: packing taking the slowest GPUs within the slack of the chosen server instead of
    # the fastest. Server 0 has two GPUs at 1.0 and two at 1.04 (within 5%); server 1 is slow.
    sd = np.array([[1.0, 1.04, 1.0, 1.04, 1.3, 1.3, 1.3, 1.3]])
    assert _best_for_one_job(sd, 2, 4, 2) == (1.0, [0, 2])


def test_packing_finishes_a_job_on_the_server_with_fewest_free_gpus() -> None:
    # Catches: counting a server's room by all its GPUs instead of its free ones. One rack of
    # three 4-GPU servers, GPU 8 busy: 4, 4 and 3 free GPUs, all alike. The 5-GPU job takes
    # server 0 whole and its last GPU from server 2, the fullest (not server 1, first of the
    # equally large by GPU count), which leaves server 1 whole for the 4-GPU job.
    busy = np.zeros(12, dtype=bool)
    busy[8] = True
    queue = (Job("five", 5, "A"), Job("four", 4, "A"))
    inst = Instance(build_cluster(1, 3, 4), ("A",), np.ones((1, 12)), PEN, queue, busy)
    rnd = make_round(inst)
    cost, chosen = GreedyPlacer(rnd, packing=PACKING).place([0, 1])
    assert_feasible_positions(inst, chosen)
    assert chosen[0].tolist() == [0, 1, 2, 3, 9]
    assert chosen[1].tolist() == [4, 5, 6, 7]
    assert cost == pytest.approx(1.7 + 1.0)


def test_a_tie_between_a_server_and_a_rack_goes_to_the_server() -> None:
    """A job whose best server and best rack cost the same stays on the server, also when the
    rack's k-th GPU is slower than the fastest free GPUs (so the floor does not skip the rack
    tier and the tie is decided by the comparison itself)."""
    # Two racks of two 2-GPU servers. Server 0 (GPUs 0, 1) costs 1.25 * 1.7 at penalty 1.0;
    # rack 0's two fastest GPUs (0 and 2) cost 1.25 at penalty 1.7: the same float. The floor
    # of the rack tier (GPUs 0 and 4 at 1.0, times 1.7) is below it; the cluster's (2.5) not.
    tie = 1.25 * 1.7
    sd = np.array([[1.0, tie, 1.25, 3.0, 1.0, 3.0, 3.0, 3.0]])
    _assert_one_job_tie_goes_to(sd, np.array([[1.0, 1.7, 2.5]]), 2, tie, [0, 1], "server")
