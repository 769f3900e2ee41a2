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

from palopt.errors import PaloptError

__all__ = ["main", "build_parser"]

COMMAND_MODULES = (
    "palopt.commands.solve",
    "palopt.commands.profile",
    "palopt.commands.topology",
    "palopt.commands.bench",
    "palopt.commands.simulate",
    "palopt.commands.sweep",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"palopt: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command group registered."""
    parser = _Parser(
        prog="palopt", description="Place ML jobs on GPU clusters: solve, simulate, benchmark."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 failure, 2 bad input)."""
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
