"""Golden tests: PAL and PM-First on the artifact's 64-GPU cluster give the artifact's choices.

The cluster is ../shared/data/pal-artifact/sim-64gpu-cluster.csv (16 servers x 4 GPUs; PAL ranks
by the binned ``sf_classX`` columns; cross-server penalty 1.7). Expected GPU ids were worked out
by hand from the artifact's rules (placement/pal.py and placement/pmfirst.py of hal-uw/blox-pal);
the derivation is in each test's comments. Levels (0 = fastest) of the servers the derivations
use (not every server: the others mix levels too), GPU ids 4s..4s+3:

    classA (0.9128, 1.0, 2.5946): s0 0011  s1 0000  s2 0100  s8 0002  s10 1101  s12 0011
    classB (0.9851, 1.0149):      s0 0000  s1 0010  s4 1011  s11 1101
    classC (0.9876, 1.0124):      s0 0001  s1 1000  s2 1111  s3 1000  s12 0001
    classD (0.9855, 1.0145):      level 0 only at g5, g8, g13, g24, g49, g51, g56
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from palopt import Instance, Job, build_cluster
from palopt.cost import assert_feasible
from palopt.instance import penalty_matrix
from palopt.result import PlacementResult
from palopt.solvers.base import get_solver

CLASSES = ("classA", "classB", "classC", "classD")


@pytest.fixture(scope="module")
def sf(artifact_dir: Path) -> np.ndarray:
    """The binned levels the artifact's PAL ranked by, as ``slowdown[class, GPU_ID]``."""
    table = pd.read_csv(artifact_dir / "sim-64gpu-cluster.csv")
    topo = build_cluster(1, 16, 4)
    assert table["GPU_ID"].tolist() == list(range(64))
    assert (table["Node_ID"].to_numpy() == topo.gpu_server).all()
    return table[[f"sf_{c}" for c in CLASSES]].to_numpy().T


def instance(
    sf: np.ndarray, queue: list[Job], penalty: float = 1.7, free: list[int] | None = None
) -> Instance:
    topo = build_cluster(1, 16, 4)
    busy = np.zeros(64, dtype=bool)
    if free is not None:
        busy[:] = True
        busy[free] = False
    return Instance(topo, CLASSES, sf, penalty_matrix(topo, CLASSES, penalty), tuple(queue), busy)


def run(solver: str, inst: Instance, **config: str) -> PlacementResult:
    result = get_solver(solver, **config).solve(inst)
    assert_feasible(inst, result)
    return result


def gpus(result: PlacementResult) -> dict[str, list[int]]:
    return {p.job_id: list(p.gpus) for p in result.placements if p.placed}


MIX = [
    Job("a2", 2, "classA"),
    Job("b1", 1, "classB"),
    Job("c4", 4, "classC"),
    Job("d8", 8, "classD"),
]


def test_pal_mix_on_empty_cluster(sf: np.ndarray) -> None:
    # a2 (A, 2 GPUs): option (L0, within) first; servers with 4 level-0 GPUs are the most
    #   eligible, s1 is the first of them -> its first two: g4, g5.
    # b1 (B, 1 GPU): PM-First; level-0 groups of exactly one GPU score 0: s1 (g7; g4, g5 are
    #   taken), s4 (g17), s11 (g46) -> g7.
    # c4 (C, 4 GPUs): no server has 4 free level-0 GPUs; (L1, within) comes before any across
    #   option (1.0124 < 0.9876 x 1.7); s0 is the first server with 4 free -> g0..g3.
    # d8 (D, 8 GPUs > 4 per server): PM-First; the 6 free level-0 GPUs (g5 is taken), then 2
    #   of level 1 from the group scoring best on |size - 8|: whole free servers, s4 first.
    result = run("pal", instance(sf, MIX))
    assert gpus(result) == {
        "a2": [4, 5],
        "b1": [7],
        "c4": [0, 1, 2, 3],
        "d8": [8, 13, 16, 17, 24, 49, 51, 56],
    }


def test_pmfirst_mix_on_empty_cluster(sf: np.ndarray) -> None:
    # a2: level-0 groups of exactly 2 score 0: s0 (g0, g1), s12 -> g0, g1.
    # b1: level-0 groups of exactly 1: s4 (g17), s11 (g46) -> g17.
    # c4: 29 free level-0 GPUs; the best groups have 3 (score 1): s1 (g5-g7), s3 (g13-g15),
    #   s12 -> g5, g6, g7, g13: split across servers though it is a 4-GPU job.
    # d8: level-0 g8, g24, g49, g51, g56 (g5, g13 taken), then 3 from a whole free server
    #   (score |4 - 8| = 4 is the best), s5 first -> g20, g21, g22.
    result = run("pmfirst", instance(sf, MIX))
    assert gpus(result) == {
        "a2": [0, 1],
        "b1": [17],
        "c4": [5, 6, 7, 13],
        "d8": [8, 20, 21, 22, 24, 49, 51, 56],
    }


def test_pal_with_running_jobs_sorts_window_and_keeps(sf: np.ndarray) -> None:
    # The same jobs in reverse queue order, three of them running. PAL frees every running
    # job, stable-sorts the window (all 15 GPUs fit) by class, and so computes exactly the
    # placement above; a job placed on exactly its old GPUs keeps running.
    queue = [
        Job("d8", 8, "classD"),
        Job("c4", 4, "classC", current_gpus=(8, 9, 10, 11)),
        Job("b1", 1, "classB", current_gpus=(7,)),
        Job("a2", 2, "classA", current_gpus=(4, 5)),
    ]
    result = run("pal", instance(sf, queue))
    assert gpus(result) == {
        "a2": [4, 5],
        "b1": [7],
        "c4": [0, 1, 2, 3],
        "d8": [8, 13, 16, 17, 24, 49, 51, 56],
    }
    actions = {p.job_id: p.action for p in result.placements}
    assert actions == {"a2": "keep", "b1": "keep", "c4": "migrate", "d8": "start"}


def test_pal_within_server_takes_first_eligible_gpus(sf: np.ndarray) -> None:
    # Free: s0 g1 (A level 0), g2, g3 (level 1); s10 g40, g41, g43 (level 1), g42 (level 0).
    # x: no server has 2 free level-0 GPUs; at (L1, within) s10 has the most eligible (4);
    #   the artifact keeps the first combination of minimal max -> g40, g41 (not g42).
    # y: (L1, within) on s0 (3 eligible vs 2) -> g1, g2.   z (1 GPU): the last level 0, g42.
    queue = [Job("x", 2, "classA"), Job("y", 2, "classA"), Job("z", 1, "classA")]
    result = run("pal", instance(sf, queue, free=[1, 2, 3, 40, 41, 42, 43]))
    assert gpus(result) == {"x": [40, 41], "y": [1, 2], "z": [42]}


def test_pal_walk_tie_follows_table_order(sf: np.ndarray) -> None:
    # Penalty P = the slowest class-A level (2.5946), so the options (L2, within) and (L1,
    # across) both cost 2.5946. Free: g2, g9 (level 1), g34 (level 0), g35 (level 2).
    # Levels 0 and 1 fail within; (L0, across) has 1 GPU. The artifact lists options in the
    # order values first appear in its GPU table (1.0 before 2.5946), so (L1, across) wins:
    # PM-First over {g2, g9, g34} -> g34, then g2. Fixed: within first -> s8's g34, g35.
    penalty = float(sf[0].max())
    inst = instance(sf, [Job("t", 2, "classA")], penalty=penalty, free=[2, 9, 34, 35])
    assert gpus(run("pal", inst)) == {"t": [2, 34]}
    fixed = run("pal", inst, variant="fixed")
    assert gpus(fixed) == {"t": [34, 35]}
    assert fixed.placements[0].tier == "server"


def test_window_cut_and_no_backfill(sf: np.ndarray) -> None:
    # Demands 48 + 16 fill the 64 GPUs; the 1-GPU class-A job is outside the window, so it is
    # not sorted ahead and finds no GPU. b16 (B, PM-First): level-0 groups of 4 score best
    # (|4 - 16|): s0, s3, s7, s9. big takes the remaining 48.
    queue = [Job("big", 48, "classD"), Job("b16", 16, "classB"), Job("a1", 1, "classA")]
    for solver in ("pal", "pmfirst"):
        result = run(solver, instance(sf, queue))
        placed = gpus(result)
        assert placed["b16"] == [0, 1, 2, 3, 12, 13, 14, 15, 28, 29, 30, 31, 36, 37, 38, 39]
        assert sorted(placed["big"]) == sorted(set(range(64)) - set(placed["b16"]))
        assert "a1" not in placed
        assert result.placements[2].reason == "needs 1 GPU, 0 free"


def test_fixed_pmfirst_fills_fewest_servers(sf: np.ndarray) -> None:
    # d8 of the mix: after the 6 level-0 GPUs, 2 more are needed. The artifact scores groups
    # by |size - 8| and takes 2 GPUs of the first whole free server (s4); the fixed score
    # takes the tightest group holding both: s12's g48, g50.
    result = run("pal", instance(sf, MIX), variant="fixed")
    assert gpus(result)["d8"] == [8, 13, 24, 48, 49, 50, 51, 56]
    # PM-First's 4-GPU class-C job: no level-0 group holds 4, so the fixed variant takes the
    # largest groups first, the same GPUs as the artifact.
    assert gpus(run("pmfirst", instance(sf, MIX), variant="fixed"))["c4"] == [5, 6, 7, 13]
