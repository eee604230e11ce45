"""What the gpu_check programs use but must not measure (this module is not instrumented): the
device, a GPU sleep of known length, CUDA event pairs, a count of host synchronisations, results.

With GPU_CHECK_FAKE=1 everything runs on CPU: the sleep waits on the CPU clock, an event pair
reads the CPU clock, and the counted synchronisation is the runtime's fake event's.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

FAKE = os.environ.get("GPU_CHECK_FAKE") == "1"
DEVICE = "cpu" if FAKE else "cuda"
RUNTIME_DIR = str(Path(__file__).resolve().parents[2] / "runtime") + os.sep


def device(index: int | None = None) -> torch.device:
    if FAKE:
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device() if index is None else index)


def init_cuda() -> None:
    """Initialise CUDA before the loops start, as any GPU program has (the runtime times on the GPU
    only once CUDA is initialised)."""
    if not FAKE:
        torch.zeros(1, device=device())
        torch.cuda.synchronize()


def synchronize() -> None:
    if not FAKE:
        torch.cuda.synchronize()


def gpu_sleep(cycles: int) -> None:
    """A kernel that spins `cycles` GPU clock cycles (fake: `cycles` ns of CPU busy wait)."""
    if FAKE:
        end = time.perf_counter_ns() + cycles
        while time.perf_counter_ns() < end:
            pass
    else:
        torch.cuda._sleep(int(cycles))


class Span:
    """A bare CUDA event pair on the current stream (fake: the CPU clock), independent of the runtime."""

    def __init__(self) -> None:
        if FAKE:
            self.t = [0, 0]
        else:
            self.e = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))

    def start(self) -> None:
        if FAKE:
            self.t[0] = time.perf_counter_ns()
        else:
            self.e[0].record()

    def stop(self) -> None:
        if FAKE:
            self.t[1] = time.perf_counter_ns()
        else:
            self.e[1].record()

    def ms(self) -> float:
        """Elapsed milliseconds; call after a synchronize (or it waits for the end event)."""
        if FAKE:
            return (self.t[1] - self.t[0]) / 1e6
        self.e[1].synchronize()
        return self.e[0].elapsed_time(self.e[1])


def calibrate(cycles: int, reps: int = 7) -> float:
    """Median milliseconds of one `gpu_sleep(cycles)` between a bare event pair, on an idle stream."""
    vals = []
    for _ in range(reps):
        synchronize()
        sp = Span()
        sp.start()
        gpu_sleep(cycles)
        sp.stop()
        vals.append(sp.ms())
    return statistics.median(vals)


def cycles_for(ms: float) -> int:
    """The cycles for a sleep of about `ms` milliseconds at the clock the GPU runs at now."""
    if FAKE:
        return int(ms * 1e6)
    gpu_sleep(200_000_000)  # ~0.1 s of spinning so that the clocks are up before we measure
    probe = 20_000_000
    return max(1, int(probe * ms / calibrate(probe, 3)))


class SyncCounter:
    """Counts host synchronisations (torch.cuda.synchronize, Event.synchronize, Stream.synchronize;
    fake: the runtime's FakeEvent.synchronize) while on, and those made from the runtime's code."""

    def __init__(self) -> None:
        self.on = False
        self.total = 0
        self.runtime = 0
        self.where: list[str] = []
        if FAKE:
            from runtime.gpu import FakeEvent

            self._wrap(FakeEvent, "synchronize", "FakeEvent.synchronize")
        else:
            self._wrap(torch.cuda, "synchronize", "torch.cuda.synchronize")
            self._wrap(torch.cuda.Event, "synchronize", "torch.cuda.Event.synchronize")
            self._wrap(torch.cuda.Stream, "synchronize", "torch.cuda.Stream.synchronize")
            acc = getattr(torch, "accelerator", None)
            if acc is not None and hasattr(acc, "synchronize"):
                self._wrap(acc, "synchronize", "torch.accelerator.synchronize")

    def _wrap(self, owner: object, name: str, label: str) -> None:
        orig = getattr(owner, name)
        counter = self

        def counted(*args, **kwargs):
            if counter.on:
                counter.total += 1
                f = sys._getframe(1)
                while f is not None:
                    if f.f_code.co_filename.startswith(RUNTIME_DIR):
                        counter.runtime += 1
                        if len(counter.where) < 5:
                            counter.where.append(f"{label} from {f.f_code.co_filename}:{f.f_lineno}")
                        break
                    f = f.f_back
            return orig(*args, **kwargs)

        setattr(owner, name, counted)

    def start(self) -> None:
        self.on = True

    def stop(self) -> None:
        self.on = False


class Results(dict):
    """The scenario's measurements, written to its JSON file after every update (a crash keeps
    what came before)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def put(self, **kv) -> None:
        self.update(kv)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self, f)
        os.replace(tmp, self.path)
