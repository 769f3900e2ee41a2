"""``palopt topology build`` and ``palopt topology show``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from palopt.commands import check_output, file_path, image_path, input_file, writing
from palopt.errors import InputError, counted
from palopt.hostlist import expand_hostlist
from palopt.importers.assemble import assemble_topology
from palopt.importers.nvidia_smi import GpuMatrix, read_nvidia_smi
from palopt.importers.slurm import read_topology_conf
from palopt.io import load_topology, write_text
from palopt.topology import Topology
from palopt.topology_view import draw, summarize

SINGLE_SERVER = "server0"


def _server_option(text: str) -> tuple[str, Path]:
    names, sep, path = text.partition("=")
    if not sep or not names or not path:
        raise argparse.ArgumentTypeError(f"expected NAMES=FILE, got {text!r}")
    return names, input_file(path)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``topology`` command group."""
    group = sub.add_parser(
        "topology",
        help="build a cluster topology from Slurm and nvidia-smi files, or summarise and draw one",
    )
    cmds = group.add_subparsers(dest="topology_command", required=True, parser_class=type(group))

    p = cmds.add_parser(
        "build",
        help="write the topology JSON (node-link form, as instances embed it)",
        description="Join a Slurm topology.conf (switch tree) and `nvidia-smi topo -m` outputs "
        "(GPUs inside each server) into one topology. Without --slurm, the servers "
        f"are the --server names, or one server {SINGLE_SERVER!r} from --nvidia-smi.",
    )
    p.add_argument(
        "--slurm", type=input_file, metavar="FILE", help="Slurm topology.conf (tree plugin)"
    )
    p.add_argument(
        "--nvidia-smi",
        type=input_file,
        metavar="FILE",
        help="saved `nvidia-smi topo -m` output for every server without --server",
    )
    p.add_argument(
        "--server",
        action="append",
        type=_server_option,
        default=[],
        metavar="NAMES=FILE",
        help="nvidia-smi output for these servers (a Slurm host list, e.g. "
        "node[07-08]=dgx.txt); repeatable",
    )
    p.add_argument("--out", "-o", type=file_path, help="write here instead of standard output")
    p.set_defaults(func=cmd_build)

    p = cmds.add_parser("show", help="summarise a topology (servers, GPUs, tiers, islands)")
    p.add_argument("file", type=input_file, help="topology JSON or instance JSON")
    p.add_argument(
        "--png",
        type=image_path,
        metavar="FILE",
        help="also draw it into this image (PNG, SVG, ...)",
    )
    p.set_defaults(func=cmd_show)


def build_from_files(
    slurm: Path | None, default: Path | None, servers: list[tuple[str, Path]]
) -> Topology:
    """The topology described by the ``build`` options (each file read once).

    Raises
    ------
    InputError
        Naming the file and line of a parse problem, or the option that is inconsistent.
    """
    cache: dict[Path, GpuMatrix] = {}

    def matrix(path: Path) -> GpuMatrix:
        if path not in cache:
            cache[path] = read_nvidia_smi(path)
        return cache[path]

    per_server: dict[str, GpuMatrix] = {}
    for names, path in servers:
        for name in expand_hostlist(names, "--server"):
            if name in per_server:
                raise InputError("--server", name, "server given more than once")
            per_server[name] = matrix(path)
    tree = read_topology_conf(slurm) if slurm else None
    fallback = matrix(default) if default else None
    if tree is None and fallback is not None:
        if per_server:
            raise InputError(
                "--nvidia-smi",
                str(default),
                "without --slurm, give one matrix (a one-server topology) or "
                "--server NAMES=FILE for each server, not both",
            )
        per_server[SINGLE_SERVER] = fallback
    if tree is None and not per_server:
        raise InputError("topology build", None, "give --slurm, --nvidia-smi or --server")
    bare = [] if tree is None or fallback else [h for h in tree.nodes if h not in per_server]
    if bare:
        raise InputError(
            "--slurm",
            str(slurm),
            f"no nvidia-smi output for {len(bare)} of its servers ({', '.join(bare[:3])}"
            f"{', ...' if len(bare) > 3 else ''}): give --nvidia-smi (for every server without "
            "--server) or --server NAMES=FILE",
        )
    return assemble_topology(tree, per_server, fallback)


def cmd_build(args: argparse.Namespace) -> int:
    """Build a topology JSON from Slurm and nvidia-smi files."""
    inputs = [args.slurm, args.nvidia_smi, *(path for _, path in args.server)]
    check_output(args.out, inputs, "--out")
    topo = build_from_files(args.slurm, args.nvidia_smi, args.server)
    text = json.dumps(topo.to_node_link(), indent=1) + "\n"
    if args.out:
        with writing(args.out, "--out"):
            write_text(args.out, text)
        print(
            f"{args.out}: {counted(topo.n_gpus, 'GPU')} on {counted(topo.n_servers, 'server')}, "
            f"tiers {' < '.join(topo.tiers)}"
        )
    else:
        sys.stdout.write(text)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Summarise (and draw) a topology."""
    check_output(args.png, [args.file], "--png")
    topo = load_topology(args.file)
    print(summarize(topo))
    if args.png:
        with writing(args.png, "--png"):
            draw(topo, args.png, title=args.file.name)
        print(f"drawing written to {args.png}")
    return 0
