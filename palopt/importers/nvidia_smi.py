"""Read the GPU matrix that ``nvidia-smi topo -m`` prints for one server.

Format (what the command prints; columns separated by tabs or spaces)::

            GPU0    GPU1    GPU2    GPU3    NIC0    CPU Affinity    NUMA Affinity
    GPU0     X      NV4     SYS     SYS     PIX     0-15            0
    GPU1    NV4      X      SYS     SYS     PIX     0-15            0
    GPU2    SYS     SYS      X      NV4     SYS     16-31           1
    GPU3    SYS     SYS     NV4      X      SYS     16-31           1
    NIC0    PIX     PIX     SYS     SYS      X

    Legend:
      X    = Self
      ...

The header is the first line whose first word is ``GPU<n>``; its leading ``GPU<n>`` words are the
GPU columns (NIC columns, ``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID`` after them are
ignored). Every GPU column needs a row starting with the same name, holding one entry per GPU
column first. Rows of NICs are ignored; the matrix ends at ``Legend:`` or the end of the file.
Terminal colour codes are removed. Lines before the header (a shell prompt, say) are ignored.

Entries: ``X`` (the GPU itself, only on the diagonal), ``NV<k>`` (a bonded set of ``k`` NVLinks),
and the PCIe path classes, nearest first: ``PIX`` (at most one PCIe bridge), ``PXB`` (several
bridges), ``PHB`` (through the CPU's host bridge), ``NODE`` (between host bridges of one NUMA node),
``SYS`` (across the inter-socket link; older drivers print ``SOC``). The matrix must be symmetric.

Mapping to the topology model (:mod:`palopt.topology`): each GPU ``GPU<n>`` becomes a ``gpu`` node
``<server>/gpu<n>`` with ``local=n`` (its CUDA index when ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), joined
to the server by a ``pcie`` link. An ``NV<k>`` entry becomes an ``nvlink`` edge with ``nvlinks=k``,
so the NVLink islands (connected components of those edges) form the ``nvlink`` tier. The PCIe
classes do not form tiers: GPUs joined only over PCIe share the ``server`` tier whatever the class.
The whole matrix is kept, losslessly, as the server's ``gpu_paths`` attribute (rows in local
order), for finer intra-server tiers later (PIX/PXB = same PCIe switch, PHB/NODE = same NUMA node).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from palopt.errors import InputError
from palopt.io import read_text
from palopt.topology import MAX_LOCAL

__all__ = ["GpuMatrix", "parse_nvidia_smi", "read_nvidia_smi", "PCIE_CLASSES"]

PCIE_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")
_ALIASES = {"SOC": "SYS"}
_GPU = re.compile(r"^GPU(\d+)$")
_NV = re.compile(r"^NV([1-9]\d{0,2})$")  # 1 to 999 links (an H100 has 18)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class GpuMatrix:
    """The GPU-to-GPU part of one ``nvidia-smi topo -m`` output.

    Attributes
    ----------
    source : str
        File name (or ``"<string>"``).
    local : tuple of int
        GPU numbers (``GPU3`` -> 3), in column order.
    paths : tuple of tuple of str
        ``paths[i][j]``: the entry between the i-th and j-th GPU (``X``, ``NV<k>`` or a PCIe
        class; ``SOC`` normalised to ``SYS``).
    """

    source: str
    local: tuple[int, ...]
    paths: tuple[tuple[str, ...], ...]

    @property
    def n_gpus(self) -> int:
        """Number of GPUs."""
        return len(self.local)

    def nvlinks(self) -> list[tuple[int, int, int]]:
        """``(i, j, k)`` for each GPU pair ``i < j`` (column positions) joined by ``NV<k>``."""
        out = []
        for i, row in enumerate(self.paths):
            for j in range(i + 1, len(row)):
                m = _NV.match(row[j])
                if m:
                    out.append((i, j, int(m.group(1))))
        return out

    def islands(self) -> list[tuple[int, ...]]:
        """NVLink islands as sorted tuples of GPU numbers (singletons for PCIe-only GPUs).

        Examples
        --------
        >>> text = "GPU0 GPU1 GPU2\\nGPU0 X NV2 SYS\\nGPU1 NV2 X SYS\\nGPU2 SYS SYS X"
        >>> parse_nvidia_smi(text).islands()
        [(0, 1), (2,)]
        """
        g = nx.Graph()
        g.add_nodes_from(self.local)
        g.add_edges_from((self.local[i], self.local[j]) for i, j, _ in self.nvlinks())
        return sorted(tuple(sorted(c)) for c in nx.connected_components(g))

    def add_to(self, graph: nx.Graph, server: str) -> None:
        """Add this server's GPUs and links to ``graph`` (mapping in the module docstring).

        The server node is created (kind ``server``) if missing and gets ``gpu_paths``.
        """
        if server not in graph:
            graph.add_node(server, kind="server")
        order = sorted(range(self.n_gpus), key=self.local.__getitem__)  # rows in local order
        graph.nodes[server]["gpu_paths"] = [[self.paths[i][j] for j in order] for i in order]
        names = [f"{server}/gpu{n}" for n in self.local]
        for name, n in zip(names, self.local, strict=True):
            graph.add_node(name, kind="gpu", local=n)
            graph.add_edge(name, server, link="pcie")
        for i, j, k in self.nvlinks():
            graph.add_edge(names[i], names[j], link="nvlink", nvlinks=k)


def _entry(where: str, token: str, column: str) -> str:
    token = _ALIASES.get(token, token)
    if token == "X" or token in PCIE_CLASSES or _NV.match(token):
        return token
    raise InputError(
        where,
        token,
        f"unknown entry in column {column}; expected X, NV<k> (k from 1 to 999), "
        f"{', '.join(PCIE_CLASSES)}",
    )


def parse_nvidia_smi(text: str, source: str = "<string>") -> GpuMatrix:
    """Parse the output of ``nvidia-smi topo -m``.

    Parameters
    ----------
    text : str
        The command's output (format in the module docstring).
    source : str
        File name for messages.

    Returns
    -------
    GpuMatrix

    Raises
    ------
    InputError
        Naming ``source:line``, for no header, a duplicate GPU column or row, a row without a
        column or a column without a row, a short row, an unknown entry, ``X`` off the diagonal
        or missing on it, or an asymmetric entry.

    Examples
    --------
    >>> m = parse_nvidia_smi('''\\tGPU0\\tGPU1\\tCPU Affinity
    ... GPU0\\t X \\tNV12\\t0-7
    ... GPU1\\tNV12\\t X \\t0-7
    ... ''')
    >>> m.local, m.paths[0]
    ((0, 1), ('X', 'NV12'))
    """
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    header_at = next(
        (i for i, line in enumerate(lines) if line.split() and _GPU.match(line.split()[0])), None
    )
    if header_at is None:
        raise InputError(source, text[:40], "no GPU matrix header (a line starting with GPU0)")
    header = lines[header_at].split()
    columns: list[str] = []
    numbers: dict[int, str] = {}  # GPU number -> its column (GPU01 and GPU1 are one GPU)
    for word in header:
        m = _GPU.match(word)
        if not m:
            break
        digits = m.group(1).lstrip("0") or "0"
        number = int(digits) if len(digits) <= len(str(MAX_LOCAL)) else MAX_LOCAL
        if number >= MAX_LOCAL:
            raise InputError(
                f"{source}:{header_at + 1}", word, f"a GPU number from 0 to {MAX_LOCAL - 1}"
            )
        if number in numbers:
            raise InputError(
                f"{source}:{header_at + 1}", word, f"GPU column given twice (as {numbers[number]})"
            )
        numbers[number] = word
        columns.append(word)
    n = len(columns)
    rows: dict[str, tuple[int, tuple[str, ...]]] = {}
    for i in range(header_at + 1, len(lines)):
        words = lines[i].split()
        if words and words[0].rstrip(":").lower() == "legend":
            break
        if not words or not _GPU.match(words[0]):
            continue
        where = f"{source}:{i + 1}"
        name = words[0]
        if name not in columns:
            raise InputError(
                where,
                name,
                f"row {name} has no column in the header (columns: {', '.join(columns)})",
            )
        if name in rows:
            raise InputError(where, name, f"row given twice (first on line {rows[name][0]})")
        if len(words) - 1 < n:
            raise InputError(
                where,
                lines[i].strip(),
                f"row {name} has {len(words) - 1} entries, "
                f"expected {n} (one per GPU column): the matrix is not square",
            )
        entries = zip(words[1 : n + 1], columns, strict=True)
        rows[name] = (i + 1, tuple(_entry(where, w, c) for w, c in entries))
    missing = [c for c in columns if c not in rows]
    if missing:
        raise InputError(
            f"{source}:{header_at + 1}",
            missing[0],
            "GPU has a column in the header but no row in the matrix",
        )
    for a, col_a in enumerate(columns):
        line, row = rows[col_a]
        for b, col_b in enumerate(columns):
            where = f"{source}:{line}"
            if (row[b] == "X") != (a == b):
                raise InputError(where, row[b], f"{col_a}/{col_b}: X must be exactly the diagonal")
            other = rows[col_b][1][a]
            if b < a and row[b] != other:
                raise InputError(
                    where,
                    row[b],
                    f"{col_a}/{col_b} differs from {col_b}/{col_a} "
                    f"({other!r}): the matrix must be symmetric",
                )
    return GpuMatrix(source, tuple(numbers), tuple(rows[c][1] for c in columns))


def read_nvidia_smi(path: str | Path) -> GpuMatrix:
    """Read a saved ``nvidia-smi topo -m`` output (see :func:`parse_nvidia_smi`).

    Parameters
    ----------
    path : str or Path
        A UTF-8 text file holding the command's output.

    Returns
    -------
    GpuMatrix
        With ``source`` set to ``path`` as a string.

    Raises
    ------
    InputError
        Naming the file and line of the problem, or a file not in UTF-8.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> from palopt.io import write_text
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/dgx.txt", "GPU0 GPU1\\nGPU0 X NV4\\nGPU1 NV4 X\\n")
    ...     m = read_nvidia_smi(f"{folder}/dgx.txt")
    >>> m.source.endswith("dgx.txt"), m.local, m.islands()
    (True, (0, 1), [(0, 1)])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/bad.txt", "GPU0 GPU1\\nGPU0 X NV4\\nGPU1 SYS X\\n")
    ...     read_nvidia_smi(f"{folder}/bad.txt")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: .../bad.txt:3 = 'SYS': GPU1/GPU0 differs from GPU0/GPU1 ('NV4'): ...
    """
    return parse_nvidia_smi(read_text(path), str(path))
