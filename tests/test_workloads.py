"""Workload model files (``palopt.workloads/1``): the shipped file, and bad files named by field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from palopt.errors import InputError
from palopt.workloads import ARTIFACT_WORKLOADS, load_workloads


def test_the_artifact_models_load() -> None:
    w = load_workloads()
    assert w.classes == ("classA", "classB", "classC", "classD")
    assert {m.job_class for m in w.models.values()} <= set(w.classes)
    assert w.get("GPT2").base_iter_time == pytest.approx(3.5714)


def _edit(path: str, value: Any) -> dict[str, Any]:
    data = json.loads(ARTIFACT_WORKLOADS.read_text(encoding="utf-8"))
    *parents, last = path.split("/")
    node = data
    for key in parents:
        node = node[key]
    node[last] = value
    return data


@pytest.mark.parametrize(
    "path, value, field",
    [
        ("format", "palopt.workloads/2", "format"),
        ("classes", [], "classes"),
        ("models", {}, "models"),
        ("models/BERT/class", "classZ", "models.BERT.class"),
        ("models/BERT/base_iter_time", 0, "models.BERT.base_iter_time"),
        ("models/BERT/penalties", "high", "models.BERT.penalties"),
        ("models/BERT/penalty", 2.0, "models.BERT.penalty"),
        # Accepted without a word before: a NaN or negative penalty, a tier's penalty that is
        # not a number, a profile that is not a text, a class listed twice.
        ("models/BERT/penalties", float("nan"), "models.BERT.penalties"),
        ("models/BERT/penalties", -3, "models.BERT.penalties"),
        ("models/BERT/penalties", {"rack": "high"}, "models.BERT.penalties.rack"),
        ("models/BERT/penalties", {"rack": 1e13}, "models.BERT.penalties.rack"),
        ("models/BERT/profile", None, "models.BERT.profile"),
        ("classes", ["classA", "classB", "classC", "classD", "classA"], "classes"),
        ("model", {}, "model"),
    ],
)
def test_bad_files_name_the_field(tmp_path: Path, path: str, value: Any, field: str) -> None:
    bad = tmp_path / "w.json"
    bad.write_text(json.dumps(_edit(path, value)), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_workloads(bad)
    assert err.value.field == f"{bad}: {field}", str(err.value)
