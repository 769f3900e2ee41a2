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


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "path, value, field",
    [
        # an AttributeError traceback / a TypeError in check_fields / a class that is no name
        ("models/BERT", 3, "models.BERT"),
        ("models/BERT", [], "models.BERT"),
        ("classes", ["classA", 2], "classes"),
    ],
)
def test_bad_parts_name_the_field(tmp_path: Path, path: str, value: Any, field: str) -> None:
    bad = _write(tmp_path, _edit(path, value))
    with pytest.raises(InputError) as err:
        load_workloads(bad)
    assert err.value.field == f"{bad}: {field}", str(err.value)


def test_a_file_that_is_not_an_object_is_named(tmp_path: Path) -> None:
    bad = _write(tmp_path, ["palopt.workloads/1"])
    with pytest.raises(InputError, match="format = .*expected 'palopt.workloads/1'") as err:
        load_workloads(bad)
    assert err.value.field == f"{bad}: format"


def test_optional_fields_and_the_order_written_are_kept(tmp_path: Path) -> None:
    data = {
        "format": "palopt.workloads/1",
        "source": "my lab",
        "classes": ["slow", "fast"],
        "models": {
            "a": {"class": "slow", "base_iter_time": 0.5},
            "b": {
                "class": "fast",
                "base_iter_time": 2,
                "penalties": {"server": 1e-12, "rack": 1e12},
                "profile": "bench",
            },
        },
    }
    w = load_workloads(_write(tmp_path, data))
    assert (w.classes, w.source) == (("slow", "fast"), "my lab")
    a, b = w.get("a"), w.get("b")
    assert (a.job_class, a.base_iter_time, a.penalties, a.profile) == ("slow", 0.5, 1.0, "")
    assert (b.penalties, b.profile) == ({"server": 1e-12, "rack": 1e12}, "bench")


def test_an_unknown_model_lists_the_known_ones_sorted() -> None:
    with pytest.raises(InputError) as err:
        load_workloads().get("resnet18")
    assert str(err.value) == (
        "model = 'resnet18': unknown model; known: BERT, DCGAN, GPT2, PointNet, resnet50, vgg19"
    )


@pytest.mark.parametrize("value", ["high", [1.5, 2.0]])
def test_penalties_neither_a_number_nor_a_mapping_say_both_forms(
    tmp_path: Path, value: Any
) -> None:
    """A penalties value of the wrong type says a number or a tier mapping is expected."""
    bad = _write(tmp_path, _edit("models/BERT/penalties", value))
    with pytest.raises(InputError, match=r"expected a number or \{tier: penalty\}$") as err:
        load_workloads(bad)
    assert err.value.field == f"{bad}: models.BERT.penalties"
