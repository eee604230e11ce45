"""Review 76: the probe backends (runtime/_cprobe.c, runtime/_pyprobe.py) and runtime/_sigwatch.c.

Each test runs on both backends where both have the behaviour; the C one is skipped when the
extension is not built.
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
import time

import pytest

from runtime import _pyprobe

try:
    from runtime import _cprobe
except ImportError:  # not built
    _cprobe = None

BACKENDS = [pytest.param(_pyprobe, id="python")] + (
    [pytest.param(_cprobe, id="c")] if _cprobe is not None else []
)


@pytest.fixture(params=BACKENDS)
def b(request):
    mod = request.param
    mod.reset_after_fork()
    mod.ensure_capacity(16)
    yield mod
    mod.set_gpu_hooks(None, None)
    mod.reset_after_fork()


def tree(mod) -> dict:
    """path -> [visits (recursive ones included), recursive, incl ns]."""
    out: dict = {}
    for path, visits, incl, _excl, _mn, _mx, _sq, rec in mod.take_deltas():
        o = out.setdefault(tuple(path), [0, 0, 0])
        o[0] += visits
        o[1] += rec
        o[2] += incl
    return out


# MED-1 --------------------------------------------------------------------------------------


def test_a_fold_inside_a_visit_begun_before_note_on_leaves_it_dropped(b):
    """The visit of 0/4 began while probes were off (before note_on); a fold of region 0 inside it,
    longer than 4's time before note_on, made the pure backend move its start past note_on and
    count it as a whole visit holding probes-off time (as C: it ends dropped)."""
    b.enter(0)
    b.enter(4)
    time.sleep(0.01)
    b.note_on()
    b.enter(0)  # indirect recursion: a fold frame
    time.sleep(0.03)
    b.exit(0)
    b.exit(4)
    before = b.dropped()
    closed, deltas = b.take_final_deltas()
    got = {tuple(d[0]): (d[1], d[7]) for d in deltas}
    assert (0, 4) not in got, got  # no visit of 0/4: dropped
    assert got == {(0,): (1, 1)}  # the fold is a recursive visit of 0
    assert b.dropped() - before == 1  # 0 itself, left open at the final flush


def test_a_fold_inside_a_visit_begun_before_note_on_is_no_direct_recursion(b):
    """The same visit of 4, entered again after the fold: taken for a stale visit, not for
    recursion (as C: its own start is before note_on)."""
    b.enter(0)
    b.enter(4)
    time.sleep(0.005)
    b.note_on()
    b.enter(0)
    time.sleep(0.02)
    b.exit(0)
    b.enter(4)  # not direct recursion: the stale visit of 4 is dropped and a new one begins
    b.exit(4)
    t = tree(b)
    assert t[(0, 4)][:2] == [1, 0], t


def test_fold_lending_keeps_the_tree_of_times(b):
    """Lent time (a fold's) still leaves every path's inclusive time its exclusive plus its
    children's, with and without a note_on in between."""
    for with_note in (False, True):
        b.reset_after_fork()
        b.ensure_capacity(16)
        b.enter(1)
        b.enter(2)
        if with_note:
            b.note_on()
        b.enter(3)
        b.enter(1)  # fold of 1
        time.sleep(0.002)
        b.enter(3)  # fold of 3 inside the fold of 1
        time.sleep(0.002)
        b.exit(3)
        b.exit(1)
        b.exit(3)
        b.exit(2)
        b.exit(1)
        d = {tuple(x[0]): x for x in b.take_deltas()}
        for path, x in d.items():
            kids = sum(y[2] for p, y in d.items() if len(p) == len(path) + 1 and p[: len(path)] == path)
            assert x[2] == x[3] + kids, (with_note, path, d)


# MED-2 --------------------------------------------------------------------------------------


def _breaker_points(code) -> set[int]:
    """Offsets in `code` where the eval breaker can raise a signal handler's exception: right
    after a CALL (3.11+: checked after every call)."""
    import dis

    ins = list(dis.get_instructions(code))
    return {ins[k + 1].offset for k in range(len(ins) - 1) if ins[k].opname.startswith("CALL")}


def test_an_exception_between_the_steps_of_exit_does_not_corrupt_the_path():
    """A KeyboardInterrupt raised inside _pyprobe.exit where a signal handler's can land (after
    any call it makes, or at the start of a Python function it calls) left its frame off the stack
    and its node open: every later visit of the path was a recursive one with no time. Raised at
    each such point in turn, on the common path and on the rare ones (probes off meanwhile: the
    visit is dropped; a fold; an enclosing region's exit over a visit left open)."""
    p = _pyprobe
    code = p.exit.__code__
    points = _breaker_points(code)

    def run(nth: int, shape: str) -> bool:
        p.reset_after_fork()
        p.ensure_capacity(8)
        state = {"seen": 0, "raised": False}

        def hit():
            state["seen"] += 1
            if state["seen"] == nth:
                state["raised"] = True
                raise KeyboardInterrupt

        def tracer(frame, event, arg):
            if state["raised"]:
                return None
            if event == "call" and frame.f_back is not None and frame.f_back.f_code is code:
                hit()  # at the start of a function exit calls (its RESUME checks the breaker)
            if frame.f_code is code:
                frame.f_trace_opcodes = True
                frame.f_trace_lines = False
                if event == "opcode" and frame.f_lasti in points:
                    hit()
                return tracer
            return None

        p.enter(3)
        if shape == "fold":
            p.enter(4)
            p.enter(3)
            leave = 3
        elif shape == "left open":
            p.enter(4)
            p.enter(5)  # its exit never runs (probes off meanwhile)
            leave = 4
        else:
            p.enter(4)
            leave = 4
        if shape == "note_on":
            p.note_on()
        sys.settrace(tracer)
        try:
            p.exit(leave)
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        if shape == "fold":
            p.exit(4)
        p.exit(3)  # the enclosing region's exit repairs the stack
        p.take_deltas()
        for _ in range(100):
            p.enter(3)
            p.enter(4)
            p.exit(4)
            p.exit(3)
        t = tree(p)
        assert t[(3, 4)][:2] == [100, 0], (shape, nth, t)
        assert t[(3,)][:2] == [100, 0], (shape, nth, t)
        assert p.open_visits() == 0, (shape, nth)
        return state["raised"]

    try:
        for shape in ("plain", "note_on", "fold", "left open"):
            nth = 1
            while run(nth, shape):
                nth += 1
            assert nth > 1, shape  # some point was hit
    finally:
        p.reset_after_fork()


def test_a_visit_lost_from_the_stack_is_closed_at_its_next_enter():
    """A node left open with no frame of it on the stack (a visit lost by an exception in a rare
    path) is closed when its parent enters it again, not taken for indirect recursion."""
    p = _pyprobe
    p.reset_after_fork()
    p.ensure_capacity(8)
    try:
        p.enter(3)
        p.enter(4)
        del p._local.stack[-1]  # lost: off the stack, still open
        before = p.dropped()
        for _ in range(10):
            p.enter(4)
            p.exit(4)
        p.exit(3)
        t = tree(p)
        assert t[(3, 4)][:2] == [10, 0], t
        assert p.dropped() - before == 1
    finally:
        p.reset_after_fork()


# MED-3 --------------------------------------------------------------------------------------


class HookRaises:
    def __init__(self, times: int = 0):
        self.left = times

    def enter(self, rid):
        if self.left > 0:
            self.left -= 1
            raise KeyboardInterrupt

    def exit(self, rid):
        pass


@pytest.mark.parametrize("shape", ["plain", "nested", "direct", "indirect"])
def test_an_enter_hook_that_raises_undoes_the_visit(b, shape):
    """The GPU target's enter hook raising left the visit open on top: every later visit of the
    region was folded into it as recursion. Now the visit is undone before the exception goes on."""
    hooks = HookRaises()
    b.set_gpu_hooks(hooks.enter, hooks.exit)
    b.set_gpu_target(5)
    outer = {"plain": [], "nested": [1], "direct": [5], "indirect": [5, 2]}[shape]
    for rid in outer:
        b.enter(rid)
    hooks.left = 1
    with pytest.raises(KeyboardInterrupt):
        b.enter(5)
    assert b.open_visits() == len(outer)
    for rid in reversed(outer):
        b.exit(rid)
    assert b.open_visits() == 0
    b.take_deltas()
    for _ in range(50):
        b.enter(5)
        b.exit(5)
    t = tree(b)
    assert t[(5,)][:2] == [50, 0], t


def test_an_enter_hook_that_raises_on_a_throttled_target_leaves_the_open_visit(b):
    """Throttled: enter began no visit, so none is undone (the one open is an earlier one's)."""
    hooks = HookRaises(0)
    b.set_gpu_hooks(hooks.enter, hooks.exit)
    b.set_gpu_target(5)
    b.enter(5)
    b.set_off(5, True)
    hooks.left = 1
    with pytest.raises(KeyboardInterrupt):
        b.enter(5)
    assert b.open_visits() == 1
    b.set_off(5, False)
    b.exit(5)
    assert b.open_visits() == 0


def test_an_exit_with_no_enter_on_top_leaves_the_enclosing_visits(b):
    """What the instrumentor's `try: enter(rid) ... finally: exit(rid)` relies on: exit(rid) of a
    visit that was never entered (its enter raised, was undone, or ran while probes were off)
    changes nothing of the visits open around it and returns False."""
    hooks = HookRaises()
    b.set_gpu_hooks(hooks.enter, hooks.exit)
    b.set_gpu_target(5)
    b.enter(1)
    b.enter(2)
    before = b.dropped()
    hooks.left = 1
    with pytest.raises(KeyboardInterrupt):
        b.enter(5)  # undone
    assert b.exit(5) is False  # the program's finally
    assert b.exit(6) is False  # a region entered while probes were off
    assert b.current_path() == (1, 2)
    assert b.open_visits() == 2
    b.exit(2)
    b.exit(1)
    t = tree(b)
    assert t[(1,)][:2] == [1, 0] and t[(1, 2)][:2] == [1, 0], t
    assert (1, 2, 5) not in t
    assert b.dropped() - before == 1  # the undone visit
    # and again inside a fold
    b.enter(1)
    b.enter(2)
    b.enter(1)
    assert b.exit(6) is False
    assert b.current_path() == (1,) and b.open_visits() == 3
    b.exit(1)
    b.exit(2)
    b.exit(1)
    assert b.open_visits() == 0


# LOW-1 --------------------------------------------------------------------------------------


def test_mark_of_a_negative_id_is_dropped(b):
    b.take_iterations()
    before = b.dropped()
    for rid in (-1, -2, -15, -16, -10**6):
        b.mark(rid)
    b.mark(3)
    assert b.take_iterations() == [(3, 1)]
    assert b.dropped() - before == 5
    b.ensure_capacity(5000)  # a growth keeps them dropped
    assert b.dropped() - before == 5
    b.mark(-1)
    b.mark(4999)
    assert b.take_iterations() == [(4999, 1)]
    assert b.dropped() - before == 6


# Informational: exits after the final flush -------------------------------------------------


def test_another_threads_exit_after_the_final_flush_is_the_same_on_both(b):
    """After take_final_deltas the other threads' visits are off their stacks in both backends:
    leaving one counts nothing and returns False."""
    entered, go, out = threading.Event(), threading.Event(), {}

    def work():
        b.enter(7)
        entered.set()
        go.wait(10)
        out["exit"] = b.exit(7)
        out["after"] = b.take_deltas()

    t = threading.Thread(target=work)
    t.start()
    entered.wait(10)
    closed, deltas = b.take_final_deltas()
    assert closed == 1
    go.set()
    t.join(10)
    assert out["exit"] is False
    assert out["after"] == []


# LOW-2 --------------------------------------------------------------------------------------


SIGWATCH_SCRIPT = r"""
import signal
from runtime import _sigwatch

sig = signal.SIGUSR2


class Ours:
    def __call__(self, *a):
        pass


def original(s, h):  # installs nothing, and drops ours (an old handler's __del__ could)
    _sigwatch.disguise(sig, None, None)
    return signal.SIG_DFL


shown = object()
_sigwatch.disguise(sig, Ours(), shown)  # ours: held by _sigwatch only
_sigwatch.keep_counting(original, sig)
_sigwatch.signal(sig, shown)  # ours put back: the call frees it; it was read after (PYTHONMALLOC=debug)
print("ok")
"""


def test_sigwatch_signal_holds_ours_across_the_call(tmp_path):
    """_sigwatch.signal(sig, shown) puts ours back with a call that may drop the last other
    reference to ours; ours was read after it (a use after free: with the debug allocator, a
    crash)."""
    import os
    import subprocess
    from pathlib import Path

    pytest.importorskip("runtime._sigwatch")
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONMALLOC="debug", PYTHONPATH=str(repo))
    r = subprocess.run([sys.executable, "-c", SIGWATCH_SCRIPT], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr[-2000:])
