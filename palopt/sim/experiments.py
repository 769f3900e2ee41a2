"""The PAL paper's simulation experiments (Fig 10, 12, 13) as sweeps over simulations.

:func:`simulate_cell` runs one simulation from a flat parameter dict, so it is a cell function
for :mod:`palopt.sweep` (grid files, resumable results, process pool or Ray). The ``fig*_sweep``
functions build the paper's grids, and :func:`prepare` checks a grid and completes it before
it runs; :func:`improvement_table` turns the results into the
paper-style table: average JCT per workload and placement, and the geomean improvement over a
baseline.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from palopt import __version__
from palopt.errors import (
    InputError,
    UnknownSolverError,
    check_count,
    check_flag,
    check_number,
    refuse_differing,
)
from palopt.instance import penalty_matrix
from palopt.io import check_file_name, read_csv
from palopt.sim.engine import SimConfig, simulate
from palopt.sim.metrics import summary
from palopt.sim.policies import get_policy
from palopt.sim.profile import ClusterProfile, load_profile
from palopt.sim.trace import (
    SYNERGY_GPU_COUNTS,
    TraceJob,
    gpu_count_distribution,
    load_trace,
    synthetic_trace,
)
from palopt.solvers.base import get_solver, list_solvers
from palopt.sweep import SweepSpec, expand
from palopt.topology import Topology, build_cluster, parse_shape

__all__ = [
    "FIG10_PLACEMENTS",
    "CELL_KEYS",
    "simulate_cell",
    "prepare",
    "input_files",
    "fig10_sweep",
    "fig12_sweep",
    "fig13_sweep",
    "improvement_table",
    "format_tables",
    "plot_normalised",
]

FIG10_PLACEMENTS = (
    "packed-sticky",
    "packed-nonsticky",
    "random-sticky",
    "random-nonsticky",
    "pmfirst",
    "pal",
)
BASELINES = ("packed-sticky", "packed-nonsticky")

#: Parameters of :func:`simulate_cell` and their defaults (the artifact's Sia-Philly setting).
CELL_KEYS: Mapping[str, Any] = {
    "data": None,  # the pal-artifact directory (profile, traces)
    "trace": None,  # a trace CSV; or
    "workload": None,  # a Sia-Philly workload number (1-8) in data/traces; or
    "load": None,  # jobs per hour of a synthetic Fig 13 trace
    "n_jobs": 400,  # tracked jobs of the synthetic trace (as many before and after, untracked)
    "gpu_dist": "synergy",  # synthetic GPU counts: "synergy" or "traces"
    "profile": None,  # profile CSV (default: data/sim-64gpu-cluster.csv)
    "cluster": "16x4",
    "placement": "pal",
    "placement_options": {},  # the solver's options (palopt solve -o KEY=VALUE)
    "scheduler": "fifo",
    "scheduler_options": {},  # the policy's (tiresias: thresholds, promote_knob)
    "locality_penalty": 1.7,
    "round": 360.0,
    "seed": 0,  # solver seed; also the synthetic trace's and the tiled profile's
    "completion": "round",
    "restart_cost": 0.0,
    "backfill": False,
    "extra_jobs": False,
    "fixed_charge": False,
    "max_time": None,  # the horizon in seconds (SimConfig.max_time_s); None: run to the end
    "time_limit": None,  # each placement solve's limit in seconds; None: the solver's own
    "check": False,  # check every placement (palopt.cost.assert_feasible; slower)
}
#: Cell parameters that name files or folders.
PATH_KEYS = ("data", "trace", "profile")


def _check_paths(cell: Mapping[str, Any]) -> None:
    """Refuse a :data:`PATH_KEYS` value that is not a file name (``data = 1`` raised a
    ``TypeError`` in ``Path``, a NUL a ``ValueError`` in ``open``)."""
    for key in PATH_KEYS:
        if cell.get(key) is not None:
            check_file_name(cell[key], key)


def _stamp(path: str) -> tuple[int, int] | None:
    """A file's modification time and size: a cache key part, so that an edited file is read
    again (``None`` if it cannot be read; the read then says why)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_mtime_ns, st.st_size


def _cluster(profile: str, shape: str, seed: int) -> tuple[Topology, ClusterProfile]:
    return _cached_cluster(profile, shape, seed, _stamp(profile))


@lru_cache(maxsize=8)
def _cached_cluster(
    profile: str, shape: str, seed: int, stamp: tuple[int, int] | None
) -> tuple[Topology, ClusterProfile]:
    topo = parse_shape(shape)
    if profile.lower().endswith(".json"):  # as load_profile tells them (".JSON" too)
        return topo, load_profile(profile, topo, seed)
    per_server = int(topo.server_sizes[0])
    rows = len(read_csv(profile, "profile"))
    if rows >= topo.n_gpus or rows % per_server:
        return topo, load_profile(profile, topo)
    base = load_profile(profile, build_cluster(1, rows // per_server, per_server))
    return topo, base.tiled(topo.n_gpus, per_server, seed)


def _options(cell: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A cell's options mapping (``placement_options``, ``scheduler_options``)."""
    value = cell[key]
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InputError(key, value, "expected a mapping option -> value")
    return dict(value)


def _trace(path: str) -> tuple[TraceJob, ...]:
    return _cached_trace(path, _stamp(path))


@lru_cache(maxsize=16)
def _cached_trace(path: str, stamp: tuple[int, int] | None) -> tuple[TraceJob, ...]:
    return load_trace(path)


def _trace_source(cell: Mapping[str, Any]) -> str:
    """Which of ``trace``, ``workload`` and ``load`` gives the cell's trace, its values checked
    without reading a file."""
    given = [k for k in ("trace", "workload", "load") if cell[k] is not None]
    if len(given) > 1:  # one would be ignored without a word
        raise InputError(
            given[1],
            cell[given[1]],
            f"a cell takes one of trace, workload and load; also {given[0]}",
        )
    if not given:
        raise InputError("trace", None, "a cell needs 'trace', 'workload' or 'load'")
    if given[0] != "trace" and cell["data"] is None:
        raise InputError("data", None, "needed for 'workload' or 'load' cells")
    if given[0] == "workload" and check_count(cell["workload"], "workload") > 8:
        raise InputError("workload", cell["workload"], "the Sia-Philly workloads are 1 to 8")
    if cell["gpu_dist"] not in ("synergy", "traces"):  # checked in every cell: no typo ignored
        raise InputError("gpu_dist", cell["gpu_dist"], "must be 'synergy' or 'traces'")
    if given[0] == "load":
        check_count(cell["n_jobs"], "n_jobs")
        check_number(cell["load"], "load")
    return given[0]


def _existing(path: str | Path, key: str) -> str:
    """``path`` as a string if it is a file, else an InputError naming the cell's ``key`` (a
    missing file was an OSError naming no parameter, after the cells before it had run)."""
    if not Path(path).is_file():
        folder = Path(path).is_dir()
        raise InputError(key, str(path), "is a folder, not a file" if folder else "no such file")
    return str(path)


def _cell_trace(cell: Mapping[str, Any], n_gpus: int) -> tuple[TraceJob, ...]:
    source = _trace_source(cell)
    if source == "trace":
        return _trace(_existing(cell["trace"], "trace"))
    data = Path(cell["data"])  # given: _trace_source checked it
    if source == "workload":
        path = data / "traces" / f"sia-philly-workload-{cell['workload']}.csv"
        return _trace(_existing(path, "data"))
    if cell["gpu_dist"] == "traces":
        sizes, probs = gpu_count_distribution(
            [
                _trace(_existing(data / "traces" / f"sia-philly-workload-{w}.csv", "data"))
                for w in range(1, 9)
            ]
        )
    else:
        sizes, probs = SYNERGY_GPU_COUNTS
    n = int(cell["n_jobs"])  # checked by _trace_source, as the load
    return synthetic_trace(
        3 * n, float(cell["load"]), cell["seed"], sizes, probs, max_gpus=n_gpus, tracked=(n, 2 * n)
    )


def _input_files(cell: Mapping[str, Any]) -> list[str]:
    """The files a complete cell reads, as written in the cell (relative names unresolved):
    its profile (given, or the data folder's) and its trace or the traces it draws from."""
    data = cell["data"]
    files = [str(cell["profile"] or Path(data) / "sim-64gpu-cluster.csv")]
    source = _trace_source(cell)
    if source == "trace":
        files.append(str(cell["trace"]))
    elif source == "workload":
        files.append(str(Path(data) / "traces" / f"sia-philly-workload-{cell['workload']}.csv"))
    elif cell["gpu_dist"] == "traces":
        files.extend(
            str(Path(data) / "traces" / f"sia-philly-workload-{w}.csv") for w in range(1, 9)
        )
    return files


def _read_files(cells: Iterable[Mapping[str, Any]], base: Path | None) -> dict[str, Path]:
    """Every file the cells read, as the cells name it -> where it is read from (``base``
    resolves relative names, as the cells will be run), by name."""
    names = sorted({f for cell in cells for f in _input_files(cell)})
    return {name: Path(name) if base is None else base / name for name in names}


def _inputs_digest(cells: Iterable[Mapping[str, Any]], base: Path | None) -> str | None:
    """A digest of the contents of every file the cells read (``base`` resolves relative names,
    as the cells will be run), or ``None`` if none can be read yet (a missing file is reported
    when its cell runs). In the sweep's context, so that an edited trace or profile runs the
    cells again instead of reusing results computed from the old file."""
    digest = hashlib.sha1()
    found = False
    for name, path in _read_files(cells, base).items():
        try:
            content = path.read_bytes()
        except (OSError, ValueError):
            continue
        found = True
        digest.update(f"{name}\0{hashlib.sha1(content).hexdigest()}\n".encode())
    return digest.hexdigest()[:16] if found else None


def _check_cell(cell: Mapping[str, Any]) -> SimConfig:
    """Every check of a complete cell (all :data:`CELL_KEYS`) that reads no file: file names,
    the trace's source, the model settings and flags; returns the simulator's settings."""
    _check_paths(cell)
    if cell["profile"] is None and cell["data"] is None:
        raise InputError("profile", None, "give 'profile' or 'data'")
    _trace_source(cell)
    check_flag(cell["fixed_charge"], "fixed_charge")
    config = SimConfig(
        round_s=cell["round"],
        penalties=cell["locality_penalty"],
        completion=cell["completion"],
        restart_cost_s=cell["restart_cost"],
        backfill=cell["backfill"],
        extra_jobs=cell["extra_jobs"],
        seed=cell["seed"],
        max_time_s=cell["max_time"],
        check=cell["check"],
        time_limit=cell["time_limit"],
    )
    # The simulator passes the time limit to each solve, where it wins over an option.
    refuse_differing(
        "time_limit",
        config.time_limit,
        _options(cell, "placement_options"),
        "time_limit",
        "placement_options",
    )
    return config


def simulate_cell(params: Mapping[str, Any]) -> dict[str, Any]:
    """Run one simulation described by a flat dict (see :data:`CELL_KEYS`); return its summary.

    A cell function for :func:`palopt.sweep.run_sweep`. A profile smaller than the cluster is
    tiled with whole servers drawn with replacement (seeded by ``seed``).

    Parameters
    ----------
    params : mapping
        Any of :data:`CELL_KEYS`; the others take their defaults there. The trace is one of
        ``trace`` (a CSV file), ``workload`` (``data/traces/sia-philly-workload-<n>.csv``) and
        ``load`` (a synthetic trace of ``3 * n_jobs`` jobs, the middle ``n_jobs`` tracked);
        ``data`` or ``profile`` gives the profile.

    Returns
    -------
    dict
        :func:`palopt.sim.metrics.summary` of the run without ``solver`` and ``policy`` (the
        cell's ``placement`` and ``scheduler`` say them).

    Raises
    ------
    InputError
        For an unknown key or a bad value.

    Examples
    --------
    One 2-GPU ``vgg19`` job (class C) of 100 iterations on a 2-GPU server, 60 s rounds:

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = Path(folder, "profile.csv").write_text(
    ...         "GPU_ID,PerfVar_classC\\n0,1.0\\n1,1.2\\n")
    ...     _ = Path(folder, "trace.csv").write_text(
    ...         "job_id,num_gpus,submit_time,duration,model\\n1,2,0,100,vgg19\\n")
    ...     out = simulate_cell({"profile": f"{folder}/profile.csv",
    ...                          "trace": f"{folder}/trace.csv", "cluster": "1x2", "round": 60})
    >>> out["jobs"], round(out["avg_jct_h"] * 3600), out["rounds"]
    (1, 60, 2)
    """
    unknown = sorted(set(params) - set(CELL_KEYS))
    if unknown:
        raise InputError(
            f"cell.{unknown[0]}",
            params[unknown[0]],
            f"unknown parameter; known: {', '.join(CELL_KEYS)}",
        )
    cell = {**CELL_KEYS, **params}
    config = _check_cell(cell)
    profile_path = _existing(
        cell["profile"] or Path(cell["data"]) / "sim-64gpu-cluster.csv",
        "profile" if cell["profile"] else "data",
    )
    topo, profile = _cluster(profile_path, str(cell["cluster"]), config.seed)
    # Checked here so that an error names the cell's key (the simulator names SimConfig's).
    penalty_matrix(topo, profile.classes, config.penalties, "locality_penalty")
    if cell["fixed_charge"]:
        profile = profile.fixed()
    res = simulate(
        topo,
        profile,
        _cell_trace(cell, topo.n_gpus),
        get_solver(str(cell["placement"]), **_options(cell, "placement_options")),
        get_policy(str(cell["scheduler"]), **_options(cell, "scheduler_options")),
        config,
    )
    out = summary(res)
    out.pop("solver")
    out.pop("policy")
    return out


def prepare(spec: SweepSpec, files_from: Path | None = None) -> SweepSpec:
    """A sweep of :func:`simulate_cell` cells, checked and completed before any cell runs.

    Every parameter must be one of :data:`CELL_KEYS`, every placement (the baseline too) and
    scheduler with its options must be known, and every cell's values must pass the checks
    that read no file (the cluster shape, the trace's source, the model settings), so that a
    typo fails at once rather than when its cell runs (or, in the baseline, after every cell
    ran). The files, and the locality penalties (which need the profile's classes), are checked
    as each cell runs.
    The defaults of the parameters the grid does not give are added to ``fixed``, and the
    palopt version (and where relative file names are read from, seen from the results folder)
    to the context, with a digest of the contents of the files the cells read (traces and
    profiles). A cell's id then covers everything its result depends on but the code
    itself: a later change of a default, a new release, an edited trace or profile (every
    cell runs again), or a grid file in another folder writing to the same results folder
    runs the cells again rather than reusing results.

    Parameters
    ----------
    spec : SweepSpec
    files_from : Path, optional
        The folder relative ``data``, ``trace`` and ``profile`` values are read from (the grid
        file's folder for ``palopt sweep``).

    Returns
    -------
    SweepSpec
        ``spec`` with every :data:`CELL_KEYS` in ``fixed`` or ``grid``, and its context.

    Raises
    ------
    InputError
        For an unknown parameter, placement, baseline, scheduler or option, or a bad value.

    Examples
    --------
    >>> grid = {"placement": ("pal", "pmfirst")}
    >>> spec = prepare(SweepSpec(grid, {"cluster": "8x4", "data": "d", "workload": 1}))
    >>> spec.fixed["cluster"], spec.fixed["scheduler"], spec.context.startswith("palopt ")
    ('8x4', 'fifo', True)
    >>> prepare(SweepSpec({"placement": ("pal", "pall")}))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: placement = 'pall': unknown placement; known: cpsat, greedy, ...
    >>> prepare(SweepSpec({"round": (360, -1)}, {"data": "d", "workload": 1}))
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: round = -1: must be a finite number >= 0.001 and <= 1e+12
    """
    given = {f"grid.{k}": list(v) for k, v in spec.grid.items()}
    given.update({f"fixed.{k}": v for k, v in spec.fixed.items()})
    for name, value in given.items():
        if name.partition(".")[2] not in CELL_KEYS:
            raise InputError(name, value, f"unknown parameter; known: {', '.join(CELL_KEYS)}")
    if spec.baseline is not None:
        try:
            _placement(spec.baseline)
        except InputError as exc:
            raise InputError("sweep.baseline", spec.baseline, exc.problem) from None
    fixed = {**{k: v for k, v in CELL_KEYS.items() if k not in spec.grid}, **spec.fixed}
    checked: set[tuple[str, str, str]] = set()
    cells = expand(replace(spec, fixed=fixed))
    for cell in cells:  # names first: a typo is named before what its cell lacks
        for key, make in (("placement", _placement), ("scheduler", get_policy)):
            options = _options(cell, f"{key}_options")
            seen = (key, str(cell[key]), json.dumps(options, sort_keys=True, default=str))
            if seen not in checked:
                make(str(cell[key]), **options)
                checked.add(seen)
    for shape in dict.fromkeys(str(cell["cluster"]) for cell in cells):
        parse_shape(shape)
    for cell in cells:
        _check_cell(cell)
    files = (
        ""
        if files_from is None
        else f"files from {os.path.relpath(files_from.resolve(), spec.out.resolve())}"
    )
    inputs = _inputs_digest(cells, files_from)
    context = "; ".join(
        p
        for p in (spec.context, f"palopt {__version__}", files, inputs and f"inputs {inputs}")
        if p
    )
    return replace(spec, fixed=fixed, context=context)


def input_files(spec: SweepSpec, files_from: Path | None = None) -> list[Path]:
    """The files the cells of a prepared sweep read: profiles and traces, given or the data
    folder's (a sweep must not write its results over one of them).

    Parameters
    ----------
    spec : SweepSpec
        As :func:`prepare` returns it.
    files_from : Path, optional
        The folder relative names are read from, as for :func:`prepare`.

    Returns
    -------
    list of Path

    Examples
    --------
    >>> spec = prepare(SweepSpec({"trace": ("a.csv", "b.csv")}, {"data": "d"}))
    >>> [str(p) for p in input_files(spec, Path("grids"))]
    ['grids/a.csv', 'grids/b.csv', 'grids/d/sim-64gpu-cluster.csv']
    """
    return list(_read_files(expand(spec), files_from).values())


def _placement(name: str, **options: Any) -> Any:
    """:func:`~palopt.solvers.base.get_solver`, an unknown name an :class:`InputError`."""
    try:
        return get_solver(name, **options)
    except UnknownSolverError:
        known = ", ".join(s.name for s in list_solvers())
        raise InputError("placement", name, f"unknown placement; known: {known}") from None


def fig10_sweep(
    data: str | Path,
    out: Path,
    workloads: Iterable[int] = range(1, 9),
    placements: Sequence[str] = FIG10_PLACEMENTS,
    **options: Any,
) -> SweepSpec:
    """Fig 10: Sia-Philly workloads, FIFO, P = 1.7, 64 GPUs, R = 360 s (``options``: other
    :data:`CELL_KEYS`, e.g. the realistic-model settings).

    Parameters
    ----------
    data : str or Path
        The pal-artifact folder (its ``traces`` and ``sim-64gpu-cluster.csv``).
    out : Path
        Results folder of the sweep.
    workloads : iterable of int, default 1 to 8
        Sia-Philly workload numbers.
    placements : sequence of str, default :data:`FIG10_PLACEMENTS`
    **options
        Fixed :data:`CELL_KEYS` for every cell.

    Returns
    -------
    SweepSpec
        Grid ``workload`` x ``placement``; fixed: ``data`` and ``options``.

    Examples
    --------
    >>> from palopt.sweep import expand
    >>> spec = fig10_sweep("data", Path("runs/fig10"), workloads=[1, 2], backfill=True)
    >>> len(expand(spec)), expand(spec)[0]
    (12, {'data': 'data', 'backfill': True, 'workload': 1, 'placement': 'packed-sticky'})
    """
    return SweepSpec(
        {"workload": tuple(workloads), "placement": tuple(placements)},
        {"data": str(data), **options},
        out,
    )


def fig12_sweep(
    data: str | Path,
    out: Path,
    penalties: Sequence[float] = (1.0, 1.5, 2.0, 2.5, 3.0),
    placements: Sequence[str] = ("packed-sticky", "packed-nonsticky", "pmfirst", "pal"),
    **options: Any,
) -> SweepSpec:
    """Fig 12: workload 6 with the locality penalty swept (placement and charge alike).

    Parameters
    ----------
    data : str or Path
        The pal-artifact folder.
    out : Path
        Results folder of the sweep.
    penalties : sequence of float, default (1.0, 1.5, 2.0, 2.5, 3.0)
        Values of ``locality_penalty``.
    placements : sequence of str, default ("packed-sticky", "packed-nonsticky", "pmfirst", "pal")
    **options
        Fixed :data:`CELL_KEYS` for every cell.

    Returns
    -------
    SweepSpec
        Grid ``locality_penalty`` x ``placement``, with ``workload = 6`` fixed.

    Examples
    --------
    >>> from palopt.sweep import expand
    >>> spec = fig12_sweep("data", Path("runs/fig12"), penalties=[1, 2], placements=["pal"])
    >>> [(c["workload"], c["locality_penalty"], c["placement"]) for c in expand(spec)]
    [(6, 1.0, 'pal'), (6, 2.0, 'pal')]
    """
    return SweepSpec(
        {"locality_penalty": tuple(float(p) for p in penalties), "placement": tuple(placements)},
        {"data": str(data), "workload": 6, **options},
        out,
    )


def fig13_sweep(
    data: str | Path,
    out: Path,
    loads: Sequence[float] = (8.0, 10.0, 12.0, 14.0),
    schedulers: Sequence[str] = ("fifo", "las", "srtf"),
    placements: Sequence[str] = ("packed-sticky", "packed-nonsticky", "pmfirst", "pal"),
    seeds: Sequence[int] = (0,),
    **options: Any,
) -> SweepSpec:
    """Fig 13/15/16: 256 GPUs (64 x 4), synthetic class-A trace, R = 300 s, P = 1.7.

    Parameters
    ----------
    data : str or Path
        The pal-artifact folder (its 64-GPU profile is tiled to the cluster).
    out : Path
        Results folder of the sweep.
    loads : sequence of float, default (8.0, 10.0, 12.0, 14.0)
        Jobs per hour of the synthetic trace.
    schedulers : sequence of str, default ("fifo", "las", "srtf")
    placements : sequence of str, default ("packed-sticky", "packed-nonsticky", "pmfirst", "pal")
    seeds : sequence of int, default (0,)
        Seeds of the trace, the tiled profile and the solvers.
    **options
        Fixed :data:`CELL_KEYS` for every cell (e.g. ``n_jobs``).

    Returns
    -------
    SweepSpec
        Grid ``scheduler`` x ``load`` x ``seed`` x ``placement``, with ``cluster = "64x4"``
        and ``round = 300.0`` fixed.

    Examples
    --------
    >>> from palopt.sweep import expand
    >>> spec = fig13_sweep("data", Path("runs/fig13"), loads=[8], schedulers=["las"])
    >>> len(expand(spec)), expand(spec)[0]["load"], spec.fixed["cluster"]
    (4, 8.0, '64x4')
    """
    return SweepSpec(
        {
            "scheduler": tuple(schedulers),
            "load": tuple(float(x) for x in loads),
            "seed": tuple(seeds),
            "placement": tuple(placements),
        },
        {"data": str(data), "cluster": "64x4", "round": 300.0, **options},
        out,
    )


def improvement_table(
    rows: Sequence[dict[str, Any]], by: str, baselines: Sequence[str] = BASELINES
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Average JCT per ``by`` value and placement, and improvements over each baseline.

    Parameters
    ----------
    rows : sequence of dict
        One per simulation, with the keys ``by``, ``placement`` and ``avg_jct_h`` (as the rows
        of a sweep's results table), and optionally ``unfinished``; rows of the same ``by``
        value and placement are averaged.
    by : str
        The parameter that varies, e.g. ``"workload"``.
    baselines : sequence of str, default ("packed-sticky", "packed-nonsticky")
        Placements to compare with; those not in ``rows`` are left out.

    Returns
    -------
    jct : DataFrame
        Rows: ``by`` values; columns: placements; values: average JCT (hours).
    gains : DataFrame
        One row per (baseline, placement): geomean, min and max improvement over the baseline,
        where improvement = ``1 - jct / jct_baseline`` and the geomean improvement is
        ``1 - geomean(jct / jct_baseline)`` (the artifact's normalisation).

    Raises
    ------
    InputError
        If there are no rows, a row lacks one of the keys, a placement has no run for one of
        the ``by`` values (its gains would be over other values than the baseline's), or a row
        left tracked jobs unfinished (a horizon, ``max_time``): its average JCT is over fewer
        jobs than the others', so the two do not compare.

    Examples
    --------
    >>> rows = [{"workload": 1, "placement": "pal", "avg_jct_h": 1.5},
    ...         {"workload": 1, "placement": "packed-sticky", "avg_jct_h": 2.0},
    ...         {"workload": 2, "placement": "pal", "avg_jct_h": 2.4},
    ...         {"workload": 2, "placement": "packed-sticky", "avg_jct_h": 3.0}]
    >>> jct, gains = improvement_table(rows, "workload")
    >>> jct["pal"].tolist()
    [1.5, 2.4]
    >>> gains.columns.tolist()
    ['baseline', 'placement', 'geomean_gain', 'min_gain', 'max_gain']
    >>> gains.round(4).to_numpy().tolist()
    [['packed-sticky', 'pal', 0.2254, 0.2, 0.25]]
    """
    df = pd.DataFrame(rows)
    if df.empty:
        raise InputError("rows", list(rows), "no runs to compare")
    for key in (by, "placement", "avg_jct_h"):
        if key not in df.columns:
            raise InputError("rows", key, "a run without this key")
    short = df[df["unfinished"] > 0] if "unfinished" in df.columns else df.iloc[:0]
    if len(short):
        row = short.iloc[0]
        raise InputError(
            "unfinished",
            int(row["unfinished"]),
            f"{by} {row[by]}, placement {row['placement']}: tracked jobs not completed at the "
            "horizon (max_time); average JCTs over different jobs do not compare",
        )
    jct = df.pivot_table(
        index=by, columns="placement", values="avg_jct_h", aggfunc="mean", dropna=False
    )
    lacking = np.argwhere(jct.isna().to_numpy())
    if len(lacking):  # the geomean would be NaN, or over other values than the baseline's
        value, placement = jct.index[lacking[0][0]], jct.columns[lacking[0][1]]
        raise InputError(
            "rows", f"{by} {value}", f"no run of placement {placement} (or its JCT is missing)"
        )
    out = []
    for base in baselines:
        if base not in jct.columns:
            continue
        norm = jct.div(jct[base], axis=0)
        for p in jct.columns:
            if p == base:
                continue
            ratio = norm[p].to_numpy(dtype=np.float64)
            out.append(
                {
                    "baseline": base,
                    "placement": p,
                    "geomean_gain": 1.0 - float(np.exp(np.log(ratio).mean())),
                    "min_gain": 1.0 - float(ratio.max()),
                    "max_gain": 1.0 - float(ratio.min()),
                }
            )
    return jct, pd.DataFrame(out)


def format_tables(jct: pd.DataFrame, gains: pd.DataFrame, by: str) -> str:
    """The paper-style text table: average JCTs, the improvement over each baseline per
    ``by`` value, and its geomean, min and max.

    Parameters
    ----------
    jct, gains : DataFrame
        As :func:`improvement_table` returns them.
    by : str
        The name of the varied parameter, for the titles.

    Returns
    -------
    str
        Text without a final newline; JCTs in hours, improvements in percent. Only the JCT
        table if ``gains`` is empty.

    Examples
    --------
    >>> rows = [{"workload": 1, "placement": "pal", "avg_jct_h": 1.5},
    ...         {"workload": 1, "placement": "packed-sticky", "avg_jct_h": 2.0}]
    >>> text = format_tables(*improvement_table(rows, "workload"), "workload")
    >>> print("\\n".join(text.splitlines()[-2:]))
    Improvement over packed-sticky: geomean (min .. max)
      pal                  25.0%  (25.0% .. 25.0%)
    """
    lines = [f"Average JCT (hours) by {by}", jct.to_string(float_format=lambda v: f"{v:.3f}"), ""]
    if gains.empty:  # the baselines alone ran: nothing to compare with them
        return "\n".join(lines[:-1])
    for base in gains["baseline"].unique():
        gain = 1.0 - jct.drop(columns=base).div(jct[base], axis=0)
        lines += [
            f"Improvement over {base} by {by} (1 - JCT / JCT_{base})",
            gain.to_string(float_format=lambda v: f"{100 * v:.1f}%"),
            "",
        ]
    for base, part in gains.groupby("baseline", sort=False):
        lines.append(f"Improvement over {base}: geomean (min .. max)")
        for _, r in part.iterrows():
            lines.append(
                f"  {r['placement']:<18} {100 * r['geomean_gain']:6.1f}%  "
                f"({100 * r['min_gain']:.1f}% .. {100 * r['max_gain']:.1f}%)"
            )
    return "\n".join(lines)


def plot_normalised(jct: pd.DataFrame, base: str, path: Path, title: str) -> Path:
    """Bar chart of average JCT normalised to ``base`` per ``by`` value, with the geomean.

    Needs matplotlib (``pip install 'palopt[plot]'``).

    Parameters
    ----------
    jct : DataFrame
        Average JCTs, as :func:`improvement_table` returns them (rows: ``by`` values; columns:
        placements).
    base : str
        The placement every column is divided by.
    path : Path
        The PNG file to write.
    title : str

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    InputError
        If ``base`` is not a column of ``jct``.
    ImportError
        If matplotlib is missing.

    Examples
    --------
    >>> import tempfile
    >>> jct = pd.DataFrame({"packed-sticky": [10.0, 8.0], "pal": [6.0, 5.0]}, index=[1, 2])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     plot_normalised(jct, "packed-sticky", Path(folder, "fig10.png"), "Fig 10").name
    'fig10.png'
    """
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
