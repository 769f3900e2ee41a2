"""Parameter sweeps: expand a grid into independent cells, run them resumably, collect one table.

A grid file (TOML)::

    [sweep]
    out = "runs/fig10"        # results folder (relative to the grid file)
    format = "csv"            # or "parquet" (needs pyarrow)
    baseline = "packed-sticky"

    [grid]                    # every combination is one cell
    trace = ["traces/w1.csv", "traces/w2.csv"]
    placement = ["pal", "pmfirst", "packed-sticky"]
    seed = [0]

    [fixed]                   # the same for every cell
    cluster = "16x4"
    round = 360

Each cell is run by a *cell function* (a picklable callable ``dict -> dict`` of metrics); a
finished cell is stored as ``cells/<id>.json`` under the results folder, where ``<id>`` is a hash of
its parameters (and the spec's ``context``), and skipped when the sweep is run again. Cells run
in a local process pool by default, or as Ray tasks (``engine="ray"``), at most one per worker
at a time. When a cell fails, no further cell starts, those running are finished and stored,
and the cell's error is raised (a palopt error names the cell by its grid values).
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import logging
import multiprocessing
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from palopt.errors import InputError, PaloptError, check_count, check_fields
from palopt.io import check_file_name, read_text, write_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["SweepSpec", "load_grid", "expand", "cell_id", "run_sweep", "collect", "progress_bar"]

log = logging.getLogger(__name__)
CellFunction = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class SweepSpec:
    """A parsed grid file.

    ``context`` is text that every cell's id includes besides its parameters: whatever else
    decides a cell's result, such as the code version or the folder its relative file names
    are read from, so that a change of it runs the cells again rather than reusing results.
    """

    grid: Mapping[str, tuple[Any, ...]]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    out: Path = Path("runs/sweep")
    format: str = "csv"
    baseline: str | None = None
    context: str = ""


def _same_value(value: Any) -> Any:
    """``value`` with whole floats as ints, so that ``360`` and ``360.0`` compare the same."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _same_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_same_value(v) for v in value]
    return value


def load_grid(path: str | Path) -> SweepSpec:
    """Read a grid TOML file.

    Parameters
    ----------
    path : str or Path
        A TOML file with a ``[grid]`` table of non-empty lists and optional ``[fixed]`` and
        ``[sweep]`` tables (see the module docstring).

    Returns
    -------
    SweepSpec
        ``out`` is relative to the file's folder (default ``runs/<file stem>``); ``format``
        defaults to ``"csv"``, ``baseline`` to ``None``.

    Raises
    ------
    InputError
        Naming the file and key for a malformed grid.
    ImportError
        For ``format = "parquet"`` without pyarrow.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> text = ('[sweep]\\nout = "runs/demo"\\n'
    ...         '[grid]\\nseed = [0, 1]\\n[fixed]\\ncluster = "16x4"\\n')
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = Path(folder, "demo.toml").write_text(text)
    ...     spec = load_grid(Path(folder, "demo.toml"))
    ...     spec.out == Path(folder, "runs/demo")
    True
    >>> spec.grid, spec.fixed, spec.format
    ({'seed': (0, 1)}, {'cluster': '16x4'}, 'csv')
    """
    path = Path(path)
    try:
        data = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(path), "toml", f"invalid TOML: {exc}") from None
    unknown = sorted(set(data) - {"sweep", "grid", "fixed"})
    if unknown:
        raise InputError(
            f"{path}: [{unknown[0]}]",
            unknown[0],
            "unknown table; expected [sweep], [grid], [fixed]",
        )
    grid = data.get("grid")
    if not isinstance(grid, dict) or not grid:
        raise InputError(f"{path}: [grid]", grid, "expected a table of parameter lists")
    axes = {}
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise InputError(f"{path}: grid.{key}", values, "expected a non-empty list")
        seen = [json.dumps(_same_value(v), sort_keys=True, default=str) for v in values]
        for i, text in enumerate(seen):
            if text in seen[:i]:
                raise InputError(f"{path}: grid.{key}", values[i], "given twice")
        axes[key] = tuple(values)
    fixed, meta = data.get("fixed", {}), data.get("sweep", {})
    for table, value in (("fixed", fixed), ("sweep", meta)):
        if not isinstance(value, dict):
            raise InputError(f"{path}: [{table}]", value, "expected a table")
    clash = sorted(set(fixed) & set(axes))
    if clash:
        raise InputError(f"{path}: fixed.{clash[0]}", fixed[clash[0]], "also a grid axis")
    check_fields(meta, ("out", "format", "baseline"), f"{path}: sweep.")
    fmt = meta.get("format", "csv")
    if fmt not in ("csv", "parquet"):
        raise InputError(f"{path}: sweep.format", fmt, "must be 'csv' or 'parquet'")
    if fmt == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise ImportError(f"{path}: sweep.format = 'parquet' needs pyarrow (pip install pyarrow)")
    for key in ("out", "baseline"):
        if not isinstance(meta.get(key, ""), str):
            raise InputError(f"{path}: sweep.{key}", meta[key], "expected a string")
    if meta.get("out"):  # a NUL: Path.resolve() raised a ValueError ("" is the grid's folder)
        check_file_name(meta["out"], f"{path}: sweep.out")
    out = path.parent / meta.get("out", f"runs/{path.stem}")
    return SweepSpec(axes, fixed, out, fmt, meta.get("baseline"))


def expand(spec: SweepSpec) -> list[dict[str, Any]]:
    """Every cell of the grid (fixed parameters included), in a deterministic order.

    Parameters
    ----------
    spec : SweepSpec

    Returns
    -------
    list of dict
        One dict per combination of the grid values: the fixed parameters, then one value of
        each axis. The last axis varies fastest (as :func:`itertools.product`).

    Examples
    --------
    >>> spec = SweepSpec({"placement": ("pal", "pmfirst"), "seed": (0, 1)}, {"cluster": "16x4"})
    >>> [(c["placement"], c["seed"]) for c in expand(spec)]
    [('pal', 0), ('pal', 1), ('pmfirst', 0), ('pmfirst', 1)]
    >>> expand(spec)[0]
    {'cluster': '16x4', 'placement': 'pal', 'seed': 0}
    """
    keys = list(spec.grid)
    return [
        {**spec.fixed, **dict(zip(keys, combo, strict=True))}
        for combo in itertools.product(*(spec.grid[k] for k in keys))
    ]


def cell_id(cell: Mapping[str, Any], context: str = "") -> str:
    """A stable id of a cell's parameters (16 hex digits).

    Parameters
    ----------
    cell : mapping
        Parameter name -> value; values that JSON cannot hold are taken as ``str(value)``.
    context : str, optional
        What else the cell's result depends on (:attr:`SweepSpec.context`).

    Returns
    -------
    str
        The first 16 hex digits of the SHA-1 of the cell as JSON with sorted keys (so the
        order of the keys does not matter) and of the context, if there is one.

    Examples
    --------
    >>> cell_id({"placement": "pal", "seed": 0})
    'df819922fb0c6de3'
    >>> cell_id({"seed": 0, "placement": "pal"})
    'df819922fb0c6de3'
    >>> cell_id({"seed": 0, "placement": "pal"}, "palopt 0.1.0")
    'd0fdd437e9562af2'
    """
    text = json.dumps(cell, sort_keys=True, default=str) + (f"\n{context}" if context else "")
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _cell_file(spec: SweepSpec, cell: Mapping[str, Any]) -> Path:
    return spec.out / "cells" / f"{cell_id(cell, spec.context)}.json"


def _store(spec: SweepSpec, cell: dict[str, Any], metrics: dict[str, Any]) -> None:
    path = _cell_file(spec, cell)
    path.parent.mkdir(parents=True, exist_ok=True)
    stored = {"cell": cell, "context": spec.context, "metrics": metrics}
    write_text(path, json.dumps(stored, default=str))


def _windowed(
    cells: list[dict[str, Any]],
    window: int,
    start: Callable[[dict[str, Any]], Any],
    finish: Callable[[list[Any]], list[tuple[Any, Any]]],
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(cell, metrics) of each cell, run at most ``window`` at a time: ``start(cell)`` gives a
    handle, ``finish(handles)`` waits for some and gives (handle, metrics or the cell's error).
    Cells are not handed over ahead of a free worker (a process pool's queued calls can no
    longer be cancelled, and Ray's cancel interrupts running tasks too), so after an error no
    further cell starts; those running are waited for and yielded, so stored, and then the
    first error is raised."""
    error: BaseException | None = None
    waiting = iter(cells)
    running: dict[Any, dict[str, Any]] = {}
    while True:
        if error is None:
            for cell in itertools.islice(waiting, window - len(running)):
                running[start(cell)] = cell
        if not running:
            break
        for handle, outcome in finish(list(running)):
            cell = running.pop(handle)
            if not isinstance(outcome, BaseException):
                yield cell, outcome
            elif error is None:
                error = outcome
    if error is not None:
        raise error


def _local(
    fn: CellFunction, cells: list[dict[str, Any]], workers: int
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    if workers <= 1:
        for cell in cells:
            yield cell, fn(cell)
        return

    def finish(futures: list[Future[dict[str, Any]]]) -> list[tuple[Any, Any]]:
        done, _ = wait(futures, return_when=FIRST_COMPLETED)
        return [(f, f.exception() or f.result()) for f in done]

    # Spawned, not forked: a forked child inherits the locks of the parent's other threads (the
    # pool's own manager thread, a solver's) in whatever state they were; Python 3.12 warns.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=spawn) as pool:
        yield from _windowed(cells, workers, lambda cell: pool.submit(fn, cell), finish)


def _ray(
    fn: CellFunction, cells: list[dict[str, Any]], address: str | None
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    try:
        import ray
    except ImportError:
        raise ImportError("engine 'ray' needs Ray: pip install 'palopt[ray]'") from None

    def finish(refs: list[Any]) -> list[tuple[Any, Any]]:
        ready, _ = ray.wait(refs, num_returns=1)
        out = []
        for ref in ready:
            try:
                out.append((ref, ray.get(ref)))
            except ray.exceptions.RayTaskError as exc:  # the cell's own error, not Ray's wrapper
                out.append((ref, exc.cause if isinstance(exc.cause, BaseException) else exc))
        return out

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(_call)
        window = max(1, int(ray.cluster_resources().get("CPU", 1)))  # one cell per CPU
        yield from _windowed(cells, window, lambda cell: task.remote(fn, cell), finish)
    finally:
        if started:
            ray.shutdown()


def _call(fn: CellFunction, cell: dict[str, Any]) -> dict[str, Any]:
    """``fn(cell)``: a Ray task of a plain function, whatever callable ``fn`` is."""
    return fn(cell)


def _labelled(fn: CellFunction, keys: tuple[str, ...], cell: dict[str, Any]) -> dict[str, Any]:
    """``fn(cell)``, whose palopt errors name the cell by its values of ``keys`` (the grid's)."""
    try:
        return fn(cell)
    except PaloptError as exc:
        label = " (in the cell " + ", ".join(f"{k}={cell[k]!r}" for k in keys) + ")"
        if isinstance(exc, InputError):
            raise InputError(exc.field, exc.value, exc.problem + label) from None
        exc.args = (f"{exc}{label}", *exc.args[1:])
        raise


def run_sweep(
    spec: SweepSpec,
    fn: CellFunction,
    *,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: bool = False,
    fresh: bool = False,
) -> pd.DataFrame:
    """Run every unfinished cell, store each result, and return the full results table.

    Parameters
    ----------
    spec : SweepSpec
    fn : callable
        Cell function ``dict -> dict`` (picklable: a module-level function, or a
        :func:`functools.partial` of one).
    engine : {"local", "ray"}
    workers : int, optional
        Local processes (default: CPU count); engine ``"local"`` only. Above 1 they are
        started by ``spawn``: each imports ``fn``'s module afresh, so a script that calls
        ``run_sweep`` guards its top level with ``if __name__ == "__main__":``.
    address : str, optional
        Ray cluster address (``None`` starts a local Ray instance); engine ``"ray"`` only.
    progress : bool
        Show a progress bar on stderr (when tqdm is installed).
    fresh : bool
        Run every cell again: the stored results are deleted first, once the other arguments
        are known to be good.

    Returns
    -------
    pandas.DataFrame
        One row per cell: its parameters and its metrics.

    Raises
    ------
    InputError
        For an unknown engine, ``workers`` that is not a positive integer, or an option of
        the other engine.

    Examples
    --------
    A sweep run twice: the second run finds every cell stored and runs none.

    >>> import tempfile
    >>> calls = []
    >>> def square(cell):
    ...     calls.append(cell["x"])
    ...     return {"square": cell["x"] ** 2}
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     spec = SweepSpec({"x": (1, 2, 3)}, {"k": "a"}, Path(folder))
    ...     _ = run_sweep(spec, square, workers=1)
    ...     table = run_sweep(spec, square, workers=1)
    >>> print(table)
       k  x  square
    0  a  1       1
    1  a  2       4
    2  a  3       9
    >>> calls
    [1, 2, 3]
    """
    if workers is not None:  # 2.5 or "2" raised a bare TypeError
        workers = check_count(workers, "workers")
    if workers is not None and engine == "ray":  # Ray places the cells itself (was: ignored)
        raise InputError("workers", workers, "is for engine 'local'")
    if address is not None and engine != "ray":
        raise InputError("address", address, "is for engine 'ray'")
    if engine not in ("local", "ray"):
        raise InputError("engine", engine, "must be 'local' or 'ray'")
    if fresh and (spec.out / "cells").exists():
        shutil.rmtree(spec.out / "cells")
    cells = expand(spec)
    todo = [c for c in cells if not _cell_file(spec, c).exists()]
    fn = partial(_labelled, fn, tuple(spec.grid))
    log.info("sweep: %d cells, %d already done", len(cells), len(cells) - len(todo))
    results = (
        _local(fn, todo, workers or os.cpu_count() or 1)
        if engine == "local"
        else _ray(fn, todo, address)
    )
    bar = progress_bar(len(todo), "cell") if progress else None
    for cell, metrics in results:
        _store(spec, cell, metrics)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return collect(spec, cells)


def progress_bar(total: int, unit: str) -> Any:
    """A tqdm progress bar on stderr, or ``None`` without tqdm (the ``progress`` extra).

    Parameters
    ----------
    total : int
        Steps to completion.
    unit : str
        What a step is, e.g. ``"cell"``.

    Returns
    -------
    tqdm.tqdm or None
        Advance it with ``update(n)``; ``close()`` it at the end.

    Examples
    --------
    >>> bar = progress_bar(2, "cell")
    >>> if bar is not None:  # tqdm is installed
    ...     _ = bar.update(2)
    ...     bar.close()
    >>> bar is None or bar.n == bar.total
    True
    """
    try:
        from tqdm import tqdm
    except ImportError:
        log.debug("no progress bar: tqdm is not installed (pip install 'palopt[progress]')")
        return None
    return tqdm(total=total, unit=unit, file=sys.stderr)


def collect(spec: SweepSpec, cells: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The results table of the given cells (all must be finished) and write it to disk.

    Parameters
    ----------
    spec : SweepSpec
        Its ``out`` folder holds the stored cells; the table is written there as
        ``results.csv`` or ``results.parquet`` (by ``spec.format``; there a mapping or list
        value, such as a cell's options, is JSON text), replacing an older one.
    cells : iterable of mapping
        The cells to collect, e.g. :func:`expand` of ``spec`` or a part of it.

    Returns
    -------
    pandas.DataFrame
        One row per cell, in the given order: its parameters, then its metrics.

    Raises
    ------
    FileNotFoundError
        If a cell has no stored result.
    InputError
        If a cell's stored result is not one (a damaged file), naming the file.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     spec = SweepSpec({"x": (1, 2)}, {}, Path(folder))
    ...     _ = run_sweep(spec, lambda cell: {"double": 2 * cell["x"]}, workers=1)
    ...     table = collect(spec, expand(spec)[1:])
    ...     Path(folder, "results.csv").read_text()
    'x,double\\n2,4\\n'
    >>> table.to_dict("records")
    [{'x': 2, 'double': 4}]
    """
    rows = []
    for cell in cells:
        path = _cell_file(spec, cell)
        text = read_text(path)
        try:
            stored = json.loads(text)
            rows.append({**stored["cell"], **stored["metrics"]})
        except (ValueError, KeyError, TypeError):  # a raw JSONDecodeError or KeyError before
            raise InputError(
                str(path),
                text if len(text) <= 60 else text[:57] + "...",
                "not a stored result (a damaged file?): delete it to run its cell again",
            ) from None
    table = pd.DataFrame(rows)
    spec.out.mkdir(parents=True, exist_ok=True)
    if spec.format == "parquet":
        # pyarrow cannot write a column of empty mappings (every cell's default options) and
        # reads mixed ones back changed: mappings and lists are written as JSON text.
        nested = {
            c: table[c].map(
                lambda v: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
            )
            for c in table.columns
            if table[c].map(lambda v: isinstance(v, (dict, list))).any()
        }
        table.assign(**nested).to_parquet(spec.out / "results.parquet", index=False)
    else:
        write_text(spec.out / "results.csv", table.to_csv(index=False))
    return table
