"""Inputs at the edges of what the formats allow: each is refused on one line naming the field
and the value (exit code 2 from the CLI), never a traceback and never a quiet change of meaning."""

from __future__ import annotations

import json
import math
import stat
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from palopt import (
    InputError,
    Instance,
    Job,
    assert_feasible,
    build_cluster,
    parse_shape,
    solve,
)
from palopt.cli import main
from palopt.hostlist import MAX_HOSTS, expand_hostlist
from palopt.instance import MAX_FACTOR, MIN_FACTOR
from palopt.io import instance_to_dict, load_instance, read_csv, read_json
from palopt.sim.metrics import OUTPUT_FILES
from palopt.sim.profile import load_profile as sim_load_profile
from palopt.sim.trace import load_trace
from palopt.topology import MAX_GPUS, Topology
from palopt.variability import read_measurements


def _instance() -> Instance:
    topo = build_cluster(1, 2, 2)
    queue = (Job("a", 2, "A"), Job("b", 1, "A"))
    return Instance(topo, ("A",), np.ones((1, 4)), np.array([[1.0, 1.5, 2.0]]), queue)


def _write(tmp_path: Path, text: str, name: str = "x.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _cli_error(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"busy": ["gpu0"], "busy": []}', "'busy': the key appears twice"),
        ('{"penalties": 1' + "0" * 400 + "}", "integer too large"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"id": "\\ud800"}', "a string escape that is not Unicode"),
        ('{"id": "\\udc00"}', "a string escape that is not Unicode"),  # a lone low surrogate
    ],
)
def test_json_that_python_would_read_with_another_meaning_is_refused(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        read_json(_write(tmp_path, text))


def test_nan_and_infinity_in_graph_attributes_are_refused_not_written_back(tmp_path, capsys):
    # json.loads reads NaN and Infinity, which are no JSON: a node-link graph attribute kept
    # them, and save_instance wrote a file other JSON readers (JavaScript's JSON.parse) refuse.
    for where, edit, field in (
        ("graph", lambda t: t["graph"].update(bw=math.nan), r"topology\.graph\.bw = nan"),
        ("node", lambda t: t["nodes"][0].update(x=[1, -math.inf]), r"nodes\[0\]\.x\[1\] = -inf"),
        ("edge", lambda t: t["edges"][0].update(nvlinks=math.inf), r"edges\[0\]\.nvlinks = inf"),
    ):
        data = instance_to_dict(_instance())
        edit(data["topology"])
        path = _write(tmp_path, json.dumps(data))
        assert "NaN" in path.read_text() or "Infinity" in path.read_text(), where
        with pytest.raises(InputError, match=f"{field}: a graph attribute JSON cannot hold"):
            load_instance(path)
        assert "JSON cannot hold" in _cli_error(capsys, ["validate", str(path)])
    topo = build_cluster(1, 1, 2)
    topo.graph.graph["bw"] = math.nan  # nor does the Python API write one
    inst = Instance(topo, ("A",), np.ones((1, 2)), np.ones((1, 3)), (Job("a", 1, "A"),))
    assert_feasible(inst, solve(inst, "pal"))
    with pytest.raises(InputError, match=r"topology\.graph\.bw = nan: a graph attribute JSON"):
        instance_to_dict(inst)
    topo.graph.graph["bw"] = 1e300  # finite numbers are kept
    back = load_instance(_write(tmp_path, json.dumps(instance_to_dict(inst))))
    assert back.topology.graph.graph["bw"] == 1e300


def test_the_schema_refuses_names_the_loader_refuses(tmp_path):
    # Classes, tiers and node ids must be printable text; the schema asked it of job ids only,
    # so it passed files with a class "" or a tier with a tab that the loader refused.
    from palopt.io import instance_schema

    def refused(data: dict, message: str) -> None:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(data, instance_schema())
        with pytest.raises(InputError, match=message):
            load_instance(_write(tmp_path, json.dumps(data)))

    for name in ("", "a\tb", "a\nb", "x\x07"):
        data = instance_to_dict(_instance())
        data.update(classes=[name], slowdown={name: data["slowdown"]["A"]}, penalties=1.5)
        for job in data["queue"]:
            job["class"] = name
        refused(data, "a class name must be printable")
        data = instance_to_dict(_instance())
        next(n for n in data["topology"]["nodes"] if n.get("tier") == "rack")["tier"] = name
        refused(data, "a tier name must be printable")
        data = instance_to_dict(_instance())
        data["topology"] = _node_link()
        data["topology"]["nodes"][0]["id"] = name
        for edge in data["topology"]["edges"]:
            edge.update({k: name for k in ("source", "target") if edge[k] == "c"})
        data["slowdown"] = {"A": [1.0, 1.0, 1.0]}
        data["queue"] = [{"id": "a", "num_gpus": 1, "class": "A"}]
        refused(data, "a node id must be printable")
    data["topology"]["nodes"][0]["id"] = "c é"  # printable names pass both
    for edge in data["topology"]["edges"]:
        edge.update({k: "c é" for k in ("source", "target") if edge[k] == name})
    jsonschema.validate(data, instance_schema())
    inst = load_instance(_write(tmp_path, json.dumps(data)))
    assert_feasible(inst, solve(inst, "pal"))


def test_json_keeps_surrogate_pairs_and_big_floats(tmp_path):
    assert read_json(_write(tmp_path, '{"id": "\\ud83d\\ude00", "v": 1e300}')) == {
        "id": "\U0001f600",
        "v": 1e300,
    }


def test_json_integers_are_read_up_to_300_digits(tmp_path):
    big = int("9" * 300)
    assert read_json(_write(tmp_path, f"[{big}, -{big}]")) == [big, -big]  # the sign aside
    path = _write(tmp_path, f"[1{'0' * 300}]")
    with pytest.raises(InputError, match=rf"x.json = '1{'0' * 19}\.\.\.': integer too large"):
        read_json(path)


@pytest.mark.parametrize(
    "busy",
    [["gpu1", "gpu0", "gpu1"], ["gpu0", "gpu1", "gpu1"], ["gpu0", "gpu1", "gpu1", "gpu0"]],
)
def test_a_gpu_listed_twice_as_busy_is_refused(tmp_path, busy):
    # the GPU named is the first seen again, not the first listed nor the first listed again
    data = instance_to_dict(_instance())
    data["busy"] = busy
    with pytest.raises(InputError, match="busy = 'gpu1': listed twice"):
        load_instance(_write(tmp_path, json.dumps(data)))


def test_a_duplicate_key_in_an_instance_fails_the_cli(tmp_path, capsys):
    data = instance_to_dict(_instance())
    text = json.dumps(data)[:-1] + ', "busy": ["gpu0"], "busy": []}'
    err = _cli_error(capsys, ["solve", str(_write(tmp_path, text))])
    assert "'busy': the key appears twice in one object" in err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(penalties=1e308), "penalties = 1e+308: must be a finite number"),
        (lambda d: d["slowdown"]["A"].update(gpu1=2e12), "slowdown.A.gpu1 = 2000000000000.0"),
        (lambda d: d["slowdown"]["A"].update(gpu1=1e-13), "slowdown.A.gpu1 = 1e-13"),
        (lambda d: d["queue"][1].update(weight=1e306), "queue[1].weight = 1e+306: with these"),
        (lambda d: d["queue"][0].update(weight=1e-306), "queue[0].weight = 1e-306: with these"),
    ],
)
def test_factors_and_weights_out_of_range_are_refused(tmp_path, capsys, edit, message):
    data = instance_to_dict(_instance())
    edit(data)
    err = _cli_error(capsys, ["solve", str(_write(tmp_path, json.dumps(data))), "--solver", "pal"])
    assert message in err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        # int() of more than 4,300 digits raised ValueError: a traceback and exit code 1
        (
            lambda d: d.update(topology={"shape": "1" * 4301 + "x1"}),
            "1" * 36 + "x1': a cluster has at most 1,048,576 GPUs",  # cut in the middle
        ),
        (lambda d: d.update(topology={"shape": "0" * 5000 + "1x2x4"}), "slowdown.A = [1.0"),
        # 2**53 + 1 written as a float reads as 2**53: the job was "9007199254740992"
        (
            lambda d: d["queue"][0].update(id=9007199254740993.0),
            "queue[0].id = 9007199254740992.0: a number id must be an exact integer",
        ),
        # every penalty 1.0, where the schema refused the file
        (lambda d: d.update(penalties={}), "penalties = {}: an empty mapping"),
        (lambda d: d["slowdown"]["A"].pop(), "slowdown.A = [1.0, 1.0, 1.0]: 3 values; expected 4"),
        (
            lambda d: d["queue"][0].update(current_gpus=["gpu0"]),
            "queue[0].current_gpus = ['gpu0']: a running job must hold exactly num_gpus=2",
        ),
    ],
)
def test_instance_files_named_by_what_was_written(tmp_path, capsys, edit, message):
    data = instance_to_dict(_instance())
    data["slowdown"]["A"] = [1.0] * 4
    edit(data)
    err = _cli_error(capsys, ["validate", str(_write(tmp_path, json.dumps(data)))])
    assert message in err


def test_costs_at_the_edges_of_the_range_stay_finite_for_every_solver():
    topo = build_cluster(1, 2, 2)
    for factor, weight in ((MAX_FACTOR, 1e270), (MIN_FACTOR, 1e-270)):
        inst = Instance(
            topo,
            ("A",),
            np.full((1, 4), factor),
            np.full((1, 3), factor),
            (Job("a", 2, "A", weight=weight), Job("b", 1, "A", weight=weight)),
        )
        for name in ("pal", "greedy", "cpsat", "milp"):
            result = solve(inst, name, time_limit=5)
            assert 0 < result.objective < np.inf and result.n_placed == 2, (name, factor)
            assert_feasible(inst, result)


def test_exact_solvers_scale_tiny_costs_inside_without_naming_a_weight():
    # The exact solvers multiply the weights by a power of two internally (costs of about 1):
    # that must not meet a limit meant for the caller's weights.
    topo = build_cluster(1, 2, 2)
    sd = np.array([[1e-12, 2e-12, 1e-12, 1e-12]])
    inst = Instance(topo, ("A",), sd, np.ones((1, 3)), (Job("a", 2, "A"), Job("b", 1, "A")))
    for name in ("cpsat", "milp"):
        result = solve(inst, name, time_limit=5)
        assert_feasible(inst, result)
        assert result.status == "optimal"


def test_an_option_named_like_an_argument_is_an_unknown_option(tmp_path, capsys):
    path = _write(tmp_path, json.dumps(instance_to_dict(_instance())))
    for solver in ("pal", "cpsat"):
        err = _cli_error(capsys, ["solve", str(path), "--solver", solver, "-o", "name=x"])
        assert f"{solver}.name = 'x': unknown option" in err


def test_slurm_output_refuses_names_slurm_cannot_take(tmp_path, capsys):
    data = instance_to_dict(_instance())
    text = json.dumps(data).replace('"server0"', '" server0"')
    path = _write(tmp_path, text)
    assert main(["solve", str(path), "--format", "json"]) == 0
    capsys.readouterr()
    err = _cli_error(
        capsys, ["solve", str(path), "--format", "slurm", "--out", str(tmp_path / "r")]
    )
    assert "topology.server = ' server0': not a Slurm node name" in err
    assert not (tmp_path / "r").exists()  # nothing written when the output is refused


def test_an_output_file_that_is_the_input_is_refused(tmp_path, capsys):
    path = _write(tmp_path, json.dumps(instance_to_dict(_instance())))
    before = path.read_text()
    err = _cli_error(capsys, ["solve", str(path), "--out", str(path)])
    assert "is an input file; it would be overwritten" in err and path.read_text() == before
    csv = _write(tmp_path, "node,perf\nn1,1.0\nn2,1.2\n", "m.csv")
    err = _cli_error(
        capsys, ["profile", "import", str(csv), "--id", "node", "--value", "perf", "-o", str(csv)]
    )
    assert "is an input file" in err
    err = _cli_error(capsys, ["solve", str(path), "--out", str(tmp_path / "no" / "r.json")])
    assert "no such folder" in err
    # a folder: was found out after the solve, which was lost
    err = _cli_error(capsys, ["solve", str(path), "--out", str(tmp_path)])
    assert str(InputError("--out", str(tmp_path), "is a folder; give a file name")) in err
    # an output folder under a file: was found out after the simulation
    under = path / "runs"
    trace = _write(
        tmp_path, "job_id,num_gpus,submit_time,duration,model\n0,1,0,60,vgg19\n", "t.csv"
    )
    err = _cli_error(
        capsys,
        [
            "simulate",
            "--trace",
            str(trace),
            "--cluster",
            "1x4",
            "--correlated",
            "0.3",
            "--no-plots",
            "--out",
            str(under),
        ],
    )
    assert f"{path} is a file, not a folder" in err
    err = _cli_error(
        capsys, ["reproduce", "fig10", "--workloads", "3-1", "--out", str(tmp_path / "r")]
    )
    assert "workloads = '3-1': the range 3-1 runs backwards" in err  # was a KeyError traceback


def test_a_file_that_cannot_be_written_whole_is_left_as_it_was(tmp_path, artifact_dir, monkeypatch):
    import palopt.io
    from palopt.io import write_text
    from palopt.variability import load_artifact_table, load_profile, save_profile

    path = tmp_path / "p.json"
    write_text(path, "old\n")
    with pytest.raises(UnicodeEncodeError):  # fails half-way, as a full disk would
        write_text(path, "new" + "\ud800")
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["p.json"]
    # a profile (`profile import --append` rewrites the file it adds to): was cut off
    profile = load_artifact_table(artifact_dir / "sim-64gpu-cluster.csv")
    save_profile(profile, path)
    before = path.read_text()

    def disk_full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(palopt.io.os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        save_profile(profile.select(profile.classes[:1]), path)
    monkeypatch.undo()
    assert path.read_text() == before and len(list(tmp_path.iterdir())) == 1
    assert load_profile(path).classes == profile.classes


def test_writing_over_a_file_keeps_its_permission_bits(tmp_path):
    from palopt.io import write_text

    path = tmp_path / "p.json"
    # 0o755: bits no umask leaves of a new file's 0o666, whatever the umask is
    for mode in (0o600, 0o755):
        write_text(path, "old\n")
        path.chmod(mode)
        write_text(path, "new\n")  # a new file replaces it
        assert path.read_text() == "new\n" and stat.S_IMODE(path.stat().st_mode) == mode


def test_sizes_that_would_fill_the_memory_are_refused():
    with pytest.raises(InputError, match="more than 1,048,576 GPUs"):
        parse_shape("100000x100000")
    with pytest.raises(InputError, match="more than 1,048,576 GPUs"):
        parse_shape(f"1x{MAX_GPUS + 1}x1")  # refused before the graph is built
    with pytest.raises(InputError, match="names more than"):
        expand_hostlist("n[0-999999999]")
    with pytest.raises(InputError, match="names more than"):
        expand_hostlist("a[0-1023]b[0-1023]c[0-1]")
    assert len(expand_hostlist(f"n[1-{MAX_HOSTS}]")) == MAX_HOSTS


# 1x2x4x2: four counts (build_cluster would take the fourth as nvlink_island)
@pytest.mark.parametrize(
    "shape", [" 8 x 4 ", "8x0_4", "8x+4", "8 x4", "-1x4", "8x4x", "1x2x4x2", "8"]
)
def test_a_shape_is_digits_and_x_only(shape):
    with pytest.raises(InputError, match="expected SERVERSxGPUS or RACKSxSERVERSxGPUS"):
        parse_shape(shape)
    assert parse_shape("8X4").n_gpus == 32


@pytest.mark.parametrize("shape", ["0x4", "8x0", "0x8x4"])
def test_a_shape_count_of_zero_names_the_shape(shape):
    # was named by build_cluster's parameter (servers_per_rack = 0), not by the option
    with pytest.raises(InputError, match=f"cluster = '{shape}': every count must be a positive"):
        parse_shape(shape)


def _node_link() -> dict:
    return {
        "nodes": [
            {"id": "c", "kind": "switch", "tier": "cluster"},
            {"id": "r1", "kind": "switch", "tier": "rack"},
            {"id": "r2", "kind": "switch", "tier": "rack"},
            {"id": "s1", "kind": "server"},
            {"id": "s2", "kind": "server"},
            {"id": "g0", "kind": "gpu"},
            {"id": "g1", "kind": "gpu"},
            {"id": "g2", "kind": "gpu"},
        ],
        "edges": [
            {"source": "r1", "target": "c", "link": "network"},
            {"source": "r2", "target": "c", "link": "network"},
            {"source": "s1", "target": "r1", "link": "network"},
            {"source": "s2", "target": "r2", "link": "network"},
            {"source": "g0", "target": "s1", "link": "pcie"},
            {"source": "g1", "target": "s1", "link": "pcie"},
            {"source": "g2", "target": "s2", "link": "pcie"},
            {"source": "g0", "target": "g1", "link": "nvlink"},
        ],
    }


def _edit_node_link(edit):
    data = _node_link()
    edit(data)
    return data


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["nodes"].append({"id": "g0", "kind": "gpu"}), r"nodes\[8\] .*given twice"),
        (lambda d: d["nodes"].append({"id": "g0", "kind": "server"}), "given twice in nodes"),
        (
            lambda d: d["edges"].append({"source": "g1", "target": "g0", "link": "pcie"}),
            r"edges\[8\] .*given twice in edges",
        ),
        (lambda d: d.update(links=[]), "give the edges once"),
        (lambda d: d.update(colour="red"), "topology.colour = 'red': unknown field"),
        (
            lambda d: d["edges"].append({"source": "s1", "target": "r2", "link": "network"}),
            "must form a tree",
        ),
        (lambda d: d["nodes"][1].update(tier=5), r"nodes\[r1\].tier = 5: expected a tier name"),
        # the root's own tier was read as "not 'cluster'", and the root called unknown
        (lambda d: d["nodes"][0].update(tier=5), r"nodes\[c\].tier = 5: expected a tier name"),
        (
            lambda d: d["nodes"][0].update(tier="clu\tster"),
            r"nodes\[c\].tier = 'clu\\tster': a tier name must be printable",
        ),
        # a switch named like a tier inside a server took that tier's penalty (1 for nvlink)
        (
            lambda d: [d["nodes"][i].update(tier="nvlink") for i in (1, 2)],
            r"nodes\[r.\].tier = 'nvlink': names a tier inside a server",
        ),
        (
            lambda d: [d["nodes"][i].update(tier="server") for i in (1, 2)],
            r"nodes\[r.\].tier = 'server': names a tier inside a server",
        ),
        # ``local`` is the GPU's CUDA index in its server, which Slurm output prints as given
        (
            lambda d: [d["nodes"][i].update(local=0) for i in (5, 6)],
            r"nodes\[g1\].local = 0: GPU g0 of s1 has it too",
        ),
        (
            lambda d: d["nodes"][5].update(local=True),
            r"nodes\[g0\].local = True: expected an index",
        ),
        (lambda d: d["nodes"][5].update(local=-1), r"nodes\[g0\].local = -1: expected an index"),
        (lambda d: d["nodes"][5].update(local="0"), r"nodes\[g0\].local = '0': expected an index"),
        (
            lambda d: d["nodes"][5].update(local=1e30),  # was printed as a 31-digit device
            r"nodes\[g0\].local = 1e\+30: expected an index from 0 to 65535",
        ),
        (
            lambda d: d["nodes"][5].update(local=65536),
            r"nodes\[g0\].local = 65536: expected an index from 0 to 65535",
        ),
        (  # an NVLink to the GPU's own server: refused as such, not a KeyError on the server
            lambda d: d["edges"][4].update(link="nvlink"),
            r"edges\[s1-g0\] = 'nvlink': an NVLink must join two GPUs of the same server",
        ),
        (
            lambda d: d["nodes"][2].update(tier="pod"),
            r"nodes\[r2\].tier = 'pod': switches at level 1 below the root \(leaf switches: "
            r"the deepest\) must share one tier name \('rack'\)",
        ),
        (
            lambda d: d["edges"].append({"source": "g2", "target": "g2", "link": "pcie"}),
            "a node linked to itself",
        ),
        # session 25: a null read as no value, "root": "no" as the root (tiers out of order), a
        # switch under a server made a tier named 'None', a clash was named "switch tiers"
        (lambda d: d["nodes"][1].update(tier=None), r"nodes\[r1\].tier = None: expected a"),
        (lambda d: d["nodes"][5].update(local=None), r"nodes\[g0\].local = None: expected a"),
        (lambda d: d["nodes"][1].update(root="no"), r"nodes\[r1\].root = 'no': must be true"),
        (
            lambda d: d["nodes"][3].update(root=True),
            r"nodes\[s1\].root = True: only a switch node has a root",
        ),
        (
            lambda d: (
                d["nodes"].append({"id": "x", "kind": "switch"})
                or d["edges"].append({"source": "s2", "target": "x", "link": "network"})
            ),
            r"nodes\[x\] = 's2': a switch must hang from a switch, not a server",
        ),
        (  # one check for both kinds
            lambda d: (
                d["nodes"].append({"id": "s3", "kind": "server"})
                or d["edges"].append({"source": "s2", "target": "s3", "link": "network"})
            ),
            r"nodes\[s3\] = 's2': a server must hang from a switch, not a server",
        ),
        (
            lambda d: (
                d["nodes"].append({"id": "m", "kind": "switch", "tier": "rack"})
                or d["edges"].remove({"source": "r1", "target": "c", "link": "network"})
                or d["edges"].extend(
                    [
                        {"source": "m", "target": "c", "link": "network"},
                        {"source": "r1", "target": "m", "link": "network"},
                    ]
                )
            ),
            r"nodes\[.*\].tier = 'rack': \(given or by default\) names level",
        ),
    ],
)
def test_node_link_data_networkx_would_merge_or_ignore_is_refused(edit, message):
    assert Topology.from_node_link(_node_link()).n_gpus == 3
    with pytest.raises(InputError, match=message):
        Topology.from_node_link(_edit_node_link(edit))


def test_a_local_index_runs_to_65535():
    spec = _node_link()
    spec["nodes"][5]["local"], spec["nodes"][6]["local"] = 65535, 0
    topo = Topology.from_node_link(spec)
    assert topo.gpu_ids == ("g1", "g0", "g2")  # ordered by local index


def test_root_false_is_the_same_as_no_root():
    # "root": false on a rack switch made it the root: its tier 'rack' then named two levels
    plain = Topology.from_node_link(_node_link())
    spec = _node_link()
    spec["nodes"][1]["root"] = False
    topo = Topology.from_node_link(spec)
    assert topo.tiers == plain.tiers == ("nvlink", "server", "rack", "cluster")
    assert topo.switch_tier == plain.switch_tier and topo.gpu_ids == plain.gpu_ids
    assert np.array_equal(topo.groups, plain.groups)


def test_the_schema_and_the_loader_agree_on_node_link_keys(tmp_path):
    from palopt.io import instance_schema

    data = instance_to_dict(_instance())
    data["topology"]["colour"] = "red"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, instance_schema())
    with pytest.raises(InputError, match="unknown field"):
        load_instance(_write(tmp_path, json.dumps(data)))
    data = instance_to_dict(_instance())
    data["topology"] = {"shape": "2x2", "racks": 2}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, instance_schema())
    with pytest.raises(InputError, match="topology.racks = 2: unknown field"):
        load_instance(_write(tmp_path, json.dumps(data)))
    data["topology"] = {"shape": "2X2"}  # the loader reads x in either case; the schema too
    jsonschema.validate(data, instance_schema())
    assert load_instance(_write(tmp_path, json.dumps(data))).topology.n_gpus == 4


def test_the_schema_and_the_loader_agree_on_integers_written_as_2_0(tmp_path):
    # JSON Schema counts 2.0 as an integer; the loader refused it, so a file the schema passed
    # did not load.
    from palopt.io import instance_schema

    data = instance_to_dict(_instance())
    data["queue"][0].update(id=7.0, num_gpus=2.0)
    jsonschema.validate(data, instance_schema())
    job = load_instance(_write(tmp_path, json.dumps(data))).queue[0]
    assert (job.id, job.num_gpus) == ("7", 2) and type(job.num_gpus) is int
    data["queue"][0]["num_gpus"] = 1.5
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, instance_schema())
    with pytest.raises(InputError, match=r"queue\[0\].num_gpus = 1.5: expected int"):
        load_instance(_write(tmp_path, json.dumps(data)))
    spec = _node_link()
    for node, local in zip(spec["nodes"][5:], (1.0, 0.0, 0.0), strict=True):
        node["local"] = local
    topo = Topology.from_node_link(spec)
    assert topo.gpu_ids == ("g1", "g0", "g2")


TRACE = "job_id,num_gpus,submit_time,duration,model\n"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("0,2,0,100,vgg19\n1,,10,200,BERT\n", r"trace\[1\].num_gpus = nan"),
        ("0,true,0,100,vgg19\n", r"trace\[0\].num_gpus = True"),
        ("0,1,1e20,100,vgg19\n", r"trace\[0\].submit_time = 1e\+20: must be a number from 0"),
        # an integer beyond 64 bits in a text column is named as written, not as a float
        (
            "0,1,100000000000000000001,100,vgg19\n1,1,x,100,vgg19\n",
            r"trace\[0\].submit_time = 100000000000000000001: must be a number",
        ),
        ("0,1,0,100,vgg19\n1,1,0,100,nope\n", r"trace\[1\].model = 'nope': unknown model"),
        # a run of 1e308 iterations: the simulation never ended
        ("0,1,0,1e308,vgg19\n", r"trace\[0\].duration = 1e\+308: runs .* at most 1e\+12"),
        # an integer of 310 digits has no float: OverflowError in ideal_seconds
        ("0,1,0,1" + "0" * 309 + ",vgg19\n", r"trace\[0\].duration = 1000.*: must be a finite"),
        ("0,1,0,100,vgg19\n0,1,5,100,vgg19\n", r"trace\[1\].job_id = '0': duplicate job id"),
        # a text cell makes its column text: the first row's '100' was blamed for it
        ("0,1,0,100,vgg19\n1,1,0,abc,BERT\n", r"trace\[1\].duration = 'abc': must be a finite"),
        ("0,2,5,100,vgg19\n1,x,0,9,BERT\n", r"trace\[1\].num_gpus = 'x'"),
        ("NA,1,0,100,vgg19\nnan,1,0,NaN,BERT\n", r"trace\[1\].duration = nan: must be a finite"),
        (",1,0,100,vgg19\n", r"trace\[0\].job_id = nan: empty job id"),
        ("0,1,0,100,vgg19,extra\n", "not a readable CSV file"),
        # a header alone ran a simulation of nothing, whose summary was all NaN
        ("", r"^trace = 'header only': no jobs$"),
    ],
)
def test_trace_rows_are_blamed_where_they_are_wrong(tmp_path, rows, message):
    with pytest.raises(InputError, match=message):
        load_trace(_write(tmp_path, TRACE + rows, "t.csv"))


def test_a_trace_missing_one_column_names_it(tmp_path):
    """A trace without its model column is refused naming that column, not with a KeyError."""
    path = _write(tmp_path, "job_id,num_gpus,submit_time,duration\n0,1,0,100\n", "t.csv")
    with pytest.raises(InputError, match=r"missing column\(s\) model$"):
        load_trace(path)


def test_a_column_given_twice_is_refused(tmp_path):
    # pandas renamed the second one ("duration.1") and it was ignored without a word
    path = _write(tmp_path, TRACE.strip() + ",duration\n0,1,0,100,vgg19,200\n", "t.csv")
    with pytest.raises(InputError, match="column 'duration' given twice in the header"):
        load_trace(path)


@pytest.mark.parametrize(
    ("text", "options"),
    [
        ("gpu, gpu\na,1\n", {"skipinitialspace": True}),  # read as "gpu", "gpu"
        # the header was read again with a comma for separator: one column, no name twice
        ("gpu;gpu\na;1\n", {"sep": ";"}),
        ('"gpu"|gpu\na|1\n', {"delimiter": "|"}),
        ("# note\ngpu,gpu\na,1\n", {"comment": "#"}),
        ("x,y\ngpu,gpu\na,1\n", {"skiprows": 1}),
    ],
)
def test_read_csv_finds_a_column_given_twice_as_it_reads_the_header(tmp_path, text, options):
    path = _write(tmp_path, text, "m.csv")
    with pytest.raises(InputError, match="table = '.*m.csv': column 'gpu' given twice in the"):
        read_csv(path, "table", **options)
    # the same file with the names told apart reads
    frame = read_csv(_write(tmp_path, text.replace("gpu", "id", 1), "m.csv"), "table", **options)
    assert list(frame.columns) == ["id", "gpu"]


@pytest.mark.parametrize(
    ("header", "read"),
    [
        ("gpu,t\n", read_csv),
        (TRACE, load_trace),
        ("gpu,t\n", lambda path: read_measurements(path, ["gpu"], ["t"])),
        ("PerfVar_A,PerfVar_B\n", lambda path: sim_load_profile(path, build_cluster(1, 1, 2))),
    ],
)
def test_a_row_longer_than_the_header_is_named_by_its_line_the_first_one_too(
    tmp_path, header, read
):
    # The first data row's extra field was refused without a line, a later row's with its line
    width = header.count(",") + 1
    row = ",".join(["1"] * width) + "\n"
    longer = ",".join(["1"] * (width + 1)) + "\n"
    expected = f"Expected {width} fields in line {{}}, saw {width + 1}$"
    with pytest.raises(InputError, match=expected.format(3)):
        read(_write(tmp_path, header + row + longer, "t.csv"))
    with pytest.raises(InputError, match="more fields than the header: " + expected.format(2)):
        read(_write(tmp_path, header + longer + row, "t.csv"))
    # blank lines are counted in both cases, as pandas counts them for the later row
    with pytest.raises(InputError, match=expected.format(4)):
        read(_write(tmp_path, header + "\n" + row + longer, "t.csv"))
    with pytest.raises(InputError, match=expected.format(3)):
        read(_write(tmp_path, header + "\n" + longer + row, "t.csv"))


def test_a_first_row_longer_than_a_header_not_on_the_first_line_is_still_refused(tmp_path):
    with pytest.raises(InputError, match="a row has more fields than the header$"):
        read_csv(_write(tmp_path, "x\na,b\n1,2,3\n", "m.csv"), header=1)


def test_read_csv_without_a_header_line_has_no_names_to_repeat(tmp_path):
    # A first line of data that repeats a value was called a column given twice.
    path = _write(tmp_path, "1,1\n2,3\n", "m.csv")
    assert read_csv(path, header=None).values.tolist() == [[1, 1], [2, 3]]
    assert list(read_csv(path, names=["a", "b"]).columns) == ["a", "b"]
    # a header on the second line is the one checked
    path = _write(tmp_path, "x,x\na,b\n1,2\n", "m.csv")
    assert read_csv(path, header=1).columns.tolist() == ["a", "b"]
    with pytest.raises(InputError, match="column 'a' given twice"):
        read_csv(_write(tmp_path, "x,y\na,a\n", "m.csv"), header=1)


def test_trace_is_sorted_by_submit_time_ties_in_file_order(tmp_path):
    rows = "a,1,50,100,vgg19\nb,1,0,100,vgg19\nc,1,50,100,vgg19\nd,1,0,100,vgg19\n"
    jobs = load_trace(_write(tmp_path, TRACE + rows, "t.csv"))
    assert [j.id for j in jobs] == ["b", "d", "a", "c"]


def test_trace_takes_the_workloads_given(tmp_path):
    from palopt.workloads import WorkloadModel, Workloads

    mine = Workloads(("classB",), {"vgg19": WorkloadModel("vgg19", "classB", 2.5, 1.0)})
    [job] = load_trace(_write(tmp_path, TRACE + "0,1,0,100,vgg19\n", "t.csv"), mine)
    assert (job.job_class, job.base_iter_time) == ("classB", 2.5)


def test_trace_model_names_are_the_text_written(tmp_path):
    """A workload file may name a model "7" or "1.0": a trace whose model cells all look like
    numbers was read as a number column and refused (``trace[0].model = 7.0: unknown model``)."""
    from palopt.sim import SimConfig, simulate
    from palopt.sim.profile import ClusterProfile
    from palopt.workloads import WorkloadModel, Workloads

    mine = Workloads(
        ("A",), {"7": WorkloadModel("7", "A", 1.0, 1.0), "1.0": WorkloadModel("1.0", "A", 2.0, 1.0)}
    )
    path = _write(tmp_path, TRACE + "a,1,0,100,7\nb,1,0,100,1.0\n", "t.csv")
    jobs = load_trace(path, mine)
    assert [(j.model, j.base_iter_time) for j in jobs] == [("7", 1.0), ("1.0", 2.0)]
    prof = ClusterProfile(("A",), np.ones((1, 2)), np.ones((1, 2)))
    res = simulate(build_cluster(1, 1, 2), prof, jobs, config=SimConfig(round_s=60, check=True))
    assert res.jobs.finish.tolist() == [120.0, 240.0]  # 100 s and 200 s of work
    with pytest.raises(InputError, match=r"trace\[1\].model = 'NA': unknown model"):
        load_trace(_write(tmp_path, TRACE + "a,1,0,100,7\nb,1,0,100,NA\n", "t.csv"), mine)


def test_trace_ids_are_the_text_written(tmp_path):
    jobs = load_trace(_write(tmp_path, TRACE + "1,1,0,100,vgg19\n1.0,2,5,100,vgg19\n", "t.csv"))
    assert [j.id for j in jobs] == ["1", "1.0"]
    # pandas reads NA, nan, None and null as missing: they were refused as empty ids
    rows = "".join(f"{j},1,{t},100,vgg19\n" for t, j in enumerate(("NA", "nan", "None", "null")))
    jobs = load_trace(_write(tmp_path, TRACE + rows, "t.csv"))
    assert [j.id for j in jobs] == ["NA", "nan", "None", "null"]


def test_a_simulator_profile_cell_that_is_not_a_number_is_named(tmp_path, capsys):
    trace = _write(tmp_path, TRACE + "0,1,0,100,vgg19\n", "t.csv")
    rows = ["GPU_ID,PerfVar_classA,sf_classA"] + [f"{g},1.0,1.0" for g in range(8)]
    rows[4] = "3,abc,1.0"
    profile = _write(tmp_path, "\n".join(rows) + "\n", "p.csv")
    args = ["simulate", "--trace", str(trace), "--cluster", "2x4", "--profile", str(profile)]
    err = _cli_error(capsys, [*args, "--no-plots"])
    assert "profile.PerfVar_classA[3] = 'abc': not a number" in err


@pytest.mark.parametrize(
    "ids, message",
    [
        (["0"] * 8, "GPU_ID[1] = 0"),  # were all taken, in file order
        ([f"x{g}" for g in range(8)], "GPU_ID[0] = 'x0'"),  # were sorted as text: x10 < x2
        ([str(g + 1) for g in range(8)], "GPU_ID[0] = 1"),  # from 1: 0 is missing
    ],
)
def test_simulator_profile_gpu_ids_must_number_the_gpus(tmp_path, capsys, ids, message):
    trace = _write(tmp_path, TRACE + "0,1,0,100,vgg19\n", "t.csv")
    rows = ["GPU_ID,PerfVar_classA"] + [f"{g},1.0" for g in ids]
    profile = _write(tmp_path, "\n".join(rows) + "\n", "p.csv")
    args = ["simulate", "--trace", str(trace), "--cluster", "2x4", "--profile", str(profile)]
    err = _cli_error(capsys, [*args, "--no-plots"])
    assert f"profile.{message}: the GPU_IDs must be 0 to 7, each once" in err


def test_a_simulator_profile_gpu_id_given_twice_is_blamed_on_its_later_row(tmp_path):
    # numpy's default sort is not stable on sixteen rows: it blamed the first 8 (row 0).
    from palopt.sim import load_profile

    ids = [8, *range(14, -1, -1)]
    rows = ["GPU_ID,PerfVar_classA"] + [f"{g},1.0" for g in ids]
    path = _write(tmp_path, "\n".join(rows) + "\n", "p.csv")
    with pytest.raises(InputError, match=r"^profile.GPU_ID\[7\] = 8: the GPU_IDs must be 0 to 15"):
        load_profile(path, build_cluster(1, 2, 8))


def test_a_simulator_profile_needs_a_perfvar_column(tmp_path):
    from palopt.sim import load_profile

    path = _write(tmp_path, "GPU_ID,sf_classA\n0,1.0\n1,1.0\n", "p.csv")
    with pytest.raises(InputError, match=r"^profile.columns = .*: no PerfVar_<class> column"):
        load_profile(path, build_cluster(1, 1, 2))


def test_a_simulator_profile_needs_one_row_per_gpu(tmp_path):
    from palopt.sim import load_profile

    path = _write(tmp_path, "PerfVar_classA\n1.0\n1.0\n1.0\n", "p.csv")
    with pytest.raises(InputError, match="^profile = 3: has 3 GPU rows, the cluster has 2 GPUs"):
        load_profile(path, build_cluster(1, 1, 2))


@pytest.mark.parametrize(
    ("values", "field"),
    [(("1.0,1.0", "0,1.0"), r"PerfVar_A\[1\] = 0.0"), (("1.0,1.0", "1.0,-2"), r"sf_A\[1\] = -2.0")],
)
def test_a_simulator_profile_value_out_of_range_is_named_by_its_column(tmp_path, values, field):
    # not as profile.rank / profile.charge, names the file does not use
    from palopt.sim import load_profile

    path = _write(tmp_path, "PerfVar_A,sf_A\n" + "\n".join(values) + "\n", "p.csv")
    with pytest.raises(InputError, match=f"^profile.{field}: must be a finite number from"):
        load_profile(path, build_cluster(1, 1, 2))


@pytest.mark.parametrize("name", OUTPUT_FILES)
def test_simulate_refuses_to_write_over_its_inputs(tmp_path, capsys, name):
    """An input named like any of simulate's output files in --out is refused, not
    overwritten."""
    trace = _write(tmp_path, TRACE + "0,1,0,100,vgg19\n", name)  # an output's name
    args = ["simulate", "--trace", str(trace), "--cluster", "2x4", "--correlated", "0.5"]
    err = _cli_error(capsys, [*args, "--no-plots", "--out", str(tmp_path)])
    assert f"{name}': is an input file; it would be overwritten" in err
    assert trace.read_text().startswith(TRACE)


def test_simulate_time_limit_flag_and_option_agree_and_are_recorded(tmp_path, capsys):
    trace = _write(tmp_path, TRACE + "0,1,0,100,vgg19\n", "t.csv")
    args = ["simulate", "--trace", str(trace), "--cluster", "2x4", "--correlated", "0.5"]
    args += ["--no-plots", "--no-progress", "--placement", "greedy"]
    err = _cli_error(capsys, [*args, "--time-limit", "2", "--placement-option", "time_limit=3"])
    assert "--time-limit = 2.0: --placement-option time_limit=3 differs" in err
    option = ["--placement-option", "keep_running=false"]
    assert (
        main([*args, *option, "--time-limit", "2", "--check", "--out", str(tmp_path / "run")]) == 0
    )
    settings = json.loads((tmp_path / "run" / "summary.json").read_text())["settings"]
    assert settings["time_limit"] == 2.0 and settings["check"] is True
    assert settings["placement_options"] == {"keep_running": False}


def test_profile_values_of_an_undeclared_class_are_refused():
    from palopt.variability import VariabilityProfile

    data = VariabilityProfile(("A",), ("g0", "g1"), np.array([[1.0, 1.2]])).to_dict()
    data["values"]["B"] = [1.0, 1.0]
    with pytest.raises(InputError, match="profile.values.B = .*unknown field; known: A"):
        VariabilityProfile.from_dict(data)


def test_measurement_ids_that_join_to_one_gpu_are_refused(tmp_path):
    path = _write(tmp_path, "a,b,perf\nx-y,z,10\nx,y-z,20\n", "m.csv")
    with pytest.raises(InputError, match="gives GPU id 'x-y-z', as does x-y,z"):
        read_measurements(path, ["a", "b"], ["perf"])
    with pytest.raises(InputError, match="a column is named twice"):
        read_measurements(path, ["a", "a"], ["perf"])
    padded = _write(tmp_path, "a,b,perf\nx,07,10\nx,7,20\n", "p.csv")
    assert read_measurements(padded, ["a", "b"], ["perf"]).gpus == ("x-7",)  # one node


def test_measurements_too_far_from_the_median_name_the_value_in_the_file(tmp_path, capsys):
    # The message used to give the normalised value (0.0 for 1e-308), not what the file says.
    path = _write(tmp_path, "node,perf\na,1.0\nb,1e-308\nc,2.0\n", "m.csv")
    err = _cli_error(
        capsys,
        [
            "profile",
            "import",
            str(path),
            "--id",
            "node",
            "--value",
            "perf",
            "-o",
            str(tmp_path / "p.json"),
        ],
    )
    assert "m.csv: GPU 'b', column perf = 1e-308: is 1e-308 times the median GPU" in err


def test_cli_options_checked_before_any_work(tmp_path, capsys):
    base = ["bench", "--sizes", "16", "--gpus-per-server", "4", "--loads", "0.5"]
    err = _cli_error(capsys, [*base, "--solvers", ",", "--out", str(tmp_path / "b")])
    assert "--solvers = ',': expected comma-separated solver names" in err
    path = _write(tmp_path, json.dumps(instance_to_dict(_instance())))
    with pytest.raises(SystemExit) as exc:  # argparse's own check of the option
        main(["topology", "show", str(path), "--png", str(tmp_path / "t.txt")])
    assert exc.value.code == 2
    assert "the suffix must name an image format" in capsys.readouterr().err


def test_commands_that_draw_say_before_any_work_that_matplotlib_is_missing(
    tmp_path, capsys, monkeypatch
):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    trace = _write(tmp_path, TRACE + "0,1,0,100,vgg19\n", "t.csv")
    args = ["simulate", "--trace", str(trace), "--cluster", "2x4", "--correlated", "0.5"]
    args += ["--out", str(tmp_path / "run"), "--no-progress"]
    err = _cli_error(capsys, args)
    assert (
        "pip install 'palopt[plot]', or pass --no-plots" in err and not (tmp_path / "run").exists()
    )
    assert main([*args, "--no-plots"]) == 0
    assert (tmp_path / "run" / "summary.json").exists() and not list(tmp_path.glob("run/*.png"))
    err = _cli_error(capsys, ["reproduce", "fig12", "--out", str(tmp_path / "r")])
    assert "or pass --no-plots" in err
    err = _cli_error(capsys, ["bench", "--quick", "--out", str(tmp_path / "b")])
    assert "or pass --no-plot" in err


@pytest.mark.parametrize("name", ["", "a\0b.csv"])
def test_read_csv_names_a_bad_file_name_by_what_the_caller_calls_it(name):
    """A bad file name given to read_csv is named by the caller's field (e.g. ``profile``), as
    its other errors are, not by a generic ``path``."""
    with pytest.raises(InputError) as err:
        read_csv(name, "profile")
    assert err.value.field == "profile"
