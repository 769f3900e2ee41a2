"""``palopt topology build/show``, ``solve --format slurm`` and the pandas export, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import networkx as nx
import numpy as np
import pandas as pd
import pytest

from palopt.cli import main
from palopt.cost import assert_feasible
from palopt.errors import InputError
from palopt.export import (
    FRAME_COLUMNS,
    SlurmAllocation,
    format_slurm,
    local_index,
    slurm_allocations,
    to_frame,
)
from palopt.hostlist import expand_hostlist
from palopt.importers.assemble import assemble_topology
from palopt.importers.nvidia_smi import parse_nvidia_smi
from palopt.importers.slurm import parse_topology_conf
from palopt.instance import Instance, Job
from palopt.io import instance_from_dict, instance_schema
from palopt.solvers import solve
from palopt.topology import Topology, parse_shape
from palopt.topology_view import _tree_layout

SAMPLES = Path(__file__).resolve().parent.parent / "instances" / "topology"
BUILD = [
    "topology",
    "build",
    "--slurm",
    str(SAMPLES / "topology.conf"),
    "--nvidia-smi",
    str(SAMPLES / "nvlink-pairs.txt"),
    "--server",
    f"dgx[1-2]={SAMPLES / 'dgx-a100.txt'}",
    "--server",
    f"t4-[01-02]={SAMPLES / 'pcie-only.txt'}",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("topo") / "topo.json"
    assert main([*BUILD, "-o", str(out)]) == 0  # the README's form
    return out


def _instance_dict(topology: dict, seed: int = 3) -> dict:
    n = sum(1 for node in topology["nodes"] if node["kind"] == "gpu")
    rng = np.random.default_rng(seed)
    return {
        "format": "palopt.instance/1",
        "topology": topology,
        "classes": ["A", "B"],
        "slowdown": {c: rng.uniform(0.9, 1.3, n).round(3).tolist() for c in ("A", "B")},
        "penalties": {"nvlink": 1.0, "server": 1.1, "rack": 1.5, "cluster": 2.0},
        "queue": [
            {"id": f"j{i}", "num_gpus": k, "class": "AB"[i % 2]}
            for i, k in enumerate([8, 2, 16, 4, 1, 8, 24, 4])
        ],
    }


def test_build_writes_a_valid_topology(built: Path) -> None:
    data = json.loads(built.read_text())
    topo = Topology.from_node_link(data)
    assert (topo.n_gpus, topo.n_servers) == (72, 10)
    assert topo.tiers == ("nvlink", "server", "rack", "cluster")
    assert topo.server_ids[:2] == ("node01", "node02") and topo.server_ids[-1] == "t4-02"
    assert {topo.graph.nodes[s]["tier"] for s in ("rack1", "rack2", "rack3")} == {"rack"}
    assert topo.graph.nodes["core"]["tier"] == "cluster"
    g = topo.index
    assert topo.tier_of([g("node01/gpu0"), g("node01/gpu1")]) == "nvlink"
    assert topo.tier_of([g("node01/gpu1"), g("node01/gpu2")]) == "server"
    assert topo.tier_of([g("dgx1/gpu0"), g("dgx1/gpu7")]) == "nvlink"
    assert topo.tier_of([g("t4-01/gpu0"), g("t4-01/gpu1")]) == "server"
    assert topo.tier_of([g("node05/gpu0"), g("dgx2/gpu0")]) == "rack"
    assert topo.tier_of([g("node01/gpu0"), g("t4-02/gpu3")]) == "cluster"
    assert len(data["graph"]["sources"]) == 4


def test_build_to_stdout_single_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "build", "--nvidia-smi", str(SAMPLES / "dgx-a100.txt")]) == 0
    topo = Topology.from_node_link(json.loads(capsys.readouterr().out))
    assert topo.server_ids == ("server0",) and topo.tiers == ("nvlink", "server")


def test_built_topology_instance_solves_feasibly(built: Path) -> None:
    data = _instance_dict(json.loads(built.read_text()))
    jsonschema.validate(data, instance_schema())
    inst = instance_from_dict(data)
    result = solve(inst, "pal", seed=0)
    assert_feasible(inst, result)
    assert result.n_placed == len(inst.queue)


def test_show_summarises_topology_and_instance(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topology", "show", str(built)]) == 0
    out = capsys.readouterr().out
    assert "72 GPUs on 10 servers, 4 switches; tiers nvlink < server < rack < cluster" in out
    assert "node[01-06]  8 GPUs each, NVLink islands 2+2+2+2" in out
    assert "dgx[1-2]  8 GPUs each, NVLink islands 8" in out
    assert "t4-[01-02]  4 GPUs each, PCIe only" in out
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps(_instance_dict(json.loads(built.read_text()))))
    assert main(["topology", "show", str(inst)]) == 0
    assert "72 GPUs on 10 servers" in capsys.readouterr().out


def test_show_draws_png(tmp_path: Path) -> None:
    png = tmp_path / "t.png"
    # the Slurm and nvidia-smi inputs of BUILD, without the per-server files
    assert main([*BUILD[:6], "--out", str(tmp_path / "t.json")]) == 0
    assert main(["topology", "show", str(tmp_path / "t.json"), "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_show_titles_the_drawing_with_the_file_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drawing of `topology show --png` is titled with the file it shows, so drawings of
    several files can be told apart."""
    import matplotlib

    monkeypatch.setitem(matplotlib.rcParams, "svg.fonttype", "none")  # text kept as text
    topology = tmp_path / "rack-a.json"
    topology.write_text(json.dumps(parse_shape("2x2").to_node_link()))
    svg = tmp_path / "t.svg"
    assert main(["topology", "show", str(topology), "--png", str(svg)]) == 0
    assert ">rack-a.json</text>" in svg.read_text()


def _bad_smi(tmp_path: Path) -> Path:
    bad = tmp_path / "bad.txt"
    bad.write_text("\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tNV2\t X \nGPU2\tNV2\tNV2\n")
    return bad


def _bad_conf(tmp_path: Path) -> Path:
    bad = tmp_path / "bad.conf"
    bad.write_text("SwitchName=r1 Nodes=node[01-02]\nSwitchName=r2 Nodes=node[03-04]\n")
    return bad


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            lambda t: ["--nvidia-smi", str(_bad_smi(t))],
            "bad.txt:4 = 'GPU2': row GPU2 has no column",
        ),
        (
            lambda t: [
                "--slurm",
                str(_bad_conf(t)),
                "--nvidia-smi",
                str(SAMPLES / "pcie-only.txt"),
            ],
            "bad.conf:2 = 'r2': several root switches",
        ),
        (
            lambda t: [
                "--slurm",
                str(SAMPLES / "topology.conf"),
                "--nvidia-smi",
                str(SAMPLES / "pcie-only.txt"),
                "--server",
                f"node99={SAMPLES / 'dgx-a100.txt'}",
            ],
            "no switch in",
        ),
        # named the server in the words of assemble_topology, not the options that give it
        (
            lambda t: ["--slurm", str(SAMPLES / "topology.conf")],
            "topology.conf': no nvidia-smi output for 10 of its servers (node01, node02, node03, "
            "...): give --nvidia-smi (for every server without --server) or --server NAMES=FILE",
        ),
        (
            lambda t: [
                "--slurm",
                str(SAMPLES / "topology.conf"),
                "--server",
                f"node[01-04],node[05-06],dgx[1-2]={SAMPLES / 'dgx-a100.txt'}",
            ],
            "no nvidia-smi output for 2 of its servers (t4-01, t4-02):",
        ),
        (lambda t: ["--server", f"n[2-1]={SAMPLES / 'dgx-a100.txt'}"], "start above end"),
        (lambda t: [], "give --slurm, --nvidia-smi or --server"),
        (
            lambda t: [
                "--server",
                f"n[1-2]={SAMPLES / 'dgx-a100.txt'}",
                "--server",
                f"n2={SAMPLES / 'pcie-only.txt'}",
            ],
            "'n2': server given more than once",
        ),
    ],
)
def test_build_errors_exit_2(
    args, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topology", "build", *args(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("palopt: error: ") and expected in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_show_bad_json_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "t.json"
    bad.write_text('{"nodes": [\n  {"id": "a",}\n]}\n')
    assert main(["topology", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad} = 'line 2 column" in err and "invalid JSON" in err, err


def test_solve_format_slurm(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _instance_dict(json.loads(built.read_text()))
    path = tmp_path / "inst.json"
    path.write_text(json.dumps(data))
    assert main(["solve", str(path), "--format", "slurm", "--seed", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "# job\taction\tnodelist\tcuda_visible_devices"
    inst = instance_from_dict(data)
    result = solve(inst, "pal", seed=0)
    topo = inst.topology
    assert len(lines) == 1 + result.n_placed
    for line, p in zip(lines[1:], result.placements, strict=True):
        job, action, nodelist, devices = line.split("\t")
        assert (job, action) == (p.job_id, "start")
        per_node = dict(item.split("=") for item in devices.split(";"))
        assert expand_hostlist(nodelist) == list(per_node)
        names = sorted(f"{node}/gpu{d}" for node, ds in per_node.items() for d in ds.split(","))
        assert names == sorted(topo.gpu_ids[g] for g in p.gpus)


def _one_server(locals_: list[int | None]) -> dict:
    """An instance dict: server ``n1`` with GPUs ``n1-gpu0``, ``n1-gpu1``, ... listed in that
    order (``local`` as given), ``n1-gpu10`` the fastest, and one 1-GPU job."""
    names = [f"n1-gpu{i}" for i in range(len(locals_))]
    nodes = [{"id": "n1", "kind": "server"}] + [
        {"id": g, "kind": "gpu", **({} if k is None else {"local": k})}
        for g, k in zip(names, locals_, strict=True)
    ]
    speed = [1.0] * len(names)
    speed[10] = 0.5
    return {
        "format": "palopt.instance/1",
        "topology": {
            "nodes": nodes,
            "edges": [{"source": "n1", "target": g, "link": "pcie"} for g in names],
        },
        "classes": ["A"],
        "slowdown": {"A": speed},
        "penalties": 1.7,
        "queue": [{"id": "j1", "num_gpus": 1, "class": "A"}],
    }


def test_gpus_without_local_keep_the_order_listed(tmp_path: Path, capsys) -> None:
    # Sorted by name as text, n1-gpu10 came third: a slowdown list's 11th value went to
    # n1-gpu8, and the Slurm line gave the job n1-gpu10 as CUDA device 2.
    inst = instance_from_dict(_one_server([None] * 12))
    assert inst.topology.gpu_ids == tuple(f"n1-gpu{i}" for i in range(12))
    path = tmp_path / "inst.json"
    path.write_text(json.dumps(_one_server([None] * 12)))
    assert main(["solve", str(path), "--format", "slurm"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "j1\tstart\tn1\tn1=10"


def test_a_server_gives_local_indices_to_all_its_gpus_or_none(capsys) -> None:
    with pytest.raises(InputError, match=r"nodes\[n1-gpu1\]\.local = None: missing, while GPU"):
        instance_from_dict(_one_server([1] + [None] * 11))
    inst = instance_from_dict(_one_server([11 - i for i in range(12)]))
    assert inst.topology.gpu_ids[0] == "n1-gpu11"
    assert [local_index(inst.topology, g) for g in range(12)] == list(range(12))


def test_slurm_local_index_falls_back_to_position() -> None:
    graph = nx.Graph()
    graph.add_node("sw", kind="switch", tier="cluster")
    for s in ("h1", "h2"):
        graph.add_edge(s, "sw", link="network")
        graph.nodes[s]["kind"] = "server"
        for name in ("b", "a"):
            graph.add_node(f"{s}{name}", kind="gpu")
            graph.add_edge(f"{s}{name}", s, link="pcie")
    topo = Topology.from_graph(graph)
    assert [local_index(topo, g) for g in range(4)] == [0, 1, 0, 1]
    inst = Instance(topo, ("A",), np.ones((1, 4)), np.ones((1, 2)), (Job("x", 3, "A"),))
    result = solve(inst, "packed-nonsticky")
    assert_feasible(inst, result)
    [alloc] = slurm_allocations(result, inst)
    assert alloc.nodelist == "h[1-2]"
    assert sorted(d for _, d in alloc.devices) == ["0", "0,1"]


def _two_servers(names: tuple[str, str]) -> Instance:
    """Servers ``names``, listed in that order under one switch, each with GPUs ``g0`` and
    ``g1`` whose ``local`` (nvidia-smi) indices are 0 and 2, as on a node whose GPU 1 is left
    out; queue: job ``x`` of 3 GPUs, which fits, and ``y`` of 4, which does not."""
    graph = nx.Graph()
    graph.add_node("sw", kind="switch", tier="cluster")
    for s in names:
        graph.add_node(s, kind="server")
        graph.add_edge(s, "sw", link="network")
        for i, local in enumerate((0, 2)):
            graph.add_node(f"{s}/g{i}", kind="gpu", local=local)
            graph.add_edge(f"{s}/g{i}", s, link="pcie")
    topo = Topology.from_graph(graph)
    jobs = (Job("x", 3, "A"), Job("y", 4, "A"))
    return Instance(topo, ("A",), np.ones((1, 4)), np.ones((1, 2)), jobs)


def test_slurm_devices_are_local_indices_in_node_list_order() -> None:
    # Server b is listed before a: the devices follow the node list (a, b), not the topology,
    # and are the GPUs' nvidia-smi indices (0 and 2), not their positions (0 and 1).
    inst = _two_servers(("b", "a"))
    assert [local_index(inst.topology, g) for g in range(4)] == [0, 2, 0, 2]
    result = solve(inst, "packed-nonsticky")
    assert result.placements[0].gpus == (0, 1, 2)  # b/g0, b/g1, a/g0
    assert slurm_allocations(result, inst) == [
        SlurmAllocation("x", "start", "a,b", (("a", "0"), ("b", "0,2")))
    ]
    assert format_slurm(result, inst) == (
        "# job\taction\tnodelist\tcuda_visible_devices\n"
        "x\tstart\ta,b\ta=0;b=0,2\n"
        "# y\twait\tnot placed: needs 4 GPUs, 1 free"
    )  # no newline at the end
    frame = to_frame(result, inst)
    assert frame.loc[0, "servers"] == ("b", "a")  # in the order of the job's GPUs
    assert frame.loc[0, "gpus"] == ("b/g0", "b/g1", "a/g0")
    assert list(frame["n_gpus"]) == [3, 4]
    for column in ("cost", "slowdown", "penalty"):  # missing for y, still a float column
        assert frame[column].dtype == np.float64 and pd.isna(frame.loc[1, column])
    all_busy = np.ones(4, dtype=bool)
    busy = Instance(inst.topology, inst.classes, inst.slowdown, inst.penalty, inst.queue, all_busy)
    frame = to_frame(solve(busy, "packed-nonsticky"), busy)  # nothing placed: floats still
    assert list(frame["action"]) == ["wait", "wait"]
    assert all(frame[c].dtype == np.float64 for c in ("cost", "slowdown", "penalty"))


def test_slurm_takes_host_names_with_dots_and_refuses_a_trailing_space() -> None:
    inst = _two_servers(("n1.example.com", "n2.example.com"))
    [alloc] = slurm_allocations(solve(inst, "packed-nonsticky"), inst)
    assert alloc.nodelist == "n1.example.com,n2.example.com"
    inst = _two_servers(("s0 ", "s1"))
    with pytest.raises(InputError, match=r"topology.server = 's0 ': not a Slurm node name"):
        slurm_allocations(solve(inst, "packed-nonsticky"), inst)


def test_to_frame(built: Path) -> None:
    data = _instance_dict(json.loads(built.read_text()))
    data["busy"] = [n["id"] for n in data["topology"]["nodes"] if n["kind"] == "gpu"][:40]
    inst = instance_from_dict(data)
    result = solve(inst, "pal", seed=0)
    assert_feasible(inst, result)
    frame = to_frame(result, inst)
    assert tuple(frame.columns) == FRAME_COLUMNS
    assert list(frame["job"]) == [j.id for j in inst.queue]
    assert list(frame["n_gpus"]) == [j.num_gpus for j in inst.queue]
    placed = frame[frame["gpus"].map(len) > 0]
    waiting = frame[frame["gpus"].map(len) == 0]
    assert len(placed) == result.n_placed and len(waiting) > 0
    assert (placed["gpus"].map(len) == placed["n_gpus"]).all()
    assert placed["cost"].sum() == pytest.approx(result.objective)
    assert np.allclose(placed["cost"], placed["slowdown"] * placed["penalty"])
    assert placed["reason"].isna().all() and waiting["cost"].isna().all()
    assert waiting["reason"].notna().all() and set(waiting["action"]) == {"wait"}
    by_job = {p.job_id: p for p in result.placements}
    for row in placed.itertuples():
        assert row.servers == tuple(dict.fromkeys(g.split("/")[0] for g in row.gpus))
        assert row.tier == by_job[row.job].tier
    assert frame["cost"].dtype == np.float64 and isinstance(frame, pd.DataFrame)


def test_build_without_slurm_joins_servers_under_one_switch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(
            [
                "topology",
                "build",
                "--server",
                f"a={SAMPLES / 'dgx-a100.txt'}",
                "--server",
                f"b[1-2]={SAMPLES / 'pcie-only.txt'}",
            ]
        )
        == 0
    )
    topo = Topology.from_node_link(json.loads(capsys.readouterr().out))
    assert topo.server_ids == ("a", "b1", "b2")
    assert topo.tiers == ("nvlink", "server", "cluster")
    assert (
        main(
            [
                "topology",
                "build",
                "--nvidia-smi",
                str(SAMPLES / "dgx-a100.txt"),
                "--server",
                f"a={SAMPLES / 'dgx-a100.txt'}",
            ]
        )
        == 2
    )
    assert "not both" in capsys.readouterr().err


def test_build_without_slurm_takes_a_host_named_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The added switch was named "cluster" too: the host became a switch's tier holder.
    pcie = SAMPLES / "pcie-only.txt"
    assert main(["topology", "build", "--server", f"cluster,n1={pcie}"]) == 0
    topo = Topology.from_node_link(json.loads(capsys.readouterr().out))
    assert topo.server_ids == ("cluster", "n1")
    assert topo.tiers == ("server", "cluster")


def test_in_an_unbalanced_tree_leaf_switches_are_racks() -> None:
    tree = parse_topology_conf(
        "SwitchName=leafA Nodes=n[1-2]\nSwitchName=leafB Nodes=n[3-4]\n"
        "SwitchName=mid Switches=leafB\n"
        "SwitchName=top Switches=leafA,mid\n"
    )
    topo = assemble_topology(tree, {}, parse_nvidia_smi("GPU0\nGPU0 X"))
    assert topo.tiers == ("server", "rack", "level1", "cluster")
    assert set(topo.graph["leafA"]) == {"top", "n1", "n2"}  # no pass-through switches
    assert topo.tier_of([0, 1]) == "rack"
    assert topo.tier_of([2, 3]) == "rack"
    assert topo.tier_of([0, 2]) == "cluster"


def _untiered_tree() -> nx.Graph:
    """Switches without ``tier``: root ``top`` over leaf ``leafA`` (n1, n2), ``mid`` over leaf
    ``leafB`` (n3, n4), and ``spare``, a leaf switch with nothing below it."""
    graph = nx.Graph()
    graph.add_node("top", kind="switch", root=True)
    graph.add_nodes_from(["leafA", "mid", "leafB", "spare"], kind="switch")
    graph.add_edges_from(
        [("leafA", "top"), ("mid", "top"), ("leafB", "mid"), ("spare", "top")], link="network"
    )
    for i, leaf in enumerate(["leafA", "leafA", "leafB", "leafB"], start=1):
        graph.add_node(f"n{i}", kind="server")
        graph.add_node(f"n{i}/gpu0", kind="gpu")
        graph.add_edge(f"n{i}", leaf, link="network")
        graph.add_edge(f"n{i}", f"n{i}/gpu0", link="pcie")
    return graph


def test_show_gives_switches_the_tiers_the_topology_derives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The raw `tier` attribute was read: all were listed as "? 5: leafA,...", and `top` was
    # drawn on the row of the leaf switches.
    topo = Topology.from_graph(_untiered_tree())
    assert topo.tiers == ("server", "rack", "level1", "cluster")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(topo.to_node_link()))
    assert main(["topology", "show", str(path)]) == 0
    out = capsys.readouterr().out
    # `spare`, a leaf switch with no server below it, is at the deepest level, as every leaf.
    assert out.endswith(
        "switches:\n  cluster 1: top\n  level1  1: mid\n  rack    3: leafA,leafB,spare\n"
    ), out
    assert topo.switch_tier == {
        "top": "cluster",
        "mid": "level1",
        "leafA": "rack",
        "leafB": "rack",
        "spare": "rack",
    }
    height = {node: y for node, (_, y) in _tree_layout(topo).items()}
    assert height["n1"] < height["leafA"] == height["leafB"] < height["mid"] < height["top"]


@pytest.mark.parametrize("name", ["rack1,srv2", "node[1]", "big box"])
def test_show_lists_server_names_that_are_not_host_names(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "rack1,srv2" and "node[1]" failed with `hostlist = ...`; "big box" was compressed into a
    # host list of three hosts.
    graph = nx.Graph()
    graph.add_node("sw", kind="switch", tier="cluster")
    for server in (name, "other"):
        graph.add_node(server, kind="server")
        graph.add_node(f"{server}/g0", kind="gpu")
        graph.add_edge(server, "sw", link="network")
        graph.add_edge(server, f"{server}/g0", link="pcie")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(Topology.from_graph(graph).to_node_link()))
    assert main(["topology", "show", str(path)]) == 0
    assert f"  {name},other  1 GPU each, PCIe only\n" in capsys.readouterr().out


def test_format_slurm_refuses_a_job_id_starting_with_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The placed job's line "#x\tstart\t..." read as a comment.
    data = _one_server([None] * 12)
    data["queue"][0]["id"] = "#x"
    path = tmp_path / "inst.json"
    path.write_text(json.dumps(data))
    assert main(["solve", str(path), "--format", "slurm"]) == 2
    captured = capsys.readouterr()
    assert "job id = '#x': a leading # would make the line a comment" in captured.err
    assert "#x\tstart" not in captured.out


def test_drawing_options_are_checked_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The summary was printed, then a bare "[Errno 2] ..." (or [Errno 21] for a folder).
    topo = tmp_path / "t.json"
    topo.write_text(json.dumps(Topology.from_graph(_untiered_tree()).to_node_link()))
    csv = tmp_path / "m.csv"
    csv.write_text("gpu,perf\na,1.0\nb,1.1\n")
    profile = tmp_path / "p.json"
    assert (
        main(["profile", "import", str(csv), "--id", "gpu", "--value", "perf", "-o", str(profile)])
        == 0
    )
    (tmp_path / "d.png").mkdir()
    capsys.readouterr()
    drawing = [
        (["topology", "show", str(topo)], "--png"),
        (["profile", "show", str(profile)], "--plot"),
    ]
    for command, flag in drawing:
        for image, problem in (
            (tmp_path / "nowhere" / "x.png", "no such folder"),
            (tmp_path / "d.png", "is a folder; give a file name"),
        ):
            assert main([*command, flag, str(image)]) == 2
            captured = capsys.readouterr()
            assert captured.out == ""
            assert captured.err.startswith(f"palopt: error: {flag} = '")
            assert captured.err.endswith(f": {problem}\n")


ISLANDS_3_1 = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\n"
    "GPU0\t X \tNV2\tNV2\tPIX\n"
    "GPU1\tNV2\t X \tNV2\tPIX\n"
    "GPU2\tNV2\tNV2\t X \tPIX\n"
    "GPU3\tPIX\tPIX\tPIX\t X \n"
)


def test_show_lists_uneven_islands_largest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    smi = tmp_path / "smi.txt"
    smi.write_text(ISLANDS_3_1)
    out = tmp_path / "t.json"
    assert main(["topology", "build", "--nvidia-smi", str(smi), "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"{out}: 4 GPUs on 1 server, tiers nvlink < server\n"
    assert main(["topology", "show", str(out)]) == 0
    assert capsys.readouterr().out == (
        "4 GPUs on 1 server, 0 switches; tiers nvlink < server\n"
        "tier      groups  GPUs per group (x number of groups)\n"
        "nvlink         2  3, 1\n"
        "server         1  4\n"
        "servers:\n"
        "  server0  4 GPUs each, NVLink islands 3+1\n"
    )


def test_show_counts_groups_of_each_size_largest_first(
    built: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topology", "show", str(built)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "server        10  8 (x8), 4 (x2)" in lines
    assert "cluster        1  72" in lines


def test_build_to_stdout_ends_with_a_newline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "build", "--nvidia-smi", str(SAMPLES / "pcie-only.txt")]) == 0
    out = capsys.readouterr().out
    assert out.endswith("}\n") and not out.endswith("\n\n")


@pytest.mark.parametrize("value", ["n1=", "=dgx.txt", "n1"])
def test_build_server_option_needs_names_and_a_file(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["topology", "build", "--server", value])
    assert exc.value.code == 2
    assert f"expected NAMES=FILE, got {value!r}" in capsys.readouterr().err


def test_show_names_the_topology_of_a_bad_instance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "inst.json"
    path.write_text(json.dumps({"format": "palopt.instance/1", "topology": 3}))
    assert main(["topology", "show", str(path)]) == 2
    assert f"palopt: error: {path}: topology = 3" in capsys.readouterr().err


def test_tree_layout_centres_each_node_over_its_children() -> None:
    topo = Topology.from_graph(_untiered_tree())
    pos = _tree_layout(topo)
    assert [pos[f"n{i}/gpu0"] for i in range(1, 5)] == [(float(i), 0.0) for i in range(4)]
    assert pos["n2"] == (1.0, 1.0)
    assert pos["leafA"][0] == 0.5 and pos["leafB"][0] == 2.5 and pos["mid"][0] == 2.5
    assert pos["top"][0] == pytest.approx((0.5 + 2.5 + pos["spare"][0]) / 3)


def test_summary_calls_servers_without_nvlink_pcie_only() -> None:
    """A cluster with no NVLink tier at all: every GPU is its own island, "PCIe only"."""
    from palopt.topology import build_cluster
    from palopt.topology_view import island_sizes, summarize

    topo = build_cluster(1, 2, 4)
    assert topo.tiers[0] != "nvlink"
    assert island_sizes(topo, 1) == (1, 1, 1, 1)
    assert "  server[0-1]  4 GPUs each, PCIe only" in summarize(topo).splitlines()


@pytest.mark.parametrize("server", [-1, 2, True, 1.0])
def test_island_sizes_refuses_a_server_that_is_not_an_index(server: object) -> None:
    """``-1`` gave ``()`` (the bounds of the last and first server), ``2`` an IndexError."""
    from palopt.topology import build_cluster
    from palopt.topology_view import island_sizes

    topo = build_cluster(1, 2, 4, nvlink_island=2)
    with pytest.raises(InputError) as info:
        island_sizes(topo, server)  # type: ignore[arg-type]
    assert info.value.field == "server" and info.value.value is server
    assert island_sizes(topo, np.int64(1)) == (2, 2)


def test_view_functions_refuse_what_is_not_a_topology(tmp_path: Path) -> None:
    from palopt.topology_view import draw, island_sizes, summarize

    for call in (
        lambda: island_sizes("2x4", 0),  # type: ignore[arg-type]
        lambda: summarize("2x4"),  # type: ignore[arg-type]
        lambda: draw("2x4", tmp_path / "t.png"),  # type: ignore[arg-type]
    ):
        with pytest.raises(InputError, match="expected a Topology"):
            call()
    assert not (tmp_path / "t.png").exists()


def test_draw_makes_one_patch_of_all_nvlinks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One FancyArrowPatch per NVLink took 3-4 ms each: a cluster of DGX servers drew for
    minutes (80,000 GPUs: still drawing after 7 minutes)."""
    import matplotlib.pyplot as plt

    from palopt.topology import build_cluster
    from palopt.topology_view import draw

    figures: list[object] = []
    close = plt.close
    monkeypatch.setattr(plt, "close", figures.append)
    topo = build_cluster(1, 4, 8, nvlink_island=4)  # 3 NVLinks per island, 24 in all
    draw(topo, tmp_path / "t.png")
    (fig,) = figures
    try:
        (ax,) = fig.axes  # type: ignore[attr-defined]
        (arcs,) = ax.patches
        vertices = arcs.get_path().vertices.reshape(-1, 3, 2)
        assert len(vertices) == 24
        start, control, end = vertices[:, 0], vertices[:, 1], vertices[:, 2]
        assert (start[:, 1] == 0).all() and (end[:, 1] == 0).all()  # GPU to GPU
        assert (start[:, 0] < end[:, 0]).all() and (control[:, 1] < 0).all()  # an arc below
        assert ax.get_ylim()[0] < (control[:, 1] / 2).min()  # its lowest point shows
    finally:
        close(fig)
    assert (tmp_path / "t.png").stat().st_size > 0
