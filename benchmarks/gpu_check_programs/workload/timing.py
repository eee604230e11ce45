"""GPU timing workloads: a GPU-bound loop of sleeps of known length, a CPU-bound loop, a loop
with one large allocation. Instrumented by gpu_check.py; plain Python here."""
import time

import torch

import harness as H


def sleeper(cycles):
    H.gpu_sleep(cycles)


def gpu_bound(epochs, steps, per_step, cycles, syncs):
    """Queues per_step sleeps a step and never waits for the GPU inside the loop."""
    syncs.start()
    # scaleprobe: epoch
    for e in range(epochs):
        # scaleprobe: step
        for s in range(steps):
            for k in range(per_step):
                sleeper(cycles)
    syncs.stop()
    H.synchronize()  # inside this function: its time covers all the GPU work of the epochs


def cpu_bound(steps, seconds, x):
    """The CPU sleeps; the GPU runs one tiny kernel a step and idles."""
    # scaleprobe: step
    for s in range(steps):
        time.sleep(seconds)
        x.add_(1)
    H.synchronize()


def memory(steps, big_bytes, small_bytes):
    """The first step allocates big_bytes, the others small_bytes; all freed within the step."""
    # scaleprobe: step
    for s in range(steps):
        n = big_bytes if s == 0 else small_bytes
        t = torch.empty(n // 4, dtype=torch.float32, device=H.DEVICE)
        t.fill_(1.0)
        del t
    H.synchronize()
