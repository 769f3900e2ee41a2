"""The round-based cluster simulator.

Time advances in rounds of ``R`` seconds. At the start of each round the simulator

1. accounts the progress of every job that ran in the last round (``R / iteration time``
   iterations; a job whose iterations are done completes and frees its GPUs),
2. admits the jobs whose submit time has come,
3. orders the active jobs with the scheduling policy,
4. builds an :class:`~palopt.instance.Instance` (running jobs carry ``current_gpus``) and places
   it with the placement solver,
5. starts, keeps, migrates and preempts jobs as the result says.

A job's iteration time on GPU set ``S`` is ``base_iter_time x cost(S)``, where ``cost`` is
:func:`palopt.cost.job_cost` over the *charged* profile (compat mode: the raw measured slowdown,
while placement ranks by the binned one). In compat mode a job completes at the end of the round
in which its iterations are done and preemption and migration are free; the realistic options
(:class:`SimConfig`) change that.

The loop is a library: build a :class:`Simulator`, then call :meth:`Simulator.step` round by
round (a scheduler under study may inspect :attr:`Simulator.jobs` in between) or
:meth:`Simulator.run`.
"""

from __future__ import annotations

import copy
import logging
import math
import time as _time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from palopt.cost import assert_feasible, set_costs
from palopt.errors import (
    InputError,
    PaloptError,
    check_count,
    check_flag,
    check_number,
    check_seed,
    check_time_limit,
    counted,
)
from palopt.instance import Instance, Job, penalty_matrix
from palopt.result import JobPlacement, PlacementResult
from palopt.sim.policies import SchedulingPolicy, get_policy
from palopt.sim.profile import ClusterProfile
from palopt.sim.trace import MAX_TIME_S, TraceJob, check_trace, extra_jobs
from palopt.solvers import get_solver
from palopt.solvers.base import Solver
from palopt.topology import Topology, require_topology

__all__ = [
    "SimConfig",
    "JobTable",
    "RoundRecord",
    "SimResult",
    "Simulator",
    "SimulationStalled",
    "simulate",
]

log = logging.getLogger(__name__)

#: The shortest round, in seconds: a round of a nanosecond made a one-hour job take 3.6e12
#: rounds (the simulation never ended).
MIN_ROUND_S = 1e-3

#: The most rounds a simulation runs (skipped idle rounds not counted): a job of 1e12 s in a trace
#: (the longest allowed), or charged a slowdown of 1e12, ran for hours and wrote a rounds table
#: of gigabytes. A million rounds of the default 360 s are over eleven years.
MAX_ROUNDS = 1_000_000
_FEWER_ROUNDS = "give a horizon (max_time; --max-time) or longer rounds (round; --round)"

WAITING, RUNNING, DONE = 1, 2, 3

#: A job whose iterations done are within this fraction of its total has completed: the float
#: sum of its rounds' progress may fall an ulp or so short of a total reached exactly.
COMPLETION_RTOL = 1e-12


class SimulationStalled(PaloptError):
    """The simulation made no progress for too long (a job that can never be placed, or jobs
    preempted before their restart cost is paid).

    Examples
    --------
    Under LAS two 2-GPU jobs on 2 GPUs swap every round, each paying a restart cost of a
    whole round:

    >>> import numpy as np
    >>> from palopt.topology import build_cluster
    >>> from palopt.sim.profile import ClusterProfile
    >>> from palopt.sim.trace import TraceJob
    >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
    >>> trace = [TraceJob("a", 2, 0.0, 1000.0, "m", "A", 1.0),
    ...          TraceJob("b", 2, 0.0, 1000.0, "m", "A", 1.0)]
    >>> config = SimConfig(round_s=60, restart_cost_s=60, max_idle_rounds=2)
    >>> try:
    ...     simulate(build_cluster(1, 1, 2), prof, trace, policy="las", config=config)
    ... except SimulationStalled as exc:
    ...     print(str(exc).split(" (")[0])
    no job has gained an iteration for 4 rounds at t=360s
    """


@dataclass(frozen=True)
class SimConfig:
    """Simulation settings. The defaults are the artifact's model (compat mode).

    Parameters
    ----------
    round_s : float
        Round length in seconds, from :data:`MIN_ROUND_S` to
        :data:`palopt.sim.trace.MAX_TIME_S`.
    penalties : float or mapping
        Locality penalties (see :func:`palopt.instance.penalty_matrix`): a number ``P`` is the
        artifact's model (1.0 within a server, ``P`` beyond); a mapping gives per-tier and
        per-class values. The same penalties feed placement and the charged cost.
    completion : {"round", "exact"}
        ``round``: a job completes at the end of the round in which it finishes (compat).
        ``exact``: at the exact moment within the round (its GPUs are freed at the next round).
    restart_cost_s : float
        Seconds of a round lost by a job that resumes after a preemption or migrates.
    backfill : bool
        After placement, let the jobs behind a blocked one (waiting or running) use GPUs it
        could not use.
    extra_jobs : bool
        Compat: feed untracked jobs after the trace (the trace repeated, Poisson arrivals at
        ``extra_rate`` jobs per hour), as the artifact does. The job results (JCTs, queueing
        delays, preemptions, migrations) count tracked jobs only; GPU utilisation counts the
        GPUs every job holds, extra jobs too.
    extra_rate : float
    extra_seed : int
    time_limit : float, optional
        Per-round time limit passed to the solver (exact solvers).
    seed : int
        Base seed of randomised solvers (round ``k`` uses ``seed + k``).
    shortcuts : bool
        Pure speed-ups that leave results unchanged: skip the solver in a round whose input
        equals the previous round's after a decision that changed nothing; fast-forward such
        rounds under a static policy (FIFO) to the next arrival or completion; pass the
        non-sticky heuristics only the queue up to the job after their window.
    check : bool
        Check every placement with :func:`palopt.cost.assert_feasible`.
    max_idle_rounds : int
        Raise :class:`SimulationStalled` after more than this many rounds in a row in which no
        job gains an iteration (plus the rounds one restart cost spans): rounds with waiting
        jobs, nothing running and no job of the trace to come (extra jobs do not count), or
        with every running job paying its restart cost (a
        policy that swaps jobs every round, such as LAS between jobs of equal service, with a
        restart cost of a round or more, would otherwise loop for ever).
    max_time_s : float, optional
        The horizon: :meth:`Simulator.run` simulates no round that starts at or after this
        time (seconds) and returns with the tracked jobs not completed by then left unfinished
        (see :func:`palopt.sim.metrics.summary`). Default: run until every tracked job has
        completed, which may never happen where a policy starves a job for ever (LAS or SRTF
        with ``extra_jobs`` on a trace that keeps the cluster overloaded).

    Raises
    ------
    InputError
        For ``round_s`` or ``restart_cost_s`` out of range (the latter may be 0), a
        ``completion`` other than ``round`` and ``exact``, an ``extra_rate`` that is not a
        positive number, a flag that is not a bool, a ``max_idle_rounds`` that is not a positive
        integer, a ``seed`` or ``extra_seed`` that is not a non-negative integer, or a
        ``time_limit`` or ``max_time_s`` given and not a positive number (at most
        :data:`palopt.sim.trace.MAX_TIME_S` for ``max_time_s``). ``penalties`` is checked by
        :class:`Simulator`.

    Examples
    --------
    >>> SimConfig(round_s=60, completion="exact").restart_cost_s
    0.0
    >>> SimConfig(completion="never")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: completion = 'never': must be 'round' or 'exact'
    """

    round_s: float = 360.0
    penalties: float | Mapping[str, Any] = 1.7
    completion: str = "round"
    restart_cost_s: float = 0.0
    backfill: bool = False
    extra_jobs: bool = False
    extra_rate: float = 2.0
    extra_seed: int = 1
    time_limit: float | None = None
    seed: int = 0
    shortcuts: bool = True
    check: bool = False
    max_idle_rounds: int = 10
    max_time_s: float | None = None

    def __post_init__(self) -> None:
        check_number(self.round_s, "round", low=MIN_ROUND_S, inclusive=True, high=MAX_TIME_S)
        if self.completion not in ("round", "exact"):
            raise InputError("completion", self.completion, "must be 'round' or 'exact'")
        check_number(self.restart_cost_s, "restart_cost", inclusive=True, high=MAX_TIME_S)
        check_number(self.extra_rate, "extra_rate")
        for flag in ("backfill", "extra_jobs", "shortcuts", "check"):
            check_flag(getattr(self, flag), flag)
        check_count(self.max_idle_rounds, "max_idle_rounds")
        for name in ("seed", "extra_seed"):  # None would draw differently on every run
            if check_seed(getattr(self, name), name) is None:
                raise InputError(name, None, "must be a non-negative integer")
        if self.time_limit is not None:
            check_time_limit(self.time_limit)
        if self.max_time_s is not None:
            check_number(self.max_time_s, "max_time", high=MAX_TIME_S)


def _require_profiled(
    job: TraceJob, number: int, class_index: Mapping[str, int], *, by_id: bool
) -> None:
    """Refuse a job whose class has no row in ``class_index``: an :class:`InputError` naming it
    ``trace[number]``, and by its id with ``by_id``."""
    if job.job_class not in class_index:
        named = f"job {job.id!r}: " if by_id else ""
        raise InputError(
            f"trace[{number}].class",
            job.job_class,
            f"{named}no profile for this class; known: {', '.join(class_index)}",
        )


class JobTable:
    """Per-job state as numpy arrays, indexed by job number (admission order = trace order).

    Every attribute but ``gpus`` is a numpy array of one entry per job.

    Attributes
    ----------
    submit, iters_total, base, num_gpus, cls, tracked : static job data
    status : 0 not arrived, 1 waiting, 2 running, 3 done
    iters_done : iterations completed
    attained_s, attained_gpu_s : seconds and GPU-seconds held (whole rounds, restart cost
        included)
    waited_s : seconds spent waiting after admission
    lost_s : restart seconds the job still has to pay before it makes progress again
    first_start, finish : times (NaN until known)
    cost : charged cost (slowdown x penalty) on the current GPUs (NaN when not running)
    preemptions, migrations : counts
    gpus : list of tuple of int, the current GPUs of each job

    Parameters
    ----------
    jobs : sequence of TraceJob
        The first jobs (see :meth:`extend`).
    class_index : mapping of str to int
        Row of each class in the profile.

    Raises
    ------
    InputError
        For a job whose class is not in ``class_index``.

    Examples
    --------
    >>> from palopt.sim.trace import TraceJob
    >>> jt = JobTable([TraceJob("a", 2, 0.0, 100.0, "m", "A", 1.0)], {"A": 0})
    >>> len(jt), jt.status.tolist(), jt.finish.tolist(), jt.gpus
    (1, [0], [nan], [()])
    """

    def __init__(self, jobs: Sequence[TraceJob], class_index: Mapping[str, int]) -> None:
        self.jobs: list[TraceJob] = []
        n = 0
        self.submit: np.ndarray = np.zeros(n)
        self.iters_total: np.ndarray = np.zeros(n)
        self.base: np.ndarray = np.zeros(n)
        self.num_gpus: np.ndarray = np.zeros(n, dtype=np.int64)
        self.cls: np.ndarray = np.zeros(n, dtype=np.int64)
        self.tracked: np.ndarray = np.zeros(n, dtype=bool)
        self.status = np.zeros(n, dtype=np.int64)
        self.iters_done = np.zeros(n)
        self.attained_s = np.zeros(n)
        self.attained_gpu_s = np.zeros(n)
        self.waited_s = np.zeros(n)
        self.first_start = np.zeros(n)
        self.finish = np.zeros(n)
        self.cost = np.zeros(n)
        self.lost_s = np.zeros(n)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.migrations = np.zeros(n, dtype=np.int64)
        self.gpus: list[tuple[int, ...]] = []
        self._class_index = class_index
        self.extend(jobs)

    def __len__(self) -> int:
        return len(self.jobs)

    def extend(self, jobs: Sequence[TraceJob]) -> None:
        """Append jobs (not arrived yet).

        Parameters
        ----------
        jobs : sequence of TraceJob
            Numbered after the jobs already in the table, in this order.

        Raises
        ------
        InputError
            For a job whose class has no row in the table's class index, numbered as it would
            be in the table; no job is appended then.

        Examples
        --------
        >>> from palopt.sim.trace import TraceJob
        >>> jt = JobTable([], {"A": 0})
        >>> jt.extend([TraceJob("a", 2, 5.0, 100.0, "m", "A", 1.0)])
        >>> len(jt), jt.submit.tolist()
        (1, [5.0])
        >>> jt.extend([TraceJob("b", 1, 5.0, 100.0, "m", "Z", 1.0)])
        Traceback (most recent call last):
        ...
        palopt.errors.InputError: trace[1].class = 'Z': no profile for this class; known: A
        """
        for i, j in enumerate(jobs):
            _require_profiled(j, len(self.jobs) + i, self._class_index, by_id=False)
        k = len(jobs)
        self.jobs.extend(jobs)
        self.submit = np.append(self.submit, [j.submit_time for j in jobs])
        self.iters_total = np.append(self.iters_total, [j.iterations for j in jobs])
        self.base = np.append(self.base, [j.base_iter_time for j in jobs])
        self.num_gpus = np.append(self.num_gpus, np.array([j.num_gpus for j in jobs], np.int64))
        self.cls = np.append(
            self.cls, np.array([self._class_index[j.job_class] for j in jobs], np.int64)
        )
        self.tracked = np.append(self.tracked, np.array([j.tracked for j in jobs], bool))
        for name in ("status", "preemptions", "migrations"):
            setattr(self, name, np.append(getattr(self, name), np.zeros(k, np.int64)))
        for name in ("iters_done", "attained_s", "attained_gpu_s", "waited_s", "lost_s"):
            setattr(self, name, np.append(getattr(self, name), np.zeros(k)))
        for name in ("first_start", "finish", "cost"):
            setattr(self, name, np.append(getattr(self, name), np.full(k, np.nan)))
        self.gpus.extend(() for _ in range(k))


@dataclass(frozen=True)
class RoundRecord:
    """The cluster state after one round's placement.

    Parameters
    ----------
    round : int
        The round's number.
    time : float
        Its start, in seconds.
    busy_gpus : int
        GPUs held by running jobs.
    running, waiting : int
        Admitted jobs not done that run, and that wait.
    arrived, started, completed, preempted, migrated : int
        Jobs admitted, started or resumed, completed (in the round before), preempted and
        migrated in this round.
    solved : bool
        Whether the solver ran (the shortcuts reuse an unchanged decision).
    solve_time : float
        Seconds spent in the solver.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt.topology import build_cluster
    >>> from palopt.sim.profile import ClusterProfile
    >>> from palopt.sim.trace import TraceJob
    >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
    >>> sim = Simulator(build_cluster(1, 1, 2), prof,
    ...                 [TraceJob("a", 1, 0.0, 30.0, "m", "A", 1.0)])
    >>> r = sim.step()
    >>> r.round, r.busy_gpus, r.running, r.arrived, r.started, r.solved
    (0, 1, 1, 1, 1, True)
    """

    round: int
    time: float
    busy_gpus: int
    running: int
    waiting: int
    arrived: int
    started: int
    completed: int
    preempted: int
    migrated: int
    solved: bool
    solve_time: float


@dataclass(frozen=True)
class SimResult:
    """A finished simulation: the job table, the per-round records and the settings.

    Parameters
    ----------
    jobs : JobTable
        Every job's state at the end.
    rounds : tuple of RoundRecord
        One per simulated round.
    n_gpus : int
    solver, policy : str
        The names of the solver and the policy.
    config : SimConfig
    wall_time : float
        Seconds the simulation took.
    meta : dict, optional
        Extra descriptive data.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt.topology import build_cluster
    >>> from palopt.sim.profile import ClusterProfile
    >>> from palopt.sim.trace import TraceJob
    >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
    >>> res = simulate(build_cluster(1, 1, 2), prof,
    ...                [TraceJob("a", 1, 0.0, 30.0, "m", "A", 1.0)])
    >>> res.n_gpus, res.solver, res.policy, len(res.rounds), res.jobs.finish.tolist()
    (2, 'pal', 'fifo', 2, [360.0])
    """

    jobs: JobTable
    rounds: tuple[RoundRecord, ...]
    n_gpus: int
    solver: str
    policy: str
    config: SimConfig
    wall_time: float
    meta: dict[str, Any] = field(default_factory=dict)


class Simulator:
    """Round-based simulation of a job trace on a cluster.

    Parameters
    ----------
    topology : Topology
    profile : ClusterProfile
        ``rank`` feeds the placement instance, ``charge`` the simulated iteration times.
    trace : sequence of TraceJob
        Admitted in submit-time order (ties keep the given order).
    solver : str or Solver
        A registry name (see ``palopt solvers``) or a solver object.
    policy : str or SchedulingPolicy
        ``fifo``, ``las``, ``srtf``, ``tiresias`` or a policy object.
    config : SimConfig, optional

    Raises
    ------
    InputError
        For a job larger than the cluster, a class without profile, or bad settings.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt.topology import build_cluster
    >>> from palopt.sim.profile import ClusterProfile
    >>> from palopt.sim.trace import TraceJob
    >>> topo = build_cluster(1, 1, 2)
    >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
    >>> sim = Simulator(topo, prof, [TraceJob("j", 2, 0.0, 100.0, "m", "A", 1.0)], "pal", "fifo",
    ...                 SimConfig(round_s=60))
    >>> res = sim.run()
    >>> float(res.jobs.finish[0])
    120.0
    """

    def __init__(
        self,
        topology: Topology,
        profile: ClusterProfile,
        trace: Sequence[TraceJob],
        solver: str | Solver = "pal",
        policy: str | SchedulingPolicy = "fifo",
        config: SimConfig | None = None,
    ) -> None:
        if config is not None and not isinstance(config, SimConfig):
            raise InputError("config", type(config).__name__, "expected a SimConfig")
        require_topology(topology)
        if not isinstance(profile, ClusterProfile):
            raise InputError("profile", type(profile).__name__, "expected a ClusterProfile")
        if isinstance(solver, type) or (
            not isinstance(solver, str) and not callable(getattr(solver, "solve", None))
        ):
            raise InputError(
                "solver",
                getattr(solver, "__name__", type(solver).__name__),
                "expected a solver object or its name",
            )
        if not isinstance(policy, str) and not callable(getattr(policy, "order", None)):
            raise InputError("policy", type(policy).__name__, "expected a policy or its name")
        self.config = config or SimConfig()
        cfg = self.config
        self.topology = topology
        self.profile = profile
        n = topology.n_gpus
        if profile.rank.shape != (len(profile.classes), n):
            raise InputError(
                "profile", profile.rank.shape, f"expected {len(profile.classes)} classes x {n} GPUs"
            )
        self.solver_name = solver if isinstance(solver, str) else getattr(solver, "name", "solver")
        self.solver: Solver = get_solver(solver) if isinstance(solver, str) else solver
        self.policy = get_policy(policy)
        if not isinstance(getattr(self.policy, "name", None), str):
            raise InputError("policy", type(self.policy).__name__, "a policy needs a name")
        sticky = getattr(self.solver, "sticky", None)
        # A solver without the attribute is taken to give the same decision for the same input
        # (see HeuristicSolver.repeatable).
        self.reusable = bool(getattr(self.solver, "repeatable", True))
        # The non-sticky heuristics stop at the first job that does not fit and the jobs past
        # the window (the longest prefix that fits the cluster) never fit: pass them no further.
        self._cut_window = sticky is False and not cfg.backfill and cfg.shortcuts
        self.penalty = penalty_matrix(topology, profile.classes, cfg.penalties)
        self.class_index = {c: i for i, c in enumerate(profile.classes)}
        # The charged cost uses the one cost definition over the charged profile.
        self._charge_instance = Instance(
            topology, profile.classes, profile.charge, self.penalty, ()
        )
        self._base_instance = Instance(topology, profile.classes, profile.rank, self.penalty, ())
        trace = tuple(trace)  # a generator would be used up by the check
        check_trace(trace)
        for i, j in enumerate(trace):  # numbered as given (JobTable numbers in submit order)
            if j.num_gpus > n:
                raise InputError(
                    f"trace[{i}].num_gpus",
                    j.num_gpus,
                    f"job {j.id!r} needs more than the cluster's {counted(n, 'GPU')}",
                )
            _require_profiled(j, i, self.class_index, by_id=True)
        self.trace = tuple(sorted(trace, key=lambda j: j.submit_time))  # stable
        self.jobs = JobTable(self.trace, self.class_index)
        self._check_rounds(trace)
        self._n_extra = 0
        self.round = 0
        self._next_arrival = 0  # index of the next job to admit
        self.active: list[int] = []  # admitted, not done, admission order
        self._job_obj: dict[int, Job] = {}
        self._last_order: tuple[int, ...] | None = None
        self._dirty = True
        self._idle_rounds = 0  # rounds in a row in which no job gained an iteration
        self._progressed = False  # whether the last round's running jobs gained iterations
        self.rounds: list[RoundRecord] = []
        self._started = _time.perf_counter()
        self._tracked_left = int(self.jobs.tracked.sum())
        # run() simulates rounds 0 .. _end_round - 1: those that start before the horizon.
        self._end_round: float = (
            math.inf if cfg.max_time_s is None else self._first_round_at(cfg.max_time_s)
        )
        if cfg.extra_jobs:
            self._add_extra()
        self._skip_to_next_arrival()  # the first round is the first arrival's, as later ones

    # -- helpers -----------------------------------------------------------------------
    def _check_rounds(self, trace: Sequence[TraceJob]) -> None:
        """Refuse a trace of which a job alone needs more than :data:`MAX_ROUNDS` rounds (at
        its class's least charged cost, in every round), unless the horizon comes first."""
        cfg = self.config
        if cfg.max_time_s is not None and cfg.max_time_s / cfg.round_s <= MAX_ROUNDS:
            return
        least = self.profile.charge.min(axis=1) * self.penalty.min(axis=1)  # per class
        rounds = [
            j.ideal_seconds * least[self.class_index[j.job_class]] / cfg.round_s for j in trace
        ]
        i = int(np.argmax(rounds)) if rounds else 0
        # + 1: a job's completion is recorded at the start of the round after its last one
        if rounds and rounds[i] + 1 > MAX_ROUNDS:
            c = self.class_index[trace[i].job_class]
            raise InputError(
                f"trace[{i}].duration",
                trace[i].iterations,
                f"job {trace[i].id!r} alone needs {rounds[i]:.3g} rounds of {cfg.round_s:g} s "
                f"at its class's least charged cost (slowdown x penalty) of {least[c]:.3g}, and "
                "one more that records its completion; "
                f"at most {MAX_ROUNDS:,} are simulated: {_FEWER_ROUNDS}",
            )

    def _first_round_at(self, t: float) -> int:
        """The first round whose start (``round x round_s``, as :attr:`time` computes it) is at
        or after ``t``. ``ceil(t / round_s)`` alone can be one off: with R = 0.3 s, 2.1 / 0.3 is
        7.000000000000001, but round 7 starts at 7 x 0.3 = 2.1."""
        R = self.config.round_s
        k = max(math.ceil(t / R), 0)
        while k > 0 and (k - 1) * R >= t:
            k -= 1
        while k * R < t:
            k += 1
        return k

    def _add_extra(self) -> None:
        count = self._n_extra + max(len(self.trace), 1)
        new = extra_jobs(self.trace, count, self.config.extra_rate, self.config.extra_seed)
        self.jobs.extend(new[self._n_extra :])
        self._n_extra = count

    def _job(self, j: int) -> Job:
        job = self._job_obj.get(j)
        if job is None:
            t = self.jobs.jobs[j]
            job = Job(t.id, t.num_gpus, t.job_class, current_gpus=self.jobs.gpus[j])
            self._job_obj[j] = job
        return job

    @property
    def time(self) -> float:
        """Start of the current round, in seconds: round ``k`` starts at ``k x round_s``.

        Examples
        --------
        >>> import numpy as np
        >>> from palopt.topology import build_cluster
        >>> from palopt.sim.profile import ClusterProfile
        >>> from palopt.sim.trace import TraceJob
        >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
        >>> trace = [TraceJob("a", 1, 0.0, 30.0, "m", "A", 1.0)]
        >>> sim = Simulator(build_cluster(1, 1, 2), prof, trace, config=SimConfig(round_s=60))
        >>> sim.time, sim.step().time, sim.time
        (0.0, 0.0, 60.0)
        """
        return float(self.round * self.config.round_s)

    @property
    def finished(self) -> bool:
        """Whether every tracked job has completed.

        Examples
        --------
        >>> import numpy as np
        >>> from palopt.topology import build_cluster
        >>> from palopt.sim.profile import ClusterProfile
        >>> from palopt.sim.trace import TraceJob
        >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
        >>> trace = [TraceJob("a", 1, 0.0, 30.0, "m", "A", 1.0)]
        >>> sim = Simulator(build_cluster(1, 1, 2), prof, trace, config=SimConfig(round_s=60))
        >>> sim.finished, sim.run().jobs.finish.tolist(), sim.finished
        (False, [60.0], True)
        """
        return self._tracked_left == 0

    # -- one round -----------------------------------------------------------------------
    def _account_progress(self) -> int:
        """Progress of the last round; returns the number of completed jobs."""
        jt, R = self.jobs, self.config.round_s
        run = np.flatnonzero(jt.status == RUNNING)
        waiting = np.flatnonzero(jt.status == WAITING)
        jt.waited_s[waiting] += R
        self._progressed = False
        if len(run) == 0:
            return 0
        iter_time = jt.cost[run] * jt.base[run]
        usable = np.maximum(R - jt.lost_s[run], 0.0)
        self._progressed = bool(usable.any())
        jt.lost_s[run] = np.maximum(jt.lost_s[run] - R, 0.0)  # a restart may outlast a round
        before = jt.iters_done[run]
        jt.iters_done[run] = before + usable / iter_time
        jt.attained_s[run] += R
        jt.attained_gpu_s[run] += R * jt.num_gpus[run]
        # Done up to rounding: the sum of a round's iterations (R / iteration time, rarely exact)
        # over the rounds a job needs fell short by an ulp and charged it one more round (2,000
        # iterations at 100 / 1.7 per round: 34 rounds summed to 1999.9999999999995).
        done = run[jt.iters_done[run] >= jt.iters_total[run] * (1.0 - COMPLETION_RTOL)]
        if len(done) == 0:
            return 0
        if self.config.completion == "exact":
            k = np.isin(run, done)
            left = (jt.iters_total[run] - before)[k]
            # (at most this round's start: the sum above may overshoot it by rounding)
            jt.finish[done] = np.minimum(
                self.time - R + (R - usable[k]) + left * iter_time[k], self.time
            )
        else:
            jt.finish[done] = self.time
        jt.status[done] = DONE
        for j in done.tolist():
            jt.gpus[j] = ()
            self._job_obj.pop(j, None)
        jt.cost[done] = np.nan
        self._tracked_left -= int(jt.tracked[done].sum())
        done_set = set(done.tolist())
        self.active = [j for j in self.active if j not in done_set]
        return len(done)

    def _admit(self) -> int:
        jt = self.jobs
        start = self._next_arrival
        while True:
            if self._next_arrival == len(jt) and self.config.extra_jobs and not self.finished:
                self._add_extra()
            if self._next_arrival < len(jt) and jt.submit[self._next_arrival] <= self.time:
                self._next_arrival += 1
            else:
                break
        new = list(range(start, self._next_arrival))
        jt.status[new] = WAITING
        self.active.extend(new)
        return len(new)

    def _solve(self, order: np.ndarray) -> tuple[JobPlacement, ...]:
        """The solver's placements of the queue in ``order`` (checked with ``check``), with the
        jobs behind a blocked one backfilled (``backfill``)."""
        if self._cut_window:
            demand = np.cumsum(self.jobs.num_gpus[order])
            order = order[: int(np.searchsorted(demand, self.topology.n_gpus, side="right")) + 1]
        queue = tuple(self._job(j) for j in order.tolist())
        instance = self._base_instance.replace_queue(queue)
        result = self.solver.solve(
            instance, time_limit=self.config.time_limit, seed=self.config.seed + self.round
        )
        if not isinstance(result, PlacementResult):
            raise PaloptError(
                f"solver {self.solver_name} returned a {type(result).__name__}, "
                "not a PlacementResult"
            )
        if self.config.check:
            assert_feasible(instance, result)
        if self.config.backfill:
            return self._backfill(instance, result)
        return result.placements

    def _backfill(self, instance: Instance, result: PlacementResult) -> tuple[JobPlacement, ...]:
        """Place the jobs behind a blocked one on the GPUs left free, in queue order.

        Jobs running now are among them (a job backfilled last round keeps running behind
        the blocked one: left out, it was preempted every other round); one whose GPUs were
        given to another job counts as waiting.
        """
        placements = list(result.placements)
        used = np.zeros(self.topology.n_gpus, dtype=bool)
        for p in placements:
            used[list(p.gpus)] = True
        pos = {p.job_id: i for i, p in enumerate(placements)}
        pending = [j for j, p in zip(instance.queue, placements, strict=True) if not p.placed]
        while len(pending) > 1:
            free = int((~used).sum())
            pending = [j for j in pending[1:] if j.num_gpus <= free]  # drop the blocked head
            if not pending:
                break
            sub = Instance(
                instance.topology,
                instance.classes,
                instance.slowdown,
                instance.penalty,
                tuple(
                    replace(j, current_gpus=()) if used[list(j.current_gpus)].any() else j
                    for j in pending
                ),
                used,
            )
            res = self.solver.solve(
                sub, time_limit=self.config.time_limit, seed=self.config.seed + self.round
            )
            if self.config.check:
                assert_feasible(sub, res)
            for p in res.placements:
                if p.placed:
                    placements[pos[p.job_id]] = p
                    used[list(p.gpus)] = True
            pending = [j for j, p in zip(sub.queue, res.placements, strict=True) if not p.placed]
        return tuple(placements)

    def _check_gpus(self, placed: np.ndarray, news: list[tuple[int, ...]]) -> None:
        """Refuse GPU sets of the wrong size, out of range, or shared, naming the first job."""
        n = self.topology.n_gpus
        sizes = np.fromiter(map(len, news), np.int64, len(news))
        flat = np.array([g for new in news for g in new])
        if flat.size and flat.dtype.kind not in "iu":
            raise PaloptError(
                f"solver {self.solver_name} gave GPUs that are not integer indices: {flat[:4]}"
            )
        flat = flat.astype(np.int64)
        if not (
            ((sizes != 0) & (sizes != self.jobs.num_gpus[placed])).any()
            or (flat.size and (flat.min() < 0 or flat.max() >= n))
            or (flat.size and np.bincount(flat, minlength=n).max() > 1)
        ):
            return
        owner = np.zeros(n, dtype=bool)
        for j, new in zip(placed.tolist(), news, strict=True):
            gpus = np.array(new, dtype=np.int64)
            if new and (
                len(new) != self.jobs.num_gpus[j]
                or gpus.min() < 0
                or gpus.max() >= n
                or owner[gpus].any()
                or len(np.unique(gpus)) != len(gpus)
            ):
                raise PaloptError(
                    f"solver {self.solver_name} gave job {self.jobs.jobs[j].id} GPUs "
                    f"{new}: wrong count, out of range, repeated or shared with another job"
                )
            owner[gpus] = True

    def _apply(
        self, order: np.ndarray, placements: tuple[JobPlacement, ...]
    ) -> tuple[int, int, int]:
        jt, cfg = self.jobs, self.config
        started = preempted = migrated = 0
        changes: list[tuple[int, tuple[int, ...]]] = []
        decided = len(placements)
        placed = order[:decided]
        if len(placed) < decided or any(
            p.job_id != jt.jobs[j].id for j, p in zip(placed.tolist(), placements, strict=True)
        ):
            raise PaloptError(f"solver {self.solver_name} returned placements out of order")
        news = [tuple(sorted(p.gpus)) for p in placements]
        self._check_gpus(placed, news)
        for j in order[decided:].tolist():  # cut off before the solver: not placed
            if jt.gpus[j]:
                changes.append((j, ()))
                preempted += 1
                jt.preemptions[j] += 1
        for j, new in zip(placed.tolist(), news, strict=True):
            old = jt.gpus[j]
            if new == old:
                continue
            changes.append((j, new))
            if not new:
                preempted += 1
                jt.preemptions[j] += 1
            elif old:
                migrated += 1
                jt.migrations[j] += 1
                jt.lost_s[j] = cfg.restart_cost_s
            else:
                started += 1
                if math.isnan(jt.first_start[j]):
                    jt.first_start[j] = self.time
                else:
                    jt.lost_s[j] = cfg.restart_cost_s
        for j, new in changes:
            jt.gpus[j] = new
            self._job_obj.pop(j, None)
            if not new:
                jt.status[j] = WAITING
                jt.cost[j] = np.nan
                jt.lost_s[j] = 0.0
        running = np.array([j for j, new in changes if new], dtype=np.int64)
        if len(running):  # the charged costs, all in one call
            sets = [jt.gpus[j] for j in running.tolist()]
            starts = np.cumsum([0] + [len(s) for s in sets[:-1]])
            gpus = np.array([g for s in sets for g in s], dtype=np.int64)
            jt.status[running] = RUNNING
            jt.cost[running] = set_costs(self._charge_instance, jt.cls[running], gpus, starts)[0]
        return started, preempted, migrated

    def step(self) -> RoundRecord:
        """Run one round: progress, completions, admission, ordering, placement.

        Returns
        -------
        RoundRecord
            The state after this round's placement.

        Raises
        ------
        PaloptError
            After the simulation has finished or run :data:`MAX_ROUNDS` rounds, for a policy's
            order that does not hold each queued job once, or for a solver's answer that is not
            a valid placement.
        SimulationStalled
            When no job has gained an iteration for too long (``SimConfig.max_idle_rounds``).

        Examples
        --------
        >>> import numpy as np
        >>> from palopt.topology import build_cluster
        >>> from palopt.sim.profile import ClusterProfile
        >>> from palopt.sim.trace import TraceJob
        >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
        >>> trace = [TraceJob("a", 1, 0.0, 30.0, "m", "A", 1.0)]
        >>> sim = Simulator(build_cluster(1, 1, 2), prof, trace, config=SimConfig(round_s=60))
        >>> [sim.step().completed for _ in range(2)]
        [0, 1]
        >>> sim.step()
        Traceback (most recent call last):
        ...
        palopt.errors.PaloptError: the simulation has finished (every tracked job completed)
        """
        if self.finished:
            raise PaloptError("the simulation has finished (every tracked job completed)")
        if len(self.rounds) >= MAX_ROUNDS:
            raise PaloptError(
                f"the simulation has run {MAX_ROUNDS:,} rounds (to t={self.time:g}s) with "
                f"{counted(self._tracked_left, 'tracked job')} unfinished (on GPUs of a large "
                f"slowdown, say): {_FEWER_ROUNDS}"
            )
        cfg, jt, R = self.config, self.jobs, self.config.round_s
        completed = self._account_progress()
        arrived = self._admit()
        active = np.asarray(self.active, dtype=np.int64)
        order = self._checked_order(self.policy.order(active, jt), active)
        key = tuple(order.tolist())
        solved, solve_time = False, 0.0
        started = preempted = migrated = 0
        if order.size and (
            self._dirty
            or completed
            or arrived
            or key != self._last_order
            or not (cfg.shortcuts and self.reusable)
        ):
            t0 = _time.perf_counter()
            placements = self._solve(order)
            solve_time = _time.perf_counter() - t0
            solved = True
            started, preempted, migrated = self._apply(order, placements)
            self._dirty = bool(started or preempted or migrated)
        self._last_order = key
        running = int((jt.status == RUNNING).sum())
        waiting = len(self.active) - running
        record = RoundRecord(
            self.round,
            self.time,
            int(jt.num_gpus[jt.status == RUNNING].sum()),
            running,
            waiting,
            arrived,
            started,
            completed,
            preempted,
            migrated,
            solved,
            solve_time,
        )
        self.rounds.append(record)
        # Extra jobs arrive for ever, so only the trace's own arrivals count as to come: with
        # nothing running, every GPU is free, and a solver that places no waiting job on them is
        # stuck whatever arrives.
        to_come = self._next_arrival < len(self.trace)
        if self.active and not self._progressed and (running or not to_come):
            self._idle_rounds += 1
            if self._idle_rounds > cfg.max_idle_rounds + math.ceil(cfg.restart_cost_s / R):
                if running:
                    cause = (
                        f"every running job is paying its {cfg.restart_cost_s:g} s restart "
                        "cost: the policy preempts each job before its restart cost is paid"
                    )
                else:  # all waiting (self.active holds them in admission order)
                    cause = (
                        f"the solver places none of the waiting jobs (first: "
                        f"{jt.jobs[self.active[0]].id!r}) on the idle cluster"
                    )
                raise SimulationStalled(
                    f"no job has gained an iteration for {self._idle_rounds} rounds at "
                    f"t={self.time:g}s ({running} running, {waiting} waiting, solver "
                    f"{self.solver_name}, policy {self.policy.name}): {cause}"
                )
        else:
            self._idle_rounds = 0
        self.round += 1
        if not self.active and not self.finished:
            self._skip_to_next_arrival()
        return record

    def _checked_order(self, order: object, active: np.ndarray) -> np.ndarray:
        """The policy's order as an index array, refused unless it holds each active job once."""
        arr = np.asarray(order)
        if (
            arr.ndim != 1
            or (arr.size and arr.dtype.kind not in "iu")
            or not np.array_equal(np.sort(arr), np.sort(active))
        ):
            raise PaloptError(
                f"policy {self.policy.name} ordered {arr.tolist()[:8]}: an order must hold "
                f"each of the queue's job indices once ({len(active)} of them)"
            )
        return arr.astype(np.int64)

    def _fast_forward(self) -> None:
        """Skip rounds in which provably nothing happens but progress.

        Applies after a round whose decision changed nothing, with a reusable solver and a
        static policy: until the next arrival or the earliest completion every round would
        reuse the decision. Progress is still added round by round (the same floating-point
        sums as :meth:`step`), and each skipped round gets its record.
        """
        cfg, jt, R = self.config, self.jobs, self.config.round_s
        if (
            self._dirty
            or self.finished
            or not cfg.shortcuts
            or not self.reusable
            or not self.rounds
            or not getattr(self.policy, "static", False)
            or not self.active
        ):
            return
        run = np.flatnonzero(jt.status == RUNNING)
        if len(run) == 0 or jt.lost_s[run].any():
            return
        if self._next_arrival == len(jt) and cfg.extra_jobs and not self.finished:
            self._add_extra()
        skip = np.inf
        if self._next_arrival < len(jt):
            skip = self._first_round_at(float(jt.submit[self._next_arrival])) - self.round
        inc = R / (jt.cost[run] * jt.base[run])
        rounds_left = np.ceil((jt.iters_total[run] - jt.iters_done[run]) / inc)
        skip = int(
            min(
                skip,
                rounds_left.min() - 2,
                self._end_round - self.round,
                MAX_ROUNDS - len(self.rounds),
            )
        )
        if skip <= 0:
            return
        done = jt.iters_done[run]
        for _ in range(skip):
            done = done + inc
        jt.iters_done[run] = done
        jt.attained_s[run] += R * skip
        jt.attained_gpu_s[run] += R * skip * jt.num_gpus[run]
        jt.waited_s[jt.status == WAITING] += R * skip
        last = self.rounds[-1]
        for k in range(skip):
            self.rounds.append(
                RoundRecord(
                    self.round + k,
                    float((self.round + k) * R),
                    last.busy_gpus,
                    last.running,
                    last.waiting,
                    0,
                    0,
                    0,
                    0,
                    0,
                    False,
                    0.0,
                )
            )
        self.round += skip

    def _skip_to_next_arrival(self) -> None:
        """Jump over empty rounds (nothing running or waiting) to the next arrival's round."""
        jt = self.jobs
        if self._next_arrival >= len(jt):
            return
        target = self._first_round_at(float(jt.submit[self._next_arrival]))
        self.round = max(self.round, target)

    def run(self, progress: Callable[[int], None] | None = None) -> SimResult:
        """Step until every tracked job has completed, or up to the horizon.

        Parameters
        ----------
        progress : callable, optional
            Called with the number of tracked jobs completed after each round.

        Returns
        -------
        SimResult
            The run so far; with ``config.max_time_s`` set, its last round is the last one that
            starts before that time, and tracked jobs may be left unfinished.

        Examples
        --------
        >>> import numpy as np
        >>> from palopt.topology import build_cluster
        >>> from palopt.sim.profile import ClusterProfile
        >>> from palopt.sim.trace import TraceJob
        >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
        >>> trace = [TraceJob("a", 1, 0.0, 30.0, "m", "A", 1.0)]
        >>> sim = Simulator(build_cluster(1, 1, 2), prof, trace, config=SimConfig(round_s=60))
        >>> res = sim.run(progress=print)
        0
        1
        >>> [r.round for r in res.rounds]
        [0, 1]
        """
        while not self.finished and self.round < self._end_round:
            self.step()
            self._fast_forward()
            if progress is not None:
                progress(int((self.jobs.tracked & (self.jobs.status == DONE)).sum()))
        return self.result()

    def result(self) -> SimResult:
        """The simulation so far as a :class:`SimResult` (a copy: later steps leave it as it is).

        Returns
        -------
        SimResult

        Examples
        --------
        >>> import numpy as np
        >>> from palopt.topology import build_cluster
        >>> from palopt.sim.profile import ClusterProfile
        >>> from palopt.sim.trace import TraceJob
        >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
        >>> trace = [TraceJob("a", 1, 0.0, 30.0, "m", "A", 1.0)]
        >>> sim = Simulator(build_cluster(1, 1, 2), prof, trace, config=SimConfig(round_s=60))
        >>> _ = sim.step()
        >>> res = sim.result()
        >>> _ = sim.step()
        >>> len(res.rounds), res.jobs.status.tolist(), sim.jobs.status.tolist()
        (1, [2], [3])
        """
        return SimResult(
            copy.deepcopy(self.jobs),
            tuple(self.rounds),
            self.topology.n_gpus,
            self.solver_name,
            self.policy.name,
            self.config,
            _time.perf_counter() - self._started,
        )


def simulate(
    topology: Topology,
    profile: ClusterProfile,
    trace: Sequence[TraceJob],
    solver: str | Solver = "pal",
    policy: str | SchedulingPolicy = "fifo",
    config: SimConfig | None = None,
) -> SimResult:
    """Run a whole simulation (see :class:`Simulator`).

    Parameters
    ----------
    topology : Topology
    profile : ClusterProfile
        ``rank`` feeds the placement instance, ``charge`` the simulated iteration times.
    trace : sequence of TraceJob
        Admitted in submit-time order (ties keep the given order).
    solver : str or Solver, default "pal"
        A registry name (see ``palopt solvers``) or a solver object.
    policy : str or SchedulingPolicy, default "fifo"
        ``fifo``, ``las``, ``srtf``, ``tiresias`` or a policy object.
    config : SimConfig, optional
        Default: ``SimConfig()``, the artifact's model.

    Returns
    -------
    SimResult
        After every tracked job has completed, or at ``config.max_time_s``.

    Raises
    ------
    InputError
        For a job larger than the cluster, a class without profile, or bad settings.
    SimulationStalled
        If no job gains an iteration for more than ``config.max_idle_rounds`` rounds in a row
        (plus the rounds one restart cost spans).

    Examples
    --------
    A 2-GPU job, then a 1-GPU job that waits for it under FIFO (60 s rounds; one iteration
    takes 1 s on these GPUs):

    >>> import numpy as np
    >>> from palopt.topology import build_cluster
    >>> from palopt.sim.profile import ClusterProfile
    >>> from palopt.sim.trace import TraceJob
    >>> prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
    >>> trace = [TraceJob("a", 2, 0.0, 100.0, "m", "A", 1.0),
    ...          TraceJob("b", 1, 0.0, 30.0, "m", "A", 1.0)]
    >>> res = simulate(build_cluster(1, 1, 2), prof, trace, config=SimConfig(round_s=60))
    >>> res.jobs.finish.tolist(), len(res.rounds)
    ([120.0, 180.0], 4)
    """
    return Simulator(topology, profile, trace, solver, policy, config).run()
