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
        ("model", {}, "model"),
    ],
)
def test_bad_files_name_the_field(tmp_path: Path, path: str, value: Any, field: str) -> None:
    bad = tmp_path / "w.json"
    bad.write_text(json.dumps(_edit(path, value)), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_workloads(bad)
    assert err.value.field == f"{bad}: {field}", str(err.value)
