"""Exceptions raised by palopt.

Every error caused by bad input names the offending field and value so that a user can fix the
input without reading a traceback; the CLI prints the message on one line and exits with code 2.
"""

from __future__ import annotations

from typing import Any


class PaloptError(Exception):
    """Base class of every error palopt raises on purpose."""


class InputError(PaloptError, ValueError):
    """Bad input: a malformed or inconsistent instance, topology, profile or option.

    Parameters
    ----------
    field : str
        Dotted path of the offending field, e.g. ``"queue[3].num_gpus"``.
    value : Any
        The offending value (shown with ``repr``, truncated).
    problem : str
        What is wrong with it.

    Examples
    --------
    >>> str(InputError("queue[0].num_gpus", -1, "must be a positive integer"))
    'queue[0].num_gpus = -1: must be a positive integer'
    """

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"{field} = {shown}: {problem}")

    def __reduce__(self) -> tuple[type[InputError], tuple[str, Any, str]]:
        # Rebuilt from its three parts: a sweep's worker process sends it back pickled.
        return (type(self), (self.field, self.value, self.problem))


class UnknownSolverError(PaloptError, KeyError):
    """A solver name that is not in the registry; the message lists the valid names."""

    def __str__(self) -> str:
        return str(self.args[0])


class InfeasiblePlacementError(PaloptError):
    """A placement that breaks the feasibility rules (see :func:`palopt.cost.assert_feasible`)."""
