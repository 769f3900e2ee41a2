"""The shipped instances: valid, solvable feasibly by every solver, reproducible by their script."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from palopt.cli import main
from palopt.cost import assert_feasible
from palopt.io import load_instance
from palopt.solvers import get_solver, list_solvers
from palopt.solvers.round import admitted_prefix

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = sorted((ROOT / "instances").glob("*.json"))


def test_instances_shipped_with_licence() -> None:
    names = {p.name for p in INSTANCES}
    assert {"longhorn-32gpu.json", "longhorn-256gpu.json"} <= names
    assert (ROOT / "instances" / "LICENSE-pal-artifact.txt").is_file()
    assert "MIT" in (ROOT / "instances" / "LICENSE-pal-artifact.txt").read_text()


@pytest.mark.parametrize("path", INSTANCES, ids=lambda p: p.name)
@pytest.mark.parametrize("solver", [s.name for s in list_solvers()])
def test_every_solver_places_feasibly(path: Path, solver: str) -> None:
    instance = load_instance(path)
    result = get_solver(solver).solve(instance, time_limit=10, seed=0)
    assert_feasible(instance, result)
    # every solver places the admitted prefix (12 of 16 jobs; 38 of 64)
    assert result.n_placed == admitted_prefix(instance)


def test_cli_solves_the_32gpu_instance(capsys) -> None:
    assert main(["solve", str(ROOT / "instances" / "longhorn-32gpu.json")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["solver"] == "pal" and result["n_jobs"] == 16 and result["n_placed"] == 12


def test_generator_reproduces_the_files(tmp_path: Path, artifact_dir: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "make_instances", ROOT / "bench" / "make_instances.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--data", str(artifact_dir), "--out", str(tmp_path)]) == 0
    for name in ("longhorn-32gpu.json", "longhorn-256gpu.json"):
        assert (tmp_path / name).read_bytes() == (ROOT / "instances" / name).read_bytes(), name
