"""Per-GPU variability profiles: load measurements, normalise, bin, assign to a cluster.

A :class:`VariabilityProfile` holds, for each workload class and each measured GPU, the GPU's
slowdown relative to the median GPU (1.0 = median, larger = slower). ``NaN`` marks a GPU that was
not measured for a class (profiles joined from per-application files rarely cover the same GPUs).

Sources
-------
- Measurement files with one row per run (:func:`read_measurements`; the Longhorn files through
  :func:`load_longhorn`): rows are grouped by the GPU key columns, each GPU's runs are reduced
  to their median, and the values are divided by the median over GPUs (so the median GPU is 1.0).
  The median is robust to passing slowdowns: the Longhorn ResNet-50 file has runs of up to 3.6x
  on three servers whose GPUs all slowed down together, yet no GPU's median is above 1.12x
  (BERT 1.04x, PageRank 1.004x). The artifact's code does otherwise: its real-cluster path takes
  each GPU's *maximum* run, and its 64-GPU simulation table holds single runs (below).
- One-row-per-GPU tables already normalised by the artifact (``32gpu-variability.csv``,
  ``sim-64gpu-cluster.csv``; :func:`load_artifact_table`): ``PerfVar_<class>`` columns, used
  as they are. Every value of ``sim-64gpu-cluster.csv`` is one single run of the Longhorn
  files divided by the median of all runs, drawn for each class on its own (no row has one
  source GPU for classes A and B), so its class-A outlier of 2.83x is one run of a GPU whose
  median is 1.03x.

GPU keys
--------
A GPU's key joins its id columns with ``-``; an id part that is an integer is written without
leading zeros (Longhorn's PageRank file writes node ``004`` where the BERT file writes ``4``), so
``cabinet,node,device`` gives keys like ``c005-4-3`` in every Longhorn file. Profiles of
different applications are joined on these keys (:meth:`VariabilityProfile.merge`): the
Longhorn BERT, ResNet-50 and PageRank files share 20 GPUs in all three, 120 in BERT and ResNet.

Assigning to a cluster
----------------------
:func:`assign_profile` gives each GPU of a :class:`~palopt.topology.Topology` the whole column of
one measured GPU (all its classes together), drawn with an explicit seed without replacement
(``replace=True``: with replacement, to fill a cluster larger than the profile; in profile order
without a seed); ``by="server"`` draws whole measured servers instead, so
GPUs that share a cluster server shared a real one (the 384 Longhorn GPUs are 96 whole servers
of 4). ``missing="drop"`` draws only GPUs measured in every class;
``missing="median"`` draws from every GPU and counts an unmeasured class as the median GPU
(1.0), which is what the artifact's real-cluster code did for a GPU absent from a class's file;
``missing="sample"`` also draws from every GPU but fills an unmeasured class with a value drawn
(same seed) from that class's measured GPUs, which keeps each class's spread at the cost of the
cross-class correlation of the filled entries only.
:func:`build_instance` then bins each class over the cluster's GPUs
(:func:`palopt.binning.bin_values`) and makes the :class:`~palopt.instance.Instance`.

File format ``palopt.profile/1`` (JSON, written by ``palopt profile import`` and ``assign``)::

    {
      "format": "palopt.profile/1",
      "source": "free text: where the numbers came from",
      "classes": ["classA", "classB"],
      "gpus": ["c002-4-1", "c002-4-2"],
      "values": {"classA": [1.013, 0.998], "classB": [null, 1.002]},   # null = not measured
      "origin": ["c009-3-1", "c002-4-2"]                               # optional, see below
    }

``origin`` (present after :func:`assign_profile`) names the measured GPU each column came from.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from palopt._frozen import frozen_array, frozen_state
from palopt.binning import bin_values
from palopt.errors import PRINTABLE, InputError, check_fields, check_flag, check_seed, counted
from palopt.instance import (
    FACTOR_RANGE,
    MAX_FACTOR,
    MIN_FACTOR,
    Instance,
    Job,
    penalty_matrix,
    require_queue,
)
from palopt.io import read_csv, read_json, write_text
from palopt.topology import Topology, require_topology

__all__ = [
    "PROFILE_FORMAT",
    "LONGHORN_CLASSES",
    "MISSING_RULES",
    "VariabilityProfile",
    "assign_profile",
    "bin_profile",
    "build_instance",
    "load_artifact_table",
    "load_longhorn",
    "load_profile",
    "read_measurements",
    "save_profile",
]

PROFILE_FORMAT = "palopt.profile/1"
PROFILE_FIELDS = ("format", "source", "classes", "gpus", "values", "origin")

#: The artifact's workload classes and the Longhorn application that profiles each
#: (resnet50 -> classA; BERT, GPT2, DCGAN -> classB; vgg19 -> classC, from BERT;
#: PointNet -> classD, from PageRank).
LONGHORN_CLASSES: Mapping[str, str] = {
    "classA": "resnet",
    "classB": "bert",
    "classC": "bert",
    "classD": "pagerank",
}

#: The options :func:`bin_profile` and :func:`build_instance` pass to :func:`bin_values`.
BIN_OPTIONS = ("k", "tol", "k_max")

#: Rules of :func:`assign_profile` for classes a GPU was not measured in.
MISSING_RULES = ("drop", "median", "sample")

_INT = re.compile(r"^[+-]?\d+$")


@dataclass(frozen=True, eq=False)
class VariabilityProfile:
    """Per-class, per-GPU slowdowns relative to the median GPU.

    Parameters
    ----------
    classes : tuple of str
        Workload classes (distinct).
    gpus : tuple of str
        GPU keys (distinct).
    values : numpy.ndarray
        ``values[c, g]``: slowdown of GPU ``gpus[g]`` for ``classes[c]`` (1.0 = median GPU,
        larger = slower); ``NaN`` if not measured, every other value from
        :data:`~palopt.instance.MIN_FACTOR` to :data:`~palopt.instance.MAX_FACTOR`.
    source : str
        Free-text note on where the values came from.
    origin : tuple of str
        For a profile assigned to a cluster, the measured GPU each column came from; else empty.

    Raises
    ------
    InputError
        For no classes or no GPUs, names (or ``origin`` entries, or ``source``) that are not
        strings, duplicate names, a class name that is empty or does not print (a tab, say),
        values that are not numbers or not of the shape ``(classes, gpus)``, a value out of
        that range, a class with no value, or an ``origin`` that is neither empty nor one name
        per GPU.

    Examples
    --------
    >>> p = VariabilityProfile(("A",), ("g0", "g1"), np.array([[1.0, 1.2]]))
    >>> p.n_gpus, p.row("A").tolist()
    (2, [1.0, 1.2])
    """

    classes: tuple[str, ...]
    gpus: tuple[str, ...]
    values: np.ndarray
    source: str = ""
    origin: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        classes, gpus = tuple(self.classes), tuple(self.gpus)
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "origin", tuple(self.origin))
        if not isinstance(self.source, str):
            raise InputError("source", self.source, "expected a string")
        for name, items in (("classes", classes), ("gpus", gpus), ("origin", self.origin)):
            if not all(isinstance(x, str) for x in items):
                raise InputError(name, items, "expected names (strings)")
        for name, items in (("classes", classes), ("gpus", gpus)):
            if not items:
                raise InputError(name, [], "a profile needs at least one entry")
            if len(set(items)) != len(items):
                dup = next(x for i, x in enumerate(items) if x in items[:i])
                raise InputError(name, dup, "duplicate name")
        for c in classes:
            if not c or not c.isprintable():  # an instance refuses it later (tables print it)
                raise InputError("classes", c, f"a class name {PRINTABLE}")
        try:
            values = np.array(self.values, dtype=np.float64)
        except (TypeError, ValueError):  # a ragged list, text, None among the numbers
            shown = type(self.values).__name__ if isinstance(self.values, np.ndarray) else None
            raise InputError(
                "values",
                shown or self.values,
                f"expected a ({len(classes)}, {len(gpus)}) array of numbers",
            ) from None
        if values.shape != (len(classes), len(gpus)):
            raise InputError(
                "values", values.shape, f"expected shape ({len(classes)}, {len(gpus)})"
            )
        bad = np.isinf(values) | (values < MIN_FACTOR) | (values > MAX_FACTOR)  # NaN: missing
        if bad.any():
            c, g = np.argwhere(bad)[0]
            raise InputError(
                f"values.{classes[c]}.{gpus[g]}",
                float(values[c, g]),
                FACTOR_RANGE,
            )
        empty = np.isnan(values).all(axis=1)
        if empty.any():
            raise InputError(
                f"values.{classes[int(np.argmax(empty))]}",
                None,
                "no GPU has a value for this class",
            )
        if self.origin and len(self.origin) != len(gpus):
            raise InputError("origin", len(self.origin), f"expected {len(gpus)} entries")
        object.__setattr__(self, "values", frozen_array(values))

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Unpickled and deep-copied profiles get a new array: read-only too.
        self.__dict__.update(frozen_state(state))

    @property
    def n_gpus(self) -> int:
        """Number of GPUs.

        Examples
        --------
        >>> VariabilityProfile(("A",), ("g0", "g1"), np.array([[1.0, 1.2]])).n_gpus
        2
        """
        return len(self.gpus)

    def row(self, job_class: str) -> np.ndarray:
        """The values of one class (read-only).

        Parameters
        ----------
        job_class : str
            One of :attr:`classes`.

        Returns
        -------
        numpy.ndarray
            One value per GPU, in the order of :attr:`gpus` (``NaN`` if not measured).

        Raises
        ------
        InputError
            For an unknown class.

        Examples
        --------
        >>> p = VariabilityProfile(("A", "B"), ("g0", "g1"), np.array([[1.0, 1.2], [0.9, 1.1]]))
        >>> p.row("B").tolist()
        [0.9, 1.1]
        >>> p.row("C")
        Traceback (most recent call last):
        ...
        palopt.errors.InputError: class = 'C': unknown class; known: A, B
        """
        if job_class not in self.classes:
            raise InputError("class", job_class, f"unknown class; known: {', '.join(self.classes)}")
        return self.values[self.classes.index(job_class)]

    def complete(self) -> np.ndarray:
        """Mask of the GPUs measured in every class.

        Returns
        -------
        numpy.ndarray
            Boolean, one entry per GPU.

        Examples
        --------
        >>> values = np.array([[1.0, 1.2], [np.nan, 0.9]])
        >>> VariabilityProfile(("A", "B"), ("g0", "g1"), values).complete().tolist()
        [False, True]
        """
        return ~np.isnan(self.values).any(axis=0)

    def select(self, classes: Mapping[str, str] | Sequence[str]) -> VariabilityProfile:
        """A profile with the given classes, in that order, optionally renamed.

        Parameters
        ----------
        classes : sequence of str or mapping new name -> existing class
            A mapping may name one existing class under several new names (the artifact
            profiles classes B and C both from BERT).

        Returns
        -------
        VariabilityProfile
            This profile's GPUs, source and origin, with the rows of the classes asked for.

        Raises
        ------
        InputError
            For a class this profile does not have.

        Examples
        --------
        >>> p = VariabilityProfile(("bert",), ("g0",), np.array([[1.1]]))
        >>> p.select({"classB": "bert", "classC": "bert"}).classes
        ('classB', 'classC')
        """
        pairs = list(classes.items()) if isinstance(classes, Mapping) else [(c, c) for c in classes]
        rows = np.stack([self.row(old) for _, old in pairs])
        return VariabilityProfile(
            tuple(new for new, _ in pairs), self.gpus, rows, self.source, self.origin
        )

    def merge(self, other: VariabilityProfile) -> VariabilityProfile:
        """Join two profiles with disjoint classes on their GPU keys (outer join).

        GPUs keep this profile's order, then the other's new GPUs in its order; a GPU missing
        from one side has ``NaN`` for that side's classes.

        Parameters
        ----------
        other : VariabilityProfile
            A profile with none of this profile's classes.

        Returns
        -------
        VariabilityProfile
            This profile's classes, then the other's; the sources joined by ``"; "``; no
            origin.

        Raises
        ------
        InputError
            If ``other`` is not a profile, or a class is in both profiles.

        Examples
        --------
        >>> a = VariabilityProfile(("A",), ("g0", "g1"), np.array([[1.0, 1.2]]))
        >>> b = VariabilityProfile(("B",), ("g1", "g2"), np.array([[0.9, 1.1]]))
        >>> m = a.merge(b)
        >>> m.gpus, m.complete().tolist()
        (('g0', 'g1', 'g2'), [False, True, False])
        """
        if not isinstance(other, VariabilityProfile):
            raise InputError("other", type(other).__name__, "expected a VariabilityProfile")
        clash = [c for c in other.classes if c in self.classes]
        if clash:
            raise InputError("class", clash[0], "class is in both profiles")
        index = {g: i for i, g in enumerate(self.gpus)}
        new = [g for g in other.gpus if g not in index]
        gpus = self.gpus + tuple(new)
        values = np.full((len(self.classes) + len(other.classes), len(gpus)), np.nan)
        values[: len(self.classes), : self.n_gpus] = self.values
        full = {**index, **{g: self.n_gpus + i for i, g in enumerate(new)}}
        cols = np.array([full[g] for g in other.gpus], dtype=np.int64)
        values[len(self.classes) :, cols] = other.values
        source = "; ".join(s for s in (self.source, other.source) if s)
        return VariabilityProfile(self.classes + other.classes, gpus, values, source)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``palopt.profile/1``; ``NaN`` becomes ``null``).

        Returns
        -------
        dict
            ``format``, ``source``, ``classes``, ``gpus``, ``values`` (class -> one value per
            GPU) and, if the profile has one, ``origin``.

        Examples
        --------
        >>> values = np.array([[1.0, 1.2], [np.nan, 0.9]])
        >>> VariabilityProfile(("A", "B"), ("g0", "g1"), values).to_dict()["values"]
        {'A': [1.0, 1.2], 'B': [None, 0.9]}
        """
        data: dict[str, Any] = {
            "format": PROFILE_FORMAT,
            "source": self.source,
            "classes": list(self.classes),
            "gpus": list(self.gpus),
            "values": {
                c: [None if math.isnan(v) else float(v) for v in self.values[i]]
                for i, c in enumerate(self.classes)
            },
        }
        if self.origin:
            data["origin"] = list(self.origin)
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "profile") -> VariabilityProfile:
        """Build from the JSON form.

        Parameters
        ----------
        data : Any
            A parsed ``palopt.profile/1`` object, as :meth:`to_dict` writes it.
        where : str, default "profile"
            The name messages give ``data``; its fields are ``where.FIELD``.

        Returns
        -------
        VariabilityProfile

        Raises
        ------
        InputError
            Naming the bad field.

        Examples
        --------
        >>> values = np.array([[1.0, 1.2], [np.nan, 0.9]])
        >>> data = VariabilityProfile(("A", "B"), ("g0", "g1"), values).to_dict()
        >>> VariabilityProfile.from_dict(data).values.tolist()
        [[1.0, 1.2], [nan, 0.9]]
        >>> VariabilityProfile.from_dict({"format": "x"})
        Traceback (most recent call last):
        ...
        palopt.errors.InputError: profile.format = 'x': expected 'palopt.profile/1'
        """
        if not isinstance(data, Mapping):
            raise InputError(where, type(data).__name__, "expected a JSON object")
        if data.get("format") != PROFILE_FORMAT:
            raise InputError(f"{where}.format", data.get("format"), f"expected {PROFILE_FORMAT!r}")
        check_fields(data, PROFILE_FIELDS, f"{where}.")
        classes = _strings(data, "classes", where)
        gpus = _strings(data, "gpus", where)
        values = data.get("values")
        if not isinstance(values, Mapping):
            raise InputError(f"{where}.values", values, "expected a mapping class -> list")
        check_fields(values, classes, f"{where}.values.")  # values of an undeclared class
        rows = []
        for c in classes:
            row = values.get(c)
            if not isinstance(row, list) or len(row) != len(gpus):
                raise InputError(
                    f"{where}.values.{c}", row, f"expected a list of {len(gpus)} numbers or nulls"
                )
            for g, v in zip(gpus, row, strict=True):
                if v is not None and (
                    isinstance(v, bool) or not isinstance(v, (int, float)) or v != v
                ):  # a NaN literal read as a missing value; null says that
                    raise InputError(f"{where}.values.{c}.{g}", v, "must be a number or null")
                if isinstance(v, int) and abs(v) > MAX_FACTOR:  # float() may overflow
                    raise InputError(f"{where}.values.{c}.{g}", v, FACTOR_RANGE)
            rows.append([math.nan if v is None else float(v) for v in row])
        origin = _strings(data, "origin", where) if "origin" in data else []
        source = data.get("source", "")
        if not isinstance(source, str):
            raise InputError(f"{where}.source", source, "expected a string")
        try:
            return cls(
                tuple(classes),
                tuple(gpus),
                np.array(rows, dtype=np.float64).reshape(len(classes), len(gpus)),
                source,
                tuple(origin),
            )
        except InputError as exc:  # name the file, as the checks above do
            raise exc.prefixed(f"{where}.") from None


def _strings(data: Mapping[str, Any], key: str, where: str) -> list[str]:
    items = data.get(key)
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise InputError(f"{where}.{key}", items, "expected a list of strings")
    return items


def save_profile(profile: VariabilityProfile, path: str | Path) -> None:
    """Write a profile file (``palopt.profile/1``, see the module docstring).

    Parameters
    ----------
    profile : VariabilityProfile
    path : str or Path
        The JSON file to write (UTF-8); an existing file is replaced. Missing values are
        written as ``null``.

    Raises
    ------
    OSError
        If the file cannot be written.

    Examples
    --------
    >>> import tempfile
    >>> p = VariabilityProfile(("A",), ("g0", "g1"), np.array([[1.0, np.nan]]))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     save_profile(p, f"{folder}/p.json")
    ...     json.loads(Path(folder, "p.json").read_text())["values"]
    {'A': [1.0, None]}
    """
    write_text(path, json.dumps(profile.to_dict(), indent=1) + "\n")


def load_profile(path: str | Path) -> VariabilityProfile:
    """Read a profile file.

    Parameters
    ----------
    path : str or Path
        A ``palopt.profile/1`` JSON file, as :func:`save_profile` and ``palopt profile import``
        write it.

    Returns
    -------
    VariabilityProfile

    Raises
    ------
    InputError
        For invalid JSON (with line and column) or an invalid profile, naming the file.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> p = VariabilityProfile(("A",), ("g0", "g1"), np.array([[1.0, 1.25]]))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     save_profile(p, f"{folder}/p.json")
    ...     load_profile(f"{folder}/p.json").values.tolist()
    [[1.0, 1.25]]
    """
    return VariabilityProfile.from_dict(read_json(path), where=str(path))


def _gpu_parts(parts: Sequence[str]) -> tuple[str, ...]:
    """A GPU's id parts with numbers unpadded (``07`` and ``7`` are the same node)."""
    return tuple(_unpadded(p) if _INT.match(p) else p for p in parts)


def _unpadded(number: str) -> str:
    """An integer's digits as ``str(int(number))`` writes them, for any length (``int()``
    refuses more than 4,300 digits)."""
    digits = number.lstrip("+-").lstrip("0") or "0"
    return "-" + digits if number.startswith("-") and digits != "0" else digits


def read_measurements(
    path: str | Path,
    id_columns: Sequence[str],
    value_columns: Sequence[str],
    classes: Sequence[str] | None = None,
    normalise: bool = True,
    source: str | None = None,
) -> VariabilityProfile:
    """Read a CSV of per-GPU measurements into a profile.

    Rows are grouped by the id columns (several rows per GPU are repeated runs); each GPU's
    value is the median of its rows, and with ``normalise`` each class is divided by its median
    over GPUs, so the median GPU is 1.0. Larger values must mean slower.

    Parameters
    ----------
    path : str or Path
        CSV file with a header line.
    id_columns : sequence of str
        Columns that together identify a GPU, e.g. ``("cabinet", "node", "device")`` or
        ``("uuid",)``; joined into the GPU key (see the module docstring).
    value_columns : sequence of str
        One measurement column per class, e.g. ``("perf",)``.
    classes : sequence of str, optional
        Class names, one per value column (default: the column names).
    normalise : bool, default True
        Divide by the median GPU. Turn off for values that are already relative slowdowns.
    source : str, optional
        Note stored in the profile (default: the file name and columns).

    Returns
    -------
    VariabilityProfile

    Raises
    ------
    InputError
        Naming the file, and the column or line: a missing column, a column named both as id
        and as value, no rows, an empty id, or a value that is not a positive number (lines
        count from 1 = the header; blank lines and rows of empty cells are skipped, and a
        quoted field that runs over several lines counts as one).
    OSError
        If the file cannot be read.

    Examples
    --------
    Four runs of three GPUs (node ``01`` is node ``1``); GPU ``1-0`` ran twice:

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = Path(folder, "runs.csv").write_text(
    ...         "node,device,time\\n01,0,10\\n1,0,12\\n1,1,10\\n2,0,20\\n")
    ...     p = read_measurements(f"{folder}/runs.csv", ["node", "device"], ["time"], ["A"])
    >>> p.gpus, p.values.round(3).tolist()
    (('1-0', '1-1', '2-0'), [[1.0, 0.909, 1.818]])
    """
    import pandas as pd  # only needed to read files; keeps `import palopt` light

    path = Path(path)
    name = str(path)
    id_columns, value_columns = list(id_columns), list(value_columns)
    classes = list(classes) if classes is not None else list(value_columns)
    if not id_columns:
        raise InputError(f"{name}: id columns", [], "name at least one id column")
    if not value_columns:
        raise InputError(f"{name}: value columns", [], "name at least one value column")
    for kind, columns in (("id", id_columns), ("value", value_columns)):
        if len(set(columns)) < len(columns):
            raise InputError(f"{name}: {kind} columns", columns, "a column is named twice")
    both = sorted(set(id_columns) & set(value_columns))
    if both:
        raise InputError(f"{name}: value columns", both, "also named as id columns")
    if len(classes) != len(value_columns):
        raise InputError(
            f"{name}: classes",
            classes,
            f"expected one class name per value column ({len(value_columns)})",
        )
    # Blank lines kept as rows of empty cells, then dropped with rows of nothing but separators
    # and blanks (a tab too), so that a row's index + 2 is its line in the file (1 = the header),
    # after the blank lines before the header (kept, pandas would read the first as the header)
    leading = _leading_blank_lines(path)
    df = read_csv(
        path,
        dtype=str,
        keep_default_na=False,
        skipinitialspace=True,
        skip_blank_lines=False,
        skiprows=leading,
    )
    df = df[~(df.apply(lambda s: s.str.strip()) == "").all(axis=1)]
    line = df.index.to_numpy() + 2 + leading
    for col in id_columns + value_columns:
        if col not in df.columns:
            raise InputError(
                f"{name}: column",
                col,
                f"no such column; columns: {', '.join(map(str, df.columns))}",
            )
    if df.empty:
        raise InputError(name, "header only", "no data rows")
    ids = df[id_columns].apply(lambda s: s.str.strip())
    blank = (ids == "").any(axis=1).to_numpy()
    if blank.any():
        row = int(np.argmax(blank))
        col = next(c for c in id_columns if ids[c].iloc[row] == "")
        raise InputError(f"{name}: line {line[row]}, column {col}", "", "empty GPU id")
    parts_of: dict[str, tuple[str, ...]] = {}
    keys = []
    for row, raw_parts in enumerate(ids.itertuples(index=False, name=None)):
        parts = _gpu_parts(raw_parts)
        key = "-".join(parts)
        if parts_of.setdefault(key, parts) != parts:  # e.g. ("x-y", "z") and ("x", "y-z")
            raise InputError(
                f"{name}: line {line[row]}, columns {','.join(id_columns)}",
                ",".join(parts),
                f"gives GPU id {key!r}, as does {','.join(parts_of[key])}",
            )
        keys.append(key)
    data = {}
    for col in value_columns:
        raw = df[col].str.strip()
        num = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(num) | (num <= 0)
        if bad.any():
            row = int(np.argmax(bad))
            problem = "not a number" if math.isnan(num[row]) else "must be a finite positive number"
            raise InputError(f"{name}: line {line[row]}, column {col}", raw.iloc[row], problem)
        data[col] = num
    # grouped by the keys themselves: a key column would clash with a value column of its name
    per_gpu = pd.DataFrame(data).groupby(pd.Index(keys), sort=False)[value_columns].median()
    values = per_gpu.to_numpy(dtype=np.float64).T
    if normalise:
        values = values / np.median(values, axis=1, keepdims=True)
        out = (values < MIN_FACTOR) | (values > MAX_FACTOR)
        if out.any():
            c, g = np.argwhere(out)[0]
            raise InputError(
                f"{name}: GPU {per_gpu.index[g]!r}, column {value_columns[c]}",
                float(per_gpu.iat[g, c]),
                f"is {values[c, g]:.3g} times the median GPU; slowdowns must be from "
                f"{MIN_FACTOR:g} to {MAX_FACTOR:g}",
            )
    note = (
        source
        if source is not None
        else (
            f"{path.name}: id {','.join(id_columns)}, value {','.join(value_columns)}, "
            f"median of {len(df)} rows over {len(per_gpu)} GPUs"
            + (", normalised to the median GPU" if normalise else "")
        )
    )
    return VariabilityProfile(tuple(classes), tuple(per_gpu.index), values, note)


def _leading_blank_lines(path: Path) -> int:
    """How many lines of nothing but blanks a file starts with (0 if it cannot be read here:
    :func:`~palopt.io.read_csv` then says why)."""
    count = 0
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as lines:
            for text in lines:
                if text.strip():
                    break
                count += 1
    except (OSError, ValueError):
        return 0
    return count


def load_longhorn(
    directory: str | Path,
    classes: Mapping[str, str] = LONGHORN_CLASSES,
) -> VariabilityProfile:
    """Load the Longhorn measurement files as one profile joined on GPU location.

    Reads ``{app}-longhorn-agg.csv`` for each application named in ``classes`` (column
    ``perf``, per-run time: larger is slower), takes each GPU's median run, normalises each
    application to its median GPU, and joins the applications on ``cabinet-node-device``.

    Parameters
    ----------
    directory : str or Path
        Folder holding the files.
    classes : mapping class -> application, default :data:`LONGHORN_CLASSES`

    Returns
    -------
    VariabilityProfile
        Classes in the order of ``classes``; ``NaN`` where an application did not measure a GPU.

    Raises
    ------
    InputError
        For an empty ``classes``, or a bad file (as :func:`read_measurements`).
    OSError
        If a file cannot be read.

    Examples
    --------
    Two tiny files in the Longhorn form (the real ones have more columns, which are ignored):

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = Path(folder, "bert-longhorn-agg.csv").write_text(
    ...         "cabinet,node,device,perf\\nc1,1,0,10\\nc1,1,1,11\\nc1,1,0,12\\n")
    ...     _ = Path(folder, "resnet-longhorn-agg.csv").write_text(
    ...         "cabinet,node,device,perf\\nc1,01,1,5\\nc1,1,2,6\\n")
    ...     p = load_longhorn(folder, {"classA": "resnet", "classB": "bert"})
    >>> p.classes, p.gpus
    (('classA', 'classB'), ('c1-1-1', 'c1-1-2', 'c1-1-0'))
    >>> p.values.round(3).tolist()
    [[0.909, 1.091, nan], [1.0, nan, 1.0]]
    """
    directory = Path(directory)
    apps = list(dict.fromkeys(classes.values()))
    if not apps:
        raise InputError("classes", dict(classes), "name at least one class")
    profiles = [
        read_measurements(
            directory / f"{app}-longhorn-agg.csv",
            ["cabinet", "node", "device"],
            ["perf"],
            [app],
            source=f"{app}-longhorn-agg.csv (TACC Longhorn V100)",
        )
        for app in apps
    ]
    merged = profiles[0]
    for prof in profiles[1:]:
        merged = merged.merge(prof)
    return merged.select(classes)


def load_artifact_table(path: str | Path) -> VariabilityProfile:
    """Load a one-row-per-GPU artifact table (``PerfVar_<class>`` columns, ``GPU_ID``).

    The values are the artifact's normalised slowdowns and are kept as they are. Works for
    ``32gpu-variability.csv`` and ``sim-64gpu-cluster.csv``.

    Parameters
    ----------
    path : str or Path
        A CSV file with a ``GPU_ID`` column and one ``PerfVar_<class>`` column per class (other
        columns, such as the ``sf_<class>`` levels, are ignored).

    Returns
    -------
    VariabilityProfile
        Classes named after the columns (``PerfVar_classA`` -> ``classA``), GPUs keyed by
        ``GPU_ID``; a GPU on several rows gets the median of its rows.

    Raises
    ------
    InputError
        If the file has no ``GPU_ID`` or no ``PerfVar_`` column, or a bad value.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = Path(folder, "table.csv").write_text(
    ...         "GPU_ID,Node_ID,PerfVar_classA,PerfVar_classB\\n0,0,1.0,0.98\\n1,0,1.3,1.02\\n")
    ...     p = load_artifact_table(Path(folder, "table.csv"))
    >>> p.classes, p.gpus, p.values.tolist()
    (('classA', 'classB'), ('0', '1'), [[1.0, 1.3], [0.98, 1.02]])
    >>> p.source
    'table.csv (PAL artifact, normalised)'
    """
    path = Path(path)
    header = read_csv(path, nrows=0).columns
    cols = [c for c in header if str(c).startswith("PerfVar_")]
    if not cols:
        raise InputError(f"{path}: column", "PerfVar_*", "no PerfVar_<class> column")
    return read_measurements(
        path,
        ["GPU_ID"],
        cols,
        [c[len("PerfVar_") :] for c in cols],
        normalise=False,
        source=f"{path.name} (PAL artifact, normalised)",
    )


def assign_profile(
    profile: VariabilityProfile,
    topology: Topology,
    seed: int | None,
    missing: str = "drop",
    by: str = "gpu",
    replace: bool = False,
) -> VariabilityProfile:
    """Give every GPU of a cluster the measured values of one profile GPU, all classes together.

    Parameters
    ----------
    profile : VariabilityProfile
    topology : Topology
    seed : int or None
        ``None``: eligible profile GPUs (or servers) in profile order go to the cluster's GPUs
        (servers) in index order; with ``by="server"``, larger cluster servers take theirs
        first (servers of one size in index order). An int: they are drawn uniformly without
        replacement with ``numpy.random.default_rng(seed)``.
    missing : {"drop", "median", "sample"}
        ``"drop"``: only GPUs measured in every class are eligible. ``"median"``: every GPU is
        eligible and an unmeasured class counts as 1.0 (the artifact's real-cluster rule).
        ``"sample"``: every GPU is eligible and an unmeasured class takes a value drawn with
        replacement from that class's measured GPUs (needs a seed); classes with identical
        measurements (the artifact's B and C, both from BERT) get identical draws.
    by : {"gpu", "server"}
        ``"gpu"``: draw GPUs independently. ``"server"``: draw whole measured servers, so GPUs
        that share a server in the cluster shared one when measured (keeping any per-server
        effect such as cooling). A GPU's measured server is its key without the last ``-`` part
        (``c005-4-3`` is on ``c005-4``); each cluster server of ``m`` GPUs takes a distinct
        measured server with at least ``m`` eligible GPUs, and its first ``m`` of them.
    replace : bool, default False
        ``by="gpu"`` with a seed: draw profile GPUs with replacement, so a small profile can
        fill a large cluster (benchmark families of up to 4,096 GPUs from 64 measured ones).

    Returns
    -------
    VariabilityProfile
        Keyed by the topology's GPU ids, with ``origin`` naming the measured GPU of each.

    Raises
    ------
    InputError
        For a ``profile`` or ``topology`` of another type, an unknown rule, too few eligible
        GPUs or servers, keys without a server part (``by="server"``), ``"sample"`` without a
        seed, or a negative seed.

    Examples
    --------
    >>> from palopt.topology import build_cluster
    >>> p = VariabilityProfile(("A", "B"), ("x", "y", "z"),
    ...                        np.array([[1.0, 1.1, 1.2], [0.9, np.nan, 1.3]]))
    >>> assign_profile(p, build_cluster(1, 1, 2), seed=None).origin
    ('x', 'z')
    """
    _require_types(profile, topology)
    if missing not in MISSING_RULES:
        raise InputError("missing", missing, f"must be one of {', '.join(MISSING_RULES)}")
    if by not in ("gpu", "server"):
        raise InputError("by", by, "must be 'gpu' or 'server'")
    if missing == "sample" and seed is None:
        raise InputError("seed", None, "missing='sample' draws values and needs a seed")
    check_flag(replace, "replace")
    if replace and (seed is None or by != "gpu"):
        raise InputError("replace", True, "draws with replacement need a seed and by='gpu'")
    eligible = (
        np.flatnonzero(profile.complete()) if missing == "drop" else np.arange(profile.n_gpus)
    )
    hint = (  # only where some GPUs were left out for a missing class
        " (GPUs not measured in every class count with missing='median' or 'sample', "
        "--missing in the CLI)"
        if len(eligible) < profile.n_gpus
        else ""
    )
    rng = np.random.default_rng(check_seed(seed))
    n = topology.n_gpus
    if by == "gpu":
        if (len(eligible) < n and not replace) or not len(eligible):
            more = (
                " (with a seed, replace=True draws GPUs with replacement:"
                " palopt profile assign --seed N --replace)"
                if len(eligible)
                else ""
            )
            raise InputError(
                "profile",
                f"{len(eligible)} eligible GPUs",
                f"the cluster has {n} GPUs{hint}{more}",
            )
        chosen = eligible[:n] if seed is None else rng.choice(eligible, size=n, replace=replace)
    else:
        chosen = _draw_servers(profile, topology, eligible, rng if seed is not None else None, hint)
    values = profile.values[:, chosen].copy()
    if missing == "median":
        values[np.isnan(values)] = 1.0
    elif missing == "sample":
        for c in range(len(profile.classes)):
            same = next(
                d
                for d in range(c + 1)
                if np.array_equal(profile.values[d], profile.values[c], equal_nan=True)
            )
            hole = np.isnan(values[c])
            if same < c:  # a class measured by the same data (B and C from BERT): same fill
                values[c, hole] = values[same, hole]
                continue
            measured = profile.values[c][~np.isnan(profile.values[c])]
            values[c, hole] = rng.choice(measured, size=int(hole.sum()), replace=True)
    how = "in profile order" if seed is None else f"drawn with seed {seed}"
    how += " with replacement" if replace else ""
    note = f"{profile.source}; {n} GPUs {how} by {by}, missing={missing}"
    return VariabilityProfile(
        profile.classes, topology.gpu_ids, values, note, tuple(profile.gpus[i] for i in chosen)
    )


def _require_types(profile: object, topology: object) -> None:
    """Refuse a ``profile`` or ``topology`` argument of another type."""
    if not isinstance(profile, VariabilityProfile):
        raise InputError("profile", type(profile).__name__, "expected a VariabilityProfile")
    require_topology(topology)


def _draw_servers(
    profile: VariabilityProfile,
    topology: Topology,
    eligible: np.ndarray,
    rng: np.random.Generator | None,
    hint: str,
) -> np.ndarray:
    """Profile GPU indices for the cluster's GPUs, whole measured servers at a time."""
    groups: dict[str, list[int]] = {}
    for g in eligible:
        key = profile.gpus[g]
        if "-" not in key:
            raise InputError("profile.gpus", key, "by='server' needs keys like SERVER-DEVICE")
        groups.setdefault(key.rsplit("-", 1)[0], []).append(int(g))
    members = list(groups.values())
    order = list(range(len(members))) if rng is None else list(rng.permutation(len(members)))
    sizes = [int(m) for m in topology.server_sizes]
    picks = [0] * len(sizes)
    # Largest cluster servers first: a measured server that fits one fits every smaller one,
    # so taking any that fits never leaves a smaller server without one that a match had.
    for s in sorted(range(len(sizes)), key=lambda s: -sizes[s]):
        pick = next((i for i in order if len(members[i]) >= sizes[s]), None)
        if pick is None:
            largest = max(map(len, members), default=0)
            raise InputError(
                "profile",
                f"{len(members)} measured servers",
                f"not enough with {sizes[s]} eligible GPUs for the cluster's "
                f"{counted(topology.n_servers, 'server')} (the largest has {largest})"
                + (hint if sizes[s] <= _largest_server(profile) else ""),
            )
        order.remove(pick)
        picks[s] = pick
    return np.asarray(
        [g for s, pick in enumerate(picks) for g in members[pick][: sizes[s]]], dtype=np.int64
    )


def _largest_server(profile: VariabilityProfile) -> int:
    """The most GPUs one measured server has in the profile, measured in every class or not."""
    return max(Counter(g.rsplit("-", 1)[0] for g in profile.gpus).values(), default=0)


def bin_profile(profile: VariabilityProfile, method: str = "kmeans", **options: Any) -> np.ndarray:
    """Binned levels of every class, over the profile's GPUs measured for that class.

    Parameters
    ----------
    profile : VariabilityProfile
    method : {"kmeans", "artifact"}
        See :func:`palopt.binning.bin_values`; ``options`` (``k``, ``tol``, ``k_max``) go there.

    Returns
    -------
    numpy.ndarray
        ``levels[c, g]``, ``NaN`` where the profile has no value.

    Raises
    ------
    InputError
        For an option other than :data:`BIN_OPTIONS`, or as :func:`~palopt.binning.bin_values`.

    Examples
    --------
    >>> p = VariabilityProfile(("A",), ("a", "b", "c"), np.array([[1.0, 1.001, 1.5]]))
    >>> bin_profile(p).round(4).tolist()
    [[1.0005, 1.0005, 1.5]]
    """
    for key, value in options.items():  # bin_values would raise a TypeError
        if key not in BIN_OPTIONS:
            raise InputError(
                key, value, f"unknown binning option; options: {', '.join(BIN_OPTIONS)}"
            )
    levels = np.full(profile.values.shape, np.nan)
    for c in range(len(profile.classes)):
        have = ~np.isnan(profile.values[c])
        levels[c, have] = bin_values(profile.values[c, have], method=method, **options).levels
    return levels


def build_instance(
    profile: VariabilityProfile,
    topology: Topology,
    penalties: float | Mapping[str, Any],
    queue: Sequence[Job],
    method: str = "kmeans",
    busy: np.ndarray | None = None,
    **options: Any,
) -> Instance:
    """An :class:`~palopt.instance.Instance` whose slowdowns are the profile's binned levels.

    Parameters
    ----------
    profile : VariabilityProfile
        Already assigned to the cluster (:func:`assign_profile`): one column per topology GPU,
        in topology order, with no missing value.
    topology : Topology
    penalties : float or mapping
        As :func:`palopt.instance.penalty_matrix` takes them.
    queue : sequence of Job
    method : {"kmeans", "artifact"}
        Binning rule (:func:`palopt.binning.bin_values`); ``options`` go there.
    busy : numpy.ndarray, optional
        Mask of busy GPUs.

    Returns
    -------
    Instance

    Raises
    ------
    InputError
        If ``profile`` or ``topology`` is of another type, ``queue`` is not a sequence of jobs,
        an option is not one of :data:`BIN_OPTIONS`, or the profile does not match the topology
        or has missing values.

    Examples
    --------
    >>> from palopt import Job, build_cluster
    >>> topo = build_cluster(1, 1, 4)
    >>> p = VariabilityProfile(("A",), topo.gpu_ids, np.array([[1.0, 1.01, 0.99, 1.4]]))
    >>> inst = build_instance(p, topo, 1.7, [Job("j", 2, "A")])
    >>> inst.slowdown.round(3).tolist()   # two levels: the three near-median GPUs share one
    [[1.0, 1.0, 1.0, 1.4]]
    """
    _require_types(profile, topology)
    require_queue(queue)
    if profile.gpus != topology.gpu_ids:
        raise InputError(
            "profile.gpus",
            profile.gpus[:3],
            "must be the topology's GPU ids in order (use assign_profile)",
        )
    if np.isnan(profile.values).any():
        c, g = np.argwhere(np.isnan(profile.values))[0]
        raise InputError(
            f"profile.values.{profile.classes[c]}.{profile.gpus[g]}",
            None,
            "missing value (assign with missing='median' or drop the class)",
        )
    levels = bin_profile(profile, method, **options)
    pen = penalty_matrix(topology, profile.classes, penalties)
    mask = np.zeros(topology.n_gpus, dtype=bool) if busy is None else busy
    return Instance(topology, profile.classes, levels, pen, tuple(queue), mask)
