"""The probe backends' hot path and call-path trees (pure Python, and C when it is built)."""
import importlib
import threading
import time

import pytest

BACKENDS = ["runtime._pyprobe"]
try:
    importlib.import_module("runtime._cprobe")
    BACKENDS.append("runtime._cprobe")
except ImportError:
    pass


def fresh_backend(name: str):
    """The backend module `name` on a clean slate (the same reset a forked child gets), with 64
    region ids, all timed; for fixtures, which reset it again after the test."""
    mod = importlib.import_module(name)
    mod.reset_after_fork()
    mod.ensure_capacity(64)
    for rid in range(64):
        mod.set_off(rid, False)
    return mod


@pytest.fixture(params=BACKENDS)
def b(request):
    mod = fresh_backend(request.param)
    yield mod
    mod.reset_after_fork()


def _by_path(deltas):
    return {d[0]: d for d in deltas}


def test_nested_paths_inclusive_exclusive(b):
    b.enter(1)
    b.enter(2)
    time.sleep(0.002)
    b.exit(2)
    b.enter(2)
    time.sleep(0.001)  # long enough that its square stands far above the rounding tolerance below
    b.exit(2)
    b.exit(1)
    d = _by_path(b.take_deltas())
    assert set(d) == {(1,), (1, 2)}
    _, v1, incl1, excl1, mn1, mx1, sq1, rec1 = d[(1,)]
    _, v2, incl2, excl2, mn2, mx2, sq2, rec2 = d[(1, 2)]
    assert (v1, v2) == (1, 2)
    assert incl2 >= 2_000_000 and incl2 == excl2
    assert incl1 >= incl2 and excl1 == incl1 - incl2
    assert mn2 <= mx2 and mx2 >= 2_000_000 and mn1 == mx1 == incl1
    # min and max are rounded to whole ns while the pure-Python probe squares the float duration:
    # each square may differ by up to about the duration itself (|d^2 - round(d)^2| <= d + 1/4);
    # a relative 1e-9 held only while perf_counter's float still resolved well below 1 ns
    assert mn2 >= 1_000_000
    assert sq2 == pytest.approx(mn2 * mn2 + mx2 * mx2, abs=mn2 + mx2 + 1)
    assert rec1 == rec2 == 0


def test_deltas_since_previous_take(b):
    b.enter(3); b.exit(3)
    first = _by_path(b.take_deltas())
    assert first[(3,)][1] == 1
    assert b.take_deltas() == []
    b.enter(3); b.exit(3); b.enter(3); b.exit(3)
    second = _by_path(b.take_deltas())
    assert second[(3,)][1] == 2


def nest(b, rids, n, depth=0):
    """n + 1 visits, each inside the one before, of `rids` in turn (one region: direct recursion;
    two: ping-pong), entered and left as a recursive function's probes do."""
    rid = rids[depth % len(rids)]
    b.enter(rid)
    try:
        if n:
            nest(b, rids, n - 1, depth + 1)
    finally:
        b.exit(rid)


def test_direct_recursion_is_folded_not_double_counted(b):
    b.enter(1)
    nest(b, (4,), 5)
    b.exit(1)
    d = _by_path(b.take_deltas())
    assert set(d) == {(1,), (1, 4)}
    _, visits, incl, excl, mn, mx, sq, recursive = d[(1, 4)]
    assert visits == 6 and recursive == 5
    assert incl <= d[(1,)][2]
    assert mn == mx == incl  # one timed (outermost) visit


def test_exit_pops_to_the_matching_frame_and_ignores_unknown(b):
    b.enter(1)
    b.enter(2)
    b.enter(3)
    b.exit(9)  # never entered: ignored
    b.exit(2)  # 3 was left open (probes switched off before its exit): dropped
    b.exit(1)
    d = _by_path(b.take_deltas())
    assert (1, 2) in d and (1,) in d
    assert (1, 2, 3) not in d
    assert b.dropped() == 1
    assert b.current_path() == ()


def test_off_region_is_not_timed(b):
    b.set_off(5, True)
    b.enter(1); b.enter(5); b.exit(5); b.exit(1)
    d = _by_path(b.take_deltas())
    assert (1,) in d and (1, 5) not in d


def test_mark_counts_iterations(b):
    for _ in range(7):
        b.mark(6)
    assert dict(b.take_iterations()) == {6: 7}
    assert b.take_iterations() == []


def test_threads_have_their_own_stacks(b):
    seen = []

    def work():
        b.enter(7)
        seen.append(b.current_path())
        b.exit(7)

    b.enter(1)
    t = threading.Thread(target=work)
    t.start(); t.join()
    assert b.current_path() == (1,)
    b.exit(1)
    assert seen == [(7,)]
    d = _by_path(b.take_deltas())
    assert (7,) in d and (1, 7) not in d


def test_ensure_capacity_makes_new_ids_valid(b):
    b.ensure_capacity(5000)
    b.enter(4999); b.exit(4999); b.mark(4999)
    assert (4999,) in _by_path(b.take_deltas())
    assert dict(b.take_iterations()) == {4999: 1}


def test_long_visit_sumsq_fits_the_run_file(tmp_path):
    """Regression: squared ns of a 4 s visit exceed 64 bits; orjson refused the int at exit."""
    from runtime import _pyprobe as b
    from runtime.runfile import RunWriter, read_run

    b.reset_after_fork()
    b.ensure_capacity(8)
    b.enter(2)
    node = b._local.stack[-1]  # the open visit's start and start + child time: float seconds
    node[b._T0] -= 4.0  # the visit began 4 s ago
    node[b._X] -= 4.0
    b.exit(2)
    [(path, visits, incl, excl, mn, mx, sq, rec)] = b.take_deltas()
    assert incl >= 4_000_000_000 and sq >= 1.6e19
    with RunWriter(tmp_path / "r.jsonl") as w:
        w.write_header({})
        w.write_records([{"type": "profile", "path": list(path), "visits": visits, "incl_ns": incl, "excl_ns": excl,
                          "min_ns": mn, "max_ns": mx, "sumsq_ns": sq, "recursive": rec}])
    assert read_run(tmp_path / "r.jsonl").profile[(2,)].sumsq_ns == pytest.approx(sq)
    b.reset_after_fork()


def test_visit_open_when_its_region_is_throttled_still_closes(b):
    """Regression: exit() of a region switched off mid-visit left its frame on the stack, and
    every later region of the caller was recorded under it."""
    b.enter(1)
    b.enter(2)
    b.set_off(2, True)  # throttled while the visit is open
    b.exit(2)
    b.enter(3)
    b.exit(3)
    b.exit(1)
    d = _by_path(b.take_deltas())
    assert (1, 3) in d and (1, 2, 3) not in d
    assert d[(1, 2)][1] == 1
    assert b.dropped() == 0


def test_trees_of_ended_threads_are_freed_after_their_last_deltas(b):
    def work():
        b.enter(8)
        b.exit(8)

    for _ in range(20):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    first = b.take_deltas()
    assert sum(d[1] for d in first if d[0] == (8,)) == 20  # nothing lost when a thread ends
    assert b.take_deltas() == []  # and nothing is left over to report twice
    b.enter(1); b.exit(1)  # the current thread keeps recording
    assert [d[0] for d in b.take_deltas()] == [(1,)]
    # A thread's exit is noticed by a thread-exit hook that may run just after join() returns.
    deadline = time.monotonic() + 5
    while b.threads() > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
        b.take_deltas()
    assert b.threads() == 1


@pytest.mark.skipif("runtime._cprobe" not in BACKENDS, reason="the C backend is not built")
def test_the_c_backend_merges_ended_threads_trees_when_a_thread_starts():
    """Review 54 F3: a program that starts a thread per task kept every ended thread's tree until
    the next flush (600 MB at 8,000 threads a second); the C backend merges them by call path as
    the next thread starts, and their deltas come out once, added up. (The pure-Python backend
    still keeps them until the next flush.)"""
    b = fresh_backend("runtime._cprobe")
    try:
        def work(k):
            b.enter(8)
            b.enter(9 + k % 2)
            b.exit(9 + k % 2)
            b.exit(8)

        b.enter(1)  # this thread, open meanwhile
        for k in range(30):
            t = threading.Thread(target=work, args=(k,))
            t.start()
            t.join()
            time.sleep(0.001)  # the thread-exit hook may run just after join() returns
        assert b.threads() <= 3, b.threads()  # this thread, the merged ones, at most the last one
        b.exit(1)
        got = {}
        for d in b.take_deltas():
            got.setdefault(d[0], []).append(d)
        assert sorted(got) == [(1,), (8,), (8, 9), (8, 10)]
        assert sum(d[1] for d in got[(8,)]) == 30 and len(got[(8,)]) <= 2  # merged: not one per thread
        assert sum(d[1] for d in got[(8, 9)]) == 15 == sum(d[1] for d in got[(8, 10)])
        assert b.take_deltas() == [] and b.dropped() == 0
    finally:
        b.reset_after_fork()


def _scenario(b):
    """Every hot-path case in one sequence: nesting, folded recursion, left-open frames, a region
    throttled mid-visit, untimed regions, indirect recursion, invalid ids. Returns what a
    backend-independent observer can see."""
    seen = []
    b.enter(1)
    b.enter(2); b.enter(2); seen.append(b.current_path()); b.exit(2); b.exit(2)  # folded
    b.enter(3); b.enter(4); b.exit(3)  # 4 left open: dropped
    b.enter(5); b.set_off(5, True); b.exit(5)  # throttled mid-visit: still closes
    b.enter(5); seen.append(b.current_path()); b.exit(5)  # untimed: nothing pushed
    b.set_off(5, False)
    b.enter(6); b.enter(7); b.enter(6); seen.append(b.current_path()); b.exit(6); b.exit(7); b.exit(6)
    b.enter(8); b.enter(8); b.enter(9); b.exit(8); seen.append(b.current_path()); b.exit(8)  # 9 dropped, fold kept
    for bad in (10**9, "x"):  # never defined: ignored and counted, never raised into the program
        b.enter(bad); b.exit(bad); b.mark(bad)
    b.enter(-3); b.exit(-3)
    b.mark(3); b.mark(3)
    b.exit(1)
    seen.append(b.current_path())
    deltas = b.take_deltas()
    for path, visits, incl, excl, mn, mx, sq, rec in deltas:
        assert all(type(v) is int for v in (visits, incl, excl, mn, mx, rec)), path
        assert 0 <= excl <= incl and mn <= mx <= incl and isinstance(sq, float), path
    return {
        "paths": sorted((d[0], d[1], d[7]) for d in deltas),
        "seen": seen,
        "dropped": b.dropped(),
        "iterations": dict(b.take_iterations()),
    }


@pytest.mark.skipif(len(BACKENDS) < 2, reason="C backend not built (python setup.py build_ext --inplace)")
def test_both_backends_see_the_same_profile():
    results = []
    for name in BACKENDS:
        mod = importlib.import_module(name)
        mod.reset_after_fork()
        mod.ensure_capacity(64)
        for rid in range(64):
            mod.set_off(rid, False)
        try:
            results.append(_scenario(mod))
        finally:
            mod.reset_after_fork()
    assert results[0] == results[1]


def test_scenario_profile(b):
    r = _scenario(b)
    paths = {p: (v, rec) for p, v, rec in r["paths"]}
    assert paths == {
        (1,): (1, 0), (1, 2): (2, 1), (1, 3): (1, 0), (1, 5): (1, 0), (1, 6): (2, 1), (1, 6, 7): (1, 0),
        (1, 8): (2, 1),
    }  # 6 -> 7 -> 6 folds into (1, 6): test_indirect_recursion.py
    assert r["seen"] == [(1, 2), (1,), (1, 6), (1, 8), ()]
    assert r["dropped"] == 2 + 6 + 2  # two frames left open, three probes each for two invalid ids, -3 twice
    assert r["iterations"] == {3: 2}


def test_invalid_ids_never_raise(b):
    for bad in (10**9, "x", None, 2.5):
        b.enter(bad)
        b.exit(bad)
        b.mark(bad)
    b.enter(-1)
    b.exit(-1)  # mark(-1) is not checked by the pure backend: negative ids are never emitted
    assert b.current_path() == ()
    assert b.take_deltas() == [] and b.take_iterations() == []
    assert b.dropped() == 14
    with pytest.raises(ValueError, match="negative"):
        b.set_off(-1, True)


def test_sums_of_deltas_are_the_rounded_totals(b):
    """Deltas are taken while a visit is open and across many flushes; their sums must equal
    one take of everything, to the nanosecond (no rounding drift per flush)."""
    total_incl = total_excl = visits = 0
    b.enter(1)
    for _ in range(50):
        b.enter(2); b.enter(3); b.exit(3); b.exit(2)
        for path, v, incl, excl, *_ in b.take_deltas():
            if path == (1, 2):
                visits += v
                total_incl += incl
                total_excl += excl
    b.exit(1)
    last = _by_path(b.take_deltas())
    assert visits == 50 and (1, 2) not in last
    assert total_incl > total_excl > 0
    assert last[(1,)][2] >= total_incl


def test_system_exit_leaving_the_outermost_region_is_seen(b):
    def leave(rid, code):
        b.enter(rid)
        try:
            raise SystemExit(code)
        finally:
            b.exit(rid)

    assert b.exit_seen() is None
    with pytest.raises(SystemExit):
        leave(1, 3)
    assert b.exit_seen() == (3,)
    b.enter(1); b.exit(1)  # the program caught it and went on: no longer how it ends
    assert b.exit_seen() is None
    b.enter(2)
    with pytest.raises(SystemExit):
        leave(1, 4)  # nested: its region is not the outermost
    assert b.exit_seen() is None
    b.exit(2)
    assert b.exit_seen() is None
    b.set_exit_seen("bye")  # what sys.exit notes before raising
    assert b.exit_seen() == ("bye",)
    def work():
        try:
            leave(1, 5)  # would end the thread only
        except SystemExit:
            pass

    t = threading.Thread(target=work)
    t.start(); t.join()
    assert b.exit_seen() == ("bye",)
