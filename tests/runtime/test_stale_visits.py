"""A background thread's function entered while probes were on that returns while they are off (a
schedule, `set_enabled`) stayed open on the thread's stack (its exit probe costs only the flag
check while off): the thread's later visits of it were counted as recursion inside it or as one
visit spanning the window, and those of other functions as its children (docs/runtime.md measured
a producer's `work()` at about twice its time per visit). Now, when probes come back on, the open
visits of functions that no longer run end (runtime/stale_visits.py), and a visit open across a
window with probes off ends as a dropped one (`note_on`), in both backends."""
from __future__ import annotations

import threading
import time

import pytest

from tests.runtime.test_review52 import _assert_exact, _build_and_run, _named

# The worker returns from phase1 while probes are off, then calls step2 with them on again.
RETURNED = """\
import threading
from runtime.probe import set_enabled

inside, go, left, on_again = (threading.Event() for _ in range(4))


def phase1():
    inside.set()
    go.wait(10)  # the probes go off here


def step2():
    return sum(range(10))


def worker():
    phase1()
    left.set()
    on_again.wait(10)
    for _ in range(5):
        step2()


def main():
    t = threading.Thread(target=worker)
    t.start()
    inside.wait(10)
    set_enabled(False)
    go.set()
    left.wait(10)
    set_enabled(True)
    on_again.set()
    t.join()


main()
"""

# The worker is inside a second call of work (entered while off) when probes come back on.
SAME_NAME = """\
import threading
import time
from runtime.probe import set_enabled

inside1, go1, inside2, go2 = (threading.Event() for _ in range(4))


def work(inside, go):
    inside.set()
    go.wait(10)


def worker():
    work(inside1, go1)  # entered while on, returns while off
    work(inside2, go2)  # entered while off, returns while on
    for _ in range(3):
        work(threading.Event(), threading.Event())  # (go unset: a 0.01 s wait each)


def main():
    t = threading.Thread(target=worker)
    t.start()
    inside1.wait(10)
    set_enabled(False)
    go1.set()
    inside2.wait(10)
    time.sleep(0.3)  # an off window the spanning visit would count
    set_enabled(True)
    go2.set()
    t.join()


main()
""".replace("go.wait(10)", "go.wait(10 if go in (go1, go2) else 0.01)")


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_function_that_returned_while_off_is_no_parent(tmp_path, pure):
    prof = _named(run := _build_and_run(tmp_path, RETURNED, [], SCALEPROBE_PURE=pure))
    # before: ('worker', 'phase1', 'step2'), phase1 open to the end
    assert prof[("worker", "worker:for@20", "step2")].visits == 5
    assert not any("phase1" in p and p[-1] == "step2" for p in prof)
    assert prof.get(("worker", "phase1")) is None or prof[("worker", "phase1")].visits == 0
    assert run.end["dropped"] >= 1
    _assert_exact(run)


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_visit_open_across_a_window_off_is_dropped(tmp_path, pure):
    prof = _named(run := _build_and_run(tmp_path, SAME_NAME, [], SCALEPROBE_PURE=pure))
    assert [p for p in prof if p[-1] == "work"] == [("worker", "worker:for@16", "work")]
    st = prof[("worker", "worker:for@16", "work")]
    # before: a visit from the first call's start to the second's end (0.3 s and more), and the
    # loop's calls inside it
    assert st.visits == 3 and st.recursive == 0
    assert st.max_ns < 0.25e9
    _assert_exact(run)


PRODUCER = """\
import threading
import time


def work():
    time.sleep(0.002)


def producer(stop):
    while not stop.is_set():
        work()
        time.sleep(0.002)  # between calls half of the time


def train_step():
    time.sleep(0.02)


def main():
    stop = threading.Event()
    t = threading.Thread(target=producer, args=(stop,))
    t.start()
    for step in range(40):  # scaleprobe: step
        train_step()
    stop.set()
    t.join()


main()
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_producer_thread_under_a_schedule(tmp_path, pure):
    """The documented case: a producer calling work() for the whole run, a schedule on part of the
    time. Each off window is 3 steps (0.06 s and more): no visit of work may span one."""
    run = _build_and_run(tmp_path, PRODUCER, [], SCALEPROBE_PURE=pure, SCALEPROBE_SCHEDULE="wait=3,warmup=0,active=2")
    prof = _named(run)
    works = {p: st for p, st in prof.items() if p[-1] == "work"}
    assert set(works) == {("producer", "producer:while@10", "work")}, works  # no work inside work
    [st] = works.values()
    assert st.visits > 0 and st.recursive == 0
    assert st.max_ns < 0.05e9  # before: visits from one window into the next
    _assert_exact(run)


# ----- the backends' side, in process ---------------------------------------------------------------

from tests.runtime.test_backend import b  # noqa: E402,F401 - the fixture: each backend, reset


def _on_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_open_stacks_and_drop_stale(b):  # noqa: F811
    ident = threading.get_ident()
    b.enter(1)
    b.enter(2)
    b.enter(3)
    [(who, visits)] = [s for s in b.open_stacks() if s[0] == ident]
    assert [rid for rid, _ in visits] == [1, 2, 3]
    t0_2 = visits[1][1]
    assert b.drop_stale(ident, 2, t0_2 + 1) == 0  # not the visit it saw: nothing ends
    assert b.drop_stale(ident + 1, 2, t0_2) == 0  # no such thread
    before = b.dropped()
    assert b.drop_stale(ident, 2, t0_2) == 2  # 2 and 3 end as left open
    assert b.dropped() == before + 2
    [(_, visits)] = [s for s in b.open_stacks() if s[0] == ident]
    assert [rid for rid, _ in visits] == [1]
    b.exit(1)
    d = {p: v for p, v, *_ in b.take_deltas()}
    assert d[(1,)] == 1 and d.get((1, 2), 0) == 0 and d.get((1, 2, 3), 0) == 0
    assert _on_thread(lambda: [s for s in b.open_stacks() if s[0] == threading.get_ident()]) == []


def test_a_visit_open_when_probes_come_on_ends_dropped(b):  # noqa: F811
    b.enter(1)
    b.enter(2)
    time.sleep(0.001)
    b.exit(2)  # a closed child: its time stays 1's inclusive time
    b.note_on()
    before = b.dropped()
    b.enter(3)  # begun after: measured
    b.exit(3)
    b.exit(1)
    assert b.dropped() == before + 1
    d = {p: (v, incl, excl) for p, v, incl, excl, *_ in b.take_deltas()}
    assert d[(1, 3)][0] == 1 and d[(1, 2)][0] == 1
    v1, incl1, excl1 = d[(1,)]
    assert v1 == 0 and excl1 == 0 and incl1 == d[(1, 2)][1] + d[(1, 3)][1]


# A method (region kind `method`) that returned while probes were off.
METHOD = RETURNED.replace("def phase1():", "class Phase:\n    def one(self):").replace(
    "    inside.set()\n    go.wait(10)", "        inside.set()\n        go.wait(10)").replace(
    "    phase1()", "    Phase().one()")

# An inner loop entered while on that ends while off, in a function that still runs: when probes
# come back on, its frame is before the loop (the next round of the outer loop).
LOOP = """\
import threading
from runtime.probe import set_enabled

inside, go, left, on_again = (threading.Event() for _ in range(4))


def step(x):
    return x + 1


def worker():
    for round in range(3):
        batch = [1, 2]
        if round == 1:
            left.set()
            on_again.wait(10)  # the probes come back on here
        for x in batch:
            step(x)
            if round == 0 and x == 1:
                inside.set()
                go.wait(10)  # the probes go off here


def main():
    t = threading.Thread(target=worker)
    t.start()
    inside.wait(10)
    set_enabled(False)
    go.set()
    left.wait(10)
    set_enabled(True)
    on_again.set()
    t.join()


main()
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_method_that_returned_while_off_is_no_parent(tmp_path, pure):
    prof = _named(run := _build_and_run(tmp_path, METHOD, [], SCALEPROBE_PURE=pure))
    assert prof[("worker", "worker:for@21", "step2")].visits == 5  # before: under Phase.one
    assert not any("Phase.one" in p and p[-1] == "step2" for p in prof)
    _assert_exact(run)


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_loop_that_ended_while_off(tmp_path, pure):
    prof = _named(run := _build_and_run(tmp_path, LOOP, [], SCALEPROBE_PURE=pure))
    outer, inner = "worker:for@12", "worker:for@17"
    # before: rounds 1 and 2 re-entered round 0's visit of the inner loop, left open: recursion
    # inside it (no visits of their own)
    assert prof[("worker", outer, inner)].visits == 2 and prof[("worker", outer, inner)].recursive == 0
    assert prof[("worker", outer, inner, "step")].visits == 5  # round 0's first, rounds 1 and 2
    assert run.end["dropped"] >= 1
    _assert_exact(run)


def test_entering_a_visit_open_across_a_window_again_is_no_recursion(b):  # noqa: F811
    """The stale check keeps a visit whose function runs again under the same name; a call that
    returns between the check and the switch leaves it open, and the next call was folded into it
    as recursion (with every later one: a producer's work() recursive 10 times in a window). A
    visit open across a window that is entered again ends as dropped, and the new one counts."""
    b.enter(1)
    b.enter(2)
    b.note_on()
    before = b.dropped()
    b.enter(2)  # before: folded into the open visit (recursive)
    b.exit(2)
    b.enter(2)  # a visit begun after the switch folds as recursion, as always
    b.enter(2)
    b.exit(2)
    b.exit(2)
    b.exit(1)
    assert b.dropped() == before + 2  # the old visit of 2, and 1 (open across the window)
    d = {p: (v, rec) for p, v, incl, excl, mn, mx, sq, rec in b.take_deltas()}
    assert d[(1, 2)] == (3, 1)  # three visits, one of them recursive


# A function entered while probes are off, running when they come back on (review 56 F7).
ENTERED_OFF = """\
from runtime.probe import set_enabled


def inner():
    return sum(range(10))


def outer():
    set_enabled(True)
    inner()


def main():
    set_enabled(False)
    outer()
    inner()


main()
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_callees_of_a_function_entered_while_off_are_its_children(tmp_path, pure):
    prof = _named(run := _build_and_run(tmp_path, ENTERED_OFF, [], SCALEPROBE_PURE=pure))
    # before: ('main', 'inner') with 2 visits, a path that the first never ran on
    assert prof[("main", "outer", "inner")].visits == 1
    assert prof[("main", "inner")].visits == 1
    assert prof[("main", "outer")].visits == 0  # entered while off: its time is not all known
    _assert_exact(run)
