"""Review 33: P2POp/batch_isend_irecv and torch.distributed.pipelining (H2), torch.compile of code
with collectives (H3), async point-to-point timed to its wait (M4), DDP's python reducer (M10) and
no GPU events for async calls (L1). Programs run on gloo, on CPU."""
import importlib.util
import subprocess
import sys
import textwrap

import pytest

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

from .test_comm import REPO

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")

# A hand-instrumented program, as comm_app.py: one region, `work`, around the code under test.
HEAD = '''
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "app.py", ((0, "function", "work", 10),))
import sys, time
import torch
import torch.distributed as dist

rank, world = int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo", init_method=f"file://{sys.argv[1]}", rank=rank, world_size=world)
peer = 1 - rank
'''
# What a body that does not call `work()` itself ends with.
TAIL = '''
work()
print("ok", flush=True)
dist.destroy_process_group()
'''


def run_ranks(tmp_path, body, world=2, **env_extra):
    """Run HEAD + body on `world` gloo ranks; returns each rank's stdout and run file."""
    body = textwrap.dedent(body)
    (tmp_path / "app.py").write_text(HEAD + body + ("" if "\nwork()\n" in body else TAIL))
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", **env_extra)
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "app.py"), str(tmp_path / "store"), str(r), str(world)],
                              env=dict(env, SCALEPROBE_OUT=str(tmp_path / f"out{r}")), cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(world)]
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        assert p.returncode == 0, err
        outs.append(out)
    runs = []
    for r in range(world):
        [f] = find_run_files(tmp_path / f"out{r}")
        runs.append(read_run(f))
    return outs, runs


def comm_ops(run):
    ops: dict[str, dict] = {}
    for c in run.comms:
        o = ops.setdefault(c["op"], {"calls": 0, "bytes": 0, "time_ns": 0})
        for k in o:
            o[k] += c[k]
    return ops


P2P = '''
def work():
    if __sp_on__: __sp_enter__(0)
    try:
        t = torch.full((256,), float(rank))
        buf = torch.empty(256)
        dist.barrier()  # together from here: rank 0's wait below is rank 1's sleep
        if rank == 1:
            time.sleep(0.3)  # rank 0 waits for what it receives
        t0 = time.perf_counter_ns()
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, peer), dist.P2POp(dist.irecv, buf, peer)])
        for r in reqs:
            r.wait()
        print("waited", time.perf_counter_ns() - t0, flush=True)  # the call and its waits, on the recorder's clock
        assert buf.tolist() == [float(peer)] * 256
        # send/recv call isend/irecv inside: recorded once, as send/recv
        if rank == 0:
            dist.send(t, peer)
        else:
            dist.recv(buf, peer)
        objs = [None]
        if rank == 0:
            dist.send_object_list([{"a": 1}], dst=1)
        else:
            dist.recv_object_list(objs, src=0)
            assert objs == [{"a": 1}], objs
    finally:
        if __sp_on__: __sp_exit__(0)

'''


@pytest.mark.slow
def test_p2pop_batch_isend_irecv_works_and_is_recorded_once(tmp_path):
    """H2: P2POp(dist.isend, ...) raised ValueError (torch compares with c10d's own isend)."""
    outs, runs = run_ranks(tmp_path, P2P)
    assert [o.splitlines()[-1] for o in outs] == ["ok", "ok"], outs
    waited_ns = int(outs[0].split()[1])  # rank 0's, as it measured them: the call and its waits for rank 1
    ops = comm_ops(runs[0])
    assert ops["batch_isend_irecv"]["calls"] == 1 and ops["batch_isend_irecv"]["bytes"] == 2 * 1024
    # timed until the wait() returned (M4), not only the issue
    assert 0 < 0.9 * waited_ns <= ops["batch_isend_irecv"]["time_ns"], (waited_ns, ops)
    # the isend/irecv that batch_isend_irecv and send/recv make inside are not counted again
    assert ops["send"]["calls"] == 1 and ops["send"]["bytes"] == 1024
    assert ops["isend"]["calls"] == 2 and "irecv" not in ops  # send_object_list's: sizes, then data
    ops1 = comm_ops(runs[1])
    assert ops1["recv"]["calls"] == 1 and ops1["irecv"]["calls"] == 2 and "isend" not in ops1


ISEND = '''
def work():
    if __sp_on__: __sp_enter__(0)
    try:
        t = torch.ones(256)
        buf = torch.empty(256)
        dist.barrier()  # together from here: rank 0's wait below is rank 1's sleep
        if rank == 1:
            time.sleep(0.3)  # rank 0 waits in its irecv's wait()
        s = dist.isend(t, peer)
        t0 = time.perf_counter_ns()
        r = dist.irecv(buf, peer)
        assert r.wait() is True
        print("waited", time.perf_counter_ns() - t0, flush=True)  # the irecv and its wait, on the recorder's clock
        assert s.wait() is True
    finally:
        if __sp_on__: __sp_exit__(0)

work()
dist.destroy_process_group()
'''


@pytest.mark.slow
def test_async_p2p_is_timed_until_its_wait_returns(tmp_path):
    """M4: gloo's isend/irecv Works have no future; their calls were timed to issue only."""
    outs, runs = run_ranks(tmp_path, ISEND)
    waited_ns = int(outs[0].split()[1])  # rank 0's, as it measured it
    ops = comm_ops(runs[0])
    assert ops["isend"]["calls"] == ops["irecv"]["calls"] == 1, ops
    assert 0 < 0.9 * waited_ns <= ops["irecv"]["time_ns"], (waited_ns, ops)


DROPPED = '''
def work():
    if __sp_on__: __sp_enter__(0)
    try:
        t = torch.ones(4)
        buf = torch.empty(4)
        if rank == 0:
            w = dist.isend(t, peer)
        else:
            dist.irecv(buf, peer).wait()
        dist.barrier()
        if rank == 0:
            del w  # dropped unwaited, once done (gloo loses the send of a Work deleted before it completes)
        dist.barrier()  # records the dropped one, with its issue time
    finally:
        if __sp_on__: __sp_exit__(0)

work()
dist.destroy_process_group()
'''


@pytest.mark.slow
def test_an_isend_dropped_unwaited_is_still_recorded(tmp_path):
    """Not a finding: the M4 fix must not lose a call whose Work the program never waits for."""
    outs, runs = run_ranks(tmp_path, DROPPED)
    assert comm_ops(runs[0])["isend"]["calls"] == 1
    assert comm_ops(runs[1])["irecv"]["calls"] == 1


PIPE = '''
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

torch.manual_seed(0)
layer = torch.nn.Linear(8, 8)
mb = torch.empty(2, 8)  # shapes given: the metadata inference hangs on gloo, with or without scaleprobe
stage = PipelineStage(layer, rank, world, torch.device("cpu"), input_args=mb, output_args=mb)
sched = ScheduleGPipe(stage, n_microbatches=2, loss_fn=(lambda y, _: y.sum()) if rank == 1 else None)

def work():
    if __sp_on__: __sp_enter__(0)
    try:
        for _ in range(2):
            if rank == 0:
                sched.step(torch.randn(4, 8))
            else:
                sched.step(target=torch.zeros(4, 8))
    finally:
        if __sp_on__: __sp_exit__(0)

'''


@pytest.mark.slow
def test_pipelining_runs_and_its_p2p_is_recorded(tmp_path):
    """H2: torch.distributed.pipelining builds P2POp(dist.isend/irecv, ...)."""
    outs, runs = run_ranks(tmp_path, PIPE)
    assert all(o.startswith("ok") for o in outs)
    first, last = comm_ops(runs[0]), comm_ops(runs[1])
    assert first["isend"]["calls"] == last["irecv"]["calls"] == 4, (first, last)  # 2 steps x 2 microbatches
    assert first["isend"]["bytes"] == 4 * 2 * 8 * 4
    assert all(o["time_ns"] > 0 for o in [*first.values(), *last.values()])


COMPILE = '''
import torch._dynamo

def fn(t):
    dist.all_reduce(t)
    return t * 2

def work():
    if __sp_on__: __sp_enter__(0)
    try:
        out = torch.compile(fn, backend="eager", fullgraph=True)(torch.ones(4))
        assert out.tolist() == [2.0 * world] * 4, out
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        torch.compile(fn, backend="eager")(torch.ones(4))
        print("graph breaks", dict(torch._dynamo.utils.counters["graph_break"]), flush=True)
        fn(torch.ones(4))  # eager: recorded
    finally:
        if __sp_on__: __sp_exit__(0)

work()
dist.destroy_process_group()
'''


@pytest.mark.slow
def test_torch_compile_of_a_function_with_a_collective(tmp_path):
    """H3: dynamo failed on the wrapper (fullgraph) or fell back to eager (graph break)."""
    outs, runs = run_ranks(tmp_path, COMPILE, world=1)
    assert "graph breaks {}" in outs[0], outs[0]
    assert comm_ops(runs[0])["all_reduce"]["calls"] == 1  # compiled calls are not recorded


DDP_PY = '''
import torch._dynamo
torch._dynamo.config.optimize_ddp = "python_reducer"

def work():
    if __sp_on__: __sp_enter__(0)
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
        model(torch.randn(2, 4)).sum().backward()
        assert model.module.weight.grad is not None
    finally:
        if __sp_on__: __sp_exit__(0)

'''


@pytest.mark.slow
def test_ddp_with_the_python_reducer(tmp_path):
    """M10: the python reducer calls comm hooks as hook(state, (grad, param)); ours took a bucket."""
    outs, runs = run_ranks(tmp_path, DDP_PY, world=1)
    assert outs[0].startswith("ok")


GPU_EVENTS = '''
from runtime import recorder

class Timer:  # stands in for runtime.gpu.GpuTimer: counts the events started and stopped
    error = None

    def __init__(self):
        self.starts = self.stops = 0

    def start(self):
        self.starts += 1
        return object()

    def stop(self, started, target, chain=None):
        self.stops += 1
        target["gpu_ns"] = None
        return True

    def resolve(self, wait=False):
        return 0

    def peak_memory(self):
        return None

def work():
    if __sp_on__: __sp_enter__(0)
    try:
        t = torch.ones(4)
        dist.all_reduce(t)
        dist.all_reduce(t, async_op=True).wait()
        dist.all_reduce(t, dist.ReduceOp.SUM, None, True).wait()  # async_op given by position
        dist.broadcast(t, 0, async_op=True).wait()
        dist.barrier()
    finally:
        if __sp_on__: __sp_exit__(0)

rec = recorder.get()
timer = rec.gpu = Timer()
work()
rec.gpu = None
print("events", timer.starts, timer.stops, flush=True)
dist.destroy_process_group()
'''


@pytest.mark.slow
def test_async_collectives_take_no_gpu_event(tmp_path):
    """L1: an async call's start event was never stopped nor given back. L2: nor does a sync call
    of CPU tensors take one (no GPU stream runs it); nor, since review 97 LOW-3, the barrier, which
    has no tensor, on a gloo group (it took one, timing whatever the stream ran)."""
    outs, runs = run_ranks(tmp_path, GPU_EVENTS, world=1)
    assert "events 0 0" in outs[0], outs[0]


def test_gpu_events_only_for_sync_calls_that_may_run_on_a_gpu(monkeypatch):
    """Review 33 L2: in a program that uses CUDA, a gloo collective of CPU tensors got CUDA events,
    which timed whatever else the stream ran meanwhile."""
    import threading
    from types import SimpleNamespace

    from runtime import _backend, comm

    monkeypatch.setitem(sys.modules, "torch.distributed", SimpleNamespace(is_initialized=lambda: False))
    _backend.impl.ensure_capacity(200)

    class Timer:
        starts = stops = 0

        def start(self):
            self.starts += 1
            return object()

        def stop(self, token, target, chain=None):
            self.stops += 1
            return True

        def release(self, token):
            self.starts -= 1  # given back: as if never taken

    def tensor(cuda):
        return SimpleNamespace(is_cuda=cuda, numel=lambda: 4, element_size=lambda: 4)

    def all_reduce(tensor, op=None, group=None, async_op=False):
        return None

    def all_gather(tensor_list, tensor, group=None, async_op=False):
        return None

    def events(op, fn, params, *args, **kwargs):
        timer = Timer()
        rec = SimpleNamespace(on=True, gpu=timer, comm_spans=comm.CommSpans(), comm_lock=threading.Lock(), comm={})
        comm._wrap(rec, op, fn, 151, params)(*args, **kwargs)
        return timer.starts

    reduce_params = ["tensor", "op", "group", "async_op"]
    assert events("all_reduce", all_reduce, reduce_params, tensor(True)) == 1
    assert events("all_reduce", all_reduce, reduce_params, tensor(False)) == 0
    assert events("all_reduce", all_reduce, reduce_params, tensor=tensor(False)) == 0
    # an async call of CUDA tensors takes one, timed to its future's callback; with no future (as
    # here) nothing marks its end on a stream, and the event goes back
    assert events("all_reduce", all_reduce, reduce_params, tensor(True), async_op=True) == 0
    assert events("all_reduce", all_reduce, reduce_params, tensor(False), async_op=True) == 0
    assert events("all_reduce", all_reduce, reduce_params, None) == 1  # no tensor: not known to be CPU
    gather_params = ["tensor_list", "tensor", "group", "async_op"]
    assert events("all_gather", all_gather, gather_params, [tensor(False)] * 2, tensor(False)) == 0
    assert events("all_gather", all_gather, gather_params, [tensor(False), tensor(True)], tensor(True)) == 1


def test_a_failed_sync_call_gives_its_gpu_event_back(monkeypatch):
    """A sync call that raised kept its start event out of the pool for good."""
    import threading
    from types import SimpleNamespace

    from runtime import _backend, comm

    monkeypatch.setitem(sys.modules, "torch.distributed", SimpleNamespace(is_initialized=lambda: False))
    _backend.impl.ensure_capacity(200)

    class Timer:
        def __init__(self):
            self.started, self.released = [], []

        def start(self):
            self.started.append(object())
            return self.started[-1]

        def stop(self, token, target, chain=None):
            return True

        def release(self, token):
            self.released.append(token)

    timer = Timer()
    rec = SimpleNamespace(on=True, gpu=timer, comm_spans=comm.CommSpans(), comm_lock=threading.Lock(), comm={})

    def all_reduce(tensor, op=None, group=None, async_op=False):
        raise RuntimeError("a peer died")

    wrapped = comm._wrap(rec, "all_reduce", all_reduce, 151, ["tensor", "op", "group", "async_op"])
    with pytest.raises(RuntimeError, match="a peer died"):
        wrapped(None)
    assert timer.released == timer.started and len(timer.started) == 1


def test_gpu_time_that_resolves_after_its_flush_goes_into_the_next():
    """Review 33 L2: a collective's CUDA events complete after the flush that took its summary; their
    time was added to a summary already written, and lost. The flush after writes it, in a record of
    0 calls, and every record says how many calls its `gpu_ns` covers (`gpu_calls`)."""
    import threading
    from types import SimpleNamespace

    from runtime import comm, gpu
    from runtime.recorder import Recorder

    rec = SimpleNamespace(comm_spans=comm.CommSpans(), comm_lock=threading.Lock(), comm={}, comm_late=[], finishing=False)
    first, second = {"gpu_ns": None}, {"gpu_ns": None}
    comm.record(rec, "all_reduce", 64, 2, 1000, (5,), first)
    comm.record(rec, "all_reduce", 64, 2, 1000, (5,), second)
    gpu._settle(first, 2.0)  # 2 ms resolved before the flush
    taken, rec.comm = rec.comm, {}
    [r1] = Recorder._comm_records(rec, 1, taken)
    assert (r1["calls"], r1["gpu_ns"], r1["gpu_calls"]) == (2, 2_000_000, 1)
    assert Recorder._comm_records(rec, 2, {}) == []  # nothing resolved since
    gpu._settle(second, 3.0)
    [r3] = Recorder._comm_records(rec, 3, {})
    assert (r3["calls"], r3["bytes"], r3["time_ns"], r3["gpu_ns"], r3["gpu_calls"]) == (0, 0, 0, 3_000_000, 1)
    assert (r3["op"], r3["callpath"], r3["group_size"], r3["flush"]) == ("all_reduce", [5], 2, 3)
    assert rec.comm_late == [] and Recorder._comm_records(rec, 4, {}) == []  # all read: forgotten
    # an interval that cannot be read is no longer waited for either
    third = {"gpu_ns": None}
    comm.record(rec, "broadcast", 8, 2, 10, (6,), third)
    taken, rec.comm = rec.comm, {}
    [r5] = Recorder._comm_records(rec, 5, taken)
    assert r5["gpu_ns"] is None and r5["gpu_calls"] == 0 and len(rec.comm_late) == 1
    gpu._drop(third)
    assert Recorder._comm_records(rec, 6, {}) == [] and rec.comm_late == []


@pytest.mark.parametrize("how", ["cannot", "at_once"])
def test_a_collectives_gpu_interval_is_never_waited_for_in_vain(monkeypatch, how):
    """Review 37: a call whose end event could not be recorded (`stop` False), or whose interval was
    read before its summary was attached, stayed an unread interval of its summary for the rest of
    the run (and the second lost its time)."""
    import threading
    from types import SimpleNamespace

    from runtime import _backend, comm, gpu
    from runtime.recorder import Recorder

    monkeypatch.setitem(sys.modules, "torch.distributed", SimpleNamespace(is_initialized=lambda: False))
    _backend.impl.ensure_capacity(200)

    class Timer:
        def start(self):
            return object()

        def stop(self, token, target, chain=None):
            if how == "cannot":
                target["gpu_ns"] = None
                return False
            gpu._settle(target, 4.0)  # the flush thread read it at once: 4 ms
            return True

    rec = SimpleNamespace(on=True, gpu=Timer(), comm_spans=comm.CommSpans(), comm_lock=threading.Lock(), comm={},
                          comm_late=[], finishing=False)

    def all_reduce(tensor, op=None, group=None, async_op=False):
        return None

    comm._wrap(rec, "all_reduce", all_reduce, 151, ["tensor", "op", "group", "async_op"])(None)
    taken, rec.comm = rec.comm, {}
    [r] = Recorder._comm_records(rec, 1, taken)
    assert rec.comm_late == []
    assert (r["gpu_ns"], r["gpu_calls"]) == ((None, 0) if how == "cannot" else (4_000_000, 1))


def test_a_collective_of_cuda_tensors_before_any_loop_is_timed_on_the_gpu(monkeypatch):
    """Seen on an H100 (gpu_check's nccl scenario): GPU timing started with the first step or epoch
    loop only, so the collectives a program ran before it (or in a program without one) had
    `gpu_ns` null. A collective of CUDA tensors now starts it; one of CPU tensors, or of none, does
    not."""
    import threading
    from types import SimpleNamespace

    from runtime import _backend, comm

    monkeypatch.setitem(sys.modules, "torch.distributed", SimpleNamespace(is_initialized=lambda: False))
    _backend.impl.ensure_capacity(200)

    def tensor(cuda):
        return SimpleNamespace(is_cuda=cuda, numel=lambda: 4, element_size=lambda: 4)

    def all_reduce(tensor, op=None, group=None, async_op=False):
        return None

    def call(*args, **kwargs):
        rec = SimpleNamespace(on=True, gpu=None, cfg=SimpleNamespace(gpu="fake", gpu_budget=0),
                              comm_spans=comm.CommSpans(), comm_lock=threading.Lock(), comm={})
        comm._wrap(rec, "all_reduce", all_reduce, 151, ["tensor", "op", "group", "async_op"])(*args, **kwargs)
        [summary] = rec.comm.values()
        return rec, summary

    rec, s = call(tensor(True))
    assert rec.gpu is not None
    assert s[0] == 1 and s[4] + s[5] == 1  # its GPU interval: resolved, or waiting to be read
    rec.gpu.resolve(wait=True)
    assert s[4] == 1 and s[5] == 0
    for args, kwargs in (((tensor(False),), {}), ((None,), {})):
        rec, s = call(*args, **kwargs)
        assert rec.gpu is None and s[4] + s[5] == 0, (args, kwargs)
    rec, s = call(tensor(True), async_op=True)  # starts it; no future here to end an interval with
    assert rec.gpu is not None and s[4] + s[5] == 0
