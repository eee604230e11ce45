"""Robustness workloads: an instrumented function captured in a CUDA graph, one compiled with
torch.compile, regions run on a side stream and one that switches the current stream, a region on
a second device. Each returns a
number that the plain and the instrumented copy must agree on."""
import torch

import harness as H


def graph_fwd(x, w):
    return torch.relu(x @ w).sum(dim=0)


def graph_case(steps, size):
    g0 = torch.Generator().manual_seed(0)
    w = torch.randn(size, size, generator=g0).to(H.DEVICE)
    inputs = [torch.randn(size, size, generator=g0).to(H.DEVICE) for _ in range(steps)]
    static_x = torch.zeros(size, size, device=H.DEVICE)
    total = torch.zeros(size, device=H.DEVICE)
    # scaleprobe: step
    for s in range(steps):
        if H.FAKE:
            static_x.copy_(inputs[s])
            total += graph_fwd(static_x, w)
            continue
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up before capture, as torch's docs ask
            for _ in range(2):
                graph_fwd(static_x, w)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_out = graph_fwd(static_x, w)
        static_x.copy_(inputs[s])
        g.replay()
        total += static_out
    H.synchronize()
    return float(total.sum().item())


def compiled_inner(x, w):
    return torch.relu(x @ w)


def compiled_body(x, w):
    return compiled_inner(x, w).sum(dim=0)


def compile_case(steps, size):
    """compiled_body (and compiled_inner, which it calls) compiled with fullgraph=True: the probes
    must not break the graph (dynamo sees them as no-ops), and Triton's kernels run as without them."""
    g0 = torch.Generator().manual_seed(2)
    w = torch.randn(size, size, generator=g0).to(H.DEVICE)
    xs = [torch.randn(size, size, generator=g0).to(H.DEVICE) for _ in range(steps)]
    f = torch.compile(compiled_body, fullgraph=True)
    total = torch.zeros(size, device=H.DEVICE)
    # scaleprobe: step
    for s in range(steps):
        total += f(xs[s], w)
    H.synchronize()
    return float(total.sum().item())


def on_side(x, w):
    return torch.tanh(x @ w)


def switch_to(stream):
    """Entered on one stream, left on another (the stream stays set after it returns)."""
    if not H.FAKE:
        torch.cuda.set_stream(stream)


def stream_case(steps, size, cycles):
    g0 = torch.Generator().manual_seed(1)
    x = torch.randn(size, size, generator=g0).to(H.DEVICE)
    w = torch.randn(size, size, generator=g0).to(H.DEVICE) / size ** 0.5
    main = torch.cuda.current_stream() if not H.FAKE else None
    side = torch.cuda.Stream() if not H.FAKE else None
    H.synchronize()
    acc = torch.zeros((), device=H.DEVICE)
    # scaleprobe: step
    for s in range(steps):
        if H.FAKE:
            y = on_side(x, w)
        else:
            with torch.cuda.stream(side):  # the side stream does not wait for the main one
                y = on_side(x, w)
        H.gpu_sleep(cycles)  # the main stream is busy ...
        switch_to(side)      # ... while this region starts on it and ends on the idle side stream
        switch_to(main)
        if not H.FAKE:
            main.wait_stream(side)
            y.record_stream(main)
        acc = acc + y.sum()
    H.synchronize()
    return float(acc.item())


def on_device(x, w):
    return torch.tanh(x @ w).sum()


def device_case(steps, size, index):
    """Each step runs a region under `torch.cuda.device(index)` with tensors there."""
    g0 = torch.Generator().manual_seed(2)
    dev = H.device(index)
    x = torch.randn(size, size, generator=g0).to(dev)
    w = torch.randn(size, size, generator=g0).to(dev) / size ** 0.5
    total = 0.0
    # scaleprobe: step
    for s in range(steps):
        if H.FAKE:
            total += float(on_device(x, w))
        else:
            with torch.cuda.device(index):
                total += float(on_device(x, w).item())
    return total
