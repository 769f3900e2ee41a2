"""The frozen data model of one placement round: cluster state, cost data and the ordered queue."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from palopt._frozen import FrozenDict, frozen_array, frozen_state
from palopt.errors import (
    PRINTABLE,
    InputError,
    check_fields,
    is_finite_number,
    is_number,
)
from palopt.topology import Topology, require_topology

__all__ = [
    "Job",
    "Instance",
    "META_FIELDS",
    "check_meta",
    "penalty_matrix",
    "require_factors",
    "require_instance",
    "require_queue",
]


@dataclass(frozen=True)
class Job:
    """A job in the queue.

    Parameters
    ----------
    id : str
        Unique job id.
    num_gpus : int
        Number of GPUs the job needs (gang-scheduled: all or nothing).
    job_class : str
        Workload class; selects the slowdown row and the locality penalties.
    weight : float, default 1.0
        Weight of the job's cost in the exact solvers' objective.
    current_gpus : tuple of int, default ()
        Dense GPU indices the job runs on now (empty for a waiting job). Sticky solvers may keep
        them; non-sticky solvers report whether the job kept them.

    Raises
    ------
    InputError
        If ``current_gpus`` is a string, bytes, a mapping, a 0-d array or not iterable (the
        other fields are checked by the :class:`Instance` the job joins).

    Examples
    --------
    >>> Job("j1", 2, "classA").is_running
    False
    >>> Job("j2", 1, "classA", current_gpus=3)
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: job 'j2'.current_gpus = 3: expected GPU indices
    """

    id: str
    num_gpus: int
    job_class: str
    weight: float = 1.0
    current_gpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # numpy values become Python ones, and current_gpus a tuple: an array in a Job would be
        # unhashable, could change after the Instance is checked, and np.array([0]) is falsy,
        # which made a running job look waiting. Values of other types are left for
        # Instance to refuse with the field's name.
        gpus = self.current_gpus
        if type(gpus) is not tuple or any(type(g) is not int for g in gpus):
            if (
                isinstance(gpus, (str, bytes, Mapping))
                or not hasattr(gpus, "__iter__")
                or (isinstance(gpus, np.ndarray) and gpus.ndim == 0)
            ):
                raise InputError(f"job {self.id!r}.current_gpus", gpus, "expected GPU indices")
            gpus = tuple(int(g) if isinstance(g, np.integer) else g for g in gpus)
            object.__setattr__(self, "current_gpus", gpus)
        if isinstance(self.num_gpus, np.integer):
            object.__setattr__(self, "num_gpus", int(self.num_gpus))
        if isinstance(self.weight, (np.integer, np.floating)):
            object.__setattr__(self, "weight", float(self.weight))
        for name in ("id", "job_class"):  # numpy.str_ (ids read with numpy or pandas) -> str
            value = getattr(self, name)
            if isinstance(value, str) and type(value) is not str:
                object.__setattr__(self, name, str(value))

    @property
    def is_running(self) -> bool:
        """Whether the job holds GPUs now.

        Examples
        --------
        >>> Job("j1", 1, "classA", current_gpus=(3,)).is_running
        True
        """
        return bool(self.current_gpus)


@dataclass(frozen=True, eq=False)
class Instance:
    """One placement round.

    Parameters
    ----------
    topology : Topology
        The cluster.
    classes : tuple of str
        Workload classes, in PAL's class priority order (the artifact's A < B < C < D).
    slowdown : numpy.ndarray
        ``slowdown[c, g]``: slowdown factor of GPU ``g`` for class ``classes[c]`` (1.0 = median
        GPU, larger is slower); what the cost model charges and every solver ranks by.
    penalty : numpy.ndarray
        ``penalty[c, t]``: locality penalty of class ``c`` at tier ``topology.tiers[t]``;
        positive, non-decreasing in ``t``.
    queue : tuple of Job
        Jobs in the scheduler's order, running ones included.
    busy : numpy.ndarray, optional
        Boolean mask of GPUs that no queued job may use (down, reserved, or run by jobs outside
        this round). Empty (the default) means none.
    meta : mapping of str to str, optional
        Descriptive text kept with the instance and written back to its file: any of
        :data:`META_FIELDS` (``name``, ``source``, ``licence``, ``description``). No solver
        reads it.

    Raises
    ------
    InputError
        Naming the field and value, for any inconsistency (shapes, NaN or non-positive slowdowns,
        unknown classes, duplicate job ids, bad GPU indices, a job larger than the cluster, ...).

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import build_cluster
    >>> inst = Instance(build_cluster(1, 2, 2), ("A", "B"), np.ones((2, 4)), np.ones((2, 3)),
    ...                 (Job("a", 2, "B"), Job("b", 1, "A", current_gpus=(3,))),
    ...                 busy=np.array([True, False, False, False]))
    >>> inst.n_available, inst.class_index
    (3, {'A': 0, 'B': 1})
    >>> Instance(inst.topology, ("A",), np.ones((1, 4)), np.ones((1, 2)), ())
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: penalty = (1, 2): expected shape (1, 3)
    """

    topology: Topology
    classes: tuple[str, ...]
    slowdown: np.ndarray
    penalty: np.ndarray
    queue: tuple[Job, ...]
    busy: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    meta: Mapping[str, str] = field(default_factory=dict, repr=False)
    class_index: Mapping[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        topo = self.topology
        require_topology(topo)
        n, t = topo.n_gpus, len(topo.tiers)
        if isinstance(self.classes, str) or not _is_sequence(self.classes):
            raise InputError("classes", self.classes, "expected a list of class names")
        classes = tuple(str(c) if isinstance(c, str) else c for c in self.classes)
        object.__setattr__(self, "classes", classes)
        require_queue(self.queue)
        object.__setattr__(self, "queue", tuple(self.queue))
        if not all(isinstance(c, str) for c in classes) or not classes:
            raise InputError("classes", classes, "expected a non-empty list of class names")
        if len(set(classes)) != len(classes):
            raise InputError("classes", classes, "must be a non-empty list of distinct names")
        for c in classes:
            if not c or not c.isprintable():  # tables and results print it as it is
                raise InputError("classes", c, f"a class name {PRINTABLE}")
        sd = _matrix(self.slowdown, "slowdown", (len(classes), n))
        require_factors(sd, lambda c, g: f"slowdown.{classes[c]}.{topo.gpu_ids[g]}")
        pen = _matrix(self.penalty, "penalty", (len(classes), t))
        require_factors(pen, lambda c, k: f"penalties.{classes[c]}.{topo.tiers[k]}")
        dec = np.diff(pen, axis=1) < 0
        if dec.any():
            c, k = np.argwhere(dec)[0]
            raise InputError(
                f"penalties.{classes[c]}.{topo.tiers[k + 1]}",
                float(pen[c, k + 1]),
                f"must not be below the penalty of tier {topo.tiers[k]!r}",
            )
        _refuse_masked(self.busy, "busy")
        raw = np.asarray(self.busy)
        if raw.size and not (
            raw.dtype == bool or (raw.dtype.kind in "iu" and np.isin(raw, (0, 1)).all())
        ):
            raise InputError("busy", raw.dtype.name, "expected a mask of booleans (or 0 and 1)")
        busy = np.array(raw, dtype=bool)
        if busy.size == 0:
            busy = np.zeros(n, dtype=bool)
        if busy.shape != (n,):
            raise InputError("busy", busy.shape, f"expected a mask of {n} GPUs")
        class_index = {c: i for i, c in enumerate(classes)}
        _check_queue(self.queue, class_index, busy, topo.gpu_ids)
        _check_cost_range(self.queue, sd, pen)
        if not isinstance(self.meta, Mapping):
            raise InputError("meta", type(self.meta).__name__, "expected a mapping")
        check_meta(self.meta, "meta.")
        # Read-only all through: arrays that cannot be made writeable again and mappings that
        # refuse changes (solvers cache what they derive from the arrays by identity, and
        # instances made by replace_queue share them).
        object.__setattr__(self, "meta", FrozenDict(self.meta))
        object.__setattr__(self, "slowdown", frozen_array(sd))
        object.__setattr__(self, "penalty", frozen_array(pen))
        object.__setattr__(self, "busy", frozen_array(busy))
        object.__setattr__(self, "class_index", FrozenDict(class_index))

    def __setstate__(self, state: dict[str, object]) -> None:
        # Unpickled and deep-copied instances get new arrays and mappings: read-only too.
        self.__dict__.update(frozen_state(state))

    @property
    def n_available(self) -> int:
        """Number of GPUs not busy (free or held by queued jobs).

        Examples
        --------
        >>> import numpy as np
        >>> from palopt import build_cluster
        >>> Instance(build_cluster(1, 1, 4), ("A",), np.ones((1, 4)), np.ones((1, 3)), (),
        ...          busy=np.array([1, 1, 0, 0])).n_available
        2
        """
        return int(self.topology.n_gpus - self.busy.sum())

    def job_class_indices(self) -> np.ndarray:
        """Class index of every queued job, in queue order.

        Returns
        -------
        numpy.ndarray
            ``int64`` indices into :attr:`classes`.

        Examples
        --------
        >>> import numpy as np
        >>> from palopt import build_cluster
        >>> Instance(build_cluster(1, 1, 2), ("A", "B"), np.ones((2, 2)), np.ones((2, 3)),
        ...          (Job("a", 1, "B"), Job("b", 1, "A"))).job_class_indices().tolist()
        [1, 0]
        """
        return np.array([self.class_index[j.job_class] for j in self.queue], dtype=np.int64)

    def replace_queue(self, queue: Sequence[Job]) -> Instance:
        """A copy of this instance with another queue (validated; the rest is this instance's,
        already checked: a simulation calls this every round).

        Parameters
        ----------
        queue : sequence of Job
            The new queue, in the scheduler's order.

        Returns
        -------
        Instance
            A new instance; this one is unchanged.

        Raises
        ------
        InputError
            For a ``queue`` that is not a sequence of jobs, or a job the instance cannot hold
            (as :class:`Instance` checks its queue).

        Examples
        --------
        >>> import numpy as np
        >>> from palopt import build_cluster
        >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
        ...                 (Job("a", 1, "A"),))
        >>> [j.id for j in inst.replace_queue([Job("b", 2, "A")]).queue], inst.queue[0].id
        (['b'], 'a')
        >>> inst.replace_queue([Job("c", 1, "Z")])
        Traceback (most recent call last):
        ...
        palopt.errors.InputError: queue[0].class = 'Z': unknown class; known: A
        """
        require_queue(queue)
        queue = tuple(queue)
        _check_queue(queue, self.class_index, self.busy, self.topology.gpu_ids)
        _check_cost_range(queue, self.slowdown, self.penalty)
        copy = object.__new__(Instance)
        copy.__dict__.update(self.__dict__, queue=queue)
        return copy


#: The descriptive fields of an instance (:attr:`Instance.meta`, the top of its file).
META_FIELDS = ("name", "source", "licence", "description")

#: Slowdowns and penalties lie in ``[MIN_FACTOR, MAX_FACTOR]``: far beyond any measured value,
#: and a job's cost (their product) then stays a float far from overflow and underflow.
MIN_FACTOR, MAX_FACTOR = 1e-12, 1e12
#: What a value outside that range is told.
FACTOR_RANGE = f"must be a finite number from {MIN_FACTOR:g} to {MAX_FACTOR:g}"

#: The weighted costs of a round lie in ``[1 / MAX_ROUND, MAX_ROUND]`` (the largest a whole
#: round's sum), so every objective is a finite float, and the exact solvers' scaling by a power
#: of two stays one too.
MAX_ROUND = 1e305


def require_instance(value: object) -> None:
    """Raise :class:`InputError` unless ``value`` is an :class:`Instance` (the one check of the
    argument of every function that takes one).

    Parameters
    ----------
    value : object

    Raises
    ------
    InputError
        Naming the type of ``value``.

    Examples
    --------
    >>> require_instance({"queue": []})
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: instance = 'dict': must be a palopt.Instance
    """
    if not isinstance(value, Instance):
        raise InputError("instance", type(value).__name__, "must be a palopt.Instance")


def require_factors(values: np.ndarray, field: Callable[[int, int], str]) -> None:
    """Raise :class:`InputError` for the first entry of a 2-D array that is not a finite number
    from :data:`MIN_FACTOR` to :data:`MAX_FACTOR`; ``field(row, column)`` names it.

    Parameters
    ----------
    values : numpy.ndarray
        A 2-D float array (e.g. slowdowns or penalties, one row per class). Entries are checked
        row by row; the first bad one is named.
    field : callable
        Takes the row and column of the bad entry, returns the field name for the message.

    Raises
    ------
    InputError
        For the first entry that is not finite or lies outside that range.

    Examples
    --------
    >>> import numpy as np
    >>> require_factors(np.array([[1.0, 1.2], [0.9, 1.7]]), lambda r, k: f"slowdown[{r}][{k}]")
    >>> require_factors(np.array([[1.0, 0.0], [np.nan, 1.0]]), lambda r, k: f"slowdown[{r}][{k}]")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: slowdown[0][1] = 0.0: must be a finite number from 1e-12 to 1e+12
    """
    bad = ~np.isfinite(values) | (values < MIN_FACTOR) | (values > MAX_FACTOR)
    if bad.any():
        r, k = np.argwhere(bad)[0]
        raise InputError(
            field(int(r), int(k)),
            float(values[r, k]),
            FACTOR_RANGE,
        )


def _is_sequence(value: object) -> bool:
    return isinstance(value, Sequence) or (isinstance(value, np.ndarray) and value.ndim > 0)


def check_meta(meta: Mapping[str, object], where: str = "") -> None:
    """Refuse a descriptive field that is not one of :data:`META_FIELDS` or not a string (the
    one check of an instance's ``meta``, of its file's top and of ``instance_to_dict``'s).

    Parameters
    ----------
    meta : mapping of str to object
        The descriptive fields.
    where : str, default ""
        Prefix of the field's name in the message, e.g. ``"meta."``.

    Raises
    ------
    InputError
        Naming the first field not in :data:`META_FIELDS` (in sorted order), or a value that is
        not a string.

    Examples
    --------
    >>> check_meta({"name": 3})
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: name = 3: expected a string
    """
    check_fields(meta, META_FIELDS, where)
    for key, text in meta.items():
        if not isinstance(text, str):
            raise InputError(f"{where}{key}", text, "expected a string")


def require_queue(queue: object) -> None:
    """Raise :class:`InputError` unless ``queue`` is a sequence of jobs (not one Job, None or a
    generator); the jobs themselves are checked with the instance they join.

    Parameters
    ----------
    queue : object

    Raises
    ------
    InputError
        Naming the type of ``queue``.

    Examples
    --------
    >>> require_queue([Job("a", 1, "A")])
    >>> require_queue(Job("a", 1, "A"))
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: queue = 'Job': expected a sequence of Jobs
    """
    if isinstance(queue, Job) or not _is_sequence(queue):
        raise InputError("queue", type(queue).__name__, "expected a sequence of Jobs")


def _matrix(value: object, name: str, shape: tuple[int, int]) -> np.ndarray:
    """``value`` as a float array of ``shape`` (rows: classes), or an InputError naming it."""
    if isinstance(value, Mapping):
        raise InputError(name, type(value).__name__, f"expected a {shape} array of numbers")
    _refuse_masked(value, name)
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):
        raw = np.empty(0, dtype=object)
    if raw.dtype.kind not in "iuf":  # strings, bools, objects (a ragged list): not numbers
        shown = type(value).__name__ if isinstance(value, np.ndarray) else value
        raise InputError(name, shown, f"expected a {shape} array of numbers")
    out = raw.astype(np.float64)  # a copy: the caller's array may change later
    if out.shape != shape:
        raise InputError(name, out.shape, f"expected shape {shape}")
    return out


def _refuse_masked(value: object, name: str) -> None:
    """Refuse a numpy masked array: converting it to an array would drop the mask silently."""
    if isinstance(value, np.ma.MaskedArray):
        raise InputError(name, "a masked array", "fill the masked entries first (.filled(...))")


def _check_cost_range(queue: tuple[Job, ...], sd: np.ndarray, pen: np.ndarray) -> None:
    """Refuse weights whose costs, with these slowdowns and penalties, leave :data:`MAX_ROUND`."""
    if not queue:
        return
    logs = np.log10([float(j.weight) for j in queue])  # a Python int can exceed numpy's
    top = logs.max() + np.log10(sd.max() * pen.max() * len(queue))
    bottom = logs.min() + np.log10(sd.min() * pen.min())
    if top > math.log10(MAX_ROUND) or bottom < -math.log10(MAX_ROUND):
        i = int(logs.argmax() if top > math.log10(MAX_ROUND) else logs.argmin())
        raise InputError(
            f"queue[{i}].weight",
            queue[i].weight,
            f"with these slowdowns and penalties the round's weighted costs would leave "
            f"{1 / MAX_ROUND:g} to {MAX_ROUND:g}: bring the weights closer to 1",
        )


def _check_queue(
    queue: tuple[Job, ...],
    class_index: Mapping[str, int],
    busy: np.ndarray,
    gpu_ids: tuple[str, ...],
) -> None:
    # Called for every round of a simulation: the checks test exact types first (a Job has
    # turned numpy values into int and float) and format a field's name only to report it.
    n = len(gpu_ids)
    seen_jobs: set[str] = set()
    held: dict[int, str] = {}
    for i, job in enumerate(queue):
        if not isinstance(job, Job):
            raise InputError(f"queue[{i}]", job, "must be a Job")
        if type(job.id) is not str or not job.id:
            raise InputError(f"queue[{i}].id", job.id, "must be a non-empty string")
        if not job.id.isprintable():  # tables, logs and Slurm lines print it as it is
            raise InputError(f"queue[{i}].id", job.id, PRINTABLE)
        if job.id in seen_jobs:
            raise InputError(f"queue[{i}].id", job.id, "duplicate job id")
        seen_jobs.add(job.id)
        k = job.num_gpus
        if type(k) is not int or k < 1:
            raise InputError(f"queue[{i}].num_gpus", k, "must be a positive integer")
        if k > n:
            raise InputError(f"queue[{i}].num_gpus", k, f"exceeds the cluster's {n} GPUs")
        if type(job.job_class) is not str or job.job_class not in class_index:
            raise InputError(
                f"queue[{i}].class",
                job.job_class,
                f"unknown class; known: {', '.join(class_index)}",
            )
        w = job.weight
        if not (
            0.0 < w < math.inf  # a float's whole check: NaN fails it
            if type(w) is float
            else type(w) is int and w > 0 and is_finite_number(w)
        ):
            raise InputError(f"queue[{i}].weight", w, "must be a finite positive number")
        if job.current_gpus:
            where = f"queue[{i}].current_gpus"
            for g in job.current_gpus:
                if type(g) is not int or not 0 <= g < n:
                    raise InputError(where, g, "not a GPU index of the topology")
            if len(job.current_gpus) != k:
                raise InputError(
                    where,
                    [gpu_ids[g] for g in job.current_gpus],
                    f"a running job must hold exactly num_gpus={k} GPUs",
                )
            for g in job.current_gpus:
                if busy[g]:
                    raise InputError(where, gpu_ids[g], "marked busy")
                if g in held:
                    raise InputError(
                        where,
                        gpu_ids[g],
                        "listed twice" if held[g] == job.id else f"also held by job {held[g]!r}",
                    )
                held[g] = job.id


def penalty_matrix(
    topology: Topology,
    classes: Sequence[str],
    penalties: float | Mapping[str, float | Mapping[str, float]],
    field_name: str = "penalties",
) -> np.ndarray:
    """Build the ``(classes, tiers)`` penalty matrix from a compact description.

    Parameters
    ----------
    topology : Topology
    classes : sequence of str
    penalties : float or mapping
        A number ``P``: 1.0 within a server and ``P`` beyond, for every class (the artifact's
        model). A mapping tier -> value: the same for every class. A mapping class -> (tier ->
        value), optionally with a ``"default"`` class. Tiers not given take the value of the
        nearest lower given tier (1.0 below the lowest). An :class:`Instance` refuses a
        penalty that falls as the tier rises.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    InputError
        For a ``topology`` that is not a :class:`~palopt.topology.Topology`, an empty mapping,
        an unknown tier or class, a missing class without a default, or a penalty that is not a
        number from :data:`MIN_FACTOR` to :data:`MAX_FACTOR`; named from ``field_name``.

    Examples
    --------
    >>> from palopt.topology import build_cluster
    >>> penalty_matrix(build_cluster(2, 2, 4), ["A"], 1.7).tolist()
    [[1.0, 1.7, 1.7]]
    >>> penalty_matrix(build_cluster(2, 2, 4), ["A"], {"rack": 0.0}, "pen")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: pen.rack = 0.0: must be a finite number from 1e-12 to 1e+12
    """
    require_topology(topology)
    if not _is_sequence(classes) or not all(isinstance(c, str) for c in classes):
        raise InputError("classes", classes, "expected a list of class names")
    tiers = topology.tiers
    if is_number(penalties):
        if not is_finite_number(penalties):
            raise InputError(field_name, penalties, FACTOR_RANGE)
        row = [1.0 if t in ("nvlink", "server") else float(penalties) for t in tiers]
        matrix = np.array([row] * len(classes), dtype=np.float64)
        require_factors(matrix, lambda r, k: field_name)
        return matrix
    if not isinstance(penalties, Mapping):
        raise InputError(field_name, penalties, "expected a number or a mapping")
    if not penalties:  # a map of no tiers, or of no classes (and no default)?
        raise InputError(field_name, {}, "an empty mapping; for no locality penalty give 1")
    if not any(isinstance(v, Mapping) for v in penalties.values()):  # one map tier -> value
        per_class: Mapping[str, object] = {"default": penalties}
    else:
        per_class = penalties
    for c in per_class:
        if c != "default" and c not in classes:
            raise InputError(f"{field_name}.{c}", c, f"unknown class; known: {', '.join(classes)}")
    rows, keys = [], []  # keys: where each class's row comes from (its own entry or "default")
    for c in classes:
        key = c if c in per_class else "default"
        spec = per_class.get(key)
        if spec is None:
            raise InputError(
                f"{field_name}.{c}", None, "no penalties for this class and no default"
            )
        where = f"{field_name}.{key}" if per_class is penalties else field_name
        if not isinstance(spec, Mapping):
            raise InputError(where, spec, "expected a mapping tier -> penalty")
        for t in spec:
            if t in classes and t not in tiers:  # e.g. {"A": [1.5]}: a class given no mapping
                raise InputError(f"{where}.{t}", spec[t], "expected a mapping tier -> penalty")
            if t not in tiers:
                raise InputError(f"{where}.{t}", t, f"unknown tier; tiers: {', '.join(tiers)}")
        row, last = [], 1.0
        for t in tiers:
            if t in spec:
                value = spec[t]
                if not is_number(value):
                    raise InputError(f"{where}.{t}", value, "must be a number")
                if not is_finite_number(value):
                    raise InputError(f"{where}.{t}", value, FACTOR_RANGE)
                last = float(value)
            row.append(last)
        rows.append(row)
        keys.append(where)
    matrix = np.array(rows, dtype=np.float64)
    require_factors(matrix, lambda r, k: f"{keys[r]}.{tiers[k]}")
    return matrix
