"""Instance families for the benchmark: cluster shape, load, job mix and slowdown profile.

Slowdown profiles come from one function, :func:`sample_slowdowns`: ``longhorn`` resamples the
per-GPU slowdowns of the artifact's 64-GPU cluster (real Longhorn-derived V100 profiles, four
classes per GPU kept together) with :func:`palopt.variability.assign_profile`, ``synthetic``
draws a lognormal spread with a few slow outliers.
Job sizes and classes are resampled from the Sia-Philly traces (mostly 1 GPU, some 4 to 48).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from palopt.errors import InputError, check_seed
from palopt.instance import Instance, Job, penalty_matrix
from palopt.io import shared_path
from palopt.topology import MAX_GPUS, Topology, build_cluster
from palopt.variability import VariabilityProfile, assign_profile, load_artifact_table
from palopt.workloads import load_workloads

__all__ = [
    "Family",
    "PROFILES",
    "RACK_GPUS",
    "check_load",
    "check_shape",
    "read_data",
    "sample_slowdowns",
    "sample_jobs",
    "make_instance",
    "CLASSES",
    "PENALTIES",
]

CLASSES = ("classA", "classB", "classC", "classD")
PROFILES = ("longhorn", "synthetic")
# Locality penalties: the artifact's 1.7 across servers of a rack, more across racks.
PENALTIES = {"server": 1.0, "rack": 1.7, "cluster": 2.0}


#: GPUs per rack in every family (a cluster this size or smaller is one rack).
RACK_GPUS = 32


def check_shape(
    n_gpus: int, gpus_per_server: int, fields: tuple[str, str] = ("n_gpus", "gpus_per_server")
) -> None:
    """Whether ``n_gpus`` in servers of ``gpus_per_server`` make whole racks of
    :data:`RACK_GPUS` (or at most one rack of whole servers).

    Parameters
    ----------
    n_gpus, gpus_per_server : int
    fields : tuple of str
        The names the error messages give the two values.

    Raises
    ------
    InputError
        Naming the value that does not fit.

    Examples
    --------
    >>> check_shape(64, 4)  # two racks of 32 GPUs
    >>> check_shape(8, 4)  # less than one rack: two servers
    >>> check_shape(48, 4)
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: n_gpus = 48: above one rack, must be whole racks of 32
    """
    if gpus_per_server < 1 or RACK_GPUS % gpus_per_server:
        raise InputError(fields[1], gpus_per_server, f"must divide the rack's {RACK_GPUS} GPUs")
    if n_gpus < 1 or n_gpus % gpus_per_server:
        raise InputError(fields[0], n_gpus, f"not a multiple of {gpus_per_server} GPUs per server")
    if n_gpus > MAX_GPUS:  # else refused when its first instance is made, as the cluster's shape
        raise InputError(fields[0], n_gpus, f"more than {MAX_GPUS:,} GPUs")
    if n_gpus > RACK_GPUS and n_gpus % RACK_GPUS:
        raise InputError(fields[0], n_gpus, f"above one rack, must be whole racks of {RACK_GPUS}")


def check_load(load: float, field: str = "load") -> None:
    """Check a family's load: a whole percent in (0, 1], since families are named and seeded by it.

    Parameters
    ----------
    load : float
        Share of the cluster's GPUs the queue asks for.
    field : str, default "load"
        Name of the value in the error message.

    Raises
    ------
    InputError
        For a value outside (0, 1] or between two whole percents.

    Examples
    --------
    >>> check_load(0.5)
    >>> check_load(0.555)
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: load = 0.555: must be a whole percent (0.01, 0.02, ..., 1): \
families are named and seeded by it
    """
    if not 0 < load <= 1:
        raise InputError(field, load, "must be in (0, 1]")
    if abs(100 * load - round(100 * load)) > 1e-9:
        raise InputError(
            field,
            load,
            "must be a whole percent (0.01, 0.02, ..., 1): families are named and seeded by it",
        )


@dataclass(frozen=True)
class Family:
    """One benchmark family: a cluster shape, a load and a slowdown profile.

    Parameters
    ----------
    n_gpus : int
        The cluster size.
    gpus_per_server : int
        GPUs per server; racks hold :data:`RACK_GPUS` GPUs.
    load : float
        Share of the cluster's GPUs the queue asks for: a whole percent in (0, 1].
    profile : {"longhorn", "synthetic"}
        The slowdown profile (see :func:`sample_slowdowns`).

    Raises
    ------
    InputError
        For a shape :func:`check_shape` rejects, a load :func:`check_load` rejects or an
        unknown profile.

    Examples
    --------
    >>> f = Family(64, 4, 0.5, "synthetic")
    >>> f.name, f.shape
    ('64g-4ps-50%-synthetic', (2, 8, 4))
    >>> Family(64, 4, 0.5, "flat")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: profile = 'flat': must be one of longhorn, synthetic
    """

    n_gpus: int
    gpus_per_server: int
    load: float
    profile: str

    def __post_init__(self) -> None:
        check_shape(self.n_gpus, self.gpus_per_server)
        check_load(self.load)
        if self.profile not in PROFILES:
            raise InputError("profile", self.profile, f"must be one of {', '.join(PROFILES)}")

    @property
    def name(self) -> str:
        """Short label, e.g. ``256g-4ps-100%-longhorn``.

        Examples
        --------
        >>> Family(8, 4, 1.0, "synthetic").name
        '8g-4ps-100%-synthetic'
        """
        return f"{self.n_gpus}g-{self.gpus_per_server}ps-{round(100 * self.load)}%-{self.profile}"

    @property
    def shape(self) -> tuple[int, int, int]:
        """(racks, servers per rack, GPUs per server): racks of :data:`RACK_GPUS` GPUs.

        Examples
        --------
        >>> Family(64, 4, 1.0, "synthetic").shape, Family(8, 4, 1.0, "synthetic").shape
        ((2, 8, 4), (1, 2, 4))
        """
        servers = self.n_gpus // self.gpus_per_server
        per_rack = min(servers, RACK_GPUS // self.gpus_per_server)
        return servers // per_rack, per_rack, self.gpus_per_server


@lru_cache(maxsize=4)
def _artifact_profile(path: str) -> VariabilityProfile:
    return load_artifact_table(path).select(CLASSES)


@lru_cache(maxsize=4)
def _philly_jobs(folder: str) -> tuple[np.ndarray, np.ndarray]:
    models = load_workloads()
    sizes, classes = [], []
    paths = sorted(Path(folder).glob("sia-philly-workload-*.csv"))
    if not paths:
        raise InputError("traces", folder, "no sia-philly-workload-*.csv file in this folder")
    for path in paths:
        with open(path, newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                sizes.append(int(r["num_gpus"]))
                classes.append(CLASSES.index(models.get(r["model"]).job_class))
    return np.array(sizes), np.array(classes)


def read_data(profiles: Iterable[str]) -> None:
    """Read the shared data that the families of ``profiles`` draw from (kept for them), so that
    a missing file is found before any instance is made.

    Parameters
    ----------
    profiles : iterable of str
        Slowdown profiles of :data:`PROFILES`; every family draws its jobs from the Sia-Philly
        traces, ``longhorn`` its slowdowns from the artifact's 64-GPU table.

    Raises
    ------
    InputError
        For a file of the data (:func:`palopt.io.shared_path`) that is missing or bad.

    Examples
    --------
    >>> read_data(["longhorn"])
    """
    if "longhorn" in profiles:  # read first, as an instance draws its slowdowns first
        _artifact_profile(str(shared_path("pal-artifact/sim-64gpu-cluster.csv")))
    _philly_jobs(str(shared_path("pal-artifact/traces")))


def sample_slowdowns(topology: Topology, profile: str, rng: np.random.Generator) -> np.ndarray:
    """Slowdowns ``(len(CLASSES), n_gpus)`` for a simulated cluster.

    ``longhorn`` goes through :mod:`palopt.variability`: the artifact's 64-GPU table, each cluster
    GPU drawn with replacement (all four classes of one measured GPU together).

    Parameters
    ----------
    topology : Topology
    profile : {"longhorn", "synthetic"}
    rng : numpy.random.Generator
        The source of randomness; the draws advance it.

    Returns
    -------
    numpy.ndarray
        Float array ``(len(CLASSES), topology.n_gpus)``: row ``c`` holds each GPU's slowdown for
        class ``CLASSES[c]`` (larger is slower).

    Raises
    ------
    InputError
        For an unknown profile, or a missing data file.

    Examples
    --------
    >>> import numpy as np
    >>> sd = sample_slowdowns(build_cluster(1, 2, 2), "synthetic", np.random.default_rng(0))
    >>> sd.shape, bool((sd > 0).all())
    ((4, 4), True)
    >>> sample_slowdowns(build_cluster(1, 2, 2), "flat", np.random.default_rng(0))
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: profile = 'flat': must be one of longhorn, synthetic
    """
    n_gpus = topology.n_gpus
    if profile == "longhorn":
        path = shared_path("pal-artifact/sim-64gpu-cluster.csv")
        seed = int(rng.integers(2**63))
        return assign_profile(_artifact_profile(str(path)), topology, seed, replace=True).values
    if profile == "synthetic":
        base = rng.normal(0.0, 0.04, n_gpus)
        sd = np.exp(base + rng.normal(0.0, 0.02, (len(CLASSES), n_gpus)))
        slow = rng.random((len(CLASSES), n_gpus)) < 0.05
        return np.where(slow, sd * rng.uniform(1.2, 2.0, sd.shape), sd)
    raise InputError("profile", profile, f"must be one of {', '.join(PROFILES)}")


def sample_jobs(n_gpus: int, load: float, rng: np.random.Generator) -> list[Job]:
    """A queue whose admitted prefix fills about ``load`` of ``n_gpus``, Philly-like sizes.

    Sizes larger than a quarter of the cluster (and than 48) are left out. At full load the queue
    goes on past the first job that does not fit, so the prefix is a real cut.

    Parameters
    ----------
    n_gpus : int
        The cluster size.
    load : float
        The share of ``n_gpus`` the queue's admitted prefix should fill, in (0, 1].
    rng : numpy.random.Generator
        The source of randomness; the draws advance it.

    Returns
    -------
    list of Job
        Jobs ``j0, j1, ...`` in queue order, each with a size and class drawn from the Sia-Philly
        traces (in ``pal-artifact/traces`` under :func:`palopt.io.data_dir`), weight 1 and no
        current GPUs. Below full load the queue stops before the first job whose GPUs, added to
        those of the jobs before it, go past ``load * n_gpus``. At full load the queue keeps that
        job and ends with two more after it.

    Examples
    --------
    >>> import numpy as np
    >>> jobs = sample_jobs(64, 0.5, np.random.default_rng(1))
    >>> jobs[0].id, sum(j.num_gpus for j in jobs) <= 32
    ('j0', True)
    """
    sizes, classes = _philly_jobs(str(shared_path("pal-artifact/traces")))
    ok = sizes <= max(1, min(48, n_gpus // 4))
    sizes, classes = sizes[ok], classes[ok]
    # In whole GPUs x 100: load * n_gpus in floating point can fall just under a whole number
    # (0.29 * 800 = 231.99999999999997), which would refuse a job filling exactly the load.
    target = round(100 * load) * n_gpus
    jobs: list[Job] = []
    used, extra = 0, 0
    while extra < 3:
        i = int(rng.integers(len(sizes)))
        if 100 * (used + int(sizes[i])) > target:
            if load < 1:
                break
            extra += 1
        used += int(sizes[i])
        jobs.append(Job(f"j{len(jobs)}", int(sizes[i]), CLASSES[classes[i]]))
    return jobs


def make_instance(family: Family, seed: int) -> Instance:
    """The instance of ``family`` for ``seed`` (deterministic; a non-negative integer).

    Parameters
    ----------
    family : Family
        The cluster shape, load and slowdown profile.
    seed : int
        Which instance of the family; the same family and seed always give the same instance.

    Returns
    -------
    Instance
        A cluster of ``family.shape`` (see :func:`palopt.topology.build_cluster`), the four
        :data:`CLASSES`, slowdowns from :func:`sample_slowdowns`, the :data:`PENALTIES` of the
        cluster's tiers, and a queue from :func:`sample_jobs`.

    Raises
    ------
    InputError
        If ``seed`` is not a non-negative integer.

    Examples
    --------
    >>> inst = make_instance(Family(64, 4, 0.5, "synthetic"), seed=0)
    >>> inst.topology.n_gpus, inst.topology.tiers, inst.penalty[0].tolist()
    (64, ('server', 'rack', 'cluster'), [1.0, 1.7, 2.0])
    >>> make_instance(Family(64, 4, 0.5, "synthetic"), seed=0).queue == inst.queue
    True
    """
    check_seed(seed)
    rng = np.random.default_rng(
        [
            family.n_gpus,
            family.gpus_per_server,
            round(100 * family.load),
            PROFILES.index(family.profile),
            seed,
        ]
    )
    topo = build_cluster(*family.shape)
    pen = {t: PENALTIES[t] for t in topo.tiers if t in PENALTIES}
    return Instance(
        topo,
        CLASSES,
        sample_slowdowns(topo, family.profile, rng),
        penalty_matrix(topo, CLASSES, pen),
        tuple(sample_jobs(topo.n_gpus, family.load, rng)),
    )
