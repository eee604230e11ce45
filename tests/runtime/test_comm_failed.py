"""Review 49 F1: a communication call that ends by an exception (a peer that died), or that is still in
progress when the run ends (a rank blocked in a collective, stopped by SIGTERM), was left out of the
`comm` records and of the steps' `comm_ns`, while the profile had its time.

Two gloo ranks. Rank 1 dies (`os._exit`) D seconds after rank 0 is known to be inside the call under
test, so that call lasts at least D on rank 0 (the bound the tests use); or, for a rank blocked at
the end, the test sends SIGTERM D seconds after the program said it was blocked.
"""
from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
D = 0.3  # seconds: rank 1 dies, or the test sends SIGTERM, this long after rank 0 is in the call

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
needs_watch = pytest.mark.skipif(importlib.util.find_spec("runtime._sigwatch") is None,
                                 reason="runtime._sigwatch is not built (no C compiler): no watch")

# Hand-instrumented as the instrumentor would: `work` around the calls, a step loop of two steps.
# Step 0 is a barrier on both ranks; in step 1 rank 0 makes the call under test (MODE) and rank 1 dies D
# seconds after `<store>.in` appears (or, MODE "blocked", never joins). `<store>.in` is made once
# the call is known to be in progress: by a thread that sees the main thread inside c10d's
# all_reduce (a sync call: its start is then past), or right before wait() (an async call, issued
# before). Rank 0 catches the error and prints it with its own timing of the call.
PROGRAM = '''\
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, iterate as __sp_iterate__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "app.py", ((0, "function", "work", 10), (1, "step", "steps", 20)))
import datetime, os, sys, threading, time
import torch
import torch.distributed as dist

store, rank, MODE, D = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=120))
MAIN = threading.main_thread().ident
if MODE == "ddp":
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))  # one bucket: 5 floats


def say_when_inside(name, file):
    """Make `<store>.in` once the main thread is inside function `name` of a file named `file`."""
    def watch():
        while True:
            f = sys._current_frames().get(MAIN)
            while f is not None:
                if f.f_code.co_name == name and file in f.f_code.co_filename:
                    open(store + ".in", "w").close()
                    print("BLOCKED", flush=True)
                    return
                f = f.f_back
            time.sleep(0.005)
    threading.Thread(target=watch, daemon=True).start()


def work(step):
    if __sp_on__: __sp_enter__(0)
    try:
        t = torch.ones(4)  # 16 bytes
        if step == 0:
            dist.barrier()
            return
        if rank == 1:
            while not os.path.exists(store + ".in"):
                time.sleep(0.01)
            if MODE == "blocked":
                time.sleep(3600)  # never joins: rank 0 stays blocked until the test's SIGTERM
            time.sleep(D)
            os._exit(0)
        t0 = time.perf_counter_ns()
        try:
            if MODE in ("collective", "blocked"):
                say_when_inside("all_reduce", "distributed_c10d")
                dist.all_reduce(t)
            elif MODE == "ddp":  # the gradient bucket's all-reduce, in autograd's thread
                say_when_inside("_engine_run_backward", "autograd")
                model(t).sum().backward()
            elif MODE == "wait":
                w = dist.irecv(torch.empty(4), 1)  # gloo: a Work without a future, timed to its wait()
                open(store + ".in", "w").close()
                w.wait()
            elif MODE == "async":
                w = dist.all_reduce(t, async_op=True)  # timed until its future completes
                open(store + ".in", "w").close()
                w.wait()
        except Exception as e:
            own = time.perf_counter_ns() - t0
            print("CAUGHT", type(e).__name__, e.__context__ is None, e.__cause__ is None, own, flush=True)
    finally:
        if __sp_on__: __sp_exit__(0)


for step in __sp_iterate__(1, range(2)):
    work(step)
print("DONE", flush=True)
'''


def _start(tmp_path: Path, mode: str) -> list[subprocess.Popen]:
    (tmp_path / "app.py").write_text(PROGRAM)
    env = clean_env(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", SCALEPROBE_QUIET="1")
    return [subprocess.Popen([sys.executable, str(tmp_path / "app.py"), str(tmp_path / "store"), str(r), mode, str(D)],
                             env=dict(env, SCALEPROBE_OUT=str(tmp_path / f"out{r}")), cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()
        p.stderr.close()


def _records(out: Path) -> list[dict]:
    [path] = list(out.rglob("*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def _op(op: str, records: list[dict]) -> dict:
    """The run's comm records of `op`, summed; and the visits of its comm region in the profile."""
    comms = [r for r in records if r["type"] == "comm" and r["op"] == op]
    out = {k: sum(r.get(k, 0) for r in comms) for k in ("calls", "bytes", "time_ns", "failed", "unfinished")}
    rids = {r["id"] for r in records if r["type"] == "region" and r["name"] == f"torch.distributed.{op}"}
    out["visits"] = sum(r["visits"] for r in records if r["type"] == "profile" and r["path"][-1] in rids)
    return out


def _rank0_output(tmp_path, mode):
    """Run both ranks in `mode`; rank 0's stdout and stderr, once it ended well."""
    procs = _start(tmp_path, mode)
    try:
        out, err = procs[0].communicate(timeout=240)
        procs[1].wait(timeout=60)
    finally:
        _stop(procs)
    assert procs[0].returncode == 0, err
    return out, err


@pytest.mark.slow
@pytest.mark.parametrize("mode,op", [("collective", "all_reduce"), ("wait", "irecv"), ("async", "all_reduce")])
def test_a_call_that_raises_is_recorded_as_failed(tmp_path, mode, op):
    out, err = _rank0_output(tmp_path, mode)
    [caught] = [line.split() for line in out.splitlines() if line.startswith("CAUGHT")]
    # the program's own exception, as without scaleprobe: nothing of ours chained to it
    assert caught[2:4] == ["True", "True"], caught
    own_ns = int(caught[4])  # the program's own timing of the call (and its wait), around ours
    records = _records(tmp_path / "out0")
    c = _op(op, records)
    # old: the failed call was in no comm record (an async one: not marked)
    assert (c["calls"], c["bytes"], c["failed"], c["unfinished"]) == (1, 16, 1, 0), c
    assert D * 1e9 <= c["time_ns"] <= own_ns, (c, own_ns)  # up to the exception, not to its issue only
    assert c["visits"] == 1, c  # its visit in the profile (an async call's: the issue)
    assert _op("barrier", records)["calls"] == 1
    # the failed call is communication of its step (old: step 1 had comm_ns 0)
    steps = sorted((r for r in records if r["type"] == "step"), key=lambda r: r["step"])
    assert [s["index"] for s in steps] == [0, 1], steps
    assert D * 1e9 <= steps[1]["comm_ns"] <= steps[1]["duration_ns"], steps[1]


@pytest.mark.slow
def test_a_ddp_bucket_that_fails_is_recorded_as_failed(tmp_path):
    out, err = _rank0_output(tmp_path, "ddp")
    assert "CAUGHT" in out, (out, err)  # backward() raised the all-reduce's error
    comms = [r for r in _records(tmp_path / "out0") if r["type"] == "comm" and r["op"] == "ddp_allreduce"]
    # old: the bucket was recorded, but not as failed
    assert (sum(r["calls"] for r in comms), sum(r.get("failed", 0) for r in comms)) == (1, 1), comms
    assert sum(r["bytes"] for r in comms) == 5 * 4


@pytest.mark.slow
@needs_watch
def test_a_call_blocked_when_sigterm_ends_the_run_counts_up_to_then(tmp_path):
    """Rank 0 blocked in all_reduce (rank 1 never joins); SIGTERM: the signal watch writes the end
    record from the flush thread while the call is still in progress (closed_at_end), and the call
    counts up to then, as its visit in the profile does."""
    procs = _start(tmp_path, "blocked")
    try:
        for line in procs[0].stdout:
            if line.startswith("BLOCKED"):
                break
        else:
            pytest.fail(f"rank 0 ended early: {procs[0].wait()} {procs[0].stderr.read()}")
        time.sleep(D)  # the call has lasted at least D by the time the signal arrives
        procs[0].send_signal(signal.SIGTERM)
        code = procs[0].wait(timeout=60)
        err = procs[0].stderr.read()
    finally:
        _stop(procs)
    assert code == -signal.SIGTERM, (code, err)  # killed by SIGTERM, as uninstrumented
    records = _records(tmp_path / "out0")
    [end] = [r for r in records if r["type"] == "end"]
    assert end["status"] == "signal" and end["closed_at_end"] >= 1, end
    c = _op("all_reduce", records)
    # old: none; the blocked call was in the profile only
    assert (c["calls"], c["bytes"], c["unfinished"], c["failed"], c["visits"]) == (1, 16, 1, 0, 1), c
    assert D * 1e9 <= c["time_ns"] <= end["duration_ns"], (c, end)


FINAL_FLUSH = '''
import sys, threading, time
import torch, torch.distributed
from runtime import comm, recorder

D = float(sys.argv[1])
rec = recorder.start()
assert comm.patch_if_loaded(rec)
rid = rec.new_region("comm", "torch.distributed.all_reduce", "torch/distributed", 0)
inside, release = threading.Event(), threading.Event()


def blocking(tensor, group=None):  # a collective whose peer never comes, until the test lets it go
    inside.set()
    release.wait()


call = comm._wrap(rec, "all_reduce", blocking, rid, ["tensor", "group"])
thread = threading.Thread(target=call, args=(torch.ones(4),))
thread.start()
inside.wait()
time.sleep(D)
rec.finish()  # the end of the run, while the call is in progress in another thread
release.set()
thread.join()
print("LEFT", len(rec.comm), flush=True)  # what the call's own end recorded after the final flush
'''


# A final flush that takes a while between the end record's duration and the communication
# records: the call in progress, begun just after the recorder started, counted up to the later
# moment, was longer than the run (a CI run: 311,990,823 ns against a duration of 310,382,604).
SLOW_FINAL = FINAL_FLUSH.replace("rec.finish()", """from runtime import _backend
take = _backend.impl.take_final_deltas
def slow(*args):
    time.sleep(0.1)
    return take(*args)
_backend.impl.take_final_deltas = slow
rec.finish()""")


@pytest.mark.parametrize("program", [FINAL_FLUSH, SLOW_FINAL], ids=["final", "slow-final"])
def test_the_final_flush_counts_a_call_in_progress_once(tmp_path, program):
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), SCALEPROBE_QUIET="1")
    p = subprocess.run([sys.executable, "-c", program, str(D)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    records = _records(tmp_path / "out")
    [end] = [r for r in records if r["type"] == "end"]
    comms = [r for r in records if r["type"] == "comm"]
    # old: no comm record at all, and the call's end recorded it after the run had ended (LEFT 1)
    assert len(comms) == 1, (comms, p.stdout)
    [c] = comms
    assert (c["op"], c["calls"], c["bytes"], c.get("unfinished"), "failed" in c) == ("all_reduce", 1, 16, 1, False), c
    assert D * 1e9 <= c["time_ns"] <= end["duration_ns"], (c, end)
    assert "LEFT 0" in p.stdout, p.stdout  # counted once: by the final flush, not again when it returned


@pytest.mark.parametrize("raised,fields", [(ValueError, (1, 0)), (KeyboardInterrupt, (0, 1)), (SystemExit, (0, 1))])
def test_a_call_cut_short_by_a_signal_s_exception_is_unfinished_not_failed(monkeypatch, raised, fields):
    """Review 52 F10: the launcher's SIGTERM at --timeout raises SystemExit (KeyboardInterrupt for
    Ctrl-C) inside a blocked call: no failure of the call's own. An error (a peer that died) is."""
    import threading
    from types import SimpleNamespace

    from runtime import _backend, comm
    from runtime.recorder import Recorder

    monkeypatch.setitem(sys.modules, "torch.distributed", SimpleNamespace(is_initialized=lambda: False))
    _backend.impl.ensure_capacity(200)
    rec = SimpleNamespace(on=True, gpu=None, comm_spans=comm.CommSpans(), comm_lock=threading.Lock(), comm={},
                          comm_late=[], finishing=False)

    def all_reduce(tensor, op=None, group=None, async_op=False):
        raise raised(1)

    with pytest.raises(raised):
        comm._wrap(rec, "all_reduce", all_reduce, 151, ["tensor", "op", "group", "async_op"])(None)
    [r] = Recorder._comm_records(rec, 1, rec.comm)
    assert (r["calls"], r.get("failed", 0), r.get("unfinished", 0)) == (1, *fields)
