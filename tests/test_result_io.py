"""Results read back from their JSON form (palopt.result/1): round trips and refusals."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from palopt import (
    InputError,
    Instance,
    Job,
    JobPlacement,
    PlacementResult,
    assert_feasible,
    build_cluster,
    check_feasible,
    load_instance,
    load_result,
    solve,
)
from palopt.result import result_schema
from palopt.solvers import list_solvers

ROOT = Path(__file__).resolve().parent.parent

TOPO = build_cluster(2, 2, 4)  # 16 GPUs
SLOWDOWN = np.random.default_rng(5).choice([0.97, 1.0, 1.05, 1.3], size=(2, 16))
PENALTY = np.array([[1.0, 1.7, 2.0], [1.0, 1.5, 2.5]])
# running jobs (kept, moved or preempted), waiting ones, and more than fits
QUEUE = (
    Job("r1", 2, "A", current_gpus=(0, 1)),
    Job("w1", 4, "B", weight=2.0),
    Job("r2", 4, "B", current_gpus=(8, 9, 10, 11)),
    Job("w2", 1, "A"),
    Job("w3", 8, "A"),
    Job("w4", 2, "B"),
)
INST = Instance(TOPO, ("A", "B"), SLOWDOWN, PENALTY, QUEUE)


def _through_json(result: PlacementResult) -> PlacementResult:
    text = json.dumps(result.to_dict(INST), allow_nan=False)
    return PlacementResult.from_dict(json.loads(text), INST)


@pytest.mark.parametrize("name", [info.name for info in list_solvers()])
def test_every_solvers_result_reads_back_equal(name: str) -> None:
    modes = ("prefix", "choose") if name in ("cpsat", "milp", "greedy") else (None,)
    for mode in modes:
        options = {} if mode is None else {"mode": mode}
        result = solve(INST, name, time_limit=5, seed=3, **options)
        assert_feasible(INST, result)
        assert jsonschema.Draft202012Validator(result_schema()).is_valid(result.to_dict(INST))
        again = _through_json(result)
        assert again == result
        assert_feasible(INST, again)


def test_actions_of_running_jobs_and_reasons_survive_the_round_trip() -> None:
    result = solve(INST, "greedy", mode="choose")
    assert_feasible(INST, result)
    again = _through_json(result)
    assert [p.action for p in again.placements] == [p.action for p in result.placements]
    assert [p.reason for p in again.placements] == [p.reason for p in result.placements]
    assert again.settings == result.settings and again.wall_time == result.wall_time


def test_load_result_reads_what_solve_out_writes(tmp_path: Path) -> None:
    from palopt.cli import main
    from palopt.io import save_instance

    save_instance(INST, tmp_path / "inst.json")
    out = tmp_path / "r.json"
    assert main(["solve", str(tmp_path / "inst.json"), "--solver", "cpsat", "--out", str(out)]) == 0
    result = load_result(out, INST)
    assert_feasible(INST, result)
    assert result.status == "optimal" and result.gap == pytest.approx(0, abs=1e-9)


BASE = solve(INST, "greedy").to_dict(INST)
PLACED = next(i for i, j in enumerate(BASE["jobs"]) if "gpus" in j)
WAITING = next(i for i, j in enumerate(BASE["jobs"]) if "gpus" not in j)


def _edited(path: tuple, value: object) -> dict:
    """``BASE`` with the field at ``path`` set to ``value`` (deleted for ``KeyError``)."""
    data = copy.deepcopy(BASE)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    "path, value, message, schema_too",
    [
        (
            ("format",),
            "palopt.instance/1",
            "format = 'palopt.instance/1': expected 'palopt.result/1'",
            True,
        ),
        (("colour",), "red", "colour = 'red': unknown field", True),
        (("status",), "great", "status = 'great': must be one of optimal, feasible", True),
        (("solver",), KeyError, "solver = None: required field is missing", True),
        (("objective",), -1.0, "objective = -1.0: must be", True),
        (("objective",), "1", "objective = '1': expected int/float", True),
        (("bound",), float("inf"), "bound = inf: must be a finite number or null", False),
        (("n_placed",), -1, "n_placed = -1: must not be negative", True),
        (("wall_time",), -0.5, "wall_time = -0.5: must be", True),
        (("n_placed",), 1.5, "n_placed = 1.5: expected int", True),
        (("settings",), [], "settings = []: expected dict", True),
        (("jobs",), {}, "jobs = {}: expected list", True),
        (("n_jobs",), 99, "n_jobs = 99: the result lists 6 jobs", False),
        (("gap",), 0.5, "gap = 0.5: objective and bound give None", False),
        (("jobs", 0), "r1", "jobs[0] = 'r1': expected an object", True),
        (("jobs", PLACED, "action"), "fly", f"jobs[{PLACED}].action = 'fly': must be one of", True),
        (("jobs", PLACED, "gpus"), ["gpu99"], f"jobs[{PLACED}].gpus = 'gpu99': no GPU", False),
        (("jobs", PLACED, "gpus"), [], f"jobs[{PLACED}].gpus = []: empty", True),
        (
            ("jobs", PLACED, "servers"),
            ["nowhere"],
            f"jobs[{PLACED}].servers = ['nowhere']: not",
            False,
        ),
        (("jobs", PLACED, "tier"), "room", f"jobs[{PLACED}].tier = 'room': unknown tier", False),
        (("jobs", PLACED, "cost"), 0, f"jobs[{PLACED}].cost = 0: must be", True),
        (("jobs", PLACED, "slowdown"), KeyError, f"jobs[{PLACED}].slowdown = None: required", True),
        (("jobs", PLACED, "reason"), "x", f"jobs[{PLACED}].reason = 'x': unknown field", True),
        (("jobs", WAITING, "cost"), 1.0, f"jobs[{WAITING}].cost = 1.0: unknown field", True),
        (("jobs", WAITING, "reason"), 3, f"jobs[{WAITING}].reason = 3: expected a string", True),
        (
            ("jobs", 0, "job"),
            "zz",
            "instance.queue[0].id = 'r1': the result is of another queue",
            False,
        ),
    ],
)
def test_a_bad_field_is_named(path: tuple, value: object, message: str, schema_too: bool) -> None:
    data = _edited(path, value)
    with pytest.raises(InputError) as exc:
        PlacementResult.from_dict(data, INST)
    assert message in str(exc.value)
    # the schema holds what needs no instance (GPU ids, tiers, the queue) and no sum
    assert jsonschema.Draft202012Validator(result_schema()).is_valid(data) is not schema_too


def test_the_optional_fields_may_be_left_out() -> None:
    # The schema makes n_jobs and gap optional; a result with a bound and no gap was refused.
    result = solve(INST, "cpsat", time_limit=5)
    assert_feasible(INST, result)
    data = json.loads(json.dumps(result.to_dict(INST)))
    assert data["bound"] is not None and data["gap"] is not None
    for field in ("n_jobs", "gap"):
        left = {k: v for k, v in data.items() if k != field}
        assert jsonschema.Draft202012Validator(result_schema()).is_valid(left)
        assert PlacementResult.from_dict(left, INST).to_dict(INST) == data


def test_a_result_of_another_instance_is_refused() -> None:
    other = Instance(TOPO, ("A", "B"), SLOWDOWN, PENALTY, QUEUE[:3])
    with pytest.raises(InputError, match="the result is of a shorter queue|another queue"):
        PlacementResult.from_dict(BASE, other)
    with pytest.raises(InputError, match="result = 'list': expected a JSON object"):
        PlacementResult.from_dict([BASE], INST)


@pytest.mark.parametrize(
    "edit, problem",
    [
        # each read back fine (the reader checks the format), and the checker refuses it
        (lambda d: d["jobs"][PLACED].update(penalty=2.0), "penalty 2.0, its GPUs have"),
        (lambda d: d["jobs"][PLACED].update(slowdown=9.0), "slowdown 9.0 and penalty"),
        (lambda d: d.update(bound=d["objective"] + 1, gap=0.0), "not at or below the objective"),
        (lambda d: d.update(status="optimal"), "status 'optimal' without a bound"),
    ],
)
def test_the_checker_refuses_a_result_that_misstates_its_parts(edit, problem) -> None:
    data = copy.deepcopy(BASE)
    edit(data)
    result = PlacementResult.from_dict(data, INST)
    problems = check_feasible(INST, result)
    assert len(problems) == 1 and problem in problems[0]
    assert check_feasible(INST, PlacementResult.from_dict(BASE, INST)) == []


def test_a_gap_that_disagrees_with_objective_and_bound_is_refused() -> None:
    """A result file whose gap is a little off what its objective and bound give is refused,
    naming the gap (a hand-edited gap must not pass as the solver's)."""
    result = solve(INST, "cpsat", time_limit=5)
    assert_feasible(INST, result)
    assert result.bound is not None
    data = result.to_dict(INST)
    data["gap"] = result.gap + 1e-6
    with pytest.raises(InputError, match=r"^gap = .*: objective and bound give"):
        PlacementResult.from_dict(data, INST)


def test_gpus_listed_in_any_order_read_back_sorted() -> None:
    """A result file may list a job's GPUs in any order: it reads back as the same placement,
    with its GPUs sorted, as the solver made it."""
    result = solve(INST, "greedy")
    assert_feasible(INST, result)
    data = result.to_dict(INST)
    for row in data["jobs"]:
        if "gpus" in row:
            row["gpus"].reverse()
    again = PlacementResult.from_dict(data, INST)
    assert again == result
    assert all(list(p.gpus) == sorted(p.gpus) for p in again.placements)
    assert_feasible(INST, again)


@pytest.mark.parametrize("gpu", [-1, 16, 1.0, True])
def test_a_result_on_a_gpu_index_outside_the_topology_is_not_written(gpu: object) -> None:
    # Fault: only indices past the end were refused; -1 was written as the last GPU's id, and
    # read back a placement the checker had refused as one the checker accepts.
    placed = JobPlacement("w2", (gpu,), "start", 1.0, 1.0, "server", 1.0)  # type: ignore[arg-type]
    rows = [JobPlacement(j.id, (), "preempt" if j.is_running else "wait") for j in QUEUE]
    rows[3] = placed
    result = PlacementResult(tuple(rows), "mine", "heuristic", 1.0, 1, 0.0)
    assert check_feasible(INST, result)
    with pytest.raises(InputError, match=r"the result places job 'w2' on GPUs"):
        result.to_dict(INST)


def test_a_result_is_hashable_and_its_settings_read_only():
    # A frozen dataclass promises a hash; the settings dict made hash() raise TypeError, and
    # could be changed in place after the solve.
    inst = load_instance(ROOT / "instances" / "longhorn-32gpu.json")
    r = solve(inst, "random-nonsticky", seed=3)
    assert_feasible(inst, r)
    again = PlacementResult.from_dict(json.loads(json.dumps(r.to_dict(inst))), inst)
    assert again == r and hash(again) == hash(r) and len({r, again}) == 1
    assert pickle.loads(pickle.dumps(r)) == r
    with pytest.raises(TypeError, match="read-only"):
        r.settings["seed"] = 4
    assert r.settings["seed"] == 3
    listed = PlacementResult((), "x", "heuristic", 0.0, 0, 0.0, settings={"t": [1, 2]})
    assert hash(listed) == hash(PlacementResult((), "x", "heuristic", 0.0, 0, 0.0))
