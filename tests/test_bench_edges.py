"""The benchmark's edges: family parameters, the reference a gap is taken against, the progress
line, and the summary's statistics on small hand-made rows."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from helpers import drop_last_placed_job

import palopt.bench.runner as runner
from palopt import InputError
from palopt.bench.families import Family, check_load, make_instance
from palopt.bench.report import plot_gaps, summarise
from palopt.bench.runner import Row, SolverSpec, run_bench, run_instance
from palopt.errors import InfeasiblePlacementError
from palopt.result import Status
from palopt.solvers.bounds import lower_bound
from palopt.solvers.round import admitted_prefix, make_round

SMALL = Family(16, 4, 1.0, "longhorn")


def _edit_results(monkeypatch: pytest.MonkeyPatch, edit) -> list[tuple[str, dict]]:
    """Route every solver the runner builds through ``edit(name, result)``; returns the
    (name, solve keyword arguments) of each solve."""
    real = runner.get_solver
    calls: list[tuple[str, dict]] = []

    class Edited:
        def __init__(self, name: str, solver) -> None:
            self.name, self.solver = name, solver

        def solve(self, inst, **kwargs):
            calls.append((self.name, kwargs))
            return edit(self.name, self.solver.solve(inst, **kwargs))

    monkeypatch.setattr(runner, "get_solver", lambda name, **kw: Edited(name, real(name, **kw)))
    return calls


def _specs(*names: str) -> list[SolverSpec]:
    return [SolverSpec.parse(n) for n in names]


@pytest.mark.parametrize("load, name", [(0.29, "29%"), (0.07, "7%"), (0.58, "58%")])
def test_a_whole_percent_load_names_its_family_by_that_percent(load: float, name: str) -> None:
    """Loads such as 0.29 (28.999... percent in floating point) are whole percents: accepted,
    and the family is named by the percent the user gave."""
    check_load(load)
    assert Family(16, 4, load, "synthetic").name == f"16g-4ps-{name}-synthetic"


@pytest.mark.parametrize("load", [0.50001, 0.5001, 0.999])
def test_a_load_between_two_percents_is_refused(load: float) -> None:
    """A load close to but not at a whole percent would share a name and seed with it."""
    with pytest.raises(InputError, match="must be a whole percent"):
        Family(16, 4, load, "synthetic")


@pytest.mark.parametrize("seed", range(4))
def test_a_full_load_queue_goes_three_jobs_past_the_cluster(seed: int) -> None:
    """At 100% load the queue keeps the job that does not fit and two more after it, so the
    admitted prefix is a real cut; at 50% it stops before the cut and is admitted whole."""
    inst = make_instance(SMALL, seed)
    sizes = np.cumsum([j.num_gpus for j in inst.queue])
    first_over = int(np.argmax(sizes > 16))
    assert sizes[-1] > 16 and first_over == len(inst.queue) - 3
    assert admitted_prefix(inst) == first_over
    half = make_instance(Family(16, 4, 0.5, "longhorn"), seed)
    assert sum(j.num_gpus for j in half.queue) <= 8
    assert admitted_prefix(half) == len(half.queue)


def test_a_queue_fills_a_whole_percent_load_exactly() -> None:
    # 0.29 * 800 is 231.99999999999997 in floating point: a job bringing the queue to exactly
    # 232 GPUs was refused (seed 21: 231 GPUs, then a 1-GPU job).
    from palopt.bench.families import sample_jobs

    fam = Family(800, 4, 0.29, "synthetic")
    assert sum(j.num_gpus for j in make_instance(fam, 21).queue) == 232
    for seed in range(10):
        jobs = sample_jobs(800, 0.29, np.random.default_rng(seed))
        assert sum(j.num_gpus for j in jobs) <= 232


def test_a_cluster_smaller_than_four_gpus_gets_one_gpu_jobs() -> None:
    """A 2-GPU family (a quarter of it is under one GPU) still builds a queue of 1-GPU jobs."""
    inst = make_instance(Family(2, 2, 1.0, "synthetic"), 0)
    assert inst.queue and {j.num_gpus for j in inst.queue} == {1}


def test_an_instance_needs_a_non_negative_whole_seed() -> None:
    """A negative seed is an input error naming the seed, not numpy's ValueError."""
    with pytest.raises(InputError, match="seed"):
        make_instance(SMALL, -1)


def test_an_empty_round_has_a_zero_gap() -> None:
    """A 1% load on 16 GPUs admits no job: the reference is 0 and the gap 0, not a division by
    zero."""
    rows = run_instance(Family(16, 4, 0.01, "longhorn"), 0, _specs("greedy"), 1.0, 256, 0.0)
    assert [(r.n_jobs, r.reference, r.gap) for r in rows] == [(0, 0.0, 0.0)]


def test_the_least_proven_optimum_is_the_reference(monkeypatch) -> None:
    """Two solvers that both claim optimality with different costs: the cheaper is the
    reference, so no gap is negative."""

    def optimal(name, result):
        return replace(result, status=Status.OPTIMAL, bound=result.objective)

    _edit_results(monkeypatch, optimal)
    rows = run_instance(SMALL, 0, _specs("random-nonsticky", "pmfirst"), 1.0, 256, 0.0)
    objectives = sorted(r.objective for r in rows)
    assert objectives[0] < objectives[1]
    assert {(r.reference, r.reference_kind) for r in rows} == {(objectives[0], "optimum")}
    assert sorted(r.gap for r in rows) == [0.0, (objectives[1] - objectives[0]) / objectives[0]]


def test_without_an_optimum_the_highest_bound_is_the_reference(monkeypatch) -> None:
    """An exact solver that stops unproven keeps its bound: the reference is that bound (above
    the cheap bound), never a heuristic's cost, and gap = (objective - bound) / bound."""

    def unproven(name, result):
        return replace(result, status=Status.FEASIBLE) if name == "cpsat" else result

    _edit_results(monkeypatch, unproven)
    rows = run_instance(SMALL, 0, _specs("greedy", "pmfirst", "cpsat"), 5.0, 256, 0.0)
    cpsat = next(r for r in rows if r.solver == "cpsat")
    cheap = lower_bound(make_round(make_instance(SMALL, 0)))
    assert cpsat.bound is not None and cheap < cpsat.bound
    for r in rows:
        assert (r.reference, r.reference_kind) == (cpsat.bound, "bound")
        assert r.gap == pytest.approx((r.objective - cpsat.bound) / cpsat.bound, rel=1e-12)
        assert r.gap >= 0


def test_the_lagrangian_bound_runs_only_where_exact_solvers_do_not(monkeypatch) -> None:
    """On a round no exact solver runs on (above --exact-max-gpus, or none named) the Lagrangian
    bound gets --bound-time and is the reference when highest; where one runs no time goes to
    it; a round of 1-GPU jobs needs none."""
    calls = []
    real = runner.lagrangian_bound

    def recorded(rnd, upper, time_limit):
        calls.append(time_limit)
        return real(rnd, upper, time_limit=time_limit)

    monkeypatch.setattr(runner, "lagrangian_bound", recorded)
    specs = _specs("greedy")
    inst = make_instance(SMALL, 0)
    assert make_round(inst).multi  # a 4-GPU job
    with_exact = run_instance(SMALL, 0, _specs("greedy", "cpsat"), 1.0, 16, 0.25)
    assert calls == []
    assert with_exact[1].status == "optimal"
    assert with_exact[0].reference == with_exact[1].objective
    for exact_max_gpus in (16, 0):  # greedy alone: the bound whatever the size
        row = run_instance(SMALL, 0, specs, 1.0, exact_max_gpus, 0.25)[0]
        assert calls[-1] == 0.25
        assert lower_bound(make_round(inst)) <= row.reference <= row.objective
    row = run_instance(SMALL, 0, _specs("greedy", "cpsat"), 1.0, 0, 0.25)[0]
    assert calls == [0.25] * 3  # cpsat skipped above 0 GPUs
    ones = Family(16, 4, 1.0, "synthetic")
    seed = next(s for s in range(20) if not make_round(make_instance(ones, s)).multi)
    run_instance(ones, seed, specs, 1.0, 0, 0.25)
    assert calls == [0.25] * 3


def test_solvers_get_the_round_seed_and_only_exact_ones_a_limit(monkeypatch) -> None:
    """Every solver is given the instance's seed; heuristics run without a time limit."""
    calls = _edit_results(monkeypatch, lambda name, result: result)
    run_instance(SMALL, 3, _specs("greedy", "cpsat"), 2.0, 256, 0.0)
    assert calls == [
        ("greedy", {"time_limit": None, "seed": 3}),
        ("cpsat", {"time_limit": 2.0, "seed": 3}),
    ]


def test_an_infeasible_placement_stops_the_run(monkeypatch) -> None:
    """A solver whose placement breaks a rule is an error, not a row with a cost."""

    def broken(name, result):
        placements = list(result.placements)
        first = next(k for k, p in enumerate(placements) if p.gpus)
        placements[first] = replace(placements[first], gpus=placements[first].gpus[:0] + (99,))
        return replace(result, placements=tuple(placements))

    _edit_results(monkeypatch, broken)
    with pytest.raises(InfeasiblePlacementError):
        run_instance(SMALL, 0, _specs("greedy"), 1.0, 256, 0.0)


def test_the_progress_line_names_the_solver_with_the_least_comparable_gap(monkeypatch) -> None:
    """The progress line's "best" is the lowest gap among solvers that placed the admitted
    jobs; one that dropped a job (cheaper, no gap) is not it."""

    _edit_results(monkeypatch, lambda name, r: drop_last_placed_job(r) if name == "pmfirst" else r)
    lines: list[str] = []
    rows = run_bench(
        [SMALL], 1, _specs("pmfirst", "random-nonsticky", "greedy"), 1, 256, 0, lines.append
    )
    for r in rows:
        if r.solver == "pmfirst":
            assert r.n_placed < r.n_jobs and math.isnan(r.gap)
    best = min((r for r in rows if r.solver != "pmfirst"), key=lambda r: r.gap)
    assert best.solver == "greedy"
    assert lines[0].endswith(f"best greedy gap {100 * best.gap:.2f}%")


def _row(
    solver: str,
    seed: int,
    gap: float,
    wall_time: float,
    status: str = "heuristic",
    kind: str = "bound",
    family: tuple = ("16g-4ps-100%-longhorn", 16, 4, 1.0, "longhorn"),
) -> Row:
    return Row(*family, seed, 4, 4, solver, status, 1.0 + gap, None, wall_time, 1.0, kind, gap)


def test_summary_statistics_of_hand_made_rows() -> None:
    """Median, p95 (linear interpolation) and max of the gaps; median and p95 of the times; the
    share proven optimal; a row without a gap counts in the times and shares only."""
    gaps = [0.0, 0.01, 0.02, 0.1, math.nan]
    times = [1.0, 2.0, 3.0, 4.0, 100.0]
    status = ["optimal", "optimal", "feasible", "feasible", "feasible"]
    rows = [
        _row("cpsat", s, g, t, st, "optimum" if st == "optimal" else "bound")
        for s, (g, t, st) in enumerate(zip(gaps, times, status, strict=True))
    ]
    (d,) = summarise(rows)
    assert d["instances"] == 5
    assert d["gap_median"] == pytest.approx(0.015)
    assert d["gap_p95"] == pytest.approx(0.02 + 0.85 * 0.08)  # numpy's linear rule
    assert d["gap_max"] == pytest.approx(0.1)
    assert d["time_median"] == pytest.approx(3.0)
    assert d["time_p95"] == pytest.approx(4.0 + 0.8 * 96.0)
    assert d["share_optimal"] == pytest.approx(0.4)
    assert d["reference"] == "bound/optimum"


def test_summary_is_sorted_by_size_server_load_profile_and_solver() -> None:
    """Records come smallest cluster first, then server size, load, profile, solver, whatever
    the rows' order."""
    fams = [
        ("64g-4ps-50%-longhorn", 64, 4, 0.5, "longhorn"),
        ("32g-8ps-50%-longhorn", 32, 8, 0.5, "longhorn"),
        ("32g-4ps-100%-longhorn", 32, 4, 1.0, "longhorn"),
        ("32g-4ps-50%-synthetic", 32, 4, 0.5, "synthetic"),
        ("32g-4ps-50%-longhorn", 32, 4, 0.5, "longhorn"),
    ]
    rows = [_row(s, 0, 0.0, 0.1, family=f) for f in fams for s in ("pal", "greedy")]
    got = [(d["family"], d["solver"]) for d in summarise(rows)]
    expected = [
        "32g-4ps-50%-longhorn",
        "32g-4ps-50%-synthetic",
        "32g-4ps-100%-longhorn",
        "32g-8ps-50%-longhorn",
        "64g-4ps-50%-longhorn",
    ]
    assert got == [(f, s) for f in expected for s in ("greedy", "pal")]


@pytest.fixture
def drawn(monkeypatch) -> list[tuple[str, list, list]]:
    """The lines the benchmark's plot draws: (label, x, y) per ``Axes.plot`` call."""
    from matplotlib.axes import Axes

    lines: list[tuple[str, list, list]] = []
    real = Axes.plot

    def record(self, x, y, *args, **kwargs):
        lines.append((kwargs.get("label"), list(x), [float(v) for v in y]))
        return real(self, x, y, *args, **kwargs)

    monkeypatch.setattr(Axes, "plot", record)
    return lines


def test_the_plot_draws_each_loads_median_gaps_in_its_own_panel(tmp_path, drawn) -> None:
    """Each panel holds the solvers' median gaps (in %) of its load only, one point per size."""
    half = ("16g-4ps-50%-longhorn", 16, 4, 0.5, "longhorn")
    full = ("16g-4ps-100%-longhorn", 16, 4, 1.0, "longhorn")
    rows = [
        _row("greedy", s, g, 0.1, family=f)
        for f, gs in ((half, (0.01, 0.02, 0.09)), (full, (0.03, 0.05, 0.5)))
        for s, g in enumerate(gs)
    ]
    plot_gaps(tmp_path / "gaps.png", summarise(rows))
    assert drawn == [("greedy", [16], [pytest.approx(2.0)]), ("greedy", [16], [pytest.approx(5.0)])]


def test_a_solver_that_placed_other_jobs_gives_no_reference(monkeypatch) -> None:
    """A result of fewer jobs than the admitted prefix (cheaper, as it places less) claiming
    optimality is neither the optimum nor a bound of the round: the reference stays the
    optimum of the solver that placed the prefix, and only the short result's gap is NaN."""

    def short(name, result):
        if name != "pmfirst":
            return result
        result = drop_last_placed_job(result)
        return replace(result, bound=result.objective, status=Status.OPTIMAL)

    _edit_results(monkeypatch, short)
    rows = run_instance(SMALL, 0, _specs("cpsat", "pmfirst"), 5.0, 256, 0.0)
    cpsat, pmfirst = rows
    assert cpsat.status == Status.OPTIMAL and pmfirst.n_placed == pmfirst.n_jobs - 1
    assert pmfirst.objective < cpsat.objective
    assert {(r.reference, r.reference_kind) for r in rows} == {(cpsat.objective, "optimum")}
    assert cpsat.gap == 0.0 and math.isnan(pmfirst.gap)


def test_summary_max_gap_is_the_largest_whatever_the_rows_order() -> None:
    """The max gap is the largest of the family's gaps, not the last row's."""
    rows = [_row("greedy", s, g, 0.1) for s, g in enumerate([0.3, 0.1, 0.2])]
    (d,) = summarise(rows)
    assert (d["gap_median"], d["gap_max"]) == (pytest.approx(0.2), pytest.approx(0.3))


def test_the_plot_draws_the_median_of_several_families_at_one_size(tmp_path, drawn) -> None:
    """Several families at one cluster size and load (other profiles or server sizes) are one
    point: the median of their median gaps."""
    fams = [
        ("16g-4ps-50%-longhorn", 16, 4, 0.5, "longhorn"),
        ("16g-4ps-50%-synthetic", 16, 4, 0.5, "synthetic"),
        ("16g-2ps-50%-longhorn", 16, 2, 0.5, "longhorn"),
    ]
    rows = [
        _row("greedy", 0, g, 0.1, family=f) for f, g in zip(fams, (0.01, 0.06, 0.02), strict=True)
    ]
    plot_gaps(tmp_path / "gaps.png", summarise(rows))
    assert drawn == [("greedy", [16], [pytest.approx(2.0)])]


def test_the_lagrangian_bound_starts_from_the_best_comparable_cost(monkeypatch) -> None:
    """The Lagrangian bound is given the least cost of a solver that placed the admitted jobs,
    not the lower cost of one that left a job out; with no such solver it does not run."""
    uppers: list[float] = []
    real = runner.lagrangian_bound

    def recorded(rnd, upper, time_limit):
        uppers.append(upper)
        return real(rnd, upper, time_limit=time_limit)

    monkeypatch.setattr(runner, "lagrangian_bound", recorded)
    _edit_results(monkeypatch, lambda name, r: drop_last_placed_job(r) if name == "pmfirst" else r)
    rows = run_instance(SMALL, 0, _specs("pmfirst", "greedy"), 1.0, 0, 0.25)
    short, greedy = rows
    assert short.n_placed < short.n_jobs and short.objective < greedy.objective
    assert uppers == [greedy.objective]
    assert greedy.reference <= greedy.objective
    (alone,) = run_instance(SMALL, 0, _specs("pmfirst"), 1.0, 0, 0.25)
    assert uppers == [greedy.objective]
    assert math.isnan(alone.gap) and alone.reference == lower_bound(
        make_round(make_instance(SMALL, 0))
    )
