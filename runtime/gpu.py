"""GPU timing with CUDA events: taken from a pool, recorded on the current stream, resolved lazily.

No synchronization is added per step: a stop event is queued and its elapsed time is read when
`query()` says it has completed (at flushes, and every few starts so the queue stays short). Only
the final flush waits for the events still in flight. Tests use `FakeBackend` on CPU.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol


class Event(Protocol):
    def record(self) -> None: ...
    def query(self) -> bool: ...
    def synchronize(self) -> None: ...
    def elapsed_time(self, end: "Event") -> float: ...  # milliseconds, like torch.cuda.Event


class EventBackend(Protocol):
    name: str

    def new_event(self) -> Event: ...
    def peak_memory(self) -> dict[str, int] | None: ...


class CudaBackend:
    name = "cuda"

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def new_event(self) -> Event:
        return self._torch.cuda.Event(enable_timing=True)

    def peak_memory(self) -> dict[str, int] | None:
        cuda = self._torch.cuda
        peak = int(cuda.max_memory_allocated())
        cuda.reset_peak_memory_stats()
        return {"cuda_peak_bytes": peak}


class FakeEvent:
    def __init__(self, backend: "FakeBackend") -> None:
        self._b = backend
        self.t_ns: int | None = None
        self.seq = 0

    def record(self) -> None:
        b = self._b
        b.clock_ns += b.tick_ns
        b.records += 1
        self.t_ns = b.clock_ns
        self.seq = b.records

    def query(self) -> bool:
        b = self._b
        if b.auto:
            b.completed += 1  # the fake GPU moves on a little whenever someone looks
        return self.seq <= b.completed

    def synchronize(self) -> None:
        self._b.synchronizes += 1
        self._b.completed = max(self._b.completed, self.seq)

    def elapsed_time(self, end: "FakeEvent") -> float:
        assert self.t_ns is not None and end.t_ns is not None
        return (end.t_ns - self.t_ns) / 1e6


class FakeBackend:
    """A deterministic GPU: each record advances the clock by `tick_ns`; events complete in
    record order, when the test calls `advance()` (or, with auto=True, a little at every query).
    Counts what the timer did, so tests can check pooling and laziness."""

    name = "fake"

    def __init__(self, tick_ns: int = 1000, auto: bool = True) -> None:
        self.tick_ns = tick_ns
        self.auto = auto
        self.clock_ns = 0
        self.created = 0
        self.records = 0
        self.completed = 0
        self.synchronizes = 0

    def advance(self, n: int) -> None:
        self.completed += n

    def new_event(self) -> FakeEvent:
        self.created += 1
        return FakeEvent(self)

    def peak_memory(self) -> dict[str, int] | None:
        return {"cuda_peak_bytes": 0}


class GpuTimer:
    RESOLVE_EVERY = 16

    def __init__(self, backend: EventBackend) -> None:
        self.backend = backend
        self.free: list[Event] = []
        self.pending: deque[tuple[Event, Event, dict]] = deque()
        self._starts = 0

    def _take(self) -> Event:
        try:
            return self.free.pop()
        except IndexError:
            return self.backend.new_event()

    def start(self) -> Event:
        self._starts += 1
        if self._starts % self.RESOLVE_EVERY == 0:
            self.resolve()
        ev = self._take()
        ev.record()
        return ev

    def stop(self, start: Event, target: dict) -> None:
        """Record the end event; `target["gpu_ns"]` is set once both events have completed."""
        ev = self._take()
        ev.record()
        self.pending.append((start, ev, target))

    def resolve(self, wait: bool = False) -> int:
        """Read the elapsed time of completed events, in order; returns how many resolved."""
        n = 0
        while self.pending:
            start, end, target = self.pending[0]
            if wait:
                end.synchronize()
            elif not end.query():
                break  # later events on the stream are not done either
            ns = int(round(start.elapsed_time(end) * 1e6))
            target["gpu_ns"] = ns
            summary = target.pop("summary", None)
            if summary is not None:
                summary[3] += ns
                summary[4] += 1
            self.pending.popleft()
            self.free.append(start)
            self.free.append(end)
            n += 1
        return n

    def peak_memory(self) -> dict[str, int] | None:
        try:
            return self.backend.peak_memory()
        except Exception:  # memory statistics are a bonus; never fail a step for them
            return None


class Rotation:
    """GPU time for ordinary regions, one region at a time: during each step only the current
    target region is timed with events, at most `budget` visits, and the target moves on to the
    next visited region at every step boundary. Over a run every hot region gets GPU samples at
    a bounded cost per step (HugeCTR timed one kernel per iteration).

    It works by swapping each instrumented module's `__sp_enter__`/`__sp_exit__` for wrappers,
    so programs without a GPU keep the bare probes.
    """

    SKIP_KINDS = ("epoch", "step", "comm")

    def __init__(self, timer: GpuTimer, rec: Any, budget: int = 4) -> None:
        self.timer = timer
        self.rec = rec
        self.budget = budget
        self.left = [0]
        self.target = [-1]
        self.open: list[Event] = []
        self.samples: dict[int, list[int]] = {}  # rid -> [samples, gpu_ns] since the last flush
        self._order: list[int] = []
        self._pos = 0
        self._pending: list[dict] = []

    def install(self, g: dict) -> None:
        enter, exit = g.get("__sp_enter__"), g.get("__sp_exit__")
        if enter is None or exit is None or getattr(enter, "__sp_gpu__", False):
            return
        target, left, timer, opened, pending = self.target, self.left, self.timer, self.open, self._pending

        def gpu_enter(rid: int) -> None:
            enter(rid)
            if rid == target[0] and left[0] > 0:
                left[0] -= 1
                opened.append(timer.start())

        def gpu_exit(rid: int) -> None:
            if rid == target[0] and opened:
                d = {"gpu_ns": None, "rid": rid}
                timer.stop(opened.pop(), d)
                pending.append(d)
            exit(rid)

        gpu_enter.__sp_gpu__ = True  # type: ignore[attr-defined]
        from .dynamo import hide

        hide(gpu_enter, gpu_exit)
        g["__sp_enter__"], g["__sp_exit__"] = gpu_enter, gpu_exit

    def next_step(self) -> None:
        """Called at every step boundary: pick the next region to time."""
        self.timer.free.extend(self.open)  # a visit still open at a step boundary is no clean sample
        self.open.clear()
        if not self._order or self._pos >= len(self._order):
            regions = self.rec.regions
            # Regions known to be visited (after a flush) first; before that, every defined one.
            known = self.rec.region_totals or regions
            throttled = self.rec.throttled
            self._order = sorted(r for r in known if regions.get(r, ("step",))[0] not in self.SKIP_KINDS and r not in throttled)
            self._pos = 0
        if self._order:
            self.target[0] = self._order[self._pos]
            self._pos += 1
            self.left[0] = self.budget
        else:
            self.target[0] = -1

    def take(self) -> list[dict]:
        """Per-region GPU samples resolved since the previous call, as run-file records."""
        done, waiting = [], []
        for d in self._pending:
            (waiting if d["gpu_ns"] is None else done).append(d)
        self._pending[:] = waiting
        for d in done:
            s = self.samples.setdefault(d["rid"], [0, 0])
            s[0] += 1
            s[1] += d["gpu_ns"]
        out = [{"type": "gpu", "region": rid, "samples": n, "gpu_ns": ns} for rid, (n, ns) in sorted(self.samples.items())]
        # (the recorder adds the flush number)
        self.samples = {}
        return out
