"""Metrics of a finished simulation: the summary, per-job and per-round tables, and plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from palopt.io import write_text
from palopt.sim.engine import DONE, SimResult

__all__ = [
    "summary",
    "job_table",
    "round_table",
    "write_outputs",
    "format_summary",
    "plot_run",
    "OUTPUT_FILES",
]


def _tracked_done(res: SimResult) -> np.ndarray:
    jt = res.jobs
    return np.flatnonzero(jt.tracked & (jt.status == DONE))


def summary(res: SimResult) -> dict[str, Any]:
    """Summary of the tracked jobs.

    Only tracked jobs that have completed count in the JCT, makespan and delay figures; the
    averages are NaN if there are none. A run stopped at its horizon (``SimConfig.max_time_s``)
    may leave tracked jobs unfinished: ``unfinished`` counts them, and its JCT figures then
    leave out the jobs that waited or ran longest.

    Parameters
    ----------
    res : SimResult

    Returns
    -------
    dict
        ``jobs`` (tracked jobs completed), ``unfinished`` (tracked jobs not completed),
        ``avg_jct_h``, ``median_jct_h``, ``p99_jct_h`` (hours), ``makespan_h`` (first
        submit to last completion), ``gpu_utilisation`` (GPU-seconds held by jobs, untracked
        extra jobs too, over the cluster's GPU-seconds, both over the makespan),
        ``avg_queueing_delay_h`` (submit to first start), ``preemptions``, ``migrations``,
        ``rounds`` (rounds simulated: rounds in which no job runs, waits or completes are
        skipped), ``round_s`` (round length in seconds), ``solver``, ``policy``,
        ``wall_time_s``.

    Examples
    --------
    Job ``a`` runs 2 rounds of 60 s on both GPUs; job ``b`` waits for it, then runs one round:

    >>> from palopt.topology import build_cluster
    >>> from palopt.sim.engine import SimConfig, simulate
    >>> from palopt.sim.profile import ClusterProfile
    >>> from palopt.sim.trace import TraceJob
    >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
    >>> trace = [TraceJob("a", 2, 0.0, 100.0, "m", "A", 1.0),
    ...          TraceJob("b", 1, 0.0, 30.0, "m", "A", 1.0)]
    >>> res = simulate(build_cluster(1, 1, 2), prof, trace, config=SimConfig(round_s=60))
    >>> s = summary(res)
    >>> s["jobs"], s["unfinished"], round(s["avg_jct_h"] * 3600), s["makespan_h"] * 3600
    (2, 0, 150, 180.0)
    >>> round(s["gpu_utilisation"], 3), round(s["avg_queueing_delay_h"] * 3600)
    (0.833, 60)
    """
    jt = res.jobs
    idx = _tracked_done(res)
    jct = (jt.finish[idx] - jt.submit[idx]) / 3600.0
    delay = (jt.first_start[idx] - jt.submit[idx]) / 3600.0
    end = float(jt.finish[idx].max()) if len(idx) else 0.0
    start = float(jt.submit[idx].min()) if len(idx) else 0.0
    # A round's GPUs are held from its start to the next round's, also by a job that completes
    # within it (exact completion); only the part of each round within the makespan counts.
    R = res.config.round_s
    held = sum(
        r.busy_gpus * max(0.0, min(r.time + R, end) - max(r.time, start)) for r in res.rounds
    )
    util = float(held / (res.n_gpus * (end - start))) if end > start else 0.0
    return {
        "solver": res.solver,
        "policy": res.policy,
        "jobs": len(idx),
        "unfinished": int(jt.tracked.sum()) - len(idx),
        "avg_jct_h": float(jct.mean()) if len(idx) else float("nan"),
        "median_jct_h": float(np.median(jct)) if len(idx) else float("nan"),
        "p99_jct_h": float(np.percentile(jct, 99)) if len(idx) else float("nan"),
        "makespan_h": (end - start) / 3600.0,
        "gpu_utilisation": util,
        "avg_queueing_delay_h": float(delay.mean()) if len(idx) else float("nan"),
        "preemptions": int(jt.preemptions[jt.tracked].sum()),
        "migrations": int(jt.migrations[jt.tracked].sum()),
        "rounds": len(res.rounds),
        "round_s": res.config.round_s,
        "wall_time_s": res.wall_time,
    }


def job_table(res: SimResult) -> pd.DataFrame:
    """One row per job admitted (at the start of the first round at or after its submit time;
    extra jobs included, marked ``tracked=False``).

    Parameters
    ----------
    res : SimResult

    Returns
    -------
    pandas.DataFrame
        In admission order, with columns ``job_id``, ``model``, ``class``, ``num_gpus``,
        ``tracked``, ``submit_s``, ``first_start_s``, ``finish_s``, ``jct_s``,
        ``queueing_delay_s`` (submit to first start), ``iterations``, ``iterations_done``,
        ``attained_s`` (seconds held: whole rounds, restart cost included), ``preemptions``
        and ``migrations``. Times are in seconds from the start of the simulation; NaN where
        not known yet.

    Examples
    --------
    >>> from palopt.topology import build_cluster
    >>> from palopt.sim.engine import SimConfig, simulate
    >>> from palopt.sim.profile import ClusterProfile
    >>> from palopt.sim.trace import TraceJob
    >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
    >>> trace = [TraceJob("a", 2, 0.0, 100.0, "m", "A", 1.0),
    ...          TraceJob("b", 1, 0.0, 30.0, "m", "A", 1.0)]
    >>> res = simulate(build_cluster(1, 1, 2), prof, trace, config=SimConfig(round_s=60))
    >>> print(job_table(res)[["job_id", "num_gpus", "first_start_s", "finish_s", "jct_s"]])
      job_id  num_gpus  first_start_s  finish_s  jct_s
    0      a         2            0.0     120.0  120.0
    1      b         1          120.0     180.0  180.0
    """
    jt = res.jobs
    return pd.DataFrame(
        {
            "job_id": [j.id for j in jt.jobs],
            "model": [j.model for j in jt.jobs],
            "class": [j.job_class for j in jt.jobs],
            "num_gpus": jt.num_gpus,
            "tracked": jt.tracked,
            "submit_s": jt.submit,
            "first_start_s": jt.first_start,
            "finish_s": jt.finish,
            "jct_s": jt.finish - jt.submit,
            "queueing_delay_s": jt.first_start - jt.submit,
            "iterations": jt.iters_total,
            "iterations_done": np.minimum(jt.iters_done, jt.iters_total),
            "attained_s": jt.attained_s,
            "preemptions": jt.preemptions,
            "migrations": jt.migrations,
        }
    )[jt.status > 0].reset_index(drop=True)


def round_table(res: SimResult) -> pd.DataFrame:
    """One row per simulated round.

    Parameters
    ----------
    res : SimResult

    Returns
    -------
    pandas.DataFrame
        The fields of :class:`~palopt.sim.engine.RoundRecord` as columns: ``round``, ``time``
        (seconds), ``busy_gpus``, ``running``, ``waiting``, ``arrived``, ``started``,
        ``completed``, ``preempted``, ``migrated``, ``solved`` (whether the solver ran) and
        ``solve_time`` (seconds).

    Examples
    --------
    >>> from palopt.topology import build_cluster
    >>> from palopt.sim.engine import SimConfig, simulate
    >>> from palopt.sim.profile import ClusterProfile
    >>> from palopt.sim.trace import TraceJob
    >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
    >>> trace = [TraceJob("a", 2, 0.0, 100.0, "m", "A", 1.0),
    ...          TraceJob("b", 1, 0.0, 30.0, "m", "A", 1.0)]
    >>> res = simulate(build_cluster(1, 1, 2), prof, trace, config=SimConfig(round_s=60))
    >>> print(round_table(res)[["round", "time", "busy_gpus", "running", "waiting"]])
       round   time  busy_gpus  running  waiting
    0      0    0.0          2        1        1
    1      1   60.0          2        1        1
    2      2  120.0          1        1        0
    3      3  180.0          0        0        0
    """
    return pd.DataFrame([r.__dict__ for r in res.rounds])


def format_summary(s: dict[str, Any]) -> str:
    """The summary as aligned text lines.

    Parameters
    ----------
    s : dict
        A summary as :func:`summary` makes it (``solver`` and ``policy`` included).

    Returns
    -------
    str
        Four lines, without a final newline; JCTs and delays in hours. Tracked jobs left
        unfinished at the horizon are named in the first line.

    Examples
    --------
    >>> s = {"solver": "pal", "policy": "fifo", "jobs": 2, "unfinished": 0, "rounds": 4,
    ...      "round_s": 60.0,
    ...      "wall_time_s": 0.01, "avg_jct_h": 0.0417, "median_jct_h": 0.0417,
    ...      "p99_jct_h": 0.0498, "makespan_h": 0.05, "gpu_utilisation": 0.833,
    ...      "avg_queueing_delay_h": 0.0167, "preemptions": 0, "migrations": 0}
    >>> print(format_summary(s))
    placement pal, scheduler fifo: 2 tracked jobs, 4 rounds of 60 s, simulated in 0.01 s
      JCT (h): avg 0.042  median 0.042  p99 0.050
      makespan 0.05 h, GPU utilisation 83.3%, avg queueing delay 0.017 h
      preemptions 0, migrations 0
    """
    return "\n".join(
        [
            f"placement {s['solver']}, scheduler {s['policy']}: {s['jobs']} tracked jobs"
            + (
                f" completed, {s['unfinished']} unfinished at the horizon (left out below)"
                if s["unfinished"]
                else ""
            )
            + f", {s['rounds']} rounds of {s['round_s']:g} s, "
            f"simulated in {s['wall_time_s']:.2f} s",
            f"  JCT (h): avg {s['avg_jct_h']:.3f}  median {s['median_jct_h']:.3f}  "
            f"p99 {s['p99_jct_h']:.3f}",
            f"  makespan {s['makespan_h']:.2f} h, "
            f"GPU utilisation {100 * s['gpu_utilisation']:.1f}%, "
            f"avg queueing delay {s['avg_queueing_delay_h']:.3f} h",
            f"  preemptions {s['preemptions']}, migrations {s['migrations']}",
        ]
    )


#: The files :func:`write_outputs` writes into its folder (the last two with ``plots``).
OUTPUT_FILES = ("jobs.csv", "rounds.csv", "summary.json", "jct_cdf.png", "busy_gpus.png")


def plot_run(res: SimResult, out_dir: Path) -> list[Path]:
    """JCT CDF and busy GPUs over time, as PNG files in ``out_dir``.

    The CDF covers the tracked jobs that completed. Needs matplotlib
    (``pip install 'palopt[plot]'``).

    Parameters
    ----------
    res : SimResult
    out_dir : Path
        An existing folder; ``jct_cdf.png`` and ``busy_gpus.png`` there are overwritten.

    Returns
    -------
    list of Path
        ``out_dir / "jct_cdf.png"`` and ``out_dir / "busy_gpus.png"``.

    Raises
    ------
    ImportError
        If matplotlib is missing.

    Examples
    --------
    >>> import tempfile
    >>> from palopt.topology import build_cluster
    >>> from palopt.sim.engine import SimConfig, simulate
    >>> from palopt.sim.profile import ClusterProfile
    >>> from palopt.sim.trace import TraceJob
    >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
    >>> trace = [TraceJob("a", 2, 0.0, 100.0, "m", "A", 1.0)]
    >>> res = simulate(build_cluster(1, 1, 2), prof, trace, config=SimConfig(round_s=60))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     [p.name for p in plot_run(res, Path(folder))]
    ['jct_cdf.png', 'busy_gpus.png']
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jt = res.jobs
    idx = _tracked_done(res)
    jct = np.sort((jt.finish[idx] - jt.submit[idx]) / 3600.0)
    paths = []
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.step(jct, np.arange(1, len(jct) + 1) / max(len(jct), 1), where="post")
    ax.set_xlabel("JCT (hours)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"JCT CDF: {res.solver}, {res.policy}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(out_dir / "jct_cdf.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    t = np.array([r.time for r in res.rounds]) / 3600.0
    ax.step(t, [r.busy_gpus for r in res.rounds], where="post", label="busy GPUs")
    ax.axhline(res.n_gpus, color="grey", ls="--", lw=0.8, label="cluster")
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("GPUs")
    ax.set_title("busy GPUs over time")
    ax.legend(loc="lower right")
    fig.tight_layout()
    paths.append(out_dir / "busy_gpus.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def write_outputs(
    res: SimResult, out_dir: str | Path, plots: bool = True, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Write ``jobs.csv``, ``rounds.csv``, ``summary.json`` and the plots; return the summary.

    Parameters
    ----------
    res : SimResult
    out_dir : str or Path
        Created (with its parents) if missing; files there of the same names are overwritten.
    plots : bool, default True
        Also write the plots of :func:`plot_run` (needs matplotlib).
    meta : dict, optional
        Settings of the run, stored under ``settings`` in the summary.

    Returns
    -------
    dict
        :func:`summary` of ``res``, with ``settings`` if ``meta`` was given: what
        ``summary.json`` holds (where a figure is NaN, the file has ``null``: strict JSON).
        ``jobs.csv`` is :func:`job_table` and ``rounds.csv`` :func:`round_table`.

    Examples
    --------
    >>> import tempfile
    >>> from palopt.topology import build_cluster
    >>> from palopt.sim.engine import SimConfig, simulate
    >>> from palopt.sim.profile import ClusterProfile
    >>> from palopt.sim.trace import TraceJob
    >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
    >>> trace = [TraceJob("a", 2, 0.0, 100.0, "m", "A", 1.0),
    ...          TraceJob("b", 1, 0.0, 30.0, "m", "A", 1.0)]
    >>> res = simulate(build_cluster(1, 1, 2), prof, trace, config=SimConfig(round_s=60))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     s = write_outputs(res, folder, plots=False, meta={"cluster": "1x2"})
    ...     sorted(p.name for p in Path(folder).iterdir())
    ['jobs.csv', 'rounds.csv', 'summary.json']
    >>> s["jobs"], s["settings"]
    (2, {'cluster': '1x2'})
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s = summary(res)
    if meta:
        s["settings"] = meta
    write_text(out / "jobs.csv", job_table(res).to_csv(index=False))
    write_text(out / "rounds.csv", round_table(res).to_csv(index=False))
    # NaN (no tracked job completed) is no JSON value: written as null.
    plain = {k: None if isinstance(v, float) and v != v else v for k, v in s.items()}
    write_text(out / "summary.json", json.dumps(plain, indent=1, allow_nan=False) + "\n")
    if plots:
        plot_run(res, out)
    return s
