"""``palopt sweep`` end to end on real simulations: local pool, resume, Ray, bad input."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from palopt.cli import main


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
""")
    return path


def test_sweep_runs_resumes_and_summarises(tmp_path, artifact_dir, capsys):
    grid = grid_file(tmp_path, artifact_dir, '"packed-sticky", "pal"')
    assert main(["sweep", str(grid), "--workers", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Improvement over packed-sticky" in out and "pal" in out
    table = pd.read_csv(tmp_path / "out" / "results.csv").set_index("placement")
    # The artifact's average JCTs for workload 1 (see tests/test_sim_artifact.py).
    assert table.loc["pal", "avg_jct_h"] == pytest.approx(7.028, rel=0.01)
    assert table.loc["packed-sticky", "avg_jct_h"] == pytest.approx(8.401, rel=0.01)
    cells = sorted((tmp_path / "out" / "cells").iterdir())
    stamps = [c.stat().st_mtime_ns for c in cells]
    assert main(["sweep", str(grid), "--workers", "1", "--no-progress"]) == 0
    assert [c.stat().st_mtime_ns for c in cells] == stamps  # finished cells are not rerun


def test_sweep_on_ray_matches_local(tmp_path, artifact_dir, capsys):
    pytest.importorskip("ray")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    local = grid_file(tmp_path / "a", artifact_dir, '"pal", "pmfirst"')
    remote = grid_file(tmp_path / "b", artifact_dir, '"pal", "pmfirst"')
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
