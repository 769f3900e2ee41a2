"""Slurm host lists: expand ``node[01-04,07],gpu-a[1-3]`` to names and compress names back.

Syntax (the subset of Slurm's that topology files and node lists use):

- items are separated by commas or white space outside brackets: ``a1,b[2-3]``, ``a1 b[2-3]``;
- a bracket holds comma-separated numbers and ranges ``lo-hi`` (``lo <= hi``); a range is
  zero-padded to the width of ``lo`` (``[08-10]`` -> ``08 09 10``, ``[9-10]`` -> ``9 10``);
- an item may hold several brackets; it expands to their product in written order
  (``r[1-2]n[1-2]`` -> ``r1n1 r1n2 r2n1 r2n2``).

:func:`compress_hostlist` writes one bracket per prefix over the trailing number, and
``expand_hostlist(compress_hostlist(names))`` gives the same names back, duplicates dropped,
grouped by prefix and in numeric order within a prefix (``a10, a9`` -> ``a9, a10``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from itertools import product

from palopt.errors import InputError

#: The most host names a host list may expand to (a typo such as ``n[0-999999999]`` would
#: otherwise fill the memory).
MAX_HOSTS = 2**20
#: The longest host name, in characters (a DNS name has at most 253).
MAX_NAME = 255

__all__ = ["expand_hostlist", "compress_hostlist"]

_TRAILING = re.compile(r"^(.*?)([0-9]+)$")
_DIGITS = re.compile(r"[0-9]+\Z")  # ASCII only: str.isdigit takes "\u0661" and "\u00b2" too


def _split_top(text: str) -> list[str]:
    """Split on commas and white space that are not inside brackets (white space next to a comma
    is part of that separator); brackets must balance and not nest."""
    items: list[str] = []
    item, depth, space = "", 0, False
    for ch in text:
        if not depth and ch == ",":
            items.append(item)
            item, space = "", False
            continue
        if not depth and ch.isspace():
            space = True
            continue
        if space and item:
            items.append(item)
            item = ""
        space = False
        if ch == "[":
            if depth:
                raise ValueError("nested '['")
            depth = 1
        elif ch == "]":
            if not depth:
                raise ValueError("']' without '['")
            depth = 0
        item += ch
    if depth:
        raise ValueError("'[' is not closed")
    items.append(item)
    return items


def _ranges(body: str) -> list[tuple[int, int, int]]:
    """The ``(first, last, width)`` of each number or range of a bracket's body, checked."""
    out: list[tuple[int, int, int]] = []
    for part in body.split(","):
        lo, sep, hi = part.partition("-")
        if not _DIGITS.match(lo) or (sep and not _DIGITS.match(hi)):
            raise ValueError(f"bad range {part!r} (expected N or N-M with digits 0-9)")
        if max(len(lo), len(hi)) > MAX_NAME:  # int() of 4,301 digits fails, and no name fits
            raise ValueError(f"a number of {max(len(lo), len(hi)):,} digits (at most {MAX_NAME})")
        a, b = int(lo), int(hi if sep else lo)
        if a > b:
            raise ValueError(f"bad range {part!r} (start above end)")
        out.append((a, b, len(lo)))
    return out


def _numbers(ranges: list[tuple[int, int, int]]) -> list[str]:
    """The numbers of a bracket's ranges, each zero-padded to the width of its range's start."""
    return [str(v).zfill(width) for a, b, width in ranges for v in range(a, b + 1)]


def expand_hostlist(text: str, field_name: str = "hostlist") -> list[str]:
    """Expand a Slurm host list into host names, in written order.

    Parameters
    ----------
    text : str
        E.g. ``"node[01-04,07],gpu-a[1-3]"``; surrounding white space is ignored.
    field_name : str
        Named in errors (e.g. ``"topology.conf:12"``).

    Returns
    -------
    list of str

    Raises
    ------
    InputError
        For an empty item, unbalanced or nested brackets, a non-numeric or decreasing range, or
        more than :data:`MAX_HOSTS` names, or a name longer than :data:`MAX_NAME`.

    Examples
    --------
    >>> expand_hostlist("node[01-03,07],gpu-a[9-10]")
    ['node01', 'node02', 'node03', 'node07', 'gpu-a9', 'gpu-a10']
    """
    text = text.strip()
    try:
        items = _split_top(text)
        names: list[str] = []
        for item in items:
            if not item:
                raise ValueError("empty host name")
            pieces = re.split(r"\[([^\]]*)\]", item)
            brackets = [_ranges(p) for p in pieces[1::2]]
            count = math.prod(sum(b - a + 1 for a, b, _ in r) for r in brackets)
            if len(names) + count > MAX_HOSTS:
                raise ValueError(f"names more than {MAX_HOSTS:,} hosts")
            # The item's longest name, before any is built (each may be long, and many).
            longest = sum(map(len, pieces[::2])) + sum(
                max(max(width, len(str(b))) for _, b, width in r) for r in brackets
            )
            if longest > MAX_NAME:
                raise ValueError(f"a name of {longest:,} characters (at most {MAX_NAME})")
            choices = [
                [p] if i % 2 == 0 else _numbers(brackets[i // 2]) for i, p in enumerate(pieces)
            ]
            names.extend("".join(combo) for combo in product(*choices))
    except ValueError as exc:
        raise InputError(field_name, text, f"bad host list: {exc}") from None
    return names


def _runs(numbers: list[str]) -> list[str]:
    """Ranges over digit strings sorted by value; a run continues while the next value prints
    with the width of the run's first string."""
    out: list[str] = []
    i = 0
    while i < len(numbers):
        first = numbers[i]
        width, value = len(first), int(first)
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == str(value + j + 1 - i).zfill(width):
            j += 1
        out.append(first if j == i else f"{first}-{numbers[j]}")
        i = j + 1
    return out


def compress_hostlist(names: Iterable[str]) -> str:
    """Compress host names into a Slurm host list (inverse of :func:`expand_hostlist`).

    Names are grouped by the text before their trailing number; names without one are written
    as they are. Duplicates are dropped; the result lists prefixes and numbers in sorted order.

    Parameters
    ----------
    names : iterable of str
        Host names without ``[``, ``]``, ``,`` or white space.

    Returns
    -------
    str

    Raises
    ------
    InputError
        For an empty name or one containing ``[``, ``]``, ``,`` or white space (they would
        not expand back to the names), or one longer than :data:`MAX_NAME`.

    Examples
    --------
    >>> compress_hostlist(["node03", "node01", "node02", "node07", "gpu-a9", "gpu-a10", "login"])
    'gpu-a[9-10],login,node[01-03,07]'
    """
    groups: dict[str, set[str]] = {}
    plain: set[str] = set()
    for name in names:
        if not name or any(c in "[]," or c.isspace() for c in name) or len(name) > MAX_NAME:
            raise InputError(
                "hostlist",
                name,
                f"host names must be non-empty, without [ ] , or white space, and at most "
                f"{MAX_NAME} characters",
            )
        m = _TRAILING.match(name)
        if m:
            groups.setdefault(m.group(1), set()).add(m.group(2))
        else:
            plain.add(name)
    parts: list[tuple[str, str]] = [(p, p) for p in plain]
    for prefix, numbers in groups.items():
        runs = _runs(sorted(numbers, key=lambda d: (int(d), len(d))))
        text = (
            prefix + runs[0]
            if len(runs) == 1 and "-" not in runs[0]
            else f"{prefix}[{','.join(runs)}]"
        )
        parts.append((prefix, text))
    return ",".join(text for _, text in sorted(parts))
