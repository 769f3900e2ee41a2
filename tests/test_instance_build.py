"""`palopt instance build` and `palopt profile assign --topology`: the command-line path from a
cluster, a profile and a queue to an instance file."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from palopt import Job, build_cluster, get_solver, load_instance
from palopt.cli import main
from palopt.cost import assert_feasible
from palopt.errors import InputError
from palopt.topology import Topology
from palopt.variability import (
    VariabilityProfile,
    assign_profile,
    build_instance,
    load_profile,
    save_profile,
)

QUEUE = [
    {"id": "a", "num_gpus": 4, "class": "A"},
    {"id": "b", "num_gpus": 2, "class": "B", "current_gpus": ["gpu0", "gpu1"]},
    {"id": "c", "num_gpus": 1, "class": "A", "weight": 2.5},
]
PENALTIES = {"rack": 1.7, "cluster": 2.0}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A measured profile of 12 GPUs in two classes, a 2x2x2 topology file and a queue."""
    rng = np.random.default_rng(3)
    measured = VariabilityProfile(
        ("A", "B"),
        tuple(f"m{i}" for i in range(12)),
        rng.uniform(0.9, 1.3, (2, 12)),
        source="test measurements",
    )
    paths = {name: tmp_path / f"{name}.json" for name in ("measured", "topology", "queue")}
    save_profile(measured, paths["measured"])
    paths["topology"].write_text(json.dumps(build_cluster(2, 2, 2).to_node_link()))
    paths["queue"].write_text(json.dumps(QUEUE))
    return paths


def _build(files: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "instance",
        "build",
        "--profile",
        str(files["assigned"]),
        "--queue",
        str(files["queue"]),
        "--penalties",
        json.dumps(PENALTIES),
        "-o",
        str(out),
        *extra,
    ]


def test_profile_assign_takes_a_topology_file_as_it_takes_a_shape(
    files: dict[str, Path], tmp_path: Path
) -> None:
    by_file, by_shape = tmp_path / "f.json", tmp_path / "s.json"
    common = ["--seed", "4"]
    argv = ["profile", "assign", str(files["measured"])]
    assert main([*argv, "--topology", str(files["topology"]), *common, "-o", str(by_file)]) == 0
    assert main([*argv, "--cluster", "2x2x2", *common, "-o", str(by_shape)]) == 0
    a, b = load_profile(by_file), load_profile(by_shape)
    assert a.gpus == b.gpus == build_cluster(2, 2, 2).gpu_ids
    assert np.array_equal(a.values, b.values) and a.origin == b.origin
    # One of the two, not both and not neither
    for cluster in ([], ["--cluster", "2x2x2", "--topology", str(files["topology"])]):
        with pytest.raises(SystemExit) as exc:
            main([*argv, *cluster, "-o", str(tmp_path / "x.json")])
        assert exc.value.code == 2


def test_profile_assign_keys_the_profile_by_the_topology_files_gpu_ids(
    files: dict[str, Path], tmp_path: Path
) -> None:
    # GPUs named by host, as `palopt topology build` names them
    graph = nx.relabel_nodes(build_cluster(1, 2, 2).graph, {"gpu0": "h0/g0", "gpu3": "h1/g1"})
    topo = Topology.from_graph(graph)
    path, out = tmp_path / "t.json", tmp_path / "a.json"
    path.write_text(json.dumps(topo.to_node_link()))
    argv = ["profile", "assign", str(files["measured"]), "--topology", str(path), "-o", str(out)]
    assert main(argv) == 0
    assert load_profile(out).gpus == topo.gpu_ids
    assert "h0/g0" in topo.gpu_ids and "h1/g1" in topo.gpu_ids


@pytest.fixture
def assigned(files: dict[str, Path]) -> dict[str, Path]:
    """``files`` with the profile assigned to the topology (seed 1)."""
    files["assigned"] = files["measured"].with_name("assigned.json")
    argv = ["profile", "assign", str(files["measured"]), "--topology", str(files["topology"])]
    assert main([*argv, "--seed", "1", "-o", str(files["assigned"])]) == 0
    return files


def test_build_writes_the_instance_build_instance_makes(
    assigned: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "inst.json"
    argv = _build(assigned, out, "--topology", str(assigned["topology"]), "--busy", "gpu7, gpu6")
    assert main([*argv, "--name", "demo"]) == 0
    assert capsys.readouterr().out == f"{out}: 8 GPUs, 2 classes, 3 queued jobs, 2 busy GPUs\n"
    inst = load_instance(out)
    topo = build_cluster(2, 2, 2)
    busy = np.zeros(8, dtype=bool)
    busy[[6, 7]] = True
    queue = [Job("a", 4, "A"), Job("b", 2, "B", current_gpus=(0, 1)), Job("c", 1, "A", 2.5)]
    profile = load_profile(assigned["assigned"])
    expected = build_instance(profile, topo, PENALTIES, queue, busy=busy)
    assert inst.classes == expected.classes == ("A", "B")
    assert np.array_equal(inst.slowdown, expected.slowdown)
    assert np.array_equal(inst.penalty, expected.penalty)
    assert inst.queue == expected.queue and np.array_equal(inst.busy, busy)
    assert inst.meta["name"] == "demo"
    assert (
        "test measurements" in inst.meta["source"] and str(assigned["queue"]) in inst.meta["source"]
    )
    result = get_solver("greedy").solve(inst)
    assert_feasible(inst, result)
    assert result.n_placed == 2  # 6 GPUs free: c (1 GPU) waits behind a and b
    # --cluster instead of --topology: the same instance
    again = tmp_path / "again.json"
    assert main([*_build(assigned, again, "--cluster", "2x2x2", "--busy", "gpu6,gpu7")]) == 0
    same = load_instance(again)
    assert np.array_equal(same.slowdown, inst.slowdown) and same.queue == inst.queue


def test_build_bins_by_the_rule_asked_for(assigned: dict[str, Path], tmp_path: Path) -> None:
    profile = load_profile(assigned["assigned"])
    topo = build_cluster(2, 2, 2)
    for method in ("kmeans", "artifact"):
        out = tmp_path / f"{method}.json"
        argv = _build(assigned, out, "--cluster", "2x2x2", "--binning", method)
        assert main(argv) == 0
        expected = build_instance(profile, topo, PENALTIES, [], method).slowdown
        assert np.array_equal(load_instance(out).slowdown, expected)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"--penalties": "{rack: 1.7}"},
            "argument --penalties: expected a number or a JSON object (tier -> p or class -> "
            "tier -> p), got '{rack: 1.7}'",
        ),
        ({"--penalties": '{"rak": 1.7}'}, "penalties.rak = 'rak': unknown tier"),
        ({"--busy": "gpu9"}, "--busy = 'gpu9': no GPU of that id"),
        ({"--busy": "gpu1,gpu1"}, "--busy = 'gpu1': listed twice"),
        ({"queue": {"id": "a"}}, "queue.json: queue = 'dict': expected a list of jobs"),
        ({"queue": [{"id": "a", "num_gpus": 1}]}, "queue.json: queue[0].class = None"),
        ({"queue": [{"id": "a", "num_gpus": 1, "class": "Z"}]}, "queue.json: queue[0].class = 'Z'"),
        ({"queue": [{"id": "a", "num_gpus": 99, "class": "A"}]}, "queue.json: queue[0].num_gpus"),
        ({"queue": [{"id": "a", "num_gpus": 1, "class": "A"}] * 2}, "queue.json: queue[1].id"),
        (
            {"--cluster": "4x4"},
            "its 12 GPUs (gpu0, gpu1, ...) are not the cluster's 16 (gpu0, gpu1, ...); it was "
            "assigned to another cluster; assign the measured profile to this one: palopt "
            "profile assign MEASURED.json --cluster 4x4 -o ASSIGNED.json",
        ),
        (
            {"--penalties": '{"rack": 1.7, "rack": 2}'},
            "argument --penalties: penalties = 'rack': the key appears twice",
        ),
        ({"--penalties": "1" * 5000}, "penalties = inf: must be a finite number"),
        ({"--penalties": "[" * 100_000}, "--penalties: penalties = 'nesting': nested too deeply"),
        ({"--penalties": "[1.7]"}, "expected a number or a JSON object"),
    ],
)
def test_build_refuses_bad_input_by_name(
    assigned: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, object],
    message: str,
) -> None:
    queue_case = "queue" in change
    if queue_case:
        assigned["queue"].write_text(json.dumps(change.pop("queue")))
    if "--cluster" in change:  # 16 GPUs: the profile of 8 is not theirs
        profile = load_profile(assigned["assigned"])
        other = assign_profile(load_profile(assigned["measured"]), build_cluster(1, 3, 4), 0)
        assert other.gpus != profile.gpus
        save_profile(other, assigned["assigned"])
    out = tmp_path / "inst.json"
    argv = _build(assigned, out, "--cluster", str(change.pop("--cluster", "2x2x2")))
    for flag, value in change.items():
        if flag in argv:
            argv[argv.index(flag) + 1] = str(value)
        else:
            argv += [flag, str(value)]
    try:
        code = main(argv)
    except SystemExit as exc:  # refused by argparse (--penalties), after the usage line
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert message in err and err.startswith("palopt: error: ")
    assert (str(assigned["queue"]) in err) == queue_case  # only the queue's errors name its file
    assert not out.exists()


def test_build_refuses_a_profile_of_as_many_gpus_named_otherwise(
    assigned: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A profile keyed by another cluster's GPU ids is refused even when the GPU counts match:
    its values would otherwise be given to the cluster's GPUs by position, silently."""
    graph = build_cluster(2, 2, 2).graph
    topo = Topology.from_graph(nx.relabel_nodes(graph, {"gpu0": "h0/g0", "gpu1": "h0/g1"}))
    assert topo.n_gpus == 8 and topo.gpu_ids != load_profile(assigned["assigned"]).gpus
    path, out = tmp_path / "named.json", tmp_path / "inst.json"
    path.write_text(json.dumps(topo.to_node_link()))
    assert main(_build(assigned, out, "--topology", str(path))) == 2
    err = capsys.readouterr().err
    shown = InputError("--profile", str(assigned["assigned"]), "its 8 GPUs")  # as cut if long
    assert err.startswith(f"palopt: error: {shown}")
    assert "not the cluster's 8 (" in err and not out.exists()


def test_an_empty_cluster_is_named(
    assigned: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --cluster '' was taken as no --cluster: "path = 'NoneType': expected a file name".
    assign = ["profile", "assign", str(assigned["measured"]), "--cluster", "", "-o"]
    for argv in (_build(assigned, tmp_path / "i.json", "--cluster", ""), [*assign, "p.json"]):
        assert main(argv) == 2
        assert "cluster = '': expected SERVERSxGPUS" in capsys.readouterr().err


def test_build_refuses_to_write_over_an_input(assigned: dict[str, Path]) -> None:
    argv = _build(assigned, assigned["queue"], "--cluster", "2x2x2")
    before = assigned["queue"].read_text()
    assert main(argv) == 2
    assert assigned["queue"].read_text() == before


@pytest.mark.parametrize(
    ("text", "problem"),
    [('[{"id": "a", "id": "b"}]', "'id': the key appears twice"), ("[", "invalid JSON")],
)
def test_build_names_a_queue_file_that_is_not_json_once(
    assigned: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    problem: str,
) -> None:
    assigned["queue"].write_text(text)
    assert main(_build(assigned, tmp_path / "inst.json", "--cluster", "2x2x2")) == 2
    err = capsys.readouterr().err
    assert err.count(str(assigned["queue"])) == 1 and problem in err


def test_build_of_a_measured_profile_says_how_to_assign_that_file(
    assigned: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assigned["assigned"] = assigned["measured"]  # not assigned yet: keyed m0, m1, ...
    assert main(_build(assigned, tmp_path / "inst.json", "--cluster", "2x4")) == 2
    assert capsys.readouterr().err.endswith(
        "its 12 GPUs (m0, m1, ...) are not the cluster's 8 (gpu0, gpu1, ...); assign the "
        f"measured profile to this one: palopt profile assign {assigned['measured']} --cluster "
        "2x4 -o ASSIGNED.json\n"
    )


def test_profile_assign_fills_a_larger_cluster_with_replacement(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 12 measured GPUs, every one in both classes, for a 32-GPU cluster. The refusal hinted at
    # --missing, which cannot help when no GPU misses a class, and the CLI had no --replace.
    out = tmp_path / "a.json"
    argv = ["profile", "assign", str(files["measured"]), "--cluster", "4x8", "-o", str(out)]
    assert main([*argv, "--seed", "2"]) == 2
    err = capsys.readouterr().err
    assert "palopt profile assign --seed N --replace" in err and "--missing" not in err
    assert main([*argv, "--seed", "2", "--replace"]) == 0
    drawn = load_profile(out)
    expected = assign_profile(
        load_profile(files["measured"]), build_cluster(1, 4, 8), 2, replace=True
    )
    assert drawn.gpus == build_cluster(1, 4, 8).gpu_ids and drawn.origin == expected.origin
    assert np.array_equal(drawn.values, expected.values)
    assert main([*argv, "--replace"]) == 2  # a draw needs a seed
    assert "need a seed" in capsys.readouterr().err
