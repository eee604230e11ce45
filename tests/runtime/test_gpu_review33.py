"""Review 33 (GPU paths): a CUDA error, another device, a graph capture or a second thread never
reaches the program or costs the run its data; the memory peak is read, not reset.

No GPU here: `MOCK` is a stricter stand-in for torch.cuda (after the review's own mock): an event
belongs to the device of its first record and elapsed_time needs both events complete
(torch's CUDAEvent checks), streams progress independently, errors are sticky, and any event call
while some thread captures a CUDA graph is counted as the violation it is in the default capture
mode. Run in-process through `mock_torch()`, and written beside the subprocess programs.
"""
import json
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from runtime import series
from runtime.gpu import CudaBackend, FakeBackend, FakeEvent, GpuTimer, Rotation
from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

MOCK = r'''
import threading, types


class MockEvent:
    def __init__(self, cuda):
        self.c = cuda
        self.device = self.key = self.pos = self.t = None

    def _check(self, guarded=True):
        c = self.c
        if not guarded and c.dev != self.device:
            # torch guards record and elapsed_time, not these: from a thread whose current device
            # has no context (a new thread's is 0), CUDA makes one there
            c.wrong_device_calls += 1
        if c.sticky:
            raise RuntimeError(c.sticky + "\nCUDA kernel errors might be asynchronously reported")
        if c.capturing:
            c.calls_in_capture += 1  # cudaErrorStreamCaptureUnsupported/Implicit in global mode

    def record(self, stream=None):
        c = self.c
        key = c.current_stream() if stream is None else stream
        if self.device is None:
            self.device = key[0]
        self._check()
        if self.device != key[0]:
            raise RuntimeError(f"Event device {self.device} does not match recording stream's device {key[0]}.")
        c.seq[key] = c.seq.get(key, 0) + 1
        c.clock += 1
        self.key, self.pos, self.t = key, c.seq[key], c.clock
        c.records.append(key)

    def query(self):
        self._check(guarded=self.pos is None)
        c = self.c
        if self.pos is None:
            return True
        if c.query_error is not None and c.query_error(self):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        c.done[self.key] = max(c.done.get(self.key, 0), c.seq[self.key] - c.lag.get(self.key, 0))
        return c.done[self.key] >= self.pos

    def synchronize(self):
        self._check(guarded=False)
        c = self.c
        if c.hung:
            threading.Event().wait()  # behind a collective that never completes
        c.syncs += 1
        c.done[self.key] = max(c.done.get(self.key, 0), self.pos)

    def elapsed_time(self, end):
        self._check()
        if self.device != end.device:
            raise RuntimeError("Both events must be recorded on the same device")
        if not (self.query() and end.query()):
            raise RuntimeError("Both events must be completed before calculating elapsed time.")
        return (end.t - self.t) * 0.001  # ms: 1 us per record in between


class MockCuda:
    def __init__(self):
        self._tls = threading.local()  # the current device is per thread, 0 in a new one
        self.wrong_device_calls = 0
        self.streams = {}  # device -> its current stream id
        self.sticky = None
        self.hung = False
        self.query_error = None
        self.seq, self.done, self.lag = {}, {}, {}
        self.clock = 0
        self.syncs = 0
        self.records = []
        self.capturing_threads = set()
        self.calls_in_capture = 0
        self.allocated = {0: 1}
        self.peak = {}
        self.resets = 0
        self.available_calls = 0
        self.n = 4
        cuda = self

        class CUDAGraph:
            def capture_begin(self, pool=None, capture_error_mode="global"):
                cuda.capturing_threads.add(threading.get_ident())

            def capture_end(self):
                cuda.capturing_threads.discard(threading.get_ident())

        self.CUDAGraph = CUDAGraph

    @property
    def dev(self):
        return getattr(self._tls, "dev", 0)

    @dev.setter
    def dev(self, d):
        self._tls.dev = d

    def device(self, d):  # torch.cuda.device(d): a guard
        cuda = self

        class Guard:
            def __enter__(self):
                self.prev, cuda.dev = cuda.dev, d

            def __exit__(self, *exc):
                cuda.dev = self.prev

        return Guard()

    @property
    def capturing(self):
        return bool(self.capturing_threads)

    def is_available(self):
        self.available_calls += 1
        return True

    def is_initialized(self):
        return True

    def current_device(self):
        return self.dev

    def device_count(self):
        return self.n

    def current_stream(self, device=None):
        d = self.dev if device is None else device
        return (d, self.streams.get(d, 0))

    def is_current_stream_capturing(self):
        return threading.get_ident() in self.capturing_threads

    def Event(self, enable_timing=False):
        return MockEvent(self)

    def memory_allocated(self, device=None):
        return self.allocated.get(self.dev if device is None else device, 0)

    def max_memory_allocated(self, device=None):
        return self.peak.get(self.dev if device is None else device, 0)

    def reset_peak_memory_stats(self, device=None):
        self.resets += 1
        self.peak[self.dev if device is None else device] = 0


def mock_torch():
    torch = types.ModuleType("torch")
    torch.__version__ = "0.mock"
    torch.version = types.SimpleNamespace(cuda="12.mock")
    torch.cuda = cuda = MockCuda()
    torch._C = types.SimpleNamespace(_cuda_memoryStats=lambda d: {
        "allocated_bytes": {"all": {"peak": cuda.peak.get(d, 0), "current": cuda.allocated.get(d, 0)}}})
    return torch
'''

_mock = types.ModuleType("mockcuda")
exec(MOCK, _mock.__dict__)
mock_torch = _mock.mock_torch


def new_timer(torch):
    return GpuTimer(CudaBackend(torch))


def token_event(started):
    return started[1] if isinstance(started, tuple) else started  # (this code's (device, event); before: the event)


# H4: one pool and one queue per device -----------------------------------------------------------

def test_events_of_one_device_are_never_recorded_on_another(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)  # read where device 0 is current: not the one pytest runs under
    torch = mock_torch()
    cuda = torch.cuda
    cuda.allocated = {0: 1, 1: 1}
    t = new_timer(torch)
    targets = []
    for i in range(40):  # model parallelism: every other step's stage runs with device 1 current
        cuda.dev = i % 2
        d = {"gpu_ns": None}
        t.stop(t.start(), d)  # pooled events of device 0 must not be recorded on device 1
        targets.append(d)
    cuda.dev = 0
    t.resolve(wait=True)
    assert all(d["gpu_ns"] == 1000 for d in targets), targets
    assert {key[0] for key in cuda.records} == {0, 1}


def test_an_interval_that_ends_on_another_device_is_not_timed():
    torch = mock_torch()
    cuda = torch.cuda
    t = new_timer(torch)
    started = t.start()
    cuda.dev = 1  # e.g. `with torch.cuda.device(1):` left open across the region's end
    d = {"gpu_ns": None}
    t.stop(started, d)
    cuda.dev = 0
    t.resolve(wait=True)
    assert d["gpu_ns"] is None and cuda.records == [(0, 0)]


# H6: errors reading events ----------------------------------------------------------------------

def test_a_sticky_cuda_error_turns_gpu_timing_off_without_raising(capsys):
    torch = mock_torch()
    cuda = torch.cuda
    t = new_timer(torch)
    targets = []
    for i in range(40):
        if i == 20:
            cuda.sticky = "CUDA error: device-side assert triggered"
        d = {"gpu_ns": None, "summary": [1, 0, 0, 0, 0, 1]}
        started = t.start()  # never raises into the program (the probe or the loop that called it)
        if started is not None:
            t.stop(started, d)
        targets.append(d)
    t.resolve()
    t.resolve(wait=True)
    assert all(d["gpu_ns"] is None for d in targets[20:])
    err = capsys.readouterr().err
    assert err.count("scaleprobe: GPU timing is off") == 1 and "device-side assert triggered" in err
    assert "asynchronously" not in err  # the first line of CUDA's message
    assert t.error == "RuntimeError: CUDA error: device-side assert triggered"
    n = len(cuda.records)
    cuda.sticky = None
    assert t.start() is None and len(cuda.records) == n  # off for good: no more CUDA calls


def test_an_error_drops_the_intervals_in_flight_rather_than_leaving_them_pending():
    torch = mock_torch()
    cuda = torch.cuda
    cuda.lag[(0, 0)] = 100  # nothing completes yet
    t = new_timer(torch)
    targets = [{"gpu_ns": object(), "summary": [1, 0, 0, 0, 0, 1]} for _ in range(3)]
    for d in targets:
        t.stop(t.start(), d)
    cuda.query_error = lambda ev: True
    assert t.resolve() == 0
    assert [d["gpu_ns"] for d in targets] == [None] * 3  # written as null at the next flush
    assert all("summary" not in d for d in targets)


class _OddEvent(FakeEvent):
    def elapsed_time(self, end):
        return {1: float("nan"), 3: -0.002}.get(self.seq, 0.001)


class _OddBackend(FakeBackend):
    def new_event(self):
        self.created += 1
        return _OddEvent(self)


def test_an_interval_that_cannot_be_read_is_dropped_alone():
    t = GpuTimer(_OddBackend())
    targets = [{"gpu_ns": None, "summary": [1, 0, 0, 0, 0, 1]} for _ in range(3)]
    for d in targets:
        t.stop(t.start(), d)
    assert t.resolve(wait=True) == 3
    # a value that is no time, and a negative span (its events on two streams): null, not a record the
    # modeler would reject; the next interval is read as usual
    assert [d["gpu_ns"] for d in targets] == [None, None, 1000]
    assert [d.get("summary") for d in targets] == [None, None, None] and t.error is None


def test_a_region_that_switches_streams_is_read_once_both_events_completed():
    torch = mock_torch()
    cuda = torch.cuda
    cuda.lag[(0, 0)] = 1  # the default stream is busy: its last event is not done
    t = new_timer(torch)
    started = t.start()
    cuda.streams[0] = 7  # torch.cuda.set_stream(side) inside the region, left set: the side stream is idle
    d = {"gpu_ns": None}
    t.stop(started, d)
    assert t.resolve() == 0 and d["gpu_ns"] is None  # (before: "Both events must be completed" raised)
    cuda.lag[(0, 0)] = 0
    assert t.resolve() == 1 and isinstance(d["gpu_ns"], int) and t.error is None


def test_the_final_resolve_waits_a_bounded_time_for_a_hung_gpu():
    torch = mock_torch()
    cuda = torch.cuda
    t = new_timer(torch)
    t.FINAL_WAIT_S = 0.3
    cuda.lag[(0, 0)] = 10**9
    cuda.hung = True  # Event.synchronize never returns
    d = {"gpu_ns": None}
    t.stop(t.start(), d)
    done = []
    th = threading.Thread(target=lambda: done.append(t.resolve(wait=True)), daemon=True)
    th.start()
    th.join(5)
    assert done == [0] and d["gpu_ns"] is None


# H7: graph capture ------------------------------------------------------------------------------

def test_nothing_is_recorded_or_queried_while_this_thread_captures():
    torch = mock_torch()
    cuda = torch.cuda
    t = new_timer(torch)
    t.stop(t.start(), {"gpu_ns": None})
    g = cuda.CUDAGraph()
    g.capture_begin()
    for _ in range(40):  # (every 16th start resolved: a query)
        started = t.start()
        if started is not None:
            t.stop(started, {"gpu_ns": None})
    t.resolve()
    g.capture_end()
    assert cuda.calls_in_capture == 0


def test_the_flush_thread_queries_nothing_while_another_thread_captures():
    torch = mock_torch()
    cuda = torch.cuda
    t = new_timer(torch)
    d = {"gpu_ns": None}
    t.stop(t.start(), d)
    begun, end = threading.Event(), threading.Event()

    def program():  # torch.cuda.graph(g): capture_begin ... capture_end, in the program's thread
        g = cuda.CUDAGraph()
        g.capture_begin()
        begun.set()
        end.wait(5)
        g.capture_end()

    th = threading.Thread(target=program)
    th.start()
    begun.wait(5)
    t.resolve()  # what the flush thread does meanwhile
    end.set()
    th.join()
    assert cuda.calls_in_capture == 0
    t.resolve()
    assert d["gpu_ns"] == 1000  # read once the capture has ended


# H8: two threads --------------------------------------------------------------------------------

class _SlowEvent(FakeEvent):
    def elapsed_time(self, end):
        time.sleep(0)  # lets the other thread run here, as the 5 ms switch interval sometimes does
        return super().elapsed_time(end)


class _SlowBackend(FakeBackend):
    def new_event(self):
        self.created += 1
        return _SlowEvent(self)


def test_the_flush_thread_and_the_program_never_resolve_the_same_interval_twice():
    b = _SlowBackend(tick_ns=1000)
    t = GpuTimer(b)
    stop = threading.Event()

    def flusher():
        while not stop.is_set():
            t.resolve()

    targets = []
    th = threading.Thread(target=flusher)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        th.start()
        for _ in range(5000):
            d = {"gpu_ns": None}
            t.stop(t.start(), d)
            targets.append(d)
    finally:
        stop.set()
        th.join()
        sys.setswitchinterval(old)
    t.resolve(wait=True)
    # A lost interval stays None; an event pooled twice times two intervals at once (0, negative or foreign)
    assert [d["gpu_ns"] for d in targets if d["gpu_ns"] != 1000] == []


class _ThreadEvent(FakeEvent):
    def record(self, *args):
        super().record(*args)
        self.thread = threading.get_ident()


class _ThreadBackend(FakeBackend):
    def new_event(self):
        self.created += 1
        return _ThreadEvent(self)


def test_each_thread_closes_its_own_timed_visit():
    timer = GpuTimer(_ThreadBackend())
    pairs = []
    stop = timer.stop

    def checked_stop(started, target):
        pairs.append(token_event(started).thread == threading.get_ident())
        return stop(started, target)

    timer.stop = checked_stop
    rec = SimpleNamespace(regions={5: ("function", "forward", "m.py", 1, "m")}, region_totals={5: [1, 1]}, throttled={})
    rot = Rotation(timer, rec, budget=10)
    g = {"__sp_enter__": lambda rid: None, "__sp_exit__": lambda rid: None}
    rot.install(g)
    rot.next_step()
    enter, exit = g["__sp_enter__"], g["__sp_exit__"]
    run_two_replicas(enter, exit, 5)
    assert pairs == [True, True]


def test_a_recursive_target_pairs_each_visit_with_its_own_end_past_the_budget():
    timer = GpuTimer(FakeBackend())
    rec = SimpleNamespace(regions={5: ("function", "fib", "m.py", 1, "m")}, region_totals={5: [1, 1]}, throttled={})
    rot = Rotation(timer, rec, budget=2)
    g = {"__sp_enter__": lambda rid: None, "__sp_exit__": lambda rid: None}
    rot.install(g)
    rot.next_step()
    # depth 4: the budget times the outer two visits
    assert stop_depths(timer, g["__sp_enter__"], g["__sp_exit__"], 5, 4) == [2, 1]  # (before: the innermost two)


# H5: the device of a rank that never calls set_device -------------------------------------------

def test_a_rank_with_its_tensors_on_another_device_is_timed_there(monkeypatch):
    torch = mock_torch()
    cuda = torch.cuda
    cuda.allocated = {2: 10}  # model.to(2), no torch.cuda.set_device: device 0 stays current
    cuda.peak = {0: 5, 2: 500}
    t = new_timer(torch)
    started = t.start()
    t.stop(started, {"gpu_ns": None})
    assert cuda.records == [(2, 0), (2, 0)]
    assert t.peak_memory(started) == {"cuda_peak_bytes": 500}


def test_events_are_read_on_their_device_from_the_flush_thread():
    torch = mock_torch()
    cuda = torch.cuda
    cuda.dev = 1  # torch.cuda.set_device(1) in the program's thread; the flush thread's device is 0
    cuda.allocated = {1: 10}
    t = new_timer(torch)
    t.FINAL_WAIT_S = 1
    cuda.lag[(1, 0)] = 1
    targets = [{"gpu_ns": None} for _ in range(3)]
    for d in targets:
        t.stop(t.start(), d)
    th = threading.Thread(target=t.resolve)  # a flush
    th.start()
    th.join()
    th = threading.Thread(target=t.resolve, args=(True,))  # the final flush, at a signal
    th.start()
    th.join()
    assert [d["gpu_ns"] for d in targets] == [1000] * 3
    assert cuda.wrong_device_calls == 0 and cuda.dev == 1


def test_local_rank_decides_before_anything_is_allocated(monkeypatch, capsys):
    monkeypatch.setenv("LOCAL_RANK", "3")
    torch = mock_torch()
    cuda = torch.cuda
    cuda.allocated = {}
    t = new_timer(torch)
    t.stop(t.start(), {"gpu_ns": None})
    assert cuda.records == [(3, 0), (3, 0)]
    cuda.allocated = {1: 1, 2: 1}  # several, none current: a guess, said
    t = new_timer(torch)
    t.stop(t.start(), {"gpu_ns": None})
    assert cuda.records[-1] == (1, 0)
    assert "GPU times are taken on GPU 1" in capsys.readouterr().err


def test_a_program_that_chose_its_device_is_timed_on_the_current_device():
    torch = mock_torch()
    cuda = torch.cuda
    cuda.allocated = {0: 1, 1: 1}
    cuda.dev = 1  # torch.cuda.set_device(1)
    t = new_timer(torch)
    t.stop(t.start(), {"gpu_ns": None})
    cuda.dev = 0  # and DataParallel's device 0 is device 0
    t.stop(t.start(), {"gpu_ns": None})
    assert cuda.records == [(1, 0), (1, 0), (0, 0), (0, 0)]


# M7 and M3 ---------------------------------------------------------------------------------------

def test_a_process_that_never_used_cuda_is_not_made_to_initialise_it(monkeypatch):
    torch = mock_torch()
    torch.cuda.is_initialized = lambda: False
    monkeypatch.setitem(sys.modules, "torch", torch)
    rec = SimpleNamespace(cfg=SimpleNamespace(gpu="auto", gpu_budget=0), gpu=None)
    series.maybe_start_gpu(rec)
    assert rec.gpu is None and torch.cuda.available_calls == 0


# End to end: subprocess programs on the mock ----------------------------------------------------

PROGRAM = '''
import json, os, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mockcuda
torch = sys.modules["torch"] = mockcuda.mock_torch()
cuda = torch.cuda
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, iterate as __sp_iterate__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", (
    (0, "function", "forward", 20), (1, "function", "train", 30), (2, "epoch", "train.epoch", 32),
    (3, "step", "train.step", 35),
))
import runtime.gpu
runtime.gpu.GpuTimer.FINAL_WAIT_S = 0.5
SCEN = sys.argv[1]
STEPS = int(os.environ.get("PROG_STEPS", "20"))


def forward(step):
    if __sp_on__: __sp_enter__(0)
    try:
        cuda.peak[cuda.dev] = cuda.peak.get(cuda.dev, 0) + 100  # the allocator's running peak
        if SCEN == "lost":
            time.sleep(0.005)
    finally:
        if __sp_on__: __sp_exit__(0)


def train():
    if __sp_on__: __sp_enter__(1)
    try:
        if __sp_on__: __sp_enter__(2)
        try:
            for epoch in __sp_iterate__(2, range(2)):
                if __sp_on__: __sp_enter__(3)
                try:
                    for step in __sp_iterate__(3, range(STEPS)):
                        forward(step)
                        if SCEN == "device2":  # a model split over two GPUs
                            cuda.dev = 1  # with torch.cuda.device(1): stage2(x)
                            forward(step)
                            cuda.dev = 0
                        if SCEN == "lost" and epoch == 0 and step == STEPS // 2:
                            # a CUDA error that the flush thread's resolve meets first
                            main = threading.main_thread()
                            cuda.query_error = lambda ev: threading.current_thread() is not main
                        if SCEN == "sticky" and epoch == 1 and step == 5:
                            cuda.sticky = "CUDA error: device-side assert triggered"
                            raise RuntimeError("CUDA error: device-side assert triggered (seen at loss.item())")
                finally:
                    if __sp_on__: __sp_exit__(3)
        finally:
            if __sp_on__: __sp_exit__(2)
    finally:
        if __sp_on__: __sp_exit__(1)


if __name__ == "__main__":
    if SCEN == "lost":
        runtime.gpu.GpuTimer.RESOLVE_EVERY = 10**9  # only the flush thread resolves
    train()
    program_peak = cuda.max_memory_allocated()  # the program's own figure, e.g. logged per epoch
    if SCEN == "hang":
        cuda.lag[(0, 0)] = 10**9  # a collective that never completes: nothing after it either
        cuda.hung = True
    print(json.dumps({"resets": cuda.resets, "program_peak": program_peak}))
'''


def run_program(tmp_path, scen, env=None, timeout=60):
    (tmp_path / "mockcuda.py").write_text(MOCK)
    (tmp_path / "prog.py").write_text(PROGRAM)
    e = clean_env()
    e.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), **(env or {}))
    p = subprocess.run([sys.executable, str(tmp_path / "prog.py"), scen], env=e, capture_output=True, text=True,
                       timeout=timeout, cwd=tmp_path)
    files = find_run_files(tmp_path / "out")
    assert len(files) == 1, (files, p.stderr)
    return p, read_run(files[0])


def test_step_memory_is_the_peak_so_far_and_the_programs_own_peak_is_left_alone(tmp_path):
    p, run = run_program(tmp_path, "ok")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out == {"resets": 0, "program_peak": 2 * 20 * 100}  # not reset at each step
    peaks = [s["memory"]["cuda_peak_bytes"] for s in run.steps]
    assert peaks == [100 * (i + 1) for i in range(40)]  # the modeler's max over steps: the run's peak
    assert all(isinstance(s["gpu_ns"], int) and s["gpu_ns"] > 0 for s in run.steps)
    assert "gpu_error" not in run.end


def test_a_region_run_with_another_device_current_does_not_crash_the_program(tmp_path):
    p, run = run_program(tmp_path, "device2", env={"SCALEPROBE_GPU_BUDGET": "4"})
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert all(isinstance(s["gpu_ns"], int) for s in run.steps)
    assert run.gpu_regions and run.end["status"] == "ok"


def test_a_sticky_cuda_error_still_ends_the_file_with_its_end_record(tmp_path):
    p, run = run_program(tmp_path, "sticky")
    assert p.returncode == 1 and "seen at loss.item()" in p.stderr
    assert "Exception ignored" not in p.stderr and p.stderr.count("Traceback") == 1  # the program's own
    assert p.stderr.count("scaleprobe: GPU timing is off") == 1
    assert run.end is not None and run.end["status"] == "exception"
    assert run.end["gpu_error"] == "RuntimeError: CUDA error: device-side assert triggered"
    gpu = [s["gpu_ns"] for s in run.steps]
    assert all(isinstance(v, int) for v in gpu[:15]) and gpu[-1] is None


def test_a_cuda_error_in_a_flush_loses_no_profile(tmp_path):
    p, run = run_program(tmp_path, "lost", env={"SCALEPROBE_FLUSH_INTERVAL": "0.05", "PROG_STEPS": "30"})
    assert p.returncode == 0, p.stderr
    forward = [s for path, s in run.profile.items() if run.callpath_name(path).endswith("forward")]
    assert sum(s.visits for s in forward) == 60
    assert run.end["status"] == "ok" and run.end["gpu_error"].startswith("RuntimeError: CUDA error: an illegal")
    assert all(s["gpu_ns"] is None or isinstance(s["gpu_ns"], int) for s in run.steps) and len(run.steps) == 60


def test_a_hung_gpu_does_not_hang_the_final_flush(tmp_path):
    try:
        p, run = run_program(tmp_path, "hang", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the program hung in its final flush")
    assert p.returncode == 0, p.stderr
    assert run.end["status"] == "ok" and len(run.steps) == 40


def run_two_replicas(enter, exit, rid):
    """DataParallel replicas: the same forward in two threads at once, interleaved (a enters, b
    enters, a exits, b exits)."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def replica_a():
        enter(rid)
        a_in.set()
        b_in.wait(5)
        exit(rid)
        a_out.set()

    def replica_b():
        a_in.wait(5)
        enter(rid)
        b_in.set()
        a_out.wait(5)
        exit(rid)

    ths = [threading.Thread(target=replica_a), threading.Thread(target=replica_b)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()


def stop_depths(timer, enter, exit, rid, depth):
    """Recurse into `rid` `depth` levels deep and back: the depth at which each timed visit stopped."""
    level, stopped_at = [0], []
    stop = timer.stop

    def noted_stop(started, target):
        stopped_at.append(level[0])
        return stop(started, target)

    timer.stop = noted_stop
    for _ in range(depth):
        level[0] += 1
        enter(rid)
    for _ in range(depth):
        exit(rid)
        level[0] -= 1
    return stopped_at
