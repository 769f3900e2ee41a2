"""Fidelity of compat mode against the PAL artifact's simulator, and the simulate/reproduce CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from palopt.cli import main
from palopt.errors import InputError
from palopt.sim import SimConfig, load_profile, load_trace, simulate, summary
from palopt.sim.experiments import fig10_sweep, improvement_table, simulate_cell
from palopt.sweep import run_sweep
from palopt.topology import parse_shape

# Average JCT (hours) of sia-philly-workload-1 measured by running the artifact's code:
# 64 GPUs (sim-64gpu-cluster.csv), FIFO, P = 1.7, R = 360 s.
ARTIFACT_W1 = {"pal": 7.028, "pmfirst": 7.074, "packed-sticky": 8.401, "packed-nonsticky": 8.343}


@pytest.fixture(scope="module")
def cluster(artifact_dir):
    topo = parse_shape("16x4")
    return topo, load_profile(artifact_dir / "sim-64gpu-cluster.csv", topo)


@pytest.mark.parametrize("solver", sorted(ARTIFACT_W1))
def test_fidelity_workload1(artifact_dir, cluster, solver):
    topo, profile = cluster
    trace = load_trace(artifact_dir / "traces" / "sia-philly-workload-1.csv")
    res = simulate(
        topo,
        profile,
        trace,
        solver,
        "fifo",
        SimConfig(round_s=360, penalties=1.7, extra_jobs=True, check=True),
    )
    s = summary(res)
    assert s["jobs"] == 160
    # within 0.1% of the artifact (PAL is the farthest, +0.08%: docs/simulator.md)
    assert s["avg_jct_h"] == pytest.approx(ARTIFACT_W1[solver], rel=1e-3)


def test_profile_columns(cluster):
    _, profile = cluster
    assert profile.classes == ("classA", "classB", "classC", "classD")
    # ranked by binned levels, charged the raw measurement
    assert len(set(profile.rank[0])) < len(set(profile.charge[0]))


def test_cli_simulate_outputs(artifact_dir, tmp_path, capsys):
    out = tmp_path / "w1-pal"
    rc = main(
        [
            "simulate",
            "--trace",
            str(artifact_dir / "traces" / "sia-philly-workload-1.csv"),
            "--cluster",
            "16x4",
            "--profile",
            str(artifact_dir / "sim-64gpu-cluster.csv"),
            "--placement",
            "pal",
            "--scheduler",
            "fifo",
            "--locality-penalty",
            "1.7",
            "--round",
            "360",
            "--out",
            str(out),
            "--check",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "avg 7.03" in printed
    s = json.loads((out / "summary.json").read_text())
    for key in (
        "avg_jct_h",
        "median_jct_h",
        "p99_jct_h",
        "makespan_h",
        "gpu_utilisation",
        "avg_queueing_delay_h",
        "preemptions",
        "migrations",
    ):
        assert key in s
    jobs = pd.read_csv(out / "jobs.csv")
    assert len(jobs) == 160 and (jobs.jct_s > 0).all()
    assert (jobs.jct_s.mean() / 3600) == pytest.approx(s["avg_jct_h"])
    rounds = pd.read_csv(out / "rounds.csv")
    assert rounds.busy_gpus.max() <= 64
    assert (out / "jct_cdf.png").stat().st_size > 0 and (out / "busy_gpus.png").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--cluster", "16x5"], "80 GPUs"),
        (["--cluster", "sixteen"], "cluster"),
        (["--scheduler", "nope"], "unknown policy"),
        (["--placement", "nope"], "nope"),
        (["--seed", "-1"], "seed = -1"),
        (["--time-limit", "0"], "time_limit = 0"),
        (["--trace-is-profile"], "missing column"),
    ],
)
def test_cli_simulate_bad_input(artifact_dir, capsys, args, message):
    trace = artifact_dir / "traces" / "sia-philly-workload-1.csv"
    if args == ["--trace-is-profile"]:
        trace, args = artifact_dir / "sim-64gpu-cluster.csv", []
    base = [
        "simulate",
        "--trace",
        str(trace),
        "--profile",
        str(artifact_dir / "sim-64gpu-cluster.csv"),
        "--no-plots",
    ]
    assert main(base + args) == 2
    err = capsys.readouterr().err
    assert err.startswith("palopt: error:") and message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args, message",
    [
        (["fig13", "--seeds", "0"], "--seeds = 0"),
        (["fig13", "--jobs", "0"], "--jobs = 0"),
        (["fig13", "--loads", "8,0"], "loads = '8,0'"),
        (["fig10", "--workers", "0"], "workers = 0"),
        (["fig10", "--workloads", "1-2000000000"], "workloads are 1 to 8"),
        (["fig10", "--workloads", "0,3"], "workloads are 1 to 8"),
        (["fig10", "--workloads", "1,,3"], "expected numbers like 1-8"),
        # a figure's options are refused for another figure, not ignored; values once each
        (["fig12", "--workloads", "1"], "--workloads = '1': is an option of fig10, not fig12"),
        (["fig10", "--seeds", "3"], "--seeds = 3: is an option of fig13, not fig10"),
        (["fig10", "--jobs", "5"], "--jobs = 5: is an option of fig13"),
        (["fig13", "--workloads", "2"], "is an option of fig10, not fig13"),
        (["fig10", "--workloads", "1,1-3"], "1 is given twice"),
        (["fig13", "--loads", "8,8.0"], "a load is given twice"),
        (["fig13", "--loads", "8,,10"], "loads = '8,,10': expected numbers like 8,10,12"),
    ],
)
def test_cli_reproduce_bad_input(artifact_dir, tmp_path, capsys, args, message):
    base = ["reproduce", "--data", str(artifact_dir), "--out", str(tmp_path), "--no-progress"]
    assert main(base + args) == 2
    err = capsys.readouterr().err
    assert err.startswith("palopt: error:") and message in err


#: Two workloads' average JCTs for the baselines and PAL.
RUNS_BY_WORKLOAD = [
    {"workload": w, "placement": p, "avg_jct_h": v}
    for w, vals in (
        (1, {"packed-sticky": 10.0, "packed-nonsticky": 8.0, "pal": 5.0}),
        (2, {"packed-sticky": 4.0, "packed-nonsticky": 4.0, "pal": 2.0}),
    )
    for p, v in vals.items()
]


def test_improvement_table():
    rows = RUNS_BY_WORKLOAD
    jct, gains = improvement_table(rows, "workload")
    assert jct.loc[1, "pal"] == 5.0
    g = gains.set_index(["baseline", "placement"])
    assert g.loc[("packed-sticky", "pal"), "geomean_gain"] == pytest.approx(0.5)
    assert g.loc[("packed-nonsticky", "pal"), "min_gain"] == pytest.approx(0.375)
    assert g.loc[("packed-nonsticky", "pal"), "max_gain"] == pytest.approx(0.5)


def test_improvement_table_refuses_runs_with_unfinished_jobs():
    rows = [
        {"load": 8, "placement": "packed-sticky", "avg_jct_h": 9.0, "unfinished": 0},
        {"load": 8, "placement": "pal", "avg_jct_h": 4.0, "unfinished": 3},
    ]
    with pytest.raises(InputError, match="^unfinished = 3: load 8, placement pal: tracked jobs"):
        improvement_table(rows, "load")
    rows[1]["unfinished"] = 1  # a single job short is short
    with pytest.raises(InputError, match="^unfinished = 1: "):
        improvement_table(rows, "load")
    rows[1]["unfinished"] = 0
    assert improvement_table(rows, "load")[1]["geomean_gain"].tolist() == [pytest.approx(5 / 9)]


def test_sweep_in_pool_matches_serial(artifact_dir, tmp_path):
    spec = fig10_sweep(artifact_dir, tmp_path / "a", [1], ["pal", "packed-sticky"], check=True)
    pooled = run_sweep(spec, simulate_cell, workers=2)
    serial = run_sweep(
        fig10_sweep(artifact_dir, tmp_path / "b", [1], ["pal", "packed-sticky"], check=True),
        simulate_cell,
        workers=1,
    )
    assert pooled.avg_jct_h.tolist() == serial.avg_jct_h.tolist()
    assert pooled.placement.tolist() == ["pal", "packed-sticky"]
    assert pooled.avg_jct_h[0] == pytest.approx(7.033, abs=1e-3)


def test_simulate_cell_checks_keys(artifact_dir):
    with pytest.raises(InputError, match="unknown parameter"):
        simulate_cell({"data": str(artifact_dir), "workload": 1, "placment": "pal"})
    with pytest.raises(InputError, match="needs 'trace'"):
        simulate_cell({"data": str(artifact_dir)})
    with pytest.raises(InputError, match="seed = -2"):
        simulate_cell({"data": str(artifact_dir), "workload": 1, "seed": -2})
    with pytest.raises(InputError, match="workload = 9: the Sia-Philly workloads are 1 to 8"):
        simulate_cell({"data": str(artifact_dir), "workload": 9})
    # Values from a grid file are checked, not converted: float("abc") raised a ValueError,
    # bool("no") was true and int(1.5) was 1.
    for key, value, cell in (
        ("round", "abc", {"workload": 1}),
        ("backfill", "no", {"workload": 1}),
        ("seed", 1.5, {"workload": 1}),
        ("fixed_charge", "y", {"workload": 1}),
        ("workload", 1.5, {}),
        ("load", "x", {}),
        ("n_jobs", 0, {"load": 8}),
        ("max_time", "1h", {"workload": 1}),
        ("locality_penalty", -1.0, {"workload": 1}),  # was named penalties.classA.rack
    ):
        with pytest.raises(InputError, match=f"^{key} = "):
            simulate_cell({"data": str(artifact_dir), **cell, key: value})
    with pytest.raises(InputError, match="extra_seed = -1"):
        SimConfig(extra_seed=-1)
    with pytest.raises(InputError, match="time_limit = inf"):
        SimConfig(time_limit=float("inf"))


def test_simulate_cell_stops_at_its_horizon(artifact_dir):
    # Workload 1 under LAS with extra jobs, stopped after 10 h: 149 of its 160 jobs completed,
    # in rounds 1-99 (its first job arrives after round 0, which has nothing to run)
    cell = {"data": str(artifact_dir), "workload": 1, "scheduler": "las", "extra_jobs": True}
    cell["check"] = True
    s = simulate_cell({**cell, "max_time": 36_000.0})
    assert (s["jobs"], s["unfinished"], s["rounds"]) == (149, 11, 99)


def test_cli_simulate_stops_at_max_time(artifact_dir, tmp_path, capsys):
    trace = str(artifact_dir / "traces" / "sia-philly-workload-1.csv")
    profile = str(artifact_dir / "sim-64gpu-cluster.csv")
    args = ["simulate", "--trace", trace, "--profile", profile, "--scheduler", "las"]
    args += ["--extra-jobs", "--no-progress", "--no-plots", "--check", "--max-time"]
    assert main([*args, "36000", "--out", str(tmp_path)]) == 0
    assert "149 tracked jobs completed, 11 unfinished at the horizon" in capsys.readouterr().out
    s = json.loads((tmp_path / "summary.json").read_text())
    assert (s["unfinished"], s["settings"]["max_time_s"]) == (11, 36000.0)
    jobs = pd.read_csv(tmp_path / "jobs.csv")
    assert jobs[jobs.tracked].finish_s.isna().sum() == 11 - (160 - jobs.tracked.sum())
    assert main([*args, "0"]) == 2
    assert "max_time = 0.0: must be a finite number > 0" in capsys.readouterr().err


def test_cli_simulate_passes_options_to_the_solver_and_the_policy(artifact_dir, tmp_path, capsys):
    trace = str(artifact_dir / "traces" / "sia-philly-workload-1.csv")
    profile = str(artifact_dir / "sim-64gpu-cluster.csv")
    args = ["simulate", "--trace", trace, "--profile", profile, "--no-progress", "--no-plots"]
    args += ["--max-time", "7200", "--check", "--scheduler", "tiresias"]
    tiresias = ["--scheduler-option", "thresholds=[600,6000]", "--scheduler-option"]
    assert main([*args, *tiresias, "promote_knob=2", "--out", str(tmp_path)]) == 0
    settings = json.loads((tmp_path / "summary.json").read_text())["settings"]
    assert settings["scheduler_options"] == {"thresholds": [600, 6000], "promote_knob": 2}
    capsys.readouterr()
    for extra, message in (
        (["--scheduler-option", "promote_knob=0"], "tiresias.promote_knob = 0: must be"),
        (["--scheduler", "las", "--scheduler-option", "promote_knob=2"], "las.promote_knob"),
        ([*tiresias, "thresholds=[1]"], "--scheduler-option thresholds = [1]: given twice"),
        (["--placement-option", "gap=0.1"], "pal.gap = 0.1: unknown option; its options: variant"),
        (["--placement", "milp:highs", "--placement-option", "backend=cbc"], "differs from"),
    ):
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    with pytest.raises(InputError, match="scheduler_options = 2: expected a mapping"):
        simulate_cell({"data": str(artifact_dir), "workload": 1, "scheduler_options": 2})


def test_a_sweep_cell_passes_its_time_limit_to_every_solve(artifact_dir, monkeypatch):
    from palopt.solvers import base

    limits = []

    class Spy:
        name = "spy"

        def solve(self, instance, *, time_limit=None, seed=None):
            limits.append(time_limit)
            return base.get_solver("packed-sticky").solve(instance, seed=seed)

    monkeypatch.setitem(base._REGISTRY, "spy", base.SolverInfo("spy", lambda: Spy(), "spy"))
    cell = {"data": str(artifact_dir), "workload": 1, "placement": "spy", "max_time": 3600.0}
    cell["check"] = True
    simulate_cell({**cell, "time_limit": 0.5})
    assert limits and set(limits) == {0.5}
    with pytest.raises(InputError, match="time_limit = 0.5: placement_options time_limit=2"):
        simulate_cell({**cell, "time_limit": 0.5, "placement_options": {"time_limit": 2}})


def test_simulate_cell_tiles_a_larger_cluster(artifact_dir):
    s = simulate_cell(
        {
            "data": str(artifact_dir),
            "cluster": "32x4",
            "load": 20.0,
            "n_jobs": 10,
            "round": 300.0,
            "check": True,
        }
    )
    assert (s["jobs"], s["unfinished"]) == (10, 0) and s["avg_jct_h"] > 0


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ([], "compat"),
        (["--extra-jobs"], "extra-jobs"),
        (["--fixed-charge"], "fixed-charge"),
        (["--completion", "exact", "--restart-cost", "60"], "exact-restart60"),
        (
            ["--completion", "exact", "--restart-cost", "60", "--backfill"],
            "exact-restart60-backfill",
        ),
        (["--restart-cost", "0.5", "--backfill"], "restart0.5-backfill"),
    ],
)
def test_cli_reproduce_names_its_files_by_every_model_option(options, name):
    # Runs with different model options keep apart: they used to share "realistic" (and
    # --extra-jobs / --fixed-charge runs "compat"), so --fresh deleted the other's cells.
    from palopt.cli import build_parser
    from palopt.commands.simulate import _model_name

    assert _model_name(build_parser().parse_args(["reproduce", "fig10", *options])) == name


@pytest.mark.slow
def test_cli_reproduce_fig10(artifact_dir, tmp_path, capsys):
    rc = main(
        ["reproduce", "fig10", "--data", str(artifact_dir), "--out", str(tmp_path), "--no-progress"]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "Improvement over packed-sticky" in out and "Improvement over packed-nonsticky" in out
    runs = pd.read_csv(tmp_path / "fig10-compat-runs.csv")
    assert (tmp_path / "fig10-compat-vs-packed-sticky.png").exists()
    assert len(runs) == 48
    w1 = runs[runs.workload == 1].set_index("placement").avg_jct_h
    for solver, value in ARTIFACT_W1.items():
        assert w1[solver] == pytest.approx(value, rel=0.01)


@pytest.mark.parametrize(
    "scheduler, load, placement", [("fifo", 8, "Packed-S"), ("las", 14, "PAL")]
)
def test_fig13_defaults_give_the_documented_table(artifact_dir, scheduler, load, placement):
    # The table in docs/simulator.md came from 400 tracked jobs per run while the default had
    # become 200 (where the tracked jobs barely queue): a run at the defaults must match it.
    import re
    from pathlib import Path

    from palopt.sim.experiments import fig13_sweep
    from palopt.sweep import expand

    doc = (Path(__file__).parents[1] / "docs" / "simulator.md").read_text(encoding="utf-8")
    table = doc[doc.index("### Fig 13") :]
    header = re.search(r"^\| scheduler \| load \|(.*)\|$", table, re.M)
    columns = [c.strip() for c in header.group(1).split("|")]
    row = re.search(rf"^\| {scheduler.upper()}\s+\| {load}\s+\|(.*)\|$", table, re.M)
    documented = float(row.group(1).split("|")[columns.index(placement)])
    names = {"Packed-S": "packed-sticky", "PAL": "pal"}
    spec = fig13_sweep(artifact_dir, Path("unused"), [load], [scheduler], [names[placement]])
    (cell,) = expand(spec)
    assert simulate_cell({**cell, "check": True})["avg_jct_h"] == pytest.approx(
        documented, abs=5e-4
    )


def _tiny(folder):
    """The docstring's one-job cell: a 2-GPU profile and a one-job trace in ``folder``."""
    (folder / "profile.csv").write_text("GPU_ID,PerfVar_classC,sf_classC\n0,1.0,1.0\n1,1.2,1.1\n")
    (folder / "trace.csv").write_text(
        "job_id,num_gpus,submit_time,duration,model\n1,2,0,100,vgg19\n"
    )
    return {
        "profile": str(folder / "profile.csv"),
        "trace": str(folder / "trace.csv"),
        "cluster": "1x2",
        "round": 60.0,
        "check": True,
    }


def test_simulate_cell_passes_every_model_setting_to_the_simulator(tmp_path, monkeypatch):
    from palopt.sim import experiments

    seen = {}
    real = experiments.simulate

    def spy(topo, profile, trace, solver, policy, config):
        seen.update(profile=profile, config=config, solver=solver, policy=policy)
        return real(topo, profile, trace, solver, policy, config)

    monkeypatch.setattr(experiments, "simulate", spy)
    cell = {
        **_tiny(tmp_path),
        "completion": "exact",
        "restart_cost": 30.0,
        "backfill": True,
        "extra_jobs": True,
        "seed": 5,
        "max_time": 7200.0,
        "locality_penalty": 2.0,
        "placement": "pmfirst",
        "scheduler": "las",
    }
    out = simulate_cell(cell)
    config = seen["config"]
    assert (config.round_s, config.completion, config.restart_cost_s) == (60.0, "exact", 30.0)
    assert (config.backfill, config.extra_jobs, config.seed) == (True, True, 5)
    assert (config.max_time_s, config.penalties) == (7200.0, 2.0)
    assert seen["solver"].name == "pmfirst"
    # The summary leaves out solver and policy: the cell's placement and scheduler say them.
    assert "solver" not in out and "policy" not in out and out["jobs"] == 1
    profile = seen["profile"]
    assert (profile.charge != profile.rank).any()  # measured, binned for ranking
    simulate_cell({**cell, "fixed_charge": True})
    assert (seen["profile"].charge == seen["profile"].rank).all()  # charged what it ranks by


def test_simulate_cell_names_a_missing_or_bad_source(tmp_path, artifact_dir):
    tiny = _tiny(tmp_path)
    with pytest.raises(InputError, match="^profile = None: give 'profile' or 'data'$"):
        simulate_cell({"trace": tiny["trace"], "cluster": "1x2"})
    with pytest.raises(InputError, match="^data = None: needed for 'workload' or 'load' cells$"):
        simulate_cell({"profile": tiny["profile"], "cluster": "1x2", "workload": 1})
    with pytest.raises(InputError, match="^gpu_dist = 'philly': must be 'synergy' or 'traces'$"):
        simulate_cell({"data": str(artifact_dir), "load": 8.0, "gpu_dist": "philly"})
    # A key that is not text was a TypeError in the solver's keyword arguments.
    with pytest.raises(InputError, match="^placement_options = .*: expected a mapping"):
        simulate_cell({**tiny, "placement_options": {1: 2}})


def test_simulate_cell_names_the_parameter_of_a_missing_file(tmp_path, artifact_dir):
    # was "[Errno 2] No such file or directory: ...", naming no parameter of the cell
    tiny = _tiny(tmp_path)
    gone = str(tmp_path / "gone.csv")
    for cell, key, path in (
        ({**tiny, "trace": gone}, "trace", gone),
        ({**tiny, "profile": gone}, "profile", gone),
        ({"data": str(tmp_path), "workload": 1}, "data", tmp_path / "sim-64gpu-cluster.csv"),
        (
            {"data": str(tmp_path), "profile": tiny["profile"], "cluster": "1x2", "workload": 1},
            "data",
            tmp_path / "traces" / "sia-philly-workload-1.csv",
        ),
    ):
        with pytest.raises(InputError) as exc:
            simulate_cell(cell)
        assert (exc.value.field, exc.value.value, exc.value.problem) == (
            key,
            str(path),
            "no such file",
        )


def test_simulate_cell_names_a_folder_given_as_a_file(tmp_path):
    # was "no such file", of a folder that is there (a sweep's trace = ".", say)
    tiny = _tiny(tmp_path)
    for key in ("trace", "profile"):
        with pytest.raises(InputError) as exc:
            simulate_cell({**tiny, key: str(tmp_path)})
        assert (exc.value.field, exc.value.value, exc.value.problem) == (
            key,
            str(tmp_path),
            "is a folder, not a file",
        )


def test_simulate_cell_runs_the_last_sia_philly_workload(artifact_dir):
    s = simulate_cell({"data": str(artifact_dir), "workload": 8, "max_time": 3600.0, "check": True})
    assert s["rounds"] == 9  # rounds 1-9: none at t = 0
    assert s["jobs"] + s["unfinished"] == 160  # every tracked job of the trace


def test_prepare_puts_the_version_and_the_grid_context_in_the_cells_ids(tmp_path):
    from palopt import __version__
    from palopt.sim.experiments import prepare
    from palopt.sweep import SweepSpec

    spec = SweepSpec(
        {"placement": ("pal",)}, {"data": "d", "load": 8}, tmp_path / "out", context="trace v2"
    )
    done = prepare(spec, tmp_path / "grids")
    assert done.context == f"trace v2; palopt {__version__}; files from ../grids"


def test_the_figure_sweeps_default_to_the_papers_grids():
    from pathlib import Path

    from palopt.sim.experiments import FIG10_PLACEMENTS, fig10_sweep, fig12_sweep

    fig10 = fig10_sweep("data", Path("out"))
    assert fig10.grid == {"workload": tuple(range(1, 9)), "placement": FIG10_PLACEMENTS}
    fig12 = fig12_sweep("data", Path("out"))
    assert fig12.grid["locality_penalty"] == (1.0, 1.5, 2.0, 2.5, 3.0)
    assert fig12.grid["placement"] == ("packed-sticky", "packed-nonsticky", "pmfirst", "pal")


def test_improvement_table_averages_the_runs_of_a_cell():
    rows = [
        {"seed": s, "workload": 1, "placement": p, "avg_jct_h": v}
        for s, vals in (
            (0, {"packed-sticky": 4.0, "pal": 1.0}),
            (1, {"packed-sticky": 2.0, "pal": 2.0}),
        )
        for p, v in vals.items()
    ]
    jct, gains = improvement_table(rows, "workload")
    assert jct.loc[1].to_dict() == {"packed-sticky": 3.0, "pal": 1.5}
    assert gains["geomean_gain"].tolist() == [pytest.approx(0.5)]


def test_format_tables_text():
    from palopt.sim.experiments import format_tables

    rows = RUNS_BY_WORKLOAD
    text = format_tables(*improvement_table(rows, "workload"), "workload")
    lines = text.splitlines()
    assert not text.endswith("\n")
    # per workload: each baseline's own column left out, improvements in percent
    at = lines.index("Improvement over packed-sticky by workload (1 - JCT / JCT_packed-sticky)")
    assert lines[at + 1].split() == ["placement", "packed-nonsticky", "pal"]
    assert lines[at + 3].split() == ["1", "20.0%", "50.0%"]
    at = lines.index(
        "Improvement over packed-nonsticky by workload (1 - JCT / JCT_packed-nonsticky)"
    )
    assert lines[at + 1].split() == ["placement", "packed-sticky", "pal"]
    assert lines[at + 3].split() == ["1", "-25.0%", "37.5%"]
    # the geomeans, in the baselines' order
    assert lines[-6:] == [
        "Improvement over packed-sticky: geomean (min .. max)",
        "  packed-nonsticky     10.6%  (0.0% .. 20.0%)",
        "  pal                  50.0%  (50.0% .. 50.0%)",
        "Improvement over packed-nonsticky: geomean (min .. max)",
        "  packed-sticky       -11.8%  (-25.0% .. 0.0%)",
        "  pal                  44.1%  (37.5% .. 50.0%)",
    ]
    # the baselines alone: the JCT table only, without a final newline
    jct, gains = improvement_table(
        [r for r in rows if r["placement"] == "packed-sticky"], "workload"
    )
    assert gains.empty
    alone = format_tables(jct, gains, "workload")
    assert alone.startswith("Average JCT (hours) by workload\n") and "Improvement" not in alone
    assert alone.splitlines()[-1].split() == ["2", "4.000"] and not alone.endswith("\n")


def test_plot_normalised_refuses_a_baseline_that_did_not_run(tmp_path):
    from palopt.sim.experiments import plot_normalised

    jct, _ = improvement_table([{"load": 8, "placement": "pal", "avg_jct_h": 1.0}], "load")
    with pytest.raises(InputError, match="^baseline = 'packed-sticky': not among the placements"):
        plot_normalised(jct, "packed-sticky", tmp_path / "p.png", "t")
    assert not (tmp_path / "p.png").exists()


def test_a_synthetic_trace_fits_the_cluster(artifact_dir, tmp_path, monkeypatch):
    from palopt.sim import experiments

    traces = []
    real = experiments.simulate

    def spy(topo, profile, trace, *rest):
        traces.append(trace)
        return real(topo, profile, trace, *rest)

    monkeypatch.setattr(experiments, "simulate", spy)
    profile = tmp_path / "profile.csv"
    profile.write_text("GPU_ID,PerfVar_classA,PerfVar_classB\n0,1.0,1.0\n1,1.1,1.1\n")
    cell = {"data": str(artifact_dir), "profile": str(profile), "cluster": "1x2", "load": 8.0}
    cell.update(n_jobs=30, check=True)
    simulate_cell({**cell, "max_time": 360.0})
    (trace,) = traces
    assert len(trace) == 90 and sum(j.tracked for j in trace) == 30
    sizes = {j.num_gpus for j in trace}
    assert max(sizes) == 2 and 1 in sizes  # the 4- and 8-GPU draws cut to the cluster's 2


def test_simulate_cell_refuses_a_profile_of_part_servers(tmp_path):
    # 6 rows for 4-GPU servers: tiling would have drawn from the first server only.
    cell = _tiny(tmp_path)
    (tmp_path / "p6.csv").write_text(
        "GPU_ID,PerfVar_classC\n" + "".join(f"{g},1.0\n" for g in range(6))
    )
    with pytest.raises(InputError, match="^profile = 6: has 6 GPU rows, the cluster has 8 GPUs"):
        simulate_cell({**cell, "profile": str(tmp_path / "p6.csv"), "cluster": "2x4"})


def test_simulate_cell_reads_a_trace_and_a_profile_again_once_edited(tmp_path):
    # Cached by file name: a trace or profile edited between two cells of one session (a
    # notebook, a sweep in one process) was simulated as it was at first.
    cell = _tiny(tmp_path)
    first = simulate_cell(cell)["avg_jct_h"]
    (tmp_path / "new").mkdir()
    for name, text in (
        ("trace.csv", "job_id,num_gpus,submit_time,duration,model\n1,2,0,2000,vgg19\n"),
        ("profile.csv", "GPU_ID,PerfVar_classC,sf_classC\n0,2.0,2.0\n1,2.0,2.0\n"),
    ):
        (tmp_path / name).write_text(text)
        (tmp_path / "new" / name).write_text(text)
        fresh = {**cell, name.split(".")[0]: str(tmp_path / "new" / name)}
        assert simulate_cell(cell)["avg_jct_h"] == simulate_cell(fresh)["avg_jct_h"] > first
        first = simulate_cell(cell)["avg_jct_h"]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([], "^rows = \\[\\]: no runs to compare$"),
        ([{"load": 8, "avg_jct_h": 1.0}], "^rows = 'placement': a run without this key$"),
        (
            [
                {"load": 8, "placement": "packed-sticky", "avg_jct_h": 2.0},
                {"load": 8, "placement": "pal", "avg_jct_h": 1.0},
                {"load": 10, "placement": "packed-sticky", "avg_jct_h": 3.0},
            ],
            "^rows = 'load 10': no run of placement pal",
        ),
        (
            [
                {"load": 8, "placement": "packed-sticky", "avg_jct_h": 2.0},
                {"load": 8, "placement": "pal", "avg_jct_h": float("nan")},
            ],
            "^rows = 'load 8': no run of placement pal",
        ),
    ],
)
def test_improvement_table_refuses_runs_that_do_not_compare(rows, message):
    # A missing run gave a geomean of nan ("nan%" in the table); no rows a KeyError.
    with pytest.raises(InputError, match=message):
        improvement_table(rows, "load")


# ---- the simulate command on a tiny trace ----------------------------------------------------

TINY_TRACE = (
    "job_id,num_gpus,submit_time,duration,model\n"
    "0,2,0,1000,resnet50\n1,4,10,3000,resnet50\n2,1,20,500,vgg19\n"
)


def _spy_simulator(monkeypatch):
    """Record what ``palopt simulate`` gives the simulator (which then runs as usual)."""
    from palopt.commands import simulate as command

    seen = {}

    class Spy(command.Simulator):
        def __init__(self, topo, profile, trace, solver, policy, cfg):
            seen.update(topo=topo, profile=profile, solver=solver, policy=policy, cfg=cfg)
            super().__init__(topo, profile, trace, solver, policy, cfg)

    monkeypatch.setattr(command, "Simulator", Spy)
    return seen


def test_cli_simulate_gives_the_simulator_every_option(tmp_path, monkeypatch, capsys):
    from palopt.sim.profile import correlated_profile

    seen = _spy_simulator(monkeypatch)
    (tmp_path / "t.csv").write_text(TINY_TRACE)
    args = ["simulate", "--trace", str(tmp_path / "t.csv"), "--cluster", "2x4"]
    args += ["--correlated", "0.7", "--seed", "3", "--round", "120", "--locality-penalty", "2.5"]
    args += ["--completion", "exact", "--restart-cost", "30", "--backfill", "--extra-jobs"]
    args += ["--check", "--max-time", "36000", "--time-limit", "5"]
    args += ["--placement", "greedy", "--scheduler", "LAS", "--no-progress", "--no-plots"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    expected = SimConfig(
        round_s=120.0,
        penalties=2.5,
        completion="exact",
        restart_cost_s=30.0,
        backfill=True,
        extra_jobs=True,
        seed=3,
        time_limit=5.0,
        check=True,
        max_time_s=36000.0,
    )
    assert seen["cfg"] == expected
    assert seen["policy"].name == "las" and seen["topo"].n_gpus == 8
    classes = ("classA", "classB", "classC", "classD")
    synthetic = correlated_profile(8, classes, 0.05, 0.7, 3)
    assert np.array_equal(seen["profile"].charge, synthetic.charge)
    assert np.array_equal(seen["profile"].rank, synthetic.rank)
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    settings = s["settings"]
    assert settings["profile"] == "correlated:0.7" and settings["scheduler"] == "las"
    assert (settings["seed"], settings["fixed_charge"], settings["backfill"]) == (3, False, True)
    assert (settings["round_s"], settings["locality_penalty"]) == (120.0, 2.5)
    assert (settings["completion"], settings["restart_cost_s"]) == ("exact", 30.0)
    # what the library gives for the same settings
    trace = load_trace(tmp_path / "t.csv")
    res = simulate(parse_shape("2x4"), synthetic, trace, "greedy", "las", SimConfig(check=True))
    assert s["avg_jct_h"] != pytest.approx(summary(res)["avg_jct_h"])  # the options matter
    res = simulate(
        parse_shape("2x4"),
        synthetic,
        load_trace(tmp_path / "t.csv"),
        "greedy",
        "las",
        expected,
    )
    assert s["avg_jct_h"] == pytest.approx(summary(res)["avg_jct_h"])
    assert "avg" in capsys.readouterr().out


def test_cli_simulate_draws_a_measured_profile_with_its_seed(tmp_path, monkeypatch):
    from palopt.variability import VariabilityProfile, save_profile

    seen = _spy_simulator(monkeypatch)
    (tmp_path / "t.csv").write_text(TINY_TRACE)
    values = np.linspace(0.8, 1.6, 32).reshape(2, 16)
    gpus = tuple(f"g{i}" for i in range(16))
    save_profile(VariabilityProfile(("classA", "classC"), gpus, values), tmp_path / "p.json")
    args = ["simulate", "--trace", str(tmp_path / "t.csv"), "--cluster", "2x4"]
    args += ["--profile", str(tmp_path / "p.json"), "--no-progress", "--no-plots"]
    charges = []
    for seed in (0, 7):
        assert main([*args, "--seed", str(seed)]) == 0
        expected = load_profile(tmp_path / "p.json", parse_shape("2x4"), seed)
        assert np.array_equal(seen["profile"].charge, expected.charge)
        assert np.array_equal(seen["profile"].rank, expected.rank)
        assert (expected.charge != expected.rank).any()  # measured, binned for ranking
        charges.append(seen["profile"].charge)
    assert not np.array_equal(*charges)
    assert main([*args, "--seed", "7", "--fixed-charge", "--out", str(tmp_path / "f")]) == 0
    assert np.array_equal(seen["profile"].charge, expected.rank)  # charged what it ranks by
    assert np.array_equal(seen["profile"].rank, expected.rank)
    settings = json.loads((tmp_path / "f" / "summary.json").read_text())["settings"]
    assert (settings["fixed_charge"], settings["seed"]) == (True, 7)
    assert settings["profile"] == str(tmp_path / "p.json")


def test_cli_simulate_counts_completed_jobs_on_its_progress_bar(tmp_path, monkeypatch, capsys):
    from palopt.commands import simulate as command

    bars = []

    class Bar:
        def __init__(self, total, unit):
            self.total, self.unit, self.n, self.closed = total, unit, 0, False
            bars.append(self)

        def update(self, n):
            assert n >= 0
            self.n += n
            assert self.n <= self.total

        def close(self):
            self.closed = True

    monkeypatch.setattr(command, "progress_bar", Bar)
    (tmp_path / "t.csv").write_text(TINY_TRACE)
    args = ["simulate", "--trace", str(tmp_path / "t.csv"), "--cluster", "2x4"]
    args += ["--correlated", "0.5", "--no-plots"]
    assert main(args) == 0
    [bar] = bars
    assert (bar.total, bar.unit, bar.n, bar.closed) == (3, "job", 3, True)
    assert main([*args, "--no-progress"]) == 0
    assert len(bars) == 1


def test_cli_simulate_names_the_files_it_wrote(tmp_path, capsys):
    (tmp_path / "t.csv").write_text(TINY_TRACE)
    args = ["simulate", "--trace", str(tmp_path / "t.csv"), "--cluster", "2x4"]
    args += ["--correlated", "0.5", "--no-progress"]
    assert main([*args, "--no-plots", "--out", str(tmp_path / "a")]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"wrote {tmp_path / 'a'}/jobs.csv, rounds.csv, summary.json"
    assert not list((tmp_path / "a").glob("*.png"))
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.endswith("summary.json, jct_cdf.png, busy_gpus.png")
    assert (tmp_path / "b" / "jct_cdf.png").exists() and (tmp_path / "b" / "busy_gpus.png").exists()
    assert main(args) == 0  # no --out: the summary only
    assert "wrote" not in capsys.readouterr().out


def test_cli_simulate_refuses_a_locality_penalty_that_is_not_a_number_or_a_mapping(
    tmp_path, capsys
):
    (tmp_path / "t.csv").write_text(TINY_TRACE)
    args = ["simulate", "--trace", str(tmp_path / "t.csv"), "--cluster", "2x4"]
    args += ["--correlated", "0.5", "--no-progress", "--no-plots", "--locality-penalty"]
    for value in ("[1.7]", '"1.7"', "fast"):
        with pytest.raises(SystemExit) as exc:
            main([*args, value])
        assert exc.value.code == 2
        assert "argument --locality-penalty: expected a" in capsys.readouterr().err
    assert main([*args, '{"rack": 2.0, "cluster": 3.0}']) == 0


# ---- the reproduce command on small grids ----------------------------------------------------


def _spy_run_sweep(monkeypatch, fake=None):
    """Record the keyword arguments ``palopt reproduce`` gives run_sweep (and run it, or
    ``fake``)."""
    from palopt.commands import simulate as command

    calls = []
    real = command.run_sweep

    def spy(spec, fn, **kwargs):
        calls.append({"spec": spec, **kwargs})
        return (fake or real)(spec, fn, **kwargs)

    monkeypatch.setattr(command, "run_sweep", spy)
    return calls


def test_cli_reproduce_fig13_runs_the_grid_and_the_model_asked_for(
    artifact_dir, tmp_path, monkeypatch, capsys
):
    calls = _spy_run_sweep(monkeypatch)
    args = ["reproduce", "fig13", "--data", str(artifact_dir), "--out", str(tmp_path)]
    args += ["--no-plots", "--no-progress", "--workers", "1", "--jobs", "1", "--loads", "8"]
    args += ["--seeds", "2", "--completion", "exact", "--restart-cost", "30", "--backfill"]
    assert main([*args, "--fixed-charge"]) == 0
    assert [(c["workers"], c["progress"]) for c in calls] == [(1, False)]
    model = "exact-restart30-backfill-fixed-charge"
    stem = f"fig13-{model}"
    runs = pd.read_csv(tmp_path / f"{stem}-runs.csv")
    assert len(runs) == 3 * 1 * 2 * 4  # schedulers x loads x seeds x placements
    assert sorted(set(runs.seed)) == [0, 1] and set(runs.load) == {8.0}
    assert set(runs.n_jobs) == {1} and set(runs.completion) == {"exact"}
    assert set(runs.restart_cost) == {30.0} and not runs.extra_jobs.any()
    assert runs["backfill"].all() and runs["fixed_charge"].all()  # pandas<3: .backfill is a method
    out = capsys.readouterr().out
    text = (tmp_path / f"{stem}.txt").read_text()
    assert out.startswith(text)  # the table printed is the table written
    parts = text.rstrip("\n").split("\n\n" + "fig13 (")
    assert len(parts) == 3  # one table per scheduler, a blank line apart
    heads = [line for line in text.splitlines() if line.startswith("fig13")]
    assert heads == [f"fig13 ({model} model), scheduler {s}" for s in ("fifo", "las", "srtf")]
    cells = tmp_path / f"{stem}-cells"
    assert out.endswith(
        f"\nwrote {tmp_path}/{stem}-runs.csv, {stem}.txt (24 runs; finished runs are kept in "
        f"{cells} and reused: --fresh reruns them)\n"
    )
    # workers and progress as given, or the defaults
    assert main([*args[:-1], "--fixed-charge", "--no-progress"]) == 0
    args = ["reproduce", "fig13", "--data", str(artifact_dir), "--out", str(tmp_path)]
    args += ["--no-plots", "--jobs", "1", "--loads", "8"]
    assert main(args) == 0
    assert [(c["workers"], c["progress"]) for c in calls[1:]] == [(1, False), (None, True)]
    assert calls[2]["spec"].grid["seed"] == (0,)  # one seed unless told


def test_cli_reproduce_fig10_runs_the_workloads_asked_for(artifact_dir, tmp_path, monkeypatch):
    from palopt.sweep import expand

    def fake(spec, fn, **kwargs):  # every placement 2 h, pal 1 h
        rows = [
            {**cell, "avg_jct_h": 1.0 if cell["placement"] == "pal" else 2.0}
            for cell in expand(spec)
        ]
        return pd.DataFrame(rows)

    calls = _spy_run_sweep(monkeypatch, fake)
    args = ["reproduce", "fig10", "--data", str(artifact_dir), "--out", str(tmp_path)]
    args += ["--no-plots", "--no-progress", "--workloads", "2-4,7"]
    assert main(args) == 0
    [call] = calls
    assert sorted({cell["workload"] for cell in expand(call["spec"])}) == [2, 3, 4, 7]
    runs = pd.read_csv(tmp_path / "fig10-compat-runs.csv")
    assert sorted(set(runs.workload)) == [2, 3, 4, 7]
    assert main([*args[:-2], "--workloads", "8"]) == 0  # 8 is a workload
    assert sorted(set(pd.read_csv(tmp_path / "fig10-compat-runs.csv").workload)) == [8]
    assert main(args[:-2]) == 0  # all eight by default
    assert sorted(set(pd.read_csv(tmp_path / "fig10-compat-runs.csv").workload)) == [*range(1, 9)]
    text = (tmp_path / "fig10-compat.txt").read_text()
    assert text.startswith("fig10 (compat model)\n") and "scheduler" not in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1-8", [1, 2, 3, 4, 5, 6, 7, 8]),
        ("5-5", [5]),
        ("3,1", [3, 1]),
        ("2-4,7", [2, 3, 4, 7]),
        ("8", [8]),
        ("1-9", "workloads are 1 to 8"),
        ("9", "workloads are 1 to 8"),
        ("4-2", "the range 4-2 runs backwards"),
        ("1-3,3", "3 is given twice"),
        ("2,1-2", "2 is given twice"),
        ("1-", "expected numbers like 1-8 or 1,3,6"),
    ],
)
def test_workload_lists(text, expected):
    from palopt.commands.simulate import _int_list

    if isinstance(expected, list):
        assert _int_list(text, "workloads", range(1, 9)) == expected
    else:
        with pytest.raises(InputError, match=f"^workloads = '{text}': {expected}"):
            _int_list(text, "workloads", range(1, 9))


def test_cli_reproduce_refuses_a_data_folder_without_the_cluster_profile(tmp_path, capsys):
    args = ["reproduce", "fig12", "--data", str(tmp_path), "--out", str(tmp_path / "r")]
    assert main([*args, "--no-plots", "--no-progress"]) == 2
    err = capsys.readouterr().err
    problem = "no sim-64gpu-cluster.csv in this directory"
    assert err == f"palopt: error: {InputError('data', str(tmp_path), problem)}\n"
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fig10", "--workloads", "9"], "workloads = '9'"),
        (["fig13", "--loads", "8,0"], "loads = '8,0'"),
        (["fig13", "--loads", "8,inf"], "loads = '8,inf'"),
        (["fig10", "--workers", "0"], "workers = 0"),
        (["fig10", "--restart-cost", "-1"], "restart_cost = -1.0"),
    ],
)
def test_cli_reproduce_fresh_keeps_the_finished_runs_after_bad_input(
    artifact_dir, tmp_path, capsys, args, message
):
    # --fresh deleted the finished runs, then found the input bad.
    model = "restart-1" if "--restart-cost" in args else "compat"
    kept = tmp_path / f"{args[0]}-{model}-cells" / "cells" / "done.json"
    kept.parent.mkdir(parents=True)
    kept.write_text("{}")
    base = ["reproduce", "--data", str(artifact_dir), "--out", str(tmp_path), "--no-progress"]
    assert main([*base, "--no-plots", "--fresh", *args]) == 2
    assert message in capsys.readouterr().err
    assert kept.exists()


def test_cli_reproduce_fresh_reruns_the_finished_runs(artifact_dir, tmp_path, monkeypatch):
    calls = _spy_run_sweep(monkeypatch)
    args = ["reproduce", "fig13", "--data", str(artifact_dir), "--out", str(tmp_path)]
    args += ["--no-plots", "--no-progress", "--workers", "1", "--jobs", "1", "--loads", "8"]
    assert main(args) == 0
    marker = tmp_path / "fig13-compat-cells" / "cells" / "marker"  # beside the stored runs
    marker.write_text("")
    assert main(args) == 0 and marker.exists()  # reused
    assert main([*args, "--fresh"]) == 0 and not marker.exists()
    assert len(calls) == 3 and len(pd.read_csv(tmp_path / "fig13-compat-runs.csv")) == 12


def test_cli_reproduce_fig13_defaults(artifact_dir, tmp_path, monkeypatch):
    from palopt.sweep import expand

    def fake(spec, fn, **kwargs):
        return pd.DataFrame([{**cell, "avg_jct_h": 1.0} for cell in expand(spec)])

    calls = _spy_run_sweep(monkeypatch, fake)
    args = ["reproduce", "fig13", "--data", str(artifact_dir), "--out", str(tmp_path)]
    assert main([*args, "--no-plots", "--no-progress"]) == 0
    cells = expand(calls[0]["spec"])
    assert sorted({cell["load"] for cell in cells}) == [8.0, 10.0, 12.0, 14.0]
    assert {cell["seed"] for cell in cells} == {0} and {cell["n_jobs"] for cell in cells} == {400}
    assert len(pd.read_csv(tmp_path / "fig13-compat-runs.csv")) == len(cells) == 48


def test_cli_simulate_defaults_are_the_artifacts_model(tmp_path, monkeypatch):
    seen = _spy_simulator(monkeypatch)
    (tmp_path / "t.csv").write_text(TINY_TRACE)
    args = ["simulate", "--trace", str(tmp_path / "t.csv"), "--correlated", "0.5"]
    assert main([*args, "--no-progress", "--no-plots", "--out", str(tmp_path / "run")]) == 0
    assert seen["cfg"] == SimConfig()
    assert seen["topo"].n_gpus == 64 and seen["policy"].name == "fifo"
    assert seen["solver"].name == "pal"
    settings = json.loads((tmp_path / "run" / "summary.json").read_text())["settings"]
    assert settings == {
        "trace": str(tmp_path / "t.csv"),
        "cluster": "16x4",
        "profile": "correlated:0.5",
        "placement": "pal",
        "placement_options": {},
        "scheduler": "fifo",
        "scheduler_options": {},
        "locality_penalty": 1.7,
        "round_s": 360.0,
        "completion": "round",
        "restart_cost_s": 0.0,
        "backfill": False,
        "extra_jobs": False,
        "fixed_charge": False,
        "seed": 0,
        "max_time_s": None,
        "time_limit": None,
        "check": False,
    }


def _simulated_profiles(monkeypatch):
    """The profiles :func:`simulate_cell` gives the simulator (which then runs as usual)."""
    from palopt.sim import experiments

    profiles = []
    real = experiments.simulate

    def spy(topo, profile, *rest):
        profiles.append(profile)
        return real(topo, profile, *rest)

    monkeypatch.setattr(experiments, "simulate", spy)
    return profiles


@pytest.mark.parametrize("suffix", ["json", "JSON"])
def test_simulate_cell_draws_a_measured_profile_with_the_cells_seed(tmp_path, monkeypatch, suffix):
    """A JSON profile larger than the cluster is drawn onto it with the cell's seed, whatever
    the case of its suffix (".JSON" was read as a CSV: every seed drew the same GPUs)."""
    from palopt.variability import VariabilityProfile, save_profile

    values = np.array([[1.0, 1.2, 1.1, 1.3, 1.5, 1.7, 0.9, 1.05]])
    gpus = tuple(f"g{i}" for i in range(8))
    save_profile(VariabilityProfile(("classC",), gpus, values), tmp_path / f"p.{suffix}")
    cell = {**_tiny(tmp_path), "profile": str(tmp_path / f"p.{suffix}")}
    profiles = _simulated_profiles(monkeypatch)
    for seed in (0, 1, 2, 0):
        assert simulate_cell({**cell, "seed": seed})["jobs"] == 1
    drawn = [p.charge.tolist() for p in profiles]
    assert drawn[0] == drawn[3]  # the same seed, the same GPUs
    assert len({str(d) for d in drawn[:3]}) > 1
    assert all(set(d[0]) <= set(values[0].tolist()) for d in drawn)


def test_a_traces_distribution_cell_draws_from_all_eight_workloads(tmp_path, artifact_dir):
    """``gpu_dist = "traces"`` draws GPU counts from the eight Sia-Philly workloads: a data
    folder lacking the last one is refused, naming ``data``, not silently drawn from seven."""
    (tmp_path / "traces").mkdir()
    for w in range(1, 8):
        name = f"sia-philly-workload-{w}.csv"
        (tmp_path / "traces" / name).write_bytes((artifact_dir / "traces" / name).read_bytes())
    cell = {**_tiny(tmp_path), "data": str(tmp_path), "gpu_dist": "traces", "load": 8.0}
    del cell["trace"]
    with pytest.raises(InputError, match="^data = .*: no such file$") as err:
        simulate_cell({**cell, "n_jobs": 2, "max_time": 60.0})
    assert str(err.value.value).endswith("sia-philly-workload-8.csv")


def test_simulate_cell_tiles_a_small_profile_with_the_cells_seed(tmp_path, monkeypatch):
    """A CSV profile of fewer servers than the cluster is tiled with whole servers, drawn with
    the cell's seed: the same seed draws the same servers, other seeds others."""
    cell = _tiny(tmp_path)
    (tmp_path / "p4.csv").write_text("PerfVar_classC\n1.0\n1.1\n1.2\n1.3\n")
    cell.update(profile=str(tmp_path / "p4.csv"), cluster="4x2")
    profiles = _simulated_profiles(monkeypatch)
    for seed in (0, 1, 2, 0):
        assert simulate_cell({**cell, "seed": seed})["jobs"] == 1
    drawn = [p.charge[0].tolist() for p in profiles]
    assert drawn[0] == drawn[3] and len({str(d) for d in drawn[:3]}) > 1
    for row in drawn:  # whole servers of the file, in their GPU order
        assert {tuple(row[i : i + 2]) for i in range(0, 8, 2)} <= {(1.0, 1.1), (1.2, 1.3)}


def test_prepare_digests_the_profile_so_an_edited_profile_runs_again(tmp_path):
    """A sweep's context (so every cell's id) changes when its profile file is edited, as when
    its trace is: results computed from the old profile are not reused."""
    from palopt.sim.experiments import prepare
    from palopt.sweep import SweepSpec

    cell = _tiny(tmp_path)
    spec = SweepSpec({"placement": ("pal",)}, {k: cell[k] for k in ("profile", "trace")})
    before = prepare(spec).context
    (tmp_path / "profile.csv").write_text("GPU_ID,PerfVar_classC,sf_classC\n0,2.0,2.0\n1,2,2\n")
    after = prepare(spec).context
    assert "inputs " in before and before != after


def test_fig13_sweep_defaults_to_the_papers_grid():
    """``fig13_sweep`` called with no grid gives the paper's: loads 8-14 jobs/h, FIFO, LAS and
    SRTF, the four placements, seed 0, on 64 x 4 GPUs with 300 s rounds."""
    from pathlib import Path

    from palopt.sim.experiments import fig13_sweep

    spec = fig13_sweep("data", Path("out"))
    assert spec.grid == {
        "scheduler": ("fifo", "las", "srtf"),
        "load": (8.0, 10.0, 12.0, 14.0),
        "seed": (0,),
        "placement": ("packed-sticky", "packed-nonsticky", "pmfirst", "pal"),
    }
    assert spec.fixed == {"data": "data", "cluster": "64x4", "round": 300.0}
