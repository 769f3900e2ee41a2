"""Join a Slurm switch tree and per-server GPU matrices into one cluster topology."""

from __future__ import annotations

from collections.abc import Mapping

import networkx as nx

from palopt.errors import InputError
from palopt.importers.nvidia_smi import GpuMatrix
from palopt.importers.slurm import SlurmTree
from palopt.topology import Topology

__all__ = ["assemble_topology"]


def assemble_topology(
    tree: SlurmTree | None,
    servers: Mapping[str, GpuMatrix],
    default: GpuMatrix | None = None,
) -> Topology:
    """Build a cluster topology from a switch tree and GPU matrices.

    Parameters
    ----------
    tree : SlurmTree or None
        The switches and hosts (:func:`palopt.importers.slurm.read_topology_conf`). ``None``: the
        hosts are the keys of ``servers``, under one ``cluster`` switch if there are several.
    servers : mapping
        Host name -> its GPU matrix, overriding ``default``.
    default : GpuMatrix, optional
        The matrix of every host of ``tree`` not in ``servers``.

    Returns
    -------
    Topology
        Server nodes are named after the hosts, GPUs ``<host>/gpu<n>``; servers in the tree's
        file order; the graph attribute ``sources`` lists the files used.

    Raises
    ------
    InputError
        For a host in ``servers`` that no switch of ``tree`` reaches, a host without a matrix, or
        no host at all.

    Examples
    --------
    >>> from palopt.importers.nvidia_smi import parse_nvidia_smi
    >>> from palopt.importers.slurm import parse_topology_conf
    >>> tree = parse_topology_conf("SwitchName=r1 Nodes=n[1-2]\\nSwitchName=top Switches=r1")
    >>> pair = parse_nvidia_smi("GPU0 GPU1\\nGPU0 X NV4\\nGPU1 NV4 X")
    >>> topo = assemble_topology(tree, {}, pair)
    >>> topo.gpu_ids[:2], topo.tiers
    (('n1/gpu0', 'n1/gpu1'), ('nvlink', 'server', 'rack', 'cluster'))
    """
    if tree is None:
        hosts = list(servers)
        graph = nx.Graph()
        if len(hosts) > 1:
            # The switch is named "cluster" unless a host is (then "cluster~1", ...).
            switch, n = "cluster", 0
            while switch in servers:
                n += 1
                switch = f"cluster~{n}"
            graph.add_node(switch, kind="switch", tier="cluster")
            for host in hosts:
                graph.add_edge(host, switch, link="network")
        sources = []
    else:
        hosts = list(tree.nodes)
        graph = tree.graph()
        known = set(hosts)
        stray = [h for h in servers if h not in known]
        if stray:
            raise InputError(
                f"server {stray[0]}", stray[0], f"no switch in {tree.source} reaches this node"
            )
        sources = [tree.source]
    if not hosts:
        raise InputError("servers", [], "no server: give a topology.conf or name servers")
    for host in hosts:
        matrix = servers.get(host, default)
        if matrix is None:
            raise InputError(
                f"server {host}", host, "no GPU matrix for this node: give a default or one for it"
            )
        graph.add_node(host, kind="server")
        matrix.add_to(graph, host)
        if matrix.source not in sources:
            sources.append(matrix.source)
    graph.graph["sources"] = sources
    return Topology.from_graph(graph)
