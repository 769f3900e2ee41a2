"""The JSON instance format ``palopt.instance/1``: load, dump, validate, and its JSON Schema.

An instance file::

    {
      "format": "palopt.instance/1",
      "name": "example", "source": "where the data came from",
      "topology": {"shape": "8x4"},         # or node-link {"nodes": [...], "edges": [...]}
      "classes": ["classA", "classB"],                   # PAL's class priority order
      "slowdown": {"classA": {"gpu0": 1.02, ...}, ...},  # or a list in topology GPU order
      "penalties": 1.7,                                  # or {tier: p} or {class: {tier: p}}
      "busy": ["gpu5"],                                  # optional
      "queue": [{"id": "j1", "num_gpus": 2, "class": "classA",
                 "weight": 1.0, "current_gpus": ["gpu0", "gpu1"]}]
    }

``name``, ``source``, ``licence`` and ``description`` are optional strings; any other field is an
error (a misspelt ``busy`` would otherwise free the GPUs it lists). Validation names the bad field
and value (:class:`~palopt.errors.InputError`).
"""

from __future__ import annotations

import codecs
import errno
import io
import json
import os
import re
import secrets
import stat
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from palopt.errors import InputError, check_fields, is_finite_number, is_number
from palopt.instance import (
    MAX_FACTOR,
    META_FIELDS,
    MIN_FACTOR,
    Instance,
    Job,
    check_meta,
    penalty_matrix,
    require_instance,
)
from palopt.topology import (
    ATTRIBUTE_KIND,
    KINDS,
    LINKS,
    MAX_LOCAL,
    NVLINK,
    SERVER,
    Topology,
    parse_shape,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "FORMAT",
    "instance_from_dict",
    "instance_to_dict",
    "load_instance",
    "load_topology",
    "parse_json",
    "queue_from_list",
    "busy_from_list",
    "data_dir",
    "shared_path",
    "read_csv",
    "read_json",
    "read_text",
    "require_field",
    "write_text",
    "save_instance",
    "topology_from_spec",
    "instance_schema",
]

FORMAT = "palopt.instance/1"
FIELDS = ("format", *META_FIELDS, "topology", "classes", "slowdown", "penalties", "busy", "queue")
JOB_FIELDS = ("id", "num_gpus", "class", "weight", "current_gpus")


def _integral(value: Any) -> Any:
    """A float with no fraction (JSON's ``2.0``, an integer to JSON Schema too) as an ``int``;
    anything else as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def require_field(
    data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str
) -> Any:
    """``data[key]``, checked to be of ``kind`` (an integral float read as an ``int``), or an
    InputError naming ``where + key``.

    Parameters
    ----------
    data : mapping
        A parsed JSON object.
    key : str
        The field to read.
    kind : type or tuple of type
        The types allowed; a bool is refused unless ``kind`` is ``bool``.
    where : str
        Prefix of the field's name in the message, e.g. ``"queue[3]."``.

    Returns
    -------
    Any
        The value; with ``kind`` ``int``, a float with no fraction as an ``int``.

    Raises
    ------
    InputError
        If ``key`` is missing, or its value is not of ``kind``.

    Examples
    --------
    >>> require_field({"num_gpus": 2.0}, "num_gpus", int, "queue[0].")
    2
    >>> require_field({"num_gpus": True}, "num_gpus", int, "queue[0].")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: queue[0].num_gpus = True: expected int
    """
    if key not in data:
        raise InputError(f"{where}{key}", None, "required field is missing")
    value = _integral(data[key]) if kind is int else data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise InputError(f"{where}{key}", value, f"expected {names}")
    return value


def topology_from_spec(spec: Any, field_name: str = "topology") -> Topology:
    """Build a topology from ``{"shape": "RxSxG"}`` or node-link data.

    Parameters
    ----------
    spec : dict
        Either ``{"shape": ...}`` with a string :func:`palopt.topology.parse_shape` reads
        (``"SxG"`` or ``"RxSxG"``, nothing else in the dict), or networkx node-link data (see
        :meth:`Topology.from_node_link <palopt.topology.Topology.from_node_link>`).
    field_name : str, default "topology"
        The name error messages give ``spec``.

    Returns
    -------
    Topology

    Raises
    ------
    InputError
        For an unknown form or an invalid graph.

    Examples
    --------
    >>> from palopt import build_cluster
    >>> topology_from_spec({"shape": "2x8x4"}).n_gpus
    64
    >>> topology_from_spec(build_cluster(1, 1, 2).to_node_link()).gpu_ids
    ('gpu0', 'gpu1')
    >>> topology_from_spec({"shape": 4})
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: topology.shape = 4: expected a string like '8x4'
    """
    if isinstance(spec, Mapping) and "shape" in spec:
        check_fields(spec, ("shape",), f"{field_name}.")
        if not isinstance(spec["shape"], str):
            raise InputError(f"{field_name}.shape", spec["shape"], "expected a string like '8x4'")
        try:
            return parse_shape(spec["shape"])
        except InputError as exc:
            raise InputError(f"{field_name}.shape", spec["shape"], exc.problem) from None
    if isinstance(spec, Mapping):
        return Topology.from_node_link(dict(spec), field_name)
    raise InputError(field_name, spec, "expected {'shape': ...} or node-link data")


def _slowdown_matrix(topo: Topology, classes: tuple[str, ...], spec: Any) -> np.ndarray:
    if not isinstance(spec, Mapping):
        raise InputError("slowdown", spec, "expected a mapping class -> per-GPU values")
    for c in spec:
        if c not in classes:
            raise InputError(f"slowdown.{c}", c, f"unknown class; known: {', '.join(classes)}")
    out = np.empty((len(classes), topo.n_gpus), dtype=np.float64)
    for i, c in enumerate(classes):
        row = spec.get(c)
        where = f"slowdown.{c}"
        if row is None:
            raise InputError(where, None, "required: one value per GPU")
        if isinstance(row, list):
            if len(row) != topo.n_gpus:
                raise InputError(
                    where, row, f"{len(row)} values; expected {topo.n_gpus} (one per GPU)"
                )
            pairs: Iterable[tuple[str, Any]] = zip(topo.gpu_ids, row, strict=True)
        elif isinstance(row, Mapping):
            unknown = [g for g in row if g not in topo._gpu_index]
            if unknown:
                raise InputError(f"{where}.{unknown[0]}", unknown[0], "no GPU of that id")
            missing = [g for g in topo.gpu_ids if g not in row]
            if missing:
                raise InputError(f"{where}.{missing[0]}", None, "missing value for this GPU")
            pairs = ((g, row[g]) for g in topo.gpu_ids)
        else:
            raise InputError(where, row, "expected a list or a mapping GPU -> value")
        for j, (gpu, value) in enumerate(pairs):
            if not is_finite_number(value) or value <= 0:
                raise InputError(f"{where}.{gpu}", value, "must be a finite positive number")
            out[i, j] = value
    return out


def _job_from_dict(topo: Topology, i: int, data: Any) -> Job:
    where = f"queue[{i}]."
    if not isinstance(data, Mapping):
        raise InputError(f"queue[{i}]", data, "expected an object")
    check_fields(data, JOB_FIELDS, where)
    job_id = _integral(data.get("id"))
    if isinstance(data.get("id"), float) and abs(data["id"]) >= 2**53:  # 2**53 + 1 reads as it
        raise InputError(f"{where}id", data["id"], "a number id must be an exact integer")
    if isinstance(job_id, int) and not isinstance(job_id, bool):
        job_id = str(job_id)
    if not isinstance(job_id, str) or not job_id:
        raise InputError(f"{where}id", job_id, "must be a non-empty string")
    num = require_field(data, "num_gpus", int, where)
    cls = require_field(data, "class", str, where)
    weight = data.get("weight", 1.0)
    if not is_number(weight):
        raise InputError(f"{where}weight", weight, "must be a number")
    if not is_finite_number(weight):
        raise InputError(f"{where}weight", weight, "must be a finite positive number")
    current = data.get("current_gpus", [])
    if not isinstance(current, list):
        raise InputError(f"{where}current_gpus", current, "expected a list of GPU ids")
    idx = tuple(int(g) for g in topo.indices(current, f"{where}current_gpus"))
    return Job(job_id, num, cls, float(weight), idx)


def instance_from_dict(data: Any) -> Instance:
    """Build and validate an :class:`Instance` from the JSON form.

    Parameters
    ----------
    data : dict
        The parsed JSON of a ``palopt.instance/1`` file (see the module documentation).

    Returns
    -------
    Instance

    Raises
    ------
    InputError
        Naming the bad field and value.

    Examples
    --------
    >>> inst = instance_from_dict({
    ...     "format": "palopt.instance/1", "topology": {"shape": "2x2"}, "classes": ["A"],
    ...     "slowdown": {"A": [1.0, 1.1, 1.0, 1.2]}, "penalties": 1.7,
    ...     "queue": [{"id": "j1", "num_gpus": 2, "class": "A"}]})
    >>> inst.topology.n_gpus, inst.queue[0].id
    (4, 'j1')
    >>> instance_from_dict({"format": "palopt.instance/1", "topology": {"shape": "2x0"}})
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: topology.shape = '2x0': every count must be a positive integer
    """
    if not isinstance(data, Mapping):
        raise InputError("instance", type(data).__name__, "expected a JSON object")
    fmt = data.get("format")
    if fmt != FORMAT:
        raise InputError("format", fmt, f"expected {FORMAT!r}")
    check_fields(data, FIELDS)
    meta = {key: data[key] for key in META_FIELDS if key in data}
    check_meta(meta)
    topo = topology_from_spec(data.get("topology"))
    classes = require_field(data, "classes", list, "")
    if not all(isinstance(c, str) for c in classes):
        raise InputError("classes", classes, "expected a list of class names")
    classes_t = tuple(classes)
    if len(set(classes_t)) != len(classes_t) or not classes_t:
        raise InputError("classes", classes, "must be a non-empty list of distinct names")
    slowdown = _slowdown_matrix(topo, classes_t, data.get("slowdown"))
    if "penalties" not in data:
        raise InputError("penalties", None, "required field is missing")
    penalty = penalty_matrix(topo, classes_t, data["penalties"])
    busy = busy_from_list(topo, data.get("busy", []))
    queue = queue_from_list(topo, require_field(data, "queue", list, ""))
    return Instance(topo, classes_t, slowdown, penalty, queue, busy, meta)


def queue_from_list(topology: Topology, data: Any) -> tuple[Job, ...]:
    """The jobs of an instance file's ``queue`` list (GPU ids read against ``topology``).

    Parameters
    ----------
    topology : Topology
    data : list
        Job objects: ``id``, ``num_gpus``, ``class``, optional ``weight`` and ``current_gpus``.

    Returns
    -------
    tuple of Job

    Raises
    ------
    InputError
        Naming the bad field (``queue[3].num_gpus``) and value; a job's class and size are
        checked against an instance by :class:`~palopt.instance.Instance`.

    Examples
    --------
    >>> queue_from_list(parse_shape("1x2"), [{"id": 7, "num_gpus": 1, "class": "A",
    ...                                       "current_gpus": ["gpu1"]}])
    (Job(id='7', num_gpus=1, job_class='A', weight=1.0, current_gpus=(1,)),)
    """
    if not isinstance(data, list):
        raise InputError("queue", type(data).__name__, "expected a list of jobs")
    return tuple(_job_from_dict(topology, i, j) for i, j in enumerate(data))


def busy_from_list(topology: Topology, ids: Any, field: str = "busy") -> np.ndarray:
    """The mask of the GPUs an instance file's ``busy`` list names (``field`` in messages).

    Parameters
    ----------
    topology : Topology
    ids : list of str
        GPU ids of ``topology``.
    field : str, default "busy"
        The name error messages give ``ids``.

    Returns
    -------
    numpy.ndarray
        Boolean mask of ``topology.n_gpus`` GPUs, true for those listed.

    Raises
    ------
    InputError
        For anything but a list of GPU ids of ``topology``, each listed once.

    Examples
    --------
    >>> busy_from_list(parse_shape("1x3"), ["gpu2"]).tolist()
    [False, False, True]
    """
    if not isinstance(ids, list):
        raise InputError(field, ids, "expected a list of GPU ids")
    busy = np.zeros(topology.n_gpus, dtype=bool)
    index = topology.indices(ids, field)
    if len(np.unique(index)) < len(index):
        twice = next(g for i, g in enumerate(ids) if g in ids[:i])
        raise InputError(field, twice, "listed twice")
    busy[index] = True
    return busy


def load_topology(path: str | Path) -> Topology:
    """The topology of a topology JSON file (node-link or ``{"shape": ...}``) or instance file.

    Parameters
    ----------
    path : str or Path
        A topology file (see :func:`topology_from_spec`), or an instance file (its
        ``topology``).

    Returns
    -------
    Topology

    Raises
    ------
    InputError
        For invalid JSON (with line and column) or an invalid topology, named by the file.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/t.json", '{"shape": "2x4"}')
    ...     load_topology(f"{folder}/t.json").n_gpus
    8
    """
    data = read_json(path)
    if isinstance(data, dict) and data.get("format") == FORMAT:
        return topology_from_spec(data.get("topology"), f"{path}: topology")
    return topology_from_spec(data, str(path))


def instance_to_dict(instance: Instance, **meta: str) -> dict[str, Any]:
    """The JSON form of an instance (node-link topology, per-class per-tier penalties).

    Parameters
    ----------
    instance : Instance
    **meta : str
        Stored at the top level: any of ``name``, ``source``, ``licence``, ``description``,
        over the instance's own :attr:`~palopt.instance.Instance.meta`.

    Returns
    -------
    dict
        What :func:`instance_from_dict` reads back into an instance with the same topology,
        classes, slowdowns, penalties, busy GPUs and queue.

    Raises
    ------
    InputError
        For an ``instance`` that is not an :class:`~palopt.instance.Instance`, another ``meta``
        field, a value that is not a string, or a topology attribute JSON cannot hold.

    Examples
    --------
    >>> from palopt import Instance, Job, build_cluster, penalty_matrix
    >>> topo = build_cluster(2, 1, 2)
    >>> inst = Instance(topo, ("A",), np.ones((1, 4)), penalty_matrix(topo, ["A"], 1.7),
    ...                 (Job("a", 2, "A"),))
    >>> data = instance_to_dict(inst, name="tiny")
    >>> data["name"], data["penalties"]
    ('tiny', {'A': {'server': 1.0, 'rack': 1.7, 'cluster': 1.7}})
    >>> instance_from_dict(data).queue == inst.queue
    True
    """
    require_instance(instance)
    check_meta(meta)
    topo = instance.topology
    return {
        "format": FORMAT,
        **instance.meta,
        **meta,
        "topology": topo.to_node_link(),
        "classes": list(instance.classes),
        "slowdown": {
            c: dict(zip(topo.gpu_ids, map(float, instance.slowdown[i]), strict=True))
            for i, c in enumerate(instance.classes)
        },
        "penalties": {
            c: dict(zip(topo.tiers, map(float, instance.penalty[i]), strict=True))
            for i, c in enumerate(instance.classes)
        },
        "busy": [topo.gpu_ids[g] for g in np.flatnonzero(instance.busy)],
        "queue": [
            {
                "id": j.id,
                "num_gpus": j.num_gpus,
                "class": j.job_class,
                "weight": j.weight,
                **(
                    {"current_gpus": [topo.gpu_ids[g] for g in j.current_gpus]}
                    if j.current_gpus
                    else {}
                ),
            }
            for j in instance.queue
        ],
    }


def data_dir() -> Path:
    """The folder of the shared input data (the PAL artifact's files in ``pal-artifact/``).

    Returns
    -------
    Path
        ``$PALOPT_DATA`` if set, else ``../shared/data`` beside the checkout palopt runs from.

    Examples
    --------
    >>> artifact = data_dir() / "pal-artifact"   # the files the tests and benchmark read
    >>> artifact.name
    'pal-artifact'
    """
    env = os.environ.get("PALOPT_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "data"


def shared_path(relative: str) -> Path:
    """A file or folder of the shared input data, which must exist.

    Parameters
    ----------
    relative : str
        Its path inside :func:`data_dir`, e.g. ``"pal-artifact/traces"``.

    Returns
    -------
    Path

    Raises
    ------
    InputError
        If it does not exist: the message says where it was looked for and how to point
        ``PALOPT_DATA`` at the data (an installed palopt has no checkout beside it).

    Examples
    --------
    >>> shared_path("pal-artifact/sim-64gpu-cluster.csv").name
    'sim-64gpu-cluster.csv'
    """
    folder = data_dir()
    if not (folder / relative).exists():
        env = (
            "set"
            if os.environ.get("PALOPT_DATA")
            else "not set: ../shared/data beside the checkout"
        )
        raise InputError(
            "shared data",
            relative,
            f"not found in {folder} (PALOPT_DATA is {env}); set PALOPT_DATA to the folder that "
            "holds pal-artifact/",
        )
    return folder / relative


def check_file_name(path: object, field_name: str = "path") -> None:
    """Refuse what is not a file name, an empty one (``Path("")`` is the current folder) or one
    with a NUL character (which ``open`` refuses with a ``ValueError``): an :class:`InputError`
    naming ``field_name``.

    Parameters
    ----------
    path : object
        The file name to check: a ``str`` or ``os.PathLike``.
    field_name : str, default "path"
        The name the error message gives ``path``.

    Raises
    ------
    InputError
        If ``path`` is not a ``str`` or ``os.PathLike``, is empty or holds a NUL character.

    Examples
    --------
    >>> check_file_name("runs/a.json")
    >>> check_file_name("a\\0b", "trace")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: trace = 'a\\x00b': a file name cannot hold a NUL character
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(field_name, type(path).__name__, "expected a file name")
    name = os.fspath(path)
    if not name:
        raise InputError(field_name, "", "an empty file name")
    if "\0" in str(name):
        raise InputError(field_name, name, "a file name cannot hold a NUL character")


def read_text(path: str | Path) -> str:
    """A UTF-8 text file's contents.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    str
        The whole file, with line ends turned into ``"\\n"`` (as :func:`open` reads text) and
        without a leading byte order mark (which some Windows editors write).

    Raises
    ------
    InputError
        If ``path`` is not a file name, is empty or holds a NUL character, or the file is not
        UTF-8 (naming the file and the first bad byte).
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = Path(folder, "a.txt").write_bytes(b"\\xef\\xbb\\xbfGPU0 GPU1\\r\\n")
    ...     read_text(Path(folder, "a.txt"))
    'GPU0 GPU1\\n'
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = Path(folder, "b.txt").write_bytes(b"GPU0\\xff")
    ...     read_text(Path(folder, "b.txt"))
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: .../b.txt = 'byte 4': not a UTF-8 text file
    """
    check_file_name(path)
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        with open(path, "rb") as fh:  # the decoder counts from after a byte order mark
            start = exc.start + (len(codecs.BOM_UTF8) if fh.read(3) == codecs.BOM_UTF8 else 0)
        raise InputError(str(path), f"byte {start}", "not a UTF-8 text file") from None


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` as UTF-8, whole or not at all: into a new file beside it, which
    then replaces ``path``. A write that fails (a full disk, say) leaves an existing file as it
    was; writing in place would leave it cut off. A symbolic link's target is written (the link
    stays), and a device or a named pipe (``/dev/stdout``, say) is written into, not replaced.

    Parameters
    ----------
    path : str or Path
        The file to write. Its folder must exist. An existing file keeps its permission bits.
    text : str
        Written as it is (line ends are not translated).

    Raises
    ------
    InputError
        If ``path`` is not a file name, is empty or holds a NUL character.
    OSError
        If the folder cannot be written, the file cannot be replaced, or ``path`` is a folder.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/a.json", "{}")
    ...     sorted(p.name for p in Path(folder).iterdir()), read_text(f"{folder}/a.json")
    (['a.json'], '{}')
    """
    check_file_name(path)
    path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file() and not path.is_dir():
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        return
    if path.is_dir():  # else os.replace names the hidden file below in its error
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # Created as open() creates files (mode 0o666 less the umask), keeping an existing file's.
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:  # named by the file asked for, not by the hidden one
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        if path.exists():
            os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_json(path: str | Path) -> Any:
    """Parse a JSON file.

    Stricter than :func:`json.loads`, whose leniencies would change what a file means without a
    word: an object with a key twice (the last would win: ``"busy"`` given twice frees the GPUs
    the first lists), an integer of more than 300 digits, sign aside (the largest float has
    309), a string that is not Unicode (a lone surrogate escape, which no output can print),
    and nesting too deep to parse are errors.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    Any
        The parsed value.

    Raises
    ------
    InputError
        For invalid JSON, naming the file, line and column, or a file not in UTF-8, or one of the
        cases above.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = Path(f"{folder}/x.json").write_text('{"busy": ["gpu0"], "busy": []}')
    ...     read_json(f"{folder}/x.json")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: .../x.json = 'busy': the key appears twice in one object
    """
    return parse_json(read_text(path), str(path))


def parse_json(text: str, where: str) -> Any:
    """Parse JSON text as strictly as :func:`read_json` parses a file (``where`` names it).

    Parameters
    ----------
    text : str
        The JSON text.
    where : str
        The name error messages give the text, e.g. a file or an option.

    Returns
    -------
    Any
        The parsed value.

    Raises
    ------
    InputError
        Named by ``where``, for the cases :func:`read_json` refuses.

    Examples
    --------
    >>> parse_json('{"rack": 1.7}', "--penalties")
    {'rack': 1.7}
    >>> parse_json('{"rack": 1.7, "rack": 2}', "--penalties")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: --penalties = 'rack': the key appears twice in one object
    """

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise InputError(where, key, "the key appears twice in one object")
            out[key] = value
        return out

    def bounded_int(digits: str) -> int:
        if len(digits.lstrip("-")) > 300:  # 300 digits are read, 301 are not
            raise InputError(where, f"{digits[:20]}...", "integer too large")
        return int(digits)

    try:
        data = json.loads(text, object_pairs_hook=unique_keys, parse_int=bounded_int)
    except json.JSONDecodeError as exc:
        raise InputError(
            where, f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}"
        ) from None
    except RecursionError:
        raise InputError(where, "nesting", "nested too deeply to read") from None
    if _SURROGATE.search(text):
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(
                where, exc.object[exc.start : exc.end], "a string escape that is not Unicode"
            ) from None
    return data


#: A ``\uD800``-``\uDFFF`` escape: a surrogate, valid only in pairs.
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


#: The options of :func:`pandas.read_csv` that say where the header line is and how it splits
#: into names: :func:`read_csv` reads the header again with them to find a name given twice.
_CSV_LAYOUT_OPTIONS = frozenset(
    {
        "sep",
        "delimiter",
        "delim_whitespace",
        "engine",
        "dialect",
        "quotechar",
        "quoting",
        "doublequote",
        "escapechar",
        "skipinitialspace",
        "comment",
        "lineterminator",
        "skiprows",
        "skip_blank_lines",
        "encoding",
        "encoding_errors",
        "compression",
    }
)


def read_csv(
    path: str | Path | IO[Any], field_name: str | None = None, **options: Any
) -> pd.DataFrame:
    """Read a CSV file with pandas; a file pandas cannot parse is an :class:`InputError`.

    A row with more fields than the header is an error: pandas would otherwise take the first
    column as the index, silently, and read every value from the column to its right. The error
    names the row's line as pandas counts lines (from 1; a quoted field over several lines is
    one), for the first data row too when the header is the first line.

    Parameters
    ----------
    path : str, Path or file object
        A file object is read whole first.
    field_name : str, optional
        What the error names (default: the path).
    **options
        Passed to :func:`pandas.read_csv` (``index_col`` is ``False`` unless given). Those that
        lay out the lines (``sep``, quoting, ``comment``, ``skiprows``...) also to the second
        read of the header line that finds a name given twice (with ``names``, or ``header``
        ``None`` or a list, the file has no header line to check).

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    InputError
        For a file name that is empty or holds a NUL character, an empty file, one that is not
        CSV (bad quoting, ragged rows, not UTF-8), or a column given twice in the header.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/sd.csv", "gpu,slowdown\\ngpu0,1.0\\ngpu1,1.2\\n")
    ...     read_csv(f"{folder}/sd.csv")
        gpu  slowdown
    0  gpu0       1.0
    1  gpu1       1.2
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/empty.csv", "")
    ...     read_csv(f"{folder}/empty.csv", "profile")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: profile = '.../empty.csv': the file is empty (no header line)
    """
    import pandas as pd  # only needed to read files; keeps `import palopt` light

    name = str(path) if field_name is None else field_name
    options.setdefault("index_col", False)
    source: str | os.PathLike[str] | IO[Any] = path
    if isinstance(path, (str, os.PathLike)):
        check_file_name(path, field_name or "path")
    else:  # a stream: read twice below, so held here
        content = path.read()
        source = io.StringIO(content) if isinstance(content, str) else io.BytesIO(content)
    # The header line is read again as the frame's was (same separator, quoting...) to find a
    # name given twice and, if the first row is longer than the header, that row's line.
    layout = {k: v for k, v in options.items() if k in _CSV_LAYOUT_OPTIONS}
    row = options.get("header", "infer")
    row = 0 if isinstance(row, str) else row  # "infer": the first line
    has_header = options.get("names") is None and type(row) is int
    try:
        with warnings.catch_warnings():  # e.g. a row longer than the header: data would be lost
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(source, **options)
            if not isinstance(source, (str, os.PathLike)):
                source.seek(0)
            # pandas renames a column given twice ("a", "a.1"): the second would be ignored.
            header = pd.Series(dtype=str)
            if has_header:
                header = pd.read_csv(
                    source, header=None, nrows=row + 1, dtype=str, keep_default_na=False, **layout
                ).iloc[row]
    except pd.errors.EmptyDataError:
        raise InputError(name, str(path), "the file is empty (no header line)") from None
    except (pd.errors.ParserError, pd.errors.ParserWarning, UnicodeDecodeError) as exc:
        problem = str(exc).splitlines()[0][:120]
        if problem.startswith("Length of header"):  # pandas' words for it
            problem = "a row has more fields than the header"
            if has_header and row == 0:
                problem += _first_row_fields(source, layout)
        raise InputError(name, str(path), f"not a readable CSV file: {problem}") from None
    twice = header[header.duplicated()]
    if len(twice):
        raise InputError(name, str(path), f"column {twice.iloc[0]!r} given twice in the header")
    return frame


def _first_row_fields(source: str | os.PathLike[str] | IO[Any], layout: dict[str, Any]) -> str:
    """Where a first data row longer than a header on the first line is, in pandas' words for
    a later row: ``": Expected 2 fields in line 2, saw 3"`` (``""`` if pandas does not say).

    pandas checks each row's length against the row before it from the second data row on, and
    names the line of a longer one; a longer first data row passes that check and is refused
    later without its line. Read again with the header line as a row of data, the first data
    row is checked against it.
    """
    import pandas as pd

    if not isinstance(source, (str, os.PathLike)):
        source.seek(0)
    try:
        pd.read_csv(source, header=None, nrows=2, dtype=str, keep_default_na=False, **layout)
    except pd.errors.ParserError as exc:
        found = re.search(r"Expected \d+ fields in line \d+, saw \d+", str(exc))
        return f": {found.group()}" if found else ""
    return ""


def load_instance(path: str | Path) -> Instance:
    """Read and validate an instance file.

    Parameters
    ----------
    path : str or Path
        A ``palopt.instance/1`` JSON file (see :func:`instance_from_dict`).

    Returns
    -------
    Instance

    Raises
    ------
    InputError
        For invalid JSON (with line and column) or an invalid instance.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> text = ('{"format": "palopt.instance/1", "topology": {"shape": "2x2"}, "classes": ["A"], '
    ...         '"slowdown": {"A": [1.0, 1.1, 1.0, 1.2]}, "penalties": 1.7, '
    ...         '"queue": [{"id": "j1", "num_gpus": 2, "class": "A"}]}')
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/ok.json", text)
    ...     inst = load_instance(f"{folder}/ok.json")
    >>> inst.topology.n_gpus, inst.queue[0].id, float(inst.slowdown[0, 3])
    (4, 'j1', 1.2)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/cut.json", text[:60])  # cut off in the middle
    ...     load_instance(f"{folder}/cut.json")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: .../cut.json = 'line 1 column 61': invalid JSON: ...
    """
    return instance_from_dict(read_json(path))


def save_instance(instance: Instance, path: str | Path, **meta: str) -> None:
    """Write an instance file (UTF-8 JSON; see :func:`instance_to_dict`).

    Parameters
    ----------
    instance : Instance
    path : str or Path
    **meta : str
        Any of ``name``, ``source``, ``licence``, ``description``.

    Raises
    ------
    InputError
        For another ``meta`` field, or a value that is not a string (nothing is written).
    OSError
        If the file cannot be written.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from palopt import Instance, Job, build_cluster
    >>> inst = Instance(build_cluster(1, 1, 2), ("A",), np.ones((1, 2)), np.ones((1, 3)),
    ...                 (Job("a", 2, "A"),))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     save_instance(inst, f"{folder}/copy.json", name="copy")
    ...     load_instance(f"{folder}/copy.json").queue == inst.queue
    True
    """
    write_text(path, json.dumps(instance_to_dict(instance, **meta), indent=1) + "\n")


def instance_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the instance format.

    Returns
    -------
    dict
        The schema as plain JSON data (a new dict on every call). It checks the fields, their
        types and ranges, and which node kinds carry which attributes;
        :func:`instance_from_dict` checks what it cannot express (GPU ids, classes, one value
        per GPU, the wiring of the graph, printable names beyond control characters).

    Examples
    --------
    >>> schema = instance_schema()
    >>> schema["$schema"]
    'https://json-schema.org/draft/2020-12/schema'
    >>> schema["required"]
    ['format', 'topology', 'classes', 'slowdown', 'penalties', 'queue']
    """
    number = {"type": "number", "exclusiveMinimum": 0}
    factor = {"type": "number", "minimum": MIN_FACTOR, "maximum": MAX_FACTOR}
    per_gpu = {
        "oneOf": [
            {"type": "array", "items": factor},
            {"type": "object", "additionalProperties": factor},
        ]
    }
    tier_map = {"type": "object", "additionalProperties": factor}
    count = "0*[1-9][0-9]*"
    control = "\\u0000-\\u001f\\u007f-\\u009f"
    # No line break anywhere: Python's re (python-jsonschema) lets $ match before a final one.
    one_line = "(?!.*\\n)"
    # A name (class, tier, node id): printable text, as the loader asks (control characters
    # here; the loader also refuses the other characters str.isprintable does)
    name = {"type": "string", "pattern": f"^{one_line}[^{control}]+$"}
    # The attributes a node of each kind may not carry.
    not_here = {k: [a for a, owner in ATTRIBUTE_KIND.items() if owner != k] for k in KINDS}
    edges = {  # networkx writes "edges" (3.4 and later) or "links"; either key is read
        "type": "array",
        "items": {
            "type": "object",
            "required": ["source", "target", "link"],
            "properties": {
                "source": {"type": "string"},
                "target": {"type": "string"},
                "link": {"enum": list(LINKS)},
            },
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://palopt.invalid/schema/instance-1.json",
        "title": "palopt placement instance",
        "type": "object",
        "required": ["format", "topology", "classes", "slowdown", "penalties", "queue"],
        "additionalProperties": False,
        "properties": {
            "format": {"const": FORMAT},
            "name": {"type": "string"},
            "source": {"type": "string"},
            "licence": {"type": "string"},
            "description": {"type": "string"},
            "topology": {
                "oneOf": [
                    {
                        "type": "object",
                        "required": ["shape"],
                        "additionalProperties": False,
                        "properties": {
                            "shape": {
                                "type": "string",
                                "pattern": f"^{one_line}{count}[xX]{count}([xX]{count})?$",
                            }
                        },
                    },
                    {
                        "type": "object",
                        "required": ["nodes"],
                        "oneOf": [{"required": ["edges"]}, {"required": ["links"]}],
                        "additionalProperties": False,
                        "properties": {
                            "directed": {"const": False},
                            "multigraph": {"const": False},
                            "graph": {"type": "object"},
                            "nodes": {
                                "type": "array",
                                "minItems": 1,
                                "items": {
                                    "type": "object",
                                    "required": ["id", "kind"],
                                    "properties": {
                                        "id": name,
                                        "kind": {"enum": list(KINDS)},
                                        "tier": {**name, "not": {"enum": [NVLINK, SERVER]}},
                                        "root": {"type": "boolean"},
                                        "local": {
                                            "type": "integer",
                                            "minimum": 0,
                                            "maximum": MAX_LOCAL - 1,
                                        },
                                    },
                                    "allOf": [
                                        {
                                            "if": {"properties": {"kind": {"const": kind}}},
                                            "then": {"properties": dict.fromkeys(keys, False)},
                                        }
                                        for kind, keys in not_here.items()
                                    ],
                                },
                            },
                            "edges": edges,
                            "links": edges,
                        },
                    },
                ]
            },
            "classes": {
                "type": "array",
                "items": name,
                "minItems": 1,
                "uniqueItems": True,
            },
            "slowdown": {"type": "object", "additionalProperties": per_gpu},
            "penalties": {
                "oneOf": [
                    factor,
                    {**tier_map, "minProperties": 1},
                    {"type": "object", "additionalProperties": tier_map, "minProperties": 1},
                ]
            },
            "busy": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "queue": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "num_gpus", "class"],
                    "additionalProperties": False,
                    "properties": {
                        "id": {
                            "oneOf": [name, {"type": "integer"}],
                        },
                        "num_gpus": {"type": "integer", "minimum": 1},
                        "class": name,
                        "weight": number,
                        "current_gpus": {
                            "type": "array",
                            "items": {"type": "string"},
                            "uniqueItems": True,
                        },
                    },
                },
            },
        },
    }
