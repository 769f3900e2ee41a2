"""Job traces: loading the artifact's CSV traces, the compat-mode extra jobs, and the seeded
synthetic trace of the paper's Fig 13 experiment.

A trace is a tuple of :class:`TraceJob`, sorted by submit time (ties keep file order).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from palopt.errors import (
    PRINTABLE,
    InputError,
    check_count,
    check_flag,
    check_number,
    check_seed,
    is_finite_number,
    is_number,
)
from palopt.io import read_csv
from palopt.workloads import Workloads, load_workloads

__all__ = [
    "TraceJob",
    "check_trace",
    "load_trace",
    "extra_jobs",
    "gpu_count_distribution",
    "synthetic_trace",
    "SYNERGY_GPU_COUNTS",
]

#: The longest time, in seconds (about 31,700 years), the simulator's clock takes: a submit
#: time, a job's run on median GPUs, a round. The clock is a float, and beyond about 1e15 s its
#: rounds lose whole seconds.
MAX_TIME_S = 1e12

REQUIRED_COLUMNS = ("job_id", "num_gpus", "submit_time", "duration", "model")

#: A cell pandas reads as a number when its whole column is numeric.
_NUMBER = re.compile(
    r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)\s*", re.IGNORECASE
)


def _number_cell(value: Any) -> Any:
    """A number pandas left as text, as the number: a column holding an integer beyond 64 bits
    is read as text, every cell of it, by pandas before 3.0 (by pandas 3, one of more than 4,300
    digits), so that its other rows would be blamed for it."""
    if not isinstance(value, str) or not _NUMBER.fullmatch(value):
        return value
    try:
        return int(value)
    except ValueError:  # a decimal point or exponent, or more digits than int() takes
        return float(value)


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace.

    Attributes
    ----------
    id : str
    num_gpus : int
    submit_time : float
        Seconds from the start of the simulation.
    iterations : float
        Iterations to run (the trace's ``duration`` column).
    model : str
    job_class : str
        Workload class (selects the slowdown row and the locality penalties).
    base_iter_time : float
        Seconds per iteration on a median GPU within one server.
    tracked : bool
        Whether the job counts in the results (the compat-mode extra jobs do not).

    Examples
    --------
    >>> job = TraceJob("j1", 4, 30.0, 500.0, "resnet50", "classA", 0.2)
    >>> job.tracked, job.ideal_seconds
    (True, 100.0)
    """

    id: str
    num_gpus: int
    submit_time: float
    iterations: float
    model: str
    job_class: str
    base_iter_time: float
    tracked: bool = True

    @property
    def ideal_seconds(self) -> float:
        """Run time on median GPUs within one server.

        Examples
        --------
        >>> TraceJob("j1", 1, 0.0, 300.0, "m", "classA", 0.5).ideal_seconds
        150.0
        """
        return self.iterations * self.base_iter_time


def load_trace(path: str | Path, workloads: Workloads | None = None) -> tuple[TraceJob, ...]:
    """Load a trace CSV with columns ``job_id, num_gpus, submit_time, duration, model``.

    Parameters
    ----------
    path : str or Path
    workloads : Workloads, optional
        Each model's class and base iteration time (default: the PAL artifact's,
        ``models/pal-artifact.json``).

    Returns
    -------
    tuple of TraceJob
        Sorted by submit time (stable).

    Raises
    ------
    InputError
        For a missing column, no job, an unknown model, an empty or duplicate job id, a size
        that is not a positive integer, a non-positive duration or one that runs longer than
        :data:`MAX_TIME_S`, or a submit time outside 0 to :data:`MAX_TIME_S`.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import io
    >>> text = "job_id,num_gpus,submit_time,duration,model\\n7,2,30,100,vgg19\\n"
    >>> load_trace(io.StringIO(text))[0].job_class
    'classC'
    """
    workloads = workloads or load_workloads()
    # Ids and model names are text as written ("1" and "1.0" are two jobs; a job may be called
    # "NA"; a workload file may name a model "7", which a number column would make 7.0), so only
    # an empty cell is missing; an extra field on a row is an error, not a shift of the columns.
    # (dtype, not a converter: pandas before 3.0 gave the converter's '' for an empty cell)
    df = read_csv(
        path,
        "trace",
        dtype={"job_id": str, "model": str},
        keep_default_na=False,
        na_values=[""],
    )
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            "trace.columns", list(df.columns), f"missing column(s) {', '.join(missing)}"
        )
    if df.empty:  # a simulation of nothing: its summary would be all NaN
        raise InputError("trace", "header only", "no jobs")
    jobs = []
    for i, (jid, n, submit, dur, model) in enumerate(
        zip(*(df[c].tolist() for c in REQUIRED_COLUMNS), strict=True)
    ):
        spec = workloads.get(model, f"trace[{i}].model")
        n, submit, dur = (_number_cell(v) for v in (n, submit, dur))
        if isinstance(n, float) and n.is_integer():  # the column is float if a cell is empty
            n = int(n)
        jobs.append(TraceJob(jid, n, submit, dur, str(model), spec.job_class, spec.base_iter_time))
    check_trace(jobs)
    return tuple(sorted(jobs, key=lambda j: j.submit_time))


def check_trace(trace: Sequence[TraceJob]) -> None:
    """Check every job of a trace, naming ``trace[i].field`` (``i`` in the order given).

    Parameters
    ----------
    trace : sequence of TraceJob

    Raises
    ------
    InputError
        For an empty or duplicate id, a size that is not a positive integer, a number of
        iterations or an iteration time that is not a finite positive number, a submit time
        outside 0 to :data:`MAX_TIME_S`, or a class that is not a name.

    Examples
    --------
    >>> check_trace([TraceJob("a", 2, 0.0, 100.0, "vgg19", "classC", -1.0)])
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: trace[0].base_iter_time = -1.0: must be a finite positive number
    """
    seen: set[str] = set()
    for i, job in enumerate(trace):
        where = f"trace[{i}]"
        if not isinstance(job, TraceJob):
            raise InputError(where, job, "must be a TraceJob")
        if job.id != job.id or (isinstance(job.id, str) and not job.id.strip()):
            # (pandas reads an empty cell as NaN)
            raise InputError(f"{where}.job_id", job.id, "empty job id")
        if not isinstance(job.id, str):
            raise InputError(f"{where}.job_id", job.id, "must be a string")
        if not job.id.isprintable():
            raise InputError(f"{where}.job_id", job.id, PRINTABLE)
        if job.id in seen:
            raise InputError(f"{where}.job_id", job.id, "duplicate job id")
        seen.add(job.id)
        check_count(job.num_gpus, f"{where}.num_gpus")
        for name, value in (("duration", job.iterations), ("base_iter_time", job.base_iter_time)):
            if not is_finite_number(value) or not value > 0:  # 10**400 has no float
                raise InputError(f"{where}.{name}", value, "must be a finite positive number")
        if job.ideal_seconds > MAX_TIME_S:  # a run that long never ended (1e308 iterations)
            raise InputError(
                f"{where}.duration",
                job.iterations,
                f"runs {job.ideal_seconds:.3g} s on median GPUs; at most {MAX_TIME_S:g}",
            )
        if not is_number(job.submit_time) or not 0 <= job.submit_time <= MAX_TIME_S:
            raise InputError(
                f"{where}.submit_time",
                job.submit_time,
                f"must be a number from 0 to {MAX_TIME_S:g}",
            )
        if not isinstance(job.job_class, str):
            raise InputError(f"{where}.job_class", job.job_class, "expected a class name")
        check_flag(job.tracked, f"{where}.tracked")


def extra_jobs(
    trace: Sequence[TraceJob], count: int, rate_per_hour: float = 2.0, seed: int = 1
) -> tuple[TraceJob, ...]:
    """The compat-mode extra jobs: the trace repeated after its last job, untracked.

    Job ``k`` repeats ``trace[k % len(trace)]`` and arrives a whole number of seconds
    ``ceil(3600 * Exp(rate))`` after the previous job, as the artifact's replay workload does
    (it draws from Python's ``random`` seeded with 1).

    Parameters
    ----------
    trace : sequence of TraceJob
    count : int
        Number of extra jobs.
    rate_per_hour : float
        Mean arrivals per hour, a finite number > 0.
    seed : int

    Returns
    -------
    tuple of TraceJob
        With ids ``x<k>`` (``xx<k>``, ... if the trace has an id of that form) and
        ``tracked=False``; empty if ``trace`` is empty or ``count < 1``.
        Fewer than ``count`` where the next would arrive after :data:`MAX_TIME_S` (a rate so
        low that the simulator's clock never reaches it).

    Raises
    ------
    InputError
        If ``rate_per_hour`` is not a finite number > 0.

    Examples
    --------
    >>> trace = [TraceJob("a", 2, 0.0, 100.0, "vgg19", "classC", 1.0),
    ...          TraceJob("b", 1, 60.0, 30.0, "vgg19", "classC", 1.0)]
    >>> [(j.id, j.num_gpus, j.submit_time, j.tracked) for j in extra_jobs(trace, 3)]
    [('x0', 2, 320.0, False), ('x1', 1, 3705.0, False), ('x2', 2, 6303.0, False)]
    """
    check_number(rate_per_hour, "rate_per_hour")
    if not trace or count <= 0:
        return ()
    # ``x<k>`` unless a trace job is named so (its id would be given twice): then ``xx<k>``...
    prefix = "x"
    while any(j.id.startswith(prefix) and j.id[len(prefix) :].isdigit() for j in trace):
        prefix += "x"
    rng = random.Random(seed)
    t = trace[-1].submit_time
    out = []
    for k in range(count):
        gap = -math.log(1.0 - rng.random()) / rate_per_hour * 3600.0
        # gap first: it may be infinite, and math.ceil overflows on that
        if t + gap > MAX_TIME_S or t + math.ceil(gap) > MAX_TIME_S:
            break
        t += math.ceil(gap)
        out.append(
            replace(trace[k % len(trace)], id=f"{prefix}{k}", submit_time=float(t), tracked=False)
        )
    return tuple(out)


def gpu_count_distribution(traces: Sequence[Sequence[TraceJob]]) -> tuple[np.ndarray, np.ndarray]:
    """Empirical distribution of GPU counts over traces: (sizes, probabilities).

    Parameters
    ----------
    traces : sequence of sequence of TraceJob
        Every job of every trace counts once.

    Returns
    -------
    sizes : numpy.ndarray
        The distinct GPU counts, ascending (``int64``).
    probs : numpy.ndarray
        The share of jobs with each count (sums to 1).

    Examples
    --------
    >>> a = TraceJob("a", 2, 0.0, 100.0, "vgg19", "classC", 1.0)
    >>> b = TraceJob("b", 1, 0.0, 100.0, "vgg19", "classC", 1.0)
    >>> sizes, probs = gpu_count_distribution([[a, b], [a]])
    >>> sizes.tolist(), probs.round(3).tolist()
    ([1, 2], [0.333, 0.667])
    """
    counts = np.array([j.num_gpus for t in traces for j in t], dtype=np.int64)
    sizes, freq = np.unique(counts, return_counts=True)
    return sizes, freq / freq.sum()


#: GPU counts of the artifact's synthetic (Synergy) workload, a Philly-derived split:
#: 1 GPU 70%, 2 GPUs 10%, 4 GPUs 15%, 8 GPUs 5%.
SYNERGY_GPU_COUNTS = (np.array([1, 2, 4, 8]), np.array([0.70, 0.10, 0.15, 0.05]))


def synthetic_trace(
    n_jobs: int,
    load_per_hour: float,
    seed: int,
    sizes: np.ndarray,
    probs: np.ndarray,
    job_class: str = "classA",
    max_gpus: int | None = None,
    tracked: tuple[int, int] | None = None,
) -> tuple[TraceJob, ...]:
    """The paper's Fig 13 workload (Synergy-style), seeded.

    Poisson arrivals at ``load_per_hour``; GPU counts drawn from ``(sizes, probs)`` (capped to
    ``max_gpus``); run time ``60 * 10**U(3, 4)`` seconds with probability 0.2, else
    ``60 * 10**U(1.5, 3)``; base iteration time 1 s (iterations = seconds); one class.
    ``tracked = (start, stop)`` tracks only jobs ``start <= k < stop`` (the others warm the
    cluster up or keep it loaded); default: all.

    Parameters
    ----------
    n_jobs : int
        Number of jobs, at least 1.
    load_per_hour : float
        Mean arrivals per hour (positive); the first job arrives at time 0.
    seed : int
        Seed of ``numpy.random.default_rng``.
    sizes : numpy.ndarray
        GPU counts to draw from.
    probs : numpy.ndarray
        Probability of each of ``sizes`` (as :func:`gpu_count_distribution` gives them).
    job_class : str, default "classA"
    max_gpus : int, optional
        Larger draws are cut to this count (e.g. the cluster's GPUs).
    tracked : tuple of int, optional
        ``(start, stop)``: the range of job numbers that are tracked.

    Returns
    -------
    tuple of TraceJob
        In submit order, with ids ``"0"``, ``"1"``, ..., model ``"synthetic"``, whole-second
        submit times and durations.

    Raises
    ------
    InputError
        For ``n_jobs < 1``, a load that is not positive, or a negative or non-integer seed.

    Examples
    --------
    >>> import numpy as np
    >>> t = synthetic_trace(3, 10.0, 0, np.array([1, 4]), np.array([0.5, 0.5]))
    >>> len(t), t[0].job_class, t[0].base_iter_time
    (3, 'classA', 1.0)
    """
    if n_jobs < 1 or load_per_hour <= 0:
        raise InputError(
            "synthetic_trace", (n_jobs, load_per_hour), "need at least one job and a positive load"
        )
    rng = np.random.default_rng(check_seed(seed))
    gaps = rng.exponential(3600.0 / load_per_hour, n_jobs)
    submit = np.cumsum(gaps) - gaps[0]
    n = rng.choice(sizes, size=n_jobs, p=probs)
    if max_gpus is not None:
        n = np.minimum(n, max_gpus)
    long = rng.random(n_jobs) < 0.2
    expo = np.where(long, rng.uniform(3.0, 4.0, n_jobs), rng.uniform(1.5, 3.0, n_jobs))
    seconds = np.round(60.0 * 10.0**expo)
    lo, hi = tracked if tracked is not None else (0, n_jobs)
    return tuple(
        TraceJob(
            str(i),
            int(n[i]),
            float(round(submit[i])),
            float(seconds[i]),
            "synthetic",
            job_class,
            1.0,
            lo <= i < hi,
        )
        for i in range(n_jobs)
    )
