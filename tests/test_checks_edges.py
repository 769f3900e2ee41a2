"""The shared input checks (palopt.errors) at their edges: bools, numpy scalars, NaN, infinity,
negative zero and the limits themselves; and the errors' messages and pickling."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest

import palopt
from palopt import InputError, Instance, Job, build_cluster
from palopt.errors import (
    check_count,
    check_fields,
    check_flag,
    check_number,
    check_seed,
    refuse_differing,
)
from palopt.sim import SimConfig


@pytest.mark.parametrize("value", [0, -1, True, False, 2.0, np.bool_(True), "2", None])
def test_a_count_is_a_positive_integer_and_no_bool(value):
    """Zero, a bool (True == 1) or a float is refused, naming the field and value."""
    with pytest.raises(InputError, match=rf"^workers = {value!r}: must be a positive integer$"):
        check_count(value, "workers")


def test_counts_and_seeds_from_numpy_are_python_ints():
    """A numpy integer is accepted and handed on as an int (so it saves as JSON)."""
    for got in (check_count(np.int64(2), "workers"), check_seed(np.uint8(3))):
        assert type(got) is int
    inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)), ())
    result = palopt.solve(inst, "random-sticky", seed=np.int64(5))
    palopt.assert_feasible(inst, result)
    assert type(result.settings["seed"]) is int
    assert json.loads(json.dumps(result.to_dict(inst)))["settings"]["seed"] == 5


@pytest.mark.parametrize("value", [1, 0, np.int64(1), 1.0, "true", None])
def test_a_flag_is_a_bool_not_one_or_zero(value):
    """1 and 0 are not flags (nor "true"): only True and False are."""
    with pytest.raises(InputError, match=r"^keep_running = .*: must be true or false$"):
        check_flag(value, "keep_running")
    assert check_flag(False, "keep_running") is False


def test_a_number_may_be_its_upper_limit_and_the_message_says_so():
    """``high`` is allowed; above it the message gives both limits."""
    assert check_number(5, "round", high=5) == 5.0
    with pytest.raises(InputError, match=r"^round = 5\.5: must be a finite number > 0 and <= 5$"):
        check_number(5.5, "round", high=5)
    with pytest.raises(InputError, match=r"^gap = -1: must be a finite number >= 0$"):
        check_number(-1, "gap", inclusive=True)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, 10**400])
def test_a_number_is_finite_and_no_bool(value):
    """NaN, infinities, a bool and an int beyond any float are refused, not compared."""
    with pytest.raises(InputError, match="must be a finite number"):
        check_number(value, "scale", inclusive=True, high=10)


def test_negative_zero_is_zero_to_the_limits():
    """-0.0 is at the limit 0: allowed where 0 is (and returned as 0.0, so settings do not show
    "-0.0"), refused where 0 is (time limits, counts)."""
    assert math.copysign(1.0, check_number(-0.0, "gap", inclusive=True)) == 1.0
    with pytest.raises(InputError, match="gap = -0.0: must be a finite number > 0"):
        check_number(-0.0, "gap")
    with pytest.raises(InputError, match="time_limit = -0.0"):
        palopt.get_solver("greedy").solve(
            Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)), ()),
            time_limit=-0.0,
        )


def test_the_first_unknown_field_in_sorted_order_is_named():
    """With several misspelt fields the message names the same one on every run."""
    with pytest.raises(InputError, match=r"^queue\[0\]\.a = 1: unknown field; known: id$"):
        check_fields({"z": 2, "id": "x", "b": 3, "a": 1}, ("id",), "queue[0].")


def test_a_value_given_twice_is_refused_only_when_the_two_differ():
    """Equal numbers of other types agree (2 and 2.0); a value not given never conflicts."""
    refuse_differing("--time-limit", 2.0, {"time_limit": 2}, "time_limit", "-o")
    refuse_differing("--time-limit", None, {"time_limit": 2}, "time_limit", "-o")
    with pytest.raises(InputError, match="^--time-limit = 2.0: -o time_limit=3 differs$"):
        refuse_differing("--time-limit", 2.0, {"time_limit": 3}, "time_limit", "-o")


def test_a_long_value_is_cut_to_80_characters_in_the_message():
    """The message stays one readable line: a value's repr over 80 characters is cut in the
    middle, so that a long path keeps its file name."""
    shown = str(InputError("f", "x" * 79, "bad")).removeprefix("f = ").removesuffix(": bad")
    assert shown == repr("x" * 79)[:38] + "..." + repr("x" * 79)[-39:] and len(shown) == 80
    path = "/home/someone/" + "deep/" * 20 + "results.csv"
    assert str(InputError("--out", path, "bad")).endswith("/deep/deep/results.csv': bad")
    exact = "y" * 78  # its repr is 80 characters: shown whole
    assert str(InputError("f", exact, "bad")) == f"f = {exact!r}: bad"


def test_an_input_error_survives_pickling_whole():
    """A sweep's worker sends errors back pickled: field, value, problem and message kept."""
    err = InputError("queue[0].num_gpus", [1, 2], "must be a positive integer")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is InputError
    assert (back.field, back.value, back.problem, str(back)) == (
        err.field,
        err.value,
        err.problem,
        str(err),
    )


def test_a_job_with_a_bool_gpu_count_is_refused():
    """True is not one GPU: the instance refuses the job naming its num_gpus."""
    with pytest.raises(InputError, match=r"queue\[0\]\.num_gpus = True: must be a positive"):
        Instance(
            build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)), (Job("a", True, "A"),)
        )


def test_a_seed_or_time_limit_is_named_as_the_caller_named_it():
    """The message names the option given (greedy.time_limit, extra_seed), not a generic one."""
    with pytest.raises(InputError, match=r"^greedy\.time_limit = 0: must be a positive, finite"):
        palopt.get_solver("greedy", time_limit=0)
    with pytest.raises(InputError, match=r"^extra_seed = -1: must be a non-negative integer$"):
        SimConfig(extra_seed=-1)
