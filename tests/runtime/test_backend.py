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
