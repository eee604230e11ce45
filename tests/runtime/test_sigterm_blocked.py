"""Review 33 M1: a SIGTERM sent to a rank whose main thread is blocked in C (a collective waiting for
a peer that never joins, `.item()` behind a hung NCCL kernel) ends it as it ends the uninstrumented
program: killed by SIGTERM, within about a second, and its run file ends with its end record.

The recorder's Python handler cannot run there (the thread never returns to bytecode): the signal
watch (runtime/signal_watch.py) sees the arrival at the C level, and after its grace period the
flush thread writes the end record and takes the default action. Where the handler does run, or
the program handles SIGTERM itself, nothing changes.
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

needs_watch = pytest.mark.skipif(importlib.util.find_spec("runtime._sigwatch") is None,
                                 reason="runtime._sigwatch is not built (no C compiler): no watch")
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")

# Two gloo ranks; hand-instrumented as the instrumentor would: one region, `work`, around each
# all_reduce. Both ranks reduce three times; then rank 0 reduces once more, which rank 1 joins only
# once the test creates `<store>.go` (MODE "blocked"); or rank 0 sleeps in Python (MODE "sleeping").
GLOO = '''\
import os, signal, sys, time, datetime
MODE = sys.argv[3]


def own(signum, frame):
    print("OWN HANDLER", signum, flush=True)
    os._exit(3)


if MODE == "own-before":  # the program's handler, installed before recording starts: chained to
    signal.signal(signal.SIGTERM, own)
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "app.py", ((0, "function", "work", 20), (1, "function", "idle", 30)))
if MODE == "own-after":  # ... and after: it replaces the recorder's
    signal.signal(signal.SIGTERM, own)
import torch
import torch.distributed as dist

store, rank = sys.argv[1], int(sys.argv[2])
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=120))


def work(t):
    if __sp_on__: __sp_enter__(0)
    try:
        dist.all_reduce(t)
    finally:
        if __sp_on__: __sp_exit__(0)


def idle():
    if __sp_on__: __sp_enter__(1)
    try:
        while True:
            time.sleep(0.05)
    finally:
        if __sp_on__: __sp_exit__(1)


for _ in range(3):
    work(torch.ones(4))
if rank == 1:
    while not os.path.exists(store + ".go"):
        time.sleep(0.05)
    work(torch.ones(4))
    sys.exit(0)
print("READY", os.getpid(), flush=True)
if MODE == "sleeping":
    idle()
work(torch.ones(4))  # blocks in C: rank 1 has not come
print("RETURNED", flush=True)
'''


def _env(**extra: str) -> dict[str, str]:
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", SCALEPROBE_QUIET="1", **extra)
    return env


def _records(out: Path) -> list[dict]:
    """The records of the one run file under `out`, every line a complete JSON object."""
    [path] = [p for p in out.rglob("*.jsonl")]
    text = path.read_text()
    assert text.endswith("\n"), text[-200:]
    return [json.loads(line) for line in text.splitlines()]


def _ready(proc: subprocess.Popen) -> int:
    """The pid the program prints once it is about to block (or sleep)."""
    for line in proc.stdout:
        if line.startswith("READY"):
            return int(line.split()[1])
    raise AssertionError(f"the program ended early: {proc.wait()} {proc.stderr.read()}")


def _wait(proc: subprocess.Popen, timeout: float, what: str) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"{what}: still alive {timeout:g} s after the signal")


class Gloo:
    """Rank 0 and rank 1 of GLOO; rank 1 is killed at the end of the test."""

    def __init__(self, tmp_path: Path, mode: str) -> None:
        (tmp_path / "app.py").write_text(GLOO)
        self.store = tmp_path / "store"
        self.out = tmp_path / "out0"
        env = _env(SCALEPROBE_FLUSH_INTERVAL="0.3")  # flushes before the end: records it must leave intact
        self.procs = [subprocess.Popen([sys.executable, str(tmp_path / "app.py"), str(self.store), str(r), mode],
                                       env=dict(env, SCALEPROBE_OUT=str(tmp_path / f"out{r}")), cwd=tmp_path,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                      for r in range(2)]
        self.rank0 = self.procs[0]

    def __enter__(self) -> "Gloo":
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            p.stdout.close()
            p.stderr.close()


@pytest.mark.slow
@needs_torch
@needs_watch
def test_a_rank_blocked_in_a_collective_dies_of_sigterm_with_its_end_record(tmp_path):
    with Gloo(tmp_path, "blocked") as g:
        assert _ready(g.rank0) == g.rank0.pid
        time.sleep(0.5)  # in all_reduce, waiting for rank 1
        g.rank0.send_signal(signal.SIGTERM)
        code = _wait(g.rank0, 20, "rank 0, blocked in all_reduce")  # old: alive until gloo's timeout
        err = g.rank0.stderr.read()
        assert code == -signal.SIGTERM, (code, err)  # killed by SIGTERM, as uninstrumented
        assert "Traceback" not in err, err
    records = _records(g.out)
    assert records[0]["type"] == "header"
    ends = [r for r in records if r["type"] == "end"]
    assert len(ends) == 1 and records[-1] is ends[0], ends
    end = ends[0]
    assert (end["status"], end["exit_code"], end["signal"]) == ("signal", 128 + signal.SIGTERM, signal.SIGTERM), end
    assert end["flushes"] >= 2  # periodic flushes came first, and are intact
    # the last interval is kept: the three reductions, and the hung one counted as ending now
    visits = sum(r["visits"] for r in records if r["type"] == "profile" and r["path"][-1] == 0)
    assert visits == 4, visits
    assert end["closed_at_end"] >= 1, end
    # ... and so do the comm records (review 49 F1: the hung call was left out of them)
    comms = [r for r in records if r["type"] == "comm" and r["op"] == "all_reduce"]
    assert (sum(r["calls"] for r in comms), sum(r.get("unfinished", 0) for r in comms)) == (4, 1), comms


@pytest.mark.slow
@needs_torch
def test_a_rank_that_returns_to_python_still_ends_through_the_handler(tmp_path):
    # The main thread sleeps in Python: the recorder's handler runs at once and ends the rank itself.
    with Gloo(tmp_path, "sleeping") as g:
        _ready(g.rank0)
        time.sleep(0.5)  # in idle()
        g.rank0.send_signal(signal.SIGTERM)
        code = _wait(g.rank0, 20, "rank 0, sleeping")
        assert code == -signal.SIGTERM, (code, g.rank0.stderr.read())
    records = _records(g.out)
    ends = [r for r in records if r["type"] == "end"]
    assert len(ends) == 1 and records[-1] is ends[0], ends
    end = ends[0]
    assert (end["status"], end["signal"]) == ("signal", signal.SIGTERM), end
    # written by the handler, in the main thread: its open visit (`idle`) counts as ending now, as
    # the watch, in the flush thread, counts it (review 42 F6: it was dropped, and with it the profile's
    # top-level regions)
    assert end["dropped"] == 0 and end["closed_at_end"] >= 1, end


@pytest.mark.slow
@needs_torch
@pytest.mark.parametrize("mode", ["own-before", "own-after"])
def test_a_program_with_its_own_sigterm_handler_is_left_alone(tmp_path, mode):
    # Without scaleprobe its handler runs when all_reduce returns; so it does with it: the watch
    # never ends the process for a handler of the program's.
    with Gloo(tmp_path, mode) as g:
        _ready(g.rank0)
        time.sleep(0.5)
        g.rank0.send_signal(signal.SIGTERM)
        time.sleep(3.0)  # past the watch's grace period (MAIN_GRACE_S, 1 s, where recording started), 3 times
        assert g.rank0.poll() is None, (g.rank0.returncode, g.rank0.stderr.read())
        (tmp_path / "store.go").write_text("")  # rank 1 joins: all_reduce returns, the handler runs
        code = _wait(g.rank0, 60, "rank 0, its all_reduce returned")
        out = g.rank0.stdout.read()
        assert code == 3 and "OWN HANDLER 15" in out, (code, out, g.rank0.stderr.read())


# One process under the launcher (`--instrument`), whose SIGTERM handler unwinds the program with
# SystemExit(143): its main thread sleeps in Python, or blocks in C for good (a mutex it holds:
# glibc restarts the wait after a signal, as a collective's wait does).
LAUNCHED = '''\
import ctypes, os, sys, time


def work():
    return sum(range(1000))


def main():
    for _ in range(3):
        work()
    try:
        print("READY", os.getpid(), flush=True)
        if sys.argv[1] == "blocked":
            libc = ctypes.CDLL(None)
            mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER on glibc
            libc.pthread_mutex_lock(mutex)
            libc.pthread_mutex_lock(mutex)
        else:
            while True:
                time.sleep(0.05)
    finally:
        print("FINALLY", flush=True)


main()
'''


@pytest.mark.parametrize("mode", ["sleeping", pytest.param("blocked", marks=needs_watch)])
def test_under_the_launcher(tmp_path, mode):
    (tmp_path / "prog.py").write_text(LAUNCHED)
    cmd = [sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "--instrument",
           str(tmp_path / "prog.py"), mode]
    with subprocess.Popen(cmd, env=_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        assert _ready(proc) == proc.pid  # one rank: the launcher runs it in its own process
        time.sleep(0.5)  # in the blocking call
        proc.send_signal(signal.SIGTERM)
        code = _wait(proc, 20, f"the launched program ({mode})")
        out, err = proc.stdout.read(), proc.stderr.read()
    [end] = [r for r in _records(tmp_path / "runs") if r["type"] == "end"]
    assert (end["status"], end["exit_code"]) == ("signal", 128 + signal.SIGTERM), end
    if mode == "sleeping":
        # as today: the launcher's handler unwinds the program, its `finally` runs
        assert code == 128 + signal.SIGTERM and "FINALLY" in out, (code, out, err)
    else:
        # the thread never unwinds: the default action, as `python prog.py` would die
        assert code == -signal.SIGTERM and "FINALLY" not in out, (code, out, err)
        assert end["signal"] == signal.SIGTERM
    # the launcher's record of the run ends too, also where the program never unwound to it
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob("launch.json")]
    assert (record["status"], record["exit_code"], record["error"]) == ("interrupted", 143, "interrupted by SIGTERM")
    assert record["wall_s"] is not None


# The second case of M1: GPU work queued behind a hung collective. Whichever writes the end record
# (the handler, the watch), the final flush waits a bounded time for the CUDA events (GpuTimer's
# FINAL_WAIT_S) and never blocks on them for good. On the CUDA stand-in of test_gpu_review33.
GPU = '''\
import ctypes, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mockcuda
torch = sys.modules["torch"] = mockcuda.mock_torch()
cuda = torch.cuda
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, iterate as __sp_iterate__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "train", 10), (1, "step", "train.step", 12)))
import runtime.gpu
runtime.gpu.GpuTimer.FINAL_WAIT_S = 0.5


def train():
    if __sp_on__: __sp_enter__(0)
    try:
        if __sp_on__: __sp_enter__(1)
        try:
            for step in __sp_iterate__(1, range(10)):
                if step == 5:
                    cuda.lag[(0, 0)] = 10**9  # a collective that never completes: nothing after it either
                    cuda.hung = True  # Event.synchronize never returns
        finally:
            if __sp_on__: __sp_exit__(1)
        print("READY", os.getpid(), flush=True)
        if sys.argv[1] == "blocked":  # .item() behind the hung kernel
            libc = ctypes.CDLL(None)
            mutex = ctypes.create_string_buffer(64)
            libc.pthread_mutex_lock(mutex)
            libc.pthread_mutex_lock(mutex)
        while True:
            time.sleep(0.05)
    finally:
        if __sp_on__: __sp_exit__(0)


train()
'''


@pytest.mark.parametrize("mode", ["sleeping", pytest.param("blocked", marks=needs_watch)])
def test_a_hung_gpu_does_not_keep_a_signalled_rank_alive(tmp_path, mode):
    from .test_gpu_review33 import MOCK

    (tmp_path / "mockcuda.py").write_text(MOCK)
    (tmp_path / "prog.py").write_text(GPU)
    env = _env(SCALEPROBE_OUT=str(tmp_path / "out"))
    with subprocess.Popen([sys.executable, str(tmp_path / "prog.py"), mode], env=env, cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        _ready(proc)
        time.sleep(0.5)  # in the blocking call
        proc.send_signal(signal.SIGTERM)
        code = _wait(proc, 20, f"a rank with a hung GPU ({mode})")
        err = proc.stderr.read()
    assert code == -signal.SIGTERM, (code, err)
    records = _records(tmp_path / "out")
    [end] = [r for r in records if r["type"] == "end"]
    assert records[-1] is end and (end["status"], end["signal"]) == ("signal", signal.SIGTERM), end
    steps = [r for r in records if r["type"] == "step"]
    assert len(steps) == 10, steps
    assert steps[-1]["gpu_ns"] is None  # never completed: said so, not waited for


# The race of the watch and a late handler: the main thread is in C for 1.6 s (a mutex wait with a
# deadline, which signals do not end), past the watch's grace; the watch's final write is slowed to
# 0.6 s, so the recorder's handler runs while the flush thread writes the end record. The handler
# must let that write end before the process does: one end record, no cut line.
LATE = '''\
import ctypes, os, signal, sys, threading, time
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "wait", 10),))
import runtime.recorder

writer = runtime.recorder.get().writer
write_records = writer.write_records


def slow_final_write(records, sync=False):
    if sync:
        print("FINAL WRITE", threading.current_thread().name, flush=True)
        time.sleep(0.6)
    return write_records(records, sync=sync)


writer.write_records = slow_final_write


class timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def wait():
    if __sp_on__: __sp_enter__(0)
    try:
        libc = ctypes.CDLL(None)
        mutex = ctypes.create_string_buffer(64)
        libc.pthread_mutex_lock(mutex)
        deadline = time.time() + 1.6
        until = timespec(int(deadline), int((deadline % 1) * 1e9))
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
        libc.pthread_mutex_timedlock(mutex, ctypes.byref(until))  # ETIMEDOUT at the deadline
        print("RETURNED", flush=True)
        time.sleep(5)
    finally:
        if __sp_on__: __sp_exit__(0)


wait()
'''


@needs_watch
def test_a_late_handler_waits_for_the_end_record_that_the_watch_writes(tmp_path):
    (tmp_path / "prog.py").write_text(LATE)
    p = subprocess.run([sys.executable, str(tmp_path / "prog.py")], env=_env(SCALEPROBE_OUT=str(tmp_path / "out")),
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGTERM, (p.returncode, p.stdout, p.stderr)
    assert p.stdout.count("FINAL WRITE") == 1, p.stdout  # one end record written, by one thread
    records = _records(tmp_path / "out")
    ends = [r for r in records if r["type"] == "end"]
    assert len(ends) == 1 and records[-1] is ends[0], ends
    assert (ends[0]["status"], ends[0]["signal"]) == ("signal", signal.SIGTERM), ends[0]


# Without the C extension there is no watch: a process blocked in C lives on after SIGTERM, as it
# did before the watch (its handler runs if the call ever returns).
NO_EXTENSION = '''\
import ctypes, os, sys
sys.modules["runtime._sigwatch"] = None  # as if it could not be built: its import fails
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "wait", 10),))
import runtime.recorder
print("READY", os.getpid(), runtime.recorder.get().sigwatch, flush=True)
libc = ctypes.CDLL(None)
mutex = ctypes.create_string_buffer(64)
libc.pthread_mutex_lock(mutex)
libc.pthread_mutex_lock(mutex)
'''


def test_without_the_c_extension_nothing_is_watched(tmp_path):
    (tmp_path / "prog.py").write_text(NO_EXTENSION)
    with subprocess.Popen([sys.executable, str(tmp_path / "prog.py")], env=_env(SCALEPROBE_OUT=str(tmp_path / "out")),
                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        line = proc.stdout.readline()
        assert line.split()[2:] == ["None"], (line, proc.stderr.read() if proc.poll() is not None else "")
        time.sleep(0.5)  # in pthread_mutex_lock
        proc.send_signal(signal.SIGTERM)
        time.sleep(3.0)  # past the grace period a watch would have (MAIN_GRACE_S, 1 s), 3 times
        alive = proc.poll() is None
        proc.kill()
        proc.wait()
    assert alive


# SIGINT: Python's own handler (KeyboardInterrupt) is left alone, so a Ctrl-C to a thread blocked in
# C waits for the call to return, with or without scaleprobe. A program that set SIGINT to its
# default action gets the recorder's stand-in handler, and the watch, as for SIGTERM.
SIGINT_DFL = '''\
import ctypes, os, signal
signal.signal(signal.SIGINT, signal.SIG_DFL)
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "wait", 10),))
print("READY", os.getpid(), flush=True)
libc = ctypes.CDLL(None)
mutex = ctypes.create_string_buffer(64)
libc.pthread_mutex_lock(mutex)
libc.pthread_mutex_lock(mutex)
'''


@needs_watch
def test_a_sigint_left_to_its_default_action_is_watched_too(tmp_path):
    (tmp_path / "prog.py").write_text(SIGINT_DFL)
    env = _env(SCALEPROBE_OUT=str(tmp_path / "out"))
    with subprocess.Popen([sys.executable, str(tmp_path / "prog.py")], env=env, cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        _ready(proc)
        time.sleep(0.5)  # in the blocking call
        proc.send_signal(signal.SIGINT)
        code = _wait(proc, 20, "a program blocked in C, SIGINT at its default action")
    assert code == -signal.SIGINT
    [end] = [r for r in _records(tmp_path / "out") if r["type"] == "end"]
    assert (end["status"], end["exit_code"], end["signal"]) == ("signal", 128 + signal.SIGINT, signal.SIGINT), end


# Review 37: after the run file is ended the watch is gone with the flush thread; a process that then
# hangs in C (an atexit handler registered before recording started runs after the recorder's)
# ignored SIGTERM until SIGKILL. The default action is put back once the end record is written.
HANGS_AT_EXIT = '''\
import atexit, ctypes, os, sys
lock = ctypes.CDLL(None).pthread_mutex_lock
mutex = ctypes.create_string_buffer(64)
def hang():  # a library's atexit cleanup hung in C
    print("READY", os.getpid(), flush=True)
    lock(mutex); lock(mutex)
atexit.register(hang)
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "work", 20),))
'''


def test_a_process_hung_in_c_after_its_end_record_dies_of_sigterm(tmp_path):
    (tmp_path / "prog.py").write_text(HANGS_AT_EXIT)
    with subprocess.Popen([sys.executable, str(tmp_path / "prog.py")], env=_env(SCALEPROBE_OUT=str(tmp_path / "runs")),
                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        _ready(proc)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        code = _wait(proc, 10, "the process hung at exit")
    assert code == -signal.SIGTERM
    [end] = [r for r in _records(tmp_path / "runs") if r["type"] == "end"]
    assert end["status"] == "ok"  # written before the hang: the program had ended


@needs_watch
def test_a_forked_child_does_not_run_the_launchers_last_words():
    """Review 37: the callbacks `at_default_action` registers (the launcher ends its run's record)
    were inherited by forked workers, whose watch then rewrote the launcher's record mid-run."""
    from runtime import signal_watch

    called = []
    remove = signal_watch.at_default_action(called.append)
    try:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(w, str(len(signal_watch._last_words)).encode())
            os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            in_child = f.read()
        os.waitpid(pid, 0)
        assert in_child == "0" and len(signal_watch._last_words) >= 1
    finally:
        remove()


POOL = '''\
import multiprocessing as mp, os, time
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "nap", 3),))
def nap(i):
    if i == 0:
        return os.getpid()
    time.sleep(30)  # in Python: the handler runs at once
if __name__ == "__main__":
    pool = mp.get_context("fork").Pool(2)
    procs = list(pool._pool)
    r = pool.map_async(nap, range(2), chunksize=1)
    time.sleep(1.0)
    pool.terminate()
    print("WORKERS", *[p.exitcode for p in procs], flush=True)
'''


def test_a_pool_worker_stopped_under_the_launcher_writes_its_end_record(tmp_path):
    """Review 38 #4: under the launcher a forked worker's SIGTERM handler chain ends in the launcher's,
    which in a worker ends the process as the default action would; the recorder only flushed
    before it, so the worker's file had no end record (without the launcher it had one)."""
    (tmp_path / "prog.py").write_text(POOL)
    p = subprocess.run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), str(tmp_path / "prog.py")],
                       env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    # either worker may take the sleeping task; the idle one may be leaving its loop for good as the
    # signal comes: -15 or 0, as uninstrumented
    [line] = [ln for ln in p.stdout.splitlines() if ln.startswith("WORKERS ")]
    assert p.returncode == 0 and "-15" in line.split()[1:], (p.stdout, p.stderr)
    ends = {}
    for path in (tmp_path / "runs").rglob("*.jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        [end] = [r for r in records if r["type"] == "end"]
        ends[path.name] = (end["status"], end["signal"])
    # every file has its end record: the program's `ok`, the sleeping worker's `signal`; the idle
    # worker may be leaving its loop for good (terminate() also sends it the end of its tasks) and
    # end `ok` when the signal comes
    assert len(ends) == 3 and list(ends.values()).count(("signal", signal.SIGTERM)) >= 1, ends


SIGNAL_MID_END = '''\
import os, signal, time
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((0, "function", "work", 3),))
import runtime.recorder as recorder
rec = recorder.get()
write = rec._write
def signalled_write(records, sync, final=False):
    if final:  # the end record's write, at exit: SIGTERM comes to this very thread meanwhile
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the Python handler runs here
    return write(records, sync, final=final)
rec._write = signalled_write
'''


def test_a_signal_during_the_end_records_write_waits_for_it(tmp_path):
    """Review 38: a SIGTERM that came to the thread writing the end record (a Pool worker stopped as
    it exited) ended the process before the record was written."""
    (tmp_path / "prog.py").write_text(SIGNAL_MID_END)
    p = subprocess.run([sys.executable, str(tmp_path / "prog.py")], env=_env(SCALEPROBE_OUT=str(tmp_path / "runs")),
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGTERM, p.stderr  # the signal still ends it, once the record is whole
    [end] = [r for r in _records(tmp_path / "runs") if r["type"] == "end"]
    assert end["status"] == "ok"  # the program had ended when the signal came
