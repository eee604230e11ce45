"""SCALEPROBE_TRACE=1: keep every region visit as an event (region, start, end, thread) for
`modeler timeline`, besides the profile.

Wraps each instrumented module's `__sp_enter__`/`__sp_exit__` (runs without tracing keep the bare
probes). Events wait in memory as tuples and are written at flushes, 10000 to a line; more than
SCALEPROBE_TRACE_MAX events (default 1000000) between two flushes are dropped and counted.
"""

from __future__ import annotations

import threading
from time import perf_counter_ns
from typing import Any

CHUNK = 10_000


class Tracer:
    def __init__(self, rec: Any, limit: int) -> None:
        self.rec = rec
        self.limit = limit
        self.events: list[tuple[int, int, int, int]] = []
        self.dropped = 0
        self._tl = threading.local()

    def install(self, g: dict) -> None:
        enter, exit = g.get("__sp_enter__"), g.get("__sp_exit__")
        if enter is None or exit is None or getattr(enter, "__sp_trace__", False):
            return
        tl, events, throttled, tracer = self._tl, self.events, self.rec.throttled, self

        def stack() -> list:
            st = getattr(tl, "stack", None)
            if st is None:
                st = tl.stack = []
                tl.tid = threading.get_native_id()
            return st

        def trace_enter(rid: int) -> None:
            enter(rid)
            if rid not in throttled:
                stack().append((rid, perf_counter_ns()))

        def trace_exit(rid: int) -> None:
            t = perf_counter_ns()
            exit(rid)
            st = stack()
            while st:
                r, t0 = st.pop()
                if r == rid:
                    if len(events) < tracer.limit:
                        events.append((rid, t0, t, tl.tid))
                    else:
                        tracer.dropped += 1
                    break

        trace_enter.__sp_trace__ = True  # type: ignore[attr-defined]
        from .dynamo import hide

        hide(trace_enter, trace_exit)
        g["__sp_enter__"], g["__sp_exit__"] = trace_enter, trace_exit

    def take(self, flush: int) -> list[dict]:
        ev = self.events[:]  # one C-level copy, then drop exactly what was copied
        del self.events[: len(ev)]
        return [{"type": "events", "flush": flush, "events": [list(e) for e in ev[i : i + CHUNK]]}
                for i in range(0, len(ev), CHUNK)]

    def reset_after_fork(self) -> None:
        # The wrappers hold these objects: empty them in place.
        self.events.clear()
        self.dropped = 0
        if hasattr(self._tl, "stack"):
            self._tl.stack.clear()
            self._tl.tid = threading.get_native_id()
