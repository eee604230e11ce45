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


def ddp_reference(nbytes, calls):
    """An all_reduce of one tensor of the model's gradient bytes: what one step's buckets move."""
    t = torch.ones(nbytes // 4, device=H.device())
    out = []
    for i in range(calls):
        cpu, ms, _ = _timed(lambda: dist.all_reduce(t))
        out.append([cpu, ms, None])
    return out
