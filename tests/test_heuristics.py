"""Unit tests of the free pool and each chooser, and properties of every heuristic solver."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palopt import Instance, Job, Topology, build_cluster
from palopt.cost import assert_feasible, check_feasible
from palopt.errors import InputError
from palopt.instance import penalty_matrix
from palopt.result import Action, PlacementResult
from palopt.solvers import heuristics
from palopt.solvers.base import get_solver, list_solvers
from palopt.solvers.heuristics import (
    VARIANTS,
    RoundContext,
    choose_packed,
    choose_pal,
    choose_pmfirst,
    choose_random,
    pal_walk_ranks,
)
from palopt.solvers.pool import FreePool

HEURISTICS = (
    "pal",
    "pmfirst",
    "packed-sticky",
    "packed-nonsticky",
    "random-sticky",
    "random-nonsticky",
)
STICKY = ("packed-sticky", "random-sticky")
CLASS_SORTED = ("pal", "pmfirst")
CTX = RoundContext(np.random.default_rng(0))


def make(
    slowdown: list[list[float]],
    servers: int,
    per_server: int,
    queue: tuple[Job, ...] = (),
    busy: tuple[int, ...] | list[int] = (),
    penalty: float = 1.7,
) -> Instance:
    topo = build_cluster(1, servers, per_server)
    classes = tuple(f"c{i}" for i in range(len(slowdown)))
    mask = np.zeros(topo.n_gpus, dtype=bool)
    mask[list(busy)] = True
    return Instance(
        topo, classes, np.array(slowdown), penalty_matrix(topo, classes, penalty), queue, mask
    )


def solve(name: str, inst: Instance, seed: int = 0, **config: str) -> PlacementResult:
    result = get_solver(name, **config).solve(inst, seed=seed)
    assert_feasible(inst, result)
    return result


def ids(gpus: np.ndarray | None) -> list[int]:
    """A chooser's GPUs, sorted (it must have found some)."""
    assert gpus is not None
    return sorted(gpus.tolist())


# ---------------------------------------------------------------- FreePool


def assert_in_sync(pool: FreePool) -> None:
    inst = pool.instance
    free = pool.free
    assert not (free & inst.busy).any()
    assert (pool.avail == np.where(free, pool.level, pool.tot.shape[1])).all()
    assert pool.n_free == free.sum()
    assert (
        pool.server_free.tolist()
        == np.bincount(pool.server[free], minlength=pool.n_servers).tolist()
    )
    for c in range(len(inst.classes)):
        levels = len(pool.values[c])
        expect = np.zeros((levels, pool.n_servers), dtype=np.int64)
        np.add.at(expect, (pool.level[c][free], pool.server[free]), 1)
        assert (pool.tot[c, :levels] == expect.sum(axis=1)).all()
        for lvl in range(levels):
            servers, counts = pool.groups[c][lvl]
            has = np.unique(pool.server[pool.level[c] == lvl])
            assert servers.tolist() == has.tolist()
            assert counts.tolist() == expect[lvl, has].tolist()


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_pool_counts_follow_the_mask(data: st.DataObject) -> None:
    servers = data.draw(st.integers(1, 4))
    per = data.draw(st.integers(1, 4))
    n = servers * per
    rows = data.draw(
        st.lists(
            st.lists(st.sampled_from([0.9, 1.0, 1.3, 2.0]), min_size=n, max_size=n),
            min_size=1,
            max_size=3,
        )
    )
    busy = data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n - 1))
    pool = FreePool(make(rows, servers, per, busy=busy))
    assert_in_sync(pool)
    taken: list[np.ndarray] = []
    for _ in range(data.draw(st.integers(1, 8))):
        free = np.flatnonzero(pool.free)
        if taken and (not len(free) or data.draw(st.booleans())):
            pool.release(taken.pop(data.draw(st.integers(0, len(taken) - 1))))
        elif len(free):
            k = data.draw(st.integers(1, len(free)))
            gpus = np.array(data.draw(st.permutations(free.tolist()))[:k])
            pool.take(gpus)
            taken.append(gpus)
        assert_in_sync(pool)


def test_pools_of_one_round_after_another_share_nothing_they_change() -> None:
    # Pools reuse what they derive from the topology and slowdowns: a pool of the next round
    # (replace_queue keeps both) starts from its own busy mask, not from the GPUs the last
    # pool took, and a pool of other slowdowns on the same topology gets its own levels.
    inst = make([[1.0, 2.0, 1.0, 1.0, 2.0, 2.0]], 2, 3, busy=[2])
    first = FreePool(inst)
    first.take(np.array([0, 1, 3]))
    again = FreePool(inst.replace_queue(()))
    assert again.level is first.level  # shared, read-only
    assert not again.level.flags.writeable
    assert again.free.tolist() == [True, True, False, True, True, True]
    assert_in_sync(again)
    other = FreePool(make([[2.0, 1.0, 1.0, 2.0, 2.0, 1.0]], 2, 3, busy=[2]))
    assert other.level.tolist() == [[1, 0, 0, 1, 1, 0]]
    assert FreePool(inst).level.tolist() == [[0, 1, 0, 0, 1, 1]]
    assert_in_sync(other)


def test_pools_of_instances_built_each_round_share_the_layout() -> None:
    # A scheduler builds a new Instance every round (its busy GPUs change), and an Instance
    # copies its slowdowns: equal values on the same topology reuse the layout (it was rebuilt
    # on every call), other values do not; the per-level groups are built only when read.
    rows = [[1.0, 2.0, 1.0, 1.0, 2.0, 2.0]]
    first = make(rows, 2, 3, busy=[2])
    again = Instance(
        first.topology, first.classes, np.array(rows), first.penalty, (), [1, 0, 0, 0, 0, 0]
    )
    assert again.slowdown is not first.slowdown
    pool = FreePool(again)
    assert pool.level is FreePool(first).level
    assert "groups" not in vars(pool)  # not built until read
    assert pool.free.tolist() == [False, True, True, True, True, True]
    assert_in_sync(pool)
    other = Instance(first.topology, first.classes, np.array(rows) * 1.5, first.penalty, ())
    assert FreePool(other).level is not pool.level
    assert FreePool(other).values[0].tolist() == [1.5, 3.0]
    queue = (Job("a", 2, "c0"), Job("b", 1, "c0", current_gpus=(4,)))
    for name in HEURISTICS:  # the same decisions as with the instance whose layout was built
        fresh = Instance(
            first.topology, first.classes, np.array(rows), first.penalty, queue, first.busy.copy()
        )
        assert solve(name, fresh).placements == solve(name, first.replace_queue(queue)).placements


def test_pool_server_gpus_and_levels() -> None:
    pool = FreePool(make([[1.0, 2.0, 1.0, 1.0, 2.0, 2.0]], 2, 3, busy=[2]))
    assert pool.server_gpus(0).tolist() == [0, 1]
    assert pool.server_gpus_at(0, 1, 0).tolist() == [3]
    assert pool.server_gpus_at(0, 1, 1, exact=True).tolist() == [4, 5]
    assert pool.level_for(0, 2) == 0 and pool.level_for(0, 3) == 1
    assert pool.level_for(0, 6) is None


# ---------------------------------------------------------------- choosers


def test_pmfirst_fastest_level_first_then_best_match() -> None:
    # level 0: g0 (s0), g4, g5, g6 (s1); the rest level 1.
    pool = FreePool(make([[1.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 2.0]], 2, 4))
    # |1 - 1| = 0 for s0's single level-0 GPU.
    assert ids(choose_pmfirst(pool, 0, 1, CTX)) == [0]
    # N = 2: s0's group (1) and s1's (3) both score 1, so the artifact splits the job ...
    assert ids(choose_pmfirst(pool, 0, 2, CTX)) == [0, 4]
    # ... the fixed score prefers the group able to hold it.
    fixed = RoundContext(np.random.default_rng(0), fixed=True)
    assert ids(choose_pmfirst(pool, 0, 2, fixed)) == [4, 5]
    # N = 5: all 4 level-0 GPUs, then one from the level-1 group closest to 5 (s0's 3).
    assert ids(choose_pmfirst(pool, 0, 5, CTX)) == [0, 1, 4, 5, 6]
    assert choose_pmfirst(pool, 0, 9, CTX) is None


def test_pal_walk_ranks_ties() -> None:
    values = np.array([1.0, 2.0])
    # costs: within 1.0, 2.0; across (P = 2) 2.0, 4.0: (L1, within) ties (L0, across).
    first_1_0 = pal_walk_ranks(values, np.array([0, 1]), 1.0, 2.0, fixed=False)
    assert first_1_0 == ((0, 2), (1, 3))  # value 1.0 listed first: its across option first
    first_2_0 = pal_walk_ranks(values, np.array([1, 0]), 1.0, 2.0, fixed=False)
    assert first_2_0 == ((0, 1), (2, 3))  # value 2.0 listed first: its within option first
    assert pal_walk_ranks(values, np.array([0, 1]), 1.0, 2.0, fixed=True) == ((0, 1), (2, 3))
    assert pal_walk_ranks(values, np.array([0, 1]), 1.0, None, fixed=False) == ((0, 1), (2, 2))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([0.9, 1.0, 1.05, 1.2, 1.7, 2.0, 3.4]), min_size=1, unique=True),
    st.randoms(use_true_random=False),
    st.sampled_from([1.0, 1.2]),
    st.sampled_from([None, 1.0, 1.7, 2.0]),
    st.booleans(),
)
def test_pal_walk_ranks_sort_the_options_as_described(values, rnd, within, across, fixed):
    # The docstring's walk, literally: every (value x penalty, kind, level) option sorted by
    # cost, then (fixed) kind and level or (artifact) first appearance and kind.
    values = sorted(values)
    first_seen = rnd.sample(range(100), len(values))
    pens = [within] if across is None else [within, across]
    options = [
        (v * pen, kind, lvl) for kind, pen in enumerate(pens) for lvl, v in enumerate(values)
    ]
    if fixed:
        options.sort()
    else:
        options.sort(key=lambda o: (o[0], first_seen[o[2]], o[1]))
    expected = [[len(options)] * len(values) for _ in range(2)]
    for rank, (_, kind, lvl) in enumerate(options):
        expected[kind][lvl] = rank
    got = pal_walk_ranks(np.array(values), np.array(first_seen), within, across, fixed)
    assert got == (tuple(expected[0]), tuple(expected[1]))


def pal_ctx(pool: FreePool, fixed: bool = False) -> RoundContext:
    inst = pool.instance
    walk = tuple(
        pal_walk_ranks(pool.values[c], pool.first_seen[c], 1.0, float(inst.penalty[c, 1]), fixed)
        for c in range(len(inst.classes))
    )
    return RoundContext(np.random.default_rng(0), fixed, walk)


def test_pal_within_server_choice() -> None:
    # s0: levels 1 1 0 1; s1: 0 1 1 1; s2: 1 1 1 1 (values 1.0 / 1.1).
    row = [1.1, 1.1, 1.0, 1.1, 1.0, 1.1, 1.1, 1.1, 1.1, 1.1, 1.1, 1.1]
    pool = FreePool(make([row], 3, 4))
    ctx = pal_ctx(pool)
    # No server has 2 level-0 GPUs; (L1, within) costs 1.1 < 1.7: the first server with the
    # most eligible GPUs (all tie at 4: s0) and its first two GPUs.
    assert ids(choose_pal(pool, 0, 2, ctx)) == [0, 1]
    pool.take(np.array([0, 1, 8]))
    # s0 has 2 eligible, s1 4, s2 3 -> s1.
    assert ids(choose_pal(pool, 0, 3, ctx)) == [4, 5, 6]
    # One GPU: PM-First (the level-0 GPU of a group of exactly one: g2).
    assert ids(choose_pal(pool, 0, 1, ctx)) == [2]
    # More than a server: PM-First over all free GPUs: both level-0 GPUs, then 3 level-1
    # GPUs from the groups closest to 5 (s1's and s2's 3 tie; s1 first).
    assert ids(choose_pal(pool, 0, 5, ctx)) == [2, 4, 5, 6, 7]
    assert choose_pal(pool, 0, 10, ctx) is None


def test_pal_goes_across_when_cheaper() -> None:
    # Level 0 (1.0) on g0 (s0) and g4 (s1); level 1 = 2.0. For 2 GPUs, (L0, across) costs
    # 1.7 < 2.0 = (L1, within).
    row = [1.0, 2.0, 2.0, 2.0, 1.0, 2.0, 2.0, 2.0]
    pool = FreePool(make([row], 2, 4))
    assert ids(choose_pal(pool, 0, 2, pal_ctx(pool))) == [0, 4]


def test_packed_rules() -> None:
    pool = FreePool(make([[1.0] * 12], 3, 4, busy=[0, 1, 4]))  # free: s0 2, s1 3, s2 4
    assert ids(choose_packed(pool, 0, 3, CTX)) == [5, 6, 7]  # exact match
    assert ids(choose_packed(pool, 0, 1, CTX)) == [2]  # tightest with enough: s0
    assert ids(choose_packed(pool, 0, 4, CTX)) == [8, 9, 10, 11]
    # Else the servers with the most free GPUs first (s2, s1, s0), first GPUs of each.
    assert ids(choose_packed(pool, 0, 6, CTX)) == [5, 6, 8, 9, 10, 11]
    assert ids(choose_packed(pool, 0, 8, CTX)) == [2, 5, 6, 7, 8, 9, 10, 11]
    assert choose_packed(pool, 0, 10, CTX) is None


def test_random_draws_free_gpus_by_seed() -> None:
    pool = FreePool(make([[1.0] * 8], 2, 4, busy=[1, 6]))
    draws = [choose_random(pool, 0, 3, RoundContext(np.random.default_rng(7))) for _ in "ab"]
    assert ids(draws[0]) == ids(draws[1])
    assert len(set(ids(draws[0]))) == 3 and not set(ids(draws[0])) & {1, 6}
    assert choose_random(pool, 0, 7, CTX) is None


# ---------------------------------------------------------------- frames and options


def test_sticky_preempts_lowest_ranked_one_at_a_time() -> None:
    queue = (
        Job("top", 2, "c0", current_gpus=(0, 1)),
        Job("w", 3, "c0"),
        Job("r1", 1, "c0", current_gpus=(4,)),
        Job("r2", 1, "c0", current_gpus=(5,)),
        Job("r3", 1, "c0", current_gpus=(6,)),
    )
    result = solve("packed-sticky", make([[1.0] * 8], 2, 4, queue))
    by_id = {p.job_id: p for p in result.placements}
    # 3 GPUs are free (2, 3, 7) and w needs 3: nothing is preempted.
    assert by_id["w"].action == Action.START and {
        p.action for p in result.placements if p.job_id != "w"
    } == {Action.KEEP}
    queue = queue[:1] + (Job("w", 5, "c0"),) + queue[2:]
    result = solve("packed-sticky", make([[1.0] * 8], 2, 4, queue))
    by_id = {p.job_id: p for p in result.placements}
    # 3 free; w (5) preempts r3, then r2: the lowest-ranked first, and no more than needed.
    assert by_id["w"].placed
    assert (by_id["r3"].action, by_id["r2"].action) == (Action.PREEMPT, Action.PREEMPT)
    assert by_id["r3"].reason == "preempted for job 'w'"
    assert (by_id["top"].action, by_id["r1"].action) == (Action.KEEP, Action.KEEP)


def test_sticky_stops_when_preemption_is_not_enough() -> None:
    queue = (
        Job("top", 4, "c0", current_gpus=(0, 1, 2, 3)),
        Job("w", 6, "c0"),
        Job("r", 1, "c0", current_gpus=(4,)),
        Job("x", 1, "c0"),
    )
    result = solve("random-sticky", make([[1.0] * 8], 2, 4, queue))
    by_id = {p.job_id: p for p in result.placements}
    assert not by_id["w"].placed and by_id["top"].action == Action.KEEP
    assert by_id["r"].action == Action.PREEMPT  # the artifact does not restore it
    assert not by_id["x"].placed and str(by_id["x"].reason).startswith("blocked")
    fixed = solve("random-sticky", make([[1.0] * 8], 2, 4, queue), variant="fixed")
    assert [p.action for p in fixed.placements] == [
        Action.KEEP,
        Action.WAIT,
        Action.KEEP,
        Action.WAIT,
    ]


def test_fixed_sticky_undoes_preemptions_that_freed_no_gpu_the_job_took() -> None:
    # w preempts v1 (not enough), then v2, and takes v2's GPUs: v1's GPU 2 was freed for nothing.
    queue = (
        Job("w", 2, "c0"),
        Job("v2", 2, "c0", current_gpus=(0, 1)),
        Job("v1", 1, "c0", current_gpus=(2,)),
    )
    inst = make([[1.0] * 4], 2, 2, queue, busy=[3])
    artifact = solve("packed-sticky", inst)
    assert [p.action for p in artifact.placements] == [Action.START, Action.PREEMPT, Action.PREEMPT]
    fixed = solve("packed-sticky", inst, variant="fixed")
    assert [(p.action, p.gpus) for p in fixed.placements] == [
        (Action.START, (0, 1)),
        (Action.PREEMPT, ()),
        (Action.KEEP, (2,)),
    ]
    check_sticky(inst, fixed, fixed=True)  # v1, ranked below v2, keeps running
    check_sticky(inst, artifact, fixed=False)


def test_sticky_offers_a_preempted_job_again_at_its_position() -> None:
    # w preempts v; the walk then reaches v, a waiting job now, which does not fit in the one
    # GPU left, so the round stops there and x is not placed (as in the artifact).
    queue = (Job("w", 3, "c0"), Job("v", 2, "c0", current_gpus=(0, 1)), Job("x", 1, "c0"))
    result = solve("packed-sticky", make([[1.0] * 4], 1, 4, queue))
    assert [p.placed for p in result.placements] == [True, False, False]
    assert result.placements[1].reason == "preempted for job 'w'"
    assert result.placements[2].reason == "blocked: placement stopped at job 'v' (no backfill)"


def test_variant_option() -> None:
    assert get_solver("pmfirst", variant="fixed").solve(make([[1.0]], 1, 1)).settings == {
        "policy": "pmfirst",
        "sticky": False,
        "class_sort": True,
        "variant": "fixed",
    }
    with pytest.raises(InputError, match="variant"):
        get_solver("pal", variant="newest")
    with pytest.raises(InputError, match="variant"):
        get_solver("packed-nonsticky", variant="fixed")


# ---------------------------------------------------------------- properties


@st.composite
def instances(draw: st.DrawFn) -> Instance:
    racks = draw(st.integers(1, 2))
    servers = draw(st.integers(1, 3))
    per = draw(st.integers(1, 4))
    island = draw(st.sampled_from([None] + [k for k in (2, 4) if per % k == 0]))
    topo = build_cluster(racks, servers, per, nvlink_island=island)
    n = topo.n_gpus
    n_classes = draw(st.integers(1, 3))
    values = st.sampled_from([0.9, 1.0, 1.05, 1.2, 1.7, 2.0])
    slowdown = [draw(st.lists(values, min_size=n, max_size=n)) for _ in range(n_classes)]
    busy = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    if busy.all():
        busy[0] = False
    classes = tuple(f"c{i}" for i in range(n_classes))
    spare = [int(g) for g in draw(st.permutations(np.flatnonzero(~busy).tolist()))]
    queue = []
    for i in range(draw(st.integers(0, 8))):
        k = draw(st.integers(1, min(n, 2 * per + 1)))
        cur: tuple[int, ...] = ()
        if len(spare) >= k and draw(st.booleans()):
            cur, spare = tuple(spare[:k]), spare[k:]
        queue.append(Job(f"j{i}", k, draw(st.sampled_from(classes)), current_gpus=cur))
    penalty = draw(st.sampled_from([1.0, 1.3, 1.7]))
    return Instance(
        topo,
        classes,
        np.array(slowdown),
        penalty_matrix(topo, classes, penalty),
        tuple(queue),
        busy,
    )


SOLVER_CONFIGS: list[tuple[str, dict[str, str]]] = [(name, {}) for name in HEURISTICS] + [
    (name, {"variant": "fixed"}) for name in ("pal", "pmfirst", "packed-sticky")
]


@pytest.mark.parametrize(("name", "config"), SOLVER_CONFIGS)
@settings(max_examples=40, deadline=None)
@given(inst=instances(), seed=st.integers(0, 2**32 - 1))
def test_solver_properties(name: str, config: dict[str, str], inst: Instance, seed: int) -> None:
    result = solve(name, inst, seed, **config)
    again = get_solver(name, **config).solve(inst, seed=seed)
    assert [p.gpus for p in again.placements] == [p.gpus for p in result.placements]
    busy = set(np.flatnonzero(inst.busy).tolist())
    for job, p in zip(inst.queue, result.placements, strict=True):
        assert not busy & set(p.gpus)
        if p.placed and job.is_running:
            same = p.gpus == tuple(sorted(job.current_gpus))
            assert (p.action == Action.KEEP) == same
    if name in STICKY:
        check_sticky(inst, result, fixed=bool(config))
    elif name in CLASS_SORTED:
        check_window(inst, result)
    else:
        placed = [p.placed for p in result.placements]
        assert placed == sorted(placed, reverse=True)  # a prefix of the queue, then a stop


def check_sticky(inst: Instance, result: PlacementResult, fixed: bool) -> None:
    """Running jobs keep their GPUs unless a waiting job ranked above preempted them. In the
    artifact's variant the preempted ones are the lowest-ranked running jobs; in the fixed one
    each gave the job it was preempted for a GPU (preemptions that freed none are undone, so a
    lower-ranked job may keep running)."""
    running = [i for i, j in enumerate(inst.queue) if j.is_running]
    order = [j.id for j in inst.queue]
    preempted = []
    for i in running:
        p = result.placements[i]
        assert p.action in (Action.KEEP, Action.PREEMPT)
        if p.action == Action.PREEMPT:
            preempted.append(i)
            by = order.index(str(p.reason).removeprefix("preempted for job ").strip("'"))
            assert by < i and not inst.queue[by].is_running
            if fixed:
                assert set(result.placements[by].gpus) & set(inst.queue[i].current_gpus)
    if not fixed:
        assert preempted == running[len(running) - len(preempted) :]


def check_window(inst: Instance, result: PlacementResult) -> None:
    """PAL and PM-First place exactly the window (its demands fit, and they never fail while
    enough GPUs are free)."""
    demand = np.cumsum([j.num_gpus for j in inst.queue])
    window = int(np.searchsorted(demand, inst.n_available, side="right"))
    assert [p.placed for p in result.placements] == [i < window for i in range(len(inst.queue))]


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    servers=st.integers(2, 12),
    per=st.sampled_from([2, 4, 8]),
    fixed=st.booleans(),
)
def test_pal_many_levels_path_equals_the_walk(seed, servers, per, fixed):
    """Unbinned profiles (many distinct slowdowns) take an array shortcut through PAL's walk;
    it must choose exactly what the level-by-level walk chooses."""
    rng = np.random.default_rng(seed)
    topo = build_cluster(1, servers, per)
    sd = rng.lognormal(0.0, 0.05, (2, topo.n_gpus))
    queue = tuple(
        Job(f"j{i}", int(rng.choice([1, 2, 2, 3, per])), ("A", "B")[i % 2])
        for i in range(servers * per // 2)
    )
    inst = Instance(
        topo,
        ("A", "B"),
        sd,
        penalty_matrix(topo, ("A", "B"), 1.3),
        queue,
        busy=rng.random(topo.n_gpus) < 0.2,
    )
    solver = get_solver("pal", variant="fixed" if fixed else "artifact")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(heuristics, "_MANY_LEVELS", 0)
        shortcut = solver.solve(inst)
        mp.setattr(heuristics, "_MANY_LEVELS", 10**9)
        walk = solver.solve(inst)
    assert shortcut.assignment() == walk.assignment()
    assert_feasible(inst, shortcut)


@pytest.mark.parametrize("name", [s.name for s in list_solvers()])
@pytest.mark.parametrize(
    "arg, value",
    [("seed", v) for v in (-1, 1.5, True)]
    + [("time_limit", v) for v in (-1, 0, float("nan"), float("inf"), "2", True)]
    + [("instance", v) for v in (None, "instances/longhorn-32gpu.json")],
)
def test_every_solver_rejects_bad_arguments(name: str, arg: str, value: object) -> None:
    topo = build_cluster(1, 1, 4)
    inst = Instance(
        topo, ("A",), np.ones((1, 4)), penalty_matrix(topo, "A", 1.7), (Job("a", 2, "A"),)
    )
    with pytest.raises(InputError, match=f"{arg} = "):
        get_solver(name).solve(**{"instance": inst, arg: value})  # type: ignore[arg-type]


def test_an_unseeded_random_solve_records_the_seed_that_repeats_it() -> None:
    from palopt import solve

    inst = make([[1.0] * 8], 2, 4, queue=(Job("a", 3, "c0"), Job("b", 2, "c0")))
    first = solve(inst, "random-nonsticky")
    seed = first.settings["seed"]  # was None: the placement could not be made again
    assert isinstance(seed, int) and seed >= 0
    again = solve(inst, "random-nonsticky", seed=seed)
    assert again.assignment() == first.assignment()
    assert_feasible(inst, first)


def test_window_counts_available_gpus_not_busy_ones() -> None:
    # 4 GPUs, 2 busy. The window is the prefix whose demands fit the 2 available GPUs (b), so
    # the class sort does not bring a ahead of b; counting all 4 GPUs would have placed a.
    queue = (Job("b", 2, "c1"), Job("a", 2, "c0"))
    for name in CLASS_SORTED:
        result = solve(name, make([[1.0] * 4, [1.0] * 4], 2, 2, queue, busy=[0, 1]))
        assert [p.gpus for p in result.placements] == [(2, 3), ()]
        assert result.placements[1].reason == "needs 2 GPUs, 0 free"


def test_pal_across_or_within_by_penalty() -> None:
    # Level 0 (1.0): g0 (s0), g4, g5 (s1); level 1 (2.0) elsewhere. A 3-GPU job: (L0, across)
    # costs P, (L1, within) 2.0. P = 1.7: PM-First over the three level-0 GPUs; P = 2.5: the
    # first server with the most GPUs of level <= 1 (both have 4: s0), its first three.
    row = [1.0, 2.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0]
    for penalty, expect in ((1.7, (0, 4, 5)), (2.5, (0, 1, 2))):
        result = solve("pal", make([row], 2, 4, (Job("x", 3, "c0"),), penalty=penalty))
        assert result.placements[0].gpus == expect


def test_pal_prices_across_at_the_tier_just_above_a_server() -> None:
    # Catches PAL pricing its across option at the top tier's penalty instead of the tier
    # just above a server. 2 racks x 2 servers x 2 GPUs; each server has one fast (1.0) and one
    # slow (1.5) GPU; penalties: server 1.0, rack 1.2, cluster 2.0. For 2 GPUs, (L0, across)
    # costs 1.0 x 1.2 < 1.5 = (L1, within): PM-First's two fast GPUs (servers 0 and 1, one
    # rack). Priced at the cluster's 2.0, within one server (1.5) would have won.
    topo = build_cluster(2, 2, 2)
    inst = Instance(
        topo,
        ("c0",),
        np.array([[1.0, 1.5] * 4]),
        np.array([[1.0, 1.2, 2.0]]),
        (Job("x", 2, "c0"),),
    )
    assert topo.tiers == ("server", "rack", "cluster")
    result = solve("pal", inst)
    assert result.placements[0].gpus == (0, 2)


def test_fixed_pal_falls_back_to_best_fit_pmfirst() -> None:
    # Catches PAL's fixed variant falling back to the artifact's PM-First score when no
    # within-server option comes before the across one. 3 servers x 4 GPUs, values 1.0 / 1.1 /
    # 3.0 (slow GPUs busy). Free: s0 two of level 0 (g0, g1), s1 two of level 1 (g4, g5), s2
    # one of level 1 (g8). A 3-GPU job: no server has 3 GPUs of level <= 1, and (L2, within)
    # costs 3.0 > 1.1 x 1.7, so PAL takes PM-First over levels <= 1: g0, g1 and one more.
    # The artifact scores |group - 3| (s1: 1, s2: 2) and takes g4; fixed takes the tightest
    # group able to hold the one GPU still needed: s2's g8.
    row = [1.0, 1.0, 3.0, 3.0, 1.1, 1.1, 3.0, 3.0, 1.1, 3.0, 3.0, 3.0]
    busy = [g for g, v in enumerate(row) if v == 3.0]
    inst = make([row], 3, 4, (Job("x", 3, "c0"),), busy=busy)
    assert solve("pal", inst).placements[0].gpus == (0, 1, 4)
    assert solve("pal", inst, variant="fixed").placements[0].gpus == (0, 1, 8)
    pool = FreePool(inst)
    assert ids(choose_pal(pool, 0, 3, pal_ctx(pool, fixed=True))) == [0, 1, 8]
    assert ids(choose_pmfirst(pool, 0, 3, RoundContext(CTX.rng, True))) == [0, 1, 8]


def test_fixed_sticky_still_preempts_the_lowest_ranked_after_undoing() -> None:
    # Catches the fixed sticky frame giving back undone victims their GPUs in the wrong order
    # (highest-ranked last), so that a later job preempts a higher-ranked job first.
    # 3 servers x 3 GPUs; g4, g5, g7, g8 busy. w (3 GPUs) preempts v4 (g6), v3 (g3), then v2
    # and takes v2's server 0: v4 and v3 freed nothing w took and keep running. k (1 GPU)
    # then preempts the lowest-ranked running job, v4, and takes g6; v2 does not fit and
    # would preempt v3 (not enough), which keeps running.
    queue = (
        Job("w", 3, "c0"),
        Job("k", 1, "c0"),
        Job("v2", 3, "c0", current_gpus=(0, 1, 2)),
        Job("v3", 1, "c0", current_gpus=(3,)),
        Job("v4", 1, "c0", current_gpus=(6,)),
    )
    inst = make([[1.0] * 9], 3, 3, queue, busy=[4, 5, 7, 8])
    result = solve("packed-sticky", inst, variant="fixed")
    assert [(p.job_id, p.action, p.gpus) for p in result.placements] == [
        ("w", Action.START, (0, 1, 2)),
        ("k", Action.START, (6,)),
        ("v2", Action.PREEMPT, ()),
        ("v3", Action.KEEP, (3,)),
        ("v4", Action.PREEMPT, ()),
    ]
    assert result.placements[4].reason == "preempted for job 'k'"


def _uneven_cluster(sizes: tuple[int, ...]) -> Topology:
    """One switch over servers of the given sizes (GPUs numbered server by server)."""
    import networkx as nx

    g = nx.Graph()
    g.add_node("cluster", kind="switch", tier="cluster")
    gpu = 0
    for s, size in enumerate(sizes):
        g.add_node(f"server{s}", kind="server")
        g.add_edge(f"server{s}", "cluster", link="network")
        for local in range(size):
            g.add_node(f"gpu{gpu}", kind="gpu", local=local)
            g.add_edge(f"gpu{gpu}", f"server{s}", link="pcie")
            gpu += 1
    return Topology.from_graph(g)


def test_servers_of_different_sizes() -> None:
    # Catches the pool taking the smallest server's size for the largest: Packed then rated a
    # server too small for the job as tightest (3 GPUs asked, 2 given) and PAL sent a job that
    # fits the large server to PM-First. Servers of 2 and 5 GPUs, a 3-GPU job: both take
    # the first three GPUs of the large server.
    topo = _uneven_cluster((2, 5))
    assert topo.server_sizes.tolist() == [2, 5]
    inst = Instance(
        topo, ("c0",), np.ones((1, 7)), penalty_matrix(topo, ("c0",), 1.7), (Job("x", 3, "c0"),)
    )
    assert FreePool(inst).max_server_size == 5
    for name in ("packed-sticky", "packed-nonsticky", "pal"):
        assert solve(name, inst).placements[0].gpus == (2, 3, 4)
    # 6 GPUs: whole servers, the one with the most free GPUs first.
    assert ids(choose_packed(FreePool(inst), 0, 6, CTX)) == [0, 2, 3, 4, 5, 6]


def test_only_random_nonsticky_is_not_repeatable() -> None:
    # Catches the simulator being told a random non-sticky round can be reused: it redraws.
    assert [get_solver(name).repeatable for name in HEURISTICS] == [
        True,
        True,
        True,
        True,
        True,
        False,
    ]


def test_pal_prices_within_a_server_at_the_server_tier_not_an_nvlink_island() -> None:
    """PAL, as in the artifact, prices its within-server option at the server tier's penalty,
    even when the topology has NVLink islands below it: a cheap NVLink penalty must not draw a
    job onto one server whose GPUs it then spans across islands (charged the server tier).

    2 servers x 4 GPUs in islands of 2, slowdowns 1.0 1.3 1.2 1.2 per server; penalties nvlink
    1.0, server 1.5, rack 1.6. A 2-GPU job: (L0, across) costs 1.0 x 1.6 < (L1, within)
    1.2 x 1.5, so PAL takes the two fast GPUs g0 and g4 (cost 1.6). Priced at the NVLink
    penalty, within (1.2) would have won: g0 and g2, charged 1.2 x 1.5 = 1.8."""
    topo = build_cluster(1, 2, 4, nvlink_island=2)
    assert topo.tiers == ("nvlink", "server", "rack", "cluster")
    penalty = penalty_matrix(
        topo, ("c0",), {"nvlink": 1.0, "server": 1.5, "rack": 1.6, "cluster": 1.6}
    )
    inst = Instance(
        topo, ("c0",), np.array([[1.0, 1.3, 1.2, 1.2] * 2]), penalty, (Job("x", 2, "c0"),)
    )
    for variant in VARIANTS:
        result = solve("pal", inst, variant=variant)
        assert check_feasible(inst, result) == []
        placement = result.placements[0]
        assert (placement.gpus, placement.tier, placement.cost) == ((0, 4), "rack", 1.6)


@pytest.mark.parametrize("name", STICKY)
def test_sticky_solvers_record_their_variant(name: str) -> None:
    """A sticky solver's result records the variant it ran (its frame has a fixed variant), so
    a saved result tells how to make it again."""
    inst = make([[1.0] * 4], 1, 4, (Job("a", 2, "c0", current_gpus=(0, 1)), Job("b", 1, "c0")))
    for variant in VARIANTS:
        result = solve(name, inst, variant=variant)
        assert check_feasible(inst, result) == []
        assert result.settings["variant"] == variant
    assert "variant" not in solve("packed-nonsticky", inst).settings


@pytest.mark.parametrize("name", ["random-sticky", "random-nonsticky"])
def test_random_places_a_job_that_needs_every_free_gpu(name: str) -> None:
    """Random places a job asking for exactly the GPUs left free (it needs no spare one).

    4 GPUs, g1 busy: a 3-GPU job gets g0, g2 and g3, whatever the seed."""
    inst = make([[1.0] * 4], 2, 2, (Job("x", 3, "c0"),), busy=[1])
    for seed in range(5):
        result = solve(name, inst, seed=seed)
        assert check_feasible(inst, result) == []
        assert result.placements[0].gpus == (0, 2, 3)
        assert result.n_placed == 1


@pytest.mark.parametrize("many_levels", [0, 10**9])
def test_pal_takes_the_first_gpus_by_index_of_the_first_server_with_the_most(
    many_levels: int,
) -> None:
    """PAL within one server takes the first server with the most GPUs of the chosen level or
    below, and its first GPUs by index, by the level walk and by the array shortcut for
    unbinned profiles alike (the artifact's first minimal combination).

    2 servers x 4 GPUs; server 0 all at 1.0, server 1 at 1.0 1.0 2.0 2.0. A 2-GPU job: level 0
    within; server 0 has the most level-0 GPUs: g0 and g1."""
    inst = make([[1.0] * 4 + [1.0, 1.0, 2.0, 2.0]], 2, 4, (Job("x", 2, "c0"),))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(heuristics, "_MANY_LEVELS", many_levels)
        for variant in VARIANTS:
            result = solve("pal", inst, variant=variant)
            assert check_feasible(inst, result) == []
            assert result.placements[0].gpus == (0, 1)


def test_the_pmfirst_solver_runs_its_fixed_variant() -> None:
    """``get_solver("pmfirst", variant="fixed")`` places with the fixed PM-First score (the
    tightest group able to hold the GPUs still needed), not the artifact's.

    The instance of :func:`test_fixed_pal_falls_back_to_best_fit_pmfirst`: a 3-GPU job takes
    g0, g1 and then g4 (artifact) or g8 (fixed)."""
    row = [1.0, 1.0, 3.0, 3.0, 1.1, 1.1, 3.0, 3.0, 1.1, 3.0, 3.0, 3.0]
    busy = [g for g, v in enumerate(row) if v == 3.0]
    inst = make([row], 3, 4, (Job("x", 3, "c0"),), busy=busy)
    for variant, expect in (("artifact", (0, 1, 4)), ("fixed", (0, 1, 8))):
        result = solve("pmfirst", inst, variant=variant)
        assert check_feasible(inst, result) == []
        assert result.placements[0].gpus == expect


@pytest.mark.parametrize("name", ["pal", "pmfirst", "packed-nonsticky", "random-nonsticky"])
def test_nonsticky_jobs_after_the_stop_are_reported_blocked(name: str) -> None:
    """Non-sticky placement stops at the first job that does not fit (no backfill): the jobs
    after it wait, and their reason names that job, not their own size.

    2 servers x 2 GPUs: a (3 GPUs) is placed, b (2) does not fit, c (1) would but waits."""
    queue = (Job("a", 3, "c0"), Job("b", 2, "c0"), Job("c", 1, "c0"))
    inst = make([[1.0] * 4], 2, 2, queue)
    result = solve(name, inst)
    assert check_feasible(inst, result) == []
    assert [bool(p.gpus) for p in result.placements] == [True, False, False]
    assert result.placements[1].reason == "needs 2 GPUs, 1 free"
    assert result.placements[2].reason == "blocked: placement stopped at job 'b' (no backfill)"
