"""The admitted prefix, the cost-aware greedy, the cheap bound and the benchmark command."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_feasible_positions, drop_last_placed_job
from hypothesis import given, settings
from hypothesis import strategies as st

from palopt import InputError, Instance, Job, build_cluster, solve
from palopt.bench.families import Family, make_instance, sample_slowdowns
from palopt.bench.runner import SolverSpec, run_instance
from palopt.cli import main
from palopt.cost import assert_feasible
from palopt.solvers.bounds import lower_bound
from palopt.solvers.greedy import PACKING, GreedyPlacer, greedy_assignment
from palopt.solvers.local import polish
from palopt.solvers.round import admitted_prefix, make_round, round_cost


def test_admitted_prefix_is_the_longest_fitting_prefix() -> None:
    topo = build_cluster(1, 2, 4)
    busy = np.zeros(8, dtype=bool)
    busy[:2] = True
    queue = (Job("a", 3, "A"), Job("b", 3, "A"), Job("c", 1, "A"), Job("d", 1, "A"))
    inst = Instance(topo, ("A",), np.ones((1, 8)), np.ones((1, 3)), queue, busy)
    assert admitted_prefix(inst) == 2  # 6 available: 3 + 3 fit, 3 + 3 + 1 does not
    assert make_round(inst, "choose").positions == (0, 1)


@pytest.mark.parametrize("name", ["greedy", "cpsat"])
def test_jobs_left_out_of_the_round_say_why(name: str) -> None:
    # c fits in the GPU a leaves, but prefix mode ends at b; it said "GPUs taken by earlier jobs".
    queue = (Job("a", 3, "A"), Job("b", 4, "A"), Job("c", 1, "A"))
    inst = Instance(build_cluster(1, 1, 4), ("A",), np.ones((1, 4)), np.ones((1, 3)), queue)
    for mode, reasons in [
        (
            "prefix",
            [
                "needs 4 GPUs; the jobs selected before it leave 1",
                "the admitted prefix ends at job 'b'",
            ],
        ),
        ("choose", ["needs 4 GPUs; the jobs selected before it leave 1", None]),
    ]:
        r = solve(inst, name, mode=mode)
        assert_feasible(inst, r)
        assert [p.reason for p in r.placements[1:]] == [
            None if why is None else f"not selected: {why}" for why in reasons
        ]


def test_pal_and_greedy_place_the_admitted_prefix() -> None:
    inst = make_instance(Family(64, 4, 1.0, "longhorn"), 0)
    n = admitted_prefix(inst)
    for name in ("pal", "greedy", "packed-nonsticky"):
        r = solve(inst, name)
        assert_feasible(inst, r)
        assert [p.placed for p in r.placements] == [i < n for i in range(len(inst.queue))]


def test_greedy_takes_the_cheapest_tier() -> None:
    # Server 0 has one slow GPU; a 2-GPU job is cheaper on server 1 than across servers.
    topo = build_cluster(1, 2, 2)
    inst = Instance(
        topo,
        ("A",),
        np.array([[1.0, 1.3, 1.05, 1.1]]),
        np.array([[1.0, 2.0, 2.0]]),
        (Job("j", 2, "A"),),
    )
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert r.assignment()["j"] == (2, 3)
    assert r.objective == pytest.approx(1.1)


def test_packing_keeps_whole_servers_for_later_jobs() -> None:
    # One rack of four 8-GPU servers; each server's first three GPUs are a little faster. A
    # 12-GPU job on its 12 fastest GPUs touches all four servers and leaves no whole server for
    # the 8-GPU job after it; packing takes one server and a half, and both later jobs fit.
    topo = build_cluster(1, 4, 8)
    sd = np.tile([1.0, 1.0, 1.0, 1.01, 1.01, 1.01, 1.01, 1.01], 4)[None, :]
    queue = (Job("big", 12, "A"), Job("eight", 8, "A"), Job("four", 4, "A"))
    inst = Instance(topo, ("A",), sd, np.array([[1.0, 1.7, 2.0]]), queue)
    rnd = make_round(inst)
    order = list(rnd.open_positions)
    plain = GreedyPlacer(rnd).place(order)
    packed = GreedyPlacer(rnd, packing=PACKING).place(order)
    assert_feasible_positions(inst, plain[1])
    assert_feasible_positions(inst, packed[1])
    servers = topo.groups[topo.server_tier]
    assert len(np.unique(servers[plain[1][0]])) == 4
    assert len(np.unique(servers[packed[1][0]])) == 2
    assert packed[0] < plain[0]
    assert len(np.unique(servers[packed[1][1]])) == 1  # the 8-GPU job gets a whole server
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert r.objective == pytest.approx(packed[0])


def test_greedy_keeps_the_better_of_its_two_cheapest_passes_polished() -> None:
    # Here the cheapest pass (queue order) polishes to 15.22; the next (largest first, with
    # packing) costs more before local search and less after it: 14.86.
    inst = make_instance(Family(64, 4, 1.0, "synthetic"), 0)
    rnd = make_round(inst)
    queue = list(rnd.open_positions)
    big_first = sorted(queue, key=lambda p: -inst.queue[p].num_gpus)
    passes = sorted(
        (
            GreedyPlacer(rnd).place(queue),
            GreedyPlacer(rnd, packing=PACKING).place_split(big_first),
        ),
        key=lambda p: p[0],
    )
    polished = []
    for _, chosen in passes:
        assert_feasible_positions(inst, chosen)
        out = polish(rnd, chosen)
        assert_feasible_positions(inst, out)
        polished.append(round_cost(inst, out))
    assert polished[0] > polished[1] * 1.02
    chosen = greedy_assignment(rnd)
    assert_feasible_positions(inst, chosen)
    assert round_cost(inst, chosen) == pytest.approx(polished[1])


def test_rack_sized_jobs_last_keep_racks_whole() -> None:
    # Two 32-GPU jobs (4th and 21st of 29) in a full 256-GPU round. In queue order they break
    # racks that an 8- and a 12-GPU job later need, and those end up spread over racks too;
    # placed last, the two take the GPUs the others leave scattered and every other job keeps
    # its lowest tier (37.61 against 38.98 after local search).
    inst = make_instance(Family(256, 8, 1.0, "synthetic"), 0)
    rnd = make_round(inst)
    queue = list(rnd.open_positions)
    big = [p for p in queue if inst.queue[p].num_gpus >= 32]
    assert len(big) == 2
    packer = GreedyPlacer(rnd, packing=PACKING)
    rest = [p for p in queue if p not in big]
    costs = []
    for order in (queue, rest + big):
        _, chosen = packer.place(order)
        assert_feasible_positions(inst, chosen)
        out = polish(rnd, chosen)
        assert_feasible_positions(inst, out)
        costs.append(round_cost(inst, out))
    in_order, big_last = costs
    assert big_last < in_order / 1.02
    chosen = greedy_assignment(rnd)
    assert_feasible_positions(inst, chosen)
    assert round_cost(inst, chosen) == pytest.approx(big_last)


@settings(max_examples=60, deadline=None)
@given(
    shape=st.sampled_from([(1, 4, 2), (2, 2, 4), (2, 4, 4), (3, 2, 8)]),
    seed=st.integers(0, 10**6),
    k=st.integers(1, 12),
    busy_share=st.sampled_from([0.0, 0.3, 0.6]),
)
def test_packing_stays_within_its_slack(
    shape: tuple[int, int, int], seed: int, k: int, busy_share: float
) -> None:
    topo = build_cluster(*shape)
    rng = np.random.default_rng(seed)
    n = topo.n_gpus
    sd = rng.choice([0.95, 1.0, 1.02, 1.04, 1.3], size=(2, n))
    busy = rng.random(n) < busy_share
    inst = Instance(topo, ("A", "B"), sd, np.array([[1.0, 1.7, 2.0]] * 2), (), busy)
    rnd = make_round(inst)
    free = ~busy
    if k > free.sum():
        return
    for c in (0, 1):
        cheapest, _ = GreedyPlacer(rnd).best(free, c, k)
        cost, gpus = GreedyPlacer(rnd, packing=PACKING).best(free, c, k)
        assert len(np.unique(gpus)) == k and free[gpus].all()
        tier = topo.tier_index(gpus)
        assert cost == pytest.approx(float(sd[c, gpus].max() * inst.penalty[c, tier]))
        assert cheapest <= cost <= cheapest * (1 + PACKING) + 1e-12


def test_greedy_scales_to_4096_gpus() -> None:
    inst = make_instance(Family(4096, 8, 0.5, "synthetic"), 0)
    r = solve(inst, "greedy")
    assert_feasible(inst, r)
    assert r.wall_time < 5.0  # about 0.3 s measured; generous for a shared CI machine
    bound = lower_bound(make_round(inst))
    assert bound <= r.objective


@pytest.mark.parametrize("magnitude", [1e-9, 1e-300, 1e300])
def test_greedy_does_not_depend_on_the_weights_scale(magnitude: float) -> None:
    # Local search and the 1-GPU transportation problem had absolute tolerances: with weights of
    # 1e-9 the greedy gave placements 0.2-0.3% dearer on full-load rounds.
    inst = make_instance(Family(256, 8, 1.0, "synthetic"), 0)
    queue = tuple(replace(j, weight=j.weight * magnitude) for j in inst.queue)
    scaled = replace(inst, queue=queue)
    a, b = solve(scaled, "greedy"), solve(inst, "greedy")
    assert_feasible(scaled, a)
    assert_feasible(inst, b)
    assert a.assignment() == b.assignment()


def test_slowdown_profiles_are_deterministic_and_positive() -> None:
    for profile in ("longhorn", "synthetic"):
        topo = build_cluster(1, 25, 4)
        a = sample_slowdowns(topo, profile, np.random.default_rng(1))
        b = sample_slowdowns(topo, profile, np.random.default_rng(1))
        assert a.shape == (4, 100) and (a > 0).all() and np.array_equal(a, b)


def test_run_instance_reports_gaps_to_the_optimum() -> None:
    specs = [SolverSpec.parse(s) for s in ("pal", "greedy", "cpsat", "milp:highs")]
    rows = run_instance(Family(16, 4, 1.0, "longhorn"), 0, specs, 5.0, 256, 1.0)
    assert {r.solver for r in rows} == {"pal", "greedy", "cpsat", "milp:highs"}
    assert all(r.reference_kind == "optimum" for r in rows)
    assert all(r.gap >= -1e-6 for r in rows)
    assert min(r.gap for r in rows if r.solver == "cpsat") == pytest.approx(0, abs=1e-6)


def test_bench_command_writes_table_csv(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(
        [
            "bench",
            "--sizes",
            "16",
            "--gpus-per-server",
            "4",
            "--loads",
            "1.0",
            "--profiles",
            "synthetic",
            "--seeds",
            "1",
            "--solvers",
            "pal,greedy,cpsat",
            "--time-limit",
            "3",
            "--out",
            str(tmp_path),
            "--no-plot",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "gap med" in out and "cpsat" in out
    with (tmp_path / "summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["solver"] for r in rows} == {"pal", "greedy", "cpsat"}


def test_bench_command_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = ["--out", str(tmp_path / "b")]  # a refusal let through writes there, not in the cwd
    assert main(["bench", "--sizes", "10", "--gpus-per-server", "4", *out]) == 2
    assert "--sizes" in capsys.readouterr().err
    assert main(["bench", "--profiles", "mars", *out]) == 2
    assert main(["bench", "--sizes", "48", *out]) == 2  # one rack and a half: was 32 GPUs
    assert "--sizes = 48: above one rack" in capsys.readouterr().err
    for flag, value in (
        ("--gpus-per-server", "3"),
        ("--bound-time", "-1"),
        ("--bound-time", "inf"),
        ("--time-limit", "inf"),
        ("--exact-max-gpus", "-1"),
        ("--solvers", "x"),
        ("--loads", "1.5"),
    ):
        assert main(["bench", "--quick", flag, value, *out]) == 2
        assert flag.lstrip("-").split("-")[0] in capsys.readouterr().err
    assert not (tmp_path / "b").exists()

    assert not (tmp_path / "b").exists()


def test_the_table_says_where_exact_solvers_did_not_run(tmp_path: Path, capsys) -> None:
    args = ["bench", "--quick", "--seeds", "1", "--loads", "1", "--solvers", "greedy,cpsat"]
    assert main([*args, "--exact-max-gpus", "16", "--out", str(tmp_path), "--no-plot"]) == 0
    out = capsys.readouterr().out  # the 64-GPU rows had no cpsat row, and no word on why
    assert "cpsat: run up to 16 GPUs (--exact-max-gpus)" in out


def test_bench_refuses_exact_solvers_alone_on_rounds_they_skip(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # was a ValueError traceback: no row for the Lagrangian bound's upper bound
    out = ["--no-plot", "--out", str(tmp_path / "b")]
    assert main(["bench", "--sizes", "512", "--solvers", "cpsat", *out]) == 2
    assert "skip the 512-GPU rounds" in capsys.readouterr().err
    # the largest size decides, not the first or the smallest
    assert main(["bench", "--sizes", "16,512", "--solvers", "cpsat", *out]) == 2
    assert "skip the 512-GPU rounds" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    assert (
        run_instance(Family(64, 4, 1.0, "longhorn"), 0, [SolverSpec.parse("cpsat")], 1, 32, 0) == []
    )


def test_a_solver_that_places_other_jobs_gets_no_gap(monkeypatch) -> None:
    import palopt.bench.runner as runner
    from palopt.bench.report import format_table, summarise
    from palopt.result import Status

    real = runner.get_solver

    class DropsTheLastJob:
        def __init__(self, solver) -> None:
            self.solver = solver

        def solve(self, inst, **kwargs):
            result = drop_last_placed_job(self.solver.solve(inst, **kwargs))
            return replace(result, status=Status.HEURISTIC)

    monkeypatch.setattr(
        runner,
        "get_solver",
        lambda name, **kw: DropsTheLastJob(real(name)) if name == "pal" else real(name, **kw),
    )
    specs = [SolverSpec.parse(s) for s in ("pal", "greedy", "cpsat")]
    rows = run_instance(Family(16, 4, 1.0, "longhorn"), 0, specs, 3.0, 256, 0.0)
    pal = next(r for r in rows if r.solver == "pal")
    assert pal.n_placed == pal.n_jobs - 1 and np.isnan(pal.gap)  # was a negative gap
    assert all(r.gap >= -1e-9 for r in rows if r.solver != "pal")
    summary = {d["solver"]: d for d in summarise(rows)}
    assert np.isnan(summary["pal"]["gap_median"]) and summary["pal"]["instances"] == 1
    assert "n/a" in format_table(list(summary.values()))


def test_the_gap_plot_has_a_panel_per_load(tmp_path: Path) -> None:
    import struct

    from palopt.bench.report import plot_gaps, summarise

    specs = [SolverSpec.parse("greedy")]
    rows = [
        r
        for load in (0.25, 0.5, 1.0)
        for r in run_instance(Family(16, 4, load, "longhorn"), 0, specs, 1.0, 256, 0.0)
    ]
    plot_gaps(tmp_path / "gaps.png", summarise(rows))
    with (tmp_path / "gaps.png").open("rb") as fh:
        width = struct.unpack(">I", fh.read(24)[16:20])[0]
    assert width == round(120 * (0.5 + 5.25 * 3))  # was two panels: the 25% load left out


@pytest.mark.parametrize(
    "args, message",
    [
        ((100, 4, 1.0, "longhorn"), "n_gpus = 100"),
        ((64, 3, 1.0, "longhorn"), "gpus_per_server = 3"),
        ((18, 4, 1.0, "longhorn"), "n_gpus = 18"),
        ((64, 4, 0.0, "longhorn"), "load = 0.0"),
        ((64, 4, 0.333, "longhorn"), "load = 0.333: must be a whole percent"),
        ((64, 4, 1.0, "mars"), "profile = 'mars'"),
    ],
)
def test_family_rejects_shapes_it_cannot_build(args: tuple, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Family(*args)


def test_family_cluster_has_its_gpus() -> None:
    for n in (4, 16, 32, 64, 256):
        for g in (4, 8):
            if n % g == 0:
                assert make_instance(Family(n, g, 0.5, "synthetic"), 0).topology.n_gpus == n


def test_bench_quick_keeps_the_options_given(tmp_path: Path, capsys) -> None:
    args = ["bench", "--quick", "--sizes", "16", "--solvers", "greedy", "--seeds", "1"]
    assert main([*args, "--out", str(tmp_path), "--no-plot"]) == 0
    with (tmp_path / "bench.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    # --quick's other settings: 4-GPU servers, both loads, the longhorn profile
    assert {(r["n_gpus"], r["solver"], r["seed"]) for r in rows} == {("16", "greedy", "0")}
    assert {r["family"] for r in rows} == {"16g-4ps-50%-longhorn", "16g-4ps-100%-longhorn"}


def _bench_script(name: str):
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_best_known_script_joins_block_solves_into_a_feasible_round(capsys) -> None:
    module = _bench_script("best_known")
    inst = make_instance(Family(64, 4, 1.0, "synthetic"), 1)
    positions = make_round(inst).open_positions
    blocks = module.deal(inst, positions, 2, 32)
    assert sorted(p for b in blocks for p in b) == sorted(positions)
    assert all(sum(inst.queue[p].num_gpus for p in b) <= 32 for b in blocks)
    args = ["--gpus", "64", "--per-server", "4", "--seed", "1", "--block-gpus", "32"]
    assert module.main([*args, "--block-time", "2", "--bound-time", "0.5"]) == 0
    out = capsys.readouterr().out
    # The script checks the joined placement (feasible, costed as the blocks' sum) itself.
    assert "2 blocks, cpsat" in out and "sum of the blocks' bounds" in out
    assert "spread" in out


def test_best_known_script_passes_options_to_the_blocks_solver(capsys) -> None:
    module = _bench_script("best_known")
    args = ["--gpus", "64", "--per-server", "4", "--block-gpus", "32", "--bound-time", "0.2"]
    runs = []
    for _ in range(2):  # deterministic: the blocks' placements repeat exactly
        assert module.main([*args, "--block-time", "0.5", "-o", "deterministic=true"]) == 0
        runs.append([line for line in capsys.readouterr().out.splitlines() if "blocks," in line])
    assert runs[0][0].split()[:4] == runs[1][0].split()[:4]
    for bad, message in (
        (["-o", "colour=red"], "cpsat.colour = 'red': unknown option"),
        (["--solver", "milp:highs", "-o", "backend=cbc"], "differs from the 'highs'"),
    ):
        with pytest.raises(InputError, match=message):  # before any work
            module.main([*args, *bad])


def test_best_known_by_size_table_splits_the_cost_by_job_size() -> None:
    topo = build_cluster(2, 2, 4)  # racks of 8 GPUs, servers of 4
    inst = Instance(
        topo,
        ("A",),
        np.ones((1, 16)) + 0.5 * (np.arange(16) == 3),
        np.array([[1.0, 1.5, 2.0]]),
        (Job("a", 4, "A"), Job("b", 2, "A"), Job("c", 1, "A")),
    )
    packed = {"a": (0, 1, 2, 3), "b": (4, 5), "c": (6,)}  # a holds the slow GPU 3
    scattered = {"a": (4, 5, 6, 8), "b": (0, 1), "c": (2,)}  # a over two racks
    assert_feasible(inst, packed)
    assert_feasible(inst, scattered)
    lines = _bench_script("best_known").by_size(inst, {"packed": packed, "scattered": scattered})
    rows = {int(line.split()[0]): line.split() for line in lines[2:]}
    assert sorted(rows) == [1, 2, 4]
    # size, jobs | cost spread slow | cost spread slow
    assert rows[4][2:] == ["|", "1.500", "0", "1.500", "|", "2.000", "1", "1.000"]
    assert rows[2][2:] == ["|", "1.000", "0", "1.000", "|", "1.000", "0", "1.000"]


def test_bench_keeps_finished_instances_when_interrupted(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    import palopt.bench.runner as runner

    real = runner.run_instance
    calls = []

    def stop_on_second(*args, **kwargs):
        calls.append(args[:2])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "run_instance", stop_on_second)
    for earlier in ("summary.csv", "gaps.png"):  # an earlier run's, beside the new bench.csv
        (tmp_path / earlier).write_text("earlier run")
    args = ["bench", "--quick", "--sizes", "16", "--solvers", "pal,greedy", "--seeds", "2"]
    assert main([*args, "--out", str(tmp_path), "--no-plot"]) == 130
    with (tmp_path / "bench.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["family"], r["seed"], r["solver"]) for r in rows] == [
        ("16g-4ps-50%-longhorn", "0", "pal"),
        ("16g-4ps-50%-longhorn", "0", "greedy"),
    ]
    assert not (tmp_path / "summary.csv").exists() and not (tmp_path / "gaps.png").exists()


def test_the_table_shows_a_rounding_error_below_the_reference_as_zero() -> None:
    from palopt.bench.report import format_table

    row = {
        "family": "16g-4ps-100%-longhorn",
        "solver": "cpsat",
        "instances": 1,
        "gap_median": -1e-16,
        "gap_p95": 0.012345,
        "gap_max": -0.0,
        "time_median": 0.1,
        "time_p95": 0.2,
        "share_optimal": 1.0,
        "reference": "optimum",
    }
    line = format_table([row]).splitlines()[-1]
    assert line.split()[3:6] == ["0.00%", "1.23%", "0.00%"] and "-0.00" not in line


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--sizes", ",", "--sizes = ',': expected positive integers"),  # not min() of nothing
        ("--sizes", "0", "--sizes = '0': expected positive integers"),
        ("--sizes", "16,x", "--sizes = '16,x': expected comma-separated integers"),
        ("--loads", "half", "--loads = 'half': expected comma-separated numbers"),
        ("--loads", "0", "--loads = 0.0: must be in (0, 1]"),
        # families are named and seeded by the whole percent: 0.004 was a family named 0%
        ("--loads", "0.004", "--loads = 0.004: must be a whole percent"),
        ("--loads", "0.555", "--loads = 0.555: must be a whole percent"),
        ("--profiles", ",", "--profiles = ',': expected comma-separated names"),
        ("--profiles", "mars", "--profiles = 'mars': must be one of "),
        ("--seeds", "0", "--seeds = 0: must be at least 1"),
        ("--time-limit", "0", "--time-limit = 0.0: must be a positive, finite number"),
        # a family or solver given twice
        ("--sizes", "16,64,16", "--sizes = 16: given twice"),
        ("--profiles", "longhorn,longhorn", "--profiles = 'longhorn': given twice"),
        ("--solvers", "pal,greedy,pal", "--solvers = 'pal': given twice"),
        ("--solvers", "milp,milp:cbc", "--solvers = 'milp:cbc': given twice"),  # the default
        ("--loads", "0.5,0.50", "--loads = 0.5: given twice"),
        # one whole percent, two floats: the family 50% would run twice
        ("--loads", "0.5,0.500000000001", "--loads = 0.500000000001: given twice"),
    ],
)
def test_bench_refuses_each_bad_option_by_name(
    flag: str, value: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # --out under a file is refused after these: a value let through is refused there, not run
    (tmp_path / "file").write_text("")
    args = ["bench", "--quick", flag, value, "--out", str(tmp_path / "file" / "b"), "--no-plot"]
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def _fake_run_bench(monkeypatch: pytest.MonkeyPatch) -> dict:
    import palopt.commands.bench as command

    seen: dict = {}

    def fake(families, seeds, solvers, time_limit, exact_max_gpus, bound_time, **kwargs):
        seen.update(
            families=[f.name for f in families],
            seeds=seeds,
            solvers=[s.label for s in solvers],
            time_limit=time_limit,
            exact_max_gpus=exact_max_gpus,
            bound_time=bound_time,
        )
        return []

    monkeypatch.setattr(command, "run_bench", fake)
    return seen


def test_bench_defaults_reach_the_run(tmp_path: Path, monkeypatch, capsys) -> None:
    from palopt.bench.families import PROFILES
    from palopt.bench.runner import EXACT, HEURISTICS

    seen = _fake_run_bench(monkeypatch)
    assert main(["bench", "--quick", "--out", str(tmp_path / "q"), "--no-plot"]) == 0
    assert seen == {
        "families": [
            "16g-4ps-50%-longhorn",
            "16g-4ps-100%-longhorn",
            "64g-4ps-50%-longhorn",
            "64g-4ps-100%-longhorn",
        ],
        "seeds": 2,
        "solvers": [*HEURISTICS, "cpsat", "milp:highs"],
        "time_limit": 3.0,
        "exact_max_gpus": 256,
        "bound_time": 5.0,
    }
    assert main(["bench", "--out", str(tmp_path / "f"), "--no-plot"]) == 0
    assert seen["families"] == [  # smallest clusters first
        f"{n}g-{g}ps-{load}%-{profile}"
        for n in (16, 64, 256, 1024, 4096)
        for g in (4, 8)
        for load in (50, 100)
        for profile in PROFILES
    ]
    assert (seen["seeds"], seen["time_limit"]) == (5, 10.0)
    assert seen["solvers"] == [*HEURISTICS, *EXACT]
    args = ["bench", "--quick", "--seeds", "3", "--time-limit", "2", "--bound-time", "0"]
    args += ["--sizes", "32,", "--solvers", "milp:cbc,milp:highs,greedy"]  # a trailing comma
    assert main([*args, "--exact-max-gpus", "0", "--out", str(tmp_path / "g"), "--no-plot"]) == 0
    assert seen["families"] == ["32g-4ps-50%-longhorn", "32g-4ps-100%-longhorn"]
    assert seen["solvers"] == ["milp:cbc", "milp:highs", "greedy"]  # two back ends: two solvers
    assert (seen["seeds"], seen["time_limit"], seen["exact_max_gpus"], seen["bound_time"]) == (
        3,
        2.0,
        0,
        0.0,
    )
    # the profiles run in the order given, as the loads and sizes do
    args = ["bench", "--quick", "--profiles", "synthetic,longhorn", "--loads", "1"]
    assert main([*args, "--out", str(tmp_path / "p"), "--no-plot"]) == 0
    assert seen["families"] == [
        f"{n}g-4ps-100%-{profile}" for n in (16, 64) for profile in ("synthetic", "longhorn")
    ]


def test_bench_edges_that_are_allowed(tmp_path: Path, capsys) -> None:
    args = ["bench", "--quick", "--sizes", "16", "--loads", "1", "--seeds", "1", "--no-plot"]
    # no exact solver run at all, no time for the bound: a heuristic against the bound
    more = ["--solvers", "greedy", "--exact-max-gpus", "0", "--bound-time", "0"]
    assert main([*args, *more, "--out", str(tmp_path / "h")]) == 0
    captured = capsys.readouterr()
    assert "run up to" not in captured.out  # no exact solver was left out
    assert "16g-4ps-100%-longhorn seed 0: bound" in captured.err  # progress: on stderr only
    assert "seed 0" not in captured.out
    with (tmp_path / "h" / "bench.csv").open() as fh:
        assert [r["reference_kind"] for r in csv.DictReader(fh)] == ["bound"]
    # exact solvers alone, on rounds up to --exact-max-gpus
    more = ["--solvers", "cpsat", "--exact-max-gpus", "16"]
    assert main([*args, *more, "--out", str(tmp_path / "e")]) == 0
    with (tmp_path / "e" / "bench.csv").open() as fh:
        assert [(r["solver"], r["reference_kind"]) for r in csv.DictReader(fh)] == [
            ("cpsat", "optimum")
        ]
    assert "run up to" not in capsys.readouterr().out  # cpsat ran every round: nothing left out


def test_time_limits_script_times_each_solver_and_limit(capsys) -> None:
    args = ["--gpus", "64", "--per-server", "4", "--seeds", "0,1", "--limits", "0.2,1"]
    assert (
        _bench_script("time_limits").main([*args, "--solvers", "cpsat,greedy", "--repeats", "1"])
        == 0
    )
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("64g-4ps-100%-synthetic", f"s{seed}", solver, limit)
        for seed in (0, 1)
        for solver in ("cpsat", "greedy")
        for limit in ("0.2", "1")
    ]
    assert {r[-1] for r in rows if r[2] == "greedy"} == {"heuristic"}
    assert all(float(r[4]) <= float(r[5]) for r in rows)  # median, max


def test_best_known_script_refuses_blocks_of_part_of_a_rack() -> None:
    # A block below one rack's GPUs on a one-rack cluster was let through, then failed with
    # "racks = 0", an option never given.
    with pytest.raises(SystemExit, match="--block-gpus 16: not whole racks"):
        _bench_script("best_known").main(
            ["--gpus", "32", "--per-server", "4", "--block-gpus", "16"]
        )
