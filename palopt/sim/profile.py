"""Per-GPU slowdown profiles for simulation: what placement ranks by, and what the simulator
charges.

The artifact's simulator ranks with binned levels (``sf_classX`` in the shared
``sim-64gpu-cluster.csv``) but charges the raw measured slowdown (``PerfVar_classX``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from palopt import variability
from palopt._frozen import frozen_array, frozen_state
from palopt.binning import METHODS
from palopt.errors import InputError, check_count, check_seed, is_number
from palopt.instance import require_factors
from palopt.io import read_csv
from palopt.topology import Topology

__all__ = ["ClusterProfile", "load_profile", "correlated_profile"]


@dataclass(frozen=True, eq=False)
class ClusterProfile:
    """Slowdowns of every GPU for every class.

    Attributes
    ----------
    classes : tuple of str
    rank : numpy.ndarray
        ``rank[c, g]``: the slowdown placement ranks by (the instance's ``slowdown``).
    charge : numpy.ndarray
        ``charge[c, g]``: the slowdown the simulator charges (compat mode: the raw value).

    Raises
    ------
    InputError
        If ``rank`` or ``charge`` is not a 2-D numpy array of one row per class, if their shapes
        differ, or for an entry that is not a finite number from ``1e-12`` to ``1e12``.

    Examples
    --------
    >>> prof = ClusterProfile(("A",), np.array([[1.0, 1.1]]), np.array([[1.0, 1.2]]))
    >>> prof.rank.shape
    (1, 2)
    >>> ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 3)))
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: profile.charge = (1, 3): expected the shape of rank, (1, 2)
    """

    classes: tuple[str, ...]
    rank: np.ndarray
    charge: np.ndarray

    def __post_init__(self) -> None:
        _check_array("profile.rank", self.rank, self.classes)
        _check_array("profile.charge", self.charge, self.classes)
        if self.charge.shape != self.rank.shape:
            raise InputError(
                "profile.charge",
                self.charge.shape,
                f"expected the shape of rank, {self.rank.shape}",
            )
        object.__setattr__(self, "classes", tuple(self.classes))
        # Copies, read-only: the caller's arrays may change after they were checked.
        rank = frozen_array(np.array(self.rank, dtype=np.float64))
        same = self.charge is self.rank  # (fixed(): one array for both)
        charge = rank if same else frozen_array(np.array(self.charge, dtype=np.float64))
        object.__setattr__(self, "rank", rank)
        object.__setattr__(self, "charge", charge)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Unpickled and deep-copied profiles get new arrays: read-only too (one for rank and
        # charge if they were one).
        self.__dict__.update(frozen_state(state))

    def fixed(self) -> ClusterProfile:
        """The profile whose charged slowdown is the ranked one (the "fixed" model).

        Returns
        -------
        ClusterProfile
            The classes and ``rank`` of this profile, ``rank`` as ``charge`` too.

        Examples
        --------
        >>> prof = ClusterProfile(("A",), np.array([[1.0, 1.1]]), np.array([[1.0, 1.2]]))
        >>> prof.fixed().charge.tolist()
        [[1.0, 1.1]]
        """
        return ClusterProfile(self.classes, self.rank, self.rank)

    def tiled(self, n_gpus: int, gpus_per_server: int, seed: int) -> ClusterProfile:
        """A profile for ``n_gpus`` GPUs made of this profile's servers drawn with replacement.

        Whole servers are drawn (seeded), so values stay correlated within a server and
        across classes as measured.

        Parameters
        ----------
        n_gpus : int
            GPUs of the new profile.
        gpus_per_server : int
            GPUs per server, in this profile (whose GPUs are in server order) and the new one.
        seed : int
            Seed of the draws.

        Returns
        -------
        ClusterProfile
            ``n_gpus`` columns: ``n_gpus / gpus_per_server`` servers of this profile, each with
            its ``rank`` and ``charge`` columns.

        Raises
        ------
        InputError
            If ``n_gpus`` or ``gpus_per_server`` is not a positive integer, this profile's GPUs
            or ``n_gpus`` are not a multiple of ``gpus_per_server``, or ``seed`` is not ``None``
            or a non-negative integer.

        Examples
        --------
        >>> prof = ClusterProfile(("A",), np.array([[1.0, 1.1, 1.3, 1.4]]), np.ones((1, 4)))
        >>> prof.tiled(6, 2, seed=1).rank.tolist()
        [[1.0, 1.1, 1.3, 1.4, 1.3, 1.4]]
        """
        check_count(n_gpus, "n_gpus")
        check_count(gpus_per_server, "gpus_per_server")
        n = self.rank.shape[1]
        if n % gpus_per_server or n_gpus % gpus_per_server:
            raise InputError(
                "profile", (n, n_gpus), f"GPU counts must be multiples of {gpus_per_server}"
            )
        rng = np.random.default_rng(check_seed(seed))
        servers = rng.integers(0, n // gpus_per_server, n_gpus // gpus_per_server)
        idx = (servers[:, None] * gpus_per_server + np.arange(gpus_per_server)).ravel()
        return ClusterProfile(self.classes, self.rank[:, idx], self.charge[:, idx])


def _check_array(field: str, value: object, classes: tuple[str, ...]) -> None:
    """Raise :class:`InputError` naming ``field`` unless ``value`` is a 2-D numpy array of one
    row per class of valid slowdowns."""
    if not isinstance(value, np.ndarray) or value.ndim != 2:
        raise InputError(field, type(value).__name__, "expected a 2-D numpy array (classes x GPUs)")
    if len(value) != len(classes):
        raise InputError(field, value.shape, f"expected one row per class ({len(classes)})")
    require_factors(value, lambda c, g: f"{field}[{classes[c]}][{g}]")


def load_profile(
    path: str | Path, topology: Topology, seed: int = 0, binning: str = "kmeans"
) -> ClusterProfile:
    """Load a cluster profile.

    Two forms:

    - a CSV with one row per GPU (in topology order), ``PerfVar_<class>`` columns (charged) and
      optionally ``sf_<class>`` columns (ranked; default: the same), as the artifact wrote;
    - a ``palopt.profile/1`` JSON file (``palopt profile import``): unless it already holds
      every GPU of ``topology`` by name with every class measured, its GPUs are assigned to the
      cluster with :func:`palopt.variability.assign_profile` (drawn with ``seed``; an
      unmeasured class counts as 1.0, as in the artifact's simulator). The simulator charges
      the values and placement ranks by their levels (:func:`palopt.variability.bin_profile`
      with ``binning``).

    Parameters
    ----------
    path : str or Path
        A CSV file, or a JSON file (by its ``.json`` suffix, any case).
    topology : Topology
        The cluster. A CSV has one row per GPU in topology order, or a ``GPU_ID`` column
        numbering the GPUs in that order from 0.
    seed : int, default 0
        Seed of the draw of JSON profile GPUs onto the cluster (unused for a CSV).
    binning : {"kmeans", "artifact"}
        Rule that makes the ranked levels of a JSON profile (unused for a CSV).

    Returns
    -------
    ClusterProfile
        ``rank`` and ``charge`` of shape ``(n_classes, n_gpus)``, classes in the file's order.

    Raises
    ------
    InputError
        For a wrong number of rows, ``GPU_ID`` values other than 0 to ``n - 1`` each once, no
        ``PerfVar_`` column, non-positive values, or a profile
        too small for the cluster; also for an unknown ``binning``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from palopt.topology import build_cluster
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     csv = Path(folder, "profile.csv")
    ...     _ = csv.write_text("GPU_ID,PerfVar_A,sf_A\\n1,1.31,1.3\\n0,1.02,1.0\\n")
    ...     p = load_profile(csv, build_cluster(1, 1, 2))
    >>> p.classes, p.rank.tolist(), p.charge.tolist()
    (('A',), [[1.0, 1.3]], [[1.02, 1.31]])
    """
    if binning not in METHODS:
        raise InputError("binning", binning, f"must be one of {', '.join(METHODS)}")
    if str(path).lower().endswith(".json"):
        profile = variability.load_profile(path)
        if profile.gpus != topology.gpu_ids or not profile.complete().all():
            profile = variability.assign_profile(profile, topology, seed, missing="median")
        rank = variability.bin_profile(profile, binning)
        return ClusterProfile(profile.classes, rank, profile.values)
    import pandas as pd  # only for CSV profiles

    df = read_csv(path, "profile")
    classes = tuple(c[len("PerfVar_") :] for c in df.columns if c.startswith("PerfVar_"))
    if not classes:
        raise InputError("profile.columns", list(df.columns), "no PerfVar_<class> column")
    if len(df) != topology.n_gpus:
        raise InputError(
            "profile", len(df), f"has {len(df)} GPU rows, the cluster has {topology.n_gpus} GPUs"
        )
    if "GPU_ID" in df.columns:
        ids = pd.to_numeric(df["GPU_ID"], errors="coerce").to_numpy()
        order = np.argsort(ids, kind="stable")
        bad = np.flatnonzero(ids[order] != np.arange(len(ids)))
        if len(bad):
            row = int(order[bad[0]])
            raise InputError(
                f"profile.GPU_ID[{row}]",
                df["GPU_ID"].tolist()[row],
                f"the GPU_IDs must be 0 to {len(ids) - 1}, each once (the topology's order)",
            )
        df = df.iloc[order]
    rank_cols = [f"sf_{c}" if f"sf_{c}" in df.columns else f"PerfVar_{c}" for c in classes]
    for col in dict.fromkeys([f"PerfVar_{c}" for c in classes] + rank_cols):
        values = pd.to_numeric(df[col], errors="coerce")
        if values.isna().any():
            row = int(values.isna().to_numpy().argmax())
            raise InputError(f"profile.{col}[{row}]", df[col].tolist()[row], "not a number")
        df[col] = values
    charge = df[[f"PerfVar_{c}" for c in classes]].to_numpy(dtype=np.float64).T
    rank = df[rank_cols].to_numpy(dtype=np.float64).T
    require_factors(charge, lambda c, g: f"profile.PerfVar_{classes[c]}[{g}]")
    require_factors(rank, lambda c, g: f"profile.{rank_cols[c]}[{g}]")
    return ClusterProfile(classes, rank, charge)


def correlated_profile(
    n_gpus: int, classes: tuple[str, ...], sigma: float | tuple[float, ...], rho: float, seed: int
) -> ClusterProfile:
    """A synthetic profile whose per-GPU slowdowns are correlated across classes.

    ``slowdown[c, g] = exp(sigma_c * (rho * z_g + sqrt(1 - rho**2) * e_cg))`` with ``z`` (the
    GPU's common speed) and ``e`` standard normal: a slow GPU tends to be slow for every
    class, as real GPUs are. Values are then divided by each class's median.

    Parameters
    ----------
    n_gpus : int
    classes : tuple of str
    sigma : float or tuple of float
        Spread of the log-slowdowns: one for every class, or one per class (non-negative).
    rho : float
        Correlation of the log-slowdowns across classes, from -1 to 1 (1: the same GPU order
        for every class; 0: independent).
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    ClusterProfile
        ``rank`` and ``charge`` are the same ``(len(classes), n_gpus)`` array.

    Raises
    ------
    InputError
        For ``n_gpus`` not a positive integer, ``classes`` not a sequence of names, ``rho``
        outside -1 to 1, a ``sigma`` outside 0 to 1 (or of another length than ``classes``),
        or a negative or non-integer seed.

    Examples
    --------
    >>> p = correlated_profile(64, ("A", "B"), 0.05, 1.0, seed=0)
    >>> bool(np.allclose(np.argsort(p.rank[0]), np.argsort(p.rank[1])))
    True
    """
    n_gpus = check_count(n_gpus, "n_gpus")
    if isinstance(classes, str) or not classes or not all(isinstance(c, str) for c in classes):
        raise InputError("classes", classes, "expected a sequence of class names")
    if not is_number(rho) or not -1.0 <= rho <= 1.0:
        raise InputError("rho", rho, "must be in [-1, 1]")
    try:
        sig = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (len(classes),))
    except (TypeError, ValueError):
        raise InputError("sigma", sigma, f"expected a number or {len(classes)} numbers") from None
    if not ((sig >= 0) & (sig <= 1)).all():  # a spread of e^1 is far beyond any GPU's
        raise InputError("sigma", sigma, "must be from 0 to 1")
    rng = np.random.default_rng(check_seed(seed))
    z = rng.standard_normal(n_gpus)
    e = rng.standard_normal((len(classes), n_gpus))
    values = np.exp(sig[:, None] * (rho * z + np.sqrt(1.0 - rho * rho) * e))
    values /= np.median(values, axis=1, keepdims=True)
    return ClusterProfile(tuple(classes), values, values)
