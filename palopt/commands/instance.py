"""``palopt instance build``: join a cluster, a variability profile and a queue into an instance."""

from __future__ import annotations

import argparse

from palopt.binning import METHODS
from palopt.commands import (
    add_cluster_arguments,
    check_output,
    cluster_of,
    file_path,
    input_file,
    penalties_arg,
    writing,
)
from palopt.errors import InputError, counted
from palopt.io import busy_from_list, queue_from_list, read_json, save_instance
from palopt.variability import build_instance, load_profile


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``instance`` command group."""
    group = sub.add_parser("instance", help="build instance files")
    cmds = group.add_subparsers(dest="instance_command", required=True, parser_class=type(group))
    p = cmds.add_parser(
        "build",
        help="join a cluster, a profile and a queue into an instance file",
        description="Write a palopt.instance/1 file: the cluster of --cluster or --topology, "
        "each class's slowdowns from a profile assigned to that cluster (`palopt profile "
        "assign`), binned into levels, the locality penalties, busy GPUs and the queue.",
    )
    add_cluster_arguments(p)
    p.add_argument(
        "--profile",
        type=input_file,
        required=True,
        help="profile file keyed by the cluster's GPU ids (`palopt profile assign`)",
    )
    p.add_argument(
        "--queue",
        type=input_file,
        required=True,
        help="JSON list of jobs in the scheduler's order, as in an instance file: "
        '[{"id": "j1", "num_gpus": 2, "class": "classA"}, ...]',
    )
    p.add_argument(
        "--penalties",
        type=penalties_arg,
        required=True,
        metavar="JSON",
        help="locality penalties as in an instance file: a number (1.7: within a server 1.0, "
        'beyond 1.7), or an object such as \'{"rack": 1.7, "cluster": 2.0}\'',
    )
    p.add_argument(
        "--busy",
        default="",
        metavar="IDS",
        help="comma-separated ids of GPUs no queued job may use",
    )
    p.add_argument(
        "--binning",
        choices=METHODS,
        default="kmeans",
        help="how slowdowns are binned into levels (default: kmeans)",
    )
    p.add_argument("--name", help="the instance's name")
    p.add_argument("--out", "-o", type=file_path, required=True, help="instance file to write")
    p.set_defaults(func=cmd_build)


def cmd_build(args: argparse.Namespace) -> int:
    """Build an instance file."""
    check_output(args.out, [args.topology, args.profile, args.queue], "--out")
    topology = cluster_of(args)
    profile = load_profile(args.profile)
    if profile.gpus != topology.gpu_ids:
        cluster = f"--cluster {args.cluster}" if args.cluster else f"--topology {args.topology}"
        # An assigned profile (it names its measured GPUs) is another cluster's: assign the
        # measured one again, not the copy.
        measured = "MEASURED.json" if profile.origin else args.profile
        raise InputError(
            "--profile",
            str(args.profile),
            f"its {counted(profile.n_gpus, 'GPU')} ({', '.join(profile.gpus[:2])}, ...) are "
            f"not the cluster's {topology.n_gpus} ({', '.join(topology.gpu_ids[:2])}, ...)"
            + ("; it was assigned to another cluster" if profile.origin else "")
            + f"; assign the measured profile to this one: palopt profile assign {measured} "
            f"{cluster} -o ASSIGNED.json",
        )
    data = read_json(args.queue)  # its errors name the file already
    ids = [g.strip() for g in args.busy.split(",") if g.strip()]
    busy = busy_from_list(topology, ids, "--busy")
    try:
        queue = queue_from_list(topology, data)
        instance = build_instance(profile, topology, args.penalties, queue, args.binning, busy)
    except InputError as exc:  # the queue's errors name its file: several are in play
        if not exc.field.startswith("queue"):
            raise
        raise exc.prefixed(f"{args.queue}: ") from None
    source = f"palopt instance build: cluster {args.cluster or args.topology}, "
    source += f"profile {args.profile}"
    source += f" ({profile.source})" if profile.source else ""
    meta = {"source": f"{source}, queue {args.queue}"}
    if args.name is not None:
        meta["name"] = args.name
    with writing(args.out, "--out"):
        save_instance(instance, args.out, **meta)
    print(
        f"{args.out}: {counted(topology.n_gpus, 'GPU')}, "
        f"{counted(len(instance.classes), 'class')}, {counted(len(queue), 'queued job')}, "
        f"{counted(int(busy.sum()), 'busy GPU')}"
    )
    return 0
