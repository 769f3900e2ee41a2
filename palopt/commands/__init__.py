"""CLI command groups; each module provides ``register(subparsers)`` (see :mod:`palopt.cli`).

The package is the command line's inside, not library API: a command is documented by its
``--help`` (and the README), and its handler ``cmd_*`` takes the parsed arguments and returns the
exit code. Programs call the functions those handlers call (:func:`palopt.solve`,
:mod:`palopt.io`, :mod:`palopt.sim`, ...).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from palopt.errors import InputError
from palopt.io import load_topology, parse_json
from palopt.topology import Topology, parse_shape

#: Image formats the drawing options write (matplotlib picks the format from the suffix).
IMAGE_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg", "eps", "ps", "tif", "tiff", "webp")


def file_path(text: str) -> Path:
    """An argparse type: a file or folder name, which must not be empty (``Path("")`` is the
    current folder, so an empty argument would read or write ``.`` under the wrong name).

    Examples
    --------
    >>> file_path("instance.json").name
    'instance.json'
    >>> file_path("")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: '': an empty file name
    """
    if not text:
        raise argparse.ArgumentTypeError(f"{text!r}: an empty file name")
    return Path(text)


def input_file(text: str) -> Path:
    """An argparse type: a file to read, which must exist and not be a folder (argparse then
    names the argument in its error, where a failed read later could only name the path).

    Examples
    --------
    >>> input_file(__file__).name
    '__init__.py'
    >>> input_file("no-such-file.json")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'no-such-file.json': no such file
    """
    path = file_path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text!r}: no such file")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: is a folder, not a file")
    return path


def image_path(text: str) -> Path:
    """An argparse type: a file name (see :func:`file_path`) whose suffix names one of
    :data:`IMAGE_FORMATS`.

    Examples
    --------
    >>> image_path("topology.svg").name
    'topology.svg'
    >>> image_path("topology.txt")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'topology.txt': the suffix must name an image format: png, ...
    """
    path = file_path(text)
    if path.suffix.lower().lstrip(".") not in IMAGE_FORMATS:
        formats = ", ".join(IMAGE_FORMATS)
        raise argparse.ArgumentTypeError(
            f"{text!r}: the suffix must name an image format: {formats}"
        )
    return path


def parse_option(text: str) -> tuple[str, Any]:
    """An argparse type: ``KEY=VALUE``, the value read as JSON where it is JSON, else as text.

    Examples
    --------
    >>> parse_option("gap=0.01"), parse_option("thresholds=[1800,18000]")
    (('gap', 0.01), ('thresholds', [1800, 18000]))
    >>> parse_option("backend=highs"), parse_option("keep-running=true")
    (('backend', 'highs'), ('keep_running', True))
    """
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.replace("-", "_"), json_text(raw, key)


def json_text(text: str, where: str) -> Any:
    """``text`` read as JSON as strictly as a file is (:func:`palopt.io.parse_json`), or
    ``text`` itself where it is no JSON at all (``highs``).

    Raises
    ------
    argparse.ArgumentTypeError
        For JSON a file would be refused for: a key given twice, a huge integer, deep nesting.

    Examples
    --------
    >>> json_text("[1, 2]", "x"), json_text("highs", "x")
    ([1, 2], 'highs')
    >>> json_text('{"a": 1, "a": 2}', "x")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: x = 'a': the key appears twice in one object
    """
    try:
        return parse_json(text, where)
    except InputError as exc:
        if exc.problem.startswith("invalid JSON"):
            return text
        raise argparse.ArgumentTypeError(str(exc)) from None


def penalties_arg(text: str) -> float | dict[str, Any]:
    """An argparse type: locality penalties, a number (beyond a server) or a JSON object
    (tier -> p, or class -> tier -> p), checked against the cluster later.

    Examples
    --------
    >>> penalties_arg("1.7"), penalties_arg('{"rack": 1.7}')
    (1.7, {'rack': 1.7})
    """
    try:
        return float(text)
    except ValueError:
        pass
    value = json_text(text, "penalties")
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"expected a number or a JSON object (tier -> p or class -> tier -> p), got {text!r}"
        )
    return value


def option_dict(pairs: Sequence[tuple[str, Any]], flag: str) -> dict[str, Any]:
    """The pairs of a repeatable :func:`parse_option` flag as a dict.

    Raises
    ------
    InputError
        For a key given twice (the flag and the key named).

    Examples
    --------
    >>> option_dict([("gap", 0.01), ("seed", 3)], "-o")
    {'gap': 0.01, 'seed': 3}
    """
    options: dict[str, Any] = {}
    for key, value in pairs:
        if key in options:
            raise InputError(f"{flag} {key}", value, "given twice")
        options[key] = value
    return options


def check_output(out: Path | None, inputs: Iterable[Path | None], flag: str) -> None:
    """Refuse, before any work, an output file that is one of the inputs, is a folder or has no
    folder.

    Raises
    ------
    InputError
        Naming ``flag`` and the path.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".json") as f:
    ...     check_output(Path(f.name), [Path(f.name)], "--out")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: --out = '...json': is an input file; it would be overwritten
    """
    if out is None:
        return
    check_not_input(out, inputs, flag)
    if out.is_dir():
        raise InputError(flag, str(out), "is a folder; give a file name")
    if not out.parent.is_dir():
        raise InputError(flag, str(out), "no such folder")


def check_not_input(out: Path, inputs: Iterable[Path | None], flag: str) -> None:
    """Refuse an output file that is one of the inputs (by any path or link to it).

    Raises
    ------
    InputError
        Naming ``flag`` and the path.
    """
    if out.exists() and any(p is not None and p.exists() and out.samefile(p) for p in inputs):
        raise InputError(flag, str(out), "is an input file; it would be overwritten")


def check_folder(out: Path | None, flag: str) -> None:
    """Refuse, before any work, an output folder that is a file or lies under one (an
    :class:`InputError` naming ``flag`` and the path); a folder still to be made is fine.

    >>> check_folder(Path(__file__) / "runs", "--out")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: --out = '...runs': ...__init__.py is a file, not a folder
    """
    if out is None:
        return
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise InputError(flag, str(out), f"{existing} is a file, not a folder")


@contextmanager
def writing(out: Path, flag: str) -> Iterator[None]:
    """Name ``flag`` and ``out`` in an ``OSError`` raised by the writes of the ``with`` block:
    the operating system's message names only a path (a folder that takes no files, such as
    ``/proc``, a full disk, a read-only file system).

    Parameters
    ----------
    out : Path
        The output file or folder that ``flag`` gave.
    flag : str
        The option that gave it, e.g. ``"--out"``.

    Raises
    ------
    InputError
        For an ``OSError`` raised in the block, naming ``flag``, ``out`` and the operating
        system's reason, with the file that failed if it is another (one of an output folder).

    Examples
    --------
    >>> with writing(Path("/proc/r.json"), "--out"):
    ...     raise FileNotFoundError(2, "No such file or directory", "/proc/r.json")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: --out = '/proc/r.json': cannot be written: No such file or directory
    """
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.filename is not None and os.path.realpath(exc.filename) != os.path.realpath(out):
            reason = f"{exc.filename}: {reason}"
        raise InputError(flag, str(out), f"cannot be written: {reason}") from None


def require_plotting(flag: str) -> None:
    """Refuse, before any work, a command that would draw without matplotlib installed.

    Raises
    ------
    ImportError
        Naming the ``plot`` extra and ``flag``, the option that skips the drawing.
    """
    if importlib.util.find_spec("matplotlib") is None:
        raise ImportError(f"plots need matplotlib: pip install 'palopt[plot]', or pass {flag}")


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--cluster SHAPE`` and ``--topology FILE``, one of them required (see
    :func:`cluster_of`)."""
    cluster = parser.add_mutually_exclusive_group(required=True)
    cluster.add_argument(
        "--cluster", metavar="SHAPE", help="SERVERSxGPUS or RACKSxSERVERSxGPUS, e.g. 2x32x4"
    )
    cluster.add_argument(
        "--topology",
        type=input_file,
        help="or the cluster of a topology JSON file (`palopt topology build`) or instance file",
    )


def cluster_of(args: argparse.Namespace) -> Topology:
    """The cluster of the arguments :func:`add_cluster_arguments` added."""
    return parse_shape(args.cluster) if args.cluster is not None else load_topology(args.topology)
