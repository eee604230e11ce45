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
