"""Instance validation, the JSON format, the schema, the cost model and the checker."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import palopt
from palopt import (
    InputError,
    Instance,
    Job,
    build_cluster,
    check_feasible,
    evaluate,
    job_cost,
    penalty_matrix,
    solve,
)
from palopt.io import instance_from_dict, instance_schema, instance_to_dict

SHIPPED = Path(__file__).resolve().parent.parent / "instances" / "longhorn-32gpu.json"


def small_instance(busy: tuple[int, ...] = ()) -> Instance:
    topo = build_cluster(2, 2, 2)
    sd = np.array(
        [[1.0, 1.1, 0.9, 1.2, 1.0, 1.3, 1.05, 1.0], [1.0, 1.0, 1.0, 1.0, 1.5, 1.5, 1.5, 1.5]]
    )
    pen = penalty_matrix(topo, ("A", "B"), {"A": {"rack": 1.5, "cluster": 2.0}, "B": {"rack": 1.2}})
    queue = (Job("a", 2, "A"), Job("b", 1, "B", weight=2.0, current_gpus=(3,)), Job("c", 4, "A"))
    return Instance(topo, ("A", "B"), sd, pen, queue, np.isin(np.arange(8), busy))


def as_dict() -> dict:
    return instance_to_dict(small_instance(), name="small")


def test_penalty_matrix_forms():
    topo = build_cluster(2, 2, 2)
    assert penalty_matrix(topo, ["A"], 1.7).tolist() == [[1.0, 1.7, 1.7]]
    assert penalty_matrix(topo, ["A"], {"rack": 1.2, "cluster": 1.5}).tolist() == [[1.0, 1.2, 1.5]]
    m = penalty_matrix(topo, ["A", "B"], {"default": {"rack": 2}, "B": {"server": 1.1}})
    assert m.tolist() == [[1.0, 2.0, 2.0], [1.1, 1.1, 1.1]]
    with pytest.raises(InputError, match="unknown tier"):
        penalty_matrix(topo, ["A"], {"A": {"pod": 2}})
    with pytest.raises(InputError, match="no penalties"):
        penalty_matrix(topo, ["A", "B"], {"A": {"rack": 2}})


def test_cost_parts_by_hand():
    inst = small_instance()
    a, b, _ = inst.queue
    assert job_cost(inst, a, [0, 1]).cost == pytest.approx(1.1)
    parts = job_cost(inst, a, [0, 2])
    assert (parts.slowdown, parts.tier, parts.penalty) == (1.0, "rack", 1.5)
    parts = job_cost(inst, a, [2, 5])
    assert parts.tier == "cluster" and parts.cost == pytest.approx(1.3 * 2.0)
    assert job_cost(inst, b, [4]).cost == pytest.approx(1.5)
    ev = evaluate(inst, {"a": [0, 1], "b": [4]})
    assert ev.placed == (True, True, False)
    assert ev.total_cost == pytest.approx(1.1 + 2 * 1.5)
    better = evaluate(inst, {"a": [0, 1], "b": [4], "c": [2, 3, 6, 7]})
    assert better.key < ev.key  # placing more of the queue wins over cost
    assert evaluate(inst, {"b": [4]}).key > evaluate(inst, {"a": [5, 7]}).key


@pytest.mark.parametrize(
    ("gpus", "message"),
    [
        ([], "expected a non-empty list of GPU indices"),
        ([0.5], "expected a non-empty list of GPU indices"),
        ([[0, 1]], "expected a non-empty list of GPU indices"),
        ([0, 8], "GPU indices are 0 to 7"),
        ([-1], "GPU indices are 0 to 7"),
    ],
)
def test_cost_of_a_bad_gpu_list_is_an_input_error(gpus, message):
    inst = small_instance()
    with pytest.raises(InputError, match=message):
        job_cost(inst, inst.queue[0], gpus)
    with pytest.raises(InputError, match="job 'a'.gpus"):
        evaluate(inst, {"a": [0, 99]})
    with pytest.raises(InputError, match="not a class of the instance"):
        job_cost(inst, Job("x", 1, "Z"), [0])


def test_checker_finds_every_violation():
    inst = small_instance().replace_queue(small_instance().queue)
    busy = Instance(
        inst.topology,
        inst.classes,
        inst.slowdown,
        inst.penalty,
        (Job("a", 2, "A"), Job("c", 2, "A")),
        busy=np.eye(1, 8, 7, dtype=bool)[0],
    )
    assert check_feasible(busy, {"a": [0, 1], "c": [2, 3]}) == []
    assert check_feasible(busy, {"a": [0, 1], "c": [], "x": []}) == []  # [] means not placed
    assert check_feasible(busy, {"a": [0, 0], "c": [0, 7], "zz": [1], "x": []}) == [
        "job 'a' got GPU gpu0 more than once",
        "GPU gpu0 given to both 'a' and 'c'",
        "job 'c' got busy GPU gpu7",
        "job 'zz' is not in the queue",
    ]
    assert check_feasible(busy, {"a": [0, 1, 2]}) == ["job 'a' needs 2 GPUs, got 3"]
    assert check_feasible(busy, {"a": np.array(0)}) == [  # has __len__, no length: a TypeError
        "job 'a' got array(0), not a list of GPU indices"
    ]
    assert check_feasible(busy, {"a": [99, 99, 1, 1]})[1] == (
        "job 'a' got GPU gpu1, index 99 more than once"
    )
    for g in (8, 99, -1):  # the topology has GPUs 0 to 7
        assert check_feasible(busy, {"a": [0, g]}) == [
            f"job 'a' got GPU index {g}, not in the topology"
        ]


def test_checker_holds_a_result_to_its_gpus():
    # A result is checked whole: one placement per queued job in queue order, the actions, the
    # costs and the count its GPUs give. A result placing "a" twice and dropping "b" passed
    # before (it was checked as a dict of job id -> GPUs).
    inst = small_instance()
    result = solve(inst, "pal")
    assert check_feasible(inst, result) == []
    a, b, c = result.placements
    assert b.action == "keep" and c.placed
    bad_cost = replace(c, cost=c.cost * (1 + 1e-7))  # the checker allows 1e-9 relative
    for broken, message in (
        (replace(result, placements=(a, a, c)), "not the queue's one by one in its order"),
        (replace(result, placements=(a, c, b)), "not the queue's one by one in its order"),
        (replace(result, placements=(a, replace(b, action="start"), c)), "call for 'keep'"),
        (replace(result, placements=(a, b, bad_cost)), f"job 'c': cost {bad_cost.cost}"),
        (replace(result, placements=(a, b, replace(c, tier="server"))), "on tier server"),
        (replace(result, n_placed=2), "n_placed 2, 3 jobs placed"),
        (replace(result, objective=result.objective * (1 + 1e-7)), "its placements cost"),
    ):
        assert any(message in problem for problem in check_feasible(inst, broken)), broken
    waiting = replace(b, gpus=(), action="preempt", cost=None, tier=None)
    unplaced = replace(result, placements=(a, waiting, c), n_placed=2)
    assert check_feasible(inst, unplaced) == [
        f"objective {result.objective}, its placements cost {result.objective - 2.0 * b.cost}"
    ]
    # The tolerances are relative, 1e-9, at any magnitude: a float rounding passes; a result
    # placing nothing must cost exactly 0.
    assert check_feasible(inst, replace(result, objective=result.objective * (1 + 1e-12))) == []
    none = tuple(replace(p, gpus=(), action="wait", cost=None, tier=None) for p in (a, c))
    nothing = replace(result, placements=(none[0], waiting, none[1]), n_placed=0)
    assert check_feasible(inst, replace(nothing, objective=0.0)) == []
    assert "its placements cost 0.0" in check_feasible(inst, replace(nothing, objective=1e-10))[0]
    tiny = Instance(inst.topology, inst.classes, inst.slowdown * 1e-3, inst.penalty, inst.queue)
    result = solve(tiny, "pal")
    assert check_feasible(tiny, result) == []
    first = result.placements[0]
    for broken in (
        replace(
            result,
            placements=(replace(first, cost=first.cost * (1 + 1e-7)), *result.placements[1:]),
        ),
        replace(result, objective=result.objective * (1 + 1e-7)),
    ):
        assert check_feasible(tiny, broken) != []


def test_checker_reads_gpu_sets_in_any_order():
    # A job keeps its GPUs whatever order its current GPUs and its placement list them in.
    inst = Instance(
        build_cluster(1, 2, 2),
        ("A",),
        np.ones((1, 4)),
        np.ones((1, 3)),
        (Job("k", 2, "A", current_gpus=(1, 0)), Job("m", 2, "A", current_gpus=(2, 3))),
    )
    result = solve(inst, "packed-sticky")
    assert [(p.gpus, p.action) for p in result.placements] == [((0, 1), "keep"), ((2, 3), "keep")]
    k, m = result.placements
    assert check_feasible(inst, result) == []
    assert check_feasible(inst, replace(result, placements=(k, replace(m, gpus=(3, 2))))) == []
    moved = replace(result, placements=(k, replace(m, action="migrate")))
    assert check_feasible(inst, moved) == ["job 'm': action 'migrate', its GPUs call for 'keep'"]
    placed = evaluate(inst, {"m": [3, 2]})
    assert (placed.placed, placed.n_placed, placed.total_cost) == ((False, True), 1, 1.0)
    with pytest.raises(InputError, match="assignment"):
        evaluate(inst, [("m", [3, 2])])


def test_json_round_trip_preserves_everything():
    inst = small_instance(busy=(5, 6))
    again = instance_from_dict(json.loads(json.dumps(instance_to_dict(inst))))
    assert again.queue == inst.queue and again.classes == inst.classes
    # busy GPUs were not written once: they came back free
    assert np.flatnonzero(again.busy).tolist() == [5, 6]
    assert np.array_equal(again.slowdown, inst.slowdown)
    assert np.array_equal(again.penalty, inst.penalty)
    assert again.topology.gpu_ids == inst.topology.gpu_ids
    from_json, result = solve(again, "pal"), solve(inst, "pal")
    assert check_feasible(again, from_json) == []
    assert check_feasible(inst, result) == []
    assert from_json.assignment() == result.assignment()


def test_a_save_and_a_load_keep_every_digit_of_slowdowns_and_penalties(tmp_path):
    """Slowdowns and penalties with many digits come back from a file exactly as saved (no
    rounding on the way out), so a solve of the loaded instance costs the same."""
    topo = build_cluster(2, 2, 2)
    rng = np.random.default_rng(11)
    sd = 1 + rng.random((2, 8)) / 3
    pen = penalty_matrix(
        topo,
        ("A", "B"),
        {"A": {"rack": 1.234567891234, "cluster": 2.0987654321}, "B": {"rack": 1.3333333}},
    )
    inst = Instance(topo, ("A", "B"), sd, pen, (Job("a", 2, "A"), Job("b", 3, "B")))
    palopt.save_instance(inst, tmp_path / "digits.json")
    again = palopt.load_instance(tmp_path / "digits.json")
    assert np.array_equal(again.slowdown, inst.slowdown)
    assert np.array_equal(again.penalty, inst.penalty)
    result, from_file = solve(inst, "pal"), solve(again, "pal")
    assert check_feasible(inst, result) == [] and check_feasible(again, from_file) == []
    assert from_file.objective == result.objective


def test_the_class_priority_order_survives_a_round_trip():
    """Classes are PAL's priority order, not a set: a file keeps them in the order given, even
    when that is not alphabetical."""
    inst = small_instance()
    reordered = Instance(
        inst.topology, ("B", "A"), inst.slowdown[::-1], inst.penalty[::-1], inst.queue
    )
    again = instance_from_dict(json.loads(json.dumps(instance_to_dict(reordered))))
    assert again.classes == ("B", "A")
    assert np.array_equal(again.slowdown, reordered.slowdown)
    assert np.array_equal(again.penalty, reordered.penalty)


def test_an_empty_job_id_is_named_with_its_value():
    """An empty job id is refused naming the job and showing the empty string it was given."""
    data = _bad("queue/0/id", "")
    with pytest.raises(InputError) as err:
        instance_from_dict(data)
    assert str(err.value) == "queue[0].id = '': must be a non-empty string"


def test_schema_accepts_written_instances_and_is_valid():
    schema = instance_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(as_dict(), schema)
    jsonschema.validate(
        {
            "format": "palopt.instance/1",
            "topology": {"shape": "2x4"},
            "classes": ["A"],
            "slowdown": {"A": [1.0] * 8},
            "penalties": 1.5,
            "queue": [{"id": "j", "num_gpus": 2, "class": "A"}],
        },
        schema,
    )


def _bad(path: str, value):
    data = as_dict()
    node = data
    keys = path.split("/")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    if value is KeyError:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


@pytest.mark.parametrize(
    "path, value, field",
    [
        ("format", "palopt.instance/2", "format"),
        ("queue/0/num_gpus", 0, "queue[0].num_gpus"),
        ("queue/0/num_gpus", 99, "queue[0].num_gpus"),
        ("queue/0/num_gpus", "2", "queue[0].num_gpus"),
        ("queue/1/id", "a", "queue[1].id"),
        ("queue/0/id", 1e308, "queue[0].id"),  # was the job "1000...0", 309 digits
        ("queue/0/id", True, "queue[0].id"),  # not the job "True"
        ("queue/0/class", "Z", "queue[0].class"),
        ("queue/0/colour", "red", "queue[0].colour"),
        ("queue/1/current_gpus", ["gpu99"], "queue[1].current_gpus"),
        ("queue/1/current_gpus", ["gpu0", "gpu1"], "queue[1].current_gpus"),
        ("queue/1/current_gpus", {"gpu3": 1}, "queue[1].current_gpus"),  # not its keys
        ("slowdown/A/gpu3", math.nan, "slowdown.A.gpu3"),
        ("slowdown/A/gpu3", -1.0, "slowdown.A.gpu3"),
        ("slowdown/A/gpu3", KeyError, "slowdown.A.gpu3"),
        ("slowdown/Q", {}, "slowdown.Q"),
        ("slowdown/A/gpu99", 1.0, "slowdown.A.gpu99"),
        ("penalties", "high", "penalties"),
        ("penalties", KeyError, "penalties"),
        ("busy", ["gpu3"], "queue[1].current_gpus"),
        ("busy", ["nope"], "busy"),
        ("busy", {"gpu0": True}, "busy"),
        ("classes", ["A", "A"], "classes"),
        ("classes", [], "classes"),
        ("queue", KeyError, "queue"),
        ("bussy", ["gpu3"], "bussy"),
        ("name", 7, "name"),
    ],
)
def test_bad_instances_name_field_and_value(path, value, field):
    with pytest.raises(InputError) as err:
        instance_from_dict(_bad(path, value))
    assert err.value.field.startswith(field), str(err.value)


def test_the_schema_rejects_what_the_loader_rejects():
    schema = instance_schema()
    for path, value in (
        ("bussy", ["gpu3"]),
        ("name", 7),
        ("queue/0/colour", "red"),
        ("topology/directed", True),
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(_bad(path, value), schema)


def _node(data: dict, kind: str) -> dict:
    return next(n for n in data["topology"]["nodes"] if n["kind"] == kind)


@pytest.mark.parametrize(
    "edit",
    [  # the schema passed these files (session 25's audit, 336 cases); the loader refuses them
        lambda d: d.update(topology={"shape": "0x4"}),
        lambda d: d.update(topology={"shape": "2x00"}),
        lambda d: d["slowdown"]["A"].__setitem__(0, 1e-13),
        lambda d: d["slowdown"]["B"].__setitem__(7, 1e13),
        lambda d: d.update(penalties=1e300),
        lambda d: d["penalties"]["A"].update(rack=1e13),
        lambda d: d.update(penalties={}),
        lambda d: _node(d, "gpu").update(tier="rack"),
        lambda d: _node(d, "server").update(tier="rack"),
        lambda d: _node(d, "server").update(local=0),
        lambda d: _node(d, "switch").update(local=0),
        lambda d: _node(d, "server").update(root=True),
        lambda d: _node(d, "switch").update(root="no"),
        lambda d: _node(d, "switch").update(tier="server"),
        lambda d: _node(d, "switch").update(tier=None),
        lambda d: d["topology"]["edges"][0].update(source=1),
        lambda d: d["topology"].update(nodes=[]),
        lambda d: d["queue"][0].update(id=""),
        lambda d: d["queue"][0].update(id="a\tb"),
        lambda d: d["queue"][0].update(id="a\n"),  # Python's $ matches before a final \n
        lambda d: d.update(topology={"shape": "2x4\n"}),
        lambda d: d["queue"][1].update(current_gpus=["gpu3", "gpu3"]),
        lambda d: _node(d, "gpu").update(local=65536),
        lambda d: d["queue"][0].update(num_gpus=0),
        lambda d: d.update(busy=["gpu0", "gpu0"]),
        lambda d: d.update(classes=[]),
        lambda d: d["queue"][0].update(weight=0),
    ],
)
def test_the_schema_refuses_what_the_loader_refuses(edit):
    data = as_dict()
    edit(data)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, instance_schema())
    with pytest.raises(InputError):
        instance_from_dict(data)


def test_the_schema_and_the_loader_read_node_link_edges_as_edges_or_links():
    schema = instance_schema()
    data = as_dict()
    assert "edges" in data["topology"]
    jsonschema.validate(data, schema)
    data["topology"]["links"] = data["topology"].pop("edges")
    jsonschema.validate(data, schema)
    assert instance_from_dict(data).topology.n_gpus == small_instance().topology.n_gpus
    del data["topology"]["links"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)
    with pytest.raises(InputError, match="expected an 'edges' list"):
        instance_from_dict(data)


def test_metadata_is_written_only_under_known_names():
    inst = small_instance()
    data = instance_to_dict(inst, name="n", source="s", licence="l", description="d")
    assert instance_from_dict(data).queue == inst.queue
    with pytest.raises(InputError, match="seed = 3: unknown field"):
        instance_to_dict(inst, seed=3)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="name = 3: expected a string"):
        instance_to_dict(inst, name=3)  # type: ignore[arg-type]


def test_disconnected_topology_rejected():
    data = as_dict()
    data["topology"] = copy.deepcopy(data["topology"])
    data["topology"]["edges"] = [
        e for e in data["topology"]["edges"] if {e["source"], e["target"]} != {"rack1", "cluster"}
    ]
    with pytest.raises(InputError, match="disconnected"):
        instance_from_dict(data)


def test_decreasing_penalty_rejected():
    topo = build_cluster(2, 2, 2)
    with pytest.raises(InputError, match="penalties.A.cluster"):
        Instance(topo, ("A",), np.ones((1, 8)), np.array([[1.0, 2.0, 1.5]]), ())


def test_files_round_trip_through_the_top_level_api(tmp_path):
    inst = small_instance(busy=(0, 7))
    palopt.save_instance(inst, tmp_path / "i.json", name="small")
    again = palopt.load_instance(tmp_path / "i.json")
    assert again.queue == inst.queue and np.array_equal(again.slowdown, inst.slowdown)
    assert np.array_equal(again.busy, inst.busy) and again.n_available == 6
    assert palopt.instance_from_dict(palopt.instance_to_dict(inst)).queue == inst.queue


def test_data_dir_is_beside_the_checkout_unless_palopt_data_names_one(monkeypatch, tmp_path):
    from palopt.io import data_dir

    beside = Path(palopt.__file__).resolve().parents[2] / "shared" / "data"
    monkeypatch.delenv("PALOPT_DATA", raising=False)
    assert data_dir() == beside
    monkeypatch.setenv("PALOPT_DATA", "")  # set but empty: not the current folder
    assert data_dir() == beside
    monkeypatch.setenv("PALOPT_DATA", str(tmp_path))
    assert data_dir() == tmp_path


def _paths(node, prefix=()):
    """Every path into the JSON form (its topology's first nodes and edges included)."""
    if prefix:
        yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node[:4]):
            yield from _paths(value, (*prefix, i))


PATHS = list(_paths(as_dict()))
NODE_IDS = [n["id"] for n in as_dict()["topology"]["nodes"]]
JUNK = [None, True, 0, -1, 2.5, math.nan, "", "x", [], {}, [None], {"a": 1}, *NODE_IDS]


def _set(data, path, value):
    node = data
    try:
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = copy.deepcopy(value)
    except (KeyError, IndexError, TypeError):
        pass  # an earlier edit replaced part of the path


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PATHS), st.sampled_from(JUNK)), min_size=1, max_size=3))
def test_malformed_instances_raise_only_input_errors(edits):
    data = as_dict()
    for path, value in edits:
        _set(data, path, value)
    try:
        instance_from_dict(data)
    except InputError:
        pass


def test_an_instances_descriptive_fields_survive_a_load_and_a_save(tmp_path):
    # load_instance dropped name, source, licence and description: a shipped instance saved
    # again lost its licence note
    from palopt.io import save_instance

    shipped = SHIPPED
    inst = palopt.load_instance(shipped)
    original = json.loads(shipped.read_text())
    assert inst.meta == {k: original[k] for k in ("name", "source", "licence", "description")}
    save_instance(inst, tmp_path / "again.json")
    again = json.loads((tmp_path / "again.json").read_text())
    assert all(again[k] == original[k] for k in inst.meta)
    assert instance_to_dict(inst, name="renamed")["name"] == "renamed"  # given ones win
    assert instance_to_dict(inst.replace_queue(()))["licence"] == original["licence"]
    bare = replace(inst, meta={})
    results = [solve(i, "greedy") for i in (bare, inst)]
    for i, r in zip((bare, inst), results, strict=True):
        assert check_feasible(i, r) == []
    assert results[0].assignment() == results[1].assignment()  # no solver reads it


@pytest.mark.parametrize(
    "meta, message",
    [
        ({"colour": "red"}, "meta.colour = 'red': unknown field"),
        ({"name": 3}, "meta.name = 3: expected a string"),
        (["name"], "meta = 'list': expected a mapping"),
    ],
)
def test_instance_meta_is_checked(meta, message):
    inst = palopt.load_instance(SHIPPED)
    with pytest.raises(InputError, match=message):
        replace(inst, meta=meta)


def test_a_missing_shared_file_names_where_it_was_looked_for(monkeypatch, tmp_path):
    from palopt.io import shared_path

    monkeypatch.setenv("PALOPT_DATA", str(tmp_path))
    (tmp_path / "pal-artifact").mkdir()
    assert shared_path("pal-artifact") == tmp_path / "pal-artifact"
    with pytest.raises(InputError, match=r"shared data = 'pal-artifact/x.csv': not found in /"):
        shared_path("pal-artifact/x.csv")
    monkeypatch.delenv("PALOPT_DATA")
    with pytest.raises(InputError, match=r"PALOPT_DATA is not set: \.\./shared/data beside"):
        shared_path("no-such-folder")
