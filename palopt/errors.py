"""Exceptions raised by palopt, and the input checks shared by its parts (a seed, a time limit, a
number, a count, a flag, the fields of a JSON object, a value given twice), and the counting of
nouns in their messages.

Every error caused by bad input names the offending field and value so that a user can fix the
input without reading a traceback; the CLI prints the message on one line and exits with code 2.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from numbers import Integral, Real
from typing import Any, TypeGuard


class PaloptError(Exception):
    """Base class of every error palopt raises on purpose.

    The command line prints such an error on one line and exits with code 2; a library caller
    can catch this class to tell palopt's refusals from bugs.

    Examples
    --------
    >>> from palopt import get_solver
    >>> try:
    ...     get_solver("nonesuch")
    ... except PaloptError as exc:
    ...     print(type(exc).__name__)
    UnknownSolverError
    """


#: What a name (a job, GPU, server, switch, tier or class) must be besides a non-empty string:
#: no tab, line break or other character ``str.isprintable`` refuses (a job id with a line
#: break split tables and Slurm lines).
PRINTABLE = "must be printable text (no tab, line break or other control character)"


def _printable(text: object) -> str:
    """``str(text)`` with each character that does not print written as ``repr`` writes it."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class InputError(PaloptError, ValueError):
    """Bad input: a malformed or inconsistent instance, topology, profile or option.

    Parameters
    ----------
    field : str
        Dotted path of the offending field, e.g. ``"queue[3].num_gpus"``.
    value : Any
        The offending value (shown with ``repr``; one over 80 characters is cut in the middle).
    problem : str
        What is wrong with it.

    Examples
    --------
    >>> str(InputError("queue[0].num_gpus", -1, "must be a positive integer"))
    'queue[0].num_gpus = -1: must be a positive integer'

    The message is one line: characters that do not print in the field and the problem (a key
    read from a file, say) are escaped as ``repr`` escapes them.

    >>> print(InputError("values.B\\n", 1.0, "unknown field"))
    values.B\\n = 1.0: unknown field
    """

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        shown = repr(value)
        if len(shown) > 80:  # cut in the middle: a path keeps its file name
            shown = shown[:38] + "..." + shown[-39:]
        super().__init__(f"{_printable(field)} = {shown}: {_printable(problem)}")

    def prefixed(self, prefix: str) -> InputError:
        """The same error with ``prefix`` before its field: the file it was found in, say,
        where several files are in play.

        Parameters
        ----------
        prefix : str
            Text put before the field's name, e.g. ``"q.json: "``.

        Returns
        -------
        InputError
            A new error of this error's type, with the same value and problem.

        Examples
        --------
        >>> print(InputError("queue[0].class", "Z", "unknown class").prefixed("q.json: "))
        q.json: queue[0].class = 'Z': unknown class
        """
        return type(self)(f"{prefix}{self.field}", self.value, self.problem)

    def __reduce__(self) -> tuple[type[InputError], tuple[str, Any, str]]:
        # Rebuilt from its three parts: a sweep's worker process sends it back pickled.
        return (type(self), (self.field, self.value, self.problem))


class UnknownSolverError(PaloptError, KeyError):
    """A solver name that is not in the registry; the message lists the valid names.

    Examples
    --------
    >>> from palopt import get_solver
    >>> get_solver("nonesuch")
    Traceback (most recent call last):
    ...
    palopt.errors.UnknownSolverError: unknown solver 'nonesuch'; valid solvers: ...
    """

    def __str__(self) -> str:
        return str(self.args[0])


class InfeasiblePlacementError(PaloptError):
    """A placement that breaks the feasibility rules (see :func:`palopt.cost.assert_feasible`).

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, assert_feasible, build_cluster
    >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
    ...                 (Job("a", 2, "A"),))
    >>> try:
    ...     assert_feasible(inst, {"a": [0]})
    ... except InfeasiblePlacementError as exc:
    ...     print(exc)
    job 'a' needs 2 GPUs, got 1
    """


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, the noun in the plural unless ``n`` is 1 (regular English plurals:
    ``-es`` after s, x, ch and sh, else ``-s``).

    Parameters
    ----------
    n : int
    noun : str
        The noun in the singular.

    Returns
    -------
    str
        ``n``, a space and the noun.

    Examples
    --------
    >>> counted(1, "GPU"), counted(0, "GPU"), counted(2, "switch"), counted(3, "class")
    ('1 GPU', '0 GPUs', '2 switches', '3 classes')
    """
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {noun}{'es' if noun.endswith(('s', 'x', 'ch', 'sh')) else 's'}"


def check_seed(seed: Any, field: str = "seed") -> int | None:
    """``seed`` as an ``int`` (``None`` stays ``None``): the one check of a seed.

    Parameters
    ----------
    seed : int or None
    field : str, default "seed"
        The name the error message gives the value.

    Returns
    -------
    int or None

    Raises
    ------
    InputError
        Unless ``seed`` is ``None`` or a non-negative integer.

    Examples
    --------
    >>> check_seed(7)
    7
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: seed = -1: must be a non-negative integer
    """
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise InputError(field, seed, "must be a non-negative integer")
    return int(seed)


def is_number(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is a real number: an int or float, numpy's too, but not a bool.

    Parameters
    ----------
    value : Any

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np
    >>> [is_number(v) for v in (2, 1.5, np.int64(2), True, "1", None)]
    [True, True, True, False, False, False]
    """
    return isinstance(value, Real) and not isinstance(value, bool)


def is_finite_number(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is a real number (not a bool) that is finite as a float (``10**400``
    is not: it has no float).

    Parameters
    ----------
    value : Any

    Returns
    -------
    bool

    Examples
    --------
    >>> [is_finite_number(v) for v in (2, 1.5, float("inf"), 10**400, True, "1")]
    [True, True, False, False, False, False]
    """
    if not is_number(value):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_time_limit(seconds: Any, field: str = "time_limit") -> float:
    """``seconds`` as a ``float``: the one check of a time limit.

    Parameters
    ----------
    seconds : float
    field : str, default "time_limit"
        The name the error message gives the value.

    Returns
    -------
    float

    Raises
    ------
    InputError
        Unless ``seconds`` is a positive, finite number.

    Examples
    --------
    >>> check_time_limit(2)
    2.0
    """
    if not is_finite_number(seconds) or not seconds > 0:
        raise InputError(field, seconds, "must be a positive, finite number of seconds")
    return float(seconds)


def check_number(
    value: Any, field: str, low: float = 0.0, inclusive: bool = False, high: float = math.inf
) -> float:
    """``value`` as a ``float``: a finite number above ``low`` (or at ``low``, if ``inclusive``)
    and at most ``high``.

    Parameters
    ----------
    value : Any
    field : str
        The name the error message gives the value.
    low : float, default 0.0
        The lower limit.
    inclusive : bool, default False
        Whether ``low`` itself is allowed.
    high : float, default inf
        The upper limit, allowed.

    Returns
    -------
    float

    Raises
    ------
    InputError
        For a string, a bool, NaN, infinity, or a value out of range.

    Examples
    --------
    >>> check_number(360, "round")
    360.0
    >>> check_number(-0.0, "gap", inclusive=True)  # a zero without its sign
    0.0
    >>> check_number("abc", "round")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: round = 'abc': must be a finite number > 0
    """
    if (
        not is_finite_number(value)
        or value < low
        or (value == low and not inclusive)
        or value > high
    ):
        raise InputError(
            field,
            value,
            f"must be a finite number {'>=' if inclusive else '>'} {low:g}"
            + (f" and <= {high:g}" if high < math.inf else ""),
        )
    return float(value) + 0.0  # -0.0 becomes 0.0


def check_count(value: Any, field: str) -> int:
    """``value`` as an ``int`` if it is a positive integer.

    Parameters
    ----------
    value : Any
    field : str
        The name the error message gives the value.

    Returns
    -------
    int

    Raises
    ------
    InputError
        For anything else (a bool, a float such as 1.5, a string, zero).

    Examples
    --------
    >>> check_count(1.5, "workers")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: workers = 1.5: must be a positive integer
    """
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise InputError(field, value, "must be a positive integer")
    return int(value)


def check_flag(value: Any, field: str) -> bool:
    """``value`` if it is ``True`` or ``False``: ``bool("no")`` is true, so strings are refused.

    Parameters
    ----------
    value : Any
    field : str
        The name the error message gives the value.

    Returns
    -------
    bool

    Raises
    ------
    InputError
        For anything but a bool.

    Examples
    --------
    >>> check_flag("no", "warm_start")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: warm_start = 'no': must be true or false
    """
    if not isinstance(value, bool):
        raise InputError(field, value, "must be true or false")
    return value


def check_fields(data: Mapping[str, Any], known: Collection[str], where: str = "") -> None:
    """Reject a field of ``data`` that is not in ``known``: a misspelt field is an error, not a
    silently ignored default.

    Parameters
    ----------
    data : mapping
        A parsed JSON object.
    known : collection of str
        The fields the format defines.
    where : str, default ""
        Prefix of the field's name in the message, e.g. ``"queue[3]."``.

    Raises
    ------
    InputError
        Naming the first unknown field (in sorted order) and listing the known ones.

    Examples
    --------
    >>> check_fields({"id": "a", "num_gpu": 2}, ("id", "num_gpus"), "queue[0].")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: queue[0].num_gpu = 2: unknown field; known: id, num_gpus
    """
    extra = sorted(set(data) - set(known))
    if extra:
        raise InputError(
            f"{where}{extra[0]}", data[extra[0]], f"unknown field; known: {', '.join(known)}"
        )


def refuse_differing(field: str, value: Any, options: Mapping[str, Any], key: str, by: str) -> None:
    """Refuse a value given twice, as ``field`` and as the option ``key`` among ``options`` (of
    ``by``), unless the two agree or ``value`` is ``None``.

    Parameters
    ----------
    field : str
        The name of the value given directly, e.g. ``"--time-limit"``.
    value : Any
        That value; ``None``: not given.
    options : mapping
        The options given besides.
    key : str
        The option that gives the same setting.
    by : str
        How the options were given, e.g. ``"-o"``.

    Raises
    ------
    InputError
        Naming ``field``, its value and the option.

    Examples
    --------
    >>> refuse_differing("--time-limit", 2.0, {"time_limit": 2.0}, "time_limit", "-o")
    >>> refuse_differing("--time-limit", 2.0, {"time_limit": 3}, "time_limit", "-o")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: --time-limit = 2.0: -o time_limit=3 differs
    """
    if value is not None and key in options and options[key] != value:
        raise InputError(field, value, f"{by} {key}={options[key]} differs")
