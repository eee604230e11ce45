"""Keeps the cyclic garbage collector from running inside scaleprobe's own code (review 55 F1).

A collection runs the finalizers of the cycles it frees (`__del__`, the `finally:` of a suspended
generator, weakref callbacks) on the thread whose allocation started it, in the middle of whatever
that thread was doing. Scaleprobe's flush thread allocates (records, their encoding), and so does
its exit handler while it takes the final snapshot: the program's finalizers ran on the
`scaleprobe-flush` thread (a sqlite3 connection refuses another thread, `threading.local` state is
another, updates race the program's) and inside the snapshot (a path whose inclusive time was below
its children's).

While scaleprobe's code runs (between `pause` and `resume`), the collector is off where the program
has it on: the collection that those allocations would have started happens at the program's next
allocation, on the program's thread, as without scaleprobe. The flush thread runs with it off but
for its waits (`idle`), in which it is on only around the lock's wait (no allocation the collector
counts: a program with `gc.set_threshold(1)` has every finalizer on its own thread, checked on
Python 3.10 to 3.13 by tests/runtime/test_gc_pause.py).

Pauses nest and may overlap between threads (the final flush on the main thread while the flush
thread flushes): the collector is switched back on by the last one out, and only if it was on when
the first one came in.

The program keeps its own view of the switch: `gc.enable`, `gc.disable` and `gc.isenabled` are
replaced (when the runtime is imported) by functions that, while a pause holds the collector, read
and set what the program has asked for, which the last pause out then applies, and otherwise call
`gc`'s own. So `gc.isenabled()` never reads False because of a write in another thread, and a
`gc.disable()` (a training loop that keeps the collector off around its steps) is never undone by
a pause that ends during it. A C extension that calls `PyGC_Disable()` goes past them.

They are C functions (runtime/_gcpause.c) where the extension is built: a signal handler cannot run
inside them, and the GIL makes them atomic. Callers call `pause()` inside their `try:` (a pending
signal is checked for after a call returns), so that a KeyboardInterrupt the program catches never
leaves a pause without its `resume()`.
"""
from __future__ import annotations

import _thread
import gc
import os

_gc_enable, _gc_disable, _gc_isenabled = gc.enable, gc.disable, gc.isenabled  # gc's own


# Without the C extension (runtime/_gcpause.c, which a signal handler cannot interrupt): the same in
# Python, under a lock, re-entrant (a signal handler or a finalizer that runs on the thread holding
# it may pause or call the program's gc.disable()). A KeyboardInterrupt that the program catches can
# still land between two of these steps (review 56 F2): rarely, the collector then stays off, or
# the lock held.
_lock = _thread.RLock()
_depth = [0]
_was_on = [False]  # while a pause holds the collector: whether the program has it on


# No `with` in these: entering a `with` binds `__enter__`/`__exit__`, an allocation the collector
# counts, which could start a collection right here. The count moves first on the way in and last
# on the way out, and resume applies what it read before, so that a pause and resume that a signal
# handler makes between two of their steps leave the switch as they found it.
def _py_pause() -> None:
    _lock.acquire()
    try:
        _depth[0] += 1
        if _depth[0] == 1:
            _was_on[0] = _gc_isenabled()
            _gc_disable()
    finally:
        _lock.release()


def _py_resume() -> None:
    _lock.acquire()
    try:
        if _depth[0] > 0:  # else a pause that a fork ended (_after_fork_in_child)
            on = _was_on[0]
            _depth[0] -= 1
            if _depth[0] == 0 and on:
                _gc_enable()
    finally:
        _lock.release()


def _py_enable() -> None:
    """Enable automatic garbage collection (`gc.enable`, as the program sees it: see the module)."""
    _lock.acquire()
    try:
        if _depth[0]:
            _was_on[0] = True
        else:
            _gc_enable()
    finally:
        _lock.release()


def _py_disable() -> None:
    """Disable automatic garbage collection (`gc.disable`, as the program sees it)."""
    _lock.acquire()
    try:
        if _depth[0]:
            _was_on[0] = False
        else:
            _gc_disable()
    finally:
        _lock.release()


def _py_isenabled() -> bool:
    """Returns true if automatic collection is enabled (`gc.isenabled`, as the program sees it)."""
    _lock.acquire()
    try:
        return _was_on[0] if _depth[0] else _gc_isenabled()
    finally:
        _lock.release()


def _py_after_fork() -> None:
    """A pause held by a thread that the child does not have (the flush thread forked from another
    thread's `os.fork`) ends: the child's collector is as the program had it."""
    global _lock
    _lock = _thread.RLock()
    if _depth[0]:
        _depth[0] = 0
        if _was_on[0]:
            _gc_enable()


try:
    from . import _gcpause as _c
except ImportError:
    _c = None

if _c is not None:
    pause, resume, depth, _after_fork_in_child = _c.pause, _c.resume, _c.depth, _c.after_fork
    enable, disable, isenabled = _c.enable, _c.disable, _c.isenabled
else:
    pause, resume, depth, _after_fork_in_child = _py_pause, _py_resume, lambda: _depth[0], _py_after_fork
    enable, disable, isenabled = _py_enable, _py_disable, _py_isenabled

gc.enable, gc.disable, gc.isenabled = enable, disable, isenabled
os.register_at_fork(after_in_child=_after_fork_in_child)


class Wake:
    """A wake-up call for the flush thread: `set` from any thread, `idle` waits for it (or a
    timeout) and consumes it. A bare lock, held while no call is pending: a threading.Event waits in
    Python code (its Condition) that allocates while the collector is on."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()

    def set(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # already pending
            pass


def idle(wake: Wake, timeout: float) -> None:
    """From paused code: wait for `wake` or `timeout` seconds with the collector as the program has
    it, and pause it again. Nothing but the wait runs between."""
    resume()
    try:
        wake._lock.acquire(True, timeout)
    finally:
        pause()
