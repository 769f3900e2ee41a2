"""Placement results in the forms other tools take: a pandas table and Slurm allocations."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from palopt.errors import InputError
from palopt.hostlist import compress_hostlist, expand_hostlist
from palopt.instance import Instance
from palopt.result import PlacementResult
from palopt.topology import Topology

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "FRAME_COLUMNS",
    "SlurmAllocation",
    "format_slurm",
    "local_index",
    "slurm_allocations",
    "to_frame",
]

#: What a Slurm node (host) name may hold: the host lists of :mod:`palopt.hostlist` read these.
_NODE_NAME = re.compile(r"[A-Za-z0-9._-]+")

FRAME_COLUMNS = (
    "job",
    "action",
    "n_gpus",
    "gpus",
    "servers",
    "cost",
    "slowdown",
    "tier",
    "penalty",
    "reason",
)


def to_frame(result: PlacementResult, instance: Instance) -> pd.DataFrame:
    """One row per queued job, in queue order, with the columns of :data:`FRAME_COLUMNS`.

    ``gpus`` and ``servers`` hold tuples of names (empty for an unplaced job); ``cost``,
    ``slowdown``, ``penalty`` and ``tier`` of an unplaced job and ``reason`` of a placed one are
    missing (``pandas.isna``).

    Parameters
    ----------
    result : PlacementResult
    instance : Instance
        The instance that was solved (for GPU and server names and job sizes).

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    InputError
        If ``result`` is not of ``instance`` (:meth:`PlacementResult.check_instance`).

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster, solve
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.ones((1, 4)),
    ...                 np.array([[1.0, 1.5, 1.5]]), (Job("a", 2, "A"), Job("b", 4, "A")))
    >>> to_frame(solve(inst, "pal"), inst)[["job", "action", "n_gpus", "tier"]]
      job action  n_gpus    tier
    0   a  start       2  server
    1   b   wait       4     NaN
    """
    import pandas as pd  # only here: the CLI's other paths need not pay for importing it

    result.check_instance(instance)
    topo = instance.topology
    sizes = {job.id: job.num_gpus for job in instance.queue}
    rows = [
        (
            p.job_id,
            p.action,
            sizes[p.job_id],
            tuple(topo.gpu_ids[g] for g in p.gpus),
            tuple(dict.fromkeys(topo.server_of(g) for g in p.gpus)),
            p.cost,
            p.slowdown,
            # NaN, not None: pandas before 3.0 keeps None in a text column (shown "None")
            math.nan if p.tier is None else p.tier,
            p.penalty,
            math.nan if p.reason is None else p.reason,
        )
        for p in result.placements
    ]
    frame = pd.DataFrame.from_records(rows, columns=list(FRAME_COLUMNS))
    return frame.astype({"cost": "float64", "slowdown": "float64", "penalty": "float64"})


@dataclass(frozen=True)
class SlurmAllocation:
    """Where one placed job runs, as Slurm and CUDA see it.

    Attributes
    ----------
    job : str
    action : str
    nodelist : str
        Compressed Slurm host list of the job's servers, e.g. ``node[01-03]``.
    devices : tuple of (str, str)
        ``(server, CUDA_VISIBLE_DEVICES)`` per server, in the order of the expanded
        ``nodelist``; devices are the GPUs' local indices (see :func:`local_index`), sorted and
        comma-separated.
    """

    job: str
    action: str
    nodelist: str
    devices: tuple[tuple[str, str], ...]


def local_index(topology: Topology, gpu: int) -> int:
    """The CUDA index of a GPU within its server.

    The GPU node's ``local`` attribute (set from ``nvidia-smi`` by the importers, and by
    :func:`~palopt.topology.build_cluster`), else its position among its server's GPUs in the
    order the topology graph lists them (a server's GPUs have ``local`` indices all or none).
    These are physical indices (``nvidia-smi`` numbering; CUDA uses it with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``): apply them where devices are not renumbered, e.g. on whole
    nodes, not inside a Slurm step whose cgroup already hides the other GPUs.

    Parameters
    ----------
    topology : Topology
    gpu : int
        A dense GPU index of ``topology``.

    Returns
    -------
    int
        The GPU's ``local`` attribute if it has one, else its position among its server's
        GPUs (from 0, in the order the graph lists them).

    Examples
    --------
    >>> from palopt import build_cluster
    >>> topo = build_cluster(1, 2, 2)  # gpu0, gpu1 on server0; gpu2, gpu3 on server1
    >>> [local_index(topo, g) for g in range(topo.n_gpus)]
    [0, 1, 0, 1]
    """
    local = topology.graph.nodes[topology.gpu_ids[gpu]].get("local")  # checked by the Topology
    if local is not None:
        return int(local)
    return gpu - int(topology.server_start[topology.gpu_server[gpu]])


def slurm_allocations(result: PlacementResult, instance: Instance) -> list[SlurmAllocation]:
    """The placed jobs of ``result`` as node lists and per-node ``CUDA_VISIBLE_DEVICES``.

    Parameters
    ----------
    result : PlacementResult
    instance : Instance
        The instance that was solved (for server names and the GPUs' local indices).

    Returns
    -------
    list of SlurmAllocation
        One per placed job, in queue order; unplaced jobs are left out.

    Raises
    ------
    InputError
        If ``result`` is not of ``instance`` (:meth:`PlacementResult.check_instance`), or a
        server of a placed job has a name Slurm cannot take (a space, a bracket, ...).

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster, solve
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.ones((1, 4)),
    ...                 np.array([[1.0, 1.5, 1.5]]), (Job("a", 4, "A"),))
    >>> slurm_allocations(solve(inst, "pal"), inst)
    [SlurmAllocation(job='a', action='start', nodelist='server[0-1]', \
devices=(('server0', '0,1'), ('server1', '0,1')))]
    """
    result.check_instance(instance)
    topo = instance.topology
    out = []
    for p in result.placements:
        if not p.gpus:
            continue
        per_server: dict[str, list[int]] = {}
        for g in sorted(p.gpus):
            server = topo.server_of(g)
            if not _NODE_NAME.fullmatch(server):
                raise InputError(
                    "topology.server", server, "not a Slurm node name (letters, digits, . _ -)"
                )
            per_server.setdefault(server, []).append(local_index(topo, g))
        nodelist = compress_hostlist(per_server)
        devices = tuple(
            (s, ",".join(map(str, sorted(per_server[s])))) for s in expand_hostlist(nodelist)
        )
        out.append(SlurmAllocation(p.job_id, p.action, nodelist, devices))
    return out


def format_slurm(result: PlacementResult, instance: Instance) -> str:
    """Tab-separated lines ``job, action, nodelist, server=CUDA_VISIBLE_DEVICES;...`` per placed
    job, after a ``#`` header; unplaced jobs follow as ``#`` comments with the reason.

    Parameters
    ----------
    result : PlacementResult
    instance : Instance
        The instance that was solved (for server names and the GPUs' local indices).

    Returns
    -------
    str
        The lines joined by newlines, with no newline at the end. The devices of a placed job
        are ``server=devices`` pairs joined by ``;``, as in :func:`slurm_allocations`.

    Raises
    ------
    InputError
        For a job id that starts with ``#``, a server name Slurm cannot take, or an instance
        the result is not of.

    Examples
    --------
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster, solve
    >>> inst = Instance(build_cluster(1, 2, 2), ("A",), np.ones((1, 4)),
    ...                 np.array([[1.0, 1.5, 1.5]]), (Job("a", 3, "A"), Job("b", 2, "A")))
    >>> for line in format_slurm(solve(inst, "pal"), inst).splitlines():
    ...     print(line.split("\\t"))
    ['# job', 'action', 'nodelist', 'cuda_visible_devices']
    ['a', 'start', 'server[0-1]', 'server0=0,1;server1=0']
    ['# b', 'wait', 'not placed: needs 2 GPUs, 1 free']
    """
    for p in result.placements:  # (the instance's ids hold no tab or line break)
        if p.job_id.startswith("#"):
            raise InputError("job id", p.job_id, "a leading # would make the line a comment")
    lines = ["# job\taction\tnodelist\tcuda_visible_devices"]
    for a in slurm_allocations(result, instance):
        devices = ";".join(f"{s}={d}" for s, d in a.devices)
        lines.append(f"{a.job}\t{a.action}\t{a.nodelist}\t{devices}")
    lines.extend(
        f"# {p.job_id}\t{p.action}\tnot placed: {p.reason}" for p in result.placements if not p.gpus
    )
    return "\n".join(lines)
