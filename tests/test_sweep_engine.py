"""The sweep machinery: grid expansion, resumable storage, local and Ray engines."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from palopt import InputError
from palopt.errors import InfeasiblePlacementError
from palopt.sweep import SweepSpec, cell_id, expand, load_grid, run_sweep


def square_cell(cell: dict) -> dict:
    """A cell function whose result is known: metric = x * y."""
    return {"metric": cell["x"] * cell["y"] + cell.get("offset", 0)}


def write_grid(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(body)
    return path


GRID = """
[sweep]
out = "out"
baseline = "b"

[grid]
x = [1, 2, 3]
y = [10, 20]

[fixed]
offset = 5
"""


def test_expand_and_ids(tmp_path):
    spec = load_grid(write_grid(tmp_path, GRID))
    cells = expand(spec)
    assert len(cells) == 6 and cells[0] == {"offset": 5, "x": 1, "y": 10}
    assert len({cell_id(c) for c in cells}) == 6
    assert cell_id({"y": 10, "x": 1, "offset": 5}) == cell_id(cells[0])
    assert spec.out == tmp_path / "out"


def test_local_run_is_resumable(tmp_path):
    spec = load_grid(write_grid(tmp_path, GRID))
    table = run_sweep(spec, square_cell, workers=2)
    assert sorted(table["metric"]) == sorted(x * y + 5 for x in (1, 2, 3) for y in (10, 20))
    assert (spec.out / "results.csv").exists()
    # Tamper with one stored cell: a rerun must keep it (it is skipped, not recomputed).
    one = spec.out / "cells" / f"{cell_id(expand(spec)[0])}.json"
    stored = json.loads(one.read_text())
    stored["metrics"]["metric"] = -1
    one.write_text(json.dumps(stored))
    again = run_sweep(spec, square_cell, workers=1)
    assert -1 in set(again["metric"])
    assert len(again) == 6


@pytest.mark.parametrize(
    "body, key",
    [
        ("[grid]\nx = 3\n", "grid.x"),
        ("[grid]\nx = []\n", "grid.x"),
        ("[grid]\nx = [1]\n[fixed]\nx = 2\n", "fixed.x"),
        ("[grid]\nx = [1]\n[extra]\n", "[extra]"),
        ("[grid\n", "invalid TOML"),
        ("[sweep]\nformat = 'xls'\n[grid]\nx = [1]\n", "sweep.format"),
        ("fixed = 3\n[grid]\nx = [1]\n", "[fixed]"),
        ("sweep = [1]\n[grid]\nx = [1]\n", "[sweep]"),
        ("[sweep]\nformats = 'csv'\n[grid]\nx = [1]\n", "sweep.formats"),
        ("[sweep]\nout = 3\n[grid]\nx = [1]\n", "sweep.out"),
        ('[sweep]\nout = "a\\u0000"\n[grid]\nx = [1]\n', "sweep.out = 'a\\\\x00'"),
        ("[sweep]\nbaseline = ['pal']\n[grid]\nx = [1]\n", "sweep.baseline"),
        # the same cell twice: run twice, two rows (was)
        ("[grid]\nx = [1, 2, 1]\n", "grid.x = 1: given twice"),
        ("[grid]\nx = [{a = 1, b = 2}, {b = 2, a = 1}]\n", "grid.x = .*: given twice"),
        ("[grid]\nx = [1, 1]\n", "grid.x = 1: given twice"),
        # the same cell under two ids (was)
        ("[grid]\nx = [360, 360.0]\n", "grid.x = 360.0: given twice"),
        ("[grid]\nx = [{a = [1]}, {a = [1.0]}]\n", "grid.x = .*: given twice"),
        ("[grid]\n", "[grid] = {}: expected a table of parameter lists"),
        ("[fixed]\nx = 1\n", "[grid] = None: expected a table of parameter lists"),
        ("[sweep]\nout = 0\n[grid]\nx = [1]\n", "sweep.out = 0: expected a string"),
    ],
)
def test_bad_grids(tmp_path, body, key):
    with pytest.raises(InputError, match=key.replace("[", r"\[")):
        load_grid(write_grid(tmp_path, body))


def test_the_results_folder_is_named_from_the_grid_files_folder(tmp_path):
    spec = load_grid(write_grid(tmp_path, '[sweep]\nout = ""\n[grid]\nx = [1]\n'))
    assert spec.out == tmp_path  # "" is the grid file's own folder
    assert load_grid(write_grid(tmp_path, "[grid]\nx = [1]\n")).out == tmp_path / "runs" / "grid"


def test_parquet_without_pyarrow_is_refused_before_any_cell_runs(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a)
    )
    with pytest.raises(ImportError, match="needs pyarrow"):
        load_grid(write_grid(tmp_path, "[sweep]\nformat = 'parquet'\n[grid]\nx = [1]\n"))


def test_grid_not_in_utf8(tmp_path):
    path = tmp_path / "g.toml"
    path.write_bytes("# né\n[grid]\nx = [1]\n".encode("latin-1"))
    with pytest.raises(InputError, match="not a UTF-8 text file"):
        load_grid(path)


def checked_cell(cell: dict) -> dict:
    """A cell function that rejects negative x, as simulate_cell rejects bad values."""
    if cell["x"] < 0:
        raise InputError("x", cell["x"], "must be >= 0")
    return {"metric": cell["x"]}


def test_a_bad_cell_in_a_worker_process_is_an_input_error(tmp_path):
    spec = load_grid(write_grid(tmp_path, '[sweep]\nout = "out"\n[grid]\nx = [1, -1]\n'))
    with pytest.raises(InputError, match="x = -1: must be >= 0"):
        run_sweep(spec, checked_cell, workers=2)
    with pytest.raises(InputError, match="workers = 0"):
        run_sweep(spec, checked_cell, workers=0)


def test_a_sweep_without_tqdm_runs_without_a_progress_bar(tmp_path, monkeypatch):
    # The progress bar is the `progress` extra: without it a sweep (and `palopt reproduce`,
    # progress on by default) stopped with "No module named 'tqdm'".
    from palopt.sweep import progress_bar

    monkeypatch.setitem(sys.modules, "tqdm", None)  # `from tqdm import tqdm` raises ImportError
    assert progress_bar(3, "cell") is None
    spec = load_grid(write_grid(tmp_path, GRID))
    assert len(run_sweep(spec, square_cell, workers=1, progress=True)) == 6


def slow_unless_negative(cell: dict) -> dict:
    """Fails for negative x, but only once another cell has started (it leaves a file in the
    folder ``cell["started"]``), so a running cell is there to be kept; the other cells take a
    second, so they are still running when the pool hears of the failure."""
    import time
    from pathlib import Path

    started = Path(cell["started"])
    if cell["x"] < 0:
        deadline = time.monotonic() + 30
        while not any(started.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.01)
        raise InputError("x", cell["x"], "must be >= 0")
    (started / str(cell["x"])).touch()
    time.sleep(1.0)
    return {"metric": cell["x"]}


def test_after_a_bad_cell_the_running_cells_are_kept_and_the_rest_cancelled(tmp_path):
    started = tmp_path / "started"
    started.mkdir()
    body = (
        '[sweep]\nout = "out"\n[grid]\nx = [-1, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n'
        f'[fixed]\nstarted = "{started}"\n'
    )
    spec = load_grid(write_grid(tmp_path, body))
    with pytest.raises(InputError, match="x = -1"):
        run_sweep(spec, slow_unless_negative, workers=2)
    stored = sorted((tmp_path / "out" / "cells").glob("*.json"))
    # the cells the pool had started are stored; no other starts (was: all run, none stored;
    # then up to three more, which the pool had queued where they could not be cancelled)
    assert len(stored) == len(list(started.iterdir())) == 1
    assert not list((tmp_path / "out" / "cells").glob("*.tmp"))


def fails_for_two(cell: dict) -> dict:
    if cell["x"] == 2:
        raise InputError("x", 2, "two is bad")
    if cell["x"] == 3:
        raise InfeasiblePlacementError("three is worse")
    return {"metric": cell["x"]}


def test_a_cells_error_names_the_cell_by_its_grid_values(tmp_path):
    spec = load_grid(write_grid(tmp_path, '[grid]\nx = [1, 2]\ny = ["a"]\n[fixed]\nz = 0\n'))
    for workers in (1, 2):
        with pytest.raises(InputError) as caught:
            run_sweep(spec, fails_for_two, workers=workers)
        assert str(caught.value) == "x = 2: two is bad (in the cell x=2, y='a')"
        assert caught.value.field == "x"
    spec = load_grid(write_grid(tmp_path, "[grid]\nx = [3]\n"))
    with pytest.raises(InfeasiblePlacementError, match=r"^three is worse \(in the cell x=3\)$"):
        run_sweep(spec, fails_for_two, workers=2)


def test_a_bad_cell_on_ray_raises_the_cells_own_error(tmp_path):
    pytest.importorskip("ray")
    from palopt.sim.experiments import simulate_cell  # (Ray workers import palopt, not tests)

    spec = load_grid(write_grid(tmp_path, '[sweep]\nout = "out"\n[grid]\nplacment = ["pal"]\n'))
    with pytest.raises(InputError) as caught:  # was Ray's wrapper, its traceback in the message
        run_sweep(spec, simulate_cell, engine="ray")
    assert str(caught.value).startswith("cell.placment = 'pal': unknown parameter")
    assert "\n" not in str(caught.value)


def test_after_a_bad_cell_on_ray_the_running_cells_are_kept(tmp_path, artifact_dir):
    pytest.importorskip("ray")
    from palopt.sim.experiments import simulate_cell

    # Workload 0 fails at once; workload 1, started beside it, is finished and stored (it was
    # cancelled, which interrupts a running Ray task), and the rest are not started.
    fixed = {"data": str(artifact_dir), "check": True}
    spec = SweepSpec({"workload": tuple(range(9))}, fixed, tmp_path / "out")
    with pytest.raises(InputError, match="^workload = 0: "):
        run_sweep(spec, simulate_cell, engine="ray")
    stored = [json.loads(p.read_text()) for p in (tmp_path / "out" / "cells").glob("*.json")]
    assert 1 in [s["cell"]["workload"] for s in stored] and len(stored) < 8
    assert all(s["metrics"]["jobs"] > 0 for s in stored)


@pytest.mark.parametrize(
    ("fixed", "message"),
    [
        # Path(1) raised TypeError when the cell ran; a NUL a ValueError in open()
        ({"data": 1}, "data = 'int': expected a file name"),
        ({"trace": ""}, "trace = '': an empty file name"),
        ({"trace": "a\0b"}, r"trace = 'a\\x00b': a file name cannot hold a NUL character"),
        ({"profile": "\0"}, "profile = .*: a file name cannot hold a NUL character"),
    ],
)
def test_cell_file_names_are_checked_before_any_cell_runs(fixed, message):
    from palopt.sim.experiments import prepare, simulate_cell

    with pytest.raises(InputError, match=message):
        prepare(SweepSpec({"seed": (0, 1)}, fixed))
    with pytest.raises(InputError, match=message):
        simulate_cell({**fixed, "cluster": "1x2"})


def where_run(cell: dict) -> dict:
    """A cell function that tells which process ran it."""
    import os

    return {"pid": os.getpid()}


def test_by_default_cells_run_in_a_pool_of_worker_processes(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # workers=None: one process per CPU
    table = run_sweep(SweepSpec({"x": (1, 2)}, {}, tmp_path / "out"), where_run)
    assert os.getpid() not in set(table["pid"])


@pytest.mark.parametrize("workers", [2.5, "2", True])
def test_workers_must_be_a_whole_number(tmp_path, workers):
    # 2.5 and "2" raised a bare TypeError (from the process pool, or '<' on a str)
    spec = SweepSpec({"x": (1, 2)}, {"y": 1}, tmp_path / "out")
    with pytest.raises(InputError, match=f"workers = {workers!r}: must be a positive integer"):
        run_sweep(spec, square_cell, workers=workers)
    assert not (tmp_path / "out").exists()


def test_an_unknown_engine_is_refused_before_any_cell_runs(tmp_path):
    spec = SweepSpec({"x": (1, 2)}, {"y": 1}, tmp_path / "out")
    with pytest.raises(InputError, match="engine = 'rey': must be 'local' or 'ray'"):
        run_sweep(spec, square_cell, engine="rey", workers=1)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"engine": "ray", "workers": 2}, "workers = 2: is for engine 'local'"),
        ({"engine": "local", "address": "auto"}, "address = 'auto': is for engine 'ray'"),
    ],
)
def test_an_option_of_the_other_engine_is_refused(tmp_path, options, message):
    # the Ray engine ignored workers, the local one an address
    spec = SweepSpec({"x": (1, 2)}, {"y": 1}, tmp_path / "out")
    with pytest.raises(InputError, match=message):
        run_sweep(spec, square_cell, **options)
    assert not (tmp_path / "out").exists()


def test_cells_follow_the_grid_files_order_with_the_last_axis_fastest(tmp_path):
    spec = load_grid(write_grid(tmp_path, '[grid]\nb = [2, 1]\na = ["y", "x"]\n[fixed]\nk = 0\n'))
    assert [(c["b"], c["a"]) for c in expand(spec)] == [(2, "y"), (2, "x"), (1, "y"), (1, "x")]
    table = run_sweep(spec, where_run, workers=1)
    assert list(table.columns) == ["k", "b", "a", "pid"]  # fixed, axes as given, metrics
    assert list(zip(table["b"], table["a"], strict=True)) == [
        (2, "y"),
        (2, "x"),
        (1, "y"),
        (1, "x"),
    ]


def test_the_progress_bar_counts_the_cells_still_to_run(tmp_path, capsys):
    pytest.importorskip("tqdm")
    run_sweep(SweepSpec({"x": (1,)}, {"y": 1}, tmp_path / "out"), square_cell, workers=1)
    capsys.readouterr()
    spec = SweepSpec({"x": (1, 2, 3)}, {"y": 1}, tmp_path / "out")  # x = 1 is stored
    assert len(run_sweep(spec, square_cell, workers=1, progress=True)) == 3
    err = capsys.readouterr().err
    assert "2/2" in err and "3/3" not in err


@pytest.mark.parametrize("text", ["{", "[]", '{"cell": {"x": 1}}', '{"cell": 1, "metrics": {}}'])
def test_a_damaged_cell_result_is_named(tmp_path, text):
    # A raw JSONDecodeError, KeyError or TypeError (a traceback from `palopt sweep`) before.
    spec = SweepSpec({"x": (1, 2)}, {"y": 1}, tmp_path / "out")
    run_sweep(spec, square_cell, workers=1)
    damaged = sorted((tmp_path / "out" / "cells").glob("*.json"))[0]
    damaged.write_text(text)
    with pytest.raises(InputError, match="not a stored result .*: delete it to run its cell again"):
        run_sweep(spec, square_cell, workers=1)
    damaged.unlink()
    assert len(run_sweep(spec, square_cell, workers=1)) == 2


def test_fresh_reruns_every_cell_but_only_after_the_arguments_are_checked(tmp_path):
    # `palopt sweep --fresh --workers 0` deleted the stored runs, then refused the workers.
    calls = []

    def counted(cell):
        calls.append(cell["x"])
        return {"metric": cell["x"]}

    spec = SweepSpec({"x": (1, 2)}, {}, tmp_path / "out")
    run_sweep(spec, counted, workers=1)
    stored = sorted((tmp_path / "out" / "cells").iterdir())
    for bad in ({"workers": 0}, {"engine": "rey"}, {"address": "auto"}):
        with pytest.raises(InputError):
            run_sweep(spec, counted, fresh=True, **bad)
        assert sorted((tmp_path / "out" / "cells").iterdir()) == stored
    run_sweep(spec, counted, workers=1)
    assert calls == [1, 2]  # reused
    run_sweep(spec, counted, workers=1, fresh=True)
    assert calls == [1, 2, 1, 2]


def test_a_long_damaged_cell_result_is_quoted_short(tmp_path):
    """The error for a damaged stored result quotes at most 60 characters of it."""
    spec = SweepSpec({"x": (1,)}, {"y": 1}, tmp_path / "out")
    run_sweep(spec, square_cell, workers=1)
    damaged = next((tmp_path / "out" / "cells").glob("*.json"))
    damaged.write_text("{" + "x" * 500)
    with pytest.raises(InputError, match="not a stored result") as caught:
        run_sweep(spec, square_cell, workers=1)
    assert caught.value.value == "{" + "x" * 56 + "..."


def test_parquet_results_hold_options_as_json_text(tmp_path, monkeypatch):
    # pyarrow cannot write a column of empty mappings (every cell's default options): the
    # sweep crashed after running every cell. Mappings and lists go out as JSON text.
    import pandas as pd

    written: list[pd.DataFrame] = []
    monkeypatch.setattr(pd.DataFrame, "to_parquet", lambda self, *a, **k: written.append(self))
    spec = SweepSpec({"x": (1, 2)}, {"options": {}}, tmp_path, format="parquet")
    run_sweep(spec, lambda cell: {"metric": cell["x"], "sizes": [cell["x"], 3]}, workers=1)
    (table,) = written
    assert list(table["options"]) == ["{}", "{}"] and list(table["sizes"]) == ["[1, 3]", "[2, 3]"]
    assert list(table["metric"]) == [1, 2]
