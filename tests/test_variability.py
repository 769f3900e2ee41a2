"""Variability profiles: loaders, normalisation, joining, assignment, instances, profile CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from palopt.binning import bin_values
from palopt.cli import main
from palopt.commands.profile import summarise
from palopt.errors import InputError
from palopt.instance import Job
from palopt.topology import build_cluster
from palopt.variability import (
    PROFILE_FORMAT,
    VariabilityProfile,
    assign_profile,
    bin_profile,
    build_instance,
    load_artifact_table,
    load_longhorn,
    load_profile,
    read_measurements,
    save_profile,
)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def longhorn(artifact_dir: Path) -> VariabilityProfile:
    return load_longhorn(artifact_dir / "variability")


def test_read_measurements_median_per_gpu_and_normalised(tmp_path: Path) -> None:
    f = write(
        tmp_path / "m.csv",
        "cab,node,dev,perf\n"
        "c1,004,0,10\nc1,4,0,12\nc1,4,0,100\n"  # node 004 and 4 are one GPU: median 12
        "c1,4,1,20\nc1,5,0,30\n",
    )
    p = read_measurements(f, ["cab", "node", "dev"], ["perf"], ["A"])
    assert p.gpus == ("c1-4-0", "c1-4-1", "c1-5-0")
    assert np.allclose(p.values[0], np.array([12, 20, 30]) / 20)
    assert np.median(p.values[0]) == 1.0
    raw = read_measurements(f, ["cab", "node", "dev"], ["perf"], normalise=False)
    assert raw.classes == ("perf",) and np.allclose(raw.values[0], [12, 20, 30])
    # a node number of 4,301 digits: int() raised ValueError; unpadded as any other
    f = write(tmp_path / "long.csv", f"node,perf\n0{'9' * 4301},10\n-007,12\n")
    assert read_measurements(f, ["node"], ["perf"]).gpus == ("9" * 4301, "-7")
    # -0, -00 and 0 are one node; a zero run among a GPU's others is refused, not outvoted
    f = write(tmp_path / "zero.csv", "node,perf\n-0,10\n-00,30\n0,20\n")
    raw = read_measurements(f, ["node"], ["perf"], normalise=False)
    assert raw.gpus == ("0",) and raw.values.tolist() == [[20.0]]
    f = write(tmp_path / "run0.csv", "node,perf\na,1\na,0\na,2\n")
    with pytest.raises(InputError, match="line 3, column perf = '0': must be a finite positive"):
        read_measurements(f, ["node"], ["perf"])


def test_longhorn_profile(longhorn: VariabilityProfile) -> None:
    assert longhorn.classes == ("classA", "classB", "classC", "classD")
    measured = (~np.isnan(longhorn.values)).sum(axis=1)
    assert measured.tolist() == [336, 136, 136, 172]
    assert longhorn.n_gpus == 384 and int(longhorn.complete().sum()) == 20
    for c in range(4):
        assert np.nanmedian(longhorn.values[c]) == pytest.approx(1.0, abs=1e-12)
    # classes B and C are both profiled from BERT
    assert np.array_equal(longhorn.values[1], longhorn.values[2], equal_nan=True)


def test_longhorn_per_gpu_median_by_hand(artifact_dir: Path, longhorn: VariabilityProfile) -> None:
    df = pd.read_csv(
        artifact_dir / "variability" / "pagerank-longhorn-agg.csv", dtype={"cabinet": str}
    )
    per_gpu = df.groupby(["cabinet", "node", "device"])["perf"].median()
    expected = per_gpu / per_gpu.median()
    (cab, node, dev), value = next(iter(expected.items()))
    g = longhorn.gpus.index(f"{cab}-{int(node)}-{int(dev)}")
    assert longhorn.row("classD")[g] == pytest.approx(value, rel=1e-12)


def test_artifact_tables(artifact_dir: Path) -> None:
    t32 = load_artifact_table(artifact_dir / "variability" / "32gpu-variability.csv")
    df = pd.read_csv(artifact_dir / "variability" / "32gpu-variability.csv")
    assert t32.gpus == tuple(str(i) for i in range(32))
    assert np.array_equal(t32.row("classA"), df["PerfVar_classA"].to_numpy())
    t64 = load_artifact_table(artifact_dir / "sim-64gpu-cluster.csv")
    assert t64.n_gpus == 64 and t64.classes == ("classA", "classB", "classC", "classD")


def test_artifact_table_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="PerfVar_"):
        load_artifact_table(write(tmp_path / "t.csv", "GPU_ID,x\n0,1.0\n"))
    with pytest.raises(InputError, match="empty"):
        load_artifact_table(write(tmp_path / "e.csv", ""))
    with pytest.raises(InputError, match="not a readable CSV file"):
        load_artifact_table(write(tmp_path / "q.csv", 'GPU_ID,"PerfVar_A\n0,1.0\n'))
    latin = tmp_path / "l.csv"
    latin.write_bytes("GPU_ID,PerfVar_A\n0,1.0\nné,1.1\n".encode("latin-1"))
    for load in (load_artifact_table, lambda p: read_measurements(p, ["GPU_ID"], ["PerfVar_A"])):
        with pytest.raises(InputError, match="not a readable CSV file"):
            load(latin)


def test_profile_json_round_trip(tmp_path: Path, longhorn: VariabilityProfile) -> None:
    save_profile(longhorn, tmp_path / "p.json")
    back = load_profile(tmp_path / "p.json")
    assert back.classes == longhorn.classes and back.gpus == longhorn.gpus
    assert np.array_equal(back.values, longhorn.values, equal_nan=True)
    assert back.source == longhorn.source


@pytest.mark.parametrize("missing", ["drop", "median", "sample"])
def test_assign_keeps_each_gpus_values_together(longhorn: VariabilityProfile, missing: str) -> None:
    topo = build_cluster(1, 4, 4)
    a = assign_profile(longhorn, topo, seed=7, missing=missing)
    assert a.gpus == topo.gpu_ids and len(set(a.origin)) == topo.n_gpus
    src = longhorn.values[:, [longhorn.gpus.index(o) for o in a.origin]]
    measured = ~np.isnan(src)
    assert np.array_equal(a.values[measured], src[measured])
    assert not np.isnan(a.values).any()
    if missing == "drop":
        assert measured.all()
    if missing == "median":
        assert np.all(a.values[~measured] == 1.0)
    if missing == "sample":
        for c in range(len(a.classes)):
            pool = set(longhorn.values[c][~np.isnan(longhorn.values[c])].tolist())
            assert set(a.values[c][~measured[c]].tolist()) <= pool


def test_assign_by_server_keeps_measured_servers_whole(longhorn: VariabilityProfile) -> None:
    topo = build_cluster(2, 8, 4)
    a = assign_profile(longhorn, topo, seed=5, missing="sample", by="server")
    assert len(set(a.origin)) == topo.n_gpus
    for s in range(topo.n_servers):
        start = topo.server_start[s]
        hosts = {o.rsplit("-", 1)[0] for o in a.origin[start : start + 4]}
        assert len(hosts) == 1  # the 4 GPUs of a cluster server come from one measured server
    src = longhorn.values[:, [longhorn.gpus.index(o) for o in a.origin]]
    measured = ~np.isnan(src)
    assert np.array_equal(a.values[measured], src[measured])
    assert np.array_equal(a.values[1], a.values[2])  # B and C (both BERT) filled alike
    again = assign_profile(longhorn, topo, seed=5, missing="sample", by="server")
    assert again.origin == a.origin and np.array_equal(again.values, a.values)
    with pytest.raises(InputError, match="measured servers"):
        assign_profile(longhorn, build_cluster(2, 64, 4), seed=5, missing="median", by="server")


def test_assign_by_server_says_how_large_the_measured_servers_are() -> None:
    # The hint to count GPUs missing a class is given only where it helps: server m1 has
    # 4 GPUs, one of them unmeasured for class B; m2 has 2.
    nan = np.nan
    values = np.array([[1.0, 1.1, 1.2, 1.3, 1.0, 1.1], [1.0, 1.1, 1.2, nan, 1.0, 1.1]])
    p = VariabilityProfile(("A", "B"), ("m1-0", "m1-1", "m1-2", "m1-3", "m2-0", "m2-1"), values)
    with pytest.raises(InputError) as exc:
        assign_profile(p, build_cluster(1, 1, 4), seed=None, by="server")
    assert exc.value.problem == (
        "not enough with 4 eligible GPUs for the cluster's 1 server (the largest has 3) "
        "(GPUs not measured in every class count with missing='median' or 'sample', "
        "--missing in the CLI)"
    )
    assert assign_profile(p, build_cluster(1, 1, 4), None, "median", "server").origin == (
        "m1-0",
        "m1-1",
        "m1-2",
        "m1-3",
    )
    with pytest.raises(InputError) as exc:
        assign_profile(p, build_cluster(1, 1, 8), seed=None, missing="median", by="server")
    assert exc.value.problem.endswith("1 server (the largest has 4)")  # no hint: none is larger


def test_assign_by_server_matches_servers_of_mixed_sizes() -> None:
    # Cluster servers of 2 and 4 GPUs, measured servers of 4 (m1) and 2 (m2): first fit gave
    # m1 to the 2-GPU server and then refused, for want of a 4-GPU one. Each cluster server
    # takes the first GPUs of its measured server.
    import networkx as nx

    from palopt.topology import Topology

    g = nx.Graph()
    g.add_node("c", kind="switch", tier="cluster")
    for srv, n in (("sA", 2), ("sB", 4)):
        g.add_node(srv, kind="server")
        g.add_edge("c", srv, link="network")
        for k in range(n):
            g.add_node(f"{srv}{k}", kind="gpu", local=k)
            g.add_edge(srv, f"{srv}{k}", link="pcie")
    topo = Topology.from_graph(g)
    gpus = ("m1-0", "m1-1", "m1-2", "m1-3", "m1-4", "m2-0", "m2-1")
    p = VariabilityProfile(("A",), gpus, np.linspace(1.0, 1.6, 7)[None])
    for seed in (None, 0, 1, 2, 3):
        a = assign_profile(p, topo, seed=seed, by="server")
        assert a.origin == ("m2-0", "m2-1", "m1-0", "m1-1", "m1-2", "m1-3")
    # in profile order, the first measured GPUs and servers are taken
    assert assign_profile(p, build_cluster(1, 1, 2), seed=None).origin == ("m1-0", "m1-1")
    two = assign_profile(p, build_cluster(1, 1, 2), seed=None, by="server")
    assert two.origin == ("m1-0", "m1-1")
    with pytest.raises(InputError, match="profile.gpus = 'a': by='server' needs keys like"):
        assign_profile(
            VariabilityProfile(("A",), ("a", "b"), np.ones((1, 2))),
            build_cluster(1, 1, 2),
            seed=None,
            by="server",
        )


def test_assign_is_deterministic_per_seed(longhorn: VariabilityProfile) -> None:
    topo = build_cluster(2, 8, 4)
    a = assign_profile(longhorn, topo, seed=3, missing="sample")
    b = assign_profile(longhorn, topo, seed=3, missing="sample")
    c = assign_profile(longhorn, topo, seed=4, missing="sample")
    assert a.origin == b.origin and np.array_equal(a.values, b.values)
    assert a.origin != c.origin
    with pytest.raises(InputError, match="seed = -1: must be a non-negative integer"):
        assign_profile(longhorn, topo, seed=-1, missing="sample")


def test_assign_in_order_without_seed(artifact_dir: Path) -> None:
    t32 = load_artifact_table(artifact_dir / "variability" / "32gpu-variability.csv")
    a = assign_profile(t32, build_cluster(1, 8, 4), seed=None)
    assert a.origin == t32.gpus and np.array_equal(a.values, t32.values)


def test_assign_errors(longhorn: VariabilityProfile) -> None:
    with pytest.raises(InputError, match="eligible"):
        assign_profile(longhorn, build_cluster(1, 8, 4), seed=1)  # only 20 complete GPUs
    with pytest.raises(InputError, match="needs a seed"):
        assign_profile(longhorn, build_cluster(1, 2, 4), seed=None, missing="sample")
    with pytest.raises(InputError):
        assign_profile(longhorn, build_cluster(1, 2, 4), seed=1, missing="zero")


def test_merge_and_select() -> None:
    a = VariabilityProfile(("A",), ("g0", "g1"), np.array([[1.0, 1.2]]))
    b = VariabilityProfile(("B",), ("g1", "g2"), np.array([[0.9, 1.1]]))
    m = a.merge(b)
    assert m.gpus == ("g0", "g1", "g2")
    assert np.array_equal(m.values, [[1.0, 1.2, np.nan], [np.nan, 0.9, 1.1]], equal_nan=True)
    assert m.select({"X": "B", "Y": "B"}).classes == ("X", "Y")
    with pytest.raises(InputError, match="both"):
        m.merge(b)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ([[1.0, -1.0]], r"values.A.g1 = -1.0: must be a finite number from 1e-12 to 1e\+12"),
        ([[1.0, 1e13]], r"values.A.g1 = 10000000000000.0: must be a finite number"),
        ([[1.0, 0.0]], r"values.A.g1 = 0.0: must be a finite number from 1e-12"),
        ([[1.0, 1e-13]], r"values.A.g1 = 1e-13: must be a finite number from 1e-12"),
        ([[np.nan, np.nan]], "no GPU"),
        ([[1.0]], "shape"),
    ],
)
def test_profile_validation(values: list, match: str) -> None:
    with pytest.raises(InputError, match=match):
        VariabilityProfile(("A",), ("g0", "g1"), np.array(values))


def test_profile_names_origin_and_read_only_values() -> None:
    with pytest.raises(InputError, match="classes = \\[\\]: a profile needs at least one"):
        VariabilityProfile((), (), np.empty((0, 0)))
    with pytest.raises(InputError, match="gpus = 'g': duplicate name"):
        VariabilityProfile(("A",), ("g", "g"), np.ones((1, 2)))
    with pytest.raises(InputError, match="origin = 1: expected 2 entries"):
        VariabilityProfile(("A",), ("g0", "g1"), np.ones((1, 2)), origin=("x",))
    p = VariabilityProfile(("A",), ("g0", "g1"), np.ones((1, 2)))
    with pytest.raises(ValueError, match="read-only"):
        p.values[0, 0] = 5.0
    assert "origin" not in p.to_dict()  # no origin: none written


@pytest.mark.parametrize("name", ["a\tb", "a\nb", ""])
def test_a_class_name_that_does_not_print_is_refused_when_imported(
    tmp_path: Path, capsys, name: str
) -> None:
    # `profile import --class 'a<TAB>b'` wrote the profile; an instance refused the class only
    # at `instance build`, naming no profile
    with pytest.raises(InputError, match="a class name must be printable text"):
        VariabilityProfile((name,), ("g0",), np.ones((1, 1)))
    csv = write(tmp_path / "m.csv", "gpu,t\na,1\nb,2\n")
    out = tmp_path / "p.json"
    argv = ["profile", "import", str(csv), "--id", "gpu", "--value", "t", "-o", str(out)]
    if name:  # an empty --class is refused by its argument
        assert main([*argv, "--class", name]) == 2
        err = capsys.readouterr().err
        assert f"classes = {name!r}: a class name must be printable text" in err
        assert len(err.strip().splitlines()) == 1 and not out.exists()
    data = {"format": "palopt.profile/1", "classes": [name], "gpus": ["g0"]}
    write(out, json.dumps({**data, "values": {name: [1.0]}}))
    assert main(["profile", "show", str(out)]) == 2
    assert f"{out}.classes = {name!r}: a class name" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ([1.0], r"values\.A = \[1\.0\]: expected a list of 2 numbers or nulls"),
        ([1.0, True], r"values\.A\.g1 = True: must be a number or null"),
        ([1.0, 10**400], r"values\.A\.g1 = 1000.*: must be a finite number from 1e-12"),
    ],
)
def test_profile_from_dict_refuses_bad_rows(row: list, match: str) -> None:
    # 10**400 (an integer beyond any float) raised OverflowError
    data = {"format": "palopt.profile/1", "classes": ["A"], "gpus": ["g0", "g1"]}
    with pytest.raises(InputError, match=match):
        VariabilityProfile.from_dict({**data, "values": {"A": row}})


def test_build_instance_uses_binned_levels(artifact_dir: Path) -> None:
    topo = build_cluster(1, 16, 4)
    t64 = assign_profile(
        load_artifact_table(artifact_dir / "sim-64gpu-cluster.csv"), topo, seed=None
    )
    inst = build_instance(t64, topo, 1.7, [Job("j", 2, "classA")], method="artifact")
    sf = pd.read_csv(artifact_dir / "sim-64gpu-cluster.csv")["sf_classA"].to_numpy()
    assert np.allclose(inst.slowdown[0], sf, atol=1e-12)
    assert np.array_equal(
        bin_profile(t64, "kmeans")[1], bin_values(t64.values[1], method="kmeans").levels
    )
    with pytest.raises(InputError, match="assign_profile"):
        build_instance(t64, build_cluster(1, 8, 4), 1.7, [])


# ---- CLI ------------------------------------------------------------------------------------


def test_cli_import_and_show(tmp_path: Path, artifact_dir: Path, capsys) -> None:
    out = tmp_path / "p.json"
    d = artifact_dir / "variability"
    assert (
        main(
            [
                "profile",
                "import",
                str(d / "resnet-longhorn-agg.csv"),
                "--id",
                "cabinet,node,device",
                "--value",
                "perf",
                "--class",
                "classA",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "profile",
                "import",
                str(d / "pagerank-longhorn-agg.csv"),
                "--id",
                "cabinet,node,device",
                "--value",
                "perf",
                "--class",
                "classD",
                "-o",
                str(out),
                "--append",
            ]
        )
        == 0
    )
    p = load_profile(out)
    assert p.classes == ("classA", "classD") and p.n_gpus == 380
    capsys.readouterr()
    assert main(["profile", "show", str(out), "--plot", str(tmp_path / "h.png")]) == 0
    text = capsys.readouterr().out
    assert "classA" in text and "classD" in text and "p95" in text
    assert (tmp_path / "h.png").stat().st_size > 0


def test_cli_assign(tmp_path: Path, longhorn: VariabilityProfile, capsys) -> None:
    save_profile(longhorn, tmp_path / "p.json")
    out = tmp_path / "cluster.json"
    args = [
        "profile",
        "assign",
        str(tmp_path / "p.json"),
        "--cluster",
        "2x4x4",
        "--seed",
        "9",
        "--missing",
        "sample",
        "--by",
        "server",
        "-o",
        str(out),
    ]
    assert main(args) == 0
    a = load_profile(out)
    assert a.gpus == tuple(f"gpu{i}" for i in range(32)) and len(set(a.origin)) == 32
    assert np.array_equal(
        a.values, assign_profile(longhorn, build_cluster(2, 4, 4), 9, "sample", "server").values
    )
    capsys.readouterr()
    assert main([*args[:4], "9x", "-o", str(out)]) == 2
    assert "cluster" in capsys.readouterr().err
    assert (
        main(["profile", "assign", str(tmp_path / "p.json"), "--cluster", "8x4", "-o", str(out)])
        == 2
    )  # only 20 GPUs are measured in every class
    assert "eligible" in capsys.readouterr().err


def test_read_measurements_skips_blank_lines_before_the_header_and_tab_only_lines(
    tmp_path: Path,
) -> None:
    # a blank first line was taken as the header ("the file is empty"), a line of a tab as a
    # row with an empty GPU id, while a line of spaces was skipped
    f = write(tmp_path / "runs.csv", "\n  \ngpu,perf\na,1.0\n\t\nb,2.0\n \t \nb,4.0\n")
    p = read_measurements(f, ["gpu"], ["perf"], normalise=False)
    assert p.gpus == ("a", "b")
    assert p.values.tolist() == [[1.0, 3.0]]
    assert "median of 3 rows" in p.source


@pytest.mark.parametrize(
    ("content", "args", "expect"),
    [
        ("gpu,perf\n", ["--id", "gpu", "--value", "perf"], "no data rows"),
        ("", ["--id", "gpu", "--value", "perf"], "empty"),
        ("gpu,perf\na,1.0\n", ["--id", "uuid", "--value", "perf"], "'uuid': no such column"),
        ("gpu,perf\na,1.0\n", ["--id", "gpu", "--value", "time"], "'time': no such column"),
        (
            "gpu,perf\na,1.0\nb,fast\n",
            ["--id", "gpu", "--value", "perf"],
            "line 3, column perf = 'fast': not a number",
        ),
        ("gpu,perf\na,1.0\nb,-2\n", ["--id", "gpu", "--value", "perf"], "line 3, column perf"),
        ("gpu,perf\na,1.0\n,2\n", ["--id", "gpu", "--value", "perf"], "line 3, column gpu"),
        # blank lines and rows of separators alone are skipped, not left out of the count
        (
            "gpu,perf\na,1.0\n\n  \n,\nb,x\n",
            ["--id", "gpu", "--value", "perf"],
            "line 6, column perf",
        ),
        ("gpu,perf\n\n\n", ["--id", "gpu", "--value", "perf"], "no data rows"),
        # blank lines before the header: counted too (the first was read as an empty header)
        ("\n \ngpu,perf\na,1.0\nb,x\n", ["--id", "gpu", "--value", "perf"], "line 5, column perf"),
        ("\n\t\n", ["--id", "gpu", "--value", "perf"], "empty"),
        ("gpu,perf\na,1.0\n", ["--id", "gpu", "--value", "perf", "--class", "A,B"], "one class"),
        ("gpu,perf\n1,1.0\n", ["--id", "gpu", "--value", "gpu"], "['gpu']: also named as id"),
    ],
)
def test_cli_import_bad_files(
    tmp_path: Path, capsys, content: str, args: list[str], expect: str
) -> None:
    f = write(tmp_path / "bad.csv", content)
    code = main(["profile", "import", str(f), *args, "-o", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert str(f) in err and expect in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        ("{", "invalid JSON"),
        ('{"format": "other"}', "format"),
        (
            '{"format": "palopt.profile/1", "classes": ["A"], "gpus": ["g"], '
            '"values": {"A": ["x"]}}',
            "values.A.g",
        ),
        (  # a key with a line break broke the message over two lines
            '{"format": "palopt.profile/1", "classes": ["A"], "gpus": ["g"], '
            '"values": {"A": [1.0], "B\\n": [1.0]}}',
            "values.B\\n = [1.0]: unknown field",
        ),
    ],
)
def test_cli_show_bad_files(tmp_path: Path, capsys, content: str, expect: str) -> None:
    f = write(tmp_path / "bad.json", content)
    assert main(["profile", "show", str(f)]) == 2
    err = capsys.readouterr().err
    assert str(f) in err and expect in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_missing_file(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:  # refused by the argument, before any work
        main(["profile", "show", str(tmp_path / "nope.json")])
    assert exc.value.code == 2
    assert f"argument file: '{tmp_path / 'nope.json'}': no such file" in capsys.readouterr().err


def _two_class_profile(tmp_path: Path) -> Path:
    """Six GPUs of three servers; GPU s0-1 not measured in class B."""
    values = np.array([[0.9, 1.0, 1.0, 1.3, 1.31, 2.0], [1.0, np.nan, 1.1, 1.2, 1.0, 1.5]])
    gpus = ("s0-0", "s0-1", "s1-0", "s1-1", "s2-0", "s2-1")
    save_profile(VariabilityProfile(("A", "B"), gpus, values, source="hand"), tmp_path / "p.json")
    return tmp_path / "p.json"


def test_cli_show_table(tmp_path: Path, capsys) -> None:
    path = _two_class_profile(tmp_path)
    assert main(["profile", "show", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "6 GPUs; source: hand",
        "class         gpus     min  median     p95     max   k  levels (kmeans)",
        "A                6  0.9000  1.1500  1.8275  2.0000   4  0.9000x1 1.0000x2 1.3050x2 "
        "2.0000x1",
        "B                5  1.0000  1.1000  1.4400  1.5000   4  1.0000x2 1.1000x1 1.2000x1 "
        "1.5000x1",  # the GPU not measured in B is left out
    ]
    assert main(["profile", "show", str(path), "--tol", "0.3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].endswith("   2  1.1020x5 2.0000x1") and lines[3].endswith("   1  1.1600x5")
    assert main(["profile", "show", str(path), "--method", "artifact"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].endswith("levels (artifact)")
    expected = summarise(load_profile(path), "artifact")
    assert out == expected + "\n" and expected != summarise(load_profile(path))


@pytest.mark.parametrize("tol", ["-0.1", "nan", "inf"])
def test_cli_show_refuses_a_bad_tolerance(tmp_path: Path, capsys, tol: str) -> None:
    path = _two_class_profile(tmp_path)
    assert (
        main(["profile", "show", str(path), "--tol", tol, "--plot", str(tmp_path / "h.png")]) == 2
    )
    assert capsys.readouterr().err == (
        f"palopt: error: --tol = {float(tol)}: must be a finite number >= 0\n"
    )
    assert not (tmp_path / "h.png").exists()


def test_cli_show_draws_with_the_binning_it_prints(tmp_path: Path, monkeypatch) -> None:
    from palopt.commands import profile as command

    calls = []
    real = command.bin_values

    def spy(values, method, tol):
        calls.append((method, tol))
        return real(values, method=method, tol=tol)

    monkeypatch.setattr(command, "bin_values", spy)
    path = _two_class_profile(tmp_path)
    args = ["profile", "show", str(path), "--plot", str(tmp_path / "h.png")]
    assert main([*args, "--method", "artifact", "--tol", "0.3"]) == 0
    assert calls == [("artifact", 0.3)] * 4  # two classes, in the table and in the plot
    assert (tmp_path / "h.png").stat().st_size > 0


def test_cli_import_options(tmp_path: Path, capsys) -> None:
    csv = write(tmp_path / "m.csv", "node,perf,t\na,10,2\nb,20,3\nc,40,5\n")
    out = tmp_path / "p.json"
    base = ["profile", "import", str(csv), "--id", "node", "-o", str(out)]
    assert main([*base, "--value", "perf", "--no-normalise"]) == 0
    assert load_profile(out).values.tolist() == [[10.0, 20.0, 40.0]]  # as measured
    assert main([*base, "--value", "t"]) == 0  # without --append: replaced
    p = load_profile(out)
    assert p.classes == ("t",) and p.values.tolist() == [[2 / 3, 1.0, 5 / 3]]
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"{out}: 3 GPUs, classes t (")
    assert main([*base, "--value", "perf", "--class", "P", "--append"]) == 0
    p = load_profile(out)
    assert p.classes == ("t", "P") and p.values[1].tolist() == [0.5, 1.0, 2.0]
    assert capsys.readouterr().out.startswith(f"{out}: 3 GPUs, classes t, P (")
    for bad in ("node,", ",node", "node,,perf"):
        with pytest.raises(SystemExit) as exc:
            main([*base, "--value", "perf", "--id", bad])
        assert exc.value.code == 2
        assert "expected comma-separated names" in capsys.readouterr().err


def test_cli_assign_defaults_and_summary_line(tmp_path: Path, capsys) -> None:
    path = _two_class_profile(tmp_path)
    out = tmp_path / "a.json"
    args = ["profile", "assign", str(path), "--cluster", "1x4", "-o", str(out)]
    assert main(args) == 0  # by default: in profile order, unmeasured GPUs dropped, single GPUs
    assert capsys.readouterr().out == (f"{out}: 4 GPUs (1x4), classes A, B, from 4 measured GPUs\n")
    assert load_profile(out).origin == ("s0-0", "s1-0", "s1-1", "s2-0")
    assert main([*args, "--missing", "median"]) == 0
    assert load_profile(out).origin == ("s0-0", "s0-1", "s1-0", "s1-1")
    args = ["profile", "assign", str(path), "--cluster", "2x2", "-o", str(out), "--by", "server"]
    assert main(args) == 0  # whole servers: s0 was not measured in B
    assert load_profile(out).origin == ("s1-0", "s1-1", "s2-0", "s2-1")

    # --replace repeats measured GPUs: the line counts each measured GPU once
    args = ["profile", "assign", str(path), "--cluster", "2x4", "-o", str(out), "--seed", "3"]
    assert main([*args, "--replace"]) == 0
    drawn = set(load_profile(out).origin)
    assert len(drawn) < 8
    assert capsys.readouterr().out.endswith(f"from {len(drawn)} measured GPUs\n")


def test_cli_import_append_to_a_profile_not_yet_written_starts_it(tmp_path: Path, capsys) -> None:
    """`profile import --append` with no --out file yet writes the new profile (a first run of a
    script that appends class by class), rather than failing to read the missing file."""
    csv = write(tmp_path / "m.csv", "node,perf\na,10\nb,20\nc,40\n")
    out = tmp_path / "new.json"
    argv = ["profile", "import", str(csv), "--id", "node", "--value", "perf", "-o", str(out)]
    assert main([*argv, "--append"]) == 0
    p = load_profile(out)
    assert p.classes == ("perf",) and p.values.tolist() == [[0.5, 1.0, 2.0]]
    assert capsys.readouterr().out.startswith(f"{out}: 3 GPUs, classes perf (")


def test_cli_show_takes_a_tolerance_of_zero(tmp_path: Path, capsys) -> None:
    """`profile show --tol 0` (the documented bound is >= 0) bins without tolerance instead of
    being refused."""
    path = _two_class_profile(tmp_path)
    assert main(["profile", "show", str(path), "--tol", "0"]) == 0
    assert capsys.readouterr().out == summarise(load_profile(path), "kmeans", 0.0) + "\n"


def test_assign_profile_with_replacement_fills_a_larger_cluster() -> None:
    p = VariabilityProfile(("A", "B"), ("x", "y"), np.array([[1.0, 1.1], [0.9, 1.3]]))
    topo = build_cluster(1, 2, 4)
    with pytest.raises(InputError, match="eligible GPUs"):
        assign_profile(p, topo, seed=1)
    out = assign_profile(p, topo, seed=1, replace=True)
    assert set(out.origin) <= {"x", "y"} and len(out.origin) == 8
    for g, origin in enumerate(out.origin):  # classes of one measured GPU stay together
        assert list(out.values[:, g]) == list(p.values[:, p.gpus.index(origin)])
    for bad in ({"seed": None}, {"seed": 1, "by": "server"}):
        with pytest.raises(InputError, match="replace"):
            assign_profile(p, topo, replace=True, **bad)


def test_profile_file_with_an_unknown_field_is_rejected(
    tmp_path: Path, longhorn: VariabilityProfile
) -> None:
    data = {**longhorn.to_dict(), "orgin": list(longhorn.gpus)}
    with pytest.raises(InputError, match=r"profile\.orgin = .*unknown field"):
        VariabilityProfile.from_dict(data)


def test_profile_file_nan_is_not_a_missing_value(tmp_path: Path) -> None:
    # A NaN literal was read as "not measured" (Infinity was refused); null says that.
    path = tmp_path / "p.json"
    path.write_text(
        '{"format": "palopt.profile/1", "classes": ["A"], "gpus": ["g0", "g1"],'
        ' "values": {"A": [1.0, NaN]}}'
    )
    with pytest.raises(InputError, match=r"p\.json\.values\.A\.g1 = nan: must be a number or null"):
        load_profile(path)
    path.write_text(path.read_text().replace("NaN", "null"))
    assert load_profile(path).complete().tolist() == [True, False]


def test_profile_file_errors_found_by_the_profile_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    for values, gpus, field in (
        ([1e13], ["g"], "values.A.g"),
        ([None], ["g"], "values.A"),
        ([1.0, 1.0], ["g", "g"], "gpus"),
    ):
        path.write_text(
            json.dumps(
                {"format": PROFILE_FORMAT, "classes": ["A"], "gpus": gpus, "values": {"A": values}}
            )
        )
        with pytest.raises(InputError) as err:
            load_profile(path)
        assert err.value.field == f"{path}.{field}"


def test_read_measurements_value_column_named_like_the_internal_key(tmp_path: Path) -> None:
    path = tmp_path / "k.csv"
    path.write_text("gpu,_key\na,1\nb,2\nc,4\n")
    p = read_measurements(path, ["gpu"], ["_key"])
    assert p.gpus == ("a", "b", "c") and p.values.tolist() == [[0.5, 1.0, 2.0]]
