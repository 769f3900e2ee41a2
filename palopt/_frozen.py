"""Read-only containers for the frozen data model (Instance, Topology, profiles).

A frozen dataclass stops attribute assignment only: a dict or numpy array inside it can still be
changed in place, past the checks made when it was built and under the caches keyed on its
identity (:mod:`palopt.solvers.pool`). These helpers close that gap and stay picklable.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

__all__ = ["FrozenDict", "frozen_array", "frozen_state"]


class FrozenDict(dict):  # type: ignore[type-arg]
    """A ``dict`` that refuses changes (JSON, ``isinstance(x, dict)`` and pickling work as for
    a dict).

    Examples
    --------
    >>> d = FrozenDict(a=1)
    >>> d["a"], isinstance(d, dict)
    (1, True)
    >>> d["b"] = 2
    Traceback (most recent call last):
    ...
    TypeError: this mapping is read-only (a palopt object's derived data); copy it with dict(...)
    """

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            "this mapping is read-only (a palopt object's derived data); copy it with dict(...)"
        )

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:  # pickle and copy rebuild it whole
        return (type(self), (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        import copy

        return type(self)(copy.deepcopy(dict(self), memo))


def frozen_array(values: np.ndarray) -> np.ndarray:
    """A read-only copy of ``values`` that cannot be made writeable again, nor can its memory.

    numpy lets ``setflags(write=True)`` undo ``setflags(write=False)`` on an array that owns its
    memory, and a view's ``.base`` is that array: a read-only view of it left the data open to
    anyone who reached for ``.base``. The copy's memory is an immutable ``bytes`` object, so
    numpy refuses to make any array over it writeable.

    Parameters
    ----------
    values : numpy.ndarray
        The array to copy (left as it is).

    Returns
    -------
    numpy.ndarray
        A read-only array of the same values, dtype and shape.

    Examples
    --------
    >>> a = frozen_array(np.ones(2))
    >>> a.setflags(write=True)
    Traceback (most recent call last):
    ...
    ValueError: cannot set WRITEABLE flag to True of this array
    >>> a.base.setflags(write=True)  # (the array under it, over the bytes: refused too)
    Traceback (most recent call last):
    ...
    ValueError: cannot set WRITEABLE flag to True of this array
    """
    frozen = np.frombuffer(values.tobytes(), dtype=values.dtype).reshape(values.shape)
    frozen.setflags(write=False)
    return frozen


def frozen_state(state: dict[str, Any]) -> dict[str, Any]:
    """The attributes of an unpickled or deep-copied object, read-only again: its arrays as
    :func:`frozen_array` copies (attributes that shared an array share one copy) and its plain
    dicts as :class:`FrozenDict` (for a ``__setstate__``).

    Parameters
    ----------
    state : dict
        Attribute name -> value, as ``__setstate__`` receives it (left as it is).

    Returns
    -------
    dict
        The same attributes, arrays and plain dicts replaced by read-only ones; other values
        kept as they are.

    Examples
    --------
    >>> a = np.ones(2)
    >>> state = frozen_state({"x": a, "y": a, "m": {"k": 1}, "n": 3})
    >>> state["x"] is state["y"], state["x"].flags.writeable, type(state["m"]).__name__
    (True, False, 'FrozenDict')
    """
    frozen_arrays: dict[int, np.ndarray] = {}
    frozen: dict[str, Any] = {}
    for key, value in state.items():
        if isinstance(value, np.ndarray):
            if id(value) not in frozen_arrays:
                frozen_arrays[id(value)] = frozen_array(value)
            value = frozen_arrays[id(value)]
        elif type(value) is dict:
            value = FrozenDict(value)
        frozen[key] = value
    return frozen
