"""The correctness-critical core against the faults it must catch: the checker, the cheap and
transportation bounds, the round selection and the exact runner's status logic (each test here
fails on a fault a manual mutation run found no other test to notice)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import transport_by_enumeration
from test_exact import _three_pairs_two_racks

from palopt import Instance, Job, build_cluster, solve
from palopt.cost import check_feasible
from palopt.result import Status


def _two_job_instance() -> Instance:
    return Instance(
        build_cluster(1, 2, 2),
        ("A",),
        np.array([[1.0, 1.2, 0.9, 1.0]]),
        np.array([[1.0, 1.5, 1.5]]),
        (Job("a", 2, "A"), Job("b", 1, "A")),
    )


def _with_placement(result, k, **changes):
    placements = list(result.placements)
    placements[k] = replace(placements[k], **changes)
    return replace(result, placements=tuple(placements))


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_checker_refuses_a_job_cost_off_either_way(factor: float) -> None:
    # The job's slowdown, penalty and tier are right, only its cost is not: too low must be
    # refused as surely as too high.
    inst = _two_job_instance()
    r = solve(inst, "pal")
    assert check_feasible(inst, r) == []
    bad = _with_placement(r, 0, cost=r.placements[0].cost * factor)
    assert any("cost" in p for p in check_feasible(inst, bad))


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_checker_refuses_an_objective_off_either_way(factor: float) -> None:
    # Every job's record is right; only the total is misstated.
    inst = _two_job_instance()
    r = solve(inst, "pal")
    problems = check_feasible(inst, replace(r, objective=r.objective * factor))
    assert len(problems) == 1 and problems[0].startswith("objective")


def test_checker_refuses_nan_costs_objectives_and_bounds() -> None:
    # Every comparison with NaN is false: "abs(x - y) > tol" let a NaN cost or objective pass,
    # and "bound > objective" a NaN bound with status optimal.
    inst = _two_job_instance()
    r = solve(inst, "pal")
    assert check_feasible(inst, r) == []
    nan = float("nan")
    for bad, problem in (
        (replace(r, objective=nan), "objective nan"),
        (_with_placement(r, 0, cost=nan), "job 'a': cost nan"),
        (replace(r, bound=nan, status=Status.OPTIMAL), "bound nan not at or below"),
    ):
        assert any(p.startswith(problem) for p in check_feasible(inst, bad)), problem


def test_checker_stops_at_the_rule_violations_of_a_result() -> None:
    # A result whose GPUs break the rules is reported for those (its costs cannot be recomputed
    # from a GPU outside the topology), without raising.
    inst = _two_job_instance()
    r = solve(inst, "pal")
    bad = _with_placement(r, 1, gpus=(99,))
    assert check_feasible(inst, bad) == ["job 'b' got GPU index 99, not in the topology"]


def test_transport_single_row_takes_the_cheapest_columns() -> None:
    from palopt.solvers.transport import transport

    x = transport([2], np.array([[3.0, 1.0, 2.0, 0.5]]))
    assert x.tolist() == [[False, True, False, True]]


@pytest.mark.parametrize("magnitude", [1e-9, 1e-3, 1.0, 1e3, 1e9])
def test_transport_bound_meets_the_optimum_at_any_cost_magnitude(magnitude: float) -> None:
    # Rows compete for the same cheap columns, so the rows' independent bound is well under the
    # optimum: only the LP's GPU prices, in the units of the costs, close the gap. HiGHS works
    # on costs divided by a power of two; its duals must be multiplied back.
    from palopt.solvers.transport import HAVE_HIGHS, transport, transport_bound

    if not HAVE_HIGHS:
        pytest.skip("needs highspy")
    rng = np.random.default_rng(7)
    for _ in range(20):
        base = rng.uniform(1.0, 1.7, size=(3, 5))
        base[:, :2] *= 0.6  # two cheap columns everyone wants
        cost = base * magnitude
        counts = [int(c) for c in rng.integers(1, 3, size=3)]
        while sum(counts) > 5:
            counts[int(np.argmax(counts))] -= 1
        optimum = transport_by_enumeration(counts, cost)
        bound = transport_bound(counts, cost)
        assert bound <= optimum * (1 + 1e-12)
        assert bound == pytest.approx(optimum, rel=1e-9)
        x = transport(counts, cost)
        assert x.sum(axis=1).tolist() == counts and x.sum(axis=0).max() <= 1
        assert float(cost[x].sum()) == pytest.approx(optimum, rel=1e-9)


@pytest.mark.parametrize(("name", "options"), [("greedy", {}), ("cpsat", {}), ("milp", {})])
def test_keep_running_fixes_only_the_selected_running_jobs(name: str, options: dict) -> None:
    # r runs on gpu0 but the admitted prefix ends before it (a takes every GPU): it is preempted,
    # not kept on its GPU beside a.
    inst = Instance(
        build_cluster(1, 1, 4),
        ("A",),
        np.ones((1, 4)),
        np.ones((1, 3)),
        (Job("a", 4, "A"), Job("r", 1, "A", current_gpus=(0,))),
    )
    r = solve(inst, name, keep_running=True, **options)
    assert check_feasible(inst, r) == []
    assert [p.action for p in r.placements] == ["start", "preempt"]


def test_a_back_end_answer_that_decodes_to_shared_gpus_is_ignored(monkeypatch) -> None:
    # The model's rows are the first check of a back end's answer; the placement it decodes to
    # is checked too (every job placed, no GPU shared). Here the rows "pass" and the decoded
    # placement puts every job on the two fastest GPUs: cheap, and infeasible.
    from palopt.solvers.exact.cpsat import CpSatSolver
    from palopt.solvers.exact.model import PlacementModel, SparseModel
    from palopt.solvers.exact.runner import BackendAnswer

    class _Claims(CpSatSolver):
        def run(self, sp, start, time_limit, seed):  # type: ignore[no-untyped-def]
            return BackendAnswer(Status.OPTIMAL, np.zeros(sp.n_vars), None)

    inst = _three_pairs_two_racks()
    monkeypatch.setattr(SparseModel, "satisfied", lambda self, solution: True)
    monkeypatch.setattr(
        PlacementModel,
        "decode",
        lambda self, solution: {
            p: np.arange(inst.queue[p].num_gpus, dtype=np.int64) for p in range(len(inst.queue))
        },
    )
    r = _Claims(formulation="compact").solve(inst)
    assert check_feasible(inst, r) == []
    assert r.status == Status.NO_SOLUTION and "fallback" in r.settings


def test_the_scale_that_leaves_no_room_to_bring_the_costs_to_a_half_is_refused() -> None:
    # Two jobs of weight 1/4 (cost 1/4 each, 1/2 the round): normalised must double the weights
    # once (to costs of 1/2) so that rounding to 1 / scale moves each by under 2 / scale
    # relative, and the round's scaled cost times its 2 jobs must fit 2^52 units. At scale 2^51
    # there is room for that doubling; at 2^52 there is none, and the round is refused rather
    # than solved with costs under 1/2.
    from palopt.errors import InputError

    queue = (Job("a", 1, "A", 0.25), Job("b", 1, "A", 0.25))
    inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)), queue)
    for name in ("cpsat", "milp"):
        r = solve(inst, name, scale=2.0**51)
        assert check_feasible(inst, r) == []
        assert r.settings["weight_factor"] == 2.0 and r.status == Status.OPTIMAL
        with pytest.raises(InputError, match="span too wide a range"):
            solve(inst, name, scale=2.0**52)
