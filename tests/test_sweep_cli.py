"""``palopt sweep`` end to end on real simulations: local pool, resume, Ray, bad input."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from palopt.cli import main
from palopt.errors import InputError
from palopt.sim.experiments import CELL_KEYS


def grid_file(tmp_path: Path, artifact_dir: Path, placements: str) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(f"""
[sweep]
out = "out"
baseline = "packed-sticky"

[grid]
workload = [1]
placement = [{placements}]

[fixed]
data = "{artifact_dir}"
cluster = "16x4"
locality_penalty = 1.7
round = 360
check = true
""")
    return path


def test_sweep_runs_resumes_and_summarises(tmp_path, artifact_dir, capsys):
    grid = grid_file(tmp_path, artifact_dir, '"packed-sticky", "pal"')
    assert main(["sweep", str(grid), "--workers", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Improvement over packed-sticky" in out and "pal" in out
    assert out.startswith(f"2 runs; results in {tmp_path / 'out' / 'results.csv'}\n")
    assert "Improvement over packed-sticky by workload (1 - JCT / JCT_packed-sticky)" in out
    assert re.search(r"^  pal +16\.\d%", out, re.MULTILINE)  # 1 - 7.03 / 8.40
    assert (tmp_path / "out" / "summary.txt").read_text() == out.split("\n", 1)[1]
    table = pd.read_csv(tmp_path / "out" / "results.csv").set_index("placement")
    # The artifact's average JCTs for workload 1 (see tests/test_sim_artifact.py).
    assert table.loc["pal", "avg_jct_h"] == pytest.approx(7.028, rel=1e-3)
    assert table.loc["packed-sticky", "avg_jct_h"] == pytest.approx(8.401, rel=1e-3)
    cells = sorted((tmp_path / "out" / "cells").iterdir())
    stamps = [c.stat().st_mtime_ns for c in cells]
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 0
    assert [c.stat().st_mtime_ns for c in cells] == stamps  # finished cells are not rerun
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress", "--fresh"]) == 0
    assert sorted((tmp_path / "out" / "cells").iterdir()) == cells
    assert all(c.stat().st_mtime_ns > s for c, s in zip(cells, stamps, strict=True))


def test_sweep_on_ray_matches_local(tmp_path, artifact_dir, capsys):
    pytest.importorskip("ray")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    local = grid_file(tmp_path / "a", artifact_dir, '"pal", "packed-sticky"')
    remote = grid_file(tmp_path / "b", artifact_dir, '"pal", "packed-sticky"')
    assert main(["sweep", str(local), "--no-progress", "--workers", "1"]) == 0
    assert main(["sweep", str(remote), "--no-progress", "--engine", "ray"]) == 0
    timing = ["data", "wall_time_s"]  # where the data lives and how long it took may differ
    a = pd.read_csv(tmp_path / "a" / "out" / "results.csv").drop(columns=timing)
    b = pd.read_csv(tmp_path / "b" / "out" / "results.csv").drop(columns=timing)
    pd.testing.assert_frame_equal(a, b)


def test_sweep_bad_cells_exit_2(tmp_path, artifact_dir, capsys):
    grid = grid_file(tmp_path, artifact_dir, '"no-such-solver"')
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 2
    assert "no-such-solver" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[grid]\nworkload = [1]\ncolour = ['red']\n")
    assert main(["sweep", str(bad), "--workers", "1", "--no-progress"]) == 2
    assert "colour" in capsys.readouterr().err
    args = ["sweep", str(grid), "--address", "ray://head:10001", "--no-progress"]
    assert main(args) == 2
    assert "--address = 'ray://head:10001': is for --engine ray" in capsys.readouterr().err
    assert main(["sweep", str(grid), "--engine", "ray", "--workers", "2", "--no-progress"]) == 2
    assert "--workers = 2: is for --engine local" in capsys.readouterr().err  # was ignored


def test_a_sweep_resumes_from_any_folder(tmp_path, artifact_dir, monkeypatch, capsys):
    import os

    (tmp_path / "g").mkdir()
    grid = grid_file(tmp_path / "g", artifact_dir, '"packed-sticky"')
    relative = os.path.relpath(artifact_dir, grid.parent)  # a path the grid's folder resolves
    grid.write_text(grid.read_text().replace(f'"{artifact_dir}"', f'"{relative}"'))
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "g/grid.toml", "--workers", "1", "--no-progress"]) == 0
    assert "Average JCT" in capsys.readouterr().out  # the baseline alone: was a KeyError
    cells = sorted((grid.parent / "out" / "cells").iterdir())
    stamps = [c.stat().st_mtime_ns for c in cells]
    monkeypatch.chdir(grid.parent)
    assert main(["sweep", "grid.toml", "--workers", "1", "--no-progress"]) == 0
    # was run again: the cells' ids held the data path as seen from the folder run in
    assert sorted((grid.parent / "out" / "cells").iterdir()) == cells
    assert [c.stat().st_mtime_ns for c in cells] == stamps
    table = pd.read_csv(grid.parent / "out" / "results.csv")
    assert list(table["data"]) == [relative]  # as the grid gives it


def test_a_misspelt_baseline_is_refused_before_any_run(tmp_path, artifact_dir, capsys):
    grid = grid_file(tmp_path, artifact_dir, '"pal"')
    grid.write_text(grid.read_text().replace('"packed-sticky"', '"packd-sticky"'))
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 2  # was 0, no table
    assert "sweep.baseline = 'packd-sticky': unknown placement; known: " in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_baseline_outside_the_grid_is_refused_before_any_run(tmp_path, artifact_dir, capsys):
    grid = grid_file(tmp_path, artifact_dir, '"pal", "pmfirst"')
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 2  # was 0, no table
    err = capsys.readouterr().err
    assert "sweep.baseline = 'packed-sticky': not a placement of the grid (pal, pmfirst)" in err
    assert not (tmp_path / "out").exists()


def small_trace(folder: Path) -> None:
    (folder / "trace.csv").write_text(
        "job_id,num_gpus,submit_time,duration,model\n"
        "1,2,0,3600,vgg19\n2,4,0,3600,resnet50\n3,1,600,1800,vgg19\n"
    )


def test_a_baseline_named_with_its_back_end(tmp_path, artifact_dir, capsys):
    # "milp:highs" runs as a placement; as the baseline it was refused as unknown.
    small_trace(tmp_path)
    grid = tmp_path / "grid.toml"
    grid.write_text(
        '[sweep]\nout = "out"\nbaseline = "milp:highs"\n'
        '[grid]\nplacement = ["milp:highs", "pal"]\n'
        f'[fixed]\ntrace = "trace.csv"\ndata = "{artifact_dir}"\ncheck = true\n'
    )
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 0
    assert "Improvement over milp:highs" in capsys.readouterr().out


def test_runs_stopped_at_a_horizon_get_no_improvement_table(tmp_path, artifact_dir, capsys):
    # Their average JCTs are over the jobs each completed: pal's over fewer jobs than packed's
    # read as a 2,967% loss.
    grid = grid_file(tmp_path, artifact_dir, '"packed-sticky", "pal"')
    grid.write_text(grid.read_text() + "max_time = 7200\n")
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "2 runs left tracked jobs unfinished at the horizon (max_time)" in out
    assert "Improvement" not in out and not (tmp_path / "out" / "summary.txt").exists()
    assert (pd.read_csv(tmp_path / "out" / "results.csv")["unfinished"] > 0).all()


def test_a_single_unfinished_job_is_enough_to_withhold_the_improvement_table(
    tmp_path, artifact_dir, capsys
):
    """Runs that each left just one tracked job unfinished at max_time still get no improvement
    table: their average JCTs are over fewer jobs than the trace holds."""
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "job_id,num_gpus,submit_time,duration,model\n0,1,0,10,vgg19\n1,1,0,10000000,vgg19\n"
    )
    grid = tmp_path / "grid.toml"
    grid.write_text(f"""
[sweep]
out = "out"
baseline = "packed-sticky"

[grid]
placement = ["packed-sticky", "pal"]

[fixed]
trace = "trace.csv"
profile = "{artifact_dir / "sim-64gpu-cluster.csv"}"
cluster = "16x4"
max_time = 7200
""")
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "2 runs left tracked jobs unfinished at the horizon (max_time)" in out
    assert "Improvement" not in out and not (tmp_path / "out" / "summary.txt").exists()
    assert pd.read_csv(tmp_path / "out" / "results.csv")["unfinished"].tolist() == [1, 1]


def test_grids_in_two_folders_sharing_a_results_folder_do_not_share_cells(tmp_path, artifact_dir):
    # Each reads its own trace.csv; the cells, written alike, had one id, and the second grid
    # reported the first one's results as its own.
    for name, duration in (("a", 3600), ("b", 7200)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "trace.csv").write_text(
            f"job_id,num_gpus,submit_time,duration,model\n1,2,0,{duration},vgg19\n"
        )
        (tmp_path / name / "grid.toml").write_text(
            '[sweep]\nout = "../runs"\n[grid]\nplacement = ["pal"]\n'
            f'[fixed]\ntrace = "trace.csv"\ndata = "{artifact_dir}"\n'
        )
        assert main(["sweep", str(tmp_path / name / "grid.toml"), "--no-progress"]) == 0
    assert len(list((tmp_path / "runs" / "cells").iterdir())) == 2


def test_a_changed_default_runs_the_cells_again(tmp_path, artifact_dir, monkeypatch):
    small_trace(tmp_path)
    grid = tmp_path / "grid.toml"
    grid.write_text(
        '[sweep]\nout = "out"\n[grid]\nplacement = ["pal"]\n'
        f'[fixed]\ntrace = "trace.csv"\ndata = "{artifact_dir}"\n'
    )
    assert main(["sweep", str(grid), "--no-progress"]) == 0
    first = pd.read_csv(tmp_path / "out" / "results.csv")
    assert first.loc[0, "round"] == 360  # every parameter is in the table
    monkeypatch.setitem(CELL_KEYS, "round", 60.0)
    assert main(["sweep", str(grid), "--no-progress"]) == 0  # was: the 360 s result reused
    again = pd.read_csv(tmp_path / "out" / "results.csv")
    assert again.loc[0, "round"] == 60
    assert again.loc[0, "avg_jct_h"] < first.loc[0, "avg_jct_h"]
    assert len(list((tmp_path / "out" / "cells").iterdir())) == 2


def assert_refused(tmp_path, capsys, tables: str, message: str) -> None:
    """``palopt sweep`` of a grid file of ``tables`` (results in ``out``) exits 2 naming
    ``message``, before any cell ran."""
    grid = tmp_path / "grid.toml"
    grid.write_text(f'[sweep]\nout = "out"\n{tables}\n')
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 2
    assert f"grid.toml: {message}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "line, message",
    [
        ('placement = ["pal", "pall"]', "grid.placement = 'pall': unknown placement; known: "),
        ('placement = ["pal"]\nscheduler = ["fifo", "lass"]', "grid.scheduler = 'lass'"),
        ('placment = ["pal"]', "grid.placment = ['pal']: unknown parameter; known: "),
        ("seed = [0]\n[fixed]\nplacement_options = {depth = 2}", "pal.depth = 2: unknown option"),
    ],
)
def test_a_bad_placement_or_key_is_refused_before_any_cell_runs(tmp_path, capsys, line, message):
    # An unknown placement was found only when its cell ran, after the others had run.
    assert_refused(tmp_path, capsys, f"[grid]\n{line}", message)


@pytest.mark.parametrize(
    "lines, message",
    [
        ("[grid]\nround = [360, -1]\n[fixed]\nworkload = 1", "grid.round = -1: must be a finite"),
        ('[grid]\ncluster = ["16x4", "0x4"]\n[fixed]\nworkload = 1', "grid.cluster = '0x4': "),
        (
            '[grid]\nworkload = [1, 2]\n[fixed]\ngpu_dist = "philly"',
            "fixed.gpu_dist = 'philly': must be 'synergy' or 'traces'",
        ),
        (
            "[grid]\nworkload = [1, 9]\n[fixed]",
            "grid.workload = 9: the Sia-Philly workloads are 1 to 8",
        ),
        (
            "[grid]\nseed = [0, 1]\n[fixed]",
            "fixed.trace = None: a cell needs 'trace', 'workload' or",
        ),
    ],
)
def test_a_bad_value_is_refused_before_any_cell_runs(
    tmp_path, artifact_dir, capsys, lines, message
):
    # These were found only when their cell ran, after the others had run (with the cell's
    # values, not the table of the grid file that gave them).
    assert_refused(tmp_path, capsys, f'{lines}\ndata = "{artifact_dir}"', message)


def test_a_cell_with_two_traces_is_refused(tmp_path, artifact_dir, capsys):
    grid = grid_file(tmp_path, artifact_dir, '"packed-sticky"')
    grid.write_text(grid.read_text() + "load = 12\n")  # and workload 1: load was ignored
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 2
    assert "load = 12: a cell takes one of trace, workload and load; also workload" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    "line, message",
    [
        ('colour = "red"', "fixed.colour = 'red': unknown parameter; known: "),
        ('placement = "pall"', "fixed.placement = 'pall': unknown placement; known: "),
        ('trace = ""', "fixed.trace = '': an empty file name"),
    ],
)
def test_a_bad_fixed_parameter_is_named_in_the_fixed_table(tmp_path, capsys, line, message):
    assert_refused(tmp_path, capsys, f"[grid]\nseed = [0]\n[fixed]\n{line}", message)


def run_on_small_trace(tmp_path, capsys, text: str) -> str:
    """``palopt sweep`` of the grid file ``text`` beside :func:`small_trace`'s trace; its output."""
    small_trace(tmp_path)
    grid = tmp_path / "grid.toml"
    grid.write_text(text)
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 0
    return capsys.readouterr().out


def test_a_fixed_placement_can_be_the_baseline(tmp_path, artifact_dir, capsys):
    out = run_on_small_trace(
        tmp_path,
        capsys,
        '[sweep]\nout = "out"\nbaseline = "packed-sticky"\n[grid]\nseed = [0]\n'
        f'[fixed]\nplacement = "packed-sticky"\ntrace = "trace.csv"\ndata = "{artifact_dir}"\n',
    )
    assert out.startswith(f"1 runs; results in {tmp_path / 'out' / 'results.csv'}\n")
    assert "Average JCT (hours) by seed" in out


def test_a_grid_without_a_baseline_placement_gets_no_improvement_table(
    tmp_path, artifact_dir, capsys
):
    out = run_on_small_trace(
        tmp_path,
        capsys,
        '[sweep]\nout = "out"\n[grid]\nplacement = ["pal"]\nseed = [0, 1]\n'
        f'[fixed]\ntrace = "trace.csv"\ndata = "{artifact_dir}"\n',
    )
    assert "2 runs; results in" in out
    assert "no baseline placement in the grid (sweep.baseline): no improvement table" in out
    assert "Improvement" not in out and not (tmp_path / "out" / "summary.txt").exists()


def test_the_summary_has_a_row_per_value_of_the_other_axes(tmp_path, artifact_dir, capsys):
    # No sweep.baseline: the summary is over the one of BASELINES the grid runs.
    out = run_on_small_trace(
        tmp_path,
        capsys,
        '[sweep]\nout = "out"\n[grid]\nplacement = ["packed-sticky", "pal"]\nseed = [0, 1]\n'
        f'[fixed]\ntrace = "trace.csv"\ndata = "{artifact_dir}"\n',
    )
    assert out.startswith(f"4 runs; results in {tmp_path / 'out' / 'results.csv'}\n")
    assert "packed-nonsticky" not in out
    gains = out.split("Improvement over packed-sticky by seed (1 - JCT / JCT_packed-sticky)\n")
    rows = gains[1].split("\n\n")[0].splitlines()
    assert [row.split() for row in rows] == [
        ["placement", "pal"],
        ["cell"],
        ["0", "0.0%"],
        ["1", "0.0%"],
    ]
    assert (tmp_path / "out" / "summary.txt").read_text() == out.split("\n", 1)[1]


def test_an_edited_trace_runs_its_cells_again(tmp_path, artifact_dir, capsys):
    # A cell's id covered its parameters but not the files they name: after the trace was
    # edited, a rerun without --fresh reused the results of the old trace.
    trace = tmp_path / "trace.csv"
    lines = (artifact_dir / "traces" / "sia-philly-workload-1.csv").read_text().splitlines()
    trace.write_text("\n".join(lines[:21]) + "\n")
    grid = tmp_path / "grid.toml"
    grid.write_text(f"""
[sweep]
out = "out"

[grid]
placement = ["pal"]

[fixed]
trace = "trace.csv"
profile = "{artifact_dir / "sim-64gpu-cluster.csv"}"
cluster = "16x4"
""")

    def jct() -> float:
        assert main(["sweep", str(grid), "--no-progress"]) == 0
        capsys.readouterr()
        return float(pd.read_csv(tmp_path / "out" / "results.csv")["avg_jct_h"].iloc[0])

    before = jct()
    assert jct() == before  # unchanged files: the finished cell is reused
    header, *rows = trace.read_text().splitlines()
    longer = [
        ",".join([*r.split(",")[:3], str(10 * float(r.split(",")[3])), r.split(",")[4]])
        for r in rows
    ]
    trace.write_text("\n".join([header, *longer]) + "\n")
    fresh = jct()
    assert fresh > 5 * before  # the new trace's jobs run ten times as long
    assert len(list((tmp_path / "out" / "cells").iterdir())) == 2  # the old cell is kept apart


def test_a_sweep_never_writes_over_its_inputs(tmp_path, artifact_dir, capsys):
    # A trace where the results go, or a grid file named as the summary, was overwritten.
    (tmp_path / "out").mkdir()
    trace = tmp_path / "out" / "results.csv"
    trace.write_bytes((artifact_dir / "traces" / "sia-philly-workload-1.csv").read_bytes())
    grid = grid_file(tmp_path, artifact_dir, '"pal"')
    grid.write_text(grid.read_text().replace("workload = [1]", 'trace = ["out/results.csv"]'))
    before = trace.read_bytes()
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    # (the path is cut in the middle past 80 characters, as pytest's temporary ones may be)
    assert str(InputError("sweep.out", str(trace), "is an input file")) in err
    assert "out/results.csv': is an input file; it would be overwritten" in err
    assert trace.read_bytes() == before and not (tmp_path / "out" / "cells").exists()
    summary = tmp_path / "summary.txt"
    summary.write_text(grid.read_text().replace('out = "out"', 'out = "."'))
    assert main(["sweep", str(summary), "--workers", "1", "--no-progress"]) == 2
    assert str(InputError("sweep.out", str(summary), "is an input file")) in (
        capsys.readouterr().err
    )
