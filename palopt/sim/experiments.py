"""The PAL paper's simulation experiments (Fig 10, 12, 13), run in a process pool.

Each experiment is a list of independent :class:`RunSpec`; :func:`run_many` runs them in a
process pool (with a progress bar when ``tqdm`` is installed) and returns one summary row per
run. :func:`improvement_table` turns rows into the paper-style table: average JCT per workload
and placement, and the geomean improvement over a baseline.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from palopt.errors import InputError
from palopt.sim.engine import SimConfig, simulate
from palopt.sim.metrics import summary
from palopt.sim.profile import ClusterProfile, load_profile
from palopt.sim.trace import (
    SYNERGY_GPU_COUNTS,
    TraceJob,
    gpu_count_distribution,
    load_trace,
    synthetic_trace,
)
from palopt.topology import Topology, parse_shape

__all__ = [
    "FIG10_PLACEMENTS",
    "RunSpec",
    "fig10_specs",
    "fig12_specs",
    "fig13_specs",
    "run_one",
    "run_many",
    "improvement_table",
    "plot_normalised",
    "format_tables",
]

FIG10_PLACEMENTS = ("packed-sticky", "packed-nonsticky", "random-sticky", "random-nonsticky",
                    "pmfirst", "pal")
BASELINES = ("packed-sticky", "packed-nonsticky")


@dataclass(frozen=True)
class RunSpec:
    """One simulation to run.

    Parameters
    ----------
    data_dir : str
        The ``pal-artifact`` data directory.
    solver, policy : str
    config : SimConfig
    workload : int, optional
        Sia-Philly trace number (1-8); else a synthetic Fig 13 trace is generated.
    cluster : str
        Shape, e.g. ``16x4``.
    load : float
        Jobs per hour (synthetic trace).
    n_jobs : int
        Tracked jobs of the synthetic trace; as many again arrive before them (warm-up) and
        after them (to keep the cluster loaded), untracked.
    gpu_dist : {"synergy", "traces"}
        GPU counts of the synthetic trace: the artifact's Synergy split, or the empirical
        distribution of the eight Sia-Philly traces.
    trace_seed, profile_seed : int
        Seeds of the synthetic trace and of the tiled profile (clusters larger than 64 GPUs).
    fixed_charge : bool
        Charge the ranked (binned) slowdown instead of the raw one.
    labels : dict
        Extra columns for the result row.
    """

    data_dir: str
    solver: str
    policy: str
    config: SimConfig
    workload: int | None = None
    cluster: str = "16x4"
    load: float = 0.0
    n_jobs: int = 0
    trace_seed: int = 0
    profile_seed: int = 0
    fixed_charge: bool = False
    gpu_dist: str = "synergy"
    labels: dict[str, Any] = field(default_factory=dict)


@lru_cache(maxsize=8)
def _cluster(data_dir: str, shape: str, profile_seed: int) -> tuple[Topology, ClusterProfile]:
    topo = parse_shape(shape)
    base_topo = parse_shape("16x4")
    profile = load_profile(Path(data_dir) / "sim-64gpu-cluster.csv", base_topo)
    if topo.n_gpus != base_topo.n_gpus:
        per_server = int(topo.server_sizes[0])
        profile = profile.tiled(topo.n_gpus, per_server, profile_seed)
    return topo, profile


@lru_cache(maxsize=16)
def _trace(data_dir: str, workload: int) -> tuple[TraceJob, ...]:
    return load_trace(Path(data_dir) / "traces" / f"sia-philly-workload-{workload}.csv")


def _spec_trace(spec: RunSpec, n_gpus: int) -> tuple[TraceJob, ...]:
    if spec.workload is not None:
        return _trace(spec.data_dir, spec.workload)
    if spec.gpu_dist == "traces":
        sizes, probs = gpu_count_distribution([_trace(spec.data_dir, w) for w in range(1, 9)])
    elif spec.gpu_dist == "synergy":
        sizes, probs = SYNERGY_GPU_COUNTS
    else:
        raise InputError("gpu_dist", spec.gpu_dist, "must be 'synergy' or 'traces'")
    n = spec.n_jobs
    return synthetic_trace(3 * n, spec.load, spec.trace_seed, sizes, probs, max_gpus=n_gpus,
                           tracked=(n, 2 * n))


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Run one spec; returns its labels plus the summary (see :func:`palopt.sim.summary`)."""
    topo, profile = _cluster(spec.data_dir, spec.cluster, spec.profile_seed)
    if spec.fixed_charge:
        profile = profile.fixed()
    res = simulate(topo, profile, _spec_trace(spec, topo.n_gpus), spec.solver, spec.policy,
                   spec.config)
    return {**spec.labels, **summary(res)}


def run_many(specs: Sequence[RunSpec], workers: int | None = None, progress: bool = True,
             runner: Callable[[RunSpec], dict[str, Any]] = run_one) -> list[dict[str, Any]]:
    """Run specs in a process pool (``workers=1``: in this process); rows in spec order.

    Parameters
    ----------
    specs : sequence of RunSpec
    workers : int, optional
        Processes (default: the CPU count).
    progress : bool
        Show a progress bar (tqdm) on stderr.
    """
    workers = workers or os.cpu_count() or 1
    bar = _bar(len(specs), progress)
    rows: list[dict[str, Any]] = []
    try:
        if workers == 1 or len(specs) == 1:
            for spec in specs:
                rows.append(runner(spec))
                bar(1)
            return rows
        with ProcessPoolExecutor(max_workers=min(workers, len(specs))) as pool:
            for row in pool.map(runner, specs, chunksize=1):
                rows.append(row)
                bar(1)
        return rows
    finally:
        bar(0, close=True)


def _bar(total: int, enabled: bool) -> Callable[..., None]:
    if not enabled:
        return lambda n, close=False: None
    try:
        from tqdm import tqdm
    except ImportError:
        return lambda n, close=False: None
    bar = tqdm(total=total, unit="run", leave=False)

    def update(n: int, close: bool = False) -> None:
        if n:
            bar.update(n)
        if close:
            bar.close()

    return update


def fig10_specs(data_dir: str | Path, workloads: Iterable[int] = range(1, 9),
                placements: Sequence[str] = FIG10_PLACEMENTS,
                config: SimConfig | None = None, model: str = "compat") -> list[RunSpec]:
    """Fig 10: Sia-Philly workloads, FIFO, P = 1.7, 64 GPUs, R = 360 s."""
    cfg = config or SimConfig(round_s=360.0, penalties=1.7)
    return [RunSpec(str(data_dir), p, "fifo", cfg, workload=w,
                    labels={"workload": w, "placement": p, "model": model})
            for w in workloads for p in placements]


def fig12_specs(data_dir: str | Path, penalties: Sequence[float] = (1.0, 1.5, 2.0, 2.5, 3.0),
                workload: int = 6,
                placements: Sequence[str] = ("packed-sticky", "packed-nonsticky", "pmfirst", "pal"),
                config: SimConfig | None = None) -> list[RunSpec]:
    """Fig 12: workload 6 with the locality penalty swept (placement and charge alike)."""
    cfg = config or SimConfig(round_s=360.0)
    return [RunSpec(str(data_dir), p, "fifo", replace(cfg, penalties=float(pen)),
                    workload=workload, labels={"penalty": float(pen), "placement": p})
            for pen in penalties for p in placements]


def fig13_specs(data_dir: str | Path, loads: Sequence[float] = (8.0, 10.0, 12.0, 14.0),
                policies: Sequence[str] = ("fifo", "las", "srtf"),
                placements: Sequence[str] = ("packed-sticky", "packed-nonsticky", "pmfirst", "pal"),
                n_jobs: int = 200, seeds: Sequence[int] = (0,),
                config: SimConfig | None = None, gpu_dist: str = "synergy") -> list[RunSpec]:
    """Fig 13/15/16: 256 GPUs (64 x 4), synthetic class-A trace, R = 300 s, P = 1.7."""
    cfg = config or SimConfig(round_s=300.0, penalties=1.7)
    return [RunSpec(str(data_dir), p, pol, cfg, cluster="64x4", load=float(load),
                    n_jobs=n_jobs, trace_seed=seed, profile_seed=seed, gpu_dist=gpu_dist,
                    labels={"load": float(load), "policy": pol, "placement": p, "seed": seed})
            for pol in policies for load in loads for seed in seeds for p in placements]


def improvement_table(rows: Sequence[dict[str, Any]], by: str,
                      baselines: Sequence[str] = BASELINES) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Average JCT per ``by`` value and placement, and improvements over each baseline.

    Returns
    -------
    jct : DataFrame
        Rows: ``by`` values; columns: placements; values: average JCT (hours).
    gains : DataFrame
        One row per (baseline, placement): geomean, min and max improvement over the baseline,
        where improvement = ``1 - jct / jct_baseline`` and the geomean improvement is
        ``1 - geomean(jct / jct_baseline)`` (the artifact's normalisation).
    """
    df = pd.DataFrame(rows)
    jct = df.pivot_table(index=by, columns="placement", values="avg_jct_h", aggfunc="mean")
    out = []
    for base in baselines:
        if base not in jct.columns:
            continue
        norm = jct.div(jct[base], axis=0)
        for p in jct.columns:
            if p == base:
                continue
            ratio = norm[p].to_numpy(dtype=np.float64)
            out.append({"baseline": base, "placement": p,
                        "geomean_gain": 1.0 - float(np.exp(np.log(ratio).mean())),
                        "min_gain": 1.0 - float(ratio.max()),
                        "max_gain": 1.0 - float(ratio.min())})
    return jct, pd.DataFrame(out)


def format_tables(jct: pd.DataFrame, gains: pd.DataFrame, by: str) -> str:
    """The paper-style text table: average JCTs, the improvement over each baseline per
    ``by`` value, and its geomean, min and max."""
    lines = [f"Average JCT (hours) by {by}", jct.to_string(float_format=lambda v: f"{v:.3f}"), ""]
    for base in gains["baseline"].unique():
        gain = 1.0 - jct.drop(columns=base).div(jct[base], axis=0)
        lines += [f"Improvement over {base} by {by} (1 - JCT / JCT_{base})",
                  gain.to_string(float_format=lambda v: f"{100 * v:.1f}%"), ""]
    for base, part in gains.groupby("baseline", sort=False):
        lines.append(f"Improvement over {base}: geomean (min .. max)")
        for _, r in part.iterrows():
            lines.append(f"  {r['placement']:<18} {100 * r['geomean_gain']:6.1f}%  "
                         f"({100 * r['min_gain']:.1f}% .. {100 * r['max_gain']:.1f}%)")
    return "\n".join(lines)


def plot_normalised(jct: pd.DataFrame, base: str, path: Path, title: str) -> Path:
    """Bar chart of average JCT normalised to ``base`` per ``by`` value, with the geomean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if base not in jct.columns:
        raise InputError("baseline", base, "not among the placements run")
    norm = jct.div(jct[base], axis=0)
    geo = np.exp(np.log(norm).mean())
    norm.loc["geomean"] = geo
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(norm) + 2), 3.5))
    width = 0.8 / len(norm.columns)
    x = np.arange(len(norm))
    for k, col in enumerate(norm.columns):
        ax.bar(x + (k - (len(norm.columns) - 1) / 2) * width, norm[col], width, label=col)
    ax.set_xticks(x, [str(i) for i in norm.index])
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_ylabel(f"avg JCT / {base}")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path

