"""The solver registry and the public API at its edges: unknown solvers and options refused by
name with what exists, custom solvers registered and listed, ``NAME:BACKEND`` names, the result
a solver assembles with :func:`build_result`, and what ``import palopt`` exports (from a
mutation audit of ``palopt.solvers.base``, ``palopt.errors`` and ``palopt/__init__.py``)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from helpers import assert_feasible_positions

import palopt
from palopt import InputError, Instance, Job, UnknownSolverError, build_cluster, job_cost
from palopt.solvers import base


def _instance(*jobs: Job) -> Instance:
    return Instance(
        build_cluster(1, 2, 4), ("A",), np.ones((1, 8)), np.array([[1.0, 1.7, 2.0]]), jobs
    )


class _Packed:
    """A custom solver: packed-sticky under another name, recording the options it was made with."""

    def __init__(self, **options: object) -> None:
        self.name = "mine"
        self.options = options

    def solve(self, instance, *, time_limit=None, seed=None):
        return palopt.solve(instance, "packed-sticky", seed=seed)


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, base.SolverInfo]:
    """A copy of the loaded registry, restored after the test (custom solvers go in it)."""
    copy = dict(base._load())
    monkeypatch.setattr(base, "_REGISTRY", copy)
    return copy


def test_an_unknown_solver_is_named_with_the_valid_ones_sorted():
    """A misspelt solver (names are case-sensitive) is named and every registered one listed."""
    with pytest.raises(UnknownSolverError) as info:
        palopt.get_solver("PAL")
    names = sorted(s.name for s in palopt.list_solvers(available_only=False))
    assert str(info.value) == f"unknown solver 'PAL'; valid solvers: {', '.join(names)}"


def test_a_custom_solver_without_declared_options_gets_them_all(registry):
    """A factory that checks its own options is passed every option given to get_solver."""
    base.register("mine", _Packed, "Packed, by another name")
    solver = palopt.get_solver("mine", depth=3, colour="red")
    assert solver.options == {"depth": 3, "colour": "red"}
    inst = _instance(Job("a", 2, "A"))
    result = palopt.solve(inst, "mine")
    palopt.assert_feasible(inst, result)
    assert result.n_placed == 1


def test_a_custom_solver_declaring_no_options_refuses_any(registry):
    """options=() means none: an option is refused naming the solver, and a seed is pointed to
    solve's seed argument."""
    base.register("mine", _Packed, "Packed, by another name", options=())
    with pytest.raises(InputError, match=r"^mine.depth = 3: unknown option; its options: none$"):
        palopt.get_solver("mine", depth=3)
    with pytest.raises(InputError, match="mine.seed = 1: .*; a seed goes to solve"):
        palopt.get_solver("mine", seed=1)


def test_registering_a_name_again_replaces_the_solver(registry):
    """The documented rule for a duplicate name: the last registration wins, listed once."""
    base.register("mine", dict, "first")
    base.register("mine", _Packed, "second")
    assert [s.description for s in palopt.list_solvers() if s.name == "mine"] == ["second"]
    assert isinstance(palopt.get_solver("mine"), _Packed)


def test_solvers_are_listed_sorted_by_name(registry):
    """list_solvers is in name order whatever the order of registration."""
    base.register("zz-last", _Packed, "registered first")
    base.register("0-first", _Packed, "registered last")
    names = [s.name for s in palopt.list_solvers()]
    assert names == sorted(names) and names[0] == "0-first" and names[-1] == "zz-last"


def test_a_solver_missing_its_modules_is_refused_naming_them(registry):
    """get_solver says which module is missing (and how to install it) instead of failing
    inside the solver; list_solvers shows it only when asked for all."""
    base.register("needy", _Packed, "Needs a module", requires=("palopt_no_such_module",))
    with pytest.raises(ImportError, match="solver 'needy' needs palopt_no_such_module: pip"):
        palopt.get_solver("needy")
    assert "needy" not in [s.name for s in palopt.list_solvers()]
    assert "needy" in [s.name for s in palopt.list_solvers(available_only=False)]


def test_an_empty_backend_after_the_colon_is_refused_as_given():
    """``milp:`` names the empty back end (refused), not the default one."""
    pytest.importorskip("pulp")
    with pytest.raises(InputError, match="milp.backend = '': must be one of"):
        palopt.get_solver("milp:")


def test_a_backend_given_twice_must_agree():
    """``milp:highs`` with backend="cbc" is refused naming both; the same one twice is fine."""
    pytest.importorskip("pulp")
    with pytest.raises(InputError, match="backend = 'cbc': differs from the 'highs' in milp:highs"):
        palopt.get_solver("milp:highs", backend="cbc")
    assert palopt.get_solver("milp:highs", backend="highs").backend == "highs"
    assert type(palopt.get_solver("milp:highs", backend=np.array("highs")).backend) is str


def test_an_array_given_with_a_backend_in_the_name_is_refused_by_name():
    """Was numpy's "truth value of an array is ambiguous" from comparing it with the name's."""
    with pytest.raises(InputError, match=r"milp.backend = \['a', 'b'\]: expected one value"):
        palopt.get_solver("milp:highs", backend=np.array(["a", "b"]))


@pytest.mark.parametrize(
    ("name", "key", "value"), [("pal", "variant", "fixed"), ("greedy", "mode", "prefix")]
)
def test_an_option_given_as_a_0_d_array_is_its_value(name, key, value):
    """A 0-d numpy array is one value: used as its Python value, so the result saves as JSON
    (it was kept as an array, and json.dumps of the result's settings failed)."""
    inst = _instance(Job("a", 2, "A"))
    result = palopt.solve(inst, name, **{key: np.array(value)})
    palopt.assert_feasible(inst, result)
    assert result.settings[key] == value and type(result.settings[key]) is str
    assert json.loads(json.dumps(result.to_dict(inst)))["settings"][key] == value


def test_solve_uses_pal_by_default():
    """solve(instance) without a solver name is PAL's placement."""
    inst = _instance(Job("a", 2, "A"), Job("b", 4, "A"))
    result = palopt.solve(inst)
    assert result.solver == "pal"
    assert result.assignment() == palopt.solve(inst, "pal").assignment()
    palopt.assert_feasible(inst, result)


def test_build_result_records_sticky_actions_weighted_costs_and_the_bound():
    """Running jobs kept (in any GPU order), moved or preempted, new jobs started or waiting;
    each placed job's cost as job_cost says, the objective weighted, the bound passed on."""
    inst = _instance(
        Job("keep", 2, "A", 2.0, current_gpus=(1, 0)),
        Job("move", 1, "A", current_gpus=(2,)),
        Job("stop", 1, "A", current_gpus=(3,)),
        Job("new", 2, "A", 3.0),
        Job("wait", 4, "A"),
    )
    chosen = {0: np.array([1, 0]), 1: np.array([4]), 3: np.array([6, 5])}
    assert_feasible_positions(inst, chosen)
    r = base.build_result(inst, "mine", chosen, {4: "no room"}, time.perf_counter(), bound=1.5)
    assert [(p.job_id, p.gpus, p.action, p.reason) for p in r.placements] == [
        ("keep", (0, 1), "keep", None),
        ("move", (4,), "migrate", None),
        ("stop", (), "preempt", "not placed"),
        ("new", (5, 6), "start", None),
        ("wait", (), "wait", "no room"),
    ]
    costs = [job_cost(inst, inst.queue[i], g).cost for i, g in chosen.items()]
    assert [p.cost for p in r.placements if p.gpus] == costs
    assert r.objective == pytest.approx(2.0 * costs[0] + costs[1] + 3.0 * costs[2])
    assert (r.n_placed, r.bound, r.solver, r.status) == (3, 1.5, "mine", "heuristic")


def test_import_palopt_exports_its_whole_public_api():
    """``from palopt import *`` gives every public name the package defines, nothing missing."""
    public = {
        n for n, v in vars(palopt).items() if not n.startswith("_") and type(v).__name__ != "module"
    }
    assert set(palopt.__all__) == public
    assert len(palopt.__all__) == len(set(palopt.__all__))
