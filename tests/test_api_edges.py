"""The Python API at the edges: numpy values, odd types and copies behave as the plain ones or
are refused with an InputError naming the field, never a raw exception or a silent change."""

from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pytest

import palopt
from palopt import InputError, Instance, Job, assert_feasible, build_cluster, check_feasible, solve
from palopt.io import instance_to_dict
from palopt.sim import SimConfig, Simulator
from palopt.sim.profile import ClusterProfile
from palopt.sim.trace import TraceJob

TOPO = build_cluster(2, 2, 4)  # 16 GPUs


def _instance(*jobs: Job, busy: object = ()) -> Instance:
    return Instance(TOPO, ("A",), np.ones((1, 16)), np.array([[1.0, 1.7, 2.0]]), jobs, busy)


def test_numpy_values_in_a_job_become_python_values():
    job = Job("r", np.int64(2), "A", weight=np.float32(0.5), current_gpus=np.array([4, 5]))
    assert job.current_gpus == (4, 5) and job.is_running
    assert type(job.num_gpus) is int and type(job.weight) is float
    assert all(type(g) is int for g in job.current_gpus)
    assert hash(job) == hash(Job("r", 2, "A", weight=0.5, current_gpus=(4, 5)))
    inst = _instance(job)
    sticky = solve(inst, "packed-sticky")
    assert_feasible(inst, sticky)
    assert sticky.placements[0].action == "keep"
    json.dumps(instance_to_dict(inst))
    greedy = solve(inst, "greedy")
    assert_feasible(inst, greedy)
    json.dumps(greedy.to_dict(inst))


def test_a_running_job_on_gpu_0_given_as_an_array_is_running():
    # np.array([0]) is falsy: the job looked waiting, and a busy or shared GPU 0 went unchecked.
    job = Job("r", 1, "A", current_gpus=np.array([0]))
    assert job.is_running
    with pytest.raises(InputError, match=r"queue\[0\].current_gpus = 'gpu0': marked busy"):
        _instance(job, busy=np.arange(16) == 0)
    with pytest.raises(InputError, match="current_gpus = 'gpu0': also held by job 'r'"):
        _instance(job, Job("s", 1, "A", current_gpus=[0]))


def test_a_job_keeps_the_gpus_it_was_given_when_the_list_changes():
    gpus = [0, 1]
    inst = _instance(Job("r", 2, "A", current_gpus=gpus))
    gpus[1] = 999
    assert inst.queue[0].current_gpus == (0, 1)
    result = solve(inst, "packed-sticky")
    assert_feasible(inst, result)
    assert result.placements[0].gpus == (0, 1)


@pytest.mark.parametrize(
    ("gpus", "message"),
    [(3, "expected GPU indices"), ("01", "expected GPU indices"), ((True, False), "GPU index")],
)
def test_current_gpus_that_are_not_indices_are_refused(gpus, message):
    with pytest.raises(InputError, match=message):
        _instance(Job("r", 2, "A", current_gpus=gpus))


def test_numpy_strings_are_names_and_masked_arrays_are_refused():
    # Ids read with numpy or pandas are numpy.str_; they were refused as "not a name".
    job = Job(np.str_("r"), 1, np.str_("A"))
    assert type(job.id) is str and type(job.job_class) is str
    inst = Instance(TOPO, (np.str_("A"),), np.ones((1, 16)), np.array([[1.0, 1.7, 2.0]]), (job,))
    assert type(inst.classes[0]) is str
    assert check_feasible(inst, solve(inst, "greedy")) == []
    # np.array drops a mask: the masked slowdown or busy entry used to count as a real value.
    masked = np.ma.masked_array(np.ones((1, 16)), mask=np.eye(1, 16, dtype=bool))
    with pytest.raises(InputError, match="slowdown = 'a masked array': fill the masked"):
        Instance(TOPO, ("A",), masked, np.array([[1.0, 1.7, 2.0]]), (job,))
    with pytest.raises(InputError, match="busy = 'a masked array'"):
        _instance(job, busy=np.ma.masked_array(np.zeros(16, dtype=bool)))


@pytest.mark.parametrize("busy", [["False"] * 16, [0.5] * 16, [2] * 16])
def test_a_busy_mask_is_booleans_or_0_and_1(busy):
    with pytest.raises(InputError, match="busy = .*expected a mask of booleans"):
        _instance(Job("a", 1, "A"), busy=busy)
    assert _instance(Job("a", 1, "A"), busy=[1] + [0] * 15).n_available == 15


@pytest.mark.parametrize(
    ("gpus", "problem"),
    [
        ([0.5, 1.7], "got 0.5, not a GPU index"),
        ("01", "not a list of GPU indices"),
        ([True, False], "got True, not a GPU index"),
        (None, "not a list of GPU indices"),
        (["gpu0", "gpu1"], "got 'gpu0', not a GPU index"),
    ],
)
def test_the_checker_refuses_what_is_not_a_gpu_index(gpus, problem):
    inst = _instance(Job("a", 2, "A"))
    problems = check_feasible(inst, {"a": gpus})
    assert len(problems) == 1 and problem in problems[0]
    assert check_feasible(inst, {"a": np.array([0, 1])}) == []
    with pytest.raises(InputError, match="assignment = 'list'"):
        check_feasible(inst, [("a", [0, 1])])  # type: ignore[arg-type]


def test_copies_of_an_instance_stay_read_only():
    inst = _instance(Job("a", 2, "A"))
    for other in (pickle.loads(pickle.dumps(inst)), copy.deepcopy(inst)):
        arrays = (other.slowdown, other.penalty, other.busy, other.topology.groups)
        assert not any(a.flags.writeable for a in arrays)
        with pytest.raises(ValueError, match="read-only"):
            other.slowdown[:] = -5
        copied, original = solve(other, "pal"), solve(inst, "pal")
        assert_feasible(other, copied)
        assert_feasible(inst, original)
        assert copied.objective == original.objective


def test_topology_lookups_check_their_indices():
    for gpus, message in (([-1, 0], "gpu = -1"), ([], "non-empty"), ([0.5], "non-empty")):
        with pytest.raises(InputError, match=message):
            TOPO.tier_of(gpus)
    for gpu in (-1, 16, 1.5, True):
        with pytest.raises(InputError):
            TOPO.server_of(gpu)  # type: ignore[arg-type]
    assert TOPO.tier_of(np.array([0, 4])) == "rack" and TOPO.server_of(np.int64(5)) == "server1"


def test_assign_profile_takes_a_flag_for_replace():
    p = palopt.VariabilityProfile(("A",), ("g0", "g1"), np.array([[1.0, 1.2]]))
    with pytest.raises(InputError, match="replace = 'no'"):
        palopt.assign_profile(p, build_cluster(1, 1, 2), seed=1, replace="no")  # type: ignore[arg-type]


@pytest.mark.parametrize("job_id", ["a\nb", "a\tb", "a\x00", "a\rb", "x\u2028y"])
def test_job_ids_are_printable_text(job_id):
    # A line break split the table and Slurm output; a NUL went into Slurm lines as it was.
    with pytest.raises(InputError, match=r"queue\[0\].id = .*must be printable text"):
        Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
                 (Job(job_id, 1, "A"),))  # fmt: skip
    assert Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
                    (Job("job 1 é", 1, "A"),)).queue[0].id == "job 1 é"  # fmt: skip


def _one_server(gpu: str = "g0", tier: str = "cluster") -> dict:
    nodes = [{"id": "sw", "kind": "switch", "tier": tier}, {"id": "s0", "kind": "server"},
             {"id": gpu, "kind": "gpu"}]  # fmt: skip
    edges = [{"source": "sw", "target": "s0", "link": "network"},
             {"source": "s0", "target": gpu, "link": "pcie"}]  # fmt: skip
    return {"directed": False, "multigraph": False, "graph": {}, "nodes": nodes, "edges": edges}


@pytest.mark.parametrize("name", ["", "g\n0", "g\t0", "g\x00"])
def test_node_tier_and_class_names_are_printable_text(name):
    # A GPU id with a line break split `validate`'s one-line message and the solve table; an
    # empty one printed as nothing. Node ids, tier names and class names are refused so.
    with pytest.raises(InputError, match=r"topology.nodes = .*a node id must be printable"):
        palopt.Topology.from_node_link(_one_server(gpu=name))
    with pytest.raises(InputError, match=r"topology.nodes\[sw\].tier = .*a tier name must be"):
        palopt.Topology.from_node_link(_one_server(tier=name))
    with pytest.raises(InputError, match=r"classes = .*a class name must be printable text"):
        Instance(build_cluster(1, 1, 2), ("A", name), np.ones((2, 2)), np.ones((2, 3)), ())
    topo = palopt.Topology.from_node_link(_one_server(gpu="GPU 0 é", tier="pod"))
    assert topo.gpu_ids == ("GPU 0 é",) and topo.tiers == ("server", "pod")


def _profile(n: int) -> ClusterProfile:
    ones = np.ones((1, n))
    return ClusterProfile(("classA",), ones, ones)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("base_iter_time", -1.0, r"trace\[0\].base_iter_time = -1.0"),
        ("iterations", 0.0, r"trace\[0\].duration = 0.0"),
        ("submit_time", -100.0, r"trace\[0\].submit_time = -100.0"),
        ("submit_time", float("nan"), r"trace\[0\].submit_time = nan"),
        ("num_gpus", "2", r"trace\[0\].num_gpus = '2'"),
        ("id", "a\nb", r"trace\[0\].job_id = 'a\\nb': must be printable text"),
    ],
)
def test_the_simulator_checks_trace_jobs_it_is_given(field, value, message):
    # A negative iteration time made Simulator.run() loop for ever.
    values = {
        "id": "a",
        "num_gpus": 1,
        "submit_time": 0.0,
        "iterations": 10.0,
        "model": "m",
        "job_class": "classA",
        "base_iter_time": 1.0,
    }
    values[field] = value
    with pytest.raises(InputError, match=message):
        Simulator(build_cluster(1, 1, 2), _profile(2), [TraceJob(**values)])


@pytest.mark.parametrize("name", ["seed", "extra_seed"])
def test_simulator_seeds_are_integers(name):
    with pytest.raises(InputError, match=f"{name} = None"):
        SimConfig(**{name: None})


PEN = np.array([[1.0, 1.7, 2.0]])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((None, ("A",), np.ones((1, 16)), PEN, ()), "topology = 'NoneType'"),
        ((TOPO, None, np.ones((1, 16)), PEN, ()), "classes = None"),
        ((TOPO, "A", np.ones((1, 16)), PEN, ()), "classes = 'A'"),
        ((TOPO, (1,), np.ones((1, 16)), PEN, ()), "classes = \\(1,\\)"),
        ((TOPO, ("A",), np.ones((1, 16)), PEN, None), "queue = 'NoneType'"),
        ((TOPO, ("A",), np.ones((1, 16)), PEN, Job("a", 1, "A")), "queue = 'Job'"),
        ((TOPO, ("A",), [[1.0] * 15 + [[1.0]]], PEN, ()), "slowdown = .*array of numbers"),
        ((TOPO, ("A",), np.ones((1, 16)) + 0j, PEN, ()), "slowdown = 'ndarray'"),
        ((TOPO, ("A",), np.full((1, 16), "1.5"), PEN, ()), "slowdown = 'ndarray'"),
        ((TOPO, ("A",), np.ones((1, 16)), {"rack": 1.7}, ()), "penalty = 'dict'"),
        ((TOPO, ("A",), np.ones((1, 16)), PEN, (Job("a", 1, "A", weight="1"),)), "weight = '1'"),
        ((TOPO, ("A",), np.ones((1, 16)), PEN, (Job("a", 1, ["A"]),)), "unknown class"),  # type: ignore[arg-type]
    ],
)
def test_instance_arguments_of_the_wrong_kind_are_named(args, message):
    with pytest.raises(InputError, match=message):
        Instance(*args)


def test_time_limits_without_a_float_are_refused():
    with pytest.raises(InputError, match="time_limit = 1000"):
        solve(_instance(Job("a", 1, "A")), "pal", time_limit=10**400)


@pytest.mark.parametrize(
    ("values", "options", "message"),
    [
        ([-1.0, -1.0, 1.0, 1.0], {"method": "artifact"}, "the artifact rule needs positive"),
        ([[1.0, 2.0], [3.0, 4.0]], {}, "expected a flat sequence"),
        (np.array([1 + 0j]), {}, "values = 'complex128'"),
        ([1.0, 1.1], {"k": True}, "k = True"),
        ([1.0, 1.1], {"k_max": True}, "k_max = True"),
        ([1.0, 1.1], {"tol": -1}, "tol = -1"),
    ],
)
def test_binning_refuses_what_it_cannot_bin(values, options, message):
    with pytest.raises(InputError, match=message):
        palopt.bin_values(values, **options)


def test_numbers_of_any_kind_build_clusters_and_penalties():
    assert build_cluster(np.int64(2), 2, 4, nvlink_island=np.int64(2)).n_gpus == 16
    for bad in ({"racks": True}, {"nvlink_island": True}):
        with pytest.raises(InputError, match="= True"):
            build_cluster(**{"racks": 2, "servers_per_rack": 2, "gpus_per_server": 4, **bad})
    pen = palopt.penalty_matrix(TOPO, ["A"], np.int64(2))
    assert pen.tolist() == [[1.0, 2.0, 2.0]]
    for classes in (None, 3, np.array(3), [1]):  # TypeError: object of type ... has no len()
        with pytest.raises(InputError, match="classes = .*: expected a list of class names"):
            palopt.penalty_matrix(TOPO, classes, 1.7)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="penalties.rack = '1.7': must be a number"):
        palopt.penalty_matrix(TOPO, ["A"], {"rack": "1.7"})
    for default, message in (  # a bad default was blamed on the first class that used it
        ("abc", "penalties.default = 'abc': expected a mapping"),
        ({"rack": 0.0}, "penalties.default.rack = 0.0: must be a finite number"),
    ):
        with pytest.raises(InputError, match=message):
            palopt.penalty_matrix(TOPO, ["A", "B"], {"A": {"rack": 1.7}, "default": default})


def test_loaders_name_a_path_that_is_not_one():
    for load in (palopt.load_instance, palopt.load_profile):
        with pytest.raises(InputError, match="path = 'NoneType': expected a file name"):
            load(None)  # type: ignore[arg-type]
        with pytest.raises(InputError, match="path = '': an empty file name"):
            load("")  # was "[Errno 21] Is a directory: '.'"
    with pytest.raises(InputError, match="path = '': an empty file name"):
        palopt.io.write_text("", "{}")


@pytest.mark.parametrize(
    ("args", "options", "message"),
    [
        ((None, _profile(2), []), {}, "topology = 'NoneType'"),
        ((build_cluster(1, 1, 2), np.ones((1, 2)), []), {}, "profile = 'ndarray'"),
        ((build_cluster(1, 1, 2), _profile(2), []), {"solver": None}, "solver = 'NoneType'"),
        ((build_cluster(1, 1, 2), _profile(2), []), {"policy": None}, "policy = 'NoneType'"),
        ((build_cluster(1, 1, 2), _profile(2), []), {"config": {"round_s": 60}}, "config = 'dict'"),
    ],
)
def test_the_simulator_names_arguments_of_the_wrong_kind(args, options, message):
    with pytest.raises(InputError, match=message):
        Simulator(*args, **options)


def test_profiles_take_names_and_a_known_binning(tmp_path):
    from palopt.sim import load_profile

    with pytest.raises(InputError, match="source = None"):
        palopt.VariabilityProfile(("A",), ("g0",), np.ones((1, 1)), source=None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="gpus = \\(0, 1\\): expected names"):
        palopt.VariabilityProfile(("A",), (0, 1), np.ones((1, 2)))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="binning = 'bogus'"):
        load_profile(tmp_path / "p.csv", build_cluster(1, 1, 2), binning="bogus")
    p = palopt.VariabilityProfile(("classA",), ("gpu0", "gpu1"), np.array([[1.0, 1.2]]))
    from palopt.variability import save_profile

    save_profile(p, tmp_path / "p.JSON")  # read as JSON whatever the suffix's case
    assert load_profile(tmp_path / "p.JSON", build_cluster(1, 1, 2)).classes == ("classA",)


def test_a_huge_python_int_weight_is_checked_as_its_float():
    # 10**20 is within the weights' range: np.log10 of a list holding it raised a TypeError
    inst = _instance(Job("a", 1, "A", weight=10**20))
    result = solve(inst, "pal")
    assert_feasible(inst, result)
    assert result.objective == pytest.approx(1e20)
    with pytest.raises(InputError, match=r"queue\[0\].weight = 1000.*finite positive number"):
        _instance(Job("a", 1, "A", weight=10**400))  # no float holds it


@pytest.mark.parametrize(
    "build, field",
    [
        (lambda: palopt.penalty_matrix(TOPO, ("A",), 10**400), "penalties = "),
        (lambda: palopt.penalty_matrix(TOPO, ("A",), {"rack": 10**400}), "penalties.rack"),
    ],
)
def test_integers_beyond_any_float_are_named(build, field):
    with pytest.raises(InputError, match=field):  # was OverflowError
        build()


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d["slowdown"].update(A=[10**400] * 16), "slowdown.A.gpu0"),
        (lambda d: d["queue"][0].update(weight=10**400), r"queue\[0\].weight"),
    ],
)
def test_integers_beyond_any_float_in_a_dict_are_named(edit, field):
    from palopt.io import instance_from_dict

    data = instance_to_dict(_instance(Job("a", 1, "A")))
    edit(data)
    with pytest.raises(InputError, match=field):
        instance_from_dict(data)


@pytest.mark.parametrize(
    "slowdown", [[["1.0"] * 16], [[True] * 16], np.full((1, 16), "1.0"), [[1.0] * 15 + [None]]]
)
def test_slowdowns_that_are_not_numbers_are_refused(slowdown):
    # strings were converted silently ("1.0" -> 1.0), where a string weight is refused
    with pytest.raises(InputError, match="slowdown = .*expected a .* array of numbers"):
        Instance(TOPO, ("A",), slowdown, np.array([[1.0, 1.7, 2.0]]), ())


def test_a_gpu_listed_twice_by_one_job_is_named_so():
    with pytest.raises(
        InputError, match="current_gpus = 'gpu1': listed twice"
    ):  # was "also held by job 'a'"
        _instance(Job("a", 2, "A", current_gpus=(1, 1)))


@pytest.mark.parametrize("name", [None, 3, palopt.get_solver("pal")])
def test_a_solver_name_that_is_not_a_string_is_refused(name):
    with pytest.raises(InputError, match="solver = .*must be a solver's name"):
        palopt.solve(_instance(Job("a", 1, "A")), name)


def test_milp_names_the_deterministic_value_it_refuses():
    pytest.importorskip("pulp")
    with pytest.raises(InputError, match="milp.deterministic = 'no': must be true or false"):
        palopt.get_solver("milp", deterministic="no")  # was reported as True


def test_evaluate_names_an_entry_that_is_not_a_gpu_list():
    inst = _instance(Job("a", 1, "A"))
    with pytest.raises(InputError, match=r"assignment\['a'\] = None"):  # was TypeError
        palopt.evaluate(inst, {"a": None})
    with pytest.raises(InputError, match=r"assignment\['a'\] = array\(3\)"):  # TypeError too
        palopt.evaluate(inst, {"a": np.array(3)})
    assert palopt.evaluate(inst, {"a": np.array([1])}).n_placed == 1


@pytest.mark.parametrize(
    ("name", "key"), [("pal", "variant"), ("greedy", "mode"), ("cpsat", "formulation")]
)
def test_an_array_of_option_values_is_refused_by_name(name, key):
    # "The truth value of an array ... is ambiguous" from inside the solver, or (greedy) a
    # one-element array taken as its value.
    with pytest.raises(InputError, match=rf"{name}.{key} = \['a', 'b'\]: expected one value"):
        palopt.get_solver(name, **{key: np.array(["a", "b"])})
    with pytest.raises(InputError, match="expected one value"):
        palopt.solve(_instance(Job("a", 1, "A")), name, **{key: np.array(["prefix"])})


def test_a_result_is_not_shown_with_another_instance():
    from palopt.export import slurm_allocations

    inst = _instance(Job("a", 2, "A"), Job("b", 1, "A"))
    result = solve(inst, "pal")
    assert_feasible(inst, result)
    other_queue = _instance(Job("x", 2, "A"), Job("b", 1, "A"))
    small = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)), inst.queue)
    shorter = _instance(Job("a", 2, "A"))
    for other, message in (
        (other_queue, r"instance.queue\[0\].id = 'x': the result is of another queue"),
        (small, "instance.topology = '2 GPUs'"),
        (shorter, "the result is of another queue"),
    ):
        for show in (result.to_dict, result.to_frame, lambda i: slurm_allocations(result, i)):
            with pytest.raises(InputError, match=message):  # was KeyError, IndexError
                show(other)
    longer = _instance(Job("a", 2, "A"), Job("b", 1, "A"), Job("c", 1, "A"))
    with pytest.raises(InputError, match="of a shorter queue"):
        result.to_dict(longer)


def test_a_multigraph_with_two_links_between_two_nodes_is_refused():
    import networkx as nx

    g = nx.MultiGraph()
    g.add_node("s", kind="server")
    for gpu in ("a", "b"):
        g.add_node(gpu, kind="gpu")
        g.add_edge("s", gpu, link="pcie")
    g.add_edge("a", "b", link="nvlink")
    assert palopt.Topology.from_graph(g).tiers == ("nvlink", "server")
    d = nx.DiGraph(nx.Graph(g))  # the same link both ways is one link
    assert palopt.Topology.from_graph(d).tiers == ("nvlink", "server")
    g.add_edge("a", "b", link="pcie")  # nx.Graph would keep this one only: no NVLink
    with pytest.raises(InputError, match="also linked by 'nvlink'"):
        palopt.Topology.from_graph(g)


def test_a_graph_with_numpy_attributes_saves_as_json(tmp_path):
    import networkx as nx

    g = nx.Graph()
    g.add_node("s", kind="server", memory=np.float32(80.0))
    for i in range(2):
        g.add_node(f"g{i}", kind="gpu", local=np.int64(1 - i))
        g.add_edge("s", f"g{i}", link="pcie")
    topo = palopt.Topology.from_graph(g)
    pen = np.ones((1, len(topo.tiers)))
    inst = Instance(topo, ("A",), np.ones((1, 2)), pen, (Job("a", 1, "A"),))
    palopt.save_instance(inst, tmp_path / "i.json")  # was TypeError: int64 not serializable
    back = palopt.load_instance(tmp_path / "i.json")
    assert back.topology.gpu_ids == topo.gpu_ids == ("g1", "g0")
    g.nodes["s"]["tags"] = {"fast"}
    with pytest.raises(InputError, match="tags = {'fast'}: a graph attribute JSON cannot hold"):
        palopt.Topology.from_graph(g).to_node_link()


def test_functions_taking_an_instance_refuse_anything_else():
    from palopt.io import instance_to_dict

    result = solve(_instance(Job("a", 1, "A")), "pal")
    for call in (
        lambda: check_feasible(None, {}),
        lambda: palopt.evaluate({}, {}),
        lambda: instance_to_dict({"queue": []}),
        lambda: result.to_dict(None),
        lambda: solve("instance.json"),
    ):
        with pytest.raises(InputError, match="instance = .*: must be a palopt.Instance"):
            call()  # was AttributeError


def test_the_gap_of_a_result():
    from palopt.result import PlacementResult

    def gap(objective, bound):
        return PlacementResult((), "cpsat", "optimal", objective, 0, 0.0, bound).gap

    assert gap(4.0, None) is None
    assert gap(4.0, 3.0) == 0.25  # of the objective, not of the bound
    assert gap(0.0, 0.0) == 0.0  # not a ZeroDivisionError
    assert gap(1.0, 1.0 + 1e-12) == 0.0  # a bound a rounding error above is no negative gap


def test_an_empty_queue_solved_exactly_has_a_gap_of_zero():
    inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)), ())
    for name in ("cpsat", "milp"):
        result = solve(inst, name, time_limit=5)
        assert_feasible(inst, result)
        data = result.to_dict(inst)
        assert (data["objective"], data["gap"], data["n_jobs"], data["jobs"]) == (0, 0.0, 0, [])


def test_to_dict_reports_every_field_of_the_result():
    topo = build_cluster(1, 2, 2)
    sd = np.array([[1.25, 1.0, 1.1, 1.0]])
    queue = (Job("a", 3, "A"), Job("b", 2, "A"))
    inst = Instance(topo, ("A",), sd, np.array([[1.0, 1.5, 2.0]]), queue)
    result = solve(inst, "cpsat", time_limit=5)
    assert_feasible(inst, result)
    data = result.to_dict(inst)
    assert data["jobs"][0] == {
        "job": "a",
        "action": "start",
        "gpus": ["gpu1", "gpu2", "gpu3"],
        "servers": ["server0", "server1"],  # sorted, each once
        "cost": pytest.approx(1.65),
        "slowdown": pytest.approx(1.1),
        "tier": "rack",
        "penalty": 1.5,
    }
    assert data["jobs"][1] == {"job": "b", "action": "wait", "reason": result.placements[1].reason}
    assert isinstance(data["jobs"][1]["reason"], str)
    assert data["objective"] == pytest.approx(1.65)
    assert data["bound"] == result.bound and data["bound"] is not None
    assert data["gap"] == result.gap == pytest.approx(0, abs=1e-9)
    assert (data["status"], data["n_placed"], data["n_jobs"]) == ("optimal", 1, 2)
    assert data["wall_time"] == result.wall_time > 0
    assert result.assignment() == {"a": (1, 2, 3)}  # the placed jobs only


@pytest.mark.parametrize("queue", [None, Job("a", 1, "A"), (j for j in [Job("a", 1, "A")])])
def test_replace_queue_refuses_what_the_instance_refuses(queue):
    # None and a single Job raised a TypeError; a generator passed here but not to Instance.
    with pytest.raises(InputError, match="queue = '(NoneType|Job|generator)': expected a sequence"):
        _instance().replace_queue(queue)
    assert _instance().replace_queue([Job("a", 1, "A")]).queue == (Job("a", 1, "A"),)


def test_penalty_matrix_names_a_topology_of_the_wrong_kind():
    with pytest.raises(InputError, match="topology = 'str': expected a Topology"):
        palopt.penalty_matrix("2x4", ["A"], 1.7)  # type: ignore[arg-type]
    assert palopt.penalty_matrix(TOPO, ["A", "B"], 1.7).shape == (2, 3)


def test_job_cost_names_an_instance_or_job_of_the_wrong_kind():
    inst = _instance(Job("a", 2, "A"))
    with pytest.raises(InputError, match="instance = 'NoneType': must be a palopt.Instance"):
        palopt.job_cost(None, inst.queue[0], [0, 1])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="job = 'a': must be a Job"):
        palopt.job_cost(inst, "a", [0, 1])  # type: ignore[arg-type]
    assert palopt.job_cost(inst, inst.queue[0], np.array([0, 4])).tier == "rack"


def test_a_job_on_a_0_d_array_or_a_mapping_of_gpus_is_refused_by_name():
    with pytest.raises(InputError, match=r"job 'a'.current_gpus = array\(3\): expected GPU"):
        Job("a", 1, "A", current_gpus=np.array(3))
    with pytest.raises(InputError, match=r"job 'a'.current_gpus = \{0: 1\}: expected GPU"):
        Job("a", 1, "A", current_gpus={0: 1})  # type: ignore[arg-type]
    for gpus in ({2, 3}, (g for g in (2, 3)), range(2, 4)):  # other iterables of indices
        assert Job("a", 2, "A", current_gpus=gpus).current_gpus == (2, 3)  # type: ignore[arg-type]


def test_profile_values_that_are_not_numbers_are_named():
    with pytest.raises(
        InputError, match=r"values = \[\[1.0\], \[1.0, 2.0\]\]: expected a \(1, 2\)"
    ):
        palopt.VariabilityProfile(("A",), ("g0", "g1"), [[1.0], [1.0, 2.0]])  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"values = \[\['x'\]\]: expected a \(1, 1\) array"):
        palopt.VariabilityProfile(("A",), ("g0",), [["x"]])  # type: ignore[arg-type]
    p = palopt.VariabilityProfile(("A",), ("g0",), np.ones((1, 1)))
    with pytest.raises(InputError, match="other = 'NoneType': expected a VariabilityProfile"):
        p.merge(None)  # type: ignore[arg-type]


def test_profile_functions_name_arguments_of_the_wrong_kind():
    topo = build_cluster(1, 1, 2)
    p = palopt.VariabilityProfile(("A",), topo.gpu_ids, np.array([[1.0, 1.2]]))
    with pytest.raises(InputError, match="topology = 'str': expected a Topology"):
        palopt.assign_profile(p, "1x2", seed=None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="profile = 'NoneType': expected a VariabilityProfile"):
        palopt.assign_profile(None, topo, seed=None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="profile = 'NoneType': expected a VariabilityProfile"):
        palopt.build_instance(None, topo, 1.7, [])  # type: ignore[arg-type]
    for queue in (None, Job("a", 1, "A")):
        with pytest.raises(InputError, match="queue = '(NoneType|Job)': expected a sequence"):
            palopt.build_instance(p, topo, 1.7, queue)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="kk = 2: unknown binning option; options: k, tol"):
        palopt.build_instance(p, topo, 1.7, [], kk=2)
    inst = palopt.build_instance(p, topo, 1.7, [Job("a", 1, "A")], k=1)
    assert inst.slowdown.tolist() == [[1.1, 1.1]]


def test_a_queue_on_a_full_cluster_is_told_how_many_gpus_are_free():
    # was "the jobs selected before it leave 0", with no job selected before it
    inst = _instance(Job("a", 1, "A"), busy=np.ones(16, dtype=bool))
    result = solve(inst, "greedy")
    assert_feasible(inst, result)
    assert result.placements[0].reason == "not selected: needs 1 GPU; free GPUs: 0"


def test_penalties_of_a_class_given_as_a_list_are_named_as_such():
    # was "penalties.A = 'A': unknown tier", read as a map of tiers
    with pytest.raises(InputError, match=r"pen.A = \[1.5\]: expected a mapping tier -> penalty"):
        palopt.penalty_matrix(TOPO, ["A"], {"A": [1.5]}, "pen")


def test_job_ids_with_spaces_are_shown_as_given():
    """A job id with leading or trailing spaces is a different id: the table and the JSON
    result show each id exactly as the queue holds it, so rows can be joined back to jobs."""
    queue = (Job(" a", 1, "A"), Job("a ", 1, "A"), Job("b c", 2, "A"))
    inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)), queue)
    result = solve(inst, "pal")
    assert_feasible(inst, result)
    ids = [" a", "a ", "b c"]
    assert list(result.to_frame(inst)["job"]) == ids
    assert [row["job"] for row in result.to_dict(inst)["jobs"]] == ids
