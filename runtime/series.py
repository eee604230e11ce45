"""Epoch and step series: `iterate(rid, iterable)` times every iteration of an epoch or step loop.

An iteration lasts from the start of its `next()` (data wait included) to the start of the next
`next()`, or to the end of the loop (exhaustion, `break`, exception: the iterator is released by the
`for` statement and closes the open iteration then). The wait inside `next()` is the data wait.
The runtime's own work between two iterations (writing the record, an epoch's memory peak) is in
neither.
"""

from __future__ import annotations

import sys
from time import perf_counter_ns
from typing import Any, Iterable, Iterator

from . import recorder as _recorder
from .recorder import _PENDING


class SeriesIter:
    """Behaves like iter(iterable) and keeps no reference to the items it hands out."""

    __slots__ = ("_it", "_rid", "_kind", "_index", "_t0", "_wait", "_comm0", "_gpu0", "_rec", "__weakref__")

    def __init__(self, rid: int, iterable: Iterable[Any], kind: str, rec: "_recorder.Recorder") -> None:
        self._it = iter(iterable)
        self._rid = rid
        self._kind = kind
        self._index = 0
        self._t0: int | None = None
        self._wait = 0
        self._comm0 = 0
        self._gpu0 = None
        self._rec = rec

    def __iter__(self) -> "SeriesIter":
        return self

    def __next__(self) -> Any:
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
        item = next(self._it)  # StopIteration and errors go to the loop unchanged
        self._wait = perf_counter_ns() - t0
        self._t0 = t0
        self._comm0 = rec.comm_ns[0]
        gpu = rec.gpu
        self._gpu0 = gpu.start() if gpu is not None else None
        if self._kind == "step" and rec.gpu_rotation is not None:
            rec.gpu_rotation.next_step()
        return item

    def _close(self, t: int) -> None:
        rec = self._rec
        t0, self._t0 = self._t0, None
        if rec.finished:
            return
        r: dict[str, Any] = {
            "type": self._kind, "region": self._rid, "index": self._index, "start_ns": t0,
            "duration_ns": t - t0, "data_wait_ns": self._wait, "comm_ns": rec.comm_ns[0] - self._comm0,
            "gpu_ns": None, "memory": None,
        }
        if self._kind == "step":
            r["step"] = rec.steps_seen
            if rec.cfg.schedule is not None:
                r["active"] = rec.cfg.schedule.is_active(rec.steps_seen)
            rec.steps_seen += 1
        gpu = rec.gpu
        if gpu is not None and self._gpu0 is not None:
            r["gpu_ns"] = _PENDING
            gpu.stop(self._gpu0, r)
            if self._kind == "step":
                r["memory"] = gpu.peak_memory()
        self._gpu0 = None
        self._index += 1
        if self._kind == "epoch":
            r["memory"] = dict(r["memory"] or {}, **_rss_peak_and_reset())
        rec.series.append(r)
        if self._kind == "epoch":
            if rec.thread is not None:
                rec.wake.set()  # flush at every epoch end, in the background thread
            else:
                rec.flush()  # SCALEPROBE_FLUSH_INTERVAL=0: no thread, flush here

    def __del__(self) -> None:
        if self._t0 is not None:
            try:
                self._close(perf_counter_ns())
            except Exception:  # never raise from a finalizer into the user's loop
                pass


def iterate(rid: int, iterable: Iterable[Any]) -> Iterator[Any]:
    rec = _recorder.get()
    if rec is None or not rec.enabled or rec.finished:
        return iter(iterable)
    kind = rec.regions.get(rid, ("step",))[0]
    if kind not in ("epoch", "step"):
        kind = "step"
    if rec.gpu is None:
        _maybe_start_gpu(rec)
    if rec.cfg.comm:
        from . import comm

        comm.patch_if_loaded(rec)
    return SeriesIter(rid, iterable, kind, rec)


def _maybe_start_gpu(rec: "_recorder.Recorder") -> None:
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
        ok = torch.cuda.is_available() and torch.cuda.is_initialized()
    except Exception:
        return
    if ok:
        from .gpu import CudaBackend, GpuTimer

        rec.gpu = GpuTimer(CudaBackend(torch))
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


_clear_refs_ok = [True]


def _rss_peak_and_reset() -> dict[str, int]:
    """Peak resident memory since the previous epoch end (Linux resets VmHWM through clear_refs)."""
    peak = None
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    peak = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if peak is None:
        import resource

        return {"rss_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "rss_peak_since": "start"}
    if _clear_refs_ok[0]:
        try:
            with open("/proc/self/clear_refs", "wb") as f:
                f.write(b"5")
        except OSError:
            _clear_refs_ok[0] = False
    return {"rss_peak_bytes": peak, "rss_peak_since": "epoch" if _clear_refs_ok[0] else "start"}
