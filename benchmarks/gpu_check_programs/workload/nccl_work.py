"""Communication workloads: sync and async all_reduce, all_gather_into_tensor and a small DDP
model, each call between a bare CUDA event pair of the program's own."""
import time

import torch
import torch.distributed as dist

import harness as H

AVG = dist.ReduceOp.AVG if not H.FAKE else dist.ReduceOp.SUM  # AVG: real GPU work even at world size 1


def warmup(t, out, n):
    for i in range(n):
        dist.all_reduce(t, op=AVG)
        dist.all_gather_into_tensor(out, t)
    H.synchronize()


def _timed(call):
    """(CPU ns of the call, ms between events around it), with the GPU drained before and after."""
    H.synchronize()
    sp = H.Span()
    sp.start()
    t0 = time.perf_counter_ns()
    w = call()
    t1 = time.perf_counter_ns()
    if w is not None:
        w.wait()
    sp.stop()
    H.synchronize()
    return t1 - t0, sp.ms(), w


def sync_allreduce(t, calls):
    out = []
    for i in range(calls):
        cpu, ms, _ = _timed(lambda: dist.all_reduce(t, op=AVG))
        out.append([cpu, ms, None])
    return out


def async_allreduce(t, calls):
    out = []
    for i in range(calls):
        cpu, ms, w = _timed(lambda: dist.all_reduce(t, op=AVG, async_op=True))
        try:
            dur = float(w._get_duration())
        except Exception:  # noqa: BLE001 - no TORCH_NCCL_ENABLE_TIMING, or a backend without it
            dur = None
        out.append([cpu, ms, dur])
    return out


def _durations(works):
    """NCCL's own GPU durations of `works` in ms (TORCH_NCCL_ENABLE_TIMING=1), or None."""
    try:
        return sum(float(w._get_duration()) for w in works)
    except Exception:  # noqa: BLE001 - no NCCL timing, or a backend without it
        return None


def async_batch(ts, reps):
    """len(ts) async all_reduces in flight at once, then waited for: per call, the event pair around
    the batch and NCCL's durations, each divided by the calls (they run one after another)."""
    out = []
    for i in range(reps):
        H.synchronize()
        sp = H.Span()
        sp.start()
        t0 = time.perf_counter_ns()
        works = [dist.all_reduce(t, op=AVG, async_op=True) for t in ts]
        t1 = time.perf_counter_ns()
        for w in works:
            w.wait()
        sp.stop()
        H.synchronize()
        dur = _durations(works)
        out.append([(t1 - t0) / len(ts), sp.ms() / len(ts), None if dur is None else dur / len(ts)])
    return out


def sync_allgather(out_t, t, calls):
    out = []
    for i in range(calls):
        cpu, ms, _ = _timed(lambda: dist.all_gather_into_tensor(out_t, t))
        out.append([cpu, ms, None])
    return out


def ddp_train(model, steps, width):
    """DDP training steps; its gradient all-reduce is timed by the runtime's comm hook."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, width, device=H.device())
    # scaleprobe: step
    for s in range(steps):
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    H.synchronize()


class BucketHook:
    """The program's own DDP comm hook (scaleprobe's wraps it): an all_reduce with AVG (real GPU work
    at world size 1, where NCCL skips an in-place SUM), keeping each Work for NCCL's duration."""

    def __init__(self):
        self.works = []

    def __call__(self, state, bucket):
        w = dist.all_reduce(bucket.buffer(), op=AVG, async_op=True)
        self.works.append(w)
        return w.get_future().then(lambda f: f.value()[0])

    def per_step(self, steps):
        """[[0, ms, ms]] per step: NCCL's durations of the step's buckets (None without them)."""
        dur = _durations(self.works)
        return [[0, dur / steps, dur / steps] if dur is not None else [0, None, None]] * steps
