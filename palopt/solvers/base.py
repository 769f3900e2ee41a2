"""The solver protocol, the registry, and the one entry point :func:`solve`."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from palopt.cost import job_placements
from palopt.errors import InputError, UnknownSolverError, check_seed, check_time_limit
from palopt.instance import Instance, require_instance
from palopt.result import PlacementResult, Status

__all__ = [
    "Solver",
    "SolverInfo",
    "register",
    "get_solver",
    "list_solvers",
    "solve",
    "build_result",
]


@runtime_checkable
class Solver(Protocol):
    """What every placement solver provides.

    Attributes
    ----------
    name : str
        The solver's registry name.

    Examples
    --------
    >>> isinstance(get_solver("pal"), Solver)
    True
    """

    name: str

    def solve(
        self, instance: Instance, *, time_limit: float | None = None, seed: int | None = None
    ) -> PlacementResult:
        """Place the instance's queue; never raises for a job that does not fit.

        Parameters
        ----------
        instance : Instance
        time_limit : float, optional
            Seconds (solvers that take a limit).
        seed : int, optional
            Seed of a randomised solver.

        Returns
        -------
        PlacementResult
            One placement per queued job, in queue order.

        Examples
        --------
        >>> import numpy as np
        >>> from palopt import Instance, Job, build_cluster
        >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
        ...                 (Job("a", 1, "A"), Job("b", 2, "A")))
        >>> get_solver("pal").solve(inst).assignment()
        {'a': (0,)}
        """
        ...


@dataclass(frozen=True)
class SolverInfo:
    """A registry entry.

    Parameters
    ----------
    name : str
        Registry name.
    factory : callable
        Builds the solver from its options.
    description : str
        One line, shown by :func:`list_solvers`.
    requires : tuple of str, default ()
        Modules the solver needs.
    options : tuple of str or None, default None
        The options :func:`get_solver` passes on; ``None``: the factory checks its own.

    Examples
    --------
    >>> info = {s.name: s for s in list_solvers()}["pal"]
    >>> info.requires, info.options
    ((), ('variant',))
    """

    name: str
    factory: Callable[..., Solver]
    description: str
    requires: tuple[str, ...] = ()
    #: The options :func:`get_solver` passes on; ``None``: the factory checks its own.
    options: tuple[str, ...] | None = None

    @property
    def available(self) -> bool:
        """Whether the modules the solver needs can be imported.

        Examples
        --------
        >>> SolverInfo("x", dict, "needs a module that is not there", ("no_such_module",)).available
        False
        """
        for module in self.requires:
            try:
                importlib.import_module(module)
            except ImportError:
                return False
        return True


_REGISTRY: dict[str, SolverInfo] = {}

# Modules that register solvers when imported; loaded on first registry access.
_SOLVER_MODULES = (
    "palopt.solvers.heuristics",
    "palopt.solvers.greedy",
    "palopt.solvers.exact.cpsat",
    "palopt.solvers.exact.milp",
)


def register(
    name: str,
    factory: Callable[..., Solver],
    description: str,
    requires: Sequence[str] = (),
    options: Sequence[str] | None = None,
) -> None:
    """Add a solver to the registry (a module-level call in the solver's module).

    Parameters
    ----------
    name : str
        Registry name, as given to :func:`get_solver` and :func:`solve`. A name already
        registered is replaced.
    factory : callable
        Called as ``factory(**config)`` by :func:`get_solver` with the solver options; returns
        a :class:`Solver`.
    description : str
        One line, shown by :func:`list_solvers`.
    requires : sequence of str, default ()
        Modules the solver needs. If one cannot be imported, :func:`list_solvers` leaves the
        solver out (by default) and :func:`get_solver` raises ``ImportError``.
    options : sequence of str, optional
        The options the factory takes: :func:`get_solver` refuses any other, naming these
        (and ``palopt solvers`` lists them). By default the factory checks its own.

    Examples
    --------
    >>> class Packed:
    ...     name = "packed-again"
    ...     def solve(self, instance, *, time_limit=None, seed=None):
    ...         return solve(instance, "packed-nonsticky", seed=seed)
    >>> register("packed-again", Packed, "Packed, under another name")
    >>> try:
    ...     print(get_solver("packed-again").name)
    ... finally:
    ...     del _REGISTRY["packed-again"]  # leave the registry as it was
    packed-again
    >>> "packed-again" in [s.name for s in list_solvers()]
    False
    """
    _REGISTRY[name] = SolverInfo(
        name, factory, description, tuple(requires), None if options is None else tuple(options)
    )


def _load() -> dict[str, SolverInfo]:
    for module in _SOLVER_MODULES:
        importlib.import_module(module)
    return _REGISTRY


def list_solvers(available_only: bool = True) -> list[SolverInfo]:
    """Registered solvers, sorted by name.

    Parameters
    ----------
    available_only : bool, default True
        Leave out solvers whose optional dependencies are not installed.

    Returns
    -------
    list of SolverInfo
        Each with the solver's ``name``, one-line ``description``, the modules it ``requires``,
        whether they are ``available``, and its ``options`` (``None`` if not declared).

    Examples
    --------
    >>> "pal" in [s.name for s in list_solvers()]
    True
    """
    infos = sorted(_load().values(), key=lambda s: s.name)
    return [s for s in infos if s.available or not available_only]


def split_solver_name(text: str) -> tuple[str, dict[str, str]]:
    """A solver's registry name and options from ``NAME`` or ``NAME:BACKEND``.

    Parameters
    ----------
    text : str
        A registry name, optionally followed by ``:`` and a back end (``milp:highs``).

    Returns
    -------
    tuple of (str, dict)
        The name, and ``{"backend": BACKEND}`` or an empty dict.

    Examples
    --------
    >>> split_solver_name("milp:highs"), split_solver_name("pal")
    (('milp', {'backend': 'highs'}), ('pal', {}))
    """
    name, colon, backend = text.partition(":")
    return name, ({"backend": backend} if colon else {})  # "milp:" names an empty back end


def get_solver(name: str, /, **config: Any) -> Solver:
    """A configured solver by registry name.

    Parameters
    ----------
    name : str
        Registry name, e.g. ``"pal"``, ``"packed-sticky"``; ``NAME:BACKEND`` is short for
        ``NAME`` with the option ``backend=BACKEND`` (``milp:highs``).
    **config
        Solver options (see each solver's documentation); a 0-d numpy array is taken as its
        Python value.

    Returns
    -------
    Solver
        Its ``solve(instance, time_limit=None, seed=None)`` returns a :class:`PlacementResult`.

    Raises
    ------
    UnknownSolverError
        If the name is not registered; the message lists the valid names.
    ImportError
        If the solver's optional dependencies are missing (the message names the extra).
    InputError
        For a name that is not a string, or an invalid option (an unknown one, an array of
        values, or a value the solver refuses).

    Examples
    --------
    >>> get_solver("pal").name
    'pal'
    >>> get_solver("milp:highs").backend
    'highs'
    """
    if not isinstance(name, str):
        raise InputError("solver", name, "must be a solver's name (see palopt.list_solvers())")
    registry = _load()
    name, named = split_solver_name(name)
    for key, value in named.items():
        config[key] = _one_value(name, key, config.get(key, value))
        if config[key] != value:
            raise InputError(key, config[key], f"differs from the {value!r} in {name}:{value}")
    info = registry.get(name)
    if info is None:
        raise UnknownSolverError(
            f"unknown solver {name!r}; valid solvers: {', '.join(sorted(registry))}"
        )
    if not info.available:
        raise ImportError(
            f"solver {name!r} needs {', '.join(info.requires)}: pip install 'palopt[exact]'"
        )
    if info.options is not None:
        for key, value in config.items():
            if key not in info.options:
                known = ", ".join(info.options) or "none"
                hint = "; a seed goes to solve (--seed)" if key == "seed" else ""
                raise InputError(
                    f"{name}.{key}", value, f"unknown option; its options: {known}{hint}"
                )
    return info.factory(**{key: _one_value(name, key, value) for key, value in config.items()})


def _one_value(name: str, key: str, value: Any) -> Any:
    """The value of option ``key``: an array is refused (compared with == it is no bool), a 0-d
    array is its Python value (kept as an array, it made the result's settings no JSON)."""
    if isinstance(value, np.ndarray):
        if value.ndim:
            raise InputError(f"{name}.{key}", value.tolist(), "expected one value, not an array")
        return value.item()
    return value


def solve(
    instance: Instance,
    solver: str = "pal",
    *,
    time_limit: float | None = None,
    seed: int | None = None,
    **config: Any,
) -> PlacementResult:
    """Place ``instance``'s queue with the named solver: a pure function, no I/O.

    Parameters
    ----------
    instance : Instance
    solver : str, default "pal"
    time_limit : float, optional
        Seconds (exact solvers).
    seed : int, optional
        Seed for randomised solvers and tie-breaking.
    **config
        Solver options.

    Returns
    -------
    PlacementResult

    Raises
    ------
    UnknownSolverError, ImportError
        As :func:`get_solver`.
    InputError
        For an invalid option, time limit or seed, or an argument that is not an instance.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> topo = build_cluster(1, 2, 4)
    >>> inst = Instance(topo, ("A",), np.ones((1, 8)), np.array([[1.0, 1.7, 1.7]]),
    ...                 (Job("a", 4, "A"), Job("b", 2, "A")))
    >>> solve(inst, "packed-nonsticky").n_placed
    2
    """
    return get_solver(solver, **config).solve(instance, time_limit=time_limit, seed=seed)


def check_arguments(instance: Any, time_limit: Any, seed: Any) -> int | None:
    """The checks every solver's ``solve`` makes of its arguments; returns the seed.

    Parameters
    ----------
    instance : Instance
    time_limit : float or None
        Seconds; ``None``: no limit.
    seed : int or None

    Returns
    -------
    int or None
        ``seed``, as an ``int``.

    Raises
    ------
    InputError
        If ``instance`` is not an :class:`~palopt.instance.Instance`, ``time_limit`` is given
        and not a positive, finite number, or ``seed`` is given and not a non-negative integer.

    Examples
    --------
    >>> check_arguments(None, None, 3)
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: instance = 'NoneType': must be a palopt.Instance
    """
    require_instance(instance)
    if time_limit is not None:
        check_time_limit(time_limit)
    return check_seed(seed)


def build_result(
    instance: Instance,
    solver: str,
    chosen: dict[int, np.ndarray],
    reasons: dict[int, str],
    started: float,
    *,
    status: str = Status.HEURISTIC,
    bound: float | None = None,
    settings: dict[str, Any] | None = None,
) -> PlacementResult:
    """Assemble a :class:`PlacementResult` from queue position -> GPU indices.

    Parameters
    ----------
    instance : Instance
        The instance solved.
    solver : str
        Registry name of the solver, copied into the result.
    chosen : dict
        Queue position -> GPU indices for placed jobs.
    reasons : dict
        Queue position -> reason for unplaced jobs (a default reason is used otherwise).
    started : float
        ``time.perf_counter()`` when the solve began.
    status : str, default Status.HEURISTIC
        One of :class:`~palopt.result.Status`.
    bound : float, optional
        A proven lower bound on the objective (exact solvers).
    settings : dict, optional
        The solver's configuration; copied into the result (default: empty).

    Returns
    -------
    PlacementResult
        One placement per queued job, in queue order; ``objective`` is the sum of
        ``weight * cost`` over the placed jobs, ``wall_time`` the seconds since ``started``.

    Examples
    --------
    >>> import time
    >>> from palopt import Instance, Job, build_cluster
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.array([[1.0, 1.3, 1.0, 1.0]]),
    ...                 np.array([[1.0, 2.0, 2.0]]), (Job("a", 2, "A"), Job("b", 4, "A")))
    >>> r = build_result(inst, "mine", {0: np.array([2, 3])}, {1: "too big"}, time.perf_counter())
    >>> r.status, r.objective, r.n_placed, r.assignment()
    ('heuristic', 1.0, 1, {'a': (2, 3)})
    >>> r.placements[1].reason
    'too big'
    """
    positions = range(len(instance.queue))
    placements = job_placements(
        instance,
        instance.queue,
        [chosen.get(i) for i in positions],
        [reasons.get(i) for i in positions],
    )
    total = 0.0
    for job, p in zip(instance.queue, placements, strict=True):
        if p.cost is not None:
            total += job.weight * p.cost
    return PlacementResult(
        placements=tuple(placements),
        solver=solver,
        status=status,
        objective=total,
        n_placed=sum(1 for p in placements if p.gpus),
        wall_time=time.perf_counter() - started,
        bound=bound,
        settings=dict(settings or {}),
    )
