"""Indirect recursion is folded into the open visit of the recursing region (review 44 F1).

Functions that call each other in a data-dependent order (a recursive-descent parser, an
`ast.NodeVisitor` walk, a tree-shaped model) made a call path of every distinct sequence of calls:
five functions 20 deep gave 849,489 call paths, a 145 MB run file and 1.29 GB of memory. A region
that is open further up the stack now re-enters its open node, as direct recursion does: the tree
holds only call paths without a repeated region, the folded visit's own time is the region's
exclusive time, and inclusive time is never counted twice."""
import itertools
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from test_backend import BACKENDS, _by_path, b, fresh_backend, nest  # noqa: F401 - b: the backends' fixture

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]


def _assert_tree_of_times(deltas):
    """Every call path's inclusive time is its exclusive time plus its children's inclusive times
    (to the ns the pure backend rounds each node to), with none below zero."""
    d = _by_path(deltas)
    for path, visits, incl, excl, mn, mx, sq, rec in deltas:
        assert 0 <= excl <= incl and mn <= mx <= incl, path
        kids = [k for k in d if len(k) == len(path) + 1 and k[:-1] == path]
        assert abs(incl - excl - sum(d[k][2] for k in kids)) <= len(kids) + 1, path


def _simple_paths(k: int) -> int:
    """Call paths of distinct regions out of k, below one root region of its own."""
    return sum(len(list(itertools.permutations(range(k), n))) for n in range(1, k + 1))


def _chain(b, rng, rids, depth, log):
    """One random call chain: each level enters a random region of `rids` until `depth`."""
    rid = rng.choice(rids)
    log.append(rid)
    b.enter(rid)
    try:
        if depth:
            _chain(b, rng, rids, depth - 1, log)
    finally:
        b.exit(rid)


def _random_chains(b, seed=7, chains=300, depth=12):
    rng = random.Random(seed)
    b.enter(0)
    for _ in range(chains):
        _chain(b, rng, [1, 2, 3, 4], depth, [])
    b.exit(0)
    return b.take_deltas()


def test_data_dependent_mutual_recursion_keeps_only_paths_without_a_repeated_region(b):
    deltas = _random_chains(b)
    paths = [d[0] for d in deltas]
    assert all(p[0] == 0 and len(set(p)) == len(p) for p in paths), paths
    # without folding, 300 chains 13 deep over 4 regions make thousands of distinct paths
    assert len(paths) <= 1 + _simple_paths(4)
    d = _by_path(deltas)
    total_calls = 300 * 13
    assert sum(v for p, v, *_ in deltas if p != (0,)) == total_calls  # every call is a visit...
    assert sum(v - rec for p, v, *_, rec in deltas if p != (0,)) < total_calls  # ...many of them folded
    _assert_tree_of_times(deltas)
    # every nanosecond of the run is some call path's own time, exactly once
    own = sum(x[3] for x in deltas)
    assert abs(own - d[(0,)][2]) <= len(deltas)  # the pure backend rounds each node to whole ns


def _on_both_backends(run):
    """run(backend module) on each backend, from a clean slate."""
    if len(BACKENDS) < 2:
        pytest.skip("C backend not built (python setup.py build_ext --inplace)")
    seen = []
    for name in BACKENDS:
        mod = fresh_backend(name)
        try:
            seen.append(run(mod))
        finally:
            mod.reset_after_fork()
    return seen


def test_both_backends_fold_the_same_way():
    seen = _on_both_backends(lambda mod: sorted((d[0], d[1], d[7]) for d in _random_chains(mod, seed=11)))
    assert seen[0] == seen[1]


def test_the_folded_visit_is_the_region_s_own_time_not_its_caller_s(b):
    nap = 0.003
    b.enter(1)        # a
    b.enter(2)        # a -> b
    b.enter(1)        # a -> b -> a: folded into a
    time.sleep(nap)   # a's own time
    b.enter(3)        # recorded as a -> c
    time.sleep(nap)
    assert b.current_path() == (1, 3) and b.open_visits() == 4
    b.exit(3)
    b.enter(2)        # a -> b -> a -> b: folded into a -> b
    time.sleep(nap)   # b's own time
    b.exit(2)
    b.exit(1)
    assert b.current_path() == (1, 2) and b.open_visits() == 2
    b.exit(2)
    b.exit(1)
    d = _by_path(b.take_deltas())
    assert set(d) == {(1,), (1, 2), (1, 3)}
    ns = nap * 1e9
    _, va, incl_a, excl_a, mn_a, mx_a, _, rec_a = d[(1,)]
    _, vb, incl_b, excl_b, mn_b, mx_b, _, rec_b = d[(1, 2)]
    _, vc, incl_c, excl_c, *_ = d[(1, 3)]
    assert (va, rec_a, vb, rec_b, vc) == (2, 1, 2, 1, 1)
    assert mn_a == mx_a == incl_a and mn_b == mx_b == incl_b  # one timed visit each: the outer one
    assert excl_a >= ns and excl_b >= ns and excl_c >= ns
    # the inner a (and the c it called) ran inside b, but count for a: b lent them its time, so b
    # holds its own time only (it has no child), and the run adds up
    assert incl_b == excl_b and incl_a >= excl_a + excl_c + ns
    assert abs(excl_a + excl_b + excl_c - incl_a) <= 3  # each nanosecond counted once
    _assert_tree_of_times(list(d.values()))


def test_direct_recursion_of_a_folded_visit(b):
    b.enter(1); b.enter(2); b.enter(1); b.enter(1); b.enter(3)
    assert b.current_path() == (1, 3) and b.open_visits() == 4  # the direct repeat is no visit of its own
    b.exit(3); b.exit(1); b.exit(1); b.exit(2); b.exit(1)
    d = _by_path(b.take_deltas())
    assert {p: (v, rec) for p, v, *_, rec in d.values()} == {(1,): (3, 2), (1, 2): (1, 0), (1, 3): (1, 0)}
    assert b.current_path() == () and b.open_visits() == 0
    assert b.dropped() == 0


def test_a_frame_left_open_inside_a_folded_visit_is_dropped(b):
    b.enter(1); b.enter(2); b.enter(1); b.enter(3)
    b.exit(1)  # 3 was left open (probes switched off): dropped, the folded visit closes
    assert b.current_path() == (1, 2)
    b.enter(3); b.exit(3)  # a closed and reopened node is no fold
    b.exit(2); b.exit(1)
    d = _by_path(b.take_deltas())
    assert {p: (v, rec) for p, v, *_, rec in d.values()} == {
        (1,): (2, 1), (1, 2): (1, 0), (1, 2, 3): (1, 0)}
    assert b.dropped() == 1
    _assert_tree_of_times(list(d.values()))
    b.enter(1); b.enter(3); b.exit(3); b.exit(1)  # (1, 3) was never closed by its own exit, and is not open
    assert _by_path(b.take_deltas())[(1, 3)][1:2] == (1,)


def test_a_region_throttled_during_its_folded_visit_still_closes_it(b):
    b.enter(1); b.enter(2); b.enter(1)
    b.set_off(1, True)
    b.exit(1)  # the folded visit began timed: it ends
    assert b.current_path() == (1, 2)
    b.exit(2)
    b.exit(1)
    d = _by_path(b.take_deltas())
    assert {p: (v, rec) for p, v, *_, rec in d.values()} == {(1,): (2, 1), (1, 2): (1, 0)}
    assert b.dropped() == 0


def test_open_folded_visits_of_another_thread_count_at_the_final_flush(b):
    inside, release = threading.Event(), threading.Event()

    def work():
        b.enter(1); b.enter(2); b.enter(1); b.enter(3)
        inside.set()
        release.wait(10)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    assert inside.wait(10)
    closed, deltas = b.take_final_deltas()
    release.set()
    t.join(10)
    d = _by_path(deltas)
    assert closed == 4  # the folded visit is one of the open visits
    assert {p: (v, rec) for p, v, *_, rec in d.values()} == {(1,): (2, 1), (1, 2): (1, 0), (1, 3): (1, 0)}
    assert d[(1,)][3] + d[(1, 2)][3] + d[(1, 3)][3] == pytest.approx(d[(1,)][2], abs=3)
    _assert_tree_of_times(deltas)


def test_exit_elsewhere_closes_a_folded_visit(b):
    inside, release = threading.Event(), threading.Event()

    def work():
        b.enter(1); b.enter(2); b.enter(1)
        inside.set()
        release.wait(10)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    assert inside.wait(10)
    try:
        assert b.exit_elsewhere(1)  # the folded visit, innermost there
        assert b.exit_elsewhere(2)
        assert b.exit_elsewhere(1)  # and the outer one
    finally:
        release.set()
        t.join(10)
    d = _by_path(b.take_deltas())
    assert {p: (v, rec) for p, v, *_, rec in d.values()} == {(1,): (2, 1), (1, 2): (1, 0)}
    assert d[(1,)][3] + d[(1, 2)][3] == pytest.approx(d[(1,)][2], abs=2)
    _assert_tree_of_times(list(d.values()))


PROGRAM = '''\
import random

rng = random.Random(3)

def a(n):
    return n and rng.choice(CALLS)(n - 1) + 1

def b(n):
    return n and rng.choice(CALLS)(n - 1) + 2

def c(n):
    return n and rng.choice(CALLS)(n - 1) + 3

def e(n):
    return n and rng.choice(CALLS)(n - 1) + 4

CALLS = [a, b, c, e]

def main():
    print(sum(rng.choice(CALLS)(14) for _ in range(2000)))

main()
'''


@pytest.mark.parametrize("pure", ["0", "1"])
def test_an_instrumented_program_that_recurses_through_four_functions(tmp_path, pure):
    """The review's case, smaller: 2000 chains 15 deep over four functions. Unfolded, that is about
    30,000 call paths; folded, at most the 64 paths of distinct functions below `main`."""
    from runtime.runfile import read_run

    src, out, runs = tmp_path / "src", tmp_path / "out", tmp_path / "runs"
    src.mkdir()
    (src / "main.py").write_text(PROGRAM)
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(runs), SCALEPROBE_PURE=pure)
    subprocess.run([sys.executable, "-m", "instrumentor.cli", "src", "-o", "out", "-q"], cwd=tmp_path, env=env,
                   check=True, timeout=120)
    plain = subprocess.run([sys.executable, "main.py"], cwd=src, env=env, capture_output=True, text=True, timeout=120)
    built = subprocess.run([sys.executable, "main.py"], cwd=out, env=env, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert built.stdout == plain.stdout
    [run_file] = runs.glob("**/*.jsonl")
    run = read_run(run_file)
    paths = list(run.profile)
    assert len(paths) <= 1 + _simple_paths(4), len(paths)  # main, and the folded chains below it
    assert all(len(set(p)) == len(p) for p in paths)
    assert sum(st.recursive for st in run.profile.values()) > 0
    [root] = [p for p in paths if len(p) == 1]
    _assert_tree_of_times([(p, st.visits, st.incl_ns, st.excl_ns, st.min_ns, st.max_ns, st.sumsq_ns, st.recursive)
                           for p, st in run.profile.items()])
    # a throttled region's time stays in its caller's: still every nanosecond is some path's own, once
    assert sum(st.excl_ns for st in run.profile.values()) == pytest.approx(run.profile[root].incl_ns, abs=len(paths))


def test_deep_ping_pong_is_two_call_paths(b):
    nest(b, (1, 2), 599)  # 600 levels, as deep as the tests' recursion limit allows with room to spare
    deltas = b.take_deltas()
    assert {p: (v, rec) for p, v, *_, rec in deltas} == {(1,): (300, 299), (1, 2): (300, 299)}
    _assert_tree_of_times(deltas)


def test_a_folded_visit_left_open_lends_what_its_children_took(b):
    """Review 48 F1: probes switched off inside a folded visit (a schedule, set_enabled) drop it at
    its caller's exit; its closed children are recorded under its node (a -> d), so the regions in
    between (b) leave their time out, or it counted twice: in b and in a -> d."""
    nap = 0.002
    b.enter(1); b.enter(2); b.enter(1)   # a -> b -> a: folded
    b.enter(3); time.sleep(nap); b.exit(3)  # d, recorded as a -> d
    b.enter(4)                           # c: probes go off inside it, its exit never comes
    b.exit(2)                            # b's exit drops c and the folded a
    b.exit(1)
    d = _by_path(b.take_deltas())
    assert {p: (v, rec) for p, v, *_, rec in d.values()} == {(1,): (2, 1), (1, 2): (1, 0), (1, 3): (1, 0)}
    assert b.dropped() == 2
    assert d[(1, 3)][2] >= nap * 1e9
    _assert_tree_of_times(list(d.values()))
    assert abs(sum(x[3] for x in d.values()) - d[(1,)][2]) <= 3


def _random_drops(b, seed=5, rounds=200):
    """Random folds and closed children, left open at random depths and closed by an exit further
    down: the visits above it were left open (probes switched off), so they are dropped."""
    rng = random.Random(seed)
    for _ in range(rounds):
        b.enter(0)
        stack = [0]
        for _ in range(rng.randrange(3, 12)):
            rid = rng.choice([1, 2, 3])
            b.enter(rid)
            stack.append(rid)
            if rng.random() < 0.3:
                b.enter(4); b.exit(4)
        cut = rng.randrange(1, len(stack))
        b.exit(stack[cut])
        for rid in reversed(stack[:cut]):
            b.exit(rid)
    return b.take_deltas()


def test_dropped_folds_nested_in_each_other(b):
    deltas = _random_drops(b)
    assert b.dropped() > 200 and len(deltas) > 20
    # review 48 F1: a dropped visit ends with no own time (its caller has it) and its closed
    # children's time as its path's inclusive time, so the tree stays exact: before, a path that
    # also had whole visits had more in its children than its own inclusive time, and a fold
    # dropped under other dropped visits lent only its own closed children, not theirs
    _assert_tree_of_times(deltas)
    root = _by_path(deltas)[(0,)]
    assert abs(sum(x[3] for x in deltas) - root[2]) <= len(deltas)


def test_both_backends_drop_the_same_way():
    def run(mod):
        deltas = _random_drops(mod, seed=9)
        return sorted((d[0], d[1], d[7], d[3] == 0) for d in deltas), mod.dropped()

    seen = _on_both_backends(run)
    assert seen[0] == seen[1] and seen[0][1] > 200


def test_a_visit_left_open_on_a_path_with_whole_visits_keeps_its_parts_within_it(b):
    """Review 48 F1, without recursion: `train` runs `step` whole once, then probes go off inside
    a second `step` (a schedule, set_enabled). Its closed child's time counted under `step`'s
    children but not in `step`'s inclusive time, so the parts added up to more than the whole
    and the modeler warned that they contradict it."""
    nap = 0.003
    b.enter(1)                                             # train
    b.enter(2); b.enter(3); time.sleep(nap); b.exit(3); b.exit(2)  # step, whole
    b.enter(2); b.enter(3); time.sleep(nap); b.exit(3)     # step: its exit never comes
    b.exit(1)                                              # drops it
    d = _by_path(b.take_deltas())
    assert {p: v for p, v, *_ in d.values()} == {(1,): 1, (1, 2): 1, (1, 2, 3): 2}
    assert b.dropped() == 1
    assert d[(1, 2)][2] >= 2 * nap * 1e9  # the whole visit and the dropped one's closed child
    _assert_tree_of_times(list(d.values()))


def test_a_fold_dropped_under_other_dropped_visits_lends_their_children_too(b):
    """Review 48 F1: a -> e -> d -> a(folded) -> g -> h, with e's exit the first one to come (d, the
    folded a and g were left open). h is recorded as a -> g -> h, under a: e in between leaves it
    out of its inclusive time. The fold lent e only its own closed children, not g's, so h's time
    counted in e and in a -> g -> h."""
    nap = 0.003
    b.enter(1); b.enter(2); b.enter(3); b.enter(1); b.enter(4)
    b.enter(5); time.sleep(nap); b.exit(5)
    b.exit(2)  # drops 4, the folded 1 and 3
    b.exit(1)
    d = _by_path(b.take_deltas())
    assert {p: (v, rec) for p, v, *_, rec in d.values()} == {
        (1,): (2, 1), (1, 2): (1, 0), (1, 4): (0, 0), (1, 4, 5): (1, 0)}
    assert b.dropped() == 3
    assert d[(1, 4, 5)][2] >= nap * 1e9 > d[(1, 2)][2]
    _assert_tree_of_times(list(d.values()))


def test_visits_left_open_at_the_end_of_the_run_keep_the_tree_exact(b):
    """Review 48 F1: visits of this thread still open at the final flush (a schedule switched the
    probes off before they ended) were left out, while what they called was recorded under them:
    the parts added up to more than nothing. They end as dropped visits do."""
    nap = 0.003
    b.enter(1); b.enter(2); b.enter(1)  # a -> b -> a, folded
    b.enter(3); time.sleep(nap); b.exit(3)  # recorded as a -> d
    b.enter(4); b.exit(4)  # a -> e
    closed, deltas = b.take_final_deltas(False)  # a, b and the folded a never end
    d = _by_path(deltas)
    assert closed == 0
    # b took nothing of its own children (the folded a's are a's, lent by b): no record
    assert {p: (v, rec) for p, v, *_, rec in d.values()} == {(1,): (1, 1), (1, 3): (1, 0), (1, 4): (1, 0)}
    assert d[(1,)][2] >= nap * 1e9 and d[(1,)][3] == 0  # what it called; its own time is unknown
    _assert_tree_of_times(deltas)


SCHEDULED = """\
import sys

def work(k):
    s = 0
    for i in range(k):
        s += i * i
    return s

def train_level(level, depth):
    total = 0
    for step in range(3):  # scaleprobe: step
        total += work(2000 * (level + 1))
    if level < depth:
        total += descend(level, depth)
    return total + work(500)

def descend(level, depth):
    return train_level(level + 1, depth) + work(100)

print(train_level(0, int(sys.argv[1])))
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_schedule_over_recursive_training_levels_keeps_the_tree_exact(tmp_path, pure):
    """Review 48's case: a step loop at every level of a recursion, probes switched on and off by
    SCALEPROBE_SCHEDULE at steps of different levels. Visits left open at the switches and at the
    end had their children under them but not their time: the modeler warned that the parts of
    `train_level` contradict it."""
    from runtime.runfile import read_run

    src, out, runs = tmp_path / "src", tmp_path / "out", tmp_path / "runs"
    src.mkdir()
    (src / "main.py").write_text(SCHEDULED)
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(runs), SCALEPROBE_PURE=pure,
               SCALEPROBE_SCHEDULE="wait=2,warmup=1,active=1,repeat=2")
    subprocess.run([sys.executable, "-m", "instrumentor.cli", "src", "-o", "out", "-q"], cwd=tmp_path, env=env,
                   check=True, timeout=120)
    plain = subprocess.run([sys.executable, "main.py", "5"], cwd=src, env=env, capture_output=True, text=True,
                           timeout=120)
    built = subprocess.run([sys.executable, "main.py", "5"], cwd=out, env=env, capture_output=True, text=True,
                           timeout=120)
    assert built.returncode == 0, built.stderr
    assert built.stdout == plain.stdout
    [run_file] = runs.glob("**/*.jsonl")
    run = read_run(run_file)
    assert run.end["dropped"] > 0 and len(run.profile) >= 4
    rows = [(p, st.visits, st.incl_ns, st.excl_ns, st.min_ns, st.max_ns, st.sumsq_ns, st.recursive)
            for p, st in run.profile.items()]
    _assert_tree_of_times(rows)
    roots = [st.incl_ns for p, st in run.profile.items() if len(p) == 1]
    assert sum(st.excl_ns for st in run.profile.values()) == pytest.approx(sum(roots), abs=len(rows))


def test_a_recursive_visit_open_at_a_flush_keeps_the_minimum():
    """Review 48 F4: a flush while only folded visits of a path had ended wrote min_ns 0 (no timed
    visit yet), and the reader took the minimum over records: the path's minimum stayed 0."""
    from runtime.runfile import ProfileStats

    st = ProfileStats()
    st.add(ProfileStats(visits=3, recursive=3, min_ns=0, max_ns=0))  # folded visits only
    st.add(ProfileStats(visits=1, incl_ns=500, excl_ns=500, min_ns=500, max_ns=500, sumsq_ns=250000.0))
    st.add(ProfileStats(visits=2, recursive=2, min_ns=0, max_ns=500))
    assert (st.visits, st.recursive, st.min_ns, st.max_ns) == (6, 5, 500, 500)


def test_the_pure_backend_survives_its_visits_taken_by_the_final_flush():
    """Review 48 F2: the final flush pops the open visits of threads that keep running; a daemon
    thread's exit of a folded visit met a stack without them (IndexError, then its root popped)."""
    from runtime import _pyprobe as p

    p.reset_after_fork()
    p.ensure_capacity(8)
    try:
        p.enter(1); p.enter(2); p.enter(1)
        stack = p._local.stack
        fold = stack[-1]
        root = stack[0]
        del stack[1:]  # what _close_open leaves of a thread's stack
        p._close_top(stack, time.perf_counter())  # the thread's exit, racing it
        assert stack == [root]
        p._lend([root], fold, time.perf_counter())  # a walk over a stack without the fold's node
        assert p.exit(1) is False and stack == [root]

        # The final flush empties the stack where the folded visit's exit can let another thread
        # run: at a call (review 76 MED-2: exit takes a frame off its stack with no call between
        # its look at the top and the removal; the lending after it is a call).
        p.reset_after_fork()
        p.enter(1); p.enter(2); p.enter(1)
        racing = p._local.stack
        root = racing[0]
        lend = p._lend

        def flushed_first(below, *args):
            del racing[1:]
            return lend(below, *args)

        p._lend = flushed_first
        try:
            assert p.exit(1) is None  # no IndexError, and the root stays
        finally:
            p._lend = lend
        assert list(racing) == [root]
    finally:
        p.reset_after_fork()

