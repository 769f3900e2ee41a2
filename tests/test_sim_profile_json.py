"""The simulator accepts the profile files that ``palopt profile import`` writes."""

from __future__ import annotations

import json

import numpy as np

from palopt.cli import main
from palopt.sim import load_profile
from palopt.topology import build_cluster, parse_shape
from palopt.variability import VariabilityProfile, save_profile


def test_imported_profile_drives_a_simulation(tmp_path, artifact_dir, capsys):
    prof = tmp_path / "resnet.json"
    src = artifact_dir / "variability" / "resnet-longhorn-agg.csv"
    assert (
        main(
            [
                "profile",
                "import",
                str(src),
                "--id",
                "cabinet,node,device",
                "--value",
                "perf",
                "--class",
                "classA",
                "-o",
                str(prof),
            ]
        )
        == 0
    )
    topo = parse_shape("4x4")
    one = load_profile(prof, topo, seed=3)
    assert one.classes == ("classA",) and one.charge.shape == (1, 16)
    assert np.array_equal(one.charge, load_profile(prof, topo, seed=3).charge)  # seeded
    assert not np.array_equal(one.charge, load_profile(prof, topo, seed=4).charge)
    assert len(np.unique(one.rank)) < len(np.unique(one.charge))  # ranked by binned levels
    art = load_profile(prof, topo, seed=3, binning="artifact")
    assert np.array_equal(art.charge, one.charge)
    assert not np.array_equal(art.rank, one.rank)  # the binning asked for, not kmeans
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "job_id,num_gpus,submit_time,duration,model\n"
        "0,2,0,1000,resnet50\n1,4,10,3000,resnet50\n2,1,20,500,resnet50\n"
    )
    out = tmp_path / "run"
    assert (
        main(
            [
                "simulate",
                "--trace",
                str(trace),
                "--cluster",
                "4x4",
                "--profile",
                str(prof),
                "--placement",
                "pal",
                "--out",
                str(out),
                "--no-plots",
                "--check",
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs"] == 3 and summary["avg_jct_h"] > 0


def test_an_unmeasured_class_counts_as_the_median_gpu(tmp_path):
    # Not dropped: only gpu g1 measured both classes, too few for two GPUs.
    values = np.array([[1.0, 1.2], [np.nan, 1.1]])
    save_profile(VariabilityProfile(("A", "B"), ("g0", "g1"), values), tmp_path / "p.json")
    profile = load_profile(tmp_path / "p.json", build_cluster(1, 1, 2), seed=0)
    assert sorted(zip(*profile.charge.tolist(), strict=True)) == [(1.0, 1.0), (1.2, 1.1)]


def test_a_profile_of_the_clusters_own_gpus_fills_an_unmeasured_class(tmp_path):
    """A JSON profile naming exactly the cluster's GPUs, one class unmeasured on one GPU, still
    loads: that GPU counts as the median GPU (1.0) for the class, not as a missing value."""
    topo = build_cluster(1, 1, 2)
    values = np.array([[1.0, 1.2], [np.nan, 1.1]])
    save_profile(VariabilityProfile(("A", "B"), topo.gpu_ids, values), tmp_path / "p.json")
    profile = load_profile(tmp_path / "p.json", topo, seed=0)
    assert np.isfinite(profile.charge).all() and np.isfinite(profile.rank).all()
    assert sorted(zip(*profile.charge.tolist(), strict=True)) == [(1.0, 1.0), (1.2, 1.1)]


def test_a_profile_too_small_for_the_cluster_names_a_command_that_draws_it(tmp_path, capsys):
    # simulate has no --replace: the refusal pointed at one ("--replace in the CLI"). It names
    # the command that has it, and the profile that command writes drives the simulation.
    gpus = tuple(f"g{i}" for i in range(4))
    values = np.array([[1.0, 1.1, 1.2, 0.9]])
    save_profile(VariabilityProfile(("classA",), gpus, values), tmp_path / "p.json")
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpus,submit_time,duration,model\n0,2,0,1000,resnet50\n")
    args = ["simulate", "--trace", str(trace), "--cluster", "2x4", "--seed", "1"]
    args += ["--no-progress", "--no-plots", "--out", str(tmp_path / "run")]
    assert main([*args, "--profile", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "palopt profile assign --seed N --replace" in err
    assigned = tmp_path / "assigned.json"
    draw = ["profile", "assign", str(tmp_path / "p.json"), "--cluster", "2x4"]
    assert main([*draw, "--seed", "1", "--replace", "-o", str(assigned)]) == 0
    assert main([*args, "--profile", str(assigned)]) == 0
