"""One scenario of benchmarks/gpu_check.py, in a process of its own (not instrumented itself):

    python runner.py SCENARIO RESULT.json '{"param": value, ...}'

It imports the instrumented workload modules from $GPU_CHECK_BUILD (and, for the scenarios that
compare, the plain ones from $GPU_CHECK_SRC), runs them and writes what it measured to RESULT.json.
The runtime writes its run file to $SCALEPROBE_OUT as in any instrumented program.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness as H  # noqa: E402  (imports torch, as the program would before its loops)
import torch  # noqa: E402

BUILD = os.environ["GPU_CHECK_BUILD"]
SRC = os.environ["GPU_CHECK_SRC"]


def instrumented(name: str):
    if BUILD not in sys.path:
        sys.path.insert(0, BUILD)
    return importlib.import_module(name)


def plain(name: str):
    """The workload module as written, without probes, under another module name."""
    sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree
    spec = importlib.util.spec_from_file_location(f"plain_{name}", os.path.join(SRC, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.dont_write_bytecode = False
    return mod


def ns() -> int:
    return time.perf_counter_ns()


def timing(res: H.Results, p: dict) -> None:
    T = instrumented("timing")
    H.init_cuda()
    cycles = H.cycles_for(p["sleep_ms"])
    cal0 = H.calibrate(cycles)
    res.put(cycles=cycles, calibrated_ms_before=cal0)
    syncs = H.SyncCounter()
    t0 = ns()
    T.gpu_bound(p["epochs"], p["steps"], p["per_step"], cycles, syncs)
    res.put(gpu_bound_call_ns=ns() - t0, syncs_in_loop=syncs.total, runtime_syncs_in_loop=syncs.runtime,
            runtime_sync_sites=syncs.where)
    res.put(calibrated_ms_after=H.calibrate(cycles))
    x = torch.zeros(16, device=H.DEVICE)
    T.cpu_bound(p["cpu_steps"], p["cpu_sleep_ms"] / 1e3, x)
    if not H.FAKE:
        torch.cuda.reset_peak_memory_stats()  # the program's own peak statistics, from here on
    T.memory(p["mem_steps"], p["big_bytes"], p["small_bytes"])
    res.put(program_max_memory_allocated=None if H.FAKE else int(torch.cuda.max_memory_allocated()))
    try:
        res.put(event_pair_us=event_pair_cost())
    except Exception as e:  # noqa: BLE001 - the timer's API changed: a number less, not a failed scenario
        res.put(event_pair_us=None, event_pair_error=repr(e))


def event_pair_cost(n: int = 2000) -> float:
    """Microseconds of CPU per start+stop of the runtime's pooled event timer, resolved lazily."""
    from runtime.gpu import CudaBackend, FakeBackend, GpuTimer

    t = GpuTimer(FakeBackend() if H.FAKE else CudaBackend(torch))
    for _ in range(50):
        t.stop(t.start(), {})
    H.synchronize()
    t.resolve()
    t0 = ns()
    for _ in range(n):
        t.stop(t.start(), {})
    dt = ns() - t0
    t.resolve(wait=True)
    return dt / n / 1e3


def overhead(res: H.Results, p: dict) -> None:
    I = instrumented("overhead")
    P = plain("overhead")
    H.init_cuda()
    size = p["size"]
    g = torch.Generator().manual_seed(0)
    w = torch.randn(size, size, generator=g).to(H.DEVICE).requires_grad_()
    opt = torch.optim.SGD([w], lr=1e-6)
    x = torch.randn(p["small"], p["small"], generator=g).to(H.DEVICE)
    ws = [(torch.randn(p["small"], p["small"], generator=g) / p["small"] ** 0.5).to(H.DEVICE) for _ in range(p["layers"])]
    programs = {
        "matmul": lambda m: m.matmul_loop(w, opt, p["steps"], size),
        "many_regions": lambda m: m.many_regions_loop(x, ws, p["steps"], p["leaves"]),
    }
    for name, call in programs.items():
        times: dict[str, list[int]] = {"plain": [], "instrumented": []}
        call(P)  # warm-up: allocator, cuBLAS handles, the instrumented copy's first-call set-up
        call(I)
        for r in range(p["reps"]):
            order = (("plain", P), ("instrumented", I)) if r % 2 == 0 else (("instrumented", I), ("plain", P))
            for label, mod in order:
                t0 = ns()
                call(mod)
                times[label].append(ns() - t0)
        res.put(**{name: times})


def nccl(res: H.Results, p: dict) -> None:
    import torch.distributed as dist  # before the instrumented module: patched at its import

    W = instrumented("nccl_work")
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", rank))
    if H.FAKE:
        backend = "gloo"
    else:
        backend = "nccl"
        torch.cuda.set_device(local)
        H.init_cuda()
    dist.init_process_group(backend, rank=rank, world_size=world)
    res.put(rank=rank, world_size=world, backend=backend,
            nccl_timing=os.environ.get("TORCH_NCCL_ENABLE_TIMING"))
    n = p["mbytes"] * (1 << 20) // 4
    t = torch.ones(n, device=H.device())
    out = torch.empty(n * world, device=H.device())
    W.warmup(t, out, 3)
    res.put(bytes=n * 4, sync_allreduce=W.sync_allreduce(t, p["calls"]))
    res.put(async_allreduce=W.async_allreduce(t, p["calls"]))
    batch = [torch.ones(n // p["batch"], device=H.device()) for _ in range(p["batch"])]
    res.put(async_batch=W.async_batch(batch, p["calls"]), batch=p["batch"])
    del batch
    res.put(sync_allgather=W.sync_allgather(out, t, p["calls"]))
    width = p["ddp_width"]
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(p["ddp_layers"])]).to(H.device())
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=None if H.FAKE else [local],
                                                    bucket_cap_mb=p["ddp_bucket_mb"])
    hook = W.BucketHook()
    ddp.register_comm_hook(None, hook)
    param_bytes = sum(q.numel() * q.element_size() for q in model.parameters())
    t0 = ns()
    W.ddp_train(ddp, p["ddp_steps"], width)
    res.put(ddp_steps=p["ddp_steps"], ddp_param_bytes=param_bytes, ddp_train_ns=ns() - t0,
            ddp_hooked=getattr(ddp, "__sp_hook_state__", None) is not None, ddp_buckets=len(hook.works))
    res.put(ddp_reference=hook.per_step(p["ddp_steps"]))
    dist.barrier()
    dist.destroy_process_group()


def _robust(res: H.Results, p: dict, call) -> None:
    H.init_cuda()
    res.put(plain=call(plain("robust")))
    res.put(instrumented=call(instrumented("robust")))


def graph(res: H.Results, p: dict) -> None:
    _robust(res, p, lambda m: m.graph_case(p["steps"], p["size"]))


def compiled(res: H.Results, p: dict) -> None:
    _robust(res, p, lambda m: m.compile_case(p["steps"], p["size"]))


def stream(res: H.Results, p: dict) -> None:
    cycles = H.cycles_for(p["sleep_ms"]) if not H.FAKE else 10_000
    _robust(res, p, lambda m: m.stream_case(p["steps"], p["size"], cycles))


def device2(res: H.Results, p: dict) -> None:
    _robust(res, p, lambda m: m.device_case(p["steps"], p["size"], 1))


def nvtx(res: H.Results, p: dict) -> None:
    I = instrumented("overhead")
    H.init_cuda()
    w = torch.randn(p["size"], p["size"], device=H.DEVICE, requires_grad=True)
    opt = torch.optim.SGD([w], lr=1e-6)
    I.matmul_loop(w, opt, p["steps"], p["size"])
    res.put(done=True)


SCENARIOS = {f.__name__: f for f in (timing, overhead, nccl, graph, compiled, stream, device2, nvtx)}

if __name__ == "__main__":
    name, out, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    r = H.Results(out)
    r.put(scenario=name)
    SCENARIOS[name](r, params)
    r.put(completed=True)
