"""SCALEPROBE_TRACE=1: keep every region visit as an event (region, start, end, thread) for
`modeler timeline`, besides the profile.

Wraps each instrumented module's `__sp_enter__`/`__sp_exit__` (runs without tracing keep the bare
probes); the manual API (runtime.manual) calls the same wrappers around the backend's probes
(`Tracer.enter`/`Tracer.exit`), so that its regions' visits are kept on the same stacks (review 93
MED-1: they had no events, and a program that used only the manual API had a timeline of steps
only). A manual region left while the probes are off (`impl.drop`) comes off its stack with the
entries above it (`drop`), counted in `unmatched`; one handed over to another thread ends there as
the owner's event (`exit_elsewhere`). Events wait in memory as tuples and are written at flushes,
10000 to a line.

Each thread keeps a stack of its open visits, `(region, start_ns)`; an exit pairs with the entry on
top of it. Entries that give no event keep their place on the stack all the same, so that the exits
around them still pair (review 74 F1: the exit of a throttled region used to pop its callers):
- start -1: a region throttled (no longer timed): no event, nothing counted (the run's `throttled`
  record says so);
- start -2: refused because SCALEPROBE_TRACE_MAX was reached (counted in `dropped` at its exit);
  every visit entered inside it is refused too (-2, or -3 for a throttled one, not counted), so
  the events kept always have the visits around them (review 74 F4). The limit is decided at
  entry, with room kept for the thread's open visits: the events of a flush interval are its first
  visits and the visits open around them (at most SCALEPROBE_TRACE_MAX in one thread; other
  threads' open visits may add their depth).
When the probes are switched on again (a SCALEPROBE_SCHEDULE window, `set_enabled`), every
visit open then was open while they were off: its exit, if it comes, cannot be told from the exit
of a later call made while they were off (review 74 F3), so the stacks are emptied (`note_on`) and
those visits counted in `unmatched`; as the profile drops them. An exit with no entry of its own on
the stack (a visit begun while the probes were off) gives no event and pops nothing.

At the end of the run (`close_at_end`, in the final flush) the visits still open on other threads
(a daemon thread that runs for the whole program), which the profile records as ending then
(`closed_at_end`), get their events, ending then too (review 83 LOW-5: they had none, and a timeline
lacked the daemon thread); with the probes off at the end they end as the profile's dropped ones,
counted in `unmatched`.

Thread names: the Python name of each thread (`threading.Thread.name`), taken once per thread, is
written with the next events record (`threads`).
"""

from __future__ import annotations

import sys
import threading
from time import perf_counter_ns
from typing import Any

CHUNK = 10_000

_THROTTLED, _REFUSED, _THROTTLED_INSIDE_REFUSED = -1, -2, -3


def _thread_name() -> str | None:
    # threading._active: current_thread() would make a _DummyThread, never freed, for a thread
    # that threading did not start (one a C library runs Python in)
    t = getattr(threading, "_active", {}).get(threading.get_ident())
    name = getattr(t, "name", None)
    return name if isinstance(name, str) else None


class Tracer:
    def __init__(self, rec: Any, limit: int) -> None:
        self.rec = rec
        self.limit = limit
        self.events: list[tuple[int, int, int, int]] = []
        self.dropped = 0  # visits not kept for SCALEPROBE_TRACE_MAX
        self.unmatched = 0  # entries seen whose exit could not be paired (probes off meanwhile)
        self.threads: dict[int, str] = {}  # native thread id -> Python thread name
        self._names_due: dict[int, str] = {}  # not written yet
        self._stacks: dict[int, list] = {}  # native thread id -> its stack (note_on, fork, close_at_end)
        self._idents: dict[int, int] = {}  # native thread id -> its thread's ident (close_at_end)
        self._native: dict[int, int] = {}  # thread ident -> the native id of the thread that has it now
        self._tl = threading.local()
        # The manual API's probes (runtime.manual): the backend's, traced as a module's are (review
        # 93 MED-1: the manual API's regions had no events). `exit` returns the backend's result.
        from ._backend import impl

        self.enter, self.exit = self._probes(impl.enter, impl.exit)

    def _new_thread(self) -> list:
        tl = self._tl
        st: list = []
        tid = threading.get_native_id()
        tl.stack, tl.tid = st, tid
        ident = threading.get_ident()
        old = self._native.get(ident)
        if old is not None and old != tid:  # an ended thread whose ident this one got: forget it
            self._stacks.pop(old, None)
            self._idents.pop(old, None)
        self._native[ident] = tid
        self._idents[tid] = ident
        self._stacks[tid] = st
        name = _thread_name()
        if name is not None:
            self.threads[tid] = self._names_due[tid] = name
        return st

    def install(self, g: dict) -> None:
        enter, exit = g.get("__sp_enter__"), g.get("__sp_exit__")
        if enter is None or exit is None or getattr(enter, "__sp_trace__", False):
            return
        trace_enter, trace_exit = self._probes(enter, exit)
        g["__sp_enter__"], g["__sp_exit__"] = trace_enter, trace_exit

    def _probes(self, enter: Any, exit: Any) -> tuple[Any, Any]:
        """`enter`/`exit` (a module's probes; the backend's for the manual API), each visit also
        kept as an event. Closures over locals, not methods: these run at every visit. The exit
        returns what `exit` returned (the manual API tells from False a region not open here)."""
        tl, events, throttled, tracer, new_thread = self._tl, self.events, self.rec.throttled, self, self._new_thread

        def trace_enter(rid: int) -> None:
            enter(rid)
            try:
                st = tl.stack
            except AttributeError:
                st = new_thread()
            if rid in throttled:
                st.append((rid, -3 if st and st[-1][1] <= -2 else -1))
            elif (st and st[-1][1] <= -2) or len(events) + len(st) >= tracer.limit:
                st.append((rid, -2))  # and what it calls: see the module's docstring
            else:
                st.append((rid, perf_counter_ns()))

        def trace_exit(rid: int) -> Any:
            t = perf_counter_ns()
            try:
                return exit(rid)
            finally:  # (also when the GPU target's hook raised: the visit ended all the same)
                try:
                    st = tl.stack
                except AttributeError:
                    st = new_thread()
                if st and st[-1][0] == rid:
                    t0 = st.pop()[1]
                    if t0 >= 0:
                        events.append((rid, t0, t, tl.tid))
                    elif t0 == -2:
                        tracer.dropped += 1
                else:
                    tracer._mismatch(st, rid, t)

        trace_enter.__sp_trace__ = True  # type: ignore[attr-defined]
        from .dynamo import hide

        hide(trace_enter, trace_exit)
        return trace_enter, trace_exit

    def drop(self, rid: int) -> None:
        """The manual API left a visit of `rid` while the probes were off (`impl.drop`): its entry,
        the innermost of `rid` on this thread's stack, and the entries above it (visits left while
        the probes were off), as the profile drops them, come off: no event, counted in
        `unmatched` (a refused one in `dropped`), as `note_on` counts them. With no entry of `rid`
        (a visit begun while the probes were off, or that `note_on` took): nothing."""
        st = getattr(self._tl, "stack", None)
        if not st:
            return
        for i in range(len(st) - 1, -1, -1):
            if st[i][0] == rid:
                break
        else:
            return
        entries = st[i:]
        del st[i:]
        self._discard(entries)

    def exit_elsewhere(self, owner: int, rid: int, t: int) -> None:
        """A manual region's visit that thread `owner` (its ident) entered, and whose innermost open
        region it is there, ended at `t` on this thread (a hand-over: `impl.exit_elsewhere`): its
        event is the owner's, as the profile closes it on the owner's stack."""
        tid = self._native.get(owner)
        st = self._stacks.get(tid) if tid is not None else None
        if not st:
            return
        for i in range(len(st) - 1, -1, -1):
            try:
                entry = st[i]
            except IndexError:  # (the owner goes on meanwhile: it leaves visits of its own)
                continue
            if entry[0] == rid:
                break
        else:
            return
        try:
            if st[i] is entry:
                del st[i]
            else:
                return
        except IndexError:
            return
        t0 = entry[1]
        if t0 >= 0:
            self.events.append((rid, t0, t, tid))
        elif t0 == _REFUSED:
            self.dropped += 1

    def _mismatch(self, st: list, rid: int, t: int) -> None:
        """An exit whose entry is not on top of the thread's stack: pair it with the nearest entry of
        its region below, the entries above that counted as unmatched (their exits were not seen);
        with none, it began while the probes were off: nothing to draw, nothing popped."""
        for i in range(len(st) - 1, -1, -1):
            if st[i][0] == rid:
                break
        else:
            return
        self._discard(st[i + 1:])
        del st[i + 1:]
        t0 = st.pop()[1]
        if t0 >= 0:
            self.events.append((rid, t0, t, self._tl.tid))
        elif t0 == -2:
            self.dropped += 1

    def _discard(self, entries: list) -> None:
        for _rid, t0 in entries:
            if t0 >= 0:
                self.unmatched += 1
            elif t0 == -2:
                self.dropped += 1

    def note_on(self) -> None:
        """The probes are switched on again: the visits open now were open while they were off (see
        the module's docstring)."""
        for st in list(self._stacks.values()):
            entries = st[:]
            del st[: len(entries)]
            self._discard(entries)

    def close_at_end(self, now: int, own: bool, left: bool) -> None:
        """The final flush: the visits still open on the other running threads (with `own`, this
        thread's too) end now, as the profile counts them (`closed_at_end`): each gets its event,
        innermost first (a refused one counts in `dropped`); with `left` (probes off at the end)
        they end as visits left open: no event, counted in `unmatched`. This thread's, without
        `own`, the profile drops: they stay as they are. Each entry is taken off its stack by one
        atomic `list.pop`, so a thread that goes on and leaves one of them later pairs nothing."""
        me = threading.get_native_id()
        alive = set(sys._current_frames())  # the idents of the threads running now
        for tid, st in list(self._stacks.items()):
            if (tid == me and not own) or self._idents.get(tid) not in alive:
                continue  # (a thread that ended: its stack holds what the probes left open)
            while True:
                try:
                    rid, t0 = st.pop()
                except IndexError:
                    break
                if left:
                    self._discard([(rid, t0)])
                elif t0 >= 0:
                    self.events.append((rid, t0, now, tid))
                elif t0 == _REFUSED:
                    self.dropped += 1

    def take(self, flush: int) -> list[dict]:
        ev = self.events[:]  # one C-level copy, then drop exactly what was copied
        del self.events[: len(ev)]
        recs = [{"type": "events", "flush": flush, "events": [list(e) for e in ev[i : i + CHUNK]]}
                for i in range(0, len(ev), CHUNK)]
        if self._names_due:
            names = {str(tid): name for tid, name in list(self._names_due.items())}
            for tid in names:
                self._names_due.pop(int(tid), None)
            if not recs:
                recs.append({"type": "events", "flush": flush, "events": []})
            recs[0]["threads"] = names
        return recs

    def reset_after_fork(self) -> None:
        # The wrappers hold these objects: empty them in place.
        self.events.clear()
        self.dropped = 0
        self.unmatched = 0
        self.threads.clear()
        self._names_due.clear()
        self._stacks.clear()
        self._idents.clear()
        self._native.clear()
        if hasattr(self._tl, "stack"):
            self._tl.stack.clear()
            tid = self._tl.tid = threading.get_native_id()
            self._stacks[tid] = self._tl.stack
            ident = threading.get_ident()
            self._idents[tid], self._native[ident] = ident, tid
            name = _thread_name()
            if name is not None:
                self.threads[tid] = self._names_due[tid] = name
