"""Summaries of benchmark rows: the terminal table, the CSV files and the gap plot."""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from palopt.bench.runner import Row
from palopt.io import write_text
from palopt.result import Status

__all__ = ["summarise", "format_table", "write_csv", "plot_gaps"]


def summarise(rows: list[Row]) -> list[dict[str, Any]]:
    """Per (family, solver): gap (median, p95, max; NaN if no gap compares), time (median, p95),
    share proven optimal. Rows whose gap is NaN (the solver placed another number of jobs than
    the admitted prefix) count in the times and the shares, not in the gaps.

    Parameters
    ----------
    rows : list of Row
        Rows from :func:`palopt.bench.runner.run_bench`, in any order.

    Returns
    -------
    list of dict
        One dict per (family, solver), with the keys ``family``, ``n_gpus``,
        ``gpus_per_server``, ``load``, ``profile`` (the family's fields), ``solver`` (the
        solver's label), ``instances`` (the number of rows), ``gap_median``, ``gap_p95``,
        ``gap_max`` (the gaps as fractions: 0.05 is 5%), ``time_median``, ``time_p95`` (the
        wall times in seconds), ``share_optimal`` (the share of rows with status ``optimal``,
        0 to 1) and ``reference`` (the reference kinds seen: ``"bound"``, ``"optimum"`` or
        ``"bound/optimum"``). Sorted by cluster size, GPUs per server, load, profile and solver.

    Examples
    --------
    >>> def row(seed, solver, status, objective, wall_time, gap):
    ...     return Row("8g-4ps-100%-synthetic", 8, 4, 1.0, "synthetic", seed, 3, 3, solver,
    ...                status, objective, None, wall_time, 10.0, "optimum", gap)
    >>> rows = [row(0, "greedy", "heuristic", 10.5, 0.01, 0.05),
    ...         row(1, "greedy", "heuristic", 11.5, 0.03, 0.15),
    ...         row(0, "cpsat", "optimal", 10.0, 0.5, 0.0)]
    >>> [(d["solver"], d["instances"], d["gap_median"], d["gap_max"], d["share_optimal"])
    ...  for d in summarise(rows)]
    [('cpsat', 1, 0.0, 0.0, 1.0), ('greedy', 2, 0.1, 0.15, 0.0)]
    """
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r.family, r.solver)].append(r)
    out = []
    for (family, solver), rs in groups.items():
        gaps = np.array([r.gap for r in rs if not math.isnan(r.gap)])
        times = np.array([r.wall_time for r in rs])
        kinds = sorted({r.reference_kind for r in rs})
        out.append(
            {
                "family": family,
                "n_gpus": rs[0].n_gpus,
                "gpus_per_server": rs[0].gpus_per_server,
                "load": rs[0].load,
                "profile": rs[0].profile,
                "solver": solver,
                "instances": len(rs),
                "gap_median": float(np.median(gaps)) if len(gaps) else math.nan,
                "gap_p95": float(np.percentile(gaps, 95)) if len(gaps) else math.nan,
                "gap_max": float(gaps.max()) if len(gaps) else math.nan,
                "time_median": float(np.median(times)),
                "time_p95": float(np.percentile(times, 95)),
                "share_optimal": float(np.mean([r.status == Status.OPTIMAL for r in rs])),
                "reference": "/".join(kinds),
            }
        )
    out.sort(
        key=lambda d: (d["n_gpus"], d["gpus_per_server"], d["load"], d["profile"], d["solver"])
    )
    return out


def format_table(summary: list[dict[str, Any]]) -> str:
    """The summary as an aligned text table (gaps in %, times in s).

    Parameters
    ----------
    summary : list of dict
        Records from :func:`summarise`, one table line each, in the given order.

    Returns
    -------
    str
        A header line, a line of dashes, then one line per record: family, solver, number of
        instances, gap median, p95 and max (``n/a`` if NaN), time median and p95, share proven
        optimal (%), and the reference kinds. No newline at the end.

    Examples
    --------
    >>> summary = [{"family": "8g-4ps-100%-synthetic", "solver": "greedy", "instances": 2,
    ...             "gap_median": 0.05, "gap_p95": 0.095, "gap_max": float("nan"),
    ...             "time_median": 0.01, "time_p95": 0.03, "share_optimal": 0.5,
    ...             "reference": "optimum"}]
    >>> lines = format_table(summary).splitlines()
    >>> lines[0].split()[:6]
    ['family', 'solver', 'n', 'gap', 'med', 'gap']
    >>> lines[2].split()[:6]
    ['8g-4ps-100%-synthetic', 'greedy', '2', '5.00%', '9.50%', 'n/a']
    >>> lines[2].split()[6:]
    ['0.01', '0.03', '50%', 'optimum']
    """
    head = (
        f"{'family':<24} {'solver':<18} {'n':>3} {'gap med':>8} {'gap p95':>8} "
        f"{'gap max':>8} {'t med':>7} {'t p95':>7} {'opt':>5}  ref"
    )
    lines = [head, "-" * len(head)]

    def percent(gap: float) -> str:
        if math.isnan(gap):
            return f"{'n/a':>8}"
        return f"{round(100 * gap, 2) + 0.0:>7.2f}%"  # + 0.0: a gap of -1e-16 is 0.00%, not -0.00%

    for d in summary:
        lines.append(
            f"{d['family']:<24} {d['solver']:<18} {d['instances']:>3} "
            f"{percent(d['gap_median'])} {percent(d['gap_p95'])} "
            f"{percent(d['gap_max'])} {d['time_median']:>7.2f} {d['time_p95']:>7.2f} "
            f"{100 * d['share_optimal']:>4.0f}%  {d['reference']}"
        )
    return "\n".join(lines)


def write_csv(path: Path, records: list[dict[str, Any]]) -> None:
    """Write dict records (all with the same keys) as CSV (whole or not at all).

    Parameters
    ----------
    path : Path
        The file to write; an existing file is replaced (see :func:`palopt.io.write_text`).
    records : list of dict
        The rows; the first one's keys are the header, in order. No records: an empty file.

    Examples
    --------
    >>> import tempfile
    >>> from palopt.io import read_text
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_csv(Path(folder, "a.csv"), [{"solver": "greedy", "gap": 0.05}])
    ...     read_text(Path(folder, "a.csv")).splitlines()
    ['solver,gap', 'greedy,0.05']
    """
    text = io.StringIO()
    if records:
        writer = csv.DictWriter(text, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    write_text(path, text.getvalue())


def plot_gaps(path: Path, summary: list[dict[str, Any]]) -> None:
    """PNG: median gap (%) against cluster size, one panel per load, one line per solver.

    Parameters
    ----------
    path : Path
        The PNG file to write (replaced if it exists).
    summary : list of dict
        Records from :func:`summarise`. A solver with several records at one cluster size and
        load (several profiles or shapes) is drawn at the median of their median gaps.

    Raises
    ------
    ImportError
        Without matplotlib (``pip install 'palopt[plot]'``).

    Examples
    --------
    >>> import tempfile
    >>> rows = [Row(f"{n}g-4ps-100%-synthetic", n, 4, 1.0, "synthetic", 0, 3, 3, "greedy",
    ...             "heuristic", 10.5, None, 0.01, 10.0, "optimum", gap)
    ...         for n, gap in ((8, 0.05), (16, 0.02))]
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     plot_gaps(Path(folder, "gaps.png"), summarise(rows))
    ...     Path(folder, "gaps.png").stat().st_size > 0
    True
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes_all = sorted({int(d["n_gpus"]) for d in summary})
    loads = sorted({float(d["load"]) for d in summary})
    fig, axes = plt.subplots(
        1, len(loads), figsize=(0.5 + 5.25 * len(loads), 4.2), sharey=True, squeeze=False
    )
    for ax, load in zip(axes[0], loads, strict=True):
        series: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for d in summary:
            if float(d["load"]) == load:
                series[str(d["solver"])][int(d["n_gpus"])].append(100 * float(d["gap_median"]))
        for solver, by_size in sorted(series.items()):
            sizes = sorted(by_size)
            ax.plot(sizes, [np.median(by_size[s]) for s in sizes], marker="o", label=solver)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes_all, [str(s) for s in sizes_all])
        ax.set_xlabel("cluster size (GPUs)")
        ax.set_title(f"load {round(100 * load)}%")
        ax.grid(True, alpha=0.3)
    axes[0, 0].set_ylabel("median gap to optimum or bound (%)")
    axes[0, -1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
