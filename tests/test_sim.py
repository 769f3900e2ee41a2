"""The round-based simulator: hand-computed scenarios, conservation, options, determinism."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import palopt
from palopt.errors import InputError, PaloptError
from palopt.sim import (
    ClusterProfile,
    SimConfig,
    Simulator,
    TraceJob,
    correlated_profile,
    extra_jobs,
    get_policy,
    simulate,
    summary,
    synthetic_trace,
)
from palopt.sim.engine import DONE, RUNNING, JobTable, SimulationStalled
from palopt.sim.metrics import format_summary, job_table
from palopt.sim.trace import MAX_TIME_S, check_trace
from palopt.solvers.base import build_result
from palopt.topology import build_cluster


def job(
    jid: str, n: int, submit: float, iters: float, cls: str = "A", base: float = 1.0
) -> TraceJob:
    return TraceJob(jid, n, submit, iters, "m", cls, base)


def flat(n: int, values: list[float] | None = None) -> ClusterProfile:
    row = np.array(values if values is not None else [1.0] * n, dtype=np.float64)[None, :]
    return ClusterProfile(("A",), row, row)


def finish(res, jid: str) -> float:
    k = [j.id for j in res.jobs.jobs].index(jid)
    return float(res.jobs.finish[k])


# --- hand-computed scenarios: two jobs, four GPUs ------------------------------------------


def test_two_jobs_pal_by_hand():
    # 2 servers x 2 GPUs; GPU 2 is 1.5x slow. PAL puts j1 on server 0 (cost 1.0) and j2 on
    # server 1 (cost 1.5 within < 1.0 x 1.7 across). R = 100 s, base 1 s/iteration.
    topo = build_cluster(1, 2, 2)
    prof = flat(4, [1.0, 1.0, 1.5, 1.0])
    trace = [job("j1", 2, 0, 1000), job("j2", 2, 0, 500)]
    res = simulate(topo, prof, trace, "pal", "fifo", SimConfig(round_s=100, check=True))
    assert finish(res, "j1") == 1000.0  # 10 rounds of 100 iterations
    assert finish(res, "j2") == 800.0  # 66.7 iterations per round: done in round 8
    s = summary(res)
    assert s["avg_jct_h"] == pytest.approx((1000 + 800) / 2 / 3600)
    assert s["preemptions"] == 0 and s["migrations"] == 0
    # Exact completion: j2 finishes 500 x 1.5 s after its start.
    res = simulate(
        topo, prof, trace, "pal", "fifo", SimConfig(round_s=100, completion="exact", check=True)
    )
    assert finish(res, "j2") == pytest.approx(750.0)
    assert finish(res, "j1") == pytest.approx(1000.0)


def test_charge_differs_from_rank():
    # Placement ranks by the binned value (all 1.0) but the simulator charges the raw one.
    topo = build_cluster(1, 1, 2)
    prof = ClusterProfile(("A",), np.ones((1, 2)), np.array([[1.0, 1.25]]))
    res = simulate(
        topo, prof, [job("j", 2, 0, 400)], "pal", "fifo", SimConfig(round_s=100, check=True)
    )
    assert finish(res, "j") == 500.0  # 80 iterations per round
    res = simulate(
        topo, prof.fixed(), [job("j", 2, 0, 400)], "pal", "fifo", SimConfig(round_s=100, check=True)
    )
    assert finish(res, "j") == 400.0


def test_locality_penalty_charged_across_servers():
    # A 4-GPU job on 2 servers of 2 GPUs runs at 1 / 1.7 speed.
    topo = build_cluster(1, 2, 2)
    res = simulate(
        topo,
        flat(4),
        [job("j", 4, 0, 100)],
        "packed-sticky",
        "fifo",
        SimConfig(round_s=100, penalties=1.7, check=True),
    )
    assert finish(res, "j") == 200.0  # 58.8 iterations per round
    res = simulate(
        topo,
        flat(4),
        [job("j", 4, 0, 100)],
        "packed-sticky",
        "fifo",
        SimConfig(round_s=100, penalties=1.0, check=True),
    )
    assert finish(res, "j") == 100.0


def test_per_tier_penalties():
    # 2 racks x 2 servers x 2 GPUs: 3 GPUs span two servers of one rack (1.2); 6 GPUs span
    # both racks (2.0).
    topo = build_cluster(2, 2, 2)
    cfg = SimConfig(round_s=100, penalties={"rack": 1.2, "cluster": 2.0}, check=True)
    res = simulate(topo, flat(8), [job("r", 3, 0, 120)], "packed-nonsticky", "fifo", cfg)
    assert finish(res, "r") == 200.0  # 83.3 iterations per round
    res = simulate(topo, flat(8), [job("c", 6, 0, 100)], "packed-nonsticky", "fifo", cfg)
    assert finish(res, "c") == 200.0  # 50 iterations per round


@pytest.mark.parametrize("restart", [20, 150, 250, 1500])
def test_a_restart_longer_than_a_round_is_charged_whole(restart):
    # As below, exact completion: a has 200 iterations left when it resumes at 200 s; the
    # restart takes `restart` seconds, spread over as many rounds as it lasts (it used to stop
    # at one round: 150 and 250 s both gave 500 s). 1500 s: 15 rounds without progress, which
    # the stall guard allows (10 rounds, plus those a restart spans).
    topo = build_cluster(1, 1, 2)
    trace = [job("a", 2, 0, 300), job("b", 2, 50, 100)]
    cfg = SimConfig(round_s=100, restart_cost_s=restart, completion="exact", check=True)
    res = simulate(topo, flat(2), trace, "packed-sticky", "las", cfg)
    assert finish(res, "a") == 400.0 + restart and finish(res, "b") == 200.0


def test_utilisation_is_held_gpu_time_over_the_makespan():
    # One GPU. Exact completion: a job of 28 iterations of 1 s ends 28 s into its round; the
    # GPU is held until then (was 100 / 28 = 357%, a whole round over part of one).
    topo = build_cluster(1, 1, 1)
    cfg = SimConfig(round_s=100, completion="exact", check=True)
    s = summary(simulate(topo, flat(1), [job("a", 1, 0, 28)], "pal", "fifo", cfg))
    assert s["makespan_h"] * 3600 == pytest.approx(28.0) and s["gpu_utilisation"] == 1.0
    # A trace that starts late: the makespan and the utilisation both start at the first
    # submission (was 1 / 11 = 9%, counted from time 0).
    s = summary(
        simulate(topo, flat(1), [job("a", 1, 1080, 100)], "pal", "fifo", SimConfig(check=True))
    )
    assert s["makespan_h"] * 3600 == pytest.approx(360.0) and s["gpu_utilisation"] == 1.0
    # Two GPUs, one job of one GPU for two rounds, then nothing: half.
    topo = build_cluster(1, 1, 2)
    s = summary(
        simulate(topo, flat(2), [job("a", 1, 0, 200)], "pal", "fifo", SimConfig(100, check=True))
    )
    assert s["gpu_utilisation"] == 0.5


def test_summary_and_job_table_by_hand():
    # One GPU, rounds of 60 s, FIFO. Untracked x runs 0-120; tracked a (submitted at 30) runs
    # 120-180, b (at 100) 180-300; the GPU idles until c (at 400) runs 420-480; untracked y
    # (at 400) runs 480-600 and tracked w (at 450) still waits at the 600 s horizon.
    trace = [
        replace(job("x", 1, 0, 120), tracked=False),
        job("a", 1, 30, 60),
        job("b", 1, 100, 120),
        job("c", 1, 400, 60),
        replace(job("y", 1, 400, 120), tracked=False),
        job("w", 1, 450, 600),
    ]
    cfg = SimConfig(round_s=60, max_time_s=600, check=True)
    res = simulate(build_cluster(1, 1, 1), flat(1), trace, "pal", "fifo", cfg)
    s = summary(res)
    assert (s["jobs"], s["unfinished"]) == (3, 1)
    jct = [150.0, 200.0, 80.0]  # a, b, c
    assert s["avg_jct_h"] * 3600 == pytest.approx(sum(jct) / 3)
    assert s["median_jct_h"] * 3600 == pytest.approx(150.0)
    assert s["p99_jct_h"] * 3600 == pytest.approx(150.0 + 0.98 * 50.0)  # linear, as numpy
    assert s["avg_queueing_delay_h"] * 3600 == pytest.approx((90.0 + 80.0 + 20.0) / 3)
    # From a's submission to c's end; the GPU is held 330 s of those 450 (30 s of x's first
    # round, x's second, a, b, c; not y's rounds after c).
    assert s["makespan_h"] * 3600 == pytest.approx(450.0)
    assert s["gpu_utilisation"] == pytest.approx(330.0 / 450.0)
    table = job_table(res)
    assert table["job_id"].tolist() == ["x", "a", "b", "c", "y", "w"]
    assert table["first_start_s"].tolist()[:5] == [0.0, 120.0, 180.0, 420.0, 480.0]
    assert table["queueing_delay_s"].tolist()[:5] == [0.0, 90.0, 80.0, 20.0, 80.0]
    assert table["jct_s"].tolist()[:4] == [120.0, 150.0, 200.0, 80.0]
    assert np.isnan(table["first_start_s"].iloc[5]) and np.isnan(table["finish_s"].iloc[4])
    # Stopped before any tracked job completes: no makespan, no utilisation, no JCT.
    s = summary(
        simulate(
            build_cluster(1, 1, 1), flat(1), trace, "pal", "fifo", replace(cfg, max_time_s=100)
        )
    )
    assert (s["jobs"], s["unfinished"], s["makespan_h"], s["gpu_utilisation"]) == (0, 4, 0.0, 0.0)
    assert math.isnan(s["avg_jct_h"]) and math.isnan(s["p99_jct_h"])


def test_tiresias_promotes_a_job_that_waited_as_long_as_it_ran():
    # Two 2-GPU jobs of 1,000 s on 2 GPUs, rounds of 100 s, one threshold at 1,000 GPU-s. a runs
    # from 0 and drops to the lower queue at 500 (1,000 GPU-s); b runs from 500. Without the
    # knob b runs to its end (a: 1,500, b: 2,000). With promote_knob=1 a job whose waiting time
    # reaches its run time goes back to the top: a at 1,000 (waited 500, ran 500), then the
    # two alternate round by round (b waited 500 at 1,100 against 500 run, a 600 at 1,200...).
    trace = [job("a", 2, 0, 1000), job("b", 2, 50, 1000)]
    cfg = SimConfig(round_s=100, check=True)
    for knob, finishes, preemptions in ((None, [1500, 2000], [1, 1]), (1.0, [1900, 2000], [5, 5])):
        policy = get_policy("tiresias", thresholds=[1000], promote_knob=knob)
        res = simulate(build_cluster(1, 1, 2), flat(2), trace, "pal", policy, cfg)
        assert res.jobs.finish.tolist() == finishes
        assert res.jobs.preemptions.tolist() == preemptions
        assert res.jobs.waited_s.tolist() == [finishes[0] - 1000.0, finishes[1] - 1000.0 - 100.0]
        assert res.jobs.attained_gpu_s.tolist() == [2000.0, 2000.0]


def test_las_preempts_and_restart_cost():
    # One server of 2 GPUs. a (300 it) starts at 0; b (100 it) arrives at 50. Under LAS, b has
    # less attained service at t=100 and preempts a; b is done at 200, a resumes and is done
    # at 400 (500 with a 20 s restart cost: 80 iterations in its first round back).
    topo = build_cluster(1, 1, 2)
    trace = [job("a", 2, 0, 300), job("b", 2, 50, 100)]
    res = simulate(topo, flat(2), trace, "packed-sticky", "las", SimConfig(round_s=100, check=True))
    assert (finish(res, "a"), finish(res, "b")) == (400.0, 200.0)
    assert summary(res)["preemptions"] == 1
    res = simulate(
        topo,
        flat(2),
        trace,
        "packed-sticky",
        "las",
        SimConfig(round_s=100, restart_cost_s=20, check=True),
    )
    assert (finish(res, "a"), finish(res, "b")) == (500.0, 200.0)
    res = simulate(
        topo, flat(2), trace, "packed-sticky", "fifo", SimConfig(round_s=100, check=True)
    )
    assert (finish(res, "a"), finish(res, "b")) == (300.0, 400.0)


def test_a_running_job_past_the_window_is_preempted_and_counted():
    # Non-sticky solvers see only the queue's longest prefix that fits, plus one job. At t=100
    # LAS orders b, c (no service yet), then a (running, 100 s attained): a is cut off before
    # the solver and preempted; b runs to 200, c to 300, and a's 200 iterations left to 500.
    topo = build_cluster(1, 1, 2)
    trace = [job("a", 2, 0, 300), job("b", 2, 50, 100), job("c", 1, 50, 100)]
    for shortcuts in (True, False):
        cfg = SimConfig(round_s=100, shortcuts=shortcuts, check=True)
        res = simulate(topo, flat(2), trace, "packed-nonsticky", "las", cfg)
        assert [finish(res, j) for j in "abc"] == [500.0, 200.0, 300.0]
        assert res.jobs.preemptions.tolist() == [1, 0, 0]
        assert [r.preempted for r in res.rounds] == [0, 1, 0, 0, 0, 0]


def test_preemptions_faster_than_the_restart_cost_stall():
    # Two jobs of one server's 4 GPUs with equal service: LAS swaps them every round. With a
    # restart cost of a round or more, neither ever gains an iteration again; the run used to
    # loop for ever (the stall guard counted only rounds with nothing running).
    topo = build_cluster(1, 1, 4)
    trace = [job("a", 4, 0, 300), job("b", 4, 0, 300)]
    cfg = SimConfig(round_s=100, restart_cost_s=150, completion="exact", check=True)
    with pytest.raises(SimulationStalled, match="restart cost") as err:
        simulate(topo, flat(4), trace, "packed-sticky", "las", cfg)
    assert "for 13 rounds" in str(err.value)  # 10, plus the 2 rounds a restart spans, then 1
    # Just under a round, each resume gains an iteration, and both jobs finish.
    cfg = SimConfig(round_s=100, restart_cost_s=99, completion="exact", check=True)
    res = simulate(topo, flat(4), trace, "packed-sticky", "las", cfg)
    assert (finish(res, "a"), finish(res, "b")) == (40100.0, 40200.0)


def test_a_job_longer_than_the_rounds_simulated_is_refused_up_front():
    # A 1e12 s job ran for hours (a round at a time) and wrote a rounds table of gigabytes.
    topo = build_cluster(1, 1, 2)
    trace = [job("a", 1, 0, 100), job("b", 1, 0, 2e8)]  # b: 2e8 s at a cost of 2 (the least)
    profile = flat(2, [2.0, 3.0])
    with pytest.raises(
        InputError,
        match=r"trace\[1\].duration = 200000000.0: job 'b' alone "
        r"needs 4e\+06 rounds of 100 s at its class's least charged cost",
    ):
        simulate(topo, profile, trace, "pal", "fifo", SimConfig(round_s=100))
    # A horizon within the rounds simulated, or rounds long enough, let it run.
    cfg = SimConfig(round_s=100, max_time_s=1e3, check=True)
    res = simulate(topo, profile, trace, "pal", "fifo", cfg)
    assert len(res.rounds) == 10 and math.isnan(finish(res, "b"))
    res = simulate(topo, profile, trace, "pal", "fifo", SimConfig(round_s=1e5, check=True))
    assert finish(res, "b") == 4.001e8  # its first round at the cost of 3, "a" at 2


def test_a_run_past_the_rounds_simulated_stops_with_an_error(monkeypatch):
    # A slow GPU the trace's check cannot foresee (the job lands on it): a clear error once the
    # simulation has run MAX_ROUNDS rounds, not a run of hours.
    from palopt.sim import engine

    monkeypatch.setattr(engine, "MAX_ROUNDS", 50)
    topo = build_cluster(1, 1, 2)
    trace = [job("a", 1, 0, 1000)]  # 10 rounds on the fast GPU, 1,000 on the slow one
    profile = flat(2, [100.0, 1.0])
    with pytest.raises(PaloptError, match=r"has run 50 rounds \(to t=5000s\) with 1 tracked job"):
        simulate(topo, profile, trace, "packed-nonsticky", "fifo", SimConfig(round_s=100))
    res = simulate(topo, profile, trace, "pal", "fifo", SimConfig(round_s=100, check=True))
    assert finish(res, "a") == 1000.0
    cfg = SimConfig(round_s=100, max_time_s=5000, check=True)
    res = simulate(topo, profile, trace, "packed-nonsticky", "fifo", cfg)
    assert len(res.rounds) == 50  # the horizon ends the run at the cap: no error


class _PlacesNothing:
    name = "nothing"

    def solve(self, instance, *, time_limit=None, seed=None):
        return build_result(instance, self.name, {}, {}, 0.0)


@pytest.mark.parametrize("extra", [False, True])
def test_a_job_no_solver_places_stalls(extra):
    # With extra jobs (arriving for ever) the guard never fired: arrivals were always to come.
    topo = build_cluster(1, 1, 4)
    cfg = SimConfig(round_s=100, max_idle_rounds=3, check=True, extra_jobs=extra)
    with pytest.raises(SimulationStalled, match="places none of the waiting jobs") as err:
        simulate(topo, flat(4), [job("a", 1, 0, 100)], _PlacesNothing(), "fifo", cfg)
    assert "for 4 rounds at t=300s (0 running, " in str(err.value)
    assert "solver nothing" in str(err.value) and "(first: 'a')" in str(err.value)


def test_backfill():
    # One server of 4 GPUs: a (3 GPUs) runs; b (2) is blocked; c (1) may use the free GPU
    # only with backfill.
    topo = build_cluster(1, 1, 4)
    trace = [job("a", 3, 0, 1000), job("b", 2, 0, 100), job("c", 1, 0, 100)]
    plain = simulate(topo, flat(4), trace, "pal", "fifo", SimConfig(round_s=100, check=True))
    back = simulate(
        topo, flat(4), trace, "pal", "fifo", SimConfig(round_s=100, backfill=True, check=True)
    )
    c = [j.id for j in plain.jobs.jobs].index("c")
    assert plain.jobs.first_start[c] == 1000.0
    assert back.jobs.first_start[c] == 0.0
    assert finish(back, "c") == 100.0
    assert finish(back, "a") == finish(plain, "a") == 1000.0


@pytest.mark.parametrize("solver", ["pal", "packed-sticky", "packed-nonsticky"])
def test_a_backfilled_job_keeps_running_behind_the_blocked_one(solver):
    # c (1 GPU, 5 rounds) is backfilled beside a while b stays blocked. Backfill used to leave
    # out running jobs, so c was preempted every other round and finished at 900 s, not 500 s.
    topo = build_cluster(1, 1, 4)
    trace = [job("a", 2, 0, 2000), job("b", 3, 0, 100), job("c", 1, 0, 500)]
    res = simulate(
        topo, flat(4), trace, solver, "fifo", SimConfig(round_s=100, backfill=True, check=True)
    )
    c = [j.id for j in res.jobs.jobs].index("c")
    assert finish(res, "c") == 500.0 and res.jobs.preemptions[c] == 0
    assert finish(res, "a") == 2000.0 and finish(res, "b") == 2100.0


def test_waiting_until_arrival_and_round_alignment():
    # A job arriving at 130 s is admitted at the 200 s round (rounds start at multiples of R).
    topo = build_cluster(1, 1, 1)
    res = simulate(
        topo, flat(1), [job("j", 1, 130, 50)], "pal", "fifo", SimConfig(round_s=100, check=True)
    )
    assert res.jobs.first_start[0] == 200.0
    assert finish(res, "j") == 300.0


# --- conservation -------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    solver=st.sampled_from(
        ["pal", "pmfirst", "packed-sticky", "packed-nonsticky", "random-sticky"]
    ),
    policy=st.sampled_from(["fifo", "las", "srtf", "tiresias"]),
    backfill=st.booleans(),
)
def test_conservation(seed, solver, policy, backfill):
    rng = np.random.default_rng(seed)
    topo = build_cluster(1, 3, 4)
    prof = ClusterProfile(
        ("A", "B"), rng.uniform(0.9, 1.3, (2, 12)), rng.uniform(0.9, 1.3, (2, 12))
    )
    trace = [
        job(
            str(i),
            int(rng.choice([1, 2, 3, 4, 6, 8])),
            float(rng.integers(0, 2000)),
            float(rng.integers(50, 800)),
            str(rng.choice(["A", "B"])),
        )
        for i in range(12)
    ]
    sim = Simulator(
        topo,
        prof,
        trace,
        solver,
        policy,
        SimConfig(round_s=100, backfill=backfill, check=True, seed=seed),
    )
    jt = sim.jobs
    while not sim.finished:
        before = jt.iters_done.copy()
        running_before = jt.status == RUNNING
        sim.step()
        # no progress while not placed
        moved = jt.iters_done != before
        assert not (moved & ~running_before).any()
        # a GPU never runs two jobs; running jobs hold exactly their size
        held = [g for j in np.flatnonzero(jt.status == RUNNING) for g in jt.gpus[j]]
        assert len(held) == len(set(held))
        for j in np.flatnonzero(jt.status == RUNNING):
            assert len(jt.gpus[j]) == jt.num_gpus[j]
        assert sim.round < 10_000
    assert (jt.status == DONE).all()
    assert (jt.finish >= jt.submit).all()
    assert (jt.iters_done >= jt.iters_total).all()


# --- determinism, extra jobs, policies, profiles ------------------------------------------


def test_determinism_per_seed():
    rng = np.random.default_rng(5)
    topo = build_cluster(1, 4, 4)
    prof = ClusterProfile(("A",), rng.uniform(0.9, 1.3, (1, 16)), rng.uniform(0.9, 1.3, (1, 16)))
    trace = [
        job(
            str(i),
            int(rng.choice([1, 2, 4, 8])),
            float(rng.integers(0, 3000)),
            float(rng.integers(100, 3000)),
        )
        for i in range(30)
    ]

    def run(seed):
        res = simulate(
            topo,
            prof,
            trace,
            "random-nonsticky",
            "fifo",
            SimConfig(round_s=300, seed=seed, check=True),
        )
        return res.jobs.finish.tolist()

    assert run(1) == run(1)
    assert run(1) != run(2)
    assert synthetic_trace(40, 20.0, 3, np.array([1, 2]), np.full(2, 0.5)) == synthetic_trace(
        40, 20.0, 3, np.array([1, 2]), np.full(2, 0.5)
    )


def test_synthetic_trace_distribution():
    t = synthetic_trace(4000, 10.0, 0, np.array([1, 4]), np.array([0.75, 0.25]))
    gaps = np.diff([j.submit_time for j in t])
    assert np.mean(gaps) == pytest.approx(360.0, rel=0.05)
    secs = np.array([j.iterations for j in t])
    assert secs.min() >= 60 * 10**1.5 - 1 and secs.max() <= 60 * 10**4 + 1
    assert np.mean(secs > 60 * 10**3) == pytest.approx(0.2, abs=0.03)
    assert np.mean([j.num_gpus == 4 for j in t]) == pytest.approx(0.25, abs=0.03)
    # whole seconds, as documented
    assert all(j.iterations == int(j.iterations) and j.submit_time == int(j.submit_time) for j in t)


def test_synthetic_trace_cuts_large_draws_to_max_gpus():
    t = synthetic_trace(20, 10.0, 0, np.array([2, 8]), np.array([0.5, 0.5]), max_gpus=4)
    assert {j.num_gpus for j in t} == {2, 4}


@pytest.mark.parametrize(("n_jobs", "load"), [(0, 10.0), (1, 0.0), (1, -1.0)])
def test_synthetic_trace_needs_a_job_and_a_positive_load(n_jobs, load):
    # no job: IndexError (gaps[0]); no load: infinite gaps
    with pytest.raises(InputError, match="need at least one job and a positive load"):
        synthetic_trace(n_jobs, load, 0, np.array([1]), np.array([1.0]))


def test_extra_jobs_untracked():
    trace = [job(str(i), 1, 10.0 * i, 100) for i in range(3)]
    extra = extra_jobs(trace, 5, rate_per_hour=2.0, seed=1)
    assert extra == extra_jobs(trace, 5, rate_per_hour=2.0, seed=1)
    assert [e.iterations for e in extra] == [100.0] * 5
    assert not any(e.tracked for e in extra)
    times = [e.submit_time for e in extra]
    assert times[0] > 20.0 and times == sorted(times) and all(t == int(t) for t in times)
    topo = build_cluster(1, 1, 2)
    res = simulate(
        topo, flat(2), trace, "pal", "fifo", SimConfig(round_s=100, extra_jobs=True, check=True)
    )
    assert summary(res)["jobs"] == 3
    assert len(res.jobs) > 3


def test_extra_jobs_stop_at_the_clock_s_limit():
    # A rate of 1e-320 per hour drew a gap of infinity: OverflowError in math.ceil
    trace = [job("a", 1, 0.0, 100)]
    slow = extra_jobs(trace, 1000, rate_per_hour=1e-6)
    assert 0 < len(slow) < 1000 and slow[-1].submit_time <= MAX_TIME_S
    assert slow == extra_jobs(trace, 2000, rate_per_hour=1e-6)
    # the first job too late ends them: none is skipped for a later, shorter gap
    assert [j.id for j in slow] == [f"x{k}" for k in range(len(slow))]
    assert extra_jobs(trace, 5, rate_per_hour=1e-320) == ()
    cfg = SimConfig(round_s=100, extra_jobs=True, extra_rate=1e-320, check=True)
    res = simulate(build_cluster(1, 1, 2), flat(2), trace, "pal", "fifo", cfg)
    assert summary(res)["jobs"] == 1 and len(res.jobs) == 1
    with pytest.raises(InputError, match="rate_per_hour = 0: must be a finite number > 0"):
        extra_jobs(trace, 5, rate_per_hour=0)


def test_extra_jobs_never_arrive_after_the_clock_s_limit():
    # The limit was checked before the gap was rounded up to whole seconds: after a last
    # submit time of x.5 s, a job arrived at 1e12 + 0.5 s, which check_trace refuses.
    gap = -math.log(1.0 - random.Random(1).random()) * 3600.0  # the first draw at 1 an hour
    assert math.ceil(gap) - gap > 0.5
    late = [job("a", 1, MAX_TIME_S - math.ceil(gap) + 0.5, 100)]
    assert extra_jobs(late, 1, rate_per_hour=1.0) == ()
    just = [job("a", 1, MAX_TIME_S - math.ceil(gap), 100)]
    assert [j.submit_time for j in extra_jobs(just, 1, rate_per_hour=1.0)] == [MAX_TIME_S]


def test_check_trace_takes_the_limits_and_names_bad_fields():
    check_trace([job("a", 1, MAX_TIME_S, MAX_TIME_S)])  # submit and run time at the limit
    for bad, message in [
        ([job(" ", 1, 0, 100)], r"trace\[0\].job_id = ' ': empty job id"),
        ([job("a", 1, 0, 100, cls=7)], r"trace\[0\].job_class = 7: expected a class name"),
        ([job("a", 1, 0, 100), ("b", 1)], r"trace\[1\] = .*must be a TraceJob"),
    ]:
        with pytest.raises(InputError, match=message):
            check_trace(bad)


def test_policy_orders():
    class State:
        submit = np.array([0.0, 10.0, 20.0, 30.0])
        attained_s = np.array([300.0, 0.0, 100.0, 0.0])
        attained_gpu_s = np.array([300.0, 0.0, 5000.0, 0.0])
        waited_s = np.zeros(4)
        base = np.array([1.0, 1.0, 2.0, 1.0])
        iters_total = np.array([400.0, 1000.0, 100.0, 50.0])

    q = np.arange(4)
    assert get_policy("fifo").order(q, State).tolist() == [0, 1, 2, 3]
    assert get_policy("las").order(q, State).tolist() == [1, 3, 2, 0]
    # remaining: 100, 1000, 100, 50
    assert get_policy("srtf").order(q, State).tolist() == [3, 0, 2, 1]
    # Tiresias: job 2 (5000 GPU-s) drops to the second queue; others FIFO in the first.
    assert get_policy("tiresias").order(q, State).tolist() == [0, 1, 3, 2]
    with pytest.raises(InputError, match="unknown policy"):
        get_policy("nope")
    # Tiresias' settings: job 2's 5000 GPU-s is in the top queue below a 6000 threshold; job 0
    # (waited 600 s, 2x its 300 s run) is promoted past jobs 1 and 3, now below it (200 GPU-s).
    assert get_policy("tiresias", thresholds=[6000]).order(q, State).tolist() == [0, 1, 2, 3]
    # Job 2 waited 150 s, under 2x its 100 s run: not promoted.
    State.waited_s = np.array([600.0, 0.0, 150.0, 0.0])
    promoting = get_policy("tiresias", thresholds=[200], promote_knob=2)
    assert promoting.order(q, State).tolist() == [0, 1, 3, 2]
    assert get_policy("tiresias").thresholds.tolist() == [3600.0, 36000.0]  # as documented
    assert get_policy("tiresias", thresholds=[200]).order(q, State).tolist() == [1, 3, 0, 2]
    # A job exactly at a threshold is in the queue below it (job 0, 300 GPU-s); one that waited
    # exactly the knob times its run is promoted (job 2, 150 s = 1.5 x 100 s, joins the top queue).
    assert get_policy("tiresias", thresholds=[300]).order(q, State).tolist() == [1, 3, 0, 2]
    exact = get_policy("tiresias", thresholds=[300], promote_knob=1.5)
    assert exact.order(q, State).tolist() == [0, 1, 2, 3]
    # The queue comes in any order: ties and FIFO go by submit time, not queue position.
    mixed = np.array([3, 1, 0, 2])
    assert get_policy("fifo").order(mixed, State).tolist() == [0, 1, 2, 3]
    assert get_policy("tiresias").order(mixed, State).tolist() == [0, 1, 3, 2]
    for name, options, message in (
        ("fifo", {"promote_knob": 2}, "fifo.promote_knob = 2: unknown option for this policy"),
        ("tiresias", {"thresholds": [10, 5]}, "thresholds = \\[10, 5\\]: must be strictly"),
        ("tiresias", {"thresholds": [10, 10]}, "thresholds = \\[10, 10\\]: must be strictly"),
        ("tiresias", {"thresholds": "600"}, "thresholds = '600': expected a list of GPU-seconds"),
        ("tiresias", {"thresholds": 600}, "thresholds = 600: expected a list of GPU-seconds"),
        (get_policy("fifo"), {"thresholds": [1]}, "a policy object takes no options"),
        ("tiresias", {"thresholds": ["1h"]}, "thresholds\\[0\\] = '1h'"),
        ("tiresias", {"promote_knob": 0}, "promote_knob = 0: must be a finite number > 0"),
        ("tiresias", {"thresholds": [0, 10]}, "thresholds\\[0\\] = 0: must be a finite number > 0"),
        ("tiresias", {"thresholds": [-5]}, "thresholds\\[0\\] = -5: must be a finite number > 0"),
    ):
        with pytest.raises(InputError, match=message):
            get_policy(name, **options)


def test_tiresias_promotes_a_starving_job_to_the_top_queue_not_one_up():
    """A job promoted by Tiresias' starvation guard joins the top queue, ahead of the jobs in
    the queues between, whatever queue its service put it in."""

    class State:
        submit = np.array([0.0, 10.0, 20.0])
        attained_s = np.array([100.0, 50.0, 0.0])
        attained_gpu_s = np.array([5000.0, 500.0, 0.0])  # queues 2, 1 and 0
        waited_s = np.array([200.0, 0.0, 0.0])  # job 0 waited 2x its run

    q = np.arange(3)
    assert get_policy("tiresias", thresholds=[100, 1000]).order(q, State).tolist() == [2, 1, 0]
    promoting = get_policy("tiresias", thresholds=[100, 1000], promote_knob=2)
    assert promoting.levels(q, State).tolist() == [0, 1, 0]
    assert promoting.order(q, State).tolist() == [0, 2, 1]


def test_correlated_profile():
    hi = correlated_profile(4000, ("A", "B"), 0.1, 0.9, seed=0)
    lo = correlated_profile(4000, ("A", "B"), 0.1, 0.0, seed=0)
    assert np.corrcoef(np.log(hi.rank))[0, 1] > 0.8
    assert abs(np.corrcoef(np.log(lo.rank))[0, 1]) < 0.1
    assert np.median(hi.rank, axis=1) == pytest.approx([1.0, 1.0])
    # each class's log-slowdown has spread sigma, and the classes correlate by rho**2
    mid = np.log(correlated_profile(20000, ("A", "B"), 0.1, 0.5, seed=0).rank)
    assert mid.std(axis=1) == pytest.approx([0.1, 0.1], rel=0.03)
    assert np.corrcoef(mid)[0, 1] == pytest.approx(0.25, abs=0.03)


def test_correlated_profile_takes_rho_and_sigma_at_their_limits():
    p = correlated_profile(8, ("A", "B"), (0.0, 1.0), -1.0, seed=0)
    assert p.rank[0].tolist() == [1.0] * 8 and p.rank.shape == (2, 8)


def test_a_class_without_profile_is_named_as_the_trace_gives_it():
    """The class check named the job by its place in submit order (``trace[1]`` for the first
    job of a trace given out of order), where the size check names it as given."""
    trace = [job("late", 1, 50, 100, cls="Z"), job("early", 1, 0, 100)]
    with pytest.raises(InputError, match=r"^trace\[0\]\.class = 'Z': job 'late': no profile"):
        Simulator(build_cluster(1, 1, 2), flat(2), trace, config=SimConfig(check=True))
    res = simulate(build_cluster(1, 1, 2), flat(2), trace[1:], config=SimConfig(check=True))
    assert res.jobs.finish.tolist() == [360.0]


def test_the_simulator_and_the_job_table_refuse_a_class_without_profile_in_their_words():
    """One check serves both: the simulator names the job as given and by its id, the table by
    its number in the table (after the jobs it holds), and appends none of the jobs then."""
    profile = ClusterProfile(("A", "B"), np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(
        InputError,
        match=r"^trace\[1\]\.class = 'Z': job 'j': no profile for this class; known: A, B$",
    ):
        Simulator(
            build_cluster(1, 1, 2), profile, [job("i", 1, 5, 10), job("j", 1, 0, 10, cls="Z")]
        )
    table = JobTable([job("i", 1, 0, 10)], {"A": 0, "B": 1})
    with pytest.raises(
        InputError, match=r"^trace\[2\]\.class = 'Z': no profile for this class; known: A, B$"
    ):
        table.extend([job("j", 1, 0, 10), job("k", 1, 0, 10, cls="Z")])
    assert len(table) == 1 and table.submit.tolist() == [0.0]


def test_bad_inputs():
    topo = build_cluster(1, 1, 2)
    # named as given (the simulator orders the trace by submit time) and by the job's id
    with pytest.raises(InputError, match=r"^trace\[1\].num_gpus = 3: job 'j' needs more than"):
        Simulator(topo, flat(2), [job("i", 1, 5, 10), job("j", 3, 0, 10)])
    with pytest.raises(InputError, match="no profile"):
        Simulator(topo, flat(2), [job("j", 1, 0, 10, cls="Z")])
    with pytest.raises(InputError):
        SimConfig(round_s=0)
    with pytest.raises(InputError):
        SimConfig(completion="sometime")
    for field, kwargs in (
        ("round", {"round_s": "360"}),
        ("restart_cost", {"restart_cost_s": -1}),
        ("backfill", {"backfill": "no"}),
        ("extra_jobs", {"extra_jobs": 1}),
        ("seed", {"seed": 1.5}),
        ("max_idle_rounds", {"max_idle_rounds": 0}),
        ("max_time", {"max_time_s": 0}),
        ("max_time", {"max_time_s": float("inf")}),
        # a round of 1e-9 s never ended a simulation, one of 1e308 s gave infinite JCTs
        ("round", {"round_s": 1e-9}),
        ("round", {"round_s": 1e308}),
        ("restart_cost", {"restart_cost_s": 1e308}),
        ("max_time", {"max_time_s": 1e308}),
    ):
        with pytest.raises(InputError, match=f"^{field} = "):
            SimConfig(**kwargs)  # type: ignore[arg-type]


def test_step_by_step_library_use():
    topo = build_cluster(1, 1, 2)
    sim = Simulator(
        topo,
        flat(2),
        [job("a", 1, 0, 150), job("b", 1, 0, 50)],
        "pal",
        "fifo",
        SimConfig(round_s=100, check=True),
    )
    r0 = sim.step()
    assert (r0.time, r0.running, r0.busy_gpus, r0.started) == (0.0, 2, 2, 2)
    r1 = sim.step()
    assert (r1.completed, r1.running) == (1, 1)
    assert not sim.finished
    sim.step()
    assert sim.finished
    assert math.isclose(sim.result().jobs.finish[0], 200.0)


@pytest.mark.parametrize(
    "solver",
    ["pal", "pmfirst", "packed-sticky", "packed-nonsticky", "random-sticky", "random-nonsticky"],
)
@pytest.mark.parametrize("policy", ["fifo", "las"])
def test_skipping_rounds_changes_nothing(solver, policy):
    # Reusing idle decisions, fast-forwarding and cutting non-sticky queues at the window are
    # pure speed-ups: the same simulation with every round solved in full gives equal results.
    rng = np.random.default_rng(11)
    topo = build_cluster(1, 4, 4)
    prof = ClusterProfile(
        ("A", "B"), rng.uniform(0.9, 1.3, (2, 16)), rng.uniform(0.9, 1.3, (2, 16))
    )
    trace = [
        job(
            str(i),
            int(rng.choice([1, 2, 3, 4, 6, 8, 12])),
            float(rng.integers(0, 6000)),
            float(rng.integers(100, 3000)),
            str(rng.choice(["A", "B"])),
        )
        for i in range(30)
    ]
    fast = Simulator(
        topo, prof, trace, solver, policy, SimConfig(round_s=300, seed=4, check=True)
    ).run()
    full = Simulator(
        topo,
        prof,
        trace,
        solver,
        policy,
        SimConfig(round_s=300, seed=4, shortcuts=False, check=True),
    ).run()
    assert fast.jobs.finish.tolist() == full.jobs.finish.tolist()
    assert fast.jobs.migrations.tolist() == full.jobs.migrations.tolist()
    assert fast.jobs.preemptions.tolist() == full.jobs.preemptions.tolist()
    for name in ("iters_done", "attained_s", "attained_gpu_s", "waited_s", "first_start"):
        assert getattr(fast.jobs, name).tolist() == getattr(full.jobs, name).tolist(), name
    assert len(fast.rounds) == len(full.rounds)
    assert sum(r.solved for r in fast.rounds) <= sum(r.solved for r in full.rounds)


def test_shortcuts_stop_with_the_last_tracked_job():
    # An untracked job outlasts the tracked one: with shortcuts the run went on fast-forwarding
    # it after the tracked job was done (99 rounds recorded instead of 2).
    topo = build_cluster(1, 1, 4)
    trace = [job("a", 1, 0, 100), TraceJob("b", 1, 0.0, 10_000.0, "m", "A", 1.0, False)]
    runs = [
        Simulator(
            topo, flat(4), trace, "packed-sticky", "fifo", SimConfig(100, shortcuts=on, check=True)
        )
        for on in (True, False)
    ]
    fast, full = (sim.run() for sim in runs)
    assert len(fast.rounds) == len(full.rounds) == 2 and runs[0].time == runs[1].time == 200
    assert fast.jobs.iters_done.tolist() == full.jobs.iters_done.tolist() == [100.0, 100.0]


@pytest.mark.parametrize("shortcuts", [True, False])
@pytest.mark.parametrize("policy", ["fifo", "las"])
@pytest.mark.parametrize("horizon", [1.0, 2950.0, 3000.0, 6000.0])
def test_a_horizon_stops_the_run_where_the_full_run_is(shortcuts, policy, horizon):
    # Stopped at the horizon, a run is the full run up to it: the rounds that start before it
    # (fast-forwarding stops there too), the same completions; the rest counted unfinished.
    rng = np.random.default_rng(5)
    topo = build_cluster(1, 2, 4)
    trace = [
        job(str(i), int(rng.choice([1, 2, 4, 8])), float(rng.integers(0, 3000)), 3000.0)
        for i in range(12)
    ]
    cfg = SimConfig(round_s=100, shortcuts=shortcuts, check=True)
    full = simulate(topo, flat(8), trace, "pal", policy, cfg)
    cut = simulate(topo, flat(8), trace, "pal", policy, replace(cfg, max_time_s=horizon))
    rounds = [r for r in full.rounds if r.time < horizon]
    assert len(rounds) < len(full.rounds)
    assert [replace(r, solve_time=0.0) for r in cut.rounds] == [
        replace(r, solve_time=0.0) for r in rounds
    ]
    done = cut.jobs.status == DONE
    assert cut.jobs.finish[done].tolist() == full.jobs.finish[done].tolist()
    s = summary(cut)
    assert s["jobs"] == sum(r.completed for r in rounds) == done.sum()
    assert s["unfinished"] == 12 - done.sum() > 0
    assert "unfinished at the horizon" in format_summary(s)


def test_a_horizon_ends_a_run_in_which_las_starves_a_job():
    # LAS with extra jobs on an overloaded 1-GPU cluster: each newcomer (no service yet) takes
    # the GPU from the tracked job, which would wait for ever; the horizon ends the run.
    trace = [job("a", 1, 0, 5000)]
    cfg = SimConfig(round_s=600, extra_jobs=True, extra_rate=30.0, max_time_s=20_000, check=True)
    res = simulate(build_cluster(1, 1, 1), flat(1), trace, "pal", "las", cfg)
    assert res.rounds[-1].time < 20_000 <= res.rounds[-1].time + 600
    assert summary(res)["unfinished"] == 1
    assert len(res.jobs) > 2


@pytest.mark.parametrize("busy", [True, False])
def test_rounds_start_at_multiples_of_the_round_length(busy):
    # R = 0.1 s is not exact in binary: the clock added R each round and read 0.9999999999999999
    # at round 10, so a job submitted at 1.0 started a round late on a busy cluster (stepping),
    # and on time on an empty one (skipping ahead).
    topo = build_cluster(1, 1, 4)
    trace = [job("a", 1, 0, 100)] * busy + [job("b", 1, 1.0, 0.05)]
    res = simulate(
        topo, flat(4), trace, "packed-sticky", "fifo", SimConfig(0.1, shortcuts=False, check=True)
    )
    k = [j.id for j in res.jobs.jobs].index("b")
    assert res.jobs.first_start[k] == 1.0
    assert [r.time for r in res.rounds] == [r.round * 0.1 for r in res.rounds]


def test_fig13_trace_tracks_the_middle():
    from palopt.sim.trace import SYNERGY_GPU_COUNTS

    t = synthetic_trace(30, 10.0, 1, *SYNERGY_GPU_COUNTS, tracked=(10, 20))
    assert [j.tracked for j in t] == [False] * 10 + [True] * 10 + [False] * 10
    assert {j.num_gpus for j in t} <= {1, 2, 4, 8}


@pytest.mark.parametrize("solver", ["cpsat", "milp", "milp:highs", "greedy"])
def test_exact_and_greedy_solvers_run_in_the_loop(solver):
    # Same scenario as test_two_jobs_pal_by_hand: the optimum is PAL's choice, so the exact
    # solvers (every placement checked by the simulator's feasibility check) finish alike.
    topo = build_cluster(1, 2, 2)
    prof = flat(4, [1.0, 1.0, 1.5, 1.0])
    trace = [job("j1", 2, 0, 1000), job("j2", 2, 0, 500), job("j3", 1, 150, 100)]
    res = simulate(
        topo, prof, trace, solver, "fifo", SimConfig(round_s=100, time_limit=2, check=True)
    )
    assert finish(res, "j1") == 1000.0
    assert finish(res, "j2") == 800.0
    assert summary(res)["jobs"] == 3


def test_seeded_inputs_reject_a_negative_seed() -> None:
    from palopt.sim.trace import SYNERGY_GPU_COUNTS

    with pytest.raises(InputError, match="seed = -1"):
        correlated_profile(8, ("A",), 0.05, 0.5, seed=-1)
    with pytest.raises(InputError, match="seed = -1"):
        synthetic_trace(3, 10.0, -1, *SYNERGY_GPU_COUNTS)
    profile = correlated_profile(8, ("A",), 0.05, 0.5, seed=0)
    assert isinstance(profile, ClusterProfile)
    with pytest.raises(InputError, match="seed = -1"):
        profile.tiled(16, 4, seed=-1)


@pytest.mark.parametrize(("n", "n_gpus"), [(8, 6), (6, 8)])
def test_tiled_profile_needs_whole_servers_on_both_sides(n, n_gpus):
    profile = correlated_profile(n, ("A",), 0.05, 0.5, seed=0)
    with pytest.raises(InputError, match=f"profile = \\({n}, {n_gpus}\\): GPU counts must be"):
        profile.tiled(n_gpus, 4, seed=0)


@pytest.mark.parametrize(
    ("n_gpus", "per_server", "field"), [(8, 0, "gpus_per_server"), (0, 4, "n_gpus")]
)
def test_tiled_profile_needs_positive_counts(n_gpus, per_server, field):
    # gpus_per_server=0 raised ZeroDivisionError.
    profile = correlated_profile(8, ("A",), 0.05, 0.5, seed=0)
    with pytest.raises(InputError, match=f"{field} = 0"):
        profile.tiled(n_gpus, per_server, seed=0)


@pytest.mark.parametrize("shape", [(1,), (1, 2, 2)])
def test_cluster_profile_wants_a_2d_array(shape):
    with pytest.raises(InputError, match="profile.rank = 'ndarray': expected a 2-D numpy array"):
        ClusterProfile(("A",), np.ones(shape), np.ones(shape))


@pytest.mark.parametrize(
    ("gpus", "problem"),
    [
        ((0, 1), "wrong count"),
        ((2, 3), "wrong count"),
        (None, "shared"),
        ((-1,), "out of range"),
        ((4,), "out of range"),
    ],
)
def test_a_solver_that_gives_bad_gpus_is_named(gpus, problem):
    # The second job's GPUs are replaced: too many (two free GPUs too), the first job's, or not
    # in the cluster (-1 used to wrap around to the last GPU).
    from dataclasses import replace

    from palopt.errors import PaloptError
    from palopt.solvers import get_solver

    greedy = get_solver("greedy")

    class Bad:
        name = "bad"

        def solve(self, instance, *, time_limit=None, seed=None):
            result = greedy.solve(instance)
            first, second = result.placements[:2]
            given = first.gpus if gpus is None else gpus
            return replace(result, placements=(first, replace(second, gpus=given)))

    topo = build_cluster(1, 1, 4)
    sim = Simulator(topo, flat(4), [job("a", 1, 0, 10), job("b", 1, 0, 10)], Bad())
    with pytest.raises(PaloptError, match=f"solver bad gave job b GPUs .*{problem}"):
        sim.step()


# --- a researcher's own policy and solver: misuse is refused, not run ----------------------


class _Order:
    name = "custom"
    static = False

    def __init__(self, make):
        self.make = make

    def order(self, queue, state):
        return self.make(queue, state)


@pytest.mark.parametrize(
    "make",
    [
        lambda q, s: np.arange(len(s)),  # jobs not yet arrived: they ran before their submit
        lambda q, s: q[:1],  # jobs left out
        lambda q, s: np.r_[q, q[:1]],  # a job twice
        lambda q, s: q.astype(float),  # not indices
        lambda q, s: np.array([99] * len(q)),  # out of range (was IndexError)
    ],
)
def test_a_policy_order_must_hold_each_queued_job_once(make):
    topo = build_cluster(1, 1, 4)
    trace = [job("a", 2, 0, 500), job("b", 2, 0, 500), job("c", 1, 1000, 100)]
    with pytest.raises(PaloptError, match="policy custom ordered .*each of the queue's"):
        simulate(topo, flat(4), trace, "pal", _Order(make), SimConfig(round_s=100))
    # a list is an order too
    cfg = SimConfig(100, check=True)
    res = simulate(topo, flat(4), trace, "pal", _Order(lambda q, s: list(q)), cfg)
    assert res.jobs.status.tolist() == [DONE] * 3


class _Gives:
    name = "gives"

    def __init__(self, gpus):
        self.gpus = gpus

    def solve(self, instance, *, time_limit=None, seed=None):
        if self.gpus is None:
            return None
        result = build_result(instance, self.name, {0: np.arange(4)}, {}, 0.0)
        first = replace(result.placements[0], gpus=tuple(self.gpus))  # as the solver wrote it
        return replace(result, placements=(first, *result.placements[1:]))


@pytest.mark.parametrize(
    "gpus, message",
    [
        ((0, 0, 0, 0), "repeated"),  # was run on GPU 0 alone, utilisation 1.0
        ((0.0, 1.0, 2.0, 3.0), "not integer indices"),
        (None, "returned a NoneType, not a PlacementResult"),
    ],
)
def test_a_solver_answer_that_is_no_placement_is_refused(gpus, message):
    trace = [job("a", 4, 0, 500)]
    solver = _Gives(gpus)
    with pytest.raises(PaloptError, match=message):
        simulate(build_cluster(1, 1, 4), flat(4), trace, solver, "fifo", SimConfig(100))


def test_simulator_arguments_and_lifecycle():
    topo, trace = build_cluster(1, 1, 4), [job("a", 1, 0, 100)]
    cfg = SimConfig(round_s=100, check=True)
    sim = Simulator(topo, flat(4), (j for j in trace), "pal", "fifo", cfg)
    assert len(sim.jobs) == 1  # a generator was used up by the check: an empty run
    early = sim.result()
    sim.run()
    assert early.jobs.status.tolist() != [DONE] and sim.result().jobs.status.tolist() == [DONE]
    with pytest.raises(PaloptError, match="has finished"):
        sim.step()
    with pytest.raises(InputError, match="solver = 'HeuristicSolver'"):
        Simulator(topo, flat(4), trace, type(palopt.get_solver("pal")))
    nameless = _Order(lambda q, s: q)
    del _Order.name
    try:
        with pytest.raises(InputError, match="a policy needs a name"):
            Simulator(topo, flat(4), trace, "pal", nameless)
    finally:
        _Order.name = "custom"
    with pytest.raises(InputError, match="profile.rank = 'list'"):  # was AttributeError later
        ClusterProfile(("A",), [[1.0] * 4], [[1.0] * 4])
    ones = np.ones((1, 4))
    for charge, message in (  # the charged array was named "slowdown", or its shape not checked
        (np.array([[1.0, -1.0, 1.0, 1.0]]), r"profile.charge\[A\]\[1\] = -1.0"),
        (np.array([[1.0, np.nan, 1.0, 1.0]]), r"profile.charge\[A\]\[1\] = nan"),
        (np.ones((1, 3)), r"profile.charge = \(1, 3\): expected the shape of rank"),
        (np.ones((2, 4)), r"profile.charge = \(2, 4\): expected one row per class \(1\)"),
    ):
        with pytest.raises(InputError, match=message):
            ClusterProfile(("A",), ones, charge)
    with pytest.raises(InputError, match=r"profile.rank\[A\]\[0\] = 0.0"):
        ClusterProfile(("A",), np.zeros((1, 4)), ones)
    for bad, field in (
        (replace(trace[0], id=5), "must be a string"),
        (replace(trace[0], tracked="no"), "tracked"),
    ):
        with pytest.raises(InputError, match=field):
            Simulator(topo, flat(4), [bad])


@pytest.mark.parametrize(
    "args, field",
    [
        ((-1, ("A",), 0.05, 0.5), "n_gpus"),
        ((4, "AB", 0.05, 0.5), "classes"),
        ((4, ("A", "B"), (0.05, 0.05, 0.05), 0.5), "sigma"),
        ((4, ("A",), float("nan"), 0.5), "sigma"),
        ((4, ("A",), 1000.0, 0.5), "sigma"),
    ],
)
def test_correlated_profile_refuses_bad_arguments(args, field):
    with pytest.raises(InputError, match=f"^{field} = "):
        correlated_profile(*args, seed=0)


# --- rounding at round boundaries, extra job ids, strict JSON ---------------------------------


@pytest.mark.parametrize("busy", [True, False])
@pytest.mark.parametrize("shortcuts", [True, False])
def test_skipping_ahead_lands_on_the_round_the_clock_admits_in(busy, shortcuts):
    # R = 0.3 s: 2.1 / 0.3 is 7.000000000000001, but round 7 starts at 7 x 0.3 = 2.1, when a
    # job submitted at 2.1 is due. Skipping ahead (idle cluster, or FIFO fast-forward) used
    # ceil(2.1 / 0.3) = 8 and admitted it at 2.4; stepping admitted it at 2.1.
    topo = build_cluster(1, 1, 4)
    trace = [job("a", 1, 0, 100)] * busy + [job("b", 1, 2.1, 0.05)]
    cfg = SimConfig(0.3, shortcuts=shortcuts, check=True)
    res = simulate(topo, flat(4), trace, "packed-sticky", "fifo", cfg)
    k = [j.id for j in res.jobs.jobs].index("b")
    assert res.jobs.first_start[k] == 7 * 0.3 == 2.1


@pytest.mark.parametrize(("horizon", "last"), [(2.1, 6), (0.9, 3)])
def test_a_horizon_keeps_the_rounds_that_start_before_it_by_the_clock(horizon, last):
    # Round k starts at k x 0.3: round 7 at 2.1 (not before a 2.1 s horizon; ceil gave 8
    # rounds), round 3 at 0.8999999999999999 (before 0.9; ceil(0.9 / 0.3) = 3 left it out).
    cfg = SimConfig(0.3, max_time_s=horizon, shortcuts=False, check=True)
    res = simulate(build_cluster(1, 1, 1), flat(1), [job("a", 1, 0, 1000)], "pal", "fifo", cfg)
    assert [r.round for r in res.rounds][-1] == last
    assert all(r.time < horizon for r in res.rounds)


def test_extra_jobs_never_reuse_a_trace_id():
    # A trace job named x0 and the first extra job (x0) were two jobs of one id: the solver's
    # instance refused the queue ("queue[1].id = 'x0': duplicate job id") mid-run.
    trace = [job("x0", 1, 0, 100_000), job("b", 1, 0, 100)]
    extra = extra_jobs(trace, 3)
    assert [j.id for j in extra] == ["xx0", "xx1", "xx2"]
    assert [j.id for j in extra_jobs([job("x", 1, 0, 1), job("xa1", 1, 0, 1)], 1)] == ["x0"]
    # a trace with both x<k> and xx<k> ids gets xxx<k>
    assert [j.id for j in extra_jobs([job("x0", 1, 0, 1), job("xx3", 1, 0, 1)], 1)] == ["xxx0"]
    cfg = SimConfig(round_s=360, extra_jobs=True, max_time_s=100_000, check=True)
    res = simulate(build_cluster(1, 1, 4), flat(4), trace, "pal", "fifo", cfg)
    ids = [j.id for j in res.jobs.jobs]
    assert len(ids) == len(set(ids)) and len(ids) > 2


@pytest.mark.parametrize(("iters", "rounds"), [(1000, 17), (2000, 34)])
def test_a_job_done_at_a_round_boundary_is_not_charged_another_round(iters, rounds):
    # Two servers of one GPU: a 2-GPU job runs at 1 / 1.7 speed, 100 / 1.7 iterations a round.
    # 2,000 iterations take exactly 34 rounds, but the float sum of 34 rounds fell short
    # (1999.9999999999995) and the job completed at 3,500 s, a round late.
    topo = build_cluster(1, 2, 1)
    cfg = SimConfig(100, penalties=1.7, check=True)
    res = simulate(topo, flat(2), [job("a", 2, 0, iters)], "pal", "fifo", cfg)
    assert res.jobs.finish[0] == rounds * 100.0
    res = simulate(
        topo, flat(2), [job("a", 2, 0, iters)], "pal", "fifo", replace(cfg, completion="exact")
    )
    assert (
        res.jobs.finish[0] == pytest.approx(rounds * 100.0) and res.jobs.finish[0] <= rounds * 100
    )


def test_summary_json_is_strict_json_when_no_job_completed(tmp_path):
    import json

    from palopt.sim.metrics import write_outputs

    cfg = SimConfig(round_s=100, max_time_s=100, check=True)
    res = simulate(build_cluster(1, 1, 1), flat(1), [job("a", 1, 0, 1000)], "pal", "fifo", cfg)
    write_outputs(res, tmp_path, plots=False)

    def refuse(name):
        raise ValueError(name)

    s = json.loads((tmp_path / "summary.json").read_text(), parse_constant=refuse)
    assert s["avg_jct_h"] is None and s["unfinished"] == 1


def test_no_round_is_recorded_before_the_first_arrival():
    # Round 0 had nothing to run when the first job arrives later, yet it was recorded (and
    # counted in the summary's rounds), where every later empty stretch is skipped.
    cfg = SimConfig(360, check=True)
    res = simulate(build_cluster(1, 1, 4), flat(4), [job("a", 1, 1000, 10)], "pal", "fifo", cfg)
    first = res.rounds[0]  # the next (round 4) records the job's completion
    assert (first.round, first.time, first.arrived, first.started) == (3, 1080, 1, 1)


def test_a_migrated_job_is_counted_and_pays_the_restart_cost():
    # Catches a migration not counted, or not charged the restart cost. 2 servers x 2 GPUs,
    # packed-nonsticky, LAS, exact completion. a (1 GPU, 500 it) starts on g0 (tightest server:
    # s0, the first). At 100 b (2 GPUs, no service yet) ranks first and takes s0, so a moves
    # to g2; at 200 b is done and a moves back to g0. Two migrations of 20 s each: a has 460
    # iterations at 500 and ends at 540.
    topo = build_cluster(1, 2, 2)
    trace = [job("a", 1, 0, 500), job("b", 2, 50, 100)]
    cfg = SimConfig(round_s=100, restart_cost_s=20, completion="exact", check=True)
    res = simulate(topo, flat(4), trace, "packed-nonsticky", "las", cfg)
    assert (finish(res, "a"), finish(res, "b")) == (pytest.approx(540.0), 200.0)
    assert res.jobs.migrations.tolist() == [2, 0] and res.jobs.preemptions.tolist() == [0, 0]
    assert [r.migrated for r in res.rounds][:4] == [0, 1, 1, 0]
    assert summary(res)["migrations"] == 2
    assert job_table(res)["migrations"].tolist() == [2, 0]


def test_summary_counts_preemptions_and_migrations_of_tracked_jobs_only():
    # Catches the summary counting the untracked jobs' preemptions or migrations. As in the
    # two tests above, with a untracked: a is migrated twice (packed-nonsticky) or preempted
    # once (packed-sticky); the summary counts neither.
    topo = build_cluster(1, 2, 2)
    trace = [replace(job("a", 1, 0, 500), tracked=False), job("b", 2, 50, 100)]
    res = simulate(topo, flat(4), trace, "packed-nonsticky", "las", SimConfig(100, check=True))
    assert res.jobs.migrations.tolist() == [2, 0] and summary(res)["migrations"] == 0
    topo = build_cluster(1, 1, 2)
    trace = [replace(job("a", 2, 0, 300), tracked=False), job("b", 2, 50, 100)]
    res = simulate(topo, flat(2), trace, "packed-sticky", "las", SimConfig(100, check=True))
    assert res.jobs.preemptions.tolist() == [1, 0] and summary(res)["preemptions"] == 0


def test_job_table_iterations_done_stop_at_the_job_size():
    # Catches the job table showing the iterations of the whole last round: a job of 28
    # iterations of 1 s in rounds of 100 s is charged 100 s but did 28 iterations.
    cfg = SimConfig(100, check=True)
    res = simulate(build_cluster(1, 1, 1), flat(1), [job("a", 1, 0, 28)], "pal", "fifo", cfg)
    assert res.jobs.iters_done.tolist() == [100.0]  # a whole round's worth, inside
    table = job_table(res)
    assert table["iterations_done"].tolist() == [28.0] and table["attained_s"].tolist() == [100.0]


def test_skipped_rounds_count_as_waiting():
    # Catches fast-forwarding that does not add the skipped rounds to the waiting jobs'
    # waiting time. One GPU; a runs 0-1000 while b waits, then b runs 1000-1100.
    trace = [job("a", 1, 0, 1000), job("b", 1, 0, 100)]
    runs = [
        simulate(
            build_cluster(1, 1, 1),
            flat(1),
            trace,
            "packed-sticky",
            "fifo",
            SimConfig(100, shortcuts=on, check=True),
        )
        for on in (True, False)
    ]
    assert sum(r.solved for r in runs[0].rounds) < sum(r.solved for r in runs[1].rounds)
    for res in runs:
        assert res.jobs.waited_s.tolist() == [0.0, 1000.0]
        assert res.jobs.finish.tolist() == [1000.0, 1100.0]


def test_random_nonsticky_redraws_every_round_with_shortcuts():
    # Catches the simulator reusing a random non-sticky decision once a redraw happened to
    # keep every job on its GPUs: with shortcuts (the default) the run must equal the one that
    # solves every round. One 1-GPU job on 4 GPUs for 30 rounds.
    trace = [job("a", 1, 0, 3000)]
    runs = [
        simulate(
            build_cluster(1, 1, 4),
            flat(4),
            trace,
            "random-nonsticky",
            "fifo",
            SimConfig(100, seed=3, shortcuts=on, check=True),
        )
        for on in (True, False)
    ]
    assert all(r.solved for res in runs for r in res.rounds[:-1])
    assert 0 < runs[0].jobs.migrations[0] == runs[1].jobs.migrations[0] < 29


def test_fast_forward_stops_before_a_completion_within_the_rounding_tolerance():
    # Catches fast-forwarding one round too far: a job of 1000 iterations plus less than the
    # completion tolerance is done after 10 rounds of 100 (as a full run finds), though
    # ceil(remaining / per round) says 11; skipping up to that left the job one round late.
    trace = [job("a", 1, 0, 1000 * (1 + 4e-13))]
    for on in (True, False):
        cfg = SimConfig(100, shortcuts=on, check=True)
        res = simulate(build_cluster(1, 1, 1), flat(1), trace, "pal", "fifo", cfg)
        assert res.jobs.finish.tolist() == [1000.0] and len(res.rounds) == 11


def test_a_trace_out_of_submit_order_admits_each_job_at_its_submit_time():
    """A trace given out of submit order still admits every job at its own submit time (an
    early job listed after a late one does not wait for it)."""
    trace = [job("late", 1, 500, 100), job("early", 1, 0, 100)]
    res = simulate(
        build_cluster(1, 1, 1), flat(1), trace, "pal", "fifo", SimConfig(100, check=True)
    )
    assert (finish(res, "early"), finish(res, "late")) == (100.0, 600.0)
    assert [j.id for j in res.jobs.jobs] == ["early", "late"]


def test_a_policy_without_static_is_asked_for_its_order_every_round():
    """A policy object that does not say it is static is taken as dynamic: with shortcuts, a
    LAS-like object without ``static`` gives the run "las" gives (b, arriving at 250, and a
    alternate once their service is equal; fast-forwarding would have let b run to its end)."""

    class NoStatic:
        name = "las-like"

        def order(self, queue, state):
            return get_policy("las").order(queue, state)

    trace = [job("a", 1, 0, 1000), job("b", 1, 250, 1000)]
    cfg = SimConfig(100, check=True)
    runs = [
        simulate(build_cluster(1, 1, 1), flat(1), trace, "pal", policy, cfg)
        for policy in ("las", NoStatic())
    ]
    assert runs[0].jobs.preemptions.sum() > 1
    assert runs[1].jobs.finish.tolist() == runs[0].jobs.finish.tolist()
    assert runs[1].jobs.preemptions.tolist() == runs[0].jobs.preemptions.tolist()


class _Route:
    """A solver that puts the queue's first job on ``route(current GPUs)``, listed as given."""

    name = "route"

    def __init__(self, route):
        self.route = route

    def solve(self, instance, *, time_limit=None, seed=None):
        gpus = self.route(instance.queue[0].current_gpus)
        result = build_result(instance, self.name, {0: np.array(sorted(gpus))}, {}, 0.0)
        first = replace(result.placements[0], gpus=tuple(gpus))
        return replace(result, placements=(first, *result.placements[1:]))


def test_the_same_gpus_listed_in_another_order_are_no_migration():
    """A solver that lists a job's GPUs in another order each round keeps the job where it
    is: no migration and no restart cost."""
    cfg = SimConfig(100, restart_cost_s=50, check=True)
    swap = _Route(lambda c: c[::-1] if c else (0, 1))
    res = simulate(build_cluster(1, 1, 2), flat(2), [job("a", 2, 0, 500)], swap, "fifo", cfg)
    assert res.jobs.migrations.tolist() == [0] and finish(res, "a") == 500.0


@pytest.mark.parametrize(
    ("route", "restart", "migrations", "end", "at_700"),
    [
        # moved every round: the rounds after a move are solved, not reused
        (lambda c: ((c[0] + 1) % 4,) if c else (0,), 0, 9, 1000.0, 600.0),
        # moved once, at 100, paying 250 s: no round is skipped while the restart is paid, so
        # the iterations done by a horizon are those the rounds made
        (lambda c: (1,) if c else (0,), 250, 1, 1300.0, 350.0),
    ],
)
def test_shortcuts_change_nothing_after_a_migration(route, restart, migrations, end, at_700):
    """Shortcuts leave the run of a solver that migrates a job as it is: a round after a
    migration is solved again, and no round is skipped while a restart cost is being paid."""
    trace = [job("a", 1, 0, 1000)]
    for on in (True, False):
        cfg = SimConfig(100, restart_cost_s=restart, shortcuts=on, check=True)
        res = simulate(build_cluster(1, 1, 4), flat(4), trace, _Route(route), "fifo", cfg)
        assert res.jobs.migrations.tolist() == [migrations], on
        assert finish(res, "a") == end, on
        cut = simulate(
            build_cluster(1, 1, 4),
            flat(4),
            trace,
            _Route(route),
            "fifo",
            replace(cfg, max_time_s=700),
        )
        assert cut.jobs.iters_done.tolist() == [at_700], on


def test_a_solver_answer_out_of_queue_order_is_refused():
    """A solver whose placements do not follow the queue's order is refused, naming it."""

    class Reversed:
        name = "reversed"

        def solve(self, instance, *, time_limit=None, seed=None):
            result = build_result(instance, self.name, {0: np.array([0])}, {}, 0.0)
            return replace(result, placements=result.placements[::-1])

    trace = [job("a", 1, 0, 100), job("b", 1, 0, 100)]
    with pytest.raises(PaloptError, match="solver reversed returned placements out of order"):
        simulate(build_cluster(1, 1, 2), flat(2), trace, Reversed(), "fifo", SimConfig(100))


def test_a_solver_that_does_not_say_it_is_sticky_sees_the_whole_queue():
    """Only the heuristics that say ``sticky = False`` are passed the queue up to their window:
    a solver without the attribute may place jobs past it (here a 1-GPU job behind two jobs
    that each take the whole cluster), so it is passed every waiting job."""
    seen: list[int] = []

    class Plain:
        name = "plain"

        def solve(self, instance, *, time_limit=None, seed=None):
            seen.append(len(instance.queue))
            return palopt.solve(instance, "pal")

    trace = [job("a", 2, 0, 100), job("b", 2, 0, 100), job("c", 1, 0, 100)]
    res = simulate(
        build_cluster(1, 1, 2), flat(2), trace, Plain(), "fifo", SimConfig(100, check=True)
    )
    assert seen[0] == 3 and finish(res, "c") == 300.0


# --- the round loop's bookkeeping, by hand ---------------------------------------------------


def test_round_records_count_gpus_running_and_waiting_jobs_and_free_finished_jobs():
    """Each round's record counts the GPUs held (not the jobs), the running and the waiting
    jobs; a completed job holds no GPUs. One server of 3 GPUs, FIFO, 100 s rounds: a (2 GPUs,
    2 rounds) and b (1 GPU, 1 round) run while c (2 GPUs) waits until a is done."""
    trace = [job("a", 2, 0, 200), job("b", 1, 0, 100), job("c", 2, 0, 100)]
    res = simulate(
        build_cluster(1, 1, 3), flat(3), trace, "pal", "fifo", SimConfig(100, check=True)
    )
    got = [(r.round, r.busy_gpus, r.running, r.waiting) for r in res.rounds]
    assert got == [(0, 3, 2, 1), (1, 2, 1, 1), (2, 2, 1, 0), (3, 0, 0, 0)]
    assert res.jobs.finish.tolist() == [200.0, 100.0, 300.0]
    assert res.jobs.gpus == [(), (), ()]


def test_empty_stretches_between_arrivals_are_skipped_not_recorded():
    """Rounds with nothing running or waiting are not simulated: the run jumps to the next
    arrival's round (a done at 100 s, b submitted at 1,000 s runs in round 10)."""
    trace = [job("a", 1, 0, 100), job("b", 1, 1000, 100)]
    res = simulate(
        build_cluster(1, 1, 1), flat(1), trace, "pal", "fifo", SimConfig(100, check=True)
    )
    assert [r.round for r in res.rounds] == [0, 1, 10, 11]
    assert res.jobs.finish.tolist() == [100.0, 1100.0]


class _WaitsForB:
    """Places nothing until job ``b`` is queued (a solver that batches), then as PAL does."""

    name = "waits-for-b"

    def solve(self, instance, *, time_limit=None, seed=None):
        if all(j.id != "b" for j in instance.queue):
            return build_result(instance, self.name, {}, {}, 0.0)
        return palopt.solve(instance, "pal")


def test_a_job_held_back_until_a_later_arrival_is_no_stall():
    """Rounds in which a job waits on an idle cluster while jobs of the trace are still to come
    do not count towards the stall guard: a waits 20 rounds for b, then both run."""
    trace = [job("a", 1, 0, 100), job("b", 1, 2000, 100)]
    cfg = SimConfig(100, max_idle_rounds=3, check=True)
    res = simulate(build_cluster(1, 1, 2), flat(2), trace, _WaitsForB(), "fifo", cfg)
    assert res.jobs.finish.tolist() == [2100.0, 2100.0]


def test_progress_reports_tracked_jobs_completed():
    """``run(progress=...)`` is told the number of tracked jobs completed, not of all jobs: an
    untracked job done in round 1 is not counted."""
    trace = [replace(job("x", 1, 0, 100), tracked=False), job("a", 1, 0, 200)]
    cfg = SimConfig(100, check=True)
    sim = Simulator(build_cluster(1, 1, 2), flat(2), trace, "pal", "fifo", cfg)
    seen: list[int] = []
    sim.run(progress=seen.append)
    assert seen[0] == 0 and seen[-1] == 1 and max(seen) == 1


def test_a_resumed_job_keeps_its_first_start_time():
    """A job preempted and resumed keeps its first start: its queueing delay is the wait
    before it first ran (LAS: a runs from 0, is preempted by b at 100 s, resumes at 200 s)."""
    trace = [job("a", 2, 0, 300), job("b", 2, 50, 100)]
    cfg = SimConfig(100, check=True)
    res = simulate(build_cluster(1, 1, 2), flat(2), trace, "packed-sticky", "las", cfg)
    assert res.jobs.preemptions.tolist() == [1, 0]
    assert res.jobs.first_start.tolist() == [0.0, 100.0]
    assert job_table(res)["queueing_delay_s"].tolist() == [0.0, 50.0]


class _WrongObjective:
    """PAL's placements with an objective off by one (on sub-instances only, if ``sub``)."""

    name = "wrong-objective"

    def __init__(self, sub: bool) -> None:
        self.sub = sub

    def solve(self, instance, *, time_limit=None, seed=None):
        result = palopt.solve(instance, "pal")
        if self.sub and not instance.busy.any():
            return result
        return replace(result, objective=result.objective + 1.0)


@pytest.mark.parametrize("sub", [False, True])
def test_the_check_option_refuses_a_result_that_breaks_the_rules(sub):
    """With ``check`` every placement (backfill's too) goes through the feasibility checker,
    which refuses a wrong objective that the simulator's own GPU checks let through."""
    from palopt.errors import InfeasiblePlacementError

    topo = build_cluster(1, 1, 4)
    trace = [job("a", 3, 0, 300), job("b", 2, 0, 100), job("c", 1, 0, 100)]
    cfg = SimConfig(100, backfill=sub)  # backfill solves sub-instances
    res = simulate(topo, flat(4), trace, _WrongObjective(sub), "fifo", cfg)
    assert res.jobs.status.tolist() == [DONE] * 3  # unchecked, the run goes on
    with pytest.raises(InfeasiblePlacementError, match="objective"):
        simulate(topo, flat(4), trace, _WrongObjective(sub), "fifo", replace(cfg, check=True))


def test_a_job_of_exactly_the_rounds_simulated_is_accepted():
    """The round cap is inclusive: a job needing MAX_ROUNDS - 1 rounds (its completion is
    recorded in the next, the MAX_ROUNDS-th) is accepted, one a round longer is refused unless a
    horizon of at most MAX_ROUNDS rounds cuts the run."""
    from palopt.sim.engine import MAX_ROUNDS

    topo, cfg = build_cluster(1, 1, 1), SimConfig(100)
    Simulator(topo, flat(1), [job("a", 1, 0, (MAX_ROUNDS - 1) * 100)], config=cfg)
    longer = [job("a", 1, 0, MAX_ROUNDS * 100)]
    with pytest.raises(InputError, match="alone needs"):
        Simulator(topo, flat(1), longer, config=cfg)
    Simulator(topo, flat(1), longer, config=replace(cfg, max_time_s=MAX_ROUNDS * 100))


def test_a_job_the_check_accepts_finishes_within_the_round_cap(monkeypatch):
    """At a cap of 100 rounds: a job of 99 rounds runs to its end (its completion recorded in
    the 100th); one of 99.5 or 100, accepted before and then stopped by the cap, is refused."""
    import palopt.sim.engine as engine

    monkeypatch.setattr(engine, "MAX_ROUNDS", 100)
    topo, cfg = build_cluster(1, 1, 1), SimConfig(1, check=True)
    sim = Simulator(topo, flat(1), [job("a", 1, 0, 99)], config=cfg)
    assert sim.run().jobs.finish[0] == pytest.approx(99.0)
    for iters in (99.5, 100):
        with pytest.raises(InputError, match="and one more that records its completion"):
            Simulator(topo, flat(1), [job("a", 1, 0, iters)], config=cfg)


def test_the_round_cap_counts_the_charged_slowdown_not_the_ranked_one():
    """The up-front round check uses the slowdown the job is charged: placement ranks these
    GPUs at 1.0 but charges 2.0, so a job of 0.6 x MAX_ROUNDS rounds at 1.0 needs too many."""
    from palopt.sim.engine import MAX_ROUNDS

    prof = ClusterProfile(("A",), np.ones((1, 1)), np.full((1, 1), 2.0))
    trace = [job("a", 1, 0, 0.6 * MAX_ROUNDS * 100)]
    with pytest.raises(InputError, match="alone needs 1.2e\\+06 rounds"):
        Simulator(build_cluster(1, 1, 1), prof, trace, config=SimConfig(100))
