"""A topology for people: a text summary (servers, GPUs, tiers, NVLink islands) and a drawing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from palopt.errors import InputError, counted
from palopt.hostlist import compress_hostlist
from palopt.topology import Topology, require_topology

__all__ = ["island_sizes", "summarize", "draw"]

_COLOURS = {"gpu": "#76b900", "server": "#4a7ebb", "switch": "#d9822b"}


def island_sizes(topology: Topology, server: int) -> tuple[int, ...]:
    """Sizes of the NVLink islands of a server, largest first (all 1 without NVLink).

    Parameters
    ----------
    topology : Topology
    server : int
        Server index, from 0 to ``topology.n_servers - 1``.

    Returns
    -------
    tuple of int
        One entry per island; they sum to the server's GPU count.

    Raises
    ------
    InputError
        Unless ``topology`` is a :class:`~palopt.topology.Topology` and ``server`` one of its
        server indices (a negative index read the first and last bounds, giving ``()``).

    Examples
    --------
    >>> from palopt.topology import build_cluster
    >>> island_sizes(build_cluster(1, 1, 8, nvlink_island=4), 0)
    (4, 4)
    >>> island_sizes(build_cluster(1, 2, 4), -1)
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: server = -1: server indices are 0 to 1
    """
    require_topology(topology)
    if isinstance(server, (bool, np.bool_)) or not isinstance(server, (int, np.integer)):
        raise InputError("server", server, "expected a server index")
    if not 0 <= server < topology.n_servers:
        raise InputError("server", server, f"server indices are 0 to {topology.n_servers - 1}")
    lo, hi = topology.server_start[server], topology.server_start[server + 1]
    if topology.tiers[0] != "nvlink":
        return (1,) * int(hi - lo)
    _, counts = np.unique(topology.groups[0, lo:hi], return_counts=True)
    return tuple(sorted((int(c) for c in counts), reverse=True))


def _counted(values: list[int]) -> str:
    sizes, counts = np.unique(np.asarray(values), return_counts=True)
    return ", ".join(
        f"{s} (x{c})" if c > 1 else f"{s}"
        for s, c in sorted(zip(sizes.tolist(), counts.tolist(), strict=True), reverse=True)
    )


def _listed(names: list[str]) -> str:
    """Names compressed as a host list, or joined by commas as they are if one cannot be in a
    host list (e.g. it holds a comma, a bracket or white space)."""
    try:
        return compress_hostlist(names)
    except InputError:
        return ",".join(names)


def summarize(topology: Topology) -> str:
    """A few lines describing a topology: sizes, tiers with group sizes, server kinds, switches.

    Parameters
    ----------
    topology : Topology

    Returns
    -------
    str
        Text without a final newline: a headline, one line per tier (lowest first), one line
        per kind of server (by NVLink islands), and the switches by tier (top first) if the
        topology has any. Names are compressed as host
        lists, or joined by commas as they are if one of them cannot be in a host list.

    Raises
    ------
    InputError
        Unless ``topology`` is a :class:`~palopt.topology.Topology`.

    Examples
    --------
    >>> from palopt.topology import build_cluster
    >>> print(summarize(build_cluster(2, 2, 4, nvlink_island=2)))
    16 GPUs on 4 servers, 3 switches; tiers nvlink < server < rack < cluster
    tier      groups  GPUs per group (x number of groups)
    nvlink         8  2 (x8)
    server         4  4 (x4)
    rack           2  8 (x2)
    cluster        1  16
    servers:
      server[0-3]  4 GPUs each, NVLink islands 2+2
    switches:
      cluster 1: cluster
      rack    2: rack[0-1]
    """
    require_topology(topology)
    graph, topo = topology.graph, topology
    kinds = nx.get_node_attributes(graph, "kind")
    switches = [n for n, k in kinds.items() if k == "switch"]
    lines = [
        f"{counted(topo.n_gpus, 'GPU')} on {counted(topo.n_servers, 'server')}, "
        f"{counted(len(switches), 'switch')}; "
        f"tiers {' < '.join(topo.tiers)}",
        f"{'tier':<9} {'groups':>6}  GPUs per group (x number of groups)",
    ]
    for t, name in enumerate(topo.tiers):
        _, counts = np.unique(topo.groups[t], return_counts=True)
        lines.append(f"{name:<9} {len(counts):>6}  {_counted(counts.tolist())}")
    kinds_of_server: dict[tuple[int, ...], list[str]] = {}
    for s, name in enumerate(topo.server_ids):
        kinds_of_server.setdefault(island_sizes(topo, s), []).append(name)
    lines.append("servers:")
    for sizes, names in kinds_of_server.items():
        islands = "PCIe only" if max(sizes) == 1 else "NVLink islands " + "+".join(map(str, sizes))
        lines.append(f"  {_listed(names)}  {counted(sum(sizes), 'GPU')} each, {islands}")
    if switches:
        by_tier: dict[str, list[str]] = {}
        for s in switches:
            by_tier.setdefault(topo.switch_tier[s], []).append(s)
        lines.append("switches:")
        for tier in reversed(topo.tiers):
            if tier in by_tier:
                names = by_tier.pop(tier)
                lines.append(f"  {tier:<7} {len(names)}: {_listed(names)}")
    return "\n".join(lines)


def _tree_layout(topology: Topology) -> dict[str, tuple[float, float]]:
    """GPUs in index order along the bottom row, every other node above the mean of its children
    (a switch at the height of its tier)."""
    graph = topology.graph
    tier_rank = {t: i for i, t in enumerate(topology.tiers)}
    pos: dict[str, tuple[float, float]] = {
        g: (float(i), 0.0) for i, g in enumerate(topology.gpu_ids)
    }
    upper = [n for n, k in graph.nodes(data="kind") if k != "gpu"]
    height = {
        n: 1.0 if graph.nodes[n]["kind"] == "server" else 1.0 + tier_rank[topology.switch_tier[n]]
        for n in upper
    }
    for node in sorted(upper, key=height.__getitem__):
        below = [pos[m][0] for m in graph[node] if m in pos and pos[m][1] < height[node]]
        pos[node] = (float(np.mean(below)) if below else 0.0, height[node])
    return pos


def _nvlink_arcs(ax: Any, pos: dict[str, tuple[float, float]], links: list[tuple[str, ...]]) -> Any:
    """The NVLinks as one patch of arcs below the GPU row, each the curve a ``FancyArrowPatch``
    with ``connectionstyle="arc3,rad=0.5"`` draws (one patch per link took 3-4 ms each: minutes
    for a cluster of thousands of servers). Call once the axes' layout and limits are final: the
    arcs bend by the same fraction of their length on screen."""
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path as MplPath

    ends = np.array([(pos[u], pos[v]) for u, v in links], dtype=float)
    start, end = ends[:, 0], ends[:, 1]
    d = end - start
    # Lower the bottom limit so that the deepest arc shows: on screen an arc dips a quarter of
    # its length below its ends, a fraction ``dip`` of the axes' height (kept below a half).
    ax.set_xlim(ax.get_xlim())  # brings the limits up to date and keeps them
    bottom, top = ax.get_ylim()
    (x0, _), (x1, _) = ax.transData.transform([(0.0, 0.0), (1.0, 0.0)])
    dip = min(0.45, 0.25 * (x1 - x0) * float(d[:, 0].max()) / ax.bbox.height + 0.02)
    low = float(ends[:, :, 1].min())
    ax.set_ylim(min(bottom, (low - dip * top) / (1 - dip)), top)
    (x0, y0), (x1, y1) = ax.transData.transform([(0.0, 0.0), (1.0, 1.0)])
    ratio = (x1 - x0) / (y1 - y0)  # screen units per data unit, x over y
    # arc3 on screen: control point = midpoint + rad * (dy, -dx), here mapped back to data
    control = (start + end) / 2 + 0.5 * np.stack([d[:, 1] / ratio, -d[:, 0] * ratio], axis=1)
    vertices = np.stack([start, control, end], axis=1).reshape(-1, 2)
    codes = np.tile([MplPath.MOVETO, MplPath.CURVE3, MplPath.CURVE3], len(links))
    return PathPatch(
        MplPath(vertices, codes),
        facecolor="none",
        edgecolor=_COLOURS["gpu"],
        linewidth=0.8,
        zorder=1,
    )


def draw(topology: Topology, path: str | Path, title: str | None = None) -> None:
    """Draw the topology as a layered tree (GPUs at the bottom) into a PNG file.

    GPUs are green, servers blue, switches orange; NVLink links are drawn as green arcs
    between GPUs. Needs matplotlib (``pip install 'palopt[plot]'``).

    Parameters
    ----------
    topology : Topology
    path : str or Path
        The PNG file to write (120 dpi); an existing file is overwritten.
    title : str, optional
        Default: the GPU and server counts and the tiers.

    Raises
    ------
    InputError
        Unless ``topology`` is a :class:`~palopt.topology.Topology`.
    ImportError
        If matplotlib is missing.

    Examples
    --------
    >>> import tempfile
    >>> from palopt.topology import build_cluster
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     draw(build_cluster(2, 2, 4, nvlink_island=2), f"{folder}/cluster.png")
    """
    require_topology(topology)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graph = topology.graph
    pos = _tree_layout(topology)
    width = min(40.0, max(6.0, 0.18 * topology.n_gpus))
    fig, ax = plt.subplots(figsize=(width, 5))
    nvlinks = [
        tuple(sorted((u, v), key=lambda n: pos[n][0]))
        for u, v, k in graph.edges(data="link")
        if k == "nvlink"
    ]
    others = [(u, v) for u, v, k in graph.edges(data="link") if k != "nvlink"]
    nx.draw_networkx_edges(graph, pos, edgelist=others, ax=ax, edge_color="#999999", width=0.6)
    colours = [_COLOURS[graph.nodes[n]["kind"]] for n in graph]
    sizes = [12 if graph.nodes[n]["kind"] == "gpu" else 60 for n in graph]
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_color=colours, node_size=sizes)
    labels = {n: n for n in graph if graph.nodes[n]["kind"] != "gpu"}
    if len(labels) <= 80:
        nx.draw_networkx_labels(
            graph,
            {n: (x, y + 0.15) for n, (x, y) in pos.items()},
            labels=labels,
            ax=ax,
            font_size=7,
        )
    ax.set_title(
        title
        or f"{counted(topology.n_gpus, 'GPU')}, {counted(topology.n_servers, 'server')}, tiers "
        f"{' < '.join(topology.tiers)}",
        fontsize=9,
    )
    ax.axis("off")
    fig.tight_layout()
    if nvlinks:
        ax.add_patch(_nvlink_arcs(ax, pos, nvlinks))
    fig.savefig(path, dpi=120)
    plt.close(fig)
