"""What the first run of benchmarks/gpu_check.py on a GPU (an H100, NCCL 2.28) showed about the GPU
time of communication: async collectives and DDP's buckets had none, and intervals of collectives
queued together each counted the wait behind the others. Fakes stand in for CUDA and NCCL here."""
import sys
import threading
from types import SimpleNamespace

import pytest

from runtime import _backend, comm
from runtime.gpu import FakeBackend, GpuTimer


@pytest.fixture
def no_dist(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.distributed", SimpleNamespace(is_initialized=lambda: False))
    _backend.impl.ensure_capacity(200)


def fake_tensor(cuda=True, n=4):
    return SimpleNamespace(is_cuda=cuda, numel=lambda: n, element_size=lambda: 4)


class Future:
    """A completed future, as NCCL's is once the call is queued: callbacks run at once."""

    def __init__(self, value=None, error=None):
        self._value, self._error = value, error

    def value(self):
        if self._error is not None:
            raise self._error
        return self._value

    def add_done_callback(self, cb):
        cb(self)

    def then(self, cb):
        try:
            return Future(cb(self))
        except Exception as e:  # noqa: BLE001 - a failed callback fails the chained future
            return Future(error=e)


class Work:
    def __init__(self, fut):
        self.fut = fut

    def get_future(self):
        return self.fut


def recorder(timer):
    return SimpleNamespace(on=True, gpu=timer, cfg=SimpleNamespace(gpu="fake", gpu_budget=0),
                           comm_spans=comm.CommSpans(), comm_lock=threading.Lock(), comm={})


# ----- GpuTimer: chains ---------------------------------------------------------------------------

def test_an_interval_of_a_chain_begins_where_the_chains_previous_one_ended():
    """Four async all-reduces in flight at once summed to 1.6x their span on an H100: each was
    charged its wait behind the others. A chain's interval now begins no earlier than the previous
    one of the same chain ended; other chains and unchained intervals are not clipped."""
    b = FakeBackend(tick_ns=1000)
    timer = GpuTimer(b)
    starts = [timer.start() for _ in range(4)]  # recorded at 1, 2, 3, 4 us
    targets = [{"gpu_ns": None} for _ in range(4)]
    assert timer.stop(starts[0], targets[0], chain="g")  # ends at 5 us
    assert timer.stop(starts[1], targets[1], chain="g")  # 6 us: began at 2, its chain's last ended at 5
    assert timer.stop(starts[2], targets[2], chain="h")  # 7 us: another chain
    assert timer.stop(starts[3], targets[3])  # 8 us: no chain
    timer.resolve(wait=True)
    assert [t["gpu_ns"] for t in targets] == [4000, 1000, 4000, 4000]
    # a chain's last end event stays out of the pool (the next interval will compare with it); an
    # end that served as the next one's floor is back in it (review 97 LOW-6)
    free = timer.pools[0][0]
    assert not any(e is timer.chains[(0, "g")] or e is timer.chains[(0, "h")] for e in free)
    assert len(free) == 6  # the 4 starts, the unchained end and the first interval's of chain g
    assert len({id(e) for e in free}) == 6


def test_a_chains_previous_end_that_is_later_or_unfinished_clips_nothing():
    b = FakeBackend(tick_ns=1000, auto=False)
    timer = GpuTimer(b)
    s0, s1 = timer.start(), timer.start()  # 1, 2 us
    t0, t1 = {"gpu_ns": None}, {"gpu_ns": None}
    timer.stop(s1, t1, chain="g")  # 3 us
    timer.stop(s0, t0, chain="g")  # 4 us: its floor (3 us) is after its start: clipped to 1 us
    b.advance(4)
    timer.resolve()
    assert (t1["gpu_ns"], t0["gpu_ns"]) == (1000, 1000)
    # an end event of the chain not yet complete when the next interval resolves: no clipping
    s2 = timer.start()  # 5 us
    t2 = {"gpu_ns": None}
    floor = timer.chains[(0, "g")]
    timer.stop(s2, t2, chain="g")  # 6 us
    floor.seq = 10 ** 9  # as if its stream had not got there yet
    b.advance(2)
    timer.resolve()
    assert t2["gpu_ns"] == 1000


# ----- comm: async calls and DDP buckets -----------------------------------------------------------

class Timer:
    """Stands in for GpuTimer: what was started, stopped (with which chain) and given back."""

    error = None

    def __init__(self):
        self.started, self.stopped, self.released = [], [], []

    def start(self):
        self.started.append(object())
        return self.started[-1]

    def stop(self, token, target, chain=None):
        self.stopped.append((token, chain))
        target["gpu_ns"] = 1234
        s = target.pop("summary", None)
        if s is not None:
            s[3] += 1234
            s[4] += 1
            s[5] -= 1
        return True

    def release(self, token):
        self.released.append(token)


def all_reduce_returning(result):
    def all_reduce(tensor, op=None, group=None, async_op=False):
        return result
    return all_reduce


PARAMS = ["tensor", "op", "group", "async_op"]


def test_an_async_collective_of_cuda_tensors_is_timed_to_its_futures_callback(no_dist):
    """Async collectives had no GPU time on an H100 (they took no event). Now the end event is
    recorded in the future's callback: with CUDA tensors it runs on a stream that waits for the call
    (torch.futures), so the interval ends with the collective, in the group's chain."""
    timer = Timer()
    rec = recorder(timer)
    group = object()
    w = comm._wrap(rec, "all_reduce", all_reduce_returning(Work(Future())), 151, PARAMS)
    w(fake_tensor(), None, group, True)
    [s] = rec.comm.values()
    assert s[0] == 1 and s[4] == 1 and s[5] == 0
    assert timer.stopped == [(timer.started[0], ("group", id(group)))] and not timer.released


def test_an_async_collective_without_a_future_or_of_cpu_tensors_takes_no_interval(no_dist):
    timer = Timer()
    rec = recorder(timer)
    comm._wrap(rec, "all_reduce", all_reduce_returning(None), 151, PARAMS)(fake_tensor(), async_op=True)
    assert len(timer.started) == 1 and timer.released == timer.started and not timer.stopped
    timer = Timer()
    rec = recorder(timer)
    comm._wrap(rec, "all_reduce", all_reduce_returning(Work(Future())), 151, PARAMS)(fake_tensor(False), async_op=True)
    assert not timer.started and not timer.stopped


def test_a_failed_async_collective_gives_its_event_back(no_dist):
    timer = Timer()
    rec = recorder(timer)
    w = comm._wrap(rec, "all_reduce", all_reduce_returning(Work(Future(error=RuntimeError("peer died")))), 151, PARAMS)
    w(fake_tensor(), async_op=True)
    [s] = rec.comm.values()
    assert s[6] == 1 and s[4] == s[5] == 0  # failed, no GPU interval
    assert timer.released == timer.started and not timer.stopped


def test_point_to_point_calls_are_in_no_chain(no_dist):
    timer = Timer()
    rec = recorder(timer)

    def isend(tensor, dst=None, group=None, tag=0):
        return Work(Future())

    comm._wrap(rec, "isend", isend, 151, ["tensor", "dst", "group", "tag"])(fake_tensor(), 1)
    assert timer.stopped == [(timer.started[0], None)]


def test_a_sync_collective_is_in_its_groups_chain(no_dist):
    timer = Timer()
    rec = recorder(timer)
    comm._wrap(rec, "all_reduce", all_reduce_returning(None), 151, PARAMS)(fake_tensor())
    assert timer.stopped == [(timer.started[0], ("group", id(None)))]


def bucket(cuda=True):
    buf = fake_tensor(cuda, n=1024)
    return SimpleNamespace(buffer=lambda: buf)


def ddp_state(rec, user_hook, group):
    state = comm._HookState(group, 7, rec)
    state.user_hook = user_hook
    state.group_size = 2
    return state


def hook_calling(rec, result=None, error=None):
    """A user's DDP hook that calls a wrapped all_reduce (inside our hook: not recorded itself)."""
    wrapped = comm._wrap(rec, "all_reduce", all_reduce_returning(None), 151, PARAMS)

    def hook(state, b):
        wrapped(b.buffer(), async_op=True)
        if error is not None:
            raise error
        return result if result is not None else Future([b.buffer()])
    return hook


def test_ddp_buckets_get_a_gpu_interval_in_the_groups_chain():
    """DDP's gradient all-reduce, usually the bulk of a data-parallel step's communication, had no
    GPU time. Its interval now runs from the hook's first collective to its future's callback (not
    from the hook's start: the CPU's way through the hooks to the call, the GPU idle, added 140 us a
    bucket on an H100)."""
    pytest.importorskip("torch.distributed.algorithms.ddp_comm_hooks")
    timer = Timer()
    rec = recorder(timer)
    group = object()
    fut = comm._ddp_hook(ddp_state(rec, hook_calling(rec), group), bucket())
    assert fut.value() is not None
    [s] = rec.comm.values()  # the bucket only: the all_reduce inside the hook is not a call of its own
    assert s[0] == 1 and s[1] == 4096 and s[4] == 1 and s[5] == 0
    assert len(timer.started) == 1 and timer.stopped == [(timer.started[0], ("group", id(group)))]
    # a bucket on the CPU (gloo), or a hook that makes no collective call: no interval
    for b, hook in ((bucket(False), hook_calling), (bucket(), lambda r: lambda st, bk: Future([bk.buffer()]))):
        timer = Timer()
        rec = recorder(timer)
        comm._ddp_hook(ddp_state(rec, hook(rec), group), b)
        assert not timer.started and not timer.stopped
        [s] = rec.comm.values()
        assert s[0] == 1 and s[4] + s[5] == 0


def test_a_failed_ddp_bucket_or_a_raising_hook_gives_its_event_back():
    pytest.importorskip("torch.distributed.algorithms.ddp_comm_hooks")
    timer = Timer()
    rec = recorder(timer)
    fut = comm._ddp_hook(ddp_state(rec, hook_calling(rec, result=Future(error=RuntimeError("peer died"))), None),
                         bucket())
    with pytest.raises(RuntimeError):
        fut.value()
    assert timer.released == timer.started and len(timer.started) == 1 and not timer.stopped
    timer = Timer()
    rec = recorder(timer)
    with pytest.raises(ValueError):
        comm._ddp_hook(ddp_state(rec, hook_calling(rec, error=ValueError("the user's hook")), None), bucket())
    assert timer.released == timer.started and len(timer.started) == 1
    assert not comm._inside.on and comm._inside.bucket is None  # the thread's state restored


# ----- review 97 -------------------------------------------------------------------------------------

def test_the_default_group_is_one_chain_whether_named_or_not(monkeypatch):
    """LOW-2: calls that passed no group and those that passed the default group (DDP's buckets,
    `group=dist.group.WORLD`) made two chains, so their overlap was not clipped."""
    world = object()
    monkeypatch.setitem(sys.modules, "torch.distributed", SimpleNamespace(
        is_initialized=lambda: False, group=SimpleNamespace(WORLD=world), get_backend=lambda group=None: "nccl"))
    _backend.impl.ensure_capacity(200)
    timer = Timer()
    rec = recorder(timer)
    w = comm._wrap(rec, "all_reduce", all_reduce_returning(None), 151, PARAMS)
    w(fake_tensor())
    w(fake_tensor(), group=world)
    assert [c for _, c in timer.stopped] == [("group", id(world))] * 2


def test_a_call_without_tensors_is_timed_on_an_nccl_group_only(monkeypatch):
    """LOW-3: a barrier on a gloo group took GPU events, timing whatever the stream ran."""
    _backend.impl.ensure_capacity(200)

    def barrier(group=None, async_op=False, device_ids=None):
        return None

    for backend, events in (("gloo", 0), ("nccl", 1), ("cpu:gloo,cuda:nccl", 1)):
        monkeypatch.setitem(sys.modules, "torch.distributed", SimpleNamespace(
            is_initialized=lambda: False, get_backend=lambda group=None, b=backend: b))
        timer = Timer()
        comm._wrap(recorder(timer), "barrier", barrier, 151, ["group", "async_op", "device_ids"])()
        assert len(timer.started) == events, backend


def test_a_thread_that_never_ran_a_hook_reads_the_defaults():
    """LOW-4: `getattr(_inside, "bucket", None)` on a thread that never set it raised and caught an
    AttributeError inside, 0.5 us on every nested call: the attributes have class defaults."""
    import threading

    seen = []
    t = threading.Thread(target=lambda: seen.append((comm._inside.on, comm._inside.bucket, comm._inside.pickled)))
    t.start()
    t.join()
    assert seen == [(False, None, None)]


def test_two_threads_first_collectives_start_one_gpu_timer(monkeypatch):
    """LOW-5: two threads whose first collectives of CUDA tensors ran together each made a timer;
    the intervals of the one not kept were never read."""
    import threading
    import time

    from runtime import series

    made = []
    real = series._start_gpu

    def slow_start(rec):
        time.sleep(0.05)  # widen the window in which the other thread could start its own
        made.append(1)
        real(rec)

    monkeypatch.setattr(series, "_start_gpu", slow_start)
    rec = SimpleNamespace(gpu=None, cfg=SimpleNamespace(gpu="fake", gpu_budget=0))
    ts = [threading.Thread(target=series.maybe_start_gpu, args=(rec,)) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(made) == 1 and rec.gpu is not None
