"""Workload performance models: a model's class, speed and locality sensitivity."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from palopt.errors import InputError, check_fields, check_number, is_number
from palopt.instance import MAX_FACTOR, MIN_FACTOR
from palopt.io import read_json

__all__ = ["WorkloadModel", "Workloads", "load_workloads", "ARTIFACT_WORKLOADS"]

FORMAT = "palopt.workloads/1"
FIELDS = ("format", "name", "source", "classes", "models")
MODEL_FIELDS = ("class", "base_iter_time", "penalties", "profile")
#: The PAL artifact's models: ``models/pal-artifact.json`` of the checkout, installed with the
#: package (as ``palopt.models``).
ARTIFACT_WORKLOADS = Path(str(files("palopt.models") / "pal-artifact.json"))


@dataclass(frozen=True)
class WorkloadModel:
    """One model (application) of a trace.

    Attributes
    ----------
    name : str
    job_class : str
        Variability class whose slowdown profile the model follows.
    base_iter_time : float
        Seconds per iteration on a median GPU within one server.
    penalties : float or mapping
        Locality sensitivity as the source gives it (a number, or a mapping tier -> penalty),
        each a number from ``MIN_FACTOR`` to ``MAX_FACTOR`` as in
        :func:`palopt.penalty_matrix`. A record, not a measurement: the simulator charges
        ``SimConfig.penalties`` (per class).
    profile : str
        Where the class's profile comes from.
    """

    name: str
    job_class: str
    base_iter_time: float
    penalties: float | Mapping[str, float]
    profile: str = ""


@dataclass(frozen=True)
class Workloads:
    """A set of workload models and the classes they may name (distinct; their order is not
    a priority: the simulator takes PAL's class order from the profile)."""

    classes: tuple[str, ...]
    models: Mapping[str, WorkloadModel]
    source: str = ""

    def get(self, name: str, field_name: str = "model") -> WorkloadModel:
        """The model called ``name``.

        Raises
        ------
        InputError
            If there is no such model (the message lists the known ones).
        """
        try:
            return self.models[name]
        except KeyError:
            raise InputError(
                field_name, name, f"unknown model; known: {', '.join(sorted(self.models))}"
            ) from None


def load_workloads(path: str | Path = ARTIFACT_WORKLOADS) -> Workloads:
    """Read a workload file (``palopt.workloads/1``).

    Parameters
    ----------
    path : str or Path, default the PAL artifact's models (``models/pal-artifact.json``)

    Returns
    -------
    Workloads

    Raises
    ------
    InputError
        Naming the file and field for a malformed file.

    Examples
    --------
    >>> w = load_workloads()
    >>> w.get("resnet50").job_class, w.classes[0]
    ('classA', 'classA')
    """
    data = read_json(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(
            f"{path}: format",
            data.get("format") if isinstance(data, dict) else data,
            f"expected {FORMAT!r}",
        )
    check_fields(data, FIELDS, f"{path}: ")
    classes = data.get("classes")
    if not isinstance(classes, list) or not classes or not all(isinstance(c, str) for c in classes):
        raise InputError(f"{path}: classes", classes, "expected a non-empty list of class names")
    if len(set(classes)) < len(classes):
        raise InputError(f"{path}: classes", classes, "a class is listed twice")
    raw = data.get("models")
    if not isinstance(raw, dict) or not raw:
        raise InputError(f"{path}: models", raw, "expected a mapping model -> description")
    models = {}
    for name, spec in raw.items():
        where = f"{path}: models.{name}"
        if not isinstance(spec, dict):
            raise InputError(where, spec, "expected an object")
        check_fields(spec, MODEL_FIELDS, f"{where}.")
        cls = spec.get("class")
        if cls not in classes:
            raise InputError(f"{where}.class", cls, f"must be one of {', '.join(classes)}")
        t = check_number(spec.get("base_iter_time"), f"{where}.base_iter_time")
        pen = spec.get("penalties", 1.0)
        if not is_number(pen) and not isinstance(pen, dict):
            raise InputError(f"{where}.penalties", pen, "expected a number or {tier: penalty}")
        for tier, value in (pen if isinstance(pen, dict) else {"": pen}).items():
            field = f"{where}.penalties" + (f".{tier}" if tier else "")
            check_number(value, field, MIN_FACTOR, inclusive=True, high=MAX_FACTOR)
        profile = spec.get("profile", "")
        if not isinstance(profile, str):
            raise InputError(f"{where}.profile", profile, "expected a text")
        models[name] = WorkloadModel(name, str(cls), t, pen, profile)
    return Workloads(tuple(classes), models, str(data.get("source", "")))
