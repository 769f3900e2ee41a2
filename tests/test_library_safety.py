"""palopt as a library inside another scheduler: threads, processes, state kept between calls,
and the immutability of the objects it hands out."""

from __future__ import annotations

import concurrent.futures as cf
import copy
import multiprocessing
import os
import pickle

import networkx as nx
import numpy as np
import pytest

import palopt
from palopt.sim import ClusterProfile
from palopt.solvers import transport
from palopt.solvers.base import list_solvers

EXACT = ("cpsat", "milp")
HEURISTICS = [info.name for info in list_solvers() if info.name not in EXACT]  # every other


def _instance(racks: int, servers: int, gpus: int, n_jobs: int, seed: int) -> palopt.Instance:
    rng = np.random.default_rng(seed)
    topo = palopt.build_cluster(racks=racks, servers_per_rack=servers, gpus_per_server=gpus)
    classes = ("A", "B", "C")
    sd = rng.choice([0.97, 1.0, 1.05, 1.3], size=(3, topo.n_gpus))
    pen = palopt.penalty_matrix(topo, classes, {"rack": 1.5, "cluster": 2.0})
    free = list(rng.permutation(topo.n_gpus))
    jobs = []
    for j in range(n_jobs):
        k = min(int(rng.choice([1, 1, 2, 4])), topo.n_gpus)
        running = rng.random() < 0.3 and len(free) >= k
        cur = tuple(int(free.pop()) for _ in range(k)) if running else ()
        jobs.append(palopt.Job(f"j{j}", k, classes[j % 3], float(rng.choice([1.0, 2.0])), cur))
    return palopt.Instance(topo, classes, sd, pen, tuple(jobs))


def _key(r: palopt.PlacementResult) -> tuple[object, ...]:
    return r.status, r.objective, tuple((p.job_id, p.gpus, p.action) for p in r.placements)


def _solve(args: tuple[palopt.Instance, str]) -> palopt.PlacementResult:
    inst, name = args
    return palopt.solve(inst, name, seed=3)


def _fd1() -> tuple[int, int]:
    st = os.fstat(1)
    return st.st_dev, st.st_ino


@pytest.mark.skipif(not transport.HAVE_HIGHS, reason="needs highspy")
def test_new_highs_from_threads_leaves_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each call saved fd 1, pointed it at /dev/null and restored it: a thread saving it while
    # another had /dev/null in place restored /dev/null, silencing the process for good.
    monkeypatch.setattr(transport, "_BANNER_SHOWN", False)
    real, calls = os.dup2, []

    def counting(fd: int, fd2: int, *args: object) -> int:
        if fd2 == 1:
            calls.append(fd)
        return real(fd, fd2, *args)

    monkeypatch.setattr(os, "dup2", counting)
    before = _fd1()
    with cf.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda _: transport.new_highs(), range(64)))
    assert _fd1() == before
    assert len(calls) == 2  # silenced and restored once, for the first instance only


def test_threaded_solves_match_serial() -> None:
    insts = [_instance(1, 2, 4, 6, 0), _instance(2, 2, 4, 12, 1), _instance(1, 4, 4, 14, 2)]
    insts += [insts[0].replace_queue(insts[0].queue[::-1])]  # shares the pool's cache key
    insts += [_instance(1, 2, 2, 4, s) for s in range(3, 7)]  # more than the cache holds
    names = HEURISTICS + ["cpsat"]
    tasks = [(i, n) for i in range(len(insts)) for n in names]

    def run(task: tuple[int, str]) -> palopt.PlacementResult:
        i, name = task
        options = {"time_limit": 1, "deterministic": True} if name == "cpsat" else {}
        return palopt.solve(insts[i], name, seed=3, **options)

    serial = {t: _key(run(t)) for t in tasks}
    before = _fd1()
    with cf.ThreadPoolExecutor(6) as ex:
        for t, r in zip(tasks * 3, ex.map(run, tasks * 3), strict=True):
            palopt.assert_feasible(insts[t[0]], r)
            assert _key(r) == serial[t], t
    assert _fd1() == before


def test_solver_object_reused_across_instances() -> None:
    insts = [_instance(1, 2, 4, 6, 0), _instance(2, 2, 4, 12, 1), _instance(1, 1, 8, 5, 2)]
    for name in HEURISTICS:
        fresh = [_key(palopt.get_solver(name).solve(i, seed=5)) for i in insts]
        shared = palopt.get_solver(name)
        for k in (0, 2, 1, 0, 1, 2, 2, 0):
            result = shared.solve(insts[k], seed=5)
            palopt.assert_feasible(insts[k], result)
            assert _key(result) == fresh[k], name


def test_instance_arrays_cannot_be_made_writeable() -> None:
    topo = palopt.build_cluster(1, 2, 4)
    inst = palopt.Instance(
        topo, ("A",), np.ones((1, 8)), np.ones((1, 3)), (palopt.Job("a", 1, "A"),)
    )
    result = palopt.solve(inst, "pal")
    palopt.assert_feasible(inst, result)
    assert result.assignment() == {"a": (0,)}  # caches GPU 0's level
    for copy_ in (inst, pickle.loads(pickle.dumps(inst)), copy.deepcopy(inst)):
        for arr in (copy_.slowdown, copy_.penalty, copy_.busy):
            with pytest.raises(ValueError):
                arr.setflags(write=True)  # (then slowdown[0, 0] = 50 went unchecked and unseen)
    for arr in (topo.groups, topo.gpu_server, topo.server_start):
        with pytest.raises(ValueError):
            arr.setflags(write=True)


def test_instance_arrays_memory_cannot_be_made_writeable_through_base() -> None:
    # Fault: the arrays were read-only views of arrays that owned their memory; the owner,
    # one `.base` away, could be made writeable again, and a NaN slowdown went in unchecked.
    topo = palopt.build_cluster(1, 2, 2)
    inst = palopt.Instance(
        topo, ("A",), np.array([[1.0, 1.2, 0.9, 1.0]]), np.ones((1, 3)), (palopt.Job("a", 1, "A"),)
    )
    vp = palopt.VariabilityProfile(("A",), ("g0", "g1"), np.array([[1.0, 1.2]]))
    cp = ClusterProfile(("A",), np.array([[1.0, 1.1]]), np.array([[1.1, 1.2]]))
    for copy_ in (inst, pickle.loads(pickle.dumps(inst)), copy.deepcopy(inst)):
        arrays = [copy_.slowdown, copy_.penalty, copy_.busy, copy_.topology.groups]
        arrays += [copy_.topology.gpu_server, copy_.topology.server_start]
        for arr in arrays + [vp.values, cp.rank, cp.charge]:
            while isinstance(arr, np.ndarray):
                with pytest.raises(ValueError):
                    arr.setflags(write=True)
                arr = arr.base
    assert inst.slowdown.tolist() == [[1.0, 1.2, 0.9, 1.0]]


def test_instance_mappings_are_read_only_and_not_shared() -> None:
    topo = palopt.build_cluster(1, 2, 2)
    sd = np.array([[1.0] * 4, [3.0] * 4])
    inst = palopt.Instance(
        topo, ("A", "B"), sd, np.ones((2, 3)), (palopt.Job("a", 1, "A"),), meta={"name": "x"}
    )
    other = inst.replace_queue([palopt.Job("b", 1, "A")])
    for mapping in (inst.class_index, inst.meta, other.class_index, other.meta):
        with pytest.raises(TypeError):
            mapping["A"] = 1  # class A charged class B's slowdowns, in every replace_queue copy
    with pytest.raises(TypeError):
        inst.class_index.update(Z=0)  # replace_queue then took jobs of an unknown class
    back = pickle.loads(pickle.dumps(inst))
    assert back.class_index == {"A": 0, "B": 1} and back.meta == {"name": "x"}
    with pytest.raises(TypeError):
        back.meta["name"] = "y"
    assert palopt.instance_to_dict(back)["name"] == "x"  # still JSON


def test_topology_graph_and_mappings_frozen() -> None:
    topo = palopt.build_cluster(1, 2, 2)
    with pytest.raises(nx.NetworkXError):
        topo.graph.remove_node("gpu3")  # the arrays kept 4 GPUs; the saved file had 3
    with pytest.raises(TypeError):
        topo.switch_tier["rack0"] = "cluster"
    assert nx.Graph(topo.graph).number_of_nodes() == topo.graph.number_of_nodes()  # editable copy
    back = pickle.loads(pickle.dumps(topo))
    assert nx.is_frozen(back.graph) and back.index("gpu3") == 3


def test_profiles_read_only_after_copies() -> None:
    vp = palopt.VariabilityProfile(("A",), ("g0", "g1"), np.array([[1.0, 1.2]]))
    for p in (vp, pickle.loads(pickle.dumps(vp)), copy.deepcopy(vp)):
        assert not p.values.flags.writeable
    rank = np.array([[1.0, 1.1]])
    cp = ClusterProfile(("A",), rank, rank * 1.1)
    rank[0, 0] = np.nan  # the caller's array: checked, then kept and changed under the profile
    assert cp.rank[0, 0] == 1.0
    for p in (cp, pickle.loads(pickle.dumps(cp)), copy.deepcopy(cp), cp.fixed()):
        assert not p.rank.flags.writeable and not p.charge.flags.writeable


def test_process_pool_solve_matches() -> None:
    inst = _instance(2, 2, 4, 12, 1)
    names = ["pal", "greedy", "random-sticky"]
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(2, mp_context=ctx) as ex:
        got = list(ex.map(_solve, [(inst, n) for n in names]))
    for n, r in zip(names, got, strict=True):
        palopt.assert_feasible(inst, r)
        assert _key(r) == _key(_solve((inst, n)))
        assert pickle.loads(pickle.dumps(r)) == r


def test_solving_leaves_the_instance_unchanged() -> None:
    inst = _instance(2, 2, 4, 12, 1)
    before = pickle.dumps((inst.slowdown, inst.penalty, inst.busy, inst.queue, dict(inst.meta)))
    for name in HEURISTICS:
        palopt.assert_feasible(inst, palopt.solve(inst, name, seed=1))
    after = pickle.dumps((inst.slowdown, inst.penalty, inst.busy, inst.queue, dict(inst.meta)))
    assert before == after


def test_result_settings_stay_read_only_after_pickling_and_copies() -> None:
    """A result's settings (and an instance's meta) refuse every kind of change, also in a
    pickled, copied or deep-copied result: the caller copies them with dict(...)."""
    inst = _instance(1, 2, 2, 3, 0)
    result = palopt.solve(inst, "random-sticky", seed=4)
    palopt.assert_feasible(inst, result)
    for r in (result, pickle.loads(pickle.dumps(result)), copy.copy(result), copy.deepcopy(result)):
        for mapping in (r.settings, copy.copy(r.settings), copy.deepcopy(r.settings), inst.meta):
            for change in (
                lambda m: m.__setitem__("seed", 1),
                lambda m: m.pop("seed", None),
                lambda m: m.clear(),
                lambda m: m.update(seed=1),
                lambda m: m.setdefault("x", 1),
                lambda m: m.popitem(),
            ):
                with pytest.raises(TypeError, match="read-only"):
                    change(mapping)
            with pytest.raises(TypeError, match="read-only"):
                mapping |= {"seed": 1}
        assert r.settings == result.settings and r.settings["seed"] == 4
