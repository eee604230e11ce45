"""Epoch and step series: `loop(rid, iterable)` (the probe ABI's `iterate`) times every iteration of an
epoch or step `for` loop; `tick(rid)` and `untick(rid)` those of a `while` loop; `iterate(rid,
iterable)` does the same for the manual API.

An iteration lasts from the start of its `next()` (data wait included) to the start of the next
`next()`, or to the end of the loop (exhaustion, `break`, exception: the iterator is released by the
`for` statement and closes the open iteration then). The wait inside `next()` is the data wait.
The runtime's own work between two iterations (writing the record, an epoch's memory peak) is in
neither.

Past SCALEPROBE_STEP_RECORDS steps of a step loop only some steps are kept, with a `weight`
(`runtime.step_thinning.StepThinning`); the others are measured alike and then dropped.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from itertools import repeat
from threading import get_native_id
from time import perf_counter_ns
from types import WrapperDescriptorType
from typing import Any, Iterable, Iterator

from . import _partial313
from . import recorder as _recorder
from .recorder import _PENDING


class _Series:
    """The bookkeeping of one epoch or step loop. The loop itself iterates
    `map(after, iter(before, _NEVER), iterator)` (`iterator` as_for_sees() it): before() runs at
    the start of every `next()`, then map's C code calls the user's iterator, and after() gets the
    item and hands it on. So no frame of ours is on the stack while the user's iterator runs, and
    an exception it raises (or a StopIteration) reaches the `for` statement with the traceback it
    would have uninstrumented. The bookkeeping keeps no reference to the items."""

    __slots__ = ("_rid", "_kind", "_index", "_t0", "_next0", "_wait", "_spans", "_gpu0", "_rec", "_thinning", "_thin",
                 "_tid", "__weakref__")

    def __init__(self, rid: int, kind: str, rec: "_recorder.Recorder") -> None:
        self._rid = rid
        self._kind = kind
        self._index = 0
        self._t0: int | None = None  # start of the open iteration (None: none is open)
        self._next0 = 0  # start of the next() in progress
        self._wait = 0
        self._spans = getattr(rec, "comm_spans", None)  # runtime.comm.CommSpans
        self._gpu0 = None
        self._rec = rec
        self._thinning = getattr(rec, "thinning", None)  # runtime.step_thinning.StepThinning, or None: no bound
        self._thin: tuple | None = None  # (its counts, this loop's in them) without a schedule
        # the thread that runs the loop, as trace events name it (review 90 F2: `modeler timeline`
        # draws the loops of each thread on a track of their own); taken here, since the last
        # iteration may close in a finalizer on another thread
        self._tid = get_native_id()

    def before(self) -> None:
        t0 = perf_counter_ns()
        if self._t0 is not None:
            self._close(t0)
            # the next iteration (and its data wait) starts after our own bookkeeping: closing an
            # epoch reads and resets the memory peak, and without a flush thread it flushes
            t0 = perf_counter_ns()
        rec = self._rec
        if self._kind == "step" and rec.cfg.schedule is not None:
            # The schedule runs over all steps of the run, not over one epoch's loop.
            rec.set_on(rec.cfg.schedule.probes_on(rec.steps_seen))
        self._next0 = t0

    def after(self, _: None, item: Any) -> Any:
        t0 = self._next0
        self._wait = perf_counter_ns() - t0
        self._t0 = t0
        rec = self._rec
        if self._spans is not None:
            self._spans.begin(id(self), t0)
        gpu = rec.gpu
        self._gpu0 = gpu.start() if gpu is not None else None
        if self._kind == "step" and rec.gpu_rotation is not None:
            rec.gpu_rotation.next_step()
        return item

    def _close(self, t: int) -> None:
        rec = self._rec
        t0, self._t0 = self._t0, None
        comm = self._spans.end(id(self), t) if self._spans is not None else 0
        if rec.finished:
            return
        weight = 1
        if self._kind == "step":
            n = rec.steps_seen
            rec.steps_seen = n + 1
            active = rec.cfg.schedule.is_active(n) if rec.cfg.schedule is not None else None
            thinning = self._thinning
            if thinning is not None:
                # StepThinning.take, its common case inline (a method call and a dict look-up cost
                # more than the rest: ~120 ns a step against ~40)
                cached = self._thin
                if active is None and cached is not None and cached[0] is thinning.counts:
                    st = cached[1]
                else:
                    st = thinning.state(self._rid, active)
                    if active is None:
                        self._thin = (thinning.counts, st)
                c = st[0]
                st[0] = c + 1
                if c >= thinning.bound:
                    weight = thinning.past_bound(st, self._rid, c)
                if not weight:  # thinned out (SCALEPROBE_STEP_RECORDS): not kept
                    self._index += 1
                    gpu = rec.gpu
                    if gpu is not None and self._gpu0 is not None:
                        gpu.release(self._gpu0)  # its start event back to the pool: no end, no read
                    self._gpu0 = None
                    return
        r: dict[str, Any] = {
            "type": self._kind, "region": self._rid, "index": self._index, "start_ns": t0,
            "duration_ns": t - t0, "data_wait_ns": self._wait, "comm_ns": comm,
            "gpu_ns": None, "memory": None, "tid": self._tid,
        }
        if self._kind == "step":
            r["step"] = n
            if active is not None:
                r["active"] = active
        gpu = rec.gpu
        if gpu is not None and self._gpu0 is not None:
            r["gpu_ns"] = _PENDING
            gpu.stop(self._gpu0, r)  # (it sets None when the step cannot be timed)
            if self._kind == "step":
                r["memory"] = gpu.peak_memory(self._gpu0)
        self._gpu0 = None
        self._index += 1
        if self._kind == "epoch":
            r["memory"] = dict(r["memory"] or {}, **_rss_peak())
        if weight == 1:
            rec.series.append(r)
        else:  # a thinned step standing for `weight` steps: written once the next one is taken
            r["weight"] = weight
            thinning.hold(self._rid, active, r, rec.series)
        if self._kind == "epoch":
            rec.request_flush()  # written soon by the flush thread (docs/runtime.md, Recording)

    def __del__(self) -> None:
        # The `for` statement released the iterator (end, break, exception): close the open iteration.
        if self._t0 is not None:
            try:
                self._close(perf_counter_ns())
            except Exception:  # never raise from a finalizer into the user's loop
                pass


_NEVER = object()  # before() returns None, never this: iter(before, _NEVER) never stops


_next, _repeat = next, repeat  # the builtins, whatever the program later rebinds


def as_for_sees(iterator: Iterator[Any]) -> Iterator[Any]:
    """`iterator` as a `for` statement iterates it: only its `__next__` is ever called.

    A `for` statement gets its iterator from iter(iterable) and never calls the iterator's own
    `__iter__`; but whatever we hand on is asked for one (by map() in wrap(), or by the
    instrumented `for x in __sp_iterate__(...)` itself). An iterator whose type's `__iter__` is a
    C slot (generators, C iterators: it returns the iterator, runs no Python code) is handed on as
    it is. One whose `__iter__` is missing (an object with `__next__` only, which `for` accepts;
    review 64, F1) or Python code (a DataLoader's iterator: it could return another object, or do
    something) is handed on as `map(next, repeat(iterator))`: C code that calls `next(iterator)`,
    i.e. its type's `__next__` looked up at each step as the `for` statement does, with no frame
    of ours on the stack while it runs, and whose StopIteration ends the loop. The iterator is
    still released when the loop lets go of what we handed on (map -> repeat -> iterator).
    (`iter(bound __next__, sentinel)` would also do, but it compares every item with the sentinel,
    binds `__next__` once, and cost 37 ns a step against this one's 11 (recording off).)"""
    if type(_partial313.lookup(type(iterator), "__iter__")) is WrapperDescriptorType:
        return iterator
    return map(_next, _repeat(iterator))


def wrap(rid: int, iterator: Iterator[Any], kind: str, rec: "_recorder.Recorder") -> Iterator[Any]:
    """`iterator` with every iteration recorded as an epoch or step of region `rid`."""
    return _through(_Series(rid, kind, rec), iterator)


def _through(s: _Series, iterator: Iterator[Any]) -> Iterator[Any]:
    return map(s.after, iter(s.before, _NEVER), as_for_sees(iterator))


def iterate(rid: int, iterable: Iterable[Any]) -> Iterator[Any]:
    """Like iter(iterable), recording each iteration when recording is on (the manual API)."""
    return _wrap_if_on(rid, iter(iterable))


def loop(rid: int, iterable: Iterable[Any]) -> Any:
    """What an instrumented `for x in __sp_iterate__(rid, iterable):` iterates.

    When iter(iterable) fails, the object returned raises that very exception when the `for`
    statement asks it for its iterator, from C code and with our frame taken off its traceback,
    so that the traceback is the one the uninstrumented loop shows (and the user's `__iter__` has
    run once, as it would have)."""
    try:
        attr = _partial313.lookup(type(iterable), "__iter__") if _partial313.WARNS else None
        if attr is None or not _partial313.is_partial(attr):
            it = iter(iterable)
        else:  # Python 3.13: its FutureWarning names the `for` statement (runtime/_partial313.py)
            try:
                _partial313.warn_explicit(*_partial313.warning(sys._getframe(1)))
                warned = True
            except BaseException:  # noqa: BLE001 - an error filter: the slot's fallback, below
                warned = False
            if warned:
                it = attr()  # what the partial's __get__ returns: itself, called with no argument
                if _partial313.lookup(type(it), "__next__") is _partial313.MISSING:
                    raise TypeError(f"iter() returned non-iterator of type '{type(it).__name__}'")
            else:  # the slot drops the error and tries __getitem__: iter() does all that in C
                it = iter(iterable)  # (and warns again, raising as well if the filter is global)
    except BaseException as exc:  # noqa: BLE001 - handed to the `for` statement unchanged
        return raise_at_statement(exc)
    return _wrap_if_on(rid, it)


def _wrap_if_on(rid: int, it: Iterator[Any]) -> Iterator[Any]:
    s = _series_if_on(rid)
    if s is None:
        return as_for_sees(it)  # (iterated by a `for` statement, which calls its __iter__)
    return _through(s, it)


def _series_if_on(rid: int) -> _Series | None:
    """A new series for loop `rid` when recording is on (None: it is not)."""
    rec = _recorder.get()
    if rec is None or not rec.enabled or rec.finished:
        return None
    kind = rec.regions.get(rid, ("step",))[0]
    if kind not in ("epoch", "step"):
        kind = "step"
    if rec.gpu is None:
        maybe_start_gpu(rec)
    if rec.cfg.comm:
        from . import comm

        comm.patch_if_loaded(rec)
    return _Series(rid, kind, rec)


# The `while` epoch and step loops running now: (region, id of the loop's frame) -> its series, or
# None where recording was off when the loop began. A frame's entry is popped by untick() in the
# loop's `finally:` before the frame can end, so a later frame at the same address finds none.
# Keyed by frame, not thread: the same loop of a function running in two threads (or recursively)
# is two loops. An item is set and popped atomically under the GIL.
_ticking: dict[tuple[int, int], _Series | None] = {}


def tick(rid: int, _frame=sys._getframe, _ticking=_ticking, _none=_NEVER) -> None:
    """An iteration of the `while` epoch or step loop `rid` begins: `__sp_tick__(rid)`, the first
    statement of its body (unguarded: a step schedule switches `__sp_on__` at the steps). The
    iteration before it ends here; the last one ends at `untick`. An iteration therefore runs from
    the start of its body to the start of the next, the loop's test included; its data wait, which
    happens in the body or the test (`x, y = get_batch()`), is not told apart: `data_wait_ns` null."""
    key = (rid, id(_frame(1)))
    s = _ticking.get(key, _none)
    if s is _none:
        s = _ticking[key] = _series_if_on(rid)
    if s is not None:
        s.before()
        s.after(None, None)
        s._wait = None


def untick(rid: int, _frame=sys._getframe, _ticking=_ticking) -> None:
    """The `while` epoch or step loop `rid` has ended (its `finally:`): its open iteration closes."""
    end_one(_ticking.pop((rid, id(_frame(1))), None))


def begin_one(rid: int) -> _Series | None:
    """One epoch or step of `rid` as a block (the manual API's `with epoch():`/`with step():`)
    begins now, when recording is on (else None); `end_one` ends it. Nothing is iterated: its
    `data_wait_ns` is null, as a `while` loop's."""
    s = _series_if_on(rid)
    if s is not None:
        s.before()
        s.after(None, None)
        s._wait = None
    return s


def end_one(s: _Series | None) -> None:
    """The open iteration of `s` (a `while` loop's, or `begin_one`'s) ends now."""
    if s is not None and s._t0 is not None:
        try:
            s._close(perf_counter_ns())
        except Exception:  # it runs in a `finally:` or `__exit__`: never in place of the program's exception
            pass


def _dead_generator() -> Any:
    gen = (x for x in ())
    for _ in gen:
        pass
    return gen


def _raiser(exc: BaseException, *methods: str) -> Any:
    # `for` calls type(obj).__iter__ (`async for` __aiter__, `async with` __aenter__), here a static
    # method: the partial, with no arguments; throw() into a finished generator raises `exc` at
    # once, with its traceback and without a frame of the generator's: only C code runs between
    # the statement and the raise, so the error shows at the statement, as without probes.
    throw = staticmethod(functools.partial(_dead_generator().throw, exc))
    cls = type("iterator_error", (), {"__slots__": (), **{m: throw for m in methods or ("__iter__",)}})
    return cls()


def raise_at_statement(exc: BaseException, *methods: str) -> Any:
    """An object whose `methods` (default `__iter__`) raise `exc`, less the caller's frame in its
    traceback: return it in place of raising, and the `for`/`async for`/`async with` statement that
    asks for one of them raises `exc` itself."""
    if exc.__traceback__ is not None:
        exc.__traceback__ = exc.__traceback__.tb_next  # the caller's frame; deeper frames stay
    return _raiser(exc, *methods)


def maybe_start_gpu(rec: "_recorder.Recorder") -> None:
    """Start GPU timing (rec.gpu) when the program uses CUDA; called by the first step or epoch
    loop and by the first collective of CUDA tensors (runtime.comm). Once: two threads' first
    collectives at the same time made two timers, and the intervals of the one not kept were never
    read, their comm summaries waiting for them to the end (review 97 LOW-5)."""
    with _GPU_START:
        if rec.gpu is None:
            _start_gpu(rec)


_GPU_START = threading.Lock()
if hasattr(os, "register_at_fork"):  # a fork while another thread held it would leave the child's held
    os.register_at_fork(after_in_child=lambda: globals().__setitem__("_GPU_START", threading.Lock()))


def _start_gpu(rec: "_recorder.Recorder") -> None:
    mode = rec.cfg.gpu
    if mode == "0":
        return
    if mode == "fake":
        from .gpu import FakeBackend, GpuTimer

        rec.gpu = GpuTimer(FakeBackend())
        _start_rotation(rec)
        return
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        # is_initialized first: is_available() initialises the driver in a process that has not
        # used CUDA, and a fork then gives children that cannot use it (review 33, M7).
        if not (torch.cuda.is_initialized() and torch.cuda.is_available()):
            return
        from .gpu import CudaBackend, GpuTimer

        timer = GpuTimer(CudaBackend(torch))
    except Exception:
        return
    rec.gpu = timer
    _start_rotation(rec)


def _start_rotation(rec: "_recorder.Recorder") -> None:
    if rec.cfg.gpu_budget <= 0:
        return
    from .gpu import Rotation

    rot = Rotation(rec.gpu, rec, budget=rec.cfg.gpu_budget)
    with rec.lock:
        rec.gpu_rotation = rot
        for g in rec.modules:
            rot.install(g)


def _rss_peak() -> dict[str, int]:
    """The process's peak resident memory so far (VmHWM; ru_maxrss where /proc is not there). Never
    reset: writing /proc/self/clear_refs at every epoch end, for a peak per epoch, also reset the
    peak that the program itself reads (`ru_maxrss`, VmHWM), and that `/usr/bin/time` and the
    accounting of wait4 report: a program that touched 800 MB in epoch 0 read 306 MB after it
    (review 67 F2). An epoch whose value is above the one before reached that new peak."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return {"rss_peak_bytes": int(line.split()[1]) * 1024, "rss_peak_since": "start"}
    except OSError:
        pass
    import resource

    return {"rss_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "rss_peak_since": "start"}
