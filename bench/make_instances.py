"""Regenerate the instances shipped in ``instances/`` from the PAL artifact's data.

Usage (from the project root)::

    python bench/make_instances.py [--data DIR] [--out instances]

Writes, deterministically (fixed seeds below):

- ``longhorn-32gpu.json``: 8 servers x 4 GPUs with the slowdowns of ``32gpu-variability.csv``
  (GPU ``i`` of the table on GPU ``i`` of the cluster), binned by the artifact's rule, a 1.7
  penalty across servers, and 16 jobs (4 of them running);
- ``longhorn-256gpu.json``: 2 racks x 32 servers x 4 GPUs with whole servers drawn from the
  Longhorn measurement files (ResNet-50 -> classA, BERT -> classB and classC, PageRank -> classD),
  binned by exact k-means with the 2% rule, penalties 1.7 across servers of a rack and 2.2
  across racks, and 64 jobs resampled from the Sia-Philly traces (12 of them running).
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from palopt.instance import Instance, Job
from palopt.io import data_dir, save_instance
from palopt.topology import Topology, build_cluster
from palopt.variability import assign_profile, build_instance, load_artifact_table, load_longhorn
from palopt.workloads import load_workloads

ROOT = Path(__file__).resolve().parent.parent
LICENCE = "MIT (PAL artifact, hal-uw/blox-pal; see LICENSE-pal-artifact.txt)"


def trace_jobs(data: Path) -> pd.DataFrame:
    """All jobs of the eight Sia-Philly traces: ``num_gpus`` and ``job_class``."""
    models = load_workloads()
    frames = [pd.read_csv(f) for f in sorted((data / "traces").glob("sia-philly-workload-*.csv"))]
    jobs = pd.concat(frames, ignore_index=True)
    return pd.DataFrame(
        {
            "num_gpus": jobs["num_gpus"].to_numpy(),
            "job_class": jobs["model"].map(lambda m: models.get(m).job_class).to_numpy(),
        }
    )


def draw_queue(
    rng: np.random.Generator,
    sizes: Sequence[int] | np.ndarray,
    classes: Sequence[str] | np.ndarray,
    topology: Topology,
    n_running: int,
) -> list[Job]:
    """Jobs ``j00, j01, ...``; the first ``n_running`` that fit get GPUs as running jobs.

    A running job of at most one server's GPUs sits on one random server with room; a larger
    one on whole random free servers (its GPUs the first of theirs).
    """
    free = np.ones(topology.n_gpus, dtype=bool)
    per_server = int(topology.server_sizes.max())
    jobs = []
    for i, (n, cls) in enumerate(zip(sizes, classes, strict=True)):
        current: tuple[int, ...] = ()
        if i < n_running:
            starts, sizes_s = topology.server_start[:-1], topology.server_sizes
            room = np.add.reduceat(free, starts)
            if n <= per_server:
                ok = np.flatnonzero(room >= n)
                if len(ok):
                    s = int(rng.choice(ok))
                    gpus = np.flatnonzero(free[starts[s] : starts[s] + sizes_s[s]]) + starts[s]
                    current = tuple(sorted(int(g) for g in rng.choice(gpus, n, replace=False)))
            else:
                whole = np.flatnonzero(room == sizes_s)
                need = -(-n // per_server)
                if len(whole) >= need:
                    servers = rng.choice(whole, need, replace=False)
                    gpus = np.concatenate(
                        [np.arange(starts[s], starts[s] + sizes_s[s]) for s in sorted(servers)]
                    )
                    current = tuple(int(g) for g in gpus[:n])
            free[list(current)] = False
        jobs.append(Job(f"j{i:02d}", int(n), str(cls), 1.0, current))
    return jobs


def longhorn_32gpu(data: Path) -> Instance:
    """The 32-GPU instance (see the module docstring)."""
    topo = build_cluster(racks=1, servers_per_rack=8, gpus_per_server=4)
    profile = assign_profile(
        load_artifact_table(data / "variability" / "32gpu-variability.csv"), topo, seed=None
    )
    rng = np.random.default_rng(32)
    mix = trace_jobs(data)["job_class"].value_counts(normalize=True).sort_index()
    sizes = rng.choice([1, 2, 4, 8], size=16, p=[0.6, 0.15, 0.15, 0.1])
    classes = rng.choice(mix.index.to_numpy(), size=16, p=mix.to_numpy())
    queue = draw_queue(rng, sizes, classes, topo, n_running=4)
    return build_instance(profile, topo, 1.7, queue, method="artifact")


def longhorn_256gpu(data: Path) -> Instance:
    """The 256-GPU instance (see the module docstring)."""
    topo = build_cluster(racks=2, servers_per_rack=32, gpus_per_server=4)
    profile = assign_profile(
        load_longhorn(data / "variability"), topo, seed=256, missing="sample", by="server"
    )
    rng = np.random.default_rng(256)
    trace = trace_jobs(data)
    rows = trace.iloc[rng.choice(len(trace), size=64, replace=True)]
    queue = draw_queue(
        rng, rows["num_gpus"].to_numpy(), rows["job_class"].to_numpy(), topo, n_running=12
    )
    return build_instance(
        profile, topo, {"server": 1.0, "rack": 1.7, "cluster": 2.2}, queue, method="kmeans"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Write the instances and the artifact's licence."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=data_dir() / "pal-artifact",
        help="the pal-artifact data directory (default: $PALOPT_DATA/pal-artifact, else "
        "../shared/data/pal-artifact beside the checkout)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "instances")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.data / "LICENSE.txt", args.out / "LICENSE-pal-artifact.txt")
    save_instance(
        longhorn_32gpu(args.data),
        args.out / "longhorn-32gpu.json",
        name="longhorn-32gpu",
        source="PAL artifact (hal-uw/blox-pal) variability/32gpu-variability.csv: 32 TACC "
        "Longhorn V100 GPUs, PerfVar_classA..D; levels by the artifact's binning rule",
        licence=LICENCE,
        description="8 servers x 4 GPUs, penalty 1.7 across servers, 16 jobs (4 running) "
        "drawn with seed 32; regenerate: python bench/make_instances.py",
    )
    save_instance(
        longhorn_256gpu(args.data),
        args.out / "longhorn-256gpu.json",
        name="longhorn-256gpu",
        source="PAL artifact (hal-uw/blox-pal) variability/{resnet,bert,pagerank}-longhorn-agg"
        ".csv: per-GPU median run, normalised to the median GPU, joined on "
        "cabinet-node-device; 64 whole measured servers drawn with seed 256 "
        "(by='server', missing='sample'); levels "
        "by exact 1-D k-means, 2% rule",
        licence=LICENCE,
        description="2 racks x 32 servers x 4 GPUs, penalties 1.7 across servers, 2.2 across "
        "racks; 64 jobs resampled from the Sia-Philly traces (12 running) with "
        "seed 256; regenerate: python bench/make_instances.py",
    )
    print(f"wrote {args.out}/longhorn-32gpu.json, {args.out}/longhorn-256gpu.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
