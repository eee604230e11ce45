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


@pytest.fixture(params=BACKENDS)
def b(request):
    mod = importlib.import_module(request.param)
    mod.reset_after_fork()  # a clean slate: the same reset a forked child gets
    mod.ensure_capacity(64)
    for rid in range(64):
        mod.set_off(rid, False)
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
    assert sq2 == pytest.approx(mn2 * mn2 + mx2 * mx2, rel=1e-9)
    assert rec1 == rec2 == 0


def test_deltas_since_previous_take(b):
    b.enter(3); b.exit(3)
    first = _by_path(b.take_deltas())
    assert first[(3,)][1] == 1
    assert b.take_deltas() == []
    b.enter(3); b.exit(3); b.enter(3); b.exit(3)
    second = _by_path(b.take_deltas())
    assert second[(3,)][1] == 2


def test_direct_recursion_is_folded_not_double_counted(b):
    def rec(n):
        b.enter(4)
        try:
            if n:
                rec(n - 1)
        finally:
            b.exit(4)

    b.enter(1)
    rec(5)
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
    b._local.stack[-1][4] -= 4_000_000_000  # the visit began 4 s ago
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
