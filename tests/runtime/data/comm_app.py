"""torch.distributed on gloo with one rank: collectives, an async op and DDP."""
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, iterate as __sp_iterate__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "comm_app.py", ((0, "function", "sync", 10), (1, "step", "steps", 20)))
import sys

import torch
import torch.distributed as dist


def sync(t):
    if __sp_on__: __sp_enter__(0)
    try:
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
        dist.barrier()
        dist.all_reduce(t, async_op=True).wait()
    finally:
        if __sp_on__: __sp_exit__(0)


dist.init_process_group("gloo", init_method=f"file://{sys.argv[1]}", rank=0, world_size=1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
for s in __sp_iterate__(1, range(2)):
    sync(torch.ones(256))  # 1 KiB
    model(torch.randn(8, 16)).sum().backward()

calls = []


def user_hook(state, bucket):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    calls.append(state)
    return default_hooks.allreduce_hook(None, bucket)


m2 = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
m2.register_comm_hook("my-state", user_hook)  # DDP takes one hook: ours must hand over to it
m2(torch.randn(2, 4)).sum().backward()
print("user hook calls:", calls)
dist.destroy_process_group()
