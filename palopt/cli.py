"""The ``palopt`` command line.

Each command group lives in its own module under :mod:`palopt.commands` and provides
``register(subparsers)``, which adds its sub-commands and sets ``func`` on each parser; ``func``
takes the parsed arguments and returns the exit code. Errors from bad input
(:class:`~palopt.errors.PaloptError`, ``OSError``) become one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any

from palopt import __version__
from palopt.errors import PaloptError

__all__ = ["main", "build_parser"]

COMMAND_MODULES = (
    "palopt.commands.solve",
    "palopt.commands.instance",
    "palopt.commands.profile",
    "palopt.commands.topology",
    "palopt.commands.bench",
    "palopt.commands.simulate",
    "palopt.commands.sweep",
)


class _Parser(argparse.ArgumentParser):
    """Prints usage errors as ``palopt: error: ...``; every command's parser also takes ``-v``,
    counted with the ``-v`` before the command."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.prog != "palopt":  # unset unless given: a command parses into its own namespace
            self.add_argument(
                "-v",
                "--verbose",
                action="count",
                dest="verbose_command",
                default=argparse.SUPPRESS,
                help="more logging",
            )

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, rest = super().parse_known_args(args, namespace)
        if self.prog == "palopt":
            parsed.verbose += vars(parsed).pop("verbose_command", 0)
        return parsed, rest

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"palopt: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command group registered.

    Returns
    -------
    argparse.ArgumentParser
        The ``palopt`` parser: a ``-v``/``--verbose`` count (before or after the command),
        ``--version``, and one sub-command per command of :data:`COMMAND_MODULES`. Parsed
        arguments name the command in ``command`` and hold the function that runs it in
        ``func``. On bad arguments it prints the usage and the error to stderr and exits with
        code 2.

    Examples
    --------
    >>> args = build_parser().parse_args(["-v", "topology", "show", __file__])
    >>> args.verbose, args.command, args.topology_command, args.file.name
    (1, 'topology', 'show', 'cli.py')

    ``-v`` may also follow the command, and counts with those before it:

    >>> build_parser().parse_args(["-v", "topology", "show", __file__, "-vv"]).verbose
    3
    """
    parser = _Parser(
        prog="palopt", description="Place ML jobs on GPU clusters: solve, simulate, benchmark."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    parser.add_argument("--version", action="version", version=f"palopt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 failure, 2 bad input).

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The command's exit code; 2 after an input error (:class:`~palopt.errors.PaloptError`,
        ``OSError`` or ``ImportError``, printed as one line on stderr), 0 if the reader of the
        output went away, 130 on Ctrl-C. Arguments the parser rejects (and ``--help``) end in
        ``SystemExit`` instead, with code 2 (0 for ``--help`` and ``--version``).

    Examples
    --------
    >>> import tempfile
    >>> from palopt.io import write_text
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/cluster.json", '{"shape": "2x2"}')
    ...     main(["topology", "show", f"{folder}/cluster.json"])
    ...     write_text(f"{folder}/bad.json", '{"shape": "2x"}')
    ...     main(["topology", "show", f"{folder}/bad.json"])  # the error goes to stderr
    4 GPUs on 2 servers, 2 switches; tiers server < rack < cluster
    tier      groups  GPUs per group (x number of groups)
    server         2  2 (x2)
    rack           1  4
    cluster        1  4
    servers:
      server[0-1]  2 GPUs each, PCIe only
    switches:
      cluster 1: cluster
      rack    1: rack0
    0
    2
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * args.verbose, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (e.g. `| head`): not an error of ours
        return 0
    except (PaloptError, OSError, ImportError) as exc:
        print(f"palopt: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("palopt: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
