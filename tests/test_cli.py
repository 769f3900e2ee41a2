"""The command line: output, exit codes, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from palopt import Instance, Job, assert_feasible, build_cluster, penalty_matrix, solve
from palopt.cli import main
from palopt.io import save_instance


@pytest.fixture()
def instance_file(tmp_path: Path) -> Path:
    topo = build_cluster(1, 4, 4)
    rng = np.random.default_rng(3)
    sd = np.round(rng.uniform(0.9, 1.3, (2, 16)), 2)
    queue = tuple(Job(f"j{i}", int(n), "AB"[i % 2]) for i, n in enumerate([4, 1, 2, 4, 4, 2, 1]))
    inst = Instance(topo, ("A", "B"), sd, penalty_matrix(topo, "AB", 1.7), queue)
    path = tmp_path / "inst.json"
    save_instance(inst, path, name="cli-test")
    return path


def test_solve_prints_placement_and_writes_json(instance_file, tmp_path, capsys):
    out = tmp_path / "result.json"
    assert main(["solve", str(instance_file), "--out", str(out), "--format", "table"]) == 0
    text = capsys.readouterr().out
    assert "solver pal" in text and "j0" in text and "not placed" in text
    data = json.loads(out.read_text())
    assert data["format"] == "palopt.result/1" and data["solver"] == "pal"
    placed = [j for j in data["jobs"] if "gpus" in j]
    assert all({"cost", "slowdown", "tier", "penalty"} <= set(j) for j in placed)
    assert all("reason" in j for j in data["jobs"] if "gpus" not in j)


@pytest.mark.parametrize("name", ["pmfirst", "packed-sticky", "random-nonsticky"])
def test_solve_with_named_solver_as_json(instance_file, capsys, name):
    assert (
        main(["solve", str(instance_file), "--solver", name, "--seed", "4", "--format", "json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["solver"] == name


def test_solve_with_a_seed_repeats_its_placement(instance_file, tmp_path, capsys):
    """`solve --seed N` of a random solver gives the same placement on every run (the paper's
    random baselines are reproducible)."""
    from palopt.io import load_instance
    from palopt.result import load_result

    inst = load_instance(instance_file)
    runs = []
    for name in ("a.json", "b.json"):
        argv = ["solve", str(instance_file), "--solver", "random-nonsticky", "--seed", "4"]
        assert main([*argv, "--out", str(tmp_path / name)]) == 0
        result = load_result(tmp_path / name, inst)
        assert_feasible(inst, result)
        runs.append(result.assignment())
    capsys.readouterr()
    assert runs[0] == runs[1] and runs[0]


def test_validate_schema_solvers(instance_file, capsys):
    assert main(["validate", str(instance_file)]) == 0
    assert "valid" in capsys.readouterr().out
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "palopt placement instance"
    assert main(["solvers"]) == 0
    assert "pal " in capsys.readouterr().out


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(format="v0"), "format"),
        (lambda d: d["queue"][0].update(num_gpus=-1), "queue[0].num_gpus = -1"),
        (lambda d: d["queue"][1].update(id="j0"), "duplicate job id"),
    ],
)
def test_bad_instance_exit_2_one_line(instance_file, capsys, edit, message):
    data = json.loads(instance_file.read_text())
    edit(data)
    instance_file.write_text(json.dumps(data))
    for command in ("solve", "validate"):
        assert main([command, str(instance_file)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_unreadable_inputs_exit_2(tmp_path, capsys):
    # A missing file: test_an_input_file_that_is_missing_or_a_folder_is_named_by_its_argument
    broken = tmp_path / "broken.json"
    broken.write_text("{\n  'x': 1\n}")
    assert main(["solve", str(broken)]) == 2
    assert "line 2" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "the file is empty"),
        ('job_id,num_gpus\n"0,1\n', "not a readable CSV file"),
        # pandas would take the first column as the index and shift every value (was: read so)
        ("gpu,t\na,1,5\nb,2,6\n", "a row has more fields than the header"),
    ],
)
@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--correlated", "0.5", "--no-plots", "--trace"],
        ["simulate", "--trace", "TRACE", "--no-plots", "--profile"],
        ["profile", "import", "--id", "gpu", "--value", "t", "-o", "OUT", "--"],
    ],
)
def test_unparseable_csv_exit_2_one_line(tmp_path, capsys, artifact_dir, args, text, problem):
    bad = tmp_path / "bad.csv"
    bad.write_text(text, encoding="utf-8")
    trace = artifact_dir / "traces" / "sia-philly-workload-1.csv"
    subst = {"TRACE": str(trace), "OUT": str(tmp_path / "p.json")}
    assert main([subst.get(a, a) for a in args] + [str(bad)]) == 2
    err = capsys.readouterr().err
    assert problem in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "args",
    [
        ["validate"],
        ["solve"],
        ["topology", "show"],
        ["topology", "build", "--nvidia-smi"],
        ["topology", "build", "--server", "n1=FILE", "--slurm"],
        ["sweep"],
    ],
)
def test_files_not_in_utf8_exit_2_one_line(tmp_path, capsys, args):
    bad = tmp_path / "latin.txt"
    bad.write_bytes('{"name": "né"}\n'.encode("latin-1"))
    assert main([a.replace("FILE", str(bad)) for a in args] + [str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not a UTF-8 text file" in err and len(err.strip().splitlines()) == 1, err


def test_files_with_a_byte_order_mark_are_read(tmp_path, instance_file, capsys):
    # Windows editors may start UTF-8 files with a byte order mark; JSON refused it before.
    marked = tmp_path / "marked.json"
    marked.write_bytes(b"\xef\xbb\xbf" + instance_file.read_bytes())
    assert main(["solve", str(marked), "--format", "json"]) == 0
    marked_result = json.loads(capsys.readouterr().out)
    assert main(["solve", str(instance_file), "--format", "json"]) == 0
    plain_result = json.loads(capsys.readouterr().out)
    assert marked_result.pop("wall_time") > 0 and plain_result.pop("wall_time") > 0
    assert marked_result == plain_result
    # A bad byte is counted from the start of the file, mark included.
    marked.write_bytes(b"\xef\xbb\xbf{}\xff")
    assert main(["validate", str(marked)]) == 2
    assert "'byte 5': not a UTF-8 text file" in capsys.readouterr().err


def test_unknown_solver_and_option_exit_2(instance_file, capsys):
    assert main(["solve", str(instance_file), "--solver", "magic"]) == 2
    assert "valid solvers: " in capsys.readouterr().err
    assert main(["solve", str(instance_file), "-o", "colour=red"]) == 2
    assert "pal.colour" in capsys.readouterr().err


def test_solve_backend_flag(instance_file, capsys):
    for args in (["--solver", "milp", "--backend", "highs"], ["--solver", "milp:highs"]):
        assert main(["solve", str(instance_file), *args]) == 0
        assert json.loads(capsys.readouterr().out)["settings"]["backend"] == "highs"
    for args, message in (
        (["--solver", "milp:highs", "--backend", "cbc"], "backend = 'cbc': differs from"),
        (["--solver", "milp:gurobi"], "milp.backend = 'gurobi'"),
        (["--solver", "milp:"], "milp.backend = '': must be one of cbc, highs"),  # was CBC
        (["--solver", "pal:highs"], "pal.backend = 'highs'"),
        (["--solver", "milp", "--backend", "cbc", "-o", "backend=highs"], "--backend = 'cbc'"),
        (["--solver", "milp", "--backend", "gurobi"], "milp.backend = 'gurobi'"),
        (["--solver", "cpsat", "--backend", "cbc"], "cpsat.backend"),
        # the flag won over the option without a word; a repeated option's last value did
        (["--solver", "cpsat", "-o", "time_limit=1", "--time-limit", "3"], "--time-limit = 3.0"),
        (["--solver", "cpsat", "-o", "gap=0", "-o", "gap=0.1"], "-o gap = 0.1: given twice"),
        # NaN is no value's equal: the check of -o against the flag read a missing option
        (["--time-limit", "nan"], "time_limit = nan: must be a positive, finite number"),
    ):
        assert main(["solve", str(instance_file), *args]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1


def test_a_file_that_cannot_be_written_is_named_not_its_hidden_copy(tmp_path):
    from palopt.io import write_text

    with pytest.raises(OSError) as caught:
        write_text(tmp_path / "none" / "r.json", "{}")  # no such folder
    assert caught.value.filename == str(tmp_path / "none" / "r.json")  # was ".r.json.<pid>...tmp"
    (tmp_path / "folder").mkdir()
    with pytest.raises(IsADirectoryError) as caught:
        write_text(tmp_path / "folder", "{}")
    assert caught.value.filename == str(tmp_path / "folder")  # was the hidden file beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]


def test_out_writes_through_links_and_into_devices_and_pipes(instance_file, tmp_path):
    # --out used to replace whatever was at the path: a symbolic link became a file (its target
    # unchanged), a named pipe's reader got nothing, /dev/null could not be written as a user
    # (a hidden file beside it) and as root became a regular file.
    target = tmp_path / "target.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert main(["solve", str(instance_file), "--out", str(link)]) == 0
    assert link.is_symlink() and json.loads(target.read_text())["solver"] == "pal"
    assert main(["solve", str(instance_file), "--out", os.devnull]) == 0
    assert Path(os.devnull).is_char_device()
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(pipe.read_text()))
    reader.start()
    assert main(["solve", str(instance_file), "--out", str(pipe)]) == 0
    reader.join(timeout=30)
    assert pipe.is_fifo() and json.loads(read[0])["solver"] == "pal"


def test_an_output_folder_that_is_a_file_is_refused_before_any_run(tmp_path, capsys):
    # bench said "[Errno 17] File exists", a sweep "[Errno 20] Not a directory: .../cells"
    (tmp_path / "taken").write_text("")
    assert main(["bench", "--quick", "--out", str(tmp_path / "taken")]) == 2
    assert "--out = " in capsys.readouterr().err
    grid = tmp_path / "g.toml"
    grid.write_text('[sweep]\nout = "taken"\n[grid]\nworkload = [1]\n')
    assert main(["sweep", str(grid), "--no-progress"]) == 2
    assert "g.toml: sweep.out = " in capsys.readouterr().err


_PROC = "/proc/palopt-test"  # /proc takes no new file or folder, whoever asks (root too)
_SMI = Path(__file__).resolve().parent.parent / "instances" / "topology" / "nvlink-pairs.txt"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize(
    ("argv", "flag", "path"),
    [
        ("solve {inst} --out {proc}", "--out", _PROC),
        (
            "instance build --cluster 1x2 --profile {assigned} --queue {queue} --penalties 1.7 "
            "-o {proc}",
            "--out",
            _PROC,
        ),
        ("profile import {csv} --id gpu --value t -o {proc}", "--out", _PROC),
        ("profile assign {measured} --cluster 1x2 -o {proc}", "--out", _PROC),
        ("profile show {measured} --plot {proc}.png", "--plot", f"{_PROC}.png"),
        ("topology build --nvidia-smi {smi} -o {proc}", "--out", _PROC),
        ("topology show {inst} --png {proc}.png", "--png", f"{_PROC}.png"),
        (
            "simulate --trace {trace} --correlated 0 --max-time 36000 --no-plots --no-progress "
            "--out {proc}",
            "--out",
            _PROC,
        ),
        (
            "reproduce fig10 --workloads 1 --data {data} --no-plots --no-progress --out {proc}",
            "--out",
            _PROC,
        ),
        ("sweep {grid} --no-progress", "{grid}: sweep.out", _PROC),
        ("bench --quick --no-plot --out {proc}", "--out", _PROC),
    ],
)
def test_an_output_that_cannot_be_written_is_named_by_its_option(
    argv, flag, path, instance_file, artifact_dir, tmp_path, capsys
):
    # Was "[Errno 2] No such file or directory: '/proc/palopt-test'", naming no option; simulate,
    # reproduce and sweep said it after their runs.
    files = {
        "inst": instance_file,
        "csv": tmp_path / "m.csv",
        "measured": tmp_path / "measured.json",
        "assigned": tmp_path / "assigned.json",
        "queue": tmp_path / "queue.json",
        "trace": artifact_dir / "traces" / "sia-philly-workload-1.csv",
        "data": artifact_dir,
        "grid": tmp_path / "grid.toml",
        "smi": _SMI,
        "proc": _PROC,
    }
    files["csv"].write_text("gpu,t\ng0,1.0\ng1,1.2\n")
    for step in (
        "profile import {csv} --id gpu --value t -o {measured}",
        "profile assign {measured} --cluster 1x2 -o {assigned}",
    ):
        assert main([a.format(**files) for a in step.split()]) == 0
    files["queue"].write_text('[{"id": "j", "num_gpus": 1, "class": "t"}]')
    files["grid"].write_text(
        f'[sweep]\nout = "{_PROC}"\n[grid]\nworkload = [1]\n'
        f'[fixed]\ndata = "{artifact_dir}"\nmax_time = 36000\n'
    )
    capsys.readouterr()
    assert main([a.format(**files) for a in argv.split()]) == 2
    err = capsys.readouterr().err
    assert f"{flag.format(**files)} = '{path}': cannot be written: " in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_bench_keeps_an_earlier_runs_results_when_it_refuses_its_input(
    tmp_path, capsys, monkeypatch
):
    # An earlier run's bench.csv was cut to its header line and its summary.csv deleted when a
    # size (or the missing data) was refused only as the run reached it, named as the cluster.
    out = tmp_path / "bench"
    out.mkdir()
    for name in ("bench.csv", "summary.csv"):
        (out / name).write_text(f"earlier {name}\n")
    argv = ["bench", "--no-plot", "--out", str(out), "--solvers", "pal", "--seeds", "1"]
    argv += ["--loads", "0.5", "--profiles", "synthetic"]
    assert main([*argv, "--sizes", "8000000000000", "--gpus-per-server", "8"]) == 2
    assert "--sizes = 8000000000000: more than 1,048,576 GPUs" in capsys.readouterr().err
    monkeypatch.setenv("PALOPT_DATA", str(tmp_path / "no-data"))
    assert main([*argv, "--sizes", "16", "--gpus-per-server", "4"]) == 2
    assert "shared data = 'pal-artifact/traces': not found" in capsys.readouterr().err
    for name in ("bench.csv", "summary.csv"):
        assert (out / name).read_text() == f"earlier {name}\n"


def test_table_of_a_huge_objective_stays_short(tmp_path, capsys):
    topo = build_cluster(1, 1, 2)
    job = Job("a", 1, "A", weight=1e300)
    save_instance(
        Instance(topo, ("A",), np.ones((1, 2)), np.ones((1, 3)), (job,)), tmp_path / "i.json"
    )
    assert main(["solve", str(tmp_path / "i.json"), "--format", "table"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "objective 1e+300," in head and len(head) < 100


@pytest.mark.parametrize("solver", ["pal", "random-nonsticky", "greedy", "cpsat", "milp"])
def test_negative_seed_exit_2(instance_file, capsys, solver):
    assert main(["solve", str(instance_file), "--solver", solver, "--seed", "-1"]) == 2
    err = capsys.readouterr().err
    assert "seed = -1: must be a non-negative integer" in err and "Traceback" not in err


def test_console_script_runs(instance_file):
    proc = subprocess.run(
        [sys.executable, "-m", "palopt.cli", "solve", str(instance_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["solver"] == "pal"


def test_library_call_is_pure(instance_file, tmp_path, capsys, monkeypatch):
    from palopt.io import load_instance

    inst = load_instance(instance_file)
    monkeypatch.chdir(tmp_path)
    before = set(tmp_path.iterdir())
    first, second = solve(inst, "pal"), solve(inst, "pal")
    assert_feasible(inst, first)
    assert_feasible(inst, second)
    assert second.assignment() == first.assignment()
    assert capsys.readouterr() == ("", "")
    assert set(tmp_path.iterdir()) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", ""],
        ["solve", "{inst}", "--out", ""],
        ["simulate", "--trace", "", "--out", "x"],
        ["bench", "--quick", "--out", ""],
        ["topology", "show", ""],
        ["profile", "show", ""],
    ],
)
def test_an_empty_file_name_is_refused_by_its_argument(argv, instance_file, capsys):
    # Path("") is ".": validate said "[Errno 21] Is a directory: '.'", solve "--out = '.'"
    with pytest.raises(SystemExit) as exc:
        main([a.format(inst=instance_file) for a in argv])
    assert exc.value.code == 2
    assert "'': an empty file name" in capsys.readouterr().err


_BUILD = ("--queue", "{inst}", "--profile", "{inst}", "--penalties", "1.7", "-o", "{out}")


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["validate", "{f}"], "instance"),
        (["solve", "{f}"], "instance"),
        (["simulate", "--trace", "{f}", "--correlated", "0"], "--trace"),
        (["simulate", "--trace", "{inst}", "--profile", "{f}"], "--profile"),
        (["topology", "show", "{f}"], "file"),
        (["topology", "build", "--slurm", "{f}"], "--slurm"),
        (["topology", "build", "--nvidia-smi", "{f}"], "--nvidia-smi"),
        (["topology", "build", "--server", "n[1-2]={f}"], "--server"),
        (["profile", "show", "{f}"], "file"),
        (["profile", "assign", "{f}", "--cluster", "2x4", "-o", "{out}"], "file"),
        (["profile", "import", "{f}", "--id", "gpu", "--value", "perf", "-o", "{out}"], "file"),
        (["profile", "assign", "{inst}", "--topology", "{f}", "-o", "{out}"], "--topology"),
        (["instance", "build", "--cluster", "2x4", *_BUILD, "--profile", "{f}"], "--profile"),
        (["instance", "build", "--topology", "{f}", *_BUILD, "--profile", "{inst}"], "--topology"),
        (["instance", "build", "--cluster", "2x4", *_BUILD, "--queue", "{f}"], "--queue"),
        (["sweep", "{f}"], "grid"),
    ],
)
@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_an_input_file_that_is_missing_or_a_folder_is_named_by_its_argument(
    argv, argument, kind, instance_file, tmp_path, capsys
):
    # A missing file was "[Errno 2] No such file or directory: 'x'", naming no argument.
    path = tmp_path / "in.json"
    if kind == "folder":
        path.mkdir()
    out = tmp_path / "out.json"
    with pytest.raises(SystemExit) as exc:
        main([a.format(f=path, inst=instance_file, out=out) for a in argv])
    assert exc.value.code == 2
    reason = "no such file" if kind == "missing" else "is a folder, not a file"
    assert f"argument {argument}: '{path}': {reason}" in capsys.readouterr().err
    assert not out.exists()


def test_validate_names_what_the_instance_holds(instance_file, capsys):
    assert main(["validate", str(instance_file)]) == 0
    assert capsys.readouterr().out == (
        f"{instance_file}: valid (16 GPUs, 4 servers, tiers server/rack/cluster, 2 classes, "
        "7 queued jobs)\n"
    )


def test_schema_is_one_json_document_ending_in_a_newline(capsys):
    from palopt.io import instance_schema
    from palopt.result import result_schema

    for args, schema in (
        (["schema"], instance_schema()),
        (["schema", "--result"], result_schema()),
    ):
        assert main(args) == 0
        out = capsys.readouterr().out
        assert out.endswith("}\n") and json.loads(out) == schema


def test_solvers_lists_a_solver_missing_its_modules_only_with_all(capsys, monkeypatch):
    from palopt.solvers import base

    base.list_solvers()  # the registry loaded before the fake entry is added
    missing = base.SolverInfo("zz-missing", object, "Needs a module", ("palopt_no_such_module",))
    monkeypatch.setitem(base._REGISTRY, "zz-missing", missing)
    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    assert "zz-missing" not in out and "not installed" not in out
    assert main(["solvers", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (
        "zz-missing         Needs a module  (not installed: pip install 'palopt[exact]')"
    )
    assert lines[:-1] == out.splitlines()  # the installed ones unmarked, in the same order


def test_table_shows_each_job_in_queue_order_with_its_numbers():
    import dataclasses

    from palopt.commands.solve import format_result
    from palopt.result import Action, JobPlacement, PlacementResult

    topo = build_cluster(1, 2, 2)
    sd = np.array([[1.25, 1.0, 1.1, 1.0]])
    # not in sorted order; r runs on gpu3 and is preempted
    queue = (Job("z", 3, "A"), Job("a", 2, "A"), Job("r", 1, "A", current_gpus=(3,)))
    inst = Instance(topo, ("A",), sd, np.array([[1.0, 1.5, 2.0]]), queue)
    placements = (
        JobPlacement("z", (0, 1, 2), Action.START, 1.875, 1.25, "rack", 1.5),
        JobPlacement("a", (), Action.WAIT, reason="no room"),
        JobPlacement("r", (), Action.PREEMPT, reason="preempted"),
    )
    result = PlacementResult(placements, "cpsat", "feasible", 1.875, 1, 0.0123, bound=1.5)
    assert_feasible(inst, result)
    assert format_result(inst, result).splitlines() == [
        "solver cpsat: status feasible, 1/3 jobs placed, objective 1.8750, bound 1.5000, "
        "gap 20.00%, 12.3 ms",
        "job gpus action    cost slowdown tier penalty  placement",
        "z      3 start   1.8750   1.2500 rack   1.500  gpu0,gpu1,gpu2",
        "a      2 wait         -        - -          -  not placed: no room",
        "r      1 preempt      -        - -          -  not placed: preempted",
    ]
    # a long job id widens its column for every row: the columns stay aligned
    long_id = "z-" + "x" * 30
    renamed = Instance(topo, ("A",), sd, inst.penalty, (Job(long_id, 3, "A"), *queue[1:]))
    moved = dataclasses.replace(placements[0], job_id=long_id)
    table = format_result(renamed, dataclasses.replace(result, placements=(moved, *placements[1:])))
    assert table.splitlines()[1:] == [
        "job" + " " * 29 + " gpus action    cost slowdown tier penalty  placement",
        long_id + "    3 start   1.8750   1.2500 rack   1.500  gpu0,gpu1,gpu2",
        "a" + " " * 31 + "    2 wait         -        - -          -  not placed: no room",
        "r" + " " * 31 + "    1 preempt      -        - -          -  not placed: preempted",
    ]
    # no bound: no bound or gap; an objective of ten digits or more in six
    huge = dataclasses.replace(result, objective=5e9, bound=None)
    assert format_result(inst, huge).splitlines()[0] == (
        "solver cpsat: status feasible, 1/3 jobs placed, objective 5e+09, 12.3 ms"
    )


def test_solve_prints_no_placement_that_breaks_the_rules(
    instance_file, tmp_path, capsys, monkeypatch
):
    import dataclasses

    import palopt.commands.solve as command

    class Short:
        """A broken solver: its first placed job gets one GPU too few."""

        def solve(self, instance, **kwargs):
            result = solve(instance, "pal", **kwargs)
            placements = list(result.placements)
            i = next(i for i, p in enumerate(placements) if len(p.gpus) > 1)
            placements[i] = dataclasses.replace(placements[i], gpus=placements[i].gpus[:-1])
            return dataclasses.replace(result, placements=tuple(placements))

    monkeypatch.setattr(command, "get_solver", lambda name, **options: Short())
    out = tmp_path / "r.json"
    assert main(["solve", str(instance_file), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "needs 4 GPUs, got 3" in captured.err and not out.exists()


def test_solve_time_limit_as_an_option_or_a_flag(instance_file, capsys):
    for args in (
        ["-o", "time_limit=2"],
        ["--time-limit", "2"],
        ["-o", "time_limit=2", "--time-limit", "2"],
    ):
        assert main(["solve", str(instance_file), "--solver", "cpsat", *args]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["settings"]["time_limit"] == 2.0 and data["status"] == "optimal"


@pytest.mark.parametrize(
    ("exception", "code", "message"),
    [
        (KeyboardInterrupt(), 130, "palopt: interrupted\n"),
        (ImportError("no module named x"), 2, "palopt: error: no module named x\n"),
        (
            PermissionError(13, "Permission denied"),
            2,
            "palopt: error: [Errno 13] Permission denied\n",
        ),
    ],
)
def test_an_interrupt_or_an_input_error_ends_with_its_exit_code(
    monkeypatch, capsys, tmp_path, exception, code, message
):
    from palopt.commands import profile

    def stop(args):
        raise exception

    monkeypatch.setattr(profile, "cmd_show", stop)
    (tmp_path / "p.json").write_text("{}")
    assert main(["profile", "show", str(tmp_path / "p.json")]) == code
    assert capsys.readouterr() == ("", message)


def test_a_reader_that_went_away_is_not_an_error(monkeypatch, tmp_path):
    import io

    from palopt.commands import profile

    def write_to_a_closed_pipe(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(profile, "cmd_show", write_to_a_closed_pipe)
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    (tmp_path / "p.json").write_text("{}")
    assert main(["profile", "show", str(tmp_path / "p.json")]) == 0
    assert stderr.closed  # nothing more said: the reader is gone


@pytest.mark.parametrize("after", [False, True], ids=["before-command", "after-command"])
def test_verbose_lowers_the_log_level(tmp_path, artifact_dir, after):
    # -v shows INFO records (the sweep's count of cells), which are hidden by default; it may
    # come before the command or among the command's arguments
    command = ["reproduce", "fig13", "--out", str(tmp_path)]
    args = [sys.executable, "-m", "palopt.cli", *((*command, "-v") if after else ("-v", *command))]
    args += ["--data", str(artifact_dir), "--no-plots", "--no-progress", "--workers", "1"]
    args += ["--jobs", "1", "--loads", "8"]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "INFO palopt.sweep: sweep: 12 cells, 0 already done\n"


def test_argument_errors_of_a_command_say_palopt_error(tmp_path, capsys):
    # one prefix for every error, as for the errors found later ("palopt: error: ...")
    trace = tmp_path / "t.csv"
    (tmp_path / "x.csv").write_text("job_id,num_gpus,submit_time,duration,model\n0,1,0,9,vgg19\n")
    simulate = ["simulate", "--trace", str(tmp_path / "x.csv"), "--correlated", "0"]
    for argv, message in (
        (["simulate", "--trace", str(trace), "--correlated", "0"], "argument --trace: "),
        ([*simulate, "--placement-option", "=1"], "expected KEY=VALUE, got '=1'"),
        (["profile", "show", str(trace)], "argument file: "),
        # JSON values read as strictly as files: deep nesting was a RecursionError traceback,
        # a key given twice kept the last
        ([*simulate, "--placement-option", "m=" + "[" * 100_000], "m = 'nesting': nested too"),
        ([*simulate, "--scheduler-option", 'x={"a": 1, "a": 2}'], "x = 'a': the key appears"),
        ([*simulate, "--locality-penalty", '{"rack": 1, "rack": 2}'], "penalties = 'rack': "),
        ([*simulate, "--locality-penalty", "[1.7]"], "expected a number or a JSON object"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        last = capsys.readouterr().err.splitlines()[-1]
        assert last.startswith("palopt: error: ") and message in last


def test_an_image_suffix_in_capitals_is_an_image_format(tmp_path, capsys):
    csv = tmp_path / "m.csv"
    csv.write_text("gpu,perf\na,1.0\nb,1.1\nc,1.3\n")
    profile = tmp_path / "p.json"
    argv = ["profile", "import", str(csv), "--id", "gpu", "--value", "perf", "-o", str(profile)]
    assert main(argv) == 0
    assert main(["profile", "show", str(profile), "--plot", str(tmp_path / "h.PNG")]) == 0
    assert (tmp_path / "h.PNG").read_bytes().startswith(b"\x89PNG")


def test_validate_checks_a_placement_file_of_either_form(instance_file, tmp_path, capsys):
    out = tmp_path / "result.json"
    assert main(["solve", str(instance_file), "--solver", "greedy", "--out", str(out)]) == 0
    objective = json.loads(capsys.readouterr().out)["objective"]
    data = json.loads(out.read_text())
    plain = tmp_path / "plain.json"  # what another scheduler holds: job id -> GPU ids
    plain.write_text(json.dumps({j["job"]: j["gpus"] for j in data["jobs"] if "gpus" in j}))
    for path in (out, plain):
        assert main(["validate", str(instance_file), "--placement", str(path)]) == 0
        last = capsys.readouterr().out.splitlines()[-1]
        assert last == f"{path}: feasible ({data['n_placed']}/7 jobs placed, objective " + (
            f"{objective:.4f})"
        )


def test_validate_takes_a_plain_placement_of_a_job_named_format(tmp_path, capsys):
    """A job id -> GPU ids file is read as such even when a job is named "format" (its value is
    a list, not a format name), not refused as a result file."""
    topo = build_cluster(1, 1, 4)
    queue = (Job("format", 2, "A"), Job("b", 1, "A"))
    inst = Instance(topo, ("A",), np.ones((1, 4)), np.ones((1, 3)), queue)
    save_instance(inst, tmp_path / "i.json")
    placement = {"format": [0, 1], "b": [2]}
    assert_feasible(inst, placement)
    plain = tmp_path / "plain.json"
    plain.write_text(
        json.dumps({job: [topo.gpu_ids[g] for g in gpus] for job, gpus in placement.items()})
    )
    assert main(["validate", str(tmp_path / "i.json"), "--placement", str(plain)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"{plain}: feasible (2/2 jobs placed, objective 2.0000)"
    )


def test_validate_refuses_a_placement_that_breaks_a_rule_or_misstates_a_cost(
    instance_file, tmp_path, capsys
):
    out = tmp_path / "result.json"
    assert main(["solve", str(instance_file), "--out", str(out)]) == 0
    capsys.readouterr()
    data = json.loads(out.read_text())
    placed = [j for j in data["jobs"] if "gpus" in j]
    cases = {
        "shared": {placed[0]["job"]: placed[1]["gpus"][:1] + placed[0]["gpus"][1:]}
        | {j["job"]: j["gpus"] for j in placed[1:]},
        "unknown-job": {"nobody": placed[0]["gpus"]},
        "short": {placed[0]["job"]: placed[0]["gpus"][1:]},
    }
    cheaper = json.loads(out.read_text())
    cheaper["jobs"][0]["cost"] = 0.5 * cheaper["jobs"][0]["cost"]
    cases["cost"] = cheaper
    messages = {
        "shared": "given to both",
        "unknown-job": "job 'nobody' is not in the queue",
        "short": f"job '{placed[0]['job']}' needs",
        "cost": f"job '{placed[0]['job']}': cost",
    }
    for name, content in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(content))
        assert main(["validate", str(instance_file), "--placement", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"palopt: error: {path}: infeasible: ") and messages[name] in err


@pytest.mark.parametrize(
    "content, message",
    [
        ([["gpu0"]], "{f}: placement = 'list': expected a JSON object"),
        ({"j0": "gpu0"}, "{f}: placement.j0 = 'gpu0': expected a list of GPU ids"),
        ({"j0": ["gpu99"]}, "{f}: placement.j0 = 'gpu99': no GPU of that id"),
        (
            {"format": "palopt.result/2"},
            "{f}: format = 'palopt.result/2': expected 'palopt.result/1'",
        ),
        # a result of another instance: its queue is named before its GPUs
        (
            {
                "format": "palopt.result/1",
                **dict.fromkeys(("solver", "status"), "heuristic"),
                **dict.fromkeys(("objective", "n_placed", "wall_time"), 0),
                "settings": {},
                "jobs": [{"job": "zz", "action": "start", "gpus": ["gpu99"]}],
            },
            "{f}: instance.queue[0].id = 'j0': the result is of another queue",
        ),
    ],
)
def test_validate_names_a_bad_placement_file(instance_file, tmp_path, capsys, content, message):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(content))
    assert main(["validate", str(instance_file), "--placement", str(path)]) == 2
    assert message.format(f=path) in capsys.readouterr().err


def test_version_is_the_installed_packages(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"palopt {version('palopt')}\n"


def test_solvers_lists_each_solvers_options_and_an_unknown_one_names_them(instance_file, capsys):
    assert main(["solvers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    after = {lines[i].split()[0]: lines[i + 1].strip() for i in range(len(lines) - 1)}
    assert after["greedy"] == "options: mode, keep_running, time_limit"
    assert after["pal"] == "options: variant"
    assert after["milp"].startswith("options: mode, keep_running, time_limit") and after[
        "milp"
    ].endswith("backend")
    assert not after["packed-nonsticky"].startswith("options")  # it takes none
    for solver, option, message in (
        ("greedy", "gap=1", "greedy.gap = 1: unknown option; its options: mode, keep_running, "),
        ("packed-nonsticky", "variant=fixed", "its options: none"),
        ("random-sticky", "seed=3", "its options: variant; a seed goes to solve (--seed)"),
    ):
        assert main(["solve", str(instance_file), "--solver", solver, "-o", option]) == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize("command", [["bench", "--quick"], ["reproduce", "fig10", "--no-plots"]])
def test_missing_shared_data_says_how_to_point_at_it(tmp_path, capsys, monkeypatch, command):
    # An installed palopt has no ../shared/data beside it; bench drew from no traces at all
    # (numpy's "high <= 0" traceback) and reproduce named a folder inside site-packages.
    monkeypatch.setenv("PALOPT_DATA", str(tmp_path / "nowhere"))
    assert main([*command, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    relative = "pal-artifact" + ("/sim-64gpu-cluster.csv" if command[0] == "bench" else "")
    assert err == [
        f"palopt: error: shared data = '{relative}': not found in {tmp_path / 'nowhere'} "
        "(PALOPT_DATA is set); set PALOPT_DATA to the folder that holds pal-artifact/"
    ]
    (tmp_path / "empty" / "pal-artifact" / "traces").mkdir(parents=True)
    monkeypatch.setenv("PALOPT_DATA", str(tmp_path / "empty"))
    assert main(["bench", "--quick", "--profiles", "synthetic", "--out", str(tmp_path / "o")]) == 2
    assert "no sia-philly-workload-*.csv file in this folder" in capsys.readouterr().err
