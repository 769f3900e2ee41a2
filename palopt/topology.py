"""Cluster topology: a networkx graph of GPUs, servers and switches, and the tier of any GPU set.

The graph has nodes of three kinds (node attribute ``kind``):

- ``gpu``: a leaf; joined to exactly one ``server`` by a ``pcie`` link, and to other GPUs of the
  same server by ``nvlink`` links (an NVLink island is a connected component of those links);
- ``server``: a host; joined to one switch by a ``network`` link (a one-server cluster needs none);
- ``switch``: a network switch; switches form a tree whose root is the switch with
  ``tier="cluster"`` (or ``root=True``, or the only switch). A switch's ``tier`` names its
  level. Levels count down from the root, except that every leaf switch (one with no switch
  below it) is at the deepest level, ``rack`` by default, however deep it hangs: the servers on
  one leaf switch share the lowest switch tier even in an unbalanced tree.

From the graph, :class:`Topology` derives once, per GPU, the id of the group holding it at every
tier, lowest first: ``nvlink`` (only if the graph has NVLink links) < ``server`` < switch levels
from the leaves up to the root. The tier of a GPU set is the lowest tier at which all its GPUs
share a group: a few array lookups.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any

import networkx as nx
import numpy as np

from palopt._frozen import FrozenDict, frozen_array, frozen_state
from palopt.errors import PRINTABLE, InputError, check_count, check_fields

#: The most GPUs :func:`build_cluster` builds (a shape such as ``100000x100000`` would otherwise
#: fill the memory before anything else is checked).
MAX_GPUS = 2**20

#: Above the largest GPU index in a server (a node's ``local``, its CUDA_VISIBLE_DEVICES
#: number): ``1e30`` was read, and written to Slurm as a 31-digit device number.
MAX_LOCAL = 2**16

__all__ = ["Topology", "build_cluster", "parse_shape", "require_topology"]

GPU, SERVER, SWITCH = "gpu", "server", "switch"
NVLINK, PCIE, NETWORK = "nvlink", "pcie", "network"
KINDS = (GPU, SERVER, SWITCH)
#: The keys of networkx's node-link form (``links`` is its name for ``edges`` before 3.4).
NODE_LINK_FIELDS = ("directed", "multigraph", "graph", "nodes", "edges", "links")
#: The node and edge attributes palopt reads; others are kept with the graph but mean nothing.
NODE_ATTRIBUTES = ("id", "kind", "tier", "root", "local")
EDGE_ATTRIBUTES = ("source", "target", "link")
#: What ``palopt topology build`` records from ``nvidia-smi`` beside them (a server's whole
#: matrix, an NVLink's lane count): kept and read by nothing, like unknown ones, but not warned of.
RECORDED_NODE_ATTRIBUTES, RECORDED_EDGE_ATTRIBUTES = ("gpu_paths",), ("nvlinks",)
#: The kind of node each node attribute belongs to.
ATTRIBUTE_KIND = {"tier": SWITCH, "root": SWITCH, "local": GPU}
LINKS = (NVLINK, PCIE, NETWORK)
#: The link that joins each pair of node kinds (a GPU is never joined to a switch).
LINK_OF = {
    frozenset((GPU,)): NVLINK,
    frozenset((GPU, SERVER)): PCIE,
    frozenset((SERVER, SWITCH)): NETWORK,
    frozenset((SWITCH,)): NETWORK,
}

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class Topology:
    """A validated cluster graph with dense GPU and server indices and per-tier group ids.

    Build one with :func:`build_cluster` or :meth:`Topology.from_graph`; do not call the
    constructor directly.

    Attributes
    ----------
    graph : networkx.Graph
        The cluster graph, frozen (``networkx.freeze``: nodes and edges cannot be added or
        removed; copy it with ``networkx.Graph(topology.graph)`` to edit).
    gpu_ids, server_ids : tuple of str
        Node names in dense index order (the *topology order*): servers in the order the graph
        lists them, and each server's GPUs, with consecutive indices, by their ``local``
        index, or in the order the graph lists them if they have none.
    tiers : tuple of str
        Tier names, lowest first, e.g. ``("nvlink", "server", "rack", "cluster")``; ``nvlink`` is
        present only when the graph has NVLink links.
    groups : numpy.ndarray
        ``groups[t, g]`` is the id of the group that holds GPU ``g`` at tier ``t``.
    gpu_server : numpy.ndarray
        Server index of each GPU.
    server_start : numpy.ndarray
        GPUs of server ``s`` are ``server_start[s]:server_start[s + 1]``.
    switch_tier : dict
        The tier of each switch (its ``tier`` attribute, or the name derived for its level).

    Examples
    --------
    >>> topo = build_cluster(racks=2, servers_per_rack=2, gpus_per_server=4)
    >>> topo.n_gpus, topo.n_servers, topo.tiers
    (16, 4, ('server', 'rack', 'cluster'))
    >>> topo.index("gpu5"), topo.server_of(5), topo.tier_of([0, 1]), topo.tier_of([0, 4, 9])
    (5, 'server1', 'server', 'cluster')
    """

    graph: nx.Graph
    gpu_ids: tuple[str, ...]
    server_ids: tuple[str, ...]
    tiers: tuple[str, ...]
    groups: np.ndarray
    gpu_server: np.ndarray
    server_start: np.ndarray
    switch_tier: dict[str, str] = field(repr=False)
    _gpu_index: dict[str, int] = field(repr=False)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Unpickled and deep-copied topologies get new arrays and mappings: read-only too.
        self.__dict__.update(frozen_state(state))

    @property
    def n_gpus(self) -> int:
        """Number of GPUs.

        Examples
        --------
        >>> build_cluster(2, 2, 4).n_gpus
        16
        """
        return len(self.gpu_ids)

    @property
    def n_servers(self) -> int:
        """Number of servers.

        Examples
        --------
        >>> build_cluster(2, 2, 4).n_servers
        4
        """
        return len(self.server_ids)

    @property
    def server_sizes(self) -> np.ndarray:
        """Number of GPUs of each server.

        Examples
        --------
        >>> build_cluster(1, 2, 4).server_sizes.tolist()
        [4, 4]
        """
        return np.diff(self.server_start)

    def index(self, gpu_id: str, field_name: str = "gpu") -> int:
        """Dense index of a GPU.

        Parameters
        ----------
        gpu_id : str
            The GPU's node name.
        field_name : str, default "gpu"
            What an error names.

        Returns
        -------
        int

        Raises
        ------
        InputError
            Naming ``field_name`` if there is no GPU of that name.

        Examples
        --------
        >>> topo = build_cluster(1, 2, 4)
        >>> topo.index("gpu5")
        5
        >>> topo.index("gpu9", "busy[0]")
        Traceback (most recent call last):
        ...
        palopt.errors.InputError: busy[0] = 'gpu9': no GPU of that id in the topology
        """
        idx = self._gpu_index.get(gpu_id) if isinstance(gpu_id, str) else None
        if idx is None:
            raise InputError(field_name, gpu_id, "no GPU of that id in the topology")
        return idx

    def indices(self, gpu_ids: Iterable[str], field_name: str = "gpus") -> np.ndarray:
        """Dense indices of GPU names, in the given order.

        Parameters
        ----------
        gpu_ids : iterable of str
            GPU node names.
        field_name : str, default "gpus"
            What an error names.

        Returns
        -------
        numpy.ndarray
            The indices, as ``int64``.

        Raises
        ------
        InputError
            Naming ``field_name`` if a name is unknown.

        Examples
        --------
        >>> build_cluster(1, 2, 4).indices(["gpu3", "gpu0"]).tolist()
        [3, 0]
        """
        return np.asarray([self.index(g, field_name) for g in gpu_ids], dtype=np.int64)

    def tier_index(self, gpus: Sequence[int] | np.ndarray) -> int:
        """Index (into :attr:`tiers`) of the lowest tier holding all of ``gpus``.

        Parameters
        ----------
        gpus : sequence of int
            Dense GPU indices, at least one.

        Returns
        -------
        int

        Examples
        --------
        >>> topo = build_cluster(racks=2, servers_per_rack=2, gpus_per_server=4)
        >>> topo.tiers[topo.tier_index([0, 1])], topo.tiers[topo.tier_index([0, 8])]
        ('server', 'cluster')
        """
        g = self.groups[:, np.asarray(gpus, dtype=np.int64)]
        same = (g == g[:, :1]).all(axis=1)
        return int(np.argmax(same))

    def tier_of(self, gpus: Sequence[int] | np.ndarray) -> str:
        """Name of the lowest tier holding all of ``gpus`` (see :meth:`tier_index`, which the
        solvers call without checks).

        Parameters
        ----------
        gpus : sequence of int
            Dense GPU indices.

        Returns
        -------
        str

        Raises
        ------
        InputError
            Unless ``gpus`` is a non-empty list of GPU indices of this topology.

        Examples
        --------
        >>> topo = build_cluster(racks=2, servers_per_rack=2, gpus_per_server=4)
        >>> topo.tier_of([0, 1]), topo.tier_of([0, 4]), topo.tier_of([0, 8])
        ('server', 'rack', 'cluster')
        """
        return self.tiers[self.tier_index(self.check_indices(gpus, "gpu"))]

    @property
    def server_tier(self) -> int:
        """Index of the ``server`` tier in :attr:`tiers` (1 with NVLink islands, else 0).

        Examples
        --------
        >>> build_cluster(1, 2, 4).server_tier
        0
        """
        return self.tiers.index(SERVER)

    def server_of(self, gpu: int) -> str:
        """Name of the server holding GPU index ``gpu``.

        Parameters
        ----------
        gpu : int
            A dense GPU index.

        Returns
        -------
        str

        Raises
        ------
        InputError
            Unless ``gpu`` is a GPU index of this topology.

        Examples
        --------
        >>> build_cluster(1, 2, 4).server_of(5)
        'server1'
        """
        if isinstance(gpu, (bool, np.bool_)) or not isinstance(gpu, (int, np.integer)):
            raise InputError("gpu", gpu, "expected a GPU index")
        self.check_indices([gpu], "gpu")
        return self.server_ids[int(self.gpu_server[gpu])]

    def check_indices(self, gpus: Sequence[int] | np.ndarray, field_name: str) -> np.ndarray:
        """``gpus`` as an array of dense GPU indices, checked.

        Parameters
        ----------
        gpus : sequence of int
        field_name : str
            What an error names.

        Returns
        -------
        numpy.ndarray
            The indices, as ``int64``.

        Raises
        ------
        InputError
            Unless ``gpus`` is a non-empty list of integers from 0 to ``n_gpus - 1`` (an
            index out of range is named, as is a bool: ``True`` is no GPU index).

        Examples
        --------
        >>> build_cluster(1, 1, 4).check_indices([0, 9], "job.gpus")
        Traceback (most recent call last):
        ...
        palopt.errors.InputError: job.gpus = 9: GPU indices are 0 to 3
        """
        index = np.asarray(gpus)
        if index.ndim != 1 or not len(index) or index.dtype.kind not in "iu":
            raise InputError(field_name, gpus, "expected a non-empty list of GPU indices")
        if not isinstance(gpus, np.ndarray):  # numpy reads [0, True] as the integers [0, 1]
            for gpu in gpus:
                if isinstance(gpu, (bool, np.bool_)):
                    raise InputError(field_name, gpu, "expected a GPU index")
        bad = (index < 0) | (index >= self.n_gpus)
        if bad.any():
            raise InputError(
                field_name, int(index[bad][0]), f"GPU indices are 0 to {self.n_gpus - 1}"
            )
        return index.astype(np.int64)

    def to_node_link(self) -> dict[str, Any]:
        """The graph in networkx node-link form (``edges`` key), ready for JSON.

        numpy values among the graph's attributes become Python ones.

        Returns
        -------
        dict
            ``directed``, ``multigraph``, ``graph``, ``nodes`` and ``edges``, as
            :meth:`from_node_link` reads them.

        Raises
        ------
        InputError
            For an attribute value JSON cannot hold (a set, an object), named by its path.

        Examples
        --------
        >>> data = build_cluster(1, 1, 2).to_node_link()  # two switches, a server, two GPUs
        >>> sorted(data), len(data["nodes"]), len(data["edges"])
        (['directed', 'edges', 'graph', 'multigraph', 'nodes'], 5, 4)
        """
        return _json_value(nx.node_link_data(self.graph, edges="edges"), "topology")

    @classmethod
    def from_node_link(cls, data: dict[str, Any], field_name: str = "topology") -> Topology:
        """Build from networkx node-link data (``nodes`` and ``edges`` or ``links``).

        Node and edge attributes other than :data:`NODE_ATTRIBUTES` and
        :data:`EDGE_ATTRIBUTES` are kept with the graph, and a warning (``logging``) names them:
        palopt reads nothing from them, so a misspelt ``local`` would otherwise pass unseen.

        Parameters
        ----------
        data : dict
            Node-link data, as :meth:`to_node_link` writes it.
        field_name : str, default "topology"
            Prefix for error messages.

        Returns
        -------
        Topology

        Raises
        ------
        InputError
            If the data is not node-link form or the graph is not a valid cluster.

        Examples
        --------
        >>> topo = Topology.from_node_link(build_cluster(1, 2, 2).to_node_link())
        >>> topo.gpu_ids, topo.tiers
        (('gpu0', 'gpu1', 'gpu2', 'gpu3'), ('server', 'rack', 'cluster'))
        >>> Topology.from_node_link({"nodes": []})
        Traceback (most recent call last):
        ...
        palopt.errors.InputError: topology = ['nodes']: expected an 'edges' list
        """
        if not isinstance(data, dict) or "nodes" not in data:
            raise InputError(field_name, data, "expected node-link data with 'nodes' and 'edges'")
        edges_key = "edges" if "edges" in data else "links"
        if edges_key not in data:
            raise InputError(field_name, sorted(data), "expected an 'edges' list")
        check_fields(data, NODE_LINK_FIELDS, f"{field_name}.")
        if "edges" in data and "links" in data:
            raise InputError(field_name, "links", "give the edges once, as 'edges' or 'links'")
        _check_items(data["nodes"], ("id",), f"{field_name}.nodes")
        _check_items(data[edges_key], ("source", "target"), f"{field_name}.{edges_key}")
        for what, items, known, recorded in (
            ("node", data["nodes"], NODE_ATTRIBUTES, RECORDED_NODE_ATTRIBUTES),
            ("edge", data[edges_key], EDGE_ATTRIBUTES, RECORDED_EDGE_ATTRIBUTES),
        ):
            unread = sorted({key for item in items for key in item} - {*known, *recorded})
            if unread:  # a typo ("locl") or a setting palopt does not take ("slowdown")
                log.warning(
                    "%s: %s attributes palopt does not read: %s (it reads %s)",
                    field_name,
                    what,
                    ", ".join(map(repr, unread)),
                    ", ".join(known),
                )
        # networkx would merge a node given twice, and keep the last of two edges between the
        # same nodes (an NVLink given, then PCIe, would be no NVLink).
        seen: set[Any] = set()
        for what, items, key in (
            ("nodes", data["nodes"], lambda item: item["id"]),
            (edges_key, data[edges_key], lambda item: frozenset((item["source"], item["target"]))),
        ):
            seen.clear()
            for i, item in enumerate(items):
                if key(item) in seen:
                    raise InputError(f"{field_name}.{what}[{i}]", item, f"given twice in {what}")
                seen.add(key(item))
        ids = {item["id"] for item in data["nodes"]}
        for i, item in enumerate(data[edges_key]):
            for end in ("source", "target"):  # networkx would add the node, with no kind
                if item[end] not in ids:
                    raise InputError(
                        f"{field_name}.{edges_key}[{i}].{end}", item[end], "no node has this id"
                    )
        for flag in ("directed", "multigraph"):  # networkx reads any true value as yes
            if data.get(flag, False) is not False:
                raise InputError(
                    f"{field_name}.{flag}", data[flag], "must be false (a cluster is one graph)"
                )
        if not isinstance(data.get("graph", {}), dict):
            raise InputError(f"{field_name}.graph", data["graph"], "expected an object")
        # The attributes palopt does not read are kept with the graph and written back: a NaN
        # or Infinity there (json.loads reads them) would make a file other JSON readers refuse.
        _json_value(data.get("graph", {}), f"{field_name}.graph")
        for part, read in (("nodes", NODE_ATTRIBUTES), (edges_key, EDGE_ATTRIBUTES)):
            for i, entry in enumerate(data[part]):
                for name, value in entry.items():
                    if name not in read:
                        _json_value(value, f"{field_name}.{part}[{i}].{name}")
        try:
            graph = nx.node_link_graph(
                {"directed": False, "multigraph": False, "graph": {}, **data}, edges=edges_key
            )
        except (KeyError, TypeError, ValueError, nx.NetworkXError) as exc:
            # What the checks above leave to networkx, e.g. an unhashable multigraph edge key.
            raise InputError(field_name, str(exc)[:80], "bad node-link data") from None
        return cls.from_graph(graph, field_name=field_name)

    @classmethod
    def from_graph(cls, graph: nx.Graph, field_name: str = "topology") -> Topology:
        """Validate a cluster graph and derive dense indices and tier groups.

        Parameters
        ----------
        graph : networkx.Graph
            Nodes carry ``kind`` (gpu, server, switch); edges carry ``link`` (nvlink, pcie,
            network). GPUs may carry ``local`` (index within the server, for every GPU of
            a server or none), which orders them.
        field_name : str
            Prefix for error messages.

        Returns
        -------
        Topology

        Raises
        ------
        InputError
            For an unknown kind or link, a ``tier`` or ``root`` on a node that is not a switch
            or a ``local`` on one that is not a GPU, any of them ``None``, a ``root`` that is not
            a bool, a GPU not on exactly one server, a GPU linked to a switch or to a GPU of
            another server, an NVLink to a server or switch, a link of the wrong type for the
            kinds it joins (see the module documentation), a disconnected graph, a switch hung
            from a server, switch levels with clashing tier names, or a ``local`` index that is
            not an integer >= 0, is repeated in a server, or is missing where another GPU of
            the server has one.

        Examples
        --------
        One switch, one server, two GPUs:

        >>> import networkx as nx
        >>> g = nx.Graph()
        >>> g.add_nodes_from([("sw", {"kind": "switch"}), ("s0", {"kind": "server"})])
        >>> g.add_nodes_from([("g0", {"kind": "gpu"}), ("g1", {"kind": "gpu"})])
        >>> g.add_edges_from([("sw", "s0", {"link": "network"}), ("s0", "g0", {"link": "pcie"}),
        ...                   ("s0", "g1", {"link": "pcie"})])
        >>> topo = Topology.from_graph(g)
        >>> topo.gpu_ids, topo.tiers
        (('g0', 'g1'), ('server', 'cluster'))
        >>> g.add_node("x", kind="tpu")
        >>> Topology.from_graph(g)
        Traceback (most recent call last):
        ...
        palopt.errors.InputError: topology.nodes[x].kind = 'tpu': must be one of gpu, server, switch
        """
        if graph.is_multigraph() or graph.is_directed():
            # nx.Graph keeps the last edge of each pair of nodes: an NVLink, then a PCIe link
            # between two GPUs (or one each way) would be no NVLink.
            links: dict[frozenset[Any], Any] = {}
            for u, v, link in graph.edges(data="link"):
                if links.setdefault(frozenset((u, v)), link) != link:
                    raise InputError(
                        f"{field_name}.edges[{u}-{v}].link",
                        link,
                        f"these nodes are also linked by {links[frozenset((u, v))]!r}",
                    )
        graph = nx.Graph(graph)
        if graph.number_of_nodes() == 0:
            raise InputError(f"{field_name}.nodes", [], "the topology has no nodes")
        for node, data in graph.nodes(data=True):
            if not isinstance(node, str):
                raise InputError(f"{field_name}.nodes", node, "node ids must be strings")
            if not node or not node.isprintable():  # tables, messages and Slurm lines print it
                raise InputError(f"{field_name}.nodes", node, f"a node id {PRINTABLE}")
            if data.get("kind") not in KINDS:
                raise InputError(
                    f"{field_name}.nodes[{node}].kind",
                    data.get("kind"),
                    f"must be one of {', '.join(KINDS)}",
                )
            for attr, owner in ATTRIBUTE_KIND.items():
                if attr not in data:
                    continue
                where = f"{field_name}.nodes[{node}].{attr}"
                if data["kind"] != owner:
                    raise InputError(
                        where,
                        data[attr],
                        f"only a {owner} node has a {attr} (this is a {data['kind']})",
                    )
                if data[attr] is None:  # JSON's null: leave the attribute out instead
                    raise InputError(where, None, f"expected a value; leave {attr} out for none")
            if not isinstance(data.get("root", False), bool):
                raise InputError(
                    f"{field_name}.nodes[{node}].root", data["root"], "must be true or false"
                )
        for u, v, data in graph.edges(data=True):
            if u == v:
                raise InputError(f"{field_name}.edges[{u}-{v}]", u, "a node linked to itself")
            if data.get("link") not in LINKS:
                raise InputError(
                    f"{field_name}.edges[{u}-{v}].link",
                    data.get("link"),
                    f"must be one of {', '.join(LINKS)}",
                )
        if not nx.is_connected(graph):
            parts = sorted(sorted(c)[0] for c in nx.connected_components(graph))
            raise InputError(
                f"{field_name}",
                parts[:5],
                "the topology is disconnected (one node of each part shown)",
            )
        kind = nx.get_node_attributes(graph, "kind")
        servers = [n for n in graph if kind[n] == SERVER]
        if not servers:
            raise InputError(f"{field_name}.nodes", [], "the topology has no server")
        server_of: dict[str, str] = {}
        for node in graph:
            if kind[node] != GPU:
                continue
            hosts = [m for m in graph[node] if kind[m] == SERVER]
            switch = next((m for m in graph[node] if kind[m] == SWITCH), None)
            if switch is not None:
                raise InputError(
                    f"{field_name}.nodes[{node}]",
                    switch,
                    "a GPU links to its server and GPUs only, not to a switch",
                )
            if len(hosts) != 1:
                raise InputError(
                    f"{field_name}.nodes[{node}]",
                    hosts,
                    "a GPU must be linked to exactly one server",
                )
            server_of[node] = hosts[0]
        if not server_of:
            raise InputError(f"{field_name}.nodes", [], "the topology has no GPU")

        server_order = {s: i for i, s in enumerate(servers)}
        server_ids = tuple(s for s in servers if any(True for _ in _gpus_of(graph, s, kind)))
        if len(server_ids) < len(servers):  # kept in the graph, but no job can run there
            empty = [s for s in servers if s not in server_ids]
            log.warning(
                "%s: servers with no GPU, left out of the cluster: %s",
                field_name,
                ", ".join(map(repr, empty[:5])) + (", ..." if len(empty) > 5 else ""),
            )
        # ``local``, where given, is the GPU's index in its server (CUDA_VISIBLE_DEVICES): on
        # every GPU of a server or on none (a GPU without one would be guessed at an index
        # another GPU has).
        locals_seen: dict[tuple[str, int], str] = {}
        numbered: dict[str, str] = {}
        for g, host in server_of.items():
            local = graph.nodes[g].get("local")
            if local is None:
                continue
            numbered.setdefault(host, g)
            integral = isinstance(local, (int, np.integer)) or (
                isinstance(local, float) and local.is_integer()  # JSON's 2.0
            )
            if isinstance(local, bool) or not integral or not 0 <= local < MAX_LOCAL:
                raise InputError(
                    f"{field_name}.nodes[{g}].local",
                    local,
                    f"expected an index from 0 to {MAX_LOCAL - 1} in its server",
                )
            other = locals_seen.setdefault((host, int(local)), g)
            if other != g:
                raise InputError(
                    f"{field_name}.nodes[{g}].local", local, f"GPU {other} of {host} has it too"
                )

        for g, host in server_of.items():
            if host in numbered and graph.nodes[g].get("local") is None:
                raise InputError(
                    f"{field_name}.nodes[{g}].local",
                    None,
                    f"missing, while GPU {numbered[host]} of {host} has one: give every GPU of "
                    "a server its local index, or none",
                )
        listed = {n: i for i, n in enumerate(graph)}

        def gpu_key(g: str) -> tuple[int, int]:
            local = graph.nodes[g].get("local")
            return (server_order[server_of[g]], listed[g] if local is None else int(local))

        gpu_ids = tuple(sorted(server_of, key=gpu_key))
        gpu_index = {g: i for i, g in enumerate(gpu_ids)}
        server_index = {s: i for i, s in enumerate(server_ids)}
        gpu_server = np.array([server_index[server_of[g]] for g in gpu_ids], dtype=np.int64)
        server_start = np.searchsorted(gpu_server, np.arange(len(server_ids) + 1)).astype(np.int64)

        island = np.arange(len(gpu_ids), dtype=np.int64)
        nvlinked = nx.Graph()
        for u, v, data in graph.edges(data=True):
            if kind[u] == GPU and kind[v] == GPU and server_of[u] != server_of[v]:
                raise InputError(
                    f"{field_name}.edges[{u}-{v}]",
                    data["link"],
                    "a link between two GPUs must join GPUs of the same server",
                )
            if data["link"] == NVLINK and (kind[u] != GPU or kind[v] != GPU):
                raise InputError(
                    f"{field_name}.edges[{u}-{v}]",
                    "nvlink",
                    "an NVLink must join two GPUs of the same server",
                )
            want = LINK_OF.get(frozenset((kind[u], kind[v])), data["link"])
            if data["link"] != want:  # e.g. a GPU on its server by a 'network' link
                raise InputError(
                    f"{field_name}.edges[{u}-{v}].link",
                    data["link"],
                    f"a {kind[u]} and a {kind[v]} are joined by {want!r}",
                )
            if data["link"] == NVLINK:
                nvlinked.add_edge(gpu_index[u], gpu_index[v])
        for comp in nx.connected_components(nvlinked):
            members = sorted(comp)
            island[members] = members[0]

        switch_tiers, switch_levels, switch_tier = _switch_levels(
            graph, kind, server_ids, field_name
        )
        rows: list[np.ndarray] = [island] if len(nvlinked) else []
        rows.append(gpu_server)
        rows.extend(switch_levels[:, lvl][gpu_server] for lvl in range(len(switch_tiers)))
        groups = np.stack(rows)
        tiers = ((NVLINK,) if len(nvlinked) else ()) + (SERVER, *switch_tiers)
        # Everything derived once from the graph stays as derived: the graph (a copy of the
        # caller's) refuses nodes and edges added or removed, the arrays and mappings changes.
        nx.freeze(graph)
        return cls(
            graph,
            gpu_ids,
            server_ids,
            tiers,
            frozen_array(groups),
            frozen_array(gpu_server),
            frozen_array(server_start),
            FrozenDict(switch_tier),
            FrozenDict(gpu_index),
        )


def require_topology(value: object) -> None:
    """Raise :class:`InputError` unless ``value`` is a :class:`Topology` (the one check of the
    argument of every function that takes one).

    Parameters
    ----------
    value : object

    Raises
    ------
    InputError
        Naming the type of ``value``.

    Examples
    --------
    >>> require_topology("2x4")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: topology = 'str': expected a Topology (build_cluster)
    """
    if not isinstance(value, Topology):
        raise InputError("topology", type(value).__name__, "expected a Topology (build_cluster)")


def _json_value(value: Any, field_name: str) -> Any:
    """``value`` with numpy values made Python ones, or an InputError naming what JSON cannot
    hold."""
    if isinstance(value, dict):
        return {k: _json_value(v, f"{field_name}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{field_name}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (np.generic, np.ndarray)):
        return _json_value(value.tolist(), field_name)
    if isinstance(value, float) and not math.isfinite(value):  # JSON has no NaN or Infinity
        raise InputError(field_name, value, "a graph attribute JSON cannot hold (no JSON number)")
    if value is None or isinstance(value, (str, int, float)):
        return value
    raise InputError(field_name, value, "a graph attribute JSON cannot hold")


def _check_items(items: Any, keys: tuple[str, ...], field_name: str) -> None:
    """Node-link ``nodes`` or ``edges``: a list of objects whose ``keys`` are strings."""
    if not isinstance(items, list):
        raise InputError(field_name, items, "expected a list of objects")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"{field_name}[{i}]", item, "expected an object")
        for key in keys:
            if not isinstance(item.get(key), str):
                raise InputError(f"{field_name}[{i}].{key}", item.get(key), "expected a string id")


def _gpus_of(graph: nx.Graph, server: str, kind: dict[str, str]) -> Iterable[str]:
    return (m for m in graph[server] if kind[m] == GPU)


def _switch_levels(
    graph: nx.Graph, kind: dict[str, str], server_ids: tuple[str, ...], field_name: str
) -> tuple[tuple[str, ...], np.ndarray, dict[str, str]]:
    """Tier names of the switch levels (leaves first), each server's group at each level, and
    each switch's tier."""
    switches = [n for n in graph if kind[n] == SWITCH]
    if not switches:
        if len(server_ids) > 1:
            raise InputError(
                f"{field_name}.nodes",
                list(server_ids[:3]),
                "several servers but no switch joins them",
            )
        return (), np.zeros((len(server_ids), 0), dtype=np.int64), {}
    for s in switches:  # before the root is looked for by its tier
        tier = graph.nodes[s].get("tier")
        if tier is not None and not isinstance(tier, str):
            raise InputError(f"{field_name}.nodes[{s}].tier", tier, "expected a tier name")
        if tier is not None and (not tier or not tier.isprintable()):
            raise InputError(f"{field_name}.nodes[{s}].tier", tier, f"a tier name {PRINTABLE}")
        if tier in (NVLINK, SERVER):  # they would take the penalties of the tiers in a server
            raise InputError(
                f"{field_name}.nodes[{s}].tier",
                tier,
                "names a tier inside a server, not a switch's",
            )
    roots = [s for s in switches if graph.nodes[s].get("root")] or [
        s for s in switches if graph.nodes[s].get("tier") == "cluster"
    ]
    if len(switches) == 1:
        roots = switches
    if len(roots) != 1:
        raise InputError(
            f"{field_name}.nodes",
            roots or switches[:3],
            "cannot tell the root switch: mark exactly one with tier 'cluster'",
        )
    # Switches and servers as a graph of their own in the graph's order (a subgraph view's
    # order follows a set's: the loop named in the error changed with the hash seed)
    infra = [n for n in graph if kind[n] != GPU]
    net = nx.Graph()
    net.add_nodes_from(infra)
    net.add_edges_from((u, v) for u in infra for v in graph[u] if kind[v] != GPU)
    if net.number_of_edges() != net.number_of_nodes() - 1:  # connected, so: not a tree
        cycle = [u for u, _ in nx.find_cycle(net)]
        raise InputError(
            f"{field_name}.edges",
            cycle[:6],
            "switches and servers must form a tree: these form a loop (a server or switch "
            "linked to two switches above it?)",
        )
    depth = nx.single_source_shortest_path_length(net, roots[0])
    parent = {child: up for up, child in nx.bfs_edges(net, roots[0])}
    for node, up in parent.items():  # servers and switches, seen from the root
        if kind[up] != SWITCH:
            raise InputError(
                f"{field_name}.nodes[{node}]",
                up,
                f"a {kind[node]} must hang from a switch, not a server",
            )
    max_depth = max(depth[s] for s in switches)
    # A leaf switch (no switch below it) is at the deepest level whatever its depth, so the
    # servers on one leaf switch always share the lowest switch tier in an unbalanced tree.
    inner = {parent[s] for s in switches if s in parent}
    level = {s: depth[s] if s in inner else max_depth for s in switches}
    names: list[str | None] = [None] * (max_depth + 1)
    for s in switches:
        d = level[s]
        tier = graph.nodes[s].get("tier")
        if tier is None:
            tier = "cluster" if d == 0 else ("rack" if d == max_depth else f"level{d}")
        if names[d] not in (None, tier):
            raise InputError(
                f"{field_name}.nodes[{s}].tier",
                tier,
                f"switches at level {d} below the root (leaf switches: the deepest) must share "
                f"one tier name ({names[d]!r})",
            )
        if names[d] is None and tier in names:
            raise InputError(
                f"{field_name}.nodes[{s}].tier",
                tier,
                f"(given or by default) names level {names.index(tier)} below the root too; "
                "each level of switches needs a tier name of its own",
            )
        names[d] = tier
    # Groups per level, indexed root first. Below its switch, a server on a leaf switch stays in
    # the leaf's group; one on an inner switch is its own group.
    switch_index = {s: i for i, s in enumerate(switches)}
    n_sw = len(switches)
    levels = np.empty((len(server_ids), max_depth + 1), dtype=np.int64)
    for i, s in enumerate(server_ids):
        if s not in parent:
            raise InputError(f"{field_name}.nodes[{s}]", s, "server is not reached from the root")
        chain = []
        node = parent[s]
        while True:
            chain.append(node)
            if node == roots[0]:
                break
            node = parent[node]
        chain.reverse()
        below = switch_index[chain[-1]] if chain[-1] not in inner else n_sw + i
        for d in range(max_depth + 1):
            levels[i, d] = switch_index[chain[d]] if d < len(chain) else below
    tier_names = tuple(str(n) for n in reversed(names))
    return tier_names, levels[:, ::-1].copy(), {s: str(names[level[s]]) for s in switches}


def build_cluster(
    racks: int = 1,
    servers_per_rack: int = 1,
    gpus_per_server: int = 4,
    nvlink_island: int | None = None,
) -> Topology:
    """Build a regular cluster: racks of servers of GPUs, racks under one cluster switch.

    Names: ``gpu{i}`` (global index, server-major), ``server{j}``, ``rack{r}``, ``cluster``.

    Parameters
    ----------
    racks, servers_per_rack, gpus_per_server : int
        Shape of the cluster; each at least 1.
    nvlink_island : int, optional
        GPUs per NVLink island inside each server (must divide ``gpus_per_server``); ``None``
        means PCIe only (every GPU its own island).

    Returns
    -------
    Topology

    Raises
    ------
    InputError
        For a non-positive size, more than :data:`MAX_GPUS` GPUs, or an island size that does
        not divide the server.

    Examples
    --------
    >>> topo = build_cluster(racks=2, servers_per_rack=4, gpus_per_server=8, nvlink_island=4)
    >>> topo.n_gpus, topo.n_servers, topo.tiers
    (64, 8, ('nvlink', 'server', 'rack', 'cluster'))
    """
    racks = check_count(racks, "racks")
    servers_per_rack = check_count(servers_per_rack, "servers_per_rack")
    gpus_per_server = check_count(gpus_per_server, "gpus_per_server")
    if racks * servers_per_rack * gpus_per_server > MAX_GPUS:
        raise InputError(
            "cluster",
            f"{racks}x{servers_per_rack}x{gpus_per_server}",
            f"more than {MAX_GPUS:,} GPUs",
        )
    if nvlink_island is not None and (
        isinstance(nvlink_island, bool)
        or not isinstance(nvlink_island, Integral)
        or nvlink_island < 1
        or gpus_per_server % nvlink_island
    ):
        raise InputError(
            "nvlink_island",
            nvlink_island,
            f"must be a positive divisor of gpus_per_server ({gpus_per_server})",
        )
    graph = nx.Graph()
    graph.add_node("cluster", kind=SWITCH, tier="cluster")
    gpu = 0
    for r in range(racks):
        rack = f"rack{r}"
        graph.add_node(rack, kind=SWITCH, tier="rack")
        graph.add_edge(rack, "cluster", link=NETWORK)
        for s_local in range(servers_per_rack):
            server = f"server{r * servers_per_rack + s_local}"
            graph.add_node(server, kind=SERVER)
            graph.add_edge(server, rack, link=NETWORK)
            for local in range(gpus_per_server):
                name = f"gpu{gpu}"
                graph.add_node(name, kind=GPU, local=local)
                graph.add_edge(name, server, link=PCIE)
                if nvlink_island and local % nvlink_island:
                    graph.add_edge(f"gpu{gpu - 1}", name, link=NVLINK)
                gpu += 1
    return Topology.from_graph(graph)


def parse_shape(shape: str) -> Topology:
    """Build a cluster from a shape string: ``SERVERSxGPUS`` or ``RACKSxSERVERSxGPUS``.

    Parameters
    ----------
    shape : str
        E.g. ``"16x4"`` (16 servers of 4 GPUs, one rack) or ``"2x8x4"`` (2 racks of 8).

    Returns
    -------
    Topology
        As :func:`build_cluster` builds it.

    Raises
    ------
    InputError
        For another form, or a count that is not a positive integer (named ``cluster``).

    Examples
    --------
    >>> parse_shape("16x4").n_gpus
    64
    >>> parse_shape("2x8x4").tiers
    ('server', 'rack', 'cluster')
    """
    if not isinstance(shape, str) or not re.fullmatch(r"[0-9]+(x[0-9]+){1,2}", shape.lower()):
        raise InputError("cluster", shape, "expected SERVERSxGPUS or RACKSxSERVERSxGPUS")
    parts = shape.lower().split("x")
    if max(len(p.lstrip("0")) for p in parts) > len(str(MAX_GPUS)):  # int() of 4,301 digits fails
        raise InputError("cluster", shape, f"a cluster has at most {MAX_GPUS:,} GPUs")
    nums = [int(p.lstrip("0") or "0") for p in parts]
    if min(nums) < 1:
        raise InputError("cluster", shape, "every count must be a positive integer")
    if len(nums) == 2:  # one rack
        nums.insert(0, 1)
    return build_cluster(*nums)
