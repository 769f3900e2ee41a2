"""Topology: builders, node-link round trip, tier derivation and validation."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palopt import InputError, Topology, build_cluster, parse_shape
from palopt.topology import KINDS, LINKS


def brute_tier(topo: Topology, gpus: list[int]) -> str:
    """Tier by graph search: the smallest enclosing structure, found by walking the graph."""
    g = topo.graph
    names = [topo.gpu_ids[i] for i in gpus]
    if len(names) == 1:
        return topo.tiers[0]
    nv = nx.Graph((u, v) for u, v, d in g.edges(data=True) if d["link"] == "nvlink")
    if (
        all(n in nv for n in names)
        and nx.has_path(nv, names[0], names[-1])
        and all(nx.has_path(nv, names[0], n) for n in names)
    ):
        return "nvlink"
    servers = {next(m for m in g[n] if g.nodes[m]["kind"] == "server") for n in names}
    if len(servers) == 1:
        return "server"
    racks = {next(m for m in g[s] if g.nodes[m]["kind"] == "switch") for s in servers}
    return "rack" if len(racks) == 1 else "cluster"


def test_build_cluster_shape_and_names():
    topo = build_cluster(racks=2, servers_per_rack=3, gpus_per_server=4)
    assert topo.n_gpus == 24 and topo.n_servers == 6
    assert topo.tiers == ("server", "rack", "cluster")
    assert topo.gpu_ids[5] == "gpu5" and topo.server_of(5) == "server1"
    assert list(topo.server_start) == [0, 4, 8, 12, 16, 20, 24]
    assert topo.index("gpu7") == 7


def test_nvlink_islands_add_a_tier():
    topo = build_cluster(1, 2, 8, nvlink_island=4)
    assert topo.tiers == ("nvlink", "server", "rack", "cluster")
    assert topo.tier_of([0, 3]) == "nvlink"
    assert topo.tier_of([3, 4]) == "server"
    assert topo.tier_of([0, 8]) == "rack"
    assert topo.tier_of([5]) == "nvlink"


def test_tier_of_refuses_an_empty_index_array_and_bools():
    topo = build_cluster(1, 2, 4, nvlink_island=2)
    # An empty int64 array passes the dtype check: its tier would be the lowest, 'nvlink'.
    with pytest.raises(InputError, match="gpu = array.*: expected a non-empty list of GPU"):
        topo.tier_of(np.array([], dtype=np.int64))
    # numpy reads [0, True] as [0, 1]: tier_of answered 'nvlink' where server_of(True) refuses.
    for gpus, shown in (([0, True], "True"), ((np.False_, 1), repr(np.False_))):
        with pytest.raises(InputError, match=f"gpu = {re.escape(shown)}: expected a GPU index"):
            topo.tier_of(gpus)
    with pytest.raises(InputError, match="gpu = True: expected a GPU index"):
        topo.server_of(True)
    with pytest.raises(InputError, match="job.gpus = True: expected a GPU index"):
        topo.check_indices([3, True], "job.gpus")
    assert topo.tier_of(np.array([0, 1])) == "nvlink" and topo.tier_of([np.int64(0), 2]) == "server"


def test_nvlink_island_of_zero_is_an_input_error():
    # 4 % 0 would be a ZeroDivisionError, were 0 not refused first
    for island in (0, -2):
        with pytest.raises(
            InputError, match=rf"nvlink_island = {island}: must be a positive divisor of .* \(4\)"
        ):
            build_cluster(1, 1, 4, nvlink_island=island)


def test_build_cluster_builds_max_gpus_and_no_more(monkeypatch):
    monkeypatch.setattr("palopt.topology.MAX_GPUS", 8)
    assert build_cluster(1, 2, 4).n_gpus == 8
    for shape in ("1x3x4", "1x1x9"):  # 12 GPUs, and 9: one more than the most
        with pytest.raises(InputError, match=f"cluster = '{shape}': more than 8 GPUs"):
            build_cluster(*map(int, shape.split("x")))


@settings(max_examples=60, deadline=None)
@given(
    racks=st.integers(1, 3),
    servers=st.integers(1, 3),
    gpus=st.sampled_from([2, 4]),
    island=st.sampled_from([None, 2]),
    data=st.data(),
)
def test_tier_matches_graph_search(racks, servers, gpus, island, data):
    topo = build_cluster(racks, servers, gpus, nvlink_island=island)
    subset = data.draw(
        st.lists(st.integers(0, topo.n_gpus - 1), min_size=1, max_size=6, unique=True)
    )
    expected = brute_tier(topo, subset)
    if expected == "nvlink" and "nvlink" not in topo.tiers:
        expected = "server"
    assert topo.tier_of(subset) == expected


def test_node_link_round_trip():
    topo = build_cluster(2, 2, 4, nvlink_island=2)
    again = Topology.from_node_link(topo.to_node_link())
    assert again.gpu_ids == topo.gpu_ids and again.tiers == topo.tiers
    assert np.array_equal(again.groups, topo.groups)


def test_parse_shape():
    assert parse_shape("16x4").n_gpus == 64
    assert parse_shape("2x8x4").n_servers == 16
    with pytest.raises(InputError, match="cluster"):
        parse_shape("16by4")


def test_deeper_switch_tree_and_uneven_depth():
    g = nx.Graph()
    g.add_node("core", kind="switch", tier="cluster")
    for p in range(2):
        g.add_node(f"pod{p}", kind="switch", tier="pod")
        g.add_edge(f"pod{p}", "core", link="network")
        for r in range(2):
            rack = f"rack{p}{r}"
            g.add_node(rack, kind="switch", tier="rack")
            g.add_edge(rack, f"pod{p}", link="network")
            srv = f"s{p}{r}"
            g.add_node(srv, kind="server")
            g.add_edge(srv, rack, link="network")
            for k in range(2):
                gid = f"{srv}g{k}"
                g.add_node(gid, kind="gpu", local=k)
                g.add_edge(gid, srv, link="pcie")
    topo = Topology.from_graph(g)
    assert topo.tiers == ("server", "rack", "pod", "cluster")
    assert topo.tier_of([topo.index("s00g0"), topo.index("s01g0")]) == "pod"
    assert topo.tier_of([topo.index("s00g0"), topo.index("s10g0")]) == "cluster"


def _unbalanced(tags: dict[str, str], pad: bool = False) -> nx.Graph:
    """core -> spine -> leafA (servers a1, a2); core -> leafB (b1, b2), optionally through a
    pass-through switch (what the Slurm importer used to insert); core also holds server c1."""
    g = nx.Graph()
    g.add_node("core", kind="switch", tier="cluster")
    links = [("spine", "core"), ("leafA", "spine")]
    links += [("leafB~1", "core"), ("leafB", "leafB~1")] if pad else [("leafB", "core")]
    for sw, up in links:
        g.add_node(sw, kind="switch", **({"tier": tags[sw]} if sw in tags else {}))
        g.add_edge(sw, up, link="network")
    for srv, up in [
        ("a1", "leafA"),
        ("a2", "leafA"),
        ("b1", "leafB"),
        ("b2", "leafB"),
        ("c1", "core"),
        ("c2", "core"),
    ]:
        g.add_node(srv, kind="server")
        g.add_edge(srv, up, link="network")
        g.add_node(f"{srv}g", kind="gpu", local=0)
        g.add_edge(f"{srv}g", srv, link="pcie")
    return g


@pytest.mark.parametrize(
    ("tags", "pad"),
    [
        ({}, False),
        ({"leafB": "rack", "leafA": "rack", "spine": "spine"}, False),
        ({"leafB~1": "level1"}, True),
    ],
)
def test_in_an_unbalanced_tree_servers_on_one_leaf_switch_share_the_rack(tags, pad):
    # leafB hangs one level higher than leafA; its servers were charged the level above rack.
    topo = Topology.from_graph(_unbalanced(tags, pad))
    assert topo.tiers[:2] == ("server", "rack") and topo.tiers[-1] == "cluster"

    def tier(*servers: str) -> str:
        return topo.tier_of([topo.index(f"{s}g") for s in servers])

    assert tier("a1", "a2") == tier("b1", "b2") == "rack"
    assert tier("a1", "b1") == tier("c1", "c2") == tier("b1", "c1") == "cluster"


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda g: g.add_node("lost", kind="gpu"), "disconnected"),
        (lambda g: g.add_node("odd", kind="toaster"), "kind"),
        (lambda g: g.add_edge("gpu0", "gpu4", link="nvlink"), "same server"),
        (lambda g: g.add_edge("gpu0", "gpu4", link="pcie"), "same server"),
        (lambda g: g.add_edge("gpu0", "rack0", link="network"), "not to a switch"),
        (lambda g: g.add_edge("gpu0", "server1", link="pcie"), "exactly one server"),
        (lambda g: nx.set_edge_attributes(g, {("gpu0", "server0"): "wifi"}, "link"), "link"),
        # a link type that does not fit the kinds it joins was built and ignored
        (
            lambda g: nx.set_edge_attributes(g, {("gpu0", "server0"): "network"}, "link"),
            r"\.link = 'network': a (gpu and a server|server and a gpu) are joined by 'pcie'",
        ),
        (
            lambda g: g.add_edge("gpu0", "gpu1", link="pcie"),
            r"edges\[gpu0-gpu1\]\.link = 'pcie': a gpu and a gpu are joined by 'nvlink'",
        ),
        (
            lambda g: nx.set_edge_attributes(g, {("server0", "rack0"): "pcie"}, "link"),
            r"\.link = 'pcie': a (server and a switch|switch and a server) are joined by 'network'",
        ),
        # accepted and ignored before: a tier is a switch's, a local index a GPU's
        (
            lambda g: g.nodes["server0"].update(tier="rack"),
            r"nodes\[server0\].tier = 'rack': only a switch node has a tier",
        ),
        (
            lambda g: g.nodes["rack0"].update(local=0),
            r"nodes\[rack0\].local = 0: only a gpu node has a local",
        ),
    ],
)
def test_invalid_graphs_name_the_problem(mutate, field):
    g = nx.Graph(build_cluster(1, 2, 4).graph)
    mutate(g)
    with pytest.raises(InputError, match=field):
        Topology.from_graph(g)


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d.__setitem__("nodes", "gpu0"), "topology.nodes"),
        (lambda d: d["nodes"].__setitem__(0, 7), "topology.nodes[0]"),
        (lambda d: d["nodes"][0].__setitem__("id", None), "topology.nodes[0].id"),
        (lambda d: d["edges"][0].__setitem__("target", ["rack0"]), "topology.edges[0].target"),
        (lambda d: d.__setitem__("graph", []), "topology.graph"),
        (
            lambda d: d.update(multigraph=True) or d["edges"][0].update(key=[]),
            "topology.multigraph",
        ),
        # networkx made a graph of these (a directed one; a node without a kind, named as such)
        (lambda d: d.update(directed="abc"), "topology.directed"),
        (lambda d: d["edges"][5].update(target="gpuX"), "topology.edges[5].target"),
    ],
)
def test_malformed_node_link_data_names_the_field(edit, field):
    data = build_cluster(1, 2, 4).to_node_link()
    edit(data)
    with pytest.raises(InputError) as err:
        Topology.from_node_link(data)
    assert err.value.field == field, str(err.value)


def test_attributes_palopt_does_not_read_are_kept_with_a_warning(caplog):
    data = build_cluster(1, 2, 4).to_node_link()
    data["nodes"][-1]["slowdown"] = 1.3  # would be a slowdown only in the user's mind
    data["edges"][0]["bandwith"] = 100
    topo = Topology.from_node_link(data)
    assert topo.graph.nodes[data["nodes"][-1]["id"]]["slowdown"] == 1.3
    assert "node attributes palopt does not read: 'slowdown'" in caplog.text
    assert "edge attributes palopt does not read: 'bandwith'" in caplog.text
    caplog.clear()
    Topology.from_node_link(build_cluster(1, 2, 4).to_node_link())
    assert not caplog.text


def test_what_topology_build_records_from_nvidia_smi_reads_back_without_a_warning(caplog):
    # `topology build` keeps a server's matrix as gpu_paths and an NVLink's lanes as nvlinks;
    # reading its own output warned of both on every solve.
    data = build_cluster(1, 2, 4).to_node_link()
    server = next(n for n in data["nodes"] if n["kind"] == "server")
    server["gpu_paths"] = [["X", "NV2"], ["NV2", "X"]]
    data["edges"][0]["nvlinks"] = 2
    topo = Topology.from_node_link(data)
    assert not caplog.text
    assert topo.graph.nodes[server["id"]]["gpu_paths"] == [["X", "NV2"], ["NV2", "X"]]
    data["edges"][0]["gpu_paths"] = []  # on the wrong kind it is as unknown as any other
    Topology.from_node_link(data)
    assert "edge attributes palopt does not read: 'gpu_paths'" in caplog.text


def test_a_server_with_no_gpu_is_left_out_with_a_warning(caplog):
    # it was left out without a word ("2 servers" of the 3 in the file)
    data = build_cluster(1, 2, 2).to_node_link()
    rack = next(n["id"] for n in data["nodes"] if n["kind"] == "switch")
    data["nodes"].append({"id": "empty", "kind": "server"})
    data["edges"].append({"source": "empty", "target": rack, "link": "network"})
    topo = Topology.from_node_link(data)
    assert topo.n_servers == 2 and "empty" not in topo.server_ids
    assert "servers with no GPU, left out of the cluster: 'empty'" in caplog.text


def test_gpu_lookup_rejects_a_name_that_is_not_a_string():
    topo = build_cluster(1, 2, 4)
    with pytest.raises(InputError, match="busy = \\['gpu0'\\]: no GPU"):
        topo.indices([["gpu0"]], "busy")


def test_servers_without_switch_rejected():
    g = nx.Graph()
    for s in range(2):
        g.add_node(f"s{s}", kind="server")
        g.add_node(f"g{s}", kind="gpu")
        g.add_edge(f"g{s}", f"s{s}", link="pcie")
    g.add_edge("s0", "s1", link="network")
    with pytest.raises(InputError, match="switch"):
        Topology.from_graph(g)


def test_a_single_switch_is_the_root_whatever_its_tier():
    # Neither root=True nor tier 'cluster': the only switch there is is the root all the same.
    g = nx.Graph()
    g.add_node("sw", kind="switch", tier="rack")
    for s in range(2):
        g.add_node(f"s{s}", kind="server")
        g.add_edge(f"s{s}", "sw", link="network")
        g.add_node(f"g{s}", kind="gpu")
        g.add_edge(f"g{s}", f"s{s}", link="pcie")
    topo = Topology.from_graph(g)
    assert topo.tiers == ("server", "rack") and topo.switch_tier == {"sw": "rack"}
    assert topo.tier_of([0, 1]) == "rack"


def test_single_server_needs_no_switch():
    g = nx.Graph()
    g.add_node("host", kind="server")
    for k in range(4):
        g.add_node(f"g{k}", kind="gpu", local=k)
        g.add_edge(f"g{k}", "host", link="pcie")
    topo = Topology.from_graph(g)
    assert topo.tiers == ("server",)
    assert all(topo.tier_of(list(c)) == "server" for c in itertools.combinations(range(4), 2))


_IDS = [n["id"] for n in build_cluster(2, 2, 2).to_node_link()["nodes"]]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_IDS), st.sampled_from(_IDS), st.sampled_from(LINKS)),
        max_size=3,
    ),
    st.lists(st.tuples(st.sampled_from(_IDS), st.sampled_from(KINDS)), max_size=2),
    st.sets(st.integers(0, 20), max_size=3),
)
def test_rewired_graphs_build_or_raise_input_errors(added, rekinded, dropped):
    data = build_cluster(2, 2, 2).to_node_link()
    data["edges"] = [e for i, e in enumerate(data["edges"]) if i not in dropped]
    data["edges"] += [{"source": u, "target": v, "link": link} for u, v, link in added]
    kinds = dict(rekinded)
    for node in data["nodes"]:
        node["kind"] = kinds.get(node["id"], node["kind"])
    try:
        topo = Topology.from_node_link(data)
    except InputError:
        return
    assert topo.n_gpus == len(topo.gpu_ids) and topo.groups.shape[1] == topo.n_gpus


def test_server_tier_is_above_the_nvlink_tier_when_there_is_one() -> None:
    """``server_tier`` names the tier of one server, NVLink islands or not: solvers that group
    GPUs by server (``groups[server_tier]``) and price within-server placements read it."""
    for island, expect in ((None, 0), (2, 1)):
        topo = build_cluster(1, 2, 4, nvlink_island=island)
        assert topo.server_tier == expect
        assert topo.tiers[topo.server_tier] == "server"
        assert topo.groups[topo.server_tier].tolist() == topo.gpu_server.tolist()


def test_a_switch_marked_root_is_the_root_whatever_the_others_are_named() -> None:
    """``root: true`` marks the root switch even when the switches below it carry the tier name
    ``cluster`` (a site whose pods are called clusters): the tiers read up from the pods to the
    marked root, and GPUs of two pods share only the root's tier."""
    g = nx.Graph(build_cluster(2, 1, 2).graph)
    g.nodes["cluster"].update(root=True, tier="site")
    for rack in ("rack0", "rack1"):
        g.nodes[rack]["tier"] = "cluster"
    topo = Topology.from_graph(g)
    assert topo.tiers == ("server", "cluster", "site")
    assert topo.switch_tier == {"cluster": "site", "rack0": "cluster", "rack1": "cluster"}
    assert (topo.tier_of([0, 1]), topo.tier_of([0, 2])) == ("server", "site")


def test_the_loop_named_is_the_same_whatever_the_hash_seed() -> None:
    # The switches and servers were searched for a loop through a subgraph view, whose order
    # follows a set's: the loop named changed with PYTHONHASHSEED.
    script = (
        "import networkx as nx\n"
        "from palopt import InputError, Topology, build_cluster\n"
        "g = nx.Graph(build_cluster(6, 3, 2).graph)\n"
        "g.add_edge('server4', 'rack3', link='network')\n"
        "try:\n"
        "    Topology.from_graph(g)\n"
        "except InputError as exc:\n"
        "    print(exc)\n"
    )
    messages = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(4)
    }
    assert messages == {
        "topology.edges = ['cluster', 'rack1', 'server4', 'rack3']: switches and servers must "
        "form a tree: these form a loop (a server or switch linked to two switches above it?)\n"
    }
