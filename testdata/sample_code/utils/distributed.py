"""Process-group set-up from the launcher's environment (torchrun or any launcher that sets the same
variables), and collectives that degrade to no-ops in a plain single-process run."""
from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Sequence

import torch
import torch.distributed as dist

from config import ConfigError

_REQUIRED = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    # False in a plain `python main.py` run: there is no process group and no DDP wrapper.
    has_group: bool

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _env_int(name: str, default: int | None = None) -> int:
    text = os.environ.get(name)
    if text is None:
        if default is None:
            raise ConfigError(f"environment variable {name} is not set")
        return default
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"environment variable {name}={text!r} is not an integer") from None


def _device(kind: str, local_rank: int) -> torch.device:
    if kind == "cuda":
        # One GPU per rank on each node, picked by the node-local rank.
        index = local_rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def init_distributed(device_kind: str, timeout_s: float = 300.0) -> DistContext:
    launched = "RANK" in os.environ or "WORLD_SIZE" in os.environ
    if not launched or (
        _env_int("WORLD_SIZE", 1) == 1 and "MASTER_ADDR" not in os.environ and "MASTER_PORT" not in os.environ
    ):
        # one process: rank 0 of 1; any other RANK says a launch that lost its other variables
        rank = _env_int("RANK", 0)
        if rank != 0:
            raise ConfigError(f"distributed launch: RANK={rank} is outside WORLD_SIZE={_env_int('WORLD_SIZE', 1)}"
                              + ("" if "WORLD_SIZE" in os.environ else " (WORLD_SIZE not set)"))
        return DistContext(0, 1, 0, _device(device_kind, 0), has_group=False)
    missing = [name for name in _REQUIRED if name not in os.environ]
    if missing:
        raise ConfigError(
            f"distributed launch: {', '.join(sorted(set(_REQUIRED) - set(missing)))} set but "
            f"{', '.join(missing)} missing"
        )
    rank, world_size = _env_int("RANK"), _env_int("WORLD_SIZE")
    if not 0 <= rank < world_size:
        raise ConfigError(f"distributed launch: RANK={rank} is outside WORLD_SIZE={world_size}")
    local_rank = _env_int("LOCAL_RANK", rank)
    device = _device(device_kind, local_rank)
    dist.init_process_group(
        "nccl" if device.type == "cuda" else "gloo",
        init_method="env://",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
    )
    return DistContext(rank, world_size, local_rank, device, has_group=True)


def all_reduce_sum(values: Sequence[float], device: torch.device) -> list[float]:
    if not (dist.is_available() and dist.is_initialized()):
        return [float(v) for v in values]
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def barrier() -> None:
    if not (dist.is_available() and dist.is_initialized()):
        return
    if dist.get_backend() == "nccl":
        # Without device_ids NCCL has to guess each rank's GPU and warns that it may hang.
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
